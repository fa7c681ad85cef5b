#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/reader_error.h"
#include "python/bindings.h"
#include "python/errors.h"
#include "python/python_source.h"
#include "read/readahead.h"
#include "read/record_bytes.h"
#include "read/shard_set.h"
#include "sources/mapped_copy.h"

namespace py = pybind11;

namespace sdsl_python {
namespace {

// A batch's layout as the Python side describes it once per schema: each
// field's name, tensor key, dtype, row shape and window axis, and each
// target's key and kind, checked when added. A read takes it with the
// batch's buffers, found by name, and fills in only where they lie.
struct LayoutSpec {
  sdsl::BatchLayout layout;              // bases unset
  std::vector<std::string> length_keys;  // per field: its lengths buffer's name, or empty
};

// Bytes of one row of `shape` in `dtype`, refused when they overflow.
uint64_t RowBytes(const std::string& name, const std::string& dtype,
                  const std::vector<uint64_t>& shape) {
  uint64_t row = sdsl::DtypeItemSize(dtype);
  if (row == 0) throw py::value_error("unknown dtype " + dtype);
  for (uint64_t d : shape) {
    if (__builtin_mul_overflow(row, d, &row)) {
      throw py::value_error("field " + name + " has rows too large to address");
    }
  }
  return row;
}

void AddField(LayoutSpec& spec, std::string name, std::string tensor, std::string dtype,
              const std::vector<uint64_t>& shape, const std::optional<int>& window_axis,
              const std::optional<std::string>& lengths) {
  sdsl::FieldSlot slot;
  const uint64_t row = RowBytes(name, dtype, shape);
  if (window_axis) {
    if (*window_axis < 0 || *window_axis >= static_cast<int>(shape.size())) {
      throw py::value_error("field " + name + " has no axis " + std::to_string(*window_axis) +
                            " to window");
    }
    slot.window_axis = *window_axis;
  } else if (lengths) {
    throw py::value_error("field " + name + " has no window, so no lengths to return");
  }
  slot.name = std::move(name);
  slot.key_hint = std::move(tensor);
  slot.dtype = std::move(dtype);
  slot.shape = shape;
  slot.row_bytes = row;
  spec.layout.fields.push_back(std::move(slot));
  spec.length_keys.push_back(lengths.value_or(std::string()));
}

void AddTarget(LayoutSpec& spec, std::string key, const std::string& kind) {
  if (kind != "i" && kind != "f") throw py::value_error("target kind must be 'i' or 'f'");
  sdsl::TargetSlot slot;
  slot.key = std::move(key);
  slot.kind = kind[0];
  spec.layout.targets.push_back(std::move(slot));
}

// A writable, C-contiguous buffer of exactly `bytes` bytes. The Python layer
// has already checked shape and dtype; this re-checks what memory safety needs.
// The buffer stays exported, in `held`, until the caller drops it: an object
// that tracks its exports (bytearray, array.array) then refuses to resize or
// free its memory while the read writes there with the GIL released.
uint8_t* WritableBase(const py::object& object, uint64_t bytes, const std::string& name,
                      std::vector<py::buffer_info>* held) {
  py::buffer buffer = py::reinterpret_borrow<py::buffer>(object);
  held->push_back(buffer.request(/*writable=*/true));
  const py::buffer_info& info = held->back();
  if (static_cast<uint64_t>(info.size) * static_cast<uint64_t>(info.itemsize) != bytes) {
    throw py::value_error("buffer for " + name + " holds " +
                          std::to_string(info.size * info.itemsize) + " bytes, not " +
                          std::to_string(bytes));
  }
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] > 1 && info.strides[d] != expected) {
      throw py::value_error("buffer for " + name + " is not C-contiguous");
    }
    expected *= info.shape[d];
  }
  return static_cast<uint8_t*>(info.ptr);
}

// buffers[name], or a ValueError saying which buffer the layout wants.
py::object BufferNamed(const py::dict& buffers, const std::string& name) {
  const py::str key(name);
  if (!buffers.contains(key)) throw py::value_error("no buffer for " + name + " among buffers");
  return buffers[key];
}

// The (shard, record-in-shard) arrays every per-record function takes.
void CheckRecordArrays(const Int64Array& files, const Int64Array& records) {
  if (files.ndim() != 1 || records.ndim() != 1 || files.size() != records.size()) {
    throw py::value_error("files and records must be 1-D arrays of one length");
  }
}

std::unique_ptr<sdsl::ShardSet> MakeShardSet(std::vector<std::string> paths,
                                             const py::object& verify_checksums,
                                             size_t max_open_files, const py::object& source,
                                             const py::object& declared, std::string root,
                                             std::string prefix, const py::object& digests) {
  const sdsl::Verify verify = VerifyArg(verify_checksums);
  if (!digests.is_none() && !paths.empty()) {
    throw py::value_error("pass shard paths, or a prefix and digests, not both");
  }
  // The digests, as the sizes, are borrowed and kept alive with the set.
  using DigestArray = py::array_t<uint8_t, py::array::c_style>;
  if (!digests.is_none() && !DigestArray::check_(digests)) {
    throw py::type_error("digests must be a numpy uint8 array in C order");
  }
  sdsl::ShardNames names = [&] {
    if (digests.is_none()) return sdsl::ShardNames(std::move(paths));
    const auto rows = py::reinterpret_borrow<DigestArray>(digests);
    return sdsl::ShardNames(std::move(prefix), rows.data(), static_cast<size_t>(rows.nbytes()));
  }();
  const size_t count = names.size();
  // Borrowed, not copied: the constructor keeps the array alive with the set,
  // and takes it only as it is (int64, C order), so that what it keeps alive
  // is what the set reads.
  sdsl::DeclaredSizes sizes;
  if (!declared.is_none()) {
    if (!Int64Array::check_(declared)) {
      throw py::type_error("sizes must be a numpy int64 array in C order");
    }
    const auto array = py::reinterpret_borrow<Int64Array>(declared);
    if (array.ndim() != 1) throw py::value_error("sizes must be a 1-D array");
    sizes = {array.data(), static_cast<size_t>(array.size())};
  }
  if (sizes.count != 0 && sizes.count != count) {
    throw py::value_error("sizes has " + std::to_string(sizes.count) + " entries for " +
                          std::to_string(count) + " shards; pass one per shard, or none");
  }
  if (source.is_none()) {
    sdsl::LocalObjectRules rules{std::move(root), sizes};
    return std::make_unique<sdsl::ShardSet>(std::move(names), verify, max_open_files,
                                            std::move(rules));
  }
  // A source with a native side reads with no Python in the loop.
  py::object native = source;
  if (py::hasattr(source, "native_source")) native = source.attr("native_source");
  if (std::unique_ptr<sdsl::ShardSource> direct = NativeSourceOf(native)) {
    if (direct->num_files() != count) {
      throw py::value_error("the source has " + std::to_string(direct->num_files()) +
                            " shards, the dataset " + std::to_string(count));
    }
    return std::make_unique<sdsl::ShardSet>(std::move(direct), verify, sizes);
  }
  return std::make_unique<sdsl::ShardSet>(MakePythonSource(source, count), verify, sizes);
}

// A windowed field's row shape is the layout's but along the window axis,
// where the batch's window length is what its buffer holds: the buffer must
// be (count, *shape) with any length there.
void TakeWindowLength(const py::object& object, size_t count, sdsl::FieldSlot* slot) {
  const py::buffer_info info = py::reinterpret_borrow<py::buffer>(object).request();
  const size_t axis = static_cast<size_t>(slot->window_axis);
  bool fits = info.ndim == static_cast<py::ssize_t>(slot->shape.size() + 1) &&
              static_cast<size_t>(info.shape[0]) == count;
  for (size_t d = 0; fits && d < slot->shape.size(); ++d) {
    fits = d == axis || static_cast<uint64_t>(info.shape[d + 1]) == slot->shape[d];
  }
  if (!fits) {
    throw py::value_error("buffer for " + slot->name +
                          " must have one row a record, shaped as the field is but along its "
                          "window axis");
  }
  slot->shape[axis] = static_cast<uint64_t>(info.shape[axis + 1]);
  slot->row_bytes = RowBytes(slot->name, slot->dtype, slot->shape);
}

// A batch's outputs made ready for the core: the layout with each slot
// pointed at its buffer (the batch's own copy: another thread may read with
// the same layout), the buffers exported until the read returns, and the
// flags the core sets for rows it leaves to signal_dataset.
struct PreparedBatch {
  sdsl::BatchLayout layout;
  std::vector<py::buffer_info> held;
  Int64Array starts;
  py::array_t<uint8_t> needs_fallback;
};

PreparedBatch Prepare(const LayoutSpec& spec, const py::dict& buffers, size_t count,
                      const py::object& starts, bool pad) {
  PreparedBatch batch{spec.layout, {}, {}, py::array_t<uint8_t>(static_cast<py::ssize_t>(count))};
  sdsl::BatchLayout& layout = batch.layout;
  batch.held.reserve(2 * layout.fields.size() + layout.targets.size());
  for (size_t f = 0; f < layout.fields.size(); ++f) {
    sdsl::FieldSlot& slot = layout.fields[f];
    const py::object buffer = BufferNamed(buffers, slot.name);
    if (slot.window_axis >= 0) {
      if (starts.is_none()) {
        throw py::value_error("field " + slot.name + " has a window axis, and the read no starts");
      }
      TakeWindowLength(buffer, count, &slot);
    }
    uint64_t bytes;
    if (__builtin_mul_overflow(slot.row_bytes, count, &bytes)) {
      throw py::value_error("field " + slot.name + " has rows too large to address");
    }
    slot.base = WritableBase(buffer, bytes, slot.name, &batch.held);
    const std::string& lengths = spec.length_keys[f];
    if (!lengths.empty() && buffers.contains(py::str(lengths))) {
      slot.lengths = WritableBase(buffers[py::str(lengths)], 8 * count, lengths, &batch.held);
    }
  }
  for (sdsl::TargetSlot& target : layout.targets) {
    target.base =
        WritableBase(BufferNamed(buffers, target.key), 8 * count, target.key, &batch.held);
  }
  if (!starts.is_none()) {
    batch.starts = starts.cast<Int64Array>();
    if (batch.starts.ndim() != 1 || static_cast<size_t>(batch.starts.size()) != count) {
      throw py::value_error("starts must be a 1-D array with one start per index");
    }
    layout.window.starts = batch.starts.data();
    layout.window.pad = pad;
  }
  return batch;
}

py::array_t<uint8_t> Read(sdsl::ShardSet& set, const Int64Array& files,
                          const Int64Array& shard_records, const Int64Array& ordinals,
                          const LayoutSpec& spec, const py::dict& buffers, int threads,
                          const py::object& starts, bool pad) {
  const size_t count = static_cast<size_t>(files.size());
  if (shard_records.size() != files.size() || ordinals.size() != files.size() ||
      files.ndim() != 1) {
    throw py::value_error("files, shard_records and ordinals must be 1-D arrays of one length");
  }
  const int64_t* file_data = files.data();
  for (size_t i = 0; i < count; ++i) {
    if (file_data[i] < 0 || static_cast<size_t>(file_data[i]) >= set.num_files()) {
      throw py::index_error("shard number " + std::to_string(file_data[i]) + " is out of range");
    }
  }
  PreparedBatch batch = Prepare(spec, buffers, count, starts, pad);
  uint8_t* flags = batch.needs_fallback.mutable_data();
  {
    py::gil_scoped_release release;
    set.Read(file_data, shard_records.data(), ordinals.data(), count, batch.layout, threads, flags);
  }
  return batch.needs_fallback;
}

py::array_t<uint8_t> ReadOrdinals(sdsl::ShardSet& set, const Int64Array& ordinals,
                                  const LayoutSpec& spec, const py::dict& buffers, int threads,
                                  const py::object& starts, bool pad,
                                  const sdsl::RowFinisher* finish) {
  if (ordinals.ndim() != 1) throw py::value_error("ordinals must be a 1-D int64 array");
  const size_t count = static_cast<size_t>(ordinals.size());
  PreparedBatch batch = Prepare(spec, buffers, count, starts, pad);
  batch.layout.finisher = finish;
  uint8_t* flags = batch.needs_fallback.mutable_data();
  {
    py::gil_scoped_release release;
    set.ReadOrdinals(ordinals.data(), count, batch.layout, threads, flags);
  }
  return batch.needs_fallback;
}

void KeepRuns(sdsl::ShardSet& set, const Int64Array& starts, const Int64Array& skips,
              const Int64Array& files) {
  if (starts.ndim() != 1 || skips.ndim() != 1 || files.ndim() != 1) {
    throw py::value_error("starts, skips and files must be 1-D int64 arrays");
  }
  if (skips.size() != starts.size() || files.size() != starts.size()) {
    throw py::value_error("a shard table's columns must be of one length");
  }
  // Borrowed, not copied: keep_runs keeps the three arrays alive with the
  // set, and takes them only as they are (int64, C order), so that what it
  // keeps alive is what the set reads.
  set.KeepRuns(sdsl::OrdinalRuns{starts.data(), skips.data(), files.data(),
                                 static_cast<size_t>(starts.size())});
}

// Adds the stage seconds of `set`'s reads since the last call into `out`
// (one float64 per stage, then Python's), Python's being `python_wall`, the
// reads' time as Python measured it, less the core's own. With the GIL held
// throughout, another thread's addition cannot interleave.
void AddStageSeconds(sdsl::ShardSet& set, py::array_t<double, 0>& out, double python_wall) {
  if (out.ndim() != 1 || static_cast<size_t>(out.size()) != sdsl::kStages + 1 || !out.writeable() ||
      out.strides(0) != sizeof(double)) {
    throw py::value_error("stage seconds go into a writable float64 array of " +
                          std::to_string(sdsl::kStages + 1) + " entries");
  }
  uint64_t wall = 0;
  const sdsl::StageTimes times = set.TakeStageTimes(&wall);
  const double per_tick = sdsl::SecondsPerTick();
  double* seconds = out.mutable_data();
  for (size_t s = 0; s < sdsl::kStages; ++s) seconds[s] += times.ticks[s] * per_tick;
  // Stage times off time nothing, Python's part included: a lone "python"
  // stage would read as the whole of the reads' time.
  if (set.stage_sampling() > 0) seconds[sdsl::kStages] += python_wall - wall * per_tick;
}

py::object Probe(sdsl::ShardSet& set, size_t file, uint64_t shard_record, int64_t ordinal) {
  sdsl::RecordProbe probe;
  {
    py::gil_scoped_release release;
    probe = set.Probe(file, shard_record, ordinal);
  }
  if (!probe.supported) return py::none();
  py::list fields;
  for (const auto& field : probe.fields) {
    py::tuple shape(field.shape.size());
    for (size_t d = 0; d < field.shape.size(); ++d) shape[d] = py::int_(field.shape[d]);
    fields.append(py::make_tuple(field.name, field.key, field.dtype, shape));
  }
  return py::make_tuple(fields, probe.metadata_json);
}

}  // namespace

sdsl::Verify VerifyArg(const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) {
    return value.cast<bool>() ? sdsl::Verify::kEveryRead : sdsl::Verify::kNever;
  }
  if (py::isinstance<py::str>(value) && value.cast<std::string>() == "once") {
    return sdsl::Verify::kOnce;
  }
  throw py::value_error("verify_checksums= must be True (every read), \"once\" (each chunk's "
                        "first read in this process) or False (never), not " +
                        py::repr(value).cast<std::string>());
}

void BindShardSet(py::module_& m) {
  py::tuple stages(sdsl::kStages + 1);
  for (size_t s = 0; s < sdsl::kStages; ++s) stages[s] = py::str(sdsl::StageName(s));
  stages[sdsl::kStages] = py::str("python");
  m.attr("STAGES") = stages;

  py::class_<LayoutSpec>(m, "BatchLayout",
                         "What one batch looks like, described once per schema: its fields "
                         "and targets, in the order a read fills them.")
      .def(py::init<>())
      .def("add_field", &AddField, py::arg("name"), py::arg("tensor"), py::arg("dtype"),
           py::arg("shape"), py::arg("window_axis") = py::none(), py::arg("lengths") = py::none(),
           "A field: the batch's buffer `name` gets the record's tensor `tensor` (a hint, "
           "confirmed by each record's descriptor), of SafeTensors `dtype` and row `shape`. "
           "With `window_axis`, a read takes a window along that axis, and the buffer named "
           "`lengths`, when the read is given one, the positions each row holds.")
      .def("add_target", &AddTarget, py::arg("key"), py::arg("kind"),
           "A target: the batch's buffer `key` gets the record's metadata scalar `key`, as "
           "int64 ('i') or float64 ('f').")
      .def_property_readonly("fields",
                             [](const LayoutSpec& spec) { return spec.layout.fields.size(); })
      .def_property_readonly("targets",
                             [](const LayoutSpec& spec) { return spec.layout.targets.size(); });

  py::class_<sdsl::ShardSet>(m, "ShardSet")
      .def(py::init(&MakeShardSet), py::arg("paths"), py::arg("verify_checksums"),
           py::arg("max_open_files"), py::arg("source") = py::none(), py::arg("sizes") = py::none(),
           py::arg("root") = std::string(), py::arg("prefix") = std::string(),
           py::arg("digests") = py::none(), py::keep_alive<1, 6>(), py::keep_alive<1, 9>(),
           "One entry of `paths` per shard. Without `source` they are local files, opened "
           "below `root` without following links (regular files only); with it, `source` "
           "(size(file), name(file), fetch(requests)) supplies every byte. `sizes`: the bytes "
           "each shard's manifest declares (-1: not checked; an int64 array, borrowed and kept "
           "alive with the set); a shard of another size is refused before its footer is read. "
           "`prefix` and `digests` (32 bytes a shard, a uint8 array, borrowed and kept alive "
           "with the set) name the shards compactly instead of `paths`: "
           "<prefix><2 hex>/<64 hex>.arrayrecord.")
      .def("read", &Read, py::arg("files"), py::arg("shard_records"), py::arg("ordinals"),
           py::arg("layout"), py::arg("buffers"), py::arg("threads"),
           py::arg("starts") = py::none(), py::arg("pad") = false)
      .def("read_ordinals", &ReadOrdinals, py::arg("ordinals"), py::arg("layout"),
           py::arg("buffers"), py::arg("threads"), py::arg("starts") = py::none(),
           py::arg("pad") = false, py::arg("finish") = nullptr,
           "read, each ordinal located in the shard table keep_runs kept; `finish` (an "
           "AugmentRows) runs on each row the core decodes, as it decodes it.")
      .def("keep_runs", &KeepRuns, py::arg("starts").noconvert(), py::arg("skips").noconvert(),
           py::arg("files").noconvert(), py::keep_alive<1, 2>(), py::keep_alive<1, 3>(),
           py::keep_alive<1, 4>(),
           "Keeps a shard table's columns (int64 arrays in C order, borrowed and kept alive "
           "with the set), for read_ordinals.")
      .def("probe", &Probe, py::arg("file"), py::arg("shard_record"), py::arg("ordinal"))
      .def_property_readonly("num_files", &sdsl::ShardSet::num_files)
      .def_property_readonly("worker_threads", &sdsl::ShardSet::worker_threads,
                             "Decode threads this reader has started in this process.")
      .def_property_readonly("kept_scratch_bytes", &sdsl::ShardSet::kept_scratch_bytes,
                             "Bytes of buffers idle scratch keeps between reads.")
      .def_property_readonly(
          "shards_indexed", &sdsl::ShardSet::shards_indexed,
          "Shards whose footer and index this reader keeps (every shard it touched).")
      .def_property_readonly("index_bytes", &sdsl::ShardSet::index_bytes,
                             "Bytes the kept shard indexes hold.")
      .def_property("max_chunk_bytes", &sdsl::ShardSet::max_chunk_bytes,
                    &sdsl::ShardSet::set_max_chunk_bytes,
                    "Decoded bytes of one chunk (or whole record) this reader holds at once; "
                    "a chunk claiming more is refused before anything is allocated.")
      .def_property_readonly("held_bytes", &sdsl::ShardSet::held_bytes,
                             "Bytes kept for the shards: names, the open files' and the cache's "
                             "slots, and the indexes of the shards touched (the sizes and the "
                             "shard table are borrowed, not held).")
      .def_property_readonly("footer_reads", &sdsl::ShardSet::footer_reads,
                             "Shard footers read so far (once per shard touched).")
      .def_property("work_per_helper", &sdsl::ShardSet::work_per_helper,
                    &sdsl::ShardSet::set_work_per_helper,
                    "Work (uncompressed bytes; compressed count 4x) a warm batch needs for each "
                    "helper thread it wakes; 0 wakes every helper `threads` allows.")
      .def_property("stage_sampling", &sdsl::ShardSet::stage_sampling,
                    &sdsl::ShardSet::set_stage_sampling,
                    "One run of a batch in this many is timed stage by stage (its thread's other "
                    "runs shared out as those were); 0 times no stage at all.")
      .def("add_stage_seconds", &AddStageSeconds, py::arg("out"), py::arg("python_wall"),
           "Adds the stage seconds of the reads since the last call into `out` (float64, one "
           "per name of STAGES), Python's as `python_wall` less the core's time; with "
           "stage_sampling 0, none.")
      .def_property_readonly("helped_batches", &sdsl::ShardSet::helped_batches,
                             "Batches in which a helper thread decoded at least one run.")
      .def(
          "wait_announcements",
          [](sdsl::ShardSet& set, double seconds) {
            py::gil_scoped_release release;
            return set.WaitForAnnouncements(seconds);
          },
          py::arg("seconds"),
          "Whether every announcement queued so far was carried out within `seconds`.");

  m.def(
      "record_bytes",
      [](sdsl::ShardSet& set, const py::object& verify_checksums, const Int64Array& files,
         const Int64Array& records) {
        const sdsl::Verify verify = VerifyArg(verify_checksums);
        CheckRecordArrays(files, records);
        for (py::ssize_t k = 0; k < files.size(); ++k) {
          if (files.data()[k] < 0 || static_cast<size_t>(files.data()[k]) >= set.num_files()) {
            throw py::index_error("shard number " + std::to_string(files.data()[k]) +
                                  " is out of range");
          }
        }
        std::vector<std::optional<std::string>> payloads;
        {
          py::gil_scoped_release release;
          payloads = sdsl::ReadRecordBytes(set, verify, files.data(), records.data(),
                                           static_cast<size_t>(files.size()));
        }
        py::list out;
        for (const auto& payload : payloads) {
          if (payload) out.append(py::bytes(*payload));
          else out.append(py::none());
        }
        return out;
      },
      py::arg("shard_set"), py::arg("verify"), py::arg("files"), py::arg("records"),
      "Whole records as bytes (None where a chunk is transposed), for metadata shards.");
  m.def(
      "hint_records",
      [](sdsl::ShardSet& set, const Int64Array& files, const Int64Array& records) {
        CheckRecordArrays(files, records);
        py::gil_scoped_release release;
        return sdsl::HintRecords(set, files.data(), records.data(),
                                 static_cast<size_t>(files.size()));
      },
      py::arg("shard_set"), py::arg("files"), py::arg("records"),
      "Tells the shards' source that these records will be read soon; returns the bytes hinted.");
  m.def(
      "chunk_ranges",
      [](sdsl::ShardSet& set, const Int64Array& files, const Int64Array& records) {
        CheckRecordArrays(files, records);
        std::vector<sdsl::RangeRequest> ranges;
        {
          py::gil_scoped_release release;
          ranges = sdsl::RecordChunkRanges(set, files.data(), records.data(),
                                           static_cast<size_t>(files.size()));
        }
        py::list out;
        for (const auto& range : ranges)
          out.append(py::make_tuple(range.file, range.offset, range.size));
        return out;
      },
      py::arg("shard_set"), py::arg("files"), py::arg("records"),
      "(file, offset, size) of the chunks that hold these records, merged where they touch.");
  m.def("mapped_reads_guarded", &sdsl::GuardMappedCopies,
        "Whether this process's warm reads may copy out of shard mappings now (the reader's "
        "SIGBUS handler is first in line, installed here if it can be); False: they use pread.");
  m.def(
      "announce_records",
      [](sdsl::ShardSet& set, const Int64Array& files, const Int64Array& records) {
        CheckRecordArrays(files, records);
        std::vector<int64_t> wanted_files(files.data(), files.data() + files.size());
        std::vector<int64_t> wanted_records(records.data(), records.data() + records.size());
        py::gil_scoped_release release;
        return set.Announce(std::move(wanted_files), std::move(wanted_records));
      },
      py::arg("shard_set"), py::arg("files"), py::arg("records"),
      "Queues these records for the set's announcement thread, which opens their shards "
      "and hints their chunks; returns at once (False: the queue was full).");
}

}  // namespace sdsl_python
