// What the parts of ObjectStoreSource share, each in a unit of its own:
// attempts and retries (object_store_attempts.cc), shard tails
// (object_store_tails.cc), readahead (object_store_readahead.cc), writes
// into the node cache (object_store_cache_writes.cc), and the reads
// themselves (object_store_source.cc). Not for use outside them.
#ifndef SDS_LOADER_SOURCES_OBJECT_STORE_PARTS_H_
#define SDS_LOADER_SOURCES_OBJECT_STORE_PARTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sources/http_client.h"
#include "sources/node_cache.h"
#include "sources/object_store_source.h"

namespace sdsl {

[[noreturn]] void StorageFail(const std::string& message);

struct ContentRange {
  uint64_t first = 0;
  uint64_t end = 0;  // one past the last byte
  uint64_t total = 0;
};
// "bytes FIRST-LAST/TOTAL"
bool ParseContentRange(std::string_view text, ContentRange* range);
std::string RangeHeader(uint64_t first, uint64_t size);

struct ObjectStoreSource::Tail {
  uint64_t start = 0;  // where `data` begins in the shard
  std::string data;    // the shard's last bytes
  std::string head;    // its first bytes; empty when `data` holds them or they were not read
};

// One GET a read needs, with what its answer must be: `size` bytes from
// `first` (or, for a tail, the last bytes of the object).
struct S3Get {
  size_t file = 0;
  uint64_t first = 0;
  uint64_t size = 0;
  bool tail = false;
  HttpGet http;
  std::string reason;  // why the last attempt failed, when it may be tried again
  bool ok = false;     // for an optional GET: whether it got its bytes
  bool whole = false;  // a tail asked for as the whole object
  bool free = false;   // the last attempt failed in a way that costs no retry
};

// Runs GETs to their end, retrying what may succeed later; throws a storage
// error for what will not.
class ObjectStoreSource::Attempts {
 public:
  // `spent`: attempts already used up (waiting for an announcement that stalled).
  explicit Attempts(ObjectStoreSource& source, int spent = 0)
      : source_(source), closes_(source.closes_.load()), spent_(spent) {}

  // `optional` GETs go out with the first attempt of `pending`, are never
  // tried again, and never fail the call: each says in `ok` how it ended.
  void Run(std::vector<S3Get*> pending, std::vector<S3Get*> optional = {});

 private:
  // True when `get` got the bytes it asked for; false (with a reason) when
  // another attempt may; throws when none will.
  bool Check(S3Get& get);

  ObjectStoreSource& source_;
  const uint64_t closes_;
  const int spent_;
};

// Lets go of the claims of gaps whose fetch did not finish.
class ClaimRelease {
 public:
  ClaimRelease(NodeCache* cache, std::vector<std::pair<size_t, NodeCache::Gap>>* gaps)
      : cache_(cache), gaps_(gaps) {}
  ~ClaimRelease() {
    for (const auto& gap : *gaps_) cache_->Release(gap.second);
  }

 private:
  NodeCache* cache_;
  std::vector<std::pair<size_t, NodeCache::Gap>>* gaps_;
};

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_OBJECT_STORE_PARTS_H_
