#include "augment/pointwise.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "augment/gaussian_noise.h"
#include "augment/vector_clones.h"

namespace sdsl {
namespace {

constexpr int64_t kPhasorBlock = 64;
// Blocks between anchors computed directly (4,096 samples).
constexpr int64_t kAnchorBlocks = 64;

// exp(j 2 pi cycles n), the cycles reduced to a fraction first.
void Phasor(double cycles, int64_t n, double* re, double* im) {
  const double turns = cycles * static_cast<double>(n);
  const double angle = 2.0 * M_PI * (turns - std::floor(turns));
  *re = std::cos(angle);
  *im = std::sin(angle);
}

template <typename R>
inline __attribute__((always_inline)) void ModulateBody(R* x, int64_t count, int64_t first,
                                                        double amplitude, double radians,
                                                        double cycles) {
  if (count <= 0) return;
  // The block's phasors exp(j 2 pi cycles k), k < 64, by recurrence in float64.
  double step_re = 0;
  double step_im = 0;
  Phasor(cycles, 1, &step_re, &step_im);
  double table_re[kPhasorBlock];
  double table_im[kPhasorBlock];
  table_re[0] = 1.0;
  table_im[0] = 0.0;
  for (int64_t k = 1; k < kPhasorBlock; ++k) {
    table_re[k] = table_re[k - 1] * step_re - table_im[k - 1] * step_im;
    table_im[k] = table_re[k - 1] * step_im + table_im[k - 1] * step_re;
  }
  const double block_re =
      table_re[kPhasorBlock - 1] * step_re - table_im[kPhasorBlock - 1] * step_im;
  const double block_im =
      table_re[kPhasorBlock - 1] * step_im + table_im[kPhasorBlock - 1] * step_re;
  R tr[kPhasorBlock];
  R ti[kPhasorBlock];
  for (int64_t k = 0; k < kPhasorBlock; ++k) {
    tr[k] = static_cast<R>(table_re[k]);
    ti[k] = static_cast<R>(table_im[k]);
  }
  const double base_re = amplitude * std::cos(radians);
  const double base_im = amplitude * std::sin(radians);
  double anchor_re = 0;
  double anchor_im = 0;
  for (int64_t done = 0, block = 0; done < count; done += kPhasorBlock, ++block) {
    if (block % kAnchorBlocks == 0) {
      double re = 0;
      double im = 0;
      Phasor(cycles, first + done, &re, &im);
      anchor_re = base_re * re - base_im * im;
      anchor_im = base_re * im + base_im * re;
    } else {
      const double re = anchor_re * block_re - anchor_im * block_im;
      anchor_im = anchor_re * block_im + anchor_im * block_re;
      anchor_re = re;
    }
    const R ar = static_cast<R>(anchor_re);
    const R ai = static_cast<R>(anchor_im);
    const int64_t n = std::min(kPhasorBlock, count - done);
    R* y = x + 2 * done;
    for (int64_t k = 0; k < n; ++k) {
      const R pr = ar * tr[k] - ai * ti[k];
      const R pi = ar * ti[k] + ai * tr[k];
      const R xr = y[2 * k];
      const R xi = y[2 * k + 1];
      y[2 * k] = xr * pr - xi * pi;
      y[2 * k + 1] = xr * pi + xi * pr;
    }
  }
}

template <typename R>
inline __attribute__((always_inline)) void ConjugateBody(R* x, int64_t count) {
  for (int64_t k = 0; k < count; ++k) x[2 * k + 1] = -x[2 * k + 1];
}

template <typename R>
inline __attribute__((always_inline)) void ImbalanceIqBody(R* x, int64_t count, double amplitude_db,
                                                           double radians) {
  const R a = static_cast<R>(std::pow(10.0, amplitude_db / 20.0));
  const R c = static_cast<R>(std::cos(radians));
  const R s = static_cast<R>(std::sin(radians));
  for (int64_t k = 0; k < count; ++k) {
    const R i = x[2 * k];
    const R q = x[2 * k + 1];
    x[2 * k] = a * i;
    x[2 * k + 1] = q * c - i * s;
  }
}

template <typename R>
inline __attribute__((always_inline)) double SumPowerBody(const R* x, int64_t count) {
  // 32 running sums of float64 squares, each in order, so the result is
  // the same whatever vector width runs it; 32, not 8, so that four
  // vectors' additions are in flight at once rather than each waiting for
  // the one before (the loop was bound by an addition's latency).
  constexpr int kLanes = 32;
  double sums[kLanes] = {};
  const int64_t values = 2 * count;
  int64_t k = 0;
  for (; k + kLanes <= values; k += kLanes) {
    for (int lane = 0; lane < kLanes; ++lane) {
      const double value = static_cast<double>(x[k + lane]);
      sums[lane] += value * value;
    }
  }
  for (; k < values; ++k) sums[k % kLanes] += static_cast<double>(x[k]) * static_cast<double>(x[k]);
  // Halved pairwise, in a fixed order.
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int lane = 0; lane < width; ++lane) sums[lane] += sums[lane + width];
  }
  return sums[0];
}

template <typename R>
inline __attribute__((always_inline)) void AddNoiseBody(R* x, int64_t count, int64_t first,
                                                        uint64_t key, double sigma2) {
  const R scale = static_cast<R>(std::sqrt(sigma2 / 2.0));
  float re[kNoiseBlock];
  float im[kNoiseBlock];
  for (int64_t done = 0; done < count; done += static_cast<int64_t>(kNoiseBlock)) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(kNoiseBlock, count - done));
    GaussianPairs(key, static_cast<uint64_t>(first + done), n, re, im);
    R* y = x + 2 * done;
    for (size_t k = 0; k < n; ++k) {
      y[2 * k] += scale * static_cast<R>(re[k]);
      y[2 * k + 1] += scale * static_cast<R>(im[k]);
    }
  }
}

// Each kernel compiled for each vector width (vector_clones.h), for float
// and double, behind the templates the header declares.
#define SDSL_POINTWISE(R, Suffix)                                                                \
  SDSL_VECTOR_CLONES void Modulate##Suffix(R* x, int64_t count, int64_t first, double amplitude, \
                                           double radians, double cycles) {                      \
    ModulateBody(x, count, first, amplitude, radians, cycles);                                   \
  }                                                                                              \
  SDSL_VECTOR_CLONES void Conjugate##Suffix(R* x, int64_t count) { ConjugateBody(x, count); }    \
  SDSL_VECTOR_CLONES void ImbalanceIq##Suffix(R* x, int64_t count, double amplitude_db,          \
                                              double radians) {                                  \
    ImbalanceIqBody(x, count, amplitude_db, radians);                                            \
  }                                                                                              \
  SDSL_VECTOR_CLONES double SumPower##Suffix(const R* x, int64_t count) {                        \
    return SumPowerBody(x, count);                                                               \
  }                                                                                              \
  SDSL_VECTOR_CLONES void AddNoise##Suffix(R* x, int64_t count, int64_t first, uint64_t key,     \
                                           double sigma2) {                                      \
    AddNoiseBody(x, count, first, key, sigma2);                                                  \
  }
SDSL_POINTWISE(float, Float)
SDSL_POINTWISE(double, Double)
#undef SDSL_POINTWISE

}  // namespace

#define SDSL_POINTWISE(R, Suffix)                                                         \
  template <>                                                                             \
  void Modulate<R>(R * x, int64_t count, int64_t first, double amplitude, double radians, \
                   double cycles) {                                                       \
    Modulate##Suffix(x, count, first, amplitude, radians, cycles);                        \
  }                                                                                       \
  template <>                                                                             \
  void Conjugate<R>(R * x, int64_t count) {                                               \
    Conjugate##Suffix(x, count);                                                          \
  }                                                                                       \
  template <>                                                                             \
  void ImbalanceIq<R>(R * x, int64_t count, double amplitude_db, double radians) {        \
    ImbalanceIq##Suffix(x, count, amplitude_db, radians);                                 \
  }                                                                                       \
  template <>                                                                             \
  double SumPower<R>(const R* x, int64_t count) {                                         \
    return SumPower##Suffix(x, count);                                                    \
  }                                                                                       \
  template <>                                                                             \
  void AddNoise<R>(R * x, int64_t count, int64_t first, uint64_t key, double sigma2) {    \
    AddNoise##Suffix(x, count, first, key, sigma2);                                       \
  }
SDSL_POINTWISE(float, Float)
SDSL_POINTWISE(double, Double)
#undef SDSL_POINTWISE

}  // namespace sdsl
