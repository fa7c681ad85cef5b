// The one file that knows Python: converts arguments, releases the GIL around
// every read, and maps core errors to sds_loader's exception classes.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "annotation_rows.h"
#include "readahead.h"
#include "reader_error.h"
#include "record_bytes.h"
#include "shard_set.h"
#include "shard_source.h"
#include "shard_tools.h"

namespace py = pybind11;
using sdsl::ErrorKind;
using sdsl::ReaderError;

namespace {

using Int64Array = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

// Messages quote bytes from the shard (a JSON parser's last token, say), which
// need not be UTF-8: decode them leniently, or the error becomes a
// UnicodeDecodeError instead of the one it reports.
py::str Text(const std::string& message) {
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()),
                                        "backslashreplace");
  if (text == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(text);
}

void RaiseAs(PyObject* type, const char* message) {
  PyErr_SetObject(type, Text(message).ptr());
}

void RaiseAs(const char* class_name, const char* message) {
  py::object errors = py::module_::import("sds_loader.errors");
  RaiseAs(errors.attr(class_name).ptr(), message);
}

void TranslateReaderError(std::exception_ptr pointer) {
  try {
    if (pointer) std::rethrow_exception(pointer);
  } catch (const ReaderError& error) {
    switch (error.kind()) {
      case ErrorKind::kCorrupt:
        RaiseAs("CorruptShardError", error.what());
        return;
      case ErrorKind::kSchemaMismatch:
        RaiseAs("SchemaMismatch", error.what());
        return;
      case ErrorKind::kTarget:
        RaiseAs("TargetError", error.what());
        return;
      case ErrorKind::kUnsupported:
        RaiseAs(PyExc_NotImplementedError, error.what());
        return;
      case ErrorKind::kArgument:
        RaiseAs(PyExc_ValueError, error.what());
        return;
      case ErrorKind::kIndex:
        RaiseAs(PyExc_IndexError, error.what());
        return;
      case ErrorKind::kIo: {
        py::object exception = py::reinterpret_steal<py::object>(
            PyObject_CallFunction(PyExc_OSError, "iO", error.os_error(), Text(error.what()).ptr()));
        if (exception) PyErr_SetObject(PyExc_OSError, exception.ptr());
        return;
      }
    }
  }
}

std::vector<uint64_t> ShapeOf(const py::tuple& shape) {
  std::vector<uint64_t> dims;
  for (const py::handle& item : shape) dims.push_back(item.cast<uint64_t>());
  return dims;
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

// A shard source written in Python (the RangeSource protocol: size, name,
// fetch). Native workers take the GIL only around each call into it, so
// decoding on other threads goes on meanwhile; an exception the source
// raises reaches the caller of read() as it was raised.
class PythonSource : public sdsl::ShardSource {
 public:
  PythonSource(py::object source, size_t num_files) : source_(std::move(source)) {
    for (const char* method : {"size", "name", "fetch"}) {
      if (!py::hasattr(source_, method) || !PyCallable_Check(source_.attr(method).ptr())) {
        throw py::type_error(std::string("source has no ") + method +
                             "() method; pass an object with size(file), name(file) and "
                             "fetch(requests)");
      }
    }
    for (size_t file = 0; file < num_files; ++file) {
      names_.push_back(py::str(source_.attr("name")(file)).cast<std::string>());
    }
  }
  ~PythonSource() override {
    py::gil_scoped_acquire gil;
    source_ = py::object();
  }

  size_t num_files() const override { return names_.size(); }
  std::string Name(size_t file) const override { return names_.at(file); }

  uint64_t Size(size_t file) override {
    py::gil_scoped_acquire gil;
    const py::object size = source_.attr("size")(file);
    if (!py::isinstance<py::int_>(size) || size.cast<py::int_>() < py::int_(0)) {
      throw py::type_error("source.size(" + std::to_string(file) + ") for " + names_[file] +
                           " returned " + py::repr(size).cast<std::string>() +
                           ", not the shard's size in bytes");
    }
    return size.cast<uint64_t>();
  }

  void Fetch(sdsl::RangeRequest* requests, size_t count) override {
    py::gil_scoped_acquire gil;
    py::list batch(count);
    std::vector<py::memoryview> views;
    views.reserve(count);
    for (size_t k = 0; k < count; ++k) {
      views.push_back(py::memoryview::from_memory(requests[k].dst,
                                                  static_cast<py::ssize_t>(requests[k].size),
                                                  /*readonly=*/false));
      batch[k] = py::make_tuple(requests[k].file, requests[k].offset, views.back());
    }
    // The views point into scratch that the next read reuses: end them, so
    // that a source keeping one (in a traceback, say) cannot write there later.
    try {
      source_.attr("fetch")(batch);
    } catch (py::error_already_set&) {
      ReleaseQuietly(views);
      throw;
    }
    for (py::memoryview& view : views) view.attr("release")();
  }

  // Up to this many bytes of requests per fetch() call and worker, so that
  // a remote source has many requests in flight at once.
  uint64_t GatherBytes(const sdsl::RangeRequest* /*ranges*/, size_t /*count*/) override {
    return uint64_t{16} << 20;
  }

 private:
  // Ends every view on the way out of a failed fetch; a view that will not
  // end must not replace the source's own exception.
  static void ReleaseQuietly(std::vector<py::memoryview>& views) {
    for (py::memoryview& view : views) {
      if (PyObject* result = PyObject_CallMethod(view.ptr(), "release", nullptr)) {
        Py_DECREF(result);
      } else {
        PyErr_Clear();
      }
    }
  }

  py::object source_;
  std::vector<std::string> names_;
};

std::unique_ptr<sdsl::ShardSet> MakeShardSet(std::vector<std::string> paths, bool verify_checksums,
                                             size_t max_open_files, const py::object& source) {
  if (source.is_none()) {
    return std::make_unique<sdsl::ShardSet>(std::move(paths), verify_checksums, max_open_files);
  }
  return std::make_unique<sdsl::ShardSet>(std::make_unique<PythonSource>(source, paths.size()),
                                          verify_checksums, max_open_files);
}

py::array_t<uint8_t> Read(sdsl::ShardSet& set, const Int64Array& files,
                          const Int64Array& shard_records, const Int64Array& ordinals,
                          const py::list& fields, const py::list& targets, int threads,
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
  std::vector<py::buffer_info> held;  // every output, exported until the read returns
  held.reserve(2 * fields.size() + targets.size());
  sdsl::BatchLayout layout;
  for (const py::handle& item : fields) {
    const py::tuple spec = item.cast<py::tuple>();
    sdsl::FieldSlot slot;
    slot.name = spec[0].cast<std::string>();
    slot.key_hint = spec[1].cast<std::string>();
    slot.dtype = spec[2].cast<std::string>();
    slot.shape = ShapeOf(spec[3].cast<py::tuple>());
    uint64_t row = sdsl::DtypeItemSize(slot.dtype);
    if (row == 0) throw py::value_error("unknown dtype " + slot.dtype);
    for (uint64_t d : slot.shape) row *= d;
    slot.row_bytes = row;
    slot.base =
        WritableBase(py::reinterpret_borrow<py::object>(spec[4]), row * count, slot.name, &held);
    if (spec.size() > 5) {  // (..., window axis, lengths buffer or None)
      slot.window_axis = spec[5].cast<int>();
      if (slot.window_axis >= static_cast<int>(slot.shape.size()) || starts.is_none()) {
        throw py::value_error("field " + slot.name + " has no axis " +
                              std::to_string(slot.window_axis) + " to window");
      }
      if (!spec[6].is_none()) {
        slot.lengths = WritableBase(py::reinterpret_borrow<py::object>(spec[6]), 8 * count,
                                    slot.name + " lengths", &held);
      }
    }
    layout.fields.push_back(std::move(slot));
  }
  for (const py::handle& item : targets) {
    const py::tuple spec = item.cast<py::tuple>();
    sdsl::TargetSlot slot;
    slot.key = spec[0].cast<std::string>();
    const std::string kind = spec[1].cast<std::string>();
    if (kind != "i" && kind != "f") throw py::value_error("target kind must be 'i' or 'f'");
    slot.kind = kind[0];
    slot.base =
        WritableBase(py::reinterpret_borrow<py::object>(spec[2]), 8 * count, slot.key, &held);
    layout.targets.push_back(std::move(slot));
  }
  py::array_t<uint8_t> needs_fallback(static_cast<py::ssize_t>(count));
  uint8_t* flags = needs_fallback.mutable_data();
  const int64_t* shard_record_data = shard_records.data();
  const int64_t* ordinal_data = ordinals.data();
  Int64Array start_array;
  if (!starts.is_none()) {
    start_array = starts.cast<Int64Array>();
    if (start_array.ndim() != 1 || static_cast<size_t>(start_array.size()) != count) {
      throw py::value_error("starts must be a 1-D array with one start per index");
    }
    layout.window.starts = start_array.data();
    layout.window.pad = pad;
  }
  {
    py::gil_scoped_release release;
    set.Read(file_data, shard_record_data, ordinal_data, count, layout, threads, flags);
  }
  return needs_fallback;
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


// A vector's bytes as a 1-D numpy array that owns them: no copy.
template <typename T>
py::array_t<T> ArrayOwning(std::vector<T>&& values) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule free_when_done(owned, [](void* pointer) { delete static_cast<std::vector<T>*>(pointer); });
  return py::array_t<T>({static_cast<py::ssize_t>(owned->size())}, owned->data(), free_when_done);
}

py::tuple AnnotationRows(sdsl::ShardSet& rows, sdsl::ShardSet& metadata, bool verify,
                         const Int64Array& row_files, const Int64Array& row_records,
                         const Int64Array& meta_files, const Int64Array& meta_records,
                         const Int64Array& ordinals, const std::vector<std::string>& fields) {
  const py::ssize_t count = ordinals.size();
  for (const Int64Array* array : {&row_files, &row_records, &meta_files, &meta_records, &ordinals}) {
    if (array->ndim() != 1 || array->size() != count) {
      throw py::value_error("row_files, row_records, meta_files, meta_records and ordinals must be "
                            "1-D arrays of one length");
    }
  }
  for (py::ssize_t k = 0; k < count; ++k) {
    if (row_files.data()[k] < 0 || static_cast<size_t>(row_files.data()[k]) >= rows.num_files() ||
        meta_files.data()[k] < 0 ||
        static_cast<size_t>(meta_files.data()[k]) >= metadata.num_files()) {
      throw py::index_error("shard number out of range at position " + std::to_string(k));
    }
  }
  sdsl::AnnotationBatch batch;
  {
    py::gil_scoped_release release;
    batch = sdsl::ReadAnnotationRows(rows, metadata, verify, row_files.data(), row_records.data(),
                                     meta_files.data(), meta_records.data(), ordinals.data(),
                                     static_cast<size_t>(count), fields);
  }
  py::list ids;
  for (const std::string& id : batch.ids) ids.append(Text(id));
  py::list out_fields;
  for (sdsl::AnnotationField& field : batch.fields) {
    py::tuple item_shape(field.item_shape.size());
    for (size_t d = 0; d < field.item_shape.size(); ++d) item_shape[d] = py::int_(field.item_shape[d]);
    out_fields.append(py::make_tuple(field.dtype, item_shape, ArrayOwning(std::move(field.bytes)),
                                     ArrayOwning(std::move(field.counts))));
  }
  return py::make_tuple(ArrayOwning(std::move(batch.status)), ids, out_fields);
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "Native core of sds-loader: ArrayRecord shards decoded into batch buffers.";
  py::register_exception_translator(&TranslateReaderError);

  py::class_<sdsl::ShardSet>(m, "ShardSet")
      .def(py::init(&MakeShardSet), py::arg("paths"), py::arg("verify_checksums"),
           py::arg("max_open_files"), py::arg("source") = py::none(),
           "One entry of `paths` per shard. Without `source` they are local files; with "
           "it, `source` (size(file), name(file), fetch(requests)) supplies every byte.")
      .def("read", &Read, py::arg("files"), py::arg("shard_records"), py::arg("ordinals"),
           py::arg("fields"), py::arg("targets"), py::arg("threads"),
           py::arg("starts") = py::none(), py::arg("pad") = false)
      .def("probe", &Probe, py::arg("file"), py::arg("shard_record"), py::arg("ordinal"))
      .def_property_readonly("num_files", &sdsl::ShardSet::num_files)
      .def_property_readonly("worker_threads", &sdsl::ShardSet::worker_threads,
                             "Decode threads this reader has started in this process.")
      .def_property_readonly("kept_scratch_bytes", &sdsl::ShardSet::kept_scratch_bytes,
                             "Bytes of buffers idle scratch keeps between reads.")
      .def_property("work_per_helper", &sdsl::ShardSet::work_per_helper,
                    &sdsl::ShardSet::set_work_per_helper,
                    "Work (uncompressed bytes; compressed count 4x) a warm batch needs for each "
                    "helper thread it wakes; 0 wakes every helper `threads` allows.");


  m.def(
      "record_bytes",
      [](sdsl::ShardSet& set, bool verify, const Int64Array& files, const Int64Array& records) {
        if (files.ndim() != 1 || records.ndim() != 1 || files.size() != records.size()) {
          throw py::value_error("files and records must be 1-D arrays of one length");
        }
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
  m.def("annotation_rows", &AnnotationRows, py::arg("rows"), py::arg("metadata"),
        py::arg("verify"), py::arg("row_files"), py::arg("row_records"), py::arg("meta_files"),
        py::arg("meta_records"), py::arg("ordinals"), py::arg("fields"),
        "A batch of annotation rows, identity-checked against the records' metadata: "
        "(status uint8 per row, ids, [(dtype, item_shape, bytes, counts) per field]).");
  m.def(
      "hint_records",
      [](sdsl::ShardSet& set, const Int64Array& files, const Int64Array& records) {
        if (files.ndim() != 1 || records.ndim() != 1 || files.size() != records.size()) {
          throw py::value_error("files and records must be 1-D arrays of one length");
        }
        py::gil_scoped_release release;
        return sdsl::HintRecords(set, files.data(), records.data(),
                                 static_cast<size_t>(files.size()));
      },
      py::arg("shard_set"), py::arg("files"), py::arg("records"),
      "Tells the shards' source that these records will be read soon; returns the bytes hinted.");
  m.def(
      "shard_summary",
      [](const std::string& path) {
        sdsl::ShardSummary summary;
        {
          py::gil_scoped_release release;
          summary = sdsl::SummarizeShard(path);
        }
        py::dict out;
        out["file_size"] = summary.file_size;
        out["num_records"] = summary.num_records;
        out["num_chunks"] = summary.num_chunks;
        out["chunk_types"] = summary.chunk_types;
        out["compression"] = summary.compression;
        out["max_records_per_chunk"] = summary.max_records_per_chunk;
        out["encoded_bytes"] = summary.encoded_bytes;
        out["decoded_bytes"] = summary.decoded_bytes;
        out["writer_options"] = summary.writer_options;
        return out;
      },
      py::arg("path"), "How one shard is stored: records, chunks, compression, sizes.");
  m.def(
      "verify_shard",
      [](const std::string& path) {
        std::vector<sdsl::ShardProblem> problems;
        {
          py::gil_scoped_release release;
          problems = sdsl::VerifyShard(path);
        }
        py::list out;
        for (const auto& problem : problems) {
          py::dict item;
          item["chunk"] = problem.chunk;
          item["record"] = problem.record;
          item["offset"] = problem.offset;
          item["message"] = Text(problem.message);
          out.append(item);
        }
        return out;
      },
      py::arg("path"), "Every chunk hash and record header of one shard; [] when clean.");
  m.def(
      "chunk_payloads",
      [](const std::string& path, const std::vector<uint64_t>& records) {
        std::vector<sdsl::ChunkPayload> payloads;
        {
          py::gil_scoped_release release;
          payloads = sdsl::ChunkPayloads(path, records);
        }
        py::list out;
        for (const auto& payload : payloads) {
          out.append(py::make_tuple(payload.compression, py::bytes(payload.bytes),
                                    payload.decoded_size));
        }
        return out;
      },
      py::arg("path"), py::arg("records"));
  m.def(
      "bound_decompress",
      [](const py::list& items, int repeats, size_t batch_rows) {
        std::vector<sdsl::ChunkPayload> payloads;
        for (const py::handle& item : items) {
          const py::tuple spec = item.cast<py::tuple>();
          payloads.push_back(sdsl::ChunkPayload{spec[0].cast<std::string>(),
                                                spec[1].cast<std::string>(),
                                                spec[2].cast<uint64_t>()});
        }
        py::gil_scoped_release release;
        return sdsl::BoundDecompress(payloads, repeats, batch_rows);
      },
      py::arg("payloads"), py::arg("repeats") = 1, py::arg("batch_rows") = 1);
  m.def(
      "chunk_extents",
      [](const std::string& path, const std::vector<uint64_t>& records) {
        std::vector<sdsl::ChunkExtent> extents;
        {
          py::gil_scoped_release release;
          extents = sdsl::ChunkExtents(path, records);
        }
        py::list out;
        for (const auto& extent : extents) {
          out.append(py::make_tuple(extent.path, extent.compression, extent.decoded_size, extent.begin,
                                    extent.limit));
        }
        return out;
      },
      py::arg("path"), py::arg("records"));
  m.def(
      "bound_read",
      [](const py::list& items, int repeats, bool hash, size_t batch_rows) {
        std::vector<sdsl::ChunkExtent> chunks;
        for (const py::handle& item : items) {
          const py::tuple spec = item.cast<py::tuple>();
          chunks.push_back(sdsl::ChunkExtent{spec[0].cast<std::string>(), spec[1].cast<std::string>(),
                                             spec[2].cast<uint64_t>(), spec[3].cast<uint64_t>(),
                                             spec[4].cast<uint64_t>()});
        }
        py::gil_scoped_release release;
        return sdsl::BoundRead(chunks, repeats, hash, batch_rows);
      },
      py::arg("chunks"), py::arg("repeats") = 1, py::arg("hash") = true, py::arg("batch_rows") = 256);
  m.def(
      "bound_memcpy",
      [](const std::vector<std::string>& buffers, int repeats) {
        py::gil_scoped_release release;
        return sdsl::BoundMemcpy(buffers, repeats);
      },
      py::arg("buffers"), py::arg("repeats") = 1);
}
