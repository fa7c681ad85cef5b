#include "read/window_plan.h"

#include <cstring>

#include "base/reader_error.h"

namespace sdsl {

bool ShapeFitsWindow(const std::vector<uint64_t>& slot_shape, int window_axis,
                     const std::vector<uint64_t>& shape) {
  if (shape.size() != slot_shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<int>(d) != window_axis && shape[d] != slot_shape[d]) return false;
  }
  return true;
}

WindowRuns PlanWindow(const std::vector<uint64_t>& slot_shape, int window_axis,
                      const std::vector<uint64_t>& shape, uint64_t item_size, int64_t start,
                      bool pad, const std::string& field) {
  const size_t axis = static_cast<size_t>(window_axis);
  const uint64_t length = shape[axis];
  const uint64_t window = slot_shape[axis];
  const std::string where = "field \"" + field + "\", which holds " + std::to_string(length) +
                            " positions along the window's axis";
  if (start < 0 || static_cast<uint64_t>(start) >= length) {
    Fail(ErrorKind::kIndex, "window start " + std::to_string(start) + " is outside " + where +
                                "; pass a start from 0 to " +
                                std::to_string(length == 0 ? 0 : length - 1));
  }
  const uint64_t first = static_cast<uint64_t>(start);
  const uint64_t valid = length - first < window ? length - first : window;
  if (valid < window && !pad) {
    Fail(ErrorKind::kIndex, "window of " + std::to_string(window) + " positions at start " +
                                std::to_string(start) + " runs past the end of " + where +
                                "; pass a start of at most " +
                                std::to_string(length < window ? 0 : length - window) +
                                ", or Window(..., pad=True) to zero-fill");
  }
  // The tensor's byte size was checked against its shape when its header was
  // parsed, so these products cannot overflow.
  uint64_t inner = item_size;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  uint64_t runs = 1;
  for (size_t d = 0; d < axis; ++d) runs *= shape[d];
  WindowRuns plan;
  plan.runs = runs;
  plan.stride = length * inner;
  plan.skip_before = first * inner;
  plan.take = valid * inner;
  plan.pad = (window - valid) * inner;
  plan.valid = valid;
  return plan;
}

void ReadWindow(ValueStream& stream, const WindowRuns& runs, uint8_t* row) {
  const uint64_t row_stride = runs.take + runs.pad;
  const uint64_t skip_after = runs.stride - runs.skip_before - runs.take;
  for (uint64_t r = 0; r < runs.runs; ++r) {
    uint8_t* dst = row + r * row_stride;
    if (r > 0) stream.Skip(skip_after + runs.skip_before);
    else stream.Skip(runs.skip_before);
    stream.Read(dst, runs.take);
    if (runs.pad != 0) std::memset(dst + runs.take, 0, static_cast<size_t>(runs.pad));
  }
}

}  // namespace sdsl
