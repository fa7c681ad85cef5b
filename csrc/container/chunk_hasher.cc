#include "container/chunk_hasher.h"

#include <highwayhash/instruction_sets.h>

namespace sdsl {
namespace Portable {
extern const HasherSteps kHasherSteps;
}
#ifdef SDSL_HASHER_AVX2
namespace AVX2 {
extern const HasherSteps kHasherSteps;
}
#endif

namespace {

const HasherSteps* BestSteps() {
#ifdef SDSL_HASHER_AVX2
  if ((highwayhash::InstructionSets::Supported() & HH_TARGET_AVX2) != 0) {
    return &AVX2::kHasherSteps;
  }
#endif
  return &Portable::kHasherSteps;
}

}  // namespace

ChunkHasher::ChunkHasher(Target target) {
  static const HasherSteps* const best = BestSteps();
  steps_ = target == Target::kBest ? best : &Portable::kHasherSteps;
  steps_->start(state_);
}

}  // namespace sdsl
