// Many HTTP GETs at once on the calling thread, through libcurl's multi
// interface, each either signed with AWS Signature Version 4 by libcurl
// itself (CURLOPT_AWS_SIGV4), or carrying a bearer token (Google Cloud
// Storage's OAuth 2 access tokens), or anonymous. No retry policy and no
// store's rules live here: a GET ends with what the server answered or why
// the transfer failed, and the caller (ObjectStoreSource) decides what that means.
//
// Connections are kept between calls: each call borrows one multi handle
// (its own connection cache) from a pool, so a reader's next batch reuses
// the sockets of the last. A forked child forgets the parent's pool without
// touching it, since closing a TLS connection writes to a socket the parent
// still uses.
#ifndef SDS_LOADER_SOURCES_HTTP_CLIENT_H_
#define SDS_LOADER_SOURCES_HTTP_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/fork_guard.h"

namespace sdsl {

// Where an answer's body goes. A successful answer fills `spans` in order,
// exactly: a body longer than their total ends the transfer (the server
// ignored the range). Any other answer, or a GET with no spans, is kept in
// `body`, up to `body_limit` bytes.
struct BodySpan {
  uint8_t* data = nullptr;
  uint64_t size = 0;
};

struct HttpGet {
  std::string url;
  std::string range;     // the Range header's value, "bytes=a-b" or "bytes=-n"
  std::string if_match;  // an If-Match header, when not empty
  std::vector<BodySpan> spans;
  uint64_t body_limit = 64 << 10;

  // What came back.
  long status = 0;            // 0: no answer (see `failure`)
  std::string failure;        // why the transfer itself failed, when it did
  uint64_t received = 0;      // body bytes, whether to spans or to `body`
  bool overflowed = false;    // the body was longer than the spans or the limit
  std::string content_range;  // the Content-Range header, as sent
  std::string etag;           // the ETag header, as sent
  std::string generation;     // the x-goog-generation header (Google Cloud Storage)
  std::string last_modified;  // the Last-Modified header, as sent
  std::string body;

  // Set to run this GET again from the start.
  void Reset();
};

struct HttpSettings {
  double connect_timeout_s = 10;
  // A transfer that receives nothing for this long is ended.
  double stall_timeout_s = 30;
  // Most transfers in flight in one Perform call.
  size_t max_in_flight = 32;
};

// Who is asking: AWS keys (requests signed with SigV4), else a bearer token
// (an `Authorization: Bearer` header), else nobody (anonymous requests).
struct HttpCredentials {
  std::string region;
  std::string access_key;  // empty: requests are not signed
  std::string secret_key;
  std::string session_token;
  std::string bearer_token;  // used when there is no access key; empty: none

  bool identified() const { return !access_key.empty() || !bearer_token.empty(); }
};

class HttpClient : public ForkGuarded {
 public:
  explicit HttpClient(HttpSettings settings);
  ~HttpClient() override;

  // Used by every GET that starts after the call; safe from any thread.
  void SetCredentials(HttpCredentials credentials);

  // Runs every GET to its end. Never throws for what a server or network
  // does (that is in each HttpGet); throws ReaderError only when libcurl
  // itself cannot be set up.
  void Perform(HttpGet* const* gets, size_t count);

  // Closes every idle connection; the next Perform opens new ones.
  void DropConnections();

  void LockForFork() override;
  void UnlockInParent() override;
  void ResetInChild() override;

 private:
  struct Pool;
  std::unique_ptr<Pool> TakePool();
  void ReturnPool(std::unique_ptr<Pool> pool);

  const HttpSettings settings_;
  std::mutex mutex_;  // guards credentials_, idle_ and generation_
  HttpCredentials credentials_;
  std::vector<std::unique_ptr<Pool>> idle_;
  uint64_t generation_ = 0;  // bumped by DropConnections and in a forked child
};

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_HTTP_CLIENT_H_
