#include "read/record_decoder.h"

#include <cstring>

#include "base/byte_io.h"
#include "base/reader_error.h"

namespace sdsl {
namespace {

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) text += shape.size() == 1 ? "," : ", ";
  }
  return text + ")";
}

// Headers up to this size are kept among the earlier ones; larger ones
// (many tensors) are rare and would hold much memory per thread.
constexpr uint64_t kEarlierHeaderBytes = 4096;
// A float in the metadata (an SNR, say) is written in 16 to 20 digits, so
// the descriptor's length, and with it the header, takes about nine values,
// five of them common: with four earlier headers, a rare one evicted a
// common one, which the next record with it parsed again.
constexpr size_t kEarlierHeaders = 8;

bool Matches(const std::vector<uint8_t>& from, uint64_t from_data_size, const uint8_t* header,
             uint64_t header_size, uint64_t data_size) {
  return from_data_size == data_size && from.size() == header_size &&
         std::memcmp(from.data(), header, static_cast<size_t>(header_size)) == 0;
}

// Makes scratch->parsed the parse of `header`: the last one parsed, one of
// the few before it (swapped in), or a new parse.
void ParseHeaderOnce(const uint8_t* header, uint64_t header_size, uint64_t data_size,
                     RecordScratch* scratch) {
  if (scratch->parsed_valid &&
      Matches(scratch->parsed_from, scratch->parsed_data_size, header, header_size, data_size)) {
    return;
  }
  for (ParsedHeader& earlier : scratch->earlier_headers) {
    if (!earlier.valid ||
        !Matches(earlier.from, earlier.data_size, header, header_size, data_size)) {
      continue;
    }
    // Swapped, so the displaced current header stays at hand in its place.
    std::swap(earlier.header, scratch->parsed);
    std::swap(earlier.from, scratch->parsed_from);
    std::swap(earlier.data_size, scratch->parsed_data_size);
    earlier.valid = scratch->parsed_valid;
    scratch->parsed_valid = true;
    return;
  }
  if (scratch->parsed_valid && scratch->parsed_from.size() <= kEarlierHeaderBytes) {
    if (scratch->earlier_headers.size() < kEarlierHeaders) scratch->earlier_headers.emplace_back();
    ParsedHeader& slot =
        scratch->earlier_headers[scratch->next_earlier++ % scratch->earlier_headers.size()];
    std::swap(slot.header, scratch->parsed);
    std::swap(slot.from, scratch->parsed_from);
    slot.data_size = scratch->parsed_data_size;
    slot.valid = true;
  }
  // A parse that throws leaves `parsed` half filled: mark it unusable first,
  // so that no later record (this scratch is pooled) matches it.
  scratch->parsed_valid = false;
  ParseSafeTensorsHeader(header, header_size, data_size, &scratch->parsed);
  scratch->parsed_from.assign(header, header + header_size);
  scratch->parsed_data_size = data_size;
  scratch->parsed_valid = true;
}

// Reads the 8-byte length and the header it announces; returns the size of
// the tensor data that follows.
uint64_t ReadHeader(ValueStream& stream, uint64_t record_size, RecordScratch* scratch) {
  if (record_size < 8)
    Corrupt("record of " + std::to_string(record_size) + " bytes has no SafeTensors header");
  uint8_t length_bytes[8];
  stream.Read(length_bytes, 8);
  const uint64_t header_size = LoadLE64(length_bytes);
  if (header_size > record_size - 8 || header_size > kMaxHeaderBytes) {
    Corrupt("SafeTensors header claims " + std::to_string(header_size) + " bytes in a " +
            std::to_string(record_size) + "-byte record");
  }
  scratch->header.resize(static_cast<size_t>(header_size));
  stream.Read(scratch->header.data(), header_size);
  const uint64_t data_size = record_size - 8 - header_size;
  ParseHeaderOnce(scratch->header.data(), header_size, data_size, scratch);
  const TensorEntry* descriptor = scratch->parsed.Find(kDescriptorTensor);
  if (descriptor == nullptr || descriptor->dtype != "U8" || descriptor->shape.size() != 1) {
    Corrupt("record lacks a one-dimensional U8 descriptor tensor");
  }
  return data_size;
}

}  // namespace

uint64_t DecodeRecord(ValueStream& stream, uint64_t record_size, const BatchLayout& layout,
                      const std::vector<std::string>& keys, bool hinted, size_t row,
                      RecordScratch* scratch, bool stop_after_fields) {
  uint64_t data_size;
  {
    const StageScope parsing(scratch->clock, Stage::kParse);
    data_size = ReadHeader(stream, record_size, scratch);
  }
  const SafeTensorsHeader& parsed = scratch->parsed;
  // Every field's tensor must exist with the batch's dtype and shape before a
  // byte of it is written.
  std::vector<const FieldSlot*>& slot_of = scratch->slot_of;
  slot_of.assign(parsed.tensors.size(), nullptr);
  for (size_t f = 0; f < layout.fields.size(); ++f) {
    const FieldSlot& slot = layout.fields[f];
    const TensorEntry* tensor = parsed.Find(keys[f]);
    const bool fits =
        tensor != nullptr && tensor->dtype == slot.dtype &&
        (slot.window_axis < 0 ? tensor->shape == slot.shape
                              : ShapeFitsWindow(slot.shape, slot.window_axis, tensor->shape));
    if (!fits) {
      if (hinted) throw KeyHintMiss{};
      const std::string found =
          tensor == nullptr ? "no such tensor" : tensor->dtype + " " + ShapeText(tensor->shape);
      Fail(ErrorKind::kSchemaMismatch, "field \"" + slot.name + "\" is " + found +
                                           " where the batch holds " + slot.dtype + " " +
                                           ShapeText(slot.shape));
    }
    slot_of[static_cast<size_t>(tensor - parsed.tensors.data())] = &slot;
  }
  const uint64_t data_begin = record_size - data_size;
  size_t fields_left = layout.fields.size();
  uint64_t position = 0;
  bool described = false;
  for (size_t t = 0; t < parsed.tensors.size(); ++t) {
    const TensorEntry& tensor = parsed.tensors[t];
    stream.Skip(tensor.begin - position);
    const uint64_t size = tensor.end - tensor.begin;
    if (slot_of[t] != nullptr) {
      const FieldSlot& slot = *slot_of[t];
      uint8_t* destination = slot.base + row * slot.row_bytes;
      --fields_left;
      if (slot.window_axis < 0) {
        stream.Read(destination, size);
      } else {
        const WindowRuns runs =
            PlanWindow(slot.shape, slot.window_axis, tensor.shape, DtypeItemSize(tensor.dtype),
                       layout.window.starts[row], layout.window.pad, slot.name);
        ReadWindow(stream, runs, destination);
        if (slot.lengths != nullptr) {
          const int64_t valid = static_cast<int64_t>(runs.valid);
          std::memcpy(slot.lengths + row * sizeof(int64_t), &valid, sizeof(int64_t));
        }
        if (stop_after_fields && fields_left == 0) return data_begin + tensor.begin + runs.end();
        stream.Skip(size - runs.end());
      }
    } else if (tensor.key == kDescriptorTensor) {
      const StageScope parsing(scratch->clock, Stage::kParse);
      scratch->descriptor.resize(static_cast<size_t>(size));
      stream.Read(scratch->descriptor.data(), size);
      ParseDescriptor(scratch->descriptor.data(), size, &scratch->described);
      CheckDescriptorTensors(scratch->described, parsed);
      described = true;
    } else {
      stream.Skip(size);
    }
    position = tensor.end;
  }
  stream.Skip(data_size - position);
  if (!described) Corrupt("record lacks its descriptor");
  for (size_t f = 0; f < layout.fields.size(); ++f) {
    const std::string* tensor = scratch->described.TensorOf(layout.fields[f].name);
    if (tensor == nullptr || *tensor != keys[f]) {
      if (hinted) throw KeyHintMiss{};
      Fail(ErrorKind::kSchemaMismatch, "has no field \"" + layout.fields[f].name + "\"");
    }
  }
  for (const TargetSlot& target : layout.targets) {
    const TargetValue value = MetadataTarget(scratch->described, target.key, target.kind);
    if (target.kind == 'i') {
      std::memcpy(target.base + row * sizeof(int64_t), &value.as_int, sizeof(int64_t));
    } else {
      std::memcpy(target.base + row * sizeof(double), &value.as_float, sizeof(double));
    }
  }
  return record_size;
}

const SafeTensorsHeader* PeekRecordHeader(const uint8_t* bytes, uint64_t available,
                                          uint64_t record_size, RecordScratch* scratch,
                                          uint64_t* data_begin) {
  if (record_size < 8 || available < 8) return nullptr;
  const uint64_t header_size = LoadLE64(bytes);
  if (header_size > record_size - 8 || header_size > kMaxHeaderBytes ||
      header_size > available - 8) {
    return nullptr;
  }
  try {
    ParseHeaderOnce(bytes + 8, header_size, record_size - 8 - header_size, scratch);
  } catch (const ReaderError&) {
    return nullptr;  // DecodeRecord meets the same header and reports it
  }
  *data_begin = 8 + header_size;
  return &scratch->parsed;
}

ByteSpan DescribeRecord(const uint8_t* record, uint64_t size, RecordScratch* scratch) {
  Pieces pieces;
  pieces.Append(record, static_cast<size_t>(size));
  PiecesStream stream(pieces);
  ReadHeader(stream, size, scratch);
  const TensorEntry* descriptor = scratch->parsed.Find(kDescriptorTensor);
  const uint64_t data_begin = 8 + scratch->header.size();
  const ByteSpan bytes{record + data_begin + descriptor->begin,
                       static_cast<size_t>(descriptor->end - descriptor->begin)};
  ParseDescriptor(bytes.data, bytes.size, &scratch->described);
  CheckDescriptorTensors(scratch->described, scratch->parsed);
  return bytes;
}

std::vector<std::string> ResolveKeys(const uint8_t* record, uint64_t size,
                                     const BatchLayout& layout, RecordScratch* scratch) {
  DescribeRecord(record, size, scratch);
  std::vector<std::string> keys;
  for (const FieldSlot& slot : layout.fields) {
    const std::string* tensor = scratch->described.TensorOf(slot.name);
    if (tensor == nullptr) Fail(ErrorKind::kSchemaMismatch, "has no field \"" + slot.name + "\"");
    keys.push_back(*tensor);
  }
  return keys;
}

}  // namespace sdsl
