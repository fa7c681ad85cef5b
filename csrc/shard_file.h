// An open shard file read with pread, so that threads share one descriptor
// without sharing a file position.
#ifndef SDS_LOADER_SHARD_FILE_H_
#define SDS_LOADER_SHARD_FILE_H_

#include <cstdint>
#include <string>

namespace sdsl {

class ShardFile {
 public:
  explicit ShardFile(const std::string& path);  // throws kIo
  ~ShardFile();
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // Reads exactly `size` bytes at `offset`; a short file is corrupt.
  void ReadAt(uint64_t offset, uint64_t size, uint8_t* dst) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace sdsl

#endif  // SDS_LOADER_SHARD_FILE_H_
