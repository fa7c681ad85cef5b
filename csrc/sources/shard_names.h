// The names of one dataset's local shard files: explicit paths, or (what
// signal_dataset's layout allows, and a dataset of a million shards needs)
// one directory prefix and a 32-byte digest per shard, the path being
// `<prefix><first digest byte, hex>/<digest, hex>.arrayrecord`. A path is
// made only when a shard is opened or named in a message.
#ifndef SDS_LOADER_SOURCES_SHARD_NAMES_H_
#define SDS_LOADER_SOURCES_SHARD_NAMES_H_

#include <cstddef>
#include <string>
#include <vector>

namespace sdsl {

class ShardNames {
 public:
  static constexpr size_t kDigestBytes = 32;

  ShardNames() = default;
  explicit ShardNames(std::vector<std::string> paths);
  // `digests` holds kDigestBytes bytes per shard. Throws kArgument when its
  // length is not a whole number of digests.
  ShardNames(std::string prefix, std::string digests);

  size_t size() const { return compact_ ? digests_.size() / kDigestBytes : paths_.size(); }
  // Shard `file`'s path. Throws kArgument when there is no such shard.
  std::string operator[](size_t file) const;
  // Bytes the names keep.
  size_t HeldBytes() const;

 private:
  bool compact_ = false;
  std::vector<std::string> paths_;
  std::string prefix_;
  std::string digests_;
};

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_SHARD_NAMES_H_
