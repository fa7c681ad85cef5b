// Shares the runs of one batch among a few threads: each fetches its runs'
// bytes through the dataset's ShardSource, a slice at a time, and decodes
// them with its own pooled scratch. The first error stops the batch.
#ifndef SDS_LOADER_EXECUTOR_H_
#define SDS_LOADER_EXECUTOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "base/reader_error.h"
#include "base/worker_pool.h"
#include "container/riegeli_layout.h"
#include "read/batch_plan.h"
#include "read/scratch_pool.h"
#include "sources/shard_source.h"

namespace sdsl {

struct RunWork {
  // Decodes `run` from its fetched bytes (null for a run that reads itself).
  std::function<void(const Run& run, const FileRange* fetched, WorkerScratch* scratch)> decode;
  // Throws `error`, met while fetching `run`, with the run's context.
  std::function<void(const Run& run, const ReaderError& error)> fetch_failed;
  // Optional: true for a run that fetches only the bytes it needs (a window
  // of a large record, tensors read straight into rows); it is not fetched
  // whole and decode gets null bytes. `gathering`: the batch's runs are
  // fetched many at a time (cold or remote shards), where a run that reads
  // itself, a read or two at a time, would leave the disk's queue short.
  std::function<bool(const Run& run, const WorkerScratch& scratch, bool gathering)> reads_itself;
  // A warm batch wakes one helper per this much work, counted in
  // uncompressed bytes (0: every helper `threads` allows).
  uint64_t work_per_helper = 0;
  // Fetch each run with its block headers set aside (FileRange::
  // block_headers), so that a chunk's data lies in one piece and is never
  // gathered again before decoding; a run beginning inside a block header,
  // which only a damaged footer points at, is fetched as it lies. This makes
  // back-to-back requests into several buffers, which only a local source
  // reads as one range.
  bool split_block_headers = false;
};

// Waking a helper costs tens of microseconds on a small VM, as much as
// hashing and copying a few uncompressed records: below this much work per
// helper, a warm batch is faster on fewer threads (batches of four 64 KiB
// uncompressed records ran 17% slower on two threads than on one).
constexpr uint64_t kDefaultWorkPerHelper = 512 << 10;

// Calls work.decode once for each run, on up to `threads` threads (the
// caller's and pool helpers). After the first error no new run starts; that
// error is rethrown, unchanged, once every thread has stopped. Returns how
// many runs pool helpers decoded (0 when the caller's thread did them all),
// so that a test can tell a multi-threaded batch from one that only asked.
size_t ExecuteRuns(const std::vector<Run>& runs, int threads, ShardSource& source,
                   ScratchPool* scratch, WorkerPool* workers, const RunWork& work);

}  // namespace sdsl

#endif  // SDS_LOADER_EXECUTOR_H_
