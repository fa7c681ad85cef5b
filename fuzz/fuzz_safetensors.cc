// SafeTensors header and signal_dataset descriptor: sdsl::DescribeRecord
// (which runs ParseSafeTensorsHeader and ParseDescriptor), then, for a record
// that describes itself, sdsl::DecodeRecord into rows laid out from it and
// sdsl::MetadataTarget on its metadata, as a probe and a batch would.
//
// Input: one whole record (8-byte LE header length, JSON header, data).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/reader_error.h"
#include "container/value_stream.h"
#include "read/record_decoder.h"
#include "record/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
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
