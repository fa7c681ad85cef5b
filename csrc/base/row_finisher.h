// Work a read does on each row of its batch right after the row is decoded,
// on the thread that decoded it, while the row's bytes are still in that
// core's cache: an augmentation chain (augment/augment_rows.h) reads and
// writes the row there rather than from memory in a second pass.
#ifndef SDS_LOADER_BASE_ROW_FINISHER_H_
#define SDS_LOADER_BASE_ROW_FINISHER_H_

#include <cstddef>

namespace sdsl {

class RowFinisher {
 public:
  virtual ~RowFinisher() = default;
  // Called once a row holds its record, from any of the read's threads,
  // each row by one thread at a time; again if the read decodes the row
  // again (a refetch after a failed check), so it must start from the
  // row's decoded bytes alone. What could fail is checked before the
  // read starts; an allocation that fails fails the read.
  virtual void FinishRow(size_t row) const = 0;
};

}  // namespace sdsl

#endif  // SDS_LOADER_BASE_ROW_FINISHER_H_
