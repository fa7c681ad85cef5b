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
// in the kernel a few times a batch. A key finds its entry through an array
// indexed by shard number, and the entries kept sit in a second array with
// the recency order linked through it: a shuffled batch over many shards
// costs two cache misses a lookup, where a hash table's buckets, nodes and a
// list's nodes cost four or five (in a virtual machine, each with a page
// walk of its own), half a microsecond a record at 10,000 shards. Every
// shard of the dataset costs 4 bytes here, whether it is ever opened or not
// (a dataset of 100,000 shards pays for its index in every process); only
// an entry kept costs more (HeldBytes).
#ifndef SDS_LOADER_RECENT_MAP_H_
#define SDS_LOADER_RECENT_MAP_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
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
      : capacity_(std::min<size_t>(std::max<size_t>(1, capacity), kNone)), slot_of_(keys, kNone) {}

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
    std::shared_ptr<const Value> dropped;
    if (key >= slot_of_.size()) return made;  // past the bound: handed back, never kept
    std::lock_guard<SpinningMutex> lock(mutex_);
    if (auto found = FindLocked(key)) {
      dropped = std::move(made);
      return found;
    }
    Slot32 slot;
    if (slots_.size() < capacity_) {
      slot = static_cast<Slot32>(slots_.size());
      slots_.emplace_back();
    } else {
      // Full: the least recent entry gives up its slot.
      slot = oldest_;
      Unlink(slot);
      slot_of_[slots_[slot].key] = kNone;
      dropped = std::move(slots_[slot].value);
    }
    slots_[slot].key = key;
    slots_[slot].value = made;
    slot_of_[key] = slot;
    if (Evicts()) PushNewest(slot);
    return made;
  }

  // Bytes the map holds beside its values: 4 a key, and a slot an entry kept.
  size_t HeldBytes() const {
    std::lock_guard<SpinningMutex> lock(mutex_);
    return slot_of_.capacity() * sizeof(Slot32) + slots_.capacity() * sizeof(Slot);
  }

  // For fork handlers: the entries stay valid in a child, only the lock
  // must be free.
  void Lock() { mutex_.lock(); }
  void Unlock() { mutex_.unlock(); }

 private:
  using Slot32 = uint32_t;
  static constexpr Slot32 kNone = UINT32_MAX;

  struct Slot {
    std::shared_ptr<const Value> value;
    size_t key = 0;
    Slot32 newer = kNone;
    Slot32 older = kNone;
  };

  // Where every key fits, nothing is ever evicted and the order is not kept:
  // a lookup then touches its own entry only, not its neighbours'.
  bool Evicts() const { return capacity_ < slot_of_.size(); }

  std::shared_ptr<const Value> FindLocked(size_t key) {
    if (key >= slot_of_.size() || slot_of_[key] == kNone) return nullptr;
    const Slot32 slot = slot_of_[key];
    if (Evicts() && newest_ != slot) {
      Unlink(slot);
      PushNewest(slot);
    }
    return slots_[slot].value;
  }

  void Unlink(Slot32 slot) {
    Slot& entry = slots_[slot];
    if (entry.newer != kNone) slots_[entry.newer].older = entry.older;
    if (entry.older != kNone) slots_[entry.older].newer = entry.newer;
    if (newest_ == slot) newest_ = entry.older;
    if (oldest_ == slot) oldest_ = entry.newer;
    entry.newer = entry.older = kNone;
  }

  void PushNewest(Slot32 slot) {
    Slot& entry = slots_[slot];
    entry.older = newest_;
    entry.newer = kNone;
    if (newest_ != kNone) slots_[newest_].newer = slot;
    newest_ = slot;
    if (oldest_ == kNone) oldest_ = slot;
  }

  // At most kNone slots, so that every slot's number fits in a Slot32.
  const size_t capacity_;
  mutable SpinningMutex mutex_;  // never held across a system call
  std::vector<Slot32> slot_of_;  // by key: its slot, or kNone
  std::vector<Slot> slots_;      // the entries kept, at most capacity_
  Slot32 newest_ = kNone;
  Slot32 oldest_ = kNone;
};

}  // namespace sdsl

#endif  // SDS_LOADER_RECENT_MAP_H_
