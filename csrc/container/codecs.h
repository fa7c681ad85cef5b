// The compressions Riegeli simple chunks use, and what their bytes can decode
// to. zstd chunks up to materialize.h's kOneShotZstdBytes are decoded here in
// one shot (the hot path); only larger ones stream, through value_stream.h.
#ifndef SDS_LOADER_CODECS_H_
#define SDS_LOADER_CODECS_H_

#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/byte_span.h"

namespace sdsl {

enum CompressionType : uint8_t {
  kNoCompression = 0,
  kBrotli = 'b',
  kZstd = 'z',
  kSnappy = 's',
};

bool IsKnownCompression(uint8_t type);
const char* CompressionName(uint8_t type);

// The most bytes `compressed` (one codec's buffer, without Riegeli's size
// prefix) can decode to, learnt from the bytes rather than from any size a
// shard declares: a size past it is a lie, refused before it is allocated.
// none: its own size. snappy: 22 times its size (a 3-byte copy element
// yields at most 64 bytes). zstd: each frame's blocks walked, raw and RLE
// blocks counting their stated sizes and a compressed block its frame's
// largest block, and no more than a content size the frame states. brotli:
// UINT64_MAX, since its format bounds no ratio worth having; DecompressInto
// grows its output as brotli produces bytes instead.
uint64_t DecodedBound(uint8_t type, const Pieces& compressed);

// Refuses (a corrupt error naming `what`) a declared decoded size that
// `compressed` cannot produce.
void CheckDecodedSize(uint8_t type, const Pieces& compressed, uint64_t declared, const char* what);

// DecompressExact into `out`, resized to `decoded_size`. brotli is decoded
// as a stream into a buffer that grows with what it yields, so a short
// stream that declares gigabytes costs what it holds, not what it claims.
void DecompressInto(uint8_t type, const uint8_t* src, size_t size, uint64_t decoded_size,
                    std::vector<uint8_t>* out, const char* what, ZSTD_DCtx* zstd_context = nullptr);

// Decompresses `size` bytes at `src` (without Riegeli's size prefix) into
// exactly `decoded_size` bytes at `dst`. Throws a corrupt error naming `what`
// when the codec fails or yields any other length. `zstd_context`, when
// given, is reused for zstd instead of a fresh one per call.
void DecompressExact(uint8_t type, const uint8_t* src, size_t size, uint8_t* dst,
                     size_t decoded_size, const char* what, ZSTD_DCtx* zstd_context = nullptr);

// Streaming a zstd frame costs a buffer as large as the window its header
// declares (up to 2 GiB with window_log:31), whatever the data; decoding it in
// one shot into a buffer of its full decoded size costs nothing more. A frame
// streams when its window is at most this, or at most its decoded size.
constexpr uint64_t kZstdStreamWindow = uint64_t{8} << 20;

// Checks the header of the zstd frame that `values` begins with against the
// `decoded_size` the chunk declares, before anything is decoded; returns
// whether streaming it stays within max(decoded_size, kZstdStreamWindow).
bool ZstdFrameStreams(const Pieces& values, uint64_t decoded_size);

// The window log limit a stream of `decoded_size` bytes is decoded under:
// every frame ZstdFrameStreams accepts fits, and zstd itself refuses more.
int ZstdStreamWindowLog(uint64_t decoded_size);

}  // namespace sdsl

#endif  // SDS_LOADER_CODECS_H_
