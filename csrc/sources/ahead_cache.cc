#include "sources/ahead_cache.h"

#include <cstring>
#include <utility>

namespace sdsl {

AheadCache::AheadCache(uint64_t budget_bytes) : budget_(budget_bytes) { StartGuarding(); }

AheadCache::~AheadCache() { StopGuarding(); }

std::shared_ptr<AheadRange> AheadCache::Holding(size_t file, uint64_t offset, uint64_t size) const {
  // Newest first: a range fetched again after its object was replaced wins.
  for (auto it = ranges_.rbegin(); it != ranges_.rend(); ++it) {
    const AheadRange& range = **it;
    if (range.file == file && range.state != AheadRange::State::kFailed && range.offset <= offset &&
        offset + size <= range.offset + range.data.size()) {
      return *it;
    }
  }
  return nullptr;
}

std::vector<std::shared_ptr<AheadRange>> AheadCache::Reserve(const std::vector<Wanted>& wanted) {
  std::vector<std::shared_ptr<AheadRange>> reserved;
  std::vector<std::shared_ptr<AheadRange>> evicted;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Wanted& want : wanted) {
    if (want.size == 0 || want.size > budget_ || Holding(want.file, want.offset, want.size))
      continue;
    for (auto it = ranges_.begin(); bytes_ + want.size > budget_ && it != ranges_.end();) {
      if ((*it)->state == AheadRange::State::kPending) {
        ++it;
        continue;
      }
      bytes_ -= (*it)->data.size();
      evicted.push_back(std::move(*it));
      it = ranges_.erase(it);
    }
    if (bytes_ + want.size > budget_) break;  // the rest is further ahead still
    auto range = std::make_shared<AheadRange>();
    range->file = want.file;
    range->offset = want.offset;
    range->data.resize(want.size);
    bytes_ += want.size;
    ranges_.push_back(range);
    reserved.push_back(std::move(range));
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

bool AheadCache::CopyOut(size_t file, uint64_t offset, uint64_t size, const std::string& etag,
                         uint8_t* dst, std::chrono::steady_clock::duration wait) {
  std::shared_ptr<AheadRange> range;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    range = Holding(file, offset, size);
    if (range == nullptr) return false;
    if (range->state == AheadRange::State::kPending) {
      finished_.wait_for(lock, wait, [&] { return range->state != AheadRange::State::kPending; });
    }
    if (range->state != AheadRange::State::kReady || range->etag != etag) return false;
  }
  // A ready range is never written again, so its bytes are copied unlocked.
  std::memcpy(dst, range->data.data() + (offset - range->offset), size);
  return true;
}

void AheadCache::Clear() {
  std::list<std::shared_ptr<AheadRange>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped.swap(ranges_);
    bytes_ = 0;
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
