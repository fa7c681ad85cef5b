// The ArrayRecord footer: which chunk holds which records, read once per
// shard from the postscript in the last 64 KiB block and the footer chunk it
// points at.
#ifndef SDS_LOADER_ARRAY_RECORD_INDEX_H_
#define SDS_LOADER_ARRAY_RECORD_INDEX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/random_access_bytes.h"
#include "container/riegeli_chunk.h"

namespace sdsl {

struct ShardIndex {
  uint64_t file_size = 0;
  uint64_t footer_offset = 0;
  uint64_t num_records = 0;
  std::string writer_options;
  // The footer itself is transposed: this core reads no records of the shard.
  bool transposed_footer = false;
  std::vector<uint64_t> chunk_offsets;
  // Per chunk, plus a final total; empty when every chunk holds exactly one
  // record (signal_dataset's default, group_size:1), which is most shards:
  // an index is kept for every shard a process touches, so it is kept small.
  std::vector<uint64_t> first_records;
  // The smallest decoded size a chunk declares (a hint for planning).
  uint64_t min_chunk_decoded_size = 0;

  uint64_t num_chunks() const { return chunk_offsets.size(); }
  // The first record of chunk `c`; for c == num_chunks(), the record count.
  uint64_t FirstRecord(uint64_t c) const { return first_records.empty() ? c : first_records[c]; }
  // Bytes the index holds, for reporting what a shard costs to keep.
  size_t HeldBytes() const {
    return sizeof(*this) + writer_options.capacity() +
           (chunk_offsets.capacity() + first_records.capacity()) * sizeof(uint64_t);
  }
  // The writer's options asked for no compression. A hint for planning only:
  // every chunk still says how it is compressed, and one that disagrees is
  // read whole.
  bool WrittenUncompressed() const {
    return writer_options.find("uncompressed") != std::string::npos;
  }
  uint64_t ChunkOf(uint64_t record) const;
  // The first position chunk `c` may not reach.
  uint64_t ChunkLimit(uint64_t c) const {
    return c + 1 < chunk_offsets.size() ? chunk_offsets[c + 1] : footer_offset;
  }
};

// Throws a corrupt error, naming the shard file, for a broken postscript or
// footer. `signature`: the file's first 64 bytes are checked too (a store
// source checking a shard's tail before it keeps it may not hold them).
ShardIndex ReadShardIndex(const RandomAccessBytes& file, bool signature = true);

// Reads chunk `c` alone into `bytes` and checks its header (and its data hash
// when `verify`).
void ReadIndexedChunk(const RandomAccessBytes& file, const ShardIndex& index, uint64_t c,
                      bool verify, std::vector<uint8_t>* bytes, Chunk* chunk);

// Whether chunk `c`, as read, holds records this core decodes: false for a
// transposed chunk; a corrupt error for one that is not a simple chunk
// holding the record count the footer gives it.
bool IsDecodableRecordChunk(const Chunk& chunk, const ShardIndex& index, uint64_t c);

}  // namespace sdsl

#endif  // SDS_LOADER_ARRAY_RECORD_INDEX_H_
