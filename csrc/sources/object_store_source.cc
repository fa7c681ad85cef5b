#include "sources/object_store_source.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>

#include "base/reader_error.h"
#include "sources/object_store_parts.h"
#include "sources/store_rules.h"

namespace sdsl {
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
  counters.refetches = refetches_.load();
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
  // In the order the requests name them, so that an error names the first.
  std::vector<size_t> files;
  std::unordered_map<size_t, size_t> file_at;
  for (size_t k = 0; k < count; ++k) {
    if (requests[k].size > 0 && file_at.emplace(requests[k].file, files.size()).second)
      files.push_back(requests[k].file);
  }
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
    const std::shared_ptr<const Tail>& tail = opened[file_at[request.file]];
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
                    "stalled or failed while the read waited for them (up to " +
                    std::to_string(settings_.http.stall_timeout_s) +
                    " s, the stall timeout), and max_attempts=1 allows no attempt of its own");
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

}  // namespace sdsl
