#include "augment/augment_apply.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <string>
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

void CheckSources(const AugmentBatch& batch, const Plan& plan) {
  const size_t width = batch.chain.steps + 1;
  for (size_t row = 0; row < batch.rows; ++row) {
    const AugmentSpan inside = plan.spans[row * width].Inside(plan.lengths[row * width]);
    const int64_t start = inside.start;
    const int64_t end = inside.end();
    if (inside.length == 0) continue;
    const int64_t first = batch.src_start[row];
    if (first < -kAugmentMaxLength || first > kAugmentMaxLength || start < first ||
        end - first > batch.source_samples) {
      Fail(ErrorKind::kArgument,
           "augmentation: row " + std::to_string(row) + " needs samples [" + std::to_string(start) +
               ", " + std::to_string(end) + ") of its record, but its source holds [" +
               std::to_string(first) + ", " + std::to_string(first + batch.source_samples) +
               "); read the span augment_spans gives");
    }
  }
}

template <typename R>
void RunRows(const AugmentBatch& batch, const Plan& plan, size_t threads) {
  const size_t width = batch.chain.steps + 1;
  std::atomic<size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto task = [&]() {
    std::vector<R> scratch;
    for (;;) {
      const size_t row = next.fetch_add(1, std::memory_order_relaxed);
      if (row >= batch.rows) return;
      try {
        AugmentRow<R>(batch, row, &plan.lengths[row * width], &plan.spans[row * width], &scratch);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next.store(batch.rows, std::memory_order_relaxed);
        return;
      }
    }
  };
  const size_t helpers =
      std::min(threads == 0 ? size_t{0} : threads - 1, batch.rows > 0 ? batch.rows - 1 : 0);
  Workers().Run(helpers, task);
  if (failure) std::rethrow_exception(failure);
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

void AugmentApply(const AugmentBatch& batch, size_t threads) {
  if (batch.source_samples < 0 || batch.out_samples < 0) {
    Fail(ErrorKind::kArgument, "augmentation: negative sample counts");
  }
  const Plan plan = PlanRows(batch.chain, batch.params, batch.rows, batch.out_start,
                             batch.out_samples, batch.record_length);
  CheckSources(batch, plan);
  if (batch.rows == 0 || batch.channels == 0) return;
  if (batch.wide) {
    RunRows<double>(batch, plan, threads);
  } else {
    RunRows<float>(batch, plan, threads);
  }
}

}  // namespace sdsl
