#include "container/value_stream.h"

#include <string>

#include "base/reader_error.h"
#include "container/codecs.h"

namespace sdsl {

void PiecesStream::Read(uint8_t* dst, uint64_t n) {
  if (!CopyFromPieces(pieces_, position_, n, dst)) {
    Corrupt("record values end " + std::to_string(n - (pieces_.total - position_)) +
            " bytes early");
  }
  position_ += n;
}

void PiecesStream::Skip(uint64_t n) {
  if (n > pieces_.total - position_) Corrupt("record values end early");
  position_ += n;
}

ZstdStream::ZstdStream(ZSTD_DCtx* context, const Pieces& input, uint64_t decoded_size,
                       std::vector<uint8_t>* discard)
    : context_(context), input_(input), discard_(discard) {
  ZSTD_DCtx_reset(context_, ZSTD_reset_session_only);
  ZSTD_DCtx_setParameter(context_, ZSTD_d_windowLogMax, ZstdStreamWindowLog(decoded_size));
}

void ZstdStream::Read(uint8_t* dst, uint64_t n) {
  ZSTD_outBuffer out{dst, static_cast<size_t>(n), 0};
  while (out.pos < out.size) {
    if (frame_done_) Corrupt("zstd values end before the sizes they declare");
    if (in_.pos == in_.size && next_piece_ < input_.spans.size()) {
      const ByteSpan& piece = input_.spans[next_piece_++];
      in_ = ZSTD_inBuffer{piece.data, piece.size, 0};
    }
    const size_t out_before = out.pos;
    const size_t in_before = in_.pos;
    const size_t result = ZSTD_decompressStream(context_, &out, &in_);
    if (ZSTD_isError(result)) {
      Corrupt(std::string("zstd values fail to decompress: ") + ZSTD_getErrorName(result));
    }
    if (result == 0) frame_done_ = true;
    // No input left and no output produced: zstd is waiting for bytes that
    // the chunk does not have.
    if (out.pos == out_before && in_.pos == in_before && in_.pos == in_.size &&
        next_piece_ == input_.spans.size()) {
      Corrupt("zstd values are truncated");
    }
  }
}

void ZstdStream::Skip(uint64_t n) {
  constexpr uint64_t kDiscardSize = 64 * 1024;
  if (discard_->size() < kDiscardSize) discard_->resize(kDiscardSize);
  while (n > 0) {
    const uint64_t take = n < kDiscardSize ? n : kDiscardSize;
    Read(discard_->data(), take);
    n -= take;
  }
}

}  // namespace sdsl
