// What signal_dataset's decoder requires of a record descriptor, shared by
// the streaming check (descriptor_stream.h) and the whole-document one
// (record_descriptor.cc).
#ifndef SDS_LOADER_DESCRIPTOR_RULES_H_
#define SDS_LOADER_DESCRIPTOR_RULES_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "reader_error.h"

namespace sdsl {

// signal_dataset's ResourcePolicy defaults.
constexpr size_t kMaxFields = 10000;
constexpr size_t kMaxAxesPerField = 128;
constexpr size_t kMaxCoordinateValues = 10000000;
constexpr uint64_t kMaxDescriptorBytes = 16 << 20;

[[noreturn]] inline void Malformed(const std::string& why) {
  Corrupt("malformed record descriptor: " + why);
}

}  // namespace sdsl

#endif  // SDS_LOADER_DESCRIPTOR_RULES_H_
