#include "annotation_rows.h"

#include <optional>

#include "reader_error.h"
#include "record_bytes.h"
#include "record_decoder.h"
#include "run_decoder.h"
#include "safetensors_header.h"
#include "strict_json.h"

namespace sdsl {
namespace {

using nlohmann::json;

// A batch's items are kept in memory twice at most (here and in the arrays
// the binding returns); past this, a batch is not a batch.
constexpr uint64_t kMaxAnnotationBatchBytes = uint64_t{1} << 38;

uint8_t StatusCode(const json& status) {
  if (!status.is_string()) Corrupt("annotation status must be a string");
  const std::string& text = status.get_ref<const std::string&>();
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
std::string MetadataId(const std::string& payload) {
  const json document = ParseStrictJson(reinterpret_cast<const uint8_t*>(payload.data()),
                                        payload.size(), "record metadata");
  if (!document.is_object()) Corrupt("record metadata must be a JSON object");
  const auto id = document.find("id");
  if (id == document.end() || !id->is_string()) Corrupt("record metadata has no string id");
  return id->get<std::string>();
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

AnnotationBatch ReadAnnotationRows(ShardSet& rows, ShardSet& metadata, bool verify,
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
      const json document = ParseStrictJson(descriptor.data, descriptor.size, "descriptor");
      const json& metadata_object = document.at("metadata");
      const auto annotation = metadata_object.find("annotation");
      if (annotation == metadata_object.end() || !annotation->is_object()) {
        Corrupt("the descriptor's metadata holds no \"annotation\" object; this is not a row "
                "of an annotation set");
      }
      const auto index = annotation->find("source_index");
      if (index == annotation->end() || !(index->is_number_integer())) {
        Corrupt("annotation source_index must be an integer");
      }
      if (!index->is_number_unsigned() || index->get<uint64_t>() != static_cast<uint64_t>(ordinal)) {
        Corrupt("annotation row identity does not match source ordinal: the row says source_index " +
                index->dump() + ", the dataset reads it as record " + std::to_string(ordinal));
      }
      const auto status = annotation->find("status");
      if (status == annotation->end()) Corrupt("annotation status must be a string");
      batch.status[k] = StatusCode(*status);
      const auto empty = annotation->find("empty_fields");
      if (empty == annotation->end() || !empty->is_boolean()) {
        Corrupt("annotation empty_fields must be boolean");
      }
      const auto id = document.find("id");
      if (id == document.end() || !id->is_string()) Corrupt("the descriptor has no string id");
      batch.ids[k] = id->get<std::string>();
      const std::string expected = MetadataId(*sources[k]);
      if (batch.ids[k] != expected) {
        Corrupt("annotation row identity does not match source ordinal: the row's id is \"" +
                batch.ids[k] + "\", the record's is \"" + expected + "\"");
      }
      if (batch.status[k] != 0 || empty->get<bool>()) continue;
      const uint8_t* data = record + 8 + scratch.header.size();
      for (AnnotationField& field : batch.fields) {
        const std::string* key = scratch.described.TensorOf(field.name);
        if (key == nullptr) continue;
        const TensorEntry* tensor = scratch.parsed.Find(*key);
        if (tensor == nullptr) Corrupt("descriptor names tensor \"" + *key + "\", which is absent");
        AppendItems(*tensor, data, ordinal, &field, &total);
      }
    } catch (const json::exception& error) {
      throw ReaderError(ErrorKind::kCorrupt, context() + ": invalid annotation row: " + error.what());
    } catch (const ReaderError& error) {
      if (error.kind() == ErrorKind::kSchemaMismatch || error.kind() == ErrorKind::kArgument) throw;
      throw ReaderError(error.kind(), context() + ": " + error.what(), error.os_error());
    }
  }
  return batch;
}

}  // namespace sdsl
