#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <string>
#include <vector>

#include "container/chunk_hasher.h"
#include "python/bindings.h"
#include "python/errors.h"
#include "tools/shard_tools.h"

namespace py = pybind11;

namespace sdsl_python {

void BindShardTools(py::module_& m) {
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
          out.append(
              py::make_tuple(payload.compression, py::bytes(payload.bytes), payload.decoded_size));
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
          payloads.push_back(sdsl::ChunkPayload{
              spec[0].cast<std::string>(), spec[1].cast<std::string>(), spec[2].cast<uint64_t>()});
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
          out.append(py::make_tuple(extent.path, extent.compression, extent.decoded_size,
                                    extent.begin, extent.limit));
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
          chunks.push_back(sdsl::ChunkExtent{spec[0].cast<std::string>(),
                                             spec[1].cast<std::string>(), spec[2].cast<uint64_t>(),
                                             spec[3].cast<uint64_t>(), spec[4].cast<uint64_t>()});
        }
        py::gil_scoped_release release;
        return sdsl::BoundRead(chunks, repeats, hash, batch_rows);
      },
      py::arg("chunks"), py::arg("repeats") = 1, py::arg("hash") = true,
      py::arg("batch_rows") = 256);
  m.def(
      "chunk_hash",
      [](const py::bytes& data, const std::vector<size_t>& cuts, const std::vector<bool>& copied,
         bool portable) {
        const std::string bytes = data;
        std::string copy(bytes.size(), '\0');
        uint64_t hash;
        {
          py::gil_scoped_release release;
          sdsl::ChunkHasher hasher(portable ? sdsl::ChunkHasher::Target::kPortable
                                            : sdsl::ChunkHasher::Target::kBest);
          const auto* in = reinterpret_cast<const uint8_t*>(bytes.data());
          auto* out = reinterpret_cast<uint8_t*>(&copy[0]);
          size_t at = 0;
          for (size_t k = 0; k <= cuts.size(); ++k) {
            const size_t end = k < cuts.size() ? std::min(cuts[k], bytes.size()) : bytes.size();
            if (end < at) continue;
            if (k < copied.size() && copied[k]) {
              hasher.CopyAndAppend(out + at, in + at, end - at);
            } else {
              hasher.Append(in + at, end - at);
            }
            at = end;
          }
          hash = hasher.Finish();
        }
        return py::make_tuple(hash, py::bytes(copy));
      },
      py::arg("data"), py::arg("cuts"), py::arg("copied"), py::arg("portable") = false,
      "Riegeli's hash of `data` appended in pieces cut at `cuts`, piece k copied "
      "as it is hashed where copied[k]; and the copy (zeros where not copied).");
  m.def(
      "bound_memcpy",
      [](const std::vector<std::string>& buffers, int repeats) {
        py::gil_scoped_release release;
        return sdsl::BoundMemcpy(buffers, repeats);
      },
      py::arg("buffers"), py::arg("repeats") = 1);
}

}  // namespace sdsl_python
