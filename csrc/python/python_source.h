// A ShardSource whose bytes come from a Python object (the RangeSource
// protocol: size, name, fetch), for object storage reached through Python.
#ifndef SDS_LOADER_PYTHON_PYTHON_SOURCE_H_
#define SDS_LOADER_PYTHON_PYTHON_SOURCE_H_

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>

#include "sources/shard_source.h"

namespace sdsl_python {

std::unique_ptr<sdsl::ShardSource> MakePythonSource(pybind11::object source, size_t num_files);

}  // namespace sdsl_python

#endif  // SDS_LOADER_PYTHON_PYTHON_SOURCE_H_
