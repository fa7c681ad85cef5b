// One run of a batch plan, its bytes fetched: each chunk checked, each
// wanted record decoded into its row and copied to the rows that repeat it.
#ifndef SDS_LOADER_RUN_DECODER_H_
#define SDS_LOADER_RUN_DECODER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/reader_error.h"
#include "container/value_stream.h"
#include "read/batch_plan.h"
#include "read/record_decoder.h"
#include "read/scratch_pool.h"

namespace sdsl {

// Where the records of one chunk lie in its values, and how to walk them.
struct ChunkRecords {
  const std::vector<uint64_t>& offsets;  // per record of the chunk
  const std::vector<uint64_t>& sizes;
  std::function<std::unique_ptr<ValueStream>()> open;  // a stream from the values' start
  bool stop_after_fields = false;                      // see DecodeRecord
};

// Decodes the wanted records of one chunk into their rows and copies each
// to the rows that repeat it, then runs the layout's finisher on each of
// those rows. `keys` are the field-to-tensor hints, updated
// when a record maps its fields otherwise; `current` follows the record
// being decoded, for error messages.
void DecodeChunkRecords(const WantedChunk& wanted, const ChunkRecords& records,
                        const BatchLayout& layout, std::vector<std::string>* keys,
                        WorkerScratch* scratch, const WantedRecord** current);

// Decodes every wanted record of `run` into its rows. Rows of a chunk this
// core cannot decode (transposed) get needs_fallback[row] = 1 and are left
// untouched. Errors name the shard and the ordinal of the record being
// decoded. `fetched` holds the run's bytes, from run.begin to run.end, or is
// null for a run that ReadsWindowsOnly (its chunks then read only what they
// need) or that is read `into_rows` (its chunks' tensors are read straight
// into their rows).
void DecodeRun(const Run& run, const FileRange* fetched, const BatchLayout& layout,
               const int64_t* ordinals, Verify verify, uint8_t* needs_fallback,
               WorkerScratch* scratch);

// Throws `error` again, met while reading `record` of `run`, naming the shard
// and the record's ordinal.
[[noreturn]] void RethrowForRecord(const Run& run, const WantedRecord& record,
                                   const int64_t* ordinals, const ReaderError& error);

// "shard PATH: record ORDINAL (record SHARD_RECORD of the shard)", for messages.
std::string RecordContext(const std::string& path, int64_t ordinal, uint64_t shard_record);

}  // namespace sdsl

#endif  // SDS_LOADER_RUN_DECODER_H_
