#include "read/chunk_reads.h"

#include <algorithm>
#include <cassert>

#include "base/byte_io.h"
#include "base/reader_error.h"
#include "container/chunk_hasher.h"
#include "container/codecs.h"
#include "container/riegeli_hash.h"
#include "container/simple_chunk.h"

namespace sdsl {
namespace {

// Longest head read for a chunk; the head grows towards it while records'
// headers do not fit.
constexpr uint64_t kMaxHeadBytes = 64 << 10;
// What the head reads past the first routed byte, for headers that vary a
// little in length from record to record.
constexpr uint64_t kHeadSlack = 128;

// Where, in `data` (the first `available` logical bytes of an uncompressed
// simple chunk's data), the wanted records' field tensors lie, from the
// chunk's record sizes, parsed here into `parsed` once for the chunk's whole
// path (`*sized` then true), and the records' SafeTensors headers. Nothing
// here is trusted: a route is only where bytes are read to, each within the
// chunk's data and exactly a row long, and the chunk is checked and decoded
// afterwards as any other. Returns the logical bytes a head must hold for
// every wanted record's header to fit (0: unknown).
uint64_t PlanRoutes(const uint8_t* data, uint64_t available, const ChunkHeader& header,
                    const WantedChunk& wanted, const BatchLayout& layout,
                    const std::vector<std::string>& keys, WorkerScratch* scratch,
                    SimpleChunk* parsed, bool* sized) {
  std::vector<RowRoute>* routes = &scratch->routes;
  routes->clear();
  *sized = false;
  // A malformed head is left for the decode of the chunk to name, after
  // its hash, as for any chunk.
  try {
    if (!ParseSimpleChunkSizes(header, data, available, UINT64_MAX, &scratch->sizes, parsed)) {
      return 0;
    }
  } catch (const ReaderError&) {
    return 0;
  }
  *sized = true;
  if (parsed->compression != kNoCompression) return 0;
  const uint64_t data_size = header.data_size;
  uint64_t needed = 0;
  for (const WantedRecord& want : wanted.records) {
    // The plan lists a chunk's records in ascending order.
    assert(&want == &wanted.records.front() || (&want)[-1].chunk_record <= want.chunk_record);
    // The footer's count of the chunk's records is checked when it is decoded.
    if (want.chunk_record >= parsed->sizes.size()) return 0;
    const uint64_t size = parsed->sizes[want.chunk_record];
    uint64_t record_begin, record_end;
    if (!CheckedAdd(parsed->values_begin, parsed->offsets[want.chunk_record], &record_begin) ||
        !CheckedAdd(record_begin, size, &record_end) || record_end > data_size) {
      return 0;
    }
    const uint64_t in_head = available > record_begin ? available - record_begin : 0;
    uint64_t tensors_begin;
    const SafeTensorsHeader* record_header = PeekRecordHeader(
        data + record_begin, in_head, size, &scratch->record_scratch, &tensors_begin);
    if (record_header == nullptr) {
      if (in_head >= 8) {
        const uint64_t header_size = LoadLE64(data + record_begin);
        if (header_size < kMaxHeadBytes) needed = std::max(needed, record_begin + 8 + header_size);
      }
      continue;
    }
    needed = std::max(needed, record_begin + tensors_begin);
    for (size_t f = 0; f < layout.fields.size(); ++f) {
      const FieldSlot& slot = layout.fields[f];
      const TensorEntry* tensor = record_header->Find(keys[f]);
      // A windowed field takes part of its tensor, from a start of its own.
      if (slot.window_axis >= 0 || tensor == nullptr || tensor->dtype != slot.dtype ||
          tensor->shape != slot.shape || tensor->end - tensor->begin != slot.row_bytes ||
          slot.row_bytes == 0) {
        continue;
      }
      // The header checked that the tensor lies inside the record.
      routes->push_back(RowRoute{record_begin + tensors_begin + tensor->begin, slot.row_bytes,
                                 slot.base + want.rows[0] * slot.row_bytes});
    }
  }
  std::sort(routes->begin(), routes->end(),
            [](const RowRoute& a, const RowRoute& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < routes->size(); ++i) {
    if ((*routes)[i].begin < (*routes)[i - 1].begin + (*routes)[i - 1].size) {
      routes->clear();  // tensors of a valid header never overlap
      return needed;
    }
  }
  return needed;
}

void AppendPiece(Pieces* pieces, const uint8_t* data, size_t size) {
  ByteSpan* last = pieces->spans.empty() ? nullptr : &pieces->spans.back();
  if (last != nullptr && last->data + last->size == data) {
    last->size += size;
    pieces->total += size;
  } else {
    pieces->Append(data, size);
  }
}

// Fetches `requests`, consecutive pieces of [offset, offset + size) of
// `file`, after checking the whole range against the shard's size. The
// source reads adjacent pieces together (LocalSource: one preadv). With a
// `hasher`, the requests marked in `hashed` are appended to it as they are
// copied (ShardSource::FetchHashing).
void Fetch(const ShardFile& file, uint64_t offset, uint64_t size, const WorkerScratch& scratch,
           std::vector<RangeRequest>& requests, const std::vector<uint8_t>* hashed = nullptr,
           ChunkHasher* hasher = nullptr) {
  file.CheckRange(offset, size);
  // A verified copy out of a mapping hashes as it copies: its hash is waited
  // for with its bytes, in the one pass.
  const StageScope waiting(scratch.clock, Stage::kWait);
  if (hasher != nullptr) {
    file.source().FetchHashing(requests.data(), requests.size(), scratch.fetch_plan, hashed->data(),
                               hasher);
  } else {
    file.source().Fetch(requests.data(), requests.size(), scratch.fetch_plan);
  }
}

}  // namespace

FileRange ReadFileRange(const ShardFile& file, uint64_t begin, uint64_t end,
                        std::vector<uint8_t>* data, std::vector<uint8_t>* headers,
                        WorkerScratch* scratch) {
  const uint64_t size = end - begin;
  if (BeginsInsideBlockHeader(begin)) {
    // Only a corrupt footer points there; the chunk walk names the problem.
    data->resize(static_cast<size_t>(size));
    file.ReadAt(begin, size, data->data());
    return FileRange{data->data(), begin, size};
  }
  const StrippedLayout layout = LayoutWithoutBlockHeaders(begin, end);
  data->resize(static_cast<size_t>(layout.data_bytes));
  headers->resize(static_cast<size_t>(layout.header_bytes));
  std::vector<RangeRequest>& requests = scratch->requests;
  requests.clear();
  AppendSplitReads(file.number(), begin, end, data->data(), headers->data(), &scratch->read_pieces,
                   &requests);
  Fetch(file, begin, end - begin, *scratch, requests);
  FileRange range{data->data(), begin, size};
  range.block_headers = headers->data();
  return range;
}

bool ReadChunkIntoRows(const ShardFile& file, uint64_t begin, uint64_t limit, bool verify,
                       const WantedChunk& wanted, const BatchLayout& layout,
                       const std::vector<std::string>& keys, WorkerScratch* scratch, Chunk* chunk,
                       SimpleChunk* parsed) {
  if (BeginsInsideBlockHeader(begin)) {
    const FileRange range =
        ReadFileRange(file, begin, limit, &scratch->file_bytes, &scratch->block_headers, scratch);
    ReadChunk(range, begin, limit, verify, chunk);
    return false;
  }
  uint64_t head_end = std::min(limit, begin + scratch->head_bytes);
  if (BeginsInsideBlockHeader(head_end)) {
    head_end = std::min(limit, head_end - head_end % kBlockSize + kBlockHeaderSize);
  }
  const FileRange head =
      ReadFileRange(file, begin, head_end, &scratch->head, &scratch->head_block_headers, scratch);
  const uint64_t data_begin = ReadChunkFrame(head, begin, limit, chunk);
  const uint64_t data_size = chunk->header.data_size;
  const uint64_t data_end = PhysicalEnd(data_begin, data_size);
  const uint64_t in_head = std::min(
      data_size, LayoutWithoutBlockHeaders(data_begin, std::max(data_begin, head_end)).data_bytes);
  uint64_t next;
  LogicalRange(head, data_begin, in_head, verify, "chunk data", &chunk->data, &next);

  std::vector<RowRoute>& routes = scratch->routes;
  routes.clear();
  bool sized = false;
  if (chunk->header.type == kSimpleChunk && in_head > 0) {
    const StageScope parsing(scratch->clock, Stage::kParse);
    const uint64_t needed = PlanRoutes(chunk->data.spans[0].data, in_head, chunk->header, wanted,
                                       layout, keys, scratch, parsed, &sized);
    // Next time, read as far as this chunk's records' headers reached.
    const uint64_t reach = routes.empty() ? needed : std::min(needed, routes.front().begin);
    if (reach > 0) {
      scratch->head_bytes =
          std::min(kMaxHeadBytes, (data_begin - begin) + reach + kHeadSlack +
                                      (reach / kUsableBlockSize + 1) * kBlockHeaderSize);
    }
  }

  // A verified chunk is hashed as it is read: its first bytes now, the rest
  // piece by piece as each is copied (from a mapping, in the same pass).
  ChunkHasher hasher;
  if (verify) {
    const StageScope hashing(scratch->clock, Stage::kHash);
    for (const ByteSpan& span : chunk->data.spans) hasher.Append(span.data, span.size);
  }

  // The rest of the chunk, from the head's end: routed parts of the data to
  // their rows, the others (and any padding) to scratch, block headers aside.
  const uint64_t rest_end = std::max(data_end, chunk->end);
  const uint64_t first_rest_header =
      head_end % kBlockSize == 0 ? head_end : head_end - head_end % kBlockSize + kBlockSize;
  scratch->block_headers.clear();
  if (rest_end > head_end) {
    const StrippedLayout rest = LayoutWithoutBlockHeaders(head_end, rest_end);
    // Most of these bytes go to rows: zero-filling the scratch they skip
    // cost as much as a tenth of the copy.
    GrowTo(&scratch->file_bytes, rest.data_bytes);
    scratch->block_headers.resize(static_cast<size_t>(rest.header_bytes));
    SplitAtBlockHeaders(head_end, rest_end, scratch->file_bytes.data(),
                        scratch->block_headers.data(), &scratch->read_pieces);
    std::vector<RangeRequest>& requests = scratch->requests;
    std::vector<uint8_t>& hashed = scratch->hashed_requests;
    requests.clear();
    hashed.clear();
    uint64_t at_file = head_end;
    uint64_t logical = in_head;
    size_t route = 0;
    while (route < routes.size() && routes[route].begin + routes[route].size <= logical) ++route;
    uint8_t* const headers_begin = scratch->block_headers.data();
    uint8_t* const headers_end = headers_begin + scratch->block_headers.size();
    for (const MutableSpan& piece : scratch->read_pieces) {
      if (piece.data >= headers_begin && piece.data < headers_end) {
        requests.push_back(RangeRequest{file.number(), at_file, piece.size, piece.data});
        if (verify) hashed.push_back(0);
        at_file += piece.size;
        continue;
      }
      // A data piece: cut where routes begin and end, and where the data
      // ends. Scratch bytes keep their place in file_bytes, so routed bytes
      // leave holes there.
      uint64_t at = 0;
      while (at < piece.size) {
        const uint64_t here = logical + at;
        uint64_t take = piece.size - at;
        uint8_t* dst = piece.data + at;
        const bool data = here < data_size;
        if (data) take = std::min(take, data_size - here);
        if (data && route < routes.size() && routes[route].begin <= here) {
          const RowRoute& r = routes[route];
          take = std::min(take, r.begin + r.size - here);
          dst = r.dst + (here - r.begin);
          if (here + take == r.begin + r.size) ++route;
        } else if (data && route < routes.size()) {
          take = std::min(take, routes[route].begin - here);
        }
        requests.push_back(RangeRequest{file.number(), at_file, take, dst});
        if (verify) hashed.push_back(data ? 1 : 0);
        at_file += take;
        if (data) AppendPiece(&chunk->data, dst, static_cast<size_t>(take));
        at += take;
      }
      logical += piece.size;
    }
    Fetch(file, head_end, rest_end - head_end, *scratch, requests, &hashed,
          verify ? &hasher : nullptr);
    if (verify) {
      const StageScope hashing(scratch->clock, Stage::kHash);
      uint64_t position = first_rest_header;
      for (const uint8_t* header = headers_begin; header + kBlockHeaderSize <= headers_end;
           header += kBlockHeaderSize, position += kBlockSize) {
        if (RiegeliHash(header + 8, 16) != LoadLE64(header)) {
          Corrupt("block header at offset " + std::to_string(position) + " fails its hash check");
        }
      }
    }
  }
  const std::vector<uint8_t>& rest_headers = scratch->block_headers;
  CheckBlockHeaders(begin, chunk->end, [&](uint64_t block) -> const uint8_t* {
    if (block + kBlockHeaderSize <= head_end) return BlockHeaderAt(head, block);
    if (block < first_rest_header) return nullptr;
    const uint64_t at = (block - first_rest_header) / kBlockSize * kBlockHeaderSize;
    return at + kBlockHeaderSize <= rest_headers.size() ? rest_headers.data() + at : nullptr;
  });
  if (chunk->data.total != data_size) {
    Corrupt("chunk at offset " + std::to_string(begin) + " has " +
            std::to_string(chunk->data.total) + " of its " + std::to_string(data_size) +
            " data bytes");
  }
  if (verify) {
    const StageScope hashing(scratch->clock, Stage::kHash);
    CheckChunkDataHash(*chunk, hasher.Finish());
  }
  return sized;
}

}  // namespace sdsl
