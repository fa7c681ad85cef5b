#include "container/simple_chunk.h"

#include <algorithm>
#include <string>

#include "base/byte_io.h"
#include "base/reader_error.h"
#include "container/codecs.h"

namespace sdsl {
namespace {

// Reads a varint at `offset` of `pieces`; returns its encoded length.
size_t VarintAt(const Pieces& pieces, uint64_t offset, uint64_t* value, const char* what) {
  uint8_t bytes[10];
  const uint64_t available = pieces.total > offset ? pieces.total - offset : 0;
  const size_t n = static_cast<size_t>(available < 10 ? available : 10);
  CopyFromPieces(pieces, offset, n, bytes);
  const uint8_t* cursor = bytes;
  if (!ReadVarint64(&cursor, bytes + n, value)) Corrupt(std::string("malformed ") + what);
  return static_cast<size_t>(cursor - bytes);
}

}  // namespace

bool ParseSimpleChunkHead(const uint8_t* data, uint64_t available, uint64_t data_size,
                          SimpleChunkHead* head) {
  if (data_size < 1) Corrupt("simple chunk has no compression byte");
  if (available < 1) return false;
  head->compression = data[0];
  if (!IsKnownCompression(head->compression)) {
    Corrupt("chunk uses unknown compression type " + std::to_string(head->compression));
  }
  const uint64_t varint_bytes = std::min<uint64_t>(available, data_size) - 1;
  const uint8_t* cursor = data + 1;
  if (!ReadVarint64(&cursor, cursor + std::min<uint64_t>(varint_bytes, 10), &head->sizes_size)) {
    // A varint cut by the end of what is held may still be whole in the file.
    if (available < data_size && varint_bytes < 10) return false;
    Corrupt("malformed record sizes length");
  }
  head->sizes_begin = static_cast<uint64_t>(cursor - data);
  if (head->sizes_size > data_size - head->sizes_begin) Corrupt("record sizes run past the chunk");
  return true;
}

uint64_t DecodeRecordSizes(const uint8_t* sizes, const uint8_t* end, const ChunkHeader& header,
                           std::vector<uint64_t>* offsets, std::vector<uint64_t>* record_sizes) {
  // Every record's size takes at least one byte: a count the sizes cannot
  // hold is refused before anything is allocated for it.
  if (header.num_records > static_cast<uint64_t>(end - sizes)) {
    Corrupt("chunk claims " + std::to_string(header.num_records) + " records but holds " +
            std::to_string(end - sizes) + " bytes of record sizes");
  }
  record_sizes->resize(static_cast<size_t>(header.num_records));
  offsets->resize(static_cast<size_t>(header.num_records));
  uint64_t total = 0;
  for (uint64_t i = 0; i < header.num_records; ++i) {
    uint64_t size;
    if (!ReadVarint64(&sizes, end, &size)) Corrupt("record sizes are truncated");
    (*offsets)[i] = total;
    (*record_sizes)[i] = size;
    if (!CheckedAdd(total, size, &total)) Corrupt("record sizes overflow");
  }
  if (sizes != end) Corrupt("record sizes have trailing bytes");
  if (total != header.decoded_data_size) {
    Corrupt("record sizes add up to " + std::to_string(total) + " bytes, not the " +
            std::to_string(header.decoded_data_size) + " the chunk header declares");
  }
  return total;
}

namespace {

void CheckDecodedLimit(const ChunkHeader& header, uint64_t max_decoded_size) {
  if (header.decoded_data_size > max_decoded_size) {
    Corrupt("chunk claims " + std::to_string(header.decoded_data_size) +
            " decoded bytes, over the limit of " + std::to_string(max_decoded_size));
  }
}

// The record sizes at [sizes_begin, sizes_end), compressed as `head` says,
// into out's sizes and offsets. `out->parts` is free for working pieces.
void DecodeSizes(const ChunkHeader& header, const SimpleChunkHead& head, const uint8_t* sizes_begin,
                 const uint8_t* sizes_end, std::vector<uint8_t>* scratch, SimpleChunk* out) {
  out->compression = head.compression;
  out->values_begin = head.values_begin();
  if (head.compression != kNoCompression) {
    uint64_t decoded_sizes_size;
    const uint8_t* p = sizes_begin;
    if (!ReadVarint64(&p, sizes_end, &decoded_sizes_size)) Corrupt("malformed record sizes");
    if (decoded_sizes_size > 10 * header.num_records || decoded_sizes_size < header.num_records) {
      Corrupt("record sizes claim " + std::to_string(decoded_sizes_size) + " bytes for " +
              std::to_string(header.num_records) + " records");
    }
    // sizes_begin points into the chunk, not into the pieces: they are free.
    Pieces& compressed = out->parts;
    compressed.Clear();
    compressed.Append(p, static_cast<size_t>(sizes_end - p));
    CheckDecodedSize(head.compression, compressed, decoded_sizes_size, "record sizes");
    DecompressInto(head.compression, p, static_cast<size_t>(sizes_end - p), decoded_sizes_size,
                   scratch, "record sizes");
    sizes_begin = scratch->data();
    sizes_end = sizes_begin + scratch->size();
  }
  out->decoded_size = DecodeRecordSizes(sizes_begin, sizes_end, header, &out->offsets, &out->sizes);
}

}  // namespace

void ParseSimpleChunk(const Chunk& chunk, uint64_t max_decoded_size, std::vector<uint8_t>* scratch,
                      SimpleChunk* out) {
  const ChunkHeader& header = chunk.header;
  const Pieces& data = chunk.data;
  CheckDecodedLimit(header, max_decoded_size);
  // num_records needs no check of its own here: Riegeli pads a chunk to at
  // least one byte per record, and ReadChunk has bounded that extent.
  uint8_t first[11];
  const uint64_t held = std::min<uint64_t>(sizeof(first), data.total);
  CopyFromPieces(data, 0, held, first);
  SimpleChunkHead head;
  if (!ParseSimpleChunkHead(first, held, data.total, &head))
    Corrupt("malformed record sizes length");

  // The sizes buffer: num_records varints, compressed like the values.
  // Read in place when the sizes lie in one piece (a chunk read with its
  // block headers set aside always is); gathered only when a block header
  // splits them. A chunk of one short record must not pay an allocation here.
  Pieces& sizes_pieces = out->parts;
  SliceOfPieces(data, head.sizes_begin, head.sizes_size, &sizes_pieces);
  std::vector<uint8_t> gathered_sizes;
  const uint8_t* sizes_begin;
  if (sizes_pieces.spans.size() == 1) {
    sizes_begin = sizes_pieces.spans[0].data;
  } else {
    gathered_sizes.resize(static_cast<size_t>(head.sizes_size));
    CopyFromPieces(sizes_pieces, 0, head.sizes_size, gathered_sizes.data());
    sizes_begin = gathered_sizes.data();
  }
  DecodeSizes(header, head, sizes_begin, sizes_begin + head.sizes_size, scratch, out);
  FinishSimpleChunk(chunk, out);
}

bool ParseSimpleChunkSizes(const ChunkHeader& header, const uint8_t* data, uint64_t available,
                           uint64_t max_decoded_size, std::vector<uint8_t>* scratch,
                           SimpleChunk* out) {
  CheckDecodedLimit(header, max_decoded_size);
  SimpleChunkHead head;
  if (!ParseSimpleChunkHead(data, available, header.data_size, &head)) return false;
  if (head.values_begin() > available) return false;
  DecodeSizes(header, head, data + head.sizes_begin, data + head.values_begin(), scratch, out);
  return true;
}

void FinishSimpleChunk(const Chunk& chunk, SimpleChunk* out) {
  const Pieces& data = chunk.data;
  const uint64_t total = out->decoded_size;
  // The sizes were parsed from the data's first bytes, perhaps before the
  // rest was read: the data held now must reach at least past them.
  if (out->values_begin > data.total) Corrupt("record sizes run past the chunk");
  uint64_t cursor = out->values_begin;
  uint64_t values_size = data.total - cursor;
  if (out->compression != kNoCompression) {
    uint64_t declared;
    const size_t prefix = VarintAt(data, cursor, &declared, "values length");
    if (declared != total) {
      Corrupt("compressed values declare " + std::to_string(declared) +
              " bytes where the record sizes add up to " + std::to_string(total));
    }
    cursor += prefix;
    values_size -= prefix;
  } else if (values_size != total) {
    Corrupt("uncompressed values hold " + std::to_string(values_size) +
            " bytes where the record sizes add up to " + std::to_string(total));
  }
  SliceOfPieces(data, cursor, values_size, &out->values);
  // Every later buffer of the values is sized from `total`: it must be what
  // the bytes present can yield, not only what the header says.
  CheckDecodedSize(out->compression, out->values, total, "record values");
}

}  // namespace sdsl
