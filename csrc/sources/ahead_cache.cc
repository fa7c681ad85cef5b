#include "sources/ahead_cache.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace sdsl {

AheadCache::AheadCache(uint64_t budget_bytes) : budget_(budget_bytes) { StartGuarding(); }

AheadCache::~AheadCache() { StopGuarding(); }

std::shared_ptr<AheadRange> AheadCache::Holding(size_t file, uint64_t offset) const {
  // Newest first: a range fetched again after its object was replaced wins.
  for (auto it = ranges_.rbegin(); it != ranges_.rend(); ++it) {
    const AheadRange& range = **it;
    if (range.file == file && range.state != AheadRange::State::kFailed && range.offset <= offset &&
        offset < range.offset + range.data.size()) {
      return *it;
    }
  }
  return nullptr;
}

uint64_t AheadCache::NextStart(size_t file, uint64_t offset, uint64_t limit) const {
  for (const auto& held : ranges_) {
    const AheadRange& range = *held;
    if (range.file == file && range.state != AheadRange::State::kFailed && range.offset > offset &&
        range.offset < limit) {
      limit = range.offset;
    }
  }
  return limit;
}

std::vector<std::shared_ptr<AheadRange>> AheadCache::Reserve(const std::vector<Wanted>& wanted) {
  std::vector<std::shared_ptr<AheadRange>> reserved;
  std::vector<std::shared_ptr<AheadRange>> evicted;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Wanted& want : wanted) {
    if (want.size == 0 || want.size > budget_) continue;
    // Only the parts no range holds or awaits: hints for neighbouring or
    // overlapping records do not fetch the same bytes twice.
    const uint64_t end = want.offset + want.size;
    for (uint64_t at = want.offset; at < end;) {
      if (const auto held = Holding(want.file, at)) {
        at = held->offset + held->data.size();
        continue;
      }
      const uint64_t until = NextStart(want.file, at, end);
      const uint64_t size = until - at;
      for (auto it = ranges_.begin(); bytes_ + size > budget_ && it != ranges_.end();) {
        if ((*it)->state == AheadRange::State::kPending) {
          ++it;
          continue;
        }
        bytes_ -= (*it)->data.size();
        evicted.push_back(std::move(*it));
        it = ranges_.erase(it);
      }
      if (bytes_ + size > budget_) return reserved;  // the rest is further ahead still
      auto range = std::make_shared<AheadRange>();
      range->file = want.file;
      range->offset = at;
      range->data.resize(size);
      bytes_ += size;
      ranges_.push_back(range);
      reserved.push_back(std::move(range));
      at = until;
    }
  }
  return reserved;
}

void AheadCache::Finish(const std::shared_ptr<AheadRange>& range, bool fetched) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    range->state = fetched ? AheadRange::State::kReady : AheadRange::State::kFailed;
    if (!fetched) {
      for (auto it = ranges_.begin(); it != ranges_.end(); ++it) {
        if (*it == range) {
          bytes_ -= range->data.size();
          ranges_.erase(it);
          break;
        }
      }
    }
  }
  finished_.notify_all();
}

AheadCache::Copy AheadCache::CopyOut(size_t file, uint64_t offset, uint64_t size,
                                     const std::string& etag, uint8_t* dst,
                                     std::chrono::steady_clock::time_point deadline) {
  // The bytes may lie in several ranges (a read's run across two parts of a
  // hint): each piece from the range that holds it, waiting for those in
  // flight; a gap, a failure or another ETag, and the read fetches it all.
  struct Piece {
    std::shared_ptr<AheadRange> range;
    uint64_t at, size;
  };
  std::vector<Piece> pieces;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t end = offset + size;
    for (uint64_t at = offset; at < end;) {
      std::shared_ptr<AheadRange> range = Holding(file, at);
      if (range == nullptr) return Copy::kMissing;
      if (range->state == AheadRange::State::kPending) {
        finished_.wait_until(lock, deadline,
                             [&] { return range->state != AheadRange::State::kPending; });
        // Waited for, then failed (its own request stalled, most often, a
        // moment before the read's deadline): the wait was the read's first
        // attempt all the same.
        if (range->state != AheadRange::State::kReady) return Copy::kStalled;
      }
      if (range->state != AheadRange::State::kReady || range->etag != etag) return Copy::kMissing;
      const uint64_t until = std::min(end, range->offset + range->data.size());
      pieces.push_back(Piece{std::move(range), at, until - at});
      at = until;
    }
  }
  // A ready range is never written again, so its bytes are copied unlocked.
  for (const Piece& piece : pieces) {
    std::memcpy(dst + (piece.at - offset),
                piece.range->data.data() + (piece.at - piece.range->offset), piece.size);
  }
  return Copy::kCopied;
}

void AheadCache::Clear() {
  std::list<std::shared_ptr<AheadRange>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped.swap(ranges_);
    bytes_ = 0;
  }
}

void AheadCache::Forget(size_t file, uint64_t offset, uint64_t size) {
  std::list<std::shared_ptr<AheadRange>> dropped;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = ranges_.begin(); it != ranges_.end();) {
    const AheadRange& range = **it;
    if (range.file == file && range.offset < offset + size &&
        offset < range.offset + range.data.size()) {
      bytes_ -= range.data.size();
      dropped.splice(dropped.end(), ranges_, it++);
    } else {
      ++it;
    }
  }
}

uint64_t AheadCache::held_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

void AheadCache::LockForFork() { mutex_.lock(); }

void AheadCache::UnlockInParent() { mutex_.unlock(); }

void AheadCache::ResetInChild() {
  // Pending ranges were being filled by a thread the child does not have.
  ranges_.clear();
  bytes_ = 0;
  mutex_.unlock();
}

}  // namespace sdsl
