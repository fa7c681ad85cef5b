#include "shard_set.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <system_error>
#include <thread>

#include "codecs.h"
#include "reader_error.h"
#include "riegeli_chunk.h"
#include "simple_chunk.h"
#include "value_stream.h"

namespace sdsl {
namespace {

// Scratch larger than this is freed when a read finishes rather than kept.
constexpr size_t kKeptScratchBytes = 16 << 20;
constexpr size_t kPooledScratch = 16;

std::string RecordContext(const std::string& path, int64_t ordinal, uint64_t local) {
  return "shard " + path + ": record " + std::to_string(ordinal) + " (record " +
         std::to_string(local) + " of the shard)";
}

void CopyRow(const BatchLayout& layout, size_t from, size_t to) {
  for (const FieldSlot& slot : layout.fields) {
    std::memcpy(slot.base + to * slot.row_bytes, slot.base + from * slot.row_bytes, slot.row_bytes);
  }
  for (const TargetSlot& target : layout.targets) {
    std::memcpy(target.base + to * 8, target.base + from * 8, 8);
  }
}

std::unique_ptr<ValueStream> StreamFor(const SimpleChunk& parsed, Pieces* decoded,
                                       WorkerScratch* scratch) {
  if (parsed.compression == kNoCompression) return std::make_unique<PiecesStream>(parsed.values);
  if (parsed.compression == kZstd) {
    return std::make_unique<ZstdStream>(scratch->zstd, parsed.values, &scratch->discard);
  }
  const uint8_t* values;
  MaterializeValues(parsed, scratch, &values);
  decoded->Clear();
  decoded->Append(values, static_cast<size_t>(parsed.decoded_size));
  return std::make_unique<PiecesStream>(*decoded);
}

// A record read whole (to learn its keys, or to probe it) is held in memory:
// refuse a claimed size over the limit before allocating anything for it.
void CheckMaterializable(uint64_t record_size) {
  if (record_size > kMaxMaterializedBytes) {
    Corrupt("record claims " + std::to_string(record_size) + " bytes, more than the " +
            std::to_string(kMaxMaterializedBytes) + " this reader holds at once");
  }
}

}  // namespace

WorkerScratch::WorkerScratch() : zstd(ZSTD_createDCtx()) {
  if (zstd == nullptr) throw std::bad_alloc();
}
WorkerScratch::~WorkerScratch() { ZSTD_freeDCtx(zstd); }

void MaterializeValues(const SimpleChunk& parsed, WorkerScratch* scratch, const uint8_t** values) {
  if (parsed.decoded_size > kMaxMaterializedBytes) {
    Corrupt("chunk claims " + std::to_string(parsed.decoded_size) +
            " decoded bytes, more than the " + std::to_string(kMaxMaterializedBytes) +
            " this reader holds at once");
  }
  scratch->values.resize(static_cast<size_t>(parsed.decoded_size));
  if (parsed.compression == kNoCompression) {
    CopyFromPieces(parsed.values, 0, parsed.decoded_size, scratch->values.data());
  } else if (parsed.compression == kZstd) {
    ZstdStream stream(scratch->zstd, parsed.values, &scratch->discard);
    stream.Read(scratch->values.data(), parsed.decoded_size);
  } else {
    const uint8_t* input;
    std::vector<uint8_t> gathered;
    if (parsed.values.spans.size() == 1) {
      input = parsed.values.spans[0].data;
    } else {
      gathered.resize(static_cast<size_t>(parsed.values.total));
      CopyFromPieces(parsed.values, 0, parsed.values.total, gathered.data());
      input = gathered.data();
    }
    DecompressExact(parsed.compression, input, static_cast<size_t>(parsed.values.total),
                    scratch->values.data(), scratch->values.size(), "record values");
  }
  *values = scratch->values.data();
}

ShardSet::ShardSet(std::vector<std::string> paths, bool verify_checksums, size_t max_open_files)
    : paths_(std::move(paths)),
      verify_(verify_checksums),
      max_open_(std::max<size_t>(1, max_open_files)),
      pid_(::getpid()) {}

void ShardSet::ForgetIfForked() {
  // A forked child must not trust what its parent cached: it reopens.
  if (pid_ == ::getpid()) return;
  open_.clear();
  recency_.clear();
  scratch_pool_.clear();
  pid_ = ::getpid();
}

std::shared_ptr<const OpenShard> ShardSet::Open(size_t file) {
  if (file >= paths_.size()) {
    Fail(ErrorKind::kArgument, "shard number " + std::to_string(file) + " is out of range");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ForgetIfForked();
  const auto found = open_.find(file);
  if (found != open_.end()) {
    recency_.splice(recency_.begin(), recency_, found->second.second);
    return found->second.first;
  }
  auto shard = std::make_shared<OpenShard>();
  shard->file = std::make_unique<ShardFile>(paths_[file]);
  shard->index = ReadShardIndex(*shard->file);
  recency_.push_front(file);
  open_.emplace(file, std::make_pair(shard, recency_.begin()));
  while (open_.size() > max_open_) {
    // Readers still holding an evicted shard keep it open until they finish.
    open_.erase(recency_.back());
    recency_.pop_back();
  }
  return shard;
}

std::unique_ptr<WorkerScratch> ShardSet::AcquireScratch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ForgetIfForked();
    if (!scratch_pool_.empty()) {
      auto scratch = std::move(scratch_pool_.back());
      scratch_pool_.pop_back();
      return scratch;
    }
  }
  return std::make_unique<WorkerScratch>();
}

void ShardSet::ReleaseScratch(std::unique_ptr<WorkerScratch> scratch) {
  for (std::vector<uint8_t>* buffer : {&scratch->file_bytes, &scratch->values, &scratch->record}) {
    if (buffer->capacity() > kKeptScratchBytes) std::vector<uint8_t>().swap(*buffer);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (scratch_pool_.size() < kPooledScratch) scratch_pool_.push_back(std::move(scratch));
}

void ShardSet::ReadRun(const Run& run, const BatchLayout& layout, const int64_t* ordinals,
                       uint8_t* needs_fallback, WorkerScratch* scratch) {
  const ShardIndex& index = run.shard->index;
  const WantedRecord* current = &run.chunks.front().records.front();
  try {
    scratch->file_bytes.resize(static_cast<size_t>(run.end - run.begin));
    run.shard->file->ReadAt(run.begin, run.end - run.begin, scratch->file_bytes.data());
    const FileWindow window{scratch->file_bytes.data(), run.begin, run.end - run.begin};
    std::vector<std::string> keys;
    for (const FieldSlot& slot : layout.fields) keys.push_back(slot.key_hint);
    Chunk chunk;
    SimpleChunk parsed;
    Pieces decoded;
    for (const WantedChunk& wanted : run.chunks) {
      current = &wanted.records.front();
      ReadChunk(window, index.chunk_offsets[wanted.chunk], index.ChunkLimit(wanted.chunk), verify_,
                &chunk);
      if (!IsDecodableRecordChunk(chunk, index, wanted.chunk)) {
        for (const WantedRecord& record : wanted.records) {
          for (size_t position : record.positions) needs_fallback[position] = 1;
        }
        continue;
      }
      ParseSimpleChunk(chunk, UINT64_MAX, &scratch->sizes, &parsed);
      std::unique_ptr<ValueStream> stream = StreamFor(parsed, &decoded, scratch);
      uint64_t stream_position = 0;
      for (const WantedRecord& record : wanted.records) {
        current = &record;
        const uint64_t begin = parsed.offsets[record.index_in_chunk];
        const uint64_t size = parsed.sizes[record.index_in_chunk];
        stream->Skip(begin - stream_position);
        try {
          DecodeRecord(*stream, size, layout, keys, /*hinted=*/true, record.positions[0],
                       &scratch->record_scratch);
        } catch (const KeyHintMiss&) {
          // The descriptor maps fields to other tensors than assumed: read
          // this record whole, learn its keys, and decode it again.
          CheckMaterializable(size);
          stream = StreamFor(parsed, &decoded, scratch);
          stream->Skip(begin);
          scratch->record.resize(static_cast<size_t>(size));
          stream->Read(scratch->record.data(), size);
          // The resolved keys become the hints for the records after this one.
          keys = ResolveKeys(scratch->record.data(), size, layout, &scratch->record_scratch);
          Pieces whole;
          whole.Append(scratch->record.data(), static_cast<size_t>(size));
          PiecesStream again(whole);
          DecodeRecord(again, size, layout, keys, false, record.positions[0],
                       &scratch->record_scratch);
        }
        stream_position = begin + size;
        for (size_t k = 1; k < record.positions.size(); ++k) {
          CopyRow(layout, record.positions[0], record.positions[k]);
        }
      }
    }
  } catch (const ReaderError& error) {
    const std::string context =
        RecordContext(run.shard->file->path(), ordinals[current->positions[0]], current->local);
    if (error.kind() == ErrorKind::kTarget || error.kind() == ErrorKind::kSchemaMismatch) {
      throw ReaderError(error.kind(), "record " + std::to_string(ordinals[current->positions[0]]) +
                                          ": " + error.what());
    }
    throw ReaderError(error.kind(), context + ": " + error.what(), error.os_error());
  }
}

void ShardSet::Read(const int64_t* files, const int64_t* locals, const int64_t* ordinals,
                    size_t count, const BatchLayout& layout, int threads,
                    uint8_t* needs_fallback) {
  std::memset(needs_fallback, 0, count);
  const BatchPlan plan =
      PlanBatch(files, locals, ordinals, count, [this](size_t file) { return Open(file); });
  for (size_t position : plan.unsupported_positions) needs_fallback[position] = 1;
  if (plan.runs.empty()) return;

  const size_t workers = std::min<size_t>(std::max(threads, 1), plan.runs.size());
  std::atomic<size_t> next_run{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;
  auto work = [&]() {
    std::unique_ptr<WorkerScratch> scratch;
    try {
      scratch = AcquireScratch();
      for (size_t r = next_run++; r < plan.runs.size() && !failed; r = next_run++) {
        ReadRun(plan.runs[r], layout, ordinals, needs_fallback, scratch.get());
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
      failed = true;
    }
    if (scratch) ReleaseScratch(std::move(scratch));
  };
  if (workers == 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    pool.reserve(workers - 1);
    for (size_t w = 1; w < workers; ++w) {
      // A thread the system refuses (EAGAIN) is one worker fewer, not a
      // crash: the runs are shared out by next_run, so fewer workers suffice.
      try {
        pool.emplace_back(work);
      } catch (const std::system_error&) {
        break;
      }
    }
    work();
    for (std::thread& thread : pool) thread.join();
  }
  if (first_error) std::rethrow_exception(first_error);
}

RecordProbe ShardSet::Probe(size_t file, uint64_t local, int64_t ordinal) {
  RecordProbe probe;
  const std::shared_ptr<const OpenShard> shard = Open(file);
  const ShardIndex& index = shard->index;
  if (index.transposed_footer) {
    probe.supported = false;
    return probe;
  }
  const std::string context = RecordContext(shard->file->path(), ordinal, local);
  if (local >= index.num_records) {
    Corrupt(context + " is past the " + std::to_string(index.num_records) +
            " records the shard holds; the shard is truncated or does not match its manifest");
  }
  std::unique_ptr<WorkerScratch> scratch = AcquireScratch();
  try {
    const uint64_t c = index.ChunkOf(local);
    Chunk chunk;
    ReadIndexedChunk(*shard->file, index, c, verify_, &scratch->file_bytes, &chunk);
    if (!IsDecodableRecordChunk(chunk, index, c)) {
      probe.supported = false;
      ReleaseScratch(std::move(scratch));
      return probe;
    }
    SimpleChunk parsed;
    ParseSimpleChunk(chunk, UINT64_MAX, &scratch->sizes, &parsed);
    const uint64_t in_chunk = local - index.first_record[c];
    const uint64_t record_begin = parsed.offsets[in_chunk], size = parsed.sizes[in_chunk];
    Pieces decoded;
    CheckMaterializable(size);
    std::unique_ptr<ValueStream> stream = StreamFor(parsed, &decoded, scratch.get());
    stream->Skip(record_begin);
    scratch->record.resize(static_cast<size_t>(size));
    stream->Read(scratch->record.data(), size);
    RecordScratch& described = scratch->record_scratch;
    const ByteSpan descriptor = DescribeRecord(scratch->record.data(), size, &described);
    for (const auto& [name, key] : described.described.fields) {
      const TensorEntry* tensor = described.parsed.Find(key);
      if (tensor == nullptr) Corrupt("descriptor names tensor \"" + key + "\", which is absent");
      probe.fields.push_back(RecordProbe::Field{name, key, tensor->dtype, tensor->shape});
    }
    probe.metadata_json = DescriptorMetadataJson(descriptor.data, descriptor.size);
  } catch (const ReaderError& error) {
    throw ReaderError(error.kind(), context + ": " + error.what(), error.os_error());
  }
  ReleaseScratch(std::move(scratch));
  return probe;
}

}  // namespace sdsl
