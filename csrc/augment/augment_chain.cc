#include "augment/augment_chain.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "augment/resampler.h"
#include "base/reader_error.h"

namespace sdsl {
namespace {

[[noreturn]] void Refuse(size_t row, size_t step, int32_t kind, const std::string& what) {
  Fail(ErrorKind::kArgument, "augmentation: row " + std::to_string(row) + ", transform " +
                                 std::to_string(step) + " (" + AugmentKindName(kind) +
                                 "): " + what);
}

void NeedFinite(double value, const char* name, size_t row, size_t step, int32_t kind) {
  if (!std::isfinite(value)) {
    Refuse(row, step, kind,
           std::string(name) + " is " + std::to_string(value) + "; give a finite value");
  }
}

// Finite, and within +-limit: past it the float64 arithmetic of a transform
// (10^(dB/20), 2 pi f n) overflows or loses every digit.
void NeedWithin(double value, double limit, const char* name, const char* range, size_t row,
                size_t step, int32_t kind) {
  NeedFinite(value, name, row, step, kind);
  if (std::fabs(value) > limit) {
    Refuse(row, step, kind,
           std::string(name) + " is " + std::to_string(value) + "; give one within " + range);
  }
}

}  // namespace

const char* AugmentKindName(int32_t kind) {
  static const char* const names[] = {"phase",   "frequency_shift", "time_shift",
                                      "gain",    "noise",           "invert",
                                      "reverse", "iq_imbalance",    "resample"};
  return kind >= 1 && kind <= kAugmentKinds ? names[kind - 1] : "unknown";
}

void CheckAugmentKinds(const int32_t* kinds, size_t steps) {
  for (size_t step = 0; step < steps; ++step) {
    if (kinds[step] < 1 || kinds[step] > kAugmentKinds) {
      Fail(ErrorKind::kArgument, "augmentation: transform " + std::to_string(step) + " has kind " +
                                     std::to_string(kinds[step]) +
                                     "; the kinds are 1..9 (AUGMENT_KINDS)");
    }
  }
}

void CheckAugmentParams(const int32_t* kinds, size_t steps, const double* params, size_t row) {
  for (size_t step = 0; step < steps; ++step) {
    const int32_t kind = kinds[step];
    const double* p = params + step * kAugmentParams;
    if (p[0] != 0.0 && p[0] != 1.0) {
      Refuse(row, step, kind, "the applied flag is " + std::to_string(p[0]) + "; give 0 or 1");
    }
    if (p[0] == 0.0) continue;
    switch (kind) {
      case kAugmentPhase:
        NeedFinite(p[1], "the phase (radians)", row, step, kind);
        break;
      case kAugmentFrequencyShift:
        NeedWithin(p[1], kAugmentMaxCycles, "the shift (cycles per sample)", "+-2^20", row, step,
                   kind);
        break;
      case kAugmentTimeShift:
        NeedFinite(p[1], "the shift", row, step, kind);
        if (p[1] != std::trunc(p[1]) || std::fabs(p[1]) > static_cast<double>(kAugmentMaxLength)) {
          Refuse(row, step, kind,
                 "the shift is " + std::to_string(p[1]) +
                     "; give a whole number of samples within +-2^48");
        }
        if (p[2] != 0.0 && p[2] != 1.0) {
          Refuse(row, step, kind,
                 "the mode is " + std::to_string(p[2]) + "; give 0 (zero fill) or 1 (circular)");
        }
        break;
      case kAugmentGain:
        NeedWithin(p[1], kAugmentMaxAmplitude, "the amplitude", "[0, 1e15] (300 dB)", row, step,
                   kind);
        if (p[1] < 0.0)
          Refuse(row, step, kind, "the amplitude is negative; give a linear amplitude >= 0");
        break;
      case kAugmentNoise:
        NeedWithin(p[1], kAugmentMaxDecibels, "the target SNR (dB)", "+-300 dB", row, step, kind);
        if (!std::isnan(p[2])) {
          NeedWithin(p[2], kAugmentMaxDecibels, "the stored SNR (dB, or NaN for none)", "+-300 dB",
                     row, step, kind);
        }
        break;
      case kAugmentIqImbalance:
        NeedWithin(p[1], kAugmentMaxDecibels, "the amplitude (dB)", "+-300 dB", row, step, kind);
        NeedFinite(p[2], "the phase (radians)", row, step, kind);
        break;
      case kAugmentResample:
        NeedFinite(p[1], "the factor", row, step, kind);
        if (!(p[1] >= kAugmentMinFactor && p[1] <= kAugmentMaxFactor)) {
          Refuse(row, step, kind,
                 "the factor is " + std::to_string(p[1]) + "; give one in [1/1024, 1024]");
        }
        break;
      default:
        break;
    }
  }
}

void AugmentStageLengths(const int32_t* kinds, size_t steps, const double* params,
                         int64_t record_length, size_t row, int64_t* lengths) {
  if (record_length < 0 || record_length > kAugmentMaxLength) {
    Fail(ErrorKind::kArgument, "augmentation: row " + std::to_string(row) +
                                   " has a record length of " + std::to_string(record_length) +
                                   "; it must lie in [0, 2^48]");
  }
  lengths[0] = record_length;
  for (size_t step = 0; step < steps; ++step) {
    const double* p = params + step * kAugmentParams;
    int64_t next = lengths[step];
    if (kinds[step] == kAugmentResample && p[0] != 0.0) {
      const double scaled = std::ceil(static_cast<double>(next) * p[1]);
      if (!(scaled <= static_cast<double>(kAugmentMaxLength))) {
        Refuse(row, step, kinds[step], "the record would grow past 2^48 samples");
      }
      next = static_cast<int64_t>(scaled);
    }
    lengths[step + 1] = next;
  }
}

void AugmentStageSpans(const int32_t* kinds, size_t steps, const double* params,
                       const int64_t* lengths, AugmentSpan* spans) {
  for (size_t step = steps; step-- > 0;) {
    const double* p = params + step * kAugmentParams;
    const AugmentSpan after = spans[step + 1];
    const int64_t before_length = lengths[step];
    AugmentSpan before = after;
    if (p[0] != 0.0) {
      const AugmentSpan inside = after.Inside(lengths[step + 1]);
      switch (kinds[step]) {
        case kAugmentTimeShift: {
          const int64_t shift = static_cast<int64_t>(p[1]);
          if (p[2] == 0.0) {
            // Outputs read shift samples back; clipping both sides first keeps
            // the sum inside int64 whatever the shift.
            const int64_t lag = std::max(std::min(shift, before_length + inside.length),
                                         -(before_length + inside.length));
            before = inside.length == 0
                         ? AugmentSpan{}
                         : AugmentSpan{inside.start - lag, inside.length}.Inside(before_length);
          } else if (inside.length == 0 || before_length == 0) {
            before = AugmentSpan{};
          } else {
            const int64_t first =
                AugmentModulo(inside.start - AugmentModulo(shift, before_length), before_length);
            before = first + inside.length <= before_length ? AugmentSpan{first, inside.length}
                                                            : AugmentSpan{0, before_length};
          }
          break;
        }
        case kAugmentReverse:
          before = inside.length == 0 ? AugmentSpan{}
                                      : AugmentSpan{before_length - inside.end(), inside.length};
          break;
        case kAugmentResample: {
          if (inside.length == 0) {
            before = AugmentSpan{};
            break;
          }
          int64_t low = 0;
          int64_t high = 0;
          int64_t unused = 0;
          ResampleInputRange(p[1], inside.start, before_length, &low, &unused);
          ResampleInputRange(p[1], inside.end() - 1, before_length, &unused, &high);
          before = high > low ? AugmentSpan{low, high - low} : AugmentSpan{};
          break;
        }
        default:
          break;
      }
    }
    spans[step] = before;
  }
}

}  // namespace sdsl
