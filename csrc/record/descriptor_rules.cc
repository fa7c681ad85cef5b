#include "record/descriptor_rules.h"

#include "record/strict_json.h"

namespace sdsl {

using nlohmann::json;

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

namespace {

// JSON true/false are not numbers; an integer past 64 bits is.
bool IsNumber(const json& value) { return value.is_number() || IsBigInteger(value); }

}  // namespace

json CheckCoordinate(const json& coordinate, uint64_t length, const std::string& where,
                     std::vector<std::string>* references) {
  json normal = json::object();
  const auto values = coordinate.find("values");
  const bool explicit_values = values != coordinate.end() && !values->is_null();
  if (explicit_values) {
    if (!values->is_array()) Malformed(where + " coordinate values are not a list");
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
  const auto reference = coordinate.find("reference");
  const bool referenced = reference != coordinate.end() && !reference->is_null();
  if (referenced && !reference->is_string())
    Malformed(where + " coordinate reference is not a string");
  const auto unit = coordinate.find("unit");
  const bool has_unit = unit != coordinate.end() && !unit->is_null();
  if (has_unit && !unit->is_string()) Malformed(where + " coordinate unit is not a string");
  normal["metadata"] = MetadataOf(coordinate, "metadata", where + " coordinate");
  if (linear_parts[0] != linear_parts[1]) {
    Malformed(where + " linear coordinate requires both start and step");
  }
  if (int{explicit_values} + int{linear_parts[0]} + int{referenced} > 1) {
    Malformed(where + " coordinate forms are mutually exclusive");
  }
  if (explicit_values && values->size() != length) {
    Malformed(where + " explicit coordinate length does not match axis");
  }
  if (referenced && !reference->get_ref<const std::string&>().empty()) {
    references->push_back(reference->get<std::string>());
  }
  normal["reference"] = referenced ? *reference : json(nullptr);
  normal["unit"] = has_unit ? *unit : json(nullptr);
  return normal;
}

}  // namespace sdsl
