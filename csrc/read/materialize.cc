#include "read/materialize.h"

#include <string>
#include <vector>

#include "base/reader_error.h"
#include "container/codecs.h"

namespace sdsl {
namespace {

// zstd chunks up to kOneShotZstdBytes decoded are decoded in one call into
// scratch. The streaming decoder copies every block out of its own buffer
// into the destination (a frame of unknown size never decodes in place),
// which cost a fifth of a record's time; one shot writes each byte once, and
// a record then costs one copy out of a buffer still in cache. Larger chunks
// stream, when their frame allows it, so that memory stays bounded.
bool StreamsZstd(const SimpleChunk& parsed) {
  return parsed.compression == kZstd && parsed.decoded_size > kOneShotZstdBytes &&
         ZstdFrameStreams(parsed.values, parsed.decoded_size);
}

}  // namespace

void MaterializeValues(const SimpleChunk& parsed, WorkerScratch* scratch, const uint8_t** values) {
  if (parsed.decoded_size > scratch->max_materialized) {
    Corrupt(
        "chunk claims " + std::to_string(parsed.decoded_size) + " decoded bytes, more than the " +
        std::to_string(scratch->max_materialized) +
        " this reader holds at once (max_chunk_bytes); the shard is damaged, or the cap too low");
  }
  // ParseSimpleChunk has bounded decoded_size by what the values can yield;
  // brotli, whose format bounds nothing useful, grows as it decodes.
  if (parsed.compression == kNoCompression) {
    scratch->values.resize(static_cast<size_t>(parsed.decoded_size));
    CopyFromPieces(parsed.values, 0, parsed.decoded_size, scratch->values.data());
    *values = scratch->values.data();
    return;
  }
  const StageScope decompressing(scratch->clock, Stage::kDecompress);
  if (StreamsZstd(parsed)) {
    scratch->values.resize(static_cast<size_t>(parsed.decoded_size));
    ZstdStream stream(scratch->zstd, parsed.values, parsed.decoded_size, &scratch->discard);
    stream.Read(scratch->values.data(), parsed.decoded_size);
  } else {
    const uint8_t* input;
    if (parsed.values.spans.size() == 1) {
      input = parsed.values.spans[0].data;
    } else {
      scratch->gathered.resize(static_cast<size_t>(parsed.values.total));
      CopyFromPieces(parsed.values, 0, parsed.values.total, scratch->gathered.data());
      input = scratch->gathered.data();
    }
    DecompressInto(parsed.compression, input, static_cast<size_t>(parsed.values.total),
                   parsed.decoded_size, &scratch->values, "record values", scratch->zstd);
  }
  *values = scratch->values.data();
}

std::unique_ptr<ValueStream> OpenValueStream(const SimpleChunk& parsed, Pieces* decoded,
                                             WorkerScratch* scratch) {
  if (parsed.compression == kNoCompression) return std::make_unique<PiecesStream>(parsed.values);
  if (StreamsZstd(parsed)) {
    return std::make_unique<ZstdStream>(scratch->zstd, parsed.values, parsed.decoded_size,
                                        &scratch->discard);
  }
  const uint8_t* values;
  MaterializeValues(parsed, scratch, &values);
  decoded->Clear();
  decoded->Append(values, static_cast<size_t>(parsed.decoded_size));
  return std::make_unique<PiecesStream>(*decoded);
}

void CheckMaterializable(uint64_t record_size, const WorkerScratch& scratch) {
  if (record_size > scratch.max_materialized) {
    Corrupt(
        "record claims " + std::to_string(record_size) + " bytes, more than the " +
        std::to_string(scratch.max_materialized) +
        " this reader holds at once (max_chunk_bytes); the shard is damaged, or the cap too low");
  }
}

}  // namespace sdsl
