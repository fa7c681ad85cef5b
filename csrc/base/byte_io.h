// Little-endian loads, varints and overflow-checked arithmetic: the small
// vocabulary every parser here uses before it trusts a size.
#ifndef SDS_LOADER_BYTE_IO_H_
#define SDS_LOADER_BYTE_IO_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sdsl {

inline uint64_t LoadLE64(const uint8_t* p) {
  uint64_t value;
  std::memcpy(&value, p, sizeof(value));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  value = __builtin_bswap64(value);
#endif
  return value;
}

// Reads one varint64 from [*cursor, end). Returns false, leaving *cursor
// unchanged, when the varint is truncated or longer than ten bytes.
inline bool ReadVarint64(const uint8_t** cursor, const uint8_t* end, uint64_t* value) {
  uint64_t result = 0;
  const uint8_t* p = *cursor;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p == end) return false;
    const uint8_t byte = *p++;
    if (shift == 63 && byte > 1) return false;
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *cursor = p;
      *value = result;
      return true;
    }
  }
  return false;
}

inline bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* sum) {
  return !__builtin_add_overflow(a, b, sum);
}

inline bool CheckedMul(uint64_t a, uint64_t b, uint64_t* product) {
  return !__builtin_mul_overflow(a, b, product);
}

}  // namespace sdsl

#endif  // SDS_LOADER_BYTE_IO_H_
