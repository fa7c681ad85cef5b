// Byte ranges of remote shards fetched before a read asks for them, in a
// bounded amount of memory. A readahead thread reserves ranges and fills
// them; a read copies out of a range that holds its bytes, waiting for one
// still in flight rather than asking the store for the same bytes twice.
// Everything here is a hint: a range that failed, was dropped for want of
// room, or was fetched under another ETag is simply not used, and the read
// fetches its bytes itself.
#ifndef SDS_LOADER_SOURCES_AHEAD_CACHE_H_
#define SDS_LOADER_SOURCES_AHEAD_CACHE_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/fork_guard.h"

namespace sdsl {

struct AheadRange {
  enum class State { kPending, kReady, kFailed };
  size_t file = 0;
  uint64_t offset = 0;
  std::vector<uint8_t> data;  // its size is the range's, from the start
  std::string etag;           // the object's ETag as the answer gave it
  State state = State::kPending;
};

class AheadCache : public ForkGuarded {
 public:
  explicit AheadCache(uint64_t budget_bytes);
  ~AheadCache() override;

  struct Wanted {
    size_t file = 0;
    uint64_t offset = 0;
    uint64_t size = 0;
  };
  // New pending ranges for the parts of `wanted` that no range holds yet,
  // for the caller to fetch and hand to Finish. Older finished ranges make
  // room; what still does not fit within the budget is left out.
  std::vector<std::shared_ptr<AheadRange>> Reserve(const std::vector<Wanted>& wanted);
  void Finish(const std::shared_ptr<AheadRange>& range, bool fetched);

  enum class Copy {
    kCopied,   // the bytes are at dst
    kMissing,  // no range holds them all (or one failed, or holds another version)
    kStalled,  // a range that holds them was still in flight at the deadline, or
               // failed while the read waited for it
  };
  // Copies bytes [offset, offset + size) of `file` to `dst` from the ranges
  // that hold them (one, or several side by side), all fetched under
  // `etag`, waiting until `deadline` for those in flight. The deadline is
  // the caller's, so that waiting for an announcement counts against the
  // read's own time rather than adding to it.
  Copy CopyOut(size_t file, uint64_t offset, uint64_t size, const std::string& etag, uint8_t* dst,
               std::chrono::steady_clock::time_point deadline);

  // Forgets every range; fetches in flight finish into memory nobody reads.
  void Clear();
  // Forgets the ranges holding bytes of [offset, offset + size) of `file`
  // (they failed a check), as Clear does.
  void Forget(size_t file, uint64_t offset, uint64_t size);

  uint64_t held_bytes() const;

  void LockForFork() override;
  void UnlockInParent() override;
  // The thread filling pending ranges is not in the child: they never finish.
  void ResetInChild() override;

 private:
  // The newest range not failed that holds byte `offset` of `file`, or null.
  std::shared_ptr<AheadRange> Holding(size_t file, uint64_t offset) const;
  // The first offset in (offset, limit) where a range not failed starts, else limit.
  uint64_t NextStart(size_t file, uint64_t offset, uint64_t limit) const;

  const uint64_t budget_;
  mutable std::mutex mutex_;
  std::condition_variable finished_;
  std::list<std::shared_ptr<AheadRange>> ranges_;  // oldest first
  uint64_t bytes_ = 0;
};

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_AHEAD_CACHE_H_
