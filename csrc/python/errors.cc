#include "python/errors.h"

#include "base/reader_error.h"

namespace py = pybind11;
using sdsl::ErrorKind;
using sdsl::ReaderError;

namespace sdsl_python {
namespace {

void RaiseAs(PyObject* type, const char* message) { PyErr_SetObject(type, Text(message).ptr()); }

void RaiseAs(const char* class_name, const char* message) {
  py::object errors = py::module_::import("sds_loader.errors");
  RaiseAs(errors.attr(class_name).ptr(), message);
}

}  // namespace

// Messages quote bytes from the shard (a JSON parser's last token, say), which
// need not be UTF-8: decode them leniently, or the error becomes a
// UnicodeDecodeError instead of the one it reports.
py::str Text(const std::string& message) {
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()),
                                        "backslashreplace");
  if (text == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(text);
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
      case ErrorKind::kStorage:
        RaiseAs("StorageError", error.what());
        return;
      case ErrorKind::kUnsafePath:
        RaiseAs("UnsafePathError", error.what());
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

}  // namespace sdsl_python
