// Sequential access to a chunk's decoded record values. Records are consumed
// in order, each either read into its destination or skipped, so a zstd
// chunk decompresses straight into the batch rows that want its bytes.
#ifndef SDS_LOADER_VALUE_STREAM_H_
#define SDS_LOADER_VALUE_STREAM_H_

#include <zstd.h>

#include <cstdint>
#include <vector>

#include "base/byte_span.h"

namespace sdsl {

class ValueStream {
 public:
  virtual ~ValueStream() = default;
  // Both throw a corrupt error when fewer than `n` bytes remain.
  virtual void Read(uint8_t* dst, uint64_t n) = 0;
  virtual void Skip(uint64_t n) = 0;
};

// Bytes already decoded (or never compressed), possibly in several pieces.
class PiecesStream final : public ValueStream {
 public:
  explicit PiecesStream(const Pieces& pieces) : pieces_(pieces) {}
  void Read(uint8_t* dst, uint64_t n) override;
  void Skip(uint64_t n) override;
  uint64_t position() const { return position_; }

 private:
  const Pieces& pieces_;
  uint64_t position_ = 0;
};

// A zstd frame fed from pieces, decompressed on demand into the caller's
// destination. Skipped bytes go through a small fixed scratch buffer, so
// memory stays bounded whatever the record sizes. The frame must be one
// ZstdFrameStreams accepts for `decoded_size`; zstd refuses a larger window.
class ZstdStream final : public ValueStream {
 public:
  ZstdStream(ZSTD_DCtx* context, const Pieces& input, uint64_t decoded_size,
             std::vector<uint8_t>* discard);
  void Read(uint8_t* dst, uint64_t n) override;
  void Skip(uint64_t n) override;

 private:
  ZSTD_DCtx* context_;
  const Pieces& input_;
  size_t next_piece_ = 0;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  bool frame_done_ = false;
  std::vector<uint8_t>* discard_;
};

}  // namespace sdsl

#endif  // SDS_LOADER_VALUE_STREAM_H_
