// Non-owning views of bytes: one contiguous span, or several pieces that
// together form one logical range (chunk data split by block headers).
#ifndef SDS_LOADER_BYTE_SPAN_H_
#define SDS_LOADER_BYTE_SPAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sdsl {

struct ByteSpan {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

struct Pieces {
  std::vector<ByteSpan> spans;
  uint64_t total = 0;

  void Append(const uint8_t* data, size_t size) {
    if (size == 0) return;
    spans.push_back(ByteSpan{data, size});
    total += size;
  }
  void Clear() {
    spans.clear();
    total = 0;
  }
};

// Copies `size` bytes starting `offset` bytes into `pieces` to `dst`.
// Returns false when the range runs past the end.
bool CopyFromPieces(const Pieces& pieces, uint64_t offset, uint64_t size, uint8_t* dst);

// The sub-range [offset, offset + size) of `pieces`, as pieces.
bool SliceOfPieces(const Pieces& pieces, uint64_t offset, uint64_t size, Pieces* out);

}  // namespace sdsl

#endif  // SDS_LOADER_BYTE_SPAN_H_
