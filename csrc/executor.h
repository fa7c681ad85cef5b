// Shares the runs of one batch among a few threads, each with its own
// pooled scratch, and reports the first error.
#ifndef SDS_LOADER_EXECUTOR_H_
#define SDS_LOADER_EXECUTOR_H_

#include <cstddef>
#include <functional>

#include "scratch_pool.h"

namespace sdsl {

using RunWork = std::function<void(size_t run, WorkerScratch* scratch)>;

// Calls work(run, scratch) once for each run in [0, count), on up to
// `threads` threads, the caller's among them. After the first error no new
// run starts; that error is rethrown once every thread has stopped.
void ExecuteRuns(size_t count, int threads, ScratchPool* pool, const RunWork& work);

}  // namespace sdsl

#endif  // SDS_LOADER_EXECUTOR_H_
