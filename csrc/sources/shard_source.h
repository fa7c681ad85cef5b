// Where the bytes of every shard of one dataset live. Fetching is the only
// stage of a read that knows this: the footer parser and the executor read
// through a ShardSource, so local files, a deeper IO queue and object
// storage are interchangeable behind it.
#ifndef SDS_LOADER_SHARD_SOURCE_H_
#define SDS_LOADER_SHARD_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/range_request.h"
#include "container/chunk_hasher.h"

namespace sdsl {

// How one batch's runs are fetched, decided by the source once per batch
// (ShardSource::PlanBatch) and handed to every Fetch of that batch: a value
// of the batch, since batches read at once on other threads decide their own.
struct FetchPlan {
  // How many bytes of a batch's runs one Fetch call should gather. 0: one
  // run per call, fetched by the worker that decodes it while the bytes are
  // still in its cache. More: many requests in flight per call (a remote
  // source; local shards not in the page cache), bounded by this many bytes
  // of buffers per decode thread.
  uint64_t gather_bytes = 0;
  // The batch's bytes are in memory and may be copied out of a mapping of
  // each shard (LocalSource: warm, and SIGBUS is guarded).
  bool from_mappings = false;
};

class ShardSource {
 public:
  virtual ~ShardSource() = default;
  virtual size_t num_files() const = 0;
  // Bytes in shard `file`. Throws ReaderError (kIo) naming the shard when it
  // cannot be reached.
  virtual uint64_t Size(size_t file) = 0;
  // The shard's path or URI, for messages.
  virtual std::string Name(size_t file) const = 0;
  // Fills every request, possibly many at once, as `plan` says. The caller
  // has checked each range against Size(). Throws ReaderError naming the
  // shard: kIo when the system refuses, kCorrupt when the shard is shorter
  // than a range needs. Called from several threads at once. Requests that
  // lie back to back in one shard may go to different buffers (headers to
  // scratch, payloads straight to their rows); a source should read them as
  // one range.
  virtual void Fetch(RangeRequest* requests, size_t count, const FetchPlan& plan) = 0;
  // A fetch outside any batch (a footer, a probe): the plainest plan.
  void Fetch(RangeRequest* requests, size_t count) { Fetch(requests, count, FetchPlan{}); }

  // Fetch, and the bytes of each request whose `hashed[k]` is set appended
  // to `hasher` in request order. A source that copies out of memory
  // (LocalSource, from a mapping) hashes each piece as it copies it; by
  // default the pieces are hashed where they landed, after the fetch.
  virtual void FetchHashing(RangeRequest* requests, size_t count, const FetchPlan& plan,
                            const uint8_t* hashed, ChunkHasher* hasher) {
    Fetch(requests, count, plan);
    for (size_t k = 0; k < count; ++k) {
      if (hashed[k] != 0) hasher->Append(requests[k].dst, static_cast<size_t>(requests[k].size));
    }
  }

  // How to fetch a batch whose runs are `ranges` (in plan order, dst unset),
  // asked once per batch before any is fetched.
  virtual FetchPlan PlanBatch(const RangeRequest* /*ranges*/, size_t /*count*/) {
    return FetchPlan{};
  }

  // Bytes of [offset, offset + size) of shard `file` failed a check (a
  // chunk's hash or header, a footer that does not parse). The source
  // forgets every copy it keeps of them (a shard's tail, readahead, the node
  // cache), so that no copy that failed is served again, and returns true
  // when one was the node cache's. By default false: nothing is kept.
  virtual bool DropCopy(size_t /*file*/, uint64_t /*offset*/, uint64_t /*size*/) { return false; }
  // Whether a read fetches again bytes of shard `file` that failed a check
  // `failures` times in it (from 1), after DropCopy said whether a copy was
  // dropped: true once the source has counted the refetch and waited as its
  // retry policy says. A store's bytes may be damaged on their way (a byte
  // flipped by a proxy, a NIC, memory), and one more GET reads the object's
  // own. By default false: a local shard's bytes are its own, read once.
  virtual bool Refetch(size_t /*file*/, int /*failures*/, bool /*copy_dropped*/) { return false; }
  // How many times in all a read may fetch bytes that fail a check (a
  // store's max_attempts), for messages; 1: the shard's own bytes.
  virtual int CheckAttempts() const { return 1; }

  // A hint that `ranges` (merged, dst unset) will be fetched soon: a source
  // may start reading them without waiting, and must not throw. By default
  // nothing is done.
  virtual void WillNeed(const RangeRequest* /*ranges*/, size_t /*count*/) {}

  // A number that changes when shard `file` may no longer hold the bytes a
  // reader verified: verified marks (VerifiedChunks) hold only while it
  // stays the same. A local file's is its device, inode, size and
  // modification time, as its open descriptor reports them now. By default
  // 0, for a source that pins each object's version on every read (object
  // storage: a request for a replaced object is refused). Throws as Size does.
  virtual uint64_t Identity(size_t /*file*/) { return 0; }

  // Whether a fetch is a system call on a local file rather than a request
  // in flight: back-to-back requests into several buffers are then read as
  // one range (one preadv), and two reads of a chunk one after the other,
  // from the page cache, cost less than copying it out of a fetched run.
  virtual bool ReadsLocalFiles() const { return false; }

  // Bytes the source keeps for its shards (names, sizes), for accounting.
  virtual size_t HeldBytes() const { return 0; }

  // Opens `files` ahead of reading them, together where the source can
  // (object storage: every shard's footer in one round of requests).
  // Throws as Size does. By default nothing: a shard opens when first read.
  virtual void OpenShards(const std::vector<size_t>& /*files*/) {}
};

}  // namespace sdsl

#endif  // SDS_LOADER_SHARD_SOURCE_H_
