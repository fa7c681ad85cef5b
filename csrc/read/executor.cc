#include "read/executor.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "base/reader_error.h"
#include "container/riegeli_layout.h"
#include "read/run_decoder.h"
#include "read/window_read.h"

namespace sdsl {
namespace {

uint64_t RunBytes(const Run& run) { return run.end - run.begin; }

// Compressed bytes count several times over as work: zstd decodes 64 KiB
// records at about a quarter of the speed of hash + copy.
constexpr uint64_t kCompressedWeight = 4;

size_t HelpersWorthWaking(const std::vector<Run>& runs, size_t wanted, uint64_t per_helper) {
  if (per_helper == 0) return wanted;
  uint64_t work = 0;
  for (const Run& run : runs) {
    work += RunBytes(run) * (run.written_uncompressed ? 1 : kCompressedWeight);
  }
  return static_cast<size_t>(std::min<uint64_t>(wanted, work / per_helper));
}

// Consecutive runs fetched by one call: [first, last).
struct Slice {
  size_t first = 0, last = 0;
};

// Without gathering, each slice holds 1/(kGuidedShare * workers) of the runs
// not yet sliced: large slices first, then smaller and smaller, down to one
// run, so that the workers finish within about a run of each other (with
// equal slices, one that started a last large slice kept the others waiting
// for it), and few enough slices that the workers do not contend for the
// next slice record after record.
constexpr size_t kGuidedShare = 2;
// A slice's runs are fetched before any is decoded: at most this many bytes,
// so that they are still in the core's cache when decoded.
constexpr uint64_t kMaxSliceBytes = 256 << 10;

// Consecutive runs cut into slices of at most `per_slice` runs and
// `max_bytes` bytes (a run alone may be larger). Without gathering: slices
// of at most kMaxSliceBytes, shrinking as kGuidedShare says (all in one for
// a lone worker). When the source gathers: as many runs as fit in its byte
// cap, and no more than an even share per worker, so that every worker gets
// a slice.
std::vector<Slice> SliceRuns(const std::vector<Run>& runs, size_t workers, uint64_t gather_bytes) {
  size_t per_slice = (runs.size() + workers - 1) / workers;
  uint64_t max_bytes = gather_bytes;
  if (gather_bytes == 0) {
    per_slice = runs.size();
    max_bytes = kMaxSliceBytes;
  }
  std::vector<Slice> slices;
  for (size_t r = 0; r < runs.size();) {
    if (gather_bytes == 0 && workers > 1) {
      per_slice = std::max<size_t>(1, (runs.size() - r) / (kGuidedShare * workers));
    }
    Slice slice{r, r + 1};
    uint64_t bytes = RunBytes(runs[r]);
    while (slice.last < runs.size() && slice.last - slice.first < per_slice &&
           bytes + RunBytes(runs[slice.last]) <= max_bytes) {
      bytes += RunBytes(runs[slice.last]);
      ++slice.last;
    }
    slices.push_back(slice);
    r = slice.last;
  }
  // Every run in exactly one slice, in order: each is decoded once.
  assert(slices.empty() || (slices.front().first == 0 && slices.back().last == runs.size()));
  return slices;
}

// Whether `run` fetches only the bytes it needs, and is not fetched whole: a
// window of a large record, or a warm local run whose tensors are read
// straight into rows. Reading a chunk straight into rows takes two reads of
// it, one after the other: cheap from local files in the page cache; from a
// disk, or from anywhere else, the chunk is better fetched with the batch's
// other runs, many reads in flight (`gathering`), and its tensors copied
// from there.
bool ReadsItself(const Run& run, const Batch& batch, bool local, bool gathering) {
  return ReadsWindowsOnly(run, *batch.layout, batch.verify) ||
         (local && !gathering && run.into_rows);
}

[[noreturn]] void FetchFailed(const Run& run, const Batch& batch, const ReaderError& error) {
  RethrowForRecord(run, run.chunks.front().records.front(), batch.ordinals, error);
}

// One thread's stage times in one batch: its clock, and what the runs timed
// stage by stage took, to share out the time of the runs that were not.
struct ThreadStages {
  StageClock clock;
  StageTimes sampled;
  uint32_t sample_every = 1;
  uint32_t runs_seen = 0;

  // The thread's time by stage: the untimed runs' (what kCopy holds beyond
  // the timed runs' share of it) in the timed runs' proportions.
  StageTimes Finish() {
    clock.Charge();
    StageTimes times = clock.times();
    const uint64_t timed = sampled.Sum();
    if (sample_every <= 1 || timed == 0 || times[Stage::kCopy] <= sampled[Stage::kCopy]) {
      return times;
    }
    const uint64_t rest = times[Stage::kCopy] - sampled[Stage::kCopy];
    times[Stage::kCopy] = sampled[Stage::kCopy];
    uint64_t shared = 0;
    for (size_t s = 0; s < kStages; ++s) {
      const uint64_t share =
          static_cast<uint64_t>(static_cast<unsigned __int128>(rest) * sampled.ticks[s] / timed);
      times.ticks[s] += share;
      shared += share;
    }
    times[Stage::kCopy] += rest - shared;  // what rounding left
    return times;
  }
};

// Decodes one run, timed stage by stage when its turn comes.
void DecodeTimedRun(const Run& run, const FileRange* fetched, const Batch& batch,
                    WorkerScratch* scratch, ThreadStages* stages) {
  if (stages == nullptr || stages->runs_seen++ % stages->sample_every != 0) {
    DecodeRun(run, fetched, *batch.layout, batch.ordinals, batch.verify, batch.needs_fallback,
              scratch);
    return;
  }
  // With every run timed nothing is shared out, and what a run took need not be told apart.
  const bool apart = stages->sample_every > 1;
  StageTimes before;
  if (apart) {
    stages->clock.Charge();
    before = stages->clock.times();
  }
  scratch->clock = &stages->clock;
  scratch->record_scratch.clock = &stages->clock;
  struct Untime {
    WorkerScratch* scratch;
    ~Untime() { scratch->clock = scratch->record_scratch.clock = nullptr; }
  } untime{scratch};
  DecodeRun(run, fetched, *batch.layout, batch.ordinals, batch.verify, batch.needs_fallback,
            scratch);
  if (!apart) return;
  stages->clock.Charge();
  for (size_t s = 0; s < kStages; ++s) {
    stages->sampled.ticks[s] += stages->clock.times().ticks[s] - before.ticks[s];
  }
}

void FetchAndDecode(const std::vector<Run>& runs, const Slice& slice, const FetchPlan& plan,
                    const Batch& batch, ShardSource& source, WorkerScratch* scratch,
                    ThreadStages* stages) {
  // A local source reads back-to-back requests into several buffers as one
  // range (preadv): each run is fetched with its block headers set aside
  // (FileRange::block_headers), so that a chunk's data lies in one piece and
  // is never gathered again before decoding.
  const bool local = source.ReadsLocalFiles();
  // What each run of the slice takes in scratch: nothing for a run that
  // reads itself; its bytes without their block headers where the source
  // allows it and the run does not begin inside one (only a damaged footer
  // points there); else its bytes as they lie.
  struct RunFetch {
    bool fetched = false;
    bool split = false;
    StrippedLayout layout;
    FileRange bytes;  // where it lands, once requested
  };
  const size_t count = slice.last - slice.first;
  std::vector<RunFetch> fetches(count);
  uint64_t data_bytes = 0, header_bytes = 0;
  for (size_t r = slice.first; r < slice.last; ++r) {
    const Run& run = runs[r];
    RunFetch& fetch = fetches[r - slice.first];
    fetch.fetched = !ReadsItself(run, batch, local, plan.gather_bytes > 0);
    if (!fetch.fetched) continue;
    fetch.split = local && !BeginsInsideBlockHeader(run.begin);
    fetch.layout = fetch.split ? LayoutWithoutBlockHeaders(run.begin, run.end)
                               : StrippedLayout{RunBytes(run), 0};
    data_bytes += fetch.layout.data_bytes;
    header_bytes += fetch.layout.header_bytes;
  }
  GrowTo(&scratch->file_bytes, data_bytes);
  GrowTo(&scratch->run_block_headers, header_bytes);
  std::vector<RangeRequest>& requests = scratch->requests;
  requests.clear();
  // (run, its first request), kept in scratch: a slice is often one run of
  // one short record, and a vector of its own cost a malloc a slice.
  std::vector<std::pair<size_t, size_t>>& requested = scratch->requested_runs;
  requested.clear();
  uint8_t* data = scratch->file_bytes.data();
  uint8_t* headers = scratch->run_block_headers.data();
  for (size_t r = slice.first; r < slice.last; ++r) {
    const Run& run = runs[r];
    RunFetch& fetch = fetches[r - slice.first];
    if (!fetch.fetched) continue;
    try {
      run.shard->file->CheckRange(run.begin, RunBytes(run));
    } catch (const ReaderError& error) {
      FetchFailed(run, batch, error);
    }
    const size_t file = run.file;
    requested.emplace_back(r, requests.size());
    fetch.bytes = FileRange{data, run.begin, RunBytes(run)};
    if (fetch.split) {
      fetch.bytes.block_headers = headers;
      AppendSplitReads(file, run.begin, run.end, data, headers, &scratch->read_pieces, &requests);
    } else {
      requests.push_back(RangeRequest{file, run.begin, RunBytes(run), data});
    }
    data += fetch.layout.data_bytes;
    headers += fetch.layout.header_bytes;
  }
  // Each run's bytes landed inside the scratch sized for the slice above.
  assert(data == scratch->file_bytes.data() + data_bytes);
  assert(headers == scratch->run_block_headers.data() + header_bytes);
  try {
    const StageScope waiting(stages != nullptr ? &stages->clock : nullptr, Stage::kWait);
    if (!requests.empty()) source.Fetch(requests.data(), requests.size(), plan);
  } catch (const ReaderError& error) {
    if (requested.size() == 1) FetchFailed(runs[requested[0].first], batch, error);
    // Fetch again one run at a time, to name the record the failure reached.
    for (size_t k = 0; k < requested.size(); ++k) {
      const size_t first = requested[k].second;
      const size_t last = k + 1 < requested.size() ? requested[k + 1].second : requests.size();
      try {
        source.Fetch(&requests[first], last - first, plan);
      } catch (const ReaderError& again) {
        FetchFailed(runs[requested[k].first], batch, again);
      }
    }
  }
  for (size_t r = slice.first; r < slice.last; ++r) {
    const RunFetch& fetch = fetches[r - slice.first];
    DecodeTimedRun(runs[r], fetch.fetched ? &fetch.bytes : nullptr, batch, scratch, stages);
  }
}

}  // namespace

size_t ExecuteRuns(const std::vector<Run>& runs, const Batch& batch, ShardSource& source,
                   ScratchPool& scratch_pool, WorkerPool& workers, uint64_t work_per_helper,
                   StageTotals* stage_totals, uint32_t sample_every) {
  if (runs.empty()) return 0;
  if (sample_every == 0) stage_totals = nullptr;
  StageClock planning;
  if (stage_totals != nullptr) planning.Start(Stage::kPlan);
  const size_t parallel = std::min<size_t>(std::max(batch.threads, 1), runs.size());
  std::vector<RangeRequest> ranges;
  ranges.reserve(runs.size());
  for (const Run& run : runs) {
    ranges.push_back(RangeRequest{run.file, run.begin, RunBytes(run), nullptr});
  }
  const FetchPlan plan = source.PlanBatch(ranges.data(), ranges.size());
  // A cold or remote batch waits on its reads, not the CPU: every helper
  // keeps more of them in flight, however little decoding there is. A warm
  // one wakes only helpers that have enough to do, and is sliced for them.
  size_t helpers = parallel - 1;
  if (plan.gather_bytes == 0) helpers = HelpersWorthWaking(runs, helpers, work_per_helper);
  const std::vector<Slice> slices =
      SliceRuns(runs, plan.gather_bytes == 0 ? helpers + 1 : parallel, plan.gather_bytes);
  helpers = std::min(helpers, slices.size() - 1);
  assert(helpers < parallel);
  std::atomic<size_t> next_slice{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<size_t> helped_runs{0};
  if (stage_totals != nullptr) {
    planning.Charge();
    stage_totals->Add(planning.times());
  }
  const std::function<void()> worker = [&]() {
    ThreadStages thread_stages;
    ThreadStages* stages = stage_totals != nullptr ? &thread_stages : nullptr;
    if (stages != nullptr) {
      thread_stages.sample_every = sample_every;
      thread_stages.clock.Start(Stage::kCopy);
    }
    std::unique_ptr<WorkerScratch> scratch;
    const bool helper = std::this_thread::get_id() != caller;
    size_t helped = 0;
    try {
      scratch = scratch_pool.Acquire();
      // Runs that read themselves fetch through the scratch: they follow this batch's plan.
      scratch->fetch_plan = plan;
      for (size_t s = next_slice++; s < slices.size() && !failed; s = next_slice++) {
        FetchAndDecode(runs, slices[s], plan, batch, source, scratch.get(), stages);
        if (helper) helped += slices[s].last - slices[s].first;
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
      failed = true;
    }
    helped_runs += helped;
    if (scratch) {
      scratch->fetch_plan = FetchPlan{};
      scratch_pool.Release(std::move(scratch));
    }
    if (stages != nullptr) stage_totals->Add(thread_stages.Finish());
  };
  workers.Run(helpers, worker);
  if (first_error) std::rethrow_exception(first_error);
  return helped_runs;
}

}  // namespace sdsl
