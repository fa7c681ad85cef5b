// One run of a batch plan: its bytes read, each chunk checked, each wanted
// record decoded into its row and copied to the rows that repeat it.
#ifndef SDS_LOADER_RUN_DECODER_H_
#define SDS_LOADER_RUN_DECODER_H_

#include <cstdint>
#include <string>

#include "batch_plan.h"
#include "record_decoder.h"
#include "scratch_pool.h"

namespace sdsl {

// Rows of a chunk this core cannot decode (transposed) get
// needs_fallback[row] = 1 and are left untouched. Errors name the shard and
// the ordinal of the record being decoded.
void DecodeRun(const Run& run, const BatchLayout& layout, const int64_t* ordinals, bool verify,
               uint8_t* needs_fallback, WorkerScratch* scratch);

// "shard PATH: record ORDINAL (record SHARD_RECORD of the shard)", for messages.
std::string RecordContext(const std::string& path, int64_t ordinal, uint64_t shard_record);

}  // namespace sdsl

#endif  // SDS_LOADER_RUN_DECODER_H_
