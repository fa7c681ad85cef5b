#include "base/byte_span.h"

#include <cstring>

namespace sdsl {
namespace {

// Calls visit(data, size) for each contiguous part of [offset, offset + size)
// of `pieces`, in order. Returns false, visiting nothing, when the range runs
// past the end.
template <typename Visit>
bool VisitRange(const Pieces& pieces, uint64_t offset, uint64_t size, Visit visit) {
  if (offset > pieces.total || size > pieces.total - offset) return false;
  for (const ByteSpan& span : pieces.spans) {
    if (size == 0) break;
    if (offset >= span.size) {
      offset -= span.size;
      continue;
    }
    const size_t take = static_cast<size_t>(span.size - offset < size ? span.size - offset : size);
    visit(span.data + offset, take);
    size -= take;
    offset = 0;
  }
  return true;
}

}  // namespace

bool SliceOfPieces(const Pieces& pieces, uint64_t offset, uint64_t size, Pieces* out) {
  out->Clear();
  return VisitRange(pieces, offset, size,
                    [out](const uint8_t* data, size_t n) { out->Append(data, n); });
}

bool CopyFromPieces(const Pieces& pieces, uint64_t offset, uint64_t size, uint8_t* dst) {
  return VisitRange(pieces, offset, size, [&dst](const uint8_t* data, size_t n) {
    // A piece that was read straight into its destination is already there.
    if (data != dst) std::memcpy(dst, data, n);
    dst += n;
  });
}

}  // namespace sdsl
