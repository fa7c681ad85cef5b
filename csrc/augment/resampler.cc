#include "augment/resampler.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "augment/vector_clones.h"

namespace sdsl {
namespace {

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

// The windowed sinc g(z) (z in zero crossings) sampled as a polyphase bank:
// row q holds g(kResamplePassband * (q / kResamplePhases - k)) for the
// kBankTaps integer offsets k = j - kBankCentre, which cover every k with
// |z| <= kResampleZeroCrossings for a phase in [0, 1); rows 0..kResamplePhases,
// and each row's step to the next, for linear interpolation between phases.
// The same bank serves every factor: an upsampler gathers an output's inputs
// at offsets phase - k (phase that of m / r), a downsampler scatters an
// input to the outputs at offsets k - phase (phase that of r i), both spaced
// by kResamplePassband zero crossings in the lower rate's samples.
//
// Each row is laid out as the kernels read it: the taps' values, each twice
// (for the re and im of a sample), then their slopes the same way, so that a
// tap is interpolated in the same vector as it is applied, the row read once.
constexpr int kBankTaps = 36;
constexpr int kBankCentre = 17;
constexpr int kBankRow = 4 * kBankTaps;

template <typename R>
struct KernelBank {
  R row[kResamplePhases * kBankRow];

  KernelBank() {
    const double norm = BesselI0(kResampleKaiserBeta);
    std::vector<double> exact((kResamplePhases + 1) * kBankTaps, 0.0);
    for (int q = 0; q <= kResamplePhases; ++q) {
      for (int j = 0; j < kBankTaps; ++j) {
        const double z =
            kResamplePassband * (static_cast<double>(q) / kResamplePhases - (j - kBankCentre));
        const double ratio = z / kResampleZeroCrossings;
        if (std::fabs(ratio) > 1.0) continue;
        const double window =
            BesselI0(kResampleKaiserBeta * std::sqrt(std::max(0.0, 1.0 - ratio * ratio))) / norm;
        const double sinc = z == 0.0 ? 1.0 : std::sin(M_PI * z) / (M_PI * z);
        exact[q * kBankTaps + j] = sinc * window;
      }
    }
    for (int q = 0; q < kResamplePhases; ++q) {
      R* values = row + q * kBankRow;
      R* slopes = values + 2 * kBankTaps;
      for (int j = 0; j < kBankTaps; ++j) {
        const int k = q * kBankTaps + j;
        values[2 * j] = values[2 * j + 1] = static_cast<R>(exact[k]);
        slopes[2 * j] = slopes[2 * j + 1] = static_cast<R>(exact[k + kBankTaps] - exact[k]);
      }
    }
  }
};

template <typename R>
const KernelBank<R>& Bank() {
  static const KernelBank<R>* const bank = new KernelBank<R>();
  return *bank;
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

namespace {

// Eight values of R, added and multiplied lane by lane.
template <typename R>
struct LanesOf;
template <>
struct LanesOf<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct LanesOf<double> {
  typedef double type __attribute__((vector_size(64)));
};
template <typename R>
using Lanes = typename LanesOf<R>::type;

// The bank's row below `phase` in [0, 1) and the fraction of the way to the
// next: tap j's weight is value[j] + fraction * slope[j], the values and
// slopes paired as the row lays them out.
template <typename R>
inline __attribute__((always_inline)) const R* Row(const KernelBank<R>& bank, double phase,
                                                   R* fraction) {
  const double position = phase * kResamplePhases;
  const int row = std::min(static_cast<int>(position), kResamplePhases - 1);
  *fraction = static_cast<R>(position - row);
  return bank.row + row * kBankRow;
}

// The body of ResampleSpan, compiled into each vector width's copy.
template <typename R>
inline __attribute__((always_inline)) void ResampleBody(const R* in, int64_t in_start,
                                                        int64_t in_length, int64_t input_length,
                                                        double r, R* out, int64_t out_start,
                                                        int64_t out_length, int64_t output_length) {
  const KernelBank<R>& bank = Bank<R>();
  std::fill(out, out + 2 * std::max<int64_t>(out_length, 0), R(0));
  // Outputs inside the record, inputs inside the record and the span given.
  const int64_t first_out = std::max<int64_t>(out_start, 0);
  const int64_t end_out = std::min<int64_t>(out_start + out_length, output_length);
  const int64_t first_in = std::max<int64_t>(in_start, 0);
  const int64_t end_in = std::min<int64_t>(in_start + in_length, input_length);
  if (end_out <= first_out || end_in <= first_in) return;
  if (r >= 1.0) {
    // Gather: output m reads inputs floor(m / r) + k.
    for (int64_t m = first_out; m < end_out; ++m) {
      const double centre = static_cast<double>(m) / r;
      const double whole = std::floor(centre);
      R fraction = 0;
      const R* row = Row(bank, centre - whole, &fraction);
      const int64_t base = static_cast<int64_t>(whole) - kBankCentre;  // input of weight 0
      const int64_t low = std::max<int64_t>(first_in - base, 0);
      const int64_t high = std::min<int64_t>(end_in - base, kBankTaps);
      if (high <= low) continue;
      // Eight running sums, re and im of four taps at a time, each in order
      // (a vector of the compiler's, whatever width the copy has).
      const R* x = in + 2 * (base + low - in_start);
      const R* v = row + 2 * low;
      const R* s = v + 2 * kBankTaps;
      const int64_t values = 2 * (high - low);
      Lanes<R> sums = {};
      int64_t e = 0;
      for (; e + 8 <= values; e += 8) {
        Lanes<R> vv;
        Lanes<R> sv;
        Lanes<R> xv;
        std::memcpy(&vv, v + e, sizeof vv);
        std::memcpy(&sv, s + e, sizeof sv);
        std::memcpy(&xv, x + e, sizeof xv);
        sums += (vv + fraction * sv) * xv;
      }
      for (; e < values; ++e) sums[e % 2] += (v[e] + fraction * s[e]) * x[e];
      const R scale = static_cast<R>(kResamplePassband);
      R* y = out + 2 * (m - out_start);
      y[0] = scale * ((sums[0] + sums[2]) + (sums[4] + sums[6]));
      y[1] = scale * ((sums[1] + sums[3]) + (sums[5] + sums[7]));
    }
    return;
  }
  // Scatter: input i adds to outputs floor(r i) + k, inputs in order.
  int64_t unused = 0;
  int64_t from = 0;
  int64_t to = 0;
  ResampleInputRange(r, first_out, input_length, &from, &unused);
  ResampleInputRange(r, end_out - 1, input_length, &unused, &to);
  from = std::max(from, first_in);
  to = std::min(to, end_in);
  for (int64_t i = from; i < to; ++i) {
    const double centre = r * static_cast<double>(i);
    const double whole = std::floor(centre);
    R fraction = 0;
    const R* row = Row(bank, centre - whole, &fraction);
    const int64_t base = static_cast<int64_t>(whole) - kBankCentre;  // output of weight 0
    const int64_t low = std::max<int64_t>(first_out - base, 0);
    const int64_t high = std::min<int64_t>(end_out - base, kBankTaps);
    if (high <= low) continue;
    const R xr = in[2 * (i - in_start)];
    const R xi = in[2 * (i - in_start) + 1];
    const Lanes<R> sample = {xr, xi, xr, xi, xr, xi, xr, xi};
    R* y = out + 2 * (base + low - out_start);
    const R* v = row + 2 * low;
    const R* s = v + 2 * kBankTaps;
    const int64_t values = 2 * (high - low);
    int64_t e = 0;
    for (; e + 8 <= values; e += 8) {
      Lanes<R> yv;
      Lanes<R> vv;
      Lanes<R> sv;
      std::memcpy(&yv, y + e, sizeof yv);
      std::memcpy(&vv, v + e, sizeof vv);
      std::memcpy(&sv, s + e, sizeof sv);
      yv += (vv + fraction * sv) * sample;
      std::memcpy(y + e, &yv, sizeof yv);
    }
    for (; e < values; ++e) y[e] += (v[e] + fraction * s[e]) * (e % 2 == 0 ? xr : xi);
  }
  const R scale = static_cast<R>(kResamplePassband * r);
  for (int64_t k = 2 * (first_out - out_start); k < 2 * (end_out - out_start); ++k) out[k] *= scale;
}

SDSL_VECTOR_CLONES
void ResampleFloat(const float* in, int64_t in_start, int64_t in_length, int64_t input_length,
                   double r, float* out, int64_t out_start, int64_t out_length,
                   int64_t output_length) {
  ResampleBody<float>(in, in_start, in_length, input_length, r, out, out_start, out_length,
                      output_length);
}

SDSL_VECTOR_CLONES
void ResampleDouble(const double* in, int64_t in_start, int64_t in_length, int64_t input_length,
                    double r, double* out, int64_t out_start, int64_t out_length,
                    int64_t output_length) {
  ResampleBody<double>(in, in_start, in_length, input_length, r, out, out_start, out_length,
                       output_length);
}

}  // namespace

template <>
void ResampleSpan<float>(const float* in, int64_t in_start, int64_t in_length, int64_t input_length,
                         double r, float* out, int64_t out_start, int64_t out_length,
                         int64_t output_length) {
  ResampleFloat(in, in_start, in_length, input_length, r, out, out_start, out_length,
                output_length);
}

template <>
void ResampleSpan<double>(const double* in, int64_t in_start, int64_t in_length,
                          int64_t input_length, double r, double* out, int64_t out_start,
                          int64_t out_length, int64_t output_length) {
  ResampleDouble(in, in_start, in_length, input_length, r, out, out_start, out_length,
                 output_length);
}

}  // namespace sdsl
