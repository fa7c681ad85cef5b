#include "read/shard_set.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/reader_error.h"
#include "read/executor.h"
#include "read/ordinal_runs.h"
#include "read/readahead.h"
#include "sources/local_source.h"

namespace sdsl {

ShardSet::ShardSet(ShardNames names, Verify verify, size_t max_open_files, LocalObjectRules rules)
    : ShardSet(std::make_unique<LocalSource>(std::move(names), max_open_files, std::move(rules)),
               verify) {}

ShardSet::ShardSet(std::unique_ptr<ShardSource> source, Verify verify, DeclaredSizes declared_sizes)
    : source_(std::move(source)), verify_(verify), shards_(*source_, declared_sizes) {}

void ShardSet::Read(const int64_t* files, const int64_t* shard_records, const int64_t* ordinals,
                    size_t count, const BatchLayout& layout, int threads, uint8_t* needs_fallback) {
  // The wall time is counted whether the read succeeds or not, as its threads' time is.
  struct Wall {
    StageTotals& totals;
    uint64_t started;
    ~Wall() { totals.AddWall(StageTicks() - started); }
  } wall{stages_, StageTicks()};
  const uint32_t sampling = stage_sampling();
  StageClock planning;
  if (sampling > 0) planning.Start(Stage::kPlan);
  std::memset(needs_fallback, 0, count);
  const Batch batch{files,   shard_records, ordinals, count,
                    &layout, verify_,       threads,  needs_fallback};
  const BatchPlan plan = PlanBatch(batch, shards_, workers_);
  for (size_t row : plan.unsupported_rows) needs_fallback[row] = 1;
  // Runs of one shard are consecutive: each shard's identity is looked at
  // once a batch, before any thread trusts its marks.
  if (UsesMarks(verify_, layout.window.active())) {
    const OpenShard* renewed = nullptr;
    for (const Run& run : plan.runs) {
      if (run.shard != renewed) RenewMarks(*run.shard, verify_, layout.window.active());
      renewed = run.shard;
    }
  }
  if (sampling > 0) {
    planning.Charge();
    stages_.Add(planning.times());
  }
  if (ExecuteRuns(plan.runs, batch, *source_, scratch_, workers_, work_per_helper_,
                  sampling > 0 ? &stages_ : nullptr, sampling) > 0) {
    helped_batches_.fetch_add(1, std::memory_order_relaxed);
  }
}

void ShardSet::KeepRuns(const OrdinalRuns& runs) {
  // The last entry only closes the last run: its file is read for no ordinal.
  for (size_t run = 0; run + 1 < runs.size; ++run) {
    const int64_t file = runs.files[run];
    if (file < 0 || static_cast<uint64_t>(file) >= num_files()) {
      Fail(ErrorKind::kArgument, "the shard table names shard number " + std::to_string(file) +
                                     " of " + std::to_string(num_files()));
    }
  }
  runs_ = runs;
}

void ShardSet::ReadOrdinals(const int64_t* ordinals, size_t count, const BatchLayout& layout,
                            int threads, uint8_t* needs_fallback) {
  std::vector<int64_t> files(count), records(count);
  LocateOrdinals(runs_, ordinals, count, files.data(), records.data());
  Read(files.data(), records.data(), ordinals, count, layout, threads, needs_fallback);
}

RecordProbe ShardSet::Probe(size_t file, uint64_t shard_record, int64_t ordinal) {
  const std::shared_ptr<const OpenShard> shard = shards_.Open(file);
  RenewMarks(*shard, verify_, false);
  return ProbeRecord(*shard, shard_record, ordinal, verify_, &scratch_);
}

void ShardSet::RenewMarks(const OpenShard& shard, Verify mode, bool windows) {
  if (UsesMarks(mode, windows)) shard.verified.Renew(source_->Identity(shard.file->number()));
}

ShardSet::~ShardSet() { stopping_ = true; }

bool ShardSet::Announce(std::vector<int64_t> files, std::vector<int64_t> shard_records) {
  if (files.size() != shard_records.size() || files.empty()) return false;
  try {
    return announcements_.Post(
        [this, files = std::move(files), shard_records = std::move(shard_records)]() {
          if (stopping_) return;
          // Errors are dropped: the read that needs these records reports them.
          try {
            std::vector<size_t> shards;
            for (const int64_t file : files) {
              if (file >= 0 && static_cast<size_t>(file) < num_files()) {
                shards.push_back(static_cast<size_t>(file));
              }
            }
            std::sort(shards.begin(), shards.end());
            shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
            source_->OpenShards(shards);
          } catch (...) {
          }
          if (stopping_) return;
          try {
            HintRecords(*this, files.data(), shard_records.data(), files.size());
          } catch (...) {
          }
        });
  } catch (...) {
    return false;
  }
}

bool ShardSet::WaitForAnnouncements(double seconds) {
  return announcements_.WaitForEarlier(TaskThread::DeadlineAfter(seconds));
}

}  // namespace sdsl
