// A bounded cache of open shards and their parsed footers, so that each shard
// is opened and its index read once, not per batch.
#ifndef SDS_LOADER_SHARD_CACHE_H_
#define SDS_LOADER_SHARD_CACHE_H_

#include <cstddef>
#include <memory>

#include "batch_plan.h"
#include "fork_guard.h"
#include "recent_map.h"
#include "shard_source.h"

namespace sdsl {

class ShardCache : public ForkGuarded {
 public:
  // `source` must outlive the cache.
  ShardCache(ShardSource& source, size_t max_open_shards);

  size_t num_files() const { return source_.num_files(); }
  // The open shard `file`, reading its footer on a miss. The least recently
  // used shard is dropped past max_open_shards; a reader still holding it
  // keeps it until it finishes.
  std::shared_ptr<const OpenShard> Open(size_t file);

  ~ShardCache() override { StopGuarding(); }

  // Cached entries stay valid in a forked child (descriptors are inherited
  // and pread keeps no file position); only the lock must be free.
  void LockForFork() override { open_.Lock(); }
  void UnlockInParent() override { open_.Unlock(); }
  void ResetInChild() override { open_.Unlock(); }

 private:
  ShardSource& source_;
  RecentMap<OpenShard> open_;  // its lock is never held while a footer is read
};

}  // namespace sdsl

#endif  // SDS_LOADER_SHARD_CACHE_H_
