#include "container/riegeli_hash.h"

#include "container/chunk_hasher.h"

namespace sdsl {

uint64_t RiegeliHash(const uint8_t* data, size_t size) {
  ChunkHasher hasher;
  hasher.Append(data, size);
  return hasher.Finish();
}

uint64_t RiegeliHash(const Pieces& pieces) {
  ChunkHasher hasher;
  for (const ByteSpan& span : pieces.spans) hasher.Append(span.data, span.size);
  return hasher.Finish();
}

}  // namespace sdsl
