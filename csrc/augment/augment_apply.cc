#include "augment/augment_apply.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "augment/augment_chain.h"
#include "augment/augment_row.h"
#include "base/reader_error.h"
#include "base/worker_pool.h"

namespace sdsl {
namespace {

// The threads augmentation runs rows on, beside the caller's, started on
// first need and kept for the process (forked children start their own).
WorkerPool& Workers() {
  static WorkerPool* const workers = new WorkerPool();
  return *workers;
}

// Every row's stage lengths and spans, checked: (steps + 1) per row each.
struct Plan {
  std::vector<int64_t> lengths;
  std::vector<AugmentSpan> spans;
};

Plan PlanRows(const AugmentSteps& chain, const double* params, size_t rows,
              const int64_t* out_start, int64_t out_length, const int64_t* record_length) {
  if (out_length < 0 || out_length > kAugmentMaxLength) {
    Fail(ErrorKind::kArgument, "augmentation: a window of " + std::to_string(out_length) +
                                   " samples; it must lie in [0, 2^48]");
  }
  CheckAugmentKinds(chain.kinds, chain.steps);
  const size_t width = chain.steps + 1;
  Plan plan;
  plan.lengths.resize(rows * width);
  plan.spans.resize(rows * width);
  for (size_t row = 0; row < rows; ++row) {
    const double* row_params = params + row * chain.steps * kAugmentParams;
    CheckAugmentParams(chain.kinds, chain.steps, row_params, row);
    if (out_start[row] < -kAugmentMaxLength || out_start[row] > kAugmentMaxLength) {
      Fail(ErrorKind::kArgument, "augmentation: row " + std::to_string(row) +
                                     " has a window start of " + std::to_string(out_start[row]) +
                                     "; it must lie within +-2^48");
    }
    int64_t* lengths = &plan.lengths[row * width];
    AugmentSpan* spans = &plan.spans[row * width];
    AugmentStageLengths(chain.kinds, chain.steps, row_params, record_length[row], row, lengths);
    spans[chain.steps] = AugmentSpan{out_start[row], out_length};
    AugmentStageSpans(chain.kinds, chain.steps, row_params, lengths, spans);
  }
  return plan;
}

void CheckSources(const AugmentBatch& batch, const Plan& plan, size_t field) {
  const size_t width = batch.chain.steps + 1;
  const std::string which = field == 0 ? "" : " (field " + std::to_string(field) + ")";
  if (batch.source_samples < 0 || batch.out_samples < 0) {
    Fail(ErrorKind::kArgument, "augmentation: negative sample counts" + which);
  }
  const size_t sample_bytes = batch.wide ? 16 : 8;
  const char* in = static_cast<const char*>(batch.source);
  const char* out = static_cast<const char*>(batch.out);
  const size_t in_bytes =
      batch.rows * batch.channels * static_cast<size_t>(batch.source_samples) * sample_bytes;
  const size_t out_bytes =
      batch.rows * batch.channels * static_cast<size_t>(batch.out_samples) * sample_bytes;
  const bool in_place = in == out;
  if (in_place && batch.source_samples != batch.out_samples) {
    Fail(ErrorKind::kArgument,
         "augmentation" + which + ": in place, the source and out must hold as many samples a row");
  }
  if (!in_place && in_bytes > 0 && out_bytes > 0 && in < out + out_bytes && out < in + in_bytes) {
    Fail(ErrorKind::kArgument,
         "augmentation" + which +
             ": source and out must not share memory unless they are one buffer, run in place; "
             "give out a buffer of its own");
  }
  for (size_t row = 0; row < batch.rows; ++row) {
    if (in_place && batch.src_start[row] != batch.out_start[row]) {
      Fail(ErrorKind::kArgument, "augmentation" + which + ": row " + std::to_string(row) +
                                     " runs in place, and its source starts at " +
                                     std::to_string(batch.src_start[row]) + ", its window at " +
                                     std::to_string(batch.out_start[row]));
    }
    const AugmentSpan inside = plan.spans[row * width].Inside(plan.lengths[row * width]);
    const int64_t start = inside.start;
    const int64_t end = inside.end();
    if (inside.length == 0) continue;
    const int64_t first = batch.src_start[row];
    if (first < -kAugmentMaxLength || first > kAugmentMaxLength || start < first ||
        end - first > batch.source_samples) {
      Fail(ErrorKind::kArgument,
           "augmentation" + which + ": row " + std::to_string(row) + " needs samples [" +
               std::to_string(start) + ", " + std::to_string(end) +
               ") of its record, but its source holds [" + std::to_string(first) + ", " +
               std::to_string(first + batch.source_samples) +
               "); read the span augment_spans gives");
    }
  }
}

// Scratch a thread keeps between rows (and batches): a row's stages
// between time steps. Freed past this, so that one long record does not
// leave a thread holding its size for good.
constexpr size_t kKeptScratchBytes = size_t{8} << 20;

template <typename R>
std::vector<R>& ThreadScratch() {
  thread_local std::vector<R> scratch;
  return scratch;
}

template <typename R>
void Release(std::vector<R>* scratch) {
  if (scratch->capacity() * sizeof(R) > kKeptScratchBytes) {
    scratch->clear();
    scratch->shrink_to_fit();
  }
}

}  // namespace

void AugmentSpans(const AugmentSteps& chain, const double* params, size_t rows,
                  const int64_t* out_start, int64_t out_length, const int64_t* record_length,
                  int64_t* src_start, int64_t* src_length, int64_t* final_length) {
  const Plan plan = PlanRows(chain, params, rows, out_start, out_length, record_length);
  const size_t width = chain.steps + 1;
  for (size_t row = 0; row < rows; ++row) {
    src_start[row] = plan.spans[row * width].start;
    src_length[row] = plan.spans[row * width].length;
    final_length[row] = plan.lengths[row * width + chain.steps];
  }
}

AugmentRows::AugmentRows(std::vector<AugmentBatch> fields, const int64_t* held)
    : fields_(std::move(fields)), held_(held) {
  if (fields_.empty()) Fail(ErrorKind::kArgument, "augmentation: no field to run the chain on");
  const AugmentBatch& first = fields_.front();
  for (size_t step = 0; held != nullptr && step < first.chain.steps; ++step) {
    const int32_t kind = first.chain.kinds[step];
    if (kind == kAugmentTimeShift || kind == kAugmentReverse || kind == kAugmentResample) {
      Fail(ErrorKind::kArgument,
           std::string("augmentation: a row's held positions stand for its record's end only "
                       "where the chain keeps every sample where it is, and step ") +
               std::to_string(step) + " is a " + AugmentKindName(kind));
    }
  }
  for (const AugmentBatch& field : fields_) {
    if (field.chain.kinds != first.chain.kinds || field.chain.steps != first.chain.steps ||
        field.rows != first.rows || field.ordinals != first.ordinals ||
        field.src_start != first.src_start || field.record_length != first.record_length ||
        field.out_start != first.out_start || field.seed != first.seed ||
        field.epoch != first.epoch) {
      Fail(ErrorKind::kArgument,
           "augmentation: the fields of one batch share its chain, rows and spans");
    }
  }
  Plan plan = PlanRows(first.chain, first.params, first.rows, first.out_start, first.out_samples,
                       first.record_length);
  for (size_t f = 0; f < fields_.size(); ++f) {
    if (fields_[f].out_samples != first.out_samples) {
      Fail(ErrorKind::kArgument, "augmentation: the fields of one batch share a window length");
    }
    CheckSources(fields_[f], plan, f);
  }
  lengths_ = std::move(plan.lengths);
  spans_ = std::move(plan.spans);
  given_.assign(first.params, first.params + first.rows * first.chain.steps * kAugmentParams);
  finished_.assign(first.rows, 0);
}

template <typename R>
void AugmentRows::Run(size_t row, std::vector<R>* scratch) const {
  const AugmentBatch& first = fields_.front();
  const size_t width = first.chain.steps + 1;
  const size_t values = first.chain.steps * kAugmentParams;
  const int64_t* lengths = &lengths_[row * width];
  // A chain that keeps samples where they are has one length at every
  // stage: the record's end, as the read says it (within the planned one).
  thread_local std::vector<int64_t> held_lengths;
  if (held_ != nullptr) {
    const int64_t end =
        first.out_start[row] + std::clamp<int64_t>(held_[row], 0, first.out_samples);
    held_lengths.assign(width, std::clamp<int64_t>(end, 0, lengths[0]));
    lengths = held_lengths.data();
  }
  for (const AugmentBatch& field : fields_) {
    if (field.channels == 0 || field.wide != std::is_same<R, double>::value) continue;
    std::copy_n(given_.data() + row * values, values, field.params + row * values);
    AugmentRow<R>(field, row, lengths, &spans_[row * width], scratch);
  }
}

void AugmentRows::FinishRow(size_t row) const {
  Run<float>(row, &ThreadScratch<float>());
  Run<double>(row, &ThreadScratch<double>());
  Release(&ThreadScratch<float>());
  Release(&ThreadScratch<double>());
  finished_[row] = 1;
}

void AugmentRows::FinishRest(size_t threads) {
  std::vector<size_t> rest;
  for (size_t row = 0; row < finished_.size(); ++row) {
    if (!finished_[row]) rest.push_back(row);
  }
  std::atomic<size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto task = [&]() {
    for (;;) {
      const size_t k = next.fetch_add(1, std::memory_order_relaxed);
      if (k >= rest.size()) return;
      try {
        FinishRow(rest[k]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next.store(rest.size(), std::memory_order_relaxed);
        return;
      }
    }
  };
  const size_t helpers =
      std::min(threads == 0 ? size_t{0} : threads - 1, rest.empty() ? 0 : rest.size() - 1);
  Workers().Run(helpers, task);
  if (failure) std::rethrow_exception(failure);
}

size_t AugmentRows::finished_rows() const {
  return static_cast<size_t>(std::count(finished_.begin(), finished_.end(), uint8_t{1}));
}

void AugmentApply(const AugmentBatch& batch, size_t threads) {
  AugmentRows rows({batch});
  rows.FinishRest(threads);
}

}  // namespace sdsl
