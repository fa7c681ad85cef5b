// The names of one dataset's local shard files: explicit paths, or (what
// signal_dataset's layout allows, and a dataset of a million shards needs)
// one directory prefix and a 32-byte digest per shard, the path being
// `<prefix><first digest byte, hex>/<digest, hex>.arrayrecord`. A path is
// made only when a shard is opened or named in a message. The digests are
// borrowed: the shard table keeps them already, and a copy here held every
// shard's digest again in each set of each process, 32 bytes a shard.
#ifndef SDS_LOADER_SOURCES_SHARD_NAMES_H_
#define SDS_LOADER_SOURCES_SHARD_NAMES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sdsl {

class ShardNames {
 public:
  static constexpr size_t kDigestBytes = 32;

  ShardNames() = default;
  explicit ShardNames(std::vector<std::string> paths);
  // `digests` holds kDigestBytes bytes per shard, `bytes` in all: borrowed,
  // so whoever passes them keeps them as long as the names live (the binding
  // keeps the array alive with the set). Throws kArgument when `bytes` is not
  // a whole number of digests.
  ShardNames(std::string prefix, const uint8_t* digests, size_t bytes);

  size_t size() const { return compact_ ? digest_bytes_ / kDigestBytes : paths_.size(); }
  // Shard `file`'s path. Throws kArgument when there is no such shard.
  std::string operator[](size_t file) const;
  // Bytes the names keep.
  size_t HeldBytes() const;

 private:
  bool compact_ = false;
  std::vector<std::string> paths_;
  std::string prefix_;
  const uint8_t* digests_ = nullptr;  // borrowed
  size_t digest_bytes_ = 0;
};

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_SHARD_NAMES_H_
