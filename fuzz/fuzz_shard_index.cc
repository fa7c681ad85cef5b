// Footer and postscript: sdsl::ReadShardIndex on a real file descriptor
// (a memfd opened through /proc/self/fd), as the reader opens a shard.
//
// Input: one option byte, then the file. Option bit 0 rewrites hashes first
// (see fuzz_common.h) so that mutated footers get past the hash checks.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/reader_error.h"
#include "container/array_record_index.h"
#include "fuzz_common.h"
#include "sources/shard_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  if (input_size < 1) return 0;
  static const int fd = memfd_create("sds-loader-fuzz-shard", 0);
  if (fd < 0) std::abort();
  std::vector<uint8_t> file(input + 1, input + input_size);
  if (input[0] & 1) sdsl_fuzz::FixHashes(file.data(), file.size());
  if (ftruncate(fd, 0) != 0) std::abort();
  size_t written = 0;
  while (written < file.size()) {
    const ssize_t n =
        pwrite(fd, file.data() + written, file.size() - written, static_cast<off_t>(written));
    if (n <= 0) std::abort();
    written += static_cast<size_t>(n);
  }
  try {
    sdsl::ShardFile shard("/proc/self/fd/" + std::to_string(fd));
    const sdsl::ShardIndex index = sdsl::ReadShardIndex(shard);
    if (!index.transposed_footer) {
      // What the batch planner relies on: ascending chunks before the footer,
      // a record count per chunk, and ChunkOf agreeing with FirstRecord.
      if (!index.first_records.empty() &&
          index.first_records.size() != index.chunk_offsets.size() + 1) {
        __builtin_trap();
      }
      if (index.FirstRecord(index.num_chunks()) != index.num_records) __builtin_trap();
      for (uint64_t c = 0; c < index.num_chunks(); ++c) {
        if (index.ChunkLimit(c) <= index.chunk_offsets[c]) __builtin_trap();
        if (index.ChunkLimit(c) > index.footer_offset) __builtin_trap();
      }
      if (index.num_records > 0) {
        const uint64_t last = index.num_records - 1;
        const uint64_t c = index.ChunkOf(last);
        if (c >= index.num_chunks() || index.FirstRecord(c) > last) __builtin_trap();
        const uint64_t c0 = index.ChunkOf(0);
        if (c0 >= index.num_chunks()) __builtin_trap();
      }
    }
  } catch (const sdsl::ReaderError&) {
  }
  return 0;
}
