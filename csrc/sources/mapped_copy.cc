#include "sources/mapped_copy.h"

#include <setjmp.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "base/fork_guard.h"

namespace sdsl {
namespace {

// The copy a thread has in progress: where a fault inside [begin, end) jumps.
struct GuardedCopy {
  sigjmp_buf resume;
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
};

// Thread-locals the handler reads are initial-exec, so that reading one
// never allocates: a thread that never copied would otherwise have its block
// made inside a signal handler.
#if defined(__GNUC__)
#define SDSL_SIGNAL_SAFE_TLS __attribute__((tls_model("initial-exec")))
#else
#define SDSL_SIGNAL_SAFE_TLS
#endif

// Set only around the memcpy calls; the thread's own, so the handler, which
// runs on the faulting thread, finds exactly that thread's copy.
SDSL_SIGNAL_SAFE_TLS thread_local GuardedCopy* volatile t_copy = nullptr;

// Set while this thread's fault is with the handler that was there before
// ours. Should that handler come back to ours (a handler that recorded ours
// as its own predecessor), the fault has been round every handler once, and
// only the default action is left: without this, the two would call each
// other until the stack ran out.
SDSL_SIGNAL_SAFE_TLS thread_local volatile sig_atomic_t t_forwarding = 0;

std::mutex g_install_mutex;
bool g_installed_before = false;  // under g_install_mutex
// The handler ours replaced at its first install. Written once, before ours
// is installed, and never again: a handler running on another thread reads
// it whole.
struct sigaction g_first_previous;
// What a fault that is not ours goes to. Ours is installed again only over
// SIG_DFL or SIG_IGN, and then that is what was before it.
enum Previous : int { kFirstPrevious, kDefault, kIgnore };
std::atomic<int> g_previous{kFirstPrevious};

bool CallsNoOne(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) == 0 &&
         (action.sa_handler == SIG_DFL || action.sa_handler == SIG_IGN);
}

// Ends the process by the signal, as if no handler had been installed.
// SA_NODEFER left the signal unblocked, so it is delivered before raise
// returns.
void DieBy(int signal) {
  struct sigaction fallback;
  std::memset(&fallback, 0, sizeof(fallback));
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(signal, &fallback, nullptr);
  raise(signal);
}

void PassOn(int signal, siginfo_t* info, void* context) {
  const int previous = g_previous.load(std::memory_order_relaxed);
  const struct sigaction& first = g_first_previous;
  const bool ignore = previous == kIgnore || (previous == kFirstPrevious && CallsNoOne(first) &&
                                              first.sa_handler == SIG_IGN);
  if (ignore) {
    // A signal sent with kill or raise is ignored, as it would have been; a
    // fault cannot be: the kernel would end the process by it, and so do we.
    if (info != nullptr && info->si_code <= 0) return;
    DieBy(signal);
    return;
  }
  if (previous == kDefault || CallsNoOne(first) || t_forwarding != 0) {
    DieBy(signal);
    return;
  }
  t_forwarding = 1;
  if ((first.sa_flags & SA_SIGINFO) != 0) {
    first.sa_sigaction(signal, info, context);
  } else {
    first.sa_handler(signal);
  }
  // It returned: it dealt with the signal, or restored its own predecessor
  // (the default action, say), which the faulting access now meets again.
  t_forwarding = 0;
}

void OnSigbus(int signal, siginfo_t* info, void* context) {
  GuardedCopy* copy = t_copy;
  const uint8_t* address = static_cast<const uint8_t*>(info->si_addr);
  if (copy != nullptr && address >= copy->begin && address < copy->end) {
    t_copy = nullptr;
    // SA_NODEFER left SIGBUS unblocked, so no signal mask needs restoring.
    siglongjmp(copy->resume, 1);
  }
  PassOn(signal, info, context);
}

bool IsOurs(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) != 0 && action.sa_sigaction == OnSigbus;
}

// A forked child starts the bookkeeping afresh, as a process that never
// installed ours: its one thread is inside no handler, so recording another
// first previous handler races with nothing. DataLoader workers are forked,
// and each installs torch's SIGBUS handler (which reports the worker's
// death) before its first batch; a worker whose parent had read a batch
// found ours replaced and read every batch with pread, a quarter more CPU
// per batch of short records than copying out of the mappings.
class InstallState final : public ForkGuarded {
 public:
  InstallState() { StartGuarding(); }
  void LockForFork() override { g_install_mutex.lock(); }
  void UnlockInParent() override { g_install_mutex.unlock(); }
  void ResetInChild() override {
    g_installed_before = false;
    g_previous.store(kFirstPrevious, std::memory_order_relaxed);
    g_install_mutex.unlock();
  }
};

}  // namespace

bool GuardMappedCopies() {
  // Made once and never destroyed: it stays registered for every fork.
  static InstallState* const install_state = new InstallState();
  (void)install_state;
  std::lock_guard<std::mutex> lock(g_install_mutex);
  struct sigaction current;
  if (sigaction(SIGBUS, nullptr, &current) != 0) return false;
  if (IsOurs(current)) return true;
  // Installed over any other handler, ours would pass faults to it, and it
  // may pass them back to ours (faulthandler does: it recorded ours when it
  // was enabled after us).
  if (g_installed_before && !CallsNoOne(current)) return false;
  if (!g_installed_before) {
    g_first_previous = current;
  } else {
    g_previous.store(current.sa_handler == SIG_IGN ? kIgnore : kDefault, std::memory_order_relaxed);
  }
  struct sigaction ours;
  std::memset(&ours, 0, sizeof(ours));
  ours.sa_sigaction = OnSigbus;
  ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&ours.sa_mask);
  if (sigaction(SIGBUS, &ours, nullptr) != 0) return false;
  g_installed_before = true;
  return true;
}

bool CopyFromMapping(const uint8_t* source, uint64_t size, const RangeRequest* requests,
                     size_t count, const uint8_t* hashed, ChunkHasher* hasher) {
  GuardedCopy copy;
  copy.begin = source;
  copy.end = source + size;
  // Without saving the signal mask: sigsetjmp stays a few instructions.
  if (sigsetjmp(copy.resume, 0) != 0) return false;
  t_copy = &copy;
  // The copies must not begin before the guard is set, nor end after it is cleared.
  asm volatile("" ::: "memory");
  const uint8_t* from = source;
  for (size_t k = 0; k < count; ++k) {
    // The hasher's state lives in the caller's frame: a fault that jumps out
    // of it mid-step leaves a hash that is never finished, only dropped.
    if (hashed != nullptr && hashed[k] != 0) {
      hasher->CopyAndAppend(requests[k].dst, from, static_cast<size_t>(requests[k].size));
    } else {
      std::memcpy(requests[k].dst, from, static_cast<size_t>(requests[k].size));
    }
    from += requests[k].size;
  }
  asm volatile("" ::: "memory");
  t_copy = nullptr;
  return true;
}

}  // namespace sdsl
