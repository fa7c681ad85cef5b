// How chunk bytes get from a shard file into memory: a run's range read with
// its block headers set aside, or one uncompressed chunk whose records'
// tensors are read straight into their rows.
#ifndef SDS_LOADER_CHUNK_READS_H_
#define SDS_LOADER_CHUNK_READS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "container/riegeli_chunk.h"
#include "container/riegeli_layout.h"
#include "container/simple_chunk.h"
#include "read/batch_plan.h"
#include "read/record_decoder.h"
#include "read/scratch_pool.h"
#include "sources/shard_file.h"

namespace sdsl {

// Reads [begin, end) of `file` with one preadv that sets the block headers
// aside (into `headers`), so that each chunk's data is one span of `data`:
// hashed in one pass, decompressed straight from where it was read.
FileRange ReadFileRange(const ShardFile& file, uint64_t begin, uint64_t end,
                        std::vector<uint8_t>* data, std::vector<uint8_t>* headers,
                        WorkerScratch* scratch);

// Reads the chunk at `begin` (bounded by `limit`) into `chunk`, checked as
// ReadChunk checks it, with two reads: the chunk's first bytes, which say
// where each wanted record's tensors lie, then the rest, with the bytes of
// each tensor a field of `layout` takes (under `keys`) going straight into
// its row and everything else into scratch. The chunk's data pieces point at
// both, in order, so hashing and decoding it go on as for any chunk, and
// decoding a tensor onto the row it was read into copies nothing. Bytes put
// in a row before the hash fails stay there: the read then raises. A chunk
// that is compressed or not laid out as expected is read whole into scratch.
// Returns true when the record sizes, parsed to route the tensors, are in
// `parsed` (ParseSimpleChunkSizes): decoding the chunk then only finishes
// that parse (FinishSimpleChunk) rather than parsing it again.
bool ReadChunkIntoRows(const ShardFile& file, uint64_t begin, uint64_t limit, bool verify,
                       const WantedChunk& wanted, const BatchLayout& layout,
                       const std::vector<std::string>& keys, WorkerScratch* scratch, Chunk* chunk,
                       SimpleChunk* parsed);

}  // namespace sdsl

#endif  // SDS_LOADER_CHUNK_READS_H_
