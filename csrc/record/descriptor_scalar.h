// One scalar of a record descriptor, whatever its type: what the streaming
// checker (descriptor_stream.h) takes from the parser's events and the
// template (descriptor_template.h) from a slot's token. Both turn it into a
// metadata entry's value with SetMetadataValue, so that a descriptor matched
// by the template gives the very values its full parse gives.
#ifndef SDS_LOADER_DESCRIPTOR_SCALAR_H_
#define SDS_LOADER_DESCRIPTOR_SCALAR_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "record/record_descriptor.h"

namespace sdsl {

struct DescriptorScalar {
  nlohmann::json::value_t type = nlohmann::json::value_t::null;
  bool boolean = false;
  int64_t integer = 0;
  uint64_t unsigned_integer = 0;
  double real = 0;
  const std::string* text = nullptr;

  // value_t::binary stands for an integer past 64 bits, `text` its digits.
  bool is_number() const {
    return type == nlohmann::json::value_t::number_integer ||
           type == nlohmann::json::value_t::number_unsigned ||
           type == nlohmann::json::value_t::number_float || type == nlohmann::json::value_t::binary;
  }
  bool is_string() const { return type == nlohmann::json::value_t::string; }
  bool is_null() const { return type == nlohmann::json::value_t::null; }
  // Python's truth value, which signal_dataset's `value or {}` tests.
  bool falsy() const {
    switch (type) {
      case nlohmann::json::value_t::null:
        return true;
      case nlohmann::json::value_t::boolean:
        return !boolean;
      case nlohmann::json::value_t::number_integer:
        return integer == 0;
      case nlohmann::json::value_t::number_unsigned:
        return unsigned_integer == 0;
      case nlohmann::json::value_t::number_float:
        return real == 0;
      case nlohmann::json::value_t::string:
        return text->empty();
      default:
        return false;
    }
  }
};

// A top-level metadata entry's value, from its scalar: what a batch target
// reads, or for anything else a description for the error.
void SetMetadataValue(const DescriptorScalar& value, MetadataValue* item);

}  // namespace sdsl

#endif  // SDS_LOADER_DESCRIPTOR_SCALAR_H_
