#include "sources/local_object.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#endif

#include <atomic>
#include <cstring>

#include "base/reader_error.h"

namespace sdsl {
namespace {

// Directories are walked without following links; the object is opened
// without following one and without blocking on a FIFO or a device.
constexpr int kDirectoryFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
constexpr int kObjectFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;

[[noreturn]] void Refused(const std::string& what, const std::string& path, int error) {
  throw ReaderError(ErrorKind::kIo,
                    "cannot open " + what + " " + path + ": " + std::strerror(error), error);
}

[[noreturn]] void Unsafe(const std::string& message) { Fail(ErrorKind::kUnsafePath, message); }

// Closes a descriptor when it goes out of scope, unless released.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// The part of `path` below `root`, or "" when `path` is not below it.
std::string BelowRoot(const std::string& path, const std::string& root) {
  if (root.empty()) return "";
  std::string base = root;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  if (path.size() <= base.size() + 1 || path.compare(0, base.size(), base) != 0 ||
      path[base.size()] != '/') {
    return "";
  }
  return path.substr(base.size() + 1);
}

// Opens every directory of `relative` but its last component, below the
// open directory `at`, refusing links. Returns the last directory's descriptor.
int WalkDirectories(int at, const std::string& relative, const std::string& path,
                    std::string* name) {
  Descriptor current(::dup(at));
  if (current.get() < 0) Refused("the directory of", path, errno);
  size_t begin = 0;
  for (size_t slash; (slash = relative.find('/', begin)) != std::string::npos; begin = slash + 1) {
    const std::string component = relative.substr(begin, slash - begin);
    if (component.empty() || component == ".") continue;
    if (component == "..") Unsafe("path " + path + " leaves its dataset's root through '..'");
    const int child = ::openat(current.get(), component.c_str(), kDirectoryFlags);
    if (child < 0) {
      const int error = errno;
      if (error == ELOOP || error == ENOTDIR) {
        Unsafe("symbolic links are not allowed in dataset paths: " + component + " (in " + path +
               ", which a dataset must hold as a directory, not a link)");
      }
      Refused("the directory of", path, error);
    }
    current.reset(child);
  }
  *name = relative.substr(begin);
  return current.release();
}

// Whether `relative` has a ".." component, which the walk refuses by name.
bool ClimbsUp(const std::string& relative) {
  for (size_t begin = 0;;) {
    const size_t slash = relative.find('/', begin);
    const size_t end = slash == std::string::npos ? relative.size() : slash;
    if (end - begin == 2 && relative.compare(begin, 2, "..") == 0) return true;
    if (slash == std::string::npos) return false;
    begin = slash + 1;
  }
}

// Set once openat2 is known to be missing (ENOSYS: an older kernel, or a
// seccomp filter that does not know it), so that it is not tried again.
std::atomic<bool> no_openat2{false};

// `relative` below the directory `at` in one system call, links refused in
// every component; -1 when it fails for any reason, which the walk then
// names (or, if the file changed meanwhile, opens).
int OpenBeneath(int at, const std::string& relative) {
#if defined(SYS_openat2) && defined(RESOLVE_NO_SYMLINKS)
  if (no_openat2.load(std::memory_order_relaxed) || ClimbsUp(relative)) return -1;
  open_how how{};
  how.flags = static_cast<uint64_t>(kObjectFlags);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
  const long fd = ::syscall(SYS_openat2, at, relative.c_str(), &how, sizeof(how));
  if (fd < 0 && errno == ENOSYS) no_openat2.store(true, std::memory_order_relaxed);
  return static_cast<int>(fd);
#else
  (void)at;
  (void)relative;
  return -1;
#endif
}

// `relative` below the directory `at`, walked a component at a time.
int OpenWalking(int at, const std::string& relative, const std::string& path) {
  std::string name;
  Descriptor directory(WalkDirectories(at, relative, path, &name));
  const int object = ::openat(directory.get(), name.c_str(), kObjectFlags);
  if (object < 0) {
    const int error = errno;
    if (error == ELOOP) {
      Unsafe("local object is not a regular file: " + path +
             " is a symbolic link, and a dataset's shards must be its own files");
    }
    Refused("shard", path, error);
  }
  return object;
}

// The opened object, once it is known to be a regular file, with blocking
// reads and its size.
int Ready(Descriptor& object, const std::string& path, uint64_t* size) {
  struct stat info;
  if (::fstat(object.get(), &info) != 0) Refused("shard", path, errno);
  if (!S_ISREG(info.st_mode)) {
    Unsafe("local object is not a regular file: " + path +
           " (a FIFO, device, socket or directory); a dataset's shards are regular files");
  }
  // Reads block as usual: O_NONBLOCK was only for the open, and the only
  // status flag it was opened with.
  (void)::fcntl(object.get(), F_SETFL, 0);
  *size = static_cast<uint64_t>(info.st_size);
  return object.release();
}

}  // namespace

LocalObjects::~LocalObjects() {
  const int fd = root_fd_.load(std::memory_order_acquire);
  if (fd >= 0) ::close(fd);
}

int LocalObjects::Root() const {
  const int kept = root_fd_.load(std::memory_order_acquire);
  if (kept >= 0) return kept;
  const int opened = ::open(root_.c_str(), kDirectoryFlags);
  if (opened < 0) return -1;
  int expected = -1;
  if (root_fd_.compare_exchange_strong(expected, opened, std::memory_order_acq_rel)) return opened;
  ::close(opened);  // another thread's open was kept first
  return expected;
}

int LocalObjects::Open(const std::string& path, uint64_t* size) const {
  const std::string relative = BelowRoot(path, root_);
  if (relative.empty()) {
    // Not below the root: opened as signal_dataset's reader opens it, by path.
    Descriptor object(::open(path.c_str(), kObjectFlags & ~O_NOFOLLOW));
    if (object.get() < 0) Refused("shard", path, errno);
    return Ready(object, path, size);
  }
  const int root = Root();
  if (root < 0) Refused("the dataset root of", path, errno);
  Descriptor object(OpenBeneath(root, relative));
  if (object.get() < 0) object.reset(OpenWalking(root, relative, path));
  return Ready(object, path, size);
}

void CheckDeclaredSize(const std::string& name, uint64_t observed, int64_t declared) {
  if (declared < 0 || observed == static_cast<uint64_t>(declared)) return;
  Corrupt("shard " + name + " holds " + std::to_string(observed) +
          " bytes where the manifest that names it declares " + std::to_string(declared) +
          "; the object it points at is not the one that was published");
}

}  // namespace sdsl
