#include "sources/cache_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sdsl {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

int64_t MtimeNs(const struct stat& info) {
  return static_cast<int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
}

}  // namespace

CacheFd::~CacheFd() {
  if (fd_ >= 0) close(fd_);
}

std::string UntrustedDirReason(int dir_fd) {
  struct stat info;
  if (fstat(dir_fd, &info) != 0)
    return std::string("it cannot be examined (") + strerror(errno) + ")";
  if (!S_ISDIR(info.st_mode)) return "it is not a directory";
  if (info.st_uid != geteuid()) {
    return "it belongs to user " + std::to_string(info.st_uid) + ", not to this user (" +
           std::to_string(geteuid()) + ")";
  }
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) return "other users may write to it";
  return "";
}

SharedDir OpenDirAt(int parent, const std::string& name, bool create, std::string* why) {
  if (create && mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST) {
    *why = std::string("cannot be created (") + strerror(errno) + ")";
    return nullptr;
  }
  const int fd = openat(parent, name.c_str(), kDirFlags);
  if (fd < 0) {
    *why = errno == ELOOP || errno == ENOTDIR
               ? std::string("is a link or not a directory")
               : std::string("cannot be opened (") + strerror(errno) + ")";
    return nullptr;
  }
  auto dir = std::make_shared<const CacheFd>(fd);
  const std::string reason = UntrustedDirReason(fd);
  if (!reason.empty()) {
    *why = reason;
    return nullptr;
  }
  return dir;
}

SharedDir OpenRootDir(const std::string& path, std::string* why) {
  // Missing components are made private; existing ones are left as they are.
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string parent = path.substr(0, slash);
    if (mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) {
      *why = "cannot be created (" + parent + ": " + strerror(errno) + ")";
      return nullptr;
    }
  }
  // The directories above it are the user's path; the directory itself is
  // not followed if it is a link, as a dataset's root is not.
  return OpenDirAt(AT_FDCWD, path, /*create=*/true, why);
}

int OpenFileAt(int dir, const std::string& name, int flags) {
  const int fd = openat(dir, name.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

std::vector<std::string> ListDir(int dir) {
  std::vector<std::string> names;
  const int copy = openat(dir, ".", kDirFlags);
  if (copy < 0) return names;
  DIR* handle = fdopendir(copy);
  if (handle == nullptr) {
    close(copy);
    return names;
  }
  while (const dirent* item = readdir(handle)) {
    if (strcmp(item->d_name, ".") == 0 || strcmp(item->d_name, "..") == 0) continue;
    names.emplace_back(item->d_name);
  }
  closedir(handle);
  return names;
}

NameInfo InfoAt(int dir, const std::string& name) {
  NameInfo result;
  struct stat info;
  if (fstatat(dir, name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) return result;
  result.exists = true;
  result.regular = S_ISREG(info.st_mode);
  result.directory = S_ISDIR(info.st_mode);
  result.size = static_cast<uint64_t>(info.st_size);
  result.mtime_ns = MtimeNs(info);
  result.dev = info.st_dev;
  result.ino = info.st_ino;
  return result;
}

bool UnlinkAt(int dir, const std::string& name) { return unlinkat(dir, name.c_str(), 0) == 0; }

uint64_t RemoveDirAt(int parent, const std::string& name, bool (*counted)(const std::string&)) {
  const int fd = openat(parent, name.c_str(), kDirFlags);
  if (fd < 0) {
    // A link (or anything else) planted in a directory's place goes itself.
    if (errno == ELOOP || errno == ENOTDIR) UnlinkAt(parent, name);
    return 0;
  }
  CacheFd dir(fd);
  uint64_t bytes = 0;
  for (const std::string& item : ListDir(fd)) {
    const NameInfo info = InfoAt(fd, item);
    if (!info.exists || info.directory) continue;
    if (UnlinkAt(fd, item) && info.regular && counted(item)) bytes += info.size;
  }
  unlinkat(parent, name.c_str(), AT_REMOVEDIR);
  return bytes;
}

int TrackedFds::Open(int dir, const std::string& name, int flags) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int fd = OpenFileAt(dir, name, flags);
  if (fd >= 0) fds_.insert(fd);
  return fd;
}

void TrackedFds::Close(int fd) {
  if (fd < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (fds_.erase(fd) > 0) close(fd);
}

void TrackedFds::CloseAllInChild() {
  for (const int fd : fds_) close(fd);
  fds_.clear();
  mutex_.unlock();
}

TrackedFds::~TrackedFds() {
  for (const int fd : fds_) close(fd);
}

CacheFilesystemFaults& CacheFaults() {
  static CacheFilesystemFaults faults;
  return faults;
}

bool LockFile(int fd, bool exclusive, bool wait) {
  if (fd < 0) return false;
  if (CacheFaults().posix_locks) {
    struct flock range = {};
    range.l_type = static_cast<short>(exclusive ? F_WRLCK : F_RDLCK);
    range.l_whence = SEEK_SET;
    int done;
    do {
      done = fcntl(fd, wait ? F_SETLKW : F_SETLK, &range);
    } while (done != 0 && errno == EINTR);
    if (done != 0 && (errno == EACCES || errno == EAGAIN)) errno = EWOULDBLOCK;
    return done == 0;
  }
  int done;
  do {
    done = flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB));
  } while (done != 0 && errno == EINTR);
  return done == 0;
}

void UnlockFile(int fd) {
  if (fd < 0) return;
  if (CacheFaults().posix_locks) {
    struct flock range = {};
    range.l_type = F_UNLCK;
    range.l_whence = SEEK_SET;
    fcntl(fd, F_SETLK, &range);
    return;
  }
  flock(fd, LOCK_UN);
}

int PlaceFile(int dir, const std::string& from, const std::string& to) {
  int error = 0;
  bool fallback = CacheFaults().no_rename_noreplace;
  if (!fallback) {
    if (renameat2(dir, from.c_str(), dir, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
    error = errno;
    fallback = error == EINVAL || error == ENOSYS;
  }
  if (fallback) {
    // link() refuses an existing name, as RENAME_NOREPLACE does; the
    // temporary name then goes, placed or not.
    error = linkat(dir, from.c_str(), dir, to.c_str(), 0) == 0 ? 0 : errno;
  }
  UnlinkAt(dir, from);
  return error;
}

bool ReadAllAt(int fd, uint8_t* data, uint64_t size, uint64_t at) {
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
      if (put < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (put == 0) errno = EIO;
      return false;
    }
    data += put;
    size -= static_cast<uint64_t>(put);
  }
  return true;
}

}  // namespace sdsl
