// The pointwise transforms on a buffer of complex samples (interleaved re,
// im; R float or double) holding record indices first, first + 1, ...: a
// modulation (phase, frequency shift and gain fused), conjugation, IQ
// imbalance, the power a noise step measures and the noise it adds.
#ifndef SDS_LOADER_AUGMENT_POINTWISE_H_
#define SDS_LOADER_AUGMENT_POINTWISE_H_

#include <cstdint>

namespace sdsl {

// x[n] *= amplitude * exp(j (radians + 2 pi cycles n)), n = first + i the
// record index. The phasor runs by a recurrence in float64 from anchors
// exp(j 2 pi cycles n) computed directly every 4,096 samples, and is rounded to
// R once per sample: an error of a few R ulps whatever the record's length.
template <typename R>
void Modulate(R* x, int64_t count, int64_t first, double amplitude, double radians, double cycles);

// x = conj(x).
template <typename R>
void Conjugate(R* x, int64_t count);

// I' = a I, Q' = Q cos(phi) - I sin(phi), a = 10^(amplitude_db / 20).
template <typename R>
void ImbalanceIq(R* x, int64_t count, double amplitude_db, double radians);

// The sum of |x|^2, in float64.
template <typename R>
double SumPower(const R* x, int64_t count);

// x[n] += sqrt(sigma2 / 2) (g_re + j g_im), (g_re, g_im) the Gaussian pair at
// stream index n = first + i of `key` (gaussian_noise.h): CN(0, sigma2).
template <typename R>
void AddNoise(R* x, int64_t count, int64_t first, uint64_t key, double sigma2);

}  // namespace sdsl

#endif  // SDS_LOADER_AUGMENT_POINTWISE_H_
