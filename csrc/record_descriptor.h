// signal_dataset's per-record descriptor: which tensor holds each field, and
// the record's metadata, from which batch targets are taken.
#ifndef SDS_LOADER_RECORD_DESCRIPTOR_H_
#define SDS_LOADER_RECORD_DESCRIPTOR_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sdsl {

struct MetadataValue {
  enum Kind { kBool, kInteger, kUnsigned, kFloat, kOther } kind = kOther;
  std::string key;
  int64_t integer = 0;
  uint64_t unsigned_integer = 0;
  double real = 0;
  std::string description;  // for kOther: what the value is, for the error
};

struct Descriptor {
  std::vector<std::pair<std::string, std::string>> fields;  // field name -> tensor key, sorted
  std::vector<MetadataValue> metadata;                      // the top-level metadata entries
  const std::string* TensorOf(const std::string& field) const;
};

// Parsed as a stream of JSON events, keeping only the field map and the
// metadata's scalars: a descriptor is read for every record, and building a
// whole document for it cost as much as hashing the record.
void ParseDescriptor(const uint8_t* json, uint64_t size, Descriptor* out);

// The descriptor's metadata object as JSON text (for learning target kinds).
std::string DescriptorMetadataJson(const uint8_t* json, uint64_t size);

// A metadata target's value, as int64 (kind 'i') or float64 (kind 'f').
// Throws kTarget when `key` is missing or not a scalar number or bool.
struct TargetValue {
  int64_t as_int = 0;
  double as_float = 0;
};
TargetValue MetadataTarget(const Descriptor& descriptor, const std::string& key, char kind);

}  // namespace sdsl

#endif  // SDS_LOADER_RECORD_DESCRIPTOR_H_
