// Unary elementwise kernels: math functions, activations, IsNaN/IsInf/Not, Clip and Dropout.
//
// Every op is a small functor applied by one templated loop (MapChunk) under `#pragma omp simd`, so that g++ -O2
// vectorizes the float loops (its default cost model at -O2 does not vectorize plain loops). float16/bfloat16 go
// through a float buffer; double calls the C library. Exp, Tanh, Sigmoid and Erf on float use branch-free
// approximations (below) that vectorize and stay within about 2.5 ulp of the exact result.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/elementwise_types.h"
#include "providers/common/fast_math.h"

namespace epctx {

namespace {

// erf: odd polynomial below 1 (erf(x)/x fitted in x^2); above, 1 - e^(-x^2) * Q(1/(1 + x/2) - 1/2) with
// Q ~ erfc(x) e^(x^2) fitted on [1, 4]; erf rounds to 1 beyond 4. x^2 is split in hi + lo for e^(-x^2).
__attribute__((always_inline)) inline float ErfF(float x) {
  const float ax = std::fabs(x);
  const float u = x * x;
  float p = 7.877458860e-05f;
  p = std::fma(p, u, -8.017761840e-04f);
  p = std::fma(p, u, 5.189255673e-03f);
  p = std::fma(p, u, -2.685435245e-02f);
  p = std::fma(p, u, 1.128360015e-01f);
  p = std::fma(p, u, -3.761262753e-01f);
  p = std::fma(p, u, 1.128379166e+00f);
  const float small = x * p;
  const float a = std::min(ax, 4.0f);
  const float t = 1.0f / std::fma(0.5f, a, 1.0f) - 0.5f;
  float q = 1.191428160e-01f;
  q = std::fma(q, t, -5.358163997e-02f);
  q = std::fma(q, t, -2.237533144e-01f);
  q = std::fma(q, t, 5.971589834e-02f);
  q = std::fma(q, t, 6.318270677e-01f);
  q = std::fma(q, t, 9.666328277e-01f);
  q = std::fma(q, t, 8.543716990e-01f);
  q = std::fma(q, t, 2.553956763e-01f);
  const float hi = a * a;
  const float lo = std::fma(a, a, -hi);
  const float e = ExpF(-hi) * (1.0f - lo);
  const float big = std::copysign(1.0f - e * q, x);
  return ax < 1.0f ? small : big;
}

// ---------------------------------------------------------------------------------------------------------------
// Shared machinery.


// Two's-complement negation without signed overflow (Neg/Abs of INT_MIN give INT_MIN, as the hardware does).
template <typename C>
inline C Negate(C x) {
  if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(0) - static_cast<U>(x));
  } else {
    return -x;
  }
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

// y[i] = op(x[i]) for n elements. op takes and returns the compute type.
template <typename T, typename Op>
void MapChunk(const Op& op_ref, const T* x, T* y, int64_t n) {
  using C = ComputeT<T>;
  // A local copy: the functor's captures (LeakyRelu's alpha, Clip's bounds) live in registers. Read through the
  // reference, g++ reloads them after every store to y (which might alias them) and leaves the loop scalar, with a
  // branch per element: LeakyRelu ran at 4 ns per element, as long as the convolution before it (issue 14).
  const Op op = op_ref;
  if constexpr (std::is_same_v<C, T>) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(op(x[i]));
  } else {
    constexpr int64_t kBlock = 256;
    float buf[kBlock];
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t m = std::min(kBlock, n - b);
      for (int64_t i = 0; i < m; ++i) buf[i] = static_cast<float>(x[b + i]);
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) buf[i] = op(buf[i]);
      for (int64_t i = 0; i < m; ++i) y[b + i] = T(buf[i]);
    }
  }
}

StatusOr<const Tensor*> RequireInput(const KernelContext& ctx, size_t i) {
  const Tensor* t = ctx.Input(i);
  if (t == nullptr) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "required input ", i, " is missing");
  return t;
}

// A unary kernel over the element types Ts...; MakeOp(info) builds the functor once per node (attributes are
// read there). Output has the input's type and shape. `cost` is a rough per-element cost for ParallelFor.
template <typename Op, typename... Ts>
class UnaryKernel final : public OpKernel {
 public:
  UnaryKernel(Op op, double cost) : op_(std::move(op)), cost_(cost) {}
  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(const Tensor* X, RequireInput(ctx, 0));
    const Node& what = ctx.node();  // described only in an error
    return DispatchType<Ts...>(X->dtype(), what, [&](auto tag) -> Status {
      using T = decltype(tag);
      ASSIGN_OR_RETURN(Tensor * Y, ctx.OutputForOverwrite(0, X->dtype(), X->shape()));  // MapChunk writes all
      const T* x = X->data<T>();
      T* y = Y->data<T>();
      ParallelFor(ctx.num_threads(), X->NumElements(), cost_,
                  [&](int64_t b, int64_t e) { MapChunk(op_, x + b, y + b, e - b); });
      return Status::OK();
    });
  }

 private:
  Op op_;
  double cost_;
};

template <typename... Ts, typename MakeOp>
KernelFactory UnaryFactory(MakeOp make_op, double cost = 1) {
  return [make_op, cost](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    auto op = make_op(info);
    return std::unique_ptr<OpKernel>(new UnaryKernel<decltype(op), Ts...>(std::move(op), cost));
  };
}

// A stateless functor: same op for every node.
template <typename... Ts, typename Fn>
KernelFactory UnaryFactoryFn(Fn fn, double cost = 1) {
  return UnaryFactory<Ts...>([fn](const KernelInfo&) { return fn; }, cost);
}

// Op functors are forced inline so that the loop around them vectorizes (g++ would otherwise call the larger
// ones, Erf for instance, out of line per element).
#define EW_INLINE __attribute__((always_inline))
#define EW_FLOATS EPCTX_FLOAT_TYPES
#define EW_SIGNED_AND_FLOATS EPCTX_FLOAT_TYPES, int8_t, int16_t, int32_t, int64_t
#define EW_NUMERIC EPCTX_NUMERIC_TYPES

// Calls the C library in the compute type (float or double).
#define EW_LIBM(fn) [](auto x) EW_INLINE { return std::fn(x); }

// ---------------------------------------------------------------------------------------------------------------
// Unary ops whose result type differs from the input: IsNaN, IsInf, Not.

template <typename Pred>
Status PredicateKernel(KernelContext& ctx, const Pred& pred) {
  ASSIGN_OR_RETURN(const Tensor* X, RequireInput(ctx, 0));
  const Node& what = ctx.node();  // described only in an error
  return DispatchType<EW_FLOATS>(X->dtype(), what, [&](auto tag) -> Status {
    using T = decltype(tag);
    ASSIGN_OR_RETURN(Tensor * Y, ctx.Output(0, DataType::kBool, X->shape()));
    const T* x = X->data<T>();
    bool* y = Y->data<bool>();
    const int64_t n = X->NumElements();
    for (int64_t i = 0; i < n; ++i) y[i] = pred(static_cast<ComputeT<T>>(x[i]));
    return Status::OK();
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Clip: bounds from attributes (opset < 11) or optional scalar inputs 1 and 2 (opset >= 11).

class ClipKernel final : public OpKernel {
 public:
  explicit ClipKernel(const KernelInfo& info)
      : old_(info.opset() < 11),
        attr_min_(info.GetFloat("min", -std::numeric_limits<float>::max())),
        attr_max_(info.GetFloat("max", std::numeric_limits<float>::max())) {}

  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(const Tensor* X, RequireInput(ctx, 0));
    const Node& what = ctx.node();  // described only in an error
    return DispatchType<EW_NUMERIC>(X->dtype(), what, [&](auto tag) -> Status {
      using T = decltype(tag);
      using C = ComputeT<T>;
      C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
      if (old_) {
        if constexpr (std::is_floating_point_v<C>) {
          lo = static_cast<C>(attr_min_);
          hi = static_cast<C>(attr_max_);
        }
      } else {
        for (size_t k = 1; k <= 2; ++k) {
          const Tensor* b = ctx.Input(k);
          if (b == nullptr) continue;
          RETURN_ERROR_IF(b->dtype() != X->dtype(), INVALID_ARGUMENT, what, ": ", k == 1 ? "min" : "max",
                          " has type ", DataTypeName(b->dtype()), " but input has ", DataTypeName(X->dtype()));
          RETURN_ERROR_IF(b->NumElements() != 1, INVALID_ARGUMENT, what, ": ", k == 1 ? "min" : "max",
                          " must be a scalar, got shape ", ShapeToString(b->shape()));
          (k == 1 ? lo : hi) = static_cast<C>(b->data<T>()[0]);
        }
      }
      ASSIGN_OR_RETURN(Tensor * Y, ctx.OutputForOverwrite(0, X->dtype(), X->shape()));  // MapChunk writes all
      const T* x = X->data<T>();
      T* y = Y->data<T>();
      auto op = [lo, hi](C v) { return std::min(std::max(v, lo), hi); };
      ParallelFor(ctx.num_threads(), X->NumElements(), 1,
                  [&](int64_t b, int64_t e) { MapChunk(op, x + b, y + b, e - b); });
      return Status::OK();
    });
  }

 private:
  bool old_;
  float attr_min_, attr_max_;
};

// ---------------------------------------------------------------------------------------------------------------
// Dropout. Inference (the default) passes the input through and, when asked, a mask of all ones. Training mode
// (opset >= 12 with the `training_mode` input true) draws the mask from a generator seeded by the `seed` attribute
// (a fresh seed per run when absent), so a node with a seed gives the same mask each run. Before opset 7 the
// `is_test` attribute chose training mode; this runtime serves inference, so those nodes always pass through.

class DropoutKernel final : public OpKernel {
 public:
  explicit DropoutKernel(const KernelInfo& info)
      : opset_(info.opset()),
        ratio_attr_(info.GetFloat("ratio", 0.5f)),
        has_seed_(info.HasAttr("seed")),
        seed_(info.GetInt("seed", 0)) {}

  Status Compute(KernelContext& ctx) const override {
    ASSIGN_OR_RETURN(const Tensor* X, RequireInput(ctx, 0));
    const Node& what = ctx.node();  // described only in an error
    float ratio = ratio_attr_;
    bool training = false;
    if (opset_ >= 12) {
      if (const Tensor* r = ctx.Input(1)) {
        RETURN_ERROR_IF(r->NumElements() != 1, INVALID_ARGUMENT, what, ": ratio must be a scalar, got shape ",
                        ShapeToString(r->shape()));
        RETURN_IF_ERROR(DispatchType<EW_FLOATS>(r->dtype(), what, [&](auto tag) -> Status {
          using R = decltype(tag);
          ratio = static_cast<float>(r->data<R>()[0]);
          return Status::OK();
        }));
      }
      if (const Tensor* t = ctx.Input(2)) {
        RETURN_ERROR_IF(t->dtype() != DataType::kBool || t->NumElements() != 1, INVALID_ARGUMENT, what,
                        ": training_mode must be a bool scalar");
        training = t->data<bool>()[0];
      }
    }
    RETURN_ERROR_IF(!(ratio >= 0.0f && ratio <= 1.0f), INVALID_ARGUMENT, what, ": ratio ", ratio,
                    " is outside [0, 1]");
    const bool want_mask = ctx.num_outputs() > 1 && ctx.OutputRequested(1);
    // Before opset 10 the mask has the input's type; from 10 it is bool.
    const DataType mask_type = opset_ < 10 ? X->dtype() : DataType::kBool;

    if (!training || ratio == 0.0f) {
      ctx.SetOutput(0, IValue(*X));
      if (want_mask) {
        ASSIGN_OR_RETURN(Tensor * M, ctx.Output(1, mask_type, X->shape()));
        RETURN_IF_ERROR(FillOnes(*M, what.Describe()));
      }
      return Status::OK();
    }
    return DispatchType<EW_FLOATS>(X->dtype(), what, [&](auto tag) -> Status {
      using T = decltype(tag);
      const int64_t n = X->NumElements();
      ASSIGN_OR_RETURN(Tensor * Y, ctx.Output(0, X->dtype(), X->shape()));
      Tensor* M = nullptr;
      if (want_mask) {
        ASSIGN_OR_RETURN(M, ctx.Output(1, mask_type, X->shape()));
      }
      std::mt19937_64 gen(has_seed_ ? static_cast<uint64_t>(seed_) : std::random_device{}());
      const float scale = ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
      const T* x = X->data<T>();
      T* y = Y->data<T>();
      for (int64_t i = 0; i < n; ++i) {
        const float u = static_cast<float>(gen() >> 40) * (1.0f / 16777216.0f);  // uniform in [0, 1)
        const bool keep = u >= ratio;
        y[i] = T(keep ? static_cast<float>(x[i]) * scale : 0.0f);
        if (M != nullptr) {
          if (M->dtype() == DataType::kBool) {
            M->data<bool>()[i] = keep;
          } else {
            M->data<T>()[i] = T(keep ? 1.0f : 0.0f);
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  static Status FillOnes(Tensor& m, const std::string& what) {
    if (m.dtype() == DataType::kBool) {
      std::fill_n(m.data<bool>(), m.NumElements(), true);
      return Status::OK();
    }
    return DispatchType<EW_FLOATS>(m.dtype(), what, [&](auto tag) -> Status {
      using T = decltype(tag);
      std::fill_n(m.data<T>(), m.NumElements(), T(1.0f));
      return Status::OK();
    });
  }

  int opset_;
  float ratio_attr_;
  bool has_seed_;
  int64_t seed_;
};

}  // namespace

void RegisterElementwiseUnaryKernels(KernelRegistry& r) {
  // --- math -------------------------------------------------------------------------------------------------
  r.Register("", "Abs", UnaryFactoryFn<EW_NUMERIC>([](auto x) EW_INLINE {
               using C = decltype(x);
               if constexpr (std::is_unsigned_v<C>) {
                 return x;
               } else if constexpr (std::is_integral_v<C>) {
                 return x < 0 ? Negate(x) : x;
               } else {
                 return std::fabs(x);
               }
             }));
  r.Register("", "Neg", UnaryFactoryFn<EW_SIGNED_AND_FLOATS>([](auto x) EW_INLINE { return Negate(x); }));
  r.Register("", "Reciprocal", UnaryFactoryFn<EW_FLOATS>([](auto x) EW_INLINE { return decltype(x)(1) / x; }));
  r.Register("", "Floor", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(floor)));
  r.Register("", "Ceil", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(ceil)));
  // Round half to even: nearbyint under the default rounding mode.
  r.Register("", "Round", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(nearbyint)));
  r.Register("", "Sqrt", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(sqrt)));
  r.Register("", "Exp", UnaryFactoryFn<EW_FLOATS>([](auto x) EW_INLINE {
               if constexpr (std::is_same_v<decltype(x), float>) {
                 return ExpF(x);
               } else {
                 return std::exp(x);
               }
             }));
  r.Register("", "Log", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(log), 10));
  r.Register("", "Sin", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(sin), 10));
  r.Register("", "Cos", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(cos), 10));
  r.Register("", "Tan", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(tan), 10));
  r.Register("", "Asin", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(asin), 10));
  r.Register("", "Acos", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(acos), 10));
  r.Register("", "Atan", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(atan), 10));
  r.Register("", "Sinh", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(sinh), 10));
  r.Register("", "Cosh", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(cosh), 10));
  r.Register("", "Asinh", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(asinh), 10));
  r.Register("", "Acosh", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(acosh), 10));
  r.Register("", "Atanh", UnaryFactoryFn<EW_FLOATS>(EW_LIBM(atanh), 10));
  r.Register("", "Sign", UnaryFactoryFn<EW_NUMERIC>([](auto x) EW_INLINE {
               using C = decltype(x);
               if constexpr (std::is_unsigned_v<C>) {
                 return static_cast<C>(x > 0 ? 1 : 0);
               } else {
                 // NaN stays NaN (x == 0 is false for it and it is returned as is).
                 return x > 0 ? C(1) : (x < 0 ? C(-1) : (x == 0 ? C(0) : x));
               }
             }));
  r.Register("", "Erf", UnaryFactoryFn<EW_NUMERIC>([](auto x) EW_INLINE {
               using C = decltype(x);
               if constexpr (std::is_same_v<C, float>) {
                 return ErfF(x);
               } else if constexpr (std::is_same_v<C, double>) {
                 return std::erf(x);
               } else {
                 return static_cast<C>(std::erf(static_cast<double>(x)));  // |erf| < 1: exact 0 or +-1 after
               }
             }, 4));
  // --- activations ------------------------------------------------------------------------------------------
  r.Register("", "Sigmoid", UnaryFactoryFn<EW_FLOATS>([](auto x) EW_INLINE {
               using C = decltype(x);
               if constexpr (std::is_same_v<C, float>) {
                 return SigmoidF(x);
               } else {
                 return C(1) / (C(1) + std::exp(-x));
               }
             }, 4));
  r.Register("", "Tanh", UnaryFactoryFn<EW_FLOATS>([](auto x) EW_INLINE {
               if constexpr (std::is_same_v<decltype(x), float>) {
                 return TanhF(x);
               } else {
                 return std::tanh(x);
               }
             }, 4));
  r.Register("", "Relu", UnaryFactoryFn<EW_SIGNED_AND_FLOATS>([](auto x) EW_INLINE { return x > 0 ? x : decltype(x)(0); }));
  r.Register("", "LeakyRelu", UnaryFactory<EW_FLOATS>([](const KernelInfo& info) {
               const float alpha = info.GetFloat("alpha", 0.01f);
               return [alpha](auto x) EW_INLINE {
                 using C = decltype(x);
                 return x >= 0 ? x : static_cast<C>(alpha) * x;
               };
             }));
  r.Register("", "Elu", UnaryFactory<EW_FLOATS>([](const KernelInfo& info) {
               const float alpha = info.GetFloat("alpha", 1.0f);
               return [alpha](auto x) EW_INLINE {
                 using C = decltype(x);
                 return x >= 0 ? x : static_cast<C>(alpha) * std::expm1(x);
               };
             }, 10));
  r.Register("", "Selu", UnaryFactory<EW_FLOATS>([](const KernelInfo& info) {
               const float alpha = info.GetFloat("alpha", 1.67326319217681884765625f);
               const float gamma = info.GetFloat("gamma", 1.05070102214813232421875f);
               return [alpha, gamma](auto x) EW_INLINE {
                 using C = decltype(x);
                 return static_cast<C>(gamma) * (x > 0 ? x : static_cast<C>(alpha) * std::expm1(x));
               };
             }, 10));
  r.Register("", "Celu", UnaryFactory<EW_FLOATS>([](const KernelInfo& info) {
               const float alpha = info.GetFloat("alpha", 1.0f);
               return [alpha](auto x) EW_INLINE {
                 using C = decltype(x);
                 const C a = static_cast<C>(alpha);
                 return std::max(C(0), x) + std::min(C(0), a * std::expm1(x / a));
               };
             }, 10));
  r.Register("", "HardSigmoid", UnaryFactory<EW_FLOATS>([](const KernelInfo& info) {
               const float alpha = info.GetFloat("alpha", 0.2f), beta = info.GetFloat("beta", 0.5f);
               return [alpha, beta](auto x) EW_INLINE {
                 using C = decltype(x);
                 return std::max(C(0), std::min(C(1), static_cast<C>(alpha) * x + static_cast<C>(beta)));
               };
             }));
  r.Register("", "HardSwish", UnaryFactoryFn<EW_FLOATS>([](auto x) EW_INLINE {
               using C = decltype(x);
               return x * std::max(C(0), std::min(C(1), x / C(6) + C(0.5)));
             }));
  r.Register("", "Softplus", UnaryFactoryFn<EW_FLOATS>([](auto x) EW_INLINE {
               // log(1 + e^x) without overflow: x + log(1 + e^-x) for positive x.
               return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
             }, 10));
  r.Register("", "Softsign", UnaryFactoryFn<EW_FLOATS>([](auto x) EW_INLINE {
               using C = decltype(x);
               return x / (C(1) + std::fabs(x));
             }));
  r.Register("", "ThresholdedRelu", UnaryFactory<EW_FLOATS>([](const KernelInfo& info) {
               const float alpha = info.GetFloat("alpha", 1.0f);
               return [alpha](auto x) EW_INLINE {
                 using C = decltype(x);
                 return x > static_cast<C>(alpha) ? x : C(0);
               };
             }));
  r.Register("", "Shrink", UnaryFactory<EW_NUMERIC>([](const KernelInfo& info) {
               const double lambd = info.GetFloat("lambd", 0.5f), bias = info.GetFloat("bias", 0.0f);
               return [lambd, bias](auto x) EW_INLINE {
                 using C = decltype(x);
                 const double v = static_cast<double>(x);
                 const double y = v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0);
                 return SaturateCast<C>(y);
               };
             }));
  // Mish-18: x * tanh(softplus(x)).
  r.Register("", "Mish", UnaryFactoryFn<EW_FLOATS>([](auto x) EW_INLINE {
               using C = decltype(x);
               const C sp = x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
               if constexpr (std::is_same_v<C, float>) {
                 return x * TanhF(sp);
               } else {
                 return x * std::tanh(sp);
               }
             }, 10));
  // Gelu-20: approximate "none" is x/2 (1 + erf(x / sqrt 2)); "tanh" is x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  r.Register("", "Gelu", [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    const std::string approx = info.GetString("approximate", "none");
    if (approx == "tanh")
      return UnaryFactoryFn<EW_FLOATS>([](auto x) EW_INLINE {
        using C = decltype(x);
        const C u = C(0.7978845608028654) * (x + C(0.044715) * x * x * x);
        if constexpr (std::is_same_v<C, float>) {
          return C(0.5) * x * (C(1) + TanhF(u));
        } else {
          return C(0.5) * x * (C(1) + std::tanh(u));
        }
      }, 4)(info);
    if (approx != "none")
      return info.Error(ErrorCode::INVALID_GRAPH, "approximate must be 'none' or 'tanh', got '", approx, "'");
    return UnaryFactoryFn<EW_FLOATS>([](auto x) EW_INLINE {
      using C = decltype(x);
      if constexpr (std::is_same_v<C, float>) {
        return 0.5f * x * (1.0f + ErfF(x * 0.70710678118654752f));
      } else {
        return C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752)));
      }
    }, 4)(info);
  });
  // Swish-24: x * sigmoid(alpha x).
  r.Register("", "Swish", UnaryFactory<EW_FLOATS>([](const KernelInfo& info) {
               const float alpha = info.GetFloat("alpha", 1.0f);
               return [alpha](auto x) EW_INLINE {
                 using C = decltype(x);
                 if constexpr (std::is_same_v<C, float>) {
                   return x * SigmoidF(alpha * x);
                 } else {
                   return x / (C(1) + std::exp(-static_cast<C>(alpha) * x));
                 }
               };
             }, 4));
  // BitwiseNot-18.
  r.Register("", "BitwiseNot", UnaryFactoryFn<int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t>(
                                   [](auto x) EW_INLINE { return static_cast<decltype(x)>(~x); }));
  // --- predicates -------------------------------------------------------------------------------------------
  r.Register("", "IsNaN", LambdaKernel([](KernelContext& ctx) {
               return PredicateKernel(ctx, [](auto x) EW_INLINE { return x != x; });
             }));
  r.Register("", "IsInf", [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    const bool neg = info.GetInt("detect_negative", 1) != 0, pos = info.GetInt("detect_positive", 1) != 0;
    return LambdaKernel([neg, pos](KernelContext& ctx) {
      return PredicateKernel(ctx, [neg, pos](auto x) EW_INLINE { return std::isinf(x) && (x > 0 ? pos : neg); });
    })(info);
  });
  r.Register("", "Not", LambdaKernel([](KernelContext& ctx) -> Status {
               ASSIGN_OR_RETURN(const Tensor* X, RequireInput(ctx, 0));
               RETURN_ERROR_IF(X->dtype() != DataType::kBool, NOT_IMPLEMENTED, ctx.node().Describe(),
                               ": element type ", DataTypeName(X->dtype()), " is not supported (Not takes bool)");
               ASSIGN_OR_RETURN(Tensor * Y, ctx.Output(0, DataType::kBool, X->shape()));
               const bool* x = X->data<bool>();
               bool* y = Y->data<bool>();
               const int64_t n = X->NumElements();
               for (int64_t i = 0; i < n; ++i) y[i] = !x[i];
               return Status::OK();
             }));
  // --- Clip, Dropout ------------------------------------------------------------------------------------------
  r.Register("", "Clip", MakeFactory<ClipKernel>());
  r.Register("", "Dropout", MakeFactory<DropoutKernel>());
}

}  // namespace epctx
