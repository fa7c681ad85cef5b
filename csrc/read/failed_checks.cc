#include "read/failed_checks.h"

#include <string>

namespace sdsl {

void FailedChecks::After(const ReaderError& error, const ShardFile& file,
                         const std::vector<ByteRange>& ranges) {
  // A check that read nothing (a size that is no whole number of blocks)
  // fails the same however often the bytes are fetched.
  if (error.kind() != ErrorKind::kCorrupt || ranges.empty()) throw error;
  ShardSource& source = file.source();
  bool dropped = false;
  for (const ByteRange& range : ranges) {
    if (range.size > 0)
      dropped = source.DropCopy(file.number(), range.offset, range.size) || dropped;
  }
  ++failures_;
  if (source.Refetch(file.number(), failures_, dropped)) return;
  if (failures_ == 1 && source.CheckAttempts() <= 1 && !dropped) throw error;
  // The bytes the check failed on: the last read (a footer's parse reads
  // the signature, the postscript, then the footer).
  const ByteRange& last = ranges.back();
  throw ReaderError(error.kind(),
                    std::string(error.what()) +
                        FailedFetches(file.path(), last.offset, last.offset + last.size, failures_),
                    error.os_error());
}

void ReadCheckedChunk(const ShardFile& file, const ShardIndex& index, uint64_t c, bool verify,
                      std::vector<uint8_t>* bytes, Chunk* chunk) {
  FailedChecks checks;
  for (;;) {
    try {
      ReadIndexedChunk(file, index, c, verify, bytes, chunk);
      return;
    } catch (const ReaderError& error) {
      const uint64_t begin = c < index.num_chunks() ? index.chunk_offsets[c] : 0;
      const uint64_t end = c < index.num_chunks() ? index.ChunkLimit(c) : 0;
      checks.After(error, file, {ByteRange{begin, end - begin}});
    }
  }
}

}  // namespace sdsl
