// A node-local disk cache of object-store bytes, shared by every process of
// the node that is given the same directory (DataLoader workers, ranks), so
// that epochs after the first read from local disk and each byte is fetched
// once between them.
//
// What it holds: the ranges reads and readahead fetched, exactly those
// (never a whole object on first touch), each as one entry file of an
// object's directory, keyed by the object's identity (the URL it is read
// from, its version and its size): a replaced object has another identity,
// so its old bytes are never served, and its old directory is removed.
//
// Layout under the directory the user names:
//   sds-loader-cache-v1/usage           bytes the entries take, under a file lock
//   sds-loader-cache-v1/objects/U/I/    one object: U from its URL, I from its identity
//     identity                          the identity in full; touched when in use
//     .lock                             taken while a range is claimed
//     OFFSET-SIZE                       an entry: header, block hashes, bytes
//     OFFSET-SIZE-PID-N.fetching        a claim: a range some process is fetching
//     .tmp-PID-N                        an entry being written
//
// Crash safety: an entry is written under a temporary name and renamed into
// place whole; a claim is a file its fetcher holds an exclusive flock on, so
// a claim whose process died is seen as free at once. Every 64 KiB block of
// an entry carries its hash, checked on every read: a damaged or torn entry
// is dropped and its bytes fetched again, never returned.
//
// Room: entries are admitted while the usage stays within the limit and the
// disk keeps its floor free (fill-then-keep: a shuffled epoch over data larger
// than the cache would gain nothing from replacing entries, and would write
// the disk on every miss); objects no process has used for kIdleSeconds are
// evicted, least recently used first, to make room.
//
// Faults never fail a read: a directory that cannot be written, a full disk
// or any other error while writing turns caching off for this process, with
// the reason in warning(); reads then go to the store.
#ifndef SDS_LOADER_SOURCES_NODE_CACHE_H_
#define SDS_LOADER_SOURCES_NODE_CACHE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/fork_guard.h"

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
  // Objects unused this long (by any process) may be evicted to make room.
  static constexpr double kIdleSeconds = 600;
  // Bytes of an entry covered by one hash.
  static constexpr uint64_t kBlockBytes = uint64_t{64} << 10;

  // `limit`: bytes the entries may take; 0: half the space free now (plus
  // what the cache already holds). `floor`: bytes the disk keeps free.
  // Never throws: a directory that cannot be used leaves the cache off,
  // with the reason in warning().
  NodeCache(std::string dir, uint64_t limit, uint64_t floor);
  ~NodeCache() override;

  bool enabled() const { return enabled_.load(); }
  uint64_t limit() const { return limit_; }
  // Why caching is off, or "" while it is on.
  std::string warning() const;
  NodeCacheCounters counters() const;
  // Bytes the entries of every process take now, as the usage file says.
  uint64_t usage();

  struct Object;
  // The version and size of the object at `url` the cache holds bytes of
  // (the last one seen); false when it holds none.
  bool Known(const std::string& url, std::string* version, uint64_t* size);
  // Takes the lock a process holds while it learns the version of the
  // object at `url` (its first GET), so that the other processes opening it
  // then find its footer in the cache. Returns the lock's descriptor, or -1
  // when another process holds it (`wait`: until it lets go or `deadline`
  // passes) or the cache cannot take it.
  int LockUrl(const std::string& url, bool wait, std::chrono::steady_clock::time_point deadline);
  void UnlockUrl(int fd);

  // The object read from `url` at `version` with `size` bytes; null when it
  // cannot be cached (no version, or the cache is off).
  std::shared_ptr<Object> Open(const std::string& url, const std::string& version, uint64_t size);

  // Whether the entries this process knows of hold all of [offset, offset +
  // size); no I/O (the entries are read, and checked, by Read).
  bool Holds(Object& object, uint64_t offset, uint64_t size) const;

  // A range the caller fetches and then hands to Store, and its claim.
  struct Gap {
    uint64_t offset = 0;
    uint64_t size = 0;
    uint8_t* dst = nullptr;
    // -1: not claimed (the caller fetches it all the same); -2: another
    // process is fetching it (readahead only).
    int claim_fd = -1;
    std::string claim;  // the claim's path
  };
  // Copies what the cache holds of [offset, offset + size) to `dst` and
  // returns what it does not hold, each claimed for the caller. Ranges
  // another process is fetching are waited for until `deadline` and read
  // from the cache when they land. `wait`: false for readahead, which
  // leaves such ranges to the read that needs them (returned unclaimed
  // with claim_fd -2).
  std::vector<Gap> Read(Object& object, uint64_t offset, uint64_t size, uint8_t* dst,
                        std::chrono::steady_clock::time_point deadline, bool wait = true);
  // The same for several ranges of one object (their claims made under one
  // take of the object's lock).
  std::vector<Gap> Read(Object& object, const std::vector<Gap>& wanted,
                        std::chrono::steady_clock::time_point deadline, bool wait = true);
  // Writes `size` fetched bytes from `offset` of the object as one entry,
  // when there is room. Never throws.
  // `reserved`: its bytes (EntryFileBytes) were reserved by ReserveBytes, and
  // are given back if it is not written.
  void Store(Object& object, uint64_t offset, uint64_t size, const uint8_t* data,
             bool reserved = false);
  // What an entry of `size` bytes takes on disk, header included.
  static uint64_t EntryFileBytes(uint64_t size);
  // Reserves room for several entries at once (one take of the usage
  // file's lock); false when they do not all fit.
  bool ReserveBytes(uint64_t bytes);
  void UnreserveBytes(uint64_t bytes);
  // Lets go of a gap's claim (after its bytes were stored, or not fetched).
  void Release(const Gap& gap);

  void LockForFork() override;
  void UnlockInParent() override;
  void ResetInChild() override;

 private:
  struct Entry {
    uint64_t size = 0;
  };
  // An entry file held open with its header (magic, key, block hashes)
  // checked, so that reading it again costs one preadv; closed when the
  // last reader lets go after it leaves the open set (open_entries_).
  //
  // Each block's hash is checked on its first read through the open file,
  // not on every read: an entry is never written after it is placed, and
  // the chunks' own hashes are still checked on every read by the core.
  //
  // Once every block a read needs is verified, it copies out of a mapping of
  // the file (guarded against SIGBUS, as local shards are) instead of
  // reading it: a warm epoch then costs what a local disk's does.
  struct OpenEntry {
    int fd = -1;
    std::vector<uint8_t> header;
    std::unique_ptr<std::atomic<bool>[]> verified;  // one a block
    const uint8_t* map = nullptr;                   // the whole file, or null
    uint64_t map_bytes = 0;
    ~OpenEntry();
  };
  // How many entries stay open: an eighth of the process's file limit, from
  // 64 to 4096 (a remote reader holds no descriptor per shard).
  size_t open_entries_ = 64;
  struct Claim {
    uint64_t offset = 0;
    uint64_t size = 0;
    std::string name;
  };

  void Disable(const std::string& reason);
  // Opens `path` and notes the descriptor, so that a forked child can close
  // what it inherits; -1 on failure.
  int OpenTracked(const std::string& path, int flags);
  void CloseTracked(int fd);
  // Reads the object's directory into its index; false on failure.
  bool Scan(Object& object, std::vector<Claim>* claims);
  // Copies [offset, offset + size) from entry `first` to `dst`; false (the
  // entry dropped) when it is damaged or gone.
  bool CopyEntry(Object& object, uint64_t first, const Entry& entry, uint64_t offset, uint64_t size,
                 uint8_t* dst, bool mapped);
  // Removes a damaged entry: the file `open` holds, not one that replaced it since.
  void DropEntry(Object& object, uint64_t first, const Entry& entry, const OpenEntry* open);
  // The entry file at `path`, opened (or from the open set) with its header
  // checked; null when it is gone or its header is not this entry's.
  std::shared_ptr<OpenEntry> OpenEntryAt(const std::string& path, Object& object, uint64_t first,
                                         const Entry& entry, bool* damaged);
  void ForgetOpen(const std::string& path);
  // Copies the pieces of the range the index holds; returns the rest.
  // `mapped`: whether copies out of mappings are guarded now (GuardMappedCopies).
  std::vector<Gap> CopyHeld(Object& object, uint64_t offset, uint64_t size, uint8_t* dst,
                            bool mapped = false);
  // Adds `bytes` to the usage when they fit (making room if need be).
  bool Reserve(uint64_t bytes);
  void Unreserve(uint64_t bytes);
  // Evicts idle objects, least recently used first, until `needed` bytes
  // are freed; returns the usage after it (`used` before). Under the usage lock.
  uint64_t Evict(uint64_t needed, uint64_t used);
  void Touch(Object& object);

  const std::string root_;  // .../sds-loader-cache-v1
  uint64_t limit_ = 0;
  const uint64_t floor_;
  std::atomic<bool> enabled_{false};
  mutable std::mutex mutex_;  // guards warning_, tracked_, every object's index
  std::string warning_;
  std::set<int> tracked_;
  // Entries held open, most recently used last; under mutex_.
  std::list<std::pair<std::string, std::shared_ptr<OpenEntry>>> open_;
  std::unordered_map<std::string,
                     std::list<std::pair<std::string, std::shared_ptr<OpenEntry>>>::iterator>
      open_index_;
  std::atomic<uint64_t> serial_{0};
  // No eviction pass before this (steady clock, ns): a full cache of objects
  // in use is not listed again at every miss.
  std::atomic<int64_t> next_evict_ns_{0};
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> hit_bytes_{0};
  std::atomic<uint64_t> stored_bytes_{0};
  std::atomic<uint64_t> waits_{0};
  std::atomic<uint64_t> dropped_{0};
};

struct NodeCache::Object {
  std::string dir;                    // ends in '/'
  uint64_t key = 0;                   // the identity's hash, in every entry's header
  uint64_t size = 0;                  // the object's size
  std::map<uint64_t, Entry> entries;  // by first byte; under NodeCache::mutex_
  int64_t scanned_mtime = -1;         // the directory's mtime at the last scan (ns)
  std::chrono::steady_clock::time_point touched{};
};

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_NODE_CACHE_H_
