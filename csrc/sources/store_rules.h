// What an object store's answers mean, for ObjectStoreSource: the rules that differ
// between S3 (and S3-compatible stores) and Google Cloud Storage, kept apart
// from the retries, tails and readahead they share.
//
// - Error documents: S3 and GCS's XML API send XML (`<Code>NoSuchKey</Code>`);
//   GCS's JSON API sends JSON (`{"error": {"errors": [{"reason":
//   "notFound"}]}}`). Either way the code names what went wrong.
// - An object's version: S3's ETag; GCS's generation (`x-goog-generation`),
//   which changes exactly when the object's bytes are replaced (its ETag is
//   used only when a server sends no generation); from a server that sends
//   neither, its Last-Modified time. A server that sends none of the three
//   identifies no version: a replacement of the same size goes unseen.
// - The precondition a ranged GET carries so that a replaced object is
//   refused: `If-Match: ETAG` on S3; `ifGenerationMatch=GENERATION` in the
//   URL on GCS's JSON API, which answers 412 when it does not hold.
#ifndef SDS_LOADER_SOURCES_STORE_RULES_H_
#define SDS_LOADER_SOURCES_STORE_RULES_H_

#include <string>

#include "sources/http_client.h"

namespace sdsl {

enum class ObjectStoreKind { kS3, kGcs };

// The store's name in messages: "S3", "Google Cloud Storage".
const char* StoreName(ObjectStoreKind store);

// The error code of an answer's body (its <Code>, or its first JSON "reason"), or "".
std::string ErrorCode(ObjectStoreKind store, const std::string& body);

// Whether an answer with this status and code may succeed when tried again.
bool Transient(ObjectStoreKind store, long status, const std::string& code);

// Throws the storage error an answer that will not succeed later stands
// for, saying what it means for the shard `uri`. `identified`: whether the
// request carried credentials.
[[noreturn]] void Permanent(ObjectStoreKind store, long status, const std::string& code,
                            const std::string& uri, bool identified);

// What marks a version taken from Last-Modified (no ETag, no generation):
// no ETag begins so.
inline constexpr const char* kModifiedMark = "last-modified:";

// The object's version an answer reports: its generation (GCS), its ETag,
// else its Last-Modified time; "" when it reports none of them.
std::string VersionOf(ObjectStoreKind store, const HttpGet& answer);

// Whether an answer's version `answered` says the object is no longer the
// one whose version was `known`: both reported, of the same kind, and unequal.
bool Contradicts(const std::string& known, const std::string& answered);

// Makes `get` refused by the store unless the object still has `version`.
void RequireVersion(ObjectStoreKind store, const std::string& version, HttpGet* get);

// The message of an object replaced while a reader had it open.
std::string Replaced(const std::string& uri);

// The message of an object shorter than its footer says.
std::string Truncated(const std::string& uri);

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_STORE_RULES_H_
