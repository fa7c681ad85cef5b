#include "read/shard_cache.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/reader_error.h"
#include "read/failed_checks.h"
#include "sources/local_object.h"

namespace sdsl {
namespace {

// A shard's bytes as its footer's parse reads them, each range noted (in
// place: a shard's open allocates nothing more): the ones to drop when the
// parse fails. The parse reads five ranges at most; more would overwrite
// the last.
class NotedBytes : public RandomAccessBytes {
 public:
  explicit NotedBytes(const ShardFile& file) : file_(file) {}
  const std::string& path() const override { return file_.path(); }
  uint64_t size() const override { return file_.size(); }
  void ReadAt(uint64_t offset, uint64_t size, uint8_t* dst) const override {
    read_[std::min(count_, kRanges - 1)] = ByteRange{offset, size};
    count_ = std::min(count_ + 1, kRanges);
    file_.ReadAt(offset, size, dst);
  }
  const ByteRange* ranges() const { return read_; }
  size_t count() const { return count_; }

 private:
  static constexpr size_t kRanges = 8;
  const ShardFile& file_;
  mutable ByteRange read_[kRanges];
  mutable size_t count_ = 0;
};

// The shard's footer index; its bytes (the tail a store source opened the
// shard with, among them) fetched again when they fail, as FailedChecks says.
ShardIndex ReadCheckedIndex(const ShardFile& file) {
  FailedChecks checks;
  for (;;) {
    NotedBytes noted(file);
    try {
      return ReadShardIndex(noted);
    } catch (const ReaderError& error) {
      checks.After(error, file, noted.ranges(), noted.count());
    }
  }
}

}  // namespace

ShardCache::ShardCache(ShardSource& source, DeclaredSizes declared_sizes)
    : source_(source),
      declared_sizes_(declared_sizes),
      shards_(source.num_files()),
      kept_(new std::atomic<bool>[source.num_files()]()) {
  StartGuarding();
}

std::shared_ptr<const OpenShard> ShardCache::Open(size_t file) {
  Kept(file);
  return shards_[file];  // set once, never changed after: read without the lock
}

const OpenShard& ShardCache::Kept(size_t file) {
  if (file >= source_.num_files()) {
    Fail(ErrorKind::kArgument, "shard number " + std::to_string(file) + " is out of range");
  }
  if (kept_[file].load(std::memory_order_acquire)) return *shards_[file];
  // The footer is read without the lock: a slow disk or a remote source
  // delays only the reads that need this shard, and a fork meanwhile cannot
  // leave the lock held in the child. Two threads missing at once both read
  // the footer; the first to finish is kept.
  auto shard = std::make_shared<OpenShard>();
  shard->file = std::make_unique<ShardFile>(source_, file);
  CheckDeclaredSize(shard->file->path(), shard->file->size(), declared_sizes_[file]);
  shard->index = ReadCheckedIndex(*shard->file);
  footer_reads_.fetch_add(1, std::memory_order_relaxed);
  shard->verified.Reset(shard->index.num_chunks());
  // The identity the first marks are made under: a file replaced between
  // this open and a later read is then seen as such.
  shard->verified.Renew(source_.Identity(file));
  std::lock_guard<std::mutex> lock(mutex_);
  if (!shards_[file]) {
    shards_[file] = std::move(shard);
    kept_[file].store(true, std::memory_order_release);
  }
  return *shards_[file];
}

size_t ShardCache::Touched() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t touched = 0;
  for (const auto& shard : shards_) touched += shard != nullptr;
  return touched;
}

size_t ShardCache::HeldBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  // The declared sizes are borrowed, not held.
  size_t held = shards_.capacity() * (sizeof(shards_[0]) + sizeof(kept_[0]));
  for (const auto& shard : shards_) {
    if (shard) held += sizeof(OpenShard) + shard->index.HeldBytes() + shard->verified.HeldBytes();
  }
  return held;
}

}  // namespace sdsl
