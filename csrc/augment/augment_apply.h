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
#include <vector>

#include "augment/augment_chain.h"
#include "base/row_finisher.h"

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
  // rows * channels * source_samples complex values; may be `out` itself
  // (in place) where every row's source is its window: source_samples ==
  // out_samples and src_start == out_start.
  const void* source = nullptr;
  int64_t source_samples = 0;
  void* out = nullptr;  // rows * channels * out_samples complex values
  int64_t out_samples = 0;
  bool wide = false;  // complex128; else complex64 (or float32 IQ pairs, the same bytes)
  // Added to each channel's number in the noise's key: two fields of one
  // record given different offsets get independent noise, as two receivers'
  // captures would, where one key would add the same noise to both.
  uint64_t first_channel = 0;
};

// One batch's chain over one or more fields of each row, checked whole when
// made, then run row by row: by a read's own threads as each row is decoded
// (FinishRow), and after the read on the rows it did not decode itself
// (FinishRest).
//
// The fields share the chain, the rows' parameters, ordinals, spans and
// lengths (`fields[0]`'s); each has its own samples, channel numbering
// (first_channel) and `params` (a noise step's SNR after and sigma2 written
// back, from the field's own measured power). A row is always run from the
// parameters as given, copied when made: running it again (a read that
// decodes a row twice) gives the same bytes.
class AugmentRows : public RowFinisher {
 public:
  // Checks every step's kind and every row's parameters, lengths and that
  // its source holds the part of its span inside its record (ReaderError
  // kArgument naming the row and field); a field's source and out must be
  // one buffer laid out alike (in place) or not overlap.
  //
  // `held`, where given, is where a padded window's read writes how many of
  // each row's window positions its record holds, before the row is run:
  // the row's record then ends there, not at its record_length (which
  // bounds it). Only for a chain that keeps every sample where it is.
  explicit AugmentRows(std::vector<AugmentBatch> fields, const int64_t* held = nullptr);

  void FinishRow(size_t row) const override;
  // Runs the rows FinishRow has not run, on the calling thread and up to
  // threads - 1 helpers.
  void FinishRest(size_t threads);
  size_t finished_rows() const;

 private:
  template <typename R>
  void Run(size_t row, std::vector<R>* scratch) const;

  std::vector<AugmentBatch> fields_;
  std::vector<double> given_;       // rows * steps * 4, as made
  std::vector<int64_t> lengths_;    // rows * (steps + 1)
  std::vector<AugmentSpan> spans_;  // rows * (steps + 1)
  // One byte a row, each written by the one thread running that row.
  mutable std::vector<uint8_t> finished_;
  const int64_t* held_ = nullptr;
};

// A batch of one field run whole: AugmentRows({batch}).FinishRest(threads).
void AugmentApply(const AugmentBatch& batch, size_t threads);

}  // namespace sdsl

#endif  // SDS_LOADER_AUGMENT_AUGMENT_APPLY_H_
