#include "augment/pointwise.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "augment/gaussian_noise.h"

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

}  // namespace

template <typename R>
void Modulate(R* x, int64_t count, int64_t first, double amplitude, double radians, double cycles) {
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
  const double block_re = table_re[kPhasorBlock - 1] * step_re - table_im[kPhasorBlock - 1] * step_im;
  const double block_im = table_re[kPhasorBlock - 1] * step_im + table_im[kPhasorBlock - 1] * step_re;
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
void Conjugate(R* x, int64_t count) {
  for (int64_t k = 0; k < count; ++k) x[2 * k + 1] = -x[2 * k + 1];
}

template <typename R>
void ImbalanceIq(R* x, int64_t count, double amplitude_db, double radians) {
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
double SumPower(const R* x, int64_t count) {
  double sums[4] = {0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 4 <= count; k += 4) {
    for (int64_t lane = 0; lane < 4; ++lane) {
      const double re = x[2 * (k + lane)];
      const double im = x[2 * (k + lane) + 1];
      sums[lane] += re * re + im * im;
    }
  }
  for (; k < count; ++k) {
    const double re = x[2 * k];
    const double im = x[2 * k + 1];
    sums[0] += re * re + im * im;
  }
  return (sums[0] + sums[1]) + (sums[2] + sums[3]);
}

template <typename R>
void AddNoise(R* x, int64_t count, int64_t first, uint64_t key, double sigma2) {
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

#define SDSL_POINTWISE(R)                                                    \
  template void Modulate<R>(R*, int64_t, int64_t, double, double, double);  \
  template void Conjugate<R>(R*, int64_t);                                   \
  template void ImbalanceIq<R>(R*, int64_t, double, double);                 \
  template double SumPower<R>(const R*, int64_t);                            \
  template void AddNoise<R>(R*, int64_t, int64_t, uint64_t, double);
SDSL_POINTWISE(float)
SDSL_POINTWISE(double)
#undef SDSL_POINTWISE

}  // namespace sdsl
