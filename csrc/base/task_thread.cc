#include "base/task_thread.h"

#include <future>
#include <memory>
#include <new>
#include <system_error>
#include <utility>

namespace sdsl {

TaskThread::TaskThread(size_t max_pending) : max_pending_(max_pending), state_(new State()) {
  StartGuarding();
}

TaskThread::~TaskThread() {
  StopGuarding();
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
  delete state_;
}

void TaskThread::Loop(State* state) {
  std::unique_lock<std::mutex> lock(state->mutex);
  for (;;) {
    state->wake.wait(lock, [&] { return state->stopping || !state->tasks.empty(); });
    if (state->tasks.empty()) return;  // stopping, and nothing left to run
    std::function<void()> task = std::move(state->tasks.front());
    state->tasks.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

bool TaskThread::Post(std::function<void()> task) {
  State* const state = state_;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    if (state->tasks.size() >= max_pending_) return false;
    if (!state->thread.joinable()) {
      try {
        state->thread = std::thread(&TaskThread::Loop, state);
      } catch (const std::system_error&) {
        return false;
      } catch (const std::bad_alloc&) {
        return false;
      }
    }
    state->tasks.push_back(std::move(task));
  }
  state->wake.notify_one();
  return true;
}

bool TaskThread::WaitForEarlier(std::chrono::steady_clock::time_point deadline) {
  auto marker = std::make_shared<std::promise<void>>();
  std::future<void> reached = marker->get_future();
  if (!Post([marker] { marker->set_value(); })) return false;
  return reached.wait_until(deadline) == std::future_status::ready;
}

std::chrono::steady_clock::time_point TaskThread::DeadlineAfter(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(seconds));
}

void TaskThread::LockForFork() { state_->mutex.lock(); }

void TaskThread::UnlockInParent() { state_->mutex.unlock(); }

void TaskThread::ResetInChild() {
  // The old state is left as it is, its mutex held and its thread unjoined:
  // destroying a std::thread that was never joined would end the process,
  // and joining one that does not exist here would never return.
  state_ = new State();
}

}  // namespace sdsl
