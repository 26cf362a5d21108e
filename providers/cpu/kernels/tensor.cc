// Tensor-manipulation kernels: registration and the helpers shared by tensor_*.cc.
#include <cmath>
#include <type_traits>

#include "providers/cpu/kernels/tensor_util.h"

namespace epctx {
namespace tensor_kernels {

std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    strides[k] = s;
    s *= shape[k];
  }
  return strides;
}

StatusOr<std::vector<int64_t>> ReadInts(const KernelContext& ctx, const Tensor& t, const char* what) {
  std::vector<int64_t> out(static_cast<size_t>(t.NumElements()));
  Status st = DispatchType<EPCTX_INT_TYPES>(t.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_same_v<T, uint64_t>) {
        if (p[i] > static_cast<uint64_t>(INT64_MAX))
          return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " value ", p[i], " does not fit int64");
      }
      out[i] = static_cast<int64_t>(p[i]);
    }
    return Status::OK();
  });
  if (!st.ok()) {
    if (st.code() == ErrorCode::NOT_IMPLEMENTED)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " must be an integer tensor, got ", DataTypeName(t.dtype()));
    return st;
  }
  return out;
}

StatusOr<double> ReadScalarDouble(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.NumElements() != 1)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " must hold exactly one element, got shape ",
                     ShapeToString(t.shape()));
  double v = 0;
  Status st = DispatchType<EPCTX_NUMERIC_TYPES, bool>(t.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      v = static_cast<double>(static_cast<float>(t.data<T>()[0]));
    } else {
      v = static_cast<double>(t.data<T>()[0]);
    }
    return Status::OK();
  });
  if (!st.ok()) return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " must be numeric, got ", DataTypeName(t.dtype()));
  return v;
}

StatusOr<int64_t> ReadScalarInt(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.NumElements() != 1)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " must hold exactly one element, got shape ",
                     ShapeToString(t.shape()));
  if (t.dtype() == DataType::kFloat || t.dtype() == DataType::kDouble || t.dtype() == DataType::kFloat16 ||
      t.dtype() == DataType::kBFloat16) {
    ASSIGN_OR_RETURN(double d, ReadScalarDouble(ctx, t, what));
    if (!(std::fabs(d) < 9.2e18)) return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " value ", d, " is out of range");
    return static_cast<int64_t>(d);
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInts(ctx, t, what));
  return v[0];
}

StatusOr<std::vector<int64_t>> ReadIndices(const KernelContext& ctx, const Tensor& t, int64_t dim, const char* what) {
  if (t.dtype() != DataType::kInt32 && t.dtype() != DataType::kInt64)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " must be int32 or int64, got ", DataTypeName(t.dtype()));
  ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInts(ctx, t, what));
  for (int64_t& x : v) {
    if (x < -dim || x >= dim)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " value ", x, " is out of range [", -dim, ", ", dim - 1,
                       "]");
    if (x < 0) x += dim;
  }
  return v;
}

StatusOr<const Tensor*> RequireInput(const KernelContext& ctx, size_t i, const char* what) {
  const Tensor* t = ctx.Input(i);
  if (!t) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input ", i, " (", what, ") is missing or not a tensor");
  return t;
}

}  // namespace tensor_kernels

void RegisterTensorKernels(KernelRegistry& r) {
  tensor_kernels::RegisterShapeKernels(r);
  tensor_kernels::RegisterCopyKernels(r);
  tensor_kernels::RegisterConcatKernels(r);
  tensor_kernels::RegisterIndexKernels(r);
  tensor_kernels::RegisterRearrangeKernels(r);
}

}  // namespace epctx
