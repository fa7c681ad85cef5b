#include "executor.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace sdsl {

void ExecuteRuns(size_t count, int threads, ScratchPool* pool, const RunWork& work) {
  if (count == 0) return;
  const size_t workers = std::min<size_t>(std::max(threads, 1), count);
  std::atomic<size_t> next_run{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  auto worker = [&]() {
    std::unique_ptr<WorkerScratch> scratch;
    try {
      scratch = pool->Acquire();
      for (size_t r = next_run++; r < count && !failed; r = next_run++) work(r, scratch.get());
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
      failed = true;
    }
    if (scratch) pool->Release(std::move(scratch));
  };
  if (workers == 1) {
    worker();
  } else {
    std::vector<std::thread> helpers;
    helpers.reserve(workers - 1);
    for (size_t w = 1; w < workers; ++w) {
      // A thread the system refuses (EAGAIN) is one worker fewer, not a
      // crash: the runs are shared out by next_run, so fewer workers suffice.
      try {
        helpers.emplace_back(worker);
      } catch (const std::system_error&) {
        break;
      }
    }
    worker();
    for (std::thread& thread : helpers) thread.join();
  }
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace sdsl
