#include "tools/shard_tools.h"

#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "base/reader_error.h"
#include "container/array_record_index.h"
#include "container/codecs.h"
#include "container/riegeli_chunk.h"
#include "container/riegeli_hash.h"
#include "container/riegeli_layout.h"
#include "container/simple_chunk.h"
#include "read/chunk_reads.h"
#include "read/materialize.h"
#include "read/record_decoder.h"
#include "read/scratch_pool.h"
#include "sources/shard_file.h"

namespace sdsl {

ShardSummary SummarizeShard(const std::string& path) {
  ShardFile file(path);
  const ShardIndex index = ReadShardIndex(file);
  ShardSummary summary;
  summary.file_size = index.file_size;
  summary.writer_options = index.writer_options;
  if (index.transposed_footer) {
    summary.compression = "unknown";
    summary.chunk_types["t"] = 1;
    return summary;
  }
  summary.num_records = index.num_records;
  summary.num_chunks = index.num_chunks();
  std::string compression;
  for (uint64_t c = 0; c < index.num_chunks(); ++c) {
    const uint64_t begin = index.chunk_offsets[c], end = index.ChunkLimit(c);
    // The header and the first data byte (the compression type) are enough.
    const uint64_t want = std::min<uint64_t>(end - begin, 2 * kChunkHeaderSize + kBlockHeaderSize);
    std::vector<uint8_t> bytes(static_cast<size_t>(want));
    file.ReadAt(begin, want, bytes.data());
    const FileRange range{bytes.data(), begin, want};
    const ChunkHeader header = ReadChunkHeader(range, begin);
    summary.chunk_types[std::string(1, static_cast<char>(header.type))] += 1;
    summary.encoded_bytes += header.data_size;
    summary.decoded_bytes += header.decoded_data_size;
    summary.max_records_per_chunk = std::max(summary.max_records_per_chunk, header.num_records);
    std::string this_compression = "unknown";
    if (header.type == kSimpleChunk && header.data_size > 0) {
      Pieces first;
      uint64_t next;
      uint64_t data_begin;
      Pieces header_pieces;
      LogicalRange(range, begin, kChunkHeaderSize, false, "chunk header", &header_pieces,
                   &data_begin);
      LogicalRange(range, data_begin, 1, false, "chunk data", &first, &next);
      uint8_t type;
      CopyFromPieces(first, 0, 1, &type);
      this_compression = CompressionName(type);
    } else if (header.type == kTransposedChunk) {
      this_compression = "transposed";
    }
    if (compression.empty()) {
      compression = this_compression;
    } else if (compression != this_compression) {
      compression = "mixed";
    }
  }
  summary.compression = compression.empty() ? "none" : compression;
  return summary;
}

std::vector<ShardProblem> VerifyShard(const std::string& path) {
  ShardFile file(path);
  const ShardIndex index = ReadShardIndex(file);
  std::vector<ShardProblem> problems;
  if (index.transposed_footer) return problems;
  std::vector<uint8_t> bytes;
  Chunk chunk;
  WorkerScratch scratch;
  for (uint64_t c = 0; c < index.num_chunks(); ++c) {
    ShardProblem problem;
    problem.chunk = static_cast<int64_t>(c);
    problem.offset = index.chunk_offsets[c];
    SimpleChunk parsed;
    const uint8_t* values = nullptr;
    try {
      ReadIndexedChunk(file, index, c, /*verify=*/true, &bytes, &chunk);
      if (!IsDecodableRecordChunk(chunk, index, c)) continue;
      ParseSimpleChunk(chunk, kMaxMaterializedBytes, &scratch.sizes, &parsed);
      MaterializeValues(parsed, &scratch, &values);
    } catch (const ReaderError& error) {
      if (error.kind() == ErrorKind::kIo || error.kind() == ErrorKind::kStorage) throw;
      problem.message = error.what();
      problems.push_back(problem);
      continue;
    }
    for (uint64_t r = 0; r < parsed.sizes.size(); ++r) {
      try {
        DescribeRecord(values + parsed.offsets[r], parsed.sizes[r], &scratch.record_scratch);
      } catch (const ReaderError& error) {
        problem.record = static_cast<int64_t>(index.FirstRecord(c) + r);
        problem.message = error.what();
        problems.push_back(problem);
      }
    }
  }
  return problems;
}

namespace {

// Calls visit(parsed, chunk, bytes) for the simple chunk holding each of
// `records`, read (verified) into `bytes` from the chunk's first byte on.
template <typename Visit>
void ForEachRecordChunk(const std::string& path, const std::vector<uint64_t>& records,
                        Visit visit) {
  ShardFile file(path);
  const ShardIndex index = ReadShardIndex(file);
  std::vector<uint8_t> bytes;
  Chunk chunk;
  std::vector<uint8_t> sizes;
  for (uint64_t record : records) {
    if (index.transposed_footer || record >= index.num_records) {
      Fail(ErrorKind::kArgument, "record " + std::to_string(record) + " is not in shard " + path);
    }
    ReadIndexedChunk(file, index, index.ChunkOf(record), /*verify=*/true, &bytes, &chunk);
    if (chunk.header.type != kSimpleChunk) {
      Fail(ErrorKind::kUnsupported, "shard " + path + " does not store simple chunks");
    }
    SimpleChunk parsed;
    ParseSimpleChunk(chunk, kMaxMaterializedBytes, &sizes, &parsed);
    visit(parsed, chunk, bytes);
  }
}

}  // namespace

std::vector<ChunkPayload> ChunkPayloads(const std::string& path,
                                        const std::vector<uint64_t>& records) {
  std::vector<ChunkPayload> payloads;
  ForEachRecordChunk(path, records,
                     [&](const SimpleChunk& parsed, const Chunk&, const std::vector<uint8_t>&) {
                       ChunkPayload payload;
                       payload.compression = CompressionName(parsed.compression);
                       payload.decoded_size = parsed.decoded_size;
                       payload.bytes.resize(static_cast<size_t>(parsed.values.total));
                       CopyFromPieces(parsed.values, 0, parsed.values.total,
                                      reinterpret_cast<uint8_t*>(payload.bytes.data()));
                       payloads.push_back(std::move(payload));
                     });
  return payloads;
}

std::vector<ChunkExtent> ChunkExtents(const std::string& path,
                                      const std::vector<uint64_t>& records) {
  std::vector<ChunkExtent> extents;
  ForEachRecordChunk(
      path, records,
      [&](const SimpleChunk& parsed, const Chunk& chunk, const std::vector<uint8_t>& bytes) {
        extents.push_back(ChunkExtent{path, CompressionName(parsed.compression),
                                      parsed.decoded_size, chunk.begin,
                                      chunk.begin + bytes.size()});
      });
  return extents;
}

double BoundRead(const std::vector<ChunkExtent>& chunks, int repeats, bool hash,
                 size_t batch_rows) {
  std::map<std::string, std::unique_ptr<ShardFile>> files;
  uint64_t largest_output = 0;
  for (const ChunkExtent& chunk : chunks) {
    if (files.count(chunk.path) == 0) files[chunk.path] = std::make_unique<ShardFile>(chunk.path);
    largest_output = std::max(largest_output, chunk.decoded_size);
  }
  batch_rows = std::max<size_t>(batch_rows, 1);
  std::vector<uint8_t> rows(static_cast<size_t>(largest_output) * batch_rows);
  std::vector<const ShardFile*> file_of;
  for (const ChunkExtent& chunk : chunks) file_of.push_back(files[chunk.path].get());
  WorkerScratch scratch;
  Chunk read;
  SimpleChunk parsed;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < repeats; ++r) {
    for (size_t i = 0; i < chunks.size(); ++i) {
      const ChunkExtent& chunk = chunks[i];
      uint8_t* row = rows.data() + (i % batch_rows) * largest_output;
      // The reader's own chunk path: one preadv with the block headers set
      // aside, the frame and (with `hash`) the data hash checked, the record
      // sizes parsed; no record decoding.
      const FileRange range = ReadFileRange(*file_of[i], chunk.begin, chunk.limit,
                                            &scratch.file_bytes, &scratch.block_headers, &scratch);
      ReadChunk(range, chunk.begin, chunk.limit, hash, &read);
      ParseSimpleChunk(read, UINT64_MAX, &scratch.sizes, &parsed);
      if (parsed.values.spans.size() != 1)
        Fail(ErrorKind::kArgument, "values of a chunk are not one span");
      const ByteSpan& values = parsed.values.spans[0];
      if (parsed.compression == kNoCompression) {
        std::memcpy(row, values.data, values.size);
        continue;
      }
      const size_t written = ZSTD_decompressDCtx(
          scratch.zstd, row, static_cast<size_t>(chunk.decoded_size), values.data, values.size);
      if (ZSTD_isError(written) || written != chunk.decoded_size) {
        Corrupt("values of a " + chunk.compression + " chunk of " + chunk.path +
                " fail to decompress; this bound times zstd and uncompressed shards only");
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  asm volatile("" : : "r"(rows.data()) : "memory");
  return seconds;
}

double BoundDecompress(const std::vector<ChunkPayload>& payloads, int repeats, size_t batch_rows) {
  uint64_t largest = 0;
  for (const ChunkPayload& payload : payloads) largest = std::max(largest, payload.decoded_size);
  // Each payload goes to its own row of a batch, as in a read: one reused
  // buffer would stay in the CPU cache and time a decompressor no reader
  // can match, since a batch's rows are written to memory.
  batch_rows = std::max<size_t>(batch_rows, 1);
  std::vector<uint8_t> rows(static_cast<size_t>(largest) * batch_rows);
  std::vector<uint8_t> types;
  for (const ChunkPayload& payload : payloads) {
    uint8_t type = kNoCompression;
    if (payload.compression == "zstd") type = kZstd;
    if (payload.compression == "snappy") type = kSnappy;
    if (payload.compression == "brotli") type = kBrotli;
    types.push_back(type);
  }
  // One reused zstd context, as a reader keeps per thread; a fresh context
  // per call would make the bound look slower than it is.
  ZSTD_DCtx* context = ZSTD_createDCtx();
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < repeats; ++r) {
    for (size_t i = 0; i < payloads.size(); ++i) {
      uint8_t* const row = rows.data() + (i % batch_rows) * largest;
      if (types[i] == kZstd) {
        const size_t written =
            ZSTD_decompressDCtx(context, row, static_cast<size_t>(payloads[i].decoded_size),
                                payloads[i].bytes.data(), payloads[i].bytes.size());
        if (ZSTD_isError(written) || written != payloads[i].decoded_size) {
          ZSTD_freeDCtx(context);
          Corrupt("payload fails to decompress");
        }
        continue;
      }
      DecompressExact(types[i], reinterpret_cast<const uint8_t*>(payloads[i].bytes.data()),
                      payloads[i].bytes.size(), row, static_cast<size_t>(payloads[i].decoded_size),
                      "payload");
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ZSTD_freeDCtx(context);
  return seconds;
}

double BoundMemcpy(const std::vector<std::string>& buffers, int repeats) {
  // Copy into one batch-sized destination, as a reader fills its output.
  uint64_t total = 0;
  for (const std::string& buffer : buffers) total += buffer.size();
  std::vector<uint8_t> output(static_cast<size_t>(total));
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < repeats; ++r) {
    uint8_t* cursor = output.data();
    for (const std::string& buffer : buffers) {
      std::memcpy(cursor, buffer.data(), buffer.size());
      cursor += buffer.size();
    }
    // Keep the copies observable so the compiler cannot drop them.
    asm volatile("" : : "r"(output.data()) : "memory");
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace sdsl
