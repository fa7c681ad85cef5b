#include "sources/local_source.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "base/reader_error.h"
#include "sources/mapped_copy.h"

namespace sdsl {
namespace {

// Ranges probed for residency before a batch; more cost syscalls on every
// warm batch, fewer miss a partly cold one. A small batch gets one probe a
// kBytesPerProbe of it: at 16 short records, four probes cost more than a
// record's decompression, and what a missed cold record costs is one fault.
constexpr size_t kResidencyProbes = 4;
constexpr uint64_t kBytesPerProbe = 64 << 10;
// Reads in flight per Fetch call besides the caller's: enough to keep a
// disk's queue busy, few enough that idle threads cost little.
constexpr size_t kIoHelpers = 15;
// Bytes a decode thread gathers per Fetch call when the shards are cold:
// large enough for many reads at once, small enough that one thread
// decodes a slice while the next is still being read.
constexpr uint64_t kColdGatherBytes = 4 << 20;

// Whether the byte at `offset` is in the page cache: a read that would have
// to wait for the disk fails with EAGAIN instead. Where RWF_NOWAIT is not
// supported the answer is "no", so that hints are given.
bool Resident(int fd, uint64_t offset) {
#ifdef RWF_NOWAIT
  uint8_t byte;
  iovec vector{&byte, 1};
  return ::preadv2(fd, &vector, 1, static_cast<off_t>(offset), RWF_NOWAIT) == 1;
#else
  (void)fd;
  (void)offset;
  return false;
#endif
}

// Whether `requests` lie in one shard, each beginning where the one before ends.
bool BackToBack(const RangeRequest* requests, size_t count) {
  for (size_t k = 1; k < count; ++k) {
    if (requests[k].file != requests[0].file ||
        requests[k].offset != requests[k - 1].offset + requests[k - 1].size) {
      return false;
    }
  }
  return true;
}

}  // namespace

struct LocalSource::OpenFile {
  OpenFile(const std::string& path, const LocalObjectRules& rules, const LocalObjects& objects,
           size_t file)
      : path(path) {
    fd = objects.Open(path, &size);
    try {
      CheckDeclaredSize(path, size, rules.DeclaredSize(file));
    } catch (...) {
      ::close(fd);
      throw;
    }
    // A mapping where the system gives one; reads fall back to preadv.
    if (size > 0 && size <= SIZE_MAX) {
      void* mapped = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
      if (mapped != MAP_FAILED) map = static_cast<const uint8_t*>(mapped);
    }
  }
  ~OpenFile() {
    if (map != nullptr) ::munmap(const_cast<uint8_t*>(map), static_cast<size_t>(size));
    ::close(fd);
  }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;

  // Fills `count` requests that lie back to back in the file, each beginning
  // where the one before ends, with as few preadv calls as the system
  // allows: a caller can scatter one run of the file straight into the rows
  // it belongs in. A short file is corrupt.
  void ReadContiguous(const RangeRequest* requests, size_t count, bool mapped) const {
    if (mapped && CopyContiguous(requests, count, nullptr, nullptr)) return;
    std::vector<iovec> vectors;
    vectors.reserve(count);
    for (size_t k = 0; k < count; ++k) {
      if (requests[k].size > 0) vectors.push_back(iovec{requests[k].dst, requests[k].size});
    }
    uint64_t offset = requests[0].offset;
    size_t first = 0;
    while (first < vectors.size()) {
      const int pieces = static_cast<int>(std::min<size_t>(vectors.size() - first, IOV_MAX));
      ssize_t got = ::preadv(fd, &vectors[first], pieces, static_cast<off_t>(offset));
      if (got < 0) {
        if (errno == EINTR) continue;
        const int error = errno;
        throw ReaderError(ErrorKind::kIo, "cannot read shard " + path + ": " + std::strerror(error),
                          error);
      }
      if (got == 0) Corrupt("shard ended early while reading at offset " + std::to_string(offset));
      offset += static_cast<uint64_t>(got);
      while (got > 0) {
        iovec& piece = vectors[first];
        if (static_cast<size_t>(got) >= piece.iov_len) {
          got -= static_cast<ssize_t>(piece.iov_len);
          ++first;
        } else {
          piece.iov_base = static_cast<uint8_t*>(piece.iov_base) + got;
          piece.iov_len -= static_cast<size_t>(got);
          got = 0;
        }
      }
    }
  }

  // Copies `count` requests that lie back to back out of the mapping, each
  // marked in `hashed` (when not null) also appended to `hasher`. False,
  // having read nothing, when the range is not all mapped.
  bool CopyContiguous(const RangeRequest* requests, size_t count, const uint8_t* hashed,
                      ChunkHasher* hasher) const {
    uint64_t total = 0;
    for (size_t k = 0; k < count; ++k) total += requests[k].size;
    if (map == nullptr || requests[0].offset > size || total > size - requests[0].offset) {
      return false;
    }
    if (!CopyFromMapping(map + requests[0].offset, total, requests, count, hashed, hasher)) {
      Corrupt("shard " + path + " shrank while it was being read: bytes from offset " +
              std::to_string(requests[0].offset) + " to " +
              std::to_string(requests[0].offset + total) +
              " are gone; a shard must not be truncated or rewritten while a reader has it open");
    }
    return true;
  }

  std::string path;
  int fd = -1;
  uint64_t size = 0;  // at open: ranges past it are refused before any read
  const uint8_t* map = nullptr;
};

LocalSource::LocalSource(ShardNames names, size_t max_open_files, LocalObjectRules rules)
    : names_(std::move(names)),
      rules_(std::move(rules)),
      objects_(rules_.root),
      open_(max_open_files, names_.size()) {
  StartGuarding();
}

std::shared_ptr<const LocalSource::OpenFile> LocalSource::Open(size_t file) {
  if (file >= names_.size()) {
    Fail(ErrorKind::kArgument, "shard number " + std::to_string(file) + " is out of range");
  }
  if (auto found = open_.Find(file)) return found;
  // Opened outside the lock: a slow open (a cold directory, a network mount)
  // must not stall reads of shards that are already open. Another thread may
  // have opened it meanwhile: one descriptor is kept.
  return open_.Keep(file, std::make_shared<const OpenFile>(names_[file], rules_, objects_, file));
}

uint64_t LocalSource::Size(size_t file) { return Open(file)->size; }

uint64_t LocalSource::Identity(size_t file) {
  const std::shared_ptr<const OpenFile> open = Open(file);
  struct stat st;
  if (::fstat(open->fd, &st) != 0) {
    const int error = errno;
    throw ReaderError(ErrorKind::kIo,
                      "cannot stat shard " + open->path + ": " + std::strerror(error), error);
  }
  // FNV-1a over the fields that tell one file, or one version of it, from
  // another. The change time too: a file rewritten in place with its
  // modification time put back (`touch -r`, `cp -p`, `rsync -t --inplace`)
  // keeps its mtime, but no user can set its ctime.
  const uint64_t fields[] = {
      static_cast<uint64_t>(st.st_dev),          static_cast<uint64_t>(st.st_ino),
      static_cast<uint64_t>(st.st_size),         static_cast<uint64_t>(st.st_mtim.tv_sec),
      static_cast<uint64_t>(st.st_mtim.tv_nsec), static_cast<uint64_t>(st.st_ctim.tv_sec),
      static_cast<uint64_t>(st.st_ctim.tv_nsec)};
  uint64_t hash = 14695981039346656037ull;
  for (const uint64_t field : fields) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= (field >> (8 * byte)) & 0xff;
      hash *= 1099511628211ull;
    }
  }
  return hash;
}

void LocalSource::Fetch(RangeRequest* requests, size_t count, const FetchPlan& plan) {
  // Nothing to read; also, groups.size() - 1 helpers below must not wrap.
  if (count == 0) return;
  const bool mapped = plan.from_mappings;
  // The usual warm request: one run of one shard, back to back. It is read
  // here, without the groups and the helper function below, which cost two
  // mallocs a run, as much as the copy of a short record.
  if (BackToBack(requests, count)) {
    Open(requests[0].file)->ReadContiguous(requests, count, mapped);
    return;
  }
  // Groups of requests that lie back to back in one shard: one preadv each.
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t first = 0, last; first < count; first = last) {
    last = first + 1;
    while (last < count && requests[last].file == requests[first].file &&
           requests[last].offset == requests[last - 1].offset + requests[last - 1].size) {
      ++last;
    }
    groups.emplace_back(first, last);
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  const std::function<void()> read = [&]() {
    std::shared_ptr<const OpenFile> open;
    size_t open_file = 0;
    for (size_t g = next++; g < groups.size() && !failed; g = next++) {
      const auto [first, last] = groups[g];
      try {
        if (open == nullptr || open_file != requests[first].file) {
          open = Open(requests[first].file);
          open_file = requests[first].file;
        }
        open->ReadContiguous(requests + first, last - first, mapped);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
        failed = true;
      }
    }
  };
  // A warm batch's reads come from the page cache, a copy each, which the
  // IO threads would only add a hand-over to: they stay on this thread.
  io_.Run(plan.gather_bytes == 0 ? 0 : std::min(groups.size() - 1, kIoHelpers), read);
  if (first_error) std::rethrow_exception(first_error);
}

void LocalSource::FetchHashing(RangeRequest* requests, size_t count, const FetchPlan& plan,
                               const uint8_t* hashed, ChunkHasher* hasher) {
  if (count > 0 && plan.from_mappings && BackToBack(requests, count) &&
      Open(requests[0].file)->CopyContiguous(requests, count, hashed, hasher)) {
    return;
  }
  ShardSource::FetchHashing(requests, count, plan, hashed, hasher);
}

FetchPlan LocalSource::PlanBatch(const RangeRequest* ranges, size_t count) {
  // Until the probes say the batch is warm, reads go through preadv: a page
  // that must come from the disk is better asked for in one large read than
  // faulted in from a mapping a page at a time.
  FetchPlan plan;
  uint64_t bytes = 0;
  for (size_t k = 0; k < count; ++k) bytes += ranges[k].size;
  const size_t probes = std::min(
      {count, kResidencyProbes, std::max<size_t>(1, static_cast<size_t>(bytes / kBytesPerProbe))});
  try {
    for (size_t k = 0; k < probes; ++k) {
      const RangeRequest& range = ranges[k * count / probes];
      if (range.size == 0) continue;
      // The last byte: readahead from an earlier read may have brought the first.
      if (!Resident(Open(range.file)->fd, range.offset + range.size - 1)) {
        plan.gather_bytes = kColdGatherBytes;
        return plan;
      }
    }
  } catch (const ReaderError&) {
    // A shard that cannot be opened now fails in Fetch, naming the record.
    return plan;
  }
  plan.from_mappings = GuardMappedCopies();
  return plan;
}

void LocalSource::WillNeed(const RangeRequest* ranges, size_t count) {
  std::vector<RangeRequest> wanted(ranges, ranges + count);
  hints_.Post([this, wanted = std::move(wanted)]() {
    for (const RangeRequest& range : wanted) {
      try {
        // A refused hint costs only the overlap it would have bought.
        (void)::posix_fadvise(Open(range.file)->fd, static_cast<off_t>(range.offset),
                              static_cast<off_t>(range.size), POSIX_FADV_WILLNEED);
      } catch (const ReaderError&) {
        // A shard that cannot be opened fails in Fetch, naming the record.
      }
    }
  });
}

}  // namespace sdsl
