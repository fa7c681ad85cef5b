#include "sources/cache_claims.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <set>
#include <thread>

#include "sources/cache_entry.h"

namespace sdsl {
namespace {

constexpr char kLock[] = ".lock";

// This process's live claims, and URLs it holds the lock of, by name.
struct ProcessTable {
  std::mutex mutex;
  std::set<std::string> claims;
  std::set<uint64_t> urls;
  // Threads of this process take an object's lock one at a time (per stripe).
  std::mutex objects[64];
};

ProcessTable& Table() {
  static ProcessTable* table = new ProcessTable();  // outlives every cache
  return *table;
}

std::atomic<uint64_t> next_instance{0};

}  // namespace

CacheClaims::CacheClaims(TrackedFds* fds) : fds_(fds), instance_(next_instance++) {}

std::string CacheClaims::UniqueSuffix() {
  return std::to_string(getpid()) + "-" + std::to_string(instance_) + "-" +
         std::to_string(serial_++);
}

CacheClaims::ObjectLock::ObjectLock(CacheClaims* claims, const SharedDir& dir, uint64_t key)
    : claims_(claims), threads_(Table().objects[key % 64]) {
  fd_ = claims_->fds_->Open(dir->get(), kLock, O_RDWR | O_CREAT);
  if (fd_ >= 0 && !LockFile(fd_, /*exclusive=*/true, /*wait=*/true)) {
    claims_->fds_->Close(fd_);
    fd_ = -1;
  }
}

CacheClaims::ObjectLock::~ObjectLock() {
  if (fd_ < 0) return;
  UnlockFile(fd_);
  claims_->fds_->Close(fd_);
}

bool CacheClaims::Make(const SharedDir& dir, uint64_t offset, uint64_t size, CacheClaim* claim) {
  const std::string name = EntryName(offset, size) + "-" + UniqueSuffix() + kClaimSuffix;
  const int fd = fds_->Open(dir->get(), name, O_RDWR | O_CREAT | O_EXCL);
  if (fd < 0) return false;
  if (!LockFile(fd, /*exclusive=*/true, /*wait=*/false)) {
    fds_->Close(fd);
    UnlinkAt(dir->get(), name);
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(Table().mutex);
    Table().claims.insert(name);
  }
  claim->dir = dir;
  claim->name = name;
  claim->fd = fd;
  return true;
}

void CacheClaims::Release(const CacheClaim& claim, uint64_t key) {
  if (claim.fd < 0) return;
  {
    // Gone before its lock is let go: whoever waits on it then finds the entry.
    ObjectLock lock(this, claim.dir, key);
    UnlinkAt(claim.dir->get(), claim.name);
  }
  {
    std::lock_guard<std::mutex> lock(Table().mutex);
    Table().claims.erase(claim.name);
  }
  UnlockFile(claim.fd);
  fds_->Close(claim.fd);
}

bool CacheClaims::Alive(const SharedDir& dir, const std::string& name, int* watch) {
  *watch = -1;
  const CacheName parsed = ParseCacheName(name);
  if (parsed.pid == getpid()) {
    std::lock_guard<std::mutex> lock(Table().mutex);
    if (Table().claims.count(name) > 0) return true;
    // A claim of this PID not in the table: left by a process that had
    // this PID before, or a forked parent's copy; nobody fetches it.
    UnlinkAt(dir->get(), name);
    return false;
  }
  const int fd = fds_->Open(dir->get(), name, O_RDONLY);
  if (fd < 0) {
    // Released meanwhile, or not a regular file (junk in the cache's place).
    if (errno == EINVAL || errno == ELOOP) UnlinkAt(dir->get(), name);
    return false;
  }
  if (LockFile(fd, /*exclusive=*/false, /*wait=*/false)) {
    // Its process died mid-fetch: nobody will finish it.
    UnlockFile(fd);
    UnlinkAt(dir->get(), name);
    fds_->Close(fd);
    return false;
  }
  *watch = fd;
  return true;
}

bool CacheClaims::Held(const std::string& name, int watch) {
  if (watch < 0) {
    std::lock_guard<std::mutex> lock(Table().mutex);
    return Table().claims.count(name) > 0;
  }
  if (!LockFile(watch, /*exclusive=*/false, /*wait=*/false)) return true;
  UnlockFile(watch);
  return false;
}

int CacheClaims::LockUrl(const SharedDir& dir, uint64_t key, bool wait,
                         std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(Table().mutex);
      if (Table().urls.insert(key).second) break;
    }
    if (!wait || std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const int fd = fds_->Open(dir->get(), kLock, O_RDWR | O_CREAT);
  while (fd >= 0) {
    if (LockFile(fd, /*exclusive=*/true, /*wait=*/false)) return fd;
    if (errno != EWOULDBLOCK || !wait || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  fds_->Close(fd);
  std::lock_guard<std::mutex> lock(Table().mutex);
  Table().urls.erase(key);
  return -1;
}

void CacheClaims::UnlockUrl(int fd, uint64_t key) {
  if (fd < 0) return;
  UnlockFile(fd);
  fds_->Close(fd);
  std::lock_guard<std::mutex> lock(Table().mutex);
  Table().urls.erase(key);
}

void CacheClaims::ResetInChild() {
  ProcessTable& table = Table();
  new (&table.mutex) std::mutex();
  table.claims.clear();
  table.urls.clear();
  for (std::mutex& stripe : table.objects) new (&stripe) std::mutex();
}

}  // namespace sdsl
