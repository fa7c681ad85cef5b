// A chain of augmentation transforms run on a batch of rows, each row in one
// pass over the span of its record it needs, rows in parallel.
//
// A row's result is defined as the chain run on its whole record (record
// indices 0..N_k-1 at stage k), then the window [out_start, out_start +
// out_samples) of the final record cut (zero outside it). The core computes
// each stage only over the span the window needs (augment_chain.h), holding
// record indices as absolute ones, so a frequency shift's phase, a noise
// sample's key and a time shift's wrap are those of the whole record.
#ifndef SDS_LOADER_AUGMENT_AUGMENT_APPLY_H_
#define SDS_LOADER_AUGMENT_AUGMENT_APPLY_H_

#include <cstddef>
#include <cstdint>

namespace sdsl {

struct AugmentSteps {
  const int32_t* kinds = nullptr;  // AugmentKind of each step
  size_t steps = 0;
};

// For each row: the span [src_start, src_start + src_length) of its original
// record the window [out_start, out_start + out_length) of its final record
// needs (possibly reaching outside the record, whose samples are zero), and
// the final record's length. `params` is rows * steps * 4, checked.
void AugmentSpans(const AugmentSteps& chain, const double* params, size_t rows,
                  const int64_t* out_start, int64_t out_length, const int64_t* record_length,
                  int64_t* src_start, int64_t* src_length, int64_t* final_length);

struct AugmentBatch {
  AugmentSteps chain;
  double* params = nullptr;  // rows * steps * 4; a noise step's p2 and p3 written back
  size_t rows = 0;
  size_t channels = 0;
  uint64_t seed = 0;
  uint64_t epoch = 0;
  const int64_t* ordinals = nullptr;
  const int64_t* src_start = nullptr;      // source sample i is original index src_start + i
  const int64_t* record_length = nullptr;  // N_0 of each row
  const int64_t* out_start = nullptr;      // out sample j is final index out_start + j
  const void* source = nullptr;            // rows * channels * source_samples complex values
  int64_t source_samples = 0;
  void* out = nullptr;  // rows * channels * out_samples complex values
  int64_t out_samples = 0;
  bool wide = false;  // complex128; else complex64 (or float32 IQ pairs, the same bytes)
  // Added to each channel's number in the noise's key: two fields of one
  // record given different offsets get independent noise, as two receivers'
  // captures would, where one key would add the same noise to both.
  uint64_t first_channel = 0;
};

// Checks every step's kind and every row's parameters, lengths and that its
// source holds the part of its span inside its record (ReaderError kArgument
// naming the row), then runs the rows on the calling thread and up to
// threads - 1 helpers. `source` and `out` must not overlap.
void AugmentApply(const AugmentBatch& batch, size_t threads);

}  // namespace sdsl

#endif  // SDS_LOADER_AUGMENT_AUGMENT_APPLY_H_
