// A record descriptor checked as a stream of JSON events, with the same rules
// as signal_dataset's decoder (descriptor_rules.h), without building the
// document: the per-record path of the reader.
#ifndef SDS_LOADER_DESCRIPTOR_STREAM_H_
#define SDS_LOADER_DESCRIPTOR_STREAM_H_

#include <cstdint>

#include "record_descriptor.h"

namespace sdsl {

// Fills `out`, or throws a corrupt error for anything signal_dataset refuses.
// Returns false, having decided nothing, for a descriptor with an axis that
// has both an id and a coordinate: axes sharing an id must agree on their
// whole coordinate, which only the document check compares.
bool ParseDescriptorStream(const uint8_t* json, uint64_t size, Descriptor* out);

}  // namespace sdsl

#endif  // SDS_LOADER_DESCRIPTOR_STREAM_H_
