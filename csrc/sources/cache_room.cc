#include "sources/cache_room.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "sources/cache_entry.h"

namespace sdsl {
namespace {

constexpr char kUsage[] = "usage";

uint64_t FreeBytes(int dir) {
  struct statvfs info;
  if (fstatvfs(dir, &info) != 0) return 0;
  return static_cast<uint64_t>(info.f_bavail) * static_cast<uint64_t>(info.f_frsize);
}

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The usage file, open and locked while this lives.
class LockedUsage {
 public:
  LockedUsage(TrackedFds* fds, int root)
      : fds_(fds), fd_(fds->Open(root, kUsage, O_RDWR | O_CREAT)) {
    if (fd_ >= 0 && !LockFile(fd_, /*exclusive=*/true, /*wait=*/true)) {
      fds_->Close(fd_);
      fd_ = -1;
    }
  }
  ~LockedUsage() {
    if (fd_ < 0) return;
    UnlockFile(fd_);
    fds_->Close(fd_);
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

 private:
  TrackedFds* fds_;
  int fd_;
};

}  // namespace

std::recursive_mutex& CacheRoom::ThreadsOfThisProcess() {
  static std::recursive_mutex* threads = new std::recursive_mutex();  // outlives every cache
  return *threads;
}

void CacheRoom::ResetInChild() {
  // Taken by the forking thread, once a cache: the child starts it afresh.
  new (&ThreadsOfThisProcess()) std::recursive_mutex();
}

bool OrphanedTemporary(int64_t pid, double age_s) {
  // Any process's file this old is abandoned (entries are written in well
  // under a second); a younger one only when its process is gone here. A
  // PID from another machine sharing the directory is only judged by age.
  if (age_s > CacheRoom::kIdleSeconds) return true;
  if (pid <= 0 || pid == getpid() || age_s < 10) return false;
  return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

CacheRoom::CacheRoom(TrackedFds* fds, SharedDir root, SharedDir objects, uint64_t limit,
                     uint64_t floor)
    : fds_(fds),
      root_(std::move(root)),
      objects_(std::move(objects)),
      limit_(limit),
      floor_(floor) {
  // Anything but a regular file in the usage file's place (a link planted
  // there, a FIFO) is not the cache's: it goes, unfollowed, and a usage file
  // is made afresh (the next eviction pass counts what the cache holds).
  const NameInfo found = InfoAt(root_->get(), kUsage);
  if (found.exists && !found.regular) UnlinkAt(root_->get(), kUsage);
  {
    LockedUsage usage(fds_, root_->get());
    usable_ = usage.ok();
  }
  if (usable_ && limit_ == 0) limit_ = Usage() + FreeBytes(root_->get()) / 2;
}

uint64_t CacheRoom::Usage() {
  std::lock_guard<std::recursive_mutex> lock(ThreadsOfThisProcess());
  LockedUsage usage(fds_, root_->get());
  return usage.ok() ? usage.Read() : 0;
}

bool CacheRoom::Reserve(uint64_t bytes, const std::function<bool()>& create) {
  if (FreeBytes(root_->get()) < bytes + floor_) return false;
  std::lock_guard<std::recursive_mutex> lock(ThreadsOfThisProcess());
  LockedUsage usage(fds_, root_->get());
  if (!usage.ok()) return false;
  uint64_t used = usage.Read();
  if (used + bytes > limit_) {
    const uint64_t after = Evict(used + bytes - limit_, used);
    if (after != used) usage.Write(after);
    used = after;
  }
  if (used + bytes > limit_ || !create()) return false;
  usage.Write(used + bytes);
  return true;
}

void CacheRoom::Release(const std::function<uint64_t()>& remove) {
  std::lock_guard<std::recursive_mutex> lock(ThreadsOfThisProcess());
  LockedUsage usage(fds_, root_->get());
  const uint64_t removed = remove();
  if (!usage.ok() || removed == 0) return;
  const uint64_t used = usage.Read();
  usage.Write(used > removed ? used - removed : 0);
}

uint64_t CacheRoom::Evict(uint64_t needed, uint64_t used) {
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  if (now_ns < next_evict_ns_.load()) return used;
  next_evict_ns_ = now_ns + int64_t{30} * 1000000000;
  struct Candidate {
    int64_t used_ns = 0;
    SharedDir url_dir;
    std::string name;
  };
  std::vector<Candidate> idle;
  const int64_t wall_ns = WallNs();
  const int64_t idle_before = wall_ns - static_cast<int64_t>(kIdleSeconds * 1e9);
  // The whole cache is listed anyway: its true size replaces the usage
  // file's, which a process killed between reserving and placing leaves high.
  uint64_t actual = 0;
  const int objects = objects_->get();
  for (const std::string& url_name : ListDir(objects)) {
    std::string why;
    SharedDir url_dir = OpenDirAt(objects, url_name, /*create=*/false, &why);
    if (url_dir == nullptr) {
      // Not a directory of this user's (a link, a FIFO, a file): not the cache's.
      if (!InfoAt(objects, url_name).directory) UnlinkAt(objects, url_name);
      continue;
    }
    for (const std::string& name : ListDir(url_dir->get())) {
      if (name[0] == '.') continue;
      SharedDir dir = OpenDirAt(url_dir->get(), name, /*create=*/false, &why);
      if (dir == nullptr) {
        if (!InfoAt(url_dir->get(), name).directory) UnlinkAt(url_dir->get(), name);
        continue;
      }
      for (const std::string& item : ListDir(dir->get())) {
        const CacheName parsed = ParseCacheName(item);
        if (parsed.kind != CacheName::kEntry && parsed.kind != CacheName::kTemporary) continue;
        const NameInfo info = InfoAt(dir->get(), item);
        if (!info.regular) continue;
        if (parsed.kind == CacheName::kTemporary &&
            OrphanedTemporary(parsed.pid, static_cast<double>(wall_ns - info.mtime_ns) / 1e9) &&
            UnlinkAt(dir->get(), item)) {
          continue;
        }
        actual += info.size;
      }
      const NameInfo identity = InfoAt(dir->get(), "identity");
      if (identity.regular && identity.mtime_ns < idle_before)
        idle.push_back({identity.mtime_ns, url_dir, name});
    }
  }
  used = actual;
  std::sort(idle.begin(), idle.end(),
            [](const Candidate& a, const Candidate& b) { return a.used_ns < b.used_ns; });
  uint64_t freed = 0;
  for (const Candidate& candidate : idle) {
    if (freed >= needed) break;
    freed += RemoveDirAt(candidate.url_dir->get(), candidate.name, CountedCacheFile);
  }
  return used > freed ? used - freed : 0;
}

}  // namespace sdsl
