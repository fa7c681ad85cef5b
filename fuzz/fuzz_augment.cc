// The augmentation core (csrc/augment) on any chain, parameters, record
// lengths and windows: AugmentSpans, then AugmentApply on the span it names,
// the buffer's samples outside the record filled with whatever the input
// holds. Values out of domain must be refused (ReaderError), never reach a
// kernel; and a window's samples outside the final record must come back 0.
//
// Input: an options byte (bits 0-2 the number of steps, 1..7; bit 3
// complex128; bits 4-5 channels - 1; bit 6 two threads; bit 7 in place: the
// source is the out buffer, each row's window its whole first record, as a
// read runs a chain on whole records), the record length (u16 LE), the
// window's start (i16 LE) and length (u16 LE), then per step a
// kind byte and its four parameters (f64 LE, raw bits: NaN and infinities
// included), then sample bytes, repeated to fill the source.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "augment/augment_apply.h"
#include "augment/augment_chain.h"
#include "base/byte_io.h"
#include "base/reader_error.h"

namespace {

constexpr size_t kHeader = 7;
constexpr size_t kStepBytes = 1 + 4 * 8;
constexpr size_t kRows = 2;
// What one input may ask the kernels to hold, each stage and channel
// together: a bound of the harness (a chain may legitimately grow a record
// a thousandfold), not of the core.
constexpr int64_t kMaxSamples = int64_t{1} << 20;

// Both parts of a complex value zero (either sign).
bool IsZero(const uint8_t* value, bool wide) {
  if (wide) {
    double parts[2];
    std::memcpy(parts, value, sizeof parts);
    return parts[0] == 0.0 && parts[1] == 0.0;
  }
  float parts[2];
  std::memcpy(parts, value, sizeof parts);
  return parts[0] == 0.0f && parts[1] == 0.0f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t size) {
  if (size < kHeader) return 0;
  const uint8_t options = input[0];
  const size_t steps = 1 + (options & 7) % 7;
  const bool wide = (options & 8) != 0;
  const size_t channels = 1 + ((options >> 4) & 3) % 3;
  const size_t threads = (options & 64) != 0 ? 2 : 1;
  const int64_t record = input[1] | (input[2] << 8);
  const bool in_place = (options & 128) != 0;
  const int64_t start = in_place ? 0 : static_cast<int16_t>(input[3] | (input[4] << 8));
  const int64_t length = in_place ? record : input[5] | (input[6] << 8);
  if (size < kHeader + steps * kStepBytes) return 0;
  std::vector<int32_t> kinds(steps);
  std::vector<double> params(kRows * steps * sdsl::kAugmentParams);
  for (size_t step = 0; step < steps; ++step) {
    const uint8_t* at = input + kHeader + step * kStepBytes;
    kinds[step] = at[0] % 11;  // 0 and 10: kinds the core must refuse
    for (size_t k = 0; k < sdsl::kAugmentParams; ++k) {
      const uint64_t bits = sdsl::LoadLE64(at + 1 + 8 * k);
      double value;
      std::memcpy(&value, &bits, sizeof value);
      for (size_t row = 0; row < kRows; ++row) {
        params[(row * steps + step) * sdsl::kAugmentParams + k] = value;
      }
    }
  }
  const uint8_t* samples = input + kHeader + steps * kStepBytes;
  const size_t sample_bytes = size - kHeader - steps * kStepBytes;
  const int64_t lengths[kRows] = {record, record / 2};
  const int64_t starts[kRows] = {start, in_place ? 0 : start / 3};
  const int64_t ordinals[kRows] = {7, 1 << 30};
  const sdsl::AugmentSteps chain{kinds.data(), steps};
  try {
    int64_t src_start[kRows];
    int64_t src_length[kRows];
    int64_t final_length[kRows];
    sdsl::AugmentSpans(chain, params.data(), kRows, starts, length, lengths, src_start, src_length,
                       final_length);
    // Checked now: bound what the kernels would hold.
    int64_t widest = 1;
    for (size_t row = 0; row < kRows; ++row) {
      std::vector<int64_t> stage(steps + 1);
      std::vector<sdsl::AugmentSpan> spans(steps + 1);
      const double* row_params = params.data() + row * steps * sdsl::kAugmentParams;
      sdsl::AugmentStageLengths(kinds.data(), steps, row_params, lengths[row], row, stage.data());
      spans[steps] = sdsl::AugmentSpan{starts[row], length};
      sdsl::AugmentStageSpans(kinds.data(), steps, row_params, stage.data(), spans.data());
      for (const sdsl::AugmentSpan& span : spans) widest = std::max(widest, span.length);
      if (src_start[row] != spans[0].start || src_length[row] != spans[0].length) __builtin_trap();
    }
    if (widest * static_cast<int64_t>(channels) > kMaxSamples) return 0;
    const size_t value_bytes = wide ? 16 : 8;
    int64_t source_samples = 1;
    for (size_t row = 0; row < kRows; ++row)
      source_samples = std::max(source_samples, src_length[row]);
    if (in_place) {
      // Each row's source is its window: whatever the span the chain names.
      source_samples = length;
      for (size_t row = 0; row < kRows; ++row) src_start[row] = starts[row];
    }
    std::vector<uint8_t> source(kRows * channels * static_cast<size_t>(source_samples) *
                                value_bytes);
    for (size_t k = 0; k < source.size(); ++k) {
      source[k] = sample_bytes ? samples[k % sample_bytes] : static_cast<uint8_t>(k * 37);
    }
    std::vector<uint8_t> out(kRows * channels * static_cast<size_t>(length) * value_bytes + 1,
                             0xAB);
    if (in_place) std::copy(source.begin(), source.end(), out.begin());
    sdsl::AugmentBatch batch;
    batch.chain = chain;
    batch.params = params.data();
    batch.rows = kRows;
    batch.channels = channels;
    batch.seed = 0x5EED;
    batch.epoch = options;
    batch.ordinals = ordinals;
    batch.src_start = src_start;
    batch.record_length = lengths;
    batch.out_start = starts;
    batch.source = in_place ? out.data() : source.data();
    batch.source_samples = source_samples;
    batch.out = out.data();
    batch.out_samples = length;
    batch.wide = wide;
    sdsl::AugmentApply(batch, threads);
    // Outside the final record the window is zero, whatever the source held.
    for (size_t row = 0; row < kRows; ++row) {
      for (size_t c = 0; c < channels; ++c) {
        for (int64_t j = 0; j < length; ++j) {
          const int64_t m = starts[row] + j;
          if (m >= 0 && m < final_length[row]) continue;
          const uint8_t* value =
              out.data() + ((row * channels + c) * static_cast<size_t>(length) + j) * value_bytes;
          if (!IsZero(value, wide)) __builtin_trap();
        }
      }
    }
    if (out.back() != 0xAB) __builtin_trap();  // nothing written past the rows
  } catch (const sdsl::ReaderError&) {
  }
  return 0;
}
