// What signal_dataset's decoder requires of a record descriptor. The
// descriptor is checked as a stream of events (descriptor_stream.cc); the
// parts that must be compared whole (an axis's coordinate, which axes sharing
// an id must agree on) are captured as small documents and checked here.
#ifndef SDS_LOADER_DESCRIPTOR_RULES_H_
#define SDS_LOADER_DESCRIPTOR_RULES_H_

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/reader_error.h"

namespace sdsl {

// signal_dataset's ResourcePolicy defaults.
constexpr size_t kMaxFields = 10000;
constexpr size_t kMaxAxesPerField = 128;
constexpr size_t kMaxCoordinateValues = 10000000;
constexpr uint64_t kMaxDescriptorBytes = 16 << 20;

[[noreturn]] inline void Malformed(const std::string& why) {
  Corrupt("malformed record descriptor: " + why);
}

// signal_dataset reads optional metadata as `value or {}`: any false-y JSON
// value stands for no metadata, anything else must be an object. Returns the
// metadata object (empty for none).
nlohmann::json MetadataOf(const nlohmann::json& parent, const char* key, const std::string& where);

// An axis's coordinate (an object), checked as signal_dataset's Coordinate
// is and normalized as it compares: every member present, absent ones null,
// metadata an object. Appends a non-empty reference to `references`.
nlohmann::json CheckCoordinate(const nlohmann::json& coordinate, uint64_t length,
                               const std::string& where, std::vector<std::string>* references);

}  // namespace sdsl

#endif  // SDS_LOADER_DESCRIPTOR_RULES_H_
