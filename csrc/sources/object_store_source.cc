#include "sources/object_store_source.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <utility>

#include "base/reader_error.h"
#include "sources/store_rules.h"

namespace sdsl {
namespace {

[[noreturn]] void StorageFail(const std::string& message) { Fail(ErrorKind::kStorage, message); }

struct ContentRange {
  uint64_t first = 0;
  uint64_t end = 0;  // one past the last byte
  uint64_t total = 0;
};

bool ParseNumber(std::string_view text, uint64_t* value) {
  if (text.empty()) return false;
  const auto [ptr, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && ptr == text.data() + text.size();
}

// "bytes FIRST-LAST/TOTAL"
bool ParseContentRange(std::string_view text, ContentRange* range) {
  if (text.substr(0, 6) != "bytes ") return false;
  text.remove_prefix(6);
  const size_t dash = text.find('-');
  const size_t slash = text.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || slash < dash)
    return false;
  uint64_t last = 0;
  if (!ParseNumber(text.substr(0, dash), &range->first) ||
      !ParseNumber(text.substr(dash + 1, slash - dash - 1), &last) ||
      !ParseNumber(text.substr(slash + 1), &range->total) || last < range->first ||
      last >= range->total) {
    return false;
  }
  range->end = last + 1;
  return true;
}

std::string RangeHeader(uint64_t first, uint64_t size) {
  return "bytes=" + std::to_string(first) + "-" + std::to_string(first + size - 1);
}

}  // namespace

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
  void Run(std::vector<S3Get*> pending, std::vector<S3Get*> optional = {}) {
    const ObjectStoreSettings& settings = source_.settings_;
    std::mt19937_64 jitter(std::random_device{}());
    for (int attempt = spent_; attempt < settings.max_attempts && !pending.empty(); ++attempt) {
      if (source_.closes_.load() != closes_) {
        StorageFail("the reader of " + source_.Name(pending.front()->file) +
                    " was closed during a read");
      }
      std::vector<HttpGet*> gets;
      gets.reserve(pending.size());
      for (S3Get* get : pending) gets.push_back(&get->http);
      for (S3Get* get : optional) gets.push_back(&get->http);
      source_.client_.Perform(gets.data(), gets.size());
      for (S3Get* get : optional) {
        try {
          get->ok = Check(*get);
        } catch (const ReaderError&) {
          get->ok = false;
        }
      }
      optional.clear();
      std::vector<S3Get*> again;
      size_t costly = 0;
      for (S3Get* get : pending) {
        get->free = false;
        if (!Check(*get)) {
          again.push_back(get);
          costly += get->free ? 0 : 1;
        }
      }
      pending.swap(again);
      if (costly > 0 && attempt + 1 < settings.max_attempts) {
        source_.retries_ += costly;
        const double ceiling =
            std::min(settings.backoff_max_s,
                     settings.backoff_s * static_cast<double>(1u << std::min(attempt, 20)));
        const double delay = std::uniform_real_distribution<double>(ceiling / 2, ceiling)(jitter);
        std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      }
    }
    if (!pending.empty()) {
      const S3Get& failed = *pending.front();
      StorageFail("reading " + source_.Name(failed.file) + " failed " +
                  std::to_string(settings.max_attempts) +
                  " times; the last attempt: " + failed.reason);
    }
  }

 private:
  // True when `get` got the bytes it asked for; false (with a reason) when
  // another attempt may; throws when none will.
  bool Check(S3Get& get) {
    const HttpGet& http = get.http;
    const std::string& uri = source_.Name(get.file);
    if (http.status == 0) {
      get.reason = http.failure;
      return false;
    }
    if (http.status != 200 && http.status != 206) {
      const ObjectStoreKind store = source_.settings_.store;
      const std::string code = ErrorCode(store, http.body);
      if (get.tail && http.status == 416 && !get.whole) {
        // Some servers refuse a suffix longer than the object, which S3
        // answers with the whole object: ask for the whole (small) object.
        get.whole = true;
        get.free = true;
        get.http.range.clear();
        get.reason = "the server refused a suffix range longer than the object";
        return false;
      }
      if (!Transient(store, http.status, code))
        Permanent(store, http.status, code, uri, source_.identified_.load());
      get.reason = "HTTP " + std::to_string(http.status) + (code.empty() ? "" : " " + code);
      return false;
    }
    if (http.overflowed) {
      get.reason = "the answer held more bytes than were asked for";
      return false;
    }
    ContentRange range;
    if (http.content_range.empty() && http.status == 200) {
      range = {0, http.received, http.received};  // the whole object
    } else if (!ParseContentRange(http.content_range, &range)) {
      get.reason = "unreadable Content-Range '" + http.content_range + "'";
      return false;
    }
    const Shard shard = source_.ShardOf(get.file);
    const std::string version = VersionOf(source_.settings_.store, http);
    if (shard.known && Contradicts(shard.version, version)) StorageFail(Replaced(uri));
    if (get.tail) {
      if (range.end != range.total || range.end - range.first != http.received) {
        get.reason = "asked for the last bytes, got bytes " + std::to_string(range.first) + "-" +
                     std::to_string(range.end) + " of " + std::to_string(range.total);
        return false;
      }
    } else {
      if (shard.known && range.total != shard.size) StorageFail(Replaced(uri));
      const uint64_t expected = get.size;
      if (range.first != get.first || range.end - range.first != expected ||
          http.received != expected) {
        get.reason = "asked for bytes " + std::to_string(get.first) + "-" +
                     std::to_string(get.first + get.size) + ", got " +
                     std::to_string(http.received) + " bytes (" + std::to_string(range.first) +
                     "-" + std::to_string(range.end) + ")";
        return false;
      }
    }
    source_.requests_ += 1;
    source_.bytes_ += http.received;
    return true;
  }

  ObjectStoreSource& source_;
  const uint64_t closes_;
  const int spent_;
};

ObjectStoreSource::ObjectStoreSource(ObjectStoreSettings settings)
    : settings_(std::move(settings)),
      client_(settings_.http),
      ahead_(settings_.readahead_bytes),
      cache_(settings_.cache_dir.empty()
                 ? nullptr
                 : std::make_unique<NodeCache>(settings_.cache_dir, settings_.cache_limit,
                                               settings_.cache_floor)),
      shards_(settings_.urls.size()),
      cached_(settings_.urls.size()),
      cached_version_(settings_.urls.size()),
      writer_(std::make_unique<TaskThread>(/*max_pending=*/8)) {
  for (size_t k = 0; k < kReadaheadThreads; ++k) {
    readahead_.push_back(std::make_unique<TaskThread>(/*max_pending=*/8));
  }
  if (settings_.uris.size() != settings_.urls.size()) {
    Fail(ErrorKind::kArgument, "an S3 source needs one URI and one URL per shard");
  }
  if (settings_.max_attempts < 1) Fail(ErrorKind::kArgument, "max_attempts must be at least 1");
  StartGuarding();
}

ObjectStoreSource::~ObjectStoreSource() { StopGuarding(); }

void ObjectStoreSource::LockForFork() { mutex_.lock(); }

void ObjectStoreSource::UnlockInParent() { mutex_.unlock(); }

void ObjectStoreSource::ResetInChild() { mutex_.unlock(); }

std::shared_ptr<NodeCache::Object> ObjectStoreSource::CachedObject(size_t file) {
  Shard shard;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shard = shards_.at(file);
    if (cache_ == nullptr || !shard.known || shard.version.empty()) return nullptr;
    if (cached_version_[file] == shard.version) return cached_[file];
  }
  // Opened outside the lock: it reads the object's directory.
  std::shared_ptr<NodeCache::Object> object =
      cache_->Open(settings_.urls[file], shard.version, shard.size);
  std::lock_guard<std::mutex> lock(mutex_);
  cached_[file] = object;
  cached_version_[file] = shard.version;
  return object;
}

namespace {

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

}  // namespace

void ObjectStoreSource::StoreGaps(std::vector<std::pair<size_t, NodeCache::Gap>> gaps) {
  // Runs of back-to-back gaps (a chunk's header and payload go to different
  // buffers) become one entry, not one per buffer. Their bytes are copied
  // (the buffers are the caller's) and written on the writer thread, off
  // the read's path; the claims are let go once they are written, so that a
  // process waiting for them finds them.
  struct Run {
    size_t file = 0;
    uint64_t offset = 0;
    std::vector<uint8_t> data;
  };
  auto runs = std::make_shared<std::vector<Run>>();
  size_t k = 0;
  while (k < gaps.size()) {
    size_t end = k + 1;
    uint64_t size = gaps[k].second.size;
    while (end < gaps.size() && gaps[end].first == gaps[k].first &&
           gaps[end].second.offset == gaps[k].second.offset + size && size < settings_.part_bytes) {
      size += gaps[end].second.size;
      ++end;
    }
    Run run;
    run.file = gaps[k].first;
    run.offset = gaps[k].second.offset;
    run.data.resize(size);
    uint64_t at = 0;
    for (size_t j = k; j < end; ++j) {
      std::memcpy(run.data.data() + at, gaps[j].second.dst, gaps[j].second.size);
      at += gaps[j].second.size;
    }
    runs->push_back(std::move(run));
    k = end;
  }
  auto claims = std::make_shared<std::vector<std::pair<size_t, NodeCache::Gap>>>(std::move(gaps));
  auto store = [this, runs, claims]() {
    ClaimRelease release(cache_.get(), claims.get());
    for (const Run& run : *runs) {
      const std::shared_ptr<NodeCache::Object> object = CachedObject(run.file);
      if (object != nullptr) cache_->Store(*object, run.offset, run.data.size(), run.data.data());
    }
  };
  bool posted = false;
  try {
    posted = writer_->Post(store);
  } catch (...) {
    posted = false;
  }
  // A writer that falls behind slows the reads down rather than the
  // queue growing: the entries are written here.
  if (!posted) store();
}

ObjectStoreSource::Shard ObjectStoreSource::ShardOf(size_t file) {
  std::lock_guard<std::mutex> lock(mutex_);
  return shards_.at(file);
}

void ObjectStoreSource::SetCredentials(HttpCredentials credentials) {
  identified_ = credentials.identified();
  client_.SetCredentials(std::move(credentials));
}

ObjectStoreCounters ObjectStoreSource::counters() const {
  ObjectStoreCounters counters;
  counters.requests = requests_.load();
  counters.bytes = bytes_.load();
  counters.retries = retries_.load();
  counters.ahead_hits = ahead_hits_.load();
  return counters;
}

void ObjectStoreSource::Close() {
  ++closes_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tails_.clear();
    tail_order_.clear();
  }
  ahead_.Clear();
  client_.DropConnections();
}

void ObjectStoreSource::OpenShards(const std::vector<size_t>& files) { OpenTails(files); }

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

FetchPlan ObjectStoreSource::PlanBatch(const RangeRequest* ranges, size_t count) {
  FetchPlan plan;
  plan.gather_bytes = uint64_t{16} << 20;
  if (cache_ == nullptr || !cache_->enabled()) return plan;
  // A batch the node cache holds whole is read as local shards are: each
  // run by the thread that decodes it, the runs side by side, while its
  // bytes are still in that thread's cache.
  for (size_t k = 0; k < count; ++k) {
    const std::shared_ptr<NodeCache::Object> object = CachedObject(ranges[k].file);
    if (object == nullptr || !cache_->Holds(*object, ranges[k].offset, ranges[k].size)) return plan;
  }
  plan.gather_bytes = 0;
  return plan;
}

void ObjectStoreSource::Fetch(RangeRequest* requests, size_t count, const FetchPlan& /*plan*/) {
  // What the tail, the head and the readahead cache do not hold is fetched:
  // back-to-back requests of one shard as one range, long ranges in parts.
  // Every shard's tail is opened first, in one round: opening may wait for
  // another process, and nothing is claimed yet.
  std::vector<size_t> files;
  for (size_t k = 0; k < count; ++k) {
    if (requests[k].size > 0 && (files.empty() || files.back() != requests[k].file))
      files.push_back(requests[k].file);
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  const std::vector<std::shared_ptr<const Tail>> opened = OpenTails(files);
  std::vector<RangeRequest> rest;
  // Ranges the node cache lacks, each claimed for this read while it is
  // fetched: let go of when stored, or when the fetch fails.
  std::vector<std::pair<size_t, NodeCache::Gap>> gaps;
  ClaimRelease release(cache_.get(), &gaps);
  // Ranges another process is fetching, read again once this read's own
  // claims are fetched: a read never waits while it holds claims.
  std::vector<std::pair<size_t, NodeCache::Gap>> pending;
  // Waiting for announced bytes is the first attempt at them, bounded as
  // any attempt is by the stall timeout: a read that waited that long for
  // an announcement that stalled has one attempt fewer of its own.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(settings_.http.stall_timeout_s));
  bool announcement_stalled = false;
  size_t cached_file = 0;
  std::shared_ptr<NodeCache::Object> cached_object;
  std::vector<NodeCache::Gap> cached_wanted;
  auto take = [&](size_t file, const std::vector<NodeCache::Gap>& found) {
    for (const NodeCache::Gap& gap : found) {
      if (gap.claim_fd == NodeCache::Gap::kPending) {
        pending.emplace_back(file, gap);
        continue;
      }
      rest.push_back({file, gap.offset, gap.size, gap.dst});
      gaps.emplace_back(file, gap);
    }
  };
  auto flush_cached = [&](bool may_wait) {
    if (cached_wanted.empty()) return;
    take(cached_file, cache_->Read(*cached_object, cached_wanted, deadline, may_wait));
    cached_wanted.clear();
  };
  for (size_t k = 0; k < count; ++k) {
    RangeRequest request = requests[k];
    if (request.size == 0) continue;
    const size_t at = static_cast<size_t>(
        std::lower_bound(files.begin(), files.end(), request.file) - files.begin());
    const std::shared_ptr<const Tail>& tail = opened[at];
    const Shard shard = ShardOf(request.file);
    if (request.offset > shard.size || request.size > shard.size - request.offset) {
      StorageFail(Name(request.file) + " holds " + std::to_string(shard.size) + " bytes; bytes " +
                  std::to_string(request.offset) + "-" +
                  std::to_string(request.offset + request.size) +
                  " were asked for. The shard is shorter than its footer says: it was truncated or "
                  "replaced");
    }
    const uint64_t end = request.offset + request.size;
    if (end <= tail->head.size()) {
      std::memcpy(request.dst, tail->head.data() + request.offset, request.size);
      continue;
    }
    if (end > tail->start) {
      const uint64_t split = request.offset >= tail->start ? 0 : tail->start - request.offset;
      std::memcpy(request.dst + split, tail->data.data() + (request.offset + split - tail->start),
                  request.size - split);
      request.size = split;
      if (split == 0) continue;
    }
    const AheadCache::Copy copied =
        ahead_.CopyOut(request.file, request.offset, request.size, shard.version, request.dst,
                       announcement_stalled ? std::chrono::steady_clock::time_point{} : deadline);
    if (copied == AheadCache::Copy::kCopied) {
      ++ahead_hits_;
      continue;
    }
    if (copied == AheadCache::Copy::kStalled && !announcement_stalled) {
      announcement_stalled = true;
      if (settings_.max_attempts <= 1) {
        StorageFail("reading " + Name(request.file) + " failed: the bytes announced for it " +
                    "stalled for " + std::to_string(settings_.http.stall_timeout_s) +
                    " s (the stall timeout), and max_attempts=1 allows no attempt of its own");
      }
    }
    const std::shared_ptr<NodeCache::Object> object =
        cache_ != nullptr && cache_->enabled() ? CachedObject(request.file) : nullptr;
    if (object == nullptr) {
      rest.push_back(request);
      continue;
    }
    // A shard's requests go to the node cache together (they come shard by
    // shard), its misses claimed in one round; after the first shard this
    // read holds claims, so it waits for none.
    if (cached_file != request.file) flush_cached(gaps.empty());
    cached_file = request.file;
    cached_object = object;
    NodeCache::Gap wanted;
    wanted.offset = request.offset;
    wanted.size = request.size;
    wanted.dst = request.dst;
    cached_wanted.push_back(std::move(wanted));
  }
  flush_cached(gaps.empty());
  int attempts_spent = announcement_stalled ? 1 : 0;
  for (;;) {
    if (!rest.empty()) FetchParts(rest, attempts_spent);
    rest.clear();
    // Stored on the writer thread, which lets go of the claims once they are
    // written, whatever this read does next.
    if (!gaps.empty()) StoreGaps(std::move(gaps));
    gaps.clear();
    if (pending.empty()) break;
    std::vector<std::pair<size_t, NodeCache::Gap>> waiting;
    waiting.swap(pending);
    size_t k = 0;
    while (k < waiting.size()) {
      const size_t file = waiting[k].first;
      std::vector<NodeCache::Gap> again;
      for (; k < waiting.size() && waiting[k].first == file; ++k) {
        NodeCache::Gap gap = waiting[k].second;
        gap.claim_fd = NodeCache::Gap::kUnclaimed;
        again.push_back(std::move(gap));
      }
      const std::shared_ptr<NodeCache::Object> object = CachedObject(file);
      if (object == nullptr) {
        for (const NodeCache::Gap& gap : again)
          rest.push_back({file, gap.offset, gap.size, gap.dst});
        continue;
      }
      take(file, cache_->Read(*object, again, deadline, /*may_wait=*/gaps.empty()));
    }
    attempts_spent = 0;
  }
}

void ObjectStoreSource::FetchParts(std::vector<RangeRequest>& requests, int attempts_spent) {
  std::vector<S3Get> gets;
  gets.reserve(requests.size() + 8);
  auto add_part = [&](size_t file, uint64_t offset, uint64_t size, uint8_t* dst, bool extend) {
    if (extend) {
      S3Get& last = gets.back();
      last.size += size;
      last.http.spans.push_back({dst, size});
      return;
    }
    S3Get get;
    get.file = file;
    get.first = offset;
    get.size = size;
    get.http.url = settings_.urls[file];
    get.http.spans.push_back({dst, size});
    gets.push_back(std::move(get));
  };
  for (const RangeRequest& request : requests) {
    uint64_t done = 0;
    while (done < request.size) {
      const uint64_t offset = request.offset + done;
      const bool follows = !gets.empty() && gets.back().file == request.file &&
                           gets.back().first + gets.back().size == offset &&
                           gets.back().size < settings_.part_bytes;
      const uint64_t room =
          follows ? settings_.part_bytes - gets.back().size : settings_.part_bytes;
      const uint64_t take = std::min(room, request.size - done);
      add_part(request.file, offset, take, request.dst + done, follows);
      done += take;
    }
  }
  std::vector<S3Get*> pending;
  for (S3Get& get : gets) {
    const Shard shard = ShardOf(get.file);
    get.http.range = RangeHeader(get.first, get.size);
    RequireVersion(settings_.store, shard.version, &get.http);
    pending.push_back(&get);
  }
  Attempts(*this, attempts_spent).Run(std::move(pending));
}

bool ObjectStoreSource::DropCopy(size_t file, uint64_t offset, uint64_t size) {
  if (cache_ == nullptr || file >= shards_.size()) return false;
  const std::shared_ptr<NodeCache::Object> object = CachedObject(file);
  return object != nullptr && cache_->Forget(*object, offset, size);
}

void ObjectStoreSource::WillNeed(const RangeRequest* ranges, size_t count) {
  std::vector<AheadCache::Wanted> wanted;
  for (size_t k = 0; k < count; ++k) {
    if (ranges[k].file >= shards_.size()) continue;
    // What the node cache holds is read from there when it is needed, as a
    // local shard is: fetching it ahead into memory would only copy it twice.
    if (cache_ != nullptr && cache_->enabled()) {
      std::shared_ptr<NodeCache::Object> object;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        const Shard& shard = shards_[ranges[k].file];
        if (shard.known && !shard.version.empty() &&
            cached_version_[ranges[k].file] == shard.version) {
          object = cached_[ranges[k].file];
        }
      }
      if (object != nullptr && cache_->Holds(*object, ranges[k].offset, ranges[k].size)) continue;
    }
    // Long runs in parts, so that they come over several connections.
    for (uint64_t done = 0; done < ranges[k].size; done += settings_.part_bytes) {
      wanted.push_back({ranges[k].file, ranges[k].offset + done,
                        std::min(settings_.part_bytes, ranges[k].size - done)});
    }
  }
  if (wanted.empty()) return;
  // Reserved here, not on the readahead thread: a read that follows the hint
  // at once (a new reader's probe of its first record) then waits for these
  // bytes instead of sending a second request for them.
  std::vector<std::shared_ptr<AheadRange>> reserved;
  try {
    reserved = ahead_.Reserve(wanted);
    if (reserved.empty()) return;
    // The next thread in turn, or any other that has room for it.
    const size_t first = next_readahead_++;
    for (size_t k = 0; k < readahead_.size(); ++k) {
      auto task = [this, reserved]() { ReadAhead(reserved); };
      if (readahead_[(first + k) % readahead_.size()]->Post(std::move(task))) return;
    }
  } catch (...) {
    // A hint that cannot be queued is dropped.
  }
  for (const auto& range : reserved) ahead_.Finish(range, false);
}

bool ObjectStoreSource::WaitForReadahead(double seconds) {
  const auto deadline = TaskThread::DeadlineAfter(seconds);
  for (const auto& thread : readahead_) {
    if (!thread->WaitForEarlier(deadline)) return false;
  }
  return writer_->WaitForEarlier(deadline);
}

bool ObjectStoreSource::WaitForWrites(double seconds) {
  return writer_->WaitForEarlier(TaskThread::DeadlineAfter(seconds));
}

void ObjectStoreSource::ReadAhead(const std::vector<std::shared_ptr<AheadRange>>& ranges) {
  size_t finished = 0;
  std::vector<std::pair<size_t, NodeCache::Gap>> gaps;
  ClaimRelease release(cache_.get(), &gaps);
  try {
    // Each range's GETs: the whole range, or with a node cache only what it
    // lacks (none: the range is read from the disk). A range another process
    // is fetching is left to the read that needs it, which waits for it.
    struct Get {
      size_t range = 0;
      uint64_t offset = 0;
      HttpGet http;
    };
    std::vector<Get> gets;
    gets.reserve(ranges.size());
    std::vector<bool> skipped(ranges.size(), false);
    if (cache_ != nullptr && cache_->enabled()) {
      // The node cache keys a shard's bytes by its version: a shard not yet
      // open (a new reader's first record) is opened here, off the reads' thread.
      std::vector<size_t> closed;
      for (const auto& range : ranges) {
        if (!ShardOf(range->file).known) closed.push_back(range->file);
      }
      if (!closed.empty()) OpenTails(closed);
    }
    for (size_t k = 0; k < ranges.size(); ++k) {
      AheadRange& range = *ranges[k];
      const Shard shard = ShardOf(range.file);
      range.etag = shard.version;
      std::vector<NodeCache::Gap> wanted;
      const std::shared_ptr<NodeCache::Object> object =
          cache_ != nullptr && cache_->enabled() ? CachedObject(range.file) : nullptr;
      if (object != nullptr) {
        wanted = cache_->Read(*object, range.offset, range.data.size(), range.data.data(),
                              std::chrono::steady_clock::now(), /*may_wait=*/false,
                              /*readahead=*/true);
        for (const NodeCache::Gap& gap : wanted) {
          if (gap.claim_fd == NodeCache::Gap::kOthers) skipped[k] = true;
          gaps.emplace_back(range.file, gap);
        }
      } else {
        NodeCache::Gap whole;
        whole.offset = range.offset;
        whole.size = range.data.size();
        whole.dst = range.data.data();
        wanted.push_back(std::move(whole));
      }
      if (skipped[k]) continue;
      for (const NodeCache::Gap& gap : wanted) {
        Get get;
        get.range = k;
        get.offset = gap.offset;
        get.http.url = settings_.urls[range.file];
        get.http.range = RangeHeader(gap.offset, gap.size);
        RequireVersion(settings_.store, shard.version, &get.http);
        get.http.spans.push_back({gap.dst, gap.size});
        gets.push_back(std::move(get));
      }
    }
    std::vector<HttpGet*> pointers;
    for (Get& get : gets) pointers.push_back(&get.http);
    if (!pointers.empty()) client_.Perform(pointers.data(), pointers.size());
    std::vector<bool> whole(ranges.size(), true);
    for (size_t k = 0; k < ranges.size(); ++k) whole[k] = !skipped[k];
    for (const Get& get : gets) {
      AheadRange& range = *ranges[get.range];
      const HttpGet& http = get.http;
      const uint64_t size = get.http.spans[0].size;
      ContentRange answered;
      const bool ok = (http.status == 200 || http.status == 206) && !http.overflowed &&
                      ParseContentRange(http.content_range, &answered) &&
                      answered.first == get.offset && answered.end == get.offset + size &&
                      http.received == size && VersionOf(settings_.store, http) == range.etag;
      // Counted when it arrives, used or not: the stats say what the store sent.
      if (http.received > 0) {
        requests_ += 1;
        bytes_ += http.received;
      }
      if (!ok) whole[get.range] = false;
    }
    // What arrived goes to the node cache; a range with any part missing is
    // not (its claims are let go, and the read fetches it).
    std::vector<std::pair<size_t, NodeCache::Gap>> fetched;
    std::vector<std::pair<size_t, NodeCache::Gap>> unfetched;
    for (const auto& gap : gaps) {
      bool stored = false;
      for (size_t k = 0; k < ranges.size() && !stored; ++k) {
        const AheadRange& range = *ranges[k];
        stored = range.file == gap.first && gap.second.dst >= range.data.data() &&
                 gap.second.dst < range.data.data() + range.data.size() && whole[k] &&
                 gap.second.claim_fd != NodeCache::Gap::kOthers;
      }
      (stored ? fetched : unfetched).push_back(gap);
    }
    gaps.swap(unfetched);  // let go of when this returns
    if (!fetched.empty()) StoreGaps(std::move(fetched));
    for (size_t k = 0; k < ranges.size(); ++k) {
      ahead_.Finish(ranges[k], whole[k]);
      ++finished;
    }
  } catch (...) {
    // A hint never fails; the read that needs these bytes fetches them.
    for (size_t k = finished; k < ranges.size(); ++k) ahead_.Finish(ranges[k], false);
  }
}

}  // namespace sdsl
