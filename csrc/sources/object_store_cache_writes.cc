// What ObjectStoreSource keeps in the node cache: each shard's object,
// fetched gaps written off the reads' path, copies dropped when they fail.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <utility>

#include "base/reader_error.h"
#include "sources/object_store_parts.h"
#include "sources/store_rules.h"

namespace sdsl {

std::shared_ptr<NodeCache::Object> ObjectStoreSource::CachedObject(size_t file) {
  Shard shard;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shard = shards_.at(file);
    if (cache_ == nullptr || !shard.known || shard.version.empty()) return nullptr;
    if (cached_version_[file] == shard.version) return cached_[file];
  }
  // Opened outside the lock: it reads the object's directory.
  std::shared_ptr<NodeCache::Object> object =
      cache_->Open(settings_.urls[file], shard.version, shard.size);
  std::lock_guard<std::mutex> lock(mutex_);
  cached_[file] = object;
  cached_version_[file] = shard.version;
  return object;
}

void ObjectStoreSource::StoreGaps(std::vector<std::pair<size_t, NodeCache::Gap>> gaps) {
  // Runs of back-to-back gaps (a chunk's header and payload go to different
  // buffers) become one entry, not one per buffer. Their bytes are copied
  // (the buffers are the caller's) and written on the writer thread, off
  // the read's path; the claims are let go once they are written, so that a
  // process waiting for them finds them.
  struct Run {
    size_t file = 0;
    uint64_t offset = 0;
    std::vector<uint8_t> data;
  };
  auto runs = std::make_shared<std::vector<Run>>();
  size_t k = 0;
  while (k < gaps.size()) {
    size_t end = k + 1;
    uint64_t size = gaps[k].second.size;
    while (end < gaps.size() && gaps[end].first == gaps[k].first &&
           gaps[end].second.offset == gaps[k].second.offset + size && size < settings_.part_bytes) {
      size += gaps[end].second.size;
      ++end;
    }
    Run run;
    run.file = gaps[k].first;
    run.offset = gaps[k].second.offset;
    run.data.resize(size);
    uint64_t at = 0;
    for (size_t j = k; j < end; ++j) {
      std::memcpy(run.data.data() + at, gaps[j].second.dst, gaps[j].second.size);
      at += gaps[j].second.size;
    }
    runs->push_back(std::move(run));
    k = end;
  }
  auto claims = std::make_shared<std::vector<std::pair<size_t, NodeCache::Gap>>>(std::move(gaps));
  auto store = [this, runs, claims]() {
    ClaimRelease release(cache_.get(), claims.get());
    for (const Run& run : *runs) {
      const std::shared_ptr<NodeCache::Object> object = CachedObject(run.file);
      if (object != nullptr) cache_->Store(*object, run.offset, run.data.size(), run.data.data());
    }
  };
  bool posted = false;
  try {
    posted = writer_->Post(store);
  } catch (...) {
    posted = false;
  }
  // A writer that falls behind slows the reads down rather than the
  // queue growing: the entries are written here.
  if (!posted) store();
}

bool ObjectStoreSource::DropCopy(size_t file, uint64_t offset, uint64_t size) {
  if (file >= shards_.size()) return false;
  {
    // The shard's tail (or head) holding any of them goes whole: it came in
    // one answer, and is fetched again, checked, when the shard is next read.
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = tails_.find(file);
    if (found != tails_.end() &&
        (offset < found->second->head.size() || offset + size > found->second->start)) {
      tails_.erase(found);
      tail_order_.erase(std::remove(tail_order_.begin(), tail_order_.end(), file),
                        tail_order_.end());
    }
  }
  ahead_.Forget(file, offset, size);
  if (cache_ == nullptr) return false;
  // The bytes this process fetched may be on their way into the cache: once
  // written, they are dropped with the rest, so nothing that failed stays.
  WaitForWrites(settings_.http.stall_timeout_s);
  const std::shared_ptr<NodeCache::Object> object = CachedObject(file);
  return object != nullptr && cache_->Forget(*object, offset, size);
}

bool ObjectStoreSource::WaitForWrites(double seconds) {
  return writer_->WaitForEarlier(TaskThread::DeadlineAfter(seconds));
}

}  // namespace sdsl
