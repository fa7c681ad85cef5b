// Riegeli's physical layout: 64 KiB blocks, each opened by a 24-byte block
// header that may interrupt a chunk anywhere, even inside its 40-byte header.
// Chunk sizes count only logical bytes, so every position computed from a
// size goes through these functions.
#ifndef SDS_LOADER_RIEGELI_LAYOUT_H_
#define SDS_LOADER_RIEGELI_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/byte_span.h"
#include "base/range_request.h"

namespace sdsl {

constexpr uint64_t kBlockSize = uint64_t{1} << 16;
constexpr uint64_t kBlockHeaderSize = 24;
constexpr uint64_t kUsableBlockSize = kBlockSize - kBlockHeaderSize;
constexpr uint64_t kChunkHeaderSize = 40;

// Position after `size` logical bytes written from `pos`, block headers
// included. Returns false on overflow.
bool AddWithOverhead(uint64_t pos, uint64_t size, uint64_t* end);

uint64_t RoundUpToPossibleChunkBoundary(uint64_t pos);

// Bytes of a shard file held in memory: bytes [begin, begin + size).
struct FileRange {
  const uint8_t* data = nullptr;
  uint64_t begin = 0;
  uint64_t size = 0;
  // Set for a range read without its block headers: `data` then holds the
  // other bytes back to back, so that chunk data interrupted by a block
  // header is one contiguous span, and the headers (24 bytes each, in file
  // order, from the first one at or after `begin`) lie here.
  const uint8_t* block_headers = nullptr;
  uint64_t end() const { return begin + size; }
};

// Where the bytes of physical range [begin, end) go when it is read without
// its block headers. `begin` must not lie inside a block header.
struct StrippedLayout {
  uint64_t data_bytes = 0;
  uint64_t header_bytes = 0;  // a header cut by `end` counts only its bytes before it
};
StrippedLayout LayoutWithoutBlockHeaders(uint64_t begin, uint64_t end);

struct MutableSpan {
  uint8_t* data = nullptr;
  size_t size = 0;
};

// The consecutive file pieces of [begin, end), in order, each pointing into
// `data` (block-header-free bytes) or `headers`, sized by
// LayoutWithoutBlockHeaders. Reading them in order fills a range whose
// block_headers is `headers`.
void SplitAtBlockHeaders(uint64_t begin, uint64_t end, uint8_t* data, uint8_t* headers,
                         std::vector<MutableSpan>* pieces);

// Appends to `requests` the reads of shard `file` that fill those pieces, in
// file order (`pieces` is scratch).
void AppendSplitReads(size_t file, uint64_t begin, uint64_t end, uint8_t* data, uint8_t* headers,
                      std::vector<MutableSpan>* pieces, std::vector<RangeRequest>* requests);

bool BeginsInsideBlockHeader(uint64_t pos);

// The 24 bytes of the block header at `header_begin`, inside `range`.
const uint8_t* BlockHeaderAt(const FileRange& range, uint64_t header_begin);

// The physical position after `size` logical bytes read from `pos`, as
// LogicalRange steps: a block header is stepped over only before a byte.
uint64_t PhysicalEnd(uint64_t pos, uint64_t size);

// Collects `size` logical bytes starting at physical position `pos`, stepping
// over block headers (checking each header's hash when `verify` is set).
// Sets *next to the physical position after the last byte. Throws a corrupt
// error, naming `what`, when the range leaves the range.
void LogicalRange(const FileRange& range, uint64_t pos, uint64_t size, bool verify,
                  const char* what, Pieces* out, uint64_t* next);

}  // namespace sdsl

#endif  // SDS_LOADER_RIEGELI_LAYOUT_H_
