// Opening shards: each one's tail (its footer) and first bytes in one round
// trip, shared through the node cache between the processes of a node.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <utility>

#include "base/reader_error.h"
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

std::vector<ObjectStoreSource::TailAnswer> ObjectStoreSource::FetchTails(
    const std::vector<size_t>& wanted, int cache_tries) {
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
      probe[k] = cache->Known(urls[k], &known_version[k], &known_size[k]);
      if (!probe[k]) locks[k] = cache->LockUrl(urls[k], /*wait=*/false, deadline);
      (probe[k] || locks[k] >= 0 ? mine : later).push_back(k);
    }
  } else {
    for (size_t k = 0; k < wanted.size(); ++k) mine.push_back(k);
  }
  // Each shard's tail and first bytes, all in flight at once. A head that
  // fails costs nothing (the core's own read of those bytes fetches and
  // reports), so heads get the tails' first attempt and no other.
  std::vector<S3Get> tails(wanted.size());
  std::vector<S3Get> heads(wanted.size());
  std::vector<S3Get*> required;
  std::vector<S3Get*> optional;
  for (const size_t k : mine) {
    const uint64_t tail_bytes = probe[k] ? 1 : settings_.tail_bytes;
    S3Get& tail = tails[k];
    tail.file = wanted[k];
    tail.tail = true;
    tail.http.url = urls[k];
    tail.http.range = "bytes=-" + std::to_string(tail_bytes);
    tail.http.body_limit = tail_bytes;
    required.push_back(&tail);
    if (probe[k]) continue;
    S3Get& head = heads[k];
    head.file = wanted[k];
    head.size = settings_.head_bytes;
    head.http.url = urls[k];
    head.http.range = RangeHeader(0, settings_.head_bytes);
    head.http.body_limit = settings_.head_bytes;
    optional.push_back(&head);
  }
  if (!required.empty()) Attempts(*this).Run(std::move(required), std::move(optional));

  std::vector<TailAnswer> answers(wanted.size());
  for (const size_t k : mine) {
    const HttpGet& http = tails[k].http;
    ContentRange range{0, http.received, http.received};
    if (!http.content_range.empty()) ParseContentRange(http.content_range, &range);
    TailAnswer& answer = answers[k];
    answer.version = VersionOf(settings_.store, http);
    answer.size = range.total;
    if (probe[k]) {
      // The process opening it may not have written its footer yet: tried
      // again once this round's locks are let go.
      if (!ReadCachedTail(wanted[k], known_version[k], known_size[k], &answer, deadline))
        later.push_back(k);
      continue;
    }
    answer.start = range.first;
    answer.data = http.body;
    const S3Get& head = heads[k];
    if (answer.start > 0 && head.ok && VersionOf(settings_.store, head.http) == answer.version)
      answer.head = head.http.body;
    if (cache != nullptr && !answer.version.empty()) {
      const std::shared_ptr<NodeCache::Object> object =
          cache->Open(urls[k], answer.version, answer.size);
      if (object != nullptr) {
        cache->Store(*object, answer.start, answer.data.size(),
                     reinterpret_cast<const uint8_t*>(answer.data.data()));
        if (!answer.head.empty()) {
          cache->Store(*object, 0, answer.head.size(),
                       reinterpret_cast<const uint8_t*>(answer.head.data()));
        }
      }
    }
  }
  locks.ReleaseAll();
  if (!later.empty()) {
    // Holding no lock now: wait for each opener to let go, then read what
    // it left in the cache (or fetch the shard, on the last try).
    std::vector<size_t> files;
    for (const size_t k : later) {
      cache->UnlockUrl(urls[k], cache->LockUrl(urls[k], /*wait=*/true, deadline));
      files.push_back(wanted[k]);
    }
    const bool in_time = std::chrono::steady_clock::now() < deadline;
    const std::vector<TailAnswer> fetched = FetchTails(files, in_time ? cache_tries - 1 : 0);
    for (size_t j = 0; j < later.size(); ++j) answers[later[j]] = fetched[j];
  }
  return answers;
}

bool ObjectStoreSource::ReadCachedTail(size_t file, const std::string& known_version,
                                       uint64_t known_size, TailAnswer* answer,
                                       std::chrono::steady_clock::time_point deadline) {
  if (answer->version.empty() || answer->version != known_version || answer->size != known_size)
    return false;
  const std::shared_ptr<NodeCache::Object> object =
      cache_->Open(settings_.urls[file], answer->version, answer->size);
  if (object == nullptr) return false;
  const uint64_t start =
      answer->size > settings_.tail_bytes ? answer->size - settings_.tail_bytes : 0;
  std::string data(answer->size - start, '\0');
  // Not waited for: the caller may hold locks that another process needs.
  std::vector<NodeCache::Gap> gaps =
      cache_->Read(*object, start, data.size(), reinterpret_cast<uint8_t*>(data.data()), deadline,
                   /*may_wait=*/false);
  if (!gaps.empty()) {
    for (const NodeCache::Gap& gap : gaps) cache_->Release(gap);
    return false;
  }
  answer->start = start;
  answer->data = std::move(data);
  const uint64_t head_bytes = std::min(settings_.head_bytes, start);
  if (head_bytes > 0) {
    std::string head(head_bytes, '\0');
    gaps = cache_->Read(*object, 0, head_bytes, reinterpret_cast<uint8_t*>(head.data()), deadline,
                        /*may_wait=*/false, /*readahead=*/true);
    // The head is optional: without it, the core's first read of those bytes fetches them.
    if (gaps.empty()) answer->head = std::move(head);
    for (const NodeCache::Gap& gap : gaps) cache_->Release(gap);
  }
  return true;
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
