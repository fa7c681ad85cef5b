// Which chunks of one open shard this process has verified whole. A chunk's
// hash covers all of it, so a window can skip the rest of the chunk only
// once the chunk has been checked; after that, reading the same immutable
// bytes again need not check them again.
#ifndef SDS_LOADER_VERIFIED_CHUNKS_H_
#define SDS_LOADER_VERIFIED_CHUNKS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace sdsl {

class VerifiedChunks {
 public:
  // One bit a chunk: an index and these marks are kept for every shard a
  // process touches.
  void Reset(size_t chunks) {
    words_ = std::make_unique<std::atomic<uint64_t>[]>((chunks + 63) / 64);
    size_ = chunks;
  }
  bool Has(size_t chunk) const {
    return chunk < size_ &&
           (words_[chunk / 64].load(std::memory_order_acquire) >> (chunk % 64)) & 1;
  }
  void Mark(size_t chunk) const {
    if (chunk < size_)
      words_[chunk / 64].fetch_or(uint64_t{1} << (chunk % 64), std::memory_order_release);
  }
  size_t HeldBytes() const { return (size_ + 63) / 64 * sizeof(uint64_t); }

 private:
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
  size_t size_ = 0;
};

}  // namespace sdsl

#endif  // SDS_LOADER_VERIFIED_CHUNKS_H_
