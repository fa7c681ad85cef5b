// The frame header API is in zstd's static-only section: zstd is linked
// statically from a pinned release (third_party/zstd), so it cannot shift.
#define ZSTD_STATIC_LINKING_ONLY
#include "codecs.h"

#include <brotli/decode.h>
#include <snappy.h>
#include <zstd.h>

#include <algorithm>
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

bool ZstdFrameStreams(const Pieces& values, uint64_t decoded_size) {
  uint8_t bytes[ZSTD_FRAMEHEADERSIZE_MAX];
  const size_t n = static_cast<size_t>(std::min<uint64_t>(values.total, sizeof(bytes)));
  CopyFromPieces(values, 0, n, bytes);
  ZSTD_frameHeader header;
  const size_t status = ZSTD_getFrameHeader(&header, bytes, n);
  if (ZSTD_isError(status)) {
    Corrupt(std::string("zstd values have a malformed frame header: ") + ZSTD_getErrorName(status));
  }
  if (status != 0) Corrupt("zstd values end inside their frame header");
  if (header.frameType != ZSTD_frame) Corrupt("zstd values begin with a skippable frame");
  if (header.frameContentSize != ZSTD_CONTENTSIZE_UNKNOWN) {
    if (header.frameContentSize != decoded_size) {
      Corrupt("zstd frame declares " + std::to_string(header.frameContentSize) +
              " decoded bytes where the chunk declares " + std::to_string(decoded_size));
    }
  }
  return header.windowSize <= std::max(decoded_size, kZstdStreamWindow);
}

int ZstdStreamWindowLog(uint64_t decoded_size) {
  const uint64_t bound = std::max(decoded_size, kZstdStreamWindow);
  int log = ZSTD_WINDOWLOG_MIN;
  while (log < ZSTD_WINDOWLOG_MAX && (uint64_t{1} << log) < bound) ++log;
  return log;
}

void DecompressExact(uint8_t type, const uint8_t* src, size_t size, uint8_t* dst,
                     size_t decoded_size, const char* what, ZSTD_DCtx* zstd_context) {
  const std::string prefix = std::string(what) + " (" + CompressionName(type) + ") ";
  switch (type) {
    case kNoCompression:
      if (size != decoded_size) Corrupt(prefix + "has the wrong length");
      if (size) std::memcpy(dst, src, size);
      return;
    case kZstd: {
      // One shot into the full-size buffer: no window is allocated, so the
      // frame's declared window needs no limit here.
      const size_t written = zstd_context != nullptr
                                 ? ZSTD_decompressDCtx(zstd_context, dst, decoded_size, src, size)
                                 : ZSTD_decompress(dst, decoded_size, src, size);
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
