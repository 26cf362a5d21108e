// Normalizations: BatchNormalization, InstanceNormalization, LayerNormalization (and RMSNormalization-23), LRN,
// MeanVarianceNormalization, LpNormalization, GroupNormalization-18/21.
//
// Statistics are computed in float (double for double inputs) with two passes (mean, then squared deviations),
// which is the reference's formula and avoids the cancellation of E[x^2] - E[x]^2. Per-channel parameters are read
// once per run into double vectors whatever their float type (BatchNormalization-15 lets them differ from X).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/reduction_common.h"

namespace epctx {

void RegisterReductionNormKernels(KernelRegistry& r);

namespace {

using namespace reduction_internal;  // NOLINT: the family's private helpers
using KernelPtr = std::unique_ptr<OpKernel>;

// Any float tensor's values as doubles.
StatusOr<std::vector<double>> ReadFloats(const KernelContext& ctx, const Tensor& t, const char* what) {
  std::vector<double> v(static_cast<size_t>(t.NumElements()));
  Status st = DispatchType<EPCTX_FLOAT_TYPES>(t.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = ToC<double>(p[i]);
    return Status::OK();
  });
  if (!st.ok()) return ctx.Error(st.code(), st.message());
  return v;
}

Status WriteFloats(const std::vector<double>& v, Tensor* t) {
  return DispatchType<EPCTX_FLOAT_TYPES>(t->dtype(), "output", [&](auto tag) {
    using T = decltype(tag);
    T* p = t->data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = FromC<T>(v[i]);
    return Status::OK();
  });
}

// Expands `t` (numpy-broadcastable to `target`, right-aligned) to target's full size.
StatusOr<std::vector<double>> ExpandTo(const KernelContext& ctx, const Tensor& t, const Shape& target, const char* what) {
  const Shape& s = t.shape();
  if (s.size() > target.size())
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " shape ", ShapeToString(s), " cannot broadcast to ",
                     ShapeToString(target));
  const size_t off = target.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != 1 && s[i] != target[off + i])
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, what, " shape ", ShapeToString(s), " cannot broadcast to ",
                       ShapeToString(target));
  }
  ASSIGN_OR_RETURN(std::vector<double> src, ReadFloats(ctx, t, what));
  const int64_t total = ShapeSize(target);
  std::vector<double> out(static_cast<size_t>(std::max<int64_t>(total, 0)));
  if (total <= 0) return out;
  // Source stride per target dim (0 where broadcast).
  std::vector<int64_t> sstride(target.size(), 0);
  int64_t st = 1;
  for (size_t i = s.size(); i-- > 0;) {
    sstride[off + i] = s[i] == 1 ? 0 : st;
    st *= s[i];
  }
  std::vector<int64_t> idx(target.size(), 0);
  int64_t si = 0;
  for (int64_t k = 0; k < total; ++k) {
    out[k] = src[si];
    for (size_t d = target.size(); d-- > 0;) {
      si += sstride[d];
      if (++idx[d] < target[d]) break;
      si -= sstride[d] * target[d];
      idx[d] = 0;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// BatchNormalization.

class BatchNormKernel : public OpKernel {
 public:
  explicit BatchNormKernel(const KernelInfo& info)
      : opset_(info.opset()),
        epsilon_(info.GetFloat("epsilon", 1e-5f)),
        momentum_(info.GetFloat("momentum", 0.9f)),
        training_mode_(info.GetInt("training_mode", 0) != 0),
        spatial_(info.opset() < 9 ? info.GetInt("spatial", 1) != 0 : true),
        is_test_(info.opset() < 7 && info.GetInt("is_test", 0) != 0) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* in[4] = {ctx.Input(1), ctx.Input(2), ctx.Input(3), ctx.Input(4)};
    if (!x || !in[0] || !in[1] || !in[2] || !in[3])
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "inputs X, scale, B, mean and var are all required");
    if (x->rank() < 2)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "X must have shape (N, C, ...), got ", ShapeToString(x->shape()));
    const int64_t n = x->dim(0), c = x->dim(1);
    int64_t s = 1;
    for (size_t d = 2; d < x->rank(); ++d) s *= x->dim(d);
    // Per-channel parameters, or per (channel, position) in the pre-9 non-spatial mode.
    int64_t pcount = c;
    if (!spatial_ && in[0]->NumElements() == c * s) pcount = c * s;
    static const char* kNames[4] = {"scale", "B", "mean", "var"};
    std::vector<double> p[4];
    for (int i = 0; i < 4; ++i) {
      if (in[i]->NumElements() != pcount)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, kNames[i], " has shape ", ShapeToString(in[i]->shape()), " but X ",
                         ShapeToString(x->shape()), " needs ", pcount, " values");
      ASSIGN_OR_RETURN(p[i], ReadFloats(ctx, *in[i], kNames[i]));
    }
    // Opset 14+: the training_mode attribute. Before: training iff the optional statistics outputs are wired,
    // except that opsets 1-6 say so explicitly with is_test.
    bool training = opset_ >= 14 ? training_mode_ : false;
    if (opset_ < 14 && !is_test_)
      for (size_t i = 1; i < 5; ++i) training = training || (i < ctx.num_outputs() && ctx.OutputRequested(i));
    if (training && pcount != c)
      return ctx.Error(ErrorCode::NOT_IMPLEMENTED, "training mode with non-spatial parameters is not supported");

    std::vector<double> mean = p[2], var = p[3];
    if (training) {
      // Batch statistics over N and the spatial positions (population variance).
      std::vector<double> bm(c, 0.0), bv(c, 0.0);
      RETURN_IF_ERROR(DispatchType<EPCTX_FLOAT_TYPES>(x->dtype(), "BatchNormalization", [&](auto tag) {
        using T = decltype(tag);
        const T* src = x->data<T>();
        ParallelFor(ctx.num_threads(), c, static_cast<double>(n * s) * 4, [&](int64_t b, int64_t e) {
          for (int64_t ch = b; ch < e; ++ch) {
            double sum = 0;
            for (int64_t i = 0; i < n; ++i) {
              const T* q = src + (i * c + ch) * s;
              for (int64_t j = 0; j < s; ++j) sum += ToC<double>(q[j]);
            }
            const double cnt = static_cast<double>(n * s);
            const double m = sum / cnt;
            double sq = 0;
            for (int64_t i = 0; i < n; ++i) {
              const T* q = src + (i * c + ch) * s;
              for (int64_t j = 0; j < s; ++j) {
                double dlt = ToC<double>(q[j]) - m;
                sq += dlt * dlt;
              }
            }
            bm[ch] = m;
            bv[ch] = sq / cnt;
          }
        });
        return Status::OK();
      }));
      std::vector<double> run_mean(c), run_var(c);
      for (int64_t ch = 0; ch < c; ++ch) {
        run_mean[ch] = p[2][ch] * momentum_ + bm[ch] * (1.0 - momentum_);
        run_var[ch] = p[3][ch] * momentum_ + bv[ch] * (1.0 - momentum_);
      }
      // Opset 14+: (Y, running_mean, running_var). Before: (Y, mean, var, saved_mean, saved_var).
      const std::vector<double>* extra[4] = {&run_mean, &run_var, &bm, &bv};
      const DataType extra_type[4] = {in[2]->dtype(), in[3]->dtype(), x->dtype(), x->dtype()};
      for (size_t i = 1; i < 5 && i < ctx.num_outputs(); ++i) {
        if (!ctx.OutputRequested(i)) continue;
        ASSIGN_OR_RETURN(Tensor * t, ctx.Output(i, extra_type[i - 1], Shape{c}));
        RETURN_IF_ERROR(WriteFloats(*extra[i - 1], t));
      }
      mean = bm;
      var = bv;
    }
    // y = x * a + b per parameter index.
    std::vector<double> a(pcount), bias(pcount);
    for (int64_t i = 0; i < pcount; ++i) {
      a[i] = p[0][i] / std::sqrt(var[i] + static_cast<double>(epsilon_));
      bias[i] = p[1][i] - mean[i] * a[i];
    }
    // Every plane is written below.
    ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, x->dtype(), x->shape()));
    return DispatchType<EPCTX_FLOAT_TYPES>(x->dtype(), "BatchNormalization", [&](auto tag) {
      using T = decltype(tag);
      using C = ComputeOf<T>;
      const T* src = x->data<T>();
      T* dst = y->data<T>();
      const bool per_channel = pcount == c;
      ParallelFor(ctx.num_threads(), n * c, static_cast<double>(s) * 2, [&](int64_t b, int64_t e) {
        std::vector<C> av, bv;
        if (!per_channel) {
          av.assign(a.begin(), a.end());
          bv.assign(bias.begin(), bias.end());
        }
        for (int64_t plane = b; plane < e; ++plane) {
          const int64_t ch = plane % c;
          const T* q = src + plane * s;
          T* o = dst + plane * s;
          if (per_channel) {
            const C ca = static_cast<C>(a[ch]), cb = static_cast<C>(bias[ch]);
            if constexpr (std::is_same_v<T, C>) {
#pragma omp simd
              for (int64_t j = 0; j < s; ++j) o[j] = q[j] * ca + cb;
            } else {
              for (int64_t j = 0; j < s; ++j) o[j] = FromC<T>(ToC<C>(q[j]) * ca + cb);
            }
          } else {
            const C* pa = av.data() + ch * s;
            const C* pb = bv.data() + ch * s;
            for (int64_t j = 0; j < s; ++j) o[j] = FromC<T>(ToC<C>(q[j]) * pa[j] + pb[j]);
          }
        }
      });
      return Status::OK();
    });
  }

 private:
  int opset_;
  float epsilon_, momentum_;
  bool training_mode_, spatial_, is_test_;
};

// ---------------------------------------------------------------------------------------------------------------
// InstanceNormalization.

class InstanceNormKernel : public OpKernel {
 public:
  explicit InstanceNormKernel(const KernelInfo& info) : epsilon_(info.GetFloat("epsilon", 1e-5f)) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* scale = ctx.Input(1);
    const Tensor* b = ctx.Input(2);
    if (!x || !scale || !b) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "inputs input, scale and B are required");
    if (x->rank() < 2)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must have shape (N, C, ...), got ", ShapeToString(x->shape()));
    const int64_t n = x->dim(0), c = x->dim(1);
    int64_t s = 1;
    for (size_t d = 2; d < x->rank(); ++d) s *= x->dim(d);
    if (scale->NumElements() != c || b->NumElements() != c)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "scale ", ShapeToString(scale->shape()), " and B ",
                       ShapeToString(b->shape()), " must have C = ", c, " elements");
    ASSIGN_OR_RETURN(std::vector<double> sc, ReadFloats(ctx, *scale, "scale"));
    ASSIGN_OR_RETURN(std::vector<double> bi, ReadFloats(ctx, *b, "B"));
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), x->shape()));
    const double eps = epsilon_;
    return DispatchType<EPCTX_FLOAT_TYPES>(x->dtype(), "InstanceNormalization", [&](auto tag) {
      using T = decltype(tag);
      using C = ComputeOf<T>;
      const T* src = x->data<T>();
      T* dst = y->data<T>();
      ParallelFor(ctx.num_threads(), n * c, static_cast<double>(s) * 4, [&](int64_t b0, int64_t e0) {
        std::vector<C> buf;
        for (int64_t plane = b0; plane < e0; ++plane) {
          const int64_t ch = plane % c;
          const C* q;
          if constexpr (std::is_same_v<T, C>) {
            q = src + plane * s;
          } else {
            buf.resize(s);
            for (int64_t j = 0; j < s; ++j) buf[j] = ToC<C>(src[plane * s + j]);
            q = buf.data();
          }
          const C mean = LaneSum<C>(s, [&](int64_t j) { return q[j]; }) / static_cast<C>(s);
          const C sq = LaneSum<C>(s, [&](int64_t j) { return (q[j] - mean) * (q[j] - mean); });
          const C inv = static_cast<C>(1.0 / std::sqrt(static_cast<double>(sq) / s + eps));
          const C ka = inv * static_cast<C>(sc[ch]);
          const C kb = static_cast<C>(bi[ch]) - mean * ka;
          T* o = dst + plane * s;
          if constexpr (std::is_same_v<T, C>) {
#pragma omp simd
            for (int64_t j = 0; j < s; ++j) o[j] = q[j] * ka + kb;
          } else {
            for (int64_t j = 0; j < s; ++j) o[j] = FromC<T>(q[j] * ka + kb);
          }
        }
      });
      return Status::OK();
    });
  }

 private:
  float epsilon_;
};

// ---------------------------------------------------------------------------------------------------------------
// LayerNormalization.

class LayerNormKernel : public OpKernel {
 public:
  static StatusOr<KernelPtr> Create(const KernelInfo& info) {
    auto k = std::make_unique<LayerNormKernel>();
    k->rms_ = info.op_type() == "RMSNormalization";  // RMSNormalization-23: no mean, no bias, one output
    k->axis_ = info.GetInt("axis", -1);
    k->epsilon_ = info.GetFloat("epsilon", 1e-5f);
    const int64_t stash = info.GetInt("stash_type", 1);
    if (!IsValidDataType(static_cast<int32_t>(stash)))
      return info.Error(ErrorCode::INVALID_ARGUMENT, "stash_type ", stash, " is not a data type");
    k->stat_type_ = static_cast<DataType>(stash);
    // Mean/InvStdDev carry the declared output type when the model states one.
    for (size_t i = 1; i < 3; ++i) {
      const ValueType* vt = info.OutputType(i);
      if (vt && vt->kind == ValueType::Kind::kTensor && vt->elem_type != DataType::kUndefined) k->stat_type_ = vt->elem_type;
    }
    DataType st = k->stat_type_;
    if (st != DataType::kFloat && st != DataType::kDouble && st != DataType::kFloat16 && st != DataType::kBFloat16)
      return info.Error(ErrorCode::INVALID_ARGUMENT, "stash_type / Mean type must be a float type, got ",
                        DataTypeName(st));
    return KernelPtr(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* scale = ctx.Input(1);
    const Tensor* bias = rms_ ? nullptr : ctx.Input(2);
    if (!x || !scale) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "inputs X and Scale are required");
    const int64_t rank = static_cast<int64_t>(x->rank());
    if (rank == 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "X must have rank >= 1");
    int64_t axis = 0;
    RETURN_IF_ERROR(NormalizeAxis(ctx, axis_, rank, &axis));
    int64_t rows = 1, d = 1;
    for (int64_t i = 0; i < axis; ++i) rows *= x->dim(i);
    for (int64_t i = axis; i < rank; ++i) d *= x->dim(i);
    const Shape norm_shape(x->shape().begin() + axis, x->shape().end());

    // Scale/B as a row vector of d values when they only vary along the normalized dims, else expanded to X.
    auto load = [&](const Tensor& t, const char* what, std::vector<double>* v, int64_t* row_stride) -> Status {
      Shape s = t.shape();
      while (s.size() > norm_shape.size() && s.front() == 1) s.erase(s.begin());
      if (s.size() <= norm_shape.size()) {
        *row_stride = 0;
        ASSIGN_OR_RETURN(*v, ExpandTo(ctx, t.Reshaped(s), norm_shape, what));
      } else {
        *row_stride = d;
        ASSIGN_OR_RETURN(*v, ExpandTo(ctx, t, x->shape(), what));
      }
      return Status::OK();
    };
    std::vector<double> sc, bi;
    int64_t sc_stride = 0, bi_stride = 0;
    RETURN_IF_ERROR(load(*scale, "Scale", &sc, &sc_stride));
    if (bias) RETURN_IF_ERROR(load(*bias, "B", &bi, &bi_stride));

    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), x->shape()));
    Shape stat_shape(x->shape().begin(), x->shape().begin() + axis);
    stat_shape.resize(rank, 1);
    std::vector<double> means, invs;
    const bool want_mean = !rms_ && ctx.num_outputs() > 1 && ctx.OutputRequested(1);
    const bool want_inv = !rms_ && ctx.num_outputs() > 2 && ctx.OutputRequested(2);
    const bool rms = rms_;
    if (want_mean) means.resize(rows);
    if (want_inv) invs.resize(rows);

    // Not inside RETURN_IF_ERROR: a macro argument cannot hold the #pragma lines.
    Status st = DispatchType<EPCTX_FLOAT_TYPES>(x->dtype(), "LayerNormalization", [&](auto tag) {
      using T = decltype(tag);
      using C = ComputeOf<T>;
      std::vector<C> scv(sc.begin(), sc.end()), biv(bi.begin(), bi.end());
      const T* src = x->data<T>();
      T* dst = y->data<T>();
      const C eps = static_cast<C>(epsilon_);
      ParallelFor(ctx.num_threads(), rows, static_cast<double>(d) * 6, [&](int64_t b, int64_t e) {
        std::vector<C> buf;
        for (int64_t r = b; r < e; ++r) {
          const C* q;
          C* o;
          if constexpr (std::is_same_v<T, C>) {
            q = src + r * d;
            o = dst + r * d;
          } else {
            buf.resize(d);
            for (int64_t j = 0; j < d; ++j) buf[j] = ToC<C>(src[r * d + j]);
            q = buf.data();
            o = buf.data();
          }
          const C mean = rms ? C(0) : LaneSum<C>(d, [&](int64_t j) { return q[j]; }) / static_cast<C>(d);
          const C sq = LaneSum<C>(d, [&](int64_t j) { return (q[j] - mean) * (q[j] - mean); });
          const C inv = C(1) / std::sqrt(sq / static_cast<C>(d) + eps);
          const C* ps = scv.data() + r * sc_stride;
          if (!biv.empty()) {
            const C* pb = biv.data() + r * bi_stride;
#pragma omp simd
            for (int64_t j = 0; j < d; ++j) o[j] = (q[j] - mean) * inv * ps[j] + pb[j];
          } else {
#pragma omp simd
            for (int64_t j = 0; j < d; ++j) o[j] = (q[j] - mean) * inv * ps[j];
          }
          if constexpr (!std::is_same_v<T, C>) {
            for (int64_t j = 0; j < d; ++j) dst[r * d + j] = FromC<T>(buf[j]);
          }
          if (!means.empty()) means[r] = mean;
          if (!invs.empty()) invs[r] = inv;
        }
      });
      return Status::OK();
    });
    RETURN_IF_ERROR(st);
    if (want_mean) {
      ASSIGN_OR_RETURN(Tensor * t, ctx.Output(1, stat_type_, stat_shape));
      RETURN_IF_ERROR(WriteFloats(means, t));
    }
    if (want_inv) {
      ASSIGN_OR_RETURN(Tensor * t, ctx.Output(2, stat_type_, stat_shape));
      RETURN_IF_ERROR(WriteFloats(invs, t));
    }
    return Status::OK();
  }

 private:
  bool rms_ = false;
  int64_t axis_ = -1;
  float epsilon_ = 1e-5f;
  DataType stat_type_ = DataType::kFloat;
};

// ---------------------------------------------------------------------------------------------------------------
// LpNormalization: x / ||x||_p along one axis (p = 1 or 2); a zero norm gives zeros.

class LpNormKernel : public OpKernel {
 public:
  static StatusOr<KernelPtr> Create(const KernelInfo& info) {
    auto k = std::make_unique<LpNormKernel>();
    k->axis_ = info.GetInt("axis", -1);
    k->p_ = info.GetInt("p", 2);
    if (k->p_ != 1 && k->p_ != 2) return info.Error(ErrorCode::INVALID_GRAPH, "p must be 1 or 2, got ", k->p_);
    return KernelPtr(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (!x) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input is required");
    const int64_t rank = static_cast<int64_t>(x->rank());
    if (rank == 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must have rank >= 1");
    int64_t axis = 0;
    RETURN_IF_ERROR(NormalizeAxis(ctx, axis_, rank, &axis));
    int64_t outer = 1, n = x->dim(axis), inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= x->dim(i);
    for (int64_t i = axis + 1; i < rank; ++i) inner *= x->dim(i);
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), x->shape()));
    const bool l1 = p_ == 1;
    return DispatchType<EPCTX_FLOAT_TYPES>(x->dtype(), "LpNormalization", [&](auto tag) {
      using T = decltype(tag);
      const T* src = x->data<T>();
      T* dst = y->data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          double norm = 0;
          for (int64_t k = 0; k < n; ++k) {
            const double v = ToC<double>(src[(o * n + k) * inner + i]);
            norm += l1 ? std::fabs(v) : v * v;
          }
          if (!l1) norm = std::sqrt(norm);
          for (int64_t k = 0; k < n; ++k) {
            const int64_t at = (o * n + k) * inner + i;
            dst[at] = FromC<T>(norm == 0 ? 0.0 : ToC<double>(src[at]) / norm);
          }
        }
      return Status::OK();
    });
  }

 private:
  int64_t axis_ = -1, p_ = 2;
};

// ---------------------------------------------------------------------------------------------------------------
// GroupNormalization: X (N, C, D...) in num_groups groups of C/G channels, each normalized over its channels and
// spatial positions. Version 18 takes scale and bias per group (G values), version 21 per channel (C values).

class GroupNormKernel : public OpKernel {
 public:
  static StatusOr<KernelPtr> Create(const KernelInfo& info) {
    auto k = std::make_unique<GroupNormKernel>();
    ASSIGN_OR_RETURN(k->groups_, info.RequireInt("num_groups"));
    if (k->groups_ <= 0) return info.Error(ErrorCode::INVALID_GRAPH, "num_groups must be positive, got ", k->groups_);
    k->epsilon_ = info.GetFloat("epsilon", 1e-5f);
    k->per_channel_ = info.opset() >= 21;
    return KernelPtr(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* scale = ctx.Input(1);
    const Tensor* bias = ctx.Input(2);
    if (!x || !scale || !bias) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "inputs X, scale and bias are required");
    if (x->rank() < 2)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "X must have shape (N, C, ...), got ", ShapeToString(x->shape()));
    const int64_t n = x->dim(0), c = x->dim(1), g = groups_;
    if (c % g != 0)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "C = ", c, " is not a multiple of num_groups = ", g);
    int64_t s = 1;
    for (size_t d = 2; d < x->rank(); ++d) s *= x->dim(d);
    const int64_t want = per_channel_ ? c : g;
    if (scale->NumElements() != want || bias->NumElements() != want)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "scale ", ShapeToString(scale->shape()), " and bias ",
                       ShapeToString(bias->shape()), " must have ", want, per_channel_ ? " (C)" : " (num_groups)",
                       " elements");
    ASSIGN_OR_RETURN(std::vector<double> sc, ReadFloats(ctx, *scale, "scale"));
    ASSIGN_OR_RETURN(std::vector<double> bi, ReadFloats(ctx, *bias, "bias"));
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), x->shape()));
    const int64_t cg = c / g, len = cg * s;
    const double eps = epsilon_;
    const bool per_channel = per_channel_;
    return DispatchType<EPCTX_FLOAT_TYPES>(x->dtype(), "GroupNormalization", [&](auto tag) {
      using T = decltype(tag);
      using C = ComputeOf<T>;
      const T* src = x->data<T>();
      T* dst = y->data<T>();
      ParallelFor(ctx.num_threads(), n * g, static_cast<double>(len) * 4, [&](int64_t b0, int64_t e0) {
        std::vector<C> buf(static_cast<size_t>(len));
        for (int64_t grp = b0; grp < e0; ++grp) {
          const int64_t gi = grp % g;
          const T* p = src + grp * len;
          for (int64_t j = 0; j < len; ++j) buf[j] = ToC<C>(p[j]);
          const C* q = buf.data();
          const C mean = LaneSum<C>(len, [&](int64_t j) { return q[j]; }) / static_cast<C>(len);
          const C sq = LaneSum<C>(len, [&](int64_t j) { return (q[j] - mean) * (q[j] - mean); });
          const C inv = static_cast<C>(1.0 / std::sqrt(static_cast<double>(sq) / len + eps));
          T* o = dst + grp * len;
          for (int64_t ch = 0; ch < cg; ++ch) {
            const int64_t pi = per_channel ? gi * cg + ch : gi;
            const C ka = inv * static_cast<C>(sc[pi]);
            const C kb = static_cast<C>(bi[pi]) - mean * ka;
            const C* qc = q + ch * s;
            if constexpr (std::is_same_v<T, C>) {
              T* oc = o + ch * s;
#pragma omp simd
              for (int64_t j = 0; j < s; ++j) oc[j] = qc[j] * ka + kb;
            } else {
              for (int64_t j = 0; j < s; ++j) o[ch * s + j] = FromC<T>(qc[j] * ka + kb);
            }
          }
        }
      });
      return Status::OK();
    });
  }

 private:
  int64_t groups_ = 1;
  float epsilon_ = 1e-5f;
  bool per_channel_ = true;
};

// ---------------------------------------------------------------------------------------------------------------
// LRN: y = x / (bias + alpha / size * sum of x^2 over a window of channels) ^ beta.

class LrnKernel : public OpKernel {
 public:
  static StatusOr<KernelPtr> Create(const KernelInfo& info) {
    auto k = std::make_unique<LrnKernel>();
    ASSIGN_OR_RETURN(k->size_, info.RequireInt("size"));
    if (k->size_ <= 0) return info.Error(ErrorCode::INVALID_ARGUMENT, "size must be positive, got ", k->size_);
    k->alpha_ = info.GetFloat("alpha", 1e-4f);
    k->beta_ = info.GetFloat("beta", 0.75f);
    k->bias_ = info.GetFloat("bias", 1.0f);
    return KernelPtr(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (!x) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input X is missing");
    if (x->rank() < 2)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "X must have shape (N, C, ...), got ", ShapeToString(x->shape()));
    const int64_t n = x->dim(0), c = x->dim(1);
    int64_t s = 1;
    for (size_t d = 2; d < x->rank(); ++d) s *= x->dim(d);
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), x->shape()));
    const int64_t before = (size_ - 1) / 2, after = size_ - 1 - before;  // floor and ceil of (size-1)/2
    return DispatchType<EPCTX_FLOAT_TYPES>(x->dtype(), "LRN", [&](auto tag) {
      using T = decltype(tag);
      using C = ComputeOf<T>;
      const T* src = x->data<T>();
      T* dst = y->data<T>();
      const C k = static_cast<C>(alpha_) / static_cast<C>(size_), bias = bias_, beta = beta_;
      ParallelFor(ctx.num_threads(), n * c, static_cast<double>(s * (size_ + 8)), [&](int64_t b, int64_t e) {
        std::vector<C> acc(s);
        for (int64_t plane = b; plane < e; ++plane) {
          const int64_t img = plane / c, ch = plane % c;
          std::fill(acc.begin(), acc.end(), C(0));
          for (int64_t cc = std::max<int64_t>(0, ch - before); cc <= std::min(c - 1, ch + after); ++cc) {
            const T* q = src + (img * c + cc) * s;
            for (int64_t j = 0; j < s; ++j) {
              C v = ToC<C>(q[j]);
              acc[j] += v * v;
            }
          }
          const T* q = src + plane * s;
          T* o = dst + plane * s;
          for (int64_t j = 0; j < s; ++j) o[j] = FromC<T>(ToC<C>(q[j]) / std::pow(bias + k * acc[j], beta));
        }
      });
      return Status::OK();
    });
  }

 private:
  int64_t size_ = 1;
  float alpha_ = 1e-4f, beta_ = 0.75f, bias_ = 1.0f;
};

// ---------------------------------------------------------------------------------------------------------------
// MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) with statistics over `axes`.

class MvnKernel : public OpKernel {
 public:
  explicit MvnKernel(const KernelInfo& info) : axes_(info.GetInts("axes", {0, 2, 3})) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (!x) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input X is missing");
    const int64_t rank = static_cast<int64_t>(x->rank());
    std::vector<bool> reduced(rank, false);
    for (int64_t a : axes_) {
      int64_t ax = 0;
      RETURN_IF_ERROR(NormalizeAxis(ctx, a, rank, &ax));
      reduced[ax] = true;
    }
    // Group stride per dim: index of an element's statistics group = sum over kept dims of idx * gstride.
    std::vector<int64_t> gstride(rank, 0);
    int64_t groups = 1, count = 1;
    for (int64_t d = rank; d-- > 0;) {
      if (reduced[d]) {
        count *= x->dim(d);
      } else {
        gstride[d] = groups;
        groups *= x->dim(d);
      }
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), x->shape()));
    const int64_t total = x->NumElements();
    if (total == 0) return Status::OK();
    // Calls fn(flat index, group) for every element in order.
    auto walk = [&](auto&& fn) {
      std::vector<int64_t> idx(rank, 0);
      int64_t g = 0;
      for (int64_t k = 0; k < total; ++k) {
        fn(k, g);
        for (int64_t d = rank; d-- > 0;) {
          g += gstride[d];
          if (++idx[d] < x->dim(d)) break;
          g -= gstride[d] * x->dim(d);
          idx[d] = 0;
        }
      }
    };
    return DispatchType<EPCTX_FLOAT_TYPES>(x->dtype(), "MeanVarianceNormalization", [&](auto tag) {
      using T = decltype(tag);
      const T* src = x->data<T>();
      T* dst = y->data<T>();
      std::vector<double> mean(groups, 0.0), var(groups, 0.0);
      walk([&](int64_t k, int64_t g) { mean[g] += ToC<double>(src[k]); });
      for (auto& m : mean) m /= static_cast<double>(count);
      walk([&](int64_t k, int64_t g) {
        double dlt = ToC<double>(src[k]) - mean[g];
        var[g] += dlt * dlt;
      });
      for (auto& v : var) v = std::sqrt(v / static_cast<double>(count)) + 1e-9;
      walk([&](int64_t k, int64_t g) { dst[k] = FromC<T>((ToC<double>(src[k]) - mean[g]) / var[g]); });
      return Status::OK();
    });
  }

 private:
  std::vector<int64_t> axes_;
};

}  // namespace

void RegisterReductionNormKernels(KernelRegistry& r) {
  r.Register("", "BatchNormalization", MakeFactory<BatchNormKernel>());
  r.Register("", "InstanceNormalization", MakeFactory<InstanceNormKernel>());
  // LayerNormalization is standard from opset 17; older exporters emit it in the default domain too.
  r.Register("", "LayerNormalization", [](const KernelInfo& info) { return LayerNormKernel::Create(info); });
  r.Register("", "RMSNormalization", [](const KernelInfo& info) { return LayerNormKernel::Create(info); }, 23);
  r.Register("", "GroupNormalization", [](const KernelInfo& info) { return GroupNormKernel::Create(info); }, 18);
  r.Register("", "LpNormalization", [](const KernelInfo& info) { return LpNormKernel::Create(info); });
  r.Register("", "LRN", [](const KernelInfo& info) { return LrnKernel::Create(info); });
  r.Register("", "MeanVarianceNormalization", MakeFactory<MvnKernel>());
}

}  // namespace epctx
