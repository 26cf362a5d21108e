// Conv and ConvTranspose. float (and float16/bfloat16 via float) run on oneDNN's (de)convolution primitives with
// blocked source/destination layouts chosen by oneDNN (reordered from/to the plain NCHW tensors, which measured
// faster than running on plain layouts, or read and written directly in the layout the session's layout pass gave X
// and Y: providers/cpu/layout.h), constant weights packed once into the layout the primitive wants, and one
// primitive per input shape cached in the kernel. Where oneDNN offers only im2col + gemm because the padding is wider
// than its direct kernels take (dilated convolutions at AVX2), the padding is made explicit. double and shapes oneDNN refuses use the plain-loop fallback.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

#include "core/parallel.h"
#include "providers/cpu/kernels/nn_common.h"
#include "providers/cpu/fused_activation.h"

namespace epctx {
namespace nn {
namespace {

using dnnl::memory;

// One (transposed) convolution problem: batch, channels, groups and the spatial geometry. For transposed
// convolutions pad_end already has output_padding subtracted, so out = (in-1)*stride + extent - pad_begin - pad_end
// holds on every axis.
struct ConvProblem {
  int64_t n = 0, c = 0, m = 0, group = 1;
  bool has_bias = false;
  WindowGeom g;
};

// Multiply-adds of a convolution problem (for ThreadsForWork).
int64_t ConvMacs(const ConvProblem& p) {
  return p.n * p.m * p.g.OutSize() * (p.group > 0 ? p.c / p.group : p.c) * p.g.KernelSize();
}

struct DnnlConvPlan {
  dnnl::primitive prim;
  memory::desc src_user, src_prim, dst_user, dst_prim, w_user, w_prim, bias_md, scratch_md;
  dnnl::reorder src_reorder, dst_reorder, w_reorder;  // empty when the layouts already match
  memory packed_w;                                     // constant weights in w_prim layout (else empty)
  size_t scratch_total = 0;                            // bytes of per-call scratch (buffers + scratchpad)
  // A transposed convolution's bias, added after the primitive into dst_prim (plain or channels-last): oneDNN 2.6's
  // deconvolution with a bias is 6-70x slower than without (measured at every layout, issue 14).
  bool bias_after = false, bias_channels_last = false;
  // The padding made explicit (IsGemmOrRef): src_prim has the padded spatial dims and no padding of its own; each run
  // zeroes it and src_reorder writes the source into src_inner, its interior.
  bool explicit_pad = false;
  memory::desc src_inner;
};

// oneDNN 2.6 implementations that are not direct convolution kernels: im2col + gemm ("gemm:jit", "x64:gemm:jit")
// and the reference kernel.
bool IsGemmOrRef(const std::string& impl) {
  return impl.find("gemm") != std::string::npos || impl.rfind("ref", 0) == 0;
}

// dst[n, c, s...] += bias[c] over a plain ([N, C, S]) or channels-last ([N, S, C]) buffer.
void AddChannelBias(float* dst, const float* bias, const memory::dims& dims, bool channels_last, int threads) {
  const int64_t n = dims[0], c = dims[1];
  int64_t plane = 1;
  for (size_t i = 2; i < dims.size(); ++i) plane *= dims[i];
  if (channels_last) {
    ParallelFor(threads, n * plane, static_cast<double>(c), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        float* row = dst + p * c;
        for (int64_t k = 0; k < c; ++k) row[k] += bias[k];
      }
    });
  } else {
    ParallelFor(threads, n * c, static_cast<double>(plane), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        float* row = dst + r * plane;
        const float v = bias[r % c];
        for (int64_t k = 0; k < plane; ++k) row[k] += v;
      }
    });
  }
}

std::vector<int64_t> PlanKey(const ConvProblem& p, int threads) {
  std::vector<int64_t> k{p.n, p.c, p.m, p.group, p.has_bias, threads};
  for (const auto* v : {&p.g.in, &p.g.kernel, &p.g.stride, &p.g.dilation, &p.g.pad_begin, &p.g.pad_end, &p.g.out})
    k.insert(k.end(), v->begin(), v->end());
  return k;
}

// Builds, caches and runs oneDNN (de)convolutions for one node. Thread-safe: plans are immutable once built and
// the caches are guarded by a mutex.
class DnnlConvRunner {
 public:
  static ConvProblem Lifted(const ConvProblem& p) {
    ConvProblem q = p;
    WindowGeom& g = q.g;
    for (auto* v : {&g.in, &g.kernel, &g.stride, &g.dilation, &g.out}) v->insert(v->begin(), 1);
    for (auto* v : {&g.pad_begin, &g.pad_end}) v->insert(v->begin(), 0);
    return q;
  }

  explicit DnnlConvRunner(bool transposed) : transposed_(transposed) {}

  // Weights known at creation (float). Plans built afterwards reference them packed.
  void SetConstantWeights(Tensor w) { const_w_ = std::move(w); }
  // An activation fused by the level-2 pass (providers/cpu/passes/cpu_fusion.h), run as an eltwise post-op.
  void SetActivation(dnnl::algorithm alg, float alpha, float beta) {
    act_alg_ = alg;
    act_alpha_ = alpha;
    act_beta_ = beta;
  }
  // The layouts of X and Y (providers/cpu/layout.h) when the session's layout pass set them; plain by default.
  void SetLayouts(CpuLayout src, CpuLayout dst) {
    src_layout_ = src;
    dst_layout_ = dst;
  }
  // y * scale + shift after the activation (kFusedLinearAttr), an eltwise_linear post-op.
  void SetLinear(float scale, float shift) {
    linear_ = true;
    lin_scale_ = scale;
    lin_shift_ = shift;
  }
  bool has_activation() const { return act_alg_ != dnnl::algorithm::undef; }
  bool has_constant_weights() const { return const_w_.defined(); }
  const Tensor& constant_weights() const { return const_w_; }

  // The plan for this problem; nullptr (with OK) when oneDNN does not take it, so the caller falls back.
  StatusOr<std::shared_ptr<const DnnlConvPlan>> GetPlan(const ConvProblem& problem, int threads) const {
    if (problem.g.rank() > 3) return std::shared_ptr<const DnnlConvPlan>();
    // A 1-D problem runs as 2-D with H = 1 (the plain [N, C, W] bytes are [N, C, 1, W]): oneDNN 2.6 has its jit
    // depthwise kernels for 2-D only, and 1-D depthwise convolutions ran gemm-based (Silero VAD v4, issue 14).
    const ConvProblem p = problem.g.rank() == 1 ? Lifted(problem) : problem;
    std::vector<int64_t> key = PlanKey(p, threads);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    auto plan = std::make_shared<DnnlConvPlan>();
    ScopedOmpThreads omp(threads);
    Status st = DnnlCall(transposed_ ? "deconvolution setup" : "convolution setup", [&] { Build(p, plan.get()); });
    std::shared_ptr<const DnnlConvPlan> result = st.ok() ? std::move(plan) : nullptr;
    if (plans_.size() >= kMaxCachedShapes) plans_.clear();
    plans_[key] = result;
    return result;
  }

  Status Run(const DnnlConvPlan& plan, const float* x, const float* w, const float* b, float* y, int threads) const {
    ScopedOmpThreads omp(threads);
    ScratchCarver scratch(plan.scratch_total);
    RETURN_ERROR_IF(!scratch.ok(), FAIL, "out of memory for ", plan.scratch_total, " bytes of convolution scratch");
    return DnnlCall(transposed_ ? "deconvolution" : "convolution", [&] {
      const dnnl::engine& eng = CpuEngine();
      dnnl::stream s(eng);
      memory src_user(plan.src_user, eng, const_cast<float*>(x));
      memory src = src_user;
      if (plan.explicit_pad) {
        void* buf = scratch.Take(plan.src_prim.get_size());
        std::memset(buf, 0, plan.src_prim.get_size());
        src = memory(plan.src_prim, eng, buf);
        plan.src_reorder.execute(s, {{DNNL_ARG_FROM, src_user}, {DNNL_ARG_TO, memory(plan.src_inner, eng, buf)}});
      } else if (plan.src_reorder) {
        src = memory(plan.src_prim, eng, scratch.Take(plan.src_prim.get_size()));
        plan.src_reorder.execute(s, {{DNNL_ARG_FROM, src_user}, {DNNL_ARG_TO, src}});
      }
      memory wts = plan.packed_w;
      if (!wts) {
        memory w_user(plan.w_user, eng, const_cast<float*>(w));
        wts = w_user;
        if (plan.w_reorder) {
          wts = memory(plan.w_prim, eng, scratch.Take(plan.w_prim.get_size()));
          plan.w_reorder.execute(s, {{DNNL_ARG_FROM, w_user}, {DNNL_ARG_TO, wts}});
        }
      }
      memory dst_user(plan.dst_user, eng, y);
      memory dst = plan.dst_reorder ? memory(plan.dst_prim, eng, scratch.Take(plan.dst_prim.get_size())) : dst_user;
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wts}, {DNNL_ARG_DST, dst}};
      if (b && !plan.bias_after) args[DNNL_ARG_BIAS] = memory(plan.bias_md, eng, const_cast<float*>(b));
      if (plan.scratch_md.get_size() > 0)
        args[DNNL_ARG_SCRATCHPAD] = memory(plan.scratch_md, eng, scratch.Take(plan.scratch_md.get_size()));
      plan.prim.execute(s, args);
      if (b && plan.bias_after) {
        s.wait();
        AddChannelBias(static_cast<float*>(dst.get_data_handle()), b, plan.dst_prim.dims(), plan.bias_channels_last,
                       threads);
      }
      if (plan.dst_reorder) plan.dst_reorder.execute(s, {{DNNL_ARG_FROM, dst}, {DNNL_ARG_TO, dst_user}});
      s.wait();
    });
  }

 private:
  // Throws dnnl::error when oneDNN refuses the problem. Called with mu_ held.
  void Build(const ConvProblem& p, DnnlConvPlan* plan) const {
    const dnnl::engine& eng = CpuEngine();
    const WindowGeom& g = p.g;
    const size_t r = g.rank();
    const int64_t cg = p.c / p.group, mg = p.m / p.group;
    memory::dims src_dims{p.n, p.c}, dst_dims{p.n, p.m}, w_dims, strides, dil, pl, pr;
    if (p.group > 1) w_dims = {p.group, mg, cg};
    else w_dims = {p.m, p.c};
    int64_t ks = 1;
    for (size_t i = 0; i < r; ++i) {
      src_dims.push_back(g.in[i]);
      dst_dims.push_back(g.out[i]);
      w_dims.push_back(g.kernel[i]);
      strides.push_back(g.stride[i]);
      dil.push_back(g.dilation[i] - 1);
      pl.push_back(g.pad_begin[i]);
      pr.push_back(g.pad_end[i]);
      ks *= g.kernel[i];
    }
    plan->src_user = LayoutDesc(src_dims, src_layout_);
    plan->dst_user = LayoutDesc(dst_dims, dst_layout_);
    if (!transposed_) {
      plan->w_user = PlainDesc(w_dims);  // ONNX [M, C/g, k...] is [g, M/g, C/g, k...] row-major
    } else {
      // ONNX [C, M/g, k...] = physical [g, C/g, M/g, k...] for logical (g, oc, ic, k...).
      memory::dims ws(w_dims.size());
      int64_t s = 1;
      for (size_t i = 0; i < r; ++i) {
        ws[w_dims.size() - 1 - i] = s;
        s *= g.kernel[r - 1 - i];
      }
      size_t o = p.group > 1 ? 1 : 0;
      ws[o] = ks;                // oc
      ws[o + 1] = mg * ks;       // ic
      if (p.group > 1) ws[0] = cg * mg * ks;
      plan->w_user = memory::desc(w_dims, memory::data_type::f32, ws);
    }
    plan->bias_md = p.has_bias ? PlainDesc({p.m}) : memory::desc();
    memory::desc src_any(src_dims, memory::data_type::f32, memory::format_tag::any);
    memory::desc dst_any(dst_dims, memory::data_type::f32, memory::format_tag::any);
    memory::desc w_any(w_dims, memory::data_type::f32, memory::format_tag::any);
    if (transposed_) {
      // oneDNN 2.6 picks nChw16c for deconvolutions (2x2, stride 2): measured 7x slower than its gemm kernel on
      // plain NCHW for 1 output channel (the PP-OCR detector's last layer) and 1.3-2x slower than on nhwc for 4 to
      // 96; plain beats nhwc up to 4 output channels, nhwc from 8.
      const CpuLayout l = p.m < 8 ? CpuLayout::kPlain : CpuLayout::kChannelsLast;
      src_any = LayoutDesc(src_dims, l);
      dst_any = LayoutDesc(dst_dims, l);
      // The bias after the primitive (DnnlConvPlan::bias_after), unless post-ops must follow it.
      if (p.has_bias && !has_activation() && !linear_) {
        plan->bias_after = true;
        plan->bias_channels_last = l == CpuLayout::kChannelsLast;
        plan->bias_md = memory::desc();
      }
    }
    dnnl::primitive_attr attr = UserScratchpadAttr();
    if (has_activation() || linear_) {
      dnnl::post_ops po;
      if (has_activation()) po.append_eltwise(1.f, act_alg_, act_alpha_, act_beta_);
      if (linear_) po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, lin_scale_, lin_shift_);
      attr.set_post_ops(po);
    }
    if (!transposed_) {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                        src_any, w_any, plan->bias_md, dst_any, strides, dil, pl, pr);
      dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
      // oneDNN 2.6's direct kernels refuse a left padding wider than their register block (at AVX2 a dilated
      // kernel 5 or 7 with "same" padding: the HiFi-GAN resblocks of piper_vits) and fall back to im2col + gemm,
      // several times slower. With the padding made explicit (a zeroed, wider source) the direct kernel may take it.
      bool padded = false;
      for (size_t i = 0; i < r; ++i) padded |= g.pad_begin[i] > 0 || g.pad_end[i] > 0;
      if (padded && IsGemmOrRef(pd.impl_info_str())) {
        memory::dims wide = src_dims, zero(r, 0);
        for (size_t i = 0; i < r; ++i) wide[2 + i] += g.pad_begin[i] + g.pad_end[i];
        const memory::desc wide_any(wide, memory::data_type::f32, memory::format_tag::any);
        dnnl::convolution_forward::desc dw(dnnl::prop_kind::forward_inference,
                                           dnnl::algorithm::convolution_direct, wide_any, w_any, plan->bias_md,
                                           dst_any, strides, dil, zero, zero);
        try {
          dnnl::convolution_forward::primitive_desc wpd(dw, attr, eng);
          if (!IsGemmOrRef(wpd.impl_info_str())) {
            memory::dims offsets(src_dims.size(), 0);
            for (size_t i = 0; i < r; ++i) offsets[2 + i] = g.pad_begin[i];
            plan->src_inner = wpd.src_desc().submemory_desc(src_dims, offsets);
            pd = wpd;
            plan->explicit_pad = true;
          }
        } catch (const dnnl::error&) {  // no better kernel: keep the first
        }
      }
      plan->src_prim = pd.src_desc();
      plan->dst_prim = pd.dst_desc();
      plan->w_prim = pd.weights_desc();
      plan->scratch_md = pd.scratchpad_desc();
      plan->prim = dnnl::convolution_forward(pd);
    } else {
      dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
                                          src_any, w_any, plan->bias_md, dst_any, strides, dil, pl, pr);
      dnnl::deconvolution_forward::primitive_desc pd(d, attr, eng);
      plan->src_prim = pd.src_desc();
      plan->dst_prim = pd.dst_desc();
      plan->w_prim = pd.weights_desc();
      plan->scratch_md = pd.scratchpad_desc();
      plan->prim = dnnl::deconvolution_forward(pd);
    }
    size_t total = ScratchCarver::Rounded(plan->scratch_md.get_size());
    if (plan->explicit_pad) {
      plan->src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plan->src_user, eng, plan->src_inner));
      total += ScratchCarver::Rounded(plan->src_prim.get_size());
    } else if (plan->src_prim != plan->src_user) {
      plan->src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plan->src_user, eng, plan->src_prim));
      total += ScratchCarver::Rounded(plan->src_prim.get_size());
    }
    if (plan->dst_prim != plan->dst_user) {
      plan->dst_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plan->dst_prim, eng, plan->dst_user));
      total += ScratchCarver::Rounded(plan->dst_prim.get_size());
    }
    if (plan->w_prim != plan->w_user)
      plan->w_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plan->w_user, eng, plan->w_prim));
    if (const_w_.defined()) {
      plan->packed_w = PackedConstantWeights(eng, plan->w_user, plan->w_prim, plan->w_reorder,
                                             const_cast<void*>(const_w_.raw_data()), &packed_);
    } else if (plan->w_reorder) {
      total += ScratchCarver::Rounded(plan->w_prim.get_size());
    }
    plan->scratch_total = total;
  }

  bool transposed_;
  CpuLayout src_layout_ = CpuLayout::kPlain, dst_layout_ = CpuLayout::kPlain;
  Tensor const_w_;
  dnnl::algorithm act_alg_ = dnnl::algorithm::undef;
  bool linear_ = false;
  float lin_scale_ = 1, lin_shift_ = 0;
  float act_alpha_ = 0, act_beta_ = 0;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const DnnlConvPlan>> plans_;
  mutable std::vector<std::pair<memory::desc, memory>> packed_;
};

class ConvKernel final : public OpKernel {
 public:
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info, bool transposed) {
    std::unique_ptr<ConvKernel> k(new ConvKernel(transposed));
    RETURN_IF_ERROR(k->attrs_.Parse(info, /*has_dilations=*/true, /*has_ceil_mode=*/false));
    k->group_ = info.GetInt("group", 1);
    if (k->group_ < 1) return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'group' must be >= 1, got ", k->group_);
    if (transposed) {
      k->output_padding_ = info.GetInts("output_padding");
      k->output_shape_ = info.GetInts("output_shape");
      for (int64_t v : k->output_padding_)
        if (v < 0) return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'output_padding' must not be negative");
    }
    if (info.num_inputs() < 2) return info.Error(ErrorCode::INVALID_GRAPH, "needs inputs X and W");
    const std::string act = info.GetString(kFusedActivationAttr, "");
    if (!act.empty()) {
      const std::vector<float> ps = info.GetFloats(kFusedActivationParamsAttr);
      Activation& a = k->act_;
      if (act == "Relu") {
        a = {dnnl::algorithm::eltwise_relu, 0.f, 0.f};
      } else if (act == "LeakyRelu" && ps.size() == 1) {
        a = {dnnl::algorithm::eltwise_relu, ps[0], 0.f};
      } else if (act == "Sigmoid") {
        a = {dnnl::algorithm::eltwise_logistic, 0.f, 0.f};
      } else if (act == "Tanh") {
        a = {dnnl::algorithm::eltwise_tanh, 0.f, 0.f};
      } else if (act == "HardSwish") {
        a = {dnnl::algorithm::eltwise_hardswish, 0.f, 0.f};  // x * relu6(x + 3) / 6
      } else if (act == "Clip" && ps.size() == 2) {
        a = {dnnl::algorithm::eltwise_clip_v2, ps[0], ps[1]};
      } else {
        return info.Error(ErrorCode::INVALID_GRAPH, "unknown fused activation '", act, "' with ", ps.size(),
                          " parameters");
      }
      if (transposed) return info.Error(ErrorCode::INVALID_GRAPH, "a fused activation on ConvTranspose");
      k->runner_.SetActivation(a.alg, a.alpha, a.beta);
    }
    if (info.HasAttr(kFusedLinearAttr)) {
      const std::vector<float> l = info.GetFloats(kFusedLinearAttr);
      if (l.size() != 2 || transposed)
        return info.Error(ErrorCode::INVALID_GRAPH, "internal attribute '", kFusedLinearAttr,
                          "' needs a scale and a shift, on Conv");
      k->linear_ = {l[0], l[1]};
      k->runner_.SetLinear(l[0], l[1]);
    }
    for (auto [attr, layout] : {std::pair{kSrcLayoutAttr, &k->src_layout_}, std::pair{kDstLayoutAttr, &k->dst_layout_}}) {
      if (!info.HasAttr(attr)) continue;
      const std::string name = info.GetString(attr, "");
      if (!ParseCpuLayout(name, layout) || transposed)
        return info.Error(ErrorCode::INVALID_GRAPH, "internal attribute '", attr, "' is '", name,
                          transposed ? "' on ConvTranspose" : "', not a layout");
    }
    k->runner_.SetLayouts(k->src_layout_, k->dst_layout_);
    const Tensor* w = info.ConstantInput(1);
    if (w && (w->dtype() == DataType::kFloat || w->dtype() == DataType::kFloat16 ||
              w->dtype() == DataType::kBFloat16)) {
      auto wf = AsFloat(*w);
      if (wf.ok()) {
        k->runner_.SetConstantWeights(std::move(wf).value());
        k->Prepack(info, *w);
      }
    }
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    const Tensor* w = ctx.Input(1);
    const Tensor* b = ctx.Input(2);
    RETURN_ERROR_IF(!x || !w, INVALID_ARGUMENT, ctx.node().Describe(), ": inputs X and W are required");
    RETURN_ERROR_IF(x->dtype() != w->dtype() || (b && b->dtype() != x->dtype()), INVALID_ARGUMENT,
                    ctx.node().Describe(), ": X, W and B must have one element type (got ", DataTypeName(x->dtype()),
                    ", ", DataTypeName(w->dtype()), b ? ", " : "", b ? DataTypeName(b->dtype()) : "", ")");
    ConvProblem p;
    Shape x_shape = x->shape(), y_shape;
    const bool laid_out = src_layout_ != CpuLayout::kPlain || dst_layout_ != CpuLayout::kPlain;
    if (laid_out) {
      RETURN_ERROR_IF(x->dtype() != DataType::kFloat || w->rank() < 3, INVALID_ARGUMENT, ctx.node().Describe(),
                      ": a laid-out convolution needs float X and W of rank >= 3");
      RETURN_IF_ERROR_CTX(LogicalShape(x->shape(), src_layout_, w->dim(1) * group_, &x_shape), ctx.node().Describe());
    }
    RETURN_IF_ERROR_CTX(Resolve(x_shape, w->shape(), b ? &b->shape() : nullptr, &p, &y_shape),
                        ctx.node().Describe());
    const Shape logical_y = y_shape;
    if (dst_layout_ != CpuLayout::kPlain) {
      RETURN_IF_ERROR_CTX(PhysicalShape(logical_y, dst_layout_, &y_shape), ctx.node().Describe());
    }
    // A convolution writes every output element (oneDNN, or ConvPlain starting each row from the bias); the
    // transposed one's plain loop accumulates into its output, which must start at zero.
    ASSIGN_OR_RETURN(Tensor * y, transposed_ ? ctx.Output(0, x->dtype(), y_shape)
                                             : ctx.OutputForOverwrite(0, x->dtype(), y_shape));
    if (y->NumElements() == 0) return Status::OK();
    const int threads = ctx.num_threads();
    switch (x->dtype()) {
      case DataType::kFloat:
        if (laid_out) return RunLaidOut(ctx, p, x_shape, logical_y, *x, w->data<float>(), b, y);
        return RunFloat(ctx, p, x->data<float>(), w->data<float>(), b ? b->data<float>() : nullptr, y->data<float>());
      case DataType::kDouble:
        return transposed_ ? ConvTransposePlain<double>(p.g, p.n, p.c, p.m, p.group, x->data<double>(),
                                                        w->data<double>(), b ? b->data<double>() : nullptr,
                                                        y->data<double>(), threads)
                           : ConvPlain<double>(p.g, p.n, p.c, p.m, p.group, x->data<double>(), w->data<double>(),
                                               b ? b->data<double>() : nullptr, y->data<double>(), threads);
      case DataType::kFloat16:
      case DataType::kBFloat16: {
        ASSIGN_OR_RETURN(Tensor xf, AsFloat(*x));
        Tensor wf;
        if (runner_.has_constant_weights()) {
          wf = runner_.constant_weights();
        } else {
          ASSIGN_OR_RETURN(wf, AsFloat(*w));
        }
        Tensor bf;
        if (b) {
          ASSIGN_OR_RETURN(bf, AsFloat(*b));
        }
        ASSIGN_OR_RETURN(Tensor yf, Tensor::Allocate(DataType::kFloat, y_shape));
        RETURN_IF_ERROR(RunFloat(ctx, p, xf.data<float>(), wf.data<float>(), b ? bf.data<float>() : nullptr,
                                 yf.data<float>()));
        StoreFloat(yf, y);
        return Status::OK();
      }
      default:
        return ctx.Error(ErrorCode::NOT_IMPLEMENTED, "element type ", DataTypeName(x->dtype()), " is not supported");
    }
  }

 private:
  explicit ConvKernel(bool transposed) : transposed_(transposed), runner_(transposed) {}

  struct Activation {
    dnnl::algorithm alg = dnnl::algorithm::undef;
    float alpha = 0, beta = 0;
  };

  // The fused activation for the plain-loop fallback, as oneDNN's post-op computes it.
  static void ApplyActivation(const Activation& a, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = y[i];
      switch (a.alg) {
        case dnnl::algorithm::eltwise_relu:
          y[i] = v > 0 ? v : a.alpha * v;
          break;
        case dnnl::algorithm::eltwise_logistic:
          y[i] = 1.f / (1.f + std::exp(-v));
          break;
        case dnnl::algorithm::eltwise_tanh:
          y[i] = std::tanh(v);
          break;
        case dnnl::algorithm::eltwise_hardswish:
          y[i] = v * std::min(std::max(v + 3.f, 0.f), 6.f) / 6.f;
          break;
        case dnnl::algorithm::eltwise_clip_v2:
          y[i] = std::min(std::max(v, a.alpha), a.beta);
          break;
        default:
          break;
      }
    }
  }

  Status RunFloat(KernelContext& ctx, const ConvProblem& p, const float* x, const float* w, const float* b,
                  float* y) const {
    const int threads = ThreadsForWork(ConvMacs(p), ctx.num_threads());
    ASSIGN_OR_RETURN(std::shared_ptr<const DnnlConvPlan> plan, runner_.GetPlan(p, threads));
    if (plan) return runner_.Run(*plan, x, w, b, y, threads).WithContext(ctx.node().Describe());
    return RunPlainFloat(ctx, p, x, w, b, y);
  }

  // oneDNN refused the problem (negative padding, rank > 3, ...): plain loops.
  Status RunPlainFloat(KernelContext& ctx, const ConvProblem& p, const float* x, const float* w, const float* b,
                       float* y) const {
    const int threads = ctx.num_threads();
    if (runner_.has_constant_weights()) w = runner_.constant_weights().data<float>();
    Status st = transposed_ ? ConvTransposePlain<float>(p.g, p.n, p.c, p.m, p.group, x, w, b, y, threads)
                            : ConvPlain<float>(p.g, p.n, p.c, p.m, p.group, x, w, b, y, threads);
    const int64_t count = p.n * p.m * p.g.OutSize();
    if (st.ok() && act_.alg != dnnl::algorithm::undef) ApplyActivation(act_, y, count);
    if (st.ok() && linear_)
      for (int64_t i = 0; i < count; ++i) y[i] = y[i] * linear_->first + linear_->second;
    return st.WithContext(ctx.node().Describe());
  }

  // A convolution whose X or Y is laid out: oneDNN reads and writes the layouts directly; when it refuses the
  // problem, the plain fallback runs between two reorders.
  Status RunLaidOut(KernelContext& ctx, const ConvProblem& p, const Shape& x_logical, const Shape& y_logical,
                    const Tensor& x, const float* w, const Tensor* b, Tensor* y) const {
    const int threads = ThreadsForWork(ConvMacs(p), ctx.num_threads());
    const float* bias = b ? b->data<float>() : nullptr;
    ASSIGN_OR_RETURN(std::shared_ptr<const DnnlConvPlan> plan, runner_.GetPlan(p, threads));
    if (plan) return runner_.Run(*plan, x.data<float>(), w, bias, y->data<float>(), threads)
                     .WithContext(ctx.node().Describe());
    Tensor xp = x, yp = *y;
    if (src_layout_ != CpuLayout::kPlain) {
      ASSIGN_OR_RETURN(xp, Tensor::Allocate(DataType::kFloat, x_logical));
      RETURN_IF_ERROR(ReorderLayout(x_logical, x.data<float>(), src_layout_, xp.data<float>(), CpuLayout::kPlain, threads));
    }
    if (dst_layout_ != CpuLayout::kPlain) {
      ASSIGN_OR_RETURN(yp, Tensor::Allocate(DataType::kFloat, y_logical));
    }
    RETURN_IF_ERROR(RunPlainFloat(ctx, p, xp.data<float>(), w, bias, yp.data<float>()));
    if (dst_layout_ == CpuLayout::kPlain) return Status::OK();
    return ReorderLayout(y_logical, yp.data<float>(), CpuLayout::kPlain, y->data<float>(), dst_layout_, threads)
        .WithContext(ctx.node().Describe());
  }

  // Validates shapes and computes the problem and the output shape. Messages omit the node (added by callers).
  Status Resolve(const Shape& xs, const Shape& ws, const Shape* bs, ConvProblem* p, Shape* y_shape) const {
    RETURN_ERROR_IF(xs.size() < 3, INVALID_ARGUMENT, "X must have rank >= 3 (N, C, spatial...), got shape ",
                    ShapeToString(xs));
    RETURN_ERROR_IF(ws.size() != xs.size(), INVALID_ARGUMENT, "W has shape ", ShapeToString(ws), " but X has shape ",
                    ShapeToString(xs), " (ranks must match)");
    const size_t r = xs.size() - 2;
    Shape in(xs.begin() + 2, xs.end()), kernel(ws.begin() + 2, ws.end());
    RETURN_ERROR_IF(!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel, INVALID_ARGUMENT,
                    "kernel_shape ", ShapeToString(attrs_.kernel_shape), " does not match W's shape ",
                    ShapeToString(ws));
    p->n = xs[0];
    p->c = xs[1];
    p->group = group_;
    RETURN_ERROR_IF(p->c % group_ != 0, INVALID_ARGUMENT, "input channels ", p->c, " are not divisible by group ",
                    group_);
    if (!transposed_) {
      p->m = ws[0];
      RETURN_ERROR_IF(ws[1] * group_ != p->c, INVALID_ARGUMENT, "W has ", ws[1], " input channels per group but X has ",
                      p->c, " channels and group is ", group_);
      RETURN_ERROR_IF(p->m % group_ != 0, INVALID_ARGUMENT, "output channels ", p->m, " are not divisible by group ",
                      group_);
      RETURN_IF_ERROR(ResolveWindow(attrs_, in, kernel, /*is_pool=*/false, &p->g));
    } else {
      RETURN_ERROR_IF(ws[0] != p->c, INVALID_ARGUMENT, "W has ", ws[0], " input channels but X has ", p->c);
      p->m = ws[1] * group_;
      RETURN_IF_ERROR(ResolveTransposed(in, kernel, &p->g));
    }
    for (size_t i = 0; i < r; ++i)
      RETURN_ERROR_IF(p->g.out[i] <= 0 && !(p->g.out[i] == 0 && in[i] == 0), INVALID_ARGUMENT,
                      "computed output spatial dim ", i, " is ", p->g.out[i], " (input ", ShapeToString(xs),
                      ", kernel ", ShapeToString(kernel), ")");
    if (bs) {
      RETURN_ERROR_IF(bs->size() != 1 || (*bs)[0] != p->m, INVALID_ARGUMENT, "B must have shape [", p->m, "], got ",
                      ShapeToString(*bs));
      p->has_bias = true;
    }
    y_shape->assign({p->n, p->m});
    y_shape->insert(y_shape->end(), p->g.out.begin(), p->g.out.end());
    return Status::OK();
  }

  Status ResolveTransposed(const Shape& in, const Shape& kernel, WindowGeom* g) const {
    const size_t r = in.size();
    const WindowAttrs& a = attrs_;
    RETURN_ERROR_IF(!a.strides.empty() && a.strides.size() != r, INVALID_ARGUMENT, "strides has ", a.strides.size(),
                    " values for ", r, " spatial dims");
    RETURN_ERROR_IF(!a.dilations.empty() && a.dilations.size() != r, INVALID_ARGUMENT, "dilations has ",
                    a.dilations.size(), " values for ", r, " spatial dims");
    RETURN_ERROR_IF(!a.pads.empty() && a.pads.size() != 2 * r, INVALID_ARGUMENT, "pads has ", a.pads.size(),
                    " values for ", r, " spatial dims");
    RETURN_ERROR_IF(!output_padding_.empty() && output_padding_.size() != r, INVALID_ARGUMENT, "output_padding has ",
                    output_padding_.size(), " values for ", r, " spatial dims");
    RETURN_ERROR_IF(!output_shape_.empty() && output_shape_.size() != r && output_shape_.size() != r + 2,
                    INVALID_ARGUMENT, "output_shape has ", output_shape_.size(), " values for ", r, " spatial dims");
    g->in = in;
    g->kernel = kernel;
    g->stride = a.strides.empty() ? std::vector<int64_t>(r, 1) : a.strides;
    g->dilation = a.dilations.empty() ? std::vector<int64_t>(r, 1) : a.dilations;
    g->pad_begin.assign(r, 0);
    g->pad_end.assign(r, 0);
    g->out.assign(r, 0);
    for (size_t i = 0; i < r; ++i) {
      const int64_t s = g->stride[i], ek = g->Extent(i);
      const int64_t op = output_padding_.empty() ? 0 : output_padding_[i];
      const int64_t natural = s * (in[i] - 1) + op + ek;
      int64_t pb = 0, pe = 0, out;
      bool split = false;
      if (!output_shape_.empty()) {
        out = output_shape_[output_shape_.size() - r + i];
        split = true;
      } else if (a.auto_pad == AutoPad::kSameUpper || a.auto_pad == AutoPad::kSameLower) {
        // in * stride, but never by negative padding: when kernel + output_padding < stride the output stays at
        // the natural size, as in ONNX Runtime 1.30 and ONNX's shape inference (the graph's static shape).
        out = std::min(in[i] * s, natural);
        split = true;
      } else if (a.auto_pad == AutoPad::kValid) {
        out = natural;
      } else {
        pb = a.pads.empty() ? 0 : a.pads[i];
        pe = a.pads.empty() ? 0 : a.pads[i + r];
        out = natural - pb - pe;
      }
      if (split) {
        int64_t total = natural - out;
        // Floor division (as the reference): a negative total (output wider than natural) grows the end.
        int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        if (a.auto_pad == AutoPad::kSameUpper) {
          pb = half;
          pe = total - half;
        } else {
          pb = total - half;
          pe = half;
        }
      }
      g->out[i] = out;
      g->pad_begin[i] = pb;
      g->pad_end[i] = pe - op;  // fold output_padding into the end padding
    }
    return Status::OK();
  }

  // Packs constant weights for the input shape declared in the graph (or a typical one) so the first run does not.
  void Prepack(const KernelInfo& info, const Tensor& w) {
    const Shape& ws = w.shape();
    if (ws.size() < 3) return;
    Shape xs(ws.size(), 1);
    xs[1] = transposed_ ? ws[0] : ws[1] * group_;
    for (size_t i = 2; i < ws.size(); ++i) xs[i] = std::max<int64_t>(56, ws[i] * 4);
    // A laid-out X's declared type is physical: read N and the spatial dims from where the layout keeps them.
    const size_t physical_rank = xs.size() + (CpuLayoutBlock(src_layout_) ? 1 : 0);
    if (const ValueType* t = info.InputType(0); t && t->has_shape && t->dims.size() == physical_rank) {
      for (size_t i = 0; i < xs.size(); ++i) {
        const Dim& d = t->dims[PhysicalAxis(xs.size(), i, src_layout_)];
        if (i != 1 && d.known() && d.value > 0) xs[i] = d.value;
      }
    }
    ConvProblem p;
    Shape y_shape;
    Shape bs{transposed_ ? ws[1] * group_ : ws[0]};
    if (!Resolve(xs, ws, info.HasInput(2) ? &bs : nullptr, &p, &y_shape).ok()) return;
    runner_.GetPlan(p, ThreadsForWork(ConvMacs(p), info.num_threads())).status().IgnoreError();
  }

  Activation act_;
  std::optional<std::pair<float, float>> linear_;  // scale, shift after the activation
  bool transposed_;
  CpuLayout src_layout_ = CpuLayout::kPlain, dst_layout_ = CpuLayout::kPlain;
  WindowAttrs attrs_;
  int64_t group_ = 1;
  std::vector<int64_t> output_padding_, output_shape_;
  DnnlConvRunner runner_;
};

}  // namespace

void RegisterConvKernels(KernelRegistry& r) {
  r.Register("", "Conv", [](const KernelInfo& info) { return ConvKernel::Create(info, false); });
  r.Register("", "ConvTranspose", [](const KernelInfo& info) { return ConvKernel::Create(info, true); });
}

}  // namespace nn
}  // namespace epctx
