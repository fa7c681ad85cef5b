#include "shard_set.h"

#include <cstring>

#include "executor.h"
#include "run_decoder.h"

namespace sdsl {

ShardSet::ShardSet(std::vector<std::string> paths, bool verify_checksums, size_t max_open_files)
    : verify_(verify_checksums), shards_(std::move(paths), max_open_files) {}

void ShardSet::Read(const int64_t* files, const int64_t* shard_records, const int64_t* ordinals,
                    size_t count, const BatchLayout& layout, int threads,
                    uint8_t* needs_fallback) {
  std::memset(needs_fallback, 0, count);
  const BatchPlan plan = PlanBatch(files, shard_records, ordinals, count,
                                   [this](size_t file) { return shards_.Open(file); });
  for (size_t row : plan.unsupported_rows) needs_fallback[row] = 1;
  ExecuteRuns(plan.runs.size(), threads, &scratch_, [&](size_t r, WorkerScratch* scratch) {
    DecodeRun(plan.runs[r], layout, ordinals, verify_, needs_fallback, scratch);
  });
}

RecordProbe ShardSet::Probe(size_t file, uint64_t shard_record, int64_t ordinal) {
  return ProbeRecord(*shards_.Open(file), shard_record, ordinal, verify_, &scratch_);
}

}  // namespace sdsl
