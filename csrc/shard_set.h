// The reader's core: a bounded cache of open shards and their footers, and
// the executor that turns a batch plan into decoded rows on a few threads.
#ifndef SDS_LOADER_SHARD_SET_H_
#define SDS_LOADER_SHARD_SET_H_

#include <sys/types.h>
#include <zstd.h>

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "batch_plan.h"
#include "record_decoder.h"
#include "simple_chunk.h"

namespace sdsl {

// What one record holds, for learning a batch's layout.
struct RecordProbe {
  bool supported = true;  // false: the shard is transposed, read it elsewhere
  struct Field {
    std::string name, key, dtype;
    std::vector<uint64_t> shape;
  };
  std::vector<Field> fields;  // sorted by name
  std::string metadata_json;
};

// Per-thread working memory, pooled across reads so that buffers and zstd
// contexts are allocated once, not per batch.
struct WorkerScratch {
  WorkerScratch();
  ~WorkerScratch();
  std::vector<uint8_t> file_bytes;
  std::vector<uint8_t> sizes;
  std::vector<uint8_t> values;
  std::vector<uint8_t> discard;
  std::vector<uint8_t> record;
  RecordScratch record_scratch;
  ZSTD_DCtx* zstd;
};

class ShardSet {
 public:
  ShardSet(std::vector<std::string> paths, bool verify_checksums, size_t max_open_files);

  // Reads one batch into `layout`'s rows. Positions whose shard this core
  // cannot decode get needs_fallback[i] = 1 and are left untouched.
  void Read(const int64_t* files, const int64_t* locals, const int64_t* ordinals, size_t count,
            const BatchLayout& layout, int threads, uint8_t* needs_fallback);

  RecordProbe Probe(size_t file, uint64_t local, int64_t ordinal);

  size_t num_files() const { return paths_.size(); }
  std::shared_ptr<const OpenShard> Open(size_t file);

 private:
  void ReadRun(const Run& run, const BatchLayout& layout, const int64_t* ordinals,
               uint8_t* needs_fallback, WorkerScratch* scratch);
  std::unique_ptr<WorkerScratch> AcquireScratch();
  void ReleaseScratch(std::unique_ptr<WorkerScratch> scratch);
  void ForgetIfForked();

  const std::vector<std::string> paths_;
  const bool verify_;
  const size_t max_open_;
  std::mutex mutex_;
  pid_t pid_;
  std::list<size_t> recency_;  // most recent first
  std::unordered_map<size_t, std::pair<std::shared_ptr<const OpenShard>, std::list<size_t>::iterator>>
      open_;
  std::vector<std::unique_ptr<WorkerScratch>> scratch_pool_;
};

// Largest decoded chunk this core will hold in memory at once; a chunk that
// claims more is refused before anything is allocated for it.
constexpr uint64_t kMaxMaterializedBytes = uint64_t{2} << 30;

// Decodes the values of `chunk` as one in-memory buffer (for snappy, brotli,
// probes and verification).
void MaterializeValues(const SimpleChunk& parsed, WorkerScratch* scratch,
                       const uint8_t** values);

}  // namespace sdsl

#endif  // SDS_LOADER_SHARD_SET_H_
