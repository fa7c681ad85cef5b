#include "container/riegeli_chunk.h"

#include <algorithm>
#include <string>

#include "base/byte_io.h"
#include "base/reader_error.h"
#include "container/riegeli_hash.h"

namespace sdsl {
namespace {

std::string At(uint64_t pos) { return "chunk at offset " + std::to_string(pos); }

// `pieces` is working space, whatever it held.
ChunkHeader ParseHeader(const FileRange& range, uint64_t begin, uint64_t* data_begin,
                        Pieces* work) {
  Pieces& pieces = *work;
  LogicalRange(range, begin, kChunkHeaderSize, /*verify=*/true, "chunk header", &pieces,
               data_begin);
  uint8_t bytes[kChunkHeaderSize];
  CopyFromPieces(pieces, 0, kChunkHeaderSize, bytes);
  if (RiegeliHash(bytes + 8, kChunkHeaderSize - 8) != LoadLE64(bytes)) {
    Corrupt(At(begin) + " has a header that fails its hash check");
  }
  ChunkHeader header;
  header.data_size = LoadLE64(bytes + 8);
  header.data_hash = LoadLE64(bytes + 16);
  const uint64_t type_and_count = LoadLE64(bytes + 24);
  header.type = static_cast<uint8_t>(type_and_count & 0xff);
  header.num_records = type_and_count >> 8;
  header.decoded_data_size = LoadLE64(bytes + 32);
  return header;
}

}  // namespace

ChunkHeader ReadChunkHeader(const FileRange& range, uint64_t begin) {
  uint64_t data_begin;
  Pieces work;
  return ParseHeader(range, begin, &data_begin, &work);
}

void ReadChunk(const FileRange& range, uint64_t begin, uint64_t limit, bool verify_data,
               Chunk* chunk) {
  const uint64_t data_begin = ReadChunkFrame(range, begin, limit, chunk);
  CheckBlockHeaders(begin, chunk->end, [&range](uint64_t block) -> const uint8_t* {
    if (block < range.begin || block + kBlockHeaderSize > range.end()) return nullptr;
    return BlockHeaderAt(range, block);
  });
  uint64_t next;
  LogicalRange(range, data_begin, chunk->header.data_size, verify_data, "chunk data", &chunk->data,
               &next);
  if (verify_data) CheckChunkDataHash(*chunk);
}

void CheckChunkDataHash(const Chunk& chunk) { CheckChunkDataHash(chunk, RiegeliHash(chunk.data)); }

void CheckChunkDataHash(const Chunk& chunk, uint64_t data_hash) {
  if (data_hash != chunk.header.data_hash) {
    Corrupt(At(chunk.begin) + " has data that fails its hash check");
  }
}

void CheckBlockHeader(uint64_t begin, uint64_t end, uint64_t block, const uint8_t* header) {
  if (header == nullptr) Corrupt(At(begin) + " runs past the end of the shard (truncated file?)");
  const uint64_t previous = LoadLE64(header + 8), next = LoadLE64(header + 16);
  if (previous != block - begin || next != end - block) {
    Corrupt("block header at offset " + std::to_string(block) + " places its chunk at [" +
            std::to_string(block - std::min(previous, block)) + ", " +
            std::to_string(block + std::min(next, UINT64_MAX - block)) + "), not the " + At(begin) +
            " ending at " + std::to_string(end));
  }
}

uint64_t ChunkEnd(uint64_t begin, uint64_t limit, const ChunkHeader& header) {
  // The sizes are hashed, but a header hash is only 64 bits of assurance and
  // the sizes decide how far we read: bound them by the room the chunk has.
  uint64_t header_and_data, data_end;
  if (!CheckedAdd(kChunkHeaderSize, header.data_size, &header_and_data) ||
      !AddWithOverhead(begin, header_and_data, &data_end) || data_end > limit) {
    Corrupt(At(begin) + " declares " + std::to_string(header.data_size) +
            " data bytes, more than fit before offset " + std::to_string(limit));
  }
  uint64_t record_end;
  if (!CheckedAdd(begin, header.num_records, &record_end)) {
    Corrupt(At(begin) + " declares an impossible record count");
  }
  const uint64_t end = std::max(data_end, RoundUpToPossibleChunkBoundary(record_end));
  if (end > limit) {
    Corrupt(At(begin) + " declares " + std::to_string(header.num_records) +
            " records, more than fit before offset " + std::to_string(limit));
  }
  return end;
}

uint64_t ReadChunkFrame(const FileRange& range, uint64_t begin, uint64_t limit, Chunk* chunk) {
  chunk->begin = begin;
  uint64_t data_begin;
  // The chunk's own pieces serve as the header's working space (a chunk
  // held in scratch then allocates none), and are emptied after.
  chunk->header = ParseHeader(range, begin, &data_begin, &chunk->data);
  chunk->data.Clear();
  chunk->end = ChunkEnd(begin, limit, chunk->header);
  return data_begin;
}

}  // namespace sdsl
