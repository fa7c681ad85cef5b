#include "augment/resampler.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace sdsl {
namespace {

constexpr int kTableEntries = kResampleZeroCrossings * kResampleTableSteps + 2;

// I0, the modified Bessel function of the first kind, by its power series
// (every term positive: no cancellation; converges for the betas used).
double BesselI0(double x) {
  const double quarter = x * x / 4.0;
  double term = 1.0;
  double sum = 1.0;
  for (int k = 1; k < 200 && term > sum * 1e-17; ++k) {
    term *= quarter / (static_cast<double>(k) * k);
    sum += term;
  }
  return sum;
}

// The windowed sinc at z = k / kResampleTableSteps zero crossings, k in
// 0..kTableEntries-1 (zero past the last crossing), and each entry's step to
// the next, for linear interpolation.
template <typename R>
struct KernelTable {
  R value[kTableEntries];
  R slope[kTableEntries];

  KernelTable() {
    std::vector<double> exact(kTableEntries + 1, 0.0);
    const double norm = BesselI0(kResampleKaiserBeta);
    for (int k = 0; k <= kResampleZeroCrossings * kResampleTableSteps; ++k) {
      const double z = static_cast<double>(k) / kResampleTableSteps;
      const double ratio = z / kResampleZeroCrossings;
      const double window = BesselI0(kResampleKaiserBeta * std::sqrt(std::max(0.0, 1.0 - ratio * ratio))) / norm;
      const double sinc = k == 0 ? 1.0 : std::sin(M_PI * z) / (M_PI * z);
      exact[k] = sinc * window;
    }
    for (int k = 0; k < kTableEntries; ++k) {
      value[k] = static_cast<R>(exact[k]);
      slope[k] = static_cast<R>(exact[k + 1] - exact[k]);
    }
  }
};

template <typename R>
const KernelTable<R>& Table() {
  static const KernelTable<R>* const table = new KernelTable<R>();
  return *table;
}

double Cutoff(double r) { return kResamplePassband * std::min(1.0, r) / 2.0; }

}  // namespace

void ResampleInputRange(double r, int64_t m, int64_t input_length, int64_t* low, int64_t* high) {
  const double half_width = kResampleZeroCrossings / (2.0 * Cutoff(r));
  const double centre = static_cast<double>(m) / r;
  const double first = std::floor(centre - half_width);
  const double last = std::floor(centre + half_width) + 1.0;
  const double limit = static_cast<double>(input_length);
  *low = static_cast<int64_t>(std::min(std::max(first, 0.0), limit));
  *high = std::max(*low, static_cast<int64_t>(std::min(std::max(last, 0.0), limit)));
}

template <typename R>
void ResampleSpan(const R* in, int64_t in_start, int64_t in_length, int64_t input_length, double r,
                  R* out, int64_t out_start, int64_t out_length, int64_t output_length) {
  const KernelTable<R>& table = Table<R>();
  const double two_fc = 2.0 * Cutoff(r);
  const double steps = two_fc * kResampleTableSteps;
  const R scale = static_cast<R>(two_fc);
  const int64_t last_entry = int64_t{kResampleZeroCrossings} * kResampleTableSteps;
  std::vector<R> taps(static_cast<size_t>(2.0 * kResampleZeroCrossings / two_fc) + 4);
  for (int64_t j = 0; j < out_length; ++j) {
    const int64_t m = out_start + j;
    R* const y = out + 2 * j;
    y[0] = 0;
    y[1] = 0;
    if (m < 0 || m >= output_length) continue;
    int64_t low = 0;
    int64_t high = 0;
    ResampleInputRange(r, m, input_length, &low, &high);
    // Defensive: the span given covers these by construction (augment_chain).
    low = std::max(low, in_start);
    high = std::min(high, in_start + in_length);
    if (high <= low) continue;
    const size_t count = std::min(static_cast<size_t>(high - low), taps.size());
    const double centre = static_cast<double>(m) / r;
    for (size_t k = 0; k < count; ++k) {
      const double position = std::fabs(centre - static_cast<double>(low + static_cast<int64_t>(k))) * steps;
      const int64_t entry = std::min(static_cast<int64_t>(position), last_entry);
      const R fraction = static_cast<R>(position - static_cast<double>(entry));
      taps[k] = table.value[entry] + fraction * table.slope[entry];
    }
    const R* x = in + 2 * (low - in_start);
    R re[4] = {0, 0, 0, 0};
    R im[4] = {0, 0, 0, 0};
    size_t k = 0;
    for (; k + 4 <= count; k += 4) {
      for (size_t lane = 0; lane < 4; ++lane) {
        re[lane] += taps[k + lane] * x[2 * (k + lane)];
        im[lane] += taps[k + lane] * x[2 * (k + lane) + 1];
      }
    }
    for (; k < count; ++k) {
      re[0] += taps[k] * x[2 * k];
      im[0] += taps[k] * x[2 * k + 1];
    }
    y[0] = scale * ((re[0] + re[1]) + (re[2] + re[3]));
    y[1] = scale * ((im[0] + im[1]) + (im[2] + im[3]));
  }
}

template void ResampleSpan<float>(const float*, int64_t, int64_t, int64_t, double, float*, int64_t,
                                  int64_t, int64_t);
template void ResampleSpan<double>(const double*, int64_t, int64_t, int64_t, double, double*, int64_t,
                                   int64_t, int64_t);

}  // namespace sdsl
