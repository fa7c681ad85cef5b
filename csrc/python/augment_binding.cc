// Augmentation (csrc/augment/): the counter-based parameter draws, the span
// of a record a window needs, and the chain applied to a batch's rows with
// the GIL released.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "augment/augment_apply.h"
#include "augment/augment_chain.h"
#include "augment/counter_random.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace sdsl_python {
namespace {

using KindArray = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;

uint64_t Unsigned64(const py::int_& value, const char* name) {
  const py::int_ low(0);
  const py::int_ high = py::reinterpret_steal<py::int_>(PyLong_FromUnsignedLongLong(~0ULL));
  if (value < low || value > high) {
    throw py::value_error(std::string(name) + " must be an int in [0, 2**64), not " +
                          std::string(py::repr(value)));
  }
  return value.cast<uint64_t>();
}

void NeedRows(const Int64Array& array, size_t rows, const char* name) {
  if (array.ndim() != 1 || static_cast<size_t>(array.size()) != rows) {
    throw py::value_error(std::string(name) + " must be a 1-D int64 array of one value per row (" +
                          std::to_string(rows) + ")");
  }
}

// kinds (T,) and params (rows, T, 4): their shapes agree.
size_t Steps(const KindArray& kinds, const py::array& params) {
  if (kinds.ndim() != 1)
    throw py::value_error("kinds must be a 1-D int32 array, one kind per transform");
  const size_t steps = static_cast<size_t>(kinds.size());
  if (params.ndim() != 3 || static_cast<size_t>(params.shape(1)) != steps ||
      params.shape(2) != static_cast<py::ssize_t>(sdsl::kAugmentParams)) {
    throw py::value_error("params must be a float64 array of shape (rows, " +
                          std::to_string(steps) + ", 4)");
  }
  return steps;
}

py::array_t<double> Draw(const py::int_& seed, const py::int_& epoch, const Int64Array& ordinals,
                         int64_t position, int64_t count) {
  const uint64_t seed_value = Unsigned64(seed, "seed");
  const uint64_t epoch_value = Unsigned64(epoch, "epoch");
  if (ordinals.ndim() != 1) throw py::value_error("ordinals must be a 1-D int64 array");
  if (position < 0 || position > 0xffffffffLL)
    throw py::value_error("position must be in [0, 2**32)");
  if (count < 0 || count > (1 << 20)) throw py::value_error("count must be in [0, 2**20]");
  const size_t rows = static_cast<size_t>(ordinals.size());
  py::array_t<double> out({static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(count)});
  const int64_t* ordinal = ordinals.data();
  double* values = out.mutable_data();
  {
    py::gil_scoped_release release;
    for (size_t row = 0; row < rows; ++row) {
      sdsl::DrawUniforms(seed_value, epoch_value, static_cast<uint64_t>(ordinal[row]),
                         static_cast<uint32_t>(position), static_cast<size_t>(count),
                         values + row * static_cast<size_t>(count));
    }
  }
  return out;
}

py::tuple Spans(const KindArray& kinds, const DoubleArray& params, const Int64Array& out_start,
                int64_t out_length, const Int64Array& record_length) {
  const size_t steps = Steps(kinds, params);
  const size_t rows = static_cast<size_t>(params.shape(0));
  NeedRows(out_start, rows, "out_start");
  NeedRows(record_length, rows, "record_length");
  Int64Array src_start(static_cast<py::ssize_t>(rows));
  Int64Array src_length(static_cast<py::ssize_t>(rows));
  Int64Array final_length(static_cast<py::ssize_t>(rows));
  {
    py::gil_scoped_release release;
    sdsl::AugmentSpans(sdsl::AugmentSteps{kinds.data(), steps}, params.data(), rows,
                       out_start.data(), out_length, record_length.data(), src_start.mutable_data(),
                       src_length.mutable_data(), final_length.mutable_data());
  }
  return py::make_tuple(src_start, src_length, final_length);
}

// (rows, channels, samples) of a complex64/complex128 array or float32 IQ
// pairs (..., 2), and whether it is complex128.
struct Samples {
  size_t rows;
  size_t channels;
  int64_t samples;
  bool wide;
};

Samples SamplesOf(const py::array& array, const char* name) {
  const bool c64 = array.dtype().is(py::dtype::of<std::complex<float>>());
  const bool c128 = array.dtype().is(py::dtype::of<std::complex<double>>());
  const bool pairs = array.dtype().is(py::dtype::of<float>());
  const py::ssize_t dims = pairs ? 4 : 3;
  if (!(c64 || c128 || pairs) || array.ndim() != dims || (pairs && array.shape(3) != 2)) {
    throw py::value_error(
        std::string(name) +
        " must be (rows, channels, samples) complex64 or complex128, or (rows, channels, "
        "samples, 2) float32 IQ pairs");
  }
  if (!(array.flags() & py::array::c_style))
    throw py::value_error(std::string(name) + " must be C-contiguous");
  return Samples{static_cast<size_t>(array.shape(0)), static_cast<size_t>(array.shape(1)),
                 static_cast<int64_t>(array.shape(2)), c128};
}

// What one batch's run shares between its fields, checked.
struct Shared {
  Shared(KindArray kinds, const py::int_& seed, const py::int_& epoch, Int64Array ordinals,
         Int64Array src_start, Int64Array record_length, Int64Array out_start)
      : kinds(std::move(kinds)),
        ordinals(std::move(ordinals)),
        src_start(std::move(src_start)),
        record_length(std::move(record_length)),
        out_start(std::move(out_start)),
        seed(Unsigned64(seed, "seed")),
        epoch(Unsigned64(epoch, "epoch")) {}

  KindArray kinds;
  Int64Array ordinals;
  Int64Array src_start;
  Int64Array record_length;
  Int64Array out_start;
  uint64_t seed;
  uint64_t epoch;
};

// One field's batch: its source, out and params checked against the rows.
sdsl::AugmentBatch FieldBatch(const Shared& shared, py::array& params, const py::array& source,
                              py::array& out, const py::int_& first_channel) {
  const size_t steps = Steps(shared.kinds, params);
  if (!params.dtype().is(py::dtype::of<double>()) || !(params.flags() & py::array::c_style) ||
      !params.writeable()) {
    throw py::value_error(
        "params must be a writable, C-contiguous float64 array (the noise's SNR after and "
        "sigma2 are written back into it)");
  }
  const Samples in = SamplesOf(source, "source");
  const Samples to = SamplesOf(out, "out");
  if (!out.writeable()) throw py::value_error("out must be writable");
  if (!source.dtype().is(out.dtype())) throw py::value_error("source and out must have one dtype");
  const size_t rows = static_cast<size_t>(params.shape(0));
  if (in.rows != rows || to.rows != rows || in.channels != to.channels) {
    throw py::value_error(
        "params, source and out must have one row count, source and out one channel count");
  }
  NeedRows(shared.ordinals, rows, "ordinals");
  NeedRows(shared.src_start, rows, "src_start");
  NeedRows(shared.record_length, rows, "record_length");
  NeedRows(shared.out_start, rows, "out_start");
  // Whether source and out may share memory (one buffer, in place) the
  // core checks, with the rows' spans.
  sdsl::AugmentBatch batch;
  batch.chain = sdsl::AugmentSteps{shared.kinds.data(), steps};
  batch.params = static_cast<double*>(params.mutable_data());
  batch.rows = rows;
  batch.channels = in.channels;
  batch.seed = shared.seed;
  batch.epoch = shared.epoch;
  batch.first_channel = Unsigned64(first_channel, "first_channel");
  batch.ordinals = shared.ordinals.data();
  batch.src_start = shared.src_start.data();
  batch.record_length = shared.record_length.data();
  batch.out_start = shared.out_start.data();
  batch.source = source.data();
  batch.source_samples = in.samples;
  batch.out = out.mutable_data();
  batch.out_samples = to.samples;
  batch.wide = in.wide;
  return batch;
}

void Apply(const KindArray& kinds, py::array params, const py::int_& seed, const py::int_& epoch,
           const Int64Array& ordinals, const py::array& source, const Int64Array& src_start,
           const Int64Array& record_length, py::array out, const Int64Array& out_start,
           int64_t threads, const py::int_& first_channel) {
  if (threads < 0 || threads > 1024) throw py::value_error("threads must be in [0, 1024]");
  const Shared shared(kinds, seed, epoch, ordinals, src_start, record_length, out_start);
  const sdsl::AugmentBatch batch = FieldBatch(shared, params, source, out, first_channel);
  py::gil_scoped_release release;
  sdsl::AugmentApply(batch, static_cast<size_t>(threads));
}

// A batch's run given to a read (read_ordinals(finish=)): the core's
// AugmentRows, with the arrays it points into kept alive beside it.
class AugmentRowsHandle final : public sdsl::AugmentRows {
 public:
  AugmentRowsHandle(std::vector<sdsl::AugmentBatch> fields, const int64_t* held, Shared shared,
                    py::list arrays)
      : sdsl::AugmentRows(std::move(fields), held),
        shared_(std::move(shared)),
        arrays_(std::move(arrays)) {}

 private:
  Shared shared_;
  py::list arrays_;
};

std::unique_ptr<AugmentRowsHandle> MakeRows(const KindArray& kinds, const py::int_& seed,
                                            const py::int_& epoch, const Int64Array& ordinals,
                                            const Int64Array& src_start,
                                            const Int64Array& record_length,
                                            const Int64Array& out_start, const py::list& fields,
                                            const py::object& held) {
  Shared shared(kinds, seed, epoch, ordinals, src_start, record_length, out_start);
  std::vector<sdsl::AugmentBatch> batches;
  py::list arrays;
  for (const py::handle item : fields) {
    const py::tuple field = py::reinterpret_borrow<py::tuple>(item);
    if (field.size() != 4) {
      throw py::value_error("each field is (source, out, params, first_channel)");
    }
    py::array source = field[0].cast<py::array>();
    py::array out = field[1].cast<py::array>();
    py::array params = field[2].cast<py::array>();
    batches.push_back(FieldBatch(shared, params, source, out, field[3].cast<py::int_>()));
    arrays.append(source);
    arrays.append(out);
    arrays.append(params);
  }
  const int64_t* held_rows = nullptr;
  if (!held.is_none()) {
    // The read's own buffer, not a converted copy: the core reads what the
    // read writes into it.
    const py::array lengths = held.cast<py::array>();
    if (!lengths.dtype().is(py::dtype::of<int64_t>()) || lengths.ndim() != 1 ||
        static_cast<size_t>(lengths.size()) != static_cast<size_t>(shared.ordinals.size()) ||
        !(lengths.flags() & py::array::c_style)) {
      throw py::value_error("held must be a C-contiguous int64 array of one value per row");
    }
    held_rows = static_cast<const int64_t*>(lengths.data());
    arrays.append(lengths);
  }
  return std::make_unique<AugmentRowsHandle>(std::move(batches), held_rows, std::move(shared),
                                             arrays);
}

}  // namespace

void BindAugment(py::module_& m) {
  py::dict kinds;
  for (int32_t kind = 1; kind <= sdsl::kAugmentKinds; ++kind)
    kinds[sdsl::AugmentKindName(kind)] = kind;
  m.attr("AUGMENT_KINDS") = kinds;
  m.def("augment_draw", &Draw, py::arg("seed"), py::arg("epoch"), py::arg("ordinals"),
        py::arg("position"), py::arg("count"),
        "Uniforms in [0, 1), (rows, count): the parameter draws of transform `position` of each "
        "record, a pure "
        "function of (seed, epoch, ordinal, position, draw).");
  m.def("augment_spans", &Spans, py::arg("kinds"), py::arg("params"), py::arg("out_start"),
        py::arg("out_length"), py::arg("record_length"),
        "(src_start, src_length, final_length): the span of each row's original record its window "
        "of the final "
        "record needs, and the final record's length.");
  m.def("augment_apply", &Apply, py::arg("kinds"), py::arg("params"), py::arg("seed"),
        py::arg("epoch"), py::arg("ordinals"), py::arg("source"), py::arg("src_start"),
        py::arg("record_length"), py::arg("out"), py::arg("out_start"), py::arg("threads"),
        py::arg("first_channel") = 0,
        "Runs the chain on each row's source span into its window of `out`, rows over `threads` "
        "threads; writes "
        "each noise step's SNR after (p2) and sigma2 (p3) back into `params`.");
  py::class_<sdsl::RowFinisher>(m, "RowFinisher",
                                "Work a read does on each row right after decoding it.");
  py::class_<AugmentRowsHandle, sdsl::RowFinisher>(
      m, "AugmentRows",
      "A batch's chain over its fields, for a read to run on each row as it decodes it "
      "(read_ordinals(finish=)), then finish_rest() on the rows the read left.")
      .def(py::init(&MakeRows), py::arg("kinds"), py::arg("seed"), py::arg("epoch"),
           py::arg("ordinals"), py::arg("src_start"), py::arg("record_length"),
           py::arg("out_start"), py::arg("fields"), py::arg("held") = py::none(),
           "fields: (source, out, params, first_channel) each; the first's params are the "
           "draws, the others' copies of them. source may be out itself where every row's "
           "source is its window (src_start == out_start). held: a padded window's int64 "
           "positions each row's record holds, as the read writes them before the row is run: "
           "the row's record then ends there (a chain that keeps samples in place only).")
      .def(
          "finish_rest",
          [](AugmentRowsHandle& rows, int64_t threads) {
            if (threads < 0 || threads > 1024)
              throw py::value_error("threads must be in [0, 1024]");
            py::gil_scoped_release release;
            rows.FinishRest(static_cast<size_t>(threads));
          },
          py::arg("threads"), "Runs the rows no read has run.")
      .def_property_readonly("finished_rows", &AugmentRowsHandle::finished_rows,
                             "Rows run so far.");
}

}  // namespace sdsl_python
