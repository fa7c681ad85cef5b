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
  // kBigInteger: an integer past 64 bits, which Python keeps exact; `text`
  // holds its digits and `real` its rounding.
  enum Kind { kBool, kInteger, kUnsigned, kFloat, kBigInteger, kOther } kind = kOther;
  std::string key;
  int64_t integer = 0;
  uint64_t unsigned_integer = 0;
  double real = 0;
  std::string text;         // for kBigInteger
  std::string description;  // for kOther: what the value is, for the error
};

struct Descriptor {
  std::vector<std::pair<std::string, std::string>> fields;  // field name -> tensor key, sorted
  std::vector<std::vector<uint64_t>> axis_lengths;          // per entry of `fields`
  std::vector<MetadataValue> metadata;                      // the top-level metadata entries
  const std::string* TensorOf(const std::string& field) const;
};

// Checks the descriptor as signal_dataset's decoder does (required keys and
// their types, axes, coordinates, metadata objects, shared axis ids), keeping
// the field map, each field's axis lengths and the metadata's scalars. Whatever
// signal_dataset refuses as a malformed descriptor is a corrupt error here.
//
// The descriptor is checked as a stream of JSON events (descriptor_stream.h),
// which allocates next to nothing: a descriptor is read for every record,
// and building its document cost a fifth of reading a small record. Most
// match the one before them and skip even that (descriptor_template.h).
void ParseDescriptor(const uint8_t* json, uint64_t size, Descriptor* out);

struct SafeTensorsHeader;
// The descriptor against its record's tensors: every field's tensor present
// with one axis per dimension of the same length, and every tensor but the
// descriptor's own claimed by some field.
void CheckDescriptorTensors(const Descriptor& descriptor, const SafeTensorsHeader& header);

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
