#include "container/riegeli_hash.h"

#include <highwayhash/highwayhash_target.h>
#include <highwayhash/instruction_sets.h>

#include <vector>

namespace sdsl {
namespace {

// 'Riegeli/', 'records\n', 'Riegeli/', 'records\n', as the format specifies.
const highwayhash::HHKey kRiegeliKey = {0x2f696c6567656952ULL, 0x0a7364726f636572ULL,
                                        0x2f696c6567656952ULL, 0x0a7364726f636572ULL};

}  // namespace

uint64_t RiegeliHash(const uint8_t* data, size_t size) {
  highwayhash::HHResult64 result = 0;
  highwayhash::InstructionSets::Run<highwayhash::HighwayHash>(
      kRiegeliKey, reinterpret_cast<const char*>(data), size, &result);
  return result;
}

uint64_t RiegeliHash(const Pieces& pieces) {
  if (pieces.spans.size() == 1) return RiegeliHash(pieces.spans[0].data, pieces.spans[0].size);
  std::vector<highwayhash::StringView> fragments;
  fragments.reserve(pieces.spans.size());
  for (const ByteSpan& span : pieces.spans) {
    fragments.push_back(
        highwayhash::StringView{reinterpret_cast<const char*>(span.data), span.size});
  }
  highwayhash::HHResult64 result = 0;
  highwayhash::InstructionSets::Run<highwayhash::HighwayHashCat>(kRiegeliKey, fragments.data(),
                                                                 fragments.size(), &result);
  return result;
}

}  // namespace sdsl
