// Whole-shard tools behind `sds-loader inspect`, `verify` and `bench`: a
// summary of how a shard is stored, a full integrity check, and the physical
// bounds (decompression alone, memcpy alone) a reader is measured against.
#ifndef SDS_LOADER_SHARD_TOOLS_H_
#define SDS_LOADER_SHARD_TOOLS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sdsl {

struct ShardSummary {
  uint64_t file_size = 0;
  uint64_t num_records = 0;
  uint64_t num_chunks = 0;
  std::map<std::string, uint64_t> chunk_types;  // type letter -> count
  std::string compression;                      // none, zstd, ..., mixed, unknown
  uint64_t max_records_per_chunk = 0;
  uint64_t encoded_bytes = 0;
  uint64_t decoded_bytes = 0;
  std::string writer_options;
};

ShardSummary SummarizeShard(const std::string& path);

struct ShardProblem {
  int64_t chunk = -1;
  int64_t record = -1;  // record number in the shard, -1 for a chunk-level problem
  uint64_t offset = 0;
  std::string message;
};

// Every chunk hash and every record's SafeTensors header and descriptor.
// Throws a corrupt error when the footer itself cannot be read.
std::vector<ShardProblem> VerifyShard(const std::string& path);

struct ChunkPayload {
  std::string compression;
  std::string bytes;  // the compressed values, as the decompressor takes them
  uint64_t decoded_size = 0;
};

// The compressed values of the chunk holding each of `records`.
std::vector<ChunkPayload> ChunkPayloads(const std::string& path,
                                        const std::vector<uint64_t>& records);

// Seconds to decompress every payload `repeats` times on one thread, each
// into the next of `batch_rows` rows, as a reader fills a batch.
double BoundDecompress(const std::vector<ChunkPayload>& payloads, int repeats, size_t batch_rows);

// Where the chunk holding each of `records` lies in the shard file, for
// timing reads of it.
struct ChunkExtent {
  std::string path;
  std::string compression;
  uint64_t decoded_size = 0;
  uint64_t begin = 0;
  uint64_t limit = 0;  // the next chunk's start
};
std::vector<ChunkExtent> ChunkExtents(const std::string& path,
                                      const std::vector<uint64_t>& records);

// Seconds to read every chunk `repeats` times as a verifying reader at its
// fastest would, on one thread, through the reader's own chunk path: one
// preadv with the block headers set aside, the frame checked and (with
// `hash`) the data hash, the record sizes parsed, then the values
// decompressed one-shot into a row (uncompressed: copied there), rows taken
// in turn from a batch of `batch_rows`. No record is decoded.
double BoundRead(const std::vector<ChunkExtent>& chunks, int repeats, bool hash, size_t batch_rows);

// Seconds to memcpy every buffer `repeats` times into one scratch buffer.
double BoundMemcpy(const std::vector<std::string>& buffers, int repeats);

}  // namespace sdsl

#endif  // SDS_LOADER_SHARD_TOOLS_H_
