// Chunk decoding for each compression: sdsl::ParseSimpleChunk, then every
// record's values through the streaming path (ZstdStream or PiecesStream, as
// the reader uses them) and through sdsl::MaterializeValues.
//
// Input: 16 bytes of chunk header fields (num_records u64 LE, decoded size u64
// LE), then the chunk data. The data is split into two pieces at a point
// taken from the header bytes, as a block header would split it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/byte_io.h"
#include "base/reader_error.h"
#include "container/codecs.h"
#include "container/riegeli_chunk.h"
#include "container/simple_chunk.h"
#include "container/value_stream.h"
#include "read/materialize.h"

namespace {
// The limit the reader itself parses under: what bounds memory here must be
// what bounds it in production (each size checked against what the bytes
// can yield), not a cap only the fuzzer has.
constexpr uint64_t kMaxDecoded = sdsl::kMaxMaterializedBytes;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  if (input_size < 16) return 0;
  static sdsl::WorkerScratch* scratch = new sdsl::WorkerScratch();
  const uint64_t raw_records = sdsl::LoadLE64(input);
  const uint64_t decoded = sdsl::LoadLE64(input + 8);
  const uint8_t* data = input + 16;
  const size_t size = input_size - 16;
  sdsl::Chunk chunk;
  chunk.header.type = sdsl::kSimpleChunk;
  // ReadChunk bounds num_records by the room the chunk has in its file; the
  // low 56 bits, reduced to that room, stand in for it here.
  chunk.header.num_records = (raw_records & ((uint64_t{1} << 56) - 1)) % (size + 64);
  chunk.header.decoded_data_size = decoded;
  chunk.header.data_size = size;
  const size_t split = size ? static_cast<size_t>(raw_records >> 56) % (size + 1) : 0;
  chunk.data.Append(data, split);
  chunk.data.Append(data + split, size - split);
  try {
    sdsl::SimpleChunk parsed;
    sdsl::ParseSimpleChunk(chunk, kMaxDecoded, &scratch->sizes, &parsed);
    if (parsed.sizes.size() != chunk.header.num_records) __builtin_trap();
    // Streaming: read odd records, skip even ones, as a batch would.
    std::unique_ptr<sdsl::ValueStream> stream;
    sdsl::Pieces decoded_pieces;
    const uint8_t* materialized = nullptr;
    if (parsed.compression == sdsl::kNoCompression) {
      stream = std::make_unique<sdsl::PiecesStream>(parsed.values);
    } else if (parsed.compression == sdsl::kZstd &&
               sdsl::ZstdFrameStreams(parsed.values, parsed.decoded_size)) {
      stream = std::make_unique<sdsl::ZstdStream>(scratch->zstd, parsed.values, parsed.decoded_size,
                                                  &scratch->discard);
    } else {
      sdsl::MaterializeValues(parsed, scratch, &materialized);
      decoded_pieces.Append(materialized, static_cast<size_t>(parsed.decoded_size));
      stream = std::make_unique<sdsl::PiecesStream>(decoded_pieces);
    }
    std::vector<uint8_t> record;
    for (size_t i = 0; i < parsed.sizes.size(); ++i) {
      if (i % 2 == 0) {
        stream->Skip(parsed.sizes[i]);
      } else {
        record.resize(static_cast<size_t>(parsed.sizes[i]));
        stream->Read(record.data(), record.size());
      }
    }
    if (parsed.compression != sdsl::kSnappy && parsed.compression != sdsl::kBrotli) {
      sdsl::MaterializeValues(parsed, scratch, &materialized);
    }
  } catch (const sdsl::ReaderError&) {
  }
  return 0;
}
