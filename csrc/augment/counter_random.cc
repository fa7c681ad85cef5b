#include "augment/counter_random.h"

namespace sdsl {

uint64_t StreamKey(uint64_t seed, uint64_t epoch, uint64_t ordinal, uint32_t position,
                   uint64_t domain, uint64_t channel) {
  const uint64_t words[] = {epoch, ordinal, position, domain, channel};
  uint64_t key = Mix64(seed + kGolden);
  uint64_t salt = kGolden;
  for (const uint64_t word : words) {
    salt += kGolden;
    key = Mix64(key ^ Mix64(word + salt));
  }
  return key;
}

void DrawUniforms(uint64_t seed, uint64_t epoch, uint64_t ordinal, uint32_t position, size_t count,
                  double* out) {
  const uint64_t key = StreamKey(seed, epoch, ordinal, position, kDrawDomain, 0);
  for (size_t j = 0; j < count; ++j) out[j] = UnitDouble(StreamBits(key, j));
}

}  // namespace sdsl
