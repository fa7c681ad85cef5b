// Shares the runs of one batch among a few threads: each fetches its runs'
// bytes through the dataset's ShardSource, a slice at a time, and decodes
// them into the batch's rows with its own pooled scratch. The first error
// stops the batch.
#ifndef SDS_LOADER_EXECUTOR_H_
#define SDS_LOADER_EXECUTOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/stage_clock.h"
#include "base/worker_pool.h"
#include "read/batch_plan.h"
#include "read/scratch_pool.h"
#include "sources/shard_source.h"

namespace sdsl {

// Waking a helper costs tens of microseconds on a small VM, as much as
// hashing and copying a few uncompressed records: below this much work per
// helper, a warm batch is faster on fewer threads (batches of four 64 KiB
// uncompressed records ran 17% slower on two threads than on one).
constexpr uint64_t kDefaultWorkPerHelper = 512 << 10;

// Fetches and decodes (DecodeRun) each run of `batch`'s plan, on up to
// batch.threads threads (the caller's and helpers from `workers`), each with
// scratch from `scratch`. A warm batch wakes one helper per
// `work_per_helper` of work, counted in uncompressed bytes (0: every helper
// the threads allow). After the first error no new run starts; that error is
// rethrown, naming its record, once every thread has stopped. Returns how
// many runs helpers decoded (0 when the caller's thread did them all), so
// that a test can tell a multi-threaded batch from one that only asked.
//
// With `stages`, each thread's time goes there by stage once it is done:
// every slice's fetch is timed, and one run in `sample_every` stage by stage
// (1: every run), its thread's other runs' time shared out among the stages
// as the timed runs' was. Timing a run of one short record costs about ten
// reads of the clock (some 100 ns, 2% of a 1 KiB zstd record's decoding);
// sampling keeps most of that out of the read.
size_t ExecuteRuns(const std::vector<Run>& runs, const Batch& batch, ShardSource& source,
                   ScratchPool& scratch, WorkerPool& workers, uint64_t work_per_helper,
                   StageTotals* stages = nullptr, uint32_t sample_every = 1);

}  // namespace sdsl

#endif  // SDS_LOADER_EXECUTOR_H_
