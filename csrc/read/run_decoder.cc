#include "read/run_decoder.h"

#include <cassert>
#include <cstring>
#include <memory>
#include <vector>

#include "base/reader_error.h"
#include "container/codecs.h"
#include "container/riegeli_chunk.h"
#include "container/simple_chunk.h"
#include "container/value_stream.h"
#include "read/chunk_reads.h"
#include "read/failed_checks.h"
#include "read/materialize.h"
#include "read/window_read.h"

namespace sdsl {
namespace {

void CopyRow(const BatchLayout& layout, size_t from, size_t to) {
  assert(from != to);  // memcpy onto itself
  for (const FieldSlot& slot : layout.fields) {
    std::memcpy(slot.base + to * slot.row_bytes, slot.base + from * slot.row_bytes, slot.row_bytes);
  }
  for (const TargetSlot& target : layout.targets) {
    std::memcpy(target.base + to * 8, target.base + from * 8, 8);
  }
  for (const FieldSlot& slot : layout.fields) {
    if (slot.lengths != nullptr) std::memcpy(slot.lengths + to * 8, slot.lengths + from * 8, 8);
  }
}

}  // namespace

std::string RecordContext(const std::string& path, int64_t ordinal, uint64_t shard_record) {
  return "shard " + path + ": record " + std::to_string(ordinal) + " (record " +
         std::to_string(shard_record) + " of the shard)";
}

void RethrowForRecord(const Run& run, const WantedRecord& record, const int64_t* ordinals,
                      const ReaderError& error) {
  const int64_t ordinal = ordinals[record.rows[0]];
  if (error.kind() == ErrorKind::kTarget || error.kind() == ErrorKind::kSchemaMismatch ||
      error.kind() == ErrorKind::kIndex) {
    throw ReaderError(error.kind(), "record " + std::to_string(ordinal) + ": " + error.what());
  }
  throw ReaderError(
      error.kind(),
      RecordContext(run.shard->file->path(), ordinal, record.shard_record) + ": " + error.what(),
      error.os_error());
}

void DecodeChunkRecords(const WantedChunk& wanted, const ChunkRecords& records,
                        const BatchLayout& layout, std::vector<std::string>* keys,
                        WorkerScratch* scratch, const WantedRecord** current) {
  std::unique_ptr<ValueStream> stream = records.open();
  uint64_t stream_position = 0;
  uint64_t consumed = 0;
  for (const WantedRecord& record : wanted.records) {
    *current = &record;
    const uint64_t begin = records.offsets[record.chunk_record];
    const uint64_t size = records.sizes[record.chunk_record];
    if (begin < stream_position) {
      // The same record again, with another window: start the values over.
      stream = records.open();
      stream_position = 0;
    }
    stream->Skip(begin - stream_position);
    try {
      consumed = DecodeRecord(*stream, size, layout, *keys, /*hinted=*/true, record.rows[0],
                              &scratch->record_scratch, records.stop_after_fields);
    } catch (const KeyHintMiss&) {
      // The descriptor maps fields to other tensors than assumed: read
      // this record whole, learn its keys, and decode it again.
      CheckMaterializable(size, *scratch);
      stream = records.open();
      stream->Skip(begin);
      scratch->record.resize(static_cast<size_t>(size));
      stream->Read(scratch->record.data(), size);
      // The resolved keys become the hints for the records after this one.
      *keys = ResolveKeys(scratch->record.data(), size, layout, &scratch->record_scratch);
      Pieces whole;
      whole.Append(scratch->record.data(), static_cast<size_t>(size));
      PiecesStream again(whole);
      DecodeRecord(again, size, layout, *keys, false, record.rows[0], &scratch->record_scratch);
      consumed = size;
    }
    stream_position = begin + consumed;
    for (size_t k = 1; k < record.rows.size(); ++k) {
      CopyRow(layout, record.rows[0], record.rows[k]);
    }
    // After the copies, which must take the record as decoded.
    if (layout.finisher != nullptr) {
      const StageScope augmenting(scratch->clock, Stage::kAugment);
      for (size_t k = 0; k < record.rows.size(); ++k) layout.finisher->FinishRow(record.rows[k]);
    }
  }
}

namespace {

// Decodes the wanted records of a chunk read whole.
// `sized`: scratch->parsed already holds the chunk's record sizes
// (ReadChunkIntoRows), checked once the chunk is known to hold records.
void DecodeWantedRecords(const Chunk& chunk, const ShardIndex& index, const WantedChunk& wanted,
                         const BatchLayout& layout, std::vector<std::string>* keys,
                         uint8_t* needs_fallback, WorkerScratch* scratch,
                         const WantedRecord** current, bool sized = false) {
  if (!IsDecodableRecordChunk(chunk, index, wanted.chunk)) {
    for (const WantedRecord& record : wanted.records) {
      for (size_t k = 0; k < record.rows.size(); ++k) needs_fallback[record.rows[k]] = 1;
    }
    return;
  }
  // Kept in scratch, as the chunk is: a run of one short record must not
  // allocate its chunk's structures afresh.
  SimpleChunk& parsed = scratch->parsed;
  {
    const StageScope parsing(scratch->clock, Stage::kParse);
    if (sized) {
      FinishSimpleChunk(chunk, &parsed);
    } else {
      ParseSimpleChunk(chunk, UINT64_MAX, &scratch->sizes, &parsed);
    }
  }
  // Two pointers, which std::function holds without allocating (three
  // did not: a malloc per chunk).
  const ChunkRecords records{
      parsed.offsets, parsed.sizes,
      [&parsed, scratch] { return OpenValueStream(parsed, &scratch->decoded, scratch); },
      // A window from a zstd chunk need not decompress past its end.
      layout.window.active() && layout.targets.empty() && parsed.compression == kZstd};
  DecodeChunkRecords(wanted, records, layout, keys, scratch, current);
}

}  // namespace

namespace {

void DecodeRunOnce(const Run& run, const FileRange* fetched, const BatchLayout& layout,
                   const int64_t* ordinals, Verify verify, uint8_t* needs_fallback,
                   WorkerScratch* scratch) {
  const OpenShard& shard = *run.shard;
  const ShardIndex& index = shard.index;
  // The plan makes no run without a chunk, nor a chunk without a record.
  assert(!run.chunks.empty() && !run.chunks.front().records.empty());
  assert(fetched == nullptr ||
         (fetched->begin == run.begin && fetched->size == run.end - run.begin));
  const WantedRecord* current = &run.chunks.front().records.front();
  try {
    // Each run starts from the layout's key hints (a record may teach the
    // run others); the vector and its short strings keep their memory.
    std::vector<std::string>& keys = scratch->keys;
    keys.resize(layout.fields.size());
    for (size_t f = 0; f < layout.fields.size(); ++f) keys[f] = layout.fields[f].key_hint;
    Chunk& chunk = scratch->chunk;
    if (fetched == nullptr) {
      // A run of windows: each chunk reads only what it needs. Any other
      // unfetched run: each chunk's tensors are read straight into rows.
      const bool windows = ReadsWindowsOnly(run, layout, verify);
      for (const WantedChunk& wanted : run.chunks) {
        current = &wanted.records.front();
        if (!windows) {
          const bool check = ChecksChunk(verify, shard.verified, wanted.chunk);
          const bool sized = ReadChunkIntoRows(*shard.file, index.chunk_offsets[wanted.chunk],
                                               index.ChunkLimit(wanted.chunk), check, wanted,
                                               layout, keys, scratch, &chunk, &scratch->parsed);
          if (check) shard.verified.Mark(wanted.chunk);
          DecodeWantedRecords(chunk, index, wanted, layout, &keys, needs_fallback, scratch,
                              &current, sized);
          continue;
        }
        if (DecodeChunkWindows(shard, wanted, layout, &keys, scratch, &current)) continue;
        // Not an uncompressed simple chunk after all: read it whole.
        const bool check = verify != Verify::kNever && !shard.verified.Has(wanted.chunk);
        ReadIndexedChunk(*shard.file, index, wanted.chunk, check, &scratch->window_bytes, &chunk);
        if (check) shard.verified.Mark(wanted.chunk);
        DecodeWantedRecords(chunk, index, wanted, layout, &keys, needs_fallback, scratch, &current);
      }
      return;
    }
    for (const WantedChunk& wanted : run.chunks) {
      current = &wanted.records.front();
      const bool check = ChecksChunk(verify, shard.verified, wanted.chunk);
      {
        // The chunk's framing is walked either way; its hash, the cost, only when checked.
        const StageScope framing(scratch->clock, check ? Stage::kHash : Stage::kParse);
        ReadChunk(*fetched, index.chunk_offsets[wanted.chunk], index.ChunkLimit(wanted.chunk),
                  check, &chunk);
      }
      if (check) shard.verified.Mark(wanted.chunk);
      DecodeWantedRecords(chunk, index, wanted, layout, &keys, needs_fallback, scratch, &current);
    }
  } catch (const ReaderError& error) {
    RethrowForRecord(run, *current, ordinals, error);
  }
}

}  // namespace

void DecodeRun(const Run& run, const FileRange* fetched, const BatchLayout& layout,
               const int64_t* ordinals, Verify verify, uint8_t* needs_fallback,
               WorkerScratch* scratch) {
  // Bytes that fail a check cost a refetch, not the read: every copy of
  // them is dropped (the node cache's, readahead's) and the run fetched
  // again whole, in one request (a store's in parts, all in flight), as
  // long as its source's retry policy allows; only bytes that keep failing
  // raise. Whole, not chunk by chunk as a run read into rows is: each
  // fetch is one more chance of a fault on the way.
  FailedChecks checks;
  std::vector<uint8_t> again;
  FileRange refetched;
  for (const FileRange* bytes = fetched;; bytes = &refetched) {
    try {
      DecodeRunOnce(run, bytes, layout, ordinals, verify, needs_fallback, scratch);
      return;
    } catch (const ReaderError& error) {
      const ByteRange range{run.begin, run.end - run.begin};
      checks.After(error, *run.shard->file, &range, 1);
    }
    const ShardFile& file = *run.shard->file;
    const uint64_t size = run.end - run.begin;
    file.CheckRange(run.begin, size);
    again.resize(static_cast<size_t>(size));
    RangeRequest request{file.number(), run.begin, size, again.data()};
    file.source().Fetch(&request, 1);
    refetched = FileRange{again.data(), run.begin, size};
  }
}

}  // namespace sdsl
