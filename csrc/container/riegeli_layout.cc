#include "container/riegeli_layout.h"

#include <algorithm>

#include "base/byte_io.h"
#include "base/reader_error.h"
#include "container/riegeli_hash.h"

namespace sdsl {

bool AddWithOverhead(uint64_t pos, uint64_t size, uint64_t* end) {
  // NumOverheadBlocks from the Riegeli spec, evaluated without overflow.
  const uint64_t into_block = (pos + kUsableBlockSize - 1) % kBlockSize;
  uint64_t numerator;
  if (!CheckedAdd(size, into_block, &numerator)) return false;
  const uint64_t overhead_blocks = numerator / kUsableBlockSize;
  uint64_t overhead, total;
  if (!CheckedMul(overhead_blocks, kBlockHeaderSize, &overhead)) return false;
  if (!CheckedAdd(pos, size, &total)) return false;
  return CheckedAdd(total, overhead, end);
}

uint64_t RoundUpToPossibleChunkBoundary(uint64_t pos) {
  const uint64_t remaining_in_block = (0 - pos) % kBlockSize;
  return remaining_in_block > kUsableBlockSize - 1
             ? pos + (remaining_in_block - (kUsableBlockSize - 1))
             : pos;
}

bool BeginsInsideBlockHeader(uint64_t pos) {
  const uint64_t in_block = pos % kBlockSize;
  return in_block != 0 && in_block < kBlockHeaderSize;
}

namespace {

// The first block header at or after `pos`.
uint64_t FirstHeaderFrom(uint64_t pos) {
  return pos % kBlockSize == 0 ? pos : pos - pos % kBlockSize + kBlockSize;
}

// The byte at physical `pos` of `range` (not inside a block header).
const uint8_t* DataAt(const FileRange& range, uint64_t pos) {
  if (range.block_headers == nullptr) return range.data + (pos - range.begin);
  const uint64_t first = FirstHeaderFrom(range.begin);
  const uint64_t headers_before = pos <= first ? 0 : (pos - first - 1) / kBlockSize + 1;
  return range.data + (pos - range.begin - headers_before * kBlockHeaderSize);
}

}  // namespace

const uint8_t* BlockHeaderAt(const FileRange& range, uint64_t header_begin) {
  if (range.block_headers == nullptr) return range.data + (header_begin - range.begin);
  const uint64_t first = FirstHeaderFrom(range.begin);
  return range.block_headers + (header_begin - first) / kBlockSize * kBlockHeaderSize;
}

uint64_t PhysicalEnd(uint64_t pos, uint64_t size) {
  while (size > 0) {
    const uint64_t in_block = pos % kBlockSize;
    if (in_block < kBlockHeaderSize) pos += kBlockHeaderSize - in_block;
    const uint64_t take = std::min(size, kBlockSize - pos % kBlockSize);
    pos += take;
    size -= take;
  }
  return pos;
}

StrippedLayout LayoutWithoutBlockHeaders(uint64_t begin, uint64_t end) {
  StrippedLayout layout;
  for (uint64_t header = FirstHeaderFrom(begin); header < end; header += kBlockSize) {
    layout.header_bytes += std::min(kBlockHeaderSize, end - header);
  }
  layout.data_bytes = end - begin - layout.header_bytes;
  return layout;
}

void SplitAtBlockHeaders(uint64_t begin, uint64_t end, uint8_t* data, uint8_t* headers,
                         std::vector<MutableSpan>* pieces) {
  pieces->clear();
  uint64_t pos = begin;
  for (uint64_t header = FirstHeaderFrom(begin); pos < end; header += kBlockSize) {
    const uint64_t data_end = std::min(header, end);
    if (data_end > pos) {
      pieces->push_back(MutableSpan{data, static_cast<size_t>(data_end - pos)});
      data += data_end - pos;
      pos = data_end;
    }
    if (pos >= end) break;
    const uint64_t header_size = std::min(kBlockHeaderSize, end - pos);
    pieces->push_back(MutableSpan{headers, static_cast<size_t>(header_size)});
    headers += header_size;
    pos += header_size;
  }
}

void AppendSplitReads(size_t file, uint64_t begin, uint64_t end, uint8_t* data, uint8_t* headers,
                      std::vector<MutableSpan>* pieces, std::vector<RangeRequest>* requests) {
  SplitAtBlockHeaders(begin, end, data, headers, pieces);
  uint64_t at = begin;
  for (const MutableSpan& piece : *pieces) {
    requests->push_back(RangeRequest{file, at, piece.size, piece.data});
    at += piece.size;
  }
}

void LogicalRange(const FileRange& range, uint64_t pos, uint64_t size, bool verify,
                  const char* what, Pieces* out, uint64_t* next) {
  out->Clear();
  if (pos < range.begin || pos > range.end()) {
    Corrupt(std::string(what) + " at offset " + std::to_string(pos) +
            " lies outside the bytes that hold it");
  }
  while (true) {
    const uint64_t in_block = pos % kBlockSize;
    if (size > 0 && in_block < kBlockHeaderSize) {
      // A block header: step over it, after checking it when it is ours to read.
      const uint64_t header_begin = pos - in_block;
      const uint64_t header_end = header_begin + kBlockHeaderSize;
      if (header_end > range.end() || header_begin < range.begin) {
        Corrupt(std::string(what) + " at offset " + std::to_string(pos) +
                " runs past the end of the shard (truncated file?)");
      }
      if (in_block != 0) {
        Corrupt(std::string(what) + " begins at offset " + std::to_string(pos) +
                ", inside a block header");
      }
      if (verify) {
        const uint8_t* header = BlockHeaderAt(range, header_begin);
        if (RiegeliHash(header + 8, 16) != LoadLE64(header)) {
          Corrupt("block header at offset " + std::to_string(header_begin) +
                  " fails its hash check");
        }
      }
      pos = header_end;
    }
    if (size == 0) break;
    const uint64_t block_left = kBlockSize - pos % kBlockSize;
    const uint64_t take = size < block_left ? size : block_left;
    if (pos + take > range.end()) {
      Corrupt(std::string(what) + " at offset " + std::to_string(pos) +
              " runs past the end of the shard (truncated file?)");
    }
    const uint8_t* bytes = DataAt(range, pos);
    ByteSpan* last = out->spans.empty() ? nullptr : &out->spans.back();
    if (last != nullptr && last->data + last->size == bytes) {
      // Bytes either side of a header that was not read into the range.
      last->size += static_cast<size_t>(take);
      out->total += take;
    } else {
      out->Append(bytes, static_cast<size_t>(take));
    }
    pos += take;
    size -= take;
  }
  *next = pos;
}

}  // namespace sdsl
