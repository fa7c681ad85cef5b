// Entry files of the node cache held open with their headers checked, so
// that reading one again costs one preadv, or a copy out of its mapping.
//
// Each block's hash is checked on its first read through the open file, not
// on every read: an entry is never written after it is placed, and the
// chunks' own hashes are still checked on every read by the core (bytes
// damaged later are caught there, and the entry dropped: NodeCache::Forget).
// Once every block a read needs is verified, it copies out of a mapping of
// the file (guarded against SIGBUS, as local shards are) instead of reading
// it: a warm epoch then costs what a local disk's does.
#ifndef SDS_LOADER_SOURCES_CACHE_OPEN_ENTRIES_H_
#define SDS_LOADER_SOURCES_CACHE_OPEN_ENTRIES_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace sdsl {

struct OpenCacheEntry {
  int fd = -1;
  uint64_t size = 0;  // the entry's bytes, header excluded
  std::vector<uint8_t> header;
  std::unique_ptr<std::atomic<bool>[]> verified;  // one a block
  const uint8_t* map = nullptr;                   // the whole file, or null
  uint64_t map_bytes = 0;
  ~OpenCacheEntry();
};

// Opens the entry `name` of `dir` and checks its header against the
// object `key`, `first` and `size`. Null when it is gone (`damaged` false)
// or is not that entry, whole (`damaged` true).
std::shared_ptr<OpenCacheEntry> OpenCacheEntryAt(int dir, const std::string& name, uint64_t key,
                                                 uint64_t first, uint64_t size, bool* damaged);

// Copies [within, within + size) of the entry's bytes to `dst`, checking
// the blocks not verified yet; `mapped`: copies out of mappings are guarded
// now. False when the entry is damaged or was truncated.
bool CopyFromCacheEntry(OpenCacheEntry& entry, uint64_t within, uint64_t size, uint8_t* dst,
                        bool mapped);

// The open set, least recently used first, of at most `limit` entries (a
// descriptor each); entries leave it when the last reader lets go.
class OpenEntries {
 public:
  void set_limit(size_t limit) { limit_ = limit; }
  std::shared_ptr<OpenCacheEntry> Find(const std::string& key);
  // Keeps `entry` under `key`, or returns the one another thread kept first.
  std::shared_ptr<OpenCacheEntry> Keep(const std::string& key,
                                       std::shared_ptr<OpenCacheEntry> entry);
  void Forget(const std::string& key);
  void Clear();
  void LockForFork() { mutex_.lock(); }
  void UnlockInParent() { mutex_.unlock(); }
  // The child's copies of the descriptors are closed; the parent keeps its own.
  void ResetInChild();

 private:
  using Item = std::pair<std::string, std::shared_ptr<OpenCacheEntry>>;
  std::mutex mutex_;
  size_t limit_ = 64;
  std::list<Item> order_;
  std::unordered_map<std::string, std::list<Item>::iterator> index_;
};

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_CACHE_OPEN_ENTRIES_H_
