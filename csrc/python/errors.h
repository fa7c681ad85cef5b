// How core errors reach Python: each ReaderError kind as the exception
// sds_loader documents for it.
#ifndef SDS_LOADER_PYTHON_ERRORS_H_
#define SDS_LOADER_PYTHON_ERRORS_H_

#include <pybind11/pybind11.h>

#include <exception>
#include <string>

namespace sdsl_python {

// A message as a Python str, bytes that are not UTF-8 escaped.
pybind11::str Text(const std::string& message);

// For pybind11::register_exception_translator.
void TranslateReaderError(std::exception_ptr pointer);

}  // namespace sdsl_python

#endif  // SDS_LOADER_PYTHON_ERRORS_H_
