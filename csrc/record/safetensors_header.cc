#include "record/safetensors_header.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/byte_io.h"
#include "base/reader_error.h"
#include "record/strict_json.h"

namespace sdsl {
namespace {

using nlohmann::json;

// Offsets and shapes are read by safetensors' serde_json as usize, which
// takes an integer literal without a sign: `-0` is a float there, and so
// refused, though Python's json reads it as 0. Only a literal without a
// minus sign is a number_unsigned (json_events.h).
bool AsU64(const json& value, uint64_t* out) {
  if (!value.is_number_unsigned()) return false;
  *out = value.get<uint64_t>();
  return true;
}

}  // namespace

// The dtypes signal_dataset reads: safetensors has more (BF16, F8_*), but
// numpy, and so signal_dataset, cannot load them.
uint64_t DtypeItemSize(const std::string& dtype) {
  static const std::pair<const char*, uint64_t> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"U16", 2}, {"I16", 2}, {"F16", 2}, {"U32", 4},
      {"I32", 4},  {"F32", 4}, {"U64", 8}, {"I64", 8}, {"F64", 8}, {"C64", 8},
  };
  for (const auto& [name, size] : kSizes) {
    if (dtype == name) return size;
  }
  return 0;
}

const TensorEntry* SafeTensorsHeader::Find(const std::string& key) const {
  for (const TensorEntry& tensor : tensors) {
    if (tensor.key == key) return &tensor;
  }
  return nullptr;
}

void ParseSafeTensorsHeader(const uint8_t* text, uint64_t size, uint64_t data_size,
                            SafeTensorsHeader* out) {
  out->tensors.clear();
  const json header = ParseStrictJson(text, size, "SafeTensors header");
  if (!header.is_object()) Corrupt("SafeTensors header is not a JSON object");
  for (const auto& [key, spec] : header.items()) {
    if (key == "__metadata__") {
      // safetensors reads it as a map of strings, and refuses anything else.
      if (spec.is_null()) continue;
      if (!spec.is_object()) Corrupt("SafeTensors __metadata__ is not an object");
      for (const auto& item : spec.items()) {
        if (!item.value().is_string()) {
          Corrupt("SafeTensors __metadata__ \"" + item.key() + "\" is not a string");
        }
      }
      continue;
    }
    const std::string where = "SafeTensors tensor \"" + key + "\"";
    if (!spec.is_object()) Corrupt(where + " is not an object");
    TensorEntry entry;
    entry.key = key;
    const auto dtype = spec.find("dtype");
    const auto shape = spec.find("shape");
    const auto offsets = spec.find("data_offsets");
    if (dtype == spec.end() || !dtype->is_string()) Corrupt(where + " has no dtype");
    entry.dtype = dtype->get<std::string>();
    const uint64_t item_size = DtypeItemSize(entry.dtype);
    if (item_size == 0) Corrupt(where + " has unknown dtype \"" + entry.dtype + "\"");
    if (shape == spec.end() || !shape->is_array()) Corrupt(where + " has no shape");
    uint64_t bytes = item_size;
    for (const json& dimension : *shape) {
      uint64_t length;
      if (!AsU64(dimension, &length)) Corrupt(where + " has a negative or non-integer dimension");
      entry.shape.push_back(length);
      if (!CheckedMul(bytes, length, &bytes)) Corrupt(where + " has a shape whose size overflows");
    }
    if (offsets == spec.end() || !offsets->is_array() || offsets->size() != 2 ||
        !AsU64((*offsets)[0], &entry.begin) || !AsU64((*offsets)[1], &entry.end)) {
      Corrupt(where + " has malformed data_offsets");
    }
    if (entry.begin > entry.end || entry.end > data_size) {
      Corrupt(where + " spans bytes [" + std::to_string(entry.begin) + ", " +
              std::to_string(entry.end) + ") outside the record's " + std::to_string(data_size) +
              " data bytes");
    }
    if (entry.end - entry.begin != bytes) {
      Corrupt(where + " holds " + std::to_string(entry.end - entry.begin) +
              " bytes where its dtype and shape need " + std::to_string(bytes));
    }
    out->tensors.push_back(std::move(entry));
  }
  std::sort(out->tensors.begin(), out->tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  // safetensors itself requires the tensors to tile the data exactly: no
  // overlap, no gap, nothing after the last.
  uint64_t covered = 0;
  for (const TensorEntry& tensor : out->tensors) {
    if (tensor.begin != covered) {
      Corrupt("SafeTensors tensor \"" + tensor.key + "\" begins at byte " +
              std::to_string(tensor.begin) + " where the tensors before it end at " +
              std::to_string(covered));
    }
    covered = tensor.end;
  }
  if (covered != data_size) {
    Corrupt("SafeTensors tensors cover " + std::to_string(covered) + " of the record's " +
            std::to_string(data_size) + " data bytes");
  }
}

}  // namespace sdsl
