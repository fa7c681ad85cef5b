// A mutex that, finding itself taken, tries again for a moment before it
// sleeps. For locks held a few dozen nanoseconds (a lookup in a map) that
// every decoding thread takes run after run: a plain mutex puts the second
// thread to sleep in the kernel, and waking it costs tens of microseconds,
// the time of a few short records. Fork handlers lock and unlock it like the
// std::mutex it wraps (a child's thread may unlock what the parent locked).
#ifndef SDS_LOADER_SPINNING_MUTEX_H_
#define SDS_LOADER_SPINNING_MUTEX_H_

#include <mutex>

namespace sdsl {

class SpinningMutex {
 public:
  void lock() {
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      if (mutex_.try_lock()) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    mutex_.lock();
  }
  bool try_lock() { return mutex_.try_lock(); }
  void unlock() { mutex_.unlock(); }

 private:
  // About a microsecond of trying: many times the lock's usual hold.
  static constexpr int kAttempts = 64;
  std::mutex mutex_;
};

}  // namespace sdsl

#endif  // SDS_LOADER_SPINNING_MUTEX_H_
