#include "base/worker_pool.h"

#include <algorithm>
#include <new>
#include <system_error>

namespace sdsl {
namespace {

// More helpers than this are never started, whatever a read asks for.
constexpr size_t kMaxThreads = 256;

}  // namespace

WorkerPool::WorkerPool() : state_(new State()) { StartGuarding(); }

WorkerPool::~WorkerPool() {
  StopGuarding();
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  for (std::thread& thread : state_->threads) thread.join();
  delete state_;
}

size_t WorkerPool::threads() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->threads.size();
}

WorkerPool::Job* WorkerPool::OpenJob(State* state) {
  for (Job* job : state->jobs) {
    if (job->open && job->joined < job->wanted) return job;
  }
  return nullptr;
}

void WorkerPool::Loop(State* state) {
  std::unique_lock<std::mutex> lock(state->mutex);
  for (;;) {
    Job* job = nullptr;
    state->wake.wait(lock, [&] { return state->stopping || (job = OpenJob(state)) != nullptr; });
    if (state->stopping) return;
    ++job->joined;
    ++job->active;
    lock.unlock();
    (*job->task)();
    lock.lock();
    if (--job->active == 0) state->done.notify_all();
  }
}

void WorkerPool::StartThreads(State* state, size_t wanted) {
  wanted = std::min(wanted, kMaxThreads);
  while (state->threads.size() < wanted) {
    // A thread the system refuses is a helper fewer, never std::terminate:
    // the caller's own thread always works on its read.
    try {
      state->threads.emplace_back(&WorkerPool::Loop, state);
    } catch (const std::system_error&) {
      return;
    } catch (const std::bad_alloc&) {
      return;
    }
  }
}

void WorkerPool::Run(size_t helpers, const std::function<void()>& task) {
  State* const state = state_;
  Job job{&task, helpers};
  if (helpers > 0) {
    std::lock_guard<std::mutex> lock(state->mutex);
    StartThreads(state, helpers);
    if (!state->threads.empty()) {
      state->jobs.push_back(&job);
      for (size_t k = 0; k < helpers; ++k) state->wake.notify_one();
    }
  }
  task();
  if (helpers == 0) return;
  std::unique_lock<std::mutex> lock(state->mutex);
  job.open = false;
  state->jobs.erase(std::remove(state->jobs.begin(), state->jobs.end(), &job), state->jobs.end());
  state->done.wait(lock, [&] { return job.active == 0; });
}

void WorkerPool::LockForFork() { state_->mutex.lock(); }

void WorkerPool::UnlockInParent() { state_->mutex.unlock(); }

void WorkerPool::ResetInChild() {
  // The old state is left as it is, its mutex held and its threads unjoined:
  // destroying a std::thread that was never joined would end the process,
  // and joining one that does not exist here would never return.
  state_ = new State();
}

}  // namespace sdsl
