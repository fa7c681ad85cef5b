// Riegeli's data hash over bytes that arrive in pieces, with the copy of
// each piece to where it is read folded into the same pass. A verified read
// of an uncompressed chunk both hashes its bytes and copies them into rows:
// done one after the other, the copy waits on memory and the hash on
// arithmetic. Done a few KiB at a time, the copy reads what the hash has
// just brought into the cache, and the two costs overlap rather than add.
#ifndef SDS_LOADER_CHUNK_HASHER_H_
#define SDS_LOADER_CHUNK_HASHER_H_

#include <cstddef>
#include <cstdint>

namespace sdsl {

// One implementation of the hasher's steps, per instruction set
// (chunk_hasher_target.cc, compiled once for each).
struct HasherSteps {
  void (*start)(void* state);
  void (*append)(void* state, const uint8_t* data, size_t size);
  void (*copy_and_append)(void* state, uint8_t* dst, const uint8_t* src, size_t size);
  uint64_t (*finish)(void* state);
};

class ChunkHasher {
 public:
  // Room for the widest implementation's state (AVX2: 224 bytes).
  static constexpr size_t kStateBytes = 320;

  // Which implementation: the fastest this CPU runs, or the portable one
  // every CPU does (for tests, which would otherwise never reach it here).
  enum class Target { kBest, kPortable };

  // Keyed as Riegeli keys it.
  explicit ChunkHasher(Target target = Target::kBest);
  ChunkHasher(const ChunkHasher&) = delete;
  ChunkHasher& operator=(const ChunkHasher&) = delete;

  void Append(const uint8_t* data, size_t size) { steps_->append(state_, data, size); }
  // memcpy(dst, src, size), and the bytes appended, in one pass.
  void CopyAndAppend(uint8_t* dst, const uint8_t* src, size_t size) {
    steps_->copy_and_append(state_, dst, src, size);
  }
  // The hash of everything appended: RiegeliHash of their concatenation.
  uint64_t Finish() { return steps_->finish(state_); }

 private:
  alignas(64) unsigned char state_[kStateBytes];
  const HasherSteps* steps_;
};

}  // namespace sdsl

#endif  // SDS_LOADER_CHUNK_HASHER_H_
