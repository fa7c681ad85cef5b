// Files of the node cache, opened and removed only relative to directory
// descriptors: the cache lives where other processes (and, misconfigured,
// other users) can reach it, so nothing found there is trusted. No link is
// followed or deleted through, only regular files and directories are
// opened, opens never block (a FIFO planted as an entry fails at once), and
// every directory must belong to this user and be writable by no one else,
// as OpenSSH's StrictModes asks of ~/.ssh.
#ifndef SDS_LOADER_SOURCES_CACHE_FILES_H_
#define SDS_LOADER_SOURCES_CACHE_FILES_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace sdsl {

// A descriptor closed when the last holder lets go.
class CacheFd {
 public:
  explicit CacheFd(int fd) : fd_(fd) {}
  ~CacheFd();
  CacheFd(const CacheFd&) = delete;
  CacheFd& operator=(const CacheFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};
using SharedDir = std::shared_ptr<const CacheFd>;

// Why a directory may not hold cache files, or "" when it may: it must be a
// directory owned by this process's user and writable by no other.
std::string UntrustedDirReason(int dir_fd);

// Opens (creating it 0700 when `create`) the directory `name` under
// `parent`, never through a link, and checks it with UntrustedDirReason.
// Null with `why` set on failure.
SharedDir OpenDirAt(int parent, const std::string& name, bool create, std::string* why);

// Opens the directory the user named, creating it and missing parents
// 0700: links above it are followed (the user's own path), the directory
// itself is refused if it is a link.
SharedDir OpenRootDir(const std::string& path, std::string* why);

// Opens `name` under `dir` as a regular file: O_NOFOLLOW and O_NONBLOCK,
// and anything but a regular file is refused (errno ELOOP or EINVAL).
// Created 0600 with O_CREAT. -1 on failure.
int OpenFileAt(int dir, const std::string& name, int flags);

// The names in `dir` other than "." and "..".
std::vector<std::string> ListDir(int dir);

// What a name in `dir` is, without following a link: its type and size.
struct NameInfo {
  bool exists = false;
  bool regular = false;
  bool directory = false;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  dev_t dev = 0;
  ino_t ino = 0;
};
NameInfo InfoAt(int dir, const std::string& name);

// Removes `name` from `dir` (a link is removed itself, never its target);
// true when this call removed it.
bool UnlinkAt(int dir, const std::string& name);

// Removes the directory `name` under `parent` and every file in it, links
// included, without following any; a subdirectory is left (the cache makes
// none below an object). Returns the bytes of the regular files this call
// removed: two processes removing one directory count each file once.
uint64_t RemoveDirAt(int parent, const std::string& name, bool (*counted)(const std::string&));

// Descriptors of lock files and claims, noted so that a forked child closes
// its copies: a child holding them would keep the parent's locks held.
class TrackedFds {
 public:
  int Open(int dir, const std::string& name, int flags);
  void Close(int fd);
  void LockForFork() { mutex_.lock(); }
  void UnlockInParent() { mutex_.unlock(); }
  void CloseAllInChild();
  ~TrackedFds();

 private:
  std::mutex mutex_;
  std::set<int> fds_;
};

// What the cache does where a filesystem lacks a feature it relies on. NFS
// emulates flock with per-process POSIX locks, and older NFS servers have
// no RENAME_NOREPLACE; set by the tests to run a local directory as such a
// filesystem would (`posix_locks` then takes fcntl locks, which are per
// process, exactly as NFS's flock is).
struct CacheFilesystemFaults {
  bool no_rename_noreplace = false;
  bool posix_locks = false;
};
CacheFilesystemFaults& CacheFaults();

// A whole-file lock between processes (flock, or with posix_locks an fcntl
// lock). Threads of one process are kept apart by the callers' mutexes:
// neither lock tells two descriptors of one process apart on NFS.
bool LockFile(int fd, bool exclusive, bool wait);
void UnlockFile(int fd);

// Places the file `from` as `to` (both in `dir`) unless `to` exists; the
// temporary name is gone afterwards whatever happened. Returns 0 or errno
// (EEXIST when `to` was there).
int PlaceFile(int dir, const std::string& from, const std::string& to);

bool ReadAllAt(int fd, uint8_t* data, uint64_t size, uint64_t at);
bool WriteAll(int fd, const uint8_t* data, uint64_t size);

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_CACHE_FILES_H_
