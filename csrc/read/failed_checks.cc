#include "read/failed_checks.h"

#include <string>

namespace sdsl {

void FailedChecks::After(const ReaderError& error, const ShardFile& file, const ByteRange* ranges,
                         size_t count) {
  // A check that read nothing (a size that is no whole number of blocks)
  // fails the same however often the bytes are fetched.
  if (error.kind() != ErrorKind::kCorrupt || count == 0) throw error;
  ShardSource& source = file.source();
  bool dropped = false;
  for (size_t k = 0; k < count; ++k) {
    if (ranges[k].size > 0)
      dropped = source.DropCopy(file.number(), ranges[k].offset, ranges[k].size) || dropped;
  }
  ++failures_;
  if (source.Refetch(file.number(), failures_, dropped)) return;
  if (failures_ == 1 && source.CheckAttempts() <= 1 && !dropped) throw error;
  // The bytes the check failed on: the last read (a footer's parse reads
  // the signature, the postscript, then the footer).
  const ByteRange& last = ranges[count - 1];
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
      const ByteRange range{begin, end - begin};
      checks.After(error, file, &range, 1);
    }
  }
}

}  // namespace sdsl
