// Reads announced ahead of time: the bytes of records a later batch will
// need, handed to the shards' source as a hint, so that a disk works on the
// next batch while the threads decode this one.
#ifndef SDS_LOADER_READAHEAD_H_
#define SDS_LOADER_READAHEAD_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "read/shard_set.h"

namespace sdsl {

// Hints the chunks that hold record `shard_records[k]` of shard `files[k]`
// for every k, merged into one range wherever chunks touch, and returns the
// bytes hinted. A hint never fails: a record its shard does not hold, or a
// shard that cannot be opened, is left for the read that needs it to
// report. Reads nothing itself; a source without hints ignores them.
uint64_t HintRecords(ShardSet& set, const int64_t* files, const int64_t* shard_records,
                     size_t count);

// The byte ranges of the chunks that hold those records, sorted and merged
// as HintRecords hints them (dst unset); records that cannot be placed are
// left out.
std::vector<RangeRequest> RecordChunkRanges(ShardSet& set, const int64_t* files,
                                            const int64_t* shard_records, size_t count);

}  // namespace sdsl

#endif  // SDS_LOADER_READAHEAD_H_
