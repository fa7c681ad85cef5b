// Which chunks of one open shard this process has verified whole. A chunk's
// hash covers all of it, so a window can skip the rest of the chunk only
// once the chunk has been checked; after that, reading the same immutable
// bytes again need not check them again.
#ifndef SDS_LOADER_VERIFIED_CHUNKS_H_
#define SDS_LOADER_VERIFIED_CHUNKS_H_

#include <atomic>
#include <cstddef>
#include <memory>

namespace sdsl {

class VerifiedChunks {
 public:
  void Reset(size_t chunks) {
    marks_ = std::make_unique<std::atomic<bool>[]>(chunks);
    size_ = chunks;
  }
  bool Has(size_t chunk) const {
    return chunk < size_ && marks_[chunk].load(std::memory_order_acquire);
  }
  void Mark(size_t chunk) const {
    if (chunk < size_) marks_[chunk].store(true, std::memory_order_release);
  }

 private:
  std::unique_ptr<std::atomic<bool>[]> marks_;
  size_t size_ = 0;
};

}  // namespace sdsl

#endif  // SDS_LOADER_VERIFIED_CHUNKS_H_
