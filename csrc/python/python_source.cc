#include "python/python_source.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "base/reader_error.h"
#include "python/errors.h"

namespace py = pybind11;

namespace sdsl_python {
namespace {

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

  using sdsl::ShardSource::Fetch;
  void Fetch(sdsl::RangeRequest* requests, size_t count, const sdsl::FetchPlan& /*plan*/) override {
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

  // Hands the ranges to the source's will_need(ranges), when it has one, on
  // the calling thread: the reader calls this from its readahead thread,
  // never a reader's. Whatever it raises is dropped: a hint must not fail.
  void WillNeed(const sdsl::RangeRequest* ranges, size_t count) override {
    py::gil_scoped_acquire gil;
    try {
      if (!py::hasattr(source_, "will_need")) return;
      py::list wanted(count);
      for (size_t k = 0; k < count; ++k) {
        wanted[k] = py::make_tuple(ranges[k].file, ranges[k].offset, ranges[k].size);
      }
      source_.attr("will_need")(wanted);
    } catch (py::error_already_set&) {
      // The read that needs these bytes fetches them again, and reports.
    }
  }

  // Up to this many bytes of requests per fetch() call and worker, so that
  // a remote source has many requests in flight at once.
  sdsl::FetchPlan PlanBatch(const sdsl::RangeRequest* /*ranges*/, size_t /*count*/) override {
    sdsl::FetchPlan plan;
    plan.gather_bytes = uint64_t{16} << 20;
    return plan;
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

}  // namespace

std::unique_ptr<sdsl::ShardSource> MakePythonSource(py::object source, size_t num_files) {
  return std::make_unique<PythonSource>(std::move(source), num_files);
}

}  // namespace sdsl_python
