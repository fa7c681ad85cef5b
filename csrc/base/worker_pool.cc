#include "base/worker_pool.h"

#include <algorithm>
#include <chrono>
#include <new>
#include <system_error>

namespace sdsl {
namespace {

// More helpers than this are never started, whatever a read asks for.
constexpr size_t kMaxThreads = 256;

// How long a helper that finished its part of a read, and a caller waiting
// for its helpers, watch for what they wait on before sleeping. Reads come
// back to back in a training loop, and waking a sleeping thread costs tens
// of microseconds on a VM, both ways, every batch: a fifth of a short-record
// batch's time at two threads. Spinning this long after each read costs
// little when none follows.
constexpr std::chrono::microseconds kSpin{200};

template <typename Done>
bool SpinUntil(const Done& done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  do {
    for (int k = 0; k < 64; ++k) {
      if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  } while (std::chrono::steady_clock::now() < until);
  return done();
}

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
    Job* job = OpenJob(state);
    if (job == nullptr && !state->stopping) {
      const uint64_t seen = state->posted.load(std::memory_order_acquire);
      lock.unlock();
      SpinUntil([&] { return state->posted.load(std::memory_order_acquire) != seen; });
      lock.lock();
    }
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
      state->posted.fetch_add(1, std::memory_order_release);
      for (size_t k = 0; k < helpers; ++k) state->wake.notify_one();
    }
  }
  task();
  if (helpers == 0) return;
  std::unique_lock<std::mutex> lock(state->mutex);
  job.open = false;
  state->jobs.erase(std::remove(state->jobs.begin(), state->jobs.end(), &job), state->jobs.end());
  if (job.active == 0) return;
  lock.unlock();
  // Helpers still at work: no more join (the job is closed), and each leaves
  // it under the mutex, after which it touches only the pool's state.
  if (SpinUntil([&] { return job.active.load(std::memory_order_acquire) == 0; })) {
    lock.lock();  // the helper that left last has released the mutex
    return;
  }
  lock.lock();
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
