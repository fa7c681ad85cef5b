// Room in the node cache: the usage file that every process sharing the
// cache keeps, and eviction of idle objects to make room.
//
// The usage file holds the bytes of every entry and every temporary file
// in the cache, exactly: each file that counts is created, placed or removed
// under the usage file's lock, and the usage changed in the same take. A
// reservation is its temporary file, made at its full size there, so an
// eviction listing the cache in another process counts it; nothing a
// process reserved is lost to another's recount. A process killed between
// reserving and placing leaves its temporary file behind: an eviction pass
// counts it, and removes it once its process is gone.
#ifndef SDS_LOADER_SOURCES_CACHE_ROOM_H_
#define SDS_LOADER_SOURCES_CACHE_ROOM_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <new>

#include "sources/cache_files.h"

namespace sdsl {

class CacheRoom {
 public:
  // Objects unused this long (by any process) may be evicted to make room.
  static constexpr double kIdleSeconds = 600;

  // `limit` 0: the usage now plus half the disk's free space.
  CacheRoom(TrackedFds* fds, SharedDir root, SharedDir objects, uint64_t limit, uint64_t floor);

  uint64_t limit() const { return limit_; }
  // The bytes the usage file holds now.
  uint64_t Usage();

  // Under the usage lock: when `bytes` fit (after evicting idle objects if
  // need be) and the disk keeps its floor, runs `create` (which makes the
  // file the bytes are for) and, when it succeeds, adds them to the usage.
  bool Reserve(uint64_t bytes, const std::function<bool()>& create);
  // Under the usage lock: runs `remove`, which returns the counted bytes it
  // removed, and takes those from the usage.
  void Release(const std::function<uint64_t()>& remove);
  // False when the usage file cannot be locked (the cache is then of no use).
  bool usable() const { return usable_; }

  // The mutex is the process's, shared by every cache in it (see mutex_):
  // each cache's fork guard takes it once more, and lets it go as often.
  void LockForFork() { ThreadsOfThisProcess().lock(); }
  void UnlockInParent() { ThreadsOfThisProcess().unlock(); }
  void ResetInChild();

 private:
  // Evicts idle objects, least recently used first, until `needed` bytes
  // are freed; returns the usage after it, as the listing counted it.
  uint64_t Evict(uint64_t needed, uint64_t used);

  TrackedFds* const fds_;
  const SharedDir root_;
  const SharedDir objects_;
  uint64_t limit_;
  const uint64_t floor_;
  bool usable_ = false;
  // Threads of this process one at a time, whichever cache they go through:
  // the file lock keeps processes apart, but a per-process lock (NFS's
  // flock, fcntl's) lets two readers of one process in together, and two
  // caches of one process may share one directory.
  static std::recursive_mutex& ThreadsOfThisProcess();
  // No eviction pass before this (steady clock, ns): a full cache of
  // objects in use is not listed again at every miss.
  std::atomic<int64_t> next_evict_ns_{0};
};

// Whether a temporary file named for process `pid` of age `age_s` is left
// from a process that died, so that nobody will ever place it.
bool OrphanedTemporary(int64_t pid, double age_s);

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_CACHE_ROOM_H_
