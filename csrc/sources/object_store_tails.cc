// Opening shards: each one's tail (its footer) and first bytes in one round
// trip, shared through the node cache between the processes of a node.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "base/reader_error.h"
#include "container/array_record_index.h"
#include "sources/object_store_parts.h"
#include "sources/store_rules.h"

namespace sdsl {

std::vector<std::shared_ptr<const ObjectStoreSource::Tail>> ObjectStoreSource::OpenTails(
    const std::vector<size_t>& files) {
  std::vector<std::shared_ptr<const Tail>> opened(files.size());
  std::vector<size_t> wanted;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t k = 0; k < files.size(); ++k) {
      if (files[k] >= shards_.size())
        Fail(ErrorKind::kArgument, "no shard " + std::to_string(files[k]));
      auto found = tails_.find(files[k]);
      if (found != tails_.end()) {
        opened[k] = found->second;
      } else if (std::find(wanted.begin(), wanted.end(), files[k]) == wanted.end()) {
        wanted.push_back(files[k]);
      }
    }
  }
  if (wanted.empty()) return opened;
  const std::vector<TailAnswer> answers = FetchTails(wanted, kCacheTries);

  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t k = 0; k < wanted.size(); ++k) {
    const size_t file = wanted[k];
    const TailAnswer& answer = answers[k];
    Shard& shard = shards_[file];
    if (shard.known && (Contradicts(shard.version, answer.version) || shard.size != answer.size)) {
      StorageFail(Replaced(Name(file)));
    }
    shard.known = true;
    shard.size = answer.size;
    shard.version = answer.version;
    auto tail = std::make_shared<Tail>();
    tail->start = answer.start;
    tail->data = answer.data;
    tail->head = answer.head;
    tails_[file] = tail;
    tail_order_.erase(std::remove(tail_order_.begin(), tail_order_.end(), file), tail_order_.end());
    tail_order_.push_back(file);
    for (size_t j = 0; j < files.size(); ++j) {
      if (files[j] == file) opened[j] = tail;
    }
  }
  while (tail_order_.size() > settings_.tail_cache_shards) {
    tails_.erase(tail_order_.front());
    tail_order_.erase(tail_order_.begin());
  }
  return opened;
}

namespace {

// The node cache's locks on URLs being opened, let go of however the open ends.
class UrlLocks {
 public:
  UrlLocks(NodeCache* cache, const std::vector<std::string>& urls, size_t count)
      : cache_(cache), urls_(urls), fds_(count, -1) {}
  ~UrlLocks() { ReleaseAll(); }
  void ReleaseAll() {
    if (cache_ == nullptr) return;  // no cache: no lock was taken
    for (size_t k = 0; k < fds_.size(); ++k) {
      cache_->UnlockUrl(urls_[k], fds_[k]);
      fds_[k] = -1;
    }
  }
  int& operator[](size_t k) { return fds_[k]; }

 private:
  NodeCache* cache_;
  std::vector<std::string> urls_;
  std::vector<int> fds_;
};

}  // namespace

// A shard's opening as fetched (its last bytes, its first ones), read as a
// file whose other bytes are not held: the footer's parse says whether they
// are whole before anything keeps them.
class ObjectStoreSource::OpeningBytes : public RandomAccessBytes {
 public:
  OpeningBytes(const std::string& path, const TailAnswer& answer) : path_(path), answer_(answer) {}
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return answer_.size; }
  void ReadAt(uint64_t offset, uint64_t size, uint8_t* dst) const override {
    ++reads_;
    const std::string& data = answer_.data;
    const std::string& head = answer_.head;
    if (offset >= answer_.start && size <= data.size() &&
        offset - answer_.start <= data.size() - size) {
      std::memcpy(dst, data.data() + (offset - answer_.start), size);
    } else if (size <= head.size() && offset <= head.size() - size) {
      std::memcpy(dst, head.data() + offset, size);
    } else {
      missing_ = offset;
      throw ReaderError(ErrorKind::kIo, "not held");
    }
  }
  // Where the first read the opening does not hold began.
  uint64_t missing() const { return missing_; }
  size_t reads() const { return reads_; }

 private:
  const std::string& path_;
  const TailAnswer& answer_;
  mutable uint64_t missing_ = UINT64_MAX;
  mutable size_t reads_ = 0;
};

ObjectStoreSource::OpeningCheck ObjectStoreSource::CheckOpening(size_t file,
                                                                const TailAnswer& answer) const {
  OpeningCheck check;
  if (!settings_.check_openings) return check;
  const OpeningBytes bytes(settings_.uris[file], answer);
  try {
    ReadShardIndex(bytes, /*signature=*/answer.start == 0 || !answer.head.empty());
  } catch (const ReaderError& error) {
    if (error.kind() == ErrorKind::kCorrupt && bytes.reads() > 0) {
      // Bytes that fail: fetched again. A check that read none (the size)
      // fails however often they are, and is left to the core's own parse.
      check.result = OpeningCheck::kFailed;
      check.why = error.what();
    } else if (error.kind() == ErrorKind::kIo && bytes.missing() < answer.start) {
      check.result = OpeningCheck::kShort;  // the footer begins before the tail
      check.missing = bytes.missing();
    } else if (error.kind() != ErrorKind::kCorrupt && error.kind() != ErrorKind::kIo) {
      throw;
    }
  }
  return check;
}

void ObjectStoreSource::CompleteOpenings(const std::vector<size_t>& wanted,
                                         std::vector<size_t> check,
                                         std::vector<TailAnswer>* answers) {
  for (int failures = 0; !check.empty();) {
    // A footer longer than the tail: the part before it, in one more round,
    // so that the whole footer is checked (and kept) together.
    std::vector<OpeningCheck> checks(check.size());
    std::vector<S3Get> longer(check.size());
    std::vector<S3Get*> extend;
    for (size_t j = 0; j < check.size(); ++j) {
      const TailAnswer& answer = (*answers)[check[j]];
      checks[j] = CheckOpening(wanted[check[j]], answer);
      if (checks[j].result != OpeningCheck::kShort) continue;
      S3Get& get = longer[j];
      get.file = wanted[check[j]];
      get.first = checks[j].missing;
      get.size = answer.start - checks[j].missing;
      get.http.url = settings_.urls[get.file];
      get.http.range = RangeHeader(get.first, get.size);
      get.http.body_limit = get.size;
      RequireVersion(settings_.store, answer.version, &get.http);
      extend.push_back(&get);
    }
    if (!extend.empty()) Attempts(*this).Run(extend);
    std::vector<size_t> failed;
    std::string why;
    for (size_t j = 0; j < check.size(); ++j) {
      TailAnswer& answer = (*answers)[check[j]];
      if (checks[j].result == OpeningCheck::kShort) {
        if (Contradicts(answer.version, VersionOf(settings_.store, longer[j].http)))
          StorageFail(Replaced(Name(wanted[check[j]])));
        answer.data.insert(0, longer[j].http.body);
        answer.start = longer[j].first;
        checks[j] = CheckOpening(wanted[check[j]], answer);
        if (checks[j].result == OpeningCheck::kShort) {
          checks[j].result = OpeningCheck::kFailed;
          checks[j].why =
              "shard " + Name(wanted[check[j]]) + ": its footer is not where its postscript says";
        }
      }
      if (checks[j].result != OpeningCheck::kFailed) continue;
      if (failed.empty()) why = checks[j].why;
      failed.push_back(check[j]);
    }
    if (failed.empty()) return;
    ++failures;
    if (failures >= settings_.max_attempts) {
      const TailAnswer& answer = (*answers)[failed.front()];
      Corrupt(why +
              FailedFetches(Name(wanted[failed.front()]), answer.start, answer.size, failures));
    }
    // Fetched again, whole, as any retry: at once the first time.
    refetches_ += failed.size();
    if (failures >= 2) {
      std::mt19937_64 jitter(std::random_device{}());
      Back(failures - 2, jitter);
    }
    std::vector<size_t> files;
    for (const size_t k : failed) files.push_back(wanted[k]);
    std::vector<TailAnswer> again = FetchOpenings(files, std::vector<bool>(files.size(), false));
    for (size_t j = 0; j < failed.size(); ++j) (*answers)[failed[j]] = std::move(again[j]);
    check = std::move(failed);
  }
}

std::vector<ObjectStoreSource::TailAnswer> ObjectStoreSource::FetchOpenings(
    const std::vector<size_t>& files, const std::vector<bool>& probe) {
  // Each shard's tail and first bytes, all in flight at once. A head that
  // fails costs nothing (the core's own read of those bytes fetches and
  // reports), so heads get the tails' first attempt and no other.
  std::vector<S3Get> tails(files.size());
  std::vector<S3Get> heads(files.size());
  std::vector<S3Get*> required;
  std::vector<S3Get*> optional;
  for (size_t k = 0; k < files.size(); ++k) {
    const uint64_t tail_bytes = probe[k] ? 1 : settings_.tail_bytes;
    S3Get& tail = tails[k];
    tail.file = files[k];
    tail.tail = true;
    tail.http.url = settings_.urls[files[k]];
    tail.http.range = "bytes=-" + std::to_string(tail_bytes);
    tail.http.body_limit = tail_bytes;
    required.push_back(&tail);
    if (probe[k]) continue;
    S3Get& head = heads[k];
    head.file = files[k];
    head.size = settings_.head_bytes;
    head.http.url = settings_.urls[files[k]];
    head.http.range = RangeHeader(0, settings_.head_bytes);
    head.http.body_limit = settings_.head_bytes;
    optional.push_back(&head);
  }
  if (!required.empty()) Attempts(*this).Run(std::move(required), std::move(optional));
  std::vector<TailAnswer> answers(files.size());
  for (size_t k = 0; k < files.size(); ++k) {
    HttpGet& http = tails[k].http;
    ContentRange range{0, http.received, http.received};
    if (!http.content_range.empty()) ParseContentRange(http.content_range, &range);
    TailAnswer& answer = answers[k];
    answer.version = VersionOf(settings_.store, http);
    answer.size = range.total;
    if (probe[k]) continue;
    answer.start = range.first;
    answer.data = std::move(http.body);
    const S3Get& head = heads[k];
    if (answer.start > 0 && head.ok && VersionOf(settings_.store, head.http) == answer.version)
      answer.head = head.http.body;
  }
  return answers;
}

std::vector<ObjectStoreSource::TailAnswer> ObjectStoreSource::FetchTails(
    const std::vector<size_t>& wanted, int cache_tries, bool probe_cache) {
  NodeCache* const cache =
      cache_ != nullptr && cache_->enabled() && cache_tries > 0 ? cache_.get() : nullptr;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(settings_.http.stall_timeout_s));
  // With a node cache, a shard whose footer it may hold is asked only for
  // its last byte (its version and size, to check against the cache's); a
  // shard it knows nothing of is opened by one process of the node at a
  // time, so that the others find its footer in the cache. The locks are
  // taken without waiting: a shard another process is opening is left for
  // a second round, once this round's locks are let go, so that no process
  // waits for a lock while holding one another may be waiting for.
  std::vector<bool> probe(wanted.size(), false);
  std::vector<std::string> known_version(wanted.size());
  std::vector<uint64_t> known_size(wanted.size(), 0);
  std::vector<std::string> urls;
  for (const size_t file : wanted) urls.push_back(settings_.urls[file]);
  UrlLocks locks(cache, urls, wanted.size());
  std::vector<size_t> later;  // indexes into `wanted`: opened by another process now
  std::vector<size_t> mine;
  if (cache != nullptr) {
    for (size_t k = 0; k < wanted.size(); ++k) {
      probe[k] = probe_cache && cache->Known(urls[k], &known_version[k], &known_size[k]);
      if (!probe[k]) locks[k] = cache->LockUrl(urls[k], /*wait=*/false, deadline);
      // A read-only cache takes no locks: no process of the node writes it.
      (probe[k] || locks[k] >= 0 || cache->read_only() ? mine : later).push_back(k);
    }
  } else {
    for (size_t k = 0; k < wanted.size(); ++k) mine.push_back(k);
  }
  std::vector<size_t> files;
  std::vector<bool> probes;
  for (const size_t k : mine) {
    files.push_back(wanted[k]);
    probes.push_back(probe[k]);
  }
  std::vector<TailAnswer> fetched = FetchOpenings(files, probes);
  std::vector<TailAnswer> answers(wanted.size());
  std::vector<size_t> opened;  // indexes into `wanted`: opened from the store here
  std::vector<size_t> failed;  // read from the cache, and failed their check there
  for (size_t j = 0; j < mine.size(); ++j) {
    const size_t k = mine[j];
    answers[k] = std::move(fetched[j]);
    if (!probe[k]) {
      opened.push_back(k);
      continue;
    }
    // The process opening it may not have written its footer yet: tried
    // again once this round's locks are let go.
    const CachedTail got =
        ReadCachedTail(wanted[k], known_version[k], known_size[k], &answers[k], deadline);
    // A read-only cache that lacks it will not have it later, and on the
    // last try it has had its chances (its opener gave up, its entry was
    // damaged): fetched now, under the lock, and stored again.
    if (got == CachedTail::kNotYet)
      (cache->read_only() || cache_tries <= 1 ? failed : later).push_back(k);
    if (got == CachedTail::kFailed) failed.push_back(k);
  }
  // Nothing is kept, in memory or in the cache, before the footer it holds
  // parses and its hashes verify: bytes that fail are fetched again.
  CompleteOpenings(wanted, opened, &answers);
  if (cache != nullptr) {
    for (const size_t k : opened) {
      const TailAnswer& answer = answers[k];
      if (answer.version.empty()) continue;
      const std::shared_ptr<NodeCache::Object> object =
          cache->Open(urls[k], answer.version, answer.size);
      if (object == nullptr) continue;
      cache->Store(*object, answer.start, answer.data.size(),
                   reinterpret_cast<const uint8_t*>(answer.data.data()));
      if (!answer.head.empty()) {
        cache->Store(*object, 0, answer.head.size(),
                     reinterpret_cast<const uint8_t*>(answer.head.data()));
      }
    }
  }
  locks.ReleaseAll();
  if (!failed.empty()) {
    // What the cache held failed: fetched from the store by one process, as
    // a shard the cache knows nothing of.
    std::vector<size_t> again;
    for (const size_t k : failed) again.push_back(wanted[k]);
    std::vector<TailAnswer> fresh = FetchTails(again, cache_tries, /*probe_cache=*/false);
    for (size_t j = 0; j < failed.size(); ++j) answers[failed[j]] = std::move(fresh[j]);
  }
  if (!later.empty()) {
    // Holding no lock now: wait for each opener to let go, then read what
    // it left in the cache (or fetch the shard, on the last try).
    std::vector<size_t> waited;
    for (const size_t k : later) {
      cache->UnlockUrl(urls[k], cache->LockUrl(urls[k], /*wait=*/true, deadline));
      waited.push_back(wanted[k]);
    }
    // Every try looks in the cache first: an opener that has let go has
    // stored what it fetched, and fetching it again would cost its bytes
    // twice. The last try fetches what the cache still lacks (see above).
    const bool in_time = std::chrono::steady_clock::now() < deadline;
    const std::vector<TailAnswer> got = FetchTails(waited, in_time ? cache_tries - 1 : 0);
    for (size_t j = 0; j < later.size(); ++j) answers[later[j]] = got[j];
  }
  return answers;
}

ObjectStoreSource::CachedTail ObjectStoreSource::ReadCachedTail(
    size_t file, const std::string& known_version, uint64_t known_size, TailAnswer* answer,
    std::chrono::steady_clock::time_point deadline) {
  if (answer->version.empty() || answer->version != known_version || answer->size != known_size)
    return CachedTail::kNotYet;
  const std::shared_ptr<NodeCache::Object> object =
      cache_->Open(settings_.urls[file], answer->version, answer->size);
  if (object == nullptr) return CachedTail::kNotYet;
  // Not waited for: the caller may hold locks that another process needs.
  auto read = [&](uint64_t offset, uint64_t size, std::string* into) {
    std::string bytes(size, '\0');
    const std::vector<NodeCache::Gap> gaps =
        cache_->Read(*object, offset, size, reinterpret_cast<uint8_t*>(bytes.data()), deadline,
                     /*may_wait=*/false, /*readahead=*/true);
    for (const NodeCache::Gap& gap : gaps) cache_->Release(gap);
    if (gaps.empty()) *into = std::move(bytes);
    return gaps.empty();
  };
  const uint64_t start =
      answer->size > settings_.tail_bytes ? answer->size - settings_.tail_bytes : 0;
  if (!read(start, answer->size - start, &answer->data)) return CachedTail::kNotYet;
  answer->start = start;
  // The head is optional: without it, the core's first read of those bytes fetches them.
  const uint64_t head_bytes = std::min(settings_.head_bytes, start);
  if (head_bytes > 0) read(0, head_bytes, &answer->head);
  OpeningCheck check = CheckOpening(file, *answer);
  if (check.result == OpeningCheck::kShort) {
    // A footer longer than the tail was kept with it, as one entry.
    std::string before;
    if (!read(check.missing, answer->start - check.missing, &before)) return CachedTail::kFailed;
    answer->data.insert(0, before);
    answer->start = check.missing;
    check = CheckOpening(file, *answer);
  }
  if (check.result == OpeningCheck::kWhole) return CachedTail::kRead;
  // Damaged in the cache: dropped, and fetched from the store.
  cache_->Forget(*object, answer->start, answer->size - answer->start);
  if (!answer->head.empty()) cache_->Forget(*object, 0, answer->head.size());
  ++refetches_;
  return CachedTail::kFailed;
}

uint64_t ObjectStoreSource::Size(size_t file) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const Shard& shard = shards_.at(file);
    if (shard.known) return shard.size;
  }
  OpenTails({file});
  return ShardOf(file).size;
}

}  // namespace sdsl
