#include "record_descriptor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "descriptor_rules.h"
#include "descriptor_stream.h"
#include "reader_error.h"
#include "safetensors_header.h"
#include "strict_json.h"

namespace sdsl {
namespace {

using nlohmann::json;

// signal_dataset reads optional metadata as `value or {}`: any false-y JSON
// value stands for no metadata, anything else must be an object.
json MetadataOf(const json& parent, const char* key, const std::string& where) {
  const auto found = parent.find(key);
  if (found == parent.end() || found->is_null()) return json::object();
  const json& value = *found;
  if (value.is_object()) return value;
  const bool empty = (value.is_boolean() && !value.get<bool>()) ||
                     (value.is_number() && value.get<double>() == 0) ||
                     (value.is_string() && value.get_ref<const std::string&>().empty()) ||
                     (value.is_array() && value.empty());
  if (!empty) Malformed(where + " metadata is not an object");
  return json::object();
}

bool IsNumber(const json& value) { return value.is_number(); }  // JSON true/false are not

// Optional string-or-null member; returns the string, or "" for null/absent.
std::string OptionalString(const json& parent, const char* key, const std::string& where) {
  const auto found = parent.find(key);
  if (found == parent.end() || found->is_null()) return "";
  if (!found->is_string()) Malformed(where + " " + key + " is not a string");
  return found->get<std::string>();
}

// A coordinate, normalized as signal_dataset's Coordinate compares: every
// member present, absent ones null, metadata an object. Returns null for none.
json CheckCoordinate(const json& axis, uint64_t length, const std::string& where,
                     std::vector<std::string>* references) {
  const auto found = axis.find("coordinate");
  if (found == axis.end() || found->is_null()) return nullptr;
  const json& coordinate = *found;
  if (!coordinate.is_object()) Malformed(where + " coordinate is not an object");
  json normal = json::object();
  const auto values = coordinate.find("values");
  const bool explicit_values = values != coordinate.end() && !values->is_null();
  if (explicit_values) {
    if (!values->is_array()) Malformed(where + " coordinate values are not a list");
    if (values->size() != length)
      Malformed(where + " explicit coordinate length does not match axis");
    if (values->size() > kMaxCoordinateValues) Malformed(where + " has too many coordinate values");
  }
  normal["values"] = explicit_values ? *values : json(nullptr);
  bool linear_parts[2] = {false, false};
  const char* linear_keys[2] = {"start", "step"};
  for (int k = 0; k < 2; ++k) {
    const auto item = coordinate.find(linear_keys[k]);
    linear_parts[k] = item != coordinate.end() && !item->is_null();
    if (linear_parts[k] && !IsNumber(*item)) {
      Malformed(where + " coordinate " + linear_keys[k] + " is not a number");
    }
    normal[linear_keys[k]] = linear_parts[k] ? *item : json(nullptr);
  }
  if (linear_parts[0] != linear_parts[1]) {
    Malformed(where + " linear coordinate requires both start and step");
  }
  const auto reference = coordinate.find("reference");
  const bool referenced = reference != coordinate.end() && !reference->is_null();
  if (referenced && !reference->is_string())
    Malformed(where + " coordinate reference is not a string");
  if (referenced && !reference->get_ref<const std::string&>().empty()) {
    references->push_back(reference->get<std::string>());
  }
  normal["reference"] = referenced ? *reference : json(nullptr);
  if (int{explicit_values} + int{linear_parts[0]} + int{referenced} > 1) {
    Malformed(where + " coordinate forms are mutually exclusive");
  }
  const auto unit = coordinate.find("unit");
  const bool has_unit = unit != coordinate.end() && !unit->is_null();
  if (has_unit && !unit->is_string()) Malformed(where + " coordinate unit is not a string");
  normal["unit"] = has_unit ? *unit : json(nullptr);
  normal["metadata"] = MetadataOf(coordinate, "metadata", where + " coordinate");
  return normal;
}

MetadataValue ScalarOf(const std::string& key, const json& value) {
  MetadataValue item;
  item.key = key;
  switch (value.type()) {
    case json::value_t::boolean:
      item.kind = MetadataValue::kBool;
      item.integer = value.get<bool>() ? 1 : 0;
      break;
    case json::value_t::number_integer:
      item.kind = MetadataValue::kInteger;
      item.integer = value.get<int64_t>();
      break;
    case json::value_t::number_unsigned:
      item.kind = MetadataValue::kUnsigned;
      item.unsigned_integer = value.get<uint64_t>();
      break;
    case json::value_t::number_float:
      item.kind = MetadataValue::kFloat;
      item.real = value.get<double>();
      break;
    case json::value_t::null:
      item.description = "null";
      break;
    case json::value_t::string:
      item.description = "a string";
      break;
    case json::value_t::array:
      item.description = "an array";
      break;
    default:
      item.description = "an object";
      break;
  }
  return item;
}

struct FieldEntry {
  std::string name;
  std::string tensor;
  std::vector<uint64_t> lengths;
};

}  // namespace

const std::string* Descriptor::TensorOf(const std::string& field) const {
  const auto found = std::lower_bound(fields.begin(), fields.end(), field,
                                      [](const std::pair<std::string, std::string>& entry,
                                         const std::string& name) { return entry.first < name; });
  return found != fields.end() && found->first == field ? &found->second : nullptr;
}

void ParseDescriptor(const uint8_t* text, uint64_t size, Descriptor* out) {
  if (size > kMaxDescriptorBytes)
    Malformed("it exceeds " + std::to_string(kMaxDescriptorBytes) + " bytes");
  if (ParseDescriptorStream(text, size, out)) return;
  ParseDescriptorDocument(text, size, out);
}

void ParseDescriptorDocument(const uint8_t* text, uint64_t size, Descriptor* out) {
  out->fields.clear();
  out->axis_lengths.clear();
  out->metadata.clear();
  const json descriptor = ParseStrictJson(text, size, "record descriptor");
  if (!descriptor.is_object()) Malformed("it is not a JSON object");
  const auto format = descriptor.find("format");
  const auto version = descriptor.find("version");
  if (format == descriptor.end() || *format != "signal-dataset.record" ||
      version == descriptor.end() || *version != "0.1") {
    Corrupt("record descriptor is not a signal-dataset.record of version 0.1");
  }
  const auto id = descriptor.find("id");
  if (id == descriptor.end()) Malformed("no id");
  if (!id->is_string() || id->get_ref<const std::string&>().empty()) {
    Malformed("the record id is not a non-empty string");
  }
  OptionalString(descriptor, "scene_id", "the record's");
  const auto fields = descriptor.find("fields");
  if (fields == descriptor.end()) Malformed("no fields");
  if (!fields->is_object()) Malformed("fields is not an object");
  if (fields->empty()) Malformed("the record has no fields");
  if (fields->size() > kMaxFields) Malformed("more than " + std::to_string(kMaxFields) + " fields");

  std::vector<FieldEntry> entries;
  std::vector<std::string> axis_ids, references;
  std::vector<std::pair<std::string, json>> shared;  // axis id -> [length, coordinate]
  for (const auto& [name, spec] : fields->items()) {
    const std::string where = "field \"" + name + "\"";
    if (name.empty()) Malformed("a field has an empty name");
    if (!spec.is_object()) Malformed(where + " is not an object");
    const auto tensor = spec.find("tensor");
    if (tensor == spec.end()) Malformed(where + " has no tensor");
    if (!tensor->is_string()) Malformed(where + " names no tensor string");
    FieldEntry entry{name, tensor->get<std::string>(), {}};
    MetadataOf(spec, "metadata", where);
    const auto axes = spec.find("axes");
    if (axes != spec.end()) {
      if (!axes->is_array()) Malformed(where + " axes are not a list");
      if (axes->size() > kMaxAxesPerField) Malformed(where + " has too many axes");
      std::vector<std::string> names;
      for (const json& axis : *axes) {
        if (!axis.is_object()) Malformed(where + " has an axis that is not an object");
        const auto axis_name = axis.find("name");
        const auto length = axis.find("length");
        if (axis_name == axis.end() || length == axis.end()) {
          Malformed(where + " has an axis without name or length");
        }
        if (!axis_name->is_string() || axis_name->get_ref<const std::string&>().empty()) {
          Malformed(where + " has an invalid axis name");
        }
        const std::string& axis_text = axis_name->get_ref<const std::string&>();
        if (std::find(names.begin(), names.end(), axis_text) != names.end()) {
          Malformed(where + " repeats axis name \"" + axis_text + "\"");
        }
        names.push_back(axis_text);
        if (!length->is_number_integer() ||
            (length->is_number_integer() && !length->is_number_unsigned() &&
             length->get<int64_t>() < 0)) {
          Malformed(where + " axis \"" + axis_text + "\" length is not a nonnegative integer");
        }
        const uint64_t axis_length = length->get<uint64_t>();
        entry.lengths.push_back(axis_length);
        const std::string axis_where = where + " axis \"" + axis_text + "\"";
        OptionalString(axis, "role", axis_where);
        const std::string axis_id = OptionalString(axis, "id", axis_where);
        MetadataOf(axis, "metadata", axis_where);
        const json coordinate = CheckCoordinate(axis, axis_length, axis_where, &references);
        if (!axis_id.empty()) {
          // Axes sharing an id must agree on length and coordinate.
          const json signature = json::array({axis_length, coordinate});
          const auto same = std::find_if(shared.begin(), shared.end(),
                                         [&](const auto& item) { return item.first == axis_id; });
          if (same == shared.end()) {
            shared.emplace_back(axis_id, signature);
          } else if (same->second != signature) {
            Malformed("shared axis \"" + axis_id + "\" declarations disagree");
          }
          axis_ids.push_back(axis_id);
        }
      }
    }
    entries.push_back(std::move(entry));
  }
  for (const std::string& reference : references) {
    const bool is_field = fields->contains(reference);
    const bool is_axis = std::find(axis_ids.begin(), axis_ids.end(), reference) != axis_ids.end();
    if (!is_field && !is_axis)
      Malformed("coordinate reference \"" + reference + "\" does not resolve");
  }
  // nlohmann keeps object members sorted by key, so `entries` already is.
  for (FieldEntry& entry : entries) {
    out->fields.emplace_back(std::move(entry.name), std::move(entry.tensor));
    out->axis_lengths.push_back(std::move(entry.lengths));
  }
  const json metadata = MetadataOf(descriptor, "metadata", "the record's");
  for (const auto& [key, value] : metadata.items()) out->metadata.push_back(ScalarOf(key, value));
}

void CheckDescriptorTensors(const Descriptor& descriptor, const SafeTensorsHeader& header) {
  std::vector<bool> claimed(header.tensors.size(), false);
  for (size_t f = 0; f < descriptor.fields.size(); ++f) {
    const auto& [name, key] = descriptor.fields[f];
    const TensorEntry* tensor = header.Find(key);
    if (tensor == nullptr || key == kDescriptorTensor) {
      Malformed("field \"" + name + "\" references missing tensor \"" + key + "\"");
    }
    if (tensor->shape != descriptor.axis_lengths[f]) {
      Malformed("field \"" + name + "\" axes do not match the shape of tensor \"" + key + "\"");
    }
    claimed[static_cast<size_t>(tensor - header.tensors.data())] = true;
  }
  for (size_t t = 0; t < header.tensors.size(); ++t) {
    if (!claimed[t] && header.tensors[t].key != kDescriptorTensor) {
      Malformed("tensor \"" + header.tensors[t].key + "\" belongs to no field");
    }
  }
}

std::string DescriptorMetadataJson(const uint8_t* text, uint64_t size) {
  const json descriptor = ParseStrictJson(text, size, "record descriptor");
  return MetadataOf(descriptor, "metadata", "the record's").dump();
}

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
