#include "augment/augment_row.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "augment/counter_random.h"
#include "augment/pointwise.h"
#include "augment/resampler.h"

namespace sdsl {
namespace {

// One row's channels at one stage: channel c's samples at 2 * c * stride.
template <typename R>
struct Stage {
  R* data;
  int64_t stride;  // complex samples per channel
  AugmentSpan span;
  // Where record index `index` of `channel` lives; only ever asked of an
  // index inside the span (or one past its end).
  R* at(size_t channel, int64_t index) const {
    return data + 2 * (static_cast<int64_t>(channel) * stride + (index - span.start));
  }
};

// Copies before's record indices [from, from + count) to after's [to, to + count).
template <typename R>
void CopyRun(const Stage<R>& before, const Stage<R>& after, size_t channels, int64_t from,
             int64_t to, int64_t count) {
  if (count <= 0) return;
  for (size_t c = 0; c < channels; ++c) {
    std::memcpy(after.at(c, to), before.at(c, from), static_cast<size_t>(count) * 2 * sizeof(R));
  }
}

template <typename R>
void TimeShift(const Stage<R>& before, const Stage<R>& after, size_t channels, int64_t length,
               int64_t shift, bool circular) {
  const AugmentSpan inside = after.span.Inside(length);
  if (inside.length == 0) return;
  if (!circular) {
    const int64_t start = std::max(inside.start, shift);
    const int64_t end = std::min(inside.end(), length + shift);
    CopyRun(before, after, channels, start - shift, start, end - start);
    return;
  }
  // y[m] = x[(m - s) mod N]: runs cut where the source index wraps round.
  for (int64_t m = inside.start; m < inside.end();) {
    const int64_t from = AugmentModulo(m - AugmentModulo(shift, length), length);
    const int64_t count = std::min(inside.end() - m, length - from);
    CopyRun(before, after, channels, from, m, count);
    m += count;
  }
}

template <typename R>
void Reverse(const Stage<R>& before, const Stage<R>& after, size_t channels, int64_t length) {
  const AugmentSpan inside = after.span.Inside(length);
  for (size_t c = 0; c < channels; ++c) {
    for (int64_t m = inside.start; m < inside.end(); ++m) {
      const R* x = before.at(c, length - 1 - m);
      R* y = after.at(c, m);
      y[0] = x[0];
      y[1] = x[1];
    }
  }
}

// The noise step: measured power, sigma2 and the SNR after, as the
// interface defines them, then the noise keyed by record index and channel.
template <typename R>
void Noise(const AugmentBatch& batch, size_t row, size_t step, const Stage<R>& stage,
           int64_t length, double* p) {
  const AugmentSpan inside = stage.span.Inside(length);
  double power = 0.0;
  if (inside.length > 0) {
    for (size_t c = 0; c < batch.channels; ++c)
      power += SumPower(stage.at(c, inside.start), inside.length);
    power /= static_cast<double>(inside.length) * static_cast<double>(batch.channels);
  }
  const double target_db = p[1];
  const double target = std::pow(10.0, target_db / 10.0);
  double signal = power;
  double existing = 0.0;
  if (!std::isnan(p[2])) {
    const double stored = std::pow(10.0, p[2] / 10.0);
    signal = power * stored / (1.0 + stored);
    existing = power / (1.0 + stored);
  }
  const double sigma2 = std::max(0.0, signal / target - existing);
  const double total = existing + sigma2;
  p[2] = total > 0.0 && signal > 0.0 ? 10.0 * std::log10(signal / total) : target_db;
  p[3] = sigma2;
  if (!(sigma2 > 0.0) || !std::isfinite(sigma2)) return;
  for (size_t c = 0; c < batch.channels; ++c) {
    const uint64_t key =
        StreamKey(batch.seed, batch.epoch, static_cast<uint64_t>(batch.ordinals[row]),
                  static_cast<uint32_t>(step), kNoiseDomain, batch.first_channel + c);
    AddNoise(stage.at(c, inside.start), inside.length, inside.start, key, sigma2);
  }
}

// Phase, frequency shift and gain steps in a row, fused: x[n] *= amplitude
// exp(j (radians + 2 pi cycles n)), n the record index at their stage.
struct Modulation {
  double amplitude = 1.0;
  double radians = 0.0;
  double cycles = 0.0;
  bool pending = false;
};

bool MapsIndices(int32_t kind) {
  return kind == kAugmentTimeShift || kind == kAugmentReverse || kind == kAugmentResample;
}

bool Modulates(int32_t kind) {
  return kind == kAugmentPhase || kind == kAugmentFrequencyShift || kind == kAugmentGain;
}

// Whether a row shifts in place: run in place (augment_apply.h) on its whole
// record, its one step that maps indices a zero-fill time shift with only
// phase, frequency shift and gain steps before it. Then the row moves
// within itself (one pass, not a copy to scratch and one back), and the
// modulation of the steps before is done on the moved samples, each as of
// its index before the move.
bool ShiftsInPlace(const AugmentBatch& batch, const int32_t* kinds, const double* params,
                   const int64_t* lengths, const AugmentSpan* spans, size_t last_map) {
  const size_t steps = batch.chain.steps;
  if (batch.source != batch.out || last_map == steps || kinds[last_map] != kAugmentTimeShift ||
      params[last_map * kAugmentParams + 2] != 0.0 || spans[steps].start != 0 ||
      spans[steps].length != lengths[0]) {
    return false;
  }
  for (size_t step = 0; step < last_map; ++step) {
    if (params[step * kAugmentParams] != 0.0 && !Modulates(kinds[step])) return false;
  }
  return true;
}

// y[m] = x[m - shift] within each channel of the window (zero where m -
// shift falls outside [0, length)), then the modulation as of m - shift.
template <typename R>
void ShiftInPlace(const Stage<R>& window, size_t channels, int64_t length, int64_t shift,
                  const Modulation& modulation) {
  const int64_t start = std::clamp<int64_t>(shift, 0, length);
  const int64_t end = std::clamp<int64_t>(length + shift, 0, length);
  for (size_t c = 0; c < channels; ++c) {
    R* const first = window.at(c, 0);
    if (end > start) {
      std::memmove(window.at(c, start), window.at(c, start - shift),
                   static_cast<size_t>(end - start) * 2 * sizeof(R));
      if (modulation.pending) {
        Modulate(window.at(c, start), end - start, start - shift, modulation.amplitude,
                 modulation.radians, modulation.cycles);
      }
    }
    std::fill(first, first + 2 * start, R(0));
    std::fill(first + 2 * std::max(end, start), first + 2 * length, R(0));
  }
}

}  // namespace

template <typename R>
void AugmentRow(const AugmentBatch& batch, size_t row, const int64_t* lengths,
                const AugmentSpan* spans, std::vector<R>* scratch) {
  const size_t steps = batch.chain.steps;
  const int32_t* kinds = batch.chain.kinds;
  double* params = batch.params + row * steps * kAugmentParams;
  const size_t channels = batch.channels;
  // The last step that maps indices; after it every step works in place on
  // the window, so that stage lives in the output row itself (and so does
  // every stage of a chain without one): one copy fewer.
  size_t last_map = steps;
  for (size_t step = 0; step < steps; ++step) {
    if (params[step * kAugmentParams] != 0.0 && MapsIndices(kinds[step])) last_map = step;
  }
  const Stage<R> window{
      static_cast<R*>(batch.out) + 2 * row * channels * static_cast<size_t>(batch.out_samples),
      batch.out_samples, spans[steps]};
  const bool shifts_in_place = ShiftsInPlace(batch, kinds, params, lengths, spans, last_map);
  const bool in_window = last_map == steps || shifts_in_place;
  int64_t stride = 0;
  for (size_t k = 0; k <= steps; ++k) stride = std::max(stride, spans[k].length);
  const size_t half = in_window ? 0 : channels * static_cast<size_t>(stride) * 2;
  if (scratch->size() < 2 * half) scratch->resize(2 * half);
  Stage<R> current = in_window ? window : Stage<R>{scratch->data(), stride, spans[0]};
  Stage<R> spare{scratch->data() + half, stride, spans[0]};

  // The source: the span's indices inside the record, zero elsewhere (a
  // row that shifts in place holds its whole record already).
  const AugmentSpan loaded = spans[0].Inside(lengths[0]);
  const R* source = static_cast<const R*>(batch.source);
  for (size_t c = 0; c < channels && !shifts_in_place; ++c) {
    R* const first = current.at(c, current.span.start);
    R* const last = current.at(c, current.span.end());
    if (loaded.length == 0) {
      std::fill(first, last, R(0));
      continue;
    }
    const R* from = source + 2 * ((row * channels + c) * static_cast<size_t>(batch.source_samples) +
                                  static_cast<size_t>(loaded.start - batch.src_start[row]));
    std::fill(first, current.at(c, loaded.start), R(0));
    // In place (augment_apply.h), the row already holds its source.
    if (from != current.at(c, loaded.start)) {
      std::memcpy(current.at(c, loaded.start), from,
                  static_cast<size_t>(loaded.length) * 2 * sizeof(R));
    }
    std::fill(current.at(c, loaded.end()), last, R(0));
  }

  Modulation modulation;
  // Pointwise steps touch the samples inside the record only: outside it
  // they stay zero whatever the multiplier (0 * inf would not).
  auto flush = [&](int64_t length) {
    const AugmentSpan inside = current.span.Inside(length);
    for (size_t c = 0; c < channels && modulation.pending && inside.length > 0; ++c) {
      Modulate(current.at(c, inside.start), inside.length, inside.start, modulation.amplitude,
               modulation.radians, modulation.cycles);
    }
    modulation = Modulation{};
  };
  for (size_t step = 0; step < steps; ++step) {
    double* p = params + step * kAugmentParams;
    if (p[0] == 0.0) continue;
    const int32_t kind = kinds[step];
    if (Modulates(kind)) {
      if (kind == kAugmentPhase) modulation.radians += p[1];
      if (kind == kAugmentFrequencyShift) modulation.cycles += p[1];
      if (kind == kAugmentGain) modulation.amplitude *= p[1];
      modulation.pending = true;
      continue;
    }
    if (shifts_in_place && step == last_map) {
      ShiftInPlace(window, channels, lengths[step], static_cast<int64_t>(p[1]), modulation);
      modulation = Modulation{};
      continue;
    }
    flush(lengths[step]);
    const AugmentSpan inside = current.span.Inside(lengths[step]);
    if (inside.length == 0 && (kind == kAugmentInvert || kind == kAugmentIqImbalance)) continue;
    switch (kind) {
      case kAugmentInvert:
        for (size_t c = 0; c < channels; ++c) Conjugate(current.at(c, inside.start), inside.length);
        continue;
      case kAugmentIqImbalance:
        for (size_t c = 0; c < channels; ++c) {
          ImbalanceIq(current.at(c, inside.start), inside.length, p[1], p[2]);
        }
        continue;
      case kAugmentNoise:
        Noise(batch, row, step, current, lengths[step], p);
        continue;
      default:
        break;
    }
    // A time step or a resample: from this stage's span to the next one's.
    if (step == last_map) spare = window;
    spare.span = spans[step + 1];
    if (kind != kAugmentResample) {  // the resampler writes every output, zero or not
      for (size_t c = 0; c < channels; ++c) {
        std::fill(spare.at(c, spare.span.start), spare.at(c, spare.span.end()), R(0));
      }
    }
    if (kind == kAugmentTimeShift) {
      TimeShift(current, spare, channels, lengths[step], static_cast<int64_t>(p[1]), p[2] != 0.0);
    } else if (kind == kAugmentReverse) {
      Reverse(current, spare, channels, lengths[step]);
    } else if (kind == kAugmentResample) {
      for (size_t c = 0; c < channels; ++c) {
        ResampleSpan(current.span.length > 0 ? current.at(c, current.span.start) : current.data,
                     current.span.start, current.span.length, lengths[step], p[1],
                     spare.at(c, spare.span.start), spare.span.start, spare.span.length,
                     lengths[step + 1]);
      }
    }
    std::swap(current, spare);
  }
  flush(lengths[steps]);
}

template void AugmentRow<float>(const AugmentBatch&, size_t, const int64_t*, const AugmentSpan*,
                                std::vector<float>*);
template void AugmentRow<double>(const AugmentBatch&, size_t, const int64_t*, const AugmentSpan*,
                                 std::vector<double>*);

}  // namespace sdsl
