#include "record/record_descriptor.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "base/reader_error.h"
#include "record/descriptor_rules.h"
#include "record/descriptor_template.h"
#include "record/safetensors_header.h"
#include "record/strict_json.h"

namespace sdsl {

using nlohmann::json;

const std::string* Descriptor::TensorOf(const std::string& field) const {
  const auto found = std::lower_bound(fields.begin(), fields.end(), field,
                                      [](const std::pair<std::string, std::string>& entry,
                                         const std::string& name) { return entry.first < name; });
  return found != fields.end() && found->first == field ? &found->second : nullptr;
}

void ParseDescriptor(const uint8_t* text, uint64_t size, Descriptor* out) {
  if (size > kMaxDescriptorBytes)
    Malformed("it exceeds " + std::to_string(kMaxDescriptorBytes) + " bytes");
  ParseDescriptorStream(text, size, out);
}

void CheckDescriptorTensors(const Descriptor& descriptor, const SafeTensorsHeader& header) {
  // Which tensors some field claims: a bit each. A record rarely holds more
  // than 64 tensors, and a vector per record cost a malloc and a free.
  const size_t count = header.tensors.size();
  uint64_t few = 0;
  std::vector<bool> many(count > 64 ? count : 0, false);
  const auto claim = [&](size_t t) {
    if (count > 64) {
      many[t] = true;
    } else {
      few |= uint64_t{1} << t;
    }
  };
  const auto claimed = [&](size_t t) { return count > 64 ? bool(many[t]) : (few >> t & 1) != 0; };
  for (size_t f = 0; f < descriptor.fields.size(); ++f) {
    const auto& [name, key] = descriptor.fields[f];
    const TensorEntry* tensor = header.Find(key);
    if (tensor == nullptr || key == kDescriptorTensor) {
      Malformed("field \"" + name + "\" references missing tensor \"" + key + "\"");
    }
    if (tensor->shape != descriptor.axis_lengths[f]) {
      Malformed("field \"" + name + "\" axes do not match the shape of tensor \"" + key + "\"");
    }
    claim(static_cast<size_t>(tensor - header.tensors.data()));
  }
  for (size_t t = 0; t < count; ++t) {
    if (!claimed(t) && header.tensors[t].key != kDescriptorTensor) {
      Malformed("tensor \"" + header.tensors[t].key + "\" belongs to no field");
    }
  }
}

std::string DescriptorMetadataJson(const uint8_t* text, uint64_t size) {
  const json descriptor = ParseStrictJson(text, size, "record descriptor");
  return DumpJson(MetadataOf(descriptor, "metadata", "the record's"));
}

namespace {

// The shortest text that reads back as `value`, as Python's repr() writes it.
std::string ShortestText(double value) {
  char text[32];
  const std::to_chars_result written = std::to_chars(text, text + sizeof(text), value);
  return std::string(text, written.ptr);
}

}  // namespace

TargetValue MetadataTarget(const Descriptor& descriptor, const std::string& key, char kind) {
  const MetadataValue* found = nullptr;
  for (const MetadataValue& item : descriptor.metadata) {
    if (item.key == key) found = &item;
  }
  if (found == nullptr) {
    Fail(ErrorKind::kTarget,
         "no metadata key \"" + key + "\"; pass targets= with keys every record carries");
  }
  TargetValue value;
  switch (found->kind) {
    case MetadataValue::kBool:
    case MetadataValue::kInteger:
      value.as_int = found->integer;
      value.as_float = static_cast<double>(found->integer);
      break;
    case MetadataValue::kUnsigned:
      if (kind == 'i' && found->unsigned_integer > static_cast<uint64_t>(INT64_MAX)) {
        Fail(ErrorKind::kTarget,
             "metadata \"" + key + "\" is " + std::to_string(found->unsigned_integer) +
                 ", outside int64's range; write the key with values the target's "
                 "dtype can hold");
      }
      value.as_int = static_cast<int64_t>(found->unsigned_integer);
      value.as_float = static_cast<double>(found->unsigned_integer);
      break;
    case MetadataValue::kFloat:
      value.as_float = found->real;
      if (kind == 'i') {
        if (!(std::isfinite(found->real) && std::trunc(found->real) == found->real &&
              std::fabs(found->real) < 9.2e18)) {
          Fail(ErrorKind::kTarget, "metadata \"" + key + "\" is " + ShortestText(found->real) +
                                       ", where the batch's first record holds an integer; "
                                       "write the key with one type throughout");
        }
        value.as_int = static_cast<int64_t>(found->real);
      }
      break;
    case MetadataValue::kBigInteger:
      // Python reads it exactly; the batch's int64 or float64 cannot hold it.
      if (kind == 'i' || !std::isfinite(found->real)) {
        Fail(ErrorKind::kTarget,
             "metadata \"" + key + "\" is " + found->text + ", outside " +
                 (kind == 'i' ? "int64" : "float64") +
                 "'s range; write the key with values the target's dtype can hold");
      }
      value.as_float = found->real;
      break;
    case MetadataValue::kOther:
      Fail(ErrorKind::kTarget, "metadata \"" + key + "\" is " + found->description +
                                   ", not a number or bool; targets must be scalars");
  }
  return value;
}

}  // namespace sdsl
