#include "sources/node_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "base/byte_io.h"
#include "container/riegeli_hash.h"
#include "sources/cache_entry.h"
#include "sources/mapped_copy.h"
#include "sources/store_rules.h"

namespace sdsl {
namespace {

constexpr char kLayout[] = "sds-loader-cache-v1";
constexpr char kIdentity[] = "identity";

uint64_t HashOf(const std::string& text) {
  return RiegeliHash(reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

// Errors that say the cache directory cannot take more (as opposed to one
// entry's directory having been evicted by another process meanwhile).
bool DirectoryFault(int error) {
  return error == ENOSPC || error == EDQUOT || error == EFBIG || error == EROFS ||
         error == EACCES || error == EPERM || error == EIO;
}

std::string IdentityText(const std::string& url, const std::string& version, uint64_t size) {
  return std::string(kLayout) + "\nurl " + url + "\nversion " + version + "\nsize " +
         std::to_string(size) + "\n";
}

// The identity file's text (up to `limit` bytes), or "" when it is not one.
std::string ReadIdentity(int dir, size_t limit) {
  const int fd = OpenFileAt(dir, kIdentity, O_RDONLY);
  if (fd < 0) return "";
  std::string text(limit, '\0');
  const ssize_t got = pread(fd, text.data(), text.size(), 0);
  close(fd);
  if (got <= 0) return "";
  text.resize(static_cast<size_t>(got));
  return text;
}

}  // namespace

NodeCache::NodeCache(std::string dir, uint64_t limit, uint64_t floor)
    : dir_(std::move(dir)), limit_(limit), floor_(floor) {
  StartGuarding();
  struct rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    open_.set_limit(std::clamp<size_t>(static_cast<size_t>(files.rlim_cur / 8), 64, 4096));
  } else {
    open_.set_limit(4096);
  }
  if (dir_.empty()) return;
  std::string why;
  std::string where = dir_;
  SharedDir user = OpenRootDir(dir_, &why);
  if (user != nullptr) {
    where = dir_ + "/" + kLayout;
    root_ = OpenDirAt(user->get(), kLayout, /*create=*/true, &why);
  }
  if (root_ != nullptr) {
    where += "/objects";
    objects_ = OpenDirAt(root_->get(), "objects", /*create=*/true, &why);
  }
  if (objects_ == nullptr) {
    const bool foreign = why.find("belongs to") != std::string::npos ||
                         why.find("may write") != std::string::npos ||
                         why.find("link") != std::string::npos;
    Disable("the cache directory " + where + " is not used: " + why +
            (foreign ? ". A cache directory must be this user's own and writable by no one "
                       "else: choose a directory of your own, or `chmod go-w` it if it is yours"
                     : ""));
    return;
  }
  claims_ = std::make_unique<CacheClaims>(&fds_);
  if (faccessat(root_->get(), ".", W_OK, 0) != 0 && (errno == EROFS || errno == EACCES)) {
    // A cache filled once and then shared read-only (a read-only mount into
    // containers, say): its entries are served, checked as ever, and nothing
    // is written, claimed or evicted; what it lacks is fetched each time.
    read_only_ = true;
    room_ = std::make_unique<CacheRoom>(&fds_, root_, objects_, limit_, floor_);
    enabled_ = true;
    return;
  }
  room_ = std::make_unique<CacheRoom>(&fds_, root_, objects_, limit_, floor_);
  if (!room_->usable() || faccessat(root_->get(), ".", W_OK, 0) != 0) {
    Disable("the cache directory " + dir_ + " cannot be written (" + strerror(errno) + ")");
    return;
  }
  enabled_ = true;
}

NodeCache::~NodeCache() {
  StopGuarding();
  open_.Clear();
}

void NodeCache::LockForFork() {
  if (room_ != nullptr) room_->LockForFork();
  mutex_.lock();
  open_.LockForFork();
  fds_.LockForFork();
}

void NodeCache::UnlockInParent() {
  fds_.UnlockInParent();
  open_.UnlockInParent();
  mutex_.unlock();
  if (room_ != nullptr) room_->UnlockInParent();
}

void NodeCache::ResetInChild() {
  // The parent's claims and locks stay the parent's: the child's copies of
  // their descriptors would otherwise keep them held after the parent lets go.
  fds_.CloseAllInChild();
  CacheClaims::ResetInChild();
  open_.ResetInChild();  // the child's copies of the entries' descriptors
  mutex_.unlock();
  if (room_ != nullptr) room_->ResetInChild();
}

void NodeCache::Disable(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (warning_.empty()) warning_ = reason + "; reads go to the store without the node cache";
  enabled_ = false;
}

std::string NodeCache::warning() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return warning_;
}

NodeCacheCounters NodeCache::counters() const {
  NodeCacheCounters counters;
  counters.hits = hits_.load();
  counters.misses = misses_.load();
  counters.hit_bytes = hit_bytes_.load();
  counters.stored_bytes = stored_bytes_.load();
  counters.waits = waits_.load();
  counters.dropped = dropped_.load();
  return counters;
}

uint64_t NodeCache::usage() { return room_ == nullptr ? 0 : room_->Usage(); }

SharedDir NodeCache::UrlDir(const std::string& url, bool create) {
  std::string why;
  const std::string name = Hex16(HashOf(url));
  SharedDir dir = OpenDirAt(objects_->get(), name, create, &why);
  if (dir == nullptr && create && !InfoAt(objects_->get(), name).directory) {
    // Something else in a directory's place (a link, a FIFO): not the cache's.
    UnlinkAt(objects_->get(), name);
    dir = OpenDirAt(objects_->get(), name, create, &why);
  }
  return dir;
}

bool NodeCache::Known(const std::string& url, std::string* version, uint64_t* size) {
  if (!enabled()) return false;
  const SharedDir url_dir = UrlDir(url, /*create=*/false);
  if (url_dir == nullptr) return false;
  const std::string prefix = std::string(kLayout) + "\nurl " + url + "\nversion ";
  for (const std::string& name : ListDir(url_dir->get())) {
    if (name[0] == '.') continue;
    std::string why;
    const SharedDir dir = OpenDirAt(url_dir->get(), name, /*create=*/false, &why);
    if (dir == nullptr) continue;
    const std::string text = ReadIdentity(dir->get(), prefix.size() + 4096);
    if (text.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t end_version = text.find("\nsize ", prefix.size());
    if (end_version == std::string::npos) continue;
    const std::string found = text.substr(prefix.size(), end_version - prefix.size());
    char* end = nullptr;
    const unsigned long long bytes = strtoull(text.c_str() + end_version + 6, &end, 10);
    if (found.empty() || end == nullptr || *end != '\n') continue;
    *version = found;
    *size = bytes;
    return true;
  }
  return false;
}

int NodeCache::LockUrl(const std::string& url, bool wait,
                       std::chrono::steady_clock::time_point deadline) {
  if (!enabled() || read_only_) return -1;
  const SharedDir url_dir = UrlDir(url, /*create=*/true);
  if (url_dir == nullptr) return -1;
  return claims_->LockUrl(url_dir, HashOf(url), wait, deadline);
}

void NodeCache::UnlockUrl(const std::string& url, int fd) {
  if (fd >= 0) claims_->UnlockUrl(fd, HashOf(url));
}

std::shared_ptr<NodeCache::Object> NodeCache::Open(const std::string& url,
                                                   const std::string& version, uint64_t size) {
  // A Last-Modified time is not a version: an object replaced within its
  // second by one of the same size would keep its identity.
  if (!enabled() || version.empty() || version.rfind(kModifiedMark, 0) == 0) return nullptr;
  const std::string identity = IdentityText(url, version, size);
  const uint64_t key = HashOf(identity);
  const std::string name = Hex16(key);
  const SharedDir url_dir = UrlDir(url, /*create=*/!read_only_);
  if (url_dir == nullptr) return nullptr;
  // Other versions of the object are never served again: their bytes go.
  for (const std::string& other :
       read_only_ ? std::vector<std::string>() : ListDir(url_dir->get())) {
    if (other == name || other[0] == '.') continue;
    room_->Release([&]() { return RemoveDirAt(url_dir->get(), other, CountedCacheFile); });
  }
  std::string why;
  SharedDir dir = OpenDirAt(url_dir->get(), name, /*create=*/!read_only_, &why);
  if (dir == nullptr && read_only_) return nullptr;
  if (dir == nullptr) {
    room_->Release([&]() { return RemoveDirAt(url_dir->get(), name, CountedCacheFile); });
    dir = OpenDirAt(url_dir->get(), name, /*create=*/true, &why);
    if (dir == nullptr) return nullptr;
  }
  std::string stored = ReadIdentity(dir->get(), identity.size() + 1);
  if (stored.empty() && read_only_) return nullptr;
  if (stored.empty()) {
    // Junk in its place (a FIFO, a link) goes; a missing one is written.
    if (InfoAt(dir->get(), kIdentity).exists) UnlinkAt(dir->get(), kIdentity);
    const std::string temporary = kTemporaryPrefix + claims_->UniqueSuffix();
    const int fd = OpenFileAt(dir->get(), temporary, O_WRONLY | O_CREAT | O_EXCL);
    if (fd < 0) return nullptr;
    const bool written =
        WriteAll(fd, reinterpret_cast<const uint8_t*>(identity.data()), identity.size());
    close(fd);
    if (!written) {
      UnlinkAt(dir->get(), temporary);
      return nullptr;
    }
    PlaceFile(dir->get(), temporary, kIdentity);  // another process's, if it won, is the same
    stored = ReadIdentity(dir->get(), identity.size() + 1);
  }
  // Another identity with the same hash: not cached rather than confused.
  if (stored != identity) return nullptr;
  auto object = std::make_shared<Object>();
  object->dir = std::move(dir);
  object->name = Hex16(HashOf(url)) + "/" + name;
  object->key = key;
  object->size = size;
  Touch(*object);
  Scan(*object, nullptr);
  return object;
}

void NodeCache::Touch(Object& object) {
  if (read_only_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - object.touched < std::chrono::seconds(60)) return;
  object.touched = now;
  utimensat(object.dir->get(), kIdentity, nullptr, AT_SYMLINK_NOFOLLOW);
}

bool NodeCache::Scan(Object& object, std::vector<std::string>* claims) {
  std::map<uint64_t, Entry> entries;
  uint64_t longest = 0;
  for (const std::string& name : ListDir(object.dir->get())) {
    const CacheName parsed = ParseCacheName(name);
    if (parsed.kind == CacheName::kOther || parsed.kind == CacheName::kTemporary) continue;
    if (parsed.offset > object.size || parsed.size > object.size - parsed.offset) continue;
    if (parsed.kind == CacheName::kEntry) {
      Entry& entry = entries[parsed.offset];
      entry.size = std::max(entry.size, parsed.size);
      longest = std::max(longest, parsed.size);
    } else if (claims != nullptr) {
      claims->push_back(name);
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  object.entries.swap(entries);
  object.longest = longest;
  return true;
}

std::shared_ptr<OpenCacheEntry> NodeCache::OpenEntryAt(Object& object, uint64_t first,
                                                       const Entry& entry, bool* damaged) {
  *damaged = false;
  const std::string name = EntryName(first, entry.size);
  const std::string key = object.name + "/" + name;
  if (std::shared_ptr<OpenCacheEntry> found = open_.Find(key)) return found;
  std::shared_ptr<OpenCacheEntry> opened =
      OpenCacheEntryAt(object.dir->get(), name, object.key, first, entry.size, damaged);
  if (*damaged) {
    DropEntry(object, first, entry, opened.get());
    return nullptr;
  }
  return opened == nullptr ? nullptr : open_.Keep(key, std::move(opened));
}

void NodeCache::DropEntry(Object& object, uint64_t first, const Entry& entry,
                          const OpenCacheEntry* open) {
  ++dropped_;
  const std::string name = EntryName(first, entry.size);
  open_.Forget(object.name + "/" + name);
  // Only the damaged file goes: one another process placed since is whole.
  // A read-only cache keeps it, but this process serves it no more.
  struct stat held;
  const bool have_held = open != nullptr && fstat(open->fd, &held) == 0;
  if (!read_only_)
    room_->Release([&]() -> uint64_t {
      const NameInfo named = InfoAt(object.dir->get(), name);
      if (!named.exists) return 0;
      if (open != nullptr && (!have_held || held.st_ino != named.ino || held.st_dev != named.dev))
        return 0;
      return UnlinkAt(object.dir->get(), name) && named.regular ? named.size : 0;
    });
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = object.entries.find(first);
  if (found != object.entries.end() && found->second.size == entry.size)
    object.entries.erase(found);
}

bool NodeCache::Forget(Object& object, uint64_t offset, uint64_t size) {
  std::vector<std::pair<uint64_t, Entry>> overlapping;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& item : object.entries) {
      if (item.first < offset + size && offset < item.first + item.second.size)
        overlapping.push_back(item);
    }
  }
  for (const auto& item : overlapping) {
    bool damaged = false;
    const std::shared_ptr<OpenCacheEntry> opened =
        OpenEntryAt(object, item.first, item.second, &damaged);
    if (opened != nullptr) DropEntry(object, item.first, item.second, opened.get());
  }
  return !overlapping.empty();
}

bool NodeCache::CopyEntry(Object& object, uint64_t first, const Entry& entry, uint64_t offset,
                          uint64_t size, uint8_t* dst, bool mapped) {
  bool damaged = false;
  const std::shared_ptr<OpenCacheEntry> opened = OpenEntryAt(object, first, entry, &damaged);
  if (opened == nullptr) {
    if (!damaged) {  // evicted meanwhile: a miss, not damage
      std::lock_guard<std::mutex> lock(mutex_);
      object.entries.erase(first);
    }
    return false;
  }
  if (!CopyFromCacheEntry(*opened, offset - first, size, dst, mapped)) {
    DropEntry(object, first, entry, opened.get());
    return false;
  }
  hit_bytes_ += size;
  return true;
}

bool NodeCache::Holds(Object& object, uint64_t offset, uint64_t size) const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t position = offset;
  const uint64_t end = offset + size;
  while (position < end) {
    // The entry reaching furthest among those that begin at or before `position`.
    auto it = object.entries.upper_bound(position);
    uint64_t reach = position;
    while (it != object.entries.begin()) {
      --it;
      if (it->first + object.longest <= position) break;  // none further back reaches
      reach = std::max(reach, it->first + it->second.size);
    }
    if (reach <= position) return false;
    position = reach;
  }
  return true;
}

std::vector<NodeCache::Gap> NodeCache::CopyHeld(Object& object, uint64_t offset, uint64_t size,
                                                uint8_t* dst, bool mapped) {
  const uint64_t end = offset + size;
  std::vector<std::pair<uint64_t, Entry>> overlapping;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = object.entries.upper_bound(offset);
    // Entries beginning before the range may reach into it: any of those
    // within the longest entry's size of it.
    auto back = it;
    while (back != object.entries.begin()) {
      --back;
      if (back->first + object.longest <= offset) break;
      if (back->first + back->second.size > offset) overlapping.push_back(*back);
    }
    for (; it != object.entries.end() && it->first < end; ++it) overlapping.push_back(*it);
  }
  std::vector<Gap> gaps;
  uint64_t position = offset;
  while (position < end) {
    // The entry that holds `position` and reaches furthest.
    size_t best = overlapping.size();
    uint64_t next_start = end;
    for (size_t k = 0; k < overlapping.size(); ++k) {
      const uint64_t first = overlapping[k].first;
      const uint64_t last = first + overlapping[k].second.size;
      if (first <= position && position < last) {
        if (best == overlapping.size() ||
            last > overlapping[best].first + overlapping[best].second.size)
          best = k;
      } else if (first > position) {
        next_start = std::min(next_start, first);
      }
    }
    if (best == overlapping.size()) {
      Gap gap;
      gap.offset = position;
      gap.size = next_start - position;
      gap.dst = dst + (position - offset);
      gaps.push_back(std::move(gap));
      position = next_start;
      continue;
    }
    const uint64_t first = overlapping[best].first;
    const uint64_t until = std::min(end, first + overlapping[best].second.size);
    if (CopyEntry(object, first, overlapping[best].second, position, until - position,
                  dst + (position - offset), mapped)) {
      position = until;
    } else {
      overlapping.erase(overlapping.begin() + static_cast<std::ptrdiff_t>(best));
    }
  }
  return gaps;
}

std::vector<NodeCache::Gap> NodeCache::Read(Object& object, uint64_t offset, uint64_t size,
                                            uint8_t* dst,
                                            std::chrono::steady_clock::time_point deadline,
                                            bool may_wait, bool readahead) {
  Gap range;
  range.offset = offset;
  range.size = size;
  range.dst = dst;
  return Read(object, std::vector<Gap>{range}, deadline, may_wait, readahead);
}

std::vector<NodeCache::Gap> NodeCache::Read(Object& object, const std::vector<Gap>& wanted,
                                            std::chrono::steady_clock::time_point deadline,
                                            bool may_wait, bool readahead) {
  Touch(object);
  const bool mapped = GuardMappedCopies();
  std::vector<Gap> gaps;
  for (const Gap& range : wanted) {
    std::vector<Gap> pieces = CopyHeld(object, range.offset, range.size, range.dst, mapped);
    if (pieces.empty()) {
      ++hits_;
    } else {
      ++misses_;
      gaps.insert(gaps.end(), pieces.begin(), pieces.end());
    }
  }
  std::vector<Gap> result;
  if (read_only_) return gaps;  // nothing is claimed: no process writes here
  bool waited = false;
  while (!gaps.empty()) {
    std::vector<Gap> waiting;
    std::vector<std::pair<std::string, int>> watched;  // claims waited for
    bool claimed = false;
    {
      // What landed since the index was read, and who fetches the rest: under
      // the object's lock, so that two processes never claim the same bytes.
      CacheClaims::ObjectLock lock(claims_.get(), object.dir, object.key);
      if (!lock.ok()) {
        result.insert(result.end(), gaps.begin(), gaps.end());
        break;
      }
      std::vector<std::string> claims;
      Scan(object, &claims);
      std::vector<Gap> rest;
      for (const Gap& gap : gaps) {
        std::vector<Gap> pieces = CopyHeld(object, gap.offset, gap.size, gap.dst);
        rest.insert(rest.end(), pieces.begin(), pieces.end());
      }
      for (Gap& gap : rest) {
        bool claimed_by_other = false;
        for (const std::string& name : claims) {
          const CacheName claim = ParseCacheName(name);
          if (claim.offset >= gap.offset + gap.size || gap.offset >= claim.offset + claim.size)
            continue;
          int watch = -1;
          if (!claims_->Alive(object.dir, name, &watch)) continue;
          claimed_by_other = true;
          watched.emplace_back(name, watch);
        }
        if (claimed_by_other) {
          waiting.push_back(gap);
          continue;
        }
        if (claims_->Make(object.dir, gap.offset, gap.size, &gap.claim)) {
          gap.claim_fd = gap.claim.fd;
          gap.key = object.key;
          claimed = true;
        }
        result.push_back(gap);
      }
    }
    gaps.clear();
    const bool expired = std::chrono::steady_clock::now() >= deadline;
    if (!waiting.empty() && (readahead || claimed || !may_wait || expired)) {
      // Never wait while holding claims of one's own: the process waited
      // for may be waiting for them.
      const int state = readahead ? Gap::kOthers : expired ? Gap::kUnclaimed : Gap::kPending;
      for (Gap& gap : waiting) gap.claim_fd = state;
      result.insert(result.end(), waiting.begin(), waiting.end());
      waiting.clear();
    }
    if (!waiting.empty()) {
      if (!waited) ++waits_;
      waited = true;
      // Until each claim is let go (its bytes landed, or its fetch gave up).
      for (const auto& claim : watched) {
        while (claims_->Held(claim.first, claim.second) &&
               std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      gaps.swap(waiting);
    }
    for (const auto& claim : watched) claims_->StopWatching(claim.second);
  }
  return result;
}

void NodeCache::Release(const Gap& gap) {
  if (gap.claim_fd >= 0) claims_->Release(gap.claim, gap.key);
}

uint64_t NodeCache::EntryFileBytes(uint64_t size) { return sdsl::EntryFileBytes(size); }

void NodeCache::Store(Object& object, uint64_t offset, uint64_t size, const uint8_t* data) {
  if (!enabled() || read_only_ || size == 0) return;
  const std::vector<uint8_t> head = EncodeEntryHeader(object.key, offset, size, data);
  const uint64_t bytes = head.size() + size;
  const std::string temporary = kTemporaryPrefix + claims_->UniqueSuffix();
  const int dir = object.dir->get();
  // The reservation is the temporary file at its full size, made under the
  // usage lock: another process's eviction listing counts it.
  int fd = -1;
  int error = 0;
  const bool reserved = room_->Reserve(bytes, [&]() {
    fd = OpenFileAt(dir, temporary, O_WRONLY | O_CREAT | O_EXCL);
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(bytes)) == 0) return true;
    error = errno;
    if (fd >= 0) {
      close(fd);
      fd = -1;
      UnlinkAt(dir, temporary);
    }
    return false;
  });
  if (!reserved) {
    if (error != 0 && DirectoryFault(error))
      Disable(std::string("writing to the node cache failed (") + strerror(error) + ")");
    return;
  }
  const bool written = WriteAll(fd, head.data(), head.size()) && WriteAll(fd, data, size);
  if (!written) error = errno;
  close(fd);
  int place_error = 0;
  room_->Release([&]() -> uint64_t {
    if (written) {
      // Never over an entry already there: its bytes are counted once.
      place_error = PlaceFile(dir, temporary, EntryName(offset, size));
      return place_error == 0 ? 0 : bytes;  // the temporary file went, placed or not
    }
    return UnlinkAt(dir, temporary) ? bytes : 0;
  });
  if (!written) {
    if (DirectoryFault(error))
      Disable(std::string("writing to the node cache failed (") + strerror(error) + ")");
    return;
  }
  if (place_error != 0) {
    if (place_error != EEXIST && DirectoryFault(place_error))
      Disable(std::string("writing to the node cache failed (") + strerror(place_error) + ")");
    return;
  }
  stored_bytes_ += size;
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& entry = object.entries[offset];
  entry.size = std::max(entry.size, size);
  object.longest = std::max(object.longest, size);
}

}  // namespace sdsl
