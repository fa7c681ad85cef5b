// The node cache's entry file: one fetched range of one object.
//
//   magic "SDSLCE01" | object key | offset | size    32 bytes, little-endian
//   one hash a 64 KiB block of the bytes              8 bytes each
//   the bytes
//
// The key is the hash of the object's identity (URL, version, size), so an
// entry renamed or linked into another object's directory is refused. The
// block hashes use Riegeli's public key: they catch damage, not forgery,
// which the directory rule (cache_files.h) keeps out.
//
// Names in an object's directory:
//   OFFSET-SIZE                              an entry (16 hex digits each)
//   OFFSET-SIZE-PID-INSTANCE-N.fetching      a claim (cache_claims.h)
//   .tmp-PID-INSTANCE-N                      an entry or identity being written
#ifndef SDS_LOADER_SOURCES_CACHE_ENTRY_H_
#define SDS_LOADER_SOURCES_CACHE_ENTRY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace sdsl {

inline constexpr uint64_t kCacheBlockBytes = uint64_t{64} << 10;
inline constexpr char kClaimSuffix[] = ".fetching";
inline constexpr char kTemporaryPrefix[] = ".tmp-";

uint64_t CacheBlocks(uint64_t size);
// Bytes of an entry's header, and of its whole file.
uint64_t EntryHeaderBytes(uint64_t size);
uint64_t EntryFileBytes(uint64_t size);

std::string Hex16(uint64_t value);
std::string EntryName(uint64_t offset, uint64_t size);

// What a name in an object's directory is.
struct CacheName {
  enum Kind { kOther, kEntry, kClaim, kTemporary } kind = kOther;
  uint64_t offset = 0;  // entries and claims
  uint64_t size = 0;
  int64_t pid = 0;  // claims and temporaries
  uint64_t instance = 0;
};
CacheName ParseCacheName(const std::string& name);

// Whether a name's file counts against the cache's limit (entries and
// temporaries do; identities, locks and claims are too small to matter).
bool CountedCacheFile(const std::string& name);

// The header of an entry of `size` bytes at `offset` of the object `key`.
std::vector<uint8_t> EncodeEntryHeader(uint64_t key, uint64_t offset, uint64_t size,
                                       const uint8_t* data);
// Whether `header` (EntryHeaderBytes(size) bytes) is the header of that entry.
bool EntryHeaderMatches(const std::vector<uint8_t>& header, uint64_t key, uint64_t offset,
                        uint64_t size);
// The stored hash of block `block`.
uint64_t EntryBlockHash(const std::vector<uint8_t>& header, uint64_t block);

}  // namespace sdsl

#endif  // SDS_LOADER_SOURCES_CACHE_ENTRY_H_
