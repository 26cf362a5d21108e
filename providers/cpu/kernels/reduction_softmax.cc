// Softmax, LogSoftmax, Hardmax and the losses built on them (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).
//
// Before opset 13 the softmax family flattens the input to 2-D at `axis`; from 13 it works along one axis. Both are
// the [outer, n, inner] walk below (the 2-D form has inner = 1). Float rows with inner = 1 run in place on the
// tensors; other cases go through a float (double for double) scratch block.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/reduction_common.h"

namespace epctx {

void RegisterReductionSoftmaxKernels(KernelRegistry& r);

namespace {

using namespace reduction_internal;  // NOLINT: the family's private helpers
using KernelPtr = std::unique_ptr<OpKernel>;

enum class SoftKind { kSoftmax, kLogSoftmax, kHardmax };

// One contiguous row; y may alias x.
template <typename C>
void SoftmaxRow(const C* x, C* y, int64_t n, SoftKind kind) {
  const C m = LaneMax<C>(n, [&](int64_t i) { return x[i]; });
  if (kind == SoftKind::kHardmax) {
    int64_t idx = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (x[i] == m) {
        idx = i;
        break;
      }
    }
    for (int64_t i = 0; i < n; ++i) y[i] = C(0);
    if (n > 0) y[idx] = C(1);
    return;
  }
  if (kind == SoftKind::kSoftmax) {
    const C s = LaneSum<C>(n, [&](int64_t i) {
      C e = FastExp(x[i] - m);
      y[i] = e;
      return e;
    });
    const C inv = C(1) / s;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  } else {
    // (x - m) - log(s) rather than x - (m + log(s)): keeps precision when |m| is large.
    const C ls = std::log(LaneSum<C>(n, [&](int64_t i) { return FastExp(x[i] - m); }));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - ls;
  }
}

// Softmax down the columns of a w-wide block of n rows: x rows are xs apart, y rows ys apart (y may be x).
template <typename C>
void SoftmaxColumns(const C* x, int64_t xs, C* y, int64_t ys, int64_t n, int64_t w, SoftKind kind, C* mx, C* sum) {
  for (int64_t i = 0; i < w; ++i) {
    mx[i] = -std::numeric_limits<C>::infinity();
    sum[i] = 0;
  }
  for (int64_t j = 0; j < n; ++j) {
    const C* row = x + j * xs;
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) mx[i] = row[i] > mx[i] ? row[i] : mx[i];
  }
  if (kind == SoftKind::kHardmax) {
    // sum[] marks columns whose max was already placed (first occurrence wins).
    for (int64_t j = 0; j < n; ++j) {
      const C* row = x + j * xs;
      C* out = y + j * ys;
      for (int64_t i = 0; i < w; ++i) {
        bool hit = sum[i] == 0 && row[i] == mx[i];
        if (hit) sum[i] = 1;
        out[i] = hit ? C(1) : C(0);
      }
    }
    // Columns without a match (all NaN) get the first index, as a row would.
    for (int64_t i = 0; i < w; ++i)
      if (sum[i] == 0 && n > 0) y[i] = C(1);
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    const C* row = x + j * xs;
    C* out = y + j * ys;
    if (kind == SoftKind::kSoftmax) {
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) {
        C e = FastExp(row[i] - mx[i]);
        out[i] = e;
        sum[i] += e;
      }
    } else {
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) sum[i] += FastExp(row[i] - mx[i]);
    }
  }
  if (kind == SoftKind::kSoftmax) {
    for (int64_t i = 0; i < w; ++i) sum[i] = C(1) / sum[i];
    for (int64_t j = 0; j < n; ++j) {
      C* out = y + j * ys;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) out[i] *= sum[i];
    }
  } else {
    for (int64_t i = 0; i < w; ++i) sum[i] = std::log(sum[i]);
    for (int64_t j = 0; j < n; ++j) {
      const C* row = x + j * xs;
      C* out = y + j * ys;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) out[i] = (row[i] - mx[i]) - sum[i];
    }
  }
}

// y[o][:][i] = softmax-kind of x[o][:][i].
template <typename T>
void SoftmaxAlong(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, SoftKind kind, int num_threads) {
  using C = ComputeOf<T>;
  if (inner == 1) {
    ParallelFor(num_threads, outer, static_cast<double>(n) * 8, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<T, C>) {
        for (int64_t o = b; o < e; ++o) SoftmaxRow<C>(x + o * n, y + o * n, n, kind);
      } else {
        std::vector<C> buf(static_cast<size_t>(n));
        for (int64_t o = b; o < e; ++o) {
          const T* src = x + o * n;
          for (int64_t i = 0; i < n; ++i) buf[i] = ToC<C>(src[i]);
          SoftmaxRow<C>(buf.data(), buf.data(), n, kind);
          T* dst = y + o * n;
          for (int64_t i = 0; i < n; ++i) dst[i] = FromC<T>(buf[i]);
        }
      }
    });
    return;
  }
  if constexpr (std::is_same_v<T, C>) {
    // Directly on the tensors, in blocks of columns.
    constexpr int64_t kBlock = 1024;
    const int64_t block = std::min(inner, kBlock);
    const int64_t nblock = (inner + block - 1) / block;
    ParallelFor(num_threads, outer * nblock, static_cast<double>(n * block) * 8, [&](int64_t b, int64_t e) {
      std::vector<C> mx(block), sum(block);
      for (int64_t t = b; t < e; ++t) {
        int64_t o = t / nblock, i0 = (t % nblock) * block, w = std::min(inner, i0 + block) - i0;
        const int64_t off = o * n * inner + i0;
        SoftmaxColumns<C>(x + off, inner, y + off, inner, n, w, kind, mx.data(), sum.data());
      }
    });
  } else {
    // 16-bit floats: through a float copy of each block.
    const int64_t block = std::max<int64_t>(16, std::min<int64_t>(inner, 4096 / std::max<int64_t>(n, 1)));
    const int64_t nblock = (inner + block - 1) / block;
    ParallelFor(num_threads, outer * nblock, static_cast<double>(n * std::min(block, inner)) * 8,
                [&](int64_t b, int64_t e) {
                  std::vector<C> buf(static_cast<size_t>(n * block)), mx(block), sum(block);
                  for (int64_t t = b; t < e; ++t) {
                    int64_t o = t / nblock, i0 = (t % nblock) * block, w = std::min(inner, i0 + block) - i0;
                    for (int64_t j = 0; j < n; ++j) {
                      const T* src = x + (o * n + j) * inner + i0;
                      for (int64_t i = 0; i < w; ++i) buf[j * w + i] = ToC<C>(src[i]);
                    }
                    SoftmaxColumns<C>(buf.data(), w, buf.data(), w, n, w, kind, mx.data(), sum.data());
                    for (int64_t j = 0; j < n; ++j) {
                      T* dst = y + (o * n + j) * inner + i0;
                      for (int64_t i = 0; i < w; ++i) dst[i] = FromC<T>(buf[j * w + i]);
                    }
                  }
                });
  }
}

const char* SoftKindName(SoftKind k) {
  return k == SoftKind::kSoftmax ? "Softmax" : k == SoftKind::kLogSoftmax ? "LogSoftmax" : "Hardmax";
}

class SoftmaxKernel : public OpKernel {
 public:
  SoftmaxKernel(const KernelInfo& info, SoftKind kind)
      : kind_(kind), coerce_2d_(info.opset() < 13), axis_(info.GetInt("axis", info.opset() < 13 ? 1 : -1)) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (!x) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input 0 is missing");
    const int64_t rank = static_cast<int64_t>(x->rank());
    if (rank == 0) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must have rank >= 1");
    int64_t axis = 0;
    RETURN_IF_ERROR(NormalizeAxis(ctx, axis_, rank, &axis));
    int64_t outer = 1, n = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x->dim(d);
    if (coerce_2d_) {
      for (int64_t d = axis; d < rank; ++d) n *= x->dim(d);
    } else {
      n = x->dim(axis);
      for (int64_t d = axis + 1; d < rank; ++d) inner *= x->dim(d);
    }
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), x->shape()));
    if (x->NumElements() == 0) return Status::OK();
    return DispatchType<EPCTX_FLOAT_TYPES>(x->dtype(), SoftKindName(kind_), [&](auto tag) {
      using T = decltype(tag);
      SoftmaxAlong<T>(x->data<T>(), y->data<T>(), outer, n, inner, kind_, ctx.num_threads());
      return Status::OK();
    });
  }

 private:
  SoftKind kind_;
  bool coerce_2d_;
  int64_t axis_;
};

// ---------------------------------------------------------------------------------------------------------------
// Losses.

enum class Reduction { kNone, kSum, kMean };

class LossKernel : public OpKernel {
 public:
  static StatusOr<KernelPtr> Create(const KernelInfo& info, bool softmax_first) {
    auto k = std::make_unique<LossKernel>();
    k->softmax_first_ = softmax_first;
    std::string red = info.GetString("reduction", "mean");
    if (red == "none") {
      k->reduction_ = Reduction::kNone;
    } else if (red == "sum") {
      k->reduction_ = Reduction::kSum;
    } else if (red == "mean") {
      k->reduction_ = Reduction::kMean;
    } else {
      return info.Error(ErrorCode::INVALID_ARGUMENT, "reduction must be 'none', 'sum' or 'mean', got '", red, "'");
    }
    k->has_ignore_ = info.HasAttr("ignore_index");
    k->ignore_index_ = info.GetInt("ignore_index", 0);
    return KernelPtr(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* labels = ctx.Input(1);
    const Tensor* weights = ctx.Input(2);
    if (!x || !labels) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "inputs 0 and 1 are required");
    if (x->rank() < 2)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input must have shape (N, C, ...), got ", ShapeToString(x->shape()));
    const int64_t n = x->dim(0), c = x->dim(1);
    Shape label_shape = {n};
    for (size_t d = 2; d < x->rank(); ++d) label_shape.push_back(x->dim(d));
    if (labels->shape() != label_shape)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "target shape ", ShapeToString(labels->shape()),
                       " does not match input shape ", ShapeToString(x->shape()), " (expected ",
                       ShapeToString(label_shape), ")");
    if (labels->dtype() != DataType::kInt32 && labels->dtype() != DataType::kInt64)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "target must be int32 or int64, got ", DataTypeName(labels->dtype()));
    if (weights && (weights->rank() != 1 || weights->dim(0) != c || weights->dtype() != x->dtype()))
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "weight must be a 1-D ", DataTypeName(x->dtype()), " tensor of C = ",
                       c, " elements, got ", DataTypeName(weights->dtype()), ShapeToString(weights->shape()));
    const int64_t d = ShapeSize(label_shape) / std::max<int64_t>(n, 1);
    const int64_t count = n * d;
    std::vector<int64_t> label(static_cast<size_t>(count));
    if (labels->dtype() == DataType::kInt64) {
      std::copy(labels->data<int64_t>(), labels->data<int64_t>() + count, label.begin());
    } else {
      std::copy(labels->data<int32_t>(), labels->data<int32_t>() + count, label.begin());
    }
    for (int64_t i = 0; i < count; ++i) {
      if (has_ignore_ && label[i] == ignore_index_) continue;
      if (label[i] < 0 || label[i] >= c)
        return ctx.Error(ErrorCode::INVALID_ARGUMENT, "target value ", label[i], " at flat index ", i,
                         " is outside [0, ", c, ")", has_ignore_ ? " and is not ignore_index" : "");
    }
    return DispatchType<EPCTX_FLOAT_TYPES>(x->dtype(), softmax_first_ ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss",
                                           [&](auto tag) {
                                             using T = decltype(tag);
                                             return ComputeTyped<T>(ctx, *x, label, weights, n, c, d, label_shape);
                                           });
  }

 private:
  template <typename T>
  Status ComputeTyped(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& label, const Tensor* weights,
                      int64_t n, int64_t c, int64_t d, const Shape& label_shape) const {
    const T* logp = x.data<T>();
    Tensor scratch;
    if (softmax_first_) {
      Tensor* lp = nullptr;
      if (ctx.num_outputs() > 1 && ctx.OutputRequested(1)) {
        ASSIGN_OR_RETURN(lp, ctx.Output(1, x.dtype(), x.shape()));
      } else {
        ASSIGN_OR_RETURN(scratch, Tensor::Allocate(x.dtype(), x.shape()));
        lp = &scratch;
      }
      if (x.NumElements() > 0)
        SoftmaxAlong<T>(x.data<T>(), lp->data<T>(), n, c, d, SoftKind::kLogSoftmax, ctx.num_threads());
      logp = lp->data<T>();
    }
    const T* w = weights ? weights->data<T>() : nullptr;
    const int64_t count = n * d;
    Tensor* out = nullptr;
    ASSIGN_OR_RETURN(out, ctx.Output(0, x.dtype(), reduction_ == Reduction::kNone ? label_shape : Shape{}));
    double loss_sum = 0, weight_sum = 0;
    T* dst = out->data<T>();
    for (int64_t s = 0; s < count; ++s) {
      int64_t b = s / d, i = s % d, l = label[s];
      double loss = 0, wt = 0;
      if (!(has_ignore_ && l == ignore_index_)) {
        wt = w ? ToC<double>(w[l]) : 1.0;
        loss = -ToC<double>(logp[(b * c + l) * d + i]) * wt;
      }
      if (reduction_ == Reduction::kNone) {
        dst[s] = FromC<T>(static_cast<ComputeOf<T>>(loss));
      } else {
        loss_sum += loss;
        weight_sum += wt;
      }
    }
    if (reduction_ == Reduction::kSum) dst[0] = FromC<T>(static_cast<ComputeOf<T>>(loss_sum));
    // mean: sum(loss) / sum(weights of counted samples); 0/0 gives NaN like the reference.
    if (reduction_ == Reduction::kMean) dst[0] = FromC<T>(static_cast<ComputeOf<T>>(loss_sum / weight_sum));
    return Status::OK();
  }

  bool softmax_first_ = false;
  Reduction reduction_ = Reduction::kMean;
  bool has_ignore_ = false;
  int64_t ignore_index_ = 0;
};

}  // namespace

void RegisterReductionSoftmaxKernels(KernelRegistry& r) {
  auto soft = [](SoftKind kind) {
    return [kind](const KernelInfo& info) -> StatusOr<KernelPtr> { return KernelPtr(new SoftmaxKernel(info, kind)); };
  };
  r.Register("", "Softmax", soft(SoftKind::kSoftmax));
  r.Register("", "LogSoftmax", soft(SoftKind::kLogSoftmax));
  r.Register("", "Hardmax", soft(SoftKind::kHardmax));
  r.Register("", "NegativeLogLikelihoodLoss", [](const KernelInfo& info) { return LossKernel::Create(info, false); },
             12);
  r.Register("", "SoftmaxCrossEntropyLoss", [](const KernelInfo& info) { return LossKernel::Create(info, true); }, 12);
}

}  // namespace epctx
