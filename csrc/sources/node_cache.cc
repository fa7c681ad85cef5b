#include "sources/node_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "base/byte_io.h"
#include "container/riegeli_hash.h"
#include "sources/mapped_copy.h"

namespace sdsl {
namespace {

constexpr char kLayout[] = "sds-loader-cache-v1";
constexpr char kMagic[8] = {'S', 'D', 'S', 'L', 'C', 'E', '0', '1'};
constexpr uint64_t kFixedHeader = 32;  // magic, key, offset, size
constexpr char kClaimSuffix[] = ".fetching";

void StoreLE64(uint8_t* p, uint64_t value) {
  for (int k = 0; k < 8; ++k) p[k] = static_cast<uint8_t>(value >> (8 * k));
}

uint64_t Blocks(uint64_t size) {
  return (size + NodeCache::kBlockBytes - 1) / NodeCache::kBlockBytes;
}

uint64_t HeaderBytes(uint64_t size) { return kFixedHeader + 8 * Blocks(size); }

uint64_t HashOf(const std::string& text) {
  return RiegeliHash(reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

std::string Hex(uint64_t value) {
  char text[17];
  snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

bool ParseHex(const char* text, size_t length, uint64_t* value) {
  if (length != 16) return false;
  uint64_t result = 0;
  for (size_t k = 0; k < length; ++k) {
    const char c = text[k];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return false;
    }
    result = (result << 4) | static_cast<uint64_t>(digit);
  }
  *value = result;
  return true;
}

std::string EntryName(uint64_t offset, uint64_t size) { return Hex(offset) + "-" + Hex(size); }

bool MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0777) == 0 || errno == EEXIST) {
    struct stat info;
    return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
  }
  return false;
}

bool MakeDirs(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string parent = path.substr(0, slash);
    if (mkdir(parent.c_str(), 0777) != 0 && errno != EEXIST) return false;
  }
  return MakeDir(path);
}

std::vector<std::string> List(const std::string& dir) {
  std::vector<std::string> names;
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) return names;
  while (const dirent* item = readdir(handle)) {
    if (item->d_name[0] == '.' && (item->d_name[1] == 0 || strcmp(item->d_name, "..") == 0))
      continue;
    names.emplace_back(item->d_name);
  }
  closedir(handle);
  return names;
}

// Removes a directory of files; returns the bytes its files took.
uint64_t RemoveObjectDir(const std::string& dir) {
  uint64_t bytes = 0;
  for (const std::string& name : List(dir)) {
    const std::string path = dir + "/" + name;
    struct stat info;
    if (lstat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode)) {
      if (name[0] != '.' && name != "identity" && name.find(kClaimSuffix) == std::string::npos) {
        bytes += static_cast<uint64_t>(info.st_size);
      }
      unlink(path.c_str());
    }
  }
  rmdir(dir.c_str());
  return bytes;
}

// Bytes the entries of one object directory take.
uint64_t EntryBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const std::string& name : List(dir)) {
    if (name[0] == '.' || name == "identity" || name.find(kClaimSuffix) != std::string::npos)
      continue;
    struct stat info;
    if (stat((dir + "/" + name).c_str(), &info) == 0) bytes += static_cast<uint64_t>(info.st_size);
  }
  return bytes;
}

bool ReadAll(int fd, uint8_t* data, uint64_t size, uint64_t at) {
  while (size > 0) {
    const ssize_t got = pread(fd, data, size, static_cast<off_t>(at));
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      return false;
    }
    data += got;
    size -= static_cast<uint64_t>(got);
    at += static_cast<uint64_t>(got);
  }
  return true;
}

bool WriteAll(int fd, const uint8_t* data, uint64_t size) {
  while (size > 0) {
    const ssize_t put = write(fd, data, size);
    if (put <= 0) {
      if (put < 0 && errno == EINTR) continue;
      if (put == 0) errno = EIO;
      return false;
    }
    data += put;
    size -= static_cast<uint64_t>(put);
  }
  return true;
}

// Errors that say the cache directory cannot take more (as opposed to one
// entry's directory having been evicted by another process meanwhile).
bool DirectoryFault(int error) {
  return error == ENOSPC || error == EDQUOT || error == EFBIG || error == EROFS ||
         error == EACCES || error == EPERM || error == EIO;
}

int64_t MtimeNs(const struct stat& info) {
  return static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
}

uint64_t FreeBytes(const std::string& path) {
  struct statvfs info;
  if (statvfs(path.c_str(), &info) != 0) return 0;
  return static_cast<uint64_t>(info.f_bavail) * static_cast<uint64_t>(info.f_frsize);
}

}  // namespace

NodeCache::NodeCache(std::string dir, uint64_t limit, uint64_t floor)
    : root_(dir.empty() ? std::string() : dir + "/" + kLayout), limit_(limit), floor_(floor) {
  StartGuarding();
  struct rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    open_entries_ = std::clamp<size_t>(static_cast<size_t>(files.rlim_cur / 8), 64, 4096);
  } else {
    open_entries_ = 4096;
  }
  if (dir.empty()) return;
  if (!MakeDirs(dir) || !MakeDir(root_) || !MakeDir(root_ + "/objects")) {
    Disable("the cache directory " + dir + " cannot be used (" + strerror(errno) + ")");
    return;
  }
  const int fd = OpenTracked(root_ + "/usage", O_RDWR | O_CREAT);
  if (fd < 0) {
    Disable("the cache directory " + dir + " cannot be written (" + strerror(errno) + ")");
    return;
  }
  CloseTracked(fd);
  if (access(root_.c_str(), W_OK) != 0) {
    Disable("the cache directory " + dir + " cannot be written (" + strerror(errno) + ")");
    return;
  }
  enabled_ = true;
  if (limit_ == 0) limit_ = usage() + FreeBytes(root_) / 2;
}

NodeCache::~NodeCache() {
  StopGuarding();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const int fd : tracked_) close(fd);
  open_index_.clear();
  open_.clear();
}

void NodeCache::LockForFork() { mutex_.lock(); }

void NodeCache::UnlockInParent() { mutex_.unlock(); }

void NodeCache::ResetInChild() {
  // The parent's claims and locks stay the parent's: the child's copies of
  // their descriptors would otherwise keep them held after the parent lets go.
  for (const int fd : tracked_) close(fd);
  tracked_.clear();
  open_index_.clear();
  open_.clear();  // the child's copies of the entries' descriptors
  mutex_.unlock();
}

void NodeCache::Disable(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (warning_.empty()) {
    warning_ = reason + "; reads go to the store without the node cache";
  }
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

int NodeCache::OpenTracked(const std::string& path, int flags) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int fd = open(path.c_str(), flags | O_CLOEXEC, 0666);
  if (fd >= 0) tracked_.insert(fd);
  return fd;
}

void NodeCache::CloseTracked(int fd) {
  if (fd < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (tracked_.erase(fd) > 0) close(fd);
}

namespace {

// The usage file, held under an exclusive flock while it lives.
class UsageFile {
 public:
  UsageFile(int fd) : fd_(fd) {
    if (fd_ >= 0 && flock(fd_, LOCK_EX) != 0) fd_ = -1;
  }
  bool ok() const { return fd_ >= 0; }
  uint64_t Read() const {
    char text[32] = {};
    const ssize_t got = pread(fd_, text, sizeof(text) - 1, 0);
    if (got <= 0) return 0;
    return strtoull(text, nullptr, 10);
  }
  void Write(uint64_t bytes) const {
    char text[32];
    const int length =
        snprintf(text, sizeof(text), "%020llu\n", static_cast<unsigned long long>(bytes));
    if (pwrite(fd_, text, static_cast<size_t>(length), 0) != length) return;
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

uint64_t NodeCache::usage() {
  const int fd = OpenTracked(root_ + "/usage", O_RDWR | O_CREAT);
  UsageFile file(fd);
  const uint64_t bytes = file.ok() ? file.Read() : 0;
  if (file.ok()) flock(fd, LOCK_UN);
  CloseTracked(fd);
  return bytes;
}

bool NodeCache::Reserve(uint64_t bytes) {
  if (FreeBytes(root_) < bytes + floor_) return false;
  const int fd = OpenTracked(root_ + "/usage", O_RDWR | O_CREAT);
  UsageFile file(fd);
  bool fits = false;
  if (file.ok()) {
    uint64_t used = file.Read();
    if (used + bytes > limit_) {
      const uint64_t after = Evict(used + bytes - limit_, used);
      if (after != used) file.Write(after);
      used = after;
    }
    fits = used + bytes <= limit_;
    if (fits) file.Write(used + bytes);
    flock(fd, LOCK_UN);
  }
  CloseTracked(fd);
  return fits;
}

void NodeCache::Unreserve(uint64_t bytes) {
  const int fd = OpenTracked(root_ + "/usage", O_RDWR | O_CREAT);
  UsageFile file(fd);
  if (file.ok()) {
    const uint64_t used = file.Read();
    file.Write(used > bytes ? used - bytes : 0);
    flock(fd, LOCK_UN);
  }
  CloseTracked(fd);
}

uint64_t NodeCache::Evict(uint64_t needed, uint64_t used) {
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  if (now_ns < next_evict_ns_.load()) return used;
  next_evict_ns_ = now_ns + int64_t{30} * 1000000000;
  struct Candidate {
    int64_t used_ns = 0;
    std::string dir;
  };
  std::vector<Candidate> idle;
  const int64_t idle_before =
      static_cast<int64_t>(time(nullptr)) * 1000000000 - static_cast<int64_t>(kIdleSeconds * 1e9);
  // The whole cache is listed anyway: its true size replaces the usage
  // file's, which a process killed between reserving and writing leaves high.
  uint64_t actual = 0;
  const std::string objects = root_ + "/objects/";
  for (const std::string& url_dir : List(objects)) {
    for (const std::string& name : List(objects + url_dir)) {
      const std::string dir = objects + url_dir + "/" + name;
      actual += EntryBytes(dir);
      struct stat info;
      if (stat((dir + "/identity").c_str(), &info) == 0 && MtimeNs(info) < idle_before)
        idle.push_back({MtimeNs(info), dir});
    }
  }
  used = actual;
  std::sort(idle.begin(), idle.end(),
            [](const Candidate& a, const Candidate& b) { return a.used_ns < b.used_ns; });
  uint64_t freed = 0;
  for (const Candidate& candidate : idle) {
    if (freed >= needed) break;
    freed += RemoveObjectDir(candidate.dir);
  }
  return used > freed ? used - freed : 0;
}

bool NodeCache::Known(const std::string& url, std::string* version, uint64_t* size) {
  if (!enabled()) return false;
  const std::string url_dir = root_ + "/objects/" + Hex(HashOf(url));
  const std::string prefix = std::string(kLayout) + "\nurl " + url + "\nversion ";
  for (const std::string& name : List(url_dir)) {
    if (name[0] == '.') continue;
    const int fd = OpenTracked(url_dir + "/" + name + "/identity", O_RDONLY);
    if (fd < 0) continue;
    std::string text(prefix.size() + 4096, '\0');
    const ssize_t got = pread(fd, text.data(), text.size(), 0);
    CloseTracked(fd);
    if (got <= 0) continue;
    text.resize(static_cast<size_t>(got));
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
  if (!enabled()) return -1;
  const std::string url_dir = root_ + "/objects/" + Hex(HashOf(url));
  if (!MakeDir(url_dir)) return -1;
  const int fd = OpenTracked(url_dir + "/.lock", O_RDWR | O_CREAT);
  if (fd < 0) return -1;
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK || !wait || std::chrono::steady_clock::now() >= deadline) {
      CloseTracked(fd);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return fd;
}

void NodeCache::UnlockUrl(int fd) {
  if (fd < 0) return;
  flock(fd, LOCK_UN);
  CloseTracked(fd);
}

std::shared_ptr<NodeCache::Object> NodeCache::Open(const std::string& url,
                                                   const std::string& version, uint64_t size) {
  if (!enabled() || version.empty()) return nullptr;
  const std::string identity = std::string(kLayout) + "\nurl " + url + "\nversion " + version +
                               "\nsize " + std::to_string(size) + "\n";
  const std::string url_dir = root_ + "/objects/" + Hex(HashOf(url));
  const uint64_t key = HashOf(identity);
  const std::string name = Hex(key);
  if (!MakeDir(url_dir)) return nullptr;
  // Other versions of the object are never served again: their bytes go.
  uint64_t stale = 0;
  for (const std::string& other : List(url_dir)) {
    if (other != name && other[0] != '.') stale += RemoveObjectDir(url_dir + "/" + other);
  }
  if (stale > 0) Unreserve(stale);
  const std::string dir = url_dir + "/" + name;
  if (!MakeDir(dir)) return nullptr;
  const std::string identity_path = dir + "/identity";
  int fd = OpenTracked(identity_path, O_RDONLY);
  if (fd < 0) {
    const std::string temporary =
        dir + "/.tmp-" + std::to_string(getpid()) + "-" + std::to_string(serial_++);
    fd = OpenTracked(temporary, O_WRONLY | O_CREAT | O_EXCL);
    if (fd < 0) return nullptr;
    const bool written =
        WriteAll(fd, reinterpret_cast<const uint8_t*>(identity.data()), identity.size());
    CloseTracked(fd);
    if (!written || rename(temporary.c_str(), identity_path.c_str()) != 0) {
      unlink(temporary.c_str());
      return nullptr;
    }
    fd = OpenTracked(identity_path, O_RDONLY);
    if (fd < 0) return nullptr;
  }
  std::string stored(identity.size() + 1, '\0');
  const ssize_t got = pread(fd, stored.data(), stored.size(), 0);
  CloseTracked(fd);
  // Another identity with the same hash: not cached rather than confused.
  if (got != static_cast<ssize_t>(identity.size()) || stored.compare(0, identity.size(), identity))
    return nullptr;
  auto object = std::make_shared<Object>();
  object->dir = dir + "/";
  object->key = key;
  object->size = size;
  Touch(*object);
  Scan(*object, nullptr);
  return object;
}

void NodeCache::Touch(Object& object) {
  const auto now = std::chrono::steady_clock::now();
  if (now - object.touched < std::chrono::seconds(60)) return;
  object.touched = now;
  utimensat(AT_FDCWD, (object.dir + "identity").c_str(), nullptr, 0);
}

bool NodeCache::Scan(Object& object, std::vector<Claim>* claims) {
  DIR* handle = opendir(object.dir.c_str());
  if (handle == nullptr) return false;
  struct stat info;
  const int64_t mtime = fstat(dirfd(handle), &info) == 0 ? MtimeNs(info) : -1;
  std::map<uint64_t, Entry> entries;
  while (const dirent* item = readdir(handle)) {
    const char* name = item->d_name;
    const size_t length = strlen(name);
    uint64_t offset = 0;
    uint64_t size = 0;
    if (length < 33 || name[16] != '-' || !ParseHex(name, 16, &offset) ||
        !ParseHex(name + 17, 16, &size) || size == 0 || offset > object.size ||
        size > object.size - offset) {
      continue;
    }
    if (length == 33) {
      Entry& entry = entries[offset];
      entry.size = std::max(entry.size, size);
    } else if (claims != nullptr && name[33] == '-' &&
               strcmp(name + length - strlen(kClaimSuffix), kClaimSuffix) == 0) {
      claims->push_back({offset, size, name});
    }
  }
  closedir(handle);
  std::lock_guard<std::mutex> lock(mutex_);
  object.entries.swap(entries);
  object.scanned_mtime = mtime;
  return true;
}

NodeCache::OpenEntry::~OpenEntry() {
  if (map != nullptr) munmap(const_cast<uint8_t*>(map), map_bytes);
  if (fd >= 0) close(fd);
}

void NodeCache::ForgetOpen(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = open_index_.find(path);
  if (found == open_index_.end()) return;
  open_.erase(found->second);
  open_index_.erase(found);
}

std::shared_ptr<NodeCache::OpenEntry> NodeCache::OpenEntryAt(const std::string& path,
                                                             Object& object, uint64_t first,
                                                             const Entry& entry, bool* damaged) {
  *damaged = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = open_index_.find(path);
    if (found != open_index_.end()) {
      open_.splice(open_.end(), open_, found->second);
      return found->second->second;
    }
  }
  auto opened = std::make_shared<OpenEntry>();
  opened->fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (opened->fd < 0) return nullptr;
  const uint64_t header = HeaderBytes(entry.size);
  opened->header.resize(header);
  struct stat info;
  if (fstat(opened->fd, &info) != 0 || static_cast<uint64_t>(info.st_size) != header + entry.size ||
      !ReadAll(opened->fd, opened->header.data(), header, 0) ||
      memcmp(opened->header.data(), kMagic, 8) != 0 ||
      LoadLE64(opened->header.data() + 8) != object.key ||
      LoadLE64(opened->header.data() + 16) != first ||
      LoadLE64(opened->header.data() + 24) != entry.size) {
    *damaged = true;
    DropEntry(object, first, entry, opened.get());
    return nullptr;
  }
  void* map = mmap(nullptr, header + entry.size, PROT_READ, MAP_SHARED, opened->fd, 0);
  if (map != MAP_FAILED) {
    opened->map = static_cast<const uint8_t*>(map);
    opened->map_bytes = header + entry.size;
  }
  const uint64_t blocks = Blocks(entry.size);
  opened->verified = std::make_unique<std::atomic<bool>[]>(blocks);
  for (uint64_t block = 0; block < blocks; ++block) opened->verified[block] = false;
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = open_index_.find(path);
  if (found != open_index_.end()) return found->second->second;  // another thread's
  open_.emplace_back(path, opened);
  open_index_[path] = std::prev(open_.end());
  while (open_.size() > open_entries_) {
    open_index_.erase(open_.front().first);
    open_.pop_front();
  }
  return opened;
}

void NodeCache::DropEntry(Object& object, uint64_t first, const Entry& entry,
                          const OpenEntry* open) {
  ++dropped_;
  const std::string path = object.dir + EntryName(first, entry.size);
  ForgetOpen(path);
  // Only the damaged file goes: one another process placed since is whole.
  struct stat named;
  struct stat held;
  if (stat(path.c_str(), &named) == 0 &&
      (open == nullptr || (fstat(open->fd, &held) == 0 && held.st_ino == named.st_ino &&
                           held.st_dev == named.st_dev)) &&
      unlink(path.c_str()) == 0) {
    Unreserve(static_cast<uint64_t>(named.st_size));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = object.entries.find(first);
  if (found != object.entries.end() && found->second.size == entry.size)
    object.entries.erase(found);
}

bool NodeCache::CopyEntry(Object& object, uint64_t first, const Entry& entry, uint64_t offset,
                          uint64_t size, uint8_t* dst, bool mapped) {
  bool damaged = false;
  const std::shared_ptr<OpenEntry> opened =
      OpenEntryAt(object.dir + EntryName(first, entry.size), object, first, entry, &damaged);
  if (opened == nullptr) {
    if (!damaged) {
      // Evicted meanwhile: a miss, not damage.
      std::lock_guard<std::mutex> lock(mutex_);
      object.entries.erase(first);
    }
    return false;
  }
  // The blocks that hold the range and are not verified yet are read and
  // hashed whole: the range itself straight into `dst`, the rest of its
  // first and last blocks beside it, in one read.
  const uint64_t header = opened->header.size();
  const uint64_t within = offset - first;
  const uint64_t first_block = within / kBlockBytes;
  const uint64_t end_block = Blocks(within + size);
  const bool check_first = !opened->verified[first_block].load(std::memory_order_acquire);
  const bool check_last = !opened->verified[end_block - 1].load(std::memory_order_acquire);
  if (mapped && opened->map != nullptr) {
    bool verified = true;
    for (uint64_t block = first_block; verified && block < end_block; ++block)
      verified = opened->verified[block].load(std::memory_order_acquire);
    if (verified) {
      RangeRequest out;
      out.size = size;
      out.dst = dst;
      if (CopyFromMapping(opened->map + header + within, size, &out, 1)) {
        hit_bytes_ += size;
        return true;
      }
      DropEntry(object, first, entry, opened.get());  // truncated under its mapping
      return false;
    }
  }
  const uint64_t data_start = check_first ? first_block * kBlockBytes : within;
  const uint64_t data_end =
      check_last ? std::min(end_block * kBlockBytes, entry.size) : within + size;
  thread_local std::vector<uint8_t> before;
  thread_local std::vector<uint8_t> after;
  before.resize(within - data_start);
  after.resize(data_end - (within + size));
  iovec parts[3] = {{before.data(), before.size()}, {dst, size}, {after.data(), after.size()}};
  ssize_t got;
  do {
    got = preadv(opened->fd, parts, 3, static_cast<off_t>(header + data_start));
  } while (got < 0 && errno == EINTR);
  // A short read is a truncated entry (the kernel reads a regular file's
  // range whole when it holds it).
  bool good = got >= 0 && static_cast<uint64_t>(got) == data_end - data_start;
  for (uint64_t block = first_block; good && block < end_block; ++block) {
    if (opened->verified[block].load(std::memory_order_acquire)) continue;
    const uint64_t begin = block * kBlockBytes;
    const uint64_t end = std::min(begin + kBlockBytes, entry.size);
    Pieces pieces;
    if (begin < within) pieces.Append(before.data() + (begin - data_start), within - begin);
    const uint64_t from = std::max(begin, within);
    const uint64_t to = std::min(end, within + size);
    if (from < to) pieces.Append(dst + (from - within), to - from);
    if (end > within + size) {
      const uint64_t from_after = std::max(begin, within + size);
      pieces.Append(after.data() + (from_after - (within + size)), end - from_after);
    }
    good = RiegeliHash(pieces) == LoadLE64(opened->header.data() + kFixedHeader + 8 * block);
    if (good) opened->verified[block].store(true, std::memory_order_release);
  }
  if (!good) {
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
    auto it = object.entries.upper_bound(position);
    if (it == object.entries.begin()) return false;
    --it;
    if (it->first + it->second.size <= position) return false;
    position = it->first + it->second.size;
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
    // Entries beginning before the range may reach into it.
    while (it != object.entries.begin()) {
      auto before = std::prev(it);
      if (before->first + before->second.size <= offset) break;
      it = before;
      if (overlapping.size() > 4) break;
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
      gaps.push_back({position, next_start - position, dst + (position - offset), -1});
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
                                            bool wait) {
  std::vector<Gap> wanted{{offset, size, dst, -1, {}}};
  return Read(object, wanted, deadline, wait);
}

std::vector<NodeCache::Gap> NodeCache::Read(Object& object, const std::vector<Gap>& wanted,
                                            std::chrono::steady_clock::time_point deadline,
                                            bool wait) {
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
  bool waited = false;
  while (!gaps.empty()) {
    // What landed since the index was read, and who fetches the rest: under
    // the object's lock, so that two processes never claim the same bytes.
    const int lock_fd = OpenTracked(object.dir + ".lock", O_RDWR | O_CREAT);
    if (lock_fd < 0 || flock(lock_fd, LOCK_EX) != 0) {
      CloseTracked(lock_fd);
      result.insert(result.end(), gaps.begin(), gaps.end());
      break;
    }
    std::vector<Claim> claims;
    Scan(object, &claims);
    std::vector<Gap> rest;
    for (const Gap& gap : gaps) {
      std::vector<Gap> pieces = CopyHeld(object, gap.offset, gap.size, gap.dst);
      rest.insert(rest.end(), pieces.begin(), pieces.end());
    }
    std::vector<Gap> waiting;
    std::vector<int> busy;  // claims waited for, opened to watch their locks
    for (Gap& gap : rest) {
      bool claimed_by_other = false;
      for (const Claim& claim : claims) {
        if (claim.offset >= gap.offset + gap.size || gap.offset >= claim.offset + claim.size)
          continue;
        const int fd = OpenTracked(object.dir + claim.name, O_RDONLY);
        if (fd < 0) continue;  // released meanwhile
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
          // Its process died mid-fetch: nobody will finish it.
          unlink((object.dir + claim.name).c_str());
          CloseTracked(fd);
          continue;
        }
        claimed_by_other = true;
        busy.push_back(fd);
      }
      if (claimed_by_other) {
        waiting.push_back(gap);
        continue;
      }
      const std::string name = EntryName(gap.offset, gap.size) + "-" + std::to_string(getpid()) +
                               "-" + std::to_string(serial_++) + kClaimSuffix;
      const int fd = OpenTracked(object.dir + name, O_RDWR | O_CREAT | O_EXCL);
      if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) {
        gap.claim_fd = fd;
        gap.claim = object.dir + name;
      } else {
        CloseTracked(fd);
        unlink((object.dir + name).c_str());
      }
      result.push_back(gap);
    }
    flock(lock_fd, LOCK_UN);
    CloseTracked(lock_fd);
    gaps.clear();
    if (!waiting.empty() && (!wait || std::chrono::steady_clock::now() >= deadline)) {
      for (Gap& gap : waiting) gap.claim_fd = wait ? -1 : -2;
      result.insert(result.end(), waiting.begin(), waiting.end());
      waiting.clear();
    }
    if (!waiting.empty()) {
      if (!waited) ++waits_;
      waited = true;
      // Until each claim is let go (its bytes landed, or its fetch gave up).
      for (const int fd : busy) {
        while (flock(fd, LOCK_SH | LOCK_NB) != 0 && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      gaps.swap(waiting);
    }
    // The waited-for ranges go round again: read from what landed, or claimed.
    for (const int fd : busy) CloseTracked(fd);
  }
  return result;
}

void NodeCache::Release(const Gap& gap) {
  if (gap.claim_fd < 0) return;
  // Gone before its lock is let go: whoever waits on it then finds the entry.
  // Removed under the object's lock, so that a process listing the directory
  // (under that lock) sees the claim or, placed before it went, the entry:
  // a listing that runs beside a removal may miss either.
  const int lock_fd =
      OpenTracked(gap.claim.substr(0, gap.claim.rfind('/') + 1) + ".lock", O_RDWR | O_CREAT);
  const bool locked = lock_fd >= 0 && flock(lock_fd, LOCK_EX) == 0;
  unlink(gap.claim.c_str());
  if (locked) flock(lock_fd, LOCK_UN);
  CloseTracked(lock_fd);
  flock(gap.claim_fd, LOCK_UN);
  CloseTracked(gap.claim_fd);
}

uint64_t NodeCache::EntryFileBytes(uint64_t size) { return HeaderBytes(size) + size; }

bool NodeCache::ReserveBytes(uint64_t bytes) { return enabled() && Reserve(bytes); }

void NodeCache::UnreserveBytes(uint64_t bytes) { Unreserve(bytes); }

void NodeCache::Store(Object& object, uint64_t offset, uint64_t size, const uint8_t* data,
                      bool reserved) {
  if (!enabled() || size == 0) {
    if (reserved) Unreserve(EntryFileBytes(size));
    return;
  }
  const uint64_t header = HeaderBytes(size);
  const uint64_t bytes = header + size;
  if (!reserved && !Reserve(bytes)) return;
  std::vector<uint8_t> head(header);
  std::memcpy(head.data(), kMagic, 8);
  StoreLE64(head.data() + 8, object.key);
  StoreLE64(head.data() + 16, offset);
  StoreLE64(head.data() + 24, size);
  for (uint64_t block = 0; block < Blocks(size); ++block) {
    const uint64_t at = block * kBlockBytes;
    StoreLE64(head.data() + kFixedHeader + 8 * block,
              RiegeliHash(data + at, std::min(kBlockBytes, size - at)));
  }
  const std::string temporary =
      object.dir + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(serial_++);
  const std::string path = object.dir + EntryName(offset, size);
  const int fd = OpenTracked(temporary, O_WRONLY | O_CREAT | O_EXCL);
  bool written = fd >= 0 && WriteAll(fd, head.data(), head.size()) && WriteAll(fd, data, size);
  const int error = errno;
  CloseTracked(fd);
  bool placed = false;
  int place_error = 0;
  if (written) {
    // Never over an entry already there: its bytes are counted once.
    placed = renameat2(AT_FDCWD, temporary.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) == 0;
    if (!placed && (errno == EINVAL || errno == ENOSYS)) {
      placed = link(temporary.c_str(), path.c_str()) == 0;
    }
    place_error = placed ? 0 : errno;
  }
  if (!placed) unlink(temporary.c_str());
  if (!placed) {
    Unreserve(bytes);
    if (!written && DirectoryFault(error)) {
      Disable(std::string("writing to the node cache failed (") + strerror(error) + ")");
    } else if (written && place_error != EEXIST && DirectoryFault(place_error)) {
      Disable(std::string("writing to the node cache failed (") + strerror(place_error) + ")");
    }
  } else {
    stored_bytes_ += size;
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& entry = object.entries[offset];
    entry.size = std::max(entry.size, size);
  }
}

}  // namespace sdsl
