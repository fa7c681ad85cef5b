// Rows of a signal_dataset annotation set, read for a batch of ordinals.
//
// An annotation row is an ordinary SDS record (SafeTensors tensors plus a
// descriptor) in the set's own ArrayRecord shards, one row per ordinal of
// the dataset. Its tensors vary in length from row to row (a row holds as
// many events as were found), so they cannot go straight into the rows of a
// batch array as data fields do: each requested tensor comes back as the
// rows' bytes concatenated along the first axis, with each row's count of
// items, which the Python layer turns into ragged or padded arrays without
// touching a row on its own.
#ifndef SDS_LOADER_ANNOTATION_ROWS_H_
#define SDS_LOADER_ANNOTATION_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "read/shard_set.h"

namespace sdsl {

// One requested tensor field of an annotation set, over a batch of rows.
struct AnnotationField {
  std::string name;
  std::string dtype;                 // "" while no row of the batch holds the field
  std::vector<uint64_t> item_shape;  // the dimensions after the first (the items)
  int64_t first_ordinal = -1;        // the row that fixed dtype and item_shape
  std::vector<uint8_t> bytes;        // the rows' items, concatenated in batch order
  std::vector<int64_t> counts;       // per row: its items (0 where it has none)
};

struct AnnotationBatch {
  std::vector<uint8_t> status;   // per row: 0 success, 1 skipped, 2 failed
  std::vector<std::string> ids;  // per row: the source record's id
  std::vector<AnnotationField> fields;
};

// Reads row `row_records[k]` of annotation shard `row_files[k]` of `rows`,
// and record `meta_records[k]` of metadata shard `meta_files[k]` of
// `metadata` (the source record's metadata, whose id the row must carry),
// for every k < count, verified when `verify`. A row's identity is checked
// as signal_dataset checks it: its `source_index` must be `ordinals[k]` and
// its id the source record's. A row that is not a success, or that lacks a
// field, contributes no items to that field. Throws a corrupt error naming
// the shard and the ordinal, a schema mismatch when two rows disagree on a
// field's dtype or item shape, and an unsupported error for a row in a
// transposed chunk.
AnnotationBatch ReadAnnotationRows(ShardSet& rows, ShardSet& metadata, Verify verify,
                                   const int64_t* row_files, const int64_t* row_records,
                                   const int64_t* meta_files, const int64_t* meta_records,
                                   const int64_t* ordinals, size_t count,
                                   const std::vector<std::string>& fields);

}  // namespace sdsl

#endif  // SDS_LOADER_ANNOTATION_ROWS_H_
