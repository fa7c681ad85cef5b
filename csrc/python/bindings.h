// The extension's parts, one per exposed class or group of functions; the
// module (module.cc) registers each. Each converts arguments, releases the
// GIL around every read, and lets core errors reach Python through errors.h.
#ifndef SDS_LOADER_PYTHON_BINDINGS_H_
#define SDS_LOADER_PYTHON_BINDINGS_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>

#include "read/verified_chunks.h"
#include "sources/shard_source.h"

namespace sdsl_python {

using Int64Array =
    pybind11::array_t<int64_t, pybind11::array::c_style | pybind11::array::forcecast>;

// `verify_checksums` as Python passes it: True, False or "once"; anything
// else is refused with a ValueError naming the three.
sdsl::Verify VerifyArg(const pybind11::handle& value);

// ShardSet (a dataset's shards: read, probe) and the functions that take one.
void BindShardSet(pybind11::module_& m);
// Shard inspection (summary, verify) and the bench's bounds.
void BindShardTools(pybind11::module_& m);
// Annotation rows, read in batches beside their records.
void BindAnnotationRows(pybind11::module_& m);
// Ordinals checked and located in a shard table, for every batch's Python side.
void BindOrdinals(pybind11::module_& m);
// Augmentation: parameter draws, spans and the chain applied to rows.
void BindAugment(pybind11::module_& m);
// ObjectStoreSource: shards in object storage, fetched natively.
void BindObjectStoreSource(pybind11::module_& m);
// The ShardSource behind `source` when it is a native one (an ObjectStoreSource), else null.
std::unique_ptr<sdsl::ShardSource> NativeSourceOf(const pybind11::object& source);

}  // namespace sdsl_python

#endif  // SDS_LOADER_PYTHON_BINDINGS_H_
