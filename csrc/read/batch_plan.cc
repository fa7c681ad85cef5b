#include "read/batch_plan.h"

#include <algorithm>
#include <exception>
#include <iterator>
#include <numeric>
#include <string>

#include "base/reader_error.h"

namespace sdsl {

namespace {

// Plans the rows order[first, last), sorted by shard and record, into `plan`.
void PlanRows(const int64_t* files, const int64_t* shard_records, const int64_t* ordinals,
              const std::vector<size_t>& order, size_t first, size_t last, const ShardOpener& open,
              const int64_t* starts, BatchPlan* out) {
  BatchPlan& plan = *out;
  // At most a run a row; a huge batch of few runs grows as it needs.
  plan.runs.reserve(std::min<size_t>(last - first, 4096));
  const OpenShard* shard = nullptr;
  int64_t shard_file = -1;
  for (size_t k = first; k < last; ++k) {
    const size_t row = order[k];
    if (files[row] != shard_file) {
      shard_file = files[row];
      shard = open(static_cast<size_t>(shard_file));
    }
    if (shard->index.transposed_footer) {
      plan.unsupported_rows.push_back(row);
      continue;
    }
    const ShardIndex& index = shard->index;
    const uint64_t shard_record = static_cast<uint64_t>(shard_records[row]);
    if (shard_records[row] < 0 || shard_record >= index.num_records) {
      Corrupt("shard " + shard->file->path() + ": record " + std::to_string(ordinals[row]) +
              " is record " + std::to_string(shard_records[row]) + " of a shard that holds " +
              std::to_string(index.num_records) +
              "; the shard is truncated or does not match the manifest that names it");
    }
    Run* run = plan.runs.empty() ? nullptr : &plan.runs.back();
    if (run != nullptr && run->shard == shard && !run->chunks.empty()) {
      WantedRecord& last = run->chunks.back().records.back();
      if (last.shard_record == shard_record &&
          (starts == nullptr || starts[last.rows[0]] == starts[row])) {
        // a duplicate: decode once, copy after
        last.rows.push_back(row);
        continue;
      }
    }
    const uint64_t chunk = index.ChunkOf(shard_record);
    const uint64_t chunk_record = shard_record - index.FirstRecord(chunk);
    const bool same_chunk =
        run != nullptr && run->shard == shard && run->chunks.back().chunk == chunk;
    if (!same_chunk) {
      const bool extends = run != nullptr && run->shard == shard &&
                           run->chunks.back().chunk + 1 == chunk &&
                           index.ChunkLimit(chunk) - run->begin <= kMaxRunBytes;
      if (!extends) {
        plan.runs.emplace_back();
        run = &plan.runs.back();
        run->shard = shard;
        run->file = static_cast<size_t>(shard_file);
        run->begin = index.chunk_offsets[chunk];
        run->written_uncompressed = index.WrittenUncompressed();
        run->into_rows =
            run->written_uncompressed && index.min_chunk_decoded_size >= kIntoRowsMinBytes;
      }
      run->chunks.push_back(WantedChunk{chunk, {}});
      run->end = index.ChunkLimit(chunk);
    }
    WantedRecord record;
    record.chunk_record = chunk_record;
    record.shard_record = shard_record;
    record.rows.push_back(row);
    run->chunks.back().records.push_back(std::move(record));
  }
}

// Where sorted rows are cut into `pieces` pieces, each beginning a shard:
// no run, and no repeat of a record, spans two pieces, so the pieces' plans
// laid end to end are the plan of the whole. Fewer cuts when the rows hold
// fewer shards.
std::vector<size_t> ShardCuts(const int64_t* files, const std::vector<size_t>& order,
                              size_t pieces) {
  std::vector<size_t> cuts{0};
  for (size_t p = 1; p < pieces; ++p) {
    size_t cut = std::max(cuts.back() + 1, p * order.size() / pieces);
    while (cut < order.size() && files[order[cut]] == files[order[cut - 1]]) ++cut;
    if (cut >= order.size()) break;
    cuts.push_back(cut);
  }
  cuts.push_back(order.size());
  return cuts;
}

}  // namespace

BatchPlan PlanBatch(const int64_t* files, const int64_t* shard_records, const int64_t* ordinals,
                    size_t count, const ShardOpener& open, const int64_t* starts,
                    const PieceRunner& run_pieces, size_t pieces) {
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (files[a] != files[b]) return files[a] < files[b];
    if (shard_records[a] != shard_records[b]) return shard_records[a] < shard_records[b];
    return starts != nullptr && starts[a] < starts[b];
  });
  BatchPlan plan;
  if (!run_pieces || pieces < 2 || count < 2) {
    PlanRows(files, shard_records, ordinals, order, 0, count, open, starts, &plan);
    return plan;
  }
  const std::vector<size_t> cuts = ShardCuts(files, order, pieces);
  std::vector<BatchPlan> planned(cuts.size() - 1);
  std::vector<std::exception_ptr> errors(planned.size());
  run_pieces(planned.size(), [&](size_t piece) {
    try {
      PlanRows(files, shard_records, ordinals, order, cuts[piece], cuts[piece + 1], open, starts,
               &planned[piece]);
    } catch (...) {
      errors[piece] = std::current_exception();
    }
  });
  // The error the whole batch planned in one piece would have met first.
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  size_t runs = 0;
  for (const BatchPlan& piece : planned) runs += piece.runs.size();
  plan = std::move(planned[0]);
  plan.runs.reserve(runs);
  for (size_t p = 1; p < planned.size(); ++p) {
    std::move(planned[p].runs.begin(), planned[p].runs.end(), std::back_inserter(plan.runs));
    plan.unsupported_rows.insert(plan.unsupported_rows.end(), planned[p].unsupported_rows.begin(),
                                 planned[p].unsupported_rows.end());
  }
  return plan;
}

}  // namespace sdsl
