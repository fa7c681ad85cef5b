// Shards in local files. A batch whose shards are in the page cache is
// copied out of a mapping of each shard (no system call per read, no page
// cache lookup per page once its pages are mapped); any other read uses
// pread, so that threads share one descriptor without sharing a file
// position. At most max_open_files shards stay open; the least recently used
// is closed first, once no read still holds it.
#ifndef SDS_LOADER_LOCAL_SOURCE_H_
#define SDS_LOADER_LOCAL_SOURCE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/fork_guard.h"
#include "base/recent_map.h"
#include "base/task_thread.h"
#include "base/worker_pool.h"
#include "sources/local_object.h"
#include "sources/shard_names.h"
#include "sources/shard_source.h"

namespace sdsl {

class LocalSource : public ShardSource, public ForkGuarded {
 public:
  // Announcements waiting for the hint thread; past this they are dropped.
  static constexpr size_t kPendingHints = 64;

  // `rules` say how each path may be opened (every open, reopens after
  // the open-file budget closed one included).
  LocalSource(ShardNames names, size_t max_open_files, LocalObjectRules rules = {});
  LocalSource(std::vector<std::string> paths, size_t max_open_files)
      : LocalSource(ShardNames(std::move(paths)), max_open_files) {}

  size_t num_files() const override { return names_.size(); }
  uint64_t Size(size_t file) override;
  std::string Name(size_t file) const override { return names_[file]; }
  // One fstat of the shard's descriptor (opening it if the open-file budget
  // closed it): a file replaced under its path is seen once it is reopened,
  // one rewritten in place by its size or modification time.
  uint64_t Identity(size_t file) override;
  bool ReadsLocalFiles() const override { return true; }
  size_t HeldBytes() const override {
    // The declared sizes are borrowed (LocalObjectRules), not held.
    return names_.HeldBytes() + open_.HeldBytes();
  }
  // Ranges that are not back to back are read at once on the source's IO
  // threads, up to 16 reads in flight per call besides the caller's.
  // A warm plan copies out of each shard's mapping; any other, preadv.
  using ShardSource::Fetch;
  void Fetch(RangeRequest* requests, size_t count, const FetchPlan& plan) override;
  // From a mapping: each hashed piece is hashed and copied in one pass.
  void FetchHashing(RangeRequest* requests, size_t count, const FetchPlan& plan,
                    const uint8_t* hashed, ChunkHasher* hasher) override;
  // Warm while the batch's shards are in the page cache (a few ranges,
  // sampled with non-blocking one-byte reads): no gathering, and copies out
  // of the mappings when SIGBUS is ours to catch. Cold: a few MiB per decode
  // thread, so that a cold batch has many more reads in flight than there
  // are decode threads and each thread decodes while others wait.
  FetchPlan PlanBatch(const RangeRequest* ranges, size_t count) override;
  // posix_fadvise(WILLNEED) on the source's hint thread: the caller returns
  // at once, and the kernel's page allocation and queueing of the reads
  // overlap the caller's decoding.
  void WillNeed(const RangeRequest* ranges, size_t count) override;

  ~LocalSource() override { StopGuarding(); }

  // Cached entries stay valid in a forked child (descriptors are inherited
  // and pread keeps no file position); only the lock must be free.
  void LockForFork() override { open_.Lock(); }
  void UnlockInParent() override { open_.Unlock(); }
  void ResetInChild() override { open_.Unlock(); }

 private:
  struct OpenFile;
  std::shared_ptr<const OpenFile> Open(size_t file);

  const ShardNames names_;
  const LocalObjectRules rules_;
  const LocalObjects objects_;  // after rules_, whose root it opens
  RecentMap<OpenFile> open_;
  WorkerPool io_;  // started on the first cold batch
  // Last, so that it stops (running what is queued) before the rest goes.
  TaskThread hints_{kPendingHints};
};

}  // namespace sdsl

#endif  // SDS_LOADER_LOCAL_SOURCE_H_
