// Broadcasting elementwise kernels: arithmetic (Add, Sub, Mul, Div, Mod, Pow), comparisons, logic, BitShift,
// PRelu, the variadic Max/Min/Sum/Mean, and Where.
//
// The output is walked as runs of a BroadcastPlan (broadcast.h); inside a run each operand either steps or stays
// put, which gives four plain loops per op (vector/vector, vector/scalar, scalar/vector, fill) that g++ vectorizes
// under `#pragma omp simd`. Integer arithmetic wraps (done in unsigned types, never signed overflow); integer
// division or modulo by zero is an INVALID_ARGUMENT error rather than a trap.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/elementwise_types.h"
#include "providers/cpu/kernels/broadcast.h"

namespace epctx {

namespace {


// Reads an element in compute type C without copying when no conversion is needed (strings).
template <typename C, typename T>
inline decltype(auto) Load(const T& v) {
  if constexpr (std::is_same_v<C, T>) {
    return (v);
  } else {
    return static_cast<C>(v);
  }
}

// Unsigned type wide enough that arithmetic on it neither promotes to int nor overflows in a signed type.
template <typename C>
using WrapT = std::make_unsigned_t<std::conditional_t<(sizeof(C) < 4), int32_t, C>>;

template <typename C>
inline C WrapNeg(C a) {
  return static_cast<C>(WrapT<C>(0) - static_cast<WrapT<C>>(a));
}

// double -> integer without undefined behaviour: NaN gives 0, out-of-range values saturate.
template <typename T>
inline T SaturateCast(double v) {
  if constexpr (std::is_integral_v<T>) {
    if (!(v == v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

// One run: y[i] = op(a[sa ? i : 0], b[sb ? i : 0]) for i < n. A and B are the operand element types, R the result's;
// op works on the compute types.
template <typename A, typename B, typename R, typename Op>
void BinaryRun(const Op& op_ref, const A* a, bool sa, const B* b, bool sb, R* y, int64_t n) {
  const Op op = op_ref;  // captures in registers, not reloaded after each store (see MapChunk in the unary file)
  using CA = ComputeT<A>;
  using CB = ComputeT<B>;
  if constexpr (std::is_trivially_copyable_v<R> && std::is_trivially_copyable_v<A>) {
    if (sa && sb) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<R>(op(Load<CA>(a[i]), Load<CB>(b[i])));
    } else if (sa) {
      const CB bv = Load<CB>(b[0]);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<R>(op(Load<CA>(a[i]), bv));
    } else if (sb) {
      const CA av = Load<CA>(a[0]);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = static_cast<R>(op(av, Load<CB>(b[i])));
    } else {
      const R v = static_cast<R>(op(Load<CA>(a[0]), Load<CB>(b[0])));
      std::fill_n(y, n, v);
    }
  } else {  // strings
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<R>(op(Load<CA>(a[sa ? i : 0]), Load<CB>(b[sb ? i : 0])));
  }
}

// y = op(a, b) over a two-input plan (inputs in the order a, b), in parallel.
template <typename A, typename B, typename R, typename Op>
void ApplyBinary(const BroadcastPlan& plan, const Op& op, const A* a, const B* b, R* y, int threads, double cost) {
  if (plan.out_size() == 0) return;
  const bool sa = plan.steps(0), sb = plan.steps(1);
  const int64_t len = plan.run_length();
  if (plan.num_runs() == 1) {
    ParallelFor(threads, len, cost, [&](int64_t b0, int64_t e0) {
      BinaryRun(op, sa ? a + b0 : a, sa, sb ? b + b0 : b, sb, y + b0, e0 - b0);
    });
    return;
  }
  ParallelFor(threads, plan.num_runs(), cost * static_cast<double>(len), [&](int64_t r0, int64_t r1) {
    plan.ForEachRun(r0, r1, [&](int64_t out, const int64_t* off) {
      BinaryRun(op, a + off[0], sa, b + off[1], sb, y + out, len);
    });
  });
}

StatusOr<const Tensor*> RequireInput(const KernelContext& ctx, size_t i) {
  const Tensor* t = ctx.Input(i);
  if (t == nullptr) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "required input ", i, " is missing");
  return t;
}

StatusOr<BroadcastPlan> MakePlan(const KernelContext& ctx, const std::vector<const Shape*>& shapes) {
  auto plan = BroadcastPlan::Make(shapes);
  if (!plan.ok()) return ctx.Error(plan.status().code(), plan.status().message());
  return plan;
}
StatusOr<BroadcastPlan> MakePlanTo(const KernelContext& ctx, const std::vector<const Shape*>& shapes, const Shape& out) {
  auto plan = BroadcastPlan::MakeTo(shapes, out);
  if (!plan.ok()) return ctx.Error(plan.status().code(), plan.status().message());
  return plan;
}

// Broadcasting of opsets 1..6 (Add, Sub, Mul, Div, Pow, logic and comparisons): without `broadcast` = 1 the
// shapes must be equal; with it, B is aligned to A at `axis` (default: trailing dims) and the result has A's shape.
struct LegacyBroadcast {
  bool enabled = false;  // opset < 7
  bool broadcast = false;
  bool has_axis = false;
  int64_t axis = 0;

  explicit LegacyBroadcast(const KernelInfo& info) {
    enabled = info.opset() < 7;
    broadcast = info.GetInt("broadcast", 0) != 0;
    has_axis = info.HasAttr("axis");
    axis = info.GetInt("axis", 0);
  }

  // The plan for a (A, B) pair under these rules.
  StatusOr<BroadcastPlan> Plan(const KernelContext& ctx, const Shape& a, const Shape& b) const {
    if (!enabled) return MakePlan(ctx, {&a, &b});
    if (!broadcast) {
      if (a != b)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "shapes ", ShapeToString(a), " and ", ShapeToString(b),
                         " differ and the node (opset < 7) does not set broadcast=1");
      return MakePlan(ctx, {&a, &b});
    }
    const int64_t ra = static_cast<int64_t>(a.size()), rb = static_cast<int64_t>(b.size());
    int64_t ax = has_axis ? axis : ra - rb;
    if (ax < 0) ax += ra;
    if (ax < 0 || ax > ra - rb)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "cannot broadcast ", ShapeToString(b), " into ", ShapeToString(a),
                       " at axis ", axis);
    Shape padded(static_cast<size_t>(ra), 1);
    for (int64_t i = 0; i < rb; ++i) padded[static_cast<size_t>(ax + i)] = b[static_cast<size_t>(i)];
    auto plan = BroadcastPlan::MakeTo({&a, &padded}, a);
    if (!plan.ok()) return ctx.Error(plan.status().code(), plan.status().message());
    return plan;
  }
};

Status CheckSameType(const KernelContext& ctx, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "inputs have different element types (", DataTypeName(a.dtype()),
                     " and ", DataTypeName(b.dtype()), ")");
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------------------------
// Ops. Each functor takes compute-type operands; `kBoolOut` marks comparison/logic ops.

// Generic two-input kernel with the operands' common element type among Ts. MakeOp(info) builds the functor;
// Check(ctx, A, B) (optional) validates data before the loop (integer division by zero).
template <bool kBoolOut, typename Op, typename... Ts>
class BinaryKernel final : public OpKernel {
 public:
  BinaryKernel(const KernelInfo& info, Op op, double cost, bool int_divisor_check)
      : legacy_(info), op_(std::move(op)), cost_(cost), int_divisor_check_(int_divisor_check) {}

  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(const Tensor* A, RequireInput(ctx, 0));
    ASSIGN_OR_RETURN(const Tensor* B, RequireInput(ctx, 1));
    RETURN_IF_ERROR(CheckSameType(ctx, *A, *B));
    const Node& what = ctx.node();  // described only in an error
    return DispatchType<Ts...>(A->dtype(), what, [&](auto tag) -> Status {
      using T = decltype(tag);
      using R = std::conditional_t<kBoolOut, bool, T>;
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        if (int_divisor_check_) {
          const T* b = B->data<T>();
          const int64_t nb = B->NumElements();
          for (int64_t i = 0; i < nb; ++i)
            if (b[i] == 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "integer division by zero (divisor element ", i, ")");
        }
      }
      ASSIGN_OR_RETURN(BroadcastPlan plan, legacy_.Plan(ctx, A->shape(), B->shape()));
      // ApplyBinary writes every element of the broadcast output.
      ASSIGN_OR_RETURN(Tensor * Y, ctx.OutputForOverwrite(0, DataTypeFor<R>(), plan.out_shape()));
      ApplyBinary(plan, op_, A->data<T>(), B->data<T>(), Y->data<R>(), ctx.num_threads(), cost_);
      return Status::OK();
    });
  }

 private:
  LegacyBroadcast legacy_;
  Op op_;
  double cost_;
  bool int_divisor_check_;
};

template <bool kBoolOut, typename... Ts, typename MakeOp>
KernelFactory BinaryFactory(MakeOp make_op, double cost = 1, bool int_divisor_check = false) {
  return [make_op, cost, int_divisor_check](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    auto op = make_op(info);
    return std::unique_ptr<OpKernel>(
        new BinaryKernel<kBoolOut, decltype(op), Ts...>(info, std::move(op), cost, int_divisor_check));
  };
}

template <bool kBoolOut, typename... Ts, typename Fn>
KernelFactory BinaryFactoryFn(Fn fn, double cost = 1, bool int_divisor_check = false) {
  return BinaryFactory<kBoolOut, Ts...>([fn](const KernelInfo&) { return fn; }, cost, int_divisor_check);
}

#define EW_FLOATS EPCTX_FLOAT_TYPES
#define EW_NUMERIC EPCTX_NUMERIC_TYPES
#define EW_UNSIGNED uint8_t, uint16_t, uint32_t, uint64_t

struct AddOp {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      return static_cast<C>(static_cast<WrapT<C>>(a) + static_cast<WrapT<C>>(b));
    } else {
      return a + b;
    }
  }
};
struct SubOp {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      return static_cast<C>(static_cast<WrapT<C>>(a) - static_cast<WrapT<C>>(b));
    } else {
      return a - b;
    }
  }
};
struct MulOp {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      return static_cast<C>(static_cast<WrapT<C>>(a) * static_cast<WrapT<C>>(b));
    } else {
      return a * b;
    }
  }
};
// Integer division truncates toward zero. Zero divisors are rejected before the loop; the guard below only keeps
// the loop free of traps. INT_MIN / -1 wraps to INT_MIN.
struct DivOp {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return WrapNeg(a);
      }
      return b == 0 ? C(0) : static_cast<C>(a / b);
    } else {
      return a / b;
    }
  }
};
// fmod = 1: the result has the dividend's sign (C fmod / %). fmod = 0: the divisor's sign (Python's %).
struct ModOp {
  bool fmod;
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return 0;
        C r = static_cast<C>(a % b);
        if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
        return r;
      } else {
        return static_cast<C>(a % b);
      }
    } else {
      C r = std::fmod(a, b);
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
};
// NaN propagates (like numpy's maximum/minimum).
struct MaxOp {
  template <typename C>
  C operator()(C a, C b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct MinOp {
  template <typename C>
  C operator()(C a, C b) const {
    return (a < b || a != a) ? a : b;
  }
};

// Integer power with wrap-around; negative exponents give the truncated reciprocal (0 unless |base| == 1).
template <typename T, typename E>
T IntPow(T base, E exp) {
  if constexpr (std::is_signed_v<E>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if constexpr (std::is_signed_v<T>) {
        if (base == -1) return (exp % 2 == 0) ? T(1) : T(-1);
      }
      return 0;
    }
  }
  using U = WrapT<T>;
  U result = 1, b = static_cast<U>(base);
  using UE = std::make_unsigned_t<E>;
  for (UE e = static_cast<UE>(exp); e != 0; e >>= 1) {
    if (e & 1) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
  }
  return static_cast<T>(result);
}

struct PowOp {
  template <typename CA, typename CB>
  CA operator()(CA base, CB exp) const {
    if constexpr (std::is_integral_v<CA> && std::is_integral_v<CB>) {
      return IntPow(base, exp);
    } else if constexpr (std::is_integral_v<CA>) {
      return SaturateCast<CA>(std::pow(static_cast<double>(base), static_cast<double>(exp)));
    } else if constexpr (std::is_same_v<CA, float> && std::is_same_v<CB, float>) {
      return std::pow(base, exp);
    } else {
      return static_cast<CA>(std::pow(static_cast<double>(base), static_cast<double>(exp)));
    }
  }
};

// Pow: base type T and exponent type T1 may differ; the result has the base's type.
class PowKernel final : public OpKernel {
 public:
  explicit PowKernel(const KernelInfo& info) : legacy_(info) {}
  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(const Tensor* A, RequireInput(ctx, 0));
    ASSIGN_OR_RETURN(const Tensor* B, RequireInput(ctx, 1));
    const Node& what = ctx.node();  // described only in an error
    ASSIGN_OR_RETURN(BroadcastPlan plan, legacy_.Plan(ctx, A->shape(), B->shape()));
    return DispatchType<int32_t, int64_t, EW_FLOATS>(A->dtype(), what, [&](auto ta) -> Status {
      using T = decltype(ta);
      return DispatchType<EW_NUMERIC>(B->dtype(), what, [&](auto tb) -> Status {
        using E = decltype(tb);
        ASSIGN_OR_RETURN(Tensor * Y, ctx.Output(0, A->dtype(), plan.out_shape()));
        const T* a = A->data<T>();
        T* y = Y->data<T>();
        // Common exponents: x^2, x^3 and x^1 without a pow call (x^3 as two products, as ONNX Runtime does).
        if constexpr (kIsFloatLike<T>) {
          if (plan.is_scalar(1) && B->NumElements() == 1 && A->shape() == plan.out_shape()) {
            const double e = static_cast<double>(static_cast<ComputeT<E>>(B->data<E>()[0]));
            using C = ComputeT<T>;
            const int64_t n = plan.out_size();
            if (e == 2.0) {
              ParallelFor(ctx.num_threads(), n, 1, [&](int64_t b0, int64_t e0) {
                for (int64_t i = b0; i < e0; ++i) {
                  const C v = static_cast<C>(a[i]);
                  y[i] = static_cast<T>(v * v);
                }
              });
              return Status::OK();
            }
            if (e == 3.0) {  // the tanh-form GELU's x^3 (std::pow per element ran 0.16x ORT, issue 24)
              ParallelFor(ctx.num_threads(), n, 1, [&](int64_t b0, int64_t e0) {
                for (int64_t i = b0; i < e0; ++i) {
                  const C v = static_cast<C>(a[i]);
                  y[i] = static_cast<T>(v * v * v);
                }
              });
              return Status::OK();
            }
            if (e == 1.0) {
              std::copy_n(a, n, y);
              return Status::OK();
            }
          }
        }
        ApplyBinary(plan, PowOp{}, a, B->data<E>(), y, ctx.num_threads(), 20);
        return Status::OK();
      });
    });
  }

 private:
  LegacyBroadcast legacy_;
};

// BitShift: unsigned types, shifts of the type's width or more give 0.
template <bool kLeft>
struct ShiftOp {
  template <typename C>
  C operator()(C a, C b) const {
    constexpr C kBits = static_cast<C>(sizeof(C) * 8);
    if constexpr (kLeft) {
      return b >= kBits ? C(0) : static_cast<C>(static_cast<WrapT<C>>(a) << b);
    } else {
      return b >= kBits ? C(0) : static_cast<C>(a >> b);
    }
  }
};

StatusOr<std::unique_ptr<OpKernel>> MakeBitShift(const KernelInfo& info) {
  const std::string dir = info.GetString("direction", "");
  if (dir == "LEFT") return BinaryFactoryFn<false, EW_UNSIGNED>(ShiftOp<true>{})(info);
  if (dir == "RIGHT") return BinaryFactoryFn<false, EW_UNSIGNED>(ShiftOp<false>{})(info);
  return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"", dir, "\"");
}

// PRelu: slope broadcasts to X (unidirectionally); y = x < 0 ? slope * x : x. Before opset 7 the slope was
// per channel: a 1-D slope of X's dim 1 size applies along axis 1.
Status PReluCompute(KernelContext& ctx) {
  ASSIGN_OR_RETURN(const Tensor* X, RequireInput(ctx, 0));
  ASSIGN_OR_RETURN(const Tensor* S, RequireInput(ctx, 1));
  RETURN_IF_ERROR(CheckSameType(ctx, *X, *S));
  const Node& what = ctx.node();  // described only in an error
  return DispatchType<EW_FLOATS, int32_t, int64_t, uint32_t, uint64_t>(X->dtype(), what, [&](auto tag) -> Status {
    using T = decltype(tag);
    Shape slope_shape = S->shape();
    if (ctx.node().opset < 7 && slope_shape.size() == 1 && X->rank() >= 2 && slope_shape[0] == X->dim(1) &&
        slope_shape[0] != 1) {
      slope_shape.resize(X->rank() - 1, 1);
    }
    ASSIGN_OR_RETURN(BroadcastPlan plan, MakePlanTo(ctx, {&X->shape(), &slope_shape}, X->shape()));
    ASSIGN_OR_RETURN(Tensor * Y, ctx.Output(0, X->dtype(), X->shape()));
    auto op = [](auto x, auto s) {
      using C = decltype(x);
      if constexpr (std::is_integral_v<C>) {
        return x < 0 ? static_cast<C>(static_cast<WrapT<C>>(s) * static_cast<WrapT<C>>(x)) : x;
      } else {
        return x < 0 ? s * x : x;
      }
    };
    ApplyBinary(plan, op, X->data<T>(), S->data<T>(), Y->data<T>(), ctx.num_threads(), 1);
    return Status::OK();
  });
}

// Max, Min, Sum, Mean: fold the inputs pairwise into the broadcast output (one pass per input after the first two).
template <typename Op, bool kMean>
Status VariadicCompute(KernelContext& ctx, const Op& op) {
  const size_t n = ctx.num_inputs();
  RETURN_ERROR_IF(n == 0, INVALID_ARGUMENT, ctx.node().Describe(), ": needs at least one input");
  std::vector<const Tensor*> ins(n);
  std::vector<const Shape*> shapes(n);
  for (size_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(ins[i], RequireInput(ctx, i));
    RETURN_IF_ERROR(CheckSameType(ctx, *ins[0], *ins[i]));
    shapes[i] = &ins[i]->shape();
  }
  const Node& what = ctx.node();  // described only in an error
  return DispatchType<EW_NUMERIC>(ins[0]->dtype(), what, [&](auto tag) -> Status {
    using T = decltype(tag);
    using C = ComputeT<T>;
    if (n == 1) {  // the sum, max, min or mean of one tensor is that tensor
      ctx.SetOutput(0, IValue(*ins[0]));
      return Status::OK();
    }
    auto out_shape = BroadcastShapes(shapes);
    if (!out_shape.ok()) return ctx.Error(out_shape.status().code(), out_shape.status().message());
    ASSIGN_OR_RETURN(Tensor * Y, ctx.Output(0, ins[0]->dtype(), *out_shape));
    T* y = Y->data<T>();
    const int threads = ctx.num_threads();
    ASSIGN_OR_RETURN(BroadcastPlan first, MakePlanTo(ctx, {shapes[0], shapes[1]}, *out_shape));
    ApplyBinary(first, op, ins[0]->data<T>(), ins[1]->data<T>(), y, threads, 1);
    for (size_t i = 2; i < n; ++i) {
      ASSIGN_OR_RETURN(BroadcastPlan plan, MakePlanTo(ctx, {&Y->shape(), shapes[i]}, *out_shape));
      ApplyBinary(plan, op, static_cast<const T*>(y), ins[i]->data<T>(), y, threads, 1);
    }
    if constexpr (kMean) {
      const C inv = static_cast<C>(n);
      const int64_t total = Y->NumElements();
#pragma omp simd
      for (int64_t i = 0; i < total; ++i) y[i] = static_cast<T>(static_cast<C>(y[i]) / inv);
    }
    return Status::OK();
  });
}

// Where(cond, X, Y): three-way broadcast; any element type.
Status WhereCompute(KernelContext& ctx) {
  ASSIGN_OR_RETURN(const Tensor* Cd, RequireInput(ctx, 0));
  ASSIGN_OR_RETURN(const Tensor* X, RequireInput(ctx, 1));
  ASSIGN_OR_RETURN(const Tensor* Yv, RequireInput(ctx, 2));
  RETURN_ERROR_IF(Cd->dtype() != DataType::kBool, INVALID_ARGUMENT, ctx.node().Describe(),
                  ": condition must be bool, got ", DataTypeName(Cd->dtype()));
  RETURN_IF_ERROR(CheckSameType(ctx, *X, *Yv));
  ASSIGN_OR_RETURN(BroadcastPlan plan, MakePlan(ctx, {&Cd->shape(), &X->shape(), &Yv->shape()}));
  const Node& what = ctx.node();  // described only in an error
  return DispatchType<EPCTX_ALL_TYPES>(X->dtype(), what, [&](auto tag) -> Status {
    using T = decltype(tag);
    ASSIGN_OR_RETURN(Tensor * Out, ctx.Output(0, X->dtype(), plan.out_shape()));
    if (plan.out_size() == 0) return Status::OK();
    const bool* c = Cd->data<bool>();
    const T* x = X->data<T>();
    const T* yv = Yv->data<T>();
    T* out = Out->data<T>();
    const int64_t len = plan.run_length();
    const int64_t sc = plan.steps(0), sx = plan.steps(1), sy = plan.steps(2);
    ParallelFor(ctx.num_threads(), plan.num_runs(), static_cast<double>(len), [&](int64_t r0, int64_t r1) {
      plan.ForEachRun(r0, r1, [&](int64_t o, const int64_t* off) {
        const bool* cr = c + off[0];
        const T* xr = x + off[1];
        const T* yr = yv + off[2];
        T* dst = out + o;
        if constexpr (std::is_trivially_copyable_v<T>) {
          if (sc && sx && sy) {
#pragma omp simd
            for (int64_t i = 0; i < len; ++i) dst[i] = cr[i] ? xr[i] : yr[i];
          } else {
            for (int64_t i = 0; i < len; ++i) dst[i] = cr[i * sc] ? xr[i * sx] : yr[i * sy];
          }
        } else {
          for (int64_t i = 0; i < len; ++i) dst[i] = cr[i * sc] ? xr[i * sx] : yr[i * sy];
        }
      });
    });
    return Status::OK();
  });
}

}  // namespace

void RegisterElementwiseBinaryKernels(KernelRegistry& r) {
  r.Register("", "Add", BinaryFactoryFn<false, EW_NUMERIC>(AddOp{}));
  r.Register("", "Sub", BinaryFactoryFn<false, EW_NUMERIC>(SubOp{}));
  r.Register("", "Mul", BinaryFactoryFn<false, EW_NUMERIC>(MulOp{}));
  r.Register("", "Div", BinaryFactoryFn<false, EW_NUMERIC>(DivOp{}, 4, /*int_divisor_check=*/true));
  r.Register("", "Mod", BinaryFactory<false, EW_NUMERIC>(
                            [](const KernelInfo& info) { return ModOp{info.GetInt("fmod", 0) != 0}; }, 10,
                            /*int_divisor_check=*/true));
  r.Register("", "Pow", MakeFactory<PowKernel>());
  r.Register("", "Equal", BinaryFactoryFn<true, EW_NUMERIC, bool, std::string>(
                              [](const auto& a, const auto& b) { return a == b; }));
  r.Register("", "Less", BinaryFactoryFn<true, EW_NUMERIC>([](auto a, auto b) { return a < b; }));
  r.Register("", "LessOrEqual", BinaryFactoryFn<true, EW_NUMERIC>([](auto a, auto b) { return a <= b; }));
  r.Register("", "Greater", BinaryFactoryFn<true, EW_NUMERIC>([](auto a, auto b) { return a > b; }));
  r.Register("", "GreaterOrEqual", BinaryFactoryFn<true, EW_NUMERIC>([](auto a, auto b) { return a >= b; }));
  r.Register("", "And", BinaryFactoryFn<true, bool>([](bool a, bool b) { return a && b; }));
  r.Register("", "Or", BinaryFactoryFn<true, bool>([](bool a, bool b) { return a || b; }));
  r.Register("", "Xor", BinaryFactoryFn<true, bool>([](bool a, bool b) { return a != b; }));
  r.Register("", "BitShift", MakeBitShift);
#define EW_INTEGERS int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
  r.Register("", "BitwiseAnd", BinaryFactoryFn<false, EW_INTEGERS>([](auto a, auto b) { return a & b; }));
  r.Register("", "BitwiseOr", BinaryFactoryFn<false, EW_INTEGERS>([](auto a, auto b) { return a | b; }));
  r.Register("", "BitwiseXor", BinaryFactoryFn<false, EW_INTEGERS>([](auto a, auto b) { return a ^ b; }));
#undef EW_INTEGERS
  // StringConcat-20: elementwise concatenation with broadcasting.
  r.Register("", "StringConcat",
             BinaryFactoryFn<false, std::string>([](const std::string& a, const std::string& b) { return a + b; }), 20);
  r.Register("", "PRelu", LambdaKernel(PReluCompute));
  r.Register("", "Max", LambdaKernel([](KernelContext& ctx) { return VariadicCompute<MaxOp, false>(ctx, MaxOp{}); }));
  r.Register("", "Min", LambdaKernel([](KernelContext& ctx) { return VariadicCompute<MinOp, false>(ctx, MinOp{}); }));
  r.Register("", "Sum", LambdaKernel([](KernelContext& ctx) { return VariadicCompute<AddOp, false>(ctx, AddOp{}); }));
  r.Register("", "Mean", LambdaKernel([](KernelContext& ctx) { return VariadicCompute<AddOp, true>(ctx, AddOp{}); }));
  r.Register("", "Where", LambdaKernel(WhereCompute));
}

}  // namespace epctx
