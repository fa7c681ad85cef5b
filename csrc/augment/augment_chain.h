// An augmentation chain as the core is given it: each step's kind, and per
// row and step four parameters [applied, p1, p2, p3] (augment_apply.h says
// what each means). Checked here before anything trusts them, and walked
// here: each stage's record length, and the span of each stage's record a
// window of the final record needs.
#ifndef SDS_LOADER_AUGMENT_AUGMENT_CHAIN_H_
#define SDS_LOADER_AUGMENT_AUGMENT_CHAIN_H_

#include <cstddef>
#include <cstdint>

namespace sdsl {

enum AugmentKind : int32_t {
  kAugmentPhase = 1,           // p1 radians
  kAugmentFrequencyShift = 2,  // p1 cycles per sample, n the stage's absolute index
  kAugmentTimeShift = 3,       // p1 samples (integral), p2 0 zero fill / 1 circular
  kAugmentGain = 4,            // p1 linear amplitude
  kAugmentNoise = 5,    // p1 target SNR dB, p2 stored SNR dB or NaN; out p2 SNR after, p3 sigma2
  kAugmentInvert = 6,   // conj(x)
  kAugmentReverse = 7,  // x[N-1-n]
  kAugmentIqImbalance = 8,  // p1 amplitude dB, p2 phase radians
  kAugmentResample = 9,     // p1 r = out rate / in rate
};
constexpr int32_t kAugmentKinds = 9;
constexpr size_t kAugmentParams = 4;

// The name of a kind as sds_loader spells it ("frequency_shift"), or null.
const char* AugmentKindName(int32_t kind);

// Longest record, at any stage, a chain may make or be given: 2^48 samples.
constexpr int64_t kAugmentMaxLength = int64_t{1} << 48;
// Past these a parameter is refused: decibels (an SNR, an IQ imbalance's
// amplitude) beyond +-300 dB, a gain's amplitude beyond 1e15, a frequency
// shift beyond +-2^20 cycles per sample (where 2 pi f n in float64 has no
// digit left of its phase), a resample factor outside [1/1024, 1024].
constexpr double kAugmentMaxDecibels = 300.0;
constexpr double kAugmentMaxAmplitude = 1e15;
constexpr double kAugmentMaxCycles = 1048576.0;
constexpr double kAugmentMinFactor = 1.0 / 1024.0;
constexpr double kAugmentMaxFactor = 1024.0;

// ReaderError(kArgument) for a kind outside 1..9.
void CheckAugmentKinds(const int32_t* kinds, size_t steps);

// ReaderError(kArgument), naming the row and step, for a non-finite or
// out-of-domain parameter of a step: `params` is one row's steps * 4.
void CheckAugmentParams(const int32_t* kinds, size_t steps, const double* params, size_t row);

// A half-open interval of a stage's record indices, possibly outside it.
struct AugmentSpan {
  int64_t start = 0;
  int64_t length = 0;
  int64_t end() const { return start + length; }
  // The part inside a record of `record_length` samples ({0, 0} if none).
  AugmentSpan Inside(int64_t record_length) const {
    const int64_t first = start > 0 ? start : 0;
    const int64_t last = end() < record_length ? end() : record_length;
    return last > first ? AugmentSpan{first, last - first} : AugmentSpan{};
  }
};

// value mod length in [0, length), for length > 0.
inline int64_t AugmentModulo(int64_t value, int64_t length) {
  const int64_t rest = value % length;
  return rest < 0 ? rest + length : rest;
}

// Each stage's record length: lengths[0] = `record_length`, lengths[k + 1]
// after step k (ceil(N_k r) for an applied resample); steps + 1 values.
// ReaderError(kArgument) naming the row when one passes kAugmentMaxLength.
void AugmentStageLengths(const int32_t* kinds, size_t steps, const double* params,
                         int64_t record_length, size_t row, int64_t* lengths);

// The span of each stage's record the window `spans[steps]` of the final
// record needs, walked back step by step: a pointwise step needs the same
// span; a time shift, a reversal or a resample what its outputs inside the
// stage's record read, clipped to the record before it (a circular shift
// whose outputs wrap round the record's end needs the whole record). An
// empty span is {0, 0}. The noise's measured power is that of its stage's
// span inside its stage's record.
void AugmentStageSpans(const int32_t* kinds, size_t steps, const double* params,
                       const int64_t* lengths, AugmentSpan* spans);

}  // namespace sdsl

#endif  // SDS_LOADER_AUGMENT_AUGMENT_CHAIN_H_
