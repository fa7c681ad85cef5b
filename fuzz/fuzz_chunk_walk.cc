// Block and chunk header walk: sdsl::ReadChunk and sdsl::LogicalRange over a
// whole file held in memory, from the first chunk to the last.
//
// Input: one option byte, then the file. Option bit 0 rewrites hashes first
// (see fuzz_common.h); bit 1 verifies chunk data hashes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/reader_error.h"
#include "container/riegeli_chunk.h"
#include "container/riegeli_layout.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  if (input_size < 1) return 0;
  const uint8_t options = input[0];
  std::vector<uint8_t> file(input + 1, input + input_size);
  if (options & 1) sdsl_fuzz::FixHashes(file.data(), file.size());
  const sdsl::FileRange range{file.data(), 0, file.size()};
  const bool verify_data = (options & 2) != 0;
  uint64_t begin = 0;
  try {
    while (begin < range.size) {
      sdsl::Chunk chunk;
      sdsl::ReadChunk(range, begin, range.end(), verify_data, &chunk);
      if (chunk.end <= begin) __builtin_trap();  // the walk must always advance
      // Every piece must lie inside the range.
      for (const sdsl::ByteSpan& span : chunk.data.spans) {
        if (span.data < file.data() || span.data + span.size > file.data() + file.size()) {
          __builtin_trap();
        }
      }
      begin = chunk.end;
    }
  } catch (const sdsl::ReaderError&) {
  }
  // LogicalRange on its own, at a position and size taken from the input.
  if (file.size() >= 16) {
    const uint64_t pos = sdsl::LoadLE64(file.data()) % (file.size() + 1);
    const uint64_t size = sdsl::LoadLE64(file.data() + 8) % (2 * file.size() + 1);
    try {
      sdsl::Pieces pieces;
      uint64_t next = 0;
      sdsl::LogicalRange(range, pos, size, (options & 4) != 0, "fuzz range", &pieces, &next);
      if (pieces.total != size || next > range.end()) __builtin_trap();
    } catch (const sdsl::ReaderError&) {
    }
  }
  return 0;
}
