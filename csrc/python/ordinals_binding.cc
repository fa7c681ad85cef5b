// Ordinals checked and located natively (read/ordinal_runs.h), for every
// batch's Python side: `sds_loader.indices` and `ShardTable.locate`.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "python/bindings.h"
#include "read/ordinal_runs.h"

namespace py = pybind11;

namespace sdsl_python {
namespace {

Int64Array CheckedOrdinals(const Int64Array& indices, int64_t length) {
  if (indices.ndim() != 1) throw py::value_error("indices must be a 1-D int64 array");
  if (length < 0) throw py::value_error("a dataset's length cannot be negative");
  Int64Array ordinals(indices.size());
  sdsl::CheckOrdinals(indices.data(), static_cast<size_t>(indices.size()), length,
                      ordinals.mutable_data());
  return ordinals;
}

// A list or tuple whose items are all exactly int (not bool, not numpy's),
// each within int64, checked as CheckedOrdinals checks an array; None for
// any other sequence, which Python's checks then take, naming the item.
// What a DataLoader's sampler hands a dataset: converting it to an array in
// Python first cost more than checking it.
py::object CheckedIntSequence(const py::handle& indices, int64_t length) {
  if (!PyList_CheckExact(indices.ptr()) && !PyTuple_CheckExact(indices.ptr())) return py::none();
  if (length < 0) throw py::value_error("a dataset's length cannot be negative");
  const py::sequence items = py::reinterpret_borrow<py::sequence>(indices);
  const size_t count = static_cast<size_t>(PySequence_Fast_GET_SIZE(items.ptr()));
  PyObject** item = PySequence_Fast_ITEMS(items.ptr());
  Int64Array ordinals(static_cast<py::ssize_t>(count));
  int64_t* out = ordinals.mutable_data();
  for (size_t k = 0; k < count; ++k) {
    if (!PyLong_CheckExact(item[k])) return py::none();
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(item[k], &overflow);
    if (overflow != 0) return py::none();
    out[k] = static_cast<int64_t>(value);
  }
  sdsl::CheckOrdinals(out, count, length, out);
  return std::move(ordinals);
}

py::tuple Locate(const Int64Array& starts, const Int64Array& skips, const Int64Array& files,
                 const Int64Array& ordinals) {
  if (starts.ndim() != 1 || skips.ndim() != 1 || files.ndim() != 1 || ordinals.ndim() != 1 ||
      skips.size() != starts.size() || files.size() != starts.size()) {
    throw py::value_error(
        "starts, skips and files must be 1-D int64 arrays of one length, ordinals 1-D");
  }
  const sdsl::OrdinalRuns runs{starts.data(), skips.data(), files.data(),
                               static_cast<size_t>(starts.size())};
  Int64Array located_files(ordinals.size());
  Int64Array located_records(ordinals.size());
  sdsl::LocateOrdinals(runs, ordinals.data(), static_cast<size_t>(ordinals.size()),
                       located_files.mutable_data(), located_records.mutable_data());
  return py::make_tuple(located_files, located_records);
}

}  // namespace

void BindOrdinals(py::module_& m) {
  m.def("checked_ordinals", &CheckedOrdinals, py::arg("indices"), py::arg("length"),
        "A copy of `indices` with negatives counted from the end; IndexError for any outside "
        "[-length, length).");
  m.def("checked_int_sequence", &CheckedIntSequence, py::arg("indices"), py::arg("length"),
        "A list or tuple of plain ints as checked_ordinals checks an array, or None when it "
        "is anything else.");
  m.def("locate_ordinals", &Locate, py::arg("starts"), py::arg("skips"), py::arg("files"),
        py::arg("ordinals"),
        "(file, record within it) for each ordinal, from a shard table's columns; IndexError "
        "for an ordinal outside its runs.");
}

}  // namespace sdsl_python
