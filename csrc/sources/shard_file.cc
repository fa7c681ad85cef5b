#include "sources/shard_file.h"

#include <vector>

#include "base/reader_error.h"
#include "sources/local_source.h"

namespace sdsl {

ShardFile::ShardFile(ShardSource& source, size_t file)
    : source_(&source), file_(file), path_(source.Name(file)), size_(source.Size(file)) {}

ShardFile::ShardFile(const std::string& path)
    : owned_(std::make_unique<LocalSource>(std::vector<std::string>{path}, 1)),
      source_(owned_.get()),
      file_(0),
      path_(path),
      size_(source_->Size(0)) {}

ShardFile::~ShardFile() = default;

void ShardFile::CheckRange(uint64_t offset, uint64_t size) const {
  if (offset > size_ || size > size_ - offset) {
    Corrupt("read of " + std::to_string(size) + " bytes at offset " + std::to_string(offset) +
            " runs past the end of the " + std::to_string(size_) + "-byte file (truncated?)");
  }
}

void ShardFile::ReadAt(uint64_t offset, uint64_t size, uint8_t* dst) const {
  CheckRange(offset, size);
  RangeRequest request{file_, offset, size, dst};
  source_->Fetch(&request, 1);
}

}  // namespace sdsl
