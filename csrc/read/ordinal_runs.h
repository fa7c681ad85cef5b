// Where a batch's ordinals live: the dataset's shard table (runs of
// consecutive ordinals, each stored in one shard file) searched for each
// ordinal in one pass. numpy took one call a step (checking, wrapping
// negatives, searching, gathering), and on a batch of 16 short records those
// calls cost more than decoding the records did.
#ifndef SDS_LOADER_ORDINAL_RUNS_H_
#define SDS_LOADER_ORDINAL_RUNS_H_

#include <cstddef>
#include <cstdint>

namespace sdsl {

// The shard table's three columns, `size` entries each: the first ordinal of
// each run (ascending; the last entry is the dataset's length, closing the
// last run), the run's first record within its file, and the file's number.
struct OrdinalRuns {
  const int64_t* starts = nullptr;
  const int64_t* skips = nullptr;
  const int64_t* files = nullptr;
  size_t size = 0;
};

// Copies `count` indices into `ordinals`, a negative one counted from the
// end of a dataset of `length` records; an index outside [-length, length)
// fails (ErrorKind::kIndex) with the message Python's own check gives.
void CheckOrdinals(const int64_t* indices, size_t count, int64_t length, int64_t* ordinals);

// For each of `count` ordinals, the file that holds it and its record within
// that file. An ordinal outside the runs fails (ErrorKind::kIndex); a table
// whose starts do not ascend gives wrong places but never reads outside it.
void LocateOrdinals(const OrdinalRuns& runs, const int64_t* ordinals, size_t count, int64_t* files,
                    int64_t* records);

}  // namespace sdsl

#endif  // SDS_LOADER_ORDINAL_RUNS_H_
