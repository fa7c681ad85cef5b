#include "simple_chunk.h"

#include <string>

#include "byte_io.h"
#include "codecs.h"
#include "reader_error.h"

namespace sdsl {
namespace {

// Reads a varint at `offset` of `pieces`; returns its encoded length.
size_t VarintAt(const Pieces& pieces, uint64_t offset, uint64_t* value, const char* what) {
  uint8_t bytes[10];
  const uint64_t available = pieces.total > offset ? pieces.total - offset : 0;
  const size_t n = static_cast<size_t>(available < 10 ? available : 10);
  CopyFromPieces(pieces, offset, n, bytes);
  const uint8_t* cursor = bytes;
  if (!ReadVarint64(&cursor, bytes + n, value)) Corrupt(std::string("malformed ") + what);
  return static_cast<size_t>(cursor - bytes);
}

}  // namespace

void ParseSimpleChunk(const Chunk& chunk, uint64_t max_decoded_size, std::vector<uint8_t>* scratch,
                      SimpleChunk* out) {
  const ChunkHeader& header = chunk.header;
  const Pieces& data = chunk.data;
  if (header.decoded_data_size > max_decoded_size) {
    Corrupt("chunk claims " + std::to_string(header.decoded_data_size) +
            " decoded bytes, over the limit of " + std::to_string(max_decoded_size));
  }
  // num_records needs no check of its own here: Riegeli pads a chunk to at
  // least one byte per record, and ReadChunk has bounded that extent.
  if (data.total < 1) Corrupt("simple chunk has no compression byte");
  uint8_t compression;
  CopyFromPieces(data, 0, 1, &compression);
  if (!IsKnownCompression(compression)) {
    Corrupt("chunk uses unknown compression type " + std::to_string(compression));
  }
  out->compression = compression;
  uint64_t sizes_size;
  uint64_t cursor = 1 + VarintAt(data, 1, &sizes_size, "record sizes length");
  if (sizes_size > data.total - cursor) Corrupt("record sizes run past the chunk");

  // The sizes buffer: num_records varints, compressed like the values.
  Pieces sizes_pieces;
  SliceOfPieces(data, cursor, sizes_size, &sizes_pieces);
  cursor += sizes_size;
  std::vector<uint8_t> compressed_sizes(static_cast<size_t>(sizes_size));
  CopyFromPieces(sizes_pieces, 0, sizes_size, compressed_sizes.data());
  const uint8_t* sizes_begin = compressed_sizes.data();
  const uint8_t* sizes_end = sizes_begin + compressed_sizes.size();
  if (compression != kNoCompression) {
    uint64_t decoded_sizes_size;
    const uint8_t* p = sizes_begin;
    if (!ReadVarint64(&p, sizes_end, &decoded_sizes_size)) Corrupt("malformed record sizes");
    if (decoded_sizes_size > 10 * header.num_records || decoded_sizes_size < header.num_records) {
      Corrupt("record sizes claim " + std::to_string(decoded_sizes_size) + " bytes for " +
              std::to_string(header.num_records) + " records");
    }
    scratch->resize(static_cast<size_t>(decoded_sizes_size));
    DecompressExact(compression, p, static_cast<size_t>(sizes_end - p), scratch->data(),
                    scratch->size(), "record sizes");
    sizes_begin = scratch->data();
    sizes_end = sizes_begin + scratch->size();
  }
  // Every record's size takes at least one byte: a count the sizes cannot
  // hold is refused before anything is allocated for it.
  if (header.num_records > static_cast<uint64_t>(sizes_end - sizes_begin)) {
    Corrupt("chunk claims " + std::to_string(header.num_records) + " records but holds " +
            std::to_string(sizes_end - sizes_begin) + " bytes of record sizes");
  }
  out->sizes.resize(static_cast<size_t>(header.num_records));
  out->offsets.resize(static_cast<size_t>(header.num_records));
  uint64_t total = 0;
  for (uint64_t i = 0; i < header.num_records; ++i) {
    uint64_t size;
    if (!ReadVarint64(&sizes_begin, sizes_end, &size)) Corrupt("record sizes are truncated");
    out->offsets[i] = total;
    out->sizes[i] = size;
    if (!CheckedAdd(total, size, &total)) Corrupt("record sizes overflow");
  }
  if (sizes_begin != sizes_end) Corrupt("record sizes have trailing bytes");
  if (total != header.decoded_data_size) {
    Corrupt("record sizes add up to " + std::to_string(total) + " bytes, not the " +
            std::to_string(header.decoded_data_size) + " the chunk header declares");
  }
  out->decoded_size = total;

  uint64_t values_size = data.total - cursor;
  if (compression != kNoCompression) {
    uint64_t declared;
    const size_t prefix = VarintAt(data, cursor, &declared, "values length");
    if (declared != total) {
      Corrupt("compressed values declare " + std::to_string(declared) +
              " bytes where the record sizes add up to " + std::to_string(total));
    }
    cursor += prefix;
    values_size -= prefix;
  } else if (values_size != total) {
    Corrupt("uncompressed values hold " + std::to_string(values_size) +
            " bytes where the record sizes add up to " + std::to_string(total));
  }
  SliceOfPieces(data, cursor, values_size, &out->values);
}

}  // namespace sdsl
