// NumPy-style ("multidirectional") broadcasting shared by the CPU kernels.
//
// Shapes are right-aligned; along each dim the sizes must be equal or one of them must be 1 (a missing leading
// dim counts as 1). A dim of size 0 broadcasts with 1 and with 0 only.
//
// Three levels of help, pick the smallest that fits:
//   BroadcastShapes(...)      only the output shape (or an INVALID_ARGUMENT naming both offending shapes);
//   BroadcastStrides(in, out) per-output-dim element strides of `in` (0 where it is broadcast), for kernels that
//                             walk indices themselves (Expand, gather-like loops);
//   BroadcastPlan             the output as `num_runs()` runs of `run_length()` contiguous elements; inside one
//                             run every input either advances by one element or stays on one element. Elementwise
//                             kernels write one plain loop per case (vector/vector, vector/scalar, ...) and let the
//                             compiler vectorize it. Same-shape inputs give one run (`all_same()`), scalars and
//                             row/column broadcasts give long runs.
//
// Thread safety: everything here is a pure function or an immutable value; a plan may be used from many threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace epctx {

// Output shape of broadcasting `a` with `b`. INVALID_ARGUMENT "shapes [2,3] and [4] are not broadcastable
// (dim 1: 3 vs 4)" otherwise.
StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b);
// The same for any number of shapes (an empty list gives a scalar shape []). The error names the first two
// shapes that conflict.
StatusOr<Shape> BroadcastShapes(const std::vector<const Shape*>& shapes);

// Unidirectional broadcasting (PRelu's slope, Gemm's C): OK when `from` broadcasts to exactly `target`;
// INVALID_ARGUMENT naming both shapes otherwise.
Status CheckUnidirectionalBroadcast(const Shape& from, const Shape& target);

// Element strides of a row-major tensor of shape `in`, seen through the broadcast output shape `out`: one stride
// per dim of `out`, 0 along dims that `in` lacks or has as 1. Precondition: `in` broadcasts to `out` (check with
// BroadcastShapes first); rank(in) <= rank(out).
std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out);

// How N inputs map onto their broadcast output, as runs of contiguous output elements.
class BroadcastPlan {
 public:
  // Builds the plan for inputs with the given shapes (output shape = their broadcast). INVALID_ARGUMENT when
  // they do not broadcast.
  static StatusOr<BroadcastPlan> Make(const std::vector<const Shape*>& inputs);
  // Plan for inputs broadcast to a given output shape (unidirectional, e.g. an accumulator already shaped as the
  // output). INVALID_ARGUMENT when some input does not broadcast to `out`.
  static StatusOr<BroadcastPlan> MakeTo(const std::vector<const Shape*>& inputs, const Shape& out);

  const Shape& out_shape() const { return out_shape_; }
  int64_t out_size() const { return out_size_; }
  size_t num_inputs() const { return steps_.size(); }
  // Output elements per run, and number of runs (run_length * num_runs == out_size; both 0 for empty outputs).
  int64_t run_length() const { return run_length_; }
  int64_t num_runs() const { return num_runs_; }
  // True when input k advances one element per output element inside a run; false when it is constant there.
  bool steps(size_t k) const { return steps_[k]; }
  // True when input k has exactly one element (its offset is always 0).
  bool is_scalar(size_t k) const { return scalar_[k]; }
  // True when no input is broadcast: every input has the output's element count (one run covers everything).
  bool all_same() const { return all_same_; }

  // Calls fn(out_offset, in_offsets) for each run in [begin, end), in order, where out_offset is the first output
  // element of the run and in_offsets[k] the element of input k that goes with it. Cost per run is O(1)
  // amortized; O(rank) once per call. Safe to call concurrently on disjoint ranges.
  template <typename Fn>
  void ForEachRun(int64_t begin, int64_t end, Fn&& fn) const;

 private:
  static StatusOr<BroadcastPlan> Build(const std::vector<const Shape*>& inputs, Shape out);

  Shape out_shape_;
  int64_t out_size_ = 0;
  int64_t run_length_ = 0;
  int64_t num_runs_ = 0;
  bool all_same_ = true;
  std::vector<bool> steps_;
  std::vector<bool> scalar_;
  // Coalesced dims outside the run, outermost first, and per input its element strides along them
  // (outer_strides_[k * outer_dims_.size() + d]).
  std::vector<int64_t> outer_dims_;
  std::vector<int64_t> outer_strides_;
};

template <typename Fn>
void BroadcastPlan::ForEachRun(int64_t begin, int64_t end, Fn&& fn) const {
  if (begin >= end) return;
  const size_t n = steps_.size();
  const size_t rank = outer_dims_.size();
  // Up to 8 inputs and rank 12 without heap allocation; more falls back to vectors.
  int64_t small_off[8], small_idx[12];
  std::vector<int64_t> big_off, big_idx;
  int64_t* off = small_off;
  int64_t* idx = small_idx;
  if (n > 8) {
    big_off.resize(n);
    off = big_off.data();
  }
  if (rank > 12) {
    big_idx.resize(rank);
    idx = big_idx.data();
  }
  // Decompose `begin` into outer indices.
  int64_t rem = begin;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = rem % outer_dims_[d];
    rem /= outer_dims_[d];
  }
  for (size_t k = 0; k < n; ++k) {
    int64_t o = 0;
    for (size_t d = 0; d < rank; ++d) o += idx[d] * outer_strides_[k * rank + d];
    off[k] = o;
  }
  for (int64_t r = begin;;) {
    fn(r * run_length_, static_cast<const int64_t*>(off));
    if (++r >= end) break;
    // Odometer increment; inputs' offsets follow incrementally.
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < outer_dims_[d]) {
        for (size_t k = 0; k < n; ++k) off[k] += outer_strides_[k * rank + d];
        break;
      }
      for (size_t k = 0; k < n; ++k) off[k] -= (outer_dims_[d] - 1) * outer_strides_[k * rank + d];
      idx[d] = 0;
    }
  }
}

}  // namespace epctx
