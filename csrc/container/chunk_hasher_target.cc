// ChunkHasher's steps for the instruction set this file is compiled for
// (HH_TARGET_NAME: AVX2 with -mavx2, Portable otherwise), in that target's
// namespace as highwayhash's headers require.
#include <highwayhash/highwayhash.h>

#include <cstring>
#include <new>

#include "container/chunk_hasher.h"

namespace sdsl {
namespace HH_TARGET_NAME {
namespace {

using Hasher = highwayhash::HighwayHashCatT<HH_TARGET>;
static_assert(sizeof(Hasher) <= ChunkHasher::kStateBytes, "ChunkHasher's state is too small");
static_assert(alignof(Hasher) <= 64, "ChunkHasher's state is not aligned enough");

// Bytes hashed before they are copied: small enough to stay in the L1
// cache between the two, large enough that each step's fixed cost is
// nothing beside it.
constexpr size_t kStepBytes = 8 << 10;

// 'Riegeli/', 'records\n', 'Riegeli/', 'records\n', as the format specifies.
const highwayhash::HHKey kRiegeliKey = {0x2f696c6567656952ULL, 0x0a7364726f636572ULL,
                                        0x2f696c6567656952ULL, 0x0a7364726f636572ULL};

// libc's memcpy, called rather than inlined: GCC inlines a copy whose size
// it can bound (a step here) as `rep movsq`, which ran verified reads a
// fifth slower than libc's vector copy on unaligned buffers.
void* (*volatile const kCopy)(void*, const void*, size_t) = &std::memcpy;

Hasher& Of(void* state) { return *static_cast<Hasher*>(state); }

void Start(void* state) { new (state) Hasher(kRiegeliKey); }

void Append(void* state, const uint8_t* data, size_t size) {
  Of(state).Append(reinterpret_cast<const char*>(data), size);
}

void CopyAndAppend(void* state, uint8_t* dst, const uint8_t* src, size_t size) {
  Hasher& hasher = Of(state);
  for (size_t at = 0; at < size; at += kStepBytes) {
    const size_t step = size - at < kStepBytes ? size - at : kStepBytes;
    hasher.Append(reinterpret_cast<const char*>(src + at), step);
    kCopy(dst + at, src + at, step);
  }
}

uint64_t Finish(void* state) {
  highwayhash::HHResult64 result;
  Of(state).Finalize(&result);
  return result;
}

}  // namespace

extern const HasherSteps kHasherSteps = {Start, Append, CopyAndAppend, Finish};

}  // namespace HH_TARGET_NAME
}  // namespace sdsl
