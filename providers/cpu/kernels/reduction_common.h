// Building blocks shared by the reduction family's kernels (reduction*.cc); private to them: axis handling,
// element conversions, vectorizable lane reductions and exp.
//
// Vectorization: the project builds with -O2, whose "very cheap" vectorizer cost model rejects loops with unknown
// trip counts, and GCC's `omp simd reduction(...)` lowering leaves a slow scalar lane combine. So reductions here
// keep kLanes explicit accumulators updated by an `omp simd` loop of constant trip count (one AVX-512 vector of
// floats), then combine the lanes once. Element-wise loops use a plain `#pragma omp simd`.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/float16.h"
#include "providers/cpu/kernel.h"

namespace epctx {
namespace reduction_internal {

// Reads an int32/int64 tensor (any shape) as int64 values; INVALID_ARGUMENT naming `what` for other types.
inline StatusOr<std::vector<int64_t>> ReadInts(const KernelContext& ctx, const Tensor& t, const char* what) {
  std::vector<int64_t> v(static_cast<size_t>(t.NumElements()));
  if (t.dtype() == DataType::kInt64) {
    std::copy(t.data<int64_t>(), t.data<int64_t>() + v.size(), v.begin());
  } else if (t.dtype() == DataType::kInt32) {
    std::copy(t.data<int32_t>(), t.data<int32_t>() + v.size(), v.begin());
  } else {
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " must be int32 or int64, got ", DataTypeName(t.dtype()));
  }
  return v;
}

// Maps axis in [-rank, rank) to [0, rank); INVALID_ARGUMENT otherwise.
inline Status NormalizeAxis(const KernelContext& ctx, int64_t axis, int64_t rank, int64_t* out) {
  if (axis < -rank || axis >= rank)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axis ", axis, " is out of range for a tensor of rank ", rank);
  *out = axis < 0 ? axis + rank : axis;
  return Status::OK();
}

// outer = prod(shape[:axis]), n = shape[axis], inner = prod(shape[axis+1:]).
inline void SplitAtAxis(const Shape& shape, int64_t axis, int64_t* outer, int64_t* n, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (int64_t i = 0; i < axis; ++i) *outer *= shape[i];
  *n = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i) *inner *= shape[i];
}

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// Element conversions through float for the 16-bit float types.
template <typename C, typename T>
inline C ToC(T v) {
  if constexpr (kIsHalf<T>) {
    return static_cast<C>(static_cast<float>(v));
  } else {
    return static_cast<C>(v);
  }
}
template <typename T, typename C>
inline T FromC(C v) {
  if constexpr (kIsHalf<T>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Accumulation type: float for float and the 16-bit floats, double for double, 64-bit for integers.
template <typename T>
struct AccOf {
  using type = std::conditional_t<std::is_integral_v<T>, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>, T>;
};
template <>
struct AccOf<Float16> {
  using type = float;
};
template <>
struct AccOf<BFloat16> {
  using type = float;
};

// Compute type of the float kernels: double for double, float otherwise.
template <typename T>
using ComputeOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

constexpr int kLanes = 16;

// Combines f(0..n-1) with `combine`, starting from `init` (which must be combine's identity).
template <typename A, typename Combine, typename F>
inline A LaneReduce(int64_t n, A init, Combine combine, F&& f) {
  A acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = init;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) acc[l] = combine(acc[l], f(i + l));
  }
  A r = init;
  for (; i < n; ++i) r = combine(r, f(i));
  for (int l = 0; l < kLanes; ++l) r = combine(r, acc[l]);
  return r;
}

template <typename A, typename F>
inline A LaneSum(int64_t n, F&& f) {
  return LaneReduce<A>(n, A(0), [](A a, A b) { return a + b; }, f);
}

template <typename A, typename F>
inline A LaneMax(int64_t n, F&& f) {
  return LaneReduce<A>(n, -std::numeric_limits<A>::infinity(), [](A a, A b) { return b > a ? b : a; }, f);
}

// exp(x) for float within ~2 ulp, in plain arithmetic so that `omp simd` loops vectorize it. Exact 0 below
// -87.3 and +inf above 88.3 (the float range of exp), NaN stays NaN.
inline float FastExp(float x) {
  const float lo = -87.3f, hi = 88.3f;
  float xc = x >= lo ? (x <= hi ? x : hi) : lo;  // NaN -> lo, so the float-to-int conversion below is defined
  float t = xc * 1.44269504088896341f + 12582912.0f;  // round(x / ln2) with the 1.5 * 2^23 trick
  float n = t - 12582912.0f;
  float r = xc - n * 0.693359375f;  // ln2 split in two for an exact reduction
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;  // minimax polynomial for exp on [-ln2/2, ln2/2]
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n
  float y = p * __builtin_bit_cast(float, bits);
  y = x < lo ? 0.0f : y;
  y = x > hi ? std::numeric_limits<float>::infinity() : y;
  y = x != x ? x : y;
  return y;
}
inline double FastExp(double x) { return std::exp(x); }

}  // namespace reduction_internal
}  // namespace epctx
