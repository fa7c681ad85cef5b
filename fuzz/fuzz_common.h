// Shared by the fuzz targets: the first input byte selects options, and an
// optional pass rewrites Riegeli hashes so that mutated sizes and counts get
// past the hash checks and reach the logic behind them.
#ifndef SDS_LOADER_FUZZ_COMMON_H_
#define SDS_LOADER_FUZZ_COMMON_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/byte_io.h"
#include "container/riegeli_hash.h"
#include "container/riegeli_layout.h"

namespace sdsl_fuzz {

inline void StoreLE64(uint8_t* p, uint64_t value) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(value >> (8 * i));
}

// Physical offset of logical byte `offset` of a chunk starting at `begin`.
inline uint64_t Physical(uint64_t begin, uint64_t offset) {
  uint64_t pos = begin;
  while (true) {
    if (pos % sdsl::kBlockSize < sdsl::kBlockHeaderSize) {
      pos += sdsl::kBlockHeaderSize - pos % sdsl::kBlockSize;
    }
    const uint64_t room = sdsl::kBlockSize - pos % sdsl::kBlockSize;
    if (offset < room) return pos + offset;
    pos += room;
    offset -= room;
  }
}

// Makes every block header hash, and the header and data hash of every chunk
// reachable by walking from offset 0, consistent with the bytes around them.
inline void FixHashes(uint8_t* data, uint64_t size) {
  for (uint64_t b = 0; b + sdsl::kBlockHeaderSize <= size; b += sdsl::kBlockSize) {
    StoreLE64(data + b, sdsl::RiegeliHash(data + b + 8, 16));
  }
  uint64_t begin = 0;
  for (int guard = 0; guard < 4096 && begin < size; ++guard) {
    uint8_t header[sdsl::kChunkHeaderSize];
    uint64_t where[sdsl::kChunkHeaderSize];
    for (uint64_t k = 0; k < sdsl::kChunkHeaderSize; ++k) {
      where[k] = Physical(begin, k);
      if (where[k] >= size) return;
      header[k] = data[where[k]];
    }
    const uint64_t data_size = sdsl::LoadLE64(header + 8);
    const uint64_t num_records = sdsl::LoadLE64(header + 24) >> 8;
    uint64_t data_end = 0;
    if (data_size < size) {
      const uint64_t last = Physical(begin, sdsl::kChunkHeaderSize + data_size);
      if (last <= size) {
        std::vector<uint8_t> logical(static_cast<size_t>(data_size));
        for (uint64_t k = 0; k < data_size; ++k) {
          logical[k] = data[Physical(begin, sdsl::kChunkHeaderSize + k)];
        }
        StoreLE64(header + 16, sdsl::RiegeliHash(logical.data(), logical.size()));
      }
    }
    StoreLE64(header, sdsl::RiegeliHash(header + 8, sdsl::kChunkHeaderSize - 8));
    for (uint64_t k = 0; k < sdsl::kChunkHeaderSize; ++k) data[where[k]] = header[k];
    if (data_size >= size || num_records >= size) return;
    if (!sdsl::AddWithOverhead(begin, sdsl::kChunkHeaderSize + data_size, &data_end)) return;
    const uint64_t record_end = sdsl::RoundUpToPossibleChunkBoundary(begin + num_records);
    const uint64_t next = data_end > record_end ? data_end : record_end;
    if (next <= begin) return;
    begin = next;
  }
}

}  // namespace sdsl_fuzz

#endif  // SDS_LOADER_FUZZ_COMMON_H_
