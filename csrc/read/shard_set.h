// The reader's core for one dataset: a batch of records planned into runs,
// the runs decoded on a few threads into the batch's rows.
#ifndef SDS_LOADER_SHARD_SET_H_
#define SDS_LOADER_SHARD_SET_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/stage_clock.h"
#include "base/task_thread.h"
#include "base/worker_pool.h"
#include "read/batch_plan.h"
#include "read/executor.h"
#include "read/ordinal_runs.h"
#include "read/record_decoder.h"
#include "read/record_probe.h"
#include "read/scratch_pool.h"
#include "read/shard_cache.h"
#include "sources/local_object.h"
#include "sources/shard_names.h"
#include "sources/shard_source.h"

namespace sdsl {

class ShardSet {
 public:
  // Announcements waiting for the set's announcement thread; past this they
  // are dropped, as a hint that arrives too late is worth nothing.
  static constexpr size_t kPendingAnnouncements = 16;

  // Shards in local files, opened as `rules` say (sizes included: the
  // source checks them on every open).
  ShardSet(ShardNames names, Verify verify, size_t max_open_files, LocalObjectRules rules = {});
  // Shards wherever `source` finds them; a shard whose size differs from
  // its entry of `declared_sizes` (see ShardCache) is refused.
  ShardSet(std::unique_ptr<ShardSource> source, Verify verify, DeclaredSizes declared_sizes = {});

  // Runs of a batch timed stage by stage, one in this many (see ExecuteRuns):
  // the default of sds_loader.stage_times.DEFAULT_SAMPLING too.
  static constexpr uint32_t kDefaultStageSampling = 4;

  // Reads one batch into `layout`'s rows. Rows whose shard this core cannot
  // decode get needs_fallback[row] = 1 and are left untouched.
  void Read(const int64_t* files, const int64_t* shard_records, const int64_t* ordinals,
            size_t count, const BatchLayout& layout, int threads, uint8_t* needs_fallback);

  // Borrows the dataset's shard table (OrdinalRuns' three columns, `starts`
  // closed by the dataset's length), so that a batch can be given by its
  // ordinals alone. The columns are not copied: whoever passes them keeps
  // them as long as the set lives (the binding keeps the arrays alive with
  // the set), since a copy would hold a dataset's table twice in every set
  // of every process, 24 bytes a shard each. A run naming a file past
  // num_files() fails (kArgument); columns changed afterwards locate
  // ordinals wrongly, never outside them, and a file number they name is
  // checked again as each batch is planned.
  void KeepRuns(const OrdinalRuns& runs);
  // Reads a batch of ordinals as Read does, each located in the runs
  // KeepRuns kept: for local shards the caller need not locate them first,
  // which cost a small batch a round trip. An ordinal outside the runs, or
  // a set that kept none, fails (kIndex).
  void ReadOrdinals(const int64_t* ordinals, size_t count, const BatchLayout& layout, int threads,
                    uint8_t* needs_fallback);

  RecordProbe Probe(size_t file, uint64_t shard_record, int64_t ordinal);

  // How this reader checks hashes (a per-call mode, for record_bytes, may differ).
  Verify verify() const { return verify_; }
  // Renews the verified marks of shard `file` against its identity now,
  // before a read in `mode` trusts them (see VerifiedChunks::Renew).
  void RenewMarks(const OpenShard& shard, Verify mode, bool windows);

  // Announces records a later read will need: on a thread of the set's own,
  // their shards are opened together and the chunks that hold them hinted to
  // the source (HintRecords), so that the caller never waits on the network
  // for a hint. Returns at once and never throws; false when the queue of
  // announcements is full and this one was dropped.
  bool Announce(std::vector<int64_t> files, std::vector<int64_t> shard_records);
  // Whether every announcement queued so far was carried out within `seconds`.
  bool WaitForAnnouncements(double seconds);

  ~ShardSet();

  // The stage times of the reads since the last call, summed over their
  // threads, and in `wall` the reads' own time (summed over the calls).
  StageTimes TakeStageTimes(uint64_t* wall) { return stages_.Take(wall); }
  // One run in this many is timed stage by stage; 0 times nothing.
  uint32_t stage_sampling() const { return stage_sampling_.load(std::memory_order_relaxed); }
  void set_stage_sampling(uint32_t every) {
    stage_sampling_.store(every, std::memory_order_relaxed);
  }

  size_t num_files() const { return shards_.num_files(); }
  // Decode threads started by this reader in this process (the caller's not
  // counted): they persist between reads.
  size_t worker_threads() const { return workers_.threads(); }
  // Bytes of buffers idle scratch keeps between reads.
  size_t kept_scratch_bytes() const { return scratch_.kept_bytes(); }
  // Work (uncompressed bytes) a warm batch needs per helper thread it wakes.
  uint64_t work_per_helper() const { return work_per_helper_; }
  void set_work_per_helper(uint64_t bytes) { work_per_helper_ = bytes; }
  // Batches in which a helper thread decoded at least one run: what tells a
  // multi-threaded read from one whose helpers were asked for but not used.
  uint64_t helped_batches() const { return helped_batches_.load(std::memory_order_relaxed); }
  std::shared_ptr<const OpenShard> Open(size_t file) { return shards_.Open(file); }
  ShardSource& source() { return *source_; }
  // Shards whose index this reader keeps, and the bytes those indexes hold.
  size_t shards_indexed() const { return shards_.Touched(); }
  size_t index_bytes() const { return shards_.HeldBytes(); }
  size_t footer_reads() const { return shards_.FooterReads(); }
  // Bytes kept for every shard, touched or not: names, the open files' and
  // the cache's slots (and the indexes of those touched). The declared sizes
  // and the shard table are borrowed, not held.
  size_t held_bytes() const { return shards_.HeldBytes() + source_->HeldBytes(); }
  // The cap on a chunk or record this reader holds whole (kMaxMaterializedBytes by default).
  uint64_t max_chunk_bytes() const { return scratch_.max_materialized(); }
  void set_max_chunk_bytes(uint64_t bytes) { scratch_.set_max_materialized(bytes); }

 private:
  const std::unique_ptr<ShardSource> source_;
  const Verify verify_;
  ShardCache shards_;
  ScratchPool scratch_;
  WorkerPool workers_;
  uint64_t work_per_helper_ = kDefaultWorkPerHelper;
  std::atomic<uint64_t> helped_batches_{0};
  StageTotals stages_;
  // The shard table's columns, as KeepRuns was given them (borrowed).
  OrdinalRuns runs_;
  std::atomic<uint32_t> stage_sampling_{kDefaultStageSampling};
  // Set when the set is destroyed: announcements still queued are dropped.
  std::atomic<bool> stopping_{false};
  // Last: destroyed first, so that no announcement outlives what it uses.
  TaskThread announcements_{kPendingAnnouncements};
};

}  // namespace sdsl

#endif  // SDS_LOADER_SHARD_SET_H_
