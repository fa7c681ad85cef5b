// The compressions Riegeli simple chunks use, decoded in one shot. Streaming
// zstd, the hot path, lives in value_stream.h.
#ifndef SDS_LOADER_CODECS_H_
#define SDS_LOADER_CODECS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sdsl {

enum CompressionType : uint8_t {
  kNoCompression = 0,
  kBrotli = 'b',
  kZstd = 'z',
  kSnappy = 's',
};

bool IsKnownCompression(uint8_t type);
const char* CompressionName(uint8_t type);

// Decompresses `size` bytes at `src` (without Riegeli's size prefix) into
// exactly `decoded_size` bytes at `dst`. Throws a corrupt error naming `what`
// when the codec fails or yields any other length.
void DecompressExact(uint8_t type, const uint8_t* src, size_t size, uint8_t* dst,
                     size_t decoded_size, const char* what);

}  // namespace sdsl

#endif  // SDS_LOADER_CODECS_H_
