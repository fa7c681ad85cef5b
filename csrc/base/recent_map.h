// A map from shard number (below a bound given at construction) to a shared
// value that keeps at most `capacity` entries, forgetting the least
// recently used. Values are made by the caller outside the lock (opening a
// file or reading a footer may be slow, and a fork meanwhile must not find
// the lock held); when two threads make one at once, the first kept wins.
// An evicted value lives on with whoever still holds it.
//
// Every run a batch decodes looks its shard up here, from every decoding
// thread at once, so the lock spins a moment before it sleeps
// (SpinningMutex): with a plain mutex, two threads put each other to sleep
// in the kernel a few times a batch. The entries are one array indexed by
// shard number, with the recency order linked through it: a shuffled batch
// over many shards then costs one cache miss a lookup, where a hash table's
// buckets, nodes and a list's nodes cost four or five (in a virtual
// machine, each with a page walk of its own), half a microsecond a record
// at 10,000 shards.
#ifndef SDS_LOADER_RECENT_MAP_H_
#define SDS_LOADER_RECENT_MAP_H_

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "base/spinning_mutex.h"

namespace sdsl {

template <typename Value>
class RecentMap {
 public:
  // Keys run from 0 to `keys` - 1.
  RecentMap(size_t capacity, size_t keys)
      : capacity_(std::max<size_t>(1, capacity)), entries_(keys) {}

  // The value kept for `key`, or null; a hit becomes the most recent.
  std::shared_ptr<const Value> Find(size_t key) {
    std::lock_guard<SpinningMutex> lock(mutex_);
    return FindLocked(key);
  }

  // Keeps `made` for `key` unless another thread kept one first; returns the
  // value kept.
  std::shared_ptr<const Value> Keep(size_t key, std::shared_ptr<const Value> made) {
    // Values dropped here die after the lock is released, declared first so
    // that they are destroyed last: the last reference to an evicted file
    // unmaps and closes it, system calls a fork handler waiting on this lock
    // (or a read of another shard) must not wait behind.
    std::vector<std::shared_ptr<const Value>> dropped;
    if (key >= entries_.size()) return made;  // past the bound: handed back, never kept
    std::lock_guard<SpinningMutex> lock(mutex_);
    if (auto found = FindLocked(key)) {
      dropped.push_back(std::move(made));
      return found;
    }
    entries_[key].value = made;
    ++kept_;
    if (!Evicts()) return made;
    PushNewest(key);
    while (kept_ > capacity_) {
      const size_t oldest = oldest_;
      Unlink(oldest);
      dropped.push_back(std::move(entries_[oldest].value));
      --kept_;
    }
    return made;
  }

  // For fork handlers: the entries stay valid in a child, only the lock
  // must be free.
  void Lock() { mutex_.lock(); }
  void Unlock() { mutex_.unlock(); }

 private:
  static constexpr size_t kNone = static_cast<size_t>(-1);

  bool Evicts() const { return capacity_ < entries_.size(); }

  struct Entry {
    std::shared_ptr<const Value> value;  // null while not kept
    size_t newer = kNone;
    size_t older = kNone;
  };

  std::shared_ptr<const Value> FindLocked(size_t key) {
    if (key >= entries_.size() || entries_[key].value == nullptr) return nullptr;
    // Where every key fits, nothing is ever evicted and the order is not kept:
    // a lookup then touches its own entry only, not its neighbours'.
    if (!Evicts()) return entries_[key].value;
    if (newest_ != key) {
      Unlink(key);
      PushNewest(key);
    }
    return entries_[key].value;
  }

  void Unlink(size_t key) {
    Entry& entry = entries_[key];
    if (entry.newer != kNone) entries_[entry.newer].older = entry.older;
    if (entry.older != kNone) entries_[entry.older].newer = entry.newer;
    if (newest_ == key) newest_ = entry.older;
    if (oldest_ == key) oldest_ = entry.newer;
    entry.newer = entry.older = kNone;
  }

  void PushNewest(size_t key) {
    Entry& entry = entries_[key];
    entry.older = newest_;
    entry.newer = kNone;
    if (newest_ != kNone) entries_[newest_].newer = key;
    newest_ = key;
    if (oldest_ == kNone) oldest_ = key;
  }

  const size_t capacity_;
  SpinningMutex mutex_;  // never held across a system call
  std::vector<Entry> entries_;
  size_t kept_ = 0;
  size_t newest_ = kNone;
  size_t oldest_ = kNone;
};

}  // namespace sdsl

#endif  // SDS_LOADER_RECENT_MAP_H_
