#include "sources/shard_names.h"

#include <utility>

#include "base/reader_error.h"

namespace sdsl {

ShardNames::ShardNames(std::vector<std::string> paths) : paths_(std::move(paths)) {}

ShardNames::ShardNames(std::string prefix, const uint8_t* digests, size_t bytes)
    : compact_(true), prefix_(std::move(prefix)), digests_(digests), digest_bytes_(bytes) {
  if (digest_bytes_ % kDigestBytes != 0) {
    Fail(ErrorKind::kArgument, "shard digests hold " + std::to_string(digest_bytes_) +
                                   " bytes, not a whole number of " + std::to_string(kDigestBytes) +
                                   "-byte digests");
  }
}

std::string ShardNames::operator[](size_t file) const {
  if (file >= size()) {
    Fail(ErrorKind::kArgument, "shard number " + std::to_string(file) + " is out of range");
  }
  if (!compact_) return paths_[file];
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(2 * kDigestBytes, '0');
  for (size_t k = 0; k < kDigestBytes; ++k) {
    const uint8_t byte = digests_[file * kDigestBytes + k];
    hex[2 * k] = kHex[byte >> 4];
    hex[2 * k + 1] = kHex[byte & 15];
  }
  return prefix_ + hex.substr(0, 2) + "/" + hex + ".arrayrecord";
}

size_t ShardNames::HeldBytes() const {
  if (compact_) return prefix_.capacity();  // the digests are borrowed
  size_t held = paths_.capacity() * sizeof(std::string);
  for (const std::string& path : paths_) held += path.capacity() > 15 ? path.capacity() + 1 : 0;
  return held;
}

}  // namespace sdsl
