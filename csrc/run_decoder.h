// One run of a batch plan, its bytes fetched: each chunk checked, each
// wanted record decoded into its row and copied to the rows that repeat it.
#ifndef SDS_LOADER_RUN_DECODER_H_
#define SDS_LOADER_RUN_DECODER_H_

#include <cstdint>
#include <string>

#include "batch_plan.h"
#include "reader_error.h"
#include "record_decoder.h"
#include "scratch_pool.h"

namespace sdsl {

// Rows of a chunk this core cannot decode (transposed) get
// needs_fallback[row] = 1 and are left untouched. Errors name the shard and
// the ordinal of the record being decoded.
// `bytes` holds the run's bytes, from run.begin to run.end.
void DecodeRun(const Run& run, const uint8_t* bytes, const BatchLayout& layout,
               const int64_t* ordinals, bool verify, uint8_t* needs_fallback,
               WorkerScratch* scratch);

// Throws `error` again, met while reading `record` of `run`, naming the shard
// and the record's ordinal.
[[noreturn]] void RethrowForRecord(const Run& run, const WantedRecord& record,
                                   const int64_t* ordinals, const ReaderError& error);

// "shard PATH: record ORDINAL (record SHARD_RECORD of the shard)", for messages.
std::string RecordContext(const std::string& path, int64_t ordinal, uint64_t shard_record);

}  // namespace sdsl

#endif  // SDS_LOADER_RUN_DECODER_H_
