// Gaussian noise from the counter stream (counter_random.h): the pair of
// independent standard normals at stream index n is a pure function of
// (key, n), computed in blocks the compiler vectorises, so a sample's noise is
// bit for bit the same whichever span, block or thread computes it.
//
// Box-Muller on the 64 bits of StreamBits(key, n): the top 24 bits give the
// radius sqrt(-2 ln u1), u1 = (a + 1/2) 2^-24 in (0, 1) (tails cut at 5.9
// sigma); bits 8..31 the angle, 2 bits that pick its quadrant and 22 of offset
// within it.
// Logarithm, sine and cosine are float32 polynomials (Cephes' sinf and cosf,
// errors of a few float ulps; a shorter one than logf's for the logarithm,
// relative error under 2e-6), not the C library's, whose results may
// differ between versions and are not vectorised. Only exactly rounded
// operations (+, -, *, sqrt, integer conversions) and no fused multiply-add
// (vector_clones.h): the same build gives the same bytes for a key whichever
// of its vector widths the CPU runs.
#ifndef SDS_LOADER_AUGMENT_GAUSSIAN_NOISE_H_
#define SDS_LOADER_AUGMENT_GAUSSIAN_NOISE_H_

#include <cstddef>
#include <cstdint>

namespace sdsl {

constexpr size_t kNoiseBlock = 256;

// Stream indices first..first+count-1 of `key` (count <= kNoiseBlock): two
// independent N(0, 1) values each, into re[k] and im[k].
void GaussianPairs(uint64_t key, uint64_t first, size_t count, float* re, float* im);

}  // namespace sdsl

#endif  // SDS_LOADER_AUGMENT_GAUSSIAN_NOISE_H_
