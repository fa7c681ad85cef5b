// The reader's decode threads, started on first need and kept for as long as
// the reader lives in this process, so that a read() of a few records does
// not pay for starting and joining threads (about 180 us each on a small VM,
// more than decoding four records takes).
#ifndef SDS_LOADER_WORKER_POOL_H_
#define SDS_LOADER_WORKER_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "base/fork_guard.h"

namespace sdsl {

class WorkerPool : public ForkGuarded {
 public:
  WorkerPool();
  ~WorkerPool() override;

  // Runs `task` on the calling thread and on up to `helpers` pool threads at
  // once, and returns when every one of them has returned from it. `task`
  // must not throw and must cope with running on fewer threads than asked:
  // a helper busy with another read joins late or not at all, and a thread
  // the system refuses to start (EAGAIN, no memory) is one helper fewer.
  // Several reads may run at once; each makes progress on its own thread.
  void Run(size_t helpers, const std::function<void()>& task);

  // Threads started so far in this process.
  size_t threads() const;

  void LockForFork() override;
  void UnlockInParent() override;
  // The parent's threads do not exist in the child: forget them, unjoined,
  // and start afresh on the next Run.
  void ResetInChild() override;

 private:
  struct Job {
    const std::function<void()>* task;
    size_t wanted;
    size_t joined = 0;
    std::atomic<size_t> active{0};  // changed under the mutex; read without it while spinning
    bool open = true;
  };
  struct State {
    mutable std::mutex mutex;      // guards the rest; never held while a task runs
    std::condition_variable wake;  // a job wants helpers, or stopping
    std::condition_variable done;  // a helper left a job
    std::deque<Job*> jobs;
    std::vector<std::thread> threads;
    bool stopping = false;
    std::atomic<uint64_t> posted{0};  // jobs posted so far: what an idle helper spins on
  };
  static Job* OpenJob(State* state);
  static void Loop(State* state);
  void StartThreads(State* state, size_t wanted);

  State* state_;  // replaced, the old one abandoned, in a forked child
};

}  // namespace sdsl

#endif  // SDS_LOADER_WORKER_POOL_H_
