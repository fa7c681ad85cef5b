#include "mapped_copy.h"

#include <setjmp.h>
#include <signal.h>

#include <cstring>
#include <mutex>

namespace sdsl {
namespace {

// The copy a thread has in progress: where a fault inside [begin, end) jumps.
struct GuardedCopy {
  sigjmp_buf resume;
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
};

// Set only around the memcpy calls; the thread's own, so the handler, which
// runs on the faulting thread, finds exactly that thread's copy. Initial-exec
// so that reading it in the handler never allocates: a thread that never
// copied would otherwise have its block made inside a signal handler.
#if defined(__GNUC__)
__attribute__((tls_model("initial-exec")))
#endif
thread_local GuardedCopy* volatile t_copy = nullptr;

std::mutex g_install_mutex;
struct sigaction g_previous;

void PassOn(int signal, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0) {
    if (g_previous.sa_sigaction != nullptr) g_previous.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous.sa_handler == SIG_DFL || g_previous.sa_handler == SIG_IGN) {
    // Returning re-runs the faulting access, which now meets the default
    // action: the process ends as it would have without this handler.
    struct sigaction fallback;
    std::memset(&fallback, 0, sizeof(fallback));
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(signal, &fallback, nullptr);
    return;
  }
  g_previous.sa_handler(signal);
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

}  // namespace

bool GuardMappedCopies() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  struct sigaction current;
  if (sigaction(SIGBUS, nullptr, &current) != 0) return false;
  if ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == OnSigbus) return true;
  struct sigaction ours;
  std::memset(&ours, 0, sizeof(ours));
  ours.sa_sigaction = OnSigbus;
  ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&ours.sa_mask);
  g_previous = current;
  return sigaction(SIGBUS, &ours, nullptr) == 0;
}

bool CopyFromMapping(const uint8_t* source, uint64_t size, const RangeRequest* requests,
                     size_t count) {
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
    std::memcpy(requests[k].dst, from, static_cast<size_t>(requests[k].size));
    from += requests[k].size;
  }
  asm volatile("" ::: "memory");
  t_copy = nullptr;
  return true;
}

}  // namespace sdsl
