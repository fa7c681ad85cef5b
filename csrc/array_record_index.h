// The ArrayRecord footer: which chunk holds which records, read once per
// shard from the postscript in the last 64 KiB block and the footer chunk it
// points at.
#ifndef SDS_LOADER_ARRAY_RECORD_INDEX_H_
#define SDS_LOADER_ARRAY_RECORD_INDEX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "shard_file.h"

namespace sdsl {

struct ShardIndex {
  uint64_t file_size = 0;
  uint64_t footer_offset = 0;
  uint64_t num_records = 0;
  std::string writer_options;
  // The footer itself is transposed: this core reads no records of the shard.
  bool transposed_footer = false;
  std::vector<uint64_t> chunk_offsets;
  std::vector<uint64_t> chunk_decoded_sizes;
  std::vector<uint64_t> first_record;  // per chunk, plus a final total

  uint64_t num_chunks() const { return chunk_offsets.size(); }
  uint64_t ChunkOf(uint64_t record) const;
  // The first position chunk `c` may not reach.
  uint64_t ChunkLimit(uint64_t c) const {
    return c + 1 < chunk_offsets.size() ? chunk_offsets[c + 1] : footer_offset;
  }
};

// Throws a corrupt error for a broken postscript or footer.
ShardIndex ReadShardIndex(const ShardFile& file);

}  // namespace sdsl

#endif  // SDS_LOADER_ARRAY_RECORD_INDEX_H_
