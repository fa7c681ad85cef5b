#include "shard_cache.h"

#include <string>
#include <utility>

#include "reader_error.h"

namespace sdsl {

ShardCache::ShardCache(ShardSource& source, size_t max_open_shards)
    : source_(source), open_(max_open_shards) {
  StartGuarding();
}

std::shared_ptr<const OpenShard> ShardCache::Open(size_t file) {
  if (file >= source_.num_files()) {
    Fail(ErrorKind::kArgument, "shard number " + std::to_string(file) + " is out of range");
  }
  if (auto found = open_.Find(file)) return found;
  // The footer is read without the lock: a slow disk or a remote source
  // delays only the reads that need this shard, and a fork meanwhile cannot
  // leave the lock held in the child. Two threads missing at once both read
  // the footer; the first to finish is kept.
  auto shard = std::make_shared<OpenShard>();
  shard->file = std::make_unique<ShardFile>(source_, file);
  shard->index = ReadShardIndex(*shard->file);
  shard->verified.Reset(shard->index.num_chunks());
  return open_.Keep(file, std::move(shard));
}

}  // namespace sdsl
