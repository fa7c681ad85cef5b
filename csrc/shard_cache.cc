#include "shard_cache.h"

#include <unistd.h>

#include <algorithm>

#include "reader_error.h"

namespace sdsl {

ShardCache::ShardCache(std::vector<std::string> paths, size_t max_open_files)
    : paths_(std::move(paths)), max_open_(std::max<size_t>(1, max_open_files)), pid_(::getpid()) {}

void ShardCache::ForgetIfForked() {
  // A forked child must not trust what its parent cached: it reopens.
  if (pid_ == ::getpid()) return;
  open_.clear();
  recency_.clear();
  pid_ = ::getpid();
}

std::shared_ptr<const OpenShard> ShardCache::Open(size_t file) {
  if (file >= paths_.size()) {
    Fail(ErrorKind::kArgument, "shard number " + std::to_string(file) + " is out of range");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ForgetIfForked();
  const auto found = open_.find(file);
  if (found != open_.end()) {
    recency_.splice(recency_.begin(), recency_, found->second.second);
    return found->second.first;
  }
  auto shard = std::make_shared<OpenShard>();
  shard->file = std::make_unique<ShardFile>(paths_[file]);
  shard->index = ReadShardIndex(*shard->file);
  recency_.push_front(file);
  open_.emplace(file, std::make_pair(shard, recency_.begin()));
  while (open_.size() > max_open_) {
    open_.erase(recency_.back());
    recency_.pop_back();
  }
  return shard;
}

}  // namespace sdsl
