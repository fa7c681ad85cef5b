#include "sources/cache_open_entries.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/byte_span.h"
#include "container/riegeli_hash.h"
#include "sources/cache_entry.h"
#include "sources/cache_files.h"
#include "sources/mapped_copy.h"

namespace sdsl {

OpenCacheEntry::~OpenCacheEntry() {
  if (map != nullptr) munmap(const_cast<uint8_t*>(map), map_bytes);
  if (fd >= 0) close(fd);
}

std::shared_ptr<OpenCacheEntry> OpenCacheEntryAt(int dir, const std::string& name, uint64_t key,
                                                 uint64_t first, uint64_t size, bool* damaged) {
  *damaged = false;
  auto opened = std::make_shared<OpenCacheEntry>();
  opened->fd = OpenFileAt(dir, name, O_RDONLY);
  if (opened->fd < 0) {
    // Gone (evicted meanwhile) is a miss; anything but a regular file is junk.
    *damaged = errno != ENOENT;
    return nullptr;
  }
  opened->size = size;
  const uint64_t header = EntryHeaderBytes(size);
  opened->header.resize(header);
  struct stat info;
  if (fstat(opened->fd, &info) != 0 || static_cast<uint64_t>(info.st_size) != header + size ||
      !ReadAllAt(opened->fd, opened->header.data(), header, 0) ||
      !EntryHeaderMatches(opened->header, key, first, size)) {
    *damaged = true;
    return opened;  // the caller drops the file it holds, not one placed since
  }
  void* map = mmap(nullptr, header + size, PROT_READ, MAP_SHARED, opened->fd, 0);
  if (map != MAP_FAILED) {
    opened->map = static_cast<const uint8_t*>(map);
    opened->map_bytes = header + size;
  }
  const uint64_t blocks = CacheBlocks(size);
  opened->verified = std::make_unique<std::atomic<bool>[]>(blocks);
  for (uint64_t block = 0; block < blocks; ++block) opened->verified[block] = false;
  return opened;
}

bool CopyFromCacheEntry(OpenCacheEntry& entry, uint64_t within, uint64_t size, uint8_t* dst,
                        bool mapped) {
  // The blocks that hold the range and are not verified yet are read and
  // hashed whole: the range itself straight into `dst`, the rest of its
  // first and last blocks beside it, in one read.
  const uint64_t header = entry.header.size();
  const uint64_t first_block = within / kCacheBlockBytes;
  const uint64_t end_block = CacheBlocks(within + size);
  const bool check_first = !entry.verified[first_block].load(std::memory_order_acquire);
  const bool check_last = !entry.verified[end_block - 1].load(std::memory_order_acquire);
  if (mapped && entry.map != nullptr) {
    bool verified = true;
    for (uint64_t block = first_block; verified && block < end_block; ++block)
      verified = entry.verified[block].load(std::memory_order_acquire);
    if (verified) {
      RangeRequest out;
      out.size = size;
      out.dst = dst;
      return CopyFromMapping(entry.map + header + within, size, &out, 1);  // false: truncated
    }
  }
  const uint64_t data_start = check_first ? first_block * kCacheBlockBytes : within;
  const uint64_t data_end =
      check_last ? std::min(end_block * kCacheBlockBytes, entry.size) : within + size;
  thread_local std::vector<uint8_t> before;
  thread_local std::vector<uint8_t> after;
  before.resize(within - data_start);
  after.resize(data_end - (within + size));
  iovec parts[3] = {{before.data(), before.size()}, {dst, size}, {after.data(), after.size()}};
  ssize_t got;
  do {
    got = preadv(entry.fd, parts, 3, static_cast<off_t>(header + data_start));
  } while (got < 0 && errno == EINTR);
  // A short read is a truncated entry (the kernel reads a regular file's
  // range whole when it holds it).
  bool good = got >= 0 && static_cast<uint64_t>(got) == data_end - data_start;
  for (uint64_t block = first_block; good && block < end_block; ++block) {
    if (entry.verified[block].load(std::memory_order_acquire)) continue;
    const uint64_t begin = block * kCacheBlockBytes;
    const uint64_t end = std::min(begin + kCacheBlockBytes, entry.size);
    Pieces pieces;
    if (begin < within) pieces.Append(before.data() + (begin - data_start), within - begin);
    const uint64_t from = std::max(begin, within);
    const uint64_t to = std::min(end, within + size);
    if (from < to) pieces.Append(dst + (from - within), to - from);
    if (end > within + size) {
      const uint64_t from_after = std::max(begin, within + size);
      pieces.Append(after.data() + (from_after - (within + size)), end - from_after);
    }
    good = RiegeliHash(pieces) == EntryBlockHash(entry.header, block);
    if (good) entry.verified[block].store(true, std::memory_order_release);
  }
  return good;
}

std::shared_ptr<OpenCacheEntry> OpenEntries::Find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = index_.find(key);
  if (found == index_.end()) return nullptr;
  order_.splice(order_.end(), order_, found->second);
  return found->second->second;
}

std::shared_ptr<OpenCacheEntry> OpenEntries::Keep(const std::string& key,
                                                  std::shared_ptr<OpenCacheEntry> entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = index_.find(key);
  if (found != index_.end()) return found->second->second;  // another thread's
  order_.emplace_back(key, std::move(entry));
  index_[key] = std::prev(order_.end());
  while (order_.size() > limit_) {
    index_.erase(order_.front().first);
    order_.pop_front();
  }
  return order_.back().second;
}

void OpenEntries::Forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = index_.find(key);
  if (found == index_.end()) return;
  order_.erase(found->second);
  index_.erase(found);
}

void OpenEntries::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  index_.clear();
  order_.clear();
}

void OpenEntries::ResetInChild() {
  index_.clear();
  order_.clear();
  mutex_.unlock();
}

}  // namespace sdsl
