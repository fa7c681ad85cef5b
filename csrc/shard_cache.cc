#include "shard_cache.h"

#include <algorithm>
#include <string>

#include "reader_error.h"

namespace sdsl {

ShardCache::ShardCache(ShardSource& source, size_t max_open_shards)
    : source_(source), max_open_(std::max<size_t>(1, max_open_shards)) {
  StartGuarding();
}

std::shared_ptr<const OpenShard> ShardCache::Open(size_t file) {
  if (file >= source_.num_files()) {
    Fail(ErrorKind::kArgument, "shard number " + std::to_string(file) + " is out of range");
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = open_.find(file);
    if (found != open_.end()) {
      recency_.splice(recency_.begin(), recency_, found->second.second);
      return found->second.first;
    }
  }
  // The footer is read without the lock: a slow disk or a remote source
  // delays only the reads that need this shard, and a fork meanwhile cannot
  // leave the lock held in the child. Two threads missing at once both read
  // the footer; the first to finish is kept.
  auto shard = std::make_shared<OpenShard>();
  shard->file = std::make_unique<ShardFile>(source_, file);
  shard->index = ReadShardIndex(*shard->file);
  shard->verified.Reset(shard->index.num_chunks());
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = open_.find(file);
  if (found != open_.end()) {
    recency_.splice(recency_.begin(), recency_, found->second.second);
    return found->second.first;
  }
  recency_.push_front(file);
  open_.emplace(file, std::make_pair(shard, recency_.begin()));
  while (open_.size() > max_open_) {
    open_.erase(recency_.back());
    recency_.pop_back();
  }
  return shard;
}

}  // namespace sdsl
