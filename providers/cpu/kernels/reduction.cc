// Reductions over axes (Reduce*), plus the family's registration entry point. ArgMax/ArgMin, CumSum and TopK live
// in reduction_index.cc, softmax-like and loss kernels in reduction_softmax.cc, normalizations in reduction_norm.cc.
//
// Every reduction is planned as [R0] x [outer, R, inner] after dropping size-1 dims and merging neighbouring dims
// of the same kind (kept/reduced); that covers all patterns up to "reduced, kept, reduced, kept". Anything more
// fragmented falls back to per-output offset tables. Contiguous rows reduce with LaneReduce, strided rows with
// element-wise `omp simd` loops (see reduction_common.h for why).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/reduction_common.h"

namespace epctx {

void RegisterReductionIndexKernels(KernelRegistry& r);    // reduction_index.cc
void RegisterReductionSoftmaxKernels(KernelRegistry& r);  // reduction_softmax.cc
void RegisterReductionNormKernels(KernelRegistry& r);     // reduction_norm.cc

namespace {

using namespace reduction_internal;  // NOLINT: the family's private helpers
using KernelPtr = std::unique_ptr<OpKernel>;

// ---------------------------------------------------------------------------------------------------------------
// Reduce* ops.

enum class Combine { kSum, kProd, kMax, kMin };
enum class MapKind { kId, kAbs, kSquare, kExpShift };
enum class Finish { kNone, kMean, kSqrt, kLog, kLogShift };

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

template <typename A, Combine C>
constexpr A InitValue() {
  if constexpr (C == Combine::kSum) {
    return A(0);
  } else if constexpr (C == Combine::kProd) {
    return A(1);
  } else if constexpr (C == Combine::kMax) {
    return std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity()
                                                : std::numeric_limits<A>::lowest();
  } else {
    return std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max();
  }
}

template <typename A, MapKind M>
inline A MapValue(A v, A shift) {
  if constexpr (M == MapKind::kId) {
    return v;
  } else if constexpr (M == MapKind::kAbs) {
    if constexpr (std::is_unsigned_v<A>) {
      return v;
    } else {
      return v < A(0) ? A(-v) : v;
    }
  } else if constexpr (M == MapKind::kSquare) {
    return v * v;
  } else {
    return FastExp(v - shift);
  }
}

template <typename A, Combine C>
inline A CombineValues(A a, A b) {
  if constexpr (C == Combine::kSum) {
    return a + b;
  } else if constexpr (C == Combine::kProd) {
    return a * b;
  } else if constexpr (C == Combine::kMax) {
    return b > a ? b : a;
  } else {
    return b < a ? b : a;
  }
}

// How the input is walked. Fast form: x[r0][o][r][i] with output acc[o][i] (r0 and r reduced). General form:
// acc[k] combines x[out_base[k] + red_off[j]] over j.
struct ReducePlan {
  int64_t r0 = 1, outer = 1, r = 1, inner = 1;
  bool general = false;
  std::vector<int64_t> out_base, red_off;
  int64_t num_out() const { return general ? static_cast<int64_t>(out_base.size()) : outer * inner; }
  int64_t reduce_count() const { return general ? static_cast<int64_t>(red_off.size()) : r0 * r; }
};

// shape has no zero dims here (empty inputs are handled by the caller).
ReducePlan MakePlan(const Shape& shape, const std::vector<bool>& reduced) {
  struct Group {
    bool reduced;
    int64_t size;
  };
  std::vector<Group> groups;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[d]) {
      groups.back().size *= shape[d];
    } else {
      groups.push_back({reduced[d], shape[d]});
    }
  }
  ReducePlan p;
  size_t g = 0;
  auto take = [&](bool want_reduced, int64_t* dst) {
    if (g < groups.size() && groups[g].reduced == want_reduced) *dst = groups[g++].size;
  };
  // Pattern [R0] [K] [R] [K]; a leading reduced group becomes R0 only for "R K R [K]" (plain "R K" is walked as
  // rows of `inner`, which vectorizes).
  if (groups.size() >= 3 && groups[0].reduced) take(true, &p.r0);
  take(false, &p.outer);
  take(true, &p.r);
  take(false, &p.inner);
  if (g == groups.size()) return p;

  // General: enumerate kept and reduced offsets over the merged groups.
  p = ReducePlan();
  p.general = true;
  std::vector<int64_t> stride(groups.size());
  int64_t s = 1;
  for (size_t i = groups.size(); i-- > 0;) {
    stride[i] = s;
    s *= groups[i].size;
  }
  auto enumerate = [&](bool want_reduced, std::vector<int64_t>* out) {
    out->assign(1, 0);
    for (size_t i = 0; i < groups.size(); ++i) {
      if (groups[i].reduced != want_reduced) continue;
      std::vector<int64_t> next;
      next.reserve(out->size() * groups[i].size);
      for (int64_t base : *out)
        for (int64_t j = 0; j < groups[i].size; ++j) next.push_back(base + j * stride[i]);
      out->swap(next);
    }
  };
  enumerate(false, &p.out_base);
  enumerate(true, &p.red_off);
  return p;
}

// acc[k] = combine over the reduced elements of map(x). shift (may be null) is per output element.
template <typename T, typename A, Combine C, MapKind M>
void RunReduce(const T* x, const ReducePlan& p, const A* shift, A* acc, int num_threads) {
  const A init = InitValue<A, C>();
  if (p.general) {
    const int64_t nred = static_cast<int64_t>(p.red_off.size());
    ParallelFor(num_threads, p.num_out(), static_cast<double>(nred), [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        const T* base = x + p.out_base[k];
        A sh = shift ? shift[k] : A(0);
        A a = init;
        for (int64_t j = 0; j < nred; ++j) a = CombineValues<A, C>(a, MapValue<A, M>(ToC<A>(base[p.red_off[j]]), sh));
        acc[k] = a;
      }
    });
    return;
  }
  const int64_t slice = p.outer * p.r * p.inner;  // stride of r0
  if (p.inner == 1) {
    // Contiguous rows of length r.
    auto row = [&](const T* src, int64_t n, A sh) -> A {
      return LaneReduce<A>(
          n, init, [](A a, A b) { return CombineValues<A, C>(a, b); },
          [&](int64_t i) { return MapValue<A, M>(ToC<A>(src[i]), sh); });
    };
    constexpr int64_t kChunk = 1 << 15;
    if (p.r0 == 1 && p.outer < num_threads && p.r >= 2 * kChunk) {
      // Few long rows: split each row into chunks reduced in parallel, then combine the partials.
      const int64_t nchunk = (p.r + kChunk - 1) / kChunk;
      std::vector<A> partial(static_cast<size_t>(p.outer * nchunk));
      ParallelFor(num_threads, p.outer * nchunk, static_cast<double>(kChunk), [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
          int64_t o = t / nchunk, c = t % nchunk;
          int64_t begin = c * kChunk, end = std::min(p.r, begin + kChunk);
          partial[t] = row(x + o * p.r + begin, end - begin, shift ? shift[o] : A(0));
        }
      });
      for (int64_t o = 0; o < p.outer; ++o) {
        A a = init;
        for (int64_t c = 0; c < nchunk; ++c) a = CombineValues<A, C>(a, partial[o * nchunk + c]);
        acc[o] = a;
      }
      return;
    }
    ParallelFor(num_threads, p.outer, static_cast<double>(p.r * p.r0), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        A sh = shift ? shift[o] : A(0);
        A a = init;
        for (int64_t q = 0; q < p.r0; ++q) a = CombineValues<A, C>(a, row(x + q * slice + o * p.r, p.r, sh));
        acc[o] = a;
      }
    });
    return;
  }
  // Strided: accumulate whole rows of `inner` elements; tasks are (outer, block of inner).
  constexpr int64_t kBlock = 512;
  const int64_t nblock = (p.inner + kBlock - 1) / kBlock;
  ParallelFor(num_threads, p.outer * nblock, static_cast<double>(p.r * p.r0 * std::min(p.inner, kBlock)),
              [&](int64_t b, int64_t e) {
                for (int64_t t = b; t < e; ++t) {
                  int64_t o = t / nblock, i0 = (t % nblock) * kBlock, i1 = std::min(p.inner, i0 + kBlock);
                  A* a = acc + o * p.inner;
                  const A* sh = shift ? shift + o * p.inner : nullptr;
                  for (int64_t i = i0; i < i1; ++i) a[i] = init;
                  for (int64_t q = 0; q < p.r0; ++q) {
                    for (int64_t j = 0; j < p.r; ++j) {
                      const T* src = x + q * slice + (o * p.r + j) * p.inner;
                      if (sh) {
#pragma omp simd
                        for (int64_t i = i0; i < i1; ++i)
                          a[i] = CombineValues<A, C>(a[i], MapValue<A, M>(ToC<A>(src[i]), sh[i]));
                      } else {
#pragma omp simd
                        for (int64_t i = i0; i < i1; ++i)
                          a[i] = CombineValues<A, C>(a[i], MapValue<A, M>(ToC<A>(src[i]), A(0)));
                      }
                    }
                  }
                }
              });
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "ReduceSum";
    case ReduceOp::kMean: return "ReduceMean";
    case ReduceOp::kMax: return "ReduceMax";
    case ReduceOp::kMin: return "ReduceMin";
    case ReduceOp::kProd: return "ReduceProd";
    case ReduceOp::kL1: return "ReduceL1";
    case ReduceOp::kL2: return "ReduceL2";
    case ReduceOp::kLogSum: return "ReduceLogSum";
    case ReduceOp::kLogSumExp: return "ReduceLogSumExp";
    case ReduceOp::kSumSquare: return "ReduceSumSquare";
  }
  return "Reduce";
}

template <typename T, typename A>
T FinishValue(A a, Finish f, int64_t count, A shift) {
  switch (f) {
    case Finish::kNone:
      return FromC<T>(a);
    case Finish::kMean:
      if constexpr (std::is_integral_v<A>) {
        return FromC<T>(count == 0 ? A(0) : static_cast<A>(a / static_cast<A>(count)));
      } else {
        return FromC<T>(a / static_cast<A>(count));
      }
    case Finish::kSqrt:
      return FromC<T>(std::sqrt(static_cast<double>(a)));
    case Finish::kLog:
      return FromC<T>(std::log(static_cast<double>(a)));
    case Finish::kLogShift:
      return FromC<T>(std::log(a) + shift);
  }
  return T();
}

template <typename T>
Status ReduceTyped(KernelContext& ctx, ReduceOp op, const Tensor& x, const std::vector<bool>& reduced, Tensor* y) {
  using A0 = typename AccOf<T>::type;
  // LogSumExp needs a floating accumulator even for integer inputs.
  using AF = std::conditional_t<std::is_integral_v<A0>, double, A0>;
  T* out = y->data<T>();
  const int64_t nout = y->NumElements();
  if (x.NumElements() == 0) {
    // Reduction over an empty set: the identity of the operation (sum 0, prod 1, max -inf, ...).
    T v{};
    switch (op) {
      case ReduceOp::kMax: v = FromC<T>(InitValue<A0, Combine::kMax>()); break;
      case ReduceOp::kMin: v = FromC<T>(InitValue<A0, Combine::kMin>()); break;
      case ReduceOp::kProd: v = FromC<T>(A0(1)); break;
      case ReduceOp::kMean: v = FinishValue<T, AF>(AF(0), Finish::kMean, 0, AF(0)); break;
      case ReduceOp::kLogSum:
      case ReduceOp::kLogSumExp:  // log(0)
        if constexpr (std::is_integral_v<T>) {
          v = std::numeric_limits<T>::lowest();
        } else {
          v = FromC<T>(-std::numeric_limits<double>::infinity());
        }
        break;
      default: v = FromC<T>(A0(0)); break;
    }
    for (int64_t k = 0; k < nout; ++k) out[k] = v;
    return Status::OK();
  }
  ReducePlan plan = MakePlan(x.shape(), reduced);
  const int nt = ctx.num_threads();
  const T* src = x.data<T>();
  const int64_t count = plan.reduce_count();
  auto finish = [&](auto* acc, Finish f, const auto* shift) {
    using A = std::remove_const_t<std::remove_pointer_t<decltype(acc)>>;
    for (int64_t k = 0; k < nout; ++k) out[k] = FinishValue<T, A>(acc[k], f, count, shift ? shift[k] : A(0));
  };
  std::vector<A0> acc(nout);
  const A0* no_shift = nullptr;
  if constexpr (sizeof(T) == 1) {  // 8-bit integers: ReduceMax/ReduceMin only (the caller checks)
    if (op == ReduceOp::kMax) {
      RunReduce<T, A0, Combine::kMax, MapKind::kId>(src, plan, nullptr, acc.data(), nt);
    } else {
      RunReduce<T, A0, Combine::kMin, MapKind::kId>(src, plan, nullptr, acc.data(), nt);
    }
    finish(acc.data(), Finish::kNone, no_shift);
  } else {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMean:
      case ReduceOp::kLogSum:
        RunReduce<T, A0, Combine::kSum, MapKind::kId>(src, plan, nullptr, acc.data(), nt);
        finish(acc.data(),
               op == ReduceOp::kSum ? Finish::kNone : op == ReduceOp::kMean ? Finish::kMean : Finish::kLog, no_shift);
        break;
      case ReduceOp::kMax:
        RunReduce<T, A0, Combine::kMax, MapKind::kId>(src, plan, nullptr, acc.data(), nt);
        finish(acc.data(), Finish::kNone, no_shift);
        break;
      case ReduceOp::kMin:
        RunReduce<T, A0, Combine::kMin, MapKind::kId>(src, plan, nullptr, acc.data(), nt);
        finish(acc.data(), Finish::kNone, no_shift);
        break;
      case ReduceOp::kProd:
        RunReduce<T, A0, Combine::kProd, MapKind::kId>(src, plan, nullptr, acc.data(), nt);
        finish(acc.data(), Finish::kNone, no_shift);
        break;
      case ReduceOp::kL1:
        RunReduce<T, A0, Combine::kSum, MapKind::kAbs>(src, plan, nullptr, acc.data(), nt);
        finish(acc.data(), Finish::kNone, no_shift);
        break;
      case ReduceOp::kL2:
      case ReduceOp::kSumSquare:
        RunReduce<T, A0, Combine::kSum, MapKind::kSquare>(src, plan, nullptr, acc.data(), nt);
        finish(acc.data(), op == ReduceOp::kL2 ? Finish::kSqrt : Finish::kNone, no_shift);
        break;
      case ReduceOp::kLogSumExp: {
        // max first, then log(sum(exp(x - max))) + max.
        std::vector<AF> mx(nout), sum(nout);
        RunReduce<T, AF, Combine::kMax, MapKind::kId>(src, plan, nullptr, mx.data(), nt);
        for (auto& m : mx) m = std::isfinite(m) ? m : AF(0);  // avoids inf - inf; all -inf inputs still give -inf
        RunReduce<T, AF, Combine::kSum, MapKind::kExpShift>(src, plan, mx.data(), sum.data(), nt);
        finish(sum.data(), Finish::kLogShift, mx.data());
        break;
      }
    }
  }
  return Status::OK();
}

// Copies a Float16/BFloat16 tensor into a float tensor of the same size (to_float) or back.
Status ConvertHalf(const Tensor& src, Tensor* dst, bool to_float) {
  const DataType half = to_float ? src.dtype() : dst->dtype();
  return DispatchType<Float16, BFloat16>(half, "conversion", [&](auto tag) {
    using H = decltype(tag);
    const int64_t n = src.NumElements();
    if (to_float) {
      const H* s = src.data<H>();
      float* d = dst->data<float>();
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<float>(s[i]);
    } else {
      const float* s = src.data<float>();
      H* d = dst->data<H>();
      for (int64_t i = 0; i < n; ++i) d[i] = H(s[i]);
    }
    return Status::OK();
  });
}

class ReduceKernel : public OpKernel {
 public:
  static StatusOr<KernelPtr> Create(const KernelInfo& info, ReduceOp op) {
    auto k = std::make_unique<ReduceKernel>();
    k->op_ = op;
    k->keepdims_ = info.GetInt("keepdims", 1) != 0;
    k->noop_with_empty_axes_ = info.GetInt("noop_with_empty_axes", 0) != 0;
    // ReduceSum takes axes as an input from opset 13, the others from opset 18.
    k->axes_from_input_ = info.opset() >= (op == ReduceOp::kSum ? 13 : 18);
    k->axes_ = info.GetInts("axes");
    return KernelPtr(std::move(k));
  }

  Status NoopTransform(KernelContext& ctx, const Tensor& x) const;

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (!x) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input 0 is missing");
    std::vector<int64_t> axes = axes_;
    if (axes_from_input_) {
      axes.clear();
      if (const Tensor* a = ctx.Input(1)) {
        if (a->rank() > 1) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axes must be 1-D, got ", ShapeToString(a->shape()));
        ASSIGN_OR_RETURN(axes, ReadInts(ctx, *a, "axes"));
      }
    }
    const int64_t rank = static_cast<int64_t>(x->rank());
    if (axes.empty() && noop_with_empty_axes_) {
      // Nothing is reduced, but the op's elementwise part still applies (ONNX's reference and ONNX Runtime 1.30):
      // ReduceL1/L2 give |x|, ReduceSumSquare x^2, ReduceLogSum log(x); the others (LogSumExp: log(exp(x))) give x.
      if (op_ == ReduceOp::kL1 || op_ == ReduceOp::kL2 || op_ == ReduceOp::kSumSquare || op_ == ReduceOp::kLogSum)
        return NoopTransform(ctx, *x);
      ctx.SetOutput(0, IValue(*x));
      return Status::OK();
    }
    std::vector<bool> reduced(rank, axes.empty());
    for (int64_t a : axes) {
      int64_t ax = 0;
      RETURN_IF_ERROR(NormalizeAxis(ctx, a, rank, &ax));
      if (reduced[ax]) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axis ", a, " is listed twice in axes");
      reduced[ax] = true;
    }
    Shape out_shape;
    for (int64_t d = 0; d < rank; ++d) {
      if (!reduced[d]) {
        out_shape.push_back(x->dim(d));
      } else if (keepdims_) {
        out_shape.push_back(1);
      }
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), out_shape));
    const DataType dt = x->dtype();
    if (dt == DataType::kFloat16 || dt == DataType::kBFloat16) {
      // 16-bit floats reduce through float copies: one conversion pass instead of a second set of kernels.
      ASSIGN_OR_RETURN(Tensor xf, Tensor::Allocate(DataType::kFloat, x->shape()));
      ASSIGN_OR_RETURN(Tensor yf, Tensor::Allocate(DataType::kFloat, out_shape));
      RETURN_IF_ERROR(ConvertHalf(*x, &xf, true));
      RETURN_IF_ERROR(ReduceTyped<float>(ctx, op_, xf, reduced, &yf));
      return ConvertHalf(yf, y, false);
    }
    if (dt == DataType::kBool && (op_ == ReduceOp::kMax || op_ == ReduceOp::kMin)) {
      // ReduceMax/ReduceMin-20 take bool (any / all): reduced as 0/1 bytes.
      ASSIGN_OR_RETURN(Tensor xb, Tensor::Allocate(DataType::kUint8, x->shape()));
      ASSIGN_OR_RETURN(Tensor yb, Tensor::Allocate(DataType::kUint8, out_shape));
      for (int64_t i = 0; i < x->NumElements(); ++i) xb.data<uint8_t>()[i] = x->data<bool>()[i] ? 1 : 0;
      RETURN_IF_ERROR(ReduceTyped<uint8_t>(ctx, op_, xb, reduced, &yb));
      for (int64_t i = 0; i < y->NumElements(); ++i) y->data<bool>()[i] = yb.data<uint8_t>()[i] != 0;
      return Status::OK();
    }
    if (dt == DataType::kInt8 || dt == DataType::kUint8) {
      if (op_ != ReduceOp::kMax && op_ != ReduceOp::kMin)
        return ctx.Error(ErrorCode::NOT_IMPLEMENTED, ReduceOpName(op_), ": element type ", DataTypeName(dt),
                         " is not supported (only ReduceMax/ReduceMin take 8-bit integers)");
      return DispatchType<int8_t, uint8_t>(dt, ReduceOpName(op_), [&](auto tag) {
        using T = decltype(tag);
        return ReduceTyped<T>(ctx, op_, *x, reduced, y);
      });
    }
    return DispatchType<float, double, int32_t, int64_t, uint32_t, uint64_t>(dt, ReduceOpName(op_), [&](auto tag) {
      using T = decltype(tag);
      return ReduceTyped<T>(ctx, op_, *x, reduced, y);
    });
  }

 private:
  ReduceOp op_ = ReduceOp::kSum;
  bool keepdims_ = true;
  bool noop_with_empty_axes_ = false;
  bool axes_from_input_ = false;
  std::vector<int64_t> axes_;
};

Status ReduceKernel::NoopTransform(KernelContext& ctx, const Tensor& x) const {
  ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, x.dtype(), x.shape()));
  const ReduceOp op = op_;
  auto f = [op](double v) {
    switch (op) {
      case ReduceOp::kL1:
      case ReduceOp::kL2: return std::fabs(v);
      case ReduceOp::kSumSquare: return v * v;
      default: return std::log(v);  // kLogSum
    }
  };
  return DispatchType<EPCTX_FLOAT_TYPES, int32_t, int64_t, uint32_t, uint64_t>(x.dtype(), ReduceOpName(op_), [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    T* dst = y->data<T>();
    for (int64_t i = 0; i < x.NumElements(); ++i) dst[i] = FromC<T>(f(ToC<double>(src[i])));
    return Status::OK();
  });
}

KernelFactory ReduceFactory(ReduceOp op) {
  return [op](const KernelInfo& info) { return ReduceKernel::Create(info, op); };
}

}  // namespace

void RegisterReductionKernels(KernelRegistry& r) {
  r.Register("", "ReduceSum", ReduceFactory(ReduceOp::kSum));
  r.Register("", "ReduceMean", ReduceFactory(ReduceOp::kMean));
  r.Register("", "ReduceMax", ReduceFactory(ReduceOp::kMax));
  r.Register("", "ReduceMin", ReduceFactory(ReduceOp::kMin));
  r.Register("", "ReduceProd", ReduceFactory(ReduceOp::kProd));
  r.Register("", "ReduceL1", ReduceFactory(ReduceOp::kL1));
  r.Register("", "ReduceL2", ReduceFactory(ReduceOp::kL2));
  r.Register("", "ReduceLogSum", ReduceFactory(ReduceOp::kLogSum));
  r.Register("", "ReduceLogSumExp", ReduceFactory(ReduceOp::kLogSumExp));
  r.Register("", "ReduceSumSquare", ReduceFactory(ReduceOp::kSumSquare));
  RegisterReductionIndexKernels(r);
  RegisterReductionSoftmaxKernels(r);
  RegisterReductionNormKernels(r);
}

}  // namespace epctx
