#include "safetensors_header.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "byte_io.h"
#include "reader_error.h"

namespace sdsl {
namespace {

using nlohmann::json;

// Deeper nesting than any SafeTensors header or descriptor needs; the bound
// keeps a hostile document from exhausting the stack.
constexpr int kMaxJsonDepth = 64;

// Parses with nlohmann's callback so that duplicate keys and deep nesting are
// refused instead of silently resolved.
json ParseStrict(const uint8_t* data, uint64_t size, const char* what) {
  std::vector<std::set<std::string>> seen;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    if (depth > kMaxJsonDepth) {
      Corrupt(std::string(what) + " nests deeper than " + std::to_string(kMaxJsonDepth));
    }
    switch (event) {
      case json::parse_event_t::object_start:
        seen.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!seen.empty()) seen.pop_back();
        break;
      case json::parse_event_t::key:
        if (!seen.empty() && !seen.back().insert(parsed.get<std::string>()).second) {
          Corrupt(std::string(what) + " repeats the key \"" + parsed.get<std::string>() + "\"");
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    const char* begin = reinterpret_cast<const char*>(data);
    return json::parse(begin, begin + size, callback);
  } catch (const json::exception& error) {
    Corrupt(std::string(what) + " is not valid JSON: " + error.what());
  }
}

bool AsU64(const json& value, uint64_t* out) {
  if (value.is_number_unsigned()) {
    *out = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(value.get<int64_t>());
    return true;
  }
  return false;
}

}  // namespace

uint64_t DtypeItemSize(const std::string& dtype) {
  static const std::pair<const char*, uint64_t> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"U16", 2}, {"I16", 2}, {"F16", 2},  {"BF16", 2},
      {"U32", 4},  {"I32", 4}, {"F32", 4}, {"U64", 8}, {"I64", 8}, {"F64", 8}, {"C64", 8},
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
  const json header = ParseStrict(text, size, "SafeTensors header");
  if (!header.is_object()) Corrupt("SafeTensors header is not a JSON object");
  for (const auto& [key, spec] : header.items()) {
    if (key == "__metadata__") continue;
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
  for (size_t i = 1; i < out->tensors.size(); ++i) {
    if (out->tensors[i].begin < out->tensors[i - 1].end) {
      Corrupt("SafeTensors tensors \"" + out->tensors[i - 1].key + "\" and \"" +
              out->tensors[i].key + "\" overlap");
    }
  }
}

}  // namespace sdsl
