#include "base/stage_clock.h"

#include <atomic>
#include <chrono>
#include <thread>

namespace sdsl {
namespace {

struct Reading {
  uint64_t ticks;
  std::chrono::steady_clock::time_point at;
};

Reading Now() { return Reading{StageTicks(), std::chrono::steady_clock::now()}; }

// Taken when the library is loaded: the longer the interval to a later
// reading, the finer the calibration.
const Reading kLoaded = Now();

// Settled once the interval reaches kSettled: no later reading improves it much.
constexpr std::chrono::seconds kSettled{1};
constexpr std::chrono::milliseconds kShortest{10};
std::atomic<double> settled{0.0};

}  // namespace

const char* StageName(size_t stage) {
  static constexpr const char* kNames[kStages] = {"plan",  "wait", "hash",   "decompress",
                                                  "parse", "copy", "augment"};
  return stage < kStages ? kNames[stage] : "";
}

double SecondsPerTick() {
  const double known = settled.load(std::memory_order_relaxed);
  if (known > 0) return known;
  Reading now = Now();
  while (now.at - kLoaded.at < kShortest) {
    std::this_thread::sleep_for(kShortest - (now.at - kLoaded.at));
    now = Now();
  }
  const double seconds = std::chrono::duration<double>(now.at - kLoaded.at).count();
  const double ticks = static_cast<double>(now.ticks - kLoaded.ticks);
  const double per_tick = ticks > 0 ? seconds / ticks : 0.0;
  if (now.at - kLoaded.at >= kSettled) settled.store(per_tick, std::memory_order_relaxed);
  return per_tick;
}

}  // namespace sdsl
