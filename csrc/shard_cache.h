// A bounded cache of open shards and their parsed footers, so that each shard
// is opened and its index read once, not per batch.
#ifndef SDS_LOADER_SHARD_CACHE_H_
#define SDS_LOADER_SHARD_CACHE_H_

#include <sys/types.h>

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "batch_plan.h"

namespace sdsl {

class ShardCache {
 public:
  ShardCache(std::vector<std::string> paths, size_t max_open_files);

  size_t num_files() const { return paths_.size(); }
  // The open shard `file`, opening it and reading its footer on a miss. The
  // least recently used shard is closed past max_open_files; a reader still
  // holding it keeps it open until it finishes.
  std::shared_ptr<const OpenShard> Open(size_t file);

 private:
  void ForgetIfForked();  // holds mutex_

  const std::vector<std::string> paths_;
  const size_t max_open_;
  std::mutex mutex_;
  pid_t pid_;
  std::list<size_t> recency_;  // most recent first
  std::unordered_map<size_t, std::pair<std::shared_ptr<const OpenShard>, std::list<size_t>::iterator>>
      open_;
};

}  // namespace sdsl

#endif  // SDS_LOADER_SHARD_CACHE_H_
