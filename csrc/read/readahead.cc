#include "read/readahead.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <vector>

#include "base/reader_error.h"

namespace sdsl {

std::vector<RangeRequest> RecordChunkRanges(ShardSet& set, const int64_t* files,
                                            const int64_t* shard_records, size_t count) {
  std::vector<RangeRequest> ranges;
  ranges.reserve(count);
  std::shared_ptr<const OpenShard> shard;
  int64_t open_file = -1;
  for (size_t k = 0; k < count; ++k) {
    if (files[k] < 0 || static_cast<size_t>(files[k]) >= set.num_files()) continue;
    if (files[k] != open_file) {
      try {
        shard = set.Open(static_cast<size_t>(files[k]));
      } catch (const std::exception&) {
        // A ReaderError, or what a Python source raised (StorageError, say):
        // the read of this record reports it.
        shard = nullptr;
      }
      open_file = files[k];
    }
    if (shard == nullptr || shard->index.transposed_footer || shard_records[k] < 0) continue;
    const ShardIndex& index = shard->index;
    const uint64_t record = static_cast<uint64_t>(shard_records[k]);
    if (record >= index.num_records || index.num_chunks() == 0) continue;
    const uint64_t c = index.ChunkOf(record);
    const uint64_t begin = index.chunk_offsets[c];
    const uint64_t end = index.ChunkLimit(c);
    if (end <= begin) continue;
    ranges.push_back(RangeRequest{static_cast<size_t>(files[k]), begin, end - begin, nullptr});
  }
  std::sort(ranges.begin(), ranges.end(), [](const RangeRequest& a, const RangeRequest& b) {
    return a.file != b.file ? a.file < b.file : a.offset < b.offset;
  });
  // Records of one chunk, and neighbouring chunks, become one range each.
  std::vector<RangeRequest> merged;
  for (const RangeRequest& range : ranges) {
    if (!merged.empty() && merged.back().file == range.file &&
        range.offset <= merged.back().offset + merged.back().size) {
      RangeRequest& last = merged.back();
      const uint64_t end = std::max(last.offset + last.size, range.offset + range.size);
      last.size = end - last.offset;
      continue;
    }
    merged.push_back(range);
  }
  return merged;
}

uint64_t HintRecords(ShardSet& set, const int64_t* files, const int64_t* shard_records,
                     size_t count) {
  std::vector<RangeRequest> ranges = RecordChunkRanges(set, files, shard_records, count);
  if (ranges.empty()) return 0;
  uint64_t bytes = 0;
  for (const RangeRequest& range : ranges) bytes += range.size;
  set.source().WillNeed(ranges.data(), ranges.size());
  return bytes;
}

}  // namespace sdsl
