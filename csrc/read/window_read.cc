#include "read/window_read.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "base/byte_io.h"
#include "base/reader_error.h"
#include "container/codecs.h"
#include "container/riegeli_chunk.h"
#include "container/riegeli_layout.h"
#include "container/simple_chunk.h"
#include "read/run_decoder.h"

namespace sdsl {
namespace {

// Physical bytes read at once from a chunk's start: its header, its record
// sizes and, in a chunk of one small-headed record, that record's
// SafeTensors header, all in one read.
constexpr uint64_t kPrefixBytes = 8 << 10;
// Reads smaller than this (headers, descriptors) are served from one read of
// this size, so that a record's few small pieces cost one system call.
constexpr uint64_t kSmallRead = 4 << 10;

// The logical bytes of the chunk that begins at `begin` (offset 0 is the
// first byte of its header), read around the block headers that interrupt
// them; bytes within `prefix` (the chunk's first physical bytes, already in
// memory) are copied from it.
class ChunkBytes {
 public:
  ChunkBytes(const ShardFile& file, uint64_t begin, const std::vector<uint8_t>& prefix)
      : file_(file), begin_(begin), prefix_(prefix) {}

  void Read(uint64_t offset, uint64_t size, uint8_t* dst) const {
    uint64_t pos;
    if (!AddWithOverhead(begin_, offset, &pos)) Corrupt("chunk offset overflows");
    const uint64_t prefix_end = begin_ + prefix_.size();
    while (size > 0) {
      const uint64_t in_block = pos % kBlockSize;
      if (in_block < kBlockHeaderSize) pos += kBlockHeaderSize - in_block;
      uint64_t take = std::min(size, kBlockSize - pos % kBlockSize);
      if (pos < prefix_end) {
        take = std::min(take, prefix_end - pos);
        std::memcpy(dst, prefix_.data() + (pos - begin_), static_cast<size_t>(take));
      } else {
        file_.ReadAt(pos, take, dst);
      }
      pos += take;
      dst += take;
      size -= take;
    }
  }

 private:
  const ShardFile& file_;
  const uint64_t begin_;
  const std::vector<uint8_t>& prefix_;
};

// The values of an uncompressed chunk, read from the file only as asked.
class WindowStream final : public ValueStream {
 public:
  WindowStream(const ChunkBytes& bytes, uint64_t offset, uint64_t size)
      : bytes_(bytes), offset_(offset), size_(size) {}

  void Read(uint8_t* dst, uint64_t n) override {
    if (n > size_ - position_)
      Corrupt("record values end " + std::to_string(n - (size_ - position_)) + " bytes early");
    if (n >= kSmallRead) {
      bytes_.Read(offset_ + position_, n, dst);
    } else {
      if (position_ < cached_begin_ || position_ + n > cached_begin_ + cached_size_) {
        cached_begin_ = position_;
        cached_size_ = std::min(kSmallRead, size_ - position_);
        bytes_.Read(offset_ + cached_begin_, cached_size_, cache_);
      }
      std::memcpy(dst, cache_ + (position_ - cached_begin_), static_cast<size_t>(n));
    }
    position_ += n;
  }

  void Skip(uint64_t n) override {
    if (n > size_ - position_) Corrupt("record values end early");
    position_ += n;
  }

 private:
  const ChunkBytes& bytes_;
  const uint64_t offset_;
  const uint64_t size_;
  uint64_t position_ = 0;
  uint64_t cached_begin_ = 0;
  uint64_t cached_size_ = 0;
  uint8_t cache_[kSmallRead];
};

// The record sizes of an uncompressed simple chunk whose data begins at
// logical offset kChunkHeaderSize of `bytes`, checked as ParseSimpleChunk
// checks them. Returns where the values begin in the chunk, or 0 when the
// chunk is compressed.
uint64_t ReadRecordSizes(const ChunkBytes& bytes, const ChunkHeader& header,
                         std::vector<uint8_t>* scratch, std::vector<uint64_t>* offsets,
                         std::vector<uint64_t>* sizes) {
  uint8_t first[11];
  const uint64_t held = std::min<uint64_t>(sizeof(first), header.data_size);
  bytes.Read(kChunkHeaderSize, held, first);
  SimpleChunkHead head;
  if (!ParseSimpleChunkHead(first, held, header.data_size, &head))
    Corrupt("malformed record sizes length");
  if (head.compression != kNoCompression) return 0;
  scratch->resize(static_cast<size_t>(head.sizes_size));
  bytes.Read(kChunkHeaderSize + head.sizes_begin, head.sizes_size, scratch->data());
  const uint64_t total =
      DecodeRecordSizes(scratch->data(), scratch->data() + scratch->size(), header, offsets, sizes);
  if (header.data_size - head.values_begin() != total) {
    Corrupt("uncompressed values hold " + std::to_string(header.data_size - head.values_begin()) +
            " bytes where the record sizes add up to " + std::to_string(total));
  }
  return kChunkHeaderSize + head.values_begin();
}

}  // namespace

bool ReadsWindowsOnly(const Run& run, const BatchLayout& layout, Verify verify) {
  if (!layout.window.active()) return false;
  // Other codecs decode whole chunks anyway; the footer's writer options say
  // which the shard was written with (a chunk that disagrees is read whole).
  if (!run.shard->index.WrittenUncompressed()) return false;
  if (verify == Verify::kNever) return true;
  return std::all_of(run.chunks.begin(), run.chunks.end(), [&](const WantedChunk& wanted) {
    return run.shard->verified.Has(wanted.chunk);
  });
}

bool DecodeChunkWindows(const OpenShard& shard, const WantedChunk& wanted,
                        const BatchLayout& layout, std::vector<std::string>* keys,
                        WorkerScratch* scratch, const WantedRecord** current) {
  const ShardIndex& index = shard.index;
  const uint64_t begin = index.chunk_offsets[wanted.chunk];
  const uint64_t limit = index.ChunkLimit(wanted.chunk);
  if (limit < begin) Corrupt("chunk at offset " + std::to_string(begin) + " ends before it begins");
  std::vector<uint8_t>& prefix = scratch->window_bytes;
  prefix.resize(static_cast<size_t>(std::min(limit - begin, kPrefixBytes)));
  shard.file->ReadAt(begin, prefix.size(), prefix.data());
  // The frame a whole read checks: header hash, data and records within bounds.
  Chunk chunk;
  ReadChunkFrame(FileRange{prefix.data(), begin, prefix.size()}, begin, limit, &chunk);
  if (!IsDecodableRecordChunk(chunk, index, wanted.chunk)) return false;
  const ChunkBytes bytes(*shard.file, begin, prefix);
  std::vector<uint64_t> offsets, sizes;
  const uint64_t values = ReadRecordSizes(bytes, chunk.header, &scratch->sizes, &offsets, &sizes);
  if (values == 0) return false;
  const uint64_t values_size = chunk.header.decoded_data_size;
  ChunkRecords records{offsets, sizes,
                       [&] { return std::make_unique<WindowStream>(bytes, values, values_size); }};
  DecodeChunkRecords(wanted, records, layout, keys, scratch, current);
  return true;
}

}  // namespace sdsl
