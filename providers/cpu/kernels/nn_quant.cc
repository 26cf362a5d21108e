// Quantized ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger,
// QLinearMatMul, QLinearConv. QuantizeLinear/DequantizeLinear also take int4/uint4 (opset 21; one value per byte
// in memory, core/int4.h), per tensor, per axis and blocked, saturating to [-8, 7] / [0, 15].
// The products run on oneDNN's int8 primitives (nn_quant_dnnl.h: exact int32 sums, operands rewritten for u8 x s8);
// the plain loops remain for what oneDNN does not take (more than 3 spatial dims, empty tensors, B zero points that
// vary per batch matrix with a shared B...): 8-bit operands widened to int32 with their zero points subtracted,
// products accumulated in int32 (ConvPlain/GemmPlain). Requantization rounds half to even and saturates; the
// element loops are written so that g++ vectorizes them (no calls, no per-element branches).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "providers/cpu/kernels/broadcast.h"
#include "core/parallel.h"
#include "providers/cpu/kernels/nn_common.h"
#include "providers/cpu/kernels/nn_quant_dnnl.h"
#include "providers/cpu/layout.h"
#include "providers/cpu/fused_activation.h"

namespace epctx {
namespace nn {
namespace {

bool Is8Bit(DataType t) { return t == DataType::kInt8 || t == DataType::kUint8; }

// Values of an int8/uint8/int32 tensor widened to int32. INVALID_ARGUMENT naming `what` for other types.
Status ReadInts(const Tensor& t, const char* what, std::vector<int32_t>* out) {
  const int64_t n = t.NumElements();
  out->resize(n);
  switch (t.dtype()) {
    case DataType::kInt8:
      for (int64_t i = 0; i < n; ++i) (*out)[i] = t.data<int8_t>()[i];
      return Status::OK();
    case DataType::kUint8:
      for (int64_t i = 0; i < n; ++i) (*out)[i] = t.data<uint8_t>()[i];
      return Status::OK();
    case DataType::kInt32:
      std::copy(t.data<int32_t>(), t.data<int32_t>() + n, out->begin());
      return Status::OK();
    case DataType::kInt4:
      for (int64_t i = 0; i < n; ++i) (*out)[i] = static_cast<int32_t>(t.data<Int4>()[i]);
      return Status::OK();
    case DataType::kUint4:
      for (int64_t i = 0; i < n; ++i) (*out)[i] = static_cast<int32_t>(t.data<UInt4>()[i]);
      return Status::OK();
    default:
      return MakeStatus(ErrorCode::INVALID_ARGUMENT, what, " must be int8, uint8, int4, uint4 or int32, got ",
                        DataTypeName(t.dtype()));
  }
}

// Values of a float8 tensor (float8 zero points) as float.
Status ReadFloat8s(const Tensor& t, const char* what, std::vector<float>* out) {
  return DispatchType<EPCTX_FLOAT8_TYPES>(t.dtype(), what, [&](auto tag) -> Status {
    using F8 = decltype(tag);
    const F8* p = t.data<F8>();
    out->resize(t.NumElements());
    for (int64_t i = 0; i < t.NumElements(); ++i) (*out)[i] = static_cast<float>(p[i]);
    return Status::OK();
  });
}

// Values of a float/float16/bfloat16 tensor (scales) as float.
Status ReadFloats(const Tensor& t, const char* what, std::vector<float>* out) {
  const int64_t n = t.NumElements();
  out->resize(n);
  switch (t.dtype()) {
    case DataType::kFloat:
      std::copy(t.data<float>(), t.data<float>() + n, out->begin());
      return Status::OK();
    case DataType::kFloat16:
      ToFloat(t.data<Float16>(), out->data(), n);
      return Status::OK();
    case DataType::kBFloat16:
      ToFloat(t.data<BFloat16>(), out->data(), n);
      return Status::OK();
    default:
      return MakeStatus(ErrorCode::INVALID_ARGUMENT, what, " must be float, got ", DataTypeName(t.dtype()));
  }
}

// A per-tensor (one value) or per-channel (n values) parameter.
template <typename T>
Status CheckCount(const std::vector<T>& v, int64_t n, const char* what, bool allow_per_channel) {
  if (v.size() == 1) return Status::OK();
  if (allow_per_channel && static_cast<int64_t>(v.size()) == n) return Status::OK();
  return MakeStatus(ErrorCode::INVALID_ARGUMENT, what, " has ", v.size(), " values; expected 1",
                    allow_per_channel ? " or " + std::to_string(n) : std::string());
}

// x / scale rounded half to even plus the zero point (`v`, already rounded) saturated to Q's range: int8/uint8, or
// int4 [-8, 7] / uint4 [0, 15]. NaN gives Q's minimum.
template <typename Q>
inline Q QuantizeSaturate(float v) {
  if constexpr (kIsInt4<Q>) {
    const float r = std::nearbyint(v);
    if (!(r >= static_cast<float>(Q::kMin))) return Q::Saturate(Q::kMin);
    if (r > static_cast<float>(Q::kMax)) return Q::Saturate(Q::kMax);
    return Q::Saturate(static_cast<int64_t>(r));
  } else {
    return SaturateRound<Q>(v);
  }
}

// QuantizeValue (round half even + zp, saturated): nn_quant_dnnl.h.

// Requantizes one int32 accumulator.
template <typename Q>
inline Q Requantize(int32_t acc, float scale, int32_t zp) {
  return QuantizeValue<Q>(static_cast<float>(acc) * scale, static_cast<float>(zp));
}

// Row loops of the 8-bit kernels, as functions of restrict pointers and values: inside the kernels' lambdas a store
// through a byte pointer may alias what the lambda captured by reference, so g++ reloaded the captures every
// element and left the loops scalar (QuantizeLinear and QLinearConv's requantization were a quarter of a QDQ
// detector's run).
template <typename Q>
void QuantizeRow(const float* __restrict x, Q* __restrict y, int64_t n, float scale, float zp) {
  for (int64_t i = 0; i < n; ++i) y[i] = QuantizeValue<Q>(x[i] / scale, zp);
}
template <typename T>
void DequantizeRow(const T* __restrict x, float* __restrict y, int64_t n, float scale, int32_t zp) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zp) * scale;
}
template <typename Q>
void RequantizeRow(const int32_t* __restrict acc, Q* __restrict y, int64_t n, float scale, float zp) {
  for (int64_t i = 0; i < n; ++i) y[i] = QuantizeValue<Q>(static_cast<float>(acc[i]) * scale, zp);
}

// Calls fn(row, begin, end) for the parts of rows of `row_size` elements that [lo, hi) of the flat range covers:
// per-tensor parameters make one row of the whole tensor, which the loops split over threads by elements.
template <typename Fn>
void ForRowParts(int64_t lo, int64_t hi, int64_t row_size, const Fn& fn) {
  for (int64_t i = lo; i < hi;) {
    const int64_t row = i / row_size, end = std::min(hi, (row + 1) * row_size);
    fn(row, i, end);
    i = end;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// QuantizeLinear / DequantizeLinear.

// Splits x's shape around the quantization axis: outer x axis_dim x inner. Per-tensor when the parameter has one
// element (axis_dim reported as 1 and inner as everything).
Status AxisBlocks(const Shape& xs, int64_t axis_attr, int64_t param_count, bool per_axis_allowed, int64_t* outer,
                  int64_t* axis_dim, int64_t* inner) {
  const int64_t total = ShapeSize(xs);
  if (param_count == 1) {
    *outer = 1;
    *axis_dim = 1;
    *inner = total;
    return Status::OK();
  }
  RETURN_ERROR_IF(!per_axis_allowed, INVALID_ARGUMENT, "scale must be a scalar before opset 13, got ", param_count,
                  " values");
  const int64_t r = static_cast<int64_t>(xs.size());
  int64_t axis = axis_attr < 0 ? axis_attr + r : axis_attr;
  RETURN_ERROR_IF(axis < 0 || axis >= r, INVALID_ARGUMENT, "axis ", axis_attr, " is out of range for rank ", r);
  RETURN_ERROR_IF(xs[axis] != param_count, INVALID_ARGUMENT, "per-axis scale has ", param_count,
                  " values but axis ", axis, " of x ", ShapeToString(xs), " has ", xs[axis]);
  *outer = 1;
  for (int64_t i = 0; i < axis; ++i) *outer *= xs[i];
  *axis_dim = xs[axis];
  *inner = 1;
  for (int64_t i = axis + 1; i < r; ++i) *inner *= xs[i];
  return Status::OK();
}

class QuantizeKernel final : public OpKernel {
 public:
  QuantizeKernel(const KernelInfo& info, bool dequantize)
      : dequantize_(dequantize), axis_(info.GetInt("axis", 1)), per_axis_(info.opset() >= 13),
        block_size_(info.opset() >= 21 ? info.GetInt("block_size", 0) : 0),
        output_dtype_(info.opset() >= 21 ? info.GetInt("output_dtype", 0) : 0),
        saturate_(info.GetInt("saturate", 1) != 0) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* scale = ctx.Input(1);
    const Tensor* zp = ctx.Input(2);
    const std::string node = ctx.node().Describe();
    RETURN_ERROR_IF(!x || !scale, INVALID_ARGUMENT, node, ": inputs x and scale are required");
    std::vector<float> sc;
    RETURN_IF_ERROR_CTX(ReadFloats(*scale, "scale", &sc), node);
    RETURN_ERROR_IF(sc.empty(), INVALID_ARGUMENT, node, ": scale is empty");
    RETURN_ERROR_IF(block_size_ < 0, INVALID_ARGUMENT, node, ": block_size must not be negative, got ", block_size_);
    RETURN_ERROR_IF(block_size_ == 0 && scale->rank() > 1, INVALID_ARGUMENT, node,
                    ": scale must be a scalar or 1-D, got ", ShapeToString(scale->shape()));
    RETURN_ERROR_IF(dequantize_ && scale->dtype() != DataType::kFloat, NOT_IMPLEMENTED, node, ": a ",
                    DataTypeName(scale->dtype()), " scale (output of that type) is not supported; float only");
    std::vector<int32_t> zps(sc.size(), 0);
    DataType q_type = DataType::kUint8;
    if (zp) {
      size_t zn = 0;
      if (IsFloat8(zp->dtype())) {
        // A float8 zero point only names the type. ONNX's formula adds it, but ONNX Runtime 1.30 ignores it in
        // QuantizeLinear and refuses a non-zero one in DequantizeLinear: no answer of ours could match both, so a
        // non-zero one is refused in both.
        std::vector<float> zpf;
        RETURN_IF_ERROR_CTX(ReadFloat8s(*zp, "zero point", &zpf), node);
        for (size_t k = 0; k < zpf.size(); ++k)
          RETURN_ERROR_IF(zpf[k] != 0.0f, NOT_IMPLEMENTED, node, ": ", DataTypeName(zp->dtype()),
                          " zero point value ", zpf[k], " (index ", k,
                          ") is not supported; float8 zero points must be 0, as in ONNX Runtime");
        zn = zpf.size();
      } else {
        RETURN_IF_ERROR_CTX(ReadInts(*zp, "zero point", &zps), node);
        zn = zps.size();
      }
      RETURN_ERROR_IF(zn != sc.size(), INVALID_ARGUMENT, node, ": zero point has ", zn, " values but scale has ",
                      sc.size());
      q_type = zp->dtype();
    } else if (!dequantize_ && output_dtype_ != 0) {
      q_type = static_cast<DataType>(output_dtype_);
    }
    RETURN_ERROR_IF(!dequantize_ && zp && output_dtype_ != 0 && static_cast<DataType>(output_dtype_) != q_type,
                    INVALID_ARGUMENT, node, ": output_dtype ", output_dtype_, " differs from the zero point's type");
    RETURN_ERROR_IF(dequantize_ && output_dtype_ != 0 && output_dtype_ != static_cast<int64_t>(DataType::kFloat),
                    NOT_IMPLEMENTED, node, ": output_dtype ", output_dtype_, " is not supported (float only)");
    int64_t outer = 0, axis_dim = 0, inner = 0;
    // Blocked (opset 21): scale has x's rank with ceil(x.dim(axis) / block_size) along axis. `nb` parameter blocks
    // along the axis; element (o, a, i) of the [outer, axis_dim, inner] view reads parameter (o, a / bs, i).
    int64_t nb = 0, bs = 0;
    if (block_size_ > 0) {
      const int64_t r = static_cast<int64_t>(x->rank());
      const int64_t axis = axis_ < 0 ? axis_ + r : axis_;
      RETURN_ERROR_IF(axis < 0 || axis >= r, INVALID_ARGUMENT, node, ": axis ", axis_, " is out of range for rank ", r);
      RETURN_ERROR_IF(static_cast<int64_t>(scale->rank()) != r, INVALID_ARGUMENT, node, ": blocked scale ",
                      ShapeToString(scale->shape()), " must have x's rank ", r);
      bs = block_size_;
      nb = (x->dim(axis) + bs - 1) / bs;
      for (int64_t d = 0; d < r; ++d)
        RETURN_ERROR_IF(scale->dim(d) != (d == axis ? nb : x->dim(d)), INVALID_ARGUMENT, node, ": blocked scale ",
                        ShapeToString(scale->shape()), " does not match x ", ShapeToString(x->shape()), " with axis ",
                        axis, " and block_size ", bs);
      outer = 1;
      for (int64_t d = 0; d < axis; ++d) outer *= x->dim(d);
      axis_dim = x->dim(axis);
      inner = 1;
      for (int64_t d = axis + 1; d < r; ++d) inner *= x->dim(d);
    } else {
      RETURN_IF_ERROR_CTX(AxisBlocks(x->shape(), axis_, static_cast<int64_t>(sc.size()), per_axis_, &outer, &axis_dim,
                                     &inner),
                          node);
    }
    // Parameter index of element i of row b (b over outer * axis_dim): per-axis / per-tensor or blocked.
    auto param = [&](int64_t b, int64_t i) -> int64_t {
      if (nb == 0) return sc.size() == 1 ? 0 : b % axis_dim;
      const int64_t o = b / axis_dim, a = b % axis_dim;
      return (o * nb + a / bs) * inner + (i - b * inner);
    };
    const int threads = ctx.num_threads();
    if (dequantize_ && IsFloat8(x->dtype())) {
      // y = float(x) * scale (the zero point is 0, checked above); every float8 value is exact in float.
      RETURN_ERROR_IF(zp && zp->dtype() != x->dtype(), INVALID_ARGUMENT, node, ": zero point is ",
                      DataTypeName(zp->dtype()), " but x is ", DataTypeName(x->dtype()));
      ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, DataType::kFloat, x->shape()));
      return DispatchType<EPCTX_FLOAT8_TYPES>(x->dtype(), node, [&](auto tag) -> Status {
        using F8 = decltype(tag);
        const F8* xp = x->data<F8>();
        float* yp = y->data<float>();
        ParallelFor(threads, outer * axis_dim, static_cast<double>(inner), [&](int64_t lo, int64_t hi) {
          for (int64_t b = lo; b < hi; ++b)
            for (int64_t i = b * inner; i < (b + 1) * inner; ++i) {
              const int64_t p = param(b, i);
              yp[i] = static_cast<float>(xp[i]) * sc[p];
            }
        });
        return Status::OK();
      });
    }
    if (dequantize_) {
      RETURN_ERROR_IF(zp && zp->dtype() != x->dtype(), INVALID_ARGUMENT, node, ": zero point is ",
                      DataTypeName(zp->dtype()), " but x is ", DataTypeName(x->dtype()));
      RETURN_ERROR_IF(!Is8Bit(x->dtype()) && !IsInt4(x->dtype()) && x->dtype() != DataType::kInt32, INVALID_ARGUMENT,
                      node, ": x must be int8, uint8, int4, uint4, int32 or float8, got ", DataTypeName(x->dtype()));
      ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, DataType::kFloat, x->shape()));
      auto run = [&](auto tag) {
        using T = decltype(tag);
        const T* xp = x->data<T>();
        float* yp = y->data<float>();
        if constexpr (!kIsInt4<T>) {
          if (nb == 0) {
            const int64_t row_size = inner, ad = axis_dim;
            ParallelFor(threads, outer * axis_dim * inner, 2.0, [&](int64_t lo, int64_t hi) {
              ForRowParts(lo, hi, row_size, [&](int64_t row, int64_t b, int64_t e) {
                const int64_t a = row % ad;
                DequantizeRow(xp + b, yp + b, e - b, sc[a], zps[a]);
              });
            });
            return;
          }
        }
        ParallelFor(threads, outer * axis_dim, static_cast<double>(inner), [&](int64_t lo, int64_t hi) {
          for (int64_t b = lo; b < hi; ++b) {
            if (nb > 0) {
              for (int64_t i = b * inner; i < (b + 1) * inner; ++i) {
                const int64_t p = param(b, i);
                yp[i] = static_cast<float>(static_cast<int32_t>(xp[i]) - zps[p]) * sc[p];
              }
              continue;
            }
            const int64_t a = b % axis_dim;
            const float s = sc[a];
            const int32_t z = zps[a];
            const T* __restrict xl = xp + b * inner;
            float* __restrict yl = yp + b * inner;
            for (int64_t i = 0; i < inner; ++i) yl[i] = static_cast<float>(static_cast<int32_t>(xl[i]) - z) * s;
          }
        });
      };
      if (x->dtype() == DataType::kInt8) run(int8_t{});
      else if (x->dtype() == DataType::kUint8) run(uint8_t{});
      else if (x->dtype() == DataType::kInt4) run(Int4{});
      else if (x->dtype() == DataType::kUint4) run(UInt4{});
      else run(int32_t{});
      return Status::OK();
    }
    RETURN_ERROR_IF(!Is8Bit(q_type) && !IsFloat8(q_type) && !IsInt4(q_type), INVALID_ARGUMENT, node,
                    ": zero point (output type) must be int8, uint8, int4, uint4 or float8, got ",
                    DataTypeName(q_type));
    Tensor xf;
    if (x->dtype() == DataType::kInt32) {
      ASSIGN_OR_RETURN(xf, Tensor::Allocate(DataType::kFloat, x->shape()));
      for (int64_t i = 0; i < x->NumElements(); ++i) xf.data<float>()[i] = static_cast<float>(x->data<int32_t>()[i]);
    } else {
      auto f = AsFloat(*x);
      RETURN_ERROR_IF(!f.ok(), INVALID_ARGUMENT, node, ": x must be float or int32, got ", DataTypeName(x->dtype()));
      xf = std::move(f).value();
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, q_type, x->shape()));
    if (IsFloat8(q_type)) {
      // y = float8(x / scale) with `saturate` (the zero point is 0, checked above; not added, so -0 stays -0 as in
      // ONNX Runtime), rounding as the float8 Cast does.
      return DispatchType<EPCTX_FLOAT8_TYPES>(q_type, node, [&](auto tag) -> Status {
        using F8 = decltype(tag);
        const float* xp = xf.data<float>();
        F8* yp = y->data<F8>();
        const bool sat = saturate_;
        ParallelFor(threads, outer * axis_dim, static_cast<double>(inner) * 4, [&](int64_t lo, int64_t hi) {
          for (int64_t b = lo; b < hi; ++b)
            for (int64_t i = b * inner; i < (b + 1) * inner; ++i) {
              const int64_t p = param(b, i);
              yp[i] = F8(xp[i] / sc[p], sat);
            }
        });
        return Status::OK();
      });
    }
    auto run = [&](auto tag) {
      using Q = decltype(tag);
      const float* xp = xf.data<float>();
      Q* yp = y->data<Q>();
      if constexpr (!kIsInt4<Q>) {
        if (nb == 0) {
          const int64_t row_size = inner, ad = axis_dim;
          ParallelFor(threads, outer * axis_dim * inner, 4.0, [&](int64_t lo, int64_t hi) {
            ForRowParts(lo, hi, row_size, [&](int64_t row, int64_t b, int64_t e) {
              const int64_t a = row % ad;
              QuantizeRow(xp + b, yp + b, e - b, sc[a], static_cast<float>(zps[a]));
            });
          });
          return;
        }
      }
      ParallelFor(threads, outer * axis_dim, static_cast<double>(inner) * 4, [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) {
          if (nb > 0) {
            for (int64_t i = b * inner; i < (b + 1) * inner; ++i) {
              const int64_t p = param(b, i);
              yp[i] = QuantizeSaturate<Q>(std::nearbyint(xp[i] / sc[p]) + static_cast<float>(zps[p]));
            }
            continue;
          }
          const int64_t a = b % axis_dim;
          const float s = sc[a], z = static_cast<float>(zps[a]);
          if constexpr (kIsInt4<Q>) {
            for (int64_t i = b * inner; i < (b + 1) * inner; ++i)
              yp[i] = QuantizeSaturate<Q>(std::nearbyint(xp[i] / s) + z);
          } else {
            const float* __restrict xl = xp + b * inner;
            Q* __restrict yl = yp + b * inner;
            for (int64_t i = 0; i < inner; ++i) yl[i] = QuantizeValue<Q>(xl[i] / s, z);
          }
        }
      });
    };
    if (q_type == DataType::kInt8) run(int8_t{});
    else if (q_type == DataType::kInt4) run(Int4{});
    else if (q_type == DataType::kUint4) run(UInt4{});
    else run(uint8_t{});
    return Status::OK();
  }

 private:
  bool dequantize_;
  int64_t axis_;
  bool per_axis_;
  int64_t block_size_;
  int64_t output_dtype_;
  bool saturate_;  // float8 outputs (opset 19+): clamp to the largest finite value (1) or give NaN/inf (0)
};

// min(0, min x) and max(0, max x) over n floats (NaN ignored, as std::min/std::max with the running value first).
// Eight lanes in a GCC vector so the loop is vminps/vmaxps.
void RangeWithZero(const float* x, int64_t n, float* lo_out, float* hi_out) {
  typedef float V8 __attribute__((vector_size(32)));
  V8 lo = {}, hi = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    V8 v;
    std::memcpy(&v, x + i, sizeof v);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  float l = 0.f, h = 0.f;
  for (int j = 0; j < 8; ++j) {
    l = lo[j] < l ? lo[j] : l;
    h = hi[j] > h ? hi[j] : h;
  }
  for (; i < n; ++i) {
    l = x[i] < l ? x[i] : l;
    h = x[i] > h ? x[i] : h;
  }
  *lo_out = l;
  *hi_out = h;
}

Status DynamicQuantize(KernelContext& ctx) {
  const Tensor* x = ctx.Input(0);
  const std::string node = ctx.node().Describe();
  RETURN_ERROR_IF(!x, INVALID_ARGUMENT, node, ": input x is required");
  RETURN_ERROR_IF(x->dtype() != DataType::kFloat, INVALID_ARGUMENT, node, ": x must be float, got ",
                  DataTypeName(x->dtype()));
  const float* xp = x->data<float>();
  const int64_t n = x->NumElements();
  // The range always includes 0; per-chunk ranges on the threads, then combined.
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<float> los(static_cast<size_t>(chunks), 0.f), his(static_cast<size_t>(chunks), 0.f);
  ParallelFor(ctx.num_threads(), chunks, static_cast<double>(kChunk), [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c)
      RangeWithZero(xp + c * kChunk, std::min(kChunk, n - c * kChunk), &los[c], &his[c]);
  });
  float lo = 0.f, hi = 0.f;
  for (int64_t c = 0; c < chunks; ++c) {
    lo = std::min(lo, los[c]);
    hi = std::max(hi, his[c]);
  }
  const float scale = (hi - lo) / 255.f;
  uint8_t zp = 0;
  if (scale != 0.f) zp = SaturateRound<uint8_t>(std::min(255.f, std::max(0.f, (0.f - lo) / scale)));
  ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, DataType::kUint8, x->shape()));
  ASSIGN_OR_RETURN(Tensor * ys, ctx.Output(1, DataType::kFloat, {}));
  ASSIGN_OR_RETURN(Tensor * yz, ctx.Output(2, DataType::kUint8, {}));
  ys->data<float>()[0] = scale;
  yz->data<uint8_t>()[0] = zp;
  uint8_t* yp = y->data<uint8_t>();
  if (scale == 0.f) {  // all zeros
    std::memset(yp, 0, static_cast<size_t>(n));
    return Status::OK();
  }
  const float z = zp;
  ParallelFor(ctx.num_threads(), n, 4, [&](int64_t b, int64_t e) {
    // Locals and restrict pointers: a uint8 store may alias anything, which kept the loop scalar (reloads).
    const float* __restrict xl = xp;
    uint8_t* __restrict yl = yp;
    const float sl = scale, zl = z;
    for (int64_t i = b; i < e; ++i) yl[i] = QuantizeValue<uint8_t>(xl[i] / sl, zl);
  });
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------------------------
// MatMulInteger / QLinearMatMul.

// Shapes of a broadcast batched product.
struct MatMulShape {
  Shape batch, a_batch, b_batch, y_shape;
  int64_t m = 0, k = 0, n = 0;
};

Status ResolveMatMul(const Shape& a_in, const Shape& b_in, MatMulShape* s) {
  RETURN_ERROR_IF(a_in.empty() || b_in.empty(), INVALID_ARGUMENT, "inputs must have rank >= 1, got ",
                  ShapeToString(a_in), " and ", ShapeToString(b_in));
  Shape as = a_in, bs = b_in;
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  s->m = as[as.size() - 2];
  s->k = as.back();
  s->n = bs.back();
  RETURN_ERROR_IF(bs[bs.size() - 2] != s->k, INVALID_ARGUMENT, "inner dimensions differ: A ", ShapeToString(a_in),
                  " x B ", ShapeToString(b_in));
  s->a_batch.assign(as.begin(), as.end() - 2);
  s->b_batch.assign(bs.begin(), bs.end() - 2);
  ASSIGN_OR_RETURN(s->batch, BroadcastShapes(s->a_batch, s->b_batch));
  s->a_batch.insert(s->a_batch.begin(), s->batch.size() - s->a_batch.size(), 1);
  s->b_batch.insert(s->b_batch.begin(), s->batch.size() - s->b_batch.size(), 1);
  s->y_shape = s->batch;
  if (!a1) s->y_shape.push_back(s->m);
  if (!b1) s->y_shape.push_back(s->n);
  return Status::OK();
}

// Widens an 8-bit matrix batch to int32 with zero points subtracted. zp holds 1 value (per tensor), `rows`
// values (per row of A: row_mode) or `cols` values (per column of B), or one such vector per batch matrix.
Status WidenWithZeroPoint(const Tensor& t, const std::vector<int32_t>& zp, bool per_row, int64_t rows, int64_t cols,
                          const char* what, std::vector<int32_t>* out) {
  RETURN_IF_ERROR(ReadInts(t, what, out));
  RETURN_ERROR_IF(!Is8Bit(t.dtype()), INVALID_ARGUMENT, what, " must be int8 or uint8, got ", DataTypeName(t.dtype()));
  if (zp.empty()) return Status::OK();
  const int64_t mat = rows * cols;
  const int64_t mats = mat ? static_cast<int64_t>(out->size()) / mat : 0;
  const int64_t per = per_row ? rows : cols;
  const int64_t zn = static_cast<int64_t>(zp.size());
  RETURN_ERROR_IF(zn != 1 && zn != per && zn != per * mats, INVALID_ARGUMENT, what, " zero point has ", zn,
                  " values; expected 1, ", per, " or ", per * mats);
  for (int64_t b = 0; b < mats; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        int64_t zi = zn == 1 ? 0 : (per_row ? i : j) + (zn == per ? 0 : b * per);
        (*out)[b * mat + i * cols + j] -= zp[zi];
      }
  return Status::OK();
}

// acc[batch..., m, n] = A' x B' in int32 (A', B' already widened).
void IntMatMul(const MatMulShape& s, const std::vector<int32_t>& a, const std::vector<int32_t>& b, int32_t* acc,
               int threads) {
  const size_t r = s.batch.size();
  int64_t total = 1;
  for (int64_t d : s.batch) total *= d;
  std::vector<int64_t> idx(r, 0);
  for (int64_t t = 0; t < total; ++t) {
    int64_t ai = 0, bi = 0;
    for (size_t d = 0; d < r; ++d) {
      ai = ai * s.a_batch[d] + (s.a_batch[d] == 1 ? 0 : idx[d]);
      bi = bi * s.b_batch[d] + (s.b_batch[d] == 1 ? 0 : idx[d]);
    }
    GemmPlain<int32_t>(s.m, s.n, s.k, a.data() + ai * s.m * s.k, b.data() + bi * s.k * s.n, acc + t * s.m * s.n, false,
                       threads);
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < s.batch[d]) break;
      idx[d] = 0;
    }
  }
}

// The float epilogue the level-2 pass fused into a ConvInteger / MatMulInteger (fused_activation.h): Cast + Mul by
// input 4 (one float), then + input 5 (one float per output channel / column), then Relu.
struct FusedEpilogue {
  bool scaled = false, biased = false, relu = false;

  // INVALID_GRAPH for a bias or activation without the scale, or an activation other than Relu.
  Status Parse(const KernelInfo& info) {
    scaled = info.GetInt(kFusedOutputScaleAttr, 0) != 0;
    biased = info.GetInt(kFusedOutputBiasAttr, 0) != 0;
    const std::string act = info.GetString(kFusedActivationAttr, "");
    relu = act == "Relu";
    if ((biased || !act.empty()) && !scaled)
      return info.Error(ErrorCode::INVALID_GRAPH, "internal attributes '", kFusedOutputBiasAttr, "' / '",
                        kFusedActivationAttr, "' need '", kFusedOutputScaleAttr, "'");
    if (!act.empty() && !relu)
      return info.Error(ErrorCode::INVALID_GRAPH, "fused activation '", act, "' is not supported here (Relu only)");
    return Status::OK();
  }

  // Sets out's scale, bias (pointing into input 5) and relu. INVALID_ARGUMENT naming the node for a scale that is
  // not one float or a bias that is not `channels` floats.
  Status Fill(KernelContext& ctx, const std::string& node, int64_t channels, Int8Output* out) const {
    const Tensor* t = ctx.Input(4);
    RETURN_ERROR_IF(!t || t->dtype() != DataType::kFloat || t->NumElements() != 1, INVALID_ARGUMENT, node,
                    ": the fused output scale (input 4) must be one float, got ",
                    t ? DataTypeName(t->dtype()) + ShapeToString(t->shape()) : std::string("none"));
    out->scale = t->data<float>()[0];
    if (biased) {
      const Tensor* b = ctx.Input(5);
      RETURN_ERROR_IF(!b || b->dtype() != DataType::kFloat || b->NumElements() != channels, INVALID_ARGUMENT, node,
                      ": the fused bias (input 5) must be ", channels, " floats, got ",
                      b ? DataTypeName(b->dtype()) + ShapeToString(b->shape()) : std::string("none"));
      out->bias = b->data<float>();
    }
    out->relu = relu;
    return Status::OK();
  }
};

// Writes int32 accumulators to `out` (int32, or float(acc) * scale + bias[channel], Relu): the plain loops' results.
// Element i is in channel (i / plane) % channels.
void StoreAccumulators(const int32_t* acc, int64_t n, int64_t plane, int64_t channels, const Int8Output& out,
                       int threads) {
  if (out.i32 == acc) return;
  ParallelFor(threads, n, 2, [&](int64_t b, int64_t e) {
    if (out.i32) {
      std::copy(acc + b, acc + e, out.i32 + b);
      return;
    }
    for (int64_t i = b; i < e; ++i) {
      float f = static_cast<float>(acc[i]) * out.scale;
      if (out.bias) f = f + out.bias[i / plane % channels];
      if (out.relu) f = f > 0.f ? f : 0.f;
      out.f32[i] = f;
    }
  });
}

// The zero point of a batch of `mats` matrices: 1 value, `per` values (per row of A / column of B, shared by the
// matrices) or `per` values for each matrix.
Status CheckZeroPointCount(const std::vector<int32_t>& zp, int64_t per, int64_t mats, const char* what) {
  const int64_t zn = static_cast<int64_t>(zp.size());
  RETURN_ERROR_IF(zn != 1 && zn != per && zn != per * mats, INVALID_ARGUMENT, what, " zero point has ", zn,
                  " values; expected 1, ", per, " or ", per * mats);
  return Status::OK();
}

// The zero points of matrix `mat` of a batch (CheckZeroPointCount's forms).
std::vector<int32_t> ZeroPointsOf(const std::vector<int32_t>& zp, int64_t per, int64_t mat) {
  if (zp.size() == 1 || static_cast<int64_t>(zp.size()) == per) return zp;
  return std::vector<int32_t>(zp.begin() + mat * per, zp.begin() + (mat + 1) * per);
}

class MatMulIntegerKernel final : public OpKernel {
 public:
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info, bool qlinear) {
    std::unique_ptr<MatMulIntegerKernel> k(new MatMulIntegerKernel(info, qlinear));
    if (!qlinear) RETURN_IF_ERROR(k->epilogue_.Parse(info));
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  MatMulIntegerKernel(const KernelInfo& info, bool qlinear) : qlinear_(qlinear) {
    const Tensor* b = info.ConstantInput(qlinear ? 3 : 1);
    if (b && b->rank() == 2 && Is8Bit(b->dtype()) && b->NumElements() > 0) {
      runner_.SetConstantWeights(*b);
      // A's declared shape static (free dims pinned): the plan is built now, not at the first run.
      const ValueType* at = info.InputType(0);
      if (!at || at->kind != ValueType::Kind::kTensor || !at->has_shape || at->dims.empty()) return;
      int64_t rows = 1;
      for (size_t d = 0; d < at->dims.size(); ++d) {
        if (!at->dims[d].known()) return;
        if (d + 1 < at->dims.size()) rows *= at->dims[d].value;
      }
      if (at->dims.back().value == b->dim(0)) runner_.Prepare(rows, info.num_threads());
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const std::string node = ctx.node().Describe();
    const Tensor* a = ctx.Input(0);
    const Tensor* b = ctx.Input(qlinear_ ? 3 : 1);
    RETURN_ERROR_IF(!a || !b, INVALID_ARGUMENT, node, ": inputs a and b are required");
    RETURN_ERROR_IF(!Is8Bit(a->dtype()) || !Is8Bit(b->dtype()), INVALID_ARGUMENT, node,
                    ": a and b must be int8 or uint8, got ", DataTypeName(a->dtype()), " and ",
                    DataTypeName(b->dtype()));
    MatMulShape s;
    RETURN_IF_ERROR_CTX(ResolveMatMul(a->shape(), b->shape(), &s), node);
    const Tensor* azp_t = ctx.Input(2);
    const Tensor* bzp_t = ctx.Input(qlinear_ ? 5 : 3);
    std::vector<int32_t> azp{0}, bzp{0};
    if (azp_t) {
      RETURN_ERROR_IF(azp_t->dtype() != a->dtype(), INVALID_ARGUMENT, node, ": a's zero point type differs from a");
      RETURN_IF_ERROR_CTX(ReadInts(*azp_t, "a zero point", &azp), node);
    }
    if (bzp_t) {
      RETURN_ERROR_IF(bzp_t->dtype() != b->dtype(), INVALID_ARGUMENT, node, ": b's zero point type differs from b");
      RETURN_IF_ERROR_CTX(ReadInts(*bzp_t, "b zero point", &bzp), node);
    }
    const int64_t a_mats = s.m * s.k != 0 ? a->NumElements() / (s.m * s.k) : 0;
    const int64_t b_mats = s.k * s.n != 0 ? b->NumElements() / (s.k * s.n) : 0;
    RETURN_IF_ERROR_CTX(CheckZeroPointCount(azp, s.m, a_mats, "a"), node);
    RETURN_IF_ERROR_CTX(CheckZeroPointCount(bzp, s.n, b_mats, "b"), node);

    // Scales and the output of QLinearMatMul (checked before any work).
    std::vector<float> a_sc, b_sc, y_sc;
    std::vector<int32_t> y_zp{0};
    DataType q_type = DataType::kInt32;
    if (qlinear_) {
      const Tensor* as = ctx.Input(1);
      const Tensor* bs = ctx.Input(4);
      const Tensor* ys = ctx.Input(6);
      const Tensor* yz = ctx.Input(7);
      RETURN_ERROR_IF(!as || !bs || !ys, INVALID_ARGUMENT, node, ": scales are required");
      RETURN_IF_ERROR_CTX(ReadFloats(*as, "a_scale", &a_sc), node);
      RETURN_IF_ERROR_CTX(ReadFloats(*bs, "b_scale", &b_sc), node);
      RETURN_IF_ERROR_CTX(ReadFloats(*ys, "y_scale", &y_sc), node);
      RETURN_IF_ERROR_CTX(CheckCount(a_sc, s.m, "a_scale", true), node);
      RETURN_IF_ERROR_CTX(CheckCount(b_sc, s.n, "b_scale", true), node);
      RETURN_IF_ERROR_CTX(CheckCount(y_sc, 1, "y_scale", false), node);
      q_type = DataType::kUint8;
      if (yz) {
        RETURN_IF_ERROR_CTX(ReadInts(*yz, "y zero point", &y_zp), node);
        RETURN_IF_ERROR_CTX(CheckCount(y_zp, 1, "y zero point", false), node);
        q_type = yz->dtype();
      }
      RETURN_ERROR_IF(!Is8Bit(q_type), INVALID_ARGUMENT, node, ": y zero point must be int8 or uint8");
    }
    Int8Output out;
    if (epilogue_.scaled) {
      RETURN_IF_ERROR(epilogue_.Fill(ctx, node, s.n, &out));
      q_type = DataType::kFloat;
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, q_type, s.y_shape));
    const int64_t total = y->NumElements();
    if (total == 0) return Status::OK();
    std::vector<int32_t> acc_buf;
    if (qlinear_) {
      acc_buf.resize(static_cast<size_t>(total));
      out.i32 = acc_buf.data();
    } else if (epilogue_.scaled) {
      out.f32 = y->data<float>();
    } else {
      out.i32 = y->data<int32_t>();
    }
    RETURN_IF_ERROR_CTX(Accumulate(*a, *b, s, azp, bzp, out, ctx.num_threads()), node);
    if (!qlinear_) return Status::OK();
    const int32_t* acc = acc_buf.data();
    auto store = [&](auto tag) {
      using Q = decltype(tag);
      Q* yp = y->data<Q>();
      const int64_t rows = total / s.n;
      const float yzf = static_cast<float>(y_zp[0]);
      ParallelFor(ctx.num_threads(), rows, static_cast<double>(s.n * 4), [&](int64_t lo, int64_t hi) {
        std::vector<float> scale(static_cast<size_t>(s.n));
        for (int64_t r = lo; r < hi; ++r) {
          const int64_t i = r % s.m;
          for (int64_t j = 0; j < s.n; ++j)
            scale[j] = a_sc[a_sc.size() == 1 ? 0 : i] * b_sc[b_sc.size() == 1 ? 0 : j] / y_sc[0];
          const int32_t* __restrict ar = acc + r * s.n;
          const float* __restrict sr = scale.data();
          Q* __restrict yr = yp + r * s.n;
          const float zl = yzf;
          for (int64_t j = 0; j < s.n; ++j) yr[j] = QuantizeValue<Q>(static_cast<float>(ar[j]) * sr[j], zl);
        }
      });
    };
    if (q_type == DataType::kInt8) store(int8_t{});
    else store(uint8_t{});
    return Status::OK();
  }

 private:
  // acc[batch..., m, n] = sum_k (a - az) (b - bz): oneDNN's int8 matmul (one product over all rows when B is one
  // matrix, else one per batch matrix), the plain loops when oneDNN refuses.
  Status Accumulate(const Tensor& a, const Tensor& b, const MatMulShape& s, const std::vector<int32_t>& azp,
                    const std::vector<int32_t>& bzp, const Int8Output& out, int threads) const {
    const int64_t total = ShapeSize(s.y_shape);
    if (s.k == 0) {
      const std::vector<int32_t> zeros(static_cast<size_t>(total), 0);
      StoreAccumulators(zeros.data(), total, 1, s.n, out, threads);
      return Status::OK();
    }
    const bool a_signed = a.dtype() == DataType::kInt8, b_signed = b.dtype() == DataType::kInt8;
    const uint8_t* ap = static_cast<const uint8_t*>(a.raw_data());
    const uint8_t* bp = static_cast<const uint8_t*>(b.raw_data());
    bool b_single = true;
    for (int64_t d : s.b_batch) b_single &= d == 1;
    Status st;
    if (b_single) {
      // Every row of A (y's batch is A's) against the one B; A's zero points per row of every matrix.
      const int64_t rows = total / s.n;
      std::vector<int32_t> az = azp;
      if (azp.size() > 1 && static_cast<int64_t>(azp.size()) != rows) {
        az.resize(static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) az[r] = azp[r % s.m];
      }
      st = runner_.Run(ap, a_signed, rows, s.k, s.n, az, bp, b_signed, bzp, out, threads);
    } else {
      const size_t r = s.batch.size();
      int64_t mats = 1;
      for (int64_t d : s.batch) mats *= d;
      std::vector<int64_t> idx(r, 0);
      for (int64_t t = 0; t < mats && st.ok(); ++t) {
        int64_t ai = 0, bi = 0;
        for (size_t d = 0; d < r; ++d) {
          ai = ai * s.a_batch[d] + (s.a_batch[d] == 1 ? 0 : idx[d]);
          bi = bi * s.b_batch[d] + (s.b_batch[d] == 1 ? 0 : idx[d]);
        }
        Int8Output part = out;
        if (out.i32) part.i32 = out.i32 + t * s.m * s.n;
        else part.f32 = out.f32 + t * s.m * s.n;
        st = runner_.Run(ap + ai * s.m * s.k, a_signed, s.m, s.k, s.n, ZeroPointsOf(azp, s.m, ai),
                         bp + bi * s.k * s.n, b_signed, ZeroPointsOf(bzp, s.n, bi), part, threads);
        for (size_t d = r; d-- > 0;) {
          if (++idx[d] < s.batch[d]) break;
          idx[d] = 0;
        }
      }
    }
    if (st.code() != ErrorCode::NOT_IMPLEMENTED) return st;
    std::vector<int32_t> aw, bw, acc_buf;
    RETURN_IF_ERROR(WidenWithZeroPoint(a, azp, true, s.m, s.k, "a", &aw));
    RETURN_IF_ERROR(WidenWithZeroPoint(b, bzp, false, s.k, s.n, "b", &bw));
    int32_t* acc = out.i32;
    if (!acc) {
      acc_buf.resize(static_cast<size_t>(total));
      acc = acc_buf.data();
    }
    IntMatMul(s, aw, bw, acc, threads);
    StoreAccumulators(acc, total, 1, s.n, out, threads);
    return Status::OK();
  }

  bool qlinear_;
  FusedEpilogue epilogue_;
  Int8MatMulRunner runner_;
};

// ---------------------------------------------------------------------------------------------------------------
// ConvInteger / QLinearConv.

class IntConvKernel final : public OpKernel {
 public:
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info, bool qlinear) {
    std::unique_ptr<IntConvKernel> k(new IntConvKernel(qlinear));
    if (!qlinear) RETURN_IF_ERROR(k->epilogue_.Parse(info));
    RETURN_IF_ERROR(k->attrs_.Parse(info, true, false));
    k->group_ = info.GetInt("group", 1);
    if (k->group_ < 1) return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'group' must be >= 1, got ", k->group_);
    const Tensor* w = info.ConstantInput(qlinear ? 3 : 1);
    if (w && w->rank() >= 3 && Is8Bit(w->dtype()) && w->dim(0) > 0 && w->dim(0) % k->group_ == 0 &&
        w->NumElements() > 0) {
      k->runner_.SetConstantWeights(*w, k->group_);
      k->PrepareDeclaredShape(info, *w);
    }
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const std::string node = ctx.node().Describe();
    const Tensor* x = ctx.Input(0);
    const Tensor* w = ctx.Input(qlinear_ ? 3 : 1);
    RETURN_ERROR_IF(!x || !w, INVALID_ARGUMENT, node, ": inputs x and w are required");
    RETURN_ERROR_IF(!Is8Bit(x->dtype()) || !Is8Bit(w->dtype()), INVALID_ARGUMENT, node,
                    ": x and w must be int8 or uint8, got ", DataTypeName(x->dtype()), " and ",
                    DataTypeName(w->dtype()));
    const Shape& xs = x->shape();
    const Shape& ws = w->shape();
    RETURN_ERROR_IF(xs.size() < 3 || ws.size() != xs.size(), INVALID_ARGUMENT, node, ": x ", ShapeToString(xs),
                    " and w ", ShapeToString(ws), " must have one rank >= 3");
    const int64_t n = xs[0], c = xs[1], m = ws[0];
    RETURN_ERROR_IF(c % group_ != 0 || ws[1] * group_ != c || m % group_ != 0, INVALID_ARGUMENT, node, ": x has ", c,
                    " channels, w has shape ", ShapeToString(ws), " and group is ", group_);
    Shape kernel(ws.begin() + 2, ws.end());
    RETURN_ERROR_IF(!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel, INVALID_ARGUMENT, node,
                    ": kernel_shape does not match w's shape ", ShapeToString(ws));
    WindowGeom g;
    RETURN_IF_ERROR_CTX(ResolveWindow(attrs_, Shape(xs.begin() + 2, xs.end()), kernel, false, &g), node);
    Shape y_shape{n, m};
    y_shape.insert(y_shape.end(), g.out.begin(), g.out.end());

    const Tensor* xz_t = ctx.Input(qlinear_ ? 2 : 2);
    const Tensor* wz_t = ctx.Input(qlinear_ ? 5 : 3);
    std::vector<int32_t> xz{0}, wz{0};
    if (xz_t) {
      RETURN_ERROR_IF(xz_t->dtype() != x->dtype(), INVALID_ARGUMENT, node, ": x zero point type differs from x");
      RETURN_IF_ERROR_CTX(ReadInts(*xz_t, "x zero point", &xz), node);
      RETURN_IF_ERROR_CTX(CheckCount(xz, 1, "x zero point", false), node);
    }
    if (wz_t) {
      RETURN_ERROR_IF(wz_t->dtype() != w->dtype(), INVALID_ARGUMENT, node, ": w zero point type differs from w");
      RETURN_IF_ERROR_CTX(ReadInts(*wz_t, "w zero point", &wz), node);
      RETURN_IF_ERROR_CTX(CheckCount(wz, m, "w zero point", true), node);
    }
    std::vector<int32_t> bias;
    if (qlinear_) {
      if (const Tensor* b = ctx.Input(8)) {
        RETURN_ERROR_IF(b->dtype() != DataType::kInt32 || b->NumElements() != m, INVALID_ARGUMENT, node,
                        ": B must be int32 with ", m, " values, got ", DataTypeName(b->dtype()),
                        ShapeToString(b->shape()));
        bias.assign(b->data<int32_t>(), b->data<int32_t>() + m);
      }
    }
    Int8ConvProblem p;
    p.n = n;
    p.c = c;
    p.m = m;
    p.group = group_;
    p.g = g;
    if (!qlinear_) {
      Int8Output out;
      const bool scaled = epilogue_.scaled;
      if (scaled) RETURN_IF_ERROR(epilogue_.Fill(ctx, node, m, &out));
      ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, scaled ? DataType::kFloat : DataType::kInt32, y_shape));
      if (y->NumElements() == 0) return Status::OK();
      if (scaled) out.f32 = y->data<float>();
      else out.i32 = y->data<int32_t>();
      return Accumulate(p, *x, xz[0], *w, wz, nullptr, out, ctx.num_threads()).WithContext(node);
    }
    const Tensor* xs_t = ctx.Input(1);
    const Tensor* ws_t = ctx.Input(4);
    const Tensor* ys_t = ctx.Input(6);
    const Tensor* yz_t = ctx.Input(7);
    RETURN_ERROR_IF(!xs_t || !ws_t || !ys_t, INVALID_ARGUMENT, node, ": scales are required");
    std::vector<float> x_sc, w_sc, y_sc;
    RETURN_IF_ERROR_CTX(ReadFloats(*xs_t, "x_scale", &x_sc), node);
    RETURN_IF_ERROR_CTX(ReadFloats(*ws_t, "w_scale", &w_sc), node);
    RETURN_IF_ERROR_CTX(ReadFloats(*ys_t, "y_scale", &y_sc), node);
    RETURN_IF_ERROR_CTX(CheckCount(x_sc, 1, "x_scale", false), node);
    RETURN_IF_ERROR_CTX(CheckCount(w_sc, m, "w_scale", true), node);
    RETURN_IF_ERROR_CTX(CheckCount(y_sc, 1, "y_scale", false), node);
    std::vector<int32_t> y_zp{0};
    DataType q_type = x->dtype();
    if (yz_t) {
      RETURN_IF_ERROR_CTX(ReadInts(*yz_t, "y zero point", &y_zp), node);
      RETURN_IF_ERROR_CTX(CheckCount(y_zp, 1, "y zero point", false), node);
      q_type = yz_t->dtype();
    }
    RETURN_ERROR_IF(!Is8Bit(q_type), INVALID_ARGUMENT, node, ": y zero point must be int8 or uint8");
    ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, q_type, y_shape));
    const int64_t total = y->NumElements();
    if (total == 0) return Status::OK();
    // Requantized in the convolution's own epilogue (no int32 tensor written and read again); the plain loops
    // below when oneDNN does not take the problem.
    std::vector<float> q_scale(static_cast<size_t>(m));
    for (int64_t ch = 0; ch < m; ++ch) q_scale[ch] = x_sc[0] * w_sc[w_sc.size() == 1 ? 0 : ch] / y_sc[0];
    Int8Output qout;
    qout.q = y->raw_data();
    qout.q_signed = q_type == DataType::kInt8;
    qout.q_scale = q_scale.data();
    qout.q_zero_point = static_cast<float>(y_zp[0]);
    Status fused = runner_.Run(p, *x, xz[0], w, wz, bias.empty() ? nullptr : bias.data(), qout, ctx.num_threads());
    if (fused.code() != ErrorCode::NOT_IMPLEMENTED) return fused.WithContext(node);
    // Every accumulator is written by Accumulate: no zero fill (a 4.6 MB memset per run on a QDQ detector's layer),
    // and a tensor's block comes back from the block cache instead of fresh pages on every run.
    ASSIGN_OR_RETURN(Tensor acc, Tensor::AllocateForOverwrite(DataType::kInt32, {total}));
    Int8Output out;
    out.i32 = acc.data<int32_t>();
    RETURN_IF_ERROR_CTX(
        Accumulate(p, *x, xz[0], *w, wz, bias.empty() ? nullptr : bias.data(), out, ctx.num_threads()), node);
    const int64_t plane = g.OutSize();
    auto store = [&](auto tag) {
      using Q = decltype(tag);
      Q* yp = y->data<Q>();
      const float yzf = static_cast<float>(y_zp[0]);
      const int32_t* ap = acc.data<int32_t>();
      ParallelFor(ctx.num_threads(), n * m * plane, 4.0, [&](int64_t lo, int64_t hi) {
        ForRowParts(lo, hi, plane, [&](int64_t r, int64_t b, int64_t e) {
          const int64_t ch = r % m;
          const float scale = x_sc[0] * w_sc[w_sc.size() == 1 ? 0 : ch] / y_sc[0];
          RequantizeRow(ap + b, yp + b, e - b, scale, yzf);
        });
      });
    };
    if (q_type == DataType::kInt8) store(int8_t{});
    else store(uint8_t{});
    return Status::OK();
  }

 private:
  explicit IntConvKernel(bool qlinear) : qlinear_(qlinear) {}

  // When x's declared shape is static (a model without free dims, or with them pinned), the oneDNN plan for it is
  // built now, at session creation, instead of at the first run (ppocr_v4_det_qdq: 62 plans). Shapes that do not
  // fit are left for Compute to report.
  void PrepareDeclaredShape(const KernelInfo& info, const Tensor& w) const {
    const ValueType* xt = info.InputType(0);
    if (!xt || xt->kind != ValueType::Kind::kTensor || !xt->has_shape || xt->dims.size() != w.rank()) return;
    Shape xs;
    for (const Dim& d : xt->dims) {
      if (!d.known()) return;
      xs.push_back(d.value);
    }
    if (xs[1] != w.dim(1) * group_) return;
    WindowGeom g;
    if (!ResolveWindow(attrs_, Shape(xs.begin() + 2, xs.end()), Shape(w.shape().begin() + 2, w.shape().end()), false,
                       &g)
             .ok())
      return;
    Int8ConvProblem p;
    p.n = xs[0];
    p.c = xs[1];
    p.m = w.dim(0);
    p.group = group_;
    p.g = g;
    runner_.Prepare(p, info.num_threads());
  }

  // acc[n, m, out...] = sum over each window of (x - xz) (w - wz[m]) (+ bias[m]): oneDNN's int8 convolution, the
  // plain loops when oneDNN refuses.
  Status Accumulate(const Int8ConvProblem& p, const Tensor& x, int32_t xz, const Tensor& w,
                    const std::vector<int32_t>& wz, const int32_t* bias, const Int8Output& out, int threads) const {
    Status st = runner_.Run(p, x, xz, &w, wz, bias, out, threads);
    if (st.code() != ErrorCode::NOT_IMPLEMENTED) return st;
    std::vector<int32_t> xw, ww;
    RETURN_IF_ERROR(ReadInts(x, "x", &xw));
    RETURN_IF_ERROR(ReadInts(w, "w", &ww));
    for (int32_t& v : xw) v -= xz;
    const int64_t per_m = p.m ? static_cast<int64_t>(ww.size()) / p.m : 0;
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < per_m; ++j) ww[i * per_m + j] -= wz[wz.size() == 1 ? 0 : i];
    std::vector<int32_t> acc_buf;
    int32_t* acc = out.i32;
    const int64_t total = p.n * p.m * p.g.OutSize();
    if (!acc) {
      acc_buf.resize(static_cast<size_t>(total));
      acc = acc_buf.data();
    }
    RETURN_IF_ERROR(ConvPlain<int32_t>(p.g, p.n, p.c, p.m, p.group, xw.data(), ww.data(), bias, acc, threads));
    StoreAccumulators(acc, total, p.g.OutSize(), p.m, out, threads);
    return Status::OK();
  }

  bool qlinear_;
  FusedEpilogue epilogue_;
  Int8ConvRunner runner_;
  WindowAttrs attrs_;
  int64_t group_ = 1;
};

}  // namespace

// y[i] = table[x[i]]: the table copied to the stack and restrict pointers, so the byte stores are not taken to
// alias the table or x (they otherwise reload every operand per element).
void LookupRow(const uint8_t* __restrict x, uint8_t* __restrict y, int64_t n, const uint8_t* table) {
  alignas(64) uint8_t t[256];
  std::memcpy(t, table, sizeof(t));
  for (int64_t i = 0; i < n; ++i) y[i] = t[x[i]];
}

// epctx.cpu::Lookup8 (qdq_fusion.h): y[i] = table[x[i]] for 8-bit x and y, the table from the fusion pass.
class Lookup8Kernel final : public OpKernel {
 public:
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    std::unique_ptr<Lookup8Kernel> k(new Lookup8Kernel);
    const std::vector<int64_t> table = info.GetInts("table");
    const int64_t to = info.GetInt("to", 0);
    if (table.size() != 256 || (to != static_cast<int64_t>(DataType::kUint8) && to != static_cast<int64_t>(DataType::kInt8)))
      return info.Error(ErrorCode::INVALID_GRAPH, "Lookup8 needs a 'table' of 256 values (got ", table.size(),
                        ") and 'to' uint8 or int8 (got ", to, ")");
    k->to_ = static_cast<DataType>(to);
    for (size_t i = 0; i < 256; ++i) {
      const int64_t v = table[i];
      const bool fits = k->to_ == DataType::kUint8 ? v >= 0 && v <= 255 : v >= -128 && v <= 127;
      if (!fits) return info.Error(ErrorCode::INVALID_GRAPH, "Lookup8 table value ", v, " at ", i, " does not fit ", DataTypeName(k->to_));
      k->table_[i] = static_cast<uint8_t>(v);
    }
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    RETURN_ERROR_IF(!x || !Is8Bit(x->dtype()), INVALID_ARGUMENT, ctx.node().Describe(), ": x must be int8 or uint8");
    ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, to_, x->shape()));
    // Table index: the byte itself (int8 values as their two's-complement byte, as the pass built it).
    const uint8_t* xp = static_cast<const uint8_t*>(x->raw_data());
    uint8_t* yp = static_cast<uint8_t*>(y->raw_data());
    ParallelFor(ctx.num_threads(), x->NumElements(), 1.0, [&](int64_t lo, int64_t hi) {
      LookupRow(xp + lo, yp + lo, hi - lo, table_);
    });
    return Status::OK();
  }

 private:
  DataType to_ = DataType::kUint8;
  uint8_t table_[256];
};

void RegisterQuantKernels(KernelRegistry& r) {
  r.Register(kCpuInternalDomain, "Lookup8", [](const KernelInfo& info) { return Lookup8Kernel::Create(info); });
  r.Register("", "QuantizeLinear", [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    return std::unique_ptr<OpKernel>(new QuantizeKernel(info, false));
  });
  r.Register("", "DequantizeLinear", [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    return std::unique_ptr<OpKernel>(new QuantizeKernel(info, true));
  });
  r.Register("", "DynamicQuantizeLinear", LambdaKernel(DynamicQuantize));
  r.Register("", "MatMulInteger", [](const KernelInfo& info) { return MatMulIntegerKernel::Create(info, false); });
  r.Register("", "QLinearMatMul", [](const KernelInfo& info) { return MatMulIntegerKernel::Create(info, true); });
  r.Register("", "ConvInteger", [](const KernelInfo& info) { return IntConvKernel::Create(info, false); });
  r.Register("", "QLinearConv", [](const KernelInfo& info) { return IntConvKernel::Create(info, true); });
}

}  // namespace nn
}  // namespace epctx
