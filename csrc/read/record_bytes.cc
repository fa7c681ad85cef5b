#include "read/record_bytes.h"

#include "base/reader_error.h"
#include "container/array_record_index.h"
#include "container/simple_chunk.h"
#include "read/failed_checks.h"
#include "read/materialize.h"

namespace sdsl {

std::vector<std::optional<std::string>> ReadRecordBytes(ShardSet& set, Verify verify,
                                                        const int64_t* files,
                                                        const int64_t* shard_records,
                                                        size_t count) {
  std::vector<std::optional<std::string>> records(count);
  WorkerScratch scratch;
  scratch.max_materialized = set.max_chunk_bytes();
  // Consecutive records of one chunk (group_size above 1) decode it once.
  int64_t held_file = -1;
  uint64_t held_chunk = 0;
  bool held_decodable = false;
  const uint8_t* values = nullptr;
  SimpleChunk parsed;
  for (size_t k = 0; k < count; ++k) {
    const std::shared_ptr<const OpenShard> shard = set.Open(static_cast<size_t>(files[k]));
    const ShardIndex& index = shard->index;
    const std::string context = "shard " + shard->file->path() + ": record " +
                                std::to_string(shard_records[k]) + " of the shard";
    if (shard_records[k] < 0 || static_cast<uint64_t>(shard_records[k]) >= index.num_records) {
      Corrupt(context + " is past the " + std::to_string(index.num_records) +
              " records the shard holds; the shard is truncated or does not match its manifest");
    }
    if (index.transposed_footer) continue;
    const uint64_t record = static_cast<uint64_t>(shard_records[k]);
    try {
      const uint64_t c = index.ChunkOf(record);
      if (files[k] != held_file || c != held_chunk || values == nullptr) {
        values = nullptr;
        Chunk chunk;
        if (files[k] != held_file) set.RenewMarks(*shard, verify, false);
        const bool check = ChecksChunk(verify, shard->verified, c);
        ReadCheckedChunk(*shard->file, index, c, check, &scratch.file_bytes, &chunk);
        if (check) shard->verified.Mark(c);
        held_file = files[k];
        held_chunk = c;
        held_decodable = IsDecodableRecordChunk(chunk, index, c);
        if (held_decodable) {
          ParseSimpleChunk(chunk, scratch.max_materialized, &scratch.sizes, &parsed);
          MaterializeValues(parsed, &scratch, &values);
        }
      }
      if (!held_decodable) continue;
      const uint64_t in_chunk = record - index.FirstRecord(c);
      records[k].emplace(reinterpret_cast<const char*>(values + parsed.offsets[in_chunk]),
                         static_cast<size_t>(parsed.sizes[in_chunk]));
    } catch (const ReaderError& error) {
      throw ReaderError(error.kind(), context + ": " + error.what(), error.os_error());
    }
  }
  return records;
}

}  // namespace sdsl
