#include "riegeli_layout.h"

#include "byte_io.h"
#include "reader_error.h"
#include "riegeli_hash.h"

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

void LogicalRange(const FileWindow& window, uint64_t pos, uint64_t size, bool verify,
                  const char* what, Pieces* out, uint64_t* next) {
  out->Clear();
  if (pos < window.begin || pos > window.end()) {
    Corrupt(std::string(what) + " at offset " + std::to_string(pos) +
            " lies outside the bytes that hold it");
  }
  while (true) {
    const uint64_t in_block = pos % kBlockSize;
    if (size > 0 && in_block < kBlockHeaderSize) {
      // A block header: step over it, after checking it when it is ours to read.
      const uint64_t header_begin = pos - in_block;
      const uint64_t header_end = header_begin + kBlockHeaderSize;
      if (header_end > window.end() || header_begin < window.begin) {
        Corrupt(std::string(what) + " at offset " + std::to_string(pos) +
                " runs past the end of the shard (truncated file?)");
      }
      if (in_block != 0) {
        Corrupt(std::string(what) + " begins at offset " + std::to_string(pos) +
                ", inside a block header");
      }
      if (verify) {
        const uint8_t* header = window.data + (header_begin - window.begin);
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
    if (pos + take > window.end()) {
      Corrupt(std::string(what) + " at offset " + std::to_string(pos) +
              " runs past the end of the shard (truncated file?)");
    }
    out->Append(window.data + (pos - window.begin), static_cast<size_t>(take));
    pos += take;
    size -= take;
  }
  *next = pos;
}

}  // namespace sdsl
