#include "shard_tools.h"

#include <zstd.h>

#include <chrono>
#include <cstring>

#include "array_record_index.h"
#include "codecs.h"
#include "reader_error.h"
#include "record_decoder.h"
#include "riegeli_chunk.h"
#include "shard_file.h"
#include "materialize.h"
#include "simple_chunk.h"

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
    const FileWindow window{bytes.data(), begin, want};
    const ChunkHeader header = ReadChunkHeader(window, begin);
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
      LogicalRange(window, begin, kChunkHeaderSize, false, "chunk header", &header_pieces,
                   &data_begin);
      LogicalRange(window, data_begin, 1, false, "chunk data", &first, &next);
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
      if (error.kind() == ErrorKind::kIo) throw;
      problem.message = error.what();
      problems.push_back(problem);
      continue;
    }
    for (uint64_t r = 0; r < parsed.sizes.size(); ++r) {
      try {
        DescribeRecord(values + parsed.offsets[r], parsed.sizes[r], &scratch.record_scratch);
      } catch (const ReaderError& error) {
        problem.record = static_cast<int64_t>(index.first_record[c] + r);
        problem.message = error.what();
        problems.push_back(problem);
      }
    }
  }
  return problems;
}

std::vector<ChunkPayload> ChunkPayloads(const std::string& path,
                                        const std::vector<uint64_t>& records) {
  ShardFile file(path);
  const ShardIndex index = ReadShardIndex(file);
  std::vector<ChunkPayload> payloads;
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
    ChunkPayload payload;
    payload.compression = CompressionName(parsed.compression);
    payload.decoded_size = parsed.decoded_size;
    payload.bytes.resize(static_cast<size_t>(parsed.values.total));
    CopyFromPieces(parsed.values, 0, parsed.values.total,
                   reinterpret_cast<uint8_t*>(payload.bytes.data()));
    payloads.push_back(std::move(payload));
  }
  return payloads;
}

double BoundDecompress(const std::vector<ChunkPayload>& payloads, int repeats) {
  uint64_t largest = 0;
  for (const ChunkPayload& payload : payloads) largest = std::max(largest, payload.decoded_size);
  std::vector<uint8_t> output(static_cast<size_t>(largest));
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
      if (types[i] == kZstd) {
        const size_t written = ZSTD_decompressDCtx(
            context, output.data(), static_cast<size_t>(payloads[i].decoded_size),
            payloads[i].bytes.data(), payloads[i].bytes.size());
        if (ZSTD_isError(written) || written != payloads[i].decoded_size) {
          ZSTD_freeDCtx(context);
          Corrupt("payload fails to decompress");
        }
        continue;
      }
      DecompressExact(types[i], reinterpret_cast<const uint8_t*>(payloads[i].bytes.data()),
                      payloads[i].bytes.size(), output.data(),
                      static_cast<size_t>(payloads[i].decoded_size), "payload");
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
