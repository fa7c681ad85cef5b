// Resampling by an arbitrary factor r (out rate / in rate) with a
// Kaiser-windowed sinc, zero-phase: output m of the resampled record is
// y[m] = sum_i x[i] h(m / r - i) over the input record's indices i (samples
// outside it are zero), its length ceil(N r).
//
// The low-pass h(t) = 2 fc sinc(2 fc t) w(t / T), t in input samples, with
// cutoff fc = kResamplePassband * min(1, r) / 2 cycles per input sample (the
// passband factor leaves the Kaiser window's transition band below the lower
// rate's Nyquist frequency), spanning kResampleZeroCrossings zero crossings of
// the sinc each side (T = kResampleZeroCrossings / (2 fc)), under a Kaiser
// window of beta kResampleKaiserBeta. Its taps are read from a polyphase
// bank of the windowed sinc, kResamplePhases phases per sample of the lower
// rate, linearly interpolated between phases (as resampy and libsamplerate
// interpolate their tables): an error under 1e-6 of a tap's scale. Any r,
// not only small rationals: an upsampler gathers each output's inputs, a
// downsampler scatters each input to its outputs, both over contiguous taps.
#ifndef SDS_LOADER_AUGMENT_RESAMPLER_H_
#define SDS_LOADER_AUGMENT_RESAMPLER_H_

#include <cstdint>

namespace sdsl {

constexpr double kResamplePassband = 0.9;
constexpr int kResampleZeroCrossings = 16;
constexpr double kResampleKaiserBeta = 8.6;
constexpr int kResamplePhases = 1024;

// The input indices [*low, *high) output m reads, clipped to [0, input_length).
void ResampleInputRange(double r, int64_t m, int64_t input_length, int64_t* low, int64_t* high);

// Outputs [out_start, out_start + out_length) of resampling a record of
// `input_length` samples by r, into `out` (interleaved re, im); an output
// outside [0, output_length) is zero. `in` holds input indices
// [in_start, in_start + in_length), which must cover every index inside the
// record those outputs read (ResampleInputRange); R is float or double.
template <typename R>
void ResampleSpan(const R* in, int64_t in_start, int64_t in_length, int64_t input_length, double r,
                  R* out, int64_t out_start, int64_t out_length, int64_t output_length);

}  // namespace sdsl

#endif  // SDS_LOADER_AUGMENT_RESAMPLER_H_
