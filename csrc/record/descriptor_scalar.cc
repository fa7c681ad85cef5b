#include "record/descriptor_scalar.h"

namespace sdsl {

void SetMetadataValue(const DescriptorScalar& value, MetadataValue* item) {
  item->kind = MetadataValue::kOther;
  item->integer = 0;
  item->unsigned_integer = 0;
  item->real = 0;
  item->text.clear();
  item->description.clear();
  switch (value.type) {
    case nlohmann::json::value_t::boolean:
      item->kind = MetadataValue::kBool;
      item->integer = value.boolean ? 1 : 0;
      break;
    case nlohmann::json::value_t::number_integer:
      item->kind = MetadataValue::kInteger;
      item->integer = value.integer;
      break;
    case nlohmann::json::value_t::number_unsigned:
      item->kind = MetadataValue::kUnsigned;
      item->unsigned_integer = value.unsigned_integer;
      break;
    case nlohmann::json::value_t::number_float:
      item->kind = MetadataValue::kFloat;
      item->real = value.real;
      break;
    case nlohmann::json::value_t::binary:
      item->kind = MetadataValue::kBigInteger;
      item->real = value.real;
      item->text = *value.text;
      break;
    case nlohmann::json::value_t::string:
      item->description = "a string";
      break;
    default:
      item->description = "null";
      break;
  }
}

}  // namespace sdsl
