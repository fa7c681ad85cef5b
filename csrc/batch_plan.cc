#include "batch_plan.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "reader_error.h"

namespace sdsl {

BatchPlan PlanBatch(const int64_t* files, const int64_t* locals, const int64_t* ordinals,
                    size_t count, const ShardOpener& open) {
  BatchPlan plan;
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return files[a] != files[b] ? files[a] < files[b] : locals[a] < locals[b];
  });
  std::shared_ptr<const OpenShard> shard;
  int64_t shard_file = -1;
  for (size_t k = 0; k < count; ++k) {
    const size_t position = order[k];
    if (files[position] != shard_file) {
      shard_file = files[position];
      shard = open(static_cast<size_t>(shard_file));
    }
    if (shard->index.transposed_footer) {
      plan.unsupported_positions.push_back(position);
      continue;
    }
    const ShardIndex& index = shard->index;
    const uint64_t local = static_cast<uint64_t>(locals[position]);
    if (locals[position] < 0 || local >= index.num_records) {
      Corrupt("shard " + shard->file->path() + ": record " + std::to_string(ordinals[position]) +
              " is record " + std::to_string(locals[position]) + " of a shard that holds " +
              std::to_string(index.num_records) +
              "; the shard is truncated or does not match the manifest that names it");
    }
    Run* run = plan.runs.empty() ? nullptr : &plan.runs.back();
    if (run != nullptr && run->shard == shard && !run->chunks.empty()) {
      WantedRecord& last = run->chunks.back().records.back();
      if (last.local == local) {  // a duplicate: decode once, copy after
        last.positions.push_back(position);
        continue;
      }
    }
    const uint64_t chunk = index.ChunkOf(local);
    const uint64_t in_chunk = local - index.first_record[chunk];
    const bool same_chunk = run != nullptr && run->shard == shard && run->chunks.back().chunk == chunk;
    if (!same_chunk) {
      const bool extends = run != nullptr && run->shard == shard &&
                           run->chunks.back().chunk + 1 == chunk &&
                           index.ChunkLimit(chunk) - run->begin <= kMaxRunBytes;
      if (!extends) {
        plan.runs.emplace_back();
        run = &plan.runs.back();
        run->shard = shard;
        run->begin = index.chunk_offsets[chunk];
      }
      run->chunks.push_back(WantedChunk{chunk, {}});
      run->end = index.ChunkLimit(chunk);
    }
    WantedRecord record;
    record.index_in_chunk = in_chunk;
    record.local = local;
    record.positions.push_back(position);
    run->chunks.back().records.push_back(std::move(record));
  }
  return plan;
}

}  // namespace sdsl
