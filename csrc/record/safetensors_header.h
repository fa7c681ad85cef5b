// A record's SafeTensors header, parsed with a real JSON parser and checked
// before any tensor byte is trusted.
#ifndef SDS_LOADER_SAFETENSORS_HEADER_H_
#define SDS_LOADER_SAFETENSORS_HEADER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sdsl {

constexpr const char* kDescriptorTensor = "__sds_descriptor__";
// safetensors' own limit for its header.
constexpr uint64_t kMaxHeaderBytes = 100 * 1024 * 1024;

struct TensorEntry {
  std::string key;
  std::string dtype;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;  // relative to the end of the header
  uint64_t end = 0;
};

struct SafeTensorsHeader {
  std::vector<TensorEntry> tensors;  // sorted by begin
  const TensorEntry* Find(const std::string& key) const;
};

// Item size of a SafeTensors dtype name, or 0 when this reader does not know it.
uint64_t DtypeItemSize(const std::string& dtype);

// `data_size` is the record's size after the header. Checks what safetensors
// and signal_dataset check: a strict JSON object, known dtypes, shape x
// itemsize equal to the byte range, ranges that tile the data exactly, and a
// __metadata__ of strings.
void ParseSafeTensorsHeader(const uint8_t* json, uint64_t size, uint64_t data_size,
                            SafeTensorsHeader* out);

}  // namespace sdsl

#endif  // SDS_LOADER_SAFETENSORS_HEADER_H_
