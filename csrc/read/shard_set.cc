#include "read/shard_set.h"

#include <algorithm>
#include <cstring>

#include "read/executor.h"
#include "read/run_decoder.h"
#include "read/window_read.h"
#include "sources/local_source.h"
#include "sources/readahead.h"

namespace sdsl {

ShardSet::ShardSet(ShardNames names, Verify verify, size_t max_open_files, LocalObjectRules rules)
    : ShardSet(std::make_unique<LocalSource>(std::move(names), max_open_files, std::move(rules)),
               verify) {}

ShardSet::ShardSet(std::unique_ptr<ShardSource> source, Verify verify,
                   std::vector<int64_t> declared_sizes)
    : source_(std::move(source)), verify_(verify), shards_(*source_, std::move(declared_sizes)) {}

void ShardSet::Read(const int64_t* files, const int64_t* shard_records, const int64_t* ordinals,
                    size_t count, const BatchLayout& layout, int threads, uint8_t* needs_fallback) {
  std::memset(needs_fallback, 0, count);
  // The threads plan a large batch piece by piece, several pieces each, so
  // that one slower to start or to reach memory (its cache holds none of the
  // rows the caller has just sorted) takes fewer; a small one is planned here.
  const size_t pieces = threads < 2
                            ? 1
                            : std::min<size_t>(kPlanPiecesPerThread * static_cast<size_t>(threads),
                                               count / kRowsPerPlanPiece);
  const PieceRunner run_pieces = [this, threads](size_t planned,
                                                 const std::function<void(size_t)>& plan_piece) {
    std::atomic<size_t> next{0};
    const size_t helpers = std::min<size_t>(planned, static_cast<size_t>(threads)) - 1;
    workers_.Run(helpers, [&]() {
      for (size_t piece = next++; piece < planned; piece = next++) plan_piece(piece);
    });
  };
  const BatchPlan plan = PlanBatch(
      files, shard_records, ordinals, count, [this](size_t file) { return &shards_.Kept(file); },
      layout.window.starts, run_pieces, pieces);
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
  RunWork work;
  work.decode = [&](const Run& run, const FileRange* fetched, WorkerScratch* scratch) {
    DecodeRun(run, fetched, layout, ordinals, verify_, needs_fallback, scratch);
  };
  // Reading a chunk straight into rows takes two reads of it, one after the
  // other: cheap from local files in the page cache; from a disk, or from
  // anywhere else, the chunk is better fetched with the batch's other runs,
  // many reads in flight, and its tensors copied from there.
  const bool local = dynamic_cast<const LocalSource*>(source_.get()) != nullptr;
  work.reads_itself = [&, local](const Run& run, const WorkerScratch&, bool gathering) {
    return ReadsWindowsOnly(run, layout, verify_) || (local && !gathering && run.into_rows);
  };
  work.fetch_failed = [&](const Run& run, const ReaderError& error) {
    RethrowForRecord(run, run.chunks.front().records.front(), ordinals, error);
  };
  work.work_per_helper = work_per_helper_;
  work.split_block_headers = local;
  if (ExecuteRuns(plan.runs, threads, *source_, &scratch_, &workers_, work) > 0) {
    helped_batches_.fetch_add(1, std::memory_order_relaxed);
  }
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
