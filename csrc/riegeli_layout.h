// Riegeli's physical layout: 64 KiB blocks, each opened by a 24-byte block
// header that may interrupt a chunk anywhere, even inside its 40-byte header.
// Chunk sizes count only logical bytes, so every position computed from a
// size goes through these functions.
#ifndef SDS_LOADER_RIEGELI_LAYOUT_H_
#define SDS_LOADER_RIEGELI_LAYOUT_H_

#include <cstdint>
#include <string>

#include "byte_span.h"

namespace sdsl {

constexpr uint64_t kBlockSize = uint64_t{1} << 16;
constexpr uint64_t kBlockHeaderSize = 24;
constexpr uint64_t kUsableBlockSize = kBlockSize - kBlockHeaderSize;
constexpr uint64_t kChunkHeaderSize = 40;

// Position after `size` logical bytes written from `pos`, block headers
// included. Returns false on overflow.
bool AddWithOverhead(uint64_t pos, uint64_t size, uint64_t* end);

uint64_t RoundUpToPossibleChunkBoundary(uint64_t pos);

// A window of a shard file held in memory: bytes [begin, begin + size).
struct FileWindow {
  const uint8_t* data = nullptr;
  uint64_t begin = 0;
  uint64_t size = 0;
  uint64_t end() const { return begin + size; }
};

// Collects `size` logical bytes starting at physical position `pos`, stepping
// over block headers (checking each header's hash when `verify` is set).
// Sets *next to the physical position after the last byte. Throws a corrupt
// error, naming `what`, when the range leaves the window.
void LogicalRange(const FileWindow& window, uint64_t pos, uint64_t size, bool verify,
                  const char* what, Pieces* out, uint64_t* next);

}  // namespace sdsl

#endif  // SDS_LOADER_RIEGELI_LAYOUT_H_
