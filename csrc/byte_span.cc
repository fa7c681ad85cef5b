#include "byte_span.h"

#include <cstring>

namespace sdsl {

bool SliceOfPieces(const Pieces& pieces, uint64_t offset, uint64_t size, Pieces* out) {
  out->Clear();
  if (offset > pieces.total || size > pieces.total - offset) return false;
  for (const ByteSpan& span : pieces.spans) {
    if (size == 0) break;
    if (offset >= span.size) {
      offset -= span.size;
      continue;
    }
    const size_t take = static_cast<size_t>(
        span.size - offset < size ? span.size - offset : size);
    out->Append(span.data + offset, take);
    size -= take;
    offset = 0;
  }
  return size == 0;
}

bool CopyFromPieces(const Pieces& pieces, uint64_t offset, uint64_t size, uint8_t* dst) {
  if (offset > pieces.total || size > pieces.total - offset) return false;
  for (const ByteSpan& span : pieces.spans) {
    if (size == 0) break;
    if (offset >= span.size) {
      offset -= span.size;
      continue;
    }
    const size_t take = static_cast<size_t>(
        span.size - offset < size ? span.size - offset : size);
    std::memcpy(dst, span.data + offset, take);
    dst += take;
    size -= take;
    offset = 0;
  }
  return size == 0;
}

}  // namespace sdsl
