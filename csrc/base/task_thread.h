// One thread that runs posted tasks in order while the poster goes on: work
// that must not hold up a read (announcing the next batch's bytes to the
// kernel costs about 4 ms per 16 MiB of page-cache pages).
#ifndef SDS_LOADER_TASK_THREAD_H_
#define SDS_LOADER_TASK_THREAD_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "base/fork_guard.h"

namespace sdsl {

class TaskThread : public ForkGuarded {
 public:
  // At most `max_pending` tasks wait; a task posted past that is dropped,
  // so the queue stays bounded when the thread falls behind.
  explicit TaskThread(size_t max_pending);
  // Runs the tasks already posted, then stops.
  ~TaskThread() override;

  // Queues `task` (which must not throw) and returns; the thread is started
  // on the first post. Where the system refuses a thread, `task` is dropped.
  // Returns whether it was queued.
  bool Post(std::function<void()> task);
  // Whether every task posted before the call has run by `deadline`: a
  // marker is posted after them and waited for (false also when the queue
  // has no room for it).
  bool WaitForEarlier(std::chrono::steady_clock::time_point deadline);
  // The deadline `seconds` from now, for WaitForEarlier.
  static std::chrono::steady_clock::time_point DeadlineAfter(double seconds);

  void LockForFork() override;
  void UnlockInParent() override;
  // The parent's thread does not exist in the child: forget it and its
  // queue, unjoined, and start afresh on the next post.
  void ResetInChild() override;

 private:
  struct State {
    std::mutex mutex;  // guards the rest; never held while a task runs
    std::condition_variable wake;
    std::deque<std::function<void()>> tasks;
    std::thread thread;
    bool stopping = false;
  };
  static void Loop(State* state);

  const size_t max_pending_;
  State* state_;  // replaced, the old one abandoned, in a forked child
};

}  // namespace sdsl

#endif  // SDS_LOADER_TASK_THREAD_H_
