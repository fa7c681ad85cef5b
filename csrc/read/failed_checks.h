// What a read does when bytes it fetched fail a check: the source forgets
// every copy it kept of them, and the read fetches them again as long as the
// source's retry policy allows (a store's bytes may be damaged on their way;
// a local file's are its own, read once); then the error says how many times
// the bytes failed, which bytes and which check.
#ifndef SDS_LOADER_READ_FAILED_CHECKS_H_
#define SDS_LOADER_READ_FAILED_CHECKS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/reader_error.h"
#include "container/array_record_index.h"
#include "sources/shard_file.h"

namespace sdsl {

struct ByteRange {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The failed checks of one read of some bytes of one shard.
class FailedChecks {
 public:
  // `error` was met checking `ranges` of `file`. Returns when the read
  // should fetch them again; throws otherwise: `error` itself when it is no
  // failed check (not kCorrupt) or the bytes failed once from a source that
  // reads them once, else `error` saying how many times the bytes failed.
  void After(const ReaderError& error, const ShardFile& file, const ByteRange* ranges,
             size_t count);
  int failures() const { return failures_; }

 private:
  int failures_ = 0;
};

// ReadIndexedChunk, the chunk's bytes fetched again when they fail a check
// as FailedChecks says: a chunk read alone (record 0's probe, one record's bytes).
void ReadCheckedChunk(const ShardFile& file, const ShardIndex& index, uint64_t c, bool verify,
                      std::vector<uint8_t>* bytes, Chunk* chunk);

}  // namespace sdsl

#endif  // SDS_LOADER_READ_FAILED_CHECKS_H_
