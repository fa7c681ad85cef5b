#include "scratch_pool.h"

#include <new>

namespace sdsl {
namespace {

// Scratch larger than this is freed when a read finishes rather than kept.
constexpr size_t kKeptScratchBytes = 16 << 20;
constexpr size_t kPooledScratch = 16;

}  // namespace

WorkerScratch::WorkerScratch() : zstd(ZSTD_createDCtx()) {
  if (zstd == nullptr) throw std::bad_alloc();
}
WorkerScratch::~WorkerScratch() { ZSTD_freeDCtx(zstd); }

std::unique_ptr<WorkerScratch> ScratchPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      auto scratch = std::move(idle_.back());
      idle_.pop_back();
      return scratch;
    }
  }
  return std::make_unique<WorkerScratch>();
}

void ScratchPool::Release(std::unique_ptr<WorkerScratch> scratch) {
  for (std::vector<uint8_t>* buffer : {&scratch->file_bytes, &scratch->window_bytes, &scratch->values,
                                        &scratch->record}) {
    if (buffer->capacity() > kKeptScratchBytes) std::vector<uint8_t>().swap(*buffer);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (idle_.size() < kPooledScratch) idle_.push_back(std::move(scratch));
}

}  // namespace sdsl
