#include "sources/store_rules.h"

#include <algorithm>
#include <iterator>
#include <string_view>

#include "base/reader_error.h"

namespace sdsl {
namespace {

[[noreturn]] void StorageFail(const std::string& message) { Fail(ErrorKind::kStorage, message); }

// The <Code> of an XML error document, or "".
std::string XmlCode(const std::string& body) {
  const size_t open = body.find("<Code>");
  if (open == std::string::npos) return "";
  const size_t close = body.find("</Code>", open);
  if (close == std::string::npos) return "";
  return body.substr(open + 6, close - open - 6);
}

// The value of the first "reason" of a JSON error document, or "". Reasons
// are plain words, so no escapes need decoding.
std::string JsonReason(const std::string& body) {
  const size_t key = body.find("\"reason\"");
  if (key == std::string::npos) return "";
  const size_t colon = body.find(':', key + 8);
  if (colon == std::string::npos) return "";
  const size_t open = body.find('"', colon + 1);
  if (open == std::string::npos) return "";
  const size_t close = body.find('"', open + 1);
  if (close == std::string::npos) return "";
  return body.substr(open + 1, close - open - 1);
}

template <size_t N>
bool OneOf(const std::string& code, const char* const (&codes)[N]) {
  return std::find(std::begin(codes), std::end(codes), code) != std::end(codes);
}

bool RefusedIdentity(long status, const std::string& code) {
  static const char* const kCodes[] = {
      // S3
      "AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId", "ExpiredToken", "InvalidToken",
      "TokenRefreshRequired", "MissingSecurityHeader", "AuthorizationHeaderMalformed",
      "UnsupportedAlgorithm",
      // Google Cloud Storage's JSON API
      "authError", "forbidden", "required", "unauthorized"};
  return status == 401 || status == 403 || OneOf(code, kCodes);
}

}  // namespace

const char* StoreName(ObjectStoreKind store) {
  return store == ObjectStoreKind::kGcs ? "Google Cloud Storage" : "S3";
}

std::string ErrorCode(ObjectStoreKind store, const std::string& body) {
  std::string code = XmlCode(body);
  if (code.empty() && store == ObjectStoreKind::kGcs) code = JsonReason(body);
  return code;
}

bool Transient(ObjectStoreKind /*store*/, long status, const std::string& code) {
  static const char* const kCodes[] = {
      // S3
      "SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError",
      "ServiceUnavailable", "RequestLimitExceeded", "BandwidthLimitExceeded",
      // Google Cloud Storage's JSON API
      "rateLimitExceeded", "userRateLimitExceeded", "backendError", "internalError"};
  if (status == 408 || status == 429 || status == 500 || status == 502 || status == 503 ||
      status == 504) {
    return true;
  }
  return OneOf(code, kCodes);
}

std::string Replaced(const std::string& uri) {
  return uri + " was replaced while this reader had it open; its bytes no longer match the footer "
               "already read. Open the dataset again";
}

std::string Truncated(const std::string& uri) {
  return uri + " is shorter than its footer says: it was truncated or replaced";
}

void Permanent(ObjectStoreKind store, long status, const std::string& code, const std::string& uri,
               bool identified) {
  const bool gcs = store == ObjectStoreKind::kGcs;
  if (code == "NoSuchBucket")
    StorageFail("the bucket of " + uri + " does not exist at this endpoint");
  if (code == "NoSuchKey" || code == "NotFound" || code == "notFound" || status == 404) {
    StorageFail(uri + " does not exist. The dataset's manifest names this shard, so it was deleted "
                      "after publication, or the reader is pointed at another bucket or endpoint");
  }
  if (code == "PreconditionFailed" || code == "conditionNotMet" || status == 412)
    StorageFail(Replaced(uri));
  if (code == "InvalidRange" || code == "requestedRangeNotSatisfiable" || status == 416)
    StorageFail(Truncated(uri));
  if (RefusedIdentity(status, code)) {
    const std::string what = code.empty() ? "HTTP " + std::to_string(status) : code;
    const std::string refused =
        std::string(StoreName(store)) + " refused to read " + uri + " (" + what + ")";
    if (!identified && gcs) {
      StorageFail(refused +
                  ": the request carried no token, since no credentials were found "
                  "(google.auth.default()) or an emulator (STORAGE_EMULATOR_HOST) is in use; "
                  "check the credentials");
    }
    if (!identified) {
      StorageFail(refused +
                  ": no credentials were found (environment, profile, container or instance "
                  "role), so the request went unsigned; check the credentials");
    }
    if (gcs) {
      StorageFail(refused +
                  "; check the credentials, their scopes and expiry, and the bucket's IAM policy");
    }
    StorageFail(refused +
                "; check the credentials, their expiry, the bucket policy and the system clock");
  }
  StorageFail("reading " + uri + " failed: HTTP " + std::to_string(status) +
              (code.empty() ? "" : " " + code));
}

std::string VersionOf(ObjectStoreKind store, const HttpGet& answer) {
  if (store == ObjectStoreKind::kGcs && !answer.generation.empty()) return "g" + answer.generation;
  if (!answer.etag.empty()) return answer.etag;
  // A server that sends neither: the time the object was last written
  // (with its size, which every answer's Content-Range checks) tells a
  // replacement apart unless it lands within the same second.
  if (!answer.last_modified.empty()) return kModifiedMark + answer.last_modified;
  return "";
}

bool Contradicts(const std::string& known, const std::string& answered) {
  if (known.empty() || answered.empty() || known == answered) return false;
  const bool known_by_time = known.rfind(kModifiedMark, 0) == 0;
  const bool answered_by_time = answered.rfind(kModifiedMark, 0) == 0;
  return known_by_time == answered_by_time;
}

void RequireVersion(ObjectStoreKind store, const std::string& version, HttpGet* get) {
  if (version.empty()) return;
  // Checked on each answer (VersionOf), as no precondition names it.
  if (version.rfind(kModifiedMark, 0) == 0) return;
  if (store == ObjectStoreKind::kS3) {
    get->if_match = version;
    return;
  }
  // A generation (marked "g"); an ETag alone is checked on the answer instead,
  // since the JSON API takes no If-Match on a media download.
  if (version[0] != 'g') return;
  get->url += (get->url.find('?') == std::string::npos ? "?" : "&");
  get->url += "ifGenerationMatch=" + version.substr(1);
}

}  // namespace sdsl
