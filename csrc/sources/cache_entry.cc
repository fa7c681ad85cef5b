#include "sources/cache_entry.h"

#include <stdio.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/byte_io.h"
#include "container/riegeli_hash.h"

namespace sdsl {
namespace {

constexpr char kMagic[8] = {'S', 'D', 'S', 'L', 'C', 'E', '0', '1'};
constexpr uint64_t kFixedHeader = 32;  // magic, key, offset, size

void StoreLE64(uint8_t* p, uint64_t value) {
  for (int k = 0; k < 8; ++k) p[k] = static_cast<uint8_t>(value >> (8 * k));
}

bool ParseHex16(const char* text, uint64_t* value) {
  uint64_t result = 0;
  for (size_t k = 0; k < 16; ++k) {
    const char c = text[k];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return false;
    }
    result = (result << 4) | static_cast<uint64_t>(digit);
  }
  *value = result;
  return true;
}

// Reads "PID-INSTANCE-N" at `text` (up to `end`); false unless all three are decimal.
bool ParseOwner(const std::string& text, size_t from, size_t end, CacheName* name) {
  uint64_t fields[3] = {0, 0, 0};
  size_t field = 0;
  bool digits = false;
  for (size_t k = from; k < end; ++k) {
    const char c = text[k];
    if (c == '-' && digits && field < 2) {
      ++field;
      digits = false;
    } else if (c >= '0' && c <= '9' && fields[field] < (uint64_t{1} << 58)) {
      fields[field] = fields[field] * 10 + static_cast<uint64_t>(c - '0');
      digits = true;
    } else {
      return false;
    }
  }
  if (field != 2 || !digits) return false;
  name->pid = static_cast<int64_t>(fields[0]);
  name->instance = fields[1];
  return true;
}

}  // namespace

uint64_t CacheBlocks(uint64_t size) { return (size + kCacheBlockBytes - 1) / kCacheBlockBytes; }

uint64_t EntryHeaderBytes(uint64_t size) { return kFixedHeader + 8 * CacheBlocks(size); }

uint64_t EntryFileBytes(uint64_t size) { return EntryHeaderBytes(size) + size; }

std::string Hex16(uint64_t value) {
  char text[17];
  snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string EntryName(uint64_t offset, uint64_t size) { return Hex16(offset) + "-" + Hex16(size); }

CacheName ParseCacheName(const std::string& text) {
  CacheName name;
  const size_t prefix = sizeof(kTemporaryPrefix) - 1;
  if (text.compare(0, prefix, kTemporaryPrefix) == 0) {
    if (ParseOwner(text, prefix, text.size(), &name)) name.kind = CacheName::kTemporary;
    return name;
  }
  if (text.size() < 33 || text[16] != '-' || !ParseHex16(text.data(), &name.offset) ||
      !ParseHex16(text.data() + 17, &name.size) || name.size == 0) {
    return CacheName();
  }
  if (text.size() == 33) {
    name.kind = CacheName::kEntry;
    return name;
  }
  const size_t suffix = sizeof(kClaimSuffix) - 1;
  if (text[33] == '-' && text.size() > 34 + suffix &&
      text.compare(text.size() - suffix, suffix, kClaimSuffix) == 0 &&
      ParseOwner(text, 34, text.size() - suffix, &name)) {
    name.kind = CacheName::kClaim;
    return name;
  }
  return CacheName();
}

bool CountedCacheFile(const std::string& name) {
  const CacheName::Kind kind = ParseCacheName(name).kind;
  return kind == CacheName::kEntry || kind == CacheName::kTemporary;
}

std::vector<uint8_t> EncodeEntryHeader(uint64_t key, uint64_t offset, uint64_t size,
                                       const uint8_t* data) {
  std::vector<uint8_t> head(EntryHeaderBytes(size));
  std::memcpy(head.data(), kMagic, 8);
  StoreLE64(head.data() + 8, key);
  StoreLE64(head.data() + 16, offset);
  StoreLE64(head.data() + 24, size);
  for (uint64_t block = 0; block < CacheBlocks(size); ++block) {
    const uint64_t at = block * kCacheBlockBytes;
    StoreLE64(head.data() + kFixedHeader + 8 * block,
              RiegeliHash(data + at, std::min(kCacheBlockBytes, size - at)));
  }
  return head;
}

bool EntryHeaderMatches(const std::vector<uint8_t>& header, uint64_t key, uint64_t offset,
                        uint64_t size) {
  return header.size() == EntryHeaderBytes(size) && memcmp(header.data(), kMagic, 8) == 0 &&
         LoadLE64(header.data() + 8) == key && LoadLE64(header.data() + 16) == offset &&
         LoadLE64(header.data() + 24) == size;
}

uint64_t EntryBlockHash(const std::vector<uint8_t>& header, uint64_t block) {
  return LoadLE64(header.data() + kFixedHeader + 8 * block);
}

}  // namespace sdsl
