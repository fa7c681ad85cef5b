// Shards in S3 or an S3-compatible store, or in Google Cloud Storage, read
// with ranged GETs issued and received natively (HttpClient), many in
// flight, no Python involved. What differs between the stores (error
// documents, object versions, preconditions) is in store_rules.h; the
// retries, tails and readahead here are the same for both.
//
// What it guarantees, as the boto3 path it replaces did:
// - Every range is the bytes asked for or an error: each answer's length,
//   Content-Range and version (S3: ETag; GCS: generation) are checked, and
//   every GET after a shard's first carries a precondition on the version
//   the first one saw (If-Match; ifGenerationMatch). A store that ignores
//   it is still caught by the version check, so bytes of a replaced object
//   are never mixed with the footer already read.
// - Throttling, 5xx answers, stalls and dropped connections are retried
//   with jittered exponential backoff, `max_attempts` attempts in all, then
//   fail with a storage error naming the object. Other answers (404, 403,
//   412, 416) fail at once, saying what they mean.
// - Opening a shard costs one round trip: a suffix GET gives its size, its
//   ETag and its footer; the file's first bytes come in the same round trip.
//   With check_openings, the footer is parsed and verified before the tail
//   is kept (in memory, in the node cache), and fetched again when it fails.
// - Bytes that fail a check later (a chunk's hash) are dropped wherever this
//   source kept them (DropCopy) and fetched again by the read, max_attempts
//   times in all (Refetch), counted apart from retries.
// - WillNeed fetches the announced ranges on a thread of its own into a
//   bounded cache (AheadCache) that reads then consume; it never blocks and
//   never fails.
// - With a cache directory (ObjectStoreSettings::cache_dir), what reads and readahead
//   fetch is written to a node cache and later reads of it are served from
//   there, checked block by block; a shard whose version the store does not
//   report is not cached.
//
// Addresses (URLs) and credentials are resolved by the caller: the binding
// takes them from signal_dataset's store settings and the standard
// credential chain (boto3's; google.auth's), and sets fresh credentials
// before they expire.
#ifndef SDS_LOADER_SOURCES_OBJECT_STORE_SOURCE_H_
#define SDS_LOADER_SOURCES_OBJECT_STORE_SOURCE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/task_thread.h"
#include "sources/ahead_cache.h"
#include "sources/http_client.h"
#include "sources/node_cache.h"
#include "sources/shard_source.h"
#include "sources/store_rules.h"

namespace sdsl {

struct ObjectStoreSettings {
  ObjectStoreKind store = ObjectStoreKind::kS3;  // whose answers the GETs get
  std::vector<std::string> uris;  // s3://bucket/key (gs://...) of each shard, for messages
  std::vector<std::string> urls;  // the URL each shard's GETs go to
  HttpSettings http;
  int max_attempts = 5;
  double backoff_s = 0.1;
  double backoff_max_s = 5.0;
  // Bytes of a shard's end read by its first GET: its footer and index, in
  // one round trip, for all but the largest shards.
  uint64_t tail_bytes = uint64_t{1} << 17;
  // Bytes of a shard's start read beside its tail: the file signature.
  uint64_t head_bytes = 64;
  // Every object is an ArrayRecord shard: its opening (tail, head) is kept,
  // in memory or in the node cache, only once its footer parses and its
  // hashes verify, and fetched again when they fail. Off for a source of
  // other objects (their bytes are kept as they come).
  bool check_openings = false;
  // Shards whose tails are kept (sizes and ETags are kept for all).
  size_t tail_cache_shards = 64;
  // Memory for ranges fetched ahead of the reads that need them.
  uint64_t readahead_bytes = uint64_t{32} << 20;
  // A range longer than this is fetched as several GETs at once: a store
  // paces each connection, so one long GET would be bound by one
  // connection's speed.
  uint64_t part_bytes = uint64_t{1} << 20;
  // A node-local disk cache of fetched ranges (node_cache.h), shared with
  // every process given the same directory; none when empty. `cache_limit`
  // 0: half the space free when it opens. `cache_floor`: bytes the disk
  // keeps free.
  std::string cache_dir;
  uint64_t cache_limit = 0;
  uint64_t cache_floor = uint64_t{1} << 30;
};

struct ObjectStoreCounters {
  uint64_t requests = 0;
  uint64_t bytes = 0;
  uint64_t retries = 0;
  uint64_t ahead_hits = 0;  // requests served from the readahead cache
  uint64_t refetches = 0;   // bytes fetched again after they failed a check (not in retries)
};

class ObjectStoreSource : public ShardSource, public ForkGuarded {
 public:
  explicit ObjectStoreSource(ObjectStoreSettings settings);
  ~ObjectStoreSource() override;

  size_t num_files() const override { return settings_.urls.size(); }
  std::string Name(size_t file) const override { return settings_.uris.at(file); }
  uint64_t Size(size_t file) override;
  using ShardSource::Fetch;
  void Fetch(RangeRequest* requests, size_t count, const FetchPlan& plan) override;
  FetchPlan PlanBatch(const RangeRequest* ranges, size_t count) override;
  void WillNeed(const RangeRequest* ranges, size_t count) override;
  // With a node cache: announced ranges are fetched into the cache only,
  // not kept in memory too (a process whose announcements serve the reads
  // of others, its DataLoader workers).
  void set_readahead_into_cache(bool into_cache) { readahead_into_cache_ = into_cache; }
  bool DropCopy(size_t file, uint64_t offset, uint64_t size) override;
  bool Refetch(size_t file, int failures, bool copy_dropped) override;
  int CheckAttempts() const override { return settings_.max_attempts; }

  // Fetches the tails (and heads) of `files` not yet open, all in flight.
  void OpenShards(const std::vector<size_t>& files) override;
  void SetCredentials(HttpCredentials credentials);
  // Waits until what WillNeed queued before the call has been fetched (or
  // dropped), and written to the node cache; false when `seconds` pass first.
  bool WaitForReadahead(double seconds);
  // Waits until the node-cache writes queued before the call are done;
  // false when `seconds` pass first.
  bool WaitForWrites(double seconds);
  ObjectStoreCounters counters() const;
  // The node cache, or null when none was asked for.
  NodeCache* node_cache() const { return cache_.get(); }
  // Drops connections and cached bytes; reads after it start afresh. A read
  // running meanwhile fails with a storage error at its next attempt.
  void Close();

  void LockForFork() override;
  void UnlockInParent() override;
  void ResetInChild() override;

 private:
  struct Tail;
  struct Shard {
    bool known = false;
    uint64_t size = 0;
    std::string version;  // see VersionOf
  };
  class Attempts;
  // Sleeps the jittered backoff after attempt `attempt` (from 0) failed.
  void Back(int attempt, std::mt19937_64& jitter) const;

  std::vector<std::shared_ptr<const Tail>> OpenTails(const std::vector<size_t>& files);
  // What opening a shard learns: its version, its size, its last bytes and
  // its first ones (`head`, when `data` does not hold them).
  struct TailAnswer {
    std::string version;
    uint64_t size = 0;
    uint64_t start = 0;
    std::string data;
    std::string head;
  };
  // The tails of `wanted`, fetched, or read from the node cache where it
  // holds them (one byte fetched to check the version); `cache_tries`:
  // rounds left in which a shard another process is opening is waited for
  // and then read from the cache (0: fetched). `probe_cache` false: fetched
  // whatever the cache holds (what it held failed its check).
  static constexpr int kCacheTries = 3;
  std::vector<TailAnswer> FetchTails(const std::vector<size_t>& wanted, int cache_tries,
                                     bool probe_cache = true);
  // The tails and heads of `files` in one round of GETs (`probe[k]`: its last byte only).
  std::vector<TailAnswer> FetchOpenings(const std::vector<size_t>& files,
                                        const std::vector<bool>& probe);
  // Whether an opening's footer parses and verifies, as far as it holds it.
  struct OpeningCheck {
    enum Result { kWhole, kFailed, kShort } result = kWhole;
    std::string why;       // kFailed: the check that failed
    uint64_t missing = 0;  // kShort: where the footer begins, before the tail
  };
  class OpeningBytes;
  OpeningCheck CheckOpening(size_t file, const TailAnswer& answer) const;
  // Checks the openings at indexes `check` of `answers` (of shards
  // `wanted`), fetching the part of a long footer before its tail, and
  // fetching again those that fail, max_attempts times in all; then throws
  // a corrupt error naming the shard, the bytes and the check.
  void CompleteOpenings(const std::vector<size_t>& wanted, std::vector<size_t> check,
                        std::vector<TailAnswer>* answers);
  enum class CachedTail { kRead, kNotYet, kFailed };
  // kNotYet: the cache does not hold it (yet); kFailed: what it held failed
  // its check and was dropped, or a long footer's start is missing.
  CachedTail ReadCachedTail(size_t file, const std::string& known_version, uint64_t known_size,
                            TailAnswer* answer, std::chrono::steady_clock::time_point deadline);
  Shard ShardOf(size_t file);
  // `attempts_spent`: attempts the read has already used (see Fetch).
  void FetchParts(std::vector<RangeRequest>& parts, int attempts_spent);
  // `in_memory`: the ranges are the AheadCache's, finished into it.
  void ReadAhead(const std::vector<std::shared_ptr<AheadRange>>& ranges, bool in_memory);
  // The node cache's object for a shard whose version is known, or null.
  std::shared_ptr<NodeCache::Object> CachedObject(size_t file);
  // Writes fetched gaps to the node cache, back-to-back ones as one entry.
  void StoreGaps(std::vector<std::pair<size_t, NodeCache::Gap>> gaps);

  const ObjectStoreSettings settings_;
  HttpClient client_;
  AheadCache ahead_;
  const std::unique_ptr<NodeCache> cache_;
  mutable std::mutex mutex_;  // guards shards_, tails_, tail_order_, cached_
  std::vector<Shard> shards_;
  std::unordered_map<size_t, std::shared_ptr<const Tail>> tails_;
  std::vector<size_t> tail_order_;  // least recently opened first
  // Each shard's node-cache object, once its version is known (null: not cached).
  std::vector<std::shared_ptr<NodeCache::Object>> cached_;
  std::vector<std::string> cached_version_;  // the version each was opened for
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> retries_{0};
  std::atomic<uint64_t> ahead_hits_{0};
  std::atomic<uint64_t> refetches_{0};
  std::atomic<uint64_t> closes_{0};
  std::atomic<bool> identified_{false};  // whether requests carry credentials
  // Announcements are fetched on several threads, each hint's ranges in
  // one round of requests: a hint need not wait for the one before it to
  // arrive whole, so a sampler announcing a few batches ahead keeps that
  // many batches' requests in flight.
  static constexpr size_t kReadaheadThreads = 4;
  std::atomic<size_t> next_readahead_{0};
  std::atomic<bool> readahead_into_cache_{false};
  // Writes fetched ranges to the node cache, off the reads' path.
  std::unique_ptr<TaskThread> writer_;
  // Last: destroyed first, so that no readahead task outlives what it uses.
  std::vector<std::unique_ptr<TaskThread>> readahead_;
};

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_OBJECT_STORE_SOURCE_H_
