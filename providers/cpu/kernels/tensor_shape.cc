// Kernels that change only shape metadata (aliasing the input) or make tensors from attributes and shapes:
// Reshape, Flatten, Squeeze, Unsqueeze, Identity, Shape, Size, Constant, ConstantOfShape, EyeLike, Range.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "providers/cpu/kernels/tensor_util.h"

namespace epctx {
namespace tensor_kernels {

namespace {

// ---------------------------------------------------------------- Reshape

Status ReshapeCompute(KernelContext& ctx, const std::vector<int64_t>* attr_shape, bool allowzero) {
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  std::vector<int64_t> shape;
  if (attr_shape) {
    shape = *attr_shape;
  } else {
    ASSIGN_OR_RETURN(const Tensor* ts, RequireInput(ctx, 1, "shape"));
    if (ts->rank() != 1)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "shape must be 1-D, got shape ", ShapeToString(ts->shape()));
    ASSIGN_OR_RETURN(shape, ReadInts(ctx, *ts, "shape"));
  }
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t& d = shape[i];
    if (d == 0 && !allowzero) {
      if (i >= x->rank())
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "shape ", ShapeToString(shape), " copies dim ", i,
                         " but the input ", ShapeToString(x->shape()), " has rank ", x->rank());
      d = x->dim(i);
    }
    if (d == -1) {
      if (infer >= 0)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "shape ", ShapeToString(shape), " has more than one -1");
      infer = static_cast<int64_t>(i);
      continue;
    }
    if (d < 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "shape ", ShapeToString(shape), " has invalid dim ", d);
    if (d != 0 && known > INT64_MAX / d)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "shape ", ShapeToString(shape), " is too large");
    known *= d;
  }
  const int64_t total = x->NumElements();
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "cannot reshape input of shape ", ShapeToString(x->shape()),
                       " to ", ShapeToString(shape), ": the -1 dim cannot be inferred");
    shape[infer] = total / known;
  } else if (known != total) {
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "cannot reshape input of shape ", ShapeToString(x->shape()), " (",
                     total, " elements) to ", ShapeToString(shape));
  }
  ctx.SetOutput(0, x->Reshaped(shape));
  return Status::OK();
}

StatusOr<std::unique_ptr<OpKernel>> CreateReshape(const KernelInfo& info) {
  const bool allowzero = info.GetInt("allowzero", 0) != 0;
  if (info.opset() < 5) {
    if (!info.HasAttr("shape")) return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'shape' is required");
    std::vector<int64_t> shape = info.GetInts("shape");
    return LambdaKernel([shape](KernelContext& ctx) { return ReshapeCompute(ctx, &shape, false); })(info);
  }
  return LambdaKernel([allowzero](KernelContext& ctx) { return ReshapeCompute(ctx, nullptr, allowzero); })(info);
}

// ---------------------------------------------------------------- Flatten

StatusOr<std::unique_ptr<OpKernel>> CreateFlatten(const KernelInfo& info) {
  const int64_t axis = info.GetInt("axis", 1);
  return LambdaKernel([axis](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    const int64_t r = static_cast<int64_t>(x->rank());
    if (axis < -r || axis > r)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axis ", axis, " is out of range for rank ", r);
    const int64_t a = axis < 0 ? axis + r : axis;
    int64_t outer = 1;
    for (int64_t k = 0; k < a; ++k) outer *= x->dim(k);
    const int64_t inner = outer == 0 ? ShapeSize(Shape(x->shape().begin() + a, x->shape().end())) : x->NumElements() / outer;
    ctx.SetOutput(0, x->Reshaped({outer, inner}));
    return Status::OK();
  })(info);
}

// ---------------------------------------------------------------- Squeeze / Unsqueeze

// axes from the attribute (before opset 13) or from input 1 (13 and later). `present` false when not given.
Status GetAxes(const KernelContext& ctx, bool from_input, const std::vector<int64_t>& attr_axes, bool attr_present,
               std::vector<int64_t>* axes, bool* present) {
  if (!from_input) {
    *axes = attr_axes;
    *present = attr_present;
    return Status::OK();
  }
  const Tensor* t = ctx.Input(1);
  *present = t != nullptr;
  if (t) {
    ASSIGN_OR_RETURN(*axes, ReadInts(ctx, *t, "axes"));
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<OpKernel>> CreateSqueeze(const KernelInfo& info) {
  const bool from_input = info.opset() >= 13;
  const std::vector<int64_t> attr_axes = info.GetInts("axes");
  const bool attr_present = info.HasAttr("axes");
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    std::vector<int64_t> axes;
    bool present = false;
    RETURN_IF_ERROR(GetAxes(ctx, from_input, attr_axes, attr_present, &axes, &present));
    const int64_t r = static_cast<int64_t>(x->rank());
    std::vector<bool> drop(r, false);
    if (!present) {
      for (int64_t k = 0; k < r; ++k) drop[k] = x->dim(k) == 1;
    } else {
      for (int64_t a : axes) {
        ASSIGN_OR_RETURN(int64_t k, NormalizeAxis(ctx, a, r));
        if (x->dim(k) != 1)
          return ctx.Error(ErrorCode::INVALID_ARGUMENT, "cannot squeeze axis ", a, " of shape ",
                           ShapeToString(x->shape()), ": its size is not 1");
        drop[k] = true;
      }
    }
    Shape out;
    for (int64_t k = 0; k < r; ++k)
      if (!drop[k]) out.push_back(x->dim(k));
    ctx.SetOutput(0, x->Reshaped(out));
    return Status::OK();
  })(info);
}

StatusOr<std::unique_ptr<OpKernel>> CreateUnsqueeze(const KernelInfo& info) {
  const bool from_input = info.opset() >= 13;
  const std::vector<int64_t> attr_axes = info.GetInts("axes");
  const bool attr_present = info.HasAttr("axes");
  if (!from_input && !attr_present) return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'axes' is required");
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    std::vector<int64_t> axes;
    bool present = false;
    RETURN_IF_ERROR(GetAxes(ctx, from_input, attr_axes, attr_present, &axes, &present));
    if (!present) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input 'axes' is required");
    const int64_t r = static_cast<int64_t>(x->rank() + axes.size());
    std::vector<bool> unit(r, false);
    for (int64_t a : axes) {
      ASSIGN_OR_RETURN(int64_t k, NormalizeAxis(ctx, a, r));
      if (unit[k]) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axis ", a, " appears twice in axes");
      unit[k] = true;
    }
    Shape out(r);
    for (int64_t k = 0, j = 0; k < r; ++k) out[k] = unit[k] ? 1 : x->dim(j++);
    ctx.SetOutput(0, x->Reshaped(out));
    return Status::OK();
  })(info);
}

// ---------------------------------------------------------------- Identity, Shape, Size

Status IdentityCompute(KernelContext& ctx) {
  const IValue* v = ctx.InputValue(0);
  if (!v) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input 0 is missing");
  ctx.SetOutput(0, *v);
  return Status::OK();
}

StatusOr<std::unique_ptr<OpKernel>> CreateShape(const KernelInfo& info) {
  const int64_t start = info.GetInt("start", 0);
  const bool has_end = info.HasAttr("end");
  const int64_t end = info.GetInt("end", 0);
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    const int64_t r = static_cast<int64_t>(x->rank());
    auto clamp = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
    const int64_t b = clamp(start), e = has_end ? clamp(end) : r;
    const int64_t n = std::max<int64_t>(0, e - b);
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, DataType::kInt64, {n}));
    for (int64_t i = 0; i < n; ++i) y->data<int64_t>()[i] = x->dim(b + i);
    return Status::OK();
  })(info);
}

Status SizeCompute(KernelContext& ctx) {
  ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
  ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, DataType::kInt64, {}));
  y->data<int64_t>()[0] = x->NumElements();
  return Status::OK();
}

// ---------------------------------------------------------------- Constant

template <typename T>
StatusOr<Tensor> MakeTensor(const std::vector<T>& values, Shape shape) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(DataTypeFor<T>(), std::move(shape)));
  for (size_t i = 0; i < values.size(); ++i) t.data<T>()[i] = values[i];
  return t;
}

StatusOr<std::unique_ptr<OpKernel>> CreateConstant(const KernelInfo& info) {
  const Node& node = info.node();
  int count = 0;
  Tensor value;
  for (const auto& [name, a] : node.attributes) {
    StatusOr<Tensor> t = Status::OK();
    if (name == "value") {
      if (a.type != Attribute::Type::kTensor)
        return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'value' must be a tensor");
      t = a.t;
    } else if (name == "sparse_value") {
      return info.Error(ErrorCode::NOT_IMPLEMENTED, "sparse_value (a sparse tensor constant) is not supported; "
                        "store the constant as a dense 'value' tensor");
    } else if (name == "value_float") {
      t = MakeTensor<float>({a.f}, {});
    } else if (name == "value_floats") {
      t = MakeTensor<float>(a.floats, {static_cast<int64_t>(a.floats.size())});
    } else if (name == "value_int") {
      t = MakeTensor<int64_t>({a.i}, {});
    } else if (name == "value_ints") {
      t = MakeTensor<int64_t>(a.ints, {static_cast<int64_t>(a.ints.size())});
    } else if (name == "value_string") {
      t = MakeTensor<std::string>({a.s}, {});
    } else if (name == "value_strings") {
      t = MakeTensor<std::string>(a.strings, {static_cast<int64_t>(a.strings.size())});
    } else {
      continue;
    }
    if (!t.ok()) return t.status().WithContext(node.Describe());
    value = std::move(t).value();
    ++count;
  }
  if (count != 1)
    return info.Error(ErrorCode::INVALID_GRAPH, "exactly one of value, value_float(s), value_int(s), value_string(s) "
                      "must be set, found ", count);
  if (!value.defined())
    return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'value' holds no tensor");
  return LambdaKernel([value](KernelContext& ctx) {
    ctx.SetOutput(0, value);
    return Status::OK();
  })(info);
}

// ---------------------------------------------------------------- ConstantOfShape

StatusOr<std::unique_ptr<OpKernel>> CreateConstantOfShape(const KernelInfo& info) {
  Tensor value;
  if (const Attribute* a = info.node().attr("value")) {
    if (a->type != Attribute::Type::kTensor || a->t.NumElements() != 1)
      return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'value' must be a one-element tensor");
    value = a->t;
  } else {
    auto t = Tensor::Allocate(DataType::kFloat, {1});  // zero
    if (!t.ok()) return t.status();
    value = std::move(t).value();
  }
  return LambdaKernel([value](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* ts, RequireInput(ctx, 0, "input"));
    if (ts->rank() > 1)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "shape input must be 1-D, got shape ", ShapeToString(ts->shape()));
    ASSIGN_OR_RETURN(Shape shape, ReadInts(ctx, *ts, "shape"));
    for (int64_t d : shape)
      if (d < 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "shape ", ShapeToString(shape), " has a negative dim");
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, value.dtype(), shape));
    return WithNode(ctx, DispatchByElementSize(value.dtype(), "ConstantOfShape", [&](auto tag) {
      using T = decltype(tag);
      const T v = value.data<T>()[0];
      T* p = y->data<T>();
      const int64_t n = y->NumElements();
      for (int64_t i = 0; i < n; ++i) p[i] = v;
      return Status::OK();
    }));
  })(info);
}

// ---------------------------------------------------------------- EyeLike

template <typename T>
T OneOf() {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(1.0f);
  } else {
    return static_cast<T>(1);
  }
}

StatusOr<std::unique_ptr<OpKernel>> CreateEyeLike(const KernelInfo& info) {
  const bool has_dtype = info.HasAttr("dtype");
  const int64_t dtype_attr = info.GetInt("dtype", 0);
  const int64_t k = info.GetInt("k", 0);
  if (has_dtype && !IsValidDataType(static_cast<int32_t>(dtype_attr)))
    return info.Error(ErrorCode::INVALID_GRAPH, "dtype ", dtype_attr, " is not a valid element type");
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    if (x->rank() != 2)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must be 2-D, got shape ", ShapeToString(x->shape()));
    const DataType dt = has_dtype ? static_cast<DataType>(dtype_attr) : x->dtype();
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, dt, x->shape()));
    const int64_t rows = x->dim(0), cols = x->dim(1);
    return WithNode(ctx, DispatchType<EPCTX_NUMERIC_TYPES, bool>(dt, "EyeLike", [&](auto tag) {
      using T = decltype(tag);
      T* p = y->data<T>();
      for (int64_t i = 0; i < rows; ++i) {
        // Compare in a form that cannot overflow for extreme k.
        if (k >= cols || k <= -rows) break;
        const int64_t j = i + k;
        if (j >= 0 && j < cols) p[i * cols + j] = OneOf<T>();
      }
      return Status::OK();
    }));
  })(info);
}

// ---------------------------------------------------------------- Range

Status RangeCompute(KernelContext& ctx) {
  ASSIGN_OR_RETURN(const Tensor* ts, RequireInput(ctx, 0, "start"));
  ASSIGN_OR_RETURN(const Tensor* tl, RequireInput(ctx, 1, "limit"));
  ASSIGN_OR_RETURN(const Tensor* td, RequireInput(ctx, 2, "delta"));
  if (ts->dtype() != tl->dtype() || ts->dtype() != td->dtype())
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "start, limit and delta must have one type");
  for (const Tensor* t : {ts, tl, td})
    if (t->NumElements() != 1)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "start, limit and delta must be scalars, got shape ",
                       ShapeToString(t->shape()));
  return WithNode(ctx, DispatchType<float, double, int16_t, int32_t, int64_t>(ts->dtype(), "Range", [&](auto tag) -> Status {
    using T = decltype(tag);
    const T start = ts->data<T>()[0], limit = tl->data<T>()[0], delta = td->data<T>()[0];
    if (delta == 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "delta is 0");
    int64_t n = 0;
    if constexpr (std::is_floating_point_v<T>) {
      const double c = std::ceil((static_cast<double>(limit) - start) / delta);
      if (std::isnan(c) || c > 9e18)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "range(", start, ", ", limit, ", ", delta,
                         ") has no finite length");
      n = c > 0 ? static_cast<int64_t>(c) : 0;
    } else {
      const __int128 span = static_cast<__int128>(limit) - start;
      __int128 q = span / delta;
      if (q * delta != span && (span > 0) == (delta > 0)) ++q;  // ceil of a positive quotient
      n = q > 0 ? static_cast<int64_t>(q) : 0;
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, ts->dtype(), {n}));
    T* p = y->data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    return Status::OK();
  }));
}

}  // namespace

void RegisterShapeKernels(KernelRegistry& r) {
  r.Register("", "Reshape", CreateReshape);
  r.Register("", "Flatten", CreateFlatten);
  r.Register("", "Squeeze", CreateSqueeze);
  r.Register("", "Unsqueeze", CreateUnsqueeze);
  r.Register("", "Identity", LambdaKernel(IdentityCompute));
  r.Register("", "Shape", CreateShape);
  r.Register("", "Size", LambdaKernel(SizeCompute));
  r.Register("", "Constant", CreateConstant);
  r.Register("", "ConstantOfShape", CreateConstantOfShape);
  r.Register("", "EyeLike", CreateEyeLike);
  r.Register("", "Range", LambdaKernel(RangeCompute));
}

}  // namespace tensor_kernels
}  // namespace epctx
