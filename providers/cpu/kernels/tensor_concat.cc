// Kernels that move blocks of rows: Concat, Split, Pad, Compress, ReverseSequence, Trilu.
#include <algorithm>

#include "providers/cpu/kernels/tensor_util.h"

namespace epctx {
namespace tensor_kernels {

namespace {

int64_t Product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t k = begin; k < end; ++k) p *= s[k];
  return p;
}

// ---------------------------------------------------------------- Concat

StatusOr<std::unique_ptr<OpKernel>> CreateConcat(const KernelInfo& info) {
  int64_t axis = 1;
  if (info.opset() >= 4) {
    ASSIGN_OR_RETURN(axis, info.RequireInt("axis"));
  } else {
    axis = info.GetInt("axis", 1);
  }
  return LambdaKernel([axis](KernelContext& ctx) -> Status {
    std::vector<const Tensor*> xs;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, i, "inputs"));
      xs.push_back(x);
    }
    if (xs.empty()) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "needs at least one input");
    const Tensor& x0 = *xs[0];
    const int64_t r = static_cast<int64_t>(x0.rank());
    ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axis, r));
    Shape out_shape = x0.shape();
    out_shape[a] = 0;
    for (const Tensor* x : xs) {
      bool ok = x->dtype() == x0.dtype() && x->rank() == x0.rank();
      for (int64_t k = 0; ok && k < r; ++k) ok = k == a || x->dim(k) == x0.dim(k);
      if (!ok)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "cannot concatenate ", DataTypeName(x->dtype()), " ",
                         ShapeToString(x->shape()), " with ", DataTypeName(x0.dtype()), " ", ShapeToString(x0.shape()),
                         " along axis ", axis);
      out_shape[a] += x->dim(a);
    }
    const DataType dt = x0.dtype();
    ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, dt, out_shape));  // the inputs' blocks cover every row
    if (y->NumElements() == 0) return Status::OK();
    const int64_t outer = Product(out_shape, 0, a), inner = Product(out_shape, a + 1, r);
    const int64_t row = out_shape[a] * inner;
    std::vector<int64_t> block(xs.size()), offset(xs.size());
    for (size_t i = 0, off = 0; i < xs.size(); ++i) {
      block[i] = xs[i]->dim(a) * inner;
      offset[i] = off;
      off += block[i];
    }
    const int64_t n = static_cast<int64_t>(xs.size());
    ParallelFor(ctx.num_threads(), outer * n, static_cast<double>(row) / n, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t o = item / n, i = item - o * n;
        CopyElements(dt, ElementPtr(xs[i]->raw_data(), dt, o * block[i]),
                     ElementPtr(y->raw_data(), dt, o * row + offset[i]), block[i]);
      }
    });
    return Status::OK();
  })(info);
}

// ---------------------------------------------------------------- Split

StatusOr<std::unique_ptr<OpKernel>> CreateSplit(const KernelInfo& info) {
  const int64_t axis = info.GetInt("axis", 0);
  const bool split_input = info.opset() >= 13 || info.opset() == 1;
  const bool has_attr = info.opset() < 13 && info.HasAttr("split");
  const std::vector<int64_t> attr_split = info.GetInts("split");
  // Split-18: num_outputs instead of a split input; chunks of ceil(dim / n), the last one smaller.
  const int64_t num_outputs = info.opset() >= 18 ? info.GetInt("num_outputs", 0) : 0;
  if (num_outputs != 0 && num_outputs != static_cast<int64_t>(info.num_outputs()))
    return info.Error(ErrorCode::INVALID_GRAPH, "num_outputs ", num_outputs, " differs from the node's ",
                      info.num_outputs(), " outputs");
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    const int64_t r = static_cast<int64_t>(x->rank());
    ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axis, r));
    const int64_t dim = x->dim(a);
    const int64_t n = static_cast<int64_t>(ctx.num_outputs());
    std::vector<int64_t> split;
    if (split_input && ctx.Input(1)) {
      ASSIGN_OR_RETURN(split, ReadInts(ctx, *ctx.Input(1), "split"));
    } else if (has_attr) {
      split = attr_split;
    } else if (num_outputs > 0) {
      if (ctx.Input(1))
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "num_outputs and the split input are both given");
      const int64_t chunk = (dim + num_outputs - 1) / num_outputs;
      for (int64_t i = 0; i < num_outputs; ++i) split.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
    } else {
      if (n == 0 || dim % n != 0)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axis ", axis, " of size ", dim, " cannot be split into ", n,
                         " equal parts");
      split.assign(n, dim / n);
    }
    if (static_cast<int64_t>(split.size()) != n)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "split ", ShapeToString(split), " has ", split.size(),
                       " values but the node has ", n, " outputs");
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s < 0 || s > dim)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "split ", ShapeToString(split), " has an invalid size ", s);
      sum += s;
    }
    if (sum != dim)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "split ", ShapeToString(split), " sums to ", sum,
                       " but axis ", axis, " has size ", dim);
    const DataType dt = x->dtype();
    const int64_t outer = Product(x->shape(), 0, a), inner = Product(x->shape(), a + 1, r);
    int64_t off = 0;
    for (int64_t j = 0; j < n; ++j) {
      Shape shape = x->shape();
      shape[a] = split[j];
      ASSIGN_OR_RETURN(Tensor * y, ctx.Output(j, dt, shape));
      const int64_t block = split[j] * inner;
      if (block > 0) {
        ParallelFor(ctx.num_threads(), outer, static_cast<double>(block), [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o)
            CopyElements(dt, ElementPtr(x->raw_data(), dt, o * dim * inner + off * inner),
                         ElementPtr(y->raw_data(), dt, o * block), block);
        });
      }
      off += split[j];
    }
    return Status::OK();
  })(info);
}

// ---------------------------------------------------------------- Pad

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

// Source coordinate of output coordinate o along a dim of size d with `before` padding; -1 = padding value.
inline int64_t PadSource(int64_t o, int64_t before, int64_t d, PadMode mode) {
  int64_t i = o - before;
  if (i >= 0 && i < d) return i;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return i < 0 ? 0 : d - 1;
    case PadMode::kWrap:  // Pad-19
      i %= d;
      return i < 0 ? i + d : i;
    case PadMode::kReflect: {
      if (d == 1) return 0;
      const int64_t period = 2 * (d - 1);
      i %= period;
      if (i < 0) i += period;
      return i < d ? i : period - i;
    }
  }
  return -1;
}

// The padding value as a one-element tensor of the data's type.
StatusOr<Tensor> PadValue(const KernelContext& ctx, DataType dt, const Tensor* value_input, float value_attr) {
  if (value_input) {
    if (value_input->dtype() != dt || value_input->NumElements() != 1)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "constant_value must be one ", DataTypeName(dt),
                       " element, got ", DataTypeName(value_input->dtype()), " ",
                       ShapeToString(value_input->shape()));
    return *value_input;
  }
  ASSIGN_OR_RETURN(Tensor v, Tensor::Allocate(dt, {}));
  if (dt == DataType::kString) return v;
  Status st = DispatchType<EPCTX_NUMERIC_TYPES, bool>(dt, "Pad", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      v.data<T>()[0] = value_attr != 0;
    } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      v.data<T>()[0] = T(value_attr);
    } else {
      v.data<T>()[0] = static_cast<T>(value_attr);
    }
    return Status::OK();
  });
  if (!st.ok()) return st.WithContext(ctx.node().Describe());
  return v;
}

template <typename T>
void PadImpl(const Tensor& x, Tensor* y, const std::vector<int64_t>& before, PadMode mode, const T& value,
             int threads) {
  const size_t r = x.rank();
  const Shape& in = x.shape();
  const Shape& out = y->shape();
  const T* src = x.data<T>();
  T* dst = y->data<T>();
  std::vector<int64_t> in_strides = ContiguousStrides(in);
  const int64_t W = out[r - 1], w = in[r - 1], pb = before[r - 1];
  const int64_t outer = Product(out, 0, r - 1);
  // The interior of a row: output columns [lo, hi) read the source contiguously.
  const int64_t lo = std::clamp<int64_t>(pb, 0, W), hi = std::clamp<int64_t>(pb + w, lo, W);
  ParallelFor(threads, outer, static_cast<double>(W + r), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      T* drow = dst + o * W;
      int64_t src_off = 0;
      bool padded_row = false;
      int64_t q = o;
      for (size_t k = r - 1; k-- > 0;) {
        const int64_t c = q % out[k];
        q /= out[k];
        const int64_t i = PadSource(c, before[k], in[k], mode);
        if (i < 0) {
          padded_row = true;
          break;
        }
        src_off += i * in_strides[k];
      }
      if (padded_row) {
        for (int64_t j = 0; j < W; ++j) drow[j] = value;
        continue;
      }
      const T* srow = src + src_off;
      for (int64_t j = 0; j < lo; ++j) {
        const int64_t i = PadSource(j, pb, w, mode);
        drow[j] = i < 0 ? value : srow[i];
      }
      for (int64_t j = lo; j < hi; ++j) drow[j] = srow[j - pb];
      for (int64_t j = hi; j < W; ++j) {
        const int64_t i = PadSource(j, pb, w, mode);
        drow[j] = i < 0 ? value : srow[i];
      }
    }
  });
}

StatusOr<std::unique_ptr<OpKernel>> CreatePad(const KernelInfo& info) {
  const int opset = info.opset();
  const std::string mode_name = info.GetString("mode", "constant");
  PadMode mode;
  if (mode_name == "constant") {
    mode = PadMode::kConstant;
  } else if (mode_name == "reflect") {
    mode = PadMode::kReflect;
  } else if (mode_name == "edge") {
    mode = PadMode::kEdge;
  } else if (mode_name == "wrap" && opset >= 19) {
    mode = PadMode::kWrap;
  } else {
    return info.Error(ErrorCode::INVALID_GRAPH, "mode must be constant, reflect or edge",
                      opset >= 19 ? " or wrap" : " (wrap from opset 19)", ", got '", mode_name, "'");
  }
  std::vector<int64_t> attr_pads;
  if (opset < 11) {
    const char* name = opset < 2 ? "paddings" : "pads";
    if (!info.HasAttr(name)) return info.Error(ErrorCode::INVALID_GRAPH, "attribute '", name, "' is required");
    attr_pads = info.GetInts(name);
  }
  const float value_attr = info.GetFloat("value", 0.0f);
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    std::vector<int64_t> pads = attr_pads;
    const Tensor* value_input = nullptr;
    if (opset >= 11) {
      ASSIGN_OR_RETURN(const Tensor* tp, RequireInput(ctx, 1, "pads"));
      ASSIGN_OR_RETURN(pads, ReadInts(ctx, *tp, "pads"));
      value_input = ctx.Input(2);
    }
    const size_t r = x->rank();
    if (opset >= 18 && ctx.Input(3)) {  // Pad-18: pads cover only the listed axes, the rest get 0
      ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReadInts(ctx, *ctx.Input(3), "axes"));
      if (pads.size() != 2 * axes.size())
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "pads ", ShapeToString(pads), " must have 2 * ", axes.size(),
                         " values for axes ", ShapeToString(axes));
      std::vector<int64_t> full(2 * r, 0);
      std::vector<bool> seen(r, false);
      for (size_t j = 0; j < axes.size(); ++j) {
        ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axes[j], static_cast<int64_t>(r)));
        if (seen[a]) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axes ", ShapeToString(axes), " repeat axis ", a);
        seen[a] = true;
        full[a] = pads[j];
        full[a + r] = pads[j + axes.size()];
      }
      pads = std::move(full);
    }
    if (pads.size() != 2 * r)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "pads ", ShapeToString(pads), " must have 2 * rank = ", 2 * r,
                       " values for input shape ", ShapeToString(x->shape()));
    Shape out_shape(r);
    std::vector<int64_t> before(r);
    for (size_t k = 0; k < r; ++k) {
      const int64_t b = pads[k], e = pads[k + r], d = x->dim(k);
      const int64_t lim = int64_t{1} << 40;
      if (b < -lim || b > lim || e < -lim || e > lim || d + b + e < 0)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "pads ", ShapeToString(pads), " are invalid for input shape ",
                         ShapeToString(x->shape()));
      out_shape[k] = d + b + e;
      before[k] = b;
      if (mode != PadMode::kConstant && d == 0 && out_shape[k] > 0)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "cannot pad an empty axis ", k, " in ", mode_name, " mode");
    }
    ASSIGN_OR_RETURN(Tensor value, PadValue(ctx, x->dtype(), value_input, value_attr));
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out_shape));
    if (y->NumElements() == 0) return Status::OK();
    if (r == 0) {
      CopyElements(x->dtype(), x->raw_data(), y->raw_data(), 1);
      return Status::OK();
    }
    return WithNode(ctx, DispatchByElementSize(x->dtype(), "Pad", [&](auto tag) {
      using T = decltype(tag);
      PadImpl<T>(*x, y, before, mode, value.data<T>()[0], ctx.num_threads());
      return Status::OK();
    }));
  })(info);
}

// ---------------------------------------------------------------- Compress

StatusOr<std::unique_ptr<OpKernel>> CreateCompress(const KernelInfo& info) {
  const bool has_axis = info.HasAttr("axis");
  const int64_t axis = info.GetInt("axis", 0);
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    ASSIGN_OR_RETURN(const Tensor* c, RequireInput(ctx, 1, "condition"));
    if (c->dtype() != DataType::kBool || c->rank() != 1)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "condition must be a 1-D bool tensor, got ",
                       DataTypeName(c->dtype()), " ", ShapeToString(c->shape()));
    const DataType dt = x->dtype();
    const int64_t r = static_cast<int64_t>(x->rank());
    int64_t a = 0, outer = 1, dim = x->NumElements(), inner = 1;
    if (has_axis) {
      ASSIGN_OR_RETURN(a, NormalizeAxis(ctx, axis, r));
      outer = Product(x->shape(), 0, a);
      dim = x->dim(a);
      inner = Product(x->shape(), a + 1, r);
    }
    std::vector<int64_t> keep;
    const bool* cond = c->data<bool>();
    for (int64_t i = 0; i < c->NumElements(); ++i) {
      if (!cond[i]) continue;
      if (i >= dim)  // as numpy.compress: a true entry past the axis is an index error
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "condition selects index ", i, " but the axis has size ", dim);
      keep.push_back(i);
    }
    Shape out_shape = {static_cast<int64_t>(keep.size())};
    if (has_axis) {
      out_shape = x->shape();
      out_shape[a] = static_cast<int64_t>(keep.size());
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, dt, out_shape));
    const int64_t kept = static_cast<int64_t>(keep.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < kept; ++j)
        CopyElements(dt, ElementPtr(x->raw_data(), dt, (o * dim + keep[j]) * inner),
                     ElementPtr(y->raw_data(), dt, (o * kept + j) * inner), inner);
    return Status::OK();
  })(info);
}

// ---------------------------------------------------------------- ReverseSequence

StatusOr<std::unique_ptr<OpKernel>> CreateReverseSequence(const KernelInfo& info) {
  const int64_t batch_axis = info.GetInt("batch_axis", 1), time_axis = info.GetInt("time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    return info.Error(ErrorCode::INVALID_GRAPH, "batch_axis and time_axis must be 0 and 1 in some order, got ",
                      batch_axis, " and ", time_axis);
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    ASSIGN_OR_RETURN(const Tensor* tl, RequireInput(ctx, 1, "sequence_lens"));
    if (x->rank() < 2)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must have rank >= 2, got shape ", ShapeToString(x->shape()));
    const int64_t B = x->dim(batch_axis), T = x->dim(time_axis);
    ASSIGN_OR_RETURN(std::vector<int64_t> lens, ReadInts(ctx, *tl, "sequence_lens"));
    if (tl->rank() != 1 || static_cast<int64_t>(lens.size()) != B)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "sequence_lens must have shape [", B, "], got ",
                       ShapeToString(tl->shape()));
    for (int64_t l : lens)
      if (l < 0 || l > T)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "sequence length ", l, " is outside [0, ", T, "]");
    const DataType dt = x->dtype();
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, dt, x->shape()));
    const int64_t inner = Product(x->shape(), 2, x->rank());
    auto index = [&](int64_t t, int64_t b) { return (time_axis == 0 ? t * B + b : b * T + t) * inner; };
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t s = t < lens[b] ? lens[b] - 1 - t : t;
        CopyElements(dt, ElementPtr(x->raw_data(), dt, index(s, b)), ElementPtr(y->raw_data(), dt, index(t, b)),
                     inner);
      }
    return Status::OK();
  })(info);
}

// ---------------------------------------------------------------- Trilu

StatusOr<std::unique_ptr<OpKernel>> CreateTrilu(const KernelInfo& info) {
  const bool upper = info.GetInt("upper", 1) != 0;
  return LambdaKernel([=](KernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    if (x->rank() < 2)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must have rank >= 2, got shape ", ShapeToString(x->shape()));
    int64_t k = 0;
    if (const Tensor* tk = ctx.Input(1)) {
      ASSIGN_OR_RETURN(k, ReadScalarInt(ctx, *tk, "k"));
    }
    const DataType dt = x->dtype();
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, dt, x->shape()));
    const int64_t H = x->dim(x->rank() - 2), W = x->dim(x->rank() - 1);
    const int64_t batch = Product(x->shape(), 0, x->rank() - 2);
    k = std::clamp<int64_t>(k, -H - 1, W + 1);
    // Row i keeps columns j with j - i >= k (upper) or j - i <= k (lower); the rest stays zero.
    for (int64_t m = 0; m < batch; ++m)
      for (int64_t i = 0; i < H; ++i) {
        const int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, W) : 0;
        const int64_t hi = upper ? W : std::clamp<int64_t>(i + k + 1, 0, W);
        const int64_t row = (m * H + i) * W;
        if (hi > lo)
          CopyElements(dt, ElementPtr(x->raw_data(), dt, row + lo), ElementPtr(y->raw_data(), dt, row + lo), hi - lo);
      }
    return Status::OK();
  })(info);
}

}  // namespace

void RegisterConcatKernels(KernelRegistry& r) {
  r.Register("", "Concat", CreateConcat);
  r.Register("", "Split", CreateSplit);
  r.Register("", "Pad", CreatePad);
  r.Register("", "Compress", CreateCompress);
  r.Register("", "ReverseSequence", CreateReverseSequence);
  r.Register("", "Trilu", CreateTrilu);
}

}  // namespace tensor_kernels
}  // namespace epctx
