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
  m.def("locate_ordinals", &Locate, py::arg("starts"), py::arg("skips"), py::arg("files"),
        py::arg("ordinals"),
        "(file, record within it) for each ordinal, from a shard table's columns; IndexError "
        "for an ordinal outside its runs.");
}

}  // namespace sdsl_python
