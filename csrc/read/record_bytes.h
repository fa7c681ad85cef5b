// Whole records as bytes, for shards whose records are not SafeTensors:
// signal_dataset's metadata shards (one compact JSON document per record),
// from which record lengths are learned without reading any tensor data.
#ifndef SDS_LOADER_RECORD_BYTES_H_
#define SDS_LOADER_RECORD_BYTES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "read/shard_set.h"

namespace sdsl {

// Record `shard_records[k]` of shard `files[k]` of `set`, verified when
// `verify`. nullopt for a record in a transposed chunk, which this core
// does not decode. Throws a corrupt error naming the shard and the record.
std::vector<std::optional<std::string>> ReadRecordBytes(ShardSet& set, Verify verify,
                                                        const int64_t* files,
                                                        const int64_t* shard_records, size_t count);

}  // namespace sdsl

#endif  // SDS_LOADER_RECORD_BYTES_H_
