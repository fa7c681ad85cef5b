// The fast path of descriptor parsing: a descriptor that differs from the
// last one parsed in full on this thread only in its id's and top-level
// metadata's values is recognised without a parse (descriptor_template.cc
// says when, and why that is safe); any other goes to the streaming checker
// (descriptor_stream.h), whose result becomes the next template.
#ifndef SDS_LOADER_DESCRIPTOR_TEMPLATE_H_
#define SDS_LOADER_DESCRIPTOR_TEMPLATE_H_

#include <cstdint>

#include "record/record_descriptor.h"

namespace sdsl {

// Fills `out` as ParseDescriptorStreamInFull does, or throws what it throws.
void ParseDescriptorStream(const uint8_t* json, uint64_t size, Descriptor* out);

}  // namespace sdsl

#endif  // SDS_LOADER_DESCRIPTOR_TEMPLATE_H_
