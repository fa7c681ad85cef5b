#include "sources/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>
#include <utility>

#include "base/reader_error.h"

namespace sdsl {
namespace {

using Clock = std::chrono::steady_clock;

// SHA-256 of an empty payload: a GET carries no body, and S3 wants the
// payload's hash in a header of its own (libcurl signs that header too).
constexpr const char* kEmptyPayloadHash =
    "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

void InitCurlOnce() {
  // curl_global_init is not thread-safe; every client is made through here.
  static std::once_flag once;
  static CURLcode result = CURLE_OK;
  std::call_once(once, [] { result = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (result != CURLE_OK) {
    Fail(ErrorKind::kIo, std::string("libcurl could not start: ") + curl_easy_strerror(result));
  }
}

bool StartsWithNoCase(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (size_t k = 0; k < prefix.size(); ++k) {
    const char a = text[k] >= 'A' && text[k] <= 'Z' ? static_cast<char>(text[k] + 32) : text[k];
    if (a != prefix[k]) return false;
  }
  return true;
}

std::string Trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == '\r' || text.back() == '\n' || text.back() == ' ' ||
                           text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return std::string(text);
}

// One GET while it runs: where its body has got to and when it last moved.
struct Transfer {
  HttpGet* get = nullptr;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  size_t span = 0;         // the span being filled
  uint64_t span_done = 0;  // bytes of it filled
  // Until the request is sent, the connect timeout bounds the wait; from
  // then on, the time since the last byte arrived (the stall timeout).
  bool sent = false;
  Clock::time_point last_activity;
  char error[CURL_ERROR_SIZE] = {};
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const size_t length = size * count;
  const std::string_view line(data, length);
  transfer->last_activity = Clock::now();
  HttpGet& get = *transfer->get;
  if (StartsWithNoCase(line, "http/")) {
    // A new answer begins (after a 100 Continue, say): forget the last one's headers.
    get.content_range.clear();
    get.etag.clear();
    get.generation.clear();
    get.last_modified.clear();
  } else if (StartsWithNoCase(line, "content-range:")) {
    get.content_range = Trimmed(line.substr(14));
  } else if (StartsWithNoCase(line, "etag:")) {
    get.etag = Trimmed(line.substr(5));
  } else if (StartsWithNoCase(line, "x-goog-generation:")) {
    get.generation = Trimmed(line.substr(18));
  } else if (StartsWithNoCase(line, "last-modified:")) {
    get.last_modified = Trimmed(line.substr(14));
  }
  return length;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  const size_t length = size * count;
  transfer->last_activity = Clock::now();
  HttpGet& get = *transfer->get;
  long status = 0;
  curl_easy_getinfo(transfer->easy, CURLINFO_RESPONSE_CODE, &status);
  const bool into_spans = (status == 200 || status == 206) && !get.spans.empty();
  if (!into_spans) {
    if (get.body.size() + length > get.body_limit) {
      get.overflowed = true;
      return 0;  // ends the transfer: an answer this long is not the one asked for
    }
    get.body.append(data, length);
    get.received += length;
    return length;
  }
  size_t done = 0;
  while (done < length) {
    if (transfer->span >= get.spans.size()) {
      get.overflowed = true;
      return 0;
    }
    const BodySpan& span = get.spans[transfer->span];
    const uint64_t room = span.size - transfer->span_done;
    const size_t take = static_cast<size_t>(std::min<uint64_t>(room, length - done));
    std::memcpy(span.data + transfer->span_done, data + done, take);
    done += take;
    transfer->span_done += take;
    if (transfer->span_done == span.size) {
      ++transfer->span;
      transfer->span_done = 0;
    }
  }
  get.received += length;
  return length;
}

}  // namespace

void HttpGet::Reset() {
  status = 0;
  failure.clear();
  received = 0;
  overflowed = false;
  content_range.clear();
  etag.clear();
  generation.clear();
  last_modified.clear();
  body.clear();
}

// One multi handle (and with it one cache of open connections) and the easy
// handles it has used, borrowed by one Perform at a time.
struct HttpClient::Pool {
  CURLM* multi = nullptr;
  std::vector<CURL*> idle_easies;
  uint64_t generation = 0;
  // Set in a forked child: the handles hold the parent's sockets, so they
  // are left as they are rather than closed.
  bool abandoned = false;

  ~Pool() {
    if (abandoned) return;
    for (CURL* easy : idle_easies) curl_easy_cleanup(easy);
    if (multi != nullptr) curl_multi_cleanup(multi);
  }
};

HttpClient::HttpClient(HttpSettings settings) : settings_(settings) {
  InitCurlOnce();
  StartGuarding();
}

HttpClient::~HttpClient() { StopGuarding(); }

void HttpClient::SetCredentials(HttpCredentials credentials) {
  std::lock_guard<std::mutex> lock(mutex_);
  credentials_ = std::move(credentials);
}

void HttpClient::DropConnections() {
  std::vector<std::unique_ptr<Pool>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped.swap(idle_);
    ++generation_;
  }
  // Closed outside the lock: closing a TLS connection may write to the network.
}

std::unique_ptr<HttpClient::Pool> HttpClient::TakePool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      std::unique_ptr<Pool> pool = std::move(idle_.back());
      idle_.pop_back();
      return pool;
    }
  }
  auto pool = std::make_unique<Pool>();
  pool->multi = curl_multi_init();
  if (pool->multi == nullptr) Fail(ErrorKind::kIo, "libcurl could not make a multi handle");
  curl_multi_setopt(pool->multi, CURLMOPT_MAXCONNECTS, static_cast<long>(settings_.max_in_flight));
  std::lock_guard<std::mutex> lock(mutex_);
  pool->generation = generation_;
  return pool;
}

void HttpClient::ReturnPool(std::unique_ptr<Pool> pool) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pool->generation == generation_) {
      idle_.push_back(std::move(pool));
      return;
    }
  }
  // A pool made before DropConnections is closed, not kept; outside the lock.
  pool.reset();
}

void HttpClient::Perform(HttpGet* const* gets, size_t count) {
  if (count == 0) return;
  HttpCredentials credentials;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    credentials = credentials_;
  }
  const std::string sigv4 = "aws:amz:" + credentials.region + ":s3";
  const std::string token_header = "x-amz-security-token: " + credentials.session_token;
  const std::string bearer_header = "Authorization: Bearer " + credentials.bearer_token;
  std::unique_ptr<Pool> pool = TakePool();
  std::vector<Transfer> transfers(count);

  auto start = [&](size_t index) {
    Transfer& transfer = transfers[index];
    HttpGet& get = *gets[index];
    get.Reset();
    transfer.get = &get;
    CURL* easy = nullptr;
    if (!pool->idle_easies.empty()) {
      easy = pool->idle_easies.back();
      pool->idle_easies.pop_back();
      curl_easy_reset(easy);
    } else {
      easy = curl_easy_init();
    }
    if (easy == nullptr) {
      get.failure = "libcurl could not make a transfer";
      return false;
    }
    transfer.easy = easy;
    curl_slist* headers = nullptr;
    if (!get.range.empty()) headers = curl_slist_append(headers, ("Range: " + get.range).c_str());
    if (!get.if_match.empty()) {
      headers = curl_slist_append(headers, ("If-Match: " + get.if_match).c_str());
    }
    if (!credentials.access_key.empty()) {
      headers = curl_slist_append(headers, kEmptyPayloadHash);
      if (!credentials.session_token.empty())
        headers = curl_slist_append(headers, token_header.c_str());
    } else if (!credentials.bearer_token.empty()) {
      headers = curl_slist_append(headers, bearer_header.c_str());
    }
    transfer.headers = headers;
    curl_easy_setopt(easy, CURLOPT_URL, get.url.c_str());
    curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(settings_.connect_timeout_s * 1000));
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, transfer.error);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, &transfer);
    if (!credentials.access_key.empty()) {
      curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, sigv4.c_str());
      curl_easy_setopt(easy, CURLOPT_USERNAME, credentials.access_key.c_str());
      curl_easy_setopt(easy, CURLOPT_PASSWORD, credentials.secret_key.c_str());
    }
    transfer.sent = false;
    transfer.last_activity = Clock::now();
    if (curl_multi_add_handle(pool->multi, easy) != CURLM_OK) {
      get.failure = "libcurl could not start a transfer";
      return false;
    }
    return true;
  };

  auto finish = [&](Transfer& transfer) {
    curl_multi_remove_handle(pool->multi, transfer.easy);
    curl_slist_free_all(transfer.headers);
    transfer.headers = nullptr;
    pool->idle_easies.push_back(transfer.easy);
    transfer.easy = nullptr;
  };

  size_t next = 0;
  size_t running = 0;
  auto fill = [&] {
    while (next < count && running < std::max<size_t>(settings_.max_in_flight, 1)) {
      const size_t index = next++;
      if (start(index)) {
        ++running;
      } else if (transfers[index].easy != nullptr) {
        finish(transfers[index]);
      }
    }
  };
  fill();
  const auto stall_limit = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(settings_.stall_timeout_s));
  while (running > 0) {
    int still = 0;
    curl_multi_perform(pool->multi, &still);
    int left = 0;
    while (CURLMsg* message = curl_multi_info_read(pool->multi, &left)) {
      if (message->msg != CURLMSG_DONE) continue;
      Transfer* transfer = nullptr;
      curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE,
                        reinterpret_cast<char**>(&transfer));
      HttpGet& get = *transfer->get;
      long status = 0;
      curl_easy_getinfo(message->easy_handle, CURLINFO_RESPONSE_CODE, &status);
      get.status = status;
      const CURLcode result = message->data.result;
      if (result != CURLE_OK && !(result == CURLE_WRITE_ERROR && get.overflowed)) {
        get.failure = transfer->error[0] != '\0' ? transfer->error : curl_easy_strerror(result);
        get.status = 0;
      }
      finish(*transfer);
      --running;
    }
    // Transfers that have received nothing for too long end here, so that no
    // read waits on a silent server past the stall timeout.
    const Clock::time_point now = Clock::now();
    for (Transfer& transfer : transfers) {
      if (transfer.easy == nullptr) continue;
      if (!transfer.sent) {
        curl_off_t pretransfer = 0;
        curl_easy_getinfo(transfer.easy, CURLINFO_PRETRANSFER_TIME_T, &pretransfer);
        if (pretransfer == 0) continue;
        transfer.sent = true;
        transfer.last_activity = now;
      }
      if (now - transfer.last_activity < stall_limit) continue;
      transfer.get->status = 0;
      transfer.get->failure = "no answer for " + std::to_string(settings_.stall_timeout_s) + " s";
      finish(transfer);
      --running;
    }
    fill();
    if (running > 0) curl_multi_poll(pool->multi, nullptr, 0, 50, nullptr);
  }
  ReturnPool(std::move(pool));
}

void HttpClient::LockForFork() { mutex_.lock(); }

void HttpClient::UnlockInParent() { mutex_.unlock(); }

void HttpClient::ResetInChild() {
  for (auto& pool : idle_) pool->abandoned = true;
  idle_.clear();
  ++generation_;
  mutex_.unlock();
}

}  // namespace sdsl
