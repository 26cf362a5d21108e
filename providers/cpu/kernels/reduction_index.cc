// ArgMax/ArgMin, CumSum and TopK: index-producing and scan kernels along one axis, walked as [outer, n, inner].
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/reduction_common.h"

namespace epctx {

void RegisterReductionIndexKernels(KernelRegistry& r);

namespace {

using namespace reduction_internal;  // NOLINT: the family's private helpers
using KernelPtr = std::unique_ptr<OpKernel>;

// ---------------------------------------------------------------------------------------------------------------
// ArgMax / ArgMin.

template <typename T>
inline float CompareKey(T v) {
  return static_cast<float>(v);
}
inline double CompareKey(double v) { return v; }
inline int64_t CompareKey(int64_t v) { return v; }
inline uint64_t CompareKey(uint64_t v) { return v; }
inline int64_t CompareKey(int32_t v) { return v; }
inline uint64_t CompareKey(uint32_t v) { return v; }
inline int64_t CompareKey(int16_t v) { return v; }
inline int64_t CompareKey(int8_t v) { return v; }
inline uint64_t CompareKey(uint16_t v) { return v; }
inline uint64_t CompareKey(uint8_t v) { return v; }

class ArgKernel : public OpKernel {
 public:
  ArgKernel(const KernelInfo& info, bool is_max)
      : is_max_(is_max),
        axis_(info.GetInt("axis", 0)),
        keepdims_(info.GetInt("keepdims", 1) != 0),
        select_last_(info.GetInt("select_last_index", 0) != 0) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (!x) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input 0 is missing");
    const int64_t rank = static_cast<int64_t>(x->rank());
    if (rank == 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must have rank >= 1");
    int64_t axis = 0;
    RETURN_IF_ERROR(NormalizeAxis(ctx, axis_, rank, &axis));
    int64_t outer, n, inner;
    SplitAtAxis(x->shape(), axis, &outer, &n, &inner);
    Shape out_shape = x->shape();
    if (keepdims_) {
      out_shape[axis] = 1;
    } else {
      out_shape.erase(out_shape.begin() + axis);
    }
    if (n == 0 && outer * inner > 0)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "cannot take the arg ", is_max_ ? "max" : "min", " of an empty axis ",
                       axis, " (input shape ", ShapeToString(x->shape()), ")");
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, DataType::kInt64, out_shape));
    int64_t* out = y->data<int64_t>();
    return DispatchType<EPCTX_NUMERIC_TYPES>(x->dtype(), is_max_ ? "ArgMax" : "ArgMin", [&](auto tag) {
      using T = decltype(tag);
      const T* src = x->data<T>();
      const bool is_max = is_max_, last = select_last_;
      ParallelFor(ctx.num_threads(), outer * inner, static_cast<double>(n), [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
          int64_t o = t / inner, i = t % inner;
          const T* p = src + o * n * inner + i;
          auto best = CompareKey(p[0]);
          int64_t best_j = 0;
          for (int64_t j = 1; j < n; ++j) {
            auto v = CompareKey(p[j * inner]);
            bool better = is_max ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
            if (better) {
              best = v;
              best_j = j;
            }
          }
          out[t] = best_j;
        }
      });
      return Status::OK();
    });
  }

 private:
  bool is_max_;
  int64_t axis_;
  bool keepdims_, select_last_;
};

// ---------------------------------------------------------------------------------------------------------------
// CumSum, and CumProd-26 (the same scan with a product; integers wrap).

template <typename A>
inline A ScanStep(A acc, A v, bool prod) {
  if (!prod) return acc + v;
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(acc) * static_cast<U>(v));
  } else {
    return acc * v;
  }
}

class CumSumKernel : public OpKernel {
 public:
  explicit CumSumKernel(const KernelInfo& info)
      : exclusive_(info.GetInt("exclusive", 0) != 0), reverse_(info.GetInt("reverse", 0) != 0),
        prod_(info.op_type() == "CumProd") {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* axis_t = ctx.Input(1);
    if (!x || !axis_t) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "inputs x and axis are required");
    if (axis_t->NumElements() != 1 || axis_t->rank() > 1)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "axis must be a scalar or a 1-element 1-D tensor, got shape ",
                       ShapeToString(axis_t->shape()));
    ASSIGN_OR_RETURN(std::vector<int64_t> axis_v, ReadInts(ctx, *axis_t, "axis"));
    const int64_t rank = static_cast<int64_t>(x->rank());
    if (rank == 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must have rank >= 1");
    int64_t axis = 0;
    RETURN_IF_ERROR(NormalizeAxis(ctx, axis_v[0], rank, &axis));
    int64_t outer, n, inner;
    SplitAtAxis(x->shape(), axis, &outer, &n, &inner);
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), x->shape()));
    return DispatchType<EPCTX_FLOAT_TYPES, int32_t, int64_t, uint32_t, uint64_t>(x->dtype(), "CumSum", [&](auto tag) {
      using T = decltype(tag);
      using A = typename AccOf<T>::type;
      const T* src = x->data<T>();
      T* dst = y->data<T>();
      const bool excl = exclusive_, rev = reverse_, prod = prod_;
      constexpr int64_t kBlock = 1024;
      const int64_t nblock = std::max<int64_t>(1, (inner + kBlock - 1) / kBlock);
      ParallelFor(ctx.num_threads(), outer * nblock, static_cast<double>(n * std::min(inner, kBlock)),
                  [&](int64_t b, int64_t e) {
                    std::vector<A> acc;
                    for (int64_t t = b; t < e; ++t) {
                      int64_t o = t / nblock, i0 = (t % nblock) * kBlock, i1 = std::min(inner, i0 + kBlock);
                      acc.assign(static_cast<size_t>(i1 - i0), A(prod ? 1 : 0));
                      A* a = acc.data() - i0;
                      for (int64_t s = 0; s < n; ++s) {
                        int64_t j = rev ? n - 1 - s : s;
                        const T* in = src + (o * n + j) * inner;
                        T* out = dst + (o * n + j) * inner;
                        for (int64_t i = i0; i < i1; ++i) {
                          A v = ToC<A>(in[i]);
                          if (excl) {
                            out[i] = FromC<T>(a[i]);
                            a[i] = ScanStep(a[i], v, prod);
                          } else {
                            a[i] = ScanStep(a[i], v, prod);
                            out[i] = FromC<T>(a[i]);
                          }
                        }
                      }
                    }
                  });
      return Status::OK();
    });
  }

 private:
  bool exclusive_, reverse_, prod_;
};

// ---------------------------------------------------------------------------------------------------------------
// TopK.

// A strict weak order that places NaN above every number (as a sort would).
template <typename K>
inline bool KeyLess(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

class TopKKernel : public OpKernel {
 public:
  explicit TopKKernel(const KernelInfo& info)
      : axis_(info.GetInt("axis", -1)),
        largest_(info.GetInt("largest", 1) != 0),
        k_from_input_(info.opset() >= 10),
        k_attr_(info.GetInt("k", -1)) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (!x) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input 0 is missing");
    int64_t k = k_attr_;
    if (k_from_input_) {
      const Tensor* kt = ctx.Input(1);
      if (!kt) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input K is missing");
      if (kt->NumElements() != 1 || kt->rank() > 1)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "K must be a 1-D tensor of one element, got shape ",
                         ShapeToString(kt->shape()));
      ASSIGN_OR_RETURN(std::vector<int64_t> kv, ReadInts(ctx, *kt, "K"));
      k = kv[0];
    }
    const int64_t rank = static_cast<int64_t>(x->rank());
    if (rank == 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must have rank >= 1");
    int64_t axis = 0;
    RETURN_IF_ERROR(NormalizeAxis(ctx, axis_, rank, &axis));
    int64_t outer, n, inner;
    SplitAtAxis(x->shape(), axis, &outer, &n, &inner);
    if (k < 0 || k > n)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "k = ", k, " must be in [0, ", n, "] (the size of axis ", axis,
                       " of input shape ", ShapeToString(x->shape()), ")");
    Shape out_shape = x->shape();
    out_shape[axis] = k;
    ASSIGN_OR_RETURN(Tensor * values, ctx.Output(0, x->dtype(), out_shape));
    ASSIGN_OR_RETURN(Tensor * indices, ctx.Output(1, DataType::kInt64, out_shape));
    if (k == 0 || outer * inner == 0) return Status::OK();
    return DispatchType<EPCTX_NUMERIC_TYPES>(x->dtype(), "TopK", [&](auto tag) {
      using T = decltype(tag);
      const T* src = x->data<T>();
      T* vout = values->data<T>();
      int64_t* iout = indices->data<int64_t>();
      const bool largest = largest_;
      ParallelFor(ctx.num_threads(), outer * inner, static_cast<double>(n) * 4, [&](int64_t b, int64_t e) {
        using K = decltype(CompareKey(src[0]));
        std::vector<std::pair<K, int64_t>> items(static_cast<size_t>(n));
        for (int64_t t = b; t < e; ++t) {
          int64_t o = t / inner, i = t % inner;
          const T* p = src + o * n * inner + i;
          for (int64_t j = 0; j < n; ++j) items[j] = {CompareKey(p[j * inner]), j};
          // Ties keep the lower index first.
          auto before = [largest](const std::pair<K, int64_t>& a, const std::pair<K, int64_t>& c) {
            bool lt = largest ? KeyLess(c.first, a.first) : KeyLess(a.first, c.first);
            if (lt) return true;
            bool gt = largest ? KeyLess(a.first, c.first) : KeyLess(c.first, a.first);
            return !gt && a.second < c.second;
          };
          if (k < n) {
            std::nth_element(items.begin(), items.begin() + (k - 1), items.end(), before);
            // Sorted even when sorted=0: the order is then unspecified, and a deterministic one costs little.
            std::sort(items.begin(), items.begin() + k, before);
          } else {
            std::sort(items.begin(), items.end(), before);
          }
          for (int64_t j = 0; j < k; ++j) {
            int64_t dst = (o * k + j) * inner + i;
            vout[dst] = p[items[j].second * inner];
            iout[dst] = items[j].second;
          }
        }
      });
      return Status::OK();
    });
  }

 private:
  int64_t axis_;
  bool largest_, k_from_input_;  // `sorted` is not read: the output is always sorted
  int64_t k_attr_;
};

}  // namespace

void RegisterReductionIndexKernels(KernelRegistry& r) {
  r.Register("", "ArgMax", [](const KernelInfo& info) -> StatusOr<KernelPtr> {
    return KernelPtr(new ArgKernel(info, true));
  });
  r.Register("", "ArgMin", [](const KernelInfo& info) -> StatusOr<KernelPtr> {
    return KernelPtr(new ArgKernel(info, false));
  });
  r.Register("", "CumSum", MakeFactory<CumSumKernel>(), 11);
  r.Register("", "CumProd", MakeFactory<CumSumKernel>(), 26);
  r.Register("", "TopK", [](const KernelInfo& info) -> StatusOr<KernelPtr> {
    if (info.opset() < 10 && !info.HasAttr("k"))
      return info.Error(ErrorCode::INVALID_GRAPH, "TopK before opset 10 requires the attribute 'k'");
    return KernelPtr(new TopKKernel(info));
  });
}

}  // namespace epctx
