// A simple chunk's decoded values, either streamed (uncompressed and zstd:
// records are decoded straight into their rows) or held whole in scratch
// (snappy and brotli, which only decode in one piece; probes; verification).
#ifndef SDS_LOADER_MATERIALIZE_H_
#define SDS_LOADER_MATERIALIZE_H_

#include <cstdint>
#include <memory>

#include "base/byte_span.h"
#include "container/simple_chunk.h"
#include "container/value_stream.h"
#include "read/scratch_pool.h"

namespace sdsl {

// Decodes the values of `parsed` as one in-memory buffer in scratch->values.
void MaterializeValues(const SimpleChunk& parsed, WorkerScratch* scratch, const uint8_t** values);

// zstd chunks up to this many decoded bytes are decoded in one shot into
// scratch; larger ones stream, so that memory stays bounded.
constexpr uint64_t kOneShotZstdBytes = uint64_t{16} << 20;

// A stream over the values of `parsed`, from their start. For codecs that
// cannot stream, the values are materialized and `decoded` points at them.
std::unique_ptr<ValueStream> OpenValueStream(const SimpleChunk& parsed, Pieces* decoded,
                                             WorkerScratch* scratch);

// A record read whole (to learn its keys, or to probe it) is held in memory:
// refuses a claimed size over the reader's cap (scratch.max_materialized)
// before anything is allocated for it.
void CheckMaterializable(uint64_t record_size, const WorkerScratch& scratch);

}  // namespace sdsl

#endif  // SDS_LOADER_MATERIALIZE_H_
