// Pooling: MaxPool, AveragePool, LpPool, their Global* forms and MaxUnpool. float max/average pooling without an
// indices output runs on oneDNN's pooling primitive (plain layouts, or the layout the session's layout pass gave X
// and Y, cached per input shape; a plain tensor that oneDNN would pool with simple_nchw, as at AVX2, is pooled in
// channels-last between two reorders); everything else
// (indices, double/float16/int8/uint8, LpPool, windows oneDNN averages differently) uses direct loops over the
// N*C planes in parallel.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "providers/cpu/kernels/nn_common.h"

namespace epctx {
namespace nn {
namespace {

using dnnl::memory;

enum class PoolKind { kMax, kAverage, kLp };

// The primitive runs on src/dst; when they differ from the tensors' own layout (user_src/user_dst), reorders
// bracket it through the scratch buffer.
struct DnnlPoolPlan {
  dnnl::primitive prim;
  memory::desc src, dst, scratch_md;
  memory::desc user_src, user_dst;
  dnnl::reorder to_src, to_user_dst;  // empty when the primitive runs on the user layout
  size_t scratch_total = 0;
};

// True for oneDNN pooling implementations that are not vectorized over channels: on a plain NCHW tensor oneDNN
// 2.6 has only "simple_nchw" (one window at a time; 20-30x slower than its jit kernels, perftest 2_72_conv) or a
// reference kernel.
bool SlowPoolImpl(const std::string& impl) {
  return impl.rfind("simple", 0) == 0 || impl.rfind("ref", 0) == 0;
}

// Calls fn(out_index, in_offsets...) for each output position of one plane; the taps of a window are visited by
// VisitWindow. Kept as a small struct so the per-axis bookkeeping is computed once per plane.
struct WindowWalker {
  const WindowGeom& g;
  explicit WindowWalker(const WindowGeom& geom) : g(geom) {}

  // For the output position `o`, calls tap(in_index, col_major_index) for every tap inside the input and returns
  // the number of taps that fall inside [-pad_begin, in + pad_end) (the padded extent) in *padded_count.
  template <typename Tap>
  int64_t VisitWindow(const std::vector<int64_t>& o, std::vector<int64_t>& k, Tap&& tap, int64_t* padded_count) const {
    const size_t r = g.rank();
    std::fill(k.begin(), k.end(), 0);
    int64_t valid = 0, padded = 0;
    const int64_t ks = g.KernelSize();
    for (int64_t t = 0; t < ks; ++t) {
      int64_t idx = 0, col = 0, col_stride = 1;
      bool inside = true, in_padded = true;
      for (size_t d = 0; d < r; ++d) {
        int64_t id = o[d] * g.stride[d] + k[d] * g.dilation[d] - g.pad_begin[d];
        if (id < 0 || id >= g.in[d]) inside = false;
        if (id < -g.pad_begin[d] || id >= g.in[d] + g.pad_end[d]) in_padded = false;
        idx = idx * g.in[d] + id;
        col += id * col_stride;
        col_stride *= g.in[d];
      }
      if (in_padded) ++padded;
      if (inside) {
        ++valid;
        tap(idx, col);
      }
      for (size_t d = r; d-- > 0;) {
        if (++k[d] < g.kernel[d]) break;
        k[d] = 0;
      }
    }
    *padded_count = padded;
    return valid;
  }
};

void NextIndex(std::vector<int64_t>& o, const std::vector<int64_t>& dims) {
  for (size_t d = dims.size(); d-- > 0;) {
    if (++o[d] < dims[d]) return;
    o[d] = 0;
  }
}

// Direct pooling over planes [0, planes): x and y are [planes, in...] and [planes, out...].
template <typename T>
void PoolDirect(PoolKind kind, const WindowGeom& g, int64_t planes, const T* x, T* y, int64_t* indices,
                bool col_major, bool count_include_pad, float p, int threads) {
  const int64_t in_size = g.InSize(), out_size = g.OutSize();
  ParallelFor(threads, planes, static_cast<double>(out_size * g.KernelSize()), [&](int64_t lo, int64_t hi) {
    WindowWalker w(g);
    std::vector<int64_t> o(g.rank()), k(g.rank());
    for (int64_t pl = lo; pl < hi; ++pl) {
      const T* xp = x + pl * in_size;
      T* yp = y + pl * out_size;
      std::fill(o.begin(), o.end(), 0);
      for (int64_t oi = 0; oi < out_size; ++oi, NextIndex(o, g.out)) {
        int64_t padded = 0;
        if (kind == PoolKind::kMax) {
          T best = std::numeric_limits<T>::lowest();  // also the value of a window lying wholly in padding
          int64_t best_idx = -1, best_col = -1;
          w.VisitWindow(o, k, [&](int64_t idx, int64_t col) {
            T v = xp[idx];
            if (best_idx < 0 || v > best) {
              best = v;
              best_idx = idx;
              best_col = col;
            }
          }, &padded);
          yp[oi] = best;
          if (indices) indices[pl * out_size + oi] = best_idx < 0 ? 0 : pl * in_size + (col_major ? best_col : best_idx);
        } else if (kind == PoolKind::kAverage) {
          double sum = 0;
          int64_t valid = w.VisitWindow(o, k, [&](int64_t idx, int64_t) { sum += static_cast<double>(xp[idx]); },
                                        &padded);
          int64_t div = count_include_pad ? padded : valid;
          yp[oi] = static_cast<T>(div > 0 ? sum / static_cast<double>(div) : 0.0);
        } else {
          double sum = 0;
          w.VisitWindow(o, k, [&](int64_t idx, int64_t) {
            double a = std::fabs(static_cast<double>(xp[idx]));
            sum += p == 2.f ? a * a : p == 1.f ? a : std::pow(a, static_cast<double>(p));
          }, &padded);
          yp[oi] = static_cast<T>(p == 2.f ? std::sqrt(sum) : p == 1.f ? sum : std::pow(sum, 1.0 / p));
        }
      }
    }
  });
}

class PoolKernel final : public OpKernel {
 public:
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info, PoolKind kind, bool global) {
    std::unique_ptr<PoolKernel> k(new PoolKernel(kind, global));
    if (!global) {
      // dilations: MaxPool, AveragePool from 19, LpPool from 18; ceil_mode: LpPool from 18.
      const bool dilations = kind == PoolKind::kMax || (kind == PoolKind::kAverage && info.opset() >= 19) ||
                             (kind == PoolKind::kLp && info.opset() >= 18);
      RETURN_IF_ERROR(k->attrs_.Parse(info, dilations, /*has_ceil_mode=*/kind != PoolKind::kLp || info.opset() >= 18));
      if (k->attrs_.kernel_shape.empty())
        return info.Error(ErrorCode::INVALID_GRAPH, "required attribute 'kernel_shape' is missing");
    }
    k->storage_order_ = info.GetInt("storage_order", 0);
    if (k->storage_order_ != 0 && k->storage_order_ != 1)
      return info.Error(ErrorCode::INVALID_GRAPH, "storage_order must be 0 or 1, got ", k->storage_order_);
    k->count_include_pad_ = info.GetInt("count_include_pad", 0) != 0;
    if (info.HasAttr(kSrcLayoutAttr)) {
      const std::string name = info.GetString(kSrcLayoutAttr, "");
      if (!ParseCpuLayout(name, &k->layout_) || global || kind == PoolKind::kLp || info.num_outputs() > 1)
        return info.Error(ErrorCode::INVALID_GRAPH, "internal attribute '", kSrcLayoutAttr, "' is '", name,
                          "' (a layout, on MaxPool or AveragePool without indices)");
    }
    if (kind == PoolKind::kLp) {
      const Attribute* pa = info.node().attr("p");
      if (pa && pa->type == Attribute::Type::kFloat) k->p_ = pa->f;  // opset 1 declared p as a float
      else k->p_ = static_cast<float>(info.GetInt("p", 2));
      if (!(k->p_ > 0)) return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'p' must be positive, got ", k->p_);
    }
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const std::string node = ctx.node().Describe();
    RETURN_ERROR_IF(!x, INVALID_ARGUMENT, node, ": input X is required");
    RETURN_ERROR_IF(x->rank() < (global_ ? 2u : 3u), INVALID_ARGUMENT, node, ": X must have rank >= ",
                    global_ ? 2 : 3, " (N, C, spatial...), got ", ShapeToString(x->shape()));
    if (layout_ != CpuLayout::kPlain) return ComputeLaidOut(ctx, *x);
    const Shape& xs = x->shape();
    const int64_t planes = xs[0] * xs[1];
    Shape in(xs.begin() + 2, xs.end());
    WindowGeom g;
    if (global_) {
      g.in = in;
      g.kernel = in;
      g.stride.assign(in.size(), 1);
      g.dilation.assign(in.size(), 1);
      g.pad_begin.assign(in.size(), 0);
      g.pad_end.assign(in.size(), 0);
      g.out.assign(in.size(), 1);
    } else {
      RETURN_IF_ERROR_CTX(ResolveWindow(attrs_, in, attrs_.kernel_shape, /*is_pool=*/true, &g), node);
    }
    const Shape y_shape = PooledShape(xs, g);
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), y_shape));
    Tensor* ind = nullptr;
    if (kind_ == PoolKind::kMax && ctx.OutputRequested(1)) {
      ASSIGN_OR_RETURN(ind, ctx.Output(1, DataType::kInt64, y_shape));
    }
    if (y->NumElements() == 0) return Status::OK();
    const int threads = ctx.num_threads();
    if (global_) return Global(ctx, *x, planes, g.InSize(), y);
    int64_t* ip = ind ? ind->data<int64_t>() : nullptr;
    const bool col_major = storage_order_ == 1;
    switch (x->dtype()) {
      case DataType::kFloat: {
        if (!ip && g.rank() <= 3 && kind_ != PoolKind::kLp) {
          auto plan = GetPlan(g, xs[0], xs[1], threads);
          if (plan) return RunDnnl(*plan, x->data<float>(), y->data<float>(), threads).WithContext(node);
        }
        PoolDirect<float>(kind_, g, planes, x->data<float>(), y->data<float>(), ip, col_major, count_include_pad_, p_,
                          threads);
        return Status::OK();
      }
      case DataType::kDouble:
        PoolDirect<double>(kind_, g, planes, x->data<double>(), y->data<double>(), ip, col_major, count_include_pad_,
                           p_, threads);
        return Status::OK();
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        ASSIGN_OR_RETURN(Tensor xf, AsFloat(*x));
        ASSIGN_OR_RETURN(Tensor yf, Tensor::Allocate(DataType::kFloat, y_shape));
        PoolDirect<float>(kind_, g, planes, xf.data<float>(), yf.data<float>(), ip, col_major, count_include_pad_, p_,
                          threads);
        StoreFloat(yf, y);
        return Status::OK();
      }
      case DataType::kInt8:
      case DataType::kUint8:
        if (kind_ != PoolKind::kMax) break;
        if (x->dtype() == DataType::kInt8)
          PoolDirect<int8_t>(kind_, g, planes, x->data<int8_t>(), y->data<int8_t>(), ip, col_major, false, p_,
                             threads);
        else
          PoolDirect<uint8_t>(kind_, g, planes, x->data<uint8_t>(), y->data<uint8_t>(), ip, col_major, false, p_,
                              threads);
        return Status::OK();
      default:
        break;
    }
    return ctx.Error(ErrorCode::NOT_IMPLEMENTED, "element type ", DataTypeName(x->dtype()), " is not supported");
  }

 private:
  PoolKernel(PoolKind kind, bool global) : kind_(kind), global_(global) {}

  static Shape PooledShape(const Shape& xs, const WindowGeom& g) {
    Shape y{xs[0], xs[1]};
    y.insert(y.end(), g.out.begin(), g.out.end());
    return y;
  }

  // MaxPool / AveragePool of a float X laid out by the session's layout pass (providers/cpu/layout.h): oneDNN pools
  // the layout directly; when it refuses, the direct loops run between two reorders.
  Status ComputeLaidOut(KernelContext& ctx, const Tensor& x) const {
    const std::string node = ctx.node().Describe();
    const Shape& ps = x.shape();
    const int64_t block = CpuLayoutBlock(layout_);
    RETURN_ERROR_IF(x.dtype() != DataType::kFloat || ps.size() < 3, INVALID_ARGUMENT, node,
                    ": a laid-out pooling needs a float X of rank >= 3, got ", ShapeToString(ps));
    const int64_t channels = block ? ps[1] * block : ps.back();
    Shape xs, ys;
    RETURN_IF_ERROR_CTX(LogicalShape(ps, layout_, channels, &xs), node);
    WindowGeom g;
    RETURN_IF_ERROR_CTX(ResolveWindow(attrs_, Shape(xs.begin() + 2, xs.end()), attrs_.kernel_shape, true, &g), node);
    const Shape y_logical = PooledShape(xs, g);
    RETURN_IF_ERROR_CTX(PhysicalShape(y_logical, layout_, &ys), node);
    ASSIGN_OR_RETURN(Tensor * y, ctx.OutputForOverwrite(0, DataType::kFloat, ys));
    if (y->NumElements() == 0) return Status::OK();
    const int threads = ctx.num_threads();
    if (g.rank() <= 3) {
      if (auto plan = GetPlan(g, xs[0], xs[1], threads))
        return RunDnnl(*plan, x.data<float>(), y->data<float>(), threads).WithContext(node);
    }
    ASSIGN_OR_RETURN(Tensor xp, Tensor::Allocate(DataType::kFloat, xs));
    ASSIGN_OR_RETURN(Tensor yp, Tensor::Allocate(DataType::kFloat, y_logical));
    RETURN_IF_ERROR_CTX(ReorderLayout(xs, x.data<float>(), layout_, xp.data<float>(), CpuLayout::kPlain, threads), node);
    PoolDirect<float>(kind_, g, xs[0] * xs[1], xp.data<float>(), yp.data<float>(), nullptr, false, count_include_pad_,
                      p_, threads);
    return ReorderLayout(y_logical, yp.data<float>(), CpuLayout::kPlain, y->data<float>(), layout_, threads)
        .WithContext(node);
  }

  template <typename T>
  void GlobalLoop(int threads, int64_t planes, int64_t in_size, const T* xp, T* yp) const {
    ParallelFor(threads, planes, static_cast<double>(in_size), [&](int64_t lo, int64_t hi) {
      for (int64_t pl = lo; pl < hi; ++pl) {
        const T* src = xp + pl * in_size;
        if (kind_ == PoolKind::kMax) {
          T best = in_size ? src[0] : T(0);
          for (int64_t i = 1; i < in_size; ++i) best = src[i] > best ? src[i] : best;
          yp[pl] = best;
        } else if (kind_ == PoolKind::kAverage) {
          // A reduction under omp simd: in strict order g++ keeps the loop scalar (a global average pool was 8% of
          // the PaddleOCR classifier on the CPU EP). The double sum in vector lanes is as exact as in order.
          double sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t i = 0; i < in_size; ++i) sum += static_cast<double>(src[i]);
          yp[pl] = in_size ? static_cast<T>(sum / static_cast<double>(in_size)) : T(0);
        } else {
          double sum = 0;
          for (int64_t i = 0; i < in_size; ++i) {
            double a = std::fabs(static_cast<double>(src[i]));
            sum += p_ == 2.f ? a * a : std::pow(a, static_cast<double>(p_));
          }
          yp[pl] = static_cast<T>(p_ == 2.f ? std::sqrt(sum) : std::pow(sum, 1.0 / p_));
        }
      }
    });
  }

  Status Global(KernelContext& ctx, const Tensor& x, int64_t planes, int64_t in_size, Tensor* y) const {
    const int threads = ctx.num_threads();
    switch (x.dtype()) {
      case DataType::kFloat:
        GlobalLoop<float>(threads, planes, in_size, x.data<float>(), y->data<float>());
        return Status::OK();
      case DataType::kDouble:
        GlobalLoop<double>(threads, planes, in_size, x.data<double>(), y->data<double>());
        return Status::OK();
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        ASSIGN_OR_RETURN(Tensor xf, AsFloat(x));
        ASSIGN_OR_RETURN(Tensor yf, Tensor::Allocate(DataType::kFloat, y->shape()));
        GlobalLoop<float>(threads, planes, in_size, xf.data<float>(), yf.data<float>());
        StoreFloat(yf, y);
        return Status::OK();
      }
      default:
        return ctx.Error(ErrorCode::NOT_IMPLEMENTED, "element type ", DataTypeName(x.dtype()), " is not supported");
    }
  }

  // Whether oneDNN's averaging divisor matches ONNX for this geometry: excluding padding always does; including it
  // does when no window reaches past the explicit padding (ceil_mode can make the last window do so).
  bool DnnlAverageMatches(const WindowGeom& g) const {
    if (!count_include_pad_) return true;
    for (size_t i = 0; i < g.rank(); ++i)
      if ((g.out[i] - 1) * g.stride[i] + g.Extent(i) > g.in[i] + g.pad_begin[i] + g.pad_end[i]) return false;
    return true;
  }

  std::shared_ptr<const DnnlPoolPlan> GetPlan(const WindowGeom& g, int64_t n, int64_t c, int threads) const {
    if (kind_ == PoolKind::kAverage && !DnnlAverageMatches(g)) return nullptr;
    // A dilated average (AveragePool-19) runs on the direct loops, whose divisor counts the taps as ONNX does.
    if (kind_ == PoolKind::kAverage)
      for (int64_t d : g.dilation)
        if (d != 1) return nullptr;
    std::vector<int64_t> key{n, c, threads};
    for (const auto* v : {&g.in, &g.out, &g.pad_begin, &g.pad_end}) key.insert(key.end(), v->begin(), v->end());
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    auto plan = std::make_shared<DnnlPoolPlan>();
    ScopedOmpThreads omp(threads);
    Status st = DnnlCall("pooling setup", [&] {
      const dnnl::engine& eng = CpuEngine();
      memory::dims src{n, c}, dst{n, c}, strides, kernel, dil, pl, pr;
      for (size_t i = 0; i < g.rank(); ++i) {
        src.push_back(g.in[i]);
        dst.push_back(g.out[i]);
        strides.push_back(g.stride[i]);
        kernel.push_back(g.kernel[i]);
        dil.push_back(g.dilation[i] - 1);
        pl.push_back(g.pad_begin[i]);
        int64_t end = g.pad_end[i];
        // oneDNN derives the output size by floor division; widen the end padding for ceil_mode's extra window.
        if ((g.in[i] + g.pad_begin[i] + end - g.Extent(i)) / g.stride[i] + 1 != g.out[i])
          end = (g.out[i] - 1) * g.stride[i] + g.Extent(i) - g.in[i] - g.pad_begin[i];
        pr.push_back(end);
      }
      plan->user_src = LayoutDesc(src, layout_);
      plan->user_dst = LayoutDesc(dst, layout_);
      const dnnl::algorithm alg = kind_ == PoolKind::kMax ? dnnl::algorithm::pooling_max
                                  : count_include_pad_    ? dnnl::algorithm::pooling_avg_include_padding
                                                          : dnnl::algorithm::pooling_avg_exclude_padding;
      auto make = [&](CpuLayout l) {
        dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, LayoutDesc(src, l),
                                         LayoutDesc(dst, l), strides, kernel, dil, pl, pr);
        return dnnl::pooling_v2_forward::primitive_desc(d, UserScratchpadAttr(), eng);
      };
      dnnl::pooling_v2_forward::primitive_desc pd = make(layout_);
      // A plain tensor without a vectorized kernel: pool in channels-last between two reorders (each a pass over
      // the data), the layout oneDNN's jit pooling runs on at every ISA level and whose reorders from NCHW are plain
      // transposes. Kept only if oneDNN has a jit kernel there.
      if (layout_ == CpuLayout::kPlain && SlowPoolImpl(pd.impl_info_str())) {
        dnnl::pooling_v2_forward::primitive_desc cl = make(CpuLayout::kChannelsLast);
        if (!SlowPoolImpl(cl.impl_info_str())) pd = cl;
      }
      plan->src = pd.src_desc();
      plan->dst = pd.dst_desc();
      plan->scratch_md = pd.scratchpad_desc();
      plan->prim = dnnl::pooling_v2_forward(pd);
      size_t total = ScratchCarver::Rounded(plan->scratch_md.get_size());
      if (plan->src != plan->user_src) {
        plan->to_src = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plan->user_src, eng, plan->src));
        plan->to_user_dst = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plan->dst, eng, plan->user_dst));
        total += ScratchCarver::Rounded(plan->src.get_size()) + ScratchCarver::Rounded(plan->dst.get_size());
      }
      plan->scratch_total = total;
    });
    std::shared_ptr<const DnnlPoolPlan> result = st.ok() ? std::move(plan) : nullptr;
    if (plans_.size() >= kMaxCachedShapes) plans_.clear();
    plans_[key] = result;
    return result;
  }

  Status RunDnnl(const DnnlPoolPlan& plan, const float* x, float* y, int threads) const {
    ScopedOmpThreads omp(threads);
    ScratchCarver scratch(plan.scratch_total);
    RETURN_ERROR_IF(!scratch.ok(), FAIL, "out of memory for pooling scratch");
    return DnnlCall("pooling", [&] {
      const dnnl::engine& eng = CpuEngine();
      dnnl::stream s(eng);
      memory user_src(plan.user_src, eng, const_cast<float*>(x)), user_dst(plan.user_dst, eng, y);
      memory src = user_src, dst = user_dst;
      if (plan.to_src) {
        src = memory(plan.src, eng, scratch.Take(plan.src.get_size()));
        dst = memory(plan.dst, eng, scratch.Take(plan.dst.get_size()));
        plan.to_src.execute(s, {{DNNL_ARG_FROM, user_src}, {DNNL_ARG_TO, src}});
      }
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
      if (plan.scratch_md.get_size() > 0)
        args[DNNL_ARG_SCRATCHPAD] = memory(plan.scratch_md, eng, scratch.Take(plan.scratch_md.get_size()));
      plan.prim.execute(s, args);
      if (plan.to_user_dst) plan.to_user_dst.execute(s, {{DNNL_ARG_FROM, dst}, {DNNL_ARG_TO, user_dst}});
      s.wait();
    });
  }

  PoolKind kind_;
  bool global_;
  WindowAttrs attrs_;
  int64_t storage_order_ = 0;
  bool count_include_pad_ = false;
  float p_ = 2.f;
  CpuLayout layout_ = CpuLayout::kPlain;  // of X and Y, set by the session's layout pass
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const DnnlPoolPlan>> plans_;
};

// ---------------------------------------------------------------------------------------------------------------

class MaxUnpoolKernel final : public OpKernel {
 public:
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    std::unique_ptr<MaxUnpoolKernel> k(new MaxUnpoolKernel());
    RETURN_IF_ERROR(k->attrs_.Parse(info, false, false));
    if (k->attrs_.kernel_shape.empty())
      return info.Error(ErrorCode::INVALID_GRAPH, "required attribute 'kernel_shape' is missing");
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* ind = ctx.Input(1);
    const Tensor* out_shape = ctx.Input(2);
    const std::string node = ctx.node().Describe();
    RETURN_ERROR_IF(!x || !ind, INVALID_ARGUMENT, node, ": inputs X and I are required");
    RETURN_ERROR_IF(ind->dtype() != DataType::kInt64, INVALID_ARGUMENT, node, ": I must be int64, got ",
                    DataTypeName(ind->dtype()));
    RETURN_ERROR_IF(ind->shape() != x->shape(), INVALID_ARGUMENT, node, ": I has shape ", ShapeToString(ind->shape()),
                    " but X has shape ", ShapeToString(x->shape()));
    RETURN_ERROR_IF(x->rank() < 3, INVALID_ARGUMENT, node, ": X must have rank >= 3, got ",
                    ShapeToString(x->shape()));
    const size_t r = x->rank() - 2;
    const WindowAttrs& a = attrs_;
    RETURN_ERROR_IF(a.kernel_shape.size() != r || (!a.strides.empty() && a.strides.size() != r) ||
                        (!a.pads.empty() && a.pads.size() != 2 * r),
                    INVALID_ARGUMENT, node, ": kernel_shape/strides/pads do not match ", r, " spatial dims");
    // The indices address the unpooled tensor of the default shape; with output_shape the values keep their
    // coordinates inside a tensor of the requested shape.
    Shape dflt{x->dim(0), x->dim(1)};
    for (size_t i = 0; i < r; ++i) {
      int64_t s = a.strides.empty() ? 1 : a.strides[i];
      int64_t pads = a.pads.empty() ? 0 : a.pads[i] + a.pads[i + r];
      dflt.push_back((x->dim(i + 2) - 1) * s + a.kernel_shape[i] - pads);
    }
    Shape y_shape = dflt;
    if (out_shape) {
      RETURN_ERROR_IF(out_shape->dtype() != DataType::kInt64 || out_shape->rank() != 1 ||
                          out_shape->NumElements() != static_cast<int64_t>(x->rank()),
                      INVALID_ARGUMENT, node, ": output_shape must be an int64 vector of ", x->rank(),
                      " values, got ", DataTypeName(out_shape->dtype()), ShapeToString(out_shape->shape()));
      y_shape.assign(out_shape->data<int64_t>(), out_shape->data<int64_t>() + x->rank());
    }
    for (size_t i = 0; i < dflt.size(); ++i)
      RETURN_ERROR_IF(dflt[i] < 0 || y_shape[i] < 0 || (i < 2 && y_shape[i] != dflt[i]), INVALID_ARGUMENT, node,
                      ": output shape ", ShapeToString(y_shape), " does not fit input ", ShapeToString(x->shape()),
                      " (default output ", ShapeToString(dflt), ")");
    const size_t esize = DataTypeSize(x->dtype());
    RETURN_ERROR_IF(x->dtype() == DataType::kString || esize == 0, NOT_IMPLEMENTED, node, ": element type ",
                    DataTypeName(x->dtype()), " is not supported");
    ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x->dtype(), y_shape));
    const int64_t total = ShapeSize(dflt);
    const bool same = y_shape == dflt;
    const int64_t* ip = ind->data<int64_t>();
    const char* xp = static_cast<const char*>(x->raw_data());
    char* yp = static_cast<char*>(y->raw_data());
    for (int64_t i = 0; i < x->NumElements(); ++i) {
      RETURN_ERROR_IF(ip[i] < 0 || ip[i] >= total, INVALID_ARGUMENT, node, ": index ", ip[i], " at position ", i,
                      " is outside the unpooled tensor ", ShapeToString(dflt));
      int64_t dst = ip[i];
      if (!same) {
        int64_t rem = ip[i], stride = 1;
        dst = 0;
        for (size_t d = dflt.size(); d-- > 0;) {
          int64_t coord = rem % dflt[d];
          rem /= dflt[d];
          RETURN_ERROR_IF(coord >= y_shape[d], INVALID_ARGUMENT, node, ": index ", ip[i], " falls outside output_shape ",
                          ShapeToString(y_shape));
          dst += coord * stride;
          stride *= y_shape[d];
        }
      }
      std::memcpy(yp + dst * esize, xp + i * esize, esize);
    }
    return Status::OK();
  }

 private:
  WindowAttrs attrs_;
};

}  // namespace

void RegisterPoolKernels(KernelRegistry& r) {
  auto pool = [](PoolKind kind, bool global) {
    return [kind, global](const KernelInfo& info) { return PoolKernel::Create(info, kind, global); };
  };
  r.Register("", "MaxPool", pool(PoolKind::kMax, false));
  r.Register("", "AveragePool", pool(PoolKind::kAverage, false));
  r.Register("", "LpPool", pool(PoolKind::kLp, false));
  r.Register("", "GlobalMaxPool", pool(PoolKind::kMax, true));
  r.Register("", "GlobalAveragePool", pool(PoolKind::kAverage, true));
  r.Register("", "GlobalLpPool", pool(PoolKind::kLp, true));
  r.Register("", "MaxUnpool", [](const KernelInfo& info) { return MaxUnpoolKernel::Create(info); });
}

}  // namespace nn
}  // namespace epctx
