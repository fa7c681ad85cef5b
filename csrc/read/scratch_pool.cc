#include "read/scratch_pool.h"

#include <algorithm>
#include <new>

namespace sdsl {
namespace {

// A buffer larger than this is freed when a read finishes rather than kept.
constexpr size_t kKeptBufferBytes = 8 << 20;
// Idle scratch past this many bytes in all gives up its buffers.
constexpr size_t kKeptPoolBytes = 32 << 20;
constexpr size_t kPooledScratch = 16;

template <typename Visit>
void ForEachBuffer(WorkerScratch& scratch, Visit visit) {
  RecordScratch& record = scratch.record_scratch;
  for (std::vector<uint8_t>* buffer :
       {&scratch.file_bytes, &scratch.run_block_headers, &scratch.window_bytes, &scratch.sizes,
        &scratch.values, &scratch.gathered, &scratch.discard, &scratch.record, &record.header,
        &record.parsed_from, &record.descriptor}) {
    visit(*buffer);
  }
}

}  // namespace

WorkerScratch::WorkerScratch() : zstd(ZSTD_createDCtx()) {
  if (zstd == nullptr) throw std::bad_alloc();
}
WorkerScratch::~WorkerScratch() { ZSTD_freeDCtx(zstd); }

size_t WorkerScratch::HeldBytes() const {
  size_t bytes = requests.capacity() * sizeof(RangeRequest);
  ForEachBuffer(const_cast<WorkerScratch&>(*this),
                [&](std::vector<uint8_t>& buffer) { bytes += buffer.capacity(); });
  return bytes;
}

void WorkerScratch::FreeBuffersOver(size_t limit) {
  ForEachBuffer(*this, [&](std::vector<uint8_t>& buffer) {
    if (buffer.capacity() > limit) std::vector<uint8_t>().swap(buffer);
  });
  // The cached header is gone or may be: parse the next one afresh.
  record_scratch.parsed_valid = false;
  if (limit == 0) {
    record_scratch.earlier_headers.clear();
    parsed = SimpleChunk();
    chunk = Chunk();
    decoded = Pieces();
  }
}

std::unique_ptr<WorkerScratch> ScratchPool::Acquire() {
  const std::thread::id self = std::this_thread::get_id();
  std::unique_ptr<WorkerScratch> scratch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      auto own = std::find_if(idle_.rbegin(), idle_.rend(),
                              [&](const auto& idle) { return idle->last_user == self; });
      if (own != idle_.rend()) std::swap(*own, idle_.back());
      scratch = std::move(idle_.back());
      idle_.pop_back();
      kept_bytes_ -= scratch->HeldBytes();
    }
  }
  if (!scratch) scratch = std::make_unique<WorkerScratch>();
  scratch->max_materialized = max_materialized();
  scratch->last_user = self;
  return scratch;
}

void ScratchPool::Release(std::unique_ptr<WorkerScratch> scratch) {
  if (scratch->HeldBytes() > kKeptBufferBytes) scratch->FreeBuffersOver(kKeptBufferBytes);
  std::unique_lock<std::mutex> lock(mutex_);
  if (idle_.size() >= kPooledScratch) return;  // freed below, after the lock
  size_t bytes = scratch->HeldBytes();
  if (kept_bytes_ + bytes > kKeptPoolBytes) {
    scratch->FreeBuffersOver(0);
    bytes = scratch->HeldBytes();
  }
  kept_bytes_ += bytes;
  idle_.push_back(std::move(scratch));
}

size_t ScratchPool::kept_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_bytes_;
}

}  // namespace sdsl
