#include "shard_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "reader_error.h"

namespace sdsl {

ShardFile::ShardFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    const int error = errno;
    throw ReaderError(ErrorKind::kIo, "cannot open shard " + path + ": " + std::strerror(error),
                      error);
  }
  struct stat info;
  if (::fstat(fd_, &info) != 0) {
    const int error = errno;
    ::close(fd_);
    throw ReaderError(ErrorKind::kIo, "cannot stat shard " + path + ": " + std::strerror(error),
                      error);
  }
  size_ = static_cast<uint64_t>(info.st_size);
}

ShardFile::~ShardFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ShardFile::ReadAt(uint64_t offset, uint64_t size, uint8_t* dst) const {
  if (offset > size_ || size > size_ - offset) {
    Corrupt("read of " + std::to_string(size) + " bytes at offset " + std::to_string(offset) +
            " runs past the end of the " + std::to_string(size_) + "-byte file (truncated?)");
  }
  while (size > 0) {
    const ssize_t got = ::pread(fd_, dst, size, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      throw ReaderError(ErrorKind::kIo, "cannot read shard " + path_ + ": " + std::strerror(error),
                        error);
    }
    if (got == 0) Corrupt("shard ended early while reading at offset " + std::to_string(offset));
    dst += got;
    offset += static_cast<uint64_t>(got);
    size -= static_cast<uint64_t>(got);
  }
}

}  // namespace sdsl
