// What a fork must not carry into the child half-used: a lock another thread
// held at that instant, worker threads that exist only in the parent.
//
// Objects with such state register here. Just before fork() (pthread_atfork's
// prepare step) every registered object takes its locks, so that no other
// thread is inside one of them while the process is copied; after it, the
// parent lets go and the child resets the object (threads forgotten, locks
// free). The locks guard in-memory bookkeeping only and are never held across
// I/O or a call into Python, so the fork waits microseconds at most.
#ifndef SDS_LOADER_FORK_GUARD_H_
#define SDS_LOADER_FORK_GUARD_H_

namespace sdsl {

class ForkGuarded {
 public:
  ForkGuarded() = default;
  virtual ~ForkGuarded() { StopGuarding(); }
  ForkGuarded(const ForkGuarded&) = delete;
  ForkGuarded& operator=(const ForkGuarded&) = delete;

  virtual void LockForFork() = 0;
  virtual void UnlockInParent() = 0;
  // Runs in the child with the locks of LockForFork held by this thread.
  virtual void ResetInChild() = 0;

 protected:
  // Called last in the derived constructor and first in its destructor, so
  // that a fork never meets a half-built or half-destroyed object.
  void StartGuarding();
  void StopGuarding();

 private:
  bool guarded_ = false;
};

}  // namespace sdsl

#endif  // SDS_LOADER_FORK_GUARD_H_
