// A Riegeli simple chunk ('r'): record sizes, then the records' values,
// both compressed with one codec. Parsing decodes only the sizes; the values
// stay compressed until a ValueStream walks them.
#ifndef SDS_LOADER_SIMPLE_CHUNK_H_
#define SDS_LOADER_SIMPLE_CHUNK_H_

#include <cstdint>
#include <vector>

#include "byte_span.h"
#include "riegeli_chunk.h"

namespace sdsl {

struct SimpleChunk {
  uint8_t compression = 0;
  std::vector<uint64_t> sizes;    // one per record
  std::vector<uint64_t> offsets;  // where each record begins in the decoded values
  Pieces values;                  // compressed values, without the size prefix
  uint64_t decoded_size = 0;
};

// `max_decoded_size` bounds what the chunk may claim to decode to; a chunk
// claiming more is refused before anything is allocated for it.
// `scratch` holds the decompressed sizes while parsing.
void ParseSimpleChunk(const Chunk& chunk, uint64_t max_decoded_size, std::vector<uint8_t>* scratch,
                      SimpleChunk* out);

}  // namespace sdsl

#endif  // SDS_LOADER_SIMPLE_CHUNK_H_
