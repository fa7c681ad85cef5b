#include "codecs.h"

#include <brotli/decode.h>
#include <snappy.h>
#include <zstd.h>

#include <cstring>
#include <string>

#include "reader_error.h"

namespace sdsl {

bool IsKnownCompression(uint8_t type) {
  return type == kNoCompression || type == kBrotli || type == kZstd || type == kSnappy;
}

const char* CompressionName(uint8_t type) {
  switch (type) {
    case kNoCompression:
      return "none";
    case kBrotli:
      return "brotli";
    case kZstd:
      return "zstd";
    case kSnappy:
      return "snappy";
    default:
      return "unknown";
  }
}

void DecompressExact(uint8_t type, const uint8_t* src, size_t size, uint8_t* dst,
                     size_t decoded_size, const char* what) {
  const std::string prefix = std::string(what) + " (" + CompressionName(type) + ") ";
  switch (type) {
    case kNoCompression:
      if (size != decoded_size) Corrupt(prefix + "has the wrong length");
      if (size) std::memcpy(dst, src, size);
      return;
    case kZstd: {
      const size_t written = ZSTD_decompress(dst, decoded_size, src, size);
      if (ZSTD_isError(written)) {
        Corrupt(prefix + "fails to decompress: " + ZSTD_getErrorName(written));
      }
      if (written != decoded_size) Corrupt(prefix + "decompresses to the wrong length");
      return;
    }
    case kSnappy: {
      size_t length = 0;
      const char* input = reinterpret_cast<const char*>(src);
      if (!snappy::GetUncompressedLength(input, size, &length) || length != decoded_size) {
        Corrupt(prefix + "declares the wrong decompressed length");
      }
      if (!snappy::RawUncompress(input, size, reinterpret_cast<char*>(dst))) {
        Corrupt(prefix + "fails to decompress");
      }
      return;
    }
    case kBrotli: {
      size_t written = decoded_size;
      if (BrotliDecoderDecompress(size, src, &written, dst) != BROTLI_DECODER_RESULT_SUCCESS) {
        Corrupt(prefix + "fails to decompress");
      }
      if (written != decoded_size) Corrupt(prefix + "decompresses to the wrong length");
      return;
    }
    default:
      Corrupt(std::string(what) + " uses unknown compression type " + std::to_string(type));
  }
}

}  // namespace sdsl
