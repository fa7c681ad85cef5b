#include "read/ordinal_runs.h"

#include <algorithm>
#include <string>

#include "base/reader_error.h"

namespace sdsl {

void CheckOrdinals(const int64_t* indices, size_t count, int64_t length, int64_t* ordinals) {
  for (size_t k = 0; k < count; ++k) {
    const int64_t index = indices[k];
    // `length` is a record count, never negative, so neither sum overflows.
    const int64_t ordinal = index < 0 ? index + length : index;
    if (index < -length || ordinal >= length) {
      Fail(ErrorKind::kIndex, "index " + std::to_string(index) +
                                  " is out of range for a dataset of " + std::to_string(length) +
                                  " records (valid: " + std::to_string(-length) + " to " +
                                  std::to_string(length - 1) + ")");
    }
    ordinals[k] = ordinal;
  }
}

void LocateOrdinals(const OrdinalRuns& runs, const int64_t* ordinals, size_t count, int64_t* files,
                    int64_t* records) {
  if (runs.size == 0) {
    if (count != 0) Fail(ErrorKind::kIndex, "the shard table holds no runs");
    return;
  }
  const int64_t* const first = runs.starts;
  const int64_t* const last = runs.starts + runs.size;
  const int64_t end = runs.starts[runs.size - 1];
  for (size_t k = 0; k < count; ++k) {
    const int64_t ordinal = ordinals[k];
    if (ordinal < first[0] || ordinal >= end) {
      Fail(ErrorKind::kIndex, "ordinal " + std::to_string(ordinal) +
                                  " is outside the shard table's runs [" +
                                  std::to_string(first[0]) + ", " + std::to_string(end) + ")");
    }
    // The last run whose start is at or before the ordinal: never the
    // sentinel, and never before the first, whatever order the starts are in.
    const size_t above = static_cast<size_t>(std::upper_bound(first, last, ordinal) - first);
    const size_t at = above == 0 ? 0 : std::min(above, runs.size - 1) - 1;
    files[k] = runs.files[at];
    // Wrapping arithmetic: only a table that breaks its own order could overflow.
    records[k] = static_cast<int64_t>(
        static_cast<uint64_t>(runs.skips[at]) +
        (static_cast<uint64_t>(ordinal) - static_cast<uint64_t>(runs.starts[at])));
  }
}

}  // namespace sdsl
