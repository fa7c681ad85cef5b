#include "container/array_record_index.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/byte_io.h"
#include "base/reader_error.h"
#include "container/codecs.h"
#include "container/riegeli_chunk.h"
#include "container/riegeli_layout.h"
#include "container/simple_chunk.h"
#include "container/value_stream.h"

namespace sdsl {
namespace {

constexpr uint64_t kArrayRecordVersion = 1;
constexpr uint64_t kPostscriptMagic = 0x71930e704fdae05eULL;
// Every Riegeli/records file opens with the same 64 bytes: the first block
// header and the signature chunk.
constexpr uint8_t kFileSignature[64] = {
    0x83, 0xaf, 0x70, 0xd1, 0x0d, 0x88, 0x4a, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x91, 0xba, 0xc2, 0x3c, 0x92, 0x87, 0xe1, 0xa9,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe1, 0x9f, 0x13, 0xc0, 0xe9, 0xb1, 0xc3, 0x72,
    0x73, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
// A footer record is three small varints; anything far larger is corrupt.
constexpr uint64_t kMaxFooterRecordBytes = 64;

struct ProtoField {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  uint64_t varint = 0;
  const uint8_t* bytes = nullptr;
  uint64_t length = 0;
};

// Walks a serialized protobuf message, calling `visit` for each field. Only
// the wire format is needed for the three tiny messages of the footer.
template <typename Visit>
void ForEachField(const uint8_t* p, const uint8_t* end, const char* what, Visit visit) {
  while (p != end) {
    uint64_t tag;
    if (!ReadVarint64(&p, end, &tag)) Corrupt(std::string("malformed ") + what);
    ProtoField field;
    field.number = static_cast<uint32_t>(tag >> 3);
    field.wire_type = static_cast<uint32_t>(tag & 7);
    switch (field.wire_type) {
      case 0:
        if (!ReadVarint64(&p, end, &field.varint)) Corrupt(std::string("malformed ") + what);
        break;
      case 1:
        if (end - p < 8) Corrupt(std::string("malformed ") + what);
        p += 8;
        break;
      case 5:
        if (end - p < 4) Corrupt(std::string("malformed ") + what);
        p += 4;
        break;
      case 2:
        if (!ReadVarint64(&p, end, &field.length) ||
            field.length > static_cast<uint64_t>(end - p)) {
          Corrupt(std::string("malformed ") + what);
        }
        field.bytes = p;
        p += field.length;
        break;
      default:
        Corrupt(std::string("malformed ") + what);
    }
    visit(field);
  }
}

// Decodes every record of a small simple chunk into `values`.
void DecodeFooterChunk(const Chunk& chunk, uint64_t max_decoded, SimpleChunk* parsed,
                       std::vector<uint8_t>* values) {
  std::vector<uint8_t> scratch;
  ParseSimpleChunk(chunk, max_decoded, &scratch, parsed);
  if (parsed->compression == 0) {
    values->resize(static_cast<size_t>(parsed->decoded_size));
    CopyFromPieces(parsed->values, 0, parsed->decoded_size, values->data());
    return;
  }
  std::vector<uint8_t> compressed(static_cast<size_t>(parsed->values.total));
  CopyFromPieces(parsed->values, 0, parsed->values.total, compressed.data());
  DecompressInto(parsed->compression, compressed.data(), compressed.size(), parsed->decoded_size,
                 values, "footer values");
}

}  // namespace

uint64_t ShardIndex::ChunkOf(uint64_t record) const {
  if (first_records.empty()) return record;
  // first_records is ascending; the chunk is the last one starting at or before.
  const auto it = std::upper_bound(first_records.begin(), first_records.end() - 1, record);
  return static_cast<uint64_t>(it - first_records.begin()) - 1;
}

namespace {

// What is read of the last block first, to find the postscript in, and of
// the footer: a footer of a few hundred chunks fits.
constexpr uint64_t kPostscriptProbeBytes = 4096;
constexpr uint64_t kFooterProbeBytes = 16384;

// Reads the chunk at `begin` that must end by `limit` into `chunk`, whose
// bytes `buffer` then holds. A chunk is usually followed by padding up to
// `limit`: its first `probe` bytes are read, and all of [begin, limit) only
// when the chunk does not lie within them; a fault there is reported as
// `what` being unreadable.
void ReadChunkProbed(const RandomAccessBytes& file, uint64_t begin, uint64_t limit, uint64_t probe,
                     const char* what, std::vector<uint8_t>* buffer, Chunk* chunk) {
  const uint64_t whole = limit - begin;
  for (uint64_t size = std::min(whole, probe);; size = whole) {
    buffer->resize(static_cast<size_t>(size));
    file.ReadAt(begin, size, buffer->data());
    try {
      ReadChunk(FileRange{buffer->data(), begin, size}, begin, limit, /*verify_data=*/true, chunk);
      return;
    } catch (const ReaderError& error) {
      if (size == whole) Corrupt(std::string(what) + " is unreadable: " + error.what());
    }
  }
}

ShardIndex ParseShardIndex(const RandomAccessBytes& file, bool signature) {
  ShardIndex index;
  index.file_size = file.size();
  const uint64_t size = file.size();
  if (size < kBlockSize || size % kBlockSize != 0) {
    Corrupt("shard is " + std::to_string(size) +
            " bytes, not a whole number of 64 KiB blocks: it is truncated or not an "
            "ArrayRecord file");
  }
  uint8_t first[sizeof(kFileSignature)];
  if (signature) file.ReadAt(0, sizeof(first), first);
  if (signature && std::memcmp(first, kFileSignature, sizeof(first)) != 0) {
    Corrupt("file does not begin with the Riegeli/records signature: its first block header "
            "is damaged, or it is not an ArrayRecord file");
  }
  const uint64_t postscript_begin = size - kBlockSize;
  // The postscript is a few dozen bytes at the start of the last block, the
  // rest padding.
  std::vector<uint8_t> buffer;
  Chunk chunk;
  ReadChunkProbed(file, postscript_begin, size, kPostscriptProbeBytes, "postscript", &buffer,
                  &chunk);
  if (chunk.header.type != kSimpleChunk || chunk.header.num_records < 1) {
    Corrupt("postscript is not a simple chunk with records");
  }
  SimpleChunk parsed;
  std::vector<uint8_t> values;
  DecodeFooterChunk(chunk, kBlockSize, &parsed, &values);
  uint64_t footer_offset = 0, magic = 0;
  ForEachField(values.data(), values.data() + parsed.sizes[0], "postscript",
               [&](const ProtoField& field) {
                 if (field.number == 1 && field.wire_type == 0) footer_offset = field.varint;
                 if (field.number == 2 && field.wire_type == 0) magic = field.varint;
               });
  if (magic != kPostscriptMagic) Corrupt("postscript has the wrong magic number");
  if (footer_offset < 64 || footer_offset >= postscript_begin) {
    Corrupt("postscript points at footer offset " + std::to_string(footer_offset) +
            ", outside the file's data");
  }
  index.footer_offset = footer_offset;

  // The footer chunk is followed by padding up to the postscript's block,
  // most of a block when the footer is small.
  ReadChunkProbed(file, footer_offset, postscript_begin, kFooterProbeBytes, "footer", &buffer,
                  &chunk);
  if (chunk.header.type == kTransposedChunk) {
    index.transposed_footer = true;
    return index;
  }
  if (chunk.header.type != kSimpleChunk || chunk.header.num_records < 1) {
    Corrupt("footer is not a simple chunk with records");
  }
  uint64_t max_decoded;
  if (!CheckedMul(chunk.header.num_records, kMaxFooterRecordBytes, &max_decoded)) {
    Corrupt("footer claims too many records");
  }
  DecodeFooterChunk(chunk, max_decoded + 1024, &parsed, &values);

  uint64_t num_chunks = 0, num_records = 0, version = 0;
  bool has_metadata = false;
  ForEachField(values.data(), values.data() + parsed.sizes[0], "footer metadata",
               [&](const ProtoField& field) {
                 if (field.number != 1 || field.wire_type != 2) return;
                 has_metadata = true;
                 ForEachField(field.bytes, field.bytes + field.length, "footer metadata",
                              [&](const ProtoField& inner) {
                                if (inner.number == 1 && inner.wire_type == 0) {
                                  version = inner.varint;
                                } else if (inner.number == 2 && inner.wire_type == 0) {
                                  num_chunks = inner.varint;
                                } else if (inner.number == 3 && inner.wire_type == 0) {
                                  num_records = inner.varint;
                                } else if (inner.number == 4 && inner.wire_type == 2) {
                                  index.writer_options.assign(
                                      reinterpret_cast<const char*>(inner.bytes),
                                      static_cast<size_t>(inner.length));
                                }
                              });
               });
  if (!has_metadata) Corrupt("footer lacks its ArrayRecord metadata");
  // Version 1 is the only footer layout array_record writes or reads.
  if (version != kArrayRecordVersion) {
    Corrupt("footer declares ArrayRecord version " + std::to_string(version) +
            "; this reader knows version " + std::to_string(kArrayRecordVersion));
  }
  if (num_chunks != parsed.sizes.size() - 1) {
    Corrupt("footer lists " + std::to_string(parsed.sizes.size() - 1) + " chunks but declares " +
            std::to_string(num_chunks));
  }
  index.chunk_offsets.reserve(static_cast<size_t>(num_chunks));
  std::vector<uint64_t> first_records;
  first_records.reserve(static_cast<size_t>(num_chunks) + 1);
  index.min_chunk_decoded_size = num_chunks > 0 ? UINT64_MAX : 0;
  bool one_record_each = true;
  uint64_t total = 0;
  for (uint64_t c = 0; c < num_chunks; ++c) {
    const uint8_t* begin = values.data() + parsed.offsets[c + 1];
    uint64_t offset = 0, decoded = 0, records = 0;
    ForEachField(begin, begin + parsed.sizes[c + 1], "footer entry", [&](const ProtoField& f) {
      if (f.wire_type != 0) return;
      if (f.number == 1) offset = f.varint;
      if (f.number == 2) decoded = f.varint;
      if (f.number == 3) records = f.varint;
    });
    const uint64_t previous = index.chunk_offsets.empty() ? 0 : index.chunk_offsets.back();
    if (offset < 64 || offset >= footer_offset || offset <= previous ||
        (offset % kBlockSize != 0 && offset % kBlockSize <= kBlockHeaderSize)) {
      Corrupt("footer entry " + std::to_string(c) + " points at impossible chunk offset " +
              std::to_string(offset));
    }
    index.chunk_offsets.push_back(offset);
    index.min_chunk_decoded_size = std::min(index.min_chunk_decoded_size, decoded);
    first_records.push_back(total);
    one_record_each = one_record_each && records == 1;
    if (!CheckedAdd(total, records, &total)) Corrupt("footer record counts overflow");
  }
  first_records.push_back(total);
  if (!one_record_each) index.first_records = std::move(first_records);
  if (total != num_records) {
    Corrupt("footer chunks hold " + std::to_string(total) + " records but the footer declares " +
            std::to_string(num_records));
  }
  index.num_records = total;
  return index;
}

}  // namespace

ShardIndex ReadShardIndex(const RandomAccessBytes& file, bool signature) {
  try {
    return ParseShardIndex(file, signature);
  } catch (const ReaderError& error) {
    if (error.kind() != ErrorKind::kCorrupt) throw;
    Corrupt("shard " + file.path() + ": " + error.what());
  }
}

void ReadIndexedChunk(const RandomAccessBytes& file, const ShardIndex& index, uint64_t c,
                      bool verify, std::vector<uint8_t>* bytes, Chunk* chunk) {
  const uint64_t begin = index.chunk_offsets[c], end = index.ChunkLimit(c);
  bytes->resize(static_cast<size_t>(end - begin));
  file.ReadAt(begin, end - begin, bytes->data());
  ReadChunk(FileRange{bytes->data(), begin, end - begin}, begin, end, verify, chunk);
}

bool IsDecodableRecordChunk(const Chunk& chunk, const ShardIndex& index, uint64_t c) {
  if (chunk.header.type == kTransposedChunk) return false;
  if (chunk.header.type != kSimpleChunk) {
    Corrupt("the footer indexes records in a chunk of type " + std::to_string(chunk.header.type) +
            ", which holds none");
  }
  const uint64_t expected = index.FirstRecord(c + 1) - index.FirstRecord(c);
  if (chunk.header.num_records != expected) {
    Corrupt("chunk holds " + std::to_string(chunk.header.num_records) +
            " records where the footer says " + std::to_string(expected));
  }
  return true;
}

}  // namespace sdsl
