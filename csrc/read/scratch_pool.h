// Per-thread working memory, pooled across reads so that buffers and zstd
// contexts are allocated once, not per batch.
#ifndef SDS_LOADER_SCRATCH_POOL_H_
#define SDS_LOADER_SCRATCH_POOL_H_

#include <zstd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/fork_guard.h"
#include "base/stage_clock.h"
#include "container/riegeli_layout.h"
#include "container/simple_chunk.h"
#include "read/record_decoder.h"
#include "sources/shard_source.h"

namespace sdsl {

// Largest decoded chunk (or whole record) a reader holds in memory at once,
// unless the reader sets its own cap (BatchReader's max_chunk_bytes): a chunk
// that claims more is refused before anything is allocated for it.
constexpr uint64_t kMaxMaterializedBytes = uint64_t{2} << 30;

// A range of a chunk's data (logical bytes, block headers not counted) that
// is read straight into a row.
struct RowRoute {
  uint64_t begin = 0;
  uint64_t size = 0;
  uint8_t* dst = nullptr;
};

// Grows `buffer` to at least `size` bytes, never shrinking it: growing
// zero-fills, and scratch whose size swings from run to run (a run that
// reads itself, then one fetched whole) would pay for that every time.
inline void GrowTo(std::vector<uint8_t>* buffer, uint64_t size) {
  if (buffer->size() < size) buffer->resize(static_cast<size_t>(size));
}

struct WorkerScratch {
  WorkerScratch();
  ~WorkerScratch();
  WorkerScratch(const WorkerScratch&) = delete;
  WorkerScratch& operator=(const WorkerScratch&) = delete;
  std::vector<uint8_t> file_bytes;
  // The block headers of the runs fetched into file_bytes, set aside so
  // that each chunk's data lies there in one piece.
  std::vector<uint8_t> run_block_headers;
  // A run that reads only its windows reads here: its chunk prefixes, or a
  // chunk it must read whole after all, while file_bytes may still hold the
  // other runs fetched with it.
  std::vector<uint8_t> window_bytes;
  std::vector<RangeRequest> requests;
  // Which of `requests` hold chunk data, hashed as they are copied.
  std::vector<uint8_t> hashed_requests;
  std::vector<std::pair<size_t, size_t>> requested_runs;  // executor.cc: (run, its first request)
  // How the batch this scratch serves fetches; the plainest outside a batch.
  FetchPlan fetch_plan;
  // The clock of the run being decoded, when it is timed stage by stage
  // (executor.cc); null otherwise, and outside a batch.
  StageClock* clock = nullptr;
  std::vector<uint8_t> block_headers;  // of the bytes in file_bytes, read beside them
  std::vector<MutableSpan> read_pieces;
  // Reading uncompressed chunks straight into rows: each chunk's first bytes,
  // how many to read (learned from the last chunk), where its tensors go.
  std::vector<uint8_t> head;
  std::vector<uint8_t> head_block_headers;
  uint64_t head_bytes = 1024;
  std::vector<RowRoute> routes;
  std::vector<uint8_t> sizes;
  std::vector<uint8_t> values;
  std::vector<uint8_t> gathered;  // compressed values split by a block header, joined
  std::vector<uint8_t> discard;
  std::vector<uint8_t> record;
  RecordScratch record_scratch;
  ZSTD_DCtx* zstd;
  // One run's decoding state, reused from run to run (run_decoder.cc).
  std::vector<std::string> keys;
  Chunk chunk;
  SimpleChunk parsed;
  Pieces decoded;
  // The cap of the reader this scratch serves (ScratchPool sets it).
  uint64_t max_materialized = kMaxMaterializedBytes;
  // The thread that used it last, which gets it back first (ScratchPool).
  std::thread::id last_user;

  // Bytes its buffers hold (capacity, not size).
  size_t HeldBytes() const;
  // Frees every buffer larger than `limit` bytes (0: every buffer). The zstd
  // context, the costly part to make, stays.
  void FreeBuffersOver(size_t limit);
};

// A few idle WorkerScratch, handed out to one worker at a time. What idle
// scratch keeps is bounded twice: no buffer over 8 MiB, and no more than
// 32 MiB in all, so that one batch of large records on many threads does not
// pin hundreds of megabytes for the reader's lifetime. A batch of ordinary
// records reuses its buffers without allocating.
class ScratchPool : public ForkGuarded {
 public:
  ScratchPool() { StartGuarding(); }
  ~ScratchPool() override { StopGuarding(); }
  // Idle scratch, the calling thread's own from its last read if it is
  // idle: a zstd context and buffers still in that core's cache. Handed to
  // whichever thread asked first, the two threads of a batch swapped their
  // scratch every other batch, and each decoded its first records from
  // another core's cache.
  std::unique_ptr<WorkerScratch> Acquire();
  void Release(std::unique_ptr<WorkerScratch> scratch);
  // Bytes held by idle scratch now.
  size_t kept_bytes() const;
  // The reader's cap on a chunk or record held whole, given to every scratch
  // it hands out.
  uint64_t max_materialized() const { return max_materialized_.load(std::memory_order_relaxed); }
  void set_max_materialized(uint64_t bytes) {
    max_materialized_.store(bytes, std::memory_order_relaxed);
  }

  void LockForFork() override { mutex_.lock(); }
  void UnlockInParent() override { mutex_.unlock(); }
  void ResetInChild() override { mutex_.unlock(); }

 private:
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<WorkerScratch>> idle_;
  size_t kept_bytes_ = 0;
  std::atomic<uint64_t> max_materialized_{kMaxMaterializedBytes};
};

}  // namespace sdsl

#endif  // SDS_LOADER_SCRATCH_POOL_H_
