// One record read whole to learn a batch's layout: its fields' tensor keys,
// dtypes and shapes, and its metadata.
#ifndef SDS_LOADER_RECORD_PROBE_H_
#define SDS_LOADER_RECORD_PROBE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "read/batch_plan.h"
#include "read/scratch_pool.h"

namespace sdsl {

struct RecordProbe {
  bool supported = true;  // false: the shard is transposed, read it elsewhere
  struct Field {
    std::string name, key, dtype;
    std::vector<uint64_t> shape;
  };
  std::vector<Field> fields;  // sorted by name
  std::string metadata_json;
};

RecordProbe ProbeRecord(const OpenShard& shard, uint64_t shard_record, int64_t ordinal,
                        Verify verify, ScratchPool* pool);

}  // namespace sdsl

#endif  // SDS_LOADER_RECORD_PROBE_H_
