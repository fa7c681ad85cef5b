// SafeTensors header and signal_dataset descriptor: sdsl::DescribeRecord
// (which runs ParseSafeTensorsHeader and ParseDescriptor), then, for a record
// that describes itself, sdsl::DecodeRecord into rows laid out from it and
// sdsl::MetadataTarget on its metadata, as a probe and a batch would.
//
// Before that, the record's descriptor is parsed twice and the two compared:
// through the fast path (descriptor_template.cc), whose template is then the
// descriptor of an earlier input (libFuzzer's inputs are mutations of one
// another, so the two often differ in a value or a byte), and in full.
//
// Input: one whole record (8-byte LE header length, JSON header, data).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/byte_io.h"
#include "base/reader_error.h"
#include "container/value_stream.h"
#include "read/record_decoder.h"
#include "record/descriptor_stream.h"
#include "record/descriptor_template.h"
#include "record/record_descriptor.h"
#include "record/safetensors_header.h"

namespace {

bool SameValue(const sdsl::MetadataValue& a, const sdsl::MetadataValue& b) {
  return a.kind == b.kind && a.key == b.key && a.integer == b.integer &&
         a.unsigned_integer == b.unsigned_integer &&
         std::memcmp(&a.real, &b.real, sizeof(double)) == 0 && a.text == b.text &&
         a.description == b.description;
}

bool SameDescriptor(const sdsl::Descriptor& a, const sdsl::Descriptor& b) {
  if (a.fields != b.fields || a.axis_lengths != b.axis_lengths ||
      a.metadata.size() != b.metadata.size()) {
    return false;
  }
  for (size_t i = 0; i < a.metadata.size(); ++i) {
    if (!SameValue(a.metadata[i], b.metadata[i])) return false;
  }
  return true;
}

// The fast path accepts what the full parse accepts, with the same result,
// and refuses what it refuses.
void CheckDescriptorFastPath(const uint8_t* input, size_t input_size) {
  if (input_size < 8) return;
  const uint64_t header_size = sdsl::LoadLE64(input);
  if (header_size > input_size - 8) return;
  sdsl::SafeTensorsHeader header;
  try {
    sdsl::ParseSafeTensorsHeader(input + 8, header_size, input_size - 8 - header_size, &header);
  } catch (const sdsl::ReaderError&) {
    return;
  }
  const sdsl::TensorEntry* descriptor = header.Find(sdsl::kDescriptorTensor);
  if (descriptor == nullptr) return;
  const uint8_t* text = input + 8 + header_size + descriptor->begin;
  const uint64_t size = descriptor->end - descriptor->begin;
  sdsl::Descriptor fast, full;
  bool fast_ok = true, full_ok = true;
  try {
    sdsl::ParseDescriptorStream(text, size, &fast);
  } catch (const sdsl::ReaderError&) {
    fast_ok = false;
  }
  try {
    sdsl::ParseDescriptorStreamInFull(text, size, &full);
  } catch (const sdsl::ReaderError&) {
    full_ok = false;
  }
  if (fast_ok != full_ok || (fast_ok && !SameDescriptor(fast, full))) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  CheckDescriptorFastPath(input, input_size);
  sdsl::RecordScratch scratch;
  try {
    sdsl::DescribeRecord(input, input_size, &scratch);
  } catch (const sdsl::ReaderError&) {
    return 0;
  }
  // Every tensor range the parser accepted lies inside the record.
  const uint64_t data_size = input_size - 8 - scratch.header.size();
  for (const sdsl::TensorEntry& tensor : scratch.parsed.tensors) {
    if (tensor.begin > tensor.end || tensor.end > data_size) __builtin_trap();
  }
  sdsl::BatchLayout layout;
  std::vector<std::string> keys;
  std::vector<std::vector<uint8_t>> rows;
  for (const auto& [name, key] : scratch.described.fields) {
    const sdsl::TensorEntry* tensor = scratch.parsed.Find(key);
    if (tensor == nullptr) continue;
    sdsl::FieldSlot slot;
    slot.name = name;
    slot.key_hint = key;
    slot.dtype = tensor->dtype;
    slot.shape = tensor->shape;
    slot.row_bytes = tensor->end - tensor->begin;
    layout.fields.push_back(slot);
    keys.push_back(key);
  }
  rows.resize(layout.fields.size() + 2);
  for (size_t f = 0; f < layout.fields.size(); ++f) {
    rows[f].resize(static_cast<size_t>(layout.fields[f].row_bytes) + 1);
    layout.fields[f].base = rows[f].data();
  }
  for (const char* key : {"label", "snr_db"}) {
    sdsl::TargetSlot target;
    target.key = key;
    target.kind = key[0] == 'l' ? 'i' : 'f';
    rows[layout.fields.size() + layout.targets.size()].resize(8);
    target.base = rows[layout.fields.size() + layout.targets.size()].data();
    layout.targets.push_back(target);
  }
  sdsl::Pieces pieces;
  pieces.Append(input, input_size);
  for (bool hinted : {true, false}) {
    sdsl::PiecesStream stream(pieces);
    try {
      sdsl::DecodeRecord(stream, input_size, layout, keys, hinted, 0, &scratch);
      if (stream.position() != input_size) __builtin_trap();
    } catch (const sdsl::ReaderError&) {
    } catch (const sdsl::KeyHintMiss&) {
    }
  }
  return 0;
}
