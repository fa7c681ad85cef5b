// One shard seen through its dataset's ShardSource: its name, its size when
// first opened, and reads of exactly the bytes asked for. This is what the
// footer parser and the shard tools read.
#ifndef SDS_LOADER_SHARD_FILE_H_
#define SDS_LOADER_SHARD_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/random_access_bytes.h"
#include "sources/shard_source.h"

namespace sdsl {

class ShardFile : public RandomAccessBytes {
 public:
  // Shard `file` of `source`, which must outlive this. Throws kIo.
  ShardFile(ShardSource& source, size_t file);
  // A local file on its own (for the shard tools). Throws kIo.
  explicit ShardFile(const std::string& path);
  ~ShardFile();
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;

  const std::string& path() const override { return path_; }
  uint64_t size() const override { return size_; }
  size_t number() const { return file_; }
  ShardSource& source() const { return *source_; }
  // Reads exactly `size` bytes at `offset`; a range past the end is corrupt.
  void ReadAt(uint64_t offset, uint64_t size, uint8_t* dst) const override;
  // The same check ReadAt makes, for callers that fetch through source().
  void CheckRange(uint64_t offset, uint64_t size) const;

 private:
  std::unique_ptr<ShardSource> owned_;
  ShardSource* source_;
  size_t file_;
  std::string path_;
  uint64_t size_;
};

}  // namespace sdsl

#endif  // SDS_LOADER_SHARD_FILE_H_
