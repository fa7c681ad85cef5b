// Counter-based randomness for augmentation: every draw is a pure function of
// its key, so a record's augmentation is the same whatever batch, thread,
// worker, rank or resume reads it.
//
// The generator is SplitMix64 used as a keyed hash (the output function of
// Java's SplittableRandom; passes BigCrush): a 64-bit key is absorbed from
// (seed, epoch, ordinal, transform position, domain, channel) one word at a
// time, each through the mixer, and draw j of that key is
// Mix64(key + (j + 1) * kGolden). Two domains keep parameter draws and noise
// apart: kDrawDomain (draw j = the transform's j-th parameter) and
// kNoiseDomain (draw n = the sample at record index n of that stage, per
// channel), so a sample's noise depends on its index, not on the span read.
#ifndef SDS_LOADER_AUGMENT_COUNTER_RANDOM_H_
#define SDS_LOADER_AUGMENT_COUNTER_RANDOM_H_

#include <cstddef>
#include <cstdint>

namespace sdsl {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
constexpr uint64_t kDrawDomain = 1;
constexpr uint64_t kNoiseDomain = 2;

// SplitMix64's finaliser: a bijection of 64-bit words with full avalanche.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The key of one stream: the words absorbed in this order.
uint64_t StreamKey(uint64_t seed, uint64_t epoch, uint64_t ordinal, uint32_t position,
                   uint64_t domain, uint64_t channel);

// Draw `index` of the stream `key`: 64 random bits.
inline uint64_t StreamBits(uint64_t key, uint64_t index) {
  return Mix64(key + (index + 1) * kGolden);
}

// The top 53 bits of a draw as a double in [0, 1).
inline double UnitDouble(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// Parameter draws 0..count-1 of transform `position` of a record, uniform in [0, 1).
void DrawUniforms(uint64_t seed, uint64_t epoch, uint64_t ordinal, uint32_t position, size_t count,
                  double* out);

}  // namespace sdsl

#endif  // SDS_LOADER_AUGMENT_COUNTER_RANDOM_H_
