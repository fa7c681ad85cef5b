#include <algorithm>
#include <charconv>
#include <chrono>
#include <random>
#include <thread>

#include "base/reader_error.h"
#include "sources/object_store_parts.h"
#include "sources/store_rules.h"

namespace sdsl {
namespace {

bool ParseNumber(std::string_view text, uint64_t* value) {
  if (text.empty()) return false;
  const auto [ptr, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

void StorageFail(const std::string& message) { Fail(ErrorKind::kStorage, message); }

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

void ObjectStoreSource::Back(int attempt, std::mt19937_64& jitter) const {
  const double ceiling =
      std::min(settings_.backoff_max_s,
               settings_.backoff_s * static_cast<double>(1u << std::min(attempt, 20)));
  const double delay = std::uniform_real_distribution<double>(ceiling / 2, ceiling)(jitter);
  std::this_thread::sleep_for(std::chrono::duration<double>(delay));
}

bool ObjectStoreSource::Refetch(size_t /*file*/, int failures, bool copy_dropped) {
  // A copy that failed (the node cache's) is read once more from the store
  // whatever max_attempts says; past that, bytes that fail are fetched
  // max_attempts times in all. The first refetch goes at once (damage on
  // the way is one answer's, not the store's load); later ones back off as
  // retries do.
  if (failures >= settings_.max_attempts && !(copy_dropped && failures == 1)) return false;
  ++refetches_;
  if (failures >= 2) {
    std::mt19937_64 jitter(std::random_device{}());
    Back(failures - 2, jitter);
  }
  return true;
}

void ObjectStoreSource::Attempts::Run(std::vector<S3Get*> pending, std::vector<S3Get*> optional) {
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
      source_.Back(attempt, jitter);
    }
  }
  if (!pending.empty()) {
    const S3Get& failed = *pending.front();
    StorageFail("reading " + source_.Name(failed.file) + " failed " +
                std::to_string(settings.max_attempts) +
                " times; the last attempt: " + failed.reason);
  }
}

bool ObjectStoreSource::Attempts::Check(S3Get& get) {
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
                   std::to_string(get.first + get.size) + ", got " + std::to_string(http.received) +
                   " bytes (" + std::to_string(range.first) + "-" + std::to_string(range.end) + ")";
      return false;
    }
  }
  source_.requests_ += 1;
  source_.bytes_ += http.received;
  return true;
}

}  // namespace sdsl
