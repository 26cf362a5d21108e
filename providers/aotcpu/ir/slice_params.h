// ONNX Slice's starts/ends/axes/steps resolved against an input's dims, by the operator's clamping rules: what constant
// folding (fold.cc), the lowering (lower/tensor_view.cc) and the shape-generic kernel (generic_ops.cc) all need. Overflow-safe for any int64 parameters.
#ifndef EPCTX_PROVIDERS_AOTCPU_IR_SLICE_PARAMS_H_
#define EPCTX_PROVIDERS_AOTCPU_IR_SLICE_PARAMS_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace epctx {
namespace aotcpu {

struct SliceAxes {
  std::vector<int64_t> in_dims;
  std::vector<int64_t> dims;   // the output's
  std::vector<int64_t> begin;  // per input axis: the first index taken (0 for an untouched axis)
  std::vector<int64_t> step;   // per input axis (1 for an untouched axis)
  // Element strides into the row-major input and the offset of the first element: strides are 0 on axes of one
  // element or fewer, so a huge step never overflows.
  void Strided(std::vector<int64_t>* strides, int64_t* base) const {
    std::vector<int64_t> rs(dims.size(), 1);
    for (size_t i = dims.size(); i-- > 1;) rs[i - 1] = rs[i] * in_dims[i];
    strides->assign(dims.size(), 0);
    *base = 0;
    for (size_t i = 0; i < dims.size(); ++i) {
      (*strides)[i] = dims[i] > 1 ? rs[i] * step[i] : 0;
      *base += dims[i] > 0 ? rs[i] * begin[i] : 0;
    }
  }
};

// `axes_given`: the node has an axes input/attribute (even an empty one); without it the axes are 0..n-1. False with
// `why` for lengths that differ, an axis out of range or repeated, a step of 0.
inline bool ResolveSlice(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& starts,
                         const std::vector<int64_t>& ends, std::vector<int64_t> axes, bool axes_given,
                         std::vector<int64_t> steps, SliceAxes* out, std::string* why) {
  const int64_t rank = static_cast<int64_t>(in_dims.size());
  if (starts.size() != ends.size()) return *why = "starts and ends have different lengths", false;
  if (axes.empty() && !axes_given)
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (axes.size() != starts.size()) return *why = "axes and starts have different lengths", false;
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (steps.size() != starts.size()) return *why = "steps and starts have different lengths", false;
  out->in_dims = in_dims;
  out->dims = in_dims;
  out->begin.assign(in_dims.size(), 0);
  out->step.assign(in_dims.size(), 1);
  std::vector<bool> seen(in_dims.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < -rank || axes[i] >= rank) return *why = "axis " + std::to_string(axes[i]) + " out of range", false;
    const size_t ax = static_cast<size_t>(axes[i] < 0 ? axes[i] + rank : axes[i]);
    if (seen[ax]) return *why = "axis " + std::to_string(axes[i]) + " repeated", false;
    seen[ax] = true;
    const int64_t dim = in_dims[ax], s = steps[i];
    if (s == 0) return *why = "step 0", false;
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    int64_t count;
    if (dim == 0) {  // (the clamps below would have an empty range)
      count = 0;
      b = 0;
    } else if (s > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > b ? (e - b - 1) / s + 1 : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      const int64_t ms = s == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -s;
      count = b > e ? (b - e - 1) / ms + 1 : 0;
    }
    out->dims[ax] = count;
    out->begin[ax] = b;
    out->step[ax] = s;
  }
  return true;
}

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_IR_SLICE_PARAMS_H_
