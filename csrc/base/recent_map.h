// A map from shard number to a shared value that keeps at most `capacity`
// entries, forgetting the least recently used. Values are made by the caller
// outside the lock (opening a file or reading a footer may be slow, and a
// fork meanwhile must not find the lock held); when two threads make one at
// once, the first kept wins. An evicted value lives on with whoever still
// holds it.
//
// Every run a batch decodes looks its shard up here, from every decoding
// thread at once, so the lock spins a moment before it sleeps
// (SpinningMutex): with a plain mutex, two threads put each other to sleep
// in the kernel a few times a batch.
#ifndef SDS_LOADER_RECENT_MAP_H_
#define SDS_LOADER_RECENT_MAP_H_

#include <algorithm>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/spinning_mutex.h"

namespace sdsl {

template <typename Value>
class RecentMap {
 public:
  explicit RecentMap(size_t capacity) : capacity_(std::max<size_t>(1, capacity)) {}

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
    std::lock_guard<SpinningMutex> lock(mutex_);
    if (auto found = FindLocked(key)) {
      dropped.push_back(std::move(made));
      return found;
    }
    recency_.push_front(key);
    entries_.emplace(key, std::make_pair(made, recency_.begin()));
    while (entries_.size() > capacity_) {
      const auto evicted = entries_.find(recency_.back());
      dropped.push_back(std::move(evicted->second.first));
      entries_.erase(evicted);
      recency_.pop_back();
    }
    return made;
  }

  // For fork handlers: the entries stay valid in a child, only the lock
  // must be free.
  void Lock() { mutex_.lock(); }
  void Unlock() { mutex_.unlock(); }

 private:
  std::shared_ptr<const Value> FindLocked(size_t key) {
    const auto found = entries_.find(key);
    if (found == entries_.end()) return nullptr;
    recency_.splice(recency_.begin(), recency_, found->second.second);
    return found->second.first;
  }

  const size_t capacity_;
  SpinningMutex mutex_;        // never held across a system call
  std::list<size_t> recency_;  // most recent first
  std::unordered_map<size_t, std::pair<std::shared_ptr<const Value>, std::list<size_t>::iterator>>
      entries_;
};

}  // namespace sdsl

#endif  // SDS_LOADER_RECENT_MAP_H_
