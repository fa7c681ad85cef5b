// A node-local disk cache of object-store bytes, shared by every process of
// the node that is given the same directory (DataLoader workers, ranks), so
// that epochs after the first read from local disk and each byte is fetched
// once between them.
//
// What it holds: the ranges reads and readahead fetched, exactly those
// (never a whole object on first touch), each as one entry file of an
// object's directory, keyed by the object's identity (the URL it is read
// from, its version and its size): a replaced object has another identity,
// so its old bytes are never served, and its old directory is removed. An
// object whose store reports no ETag and no generation is not cached: its
// Last-Modified time cannot tell two versions written in one second apart.
//
// Layout under the directory the user names:
//   sds-loader-cache-v1/usage           bytes the entries take (cache_room.h)
//   sds-loader-cache-v1/objects/U/I/    one object: U from its URL, I from its identity
//     identity                          the identity in full; touched when in use
//     .lock                             taken while a range is claimed (cache_claims.h)
//     entries, claims, temporaries      named as cache_entry.h says
//
// Trust: every file is reached through directory descriptors, no link
// followed, only regular files opened, never blocking; a directory another
// user owns or may write turns the cache off (cache_files.h).
//
// Crash safety: an entry is written under a temporary name and placed whole;
// a claim is a file its fetcher holds a lock on, so a claim whose process
// died is seen as free at once. Every 64 KiB block of an entry carries its
// hash, checked on its first read: a damaged or torn entry is dropped and
// its bytes fetched again, never returned; damage found later by a chunk's
// own hash drops the entry too (Forget).
//
// No waits while holding: a read that claimed ranges never waits for
// another process's claim before its own are fetched (Gap::kPending).
//
// Faults never fail a read: a full disk or any other error while writing
// turns caching off for this process, with the reason in warning(); reads
// then go to the store. A directory that cannot be written at all (mounted
// read-only, or not writable by this user) is read only: what it holds is
// served, and nothing is written.
#ifndef SDS_LOADER_SOURCES_NODE_CACHE_H_
#define SDS_LOADER_SOURCES_NODE_CACHE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/fork_guard.h"
#include "sources/cache_claims.h"
#include "sources/cache_files.h"
#include "sources/cache_open_entries.h"
#include "sources/cache_room.h"

namespace sdsl {

struct NodeCacheCounters {
  uint64_t hits = 0;          // requests served from the cache whole
  uint64_t misses = 0;        // requests that fetched some of their bytes
  uint64_t hit_bytes = 0;     // bytes served from the cache
  uint64_t stored_bytes = 0;  // bytes this process wrote into the cache
  uint64_t waits = 0;         // ranges another process was fetching, waited for
  uint64_t dropped = 0;       // damaged entries dropped
};

class NodeCache : public ForkGuarded {
 public:
  static constexpr double kIdleSeconds = CacheRoom::kIdleSeconds;
  static constexpr uint64_t kBlockBytes = uint64_t{64} << 10;

  // `limit`: bytes the entries may take; 0: half the space free now (plus
  // what the cache already holds). `floor`: bytes the disk keeps free.
  // Never throws: a directory that cannot be used leaves the cache off,
  // with the reason in warning().
  NodeCache(std::string dir, uint64_t limit, uint64_t floor);
  ~NodeCache() override;

  bool enabled() const { return enabled_.load(); }
  // The directory cannot be written (a read-only mount, no write permission):
  // its entries are served, nothing is written, claimed or evicted.
  bool read_only() const { return read_only_; }
  uint64_t limit() const { return room_ == nullptr ? limit_ : room_->limit(); }
  std::string warning() const;
  NodeCacheCounters counters() const;
  // Bytes the entries of every process take now, as the usage file says.
  uint64_t usage();

  struct Object;
  // The version and size of the object at `url` the cache holds bytes of.
  bool Known(const std::string& url, std::string* version, uint64_t* size);
  // The lock a process holds while it learns the version of the object at
  // `url` (its first GET), so that the other processes opening it then find
  // its footer in the cache. -1 when another process holds it (`wait`:
  // until it lets go or `deadline`) or the cache cannot take it.
  int LockUrl(const std::string& url, bool wait, std::chrono::steady_clock::time_point deadline);
  void UnlockUrl(const std::string& url, int fd);

  // The object read from `url` at `version` with `size` bytes; null when it
  // cannot be cached (no version, a Last-Modified version, the cache off).
  std::shared_ptr<Object> Open(const std::string& url, const std::string& version, uint64_t size);

  // Whether the entries this process knows of hold all of [offset, offset + size).
  bool Holds(Object& object, uint64_t offset, uint64_t size) const;

  // A range the caller fetches and then hands to Store, and its claim.
  struct Gap {
    // claim_fd: >= 0 claimed for the caller; kUnclaimed: fetched all the
    // same; kOthers: another process fetches it (readahead leaves it);
    // kPending: another process fetches it, and the caller, which holds
    // claims of its own, reads it again (Read) once those are let go.
    static constexpr int kUnclaimed = -1;
    static constexpr int kOthers = -2;
    static constexpr int kPending = -3;
    uint64_t offset = 0;
    uint64_t size = 0;
    uint8_t* dst = nullptr;
    int claim_fd = kUnclaimed;
    CacheClaim claim;
    uint64_t key = 0;
  };
  // Copies what the cache holds of the wanted ranges to their `dst` and
  // returns what it does not hold, each claimed for the caller where no
  // other process has claimed it. Ranges another process is fetching are
  // waited for until `deadline` only when `may_wait` and this call claimed
  // nothing (else returned as kPending); with `readahead`, returned as kOthers.
  std::vector<Gap> Read(Object& object, const std::vector<Gap>& wanted,
                        std::chrono::steady_clock::time_point deadline, bool may_wait = true,
                        bool readahead = false);
  std::vector<Gap> Read(Object& object, uint64_t offset, uint64_t size, uint8_t* dst,
                        std::chrono::steady_clock::time_point deadline, bool may_wait = true,
                        bool readahead = false);
  // Writes `size` fetched bytes from `offset` of the object as one entry,
  // when there is room. Never throws.
  void Store(Object& object, uint64_t offset, uint64_t size, const uint8_t* data);
  static uint64_t EntryFileBytes(uint64_t size);
  // Lets go of a gap's claim (after its bytes were stored, or not fetched).
  void Release(const Gap& gap);
  // Drops every entry holding bytes of [offset, offset + size): bytes read
  // from them failed a later check. True when one was dropped.
  bool Forget(Object& object, uint64_t offset, uint64_t size);

  void LockForFork() override;
  void UnlockInParent() override;
  void ResetInChild() override;

 private:
  struct Entry {
    uint64_t size = 0;
  };
  void Disable(const std::string& reason);
  bool Scan(Object& object, std::vector<std::string>* claims);
  bool CopyEntry(Object& object, uint64_t first, const Entry& entry, uint64_t offset, uint64_t size,
                 uint8_t* dst, bool mapped);
  // Removes a damaged entry: the file `open` holds, not one that replaced it since.
  void DropEntry(Object& object, uint64_t first, const Entry& entry, const OpenCacheEntry* open);
  // The entry, from the open set or opened with its header checked; null
  // when it is gone or damaged (then dropped).
  std::shared_ptr<OpenCacheEntry> OpenEntryAt(Object& object, uint64_t first, const Entry& entry,
                                              bool* damaged);
  std::vector<Gap> CopyHeld(Object& object, uint64_t offset, uint64_t size, uint8_t* dst,
                            bool mapped = false);
  void Touch(Object& object);
  SharedDir UrlDir(const std::string& url, bool create);

  const std::string dir_;
  uint64_t limit_ = 0;
  const uint64_t floor_;
  std::atomic<bool> enabled_{false};
  bool read_only_ = false;  // set once, in the constructor
  TrackedFds fds_;
  SharedDir root_;
  SharedDir objects_;
  std::unique_ptr<CacheRoom> room_;
  std::unique_ptr<CacheClaims> claims_;
  mutable std::mutex mutex_;  // guards warning_ and every object's index
  std::string warning_;
  OpenEntries open_;
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> hit_bytes_{0};
  std::atomic<uint64_t> stored_bytes_{0};
  std::atomic<uint64_t> waits_{0};
  std::atomic<uint64_t> dropped_{0};
};

struct NodeCache::Object {
  SharedDir dir;
  std::string name;                   // "U/I", for the open set's keys
  uint64_t key = 0;                   // the identity's hash, in every entry's header
  uint64_t size = 0;                  // the object's size
  std::map<uint64_t, Entry> entries;  // by first byte; under NodeCache::mutex_
  uint64_t longest = 0;               // the longest entry's size; under NodeCache::mutex_
  std::chrono::steady_clock::time_point touched{};
};

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_NODE_CACHE_H_
