// A batch's window: one axis, one length, a start per row. A field that
// carries the axis keeps only the window's positions of it; in the record's
// bytes that is one run per position of the axes before it, so reading a
// window means skipping to each run, reading it, and skipping the rest.
#ifndef SDS_LOADER_WINDOW_PLAN_H_
#define SDS_LOADER_WINDOW_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "container/value_stream.h"

namespace sdsl {

// The window of a batch, shared by every field that carries its axis.
struct WindowSpec {
  const int64_t* starts = nullptr;  // per row; null when the batch has no window
  // Rows whose record ends inside the window are zero-filled past its end;
  // without `pad` such a row is an error.
  bool pad = false;
  bool active() const { return starts != nullptr; }
};

// Where one field's window lies in one record's tensor bytes.
struct WindowRuns {
  uint64_t runs = 0;         // one per position of the axes before the window axis
  uint64_t stride = 0;       // tensor bytes from one run's start to the next
  uint64_t skip_before = 0;  // bytes of each stride before the window
  uint64_t take = 0;         // bytes of each stride inside the window
  uint64_t pad = 0;          // zero bytes after each run, up to the window's length
  uint64_t valid = 0;        // positions of the window the record holds

  // Bytes from the tensor's start to the end of the last run read.
  uint64_t end() const { return runs == 0 ? 0 : (runs - 1) * stride + skip_before + take; }
};

// Whether a record's tensor of `shape` fits a batch slot of `slot_shape` that
// keeps `window_axis` (-1: none) at any length.
bool ShapeFitsWindow(const std::vector<uint64_t>& slot_shape, int window_axis,
                     const std::vector<uint64_t>& shape);

// The runs of the window starting at `start` in a tensor of `shape` (which
// fits the slot) with `item_size`-byte elements, for a slot that holds
// `slot_shape[window_axis]` positions. Throws kIndex, naming `field` and the
// record's length, for a start outside the record or, without `pad`, a
// window that runs past its end.
WindowRuns PlanWindow(const std::vector<uint64_t>& slot_shape, int window_axis,
                      const std::vector<uint64_t>& shape, uint64_t item_size, int64_t start,
                      bool pad, const std::string& field);

// Reads the window's runs from `stream`, which stands at the tensor's start,
// into `row` (zero-filled past each run's end). Consumes the tensor up to
// `runs.end()`; the caller skips what remains of it, if anything.
void ReadWindow(ValueStream& stream, const WindowRuns& runs, uint8_t* row);

}  // namespace sdsl

#endif  // SDS_LOADER_WINDOW_PLAN_H_
