// Where a read's threads spend their time, stage by stage. Each thread keeps
// a clock of its own, read once at every change of stage (the TSC: a few
// nanoseconds), so that no counter is shared on the hot path; a batch's
// clocks are summed into the reader's totals once, when its threads finish.
#ifndef SDS_LOADER_STAGE_CLOCK_H_
#define SDS_LOADER_STAGE_CLOCK_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>

#if defined(__x86_64__)
#include <x86intrin.h>
#else
#include <chrono>
#endif

namespace sdsl {

// What a thread of a read is doing. kCopy is also where time goes that no
// narrower stage claims (the walk from record to record around the copies).
// kAugment: a row's augmentation chain, run once the row is decoded.
enum class Stage : uint8_t { kPlan, kWait, kHash, kDecompress, kParse, kCopy, kAugment };
constexpr size_t kStages = 7;

// "plan", "wait", ...: the names Python sees.
const char* StageName(size_t stage);

// A timestamp: the TSC on x86-64 (invariant wherever the kernel keeps time
// with it), else the steady clock's nanoseconds.
inline uint64_t StageTicks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

// How long a tick lasts, measured against the steady clock since the
// library was loaded (precise to a part in a thousand once it has lived a
// second; a first call within 10 ms of loading waits out the rest).
double SecondsPerTick();

struct StageTimes {
  std::array<uint64_t, kStages> ticks{};

  uint64_t& operator[](Stage stage) { return ticks[static_cast<size_t>(stage)]; }
  uint64_t operator[](Stage stage) const { return ticks[static_cast<size_t>(stage)]; }
  void Add(const StageTimes& other) {
    for (size_t s = 0; s < kStages; ++s) ticks[s] += other.ticks[s];
  }
  uint64_t Sum() const {
    uint64_t sum = 0;
    for (uint64_t t : ticks) sum += t;
    return sum;
  }
};

// One thread's clock: the time between two changes goes to the stage that was current.
class StageClock {
 public:
  void Start(Stage stage) {
    stage_ = stage;
    since_ = StageTicks();
  }
  // Charges the time so far to the current stage and makes `next` current;
  // returns the stage it replaced. No read of the clock when nothing changes.
  Stage Switch(Stage next) {
    if (next == stage_) return next;
    Charge();
    const Stage previous = stage_;
    stage_ = next;
    return previous;
  }
  // Charges the time so far to the current stage, which stays current.
  void Charge() {
    const uint64_t now = StageTicks();
    // A thread moved to a core whose counter lags: a few ticks lost, not 2^64 gained.
    if (now > since_) times_[stage_] += now - since_;
    since_ = now;
  }
  const StageTimes& times() const { return times_; }

 private:
  Stage stage_ = Stage::kCopy;
  uint64_t since_ = 0;
  StageTimes times_;
};

// A stage for the scope's lifetime, then back to the one before; nothing
// without a clock (a run not timed, or timing off).
class StageScope {
 public:
  StageScope(StageClock* clock, Stage stage)
      : clock_(clock), previous_(clock != nullptr ? clock->Switch(stage) : stage) {}
  ~StageScope() {
    if (clock_ != nullptr) clock_->Switch(previous_);
  }
  StageScope(const StageScope&) = delete;
  StageScope& operator=(const StageScope&) = delete;

 private:
  StageClock* const clock_;
  const Stage previous_;
};

// A reader's stage times and the wall time of its reads, summed from its
// batches' clocks until taken.
class StageTotals {
 public:
  void Add(const StageTimes& times) {
    std::lock_guard<std::mutex> lock(mutex_);
    times_.Add(times);
  }
  void AddWall(uint64_t ticks) {
    std::lock_guard<std::mutex> lock(mutex_);
    wall_ += ticks;
  }
  // What was added since the last Take, and the reads' wall ticks in `wall`.
  StageTimes Take(uint64_t* wall) {
    std::lock_guard<std::mutex> lock(mutex_);
    const StageTimes taken = times_;
    *wall = wall_;
    times_ = StageTimes{};
    wall_ = 0;
    return taken;
  }

 private:
  std::mutex mutex_;
  StageTimes times_;
  uint64_t wall_ = 0;
};

}  // namespace sdsl

#endif  // SDS_LOADER_STAGE_CLOCK_H_
