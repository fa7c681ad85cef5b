#include "base/fork_guard.h"

#include <pthread.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace sdsl {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<ForkGuarded*> objects;
};

// Never destroyed: a fork or an object's destructor may run during static
// destruction.
Registry& registry() {
  static Registry* const instance = new Registry();
  return *instance;
}

void Prepare() {
  registry().mutex.lock();
  for (ForkGuarded* object : registry().objects) object->LockForFork();
}

void Parent() {
  auto& objects = registry().objects;
  for (auto it = objects.rbegin(); it != objects.rend(); ++it) (*it)->UnlockInParent();
  registry().mutex.unlock();
}

void Child() {
  for (ForkGuarded* object : registry().objects) object->ResetInChild();
  registry().mutex.unlock();
}

}  // namespace

void ForkGuarded::StartGuarding() {
  static std::once_flag handlers;
  std::call_once(handlers, [] { ::pthread_atfork(&Prepare, &Parent, &Child); });
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().objects.push_back(this);
  guarded_ = true;
}

void ForkGuarded::StopGuarding() {
  if (!guarded_) return;
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto& objects = registry().objects;
  objects.erase(std::remove(objects.begin(), objects.end(), this), objects.end());
  guarded_ = false;
}

}  // namespace sdsl
