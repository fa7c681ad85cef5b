// The frame header API is in zstd's static-only section: zstd is linked
// statically from a pinned release (third_party/zstd), so it cannot shift.
#define ZSTD_STATIC_LINKING_ONLY
#include "container/codecs.h"

#include <brotli/decode.h>
#include <snappy.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "base/reader_error.h"

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

namespace {

// snappy's densest element, a copy with a 2-byte offset, takes 3 bytes and
// yields at most 64.
constexpr uint64_t kSnappyMaxRatio = 22;

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

uint64_t ZstdDecodedBound(const Pieces& values) {
  uint64_t bound = 0;
  uint64_t at = 0;
  while (at < values.total) {
    uint8_t bytes[ZSTD_FRAMEHEADERSIZE_MAX];
    const size_t n = static_cast<size_t>(std::min<uint64_t>(values.total - at, sizeof(bytes)));
    CopyFromPieces(values, at, n, bytes);
    ZSTD_frameHeader header;
    const size_t status = ZSTD_getFrameHeader(&header, bytes, n);
    if (ZSTD_isError(status)) {
      Corrupt(std::string("zstd values have a malformed frame header: ") +
              ZSTD_getErrorName(status));
    }
    if (status != 0) Corrupt("zstd values end inside a frame header");
    if (header.frameType == ZSTD_skippableFrame) {
      const uint64_t skipped = uint64_t{header.headerSize} + header.frameContentSize;
      if (skipped > values.total - at) Corrupt("zstd values end inside a skippable frame");
      at += skipped;
      continue;
    }
    at += header.headerSize;
    uint64_t frame = 0;
    for (bool last = false; !last;) {
      if (values.total - at < 3) Corrupt("zstd values end inside a block header");
      uint8_t raw[3];
      CopyFromPieces(values, at, 3, raw);
      at += 3;
      const uint32_t block = raw[0] | (uint32_t{raw[1]} << 8) | (uint32_t{raw[2]} << 16);
      last = (block & 1) != 0;
      const uint64_t size = block >> 3;
      uint64_t consumed = size, produced = size;
      switch ((block >> 1) & 3) {
        case 0:  // raw
          break;
        case 1:  // RLE: one byte, repeated
          consumed = 1;
          break;
        case 2:  // compressed
          produced = header.blockSizeMax;
          break;
        default:
          Corrupt("zstd values hold a block of the reserved type");
      }
      if (consumed > values.total - at) Corrupt("zstd values end inside a block");
      at += consumed;
      frame = SaturatingAdd(frame, produced);
    }
    if (header.checksumFlag) {
      if (values.total - at < 4) Corrupt("zstd values end inside a frame checksum");
      at += 4;
    }
    if (header.frameContentSize != ZSTD_CONTENTSIZE_UNKNOWN) {
      frame = std::min<uint64_t>(frame, header.frameContentSize);
    }
    bound = SaturatingAdd(bound, frame);
  }
  return bound;
}

void DecompressBrotli(const uint8_t* src, size_t size, uint64_t decoded_size,
                      std::vector<uint8_t>* out, const std::string& prefix) {
  std::unique_ptr<BrotliDecoderState, void (*)(BrotliDecoderState*)> state(
      BrotliDecoderCreateInstance(nullptr, nullptr, nullptr), BrotliDecoderDestroyInstance);
  if (state == nullptr) throw std::bad_alloc();
  // One byte past the declared size, so that a stream yielding more is
  // caught rather than cut short.
  const uint64_t limit = decoded_size + 1;
  uint64_t capacity =
      std::min<uint64_t>(limit, std::max<uint64_t>(uint64_t{64} << 10, 4 * uint64_t{size}));
  out->resize(static_cast<size_t>(capacity));
  size_t available_in = size;
  const uint8_t* next_in = src;
  uint64_t produced = 0;
  for (;;) {
    size_t available_out = out->size() - static_cast<size_t>(produced);
    uint8_t* next_out = out->data() + produced;
    const BrotliDecoderResult result = BrotliDecoderDecompressStream(
        state.get(), &available_in, &next_in, &available_out, &next_out, nullptr);
    produced = static_cast<uint64_t>(next_out - out->data());
    if (result == BROTLI_DECODER_RESULT_SUCCESS) break;
    if (result == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT && produced < limit) {
      capacity = std::min<uint64_t>(limit, 2 * capacity);
      out->resize(static_cast<size_t>(capacity));
      continue;
    }
    if (result == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT) {
      Corrupt(prefix + "decodes to more than the " + std::to_string(decoded_size) +
              " bytes declared");
    }
    if (result == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT) {
      Corrupt(prefix + "ends after " + std::to_string(produced) + " of the " +
              std::to_string(decoded_size) + " bytes declared");
    }
    Corrupt(prefix + "fails to decompress: " +
            BrotliDecoderErrorString(BrotliDecoderGetErrorCode(state.get())));
  }
  if (produced != decoded_size) Corrupt(prefix + "decompresses to the wrong length");
  out->resize(static_cast<size_t>(decoded_size));
}

}  // namespace

uint64_t DecodedBound(uint8_t type, const Pieces& compressed) {
  switch (type) {
    case kNoCompression:
      return compressed.total;
    case kSnappy:
      return compressed.total > UINT64_MAX / kSnappyMaxRatio ? UINT64_MAX
                                                             : compressed.total * kSnappyMaxRatio;
    case kZstd:
      return ZstdDecodedBound(compressed);
    default:
      return UINT64_MAX;
  }
}

void CheckDecodedSize(uint8_t type, const Pieces& compressed, uint64_t declared, const char* what) {
  const uint64_t bound = DecodedBound(type, compressed);
  if (declared > bound) {
    Corrupt(std::string(what) + " (" + CompressionName(type) + ") declare " +
            std::to_string(declared) + " decoded bytes, but their " +
            std::to_string(compressed.total) + " compressed bytes can yield at most " +
            std::to_string(bound) + "; the shard is damaged");
  }
}

void DecompressInto(uint8_t type, const uint8_t* src, size_t size, uint64_t decoded_size,
                    std::vector<uint8_t>* out, const char* what, ZSTD_DCtx* zstd_context) {
  if (type == kBrotli) {
    DecompressBrotli(src, size, decoded_size, out,
                     std::string(what) + " (" + CompressionName(type) + ") ");
    return;
  }
  out->resize(static_cast<size_t>(decoded_size));
  DecompressExact(type, src, size, out->data(), out->size(), what, zstd_context);
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

namespace {

// A context for callers that bring none (record sizes, footers): one per
// thread, made once. ZSTD_decompress makes and frees a context per call,
// which cost more than decompressing a short record's sizes and values
// together: a third of a 1 KiB record's time.
ZSTD_DCtx* ThreadZstdContext() {
  thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> context(ZSTD_createDCtx(),
                                                                          &ZSTD_freeDCtx);
  if (context == nullptr) throw std::bad_alloc();
  return context.get();
}

}  // namespace

void DecompressExact(uint8_t type, const uint8_t* src, size_t size, uint8_t* dst,
                     size_t decoded_size, const char* what, ZSTD_DCtx* zstd_context) {
  // Built only for a message: a short record's chunk is decompressed twice
  // (sizes, values), and the string cost a malloc and a few hundred
  // instructions each time.
  const auto prefix = [&] { return std::string(what) + " (" + CompressionName(type) + ") "; };
  switch (type) {
    case kNoCompression:
      if (size != decoded_size) Corrupt(prefix() + "has the wrong length");
      if (size) std::memcpy(dst, src, size);
      return;
    case kZstd: {
      // One shot into the full-size buffer: no window is allocated, so the
      // frame's declared window needs no limit here.
      const size_t written =
          ZSTD_decompressDCtx(zstd_context != nullptr ? zstd_context : ThreadZstdContext(), dst,
                              decoded_size, src, size);
      if (ZSTD_isError(written)) {
        Corrupt(prefix() + "fails to decompress: " + ZSTD_getErrorName(written));
      }
      if (written != decoded_size) Corrupt(prefix() + "decompresses to the wrong length");
      return;
    }
    case kSnappy: {
      size_t length = 0;
      const char* input = reinterpret_cast<const char*>(src);
      if (!snappy::GetUncompressedLength(input, size, &length) || length != decoded_size) {
        Corrupt(prefix() + "declares the wrong decompressed length");
      }
      if (!snappy::RawUncompress(input, size, reinterpret_cast<char*>(dst))) {
        Corrupt(prefix() + "fails to decompress");
      }
      return;
    }
    case kBrotli: {
      size_t written = decoded_size;
      if (BrotliDecoderDecompress(size, src, &written, dst) != BROTLI_DECODER_RESULT_SUCCESS) {
        Corrupt(prefix() + "fails to decompress");
      }
      if (written != decoded_size) Corrupt(prefix() + "decompresses to the wrong length");
      return;
    }
    default:
      Corrupt(std::string(what) + " uses unknown compression type " + std::to_string(type));
  }
}

}  // namespace sdsl
