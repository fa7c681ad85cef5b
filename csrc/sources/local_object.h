// The one rule for opening a dataset's object on the local file system,
// the same that signal_dataset's confined local store applies: below the
// dataset's root no path component may be a symbolic link, and the object
// itself must be a regular file. A shard replaced by a link to a file
// elsewhere, or a directory of shards replaced by a link, is refused rather
// than read as if it were the dataset's; a FIFO or a device where a shard
// should be is refused at once, never waited on (the open is non-blocking).
// An object whose manifest declares its size is refused when it holds
// another number of bytes, before any of them is trusted.
#ifndef SDS_LOADER_SOURCES_LOCAL_OBJECT_H_
#define SDS_LOADER_SOURCES_LOCAL_OBJECT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sdsl {

// A declared size that is not known, so not checked (an object a
// reference dataset names in another dataset, as signal_dataset skips it).
constexpr int64_t kSizeNotDeclared = -1;

// Per object, the bytes its manifest declares, or kSizeNotDeclared; an
// object past `count` declares nothing. Borrowed, not copied: whoever makes
// the reader keeps the sizes as long as it lives (the binding keeps the
// array alive with the set), since a copy held them again in every set of
// every process, 8 bytes a shard.
struct DeclaredSizes {
  const int64_t* sizes = nullptr;
  size_t count = 0;

  int64_t operator[](size_t object) const {
    return object < count ? sizes[object] : kSizeNotDeclared;
  }
};

// How the objects of one dataset may be opened.
struct LocalObjectRules {
  // The dataset's root directory: objects below it are opened refusing a
  // link in any component. "" (or an object elsewhere): opened by its path,
  // which may pass through links, as signal_dataset opens it.
  std::string root;
  // What each object's manifest declares of its size.
  DeclaredSizes declared_sizes;

  int64_t DeclaredSize(size_t object) const { return declared_sizes[object]; }
};

// Opens the objects of one dataset root (see LocalObjectRules::root). The
// root's descriptor is opened on the first open and kept, and each object
// below it is opened with one openat2 that refuses links in every
// component, where the kernel has it (Linux 5.6). Otherwise, and to name
// what was refused when it fails, the components are walked one by one. A
// dataset of many small shards opens each one in the first pass, and in a
// virtual machine every system call of the walk (open, dup, openat and
// close per directory) costs microseconds.
class LocalObjects {
 public:
  explicit LocalObjects(std::string root) : root_(std::move(root)) {}
  ~LocalObjects();
  LocalObjects(const LocalObjects&) = delete;
  LocalObjects& operator=(const LocalObjects&) = delete;

  // Opens `path` for reading and returns its descriptor (close-on-exec,
  // blocking reads), with its size in `*size`. Throws ReaderError naming the
  // path: kUnsafePath for a link below the root or an object that is not a
  // regular file, kIo when the system refuses.
  int Open(const std::string& path, uint64_t* size) const;

 private:
  // The root's descriptor, opened on first use; -1 with `errno` set when it
  // cannot be opened (not kept, so a later open tries again).
  int Root() const;

  const std::string root_;
  // Set once; atomic rather than locked, so that a fork never finds it held.
  mutable std::atomic<int> root_fd_{-1};
};

// Throws kCorrupt, in signal_dataset's words, unless an object that holds
// `observed` bytes matches the `declared` size (or none is declared).
void CheckDeclaredSize(const std::string& name, uint64_t observed, int64_t declared);

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_LOCAL_OBJECT_H_
