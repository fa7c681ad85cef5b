// Claims and locks between the processes sharing a node cache.
//
// A claim is a file in an object's directory, named for the range some
// process is fetching (cache_entry.h), which its fetcher holds a lock on:
// a claim whose process died is seen as free at once. Claims are made and
// let go under the object's lock, so that a process listing the directory
// under that lock sees each range either claimed or placed.
//
// A claim of this process is judged by this process's own table, not by
// its lock: NFS's flock is per process, so a lock cannot tell this
// process's live claim from a dead one.
#ifndef SDS_LOADER_SOURCES_CACHE_CLAIMS_H_
#define SDS_LOADER_SOURCES_CACHE_CLAIMS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "sources/cache_files.h"

namespace sdsl {

struct CacheClaim {
  SharedDir dir;
  std::string name;
  int fd = -1;
};

class CacheClaims {
 public:
  explicit CacheClaims(TrackedFds* fds);

  // What this instance's temporary files and claims are named with:
  // "PID-INSTANCE-N", unique in the process and between processes.
  std::string UniqueSuffix();

  // The object's lock, held while this lives (`key` keeps this process's
  // threads apart, the file lock other processes).
  class ObjectLock {
   public:
    ObjectLock(CacheClaims* claims, const SharedDir& dir, uint64_t key);
    ~ObjectLock();
    bool ok() const { return fd_ >= 0; }

   private:
    CacheClaims* claims_;
    std::unique_lock<std::mutex> threads_;
    int fd_ = -1;
  };

  // Claims [offset, offset + size) for this process (under the object's lock).
  bool Make(const SharedDir& dir, uint64_t offset, uint64_t size, CacheClaim* claim);
  // Lets go of a claim: removed (under the object's lock), then unlocked.
  void Release(const CacheClaim& claim, uint64_t key);

  // Whether the claim `name` in `dir` is held by a live fetcher; a claim
  // of a process that died is removed. `watch`: a descriptor to pass to
  // Held later (-1 for this process's own claims).
  bool Alive(const SharedDir& dir, const std::string& name, int* watch);
  // Whether the claim watched is still held.
  bool Held(const std::string& name, int watch);
  void StopWatching(int watch) { fds_->Close(watch); }

  // The lock a process holds while it opens the object at a URL (its
  // directory `dir`, `key` the URL's hash); -1 when another holds it
  // (`wait`: until it lets go or `deadline`).
  int LockUrl(const SharedDir& dir, uint64_t key, bool wait,
              std::chrono::steady_clock::time_point deadline);
  void UnlockUrl(int fd, uint64_t key);

  // The child's table starts empty: the parent's claims stay the parent's.
  static void ResetInChild();

 private:
  TrackedFds* const fds_;
  const uint64_t instance_;
  std::atomic<uint64_t> serial_{0};
};

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_CACHE_CLAIMS_H_
