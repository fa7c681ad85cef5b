#include "read/annotation_rows.h"

#include <optional>

#include "base/reader_error.h"
#include "read/record_bytes.h"
#include "read/record_decoder.h"
#include "read/run_decoder.h"
#include "record/json_events.h"
#include "record/safetensors_header.h"

namespace sdsl {
namespace {

// The few values a row's identity and status need, picked out of a JSON
// document as its events stream past: the top-level "id", and "source_index",
// "status" and "empty_fields" of metadata.annotation. Building a document for
// them cost more than reading the row (nlohmann's lexer spends about 90
// instructions a byte); the descriptor as a whole is checked by
// DescribeRecord, with the same rules as a data record's.
class RowFacts {
 public:
  enum Kind { kAbsent, kString, kUnsigned, kOtherNumber, kBool, kOther };
  struct Value {
    Kind kind = kAbsent;
    std::string text;
    uint64_t number = 0;
    bool flag = false;
  };
  Value id, source_index, status, empty_fields;
  bool annotation_object = false;

  void Restart() { *this = RowFacts(); }
  bool null() { return Scalar(kOther, nullptr, 0, false); }
  bool boolean(bool value) { return Scalar(kBool, nullptr, 0, value); }
  bool number_integer(int64_t) { return Scalar(kOtherNumber, nullptr, 0, false); }
  bool number_unsigned(uint64_t value) { return Scalar(kUnsigned, nullptr, value, false); }
  bool number_float(double, const std::string&) { return Scalar(kOtherNumber, nullptr, 0, false); }
  bool number_big_integer(double, const std::string&) {
    return Scalar(kOtherNumber, nullptr, 0, false);
  }
  bool string(std::string& value) { return Scalar(kString, &value, 0, false); }
  bool key(std::string& value) {
    if (depth_ >= 1 && depth_ <= kTracked) keys_[depth_ - 1] = value;
    return true;
  }
  bool start_object(std::size_t) {
    Value* slot = Slot();
    if (slot != nullptr) Set(slot, kOther, nullptr, 0, false);
    if (depth_ == 2 && keys_[0] == "metadata" && keys_[1] == "annotation") {
      if (annotation_object) Corrupt("the descriptor holds two \"annotation\" objects");
      annotation_object = true;
    }
    return Enter(false);
  }
  bool end_object() { return Leave(); }
  bool start_array(std::size_t) {
    Value* slot = Slot();
    if (slot != nullptr) Set(slot, kOther, nullptr, 0, false);
    return Enter(true);
  }
  bool end_array() { return Leave(); }

 private:
  static constexpr int kTracked = 3;

  bool Enter(bool array) {
    ++depth_;
    if (depth_ <= kTracked) keys_[depth_ - 1].clear();
    if (depth_ <= kTracked) in_array_[depth_ - 1] = array;
    return true;
  }
  bool Leave() {
    --depth_;
    return true;
  }
  // The value the current position names, or null.
  Value* Slot() {
    for (int d = 0; d < depth_ && d < kTracked; ++d) {
      if (in_array_[d]) return nullptr;
    }
    if (depth_ == 1 && keys_[0] == "id") return &id;
    if (depth_ == 3 && keys_[0] == "metadata" && keys_[1] == "annotation") {
      if (keys_[2] == "source_index") return &source_index;
      if (keys_[2] == "status") return &status;
      if (keys_[2] == "empty_fields") return &empty_fields;
    }
    return nullptr;
  }
  bool Scalar(Kind kind, const std::string* text, uint64_t number, bool flag) {
    Value* slot = Slot();
    if (slot != nullptr) Set(slot, kind, text, number, flag);
    return true;
  }
  static void Set(Value* slot, Kind kind, const std::string* text, uint64_t number, bool flag) {
    if (slot->kind != kAbsent) Corrupt("a JSON object holds one key twice");
    slot->kind = kind;
    if (text != nullptr) slot->text = *text;
    slot->number = number;
    slot->flag = flag;
  }

  int depth_ = 0;
  std::string keys_[kTracked];
  bool in_array_[kTracked] = {false, false, false};
};

void ParseFacts(const uint8_t* text, size_t size, const char* what, RowFacts* facts) {
  facts->Restart();
  ParseJsonEvents(text, size, facts, what);
}

// A batch's items are kept in memory twice at most (here and in the arrays
// the binding returns); past this, a batch is not a batch.
constexpr uint64_t kMaxAnnotationBatchBytes = uint64_t{1} << 38;

uint8_t StatusCode(const RowFacts::Value& status) {
  if (status.kind != RowFacts::kString) Corrupt("annotation status must be a string");
  const std::string& text = status.text;
  if (text == "success") return 0;
  if (text == "skipped") return 1;
  if (text == "failed") return 2;
  Corrupt("annotation status \"" + text + "\" is none of success, skipped, failed");
}

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string text = "(";
  for (size_t d = 0; d < shape.size(); ++d) {
    text += std::to_string(shape[d]);
    if (d + 1 < shape.size() || shape.size() == 1) text += ",";
    if (d + 1 < shape.size()) text += " ";
  }
  return text + ")";
}

// The id a metadata-shard record (compact JSON, no tensors) names.
std::string MetadataId(const std::string& payload, RowFacts* facts) {
  ParseFacts(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), "record metadata",
             facts);
  if (facts->id.kind != RowFacts::kString) Corrupt("record metadata has no string id");
  return facts->id.text;
}

// Appends one row's tensor for `field` (or nothing), fixing the field's
// dtype and item shape from the first row that has it.
void AppendItems(const TensorEntry& tensor, const uint8_t* data, int64_t ordinal,
                 AnnotationField* field, uint64_t* total) {
  if (tensor.shape.empty()) {
    Corrupt("annotation field \"" + field->name + "\" is a scalar; items need a first axis");
  }
  const std::vector<uint64_t> item_shape(tensor.shape.begin() + 1, tensor.shape.end());
  if (field->first_ordinal < 0) {
    field->dtype = tensor.dtype;
    field->item_shape = item_shape;
    field->first_ordinal = ordinal;
  } else if (tensor.dtype != field->dtype || item_shape != field->item_shape) {
    Fail(ErrorKind::kSchemaMismatch,
         "annotation field \"" + field->name + "\" holds " + tensor.dtype + " items of shape " +
             ShapeText(item_shape) + " in record " + std::to_string(ordinal) + " but " +
             field->dtype + " items of shape " + ShapeText(field->item_shape) + " in record " +
             std::to_string(field->first_ordinal) +
             "; one batch array per field needs every row to agree past the first axis");
  }
  const uint64_t size = tensor.end - tensor.begin;
  if (size > kMaxAnnotationBatchBytes - *total) {
    Fail(ErrorKind::kArgument, "a batch's annotation items exceed " +
                                   std::to_string(kMaxAnnotationBatchBytes) +
                                   " bytes; read smaller batches");
  }
  *total += size;
  field->bytes.insert(field->bytes.end(), data + tensor.begin, data + tensor.end);
  field->counts.back() = static_cast<int64_t>(tensor.shape[0]);
}

}  // namespace

AnnotationBatch ReadAnnotationRows(ShardSet& rows, ShardSet& metadata, Verify verify,
                                   const int64_t* row_files, const int64_t* row_records,
                                   const int64_t* meta_files, const int64_t* meta_records,
                                   const int64_t* ordinals, size_t count,
                                   const std::vector<std::string>& fields) {
  // Both reads go through the chunk reader data records use: verified,
  // decompressed once per chunk, consecutive rows of a chunk decoded once.
  const std::vector<std::optional<std::string>> payloads =
      ReadRecordBytes(rows, verify, row_files, row_records, count);
  const std::vector<std::optional<std::string>> sources =
      ReadRecordBytes(metadata, verify, meta_files, meta_records, count);
  AnnotationBatch batch;
  batch.status.resize(count);
  batch.ids.resize(count);
  batch.fields.resize(fields.size());
  for (size_t f = 0; f < fields.size(); ++f) {
    batch.fields[f].name = fields[f];
    batch.fields[f].counts.reserve(count);
  }
  RecordScratch scratch;
  RowFacts facts;
  uint64_t total = 0;
  for (size_t k = 0; k < count; ++k) {
    const int64_t ordinal = ordinals[k];
    // Built only on the way out of a failed row: most batches never need it.
    const auto context = [&]() {
      return RecordContext(rows.Open(static_cast<size_t>(row_files[k]))->file->path(), ordinal,
                           static_cast<uint64_t>(row_records[k]));
    };
    if (!payloads[k] || !sources[k]) {
      Fail(ErrorKind::kUnsupported,
           context() + ": the row or its record's metadata is in a transposed chunk, which this "
                       "reader does not decode; read the set with signal_dataset's AnnotationSet");
    }
    for (AnnotationField& field : batch.fields) field.counts.push_back(0);
    try {
      const std::string& payload = *payloads[k];
      const uint8_t* record = reinterpret_cast<const uint8_t*>(payload.data());
      const ByteSpan descriptor = DescribeRecord(record, payload.size(), &scratch);
      ParseFacts(descriptor.data, descriptor.size, "descriptor", &facts);
      if (!facts.annotation_object) {
        Corrupt("the descriptor's metadata holds no \"annotation\" object; this is not a row "
                "of an annotation set");
      }
      const RowFacts::Value& index = facts.source_index;
      if (index.kind != RowFacts::kUnsigned && index.kind != RowFacts::kOtherNumber) {
        Corrupt("annotation source_index must be an integer");
      }
      if (index.kind != RowFacts::kUnsigned || index.number != static_cast<uint64_t>(ordinal)) {
        Corrupt(
            "annotation row identity does not match source ordinal: the row says source_index " +
            (index.kind == RowFacts::kUnsigned
                 ? std::to_string(index.number)
                 : std::string("that is not a non-negative integer")) +
            ", the dataset reads it as record " + std::to_string(ordinal));
      }
      batch.status[k] = StatusCode(facts.status);
      if (facts.empty_fields.kind != RowFacts::kBool) {
        Corrupt("annotation empty_fields must be boolean");
      }
      const bool empty_fields = facts.empty_fields.flag;
      if (facts.id.kind != RowFacts::kString) Corrupt("the descriptor has no string id");
      batch.ids[k] = std::move(facts.id.text);
      const std::string expected = MetadataId(*sources[k], &facts);
      if (batch.ids[k] != expected) {
        Corrupt("annotation row identity does not match source ordinal: the row's id is \"" +
                batch.ids[k] + "\", the record's is \"" + expected + "\"");
      }
      if (batch.status[k] != 0 || empty_fields) continue;
      const uint8_t* data = record + 8 + scratch.header.size();
      for (AnnotationField& field : batch.fields) {
        const std::string* key = scratch.described.TensorOf(field.name);
        if (key == nullptr) continue;
        const TensorEntry* tensor = scratch.parsed.Find(*key);
        if (tensor == nullptr) Corrupt("descriptor names tensor \"" + *key + "\", which is absent");
        AppendItems(*tensor, data, ordinal, &field, &total);
      }
    } catch (const ReaderError& error) {
      if (error.kind() == ErrorKind::kSchemaMismatch || error.kind() == ErrorKind::kArgument) throw;
      throw ReaderError(error.kind(), context() + ": " + error.what(), error.os_error());
    }
  }
  return batch;
}

}  // namespace sdsl
