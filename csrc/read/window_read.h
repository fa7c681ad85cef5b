// Reading only a window's bytes from an uncompressed chunk. A record's
// window is a few runs of bytes deep inside it; rather than reading the
// whole chunk, the chunk's header and record sizes are read, then for each
// record only what decoding asks for: its SafeTensors header, the window's
// runs (straight into the batch row) and its descriptor.
//
// The chunk's data hash covers the whole chunk, so this is done only where
// the hash need not be checked: with verification off, or for chunks this
// process has already verified whole (OpenShard::verified).
#ifndef SDS_LOADER_WINDOW_READ_H_
#define SDS_LOADER_WINDOW_READ_H_

#include <string>
#include <vector>

#include "read/batch_plan.h"
#include "read/record_decoder.h"
#include "read/scratch_pool.h"

namespace sdsl {

// Whether `run`'s chunks are read a window at a time: the batch has a
// window, the shard was written uncompressed, and no chunk of the run still
// needs its hash checked.
bool ReadsWindowsOnly(const Run& run, const BatchLayout& layout, Verify verify);

// Decodes the wanted records of one chunk of `shard` reading only the bytes
// they need. Returns false, having decoded nothing, when the chunk is not an
// uncompressed simple chunk; the caller then reads it whole. The chunk
// header's hash and every size are checked as a whole read checks them.
bool DecodeChunkWindows(const OpenShard& shard, const WantedChunk& wanted,
                        const BatchLayout& layout, std::vector<std::string>* keys,
                        WorkerScratch* scratch, const WantedRecord** current);

}  // namespace sdsl

#endif  // SDS_LOADER_WINDOW_READ_H_
