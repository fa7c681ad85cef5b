// Every shard a process has touched, with its parsed footer, so that each
// shard's footer and index are read once, however many shards the dataset
// has. What stays open is the source's concern (a bounded set of open files
// and mappings, for local files): a shard is only a handle and its index,
// a few bytes a record (HeldBytes).
#ifndef SDS_LOADER_SHARD_CACHE_H_
#define SDS_LOADER_SHARD_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/fork_guard.h"
#include "container/array_record_index.h"
#include "read/verified_chunks.h"
#include "sources/local_object.h"
#include "sources/shard_file.h"
#include "sources/shard_source.h"

namespace sdsl {

// One shard as the cache keeps it: its handle, its footer's index, and the
// chunks this process has verified.
struct OpenShard {
  std::unique_ptr<ShardFile> file;
  ShardIndex index;
  VerifiedChunks verified;  // sized to the index's chunks when opened
};

class ShardCache : public ForkGuarded {
 public:
  // `source` must outlive the cache, and `declared_sizes` (borrowed; per
  // shard, or kSizeNotDeclared; empty: none) too: what the manifests say
  // each shard holds. A shard of another size is refused before its footer
  // is read.
  explicit ShardCache(ShardSource& source, DeclaredSizes declared_sizes = {});

  size_t num_files() const { return source_.num_files(); }
  // Shard `file`, reading its footer the first time.
  std::shared_ptr<const OpenShard> Open(size_t file);
  // The same shard, which the cache keeps as long as it lives; no count of
  // owners changes (a batch looks up shard after shard, from every thread).
  const OpenShard& Kept(size_t file);
  // Shards touched, and the bytes their indexes and marks hold.
  size_t Touched() const;
  // Footers read: once per shard touched, unless two threads missed at once.
  size_t FooterReads() const { return footer_reads_.load(std::memory_order_relaxed); }
  size_t HeldBytes() const;

  ~ShardCache() override { StopGuarding(); }

  // Cached entries stay valid in a forked child (descriptors are inherited
  // and pread keeps no file position); only the lock must be free.
  void LockForFork() override { mutex_.lock(); }
  void UnlockInParent() override { mutex_.unlock(); }
  void ResetInChild() override { mutex_.unlock(); }

 private:
  ShardSource& source_;
  const DeclaredSizes declared_sizes_;                    // borrowed
  mutable std::mutex mutex_;                              // never held while a footer is read
  std::vector<std::shared_ptr<const OpenShard>> shards_;  // by file number
  // Set, once, after shards_[file] is: from then on that entry never changes
  // and is read without the lock. Every thread planning a piece of a batch
  // looks up shard after shard; behind one mutex they queued on each other
  // and slept in the kernel a few times a batch.
  std::unique_ptr<std::atomic<bool>[]> kept_;
  std::atomic<size_t> footer_reads_{0};
};

}  // namespace sdsl

#endif  // SDS_LOADER_SHARD_CACHE_H_
