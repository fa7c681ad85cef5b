// One file's bytes read at any offset, exactly as asked or with an error:
// what the container stage's parsers (the ArrayRecord footer, a chunk read
// alone) read through, whatever stage below holds the bytes (ShardFile).
#ifndef SDS_LOADER_BASE_RANDOM_ACCESS_BYTES_H_
#define SDS_LOADER_BASE_RANDOM_ACCESS_BYTES_H_

#include <cstdint>
#include <string>

namespace sdsl {

class RandomAccessBytes {
 public:
  virtual ~RandomAccessBytes() = default;
  // The file's path or URI, for messages.
  virtual const std::string& path() const = 0;
  virtual uint64_t size() const = 0;
  // Reads exactly `size` bytes at `offset`; throws ReaderError otherwise
  // (kCorrupt for a range past the end).
  virtual void ReadAt(uint64_t offset, uint64_t size, uint8_t* dst) const = 0;
};

}  // namespace sdsl

#endif  // SDS_LOADER_BASE_RANDOM_ACCESS_BYTES_H_
