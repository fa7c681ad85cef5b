// Readahead: announced ranges fetched on threads of their own into the
// AheadCache (or the node cache), never blocking, never failing.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <utility>

#include "base/reader_error.h"
#include "sources/object_store_parts.h"
#include "sources/store_rules.h"

namespace sdsl {

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
  // Into the node cache alone: the ranges are buffers of the task's own,
  // let go of once their bytes are stored, since no read of this process
  // will copy them out of memory.
  const bool in_memory = !(readahead_into_cache_.load() && cache_ != nullptr && cache_->enabled());
  // Reserved here, not on the readahead thread: a read that follows the hint
  // at once (a new reader's probe of its first record) then waits for these
  // bytes instead of sending a second request for them.
  std::vector<std::shared_ptr<AheadRange>> reserved;
  try {
    if (in_memory) {
      reserved = ahead_.Reserve(wanted);
    } else {
      for (const AheadCache::Wanted& range : wanted) {
        auto own = std::make_shared<AheadRange>();
        own->file = range.file;
        own->offset = range.offset;
        own->data.resize(range.size);
        reserved.push_back(std::move(own));
      }
    }
    if (reserved.empty()) return;
    // The next thread in turn, or any other that has room for it.
    const size_t first = next_readahead_++;
    for (size_t k = 0; k < readahead_.size(); ++k) {
      auto task = [this, reserved, in_memory]() { ReadAhead(reserved, in_memory); };
      if (readahead_[(first + k) % readahead_.size()]->Post(std::move(task))) return;
    }
  } catch (...) {
    // A hint that cannot be queued is dropped.
  }
  if (in_memory) {
    for (const auto& range : reserved) ahead_.Finish(range, false);
  }
}

bool ObjectStoreSource::WaitForReadahead(double seconds) {
  const auto deadline = TaskThread::DeadlineAfter(seconds);
  for (const auto& thread : readahead_) {
    if (!thread->WaitForEarlier(deadline)) return false;
  }
  return writer_->WaitForEarlier(deadline);
}

void ObjectStoreSource::ReadAhead(const std::vector<std::shared_ptr<AheadRange>>& ranges,
                                  bool in_memory) {
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
      if (in_memory) ahead_.Finish(ranges[k], whole[k]);
      ++finished;
    }
  } catch (...) {
    // A hint never fails; the read that needs these bytes fetches them.
    for (size_t k = finished; k < ranges.size() && in_memory; ++k) ahead_.Finish(ranges[k], false);
  }
}

}  // namespace sdsl
