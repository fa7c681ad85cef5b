#include "record_descriptor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "reader_error.h"

namespace sdsl {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 64;

// Tracks where in the document each event falls: only depth 1 (format,
// fields, metadata), depth 2 (a field, a metadata key) and depth 3 (a
// field's "tensor") matter.
class DescriptorEvents : public nlohmann::json_sax<json> {
 public:
  explicit DescriptorEvents(Descriptor* out) : out_(out) {}

  bool null() override { return Scalar(MetadataValue::kOther, "null"); }
  bool boolean(bool value) override {
    if (InMetadataValue()) {
      MetadataValue& item = NewMetadata(MetadataValue::kBool);
      item.integer = value ? 1 : 0;
    }
    return true;
  }
  bool number_integer(number_integer_t value) override {
    if (InMetadataValue()) NewMetadata(MetadataValue::kInteger).integer = value;
    return true;
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (InMetadataValue()) NewMetadata(MetadataValue::kUnsigned).unsigned_integer = value;
    return true;
  }
  bool number_float(number_float_t value, const string_t&) override {
    if (InMetadataValue()) NewMetadata(MetadataValue::kFloat).real = value;
    return true;
  }
  bool string(string_t& value) override {
    if (depth_ == 1 && keys_[0] == "format") format_ok_ = value == "signal-dataset.record";
    if (depth_ == 3 && keys_[0] == "fields" && keys_[2] == "tensor") {
      out_->fields.emplace_back(keys_[1], value);
    }
    if (InMetadataValue()) NewMetadata(MetadataValue::kOther).description = "a string";
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return Open("an object"); }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open("an array"); }
  bool end_array() override { return Close(); }
  bool key(string_t& value) override {
    if (depth_ <= 3) {
      // Duplicate keys where they matter would let two readers disagree on
      // what a record says; refuse them.
      std::vector<std::string>& seen = seen_[depth_ - 1];
      if (std::find(seen.begin(), seen.end(), value) != seen.end()) {
        Corrupt("record descriptor repeats the key \"" + value + "\"");
      }
      seen.push_back(value);
      keys_[depth_ - 1] = value;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) override {
    Corrupt(std::string("record descriptor is not valid JSON: ") + error.what());
  }

  bool format_ok() const { return format_ok_; }
  bool saw_fields() const { return saw_fields_; }

 private:
  bool InMetadataValue() const { return depth_ == 2 && keys_[0] == "metadata"; }

  MetadataValue& NewMetadata(MetadataValue::Kind kind) {
    out_->metadata.emplace_back();
    MetadataValue& item = out_->metadata.back();
    item.kind = kind;
    item.key = keys_[1];
    return item;
  }

  bool Scalar(MetadataValue::Kind kind, const char* description) {
    if (InMetadataValue()) NewMetadata(kind).description = description;
    return true;
  }

  bool Open(const char* description) {
    if (InMetadataValue()) NewMetadata(MetadataValue::kOther).description = description;
    if (depth_ == 1 && keys_[0] == "fields") saw_fields_ = true;
    if (++depth_ > kMaxDepth) Corrupt("record descriptor nests too deeply");
    if (depth_ <= 3) seen_[depth_ - 1].clear();
    return true;
  }

  bool Close() {
    --depth_;
    return true;
  }

  Descriptor* out_;
  int depth_ = 0;
  std::string keys_[3];
  std::vector<std::string> seen_[3];
  bool format_ok_ = false;
  bool saw_fields_ = false;
};

}  // namespace

const std::string* Descriptor::TensorOf(const std::string& field) const {
  for (const auto& [name, tensor] : fields) {
    if (name == field) return &tensor;
  }
  return nullptr;
}

void ParseDescriptor(const uint8_t* text, uint64_t size, Descriptor* out) {
  out->fields.clear();
  out->metadata.clear();
  DescriptorEvents events(out);
  const char* begin = reinterpret_cast<const char*>(text);
  try {
    json::sax_parse(begin, begin + size, &events);
  } catch (const json::exception& error) {
    Corrupt(std::string("record descriptor is not valid JSON: ") + error.what());
  }
  if (!events.format_ok()) Corrupt("record descriptor is not a signal-dataset.record");
  if (!events.saw_fields()) Corrupt("record descriptor has no fields object");
  std::sort(out->fields.begin(), out->fields.end());
}

std::string DescriptorMetadataJson(const uint8_t* text, uint64_t size) {
  try {
    const char* begin = reinterpret_cast<const char*>(text);
    const json descriptor = json::parse(begin, begin + size);
    const auto metadata = descriptor.find("metadata");
    return metadata == descriptor.end() ? "{}" : metadata->dump();
  } catch (const json::exception& error) {
    Corrupt(std::string("record descriptor is not valid JSON: ") + error.what());
  }
}

TargetValue MetadataTarget(const Descriptor& descriptor, const std::string& key, char kind) {
  const MetadataValue* found = nullptr;
  for (const MetadataValue& item : descriptor.metadata) {
    if (item.key == key) found = &item;
  }
  if (found == nullptr) {
    Fail(ErrorKind::kTarget, "no metadata key \"" + key +
                                 "\"; pass targets= with keys every record carries");
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
        Fail(ErrorKind::kTarget, "metadata \"" + key + "\" does not fit in int64");
      }
      value.as_int = static_cast<int64_t>(found->unsigned_integer);
      value.as_float = static_cast<double>(found->unsigned_integer);
      break;
    case MetadataValue::kFloat:
      value.as_float = found->real;
      if (kind == 'i') {
        if (!(std::isfinite(found->real) && std::trunc(found->real) == found->real &&
              std::fabs(found->real) < 9.2e18)) {
          Fail(ErrorKind::kTarget, "metadata \"" + key + "\" is " + std::to_string(found->real) +
                                       ", where the batch's first record holds an integer; "
                                       "write the key with one type throughout");
        }
        value.as_int = static_cast<int64_t>(found->real);
      }
      break;
    case MetadataValue::kOther:
      Fail(ErrorKind::kTarget, "metadata \"" + key + "\" is " + found->description +
                                   ", not a number or bool; targets must be scalars");
  }
  return value;
}

}  // namespace sdsl
