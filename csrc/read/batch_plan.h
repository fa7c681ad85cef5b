// One read() as a plan: rows grouped by shard and chunk, sorted by file
// offset, duplicates folded into one decode, adjacent chunks merged into
// runs that are each fetched with a single read.
//
// Numberings, one name each: `ordinal` is a record's number in the dataset,
// `shard_record` its number inside its shard, `chunk_record` its number inside
// its chunk, and `row` the output row of the batch it fills.
#ifndef SDS_LOADER_BATCH_PLAN_H_
#define SDS_LOADER_BATCH_PLAN_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/inline_vector.h"
#include "base/worker_pool.h"
#include "read/record_decoder.h"
#include "read/shard_cache.h"
#include "read/verified_chunks.h"

namespace sdsl {

// The rows one record fills. Almost always one: it is held inline, since a
// vector per record cost a malloc and a free for every record of a batch.
class RowList {
 public:
  size_t operator[](size_t k) const {
    assert(k < count_);
    return k == 0 ? first_ : more_[k - 1];
  }
  size_t size() const { return count_; }
  void push_back(size_t row) {
    if (count_ == 0) {
      first_ = row;
    } else {
      more_.push_back(row);
    }
    ++count_;
  }

 private:
  size_t first_ = 0;
  size_t count_ = 0;
  std::vector<size_t> more_;  // the rows after the first
};

struct WantedRecord {
  uint64_t chunk_record = 0;
  uint64_t shard_record = 0;
  RowList rows;  // rows[0] is decoded, the rest copied
};

struct WantedChunk {
  uint64_t chunk = 0;
  InlineVector<WantedRecord> records;  // ascending chunk_record
};

struct Run {
  // Kept by the reader's ShardCache as long as the reader lives: a plain
  // pointer, since a shared one cost two atomic operations per run on a
  // count every decoding thread touches.
  const OpenShard* shard = nullptr;
  InlineVector<WantedChunk> chunks;  // consecutive chunk numbers
  uint64_t begin = 0;
  uint64_t end = 0;
  // The shard's number, and whether its writer asked for no compression
  // (ShardIndex::WrittenUncompressed): what dividing a batch among threads
  // reads of every run, held here so that it reads the runs alone, not 256
  // shards' structures scattered through memory.
  size_t file = 0;
  bool written_uncompressed = false;
  // The shard's chunks are uncompressed and each decodes to kIntoRowsMinBytes
  // or more, as its footer says: warm, each chunk's tensors are best read
  // straight into their rows, which saves copying them out of a fetched run.
  bool into_rows = false;
};

// Chunks whose values decode to fewer bytes than this are read with their
// run: two reads per chunk cost more than copying a small record once.
constexpr uint64_t kIntoRowsMinBytes = 32 << 10;

struct BatchPlan {
  std::vector<Run> runs;
  std::vector<size_t> unsupported_rows;  // shards this core cannot decode
};

// Runs larger than this are split, so one pread never needs more scratch than
// a chunk plus this, and threads get work to share.
constexpr uint64_t kMaxRunBytes = 2 << 20;

// A batch is planned on several threads only in pieces of at least this
// many rows: below, waking a helper costs more than the planning it takes.
constexpr size_t kRowsPerPlanPiece = 32;
constexpr size_t kPlanPiecesPerThread = 4;

// One read(): a record a row (the shard's number, the record's number in
// it, and its ordinal, which errors name), where the rows go, and how they
// are checked. Rows this core cannot decode get needs_fallback[row] = 1.
struct Batch {
  const int64_t* files = nullptr;
  const int64_t* shard_records = nullptr;
  const int64_t* ordinals = nullptr;
  size_t count = 0;
  const BatchLayout* layout = nullptr;
  Verify verify = Verify::kEveryRead;
  int threads = 1;
  uint8_t* needs_fallback = nullptr;
};

// Plans `batch`, opening its shards through `shards`. Throws a corrupt error
// (naming the shard and the ordinal) for a record the shard does not hold.
// With a window, repeats of a record fold into one decode only when their
// windows start at the same place. With batch.threads > 1 a large batch is
// cut into pieces at shard boundaries and planned on the caller's thread and
// `workers`: the plan is the same, and opening the shards and building the
// runs of a large batch of short records, a tenth of its time on one
// thread, is shared.
BatchPlan PlanBatch(const Batch& batch, ShardCache& shards, WorkerPool& workers);

}  // namespace sdsl

#endif  // SDS_LOADER_BATCH_PLAN_H_
