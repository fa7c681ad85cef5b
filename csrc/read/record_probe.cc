#include "read/record_probe.h"

#include <memory>

#include "base/reader_error.h"
#include "container/riegeli_chunk.h"
#include "container/simple_chunk.h"
#include "read/failed_checks.h"
#include "read/materialize.h"
#include "read/run_decoder.h"

namespace sdsl {

RecordProbe ProbeRecord(const OpenShard& shard, uint64_t shard_record, int64_t ordinal,
                        Verify verify, ScratchPool* pool) {
  RecordProbe probe;
  const ShardIndex& index = shard.index;
  if (index.transposed_footer) {
    probe.supported = false;
    return probe;
  }
  const std::string context = RecordContext(shard.file->path(), ordinal, shard_record);
  if (shard_record >= index.num_records) {
    Corrupt(context + " is past the " + std::to_string(index.num_records) +
            " records the shard holds; the shard is truncated or does not match its manifest");
  }
  std::unique_ptr<WorkerScratch> scratch = pool->Acquire();
  try {
    const uint64_t c = index.ChunkOf(shard_record);
    Chunk chunk;
    const bool check = ChecksChunk(verify, shard.verified, c);
    ReadCheckedChunk(*shard.file, index, c, check, &scratch->file_bytes, &chunk);
    if (check) shard.verified.Mark(c);
    if (!IsDecodableRecordChunk(chunk, index, c)) {
      probe.supported = false;
      pool->Release(std::move(scratch));
      return probe;
    }
    SimpleChunk parsed;
    ParseSimpleChunk(chunk, UINT64_MAX, &scratch->sizes, &parsed);
    const uint64_t chunk_record = shard_record - index.FirstRecord(c);
    const uint64_t record_begin = parsed.offsets[chunk_record], size = parsed.sizes[chunk_record];
    Pieces decoded;
    CheckMaterializable(size, *scratch);
    std::unique_ptr<ValueStream> stream = OpenValueStream(parsed, &decoded, scratch.get());
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
  pool->Release(std::move(scratch));
  return probe;
}

}  // namespace sdsl
