// Riegeli's 64-bit HighwayHash, keyed with "Riegeli/records\n" twice, over
// bytes held whole or in pieces (ChunkHasher, for bytes that arrive in
// pieces over time).
#ifndef SDS_LOADER_RIEGELI_HASH_H_
#define SDS_LOADER_RIEGELI_HASH_H_

#include <cstddef>
#include <cstdint>

#include "base/byte_span.h"

namespace sdsl {

uint64_t RiegeliHash(const uint8_t* data, size_t size);

// Hash of the concatenation of `pieces`, without concatenating them: chunk
// data interrupted by block headers is hashed where it lies.
uint64_t RiegeliHash(const Pieces& pieces);

}  // namespace sdsl

#endif  // SDS_LOADER_RIEGELI_HASH_H_
