// One SafeTensors record, decoded from a value stream straight into its row
// of each output array.
#ifndef SDS_LOADER_RECORD_DECODER_H_
#define SDS_LOADER_RECORD_DECODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/row_finisher.h"
#include "base/stage_clock.h"
#include "container/value_stream.h"
#include "read/window_plan.h"
#include "record/record_descriptor.h"
#include "record/safetensors_header.h"

namespace sdsl {

// One output array, one row per batch position.
struct FieldSlot {
  std::string name;
  std::string key_hint;  // the tensor key the field had in the last record seen
  std::string dtype;
  std::vector<uint64_t> shape;
  uint64_t row_bytes = 0;
  uint8_t* base = nullptr;
  // The axis of `shape` the batch's window cuts (-1: the field is read
  // whole); `shape` then holds the window's length there.
  int window_axis = -1;
  uint8_t* lengths = nullptr;  // int64 per row: positions of the window the record holds
};

struct TargetSlot {
  std::string key;
  char kind = 'i';  // 'i': int64 rows, 'f': float64 rows
  uint8_t* base = nullptr;
};

struct BatchLayout {
  std::vector<FieldSlot> fields;
  std::vector<TargetSlot> targets;
  WindowSpec window;
  // Run on each row once it holds its record (null: nothing).
  const RowFinisher* finisher = nullptr;
};

// A SafeTensors header parsed earlier, with the bytes it was parsed from.
struct ParsedHeader {
  std::vector<uint8_t> from;
  uint64_t data_size = 0;
  bool valid = false;
  SafeTensorsHeader header;
};

struct RecordScratch {
  // The timed run's clock, as WorkerScratch::clock (null: not timed).
  StageClock* clock = nullptr;
  std::vector<uint8_t> header;
  // Records of one dataset usually share a header byte for byte; the last
  // one parsed is kept so that an identical header is not parsed again.
  std::vector<uint8_t> parsed_from;
  uint64_t parsed_data_size = 0;
  bool parsed_valid = false;  // false while `parsed` is being (re)built
  // A few headers parsed before the last: headers differ where the
  // descriptor's length does (an id or a number one digit longer), so most
  // records alternate between a handful of them.
  std::vector<ParsedHeader> earlier_headers;
  size_t next_earlier = 0;  // the slot the next displaced header goes to
  std::vector<uint8_t> descriptor;
  SafeTensorsHeader parsed;
  Descriptor described;
  std::vector<const FieldSlot*> slot_of;  // per tensor of `parsed`, the row it fills
};

// Raised when a streamed record's descriptor maps a field to another tensor
// than the hint assumed. The caller decodes that record again with its keys
// resolved first; the bytes already written to its row are overwritten.
struct KeyHintMiss {};

// Consumes exactly `record_size` bytes of `stream`, writing each field of
// `layout` (found under `keys[i]`) into row `row`. With `hinted` set, a key
// that turns out wrong raises KeyHintMiss; otherwise the keys are the
// record's own and a disagreement is a schema mismatch.
//
// With `stop_after_fields` (a window read from a zstd stream, no targets),
// decoding stops after the last byte a field needs: the descriptor, stored
// after the tensors, is not read, so the keys are trusted as the SafeTensors
// header confirms them (dtype and shape). Returns the bytes consumed.
uint64_t DecodeRecord(ValueStream& stream, uint64_t record_size, const BatchLayout& layout,
                      const std::vector<std::string>& keys, bool hinted, size_t row,
                      RecordScratch* scratch, bool stop_after_fields = false);

// The SafeTensors header of a record whose first `available` bytes are at
// `bytes`, parsed through the cache DecodeRecord uses, so that decoding the
// record next does not parse it again; *data_begin is where its tensor data
// begins in the record. nullptr when the header does not fit in `available`
// or fails to parse (DecodeRecord then reports why). Nothing is verified yet:
// this only says where the record's tensors should lie.
const SafeTensorsHeader* PeekRecordHeader(const uint8_t* bytes, uint64_t available,
                                          uint64_t record_size, RecordScratch* scratch,
                                          uint64_t* data_begin);

// Reads a whole in-memory record's header and descriptor. Returns where the
// descriptor's bytes lie in `record`.
ByteSpan DescribeRecord(const uint8_t* record, uint64_t size, RecordScratch* scratch);

// The tensor key of each field of `layout`, from an in-memory record.
std::vector<std::string> ResolveKeys(const uint8_t* record, uint64_t size,
                                     const BatchLayout& layout, RecordScratch* scratch);

}  // namespace sdsl

#endif  // SDS_LOADER_RECORD_DECODER_H_
