// A record descriptor checked as a stream of JSON events, with the rules of
// signal_dataset's decoder, without building the document (a descriptor is
// read for every record); only an axis's coordinate, which may have to be
// compared whole, is built, and checked by descriptor_rules.h.
#ifndef SDS_LOADER_DESCRIPTOR_STREAM_H_
#define SDS_LOADER_DESCRIPTOR_STREAM_H_

#include <cstdint>

#include "record/record_descriptor.h"

namespace sdsl {

// Fills `out`, or throws a corrupt error for anything signal_dataset refuses.
// Every descriptor is parsed in full: this is what decides, and what the
// template (descriptor_template.h) is checked against.
void ParseDescriptorStreamInFull(const uint8_t* json, uint64_t size, Descriptor* out);

}  // namespace sdsl

#endif  // SDS_LOADER_DESCRIPTOR_STREAM_H_
