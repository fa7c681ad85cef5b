#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "python/bindings.h"
#include "python/errors.h"
#include "read/annotation_rows.h"
#include "read/shard_set.h"

namespace py = pybind11;

namespace sdsl_python {
namespace {

// A vector's bytes as a 1-D numpy array that owns them: no copy.
template <typename T>
py::array_t<T> ArrayOwning(std::vector<T>&& values) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule free_when_done(owned,
                             [](void* pointer) { delete static_cast<std::vector<T>*>(pointer); });
  return py::array_t<T>({static_cast<py::ssize_t>(owned->size())}, owned->data(), free_when_done);
}

py::tuple AnnotationRows(sdsl::ShardSet& rows, sdsl::ShardSet& metadata,
                         const py::object& verify_checksums, const Int64Array& row_files,
                         const Int64Array& row_records, const Int64Array& meta_files,
                         const Int64Array& meta_records, const Int64Array& ordinals,
                         const std::vector<std::string>& fields) {
  const sdsl::Verify verify = VerifyArg(verify_checksums);
  const py::ssize_t count = ordinals.size();
  for (const Int64Array* array :
       {&row_files, &row_records, &meta_files, &meta_records, &ordinals}) {
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
    for (size_t d = 0; d < field.item_shape.size(); ++d) {
      item_shape[d] = py::int_(field.item_shape[d]);
    }
    out_fields.append(py::make_tuple(field.dtype, item_shape, ArrayOwning(std::move(field.bytes)),
                                     ArrayOwning(std::move(field.counts))));
  }
  return py::make_tuple(ArrayOwning(std::move(batch.status)), ids, out_fields);
}

}  // namespace

void BindAnnotationRows(py::module_& m) {
  m.def("annotation_rows", &AnnotationRows, py::arg("rows"), py::arg("metadata"), py::arg("verify"),
        py::arg("row_files"), py::arg("row_records"), py::arg("meta_files"),
        py::arg("meta_records"), py::arg("ordinals"), py::arg("fields"),
        "A batch of annotation rows, identity-checked against the records' metadata: "
        "(status uint8 per row, ids, [(dtype, item_shape, bytes, counts) per field]).");
}

}  // namespace sdsl_python
