// Which chunks of one open shard this process has verified whole, and how a
// read decides whether to check a chunk's hashes. A chunk's hash covers all
// of it, so a window can skip the rest of the chunk only once the chunk has
// been checked; a reader that verifies once (Verify::kOnce) trusts a chunk
// from its second read on. Marks hold while the shard is the same file: a
// shard whose identity changes (ShardSource::Identity) has every mark
// cleared, and is verified again as it is read.
#ifndef SDS_LOADER_VERIFIED_CHUNKS_H_
#define SDS_LOADER_VERIFIED_CHUNKS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace sdsl {

// How often a reader checks a chunk's hashes.
enum class Verify : uint8_t {
  kNever,      // never: corruption surfaces as a parse error, or not at all
  kEveryRead,  // every read (a window of an already verified chunk excepted)
  kOnce,       // the first read of each chunk in this process, per file identity
};

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
  // Clears every mark unless the marks were made while the shard had
  // `identity` (its first call only records it). Called before marks are
  // trusted; a chunk verified by a read that overlaps a change of identity
  // may keep its mark, as its bytes were checked moments before.
  void Renew(uint64_t identity) const {
    uint64_t known = identity_.load(std::memory_order_acquire);
    if (known == identity) return;
    if (!identity_.compare_exchange_strong(known, identity, std::memory_order_acq_rel)) return;
    if (known == kNoIdentity) return;
    for (size_t w = 0; w < (size_ + 63) / 64; ++w) words_[w].store(0, std::memory_order_release);
  }
  size_t HeldBytes() const { return (size_ + 63) / 64 * sizeof(uint64_t); }

 private:
  static constexpr uint64_t kNoIdentity = ~uint64_t{0};
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
  size_t size_ = 0;
  mutable std::atomic<uint64_t> identity_{kNoIdentity};
};

// Whether a read in `mode` checks the hashes of a chunk marked as `marks`
// say; a read that checks marks the chunk once it passes.
inline bool ChecksChunk(Verify mode, const VerifiedChunks& marks, size_t chunk) {
  return mode == Verify::kEveryRead || (mode == Verify::kOnce && !marks.Has(chunk));
}

// Whether a read in `mode` consults the marks at all (a window of a verified
// chunk does even when every read is verified): the shard's identity is then
// renewed before the marks are read.
inline bool UsesMarks(Verify mode, bool windows) {
  return mode == Verify::kOnce || (mode == Verify::kEveryRead && windows);
}

}  // namespace sdsl

#endif  // SDS_LOADER_VERIFIED_CHUNKS_H_
