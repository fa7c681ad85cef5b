// A Riegeli simple chunk ('r'): record sizes, then the records' values,
// both compressed with one codec. Parsing decodes only the sizes; the values
// stay compressed until a ValueStream walks them.
#ifndef SDS_LOADER_SIMPLE_CHUNK_H_
#define SDS_LOADER_SIMPLE_CHUNK_H_

#include <cstdint>
#include <vector>

#include "base/byte_span.h"
#include "container/riegeli_chunk.h"

namespace sdsl {

struct SimpleChunk {
  uint8_t compression = 0;
  std::vector<uint64_t> sizes;    // one per record
  std::vector<uint64_t> offsets;  // where each record begins in the decoded values
  Pieces values;                  // compressed values, without the size prefix
  uint64_t decoded_size = 0;
  uint64_t values_begin = 0;  // where the values (and their length prefix) begin in the data
  // ParseSimpleChunk's working pieces, kept with the chunk so that parsing
  // the next one in the same scratch allocates nothing for them.
  Pieces parts;
};

// `max_decoded_size` bounds what the chunk may claim to decode to; a chunk
// claiming more is refused before anything is allocated for it.
// `scratch` holds the decompressed sizes while parsing.
void ParseSimpleChunk(const Chunk& chunk, uint64_t max_decoded_size, std::vector<uint8_t>* scratch,
                      SimpleChunk* out);

// ParseSimpleChunk in two steps, for a reader that needs the record sizes
// before the rest of the chunk is read (to route tensors into rows): the
// sizes from the first `available` bytes of the data of the chunk `header`
// describes, false when those do not hold them all (nothing is trusted of
// them yet: the chunk's hash is checked once it is whole); then, once
// chunk.data holds it all, the values. Together they check what
// ParseSimpleChunk checks.
bool ParseSimpleChunkSizes(const ChunkHeader& header, const uint8_t* data, uint64_t available,
                           uint64_t max_decoded_size, std::vector<uint8_t>* scratch,
                           SimpleChunk* out);
void FinishSimpleChunk(const Chunk& chunk, SimpleChunk* out);

// The parts of ParseSimpleChunk for readers that hold only some of a
// chunk's data (reading a window, or routing tensors into rows).
//
// The head of a simple chunk's data: its compression byte and where its
// record sizes lie. Returns false when the first `available` bytes (of the
// data's `data_size`) do not hold the head; throws when it is malformed.
struct SimpleChunkHead {
  uint8_t compression = 0;
  uint64_t sizes_begin = 0;  // offset of the record sizes in the chunk's data
  uint64_t sizes_size = 0;
  uint64_t values_begin() const { return sizes_begin + sizes_size; }
};
bool ParseSimpleChunkHead(const uint8_t* data, uint64_t available, uint64_t data_size,
                          SimpleChunkHead* head);

// Decodes the record sizes of `header`'s records from their (decompressed)
// varints, checking that they are exactly `num_records` and add up to the
// header's decoded size. Fills offsets and sizes; returns that total.
uint64_t DecodeRecordSizes(const uint8_t* sizes, const uint8_t* end, const ChunkHeader& header,
                           std::vector<uint64_t>* offsets, std::vector<uint64_t>* record_sizes);

}  // namespace sdsl

#endif  // SDS_LOADER_SIMPLE_CHUNK_H_
