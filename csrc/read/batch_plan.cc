#include "read/batch_plan.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <exception>
#include <iterator>
#include <string>

#include "base/reader_error.h"

namespace sdsl {

namespace {

// A row with what planning reads of it, so that a thread planning a piece
// of the sorted rows reads them in order: reading each row's shard and
// record out of the caller's arrays, a row here and a row there, a helper
// fetched line after line from the cache of the core that had just sorted
// them, and planned its pieces at two thirds of the caller's pace.
struct SortedRow {
  int64_t file = 0;
  int64_t shard_record = 0;
  size_t row = 0;
};

// Rows in the order they are planned: by shard, then record, then window start.
std::vector<SortedRow> SortedRows(const int64_t* files, const int64_t* shard_records,
                                  const int64_t* starts, size_t count) {
  std::vector<SortedRow> sorted(count);
  for (size_t row = 0; row < count; ++row) sorted[row] = {files[row], shard_records[row], row};
  std::sort(sorted.begin(), sorted.end(), [&](const SortedRow& a, const SortedRow& b) {
    if (a.file != b.file) return a.file < b.file;
    if (a.shard_record != b.shard_record) return a.shard_record < b.shard_record;
    return starts != nullptr && starts[a.row] < starts[b.row];
  });
  return sorted;
}

// Plans the rows sorted[first, last) into `plan`.
void PlanRows(const std::vector<SortedRow>& sorted, size_t first, size_t last,
              const int64_t* ordinals, ShardCache& shards, const int64_t* starts, BatchPlan* out) {
  BatchPlan& plan = *out;
  // At most a run a row; a huge batch of few runs grows as it needs.
  plan.runs.reserve(std::min<size_t>(last - first, 4096));
  const OpenShard* shard = nullptr;
  int64_t shard_file = -1;
  for (size_t k = first; k < last; ++k) {
    const size_t row = sorted[k].row;
    // Merging runs and folding repeats rely on the order SortedRows made.
    assert(k == first || sorted[k - 1].file < sorted[k].file ||
           (sorted[k - 1].file == sorted[k].file &&
            sorted[k - 1].shard_record <= sorted[k].shard_record));
    if (sorted[k].file != shard_file) {
      shard_file = sorted[k].file;
      shard = &shards.Kept(static_cast<size_t>(shard_file));
    }
    if (shard->index.transposed_footer) {
      plan.unsupported_rows.push_back(row);
      continue;
    }
    const ShardIndex& index = shard->index;
    const uint64_t shard_record = static_cast<uint64_t>(sorted[k].shard_record);
    if (sorted[k].shard_record < 0 || shard_record >= index.num_records) {
      Corrupt("shard " + shard->file->path() + ": record " + std::to_string(ordinals[row]) +
              " is record " + std::to_string(sorted[k].shard_record) + " of a shard that holds " +
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
std::vector<size_t> ShardCuts(const std::vector<SortedRow>& sorted, size_t pieces) {
  std::vector<size_t> cuts{0};
  for (size_t p = 1; p < pieces; ++p) {
    size_t cut = std::max(cuts.back() + 1, p * sorted.size() / pieces);
    while (cut < sorted.size() && sorted[cut].file == sorted[cut - 1].file) ++cut;
    if (cut >= sorted.size()) break;
    assert(sorted[cut].file != sorted[cut - 1].file);
    cuts.push_back(cut);
  }
  cuts.push_back(sorted.size());
  return cuts;
}

}  // namespace

BatchPlan PlanBatch(const Batch& batch, ShardCache& shards, WorkerPool& workers) {
  const size_t count = batch.count;
  const int threads = batch.threads;
  const int64_t* const starts = batch.layout->window.starts;
  const std::vector<SortedRow> sorted = SortedRows(batch.files, batch.shard_records, starts, count);
  // The threads plan a large batch piece by piece, several pieces each, so
  // that one slower to start or to reach memory (its cache holds none of the
  // rows the caller has just sorted) takes fewer; a small one is planned here.
  const size_t pieces = threads < 2
                            ? 1
                            : std::min<size_t>(kPlanPiecesPerThread * static_cast<size_t>(threads),
                                               count / kRowsPerPlanPiece);
  BatchPlan plan;
  if (pieces < 2) {
    PlanRows(sorted, 0, count, batch.ordinals, shards, starts, &plan);
    return plan;
  }
  const std::vector<size_t> cuts = ShardCuts(sorted, pieces);
  std::vector<BatchPlan> planned(cuts.size() - 1);
  std::vector<std::exception_ptr> errors(planned.size());
  std::atomic<size_t> next{0};
  const size_t helpers = std::min<size_t>(planned.size(), static_cast<size_t>(threads)) - 1;
  workers.Run(helpers, [&]() {
    for (size_t piece = next++; piece < planned.size(); piece = next++) {
      try {
        PlanRows(sorted, cuts[piece], cuts[piece + 1], batch.ordinals, shards, starts,
                 &planned[piece]);
      } catch (...) {
        errors[piece] = std::current_exception();
      }
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
