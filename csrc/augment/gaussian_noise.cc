#include "augment/gaussian_noise.h"

#include <cmath>
#include <cstring>

#include "augment/counter_random.h"
#include "augment/vector_clones.h"

namespace sdsl {
namespace {

inline float FloatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline uint32_t BitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// ln(u) for a normal float u > 0: Cephes' logf's reduction to
// ln(1 + x), x in [sqrt(1/2) - 1, sqrt(2) - 1), and x - x^2/2 + x^3 p(x)
// with p of degree 4 (a weighted least-squares fit, relative error under
// 2e-6: far below what the noise's statistics can show, half the
// multiplies of logf's degree 8).
inline float Log(float u) {
  const uint32_t bits = BitsOf(u);
  const uint32_t mantissa = (bits & 0x807fffffu) | 0x3f000000u;
  const float m = FloatOf(mantissa);  // in [0.5, 1)
  // Below sqrt(1/2) (0x3f3504f3), 2m - 1 and one less in the exponent: the
  // sign of an integer difference, not a comparison, so that the loop
  // vectorises (m * 0 and m * 1 are exact).
  const float low = static_cast<float>(static_cast<int32_t>(
      static_cast<uint32_t>(static_cast<int32_t>(mantissa - 0x3f3504f3u) >> 31) & 1u));
  const float exponent = static_cast<float>(static_cast<int32_t>((bits >> 23) & 0xff) - 126) - low;
  const float x = (m - 1.0f) + m * low;
  const float z = x * x;
  float p = 1.1315417878e-1f;
  p = p * x - 1.8309741766e-1f;
  p = p * x + 2.0521177225e-1f;
  p = p * x - 2.4952283079e-1f;
  p = p * x + 3.3317343653e-1f;
  float y = p * x * z;
  y += exponent * -2.12194440e-4f;
  y += -0.5f * z;
  return (x + y) + exponent * 0.693359375f;
}

}  // namespace

SDSL_VECTOR_CLONES
void GaussianPairs(uint64_t key, uint64_t first, size_t count, float* re, float* im) {
  uint64_t bits[kNoiseBlock];
  if (count > kNoiseBlock) count = kNoiseBlock;
  // StreamBits(key, first + k), the counter stepped by additions.
  uint64_t counter = key + (first + 1) * kGolden;
  for (size_t k = 0; k < count; ++k) {
    bits[k] = Mix64(counter);
    counter += kGolden;
  }
  for (size_t k = 0; k < count; ++k) {
    const int32_t high = static_cast<int32_t>(bits[k] >> 40);
    const uint32_t angle = static_cast<uint32_t>(bits[k] >> 8) & 0xffffffu;
    const float u1 = (static_cast<float>(high) + 0.5f) * 0x1.0p-24f;
    const float radius = std::sqrt(-2.0f * Log(u1));
    // The angle is y in (-pi/4, pi/4), the 22 low bits' offset from the
    // middle of their range, then turned into one of four quadrants: the
    // top bit swaps cosine and sine (pi/2 - y), the next flips the sign of
    // the cosine (pi - y); y's law is symmetric, so every angle is as likely.
    const float y =
        (static_cast<float>(static_cast<int32_t>(angle & 0x3fffffu) - 0x200000) + 0.5f) *
        (1.57079632679489662f * 0x1.0p-22f);
    const float z = y * y;
    const float s = y + y * z * ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f);
    const float c =
        1.0f - 0.5f * z +
        z * z * ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f);
    const uint32_t swap = static_cast<uint32_t>(static_cast<int32_t>(angle << 8) >> 31);
    const uint32_t cosine = BitsOf(c) ^ ((angle << 9) & 0x80000000u);
    const uint32_t first = (cosine & ~swap) | (BitsOf(s) & swap);
    const uint32_t second = (BitsOf(s) & ~swap) | (cosine & swap);
    re[k] = radius * FloatOf(first);
    im[k] = radius * FloatOf(second);
  }
}

}  // namespace sdsl
