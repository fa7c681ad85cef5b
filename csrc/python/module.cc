// The extension module: the one place that knows Python, in one file per
// exposed class or group of functions (bindings.h). The core (every other
// folder of csrc/) has no Python in it.
#include <pybind11/pybind11.h>

#include "python/bindings.h"
#include "python/errors.h"

PYBIND11_MODULE(_native, m) {
  m.doc() = "Native core of sds-loader: ArrayRecord shards decoded into batch buffers.";
  pybind11::register_exception_translator(&sdsl_python::TranslateReaderError);
  sdsl_python::BindObjectStoreSource(m);
  sdsl_python::BindShardSet(m);
  sdsl_python::BindShardTools(m);
  sdsl_python::BindAnnotationRows(m);
  sdsl_python::BindOrdinals(m);
  sdsl_python::BindAugment(m);
}
