// One row of an augmentation batch run stage by stage over its spans: the
// pointwise steps in place (a run of phase, frequency shift and gain steps
// fused into one modulation), the time steps as index maps from one stage's
// span to the next (a circular shift copied in the runs its wrap cuts), a
// resample read from the span it needs.
#ifndef SDS_LOADER_AUGMENT_AUGMENT_ROW_H_
#define SDS_LOADER_AUGMENT_AUGMENT_ROW_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "augment/augment_apply.h"
#include "augment/augment_chain.h"

namespace sdsl {

// Row `row` of `batch`, whose stage lengths and spans (steps + 1 each,
// spans[steps] its window) are checked; `scratch` is reused between rows.
// R is float (complex64) or double (complex128).
template <typename R>
void AugmentRow(const AugmentBatch& batch, size_t row, const int64_t* lengths,
                const AugmentSpan* spans, std::vector<R>* scratch);

}  // namespace sdsl

#endif  // SDS_LOADER_AUGMENT_AUGMENT_ROW_H_
