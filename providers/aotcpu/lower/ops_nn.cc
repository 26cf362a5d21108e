// Conv, ConvTranspose, BatchNormalization, pooling, Resize, Gemm and LSTM: support checks, lowering, step builders.
//
// Step parameters owned here (program.h fixes the operand order):
//   kConv / kDeconv  ints: groups, n, strides[n], dilations[n] (oneDNN: ONNX - 1), pads_begin[n], pads_end[n].
//                    Weights have dims [OC, IC/g, k...] when groups == 1, else [g, OC/g, IC/g, k...]. kDeconv's
//                    pads_end may be negative (ConvTranspose's output_padding folded in), down to
//                    -(max(stride, dilation + 1) - 1). Post-op operands follow dst (index >= 4).
//   kPool            ints: alg (dnnl_pooling_max / _avg_include_padding / _avg_exclude_padding), n, kernel[n],
//                    strides[n], pads_begin[n], pads_end[n] (ceil_mode already folded in), dilations[n] (oneDNN).
//   kResample        ints: alg (dnnl_resampling_nearest / _linear). Factors are dst/src dims.
//   kInnerProduct    no params. src [M,K], weights [N,K], bias [N] | none, dst [M,N], post-op operands (>= 4).
//   kBatchNorm       floats: epsilon. scale/shift/mean/variance are plain f32 [C]; dst has src's layout.
//
// Fusion (Conv, ConvTranspose, Gemm): a following inference BatchNormalization with constant parameters is folded
// into the weights and bias at compile time; then elementwise activations (EltwiseFor) and residual Adds whose
// other operand is already computed become oneDNN eltwise / binary-add post-ops, in the order the graph has them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <omp.h>

#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {
namespace {

using dnnl::memory;
using Md = dnnl::memory::desc;

constexpr int64_t kMaxWindow = int64_t{1} << 24;  // bound on kernel/stride/pad/dilation values in builders
constexpr const char kSizeDiffers[] = " does not match the computed spatial size";

dnnl::engine& ProbeEngine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

bool Reject(std::string* why, std::string msg) {
  if (why) *why = std::move(msg);
  return false;
}


int In(const Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : -1; }
int Out(const Node& n, size_t i) { return i < n.outputs.size() ? n.outputs[i] : -1; }

bool IsOnnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// Only output 0 present.
bool SingleOutput(const Node& n) {
  if (Out(n, 0) < 0) return false;
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (n.outputs[i] >= 0) return false;
  return true;
}

bool StaticF32(const Graph& g, int v) {
  if (v < 0) return false;
  const Value& x = g.v(v);
  if (x.dtype != kF32 || !x.has_shape) return false;
  for (int64_t d : x.dims)
    if (d <= 0) return false;
  return true;
}

const float* ConstF32(const Graph& g, int v) {
  if (!StaticF32(g, v) || !g.v(v).is_const()) return nullptr;
  return static_cast<const float*>(g.v(v).data);
}

bool IsGraphOutput(const Graph& g, int v) {
  if (g.v(v).is_graph_output) return true;
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

Md DescOfOperand(const Operand& op) {
  Md d;
  if (!OperandDesc(op, &d).ok) return Md();
  return d;
}

Md F32Desc(const std::vector<int64_t>& dims, uint32_t tag) {
  return Md(dims, memory::data_type::f32, static_cast<memory::format_tag>(tag));
}

// A node's name, or its first output's name when it has none (names are optional in ONNX).
std::string NodeName(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  if (!n.name.empty() || Out(n, 0) < 0) return n.name;
  return ctx.graph().v(Out(n, 0)).name;
}

// A descriptor for `dims` in the layout of `like` (same format tag, or same dimension order for strided plain
// layouts such as channels-last); empty when `like` is neither.
Md SameLayoutAs(const Md& like, const std::vector<int64_t>& dims) {
  const dnnl_memory_desc_t& md = like.data;
  if (md.ndims == 0 || md.ndims != static_cast<int>(dims.size()) || md.format_kind != dnnl_blocked) return Md();
  const uint32_t tag = FormatTagOf(like);
  if (tag != 0) return F32Desc(dims, tag);
  if (md.format_desc.blocking.inner_nblks != 0) return Md();
  std::vector<int> order(dims.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  const dnnl_dims_t& st = md.format_desc.blocking.strides;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return st[a] > st[b]; });
  memory::dims strides(dims.size());
  int64_t step = 1;
  for (size_t i = order.size(); i-- > 0;) {
    strides[static_cast<size_t>(order[i])] = step;
    step *= std::max<int64_t>(dims[static_cast<size_t>(order[i])], 1);
  }
  return Md(dims, memory::data_type::f32, strides);
}

std::string JoinNames(LowerContext& ctx, int node, const std::vector<int>& absorbed) {
  std::string s = NodeName(ctx, node);
  for (int a : absorbed) s += "+" + NodeName(ctx, a);
  return s;
}

// Weight names must be unique per content within a graph: "<node output>/<source value>:<transform>".
std::string WeightName(LowerContext& ctx, int node, int source, const char* how) {
  const Graph& g = ctx.graph();
  const int out = Out(ctx.node(node), 0);
  return (out >= 0 ? g.v(out).name : NodeName(ctx, node)) + "/" + (source >= 0 ? g.v(source).name : "") + ":" + how;
}

CheckResult Ok() { return CheckResult::Ok(); }

// ---- window geometry -----------------------------------------------------------------------------------------

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

bool ParseAutoPad(const Node& n, AutoPad* ap, std::string* why) {
  std::string s = n.Str("auto_pad", "NOTSET");
  if (s == "NOTSET" || s.empty()) {
    *ap = AutoPad::kNotSet;
  } else if (s == "SAME_UPPER") {
    *ap = AutoPad::kSameUpper;
  } else if (s == "SAME_LOWER") {
    *ap = AutoPad::kSameLower;
  } else if (s == "VALID") {
    *ap = AutoPad::kValid;
  } else {
    return Reject(why, "auto_pad '" + s + "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  }
  return true;
}

// ONNX-convention window (dilation >= 1). pad_end_dnnl is the end padding oneDNN needs to produce `out` (differs
// from pad_end for pooling with ceil_mode, and for ConvTranspose where output_padding is folded in).
struct Window {
  std::vector<int64_t> in, out, kernel, stride, dilation, pad_begin, pad_end, pad_end_dnnl;
  size_t rank() const { return in.size(); }
  int64_t Extent(size_t i) const { return (kernel[i] - 1) * dilation[i] + 1; }
};

int64_t CeilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// Reads strides / dilations / pads (each absent or of the right length; positive / non-negative).
bool ReadWindowAttrs(const Node& n, size_t r, bool dilations_allowed, Window* w, std::string* why) {
  std::vector<int64_t> strides = n.Ints("strides"), dil = n.Ints("dilations"), pads = n.Ints("pads");
  if (!strides.empty() && strides.size() != r) return Reject(why, "strides has the wrong length");
  if (!dil.empty() && dil.size() != r) return Reject(why, "dilations has the wrong length");
  if (!pads.empty() && pads.size() != 2 * r) return Reject(why, "pads has the wrong length");
  w->stride = strides.empty() ? std::vector<int64_t>(r, 1) : strides;
  w->dilation = dil.empty() ? std::vector<int64_t>(r, 1) : dil;
  w->pad_begin.assign(r, 0);
  w->pad_end.assign(r, 0);
  for (size_t i = 0; i < r; ++i) {
    if (w->stride[i] < 1 || w->stride[i] > kMaxWindow) return Reject(why, "stride out of range");
    if (w->dilation[i] < 1 || w->dilation[i] > kMaxWindow) return Reject(why, "dilation out of range");
    if (!dilations_allowed && w->dilation[i] != 1) return Reject(why, "dilations are not supported for this op");
    if (!pads.empty()) {
      w->pad_begin[i] = pads[i];
      w->pad_end[i] = pads[i + r];
    }
    if (w->pad_begin[i] < 0 || w->pad_end[i] < 0 || w->pad_begin[i] > kMaxWindow || w->pad_end[i] > kMaxWindow)
      return Reject(why, "pads out of range");
  }
  return true;
}

// Output size and pads of a convolution / pooling window (w->in, kernel, stride, dilation and explicit pads set).
bool ResolveForward(AutoPad ap, bool ceil_mode, Window* w, std::string* why) {
  const size_t r = w->rank();
  w->out.assign(r, 0);
  w->pad_end_dnnl.assign(r, 0);
  for (size_t i = 0; i < r; ++i) {
    const int64_t in = w->in[i], s = w->stride[i], ek = w->Extent(i);
    switch (ap) {
      case AutoPad::kNotSet: {
        const int64_t span = in + w->pad_begin[i] + w->pad_end[i] - ek;
        if (span < 0) return Reject(why, "window larger than the padded input");
        if (ceil_mode) {
          int64_t out = CeilDiv(span, s) + 1;
          if ((out - 1) * s >= in + w->pad_begin[i]) --out;  // a window starting in the end padding is dropped
          w->out[i] = out;
        } else {
          w->out[i] = span / s + 1;
        }
        break;
      }
      case AutoPad::kValid: {
        if (in < ek) return Reject(why, "window larger than the input (VALID)");
        w->pad_begin[i] = w->pad_end[i] = 0;
        w->out[i] = (in - ek) / s + 1;
        if (ceil_mode) {  // as ONNX Runtime 1.30 (and the CPU EP): ceil, a last window starting past the input dropped
          w->out[i] = CeilDiv(in - ek, s) + 1;
          if ((w->out[i] - 1) * s >= in) --w->out[i];
        }
        break;
      }
      case AutoPad::kSameUpper:
      case AutoPad::kSameLower: {
        const int64_t out = CeilDiv(in, s);
        const int64_t total = std::max<int64_t>(0, (out - 1) * s + ek - in);
        const int64_t small = total / 2, big = total - small;
        w->pad_begin[i] = ap == AutoPad::kSameUpper ? small : big;
        w->pad_end[i] = ap == AutoPad::kSameUpper ? big : small;
        w->out[i] = out;
        break;
      }
    }
    if (w->out[i] < 1) return Reject(why, "empty output");
    int64_t pe = w->pad_end[i];
    if ((in + w->pad_begin[i] + pe - ek) / s + 1 != w->out[i]) pe = (w->out[i] - 1) * s + ek - in - w->pad_begin[i];
    w->pad_end_dnnl[i] = pe;
  }
  return true;
}

// Every window of every spatial dim covers at least one input element.
bool WindowsTouchInput(const Window& w) {
  for (size_t i = 0; i < w.rank(); ++i) {
    for (int64_t o = 0; o < w.out[i]; ++o) {
      bool touch = false;
      for (int64_t k = 0; k < w.kernel[i] && !touch; ++k) {
        const int64_t p = o * w.stride[i] - w.pad_begin[i] + k * w.dilation[i];
        touch = p >= 0 && p < w.in[i];
      }
      if (!touch) return false;
    }
  }
  return true;
}

memory::dims DnnlDilations(const Window& w) {
  memory::dims d;
  for (int64_t x : w.dilation) d.push_back(x - 1);
  return d;
}

// ---- convolution / deconvolution -----------------------------------------------------------------------------

struct ConvSpec {
  bool deconv = false;
  int64_t groups = 1, oc = 0, ic = 0;  // oc/ic: total output/input channels
  Window w;
  std::vector<int64_t> src_dims, dst_dims;
  memory::dims wdims;  // oneDNN weights dims ([g,] OC/g, IC/g, k...)
};

// Validates a Conv / ConvTranspose node and resolves its geometry. Does not look at the fusion chain.
bool ResolveConv(const Graph& g, const Node& n, bool deconv, ConvSpec* s, std::string* why) {
  s->deconv = deconv;
  if (!IsOnnx(n)) return Reject(why, "not an ONNX op");
  if (!SingleOutput(n)) return Reject(why, "expected one output");
  const int x = In(n, 0), wv = In(n, 1), b = In(n, 2), y = Out(n, 0);
  if (n.num_inputs() > 3) return Reject(why, "too many inputs");
  if (!StaticF32(g, x) || !StaticF32(g, y) || !StaticF32(g, wv))
    return Reject(why, "input, weights and output must be float32 with static, non-empty shapes");
  if (ConstF32(g, wv) == nullptr) return Reject(why, "weights are not constant");
  if (b >= 0 && ConstF32(g, b) == nullptr) return Reject(why, "bias is not a constant float32 tensor");
  const std::vector<int64_t>& xd = g.v(x).dims;
  const std::vector<int64_t>& wd = g.v(wv).dims;
  const std::vector<int64_t>& yd = g.v(y).dims;
  if (xd.size() < 3 || xd.size() > 5) return Reject(why, "spatial rank must be 1..3");
  if (wd.size() != xd.size() || yd.size() != xd.size()) return Reject(why, "input, weights and output ranks differ");
  const size_t r = xd.size() - 2;
  s->groups = n.Int("group", 1);
  const int64_t gr = s->groups;
  if (gr < 1) return Reject(why, "group must be >= 1");
  std::vector<int64_t> kernel(wd.begin() + 2, wd.end());
  std::vector<int64_t> ks = n.Ints("kernel_shape");
  if (!ks.empty() && ks != kernel) return Reject(why, "kernel_shape does not match the weights");
  int64_t ocg, icg;
  if (!deconv) {
    // W: [M, C/g, k...]
    if (xd[1] % gr != 0 || wd[0] % gr != 0 || wd[1] * gr != xd[1]) return Reject(why, "channels do not match group");
    s->ic = xd[1];
    s->oc = wd[0];
    ocg = wd[0] / gr;
    icg = wd[1];
  } else {
    // W: [C, M/g, k...]
    if (wd[0] != xd[1] || xd[1] % gr != 0) return Reject(why, "channels do not match group");
    s->ic = xd[1];
    s->oc = wd[1] * gr;
    ocg = wd[1];
    icg = xd[1] / gr;
  }
  if (b >= 0 && (g.v(b).dims.size() != 1 || g.v(b).dims[0] != s->oc)) return Reject(why, "bias shape is not [M]");
  if (yd[0] != xd[0] || yd[1] != s->oc) return Reject(why, "output batch/channels do not match");
  AutoPad ap;
  if (!ParseAutoPad(n, &ap, why)) return false;
  Window& w = s->w;
  w.in.assign(xd.begin() + 2, xd.end());
  w.kernel = kernel;
  if (!ReadWindowAttrs(n, r, true, &w, why)) return false;
  if (!deconv) {
    if (!ResolveForward(ap, false, &w, why)) return false;
  } else {
    std::vector<int64_t> opad = n.Ints("output_padding"), oshape = n.Ints("output_shape");
    if (!opad.empty() && opad.size() != r) return Reject(why, "output_padding has the wrong length");
    if (!oshape.empty() && oshape.size() != r && oshape.size() != r + 2)
      return Reject(why, "output_shape has the wrong length");
    w.out.assign(r, 0);
    w.pad_end_dnnl.assign(r, 0);
    for (size_t i = 0; i < r; ++i) {
      const int64_t st = w.stride[i], ek = w.Extent(i);
      const int64_t op = opad.empty() ? 0 : opad[i];
      if (op < 0 || op >= std::max(st, w.dilation[i])) return Reject(why, "output_padding out of range");
      const int64_t natural = st * (w.in[i] - 1) + op + ek;
      int64_t pb = w.pad_begin[i], pe = w.pad_end[i], out;
      bool split = false;
      if (!oshape.empty()) {
        out = oshape[oshape.size() - r + i];
        split = true;
      } else if (ap == AutoPad::kSameUpper || ap == AutoPad::kSameLower) {
        out = std::min(w.in[i] * st, natural);  // no negative padding: ONNX Runtime's size (the CPU EP's too)
        split = true;
      } else if (ap == AutoPad::kValid) {
        pb = pe = 0;
        out = natural;
      } else {
        out = natural - pb - pe;
      }
      if (split) {
        // Floor division as the reference: an output wider than the natural one grows the end (negative pad).
        const int64_t total = natural - out;
        const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        pb = ap == AutoPad::kSameUpper ? half : total - half;
        pe = total - pb;
      }
      if (out < 1) return Reject(why, "empty output");
      if (pb < 0 || pe - op < -(std::max(st, w.dilation[i]) - 1))
        return Reject(why, "output_shape needs padding oneDNN cannot express");
      w.out[i] = out;
      w.pad_begin[i] = pb;
      w.pad_end[i] = pe;
      w.pad_end_dnnl[i] = pe - op;
    }
  }
  for (size_t i = 0; i < r; ++i)
    if (yd[2 + i] != w.out[i])
      return Reject(why, "output shape " + DimsText(yd) + kSizeDiffers);
  s->src_dims = xd;
  s->dst_dims = yd;
  s->wdims.clear();
  if (gr > 1) s->wdims.push_back(gr);
  s->wdims.push_back(ocg);
  s->wdims.push_back(icg);
  s->wdims.insert(s->wdims.end(), kernel.begin(), kernel.end());
  return true;
}

template <typename Prim>
typename Prim::primitive_desc MakeConvPd(const ConvSpec& s, const Md& src, const Md& wt, const Md& bias, const Md& dst,
                                         const dnnl::primitive_attr& attr, dnnl::engine& eng) {
  const dnnl::algorithm alg = s.deconv ? dnnl::algorithm::deconvolution_direct : dnnl::algorithm::convolution_direct;
  memory::dims pe = s.w.pad_end_dnnl;
  if (bias.data.ndims == 0) {
    typename Prim::desc d(dnnl::prop_kind::forward_inference, alg, src, wt, dst, s.w.stride, DnnlDilations(s.w),
                          s.w.pad_begin, pe);
    return typename Prim::primitive_desc(d, attr, eng);
  }
  typename Prim::desc d(dnnl::prop_kind::forward_inference, alg, src, wt, bias, dst, s.w.stride, DnnlDilations(s.w),
                        s.w.pad_begin, pe);
  return typename Prim::primitive_desc(d, attr, eng);
}

struct PdDescs {
  Md src, weights, dst;
  std::string impl;
};

// Creates the (de)convolution pd; false when oneDNN refuses.
bool TryConvPd(const ConvSpec& s, const Md& src, const Md& wt, const Md& bias, const Md& dst,
               const dnnl::primitive_attr& attr, PdDescs* out) {
  try {
    if (s.deconv) {
      auto pd = MakeConvPd<dnnl::deconvolution_forward>(s, src, wt, bias, dst, attr, ProbeEngine());
      *out = {pd.src_desc(), pd.weights_desc(), pd.dst_desc(), pd.impl_info_str()};
    } else {
      auto pd = MakeConvPd<dnnl::convolution_forward>(s, src, wt, bias, dst, attr, ProbeEngine());
      *out = {pd.src_desc(), pd.weights_desc(), pd.dst_desc(), pd.impl_info_str()};
    }
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// ---- fusion chain ----------------------------------------------------------------------------------------------

struct FusedOp {
  int node = -1;
  int out = -1;               // the value it produces
  int other = -1;             // a residual Add: its other operand
  std::vector<PostOp> pos;    // the node's post-ops: one binary (a residual Add), or eltwise ones
};

// The activations, affine maps by constant scalars and residual Adds that follow `value` as its sole consumers, in
// order (not yet absorbed), after the step's own post-ops `first` (AppendPostOp: adjacent linears merge; no second
// eltwise of one algorithm with other parameters).
std::vector<FusedOp> CollectPostOps(LowerContext& ctx, int value, std::vector<PostOp> first = {}) {
  std::vector<FusedOp> chain;
  const Graph& g = ctx.graph();
  const std::vector<int64_t> dims = g.v(value).dims;
  for (int guard = 0; guard < 16; ++guard) {
    const int c = ctx.SoleConsumer(value);
    if (c < 0 || ctx.IsAbsorbed(c)) break;
    const Node& cn = ctx.node(c);
    if (!IsOnnx(cn) || !SingleOutput(cn)) break;
    const int out = Out(cn, 0);
    if (!StaticF32(g, out) || g.v(out).dims != dims) break;
    FusedOp f;
    f.node = c;
    f.out = out;
    uint32_t alg = 0;
    float alpha = 0, beta = 0;
    float bound = 0;
    if (ScalarAffine(g, cn, value, &alpha, &beta)) {
      f.pos.push_back(EltwisePostOp(dnnl_eltwise_linear, alpha, beta));
    } else if ((cn.op == "Max" || cn.op == "Min") && cn.num_inputs() == 2 &&
               (cn.inputs[0] == value) != (cn.inputs[1] == value) &&
               g.ConstScalar(cn.inputs[0] == value ? cn.inputs[1] : cn.inputs[0], &bound) && std::isfinite(bound)) {
      // max(x, c) / min(x, c) by a constant scalar: a clip with the other bound infinite (infinite inputs stay so).
      // openWakeWord's embedding model follows every LeakyRelu with max(x, -0.4): a step each, 16% of its run.
      const float inf = std::numeric_limits<float>::infinity();
      f.pos.push_back(cn.op == "Max" ? EltwisePostOp(dnnl_eltwise_clip_v2, bound, inf)
                                     : EltwisePostOp(dnnl_eltwise_clip_v2, -inf, bound));
    } else if (cn.op == "Add") {
      if (cn.num_inputs() != 2) break;
      const int other = cn.inputs[0] == value ? cn.inputs[1] : cn.inputs[0];
      if (other == value || other < 0 || (cn.inputs[0] != value && cn.inputs[1] != value)) break;
      if (!ctx.IsAvailable(other) || !StaticF32(g, other) || g.v(other).dims != dims) break;
      PostOp p;
      p.kind = PostOp::kBinary;
      p.alg = dnnl_binary_add;
      f.pos.push_back(p);
      f.other = other;
    } else if (cn.op == "HardSigmoid" && In(cn, 0) == value) {
      f.pos.push_back(EltwisePostOp(dnnl_eltwise_linear, cn.Float("alpha", 0.2f), cn.Float("beta", 0.5f)));
      f.pos.push_back(EltwisePostOp(dnnl_eltwise_clip_v2, 0.f, 1.f));
    } else if (In(cn, 0) == value && EltwiseFor(g, cn, &alg, &alpha, &beta)) {
      f.pos.push_back(EltwisePostOp(alg, alpha, beta));
    } else {
      break;
    }
    std::vector<PostOp> next = first;
    bool fits = true;
    for (const PostOp& p : f.pos) fits = fits && AppendPostOp(&next, p, true);
    if (!fits) break;
    first = std::move(next);
    chain.push_back(f);
    value = out;
  }
  return chain;
}

// The post-ops of the chain's first `k` entries as a step carries them (adjacent linears merged); a binary entry's
// `operand` is its chain index.
std::vector<PostOp> ChainPostOps(const std::vector<FusedOp>& chain, size_t k) {
  std::vector<PostOp> out;
  for (size_t i = 0; i < k; ++i)
    for (PostOp p : chain[i].pos) {
      if (p.kind == PostOp::kBinary) p.operand = static_cast<uint32_t>(i);
      AppendPostOp(&out, p, true);  // CollectPostOps checked that the chain fits
    }
  return out;
}

// The binary operands' current descriptors (empty for eltwise entries). A constant not yet used becomes a plain
// weight when used. The chain is cut before an operand whose layout cannot be described.
void OtherDescs(LowerContext& ctx, std::vector<FusedOp>* chain, std::vector<Md>* mds) {
  mds->assign(chain->size(), Md());
  for (size_t i = 0; i < chain->size(); ++i) {
    const FusedOp& f = (*chain)[i];
    if (f.other < 0) continue;
    const Operand* op = ctx.Peek(f.other);
    if (op != nullptr) {
      (*mds)[i] = DescOfOperand(*op);
    } else if (ctx.graph().v(f.other).is_const()) {
      (*mds)[i] = PlainDesc(ctx.graph().v(f.other).dims, kF32);
    }
    if ((*mds)[i].data.ndims == 0) {
      chain->resize(i);
      mds->resize(i);
      return;
    }
  }
}

dnnl::primitive_attr PostOpAttr(const std::vector<FusedOp>& chain, size_t k, const std::vector<Md>& other_mds) {
  dnnl::post_ops po;
  for (const PostOp& p : ChainPostOps(chain, k)) {
    if (p.kind == PostOp::kEltwise)
      po.append_eltwise(p.scale, static_cast<dnnl::algorithm>(p.alg), p.alpha, p.beta);
    else
      po.append_binary(static_cast<dnnl::algorithm>(p.alg), other_mds[p.operand]);
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  return attr;
}

bool IsRefImpl(const std::string& impl) { return impl.compare(0, 3, "ref") == 0; }

// nCw<block>c, nChw<block>c or nCdhw<block>c for an activation of `rank` dims; 0 for other ranks or blocks.
// The channels-last tag of a rank: nwc, nhwc, ndhwc (0 for other ranks).
uint32_t ChannelsLastTag(size_t rank) {
  using tag = memory::format_tag;
  const tag t = rank == 3 ? tag::nwc : rank == 4 ? tag::nhwc : rank == 5 ? tag::ndhwc : tag::undef;
  return static_cast<uint32_t>(t);
}

uint32_t ChannelBlockedTag(size_t rank, int block) {
  using tag = memory::format_tag;
  tag t = tag::undef;
  if (block == 16) t = rank == 3 ? tag::nCw16c : rank == 4 ? tag::nChw16c : rank == 5 ? tag::nCdhw16c : tag::undef;
  if (block == 8) t = rank == 3 ? tag::nCw8c : rank == 4 ? tag::nChw8c : rank == 5 ? tag::nCdhw8c : tag::undef;
  return static_cast<uint32_t>(t);
}

// Sets OpenMP's thread count for this thread while in scope.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~OmpThreadsScope() { omp_set_num_threads(saved_); }
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int saved_;
};

// The thread counts a compiled step may be created with: the executor creates each primitive with the threads it
// runs with, which depend on the loading session (1 with intra_op_num_threads=1 or EPCTX_AOTCPU_PARALLEL_MIN_US,
// the processors by default), and oneDNN picks implementations per thread count: on an AVX-512 machine brgconv
// takes a batch-1 channels-last 1-D convolution with 2 threads and refuses it with 1, which then ran the reference
// kernel (issue 14). The machine's processors first (the default), then 1.
const std::vector<int>& ProbeThreadCounts() {
  static const std::vector<int> counts = [] {
    std::vector<int> v{std::max(1, omp_get_num_procs())};
    if (v[0] != 1) v.push_back(1);
    return v;
  }();
  return counts;
}

// `d` as the executor will see it: through the program's layout encoding (LayoutFromDesc, OperandDesc).
Md AsStored(const Md& d) {
  Operand op;
  if (!LayoutFromDesc(d, &op)) return Md();
  op.buf = Buf::kArena;
  op.dtype = kF32;
  Md out;
  if (!OperandDesc(op, &out).ok) return Md();
  return out;
}

// ---- 1-D convolutions as 2-D ones with H = 1 ---------------------------------------------------------------------
//
// oneDNN 2.6 has depthwise jit kernels (jit_dw) for 2-D problems only: a 1-D depthwise convolution got the gemm-based
// kernel (im2col + sgemm, whose sgemm is JIT-generated on the first run; Silero VAD v4's
// g258mb1_ic258oc258_iw24ow24kw5). So every 1-D (de)convolution is lowered as the 2-D one with H = 1: its step
// describes src, dst and the binary post-op operands as 4-D views [N, C, 1, W] of the bytes their 3-D values hold
// (ncw, nwc, nCw16c, nCw8c are nchw, nhwc, nChw16c, nChw8c with H = 1, so no copy is made), and weights packed for
// the 2-D primitive ([g,] OC/g, IC/g, 1, k). Other steps read the 3-D values as before. The program format does not
// change: the step is an ordinary 2-D convolution over operands any build checks and runs.

// `d` (rank 3: N, C, W) with a size-1 H inserted at axis 2, strided as the 4-D tags stride it (just outside W: nchw
// W, nhwc W*C, nChw16c 16*W): oneDNN's kernels compare strides of size-1 dims too (see SameLayout), and the view
// then names the 4-D tag exactly. Empty when `d` is not a blocked rank-3 layout.
Md InsertH(const Md& d) {
  const dnnl_memory_desc_t& md = d.data;
  if (md.ndims != 3 || md.format_kind != dnnl_blocked || md.offset0 != 0 || md.extra.flags != 0) return Md();
  dnnl_memory_desc_t out = md;
  out.ndims = 4;
  out.dims[3] = md.dims[2];
  out.padded_dims[3] = md.padded_dims[2];
  out.padded_offsets[3] = md.padded_offsets[2];
  out.dims[2] = out.padded_dims[2] = 1;
  out.padded_offsets[2] = 0;
  dnnl_blocking_desc_t& b = out.format_desc.blocking;
  b.strides[3] = md.format_desc.blocking.strides[2];
  b.strides[2] = b.strides[3] * md.padded_dims[2];
  for (int i = 0; i < b.inner_nblks; ++i)
    if (b.inner_idxs[i] >= 2) ++b.inner_idxs[i];
  return Md(out);
}

// The inverse: `d` (rank 4, H = 1, unpadded and unblocked) without its H. Empty otherwise.
Md DropH(const Md& d) {
  const dnnl_memory_desc_t& md = d.data;
  if (md.ndims != 4 || md.format_kind != dnnl_blocked || md.offset0 != 0 || md.extra.flags != 0) return Md();
  if (md.dims[2] != 1 || md.padded_dims[2] != 1 || md.padded_offsets[2] != 0) return Md();
  dnnl_memory_desc_t out = md;
  dnnl_blocking_desc_t& b = out.format_desc.blocking;
  for (int i = 0; i < b.inner_nblks; ++i) {
    if (b.inner_idxs[i] == 2) return Md();
    if (b.inner_idxs[i] > 2) --b.inner_idxs[i];
  }
  out.ndims = 3;
  out.dims[2] = md.dims[3];
  out.padded_dims[2] = md.padded_dims[3];
  out.padded_offsets[2] = md.padded_offsets[3];
  b.strides[2] = md.format_desc.blocking.strides[3];
  out.dims[3] = out.padded_dims[3] = 0;
  out.padded_offsets[3] = 0;
  b.strides[3] = 0;
  return Md(out);
}

// A 3-D activation's layout as the lifted step's operand describes it (empty when no program can).
Md LiftDesc(const Md& d3) { return AsStored(InsertH(d3)); }

// A 4-D layout oneDNN chose as it comes back through the 3-D value the compiler defines or reads: the layout the
// lifted step's operand will have. Empty when the 3-D layout has no program form or H is not just outside W.
Md ThroughThreeD(const Md& d4) {
  const Md d3 = AsStored(DropH(d4));
  return d3.data.ndims == 0 ? Md() : LiftDesc(d3);
}

// The 4-D view of a 3-D activation operand: same buffer, offset and bytes. kNone when its layout has no 4-D form.
Operand LiftOperand(const Operand& op) {
  Md d;
  if (!op.present() || !OperandDesc(op, &d).ok) return Operand();
  Operand out = op;
  if (!LayoutFromDesc(InsertH(d), &out)) return Operand();
  return out;
}

// The 1-D problem as the 2-D one with H = 1: kernel 1, stride 1, dilation 1, no padding along H.
void LiftSpec(ConvSpec* s) {
  Window& w = s->w;
  for (std::vector<int64_t>* v : {&w.in, &w.out, &w.kernel, &w.stride, &w.dilation})
    v->insert(v->begin(), 1);
  for (std::vector<int64_t>* v : {&w.pad_begin, &w.pad_end, &w.pad_end_dnnl}) v->insert(v->begin(), 0);
  s->src_dims.insert(s->src_dims.begin() + 2, 1);
  s->dst_dims.insert(s->dst_dims.begin() + 2, 1);
  s->wdims.insert(s->wdims.end() - 1, 1);
}

// How much a convolution implementation is preferred: 0 reference, 1 gemm-based (im2col), 2 direct kernels.
int ConvImplScore(const std::string& impl) {
  if (IsRefImpl(impl)) return 0;
  // "x64:gemm:jit", "gemm:jit" (im2col + sgemm); brgemm ("brgemm:avx512_core", "brgconv") is direct.
  if (impl.find("gemm:jit") != std::string::npos || impl.compare(0, 4, "gemm") == 0) return 1;
  return 2;
}

// Appends the first `k` fused ops to the step: binary operands (Use) after the existing operands.
CheckResult AppendPostOps(LowerContext& ctx, int node, const std::vector<FusedOp>& chain, size_t k,
                          const std::vector<Md>& other_mds, Step* st) {
  for (PostOp p : ChainPostOps(chain, k)) {
    if (p.kind == PostOp::kBinary) {
      const size_t i = p.operand;
      Operand o = ctx.Use(chain[i].other);
      if (!(DescOfOperand(o) == other_mds[i]))
        return ctx.Fail(node, "residual operand changed layout while being fused");
      p.operand = static_cast<uint32_t>(st->ops.size());
      st->ops.push_back(o);
    }
    if (!AppendPostOp(&st->post_ops, p, true)) return ctx.Fail(node, "post-op chain changed while fused");
  }
  return Ok();
}

// Inference BatchNormalization on `value` with constant [C] parameters: its per-channel scale and shift.
bool FoldableBatchNorm(const Graph& g, const Node& bn, int value, int64_t channels, std::vector<double>* scale,
                       std::vector<double>* shift) {
  if (bn.op != "BatchNormalization" || !IsOnnx(bn) || bn.opset < 7 || !SingleOutput(bn)) return false;
  if (In(bn, 0) != value || bn.num_inputs() != 5) return false;
  if (bn.Int("training_mode", 0) != 0 || bn.Int("spatial", 1) != 1) return false;
  const int y = Out(bn, 0);
  if (!StaticF32(g, y) || g.v(y).dims != g.v(value).dims) return false;
  const float* p[4];
  for (int i = 0; i < 4; ++i) {
    const int v = In(bn, static_cast<size_t>(i) + 1);
    p[i] = ConstF32(g, v);
    if (p[i] == nullptr || g.v(v).dims != std::vector<int64_t>{channels}) return false;
  }
  const double eps = bn.Float("epsilon", 1e-5f);
  scale->resize(static_cast<size_t>(channels));
  shift->resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const double s = static_cast<double>(p[0][c]) / std::sqrt(static_cast<double>(p[3][c]) + eps);
    (*scale)[static_cast<size_t>(c)] = s;
    (*shift)[static_cast<size_t>(c)] = static_cast<double>(p[1][c]) - static_cast<double>(p[2][c]) * s;
  }
  return true;
}

// `n` reading `value` (dims [N, C, ...]) as a per-channel affine map by a constant: x * s, x + s, x - s, s - x or
// x / s with s broadcasting along C only (one value, or C values on the channel axis). True with y = scale[c] * x +
// shift[c] for every channel c of `channels`.
bool ChannelAffine(const Graph& g, const Node& n, int value, int64_t channels, std::vector<double>* scale,
                   std::vector<double>* shift) {
  if (!IsOnnx(n) || !SingleOutput(n) || n.num_inputs() != 2) return false;
  if (n.op != "Mul" && n.op != "Add" && n.op != "Sub" && n.op != "Div") return false;
  const bool first = n.inputs[0] == value;
  const int other = first ? n.inputs[1] : n.inputs[0];
  if (other == value || (!first && n.inputs[1] != value)) return false;
  const std::vector<int64_t>& xd = g.v(value).dims;
  const float* p = ConstF32(g, other);
  if (p == nullptr || !StaticF32(g, Out(n, 0)) || g.v(Out(n, 0)).dims != xd || xd.size() < 2) return false;
  const std::vector<int64_t>& od = g.v(other).dims;
  if (od.size() > xd.size()) return false;
  const size_t lead = xd.size() - od.size();
  for (size_t i = 0; i < od.size(); ++i)
    if (od[i] != 1 && !(lead + i == 1 && od[i] == channels)) return false;
  const bool per_channel = g.v(other).numel() == channels && channels != 1;
  scale->assign(static_cast<size_t>(channels), 1.0);
  shift->assign(static_cast<size_t>(channels), 0.0);
  for (int64_t c = 0; c < channels; ++c) {
    const double v = p[per_channel ? c : 0];
    if (!std::isfinite(v)) return false;
    double& s = (*scale)[static_cast<size_t>(c)];
    double& t = (*shift)[static_cast<size_t>(c)];
    if (n.op == "Mul") {
      s = v;
    } else if (n.op == "Add") {
      t = v;
    } else if (n.op == "Sub") {
      s = first ? 1.0 : -1.0;
      t = first ? -v : v;
    } else {
      if (!first || v == 0) return false;
      s = 1.0 / v;
    }
  }
  return true;
}

CheckResult LowerConvLike(LowerContext& ctx, int node, bool deconv) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  ConvSpec spec;
  std::string why;
  if (!ResolveConv(g, n, deconv, &spec, &why)) return ctx.Fail(node, why);
  const bool portable = ctx.options().portable_layouts;
  // A 1-D problem runs as the 2-D one with H = 1 (LiftSpec): every candidate below is the lifted problem, and its
  // activation operands are 4-D views of the 3-D values (`lifted` for layouts, `view` for operands).
  const bool lift = spec.w.rank() == 1;
  if (lift) LiftSpec(&spec);
  auto lifted = [lift](const Md& d) { return lift ? LiftDesc(d) : d; };
  auto view = [lift](const Operand& o) { return lift ? LiftOperand(o) : o; };

  // Weights in oneDNN's logical order [g][OC/g][IC/g][k...], row-major. Conv's ONNX layout already is; the
  // transposed convolution's ONNX weights are [g][IC/g][OC/g][k...].
  const int wv = In(n, 1), bv = In(n, 2);
  const float* wsrc = ConstF32(g, wv);
  const int64_t ksize = static_cast<int64_t>(g.v(wv).numel()) / (g.v(wv).dims[0] * g.v(wv).dims[1]);
  const int64_t ocg = spec.oc / spec.groups, icg = spec.ic / spec.groups;
  // A later shape of a dynamic graph replays the first shape's folding (LoweringMemo::Fold): the same constants give
  // the same weights and bias, so neither is copied or folded again.
  LoweringMemo* memo = ctx.options().memo.get();
  std::shared_ptr<const std::vector<float>> memo_wts;
  std::vector<float> wts, bias(static_cast<size_t>(spec.oc), 0.f);
  bool has_bias = bv >= 0;
  std::vector<int> absorbed;
  int cur = Out(n, 0);
  bool replayed = false;
  if (memo) {
    auto it = memo->fold.find(n.name);
    if (it != memo->fold.end()) {
      replayed = true;
      for (const std::string& name : it->second.absorbed) {
        const int next = ctx.SoleConsumer(cur);
        if (next < 0 || ctx.IsAbsorbed(next) || ctx.node(next).name != name) {
          replayed = false;
          break;
        }
        absorbed.push_back(next);
        cur = Out(ctx.node(next), 0);
      }
      if (replayed) {
        memo_wts = it->second.weights;
        bias = it->second.bias;
        has_bias = it->second.has_bias;
      } else {
        absorbed.clear();
        cur = Out(n, 0);
      }
    }
  }
  if (!replayed) {
    wts.resize(static_cast<size_t>(g.v(wv).numel()));
    if (!deconv) {
      std::memcpy(wts.data(), wsrc, wts.size() * sizeof(float));
    } else {
      for (int64_t gi = 0; gi < spec.groups; ++gi)
        for (int64_t o = 0; o < ocg; ++o)
          for (int64_t i = 0; i < icg; ++i)
            std::memcpy(&wts[static_cast<size_t>(((gi * ocg + o) * icg + i) * ksize)],
                        wsrc + ((gi * icg + i) * ocg + o) * ksize, static_cast<size_t>(ksize) * sizeof(float));
    }
    if (has_bias) std::memcpy(bias.data(), ConstF32(g, bv), bias.size() * sizeof(float));

    // Fusion chain: BatchNormalizations and per-channel affine maps by constants folded into weights and bias, then
    // post-ops. PaddlePaddle exports spell batch normalization and "learnable affine blocks" as Mul/Add by constants
    // (PP-OCRv4's detector: 56 of them, each a step of its own, 28% of the run, issue 14).
    // Neither into a transposed convolution: oneDNN 2.6 runs a deconvolution's bias and post-ops in slow loops of
    // their own (PP-OCRv4's upsampling ConvTransposes, 24 and 1 output channels, blocked: 0.8 -> 8.7 ms and 1.8 ->
    // 11-16 ms with a folded bias, 1.8 -> 106 ms with a linear post-op; the same implementation name).
    while (!deconv) {
      const int next = ctx.SoleConsumer(cur);
      if (next < 0 || ctx.IsAbsorbed(next)) break;
      std::vector<double> fold_scale, fold_shift;
      if (!FoldableBatchNorm(g, ctx.node(next), cur, spec.oc, &fold_scale, &fold_shift) &&
          !ChannelAffine(g, ctx.node(next), cur, spec.oc, &fold_scale, &fold_shift))
        break;
      const int64_t per_oc = icg * ksize;
      std::vector<float> new_wts = wts, new_bias = bias;
      bool finite = true;
      for (int64_t c = 0; c < spec.oc && finite; ++c) {
        const double s = fold_scale[static_cast<size_t>(c)];
        float* wp = &new_wts[static_cast<size_t>(c * per_oc)];
        for (int64_t j = 0; j < per_oc; ++j) {
          wp[j] = static_cast<float>(static_cast<double>(wp[j]) * s);
          finite = finite && std::isfinite(wp[j]);
        }
        float& b = new_bias[static_cast<size_t>(c)];
        b = static_cast<float>(static_cast<double>(b) * s + fold_shift[static_cast<size_t>(c)]);
        finite = finite && std::isfinite(b);
      }
      if (!finite) break;  // kept as a step of its own: folding would turn an overflow into another value
      wts.swap(new_wts);
      bias.swap(new_bias);
      has_bias = true;
      absorbed.push_back(next);
      cur = Out(ctx.node(next), 0);
    }
    if (memo) {
      LoweringMemo::Fold f;
      for (int a : absorbed) f.absorbed.push_back(ctx.node(a).name);
      if (deconv || !absorbed.empty()) f.weights = std::make_shared<const std::vector<float>>(wts);
      f.bias = bias;
      f.has_bias = has_bias;
      memo->fold[n.name] = std::move(f);
    }
  }  // !replayed
  // The weights to pack: folded or reordered above (or by the first shape), else the initializer as it is.
  const float* wdata = !wts.empty() ? wts.data() : memo_wts ? memo_wts->data() : wsrc;
  std::vector<FusedOp> chain = deconv ? std::vector<FusedOp>() : CollectPostOps(ctx, cur);
  std::vector<Md> other_mds;
  OtherDescs(ctx, &chain, &other_mds);
  // The binary operands as the primitive sees them (lifted: the chain is cut before one without a 4-D view).
  std::vector<Md> post_mds(other_mds.size());
  for (size_t i = 0; i < other_mds.size(); ++i) {
    if (other_mds[i].data.ndims == 0) continue;  // an eltwise entry
    post_mds[i] = lifted(other_mds[i]);
    if (post_mds[i].data.ndims == 0) {
      chain.resize(i);
      other_mds.resize(i);
      post_mds.resize(i);
      break;
    }
  }

  // Layouts: src as it is when the primitive takes it, else plain; weights and dst chosen by oneDNN.
  const int x = In(n, 0);
  const Md plain_src = PlainDesc(spec.src_dims, kF32);
  const Operand* cur_op = ctx.Peek(x);
  if (!cur_op) cur_op = ctx.PeekView(x);  // a deferred Transpose: its strided layout is the current one (no copy yet)
  Md cur_src = cur_op ? lifted(DescOfOperand(*cur_op)) : plain_src;
  if (cur_src.data.ndims == 0) cur_src = plain_src;
  const Md bias_md = has_bias ? PlainDesc({spec.oc}, kF32) : Md();
  Md w_req = portable ? PlainDesc(spec.wdims, kF32) : F32Desc(spec.wdims, dnnl_format_tag_any);

  // The best implementation wins, ranked reference < gemm-based (im2col on plain layouts, handing plain layouts on
  // to the next step) < oneDNN's direct kernels; among equals the longest fusion chain, then the earlier candidate
  // (no reorder of the source). A shorter chain on a direct kernel beats a longer one on gemm: gemm-based
  // convolutions also JIT oneDNN's sgemm on their first run (~10-20 ms per process on AVX-512, issue 14). The source layout
  // oneDNN prefers ("any") is taken with one reorder of the source when it differs from the current one: on the
  // PaddleOCR classifier a plain source made 51 of 53 convolutions gemm-based (x64:gemm:jit), 90% of its run time
  // (issue 14). Blocked sources need an explicitly blocked dst: with dst "any" some kernels (depthwise) refuse.
  struct Choice {
    bool found = false, plain_src = false;
    size_t k = 0;
    int score = -1;
    PdDescs pd;
  };
  Choice best;
  const Md cur_like_dst = SameLayoutAs(cur_src, spec.dst_dims);
  // A later shape of a dynamic graph (CompileOptions::memo): the layouts and fusion the first shape chose, tried
  // first; the search below runs only when they no longer give a direct kernel at every thread count.
  const std::string& memo_key = ctx.node(node).name;
  if (memo && !lift && !portable) {
    auto it = memo->conv.find(memo_key);
    if (it != memo->conv.end() && it->second.fused <= chain.size()) {
      const LoweringMemo::Conv& m = it->second;
      const Md src = m.plain_src ? plain_src : F32Desc(spec.src_dims, m.src_tag);
      const Md wts_md = F32Desc(spec.wdims, m.weights_tag), dst = F32Desc(spec.dst_dims, m.dst_tag);
      const dnnl::primitive_attr attr = PostOpAttr(chain, m.fused, post_mds);
      // Checked at the session's thread count only: the first shape's search found a direct kernel at every count
      // for these layouts, and a later shape whose executor cannot build a step is lowered again without the memo
      // (DynamicGraph::Build), so a kernel missing at one thread costs time, never the run.
      int score = 2;
      std::string impl;
      for (int t : {ProbeThreadCounts()[0]}) {
        OmpThreadsScope scope(t);
        PdDescs again;
        if (!TryConvPd(spec, src, wts_md, bias_md, dst, attr, &again)) {
          score = -1;
          break;
        }
        score = std::min(score, ConvImplScore(again.impl));
        if (impl.empty()) impl = again.impl;
      }
      if (score == 2) {
        best.found = true;
        best.k = m.fused;
        best.plain_src = m.plain_src;
        best.score = score;
        best.pd = {AsStored(src), AsStored(wts_md), AsStored(dst), impl};
        ++memo->hits;
      } else {
        ++memo->misses;
      }
    }
  }
  // Second attempt, when no layout oneDNN chose for the weights can be named: plain weights.
  for (int attempt = 0; attempt < 2 && !best.found; ++attempt) {
    if (attempt == 1) w_req = PlainDesc(spec.wdims, kF32);
    for (size_t k = chain.size() + 1; k-- > 0 && best.score < 2;) {
      const int final_value = k == 0 ? cur : chain[k - 1].out;
      // A value read only as a graph output goes straight to the output buffer, plain.
      const bool plain_dst = portable || (IsGraphOutput(g, final_value) && g.v(final_value).consumers.empty());
      const Md dst_any = plain_dst ? PlainDesc(spec.dst_dims, kF32) : F32Desc(spec.dst_dims, dnnl_format_tag_any);
      const dnnl::primitive_attr attr = PostOpAttr(chain, k, post_mds);
      struct Option {
        Md src, dst;
        bool plain_src;
        bool channels_last = false;  // taken only on a direct kernel (below)
      };
      std::vector<Option> options;
      // Channels-last activations (CompileOptions::channels_last, the layout plan's other candidate): nhwc first, so
      // it wins among equally ranked kernels; the options after it remain for a convolution that has none in it.
      if (!portable && ctx.options().channels_last && !lift) {
        const uint32_t cl = ChannelsLastTag(spec.src_dims.size());
        if (cl != 0)
          options.push_back({F32Desc(spec.src_dims, cl),
                             plain_dst ? PlainDesc(spec.dst_dims, kF32) : F32Desc(spec.dst_dims, cl), false, true});
      }
      if (!portable) {
        options.push_back({F32Desc(spec.src_dims, dnnl_format_tag_any), dst_any, false});
        options.push_back({cur_src, dst_any, false});
        if (!plain_dst && cur_like_dst.data.ndims != 0) options.push_back({cur_src, cur_like_dst, false});
      }
      options.push_back({plain_src, dst_any, !(cur_src == plain_src)});
      // Channel-blocked source and destination (16 for AVX-512, 8 for AVX2): oneDNN's direct jit kernels take them
      // at every thread count, where brgconv (the "any" choice on AVX-512) refuses some batch-1 problems with one
      // thread and the rest is gemm-based (Silero's strided 1-D convolutions, issue 14).
      if (!portable && !plain_dst)
        for (int block : {16, 8}) {
          const uint32_t tag = ChannelBlockedTag(spec.src_dims.size(), block);
          if (tag != 0)
            options.push_back({F32Desc(spec.src_dims, tag), F32Desc(spec.dst_dims, tag), false});
        }
      for (const Option& o : options) {
        for (int resolve_threads : ProbeThreadCounts()) {
          PdDescs pd;
          bool ok;
          {
            OmpThreadsScope scope(resolve_threads);
            ok = TryConvPd(spec, o.src, w_req, bias_md, o.dst, attr, &pd);
          }
          if (!ok) continue;
          // Layouts a program can name (a format tag or strides): oneDNN picks some blocked (de)convolution weights
          // no tag describes, and the compile failed (found by tests/difftest: SAME ConvTranspose after a Conv).
          // A layout given stays as given (oneDNN may report an equal one with other strides on size-1 dims).
          auto given_or = [](const Md& asked, const Md& got) {
            return AsStored(asked.data.format_kind == dnnl_format_kind_any ? got : asked);
          };
          Md src = given_or(o.src, pd.src), wts = given_or(w_req, pd.weights), dst = given_or(o.dst, pd.dst);
          // Lifted: src and dst as they come back through the 3-D values the program defines and reads.
          if (lift) {
            src = ThroughThreeD(src);
            dst = ThroughThreeD(dst);
          }
          if (src.data.ndims == 0 || wts.data.ndims == 0 || dst.data.ndims == 0) continue;
          // The score: the worst implementation the executor gets from these layouts at any thread count.
          int score = ConvImplScore(pd.impl);
          for (int t : ProbeThreadCounts()) {
            OmpThreadsScope scope(t);
            PdDescs again;
            score = TryConvPd(spec, src, wts, bias_md, dst, attr, &again)
                        ? std::min(score, ConvImplScore(again.impl)) : -1;
            if (score < 0) break;
          }
          if (score < 0) continue;
          // Channels-last only on oneDNN's direct kernels: its gemm-based convolution on nhwc with groups computed
          // wrong values at avx2 (difftest seed 20261128 model 254: grouped 1x1 and 2x2 convolutions with a residual
          // sum, 14 of 16 outputs off by up to 3.2); the other layouts' gemm path is the one the tests cover.
          if (o.channels_last && score < 2) continue;
          Choice c;
          c.found = true;
          c.k = k;
          c.plain_src = o.plain_src;
          c.score = score;
          c.pd = {src, wts, dst, pd.impl};  // as stored, so as the executor creates the primitive
          // Among equals, a transposed convolution takes the layouts with the fewest bytes: oneDNN's "any" pads its
          // channels to blocks of 16, and the detector's last ConvTranspose (1 output channel) ran 3x slower on
          // that padding than on blocks of 8 (4.5 vs 1.4 ms at one thread, the same direct kernels).
          auto bytes = [](const PdDescs& d) { return d.src.get_size() + d.dst.get_size(); };
          const bool smaller = deconv && best.found && c.score == best.score && c.k == best.k &&
                               bytes(c.pd) < bytes(best.pd);
          if (c.score > best.score || smaller) best = c;
        }
      }
    }
  }
  if (!best.found) return ctx.Fail(node, "oneDNN has no implementation for this convolution");
  if (memo && !lift && !portable) {
    LoweringMemo::Conv m{best.k, best.plain_src, FormatTagOf(best.pd.src), FormatTagOf(best.pd.weights),
                         FormatTagOf(best.pd.dst)};
    if ((m.plain_src || m.src_tag) && m.weights_tag && m.dst_tag) memo->conv[memo_key] = m;
  }
  for (size_t i = 0; i < best.k; ++i) absorbed.push_back(chain[i].node);
  const int final_value = best.k == 0 ? cur : chain[best.k - 1].out;

  Step st;
  st.kind = deconv ? StepKind::kDeconv : StepKind::kConv;
  st.name = JoinNames(ctx, node, absorbed);
  // The source exactly as the primitive was created: UseAs makes a view when only the strides of size-1 dims
  // differ (no copy), else the reorder the choice counted.
  // A deferred view (a Transpose) taken in a layout other than plain goes through UseAs alone, which reads it in place
  // when it is that layout (tf2onnx's NHWC input as the nhwc source) and else reorders it once.
  Operand src_op = !best.plain_src && ctx.PeekView(x) ? view(ctx.UseAs(x, lift ? DropH(best.pd.src) : best.pd.src))
                                                      : view(best.plain_src ? ctx.UsePlain(x) : ctx.Use(x));
  if (!SameLayout(DescOfOperand(src_op), best.pd.src))
    src_op = view(ctx.UseAs(x, lift ? DropH(best.pd.src) : best.pd.src));
  if (!SameLayout(DescOfOperand(src_op), best.pd.src)) return ctx.Fail(node, "source operand layout mismatch");
  st.ops.push_back(src_op);
  Operand wop, bop;
  CheckResult r = ctx.PackWeight(WeightName(ctx, node, wv, absorbed.empty() ? "packed" : "fused"), wdata,
                                 PlainDesc(spec.wdims, kF32), best.pd.weights, &wop);
  if (!r.ok) return r;
  st.ops.push_back(wop);
  if (has_bias) {
    std::string bytes(reinterpret_cast<const char*>(bias.data()), bias.size() * sizeof(float));
    r = ctx.AddWeight(WeightName(ctx, node, bv, "bias"), std::move(bytes), bias_md, &bop);
    if (!r.ok) return r;
  }
  st.ops.push_back(bop);
  st.ops.push_back(Operand());  // dst, defined after every input is used
  r = AppendPostOps(ctx, node, chain, best.k, other_mds, &st);
  if (!r.ok) return r;
  for (size_t i = 4; i < st.ops.size(); ++i) {
    st.ops[i] = view(st.ops[i]);
    if (!st.ops[i].present()) return ctx.Fail(node, "residual operand has no 4-D view");
  }
  st.ops[3] = view(ctx.Define(final_value, lift ? DropH(best.pd.dst) : best.pd.dst));
  if (lift && !SameLayout(DescOfOperand(st.ops[3]), best.pd.dst))
    return ctx.Fail(node, "destination operand layout mismatch");
  st.ints.push_back(spec.groups);
  st.ints.push_back(static_cast<int64_t>(spec.w.rank()));
  std::vector<int64_t> dil = DnnlDilations(spec.w);
  for (const std::vector<int64_t>* v : {&spec.w.stride, &dil, &spec.w.pad_begin, &spec.w.pad_end_dnnl})
    st.ints.insert(st.ints.end(), v->begin(), v->end());
  for (int a : absorbed) ctx.Absorb(a);
  ctx.Emit(std::move(st));
  return Ok();
}

bool SupportConvLike(const Graph& g, const Node& n, bool deconv, std::string* why) {
  ConvSpec spec;
  if (!ResolveConv(g, n, deconv, &spec, why)) return false;
  PdDescs pd;
  const Md bias = In(n, 2) >= 0 ? PlainDesc({spec.oc}, kF32) : Md();
  if (!TryConvPd(spec, PlainDesc(spec.src_dims, kF32), F32Desc(spec.wdims, dnnl_format_tag_any), bias,
                 PlainDesc(spec.dst_dims, kF32), dnnl::primitive_attr(), &pd))
    return Reject(why, "oneDNN has no implementation for this geometry");
  return true;
}

// ---- pooling ---------------------------------------------------------------------------------------------------

struct PoolSpec {
  dnnl_alg_kind_t alg = dnnl_pooling_max;
  Window w;
  std::vector<int64_t> src_dims, dst_dims;
};

bool ResolvePool(const Graph& g, const Node& n, PoolSpec* s, std::string* why) {
  if (!IsOnnx(n)) return Reject(why, "not an ONNX op");
  if (!SingleOutput(n) || n.num_inputs() != 1) return Reject(why, "expected one input and one output (no Indices)");
  const int x = In(n, 0), y = Out(n, 0);
  if (!StaticF32(g, x) || !StaticF32(g, y)) return Reject(why, "input/output must be float32 with static shapes");
  const std::vector<int64_t>& xd = g.v(x).dims;
  const std::vector<int64_t>& yd = g.v(y).dims;
  if (xd.size() < 3 || xd.size() > 5 || yd.size() != xd.size()) return Reject(why, "spatial rank must be 1..3");
  if (yd[0] != xd[0] || yd[1] != xd[1]) return Reject(why, "output batch/channels differ from the input");
  const size_t r = xd.size() - 2;
  Window& w = s->w;
  w.in.assign(xd.begin() + 2, xd.end());
  const bool global = n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool";
  const bool is_max = n.op == "MaxPool" || n.op == "GlobalMaxPool";
  if (global) {
    w.kernel = w.in;
    w.stride.assign(r, 1);
    w.dilation.assign(r, 1);
    w.pad_begin.assign(r, 0);
    w.pad_end.assign(r, 0);
    if (!ResolveForward(AutoPad::kNotSet, false, &w, why)) return false;
    s->alg = is_max ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
  } else {
    w.kernel = n.Ints("kernel_shape");
    if (w.kernel.size() != r) return Reject(why, "kernel_shape missing or of the wrong length");
    for (int64_t k : w.kernel)
      if (k < 1 || k > kMaxWindow) return Reject(why, "kernel_shape out of range");
    AutoPad ap;
    if (!ParseAutoPad(n, &ap, why)) return false;
    // dilations: MaxPool since opset 10 (AveragePool only from 19).
    const bool dil_ok = is_max ? n.opset >= 10 : n.opset >= 19;
    if (!ReadWindowAttrs(n, r, dil_ok, &w, why)) return false;
    const bool ceil_mode = n.opset >= 10 && n.Int("ceil_mode", 0) != 0;
    if (n.Int("ceil_mode", 0) != 0 && n.opset < 10) return Reject(why, "ceil_mode before opset 10");
    if (!ResolveForward(ap, ceil_mode && (ap == AutoPad::kNotSet || ap == AutoPad::kValid), &w, why)) return false;
    // The size first: DistrustContradictedShapes looks for this reason.
    for (size_t i = 0; i < r; ++i)
      if (yd[2 + i] != w.out[i]) return Reject(why, "output shape " + DimsText(yd) + kSizeDiffers);
    const bool include_pad = !is_max && n.opset >= 7 && n.Int("count_include_pad", 0) != 0;
    s->alg = is_max        ? dnnl_pooling_max
             : include_pad ? dnnl_pooling_avg_include_padding
                           : dnnl_pooling_avg_exclude_padding;
    if (include_pad) {
      // oneDNN divides by the kernel size; ONNX counts explicit padding only.
      for (size_t i = 0; i < r; ++i)
        if ((w.out[i] - 1) * w.stride[i] + w.Extent(i) > w.in[i] + w.pad_begin[i] + w.pad_end[i])
          return Reject(why, "count_include_pad with a ceil_mode window past the padding");
    }
    if (!WindowsTouchInput(w)) return Reject(why, "a pooling window lies wholly in the padding");
  }
  for (size_t i = 0; i < r; ++i)
    if (yd[2 + i] != w.out[i])
      return Reject(why, "output shape " + DimsText(yd) + kSizeDiffers);
  s->src_dims = xd;
  s->dst_dims = yd;
  return true;
}

bool TryPoolPd(const PoolSpec& s, const Md& src, const Md& dst) {
  try {
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, static_cast<dnnl::algorithm>(s.alg), src, dst,
                                     s.w.stride, s.w.kernel, DnnlDilations(s.w), s.w.pad_begin, s.w.pad_end_dnnl);
    dnnl::pooling_v2_forward::primitive_desc pd(d, ProbeEngine());
    return pd.src_desc() == src && pd.dst_desc() == dst;
  } catch (const dnnl::error&) {
    return false;
  }
}

// Shared by layout-preserving ops (pooling, resampling, batch norm): src in its current tagged layout and dst in the
// same tag when `try_fn` accepts that, else both plain. Returns false when even plain is refused.
// Shared by layout-preserving ops (pooling, resampling, batch norm): src in its current layout and dst in the same
// layout when `try_fn` accepts that, else both plain. Returns false when even plain is refused.
template <typename TryFn>
bool ChooseSameLayout(LowerContext& ctx, int x, const std::vector<int64_t>& src_dims,
                      const std::vector<int64_t>& dst_dims, TryFn try_fn, bool* plain, Md* src, Md* dst) {
  const Operand* op = ctx.Peek(x);
  const Md plain_src = PlainDesc(src_dims, kF32);
  if (!ctx.options().portable_layouts && op != nullptr) {
    const Md s = DescOfOperand(*op);
    const Md d = SameLayoutAs(s, dst_dims);
    if (s.data.ndims != 0 && d.data.ndims != 0 && !(s == plain_src) && try_fn(s, d)) {
      *plain = false;
      *src = s;
      *dst = d;
      return true;
    }
  }
  *plain = true;
  *src = plain_src;
  *dst = PlainDesc(dst_dims, kF32);
  return try_fn(*src, *dst);
}

// ---- resize ----------------------------------------------------------------------------------------------------

struct ResizeSpec {
  dnnl_alg_kind_t alg = dnnl_resampling_nearest;
  std::vector<int64_t> src_dims, dst_dims;
};

int64_t RoundNearest(double x, const std::string& mode, bool downsample) {
  const double fl = std::floor(x);
  if (mode == "floor") return static_cast<int64_t>(fl);
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (mode == "simple") return downsample ? static_cast<int64_t>(std::ceil(x)) : static_cast<int64_t>(std::trunc(x));
  if (x - fl == 0.5) return static_cast<int64_t>(mode == "round_prefer_ceil" ? fl + 1 : fl);
  return static_cast<int64_t>(std::round(x));
}

// Whether ONNX's nearest index (computed in float like ONNX Runtime and in double) equals oneDNN's
// round(((y + 0.5) * in / out) - 0.5) for every output position of one dimension.
// `length_resized` is align_corners' output length: the output dim when sizes are given, in * scale with scales (the
// CPU EP's and the ONNX reference's rule; ONNX Runtime 1.30 takes the output dim there too, so with a fractional
// in * scale the three disagree and the node stays on the CPU EP: found by tests/difftest).
bool NearestMatches(int64_t in, int64_t out, float scale, float length_resized, const std::string& ctm,
                    const std::string& mode) {
  const bool down = scale < 1.f;
  for (int64_t y = 0; y < out; ++y) {
    const float yf = static_cast<float>(y);
    const double yd = static_cast<double>(y);
    float xf;
    double xd;
    if (ctm == "half_pixel" || (ctm == "pytorch_half_pixel" && out > 1)) {
      xf = (yf + 0.5f) / scale - 0.5f;
      xd = (yd + 0.5) / scale - 0.5;
    } else if (ctm == "pytorch_half_pixel") {
      xf = 0.f;
      xd = 0.0;
    } else if (ctm == "align_corners") {
      xf = out == 1 || length_resized == 1.f ? 0.f : yf * static_cast<float>(in - 1) / (length_resized - 1.f);
      xd = out == 1 || length_resized == 1.f ? 0.0 : yd * static_cast<double>(in - 1) / (length_resized - 1.0);
    } else if (ctm == "asymmetric") {
      xf = yf / scale;
      xd = yd / scale;
    } else if (ctm == "tf_half_pixel_for_nn") {
      xf = (yf + 0.5f) / scale;
      xd = (yd + 0.5) / scale;
    } else {
      return false;
    }
    const int64_t a = std::min(std::max<int64_t>(RoundNearest(xf, mode, down), 0), in - 1);
    const int64_t b = std::min(std::max<int64_t>(RoundNearest(xd, mode, down), 0), in - 1);
    const float m = ((yf + 0.5f) * static_cast<float>(in) / static_cast<float>(out)) - 0.5f;
    const int64_t c = static_cast<int64_t>(std::roundf(m));
    if (c < 0 || c >= in || a != b || a != c) return false;
  }
  return true;
}

bool ResolveResize(const Graph& g, const Node& n, ResizeSpec* s, std::string* why) {
  if (!IsOnnx(n)) return Reject(why, "not an ONNX op");
  if (n.opset < 10) return Reject(why, "opset below 10");
  if (!SingleOutput(n)) return Reject(why, "expected one output");
  const int x = In(n, 0), y = Out(n, 0);
  if (!StaticF32(g, x) || !StaticF32(g, y)) return Reject(why, "input/output must be float32 with static shapes");
  const std::vector<int64_t>& xd = g.v(x).dims;
  const std::vector<int64_t>& yd = g.v(y).dims;
  if (xd.size() < 3 || xd.size() > 5 || yd.size() != xd.size()) return Reject(why, "spatial rank must be 1..3");
  if (yd[0] != xd[0] || yd[1] != xd[1]) return Reject(why, "batch/channel dims are resized");
  if (n.opset >= 18) {
    if (n.Int("antialias", 0) != 0) return Reject(why, "antialias");
    if (n.Has("axes")) return Reject(why, "axes");
    if (n.Str("keep_aspect_ratio_policy", "stretch") != "stretch") return Reject(why, "keep_aspect_ratio_policy");
  }
  const std::string mode = n.Str("mode", "nearest");
  const std::string ctm = n.opset >= 11 ? n.Str("coordinate_transformation_mode", "half_pixel") : "asymmetric";
  const std::string nmode = n.opset >= 11 ? n.Str("nearest_mode", "round_prefer_floor") : "simple";
  if (ctm == "tf_crop_and_resize") return Reject(why, "tf_crop_and_resize");
  if (mode != "nearest" && mode != "linear") return Reject(why, "mode '" + mode + "'");
  const int scales_v = n.opset == 10 ? In(n, 1) : In(n, 2);
  const int sizes_v = n.opset == 10 ? -1 : In(n, 3);
  const size_t rank = xd.size();
  std::vector<float> scale(rank, 1.f);
  bool have = false, from_sizes = false;
  if (sizes_v >= 0 && g.v(sizes_v).has_shape && g.v(sizes_v).numel() > 0) {
    std::vector<int64_t> sizes;
    if (!g.ConstInts(sizes_v, &sizes)) return Reject(why, "sizes are not constant");
    if (sizes != yd) return Reject(why, "sizes differ from the output shape");
    for (size_t i = 0; i < rank; ++i) scale[i] = static_cast<float>(yd[i]) / static_cast<float>(xd[i]);
    have = from_sizes = true;
  }
  if (!have && scales_v >= 0) {
    const float* sc = ConstF32(g, scales_v);
    if (sc == nullptr) return Reject(why, "scales are not a constant float32 tensor");
    if (g.v(scales_v).numel() != static_cast<int64_t>(rank)) return Reject(why, "scales has the wrong length");
    for (size_t i = 0; i < rank; ++i) {
      scale[i] = sc[i];
      if (!(scale[i] > 0.f) || !std::isfinite(scale[i])) return Reject(why, "scale is not positive");
      const double expect = std::floor(static_cast<double>(xd[i]) * scale[i]);
      if (std::fabs(expect - static_cast<double>(yd[i])) > 0.5) return Reject(why, "scales disagree with the output");
    }
    have = true;
  }
  if (!have) return Reject(why, "neither scales nor sizes given");
  if (scale[0] != 1.f || scale[1] != 1.f) return Reject(why, "batch/channel dims are resized");
  for (size_t i = 2; i < rank; ++i) {
    const int64_t in = xd[i], out = yd[i];
    if (in == out && scale[i] == 1.f) continue;  // every mode maps identically
    if (mode == "linear") {
      if (ctm != "half_pixel" && !(ctm == "pytorch_half_pixel" && out > 1))
        return Reject(why, "linear resize with coordinate_transformation_mode '" + ctm + "'");
      const double ratio = static_cast<double>(out) / static_cast<double>(in);
      if (std::fabs(ratio - scale[i]) > 1e-6 * ratio) return Reject(why, "scale differs from output/input");
    } else if (!NearestMatches(in, out, scale[i],
                               from_sizes ? static_cast<float>(out) : scale[i] * static_cast<float>(in), ctm, nmode)) {
      return Reject(why, "nearest resize with " + ctm + "/" + nmode + " differs from oneDNN's rounding");
    }
  }
  s->alg = mode == "linear" ? dnnl_resampling_linear : dnnl_resampling_nearest;
  s->src_dims = xd;
  s->dst_dims = yd;
  return true;
}

bool TryResamplePd(const ResizeSpec& s, const Md& src, const Md& dst) {
  try {
    dnnl::resampling_forward::desc d(dnnl::prop_kind::forward_inference, static_cast<dnnl::algorithm>(s.alg), src, dst);
    dnnl::resampling_forward::primitive_desc pd(d, ProbeEngine());
    return pd.src_desc() == src && pd.dst_desc() == dst;
  } catch (const dnnl::error&) {
    return false;
  }
}

// ---- batch normalization ---------------------------------------------------------------------------------------

bool ResolveBatchNorm(const Graph& g, const Node& n, std::string* why) {
  if (!IsOnnx(n)) return Reject(why, "not an ONNX op");
  if (n.opset < 7) return Reject(why, "opset below 7");
  if (!SingleOutput(n) || n.num_inputs() != 5) return Reject(why, "expected 5 inputs and only the Y output");
  if (n.Int("training_mode", 0) != 0) return Reject(why, "training_mode");
  if (n.Int("spatial", 1) != 1) return Reject(why, "spatial=0");
  const int x = In(n, 0), y = Out(n, 0);
  if (!StaticF32(g, x) || !StaticF32(g, y)) return Reject(why, "input/output must be float32 with static shapes");
  const std::vector<int64_t>& xd = g.v(x).dims;
  if (xd.size() < 2 || xd.size() > 5 || g.v(y).dims != xd) return Reject(why, "rank must be 2..5");
  for (size_t i = 1; i < 5; ++i) {
    const int v = In(n, i);
    if (!StaticF32(g, v) || g.v(v).dims != std::vector<int64_t>{xd[1]})
      return Reject(why, "parameters must be float32 [C]");
  }
  return true;
}

// With `relu`, oneDNN's fused ReLU after the normalization (a step's single post-op: eltwise relu, alpha 0).
dnnl::normalization_flags BnFlags(bool relu = false) {
  dnnl::normalization_flags f = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
                                dnnl::normalization_flags::use_shift;
  return relu ? f | dnnl::normalization_flags::fuse_norm_relu : f;
}

bool TryBnPd(const Md& data, float eps, bool relu = false) {
  try {
    dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, data, eps, BnFlags(relu));
    dnnl::batch_normalization_forward::primitive_desc pd(d, ProbeEngine());
    return pd.src_desc() == data && pd.dst_desc() == data;
  } catch (const dnnl::error&) {
    return false;
  }
}

// ---- gemm ------------------------------------------------------------------------------------------------------

struct GemmSpec {
  int64_t m = 0, k = 0, n = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1, beta = 1;
  int a = -1, b = -1, c = -1, y = -1;
  bool const_b = false, const_c = false;
  std::vector<int64_t> c_dims2;  // C as a 2-D broadcast shape ([1|M, 1|N]); empty without C
  bool c_per_n = false;          // C broadcasts along M (fits an inner-product bias)
};

bool ResolveGemm(const Graph& g, const Node& n, GemmSpec* s, std::string* why) {
  if (!IsOnnx(n)) return Reject(why, "not an ONNX op");
  if (!SingleOutput(n)) return Reject(why, "expected one output");
  s->a = In(n, 0);
  s->b = In(n, 1);
  s->c = In(n, 2);
  s->y = Out(n, 0);
  if (n.num_inputs() > 3) return Reject(why, "too many inputs");
  if (!StaticF32(g, s->a) || !StaticF32(g, s->b) || !StaticF32(g, s->y))
    return Reject(why, "A, B and Y must be float32 with static shapes");
  if (s->c >= 0 && !StaticF32(g, s->c)) return Reject(why, "C must be float32 with a static shape");
  const std::vector<int64_t>& ad = g.v(s->a).dims;
  const std::vector<int64_t>& bd = g.v(s->b).dims;
  if (ad.size() != 2 || bd.size() != 2) return Reject(why, "A and B must be 2-D");
  s->trans_a = n.Int("transA", 0) != 0;
  s->trans_b = n.Int("transB", 0) != 0;
  s->alpha = n.Float("alpha", 1.f);
  s->beta = n.Float("beta", 1.f);
  if (!std::isfinite(s->alpha) || !std::isfinite(s->beta)) return Reject(why, "alpha/beta not finite");
  s->m = s->trans_a ? ad[1] : ad[0];
  s->k = s->trans_a ? ad[0] : ad[1];
  s->n = s->trans_b ? bd[0] : bd[1];
  if ((s->trans_b ? bd[1] : bd[0]) != s->k) return Reject(why, "inner dimensions differ");
  if (g.v(s->y).dims != std::vector<int64_t>{s->m, s->n}) return Reject(why, "output shape is not [M,N]");
  s->const_b = ConstF32(g, s->b) != nullptr;
  if (s->c >= 0) {
    const std::vector<int64_t>& cd = g.v(s->c).dims;
    if (cd.size() > 2) return Reject(why, "C has rank > 2");
    std::vector<int64_t> c2(2 - cd.size(), 1);
    c2.insert(c2.end(), cd.begin(), cd.end());
    if ((c2[0] != 1 && c2[0] != s->m) || (c2[1] != 1 && c2[1] != s->n))
      return Reject(why, "C is not broadcastable to [M,N]");
    // Before opset 7 C broadcasts only with broadcast=1.
    if (n.opset < 7 && n.Int("broadcast", 0) == 0 && cd != std::vector<int64_t>{s->m, s->n})
      return Reject(why, "C is not [M,N] and broadcast is 0");
    s->c_dims2 = c2;
    s->c_per_n = c2[0] == 1;
    s->const_c = ConstF32(g, s->c) != nullptr;
    if (!s->const_c && s->beta != 1.f) return Reject(why, "beta != 1 with a non-constant C");
  }
  if (!s->const_b && s->alpha != 1.f && s->c >= 0 && !s->const_c)
    return Reject(why, "alpha != 1 with non-constant B and C");
  if (!s->const_b && s->alpha == 0.f) return Reject(why, "alpha == 0 with a non-constant B");
  return true;
}

bool UseInnerProduct(const GemmSpec& s) { return s.const_b && !s.trans_a && (s.c < 0 || (s.const_c && s.c_per_n)); }

}  // namespace

// =============================================================================================================
// Support and lowering
// =============================================================================================================

void DistrustContradictedShapes(Graph* g) {
  std::vector<bool> distrusted(g->values.size(), false);
  bool any = false;
  for (const Node& n : g->nodes) {
    bool taint = false;
    for (int v : n.inputs) taint = taint || (v >= 0 && distrusted[static_cast<size_t>(v)]);
    if (!taint && IsOnnx(n) && SingleOutput(n)) {
      std::string why;
      if (n.op == "Conv" || n.op == "ConvTranspose") {
        // Only the geometry matters here: weights and bias from Constant nodes (not folded yet) count as constant.
        std::vector<std::pair<int, const void*>> saved;
        for (size_t k = 1; k < n.inputs.size() && k < 3; ++k) {
          Value* v = n.inputs[k] >= 0 ? &g->v(n.inputs[k]) : nullptr;
          if (v && !v->is_const()) {
            saved.emplace_back(n.inputs[k], v->data);
            v->data = "";
          }
        }
        ConvSpec s;
        ResolveConv(*g, n, n.op == "ConvTranspose", &s, &why);
        for (const auto& [v, data] : saved) g->v(v).data = data;
      } else if (n.op == "MaxPool" || n.op == "AveragePool") {
        PoolSpec s;
        ResolvePool(*g, n, &s, &why);
      }
      taint = why.find(kSizeDiffers) != std::string::npos;
    }
    if (!taint) continue;
    any = true;
    for (int v : n.outputs)
      if (v >= 0) distrusted[static_cast<size_t>(v)] = true;
  }
  if (!any) return;
  for (size_t v = 0; v < g->values.size(); ++v)
    if (distrusted[v]) g->values[v].has_shape = false;
}

int SplitConvTransposeBias(Graph* g, std::vector<bool>* folded) {
  int count = 0;
  folded->resize(g->nodes.size(), false);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    if ((*folded)[i]) continue;
    {
      const Node& n = g->nodes[i];
      if (!IsOnnx(n) || n.op != "ConvTranspose" || !SingleOutput(n) || n.num_inputs() != 3) continue;
    }
    const int b = g->nodes[i].inputs[2], y = g->nodes[i].outputs[0];
    if (!ConstF32(*g, b) || !StaticF32(*g, y) || g->v(y).dims.size() < 3 || g->v(b).dims.size() != 1 ||
        g->v(b).dims[0] != g->v(y).dims[1])
      continue;
    const std::vector<int64_t> ydims = g->v(y).dims;
    auto add_value = [g](Value v) {
      while (g->by_name.count(v.name)) v.name += "'";
      const int index = static_cast<int>(g->values.size());
      g->by_name[v.name] = index;
      g->values.push_back(std::move(v));
      return index;
    };
    // The bias as [1, C, 1, ...]: the same bytes.
    Value bv = g->v(b);
    bv.name += ":per_channel";
    bv.dims.assign(ydims.size(), 1);
    bv.dims[1] = ydims[1];
    bv.producer = -1;
    bv.is_graph_input = bv.is_graph_output = false;
    bv.consumers = {static_cast<int>(i) + 1};
    const int bias4 = add_value(std::move(bv));
    Value tv;
    tv.name = g->v(y).name + ":without_bias";
    tv.dtype = kF32;
    tv.has_shape = true;
    tv.dims = ydims;
    tv.producer = static_cast<int>(i);
    tv.consumers = {static_cast<int>(i) + 1};
    const int t = add_value(std::move(tv));
    // Node indices after i move up by one.
    for (Value& v : g->values) {
      if (v.producer > static_cast<int>(i)) ++v.producer;
      for (int& c : v.consumers)
        if (c > static_cast<int>(i) && &v != &g->v(bias4) && &v != &g->v(t)) ++c;
    }
    std::vector<int>& bc = g->v(b).consumers;
    bc.erase(std::find(bc.begin(), bc.end(), static_cast<int>(i)));
    Node add;
    add.name = g->nodes[i].name + ":bias";
    add.op = "Add";
    add.opset = 14;
    add.inputs = {t, bias4};
    add.outputs = {y};
    g->v(y).producer = static_cast<int>(i) + 1;
    g->nodes[i].inputs.resize(2);
    g->nodes[i].outputs = {t};
    g->nodes.insert(g->nodes.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::move(add));
    folded->insert(folded->begin() + static_cast<std::ptrdiff_t>(i) + 1, false);
    ++count;
    ++i;  // past the new Add
  }
  return count;
}

int FoldAddIntoBatchNorm(Graph* g, std::vector<bool>* folded) {
  int count = 0;
  folded->resize(g->nodes.size(), false);
  for (size_t bi = 0; bi < g->nodes.size(); ++bi) {
    if ((*folded)[bi]) continue;
    const Node& bn = g->nodes[bi];
    std::string why;
    if (bn.op != "BatchNormalization" || !ResolveBatchNorm(*g, bn, &why)) continue;
    const int x = In(bn, 0), mean = In(bn, 3);
    const int a = g->v(x).producer;
    if (a < 0 || (*folded)[static_cast<size_t>(a)] || g->v(x).is_graph_output || g->v(x).consumers.size() != 1 ||
        !ConstF32(*g, mean))
      continue;
    const Node& add = g->nodes[static_cast<size_t>(a)];
    if (!IsOnnx(add) || add.op != "Add" || !SingleOutput(add) || add.num_inputs() != 2) continue;
    const int c = ConstF32(*g, add.inputs[1]) ? add.inputs[1] : add.inputs[0];
    const int u = c == add.inputs[1] ? add.inputs[0] : add.inputs[1];
    const std::vector<int64_t> xd = g->v(x).dims;
    if (u == c || g->v(u).is_const() || !StaticF32(*g, u) || g->v(u).dims != xd) continue;
    std::vector<double> scale, shift;  // x = u + c, c per channel: shift
    if (!ChannelAffine(*g, add, u, xd[1], &scale, &shift)) continue;
    // mean' = mean - c, a new constant owned by the graph.
    auto data = std::make_shared<std::string>(static_cast<size_t>(xd[1]) * sizeof(float), '\0');
    const float* m = ConstF32(*g, mean);
    bool finite = true;
    for (int64_t ch = 0; ch < xd[1]; ++ch) {
      const float v = static_cast<float>(static_cast<double>(m[ch]) - shift[static_cast<size_t>(ch)]);
      finite = finite && std::isfinite(v);
      std::memcpy(&(*data)[static_cast<size_t>(ch) * sizeof(float)], &v, sizeof(float));
    }
    if (!finite) continue;
    Value nv;
    nv.name = g->v(mean).name + ":minus:" + g->v(c).name;
    while (g->by_name.count(nv.name)) nv.name += "'";
    nv.dtype = kF32;
    nv.has_shape = true;
    nv.dims = {xd[1]};
    nv.folded = data;
    nv.data = data->data();
    nv.consumers = {static_cast<int>(bi)};
    const int nvi = static_cast<int>(g->values.size());
    g->by_name[nv.name] = nvi;
    g->values.push_back(std::move(nv));
    auto drop = [g](int value, int node) {
      std::vector<int>& cs = g->v(value).consumers;
      auto it = std::find(cs.begin(), cs.end(), node);
      if (it != cs.end()) cs.erase(it);
    };
    drop(mean, static_cast<int>(bi));
    drop(u, a);
    drop(c, a);
    g->v(x).consumers.clear();
    g->v(u).consumers.push_back(static_cast<int>(bi));
    Node& b = g->nodes[bi];
    b.inputs[0] = u;
    b.inputs[3] = nvi;
    b.name = g->nodes[static_cast<size_t>(a)].name + "+" + b.name;
    (*folded)[static_cast<size_t>(a)] = true;
    ++count;
  }
  return count;
}

bool SupportConv(const Graph& g, const Node& n, std::string* why) { return SupportConvLike(g, n, false, why); }
bool SupportConvTranspose(const Graph& g, const Node& n, std::string* why) { return SupportConvLike(g, n, true, why); }
CheckResult LowerConv(LowerContext& ctx, int node) { return LowerConvLike(ctx, node, false); }
CheckResult LowerConvTranspose(LowerContext& ctx, int node) { return LowerConvLike(ctx, node, true); }

bool SupportBatchNorm(const Graph& g, const Node& n, std::string* why) {
  if (!ResolveBatchNorm(g, n, why)) return false;
  if (!TryBnPd(PlainDesc(g.v(In(n, 0)).dims, kF32), n.Float("epsilon", 1e-5f)))
    return Reject(why, "oneDNN refuses this batch normalization");
  return true;
}

CheckResult LowerBatchNorm(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  std::string why;
  if (!ResolveBatchNorm(g, n, &why)) return ctx.Fail(node, why);
  const float eps = n.Float("epsilon", 1e-5f);
  const int x = In(n, 0);
  int y = Out(n, 0);
  // A Relu reading only the result runs inside the normalization (PP-OCRv4's upsampling path: a step less).
  const int relu = ctx.SoleConsumer(y);
  const bool fuse_relu = relu >= 0 && !ctx.IsAbsorbed(relu) && IsOnnx(ctx.node(relu)) && ctx.node(relu).op == "Relu" &&
                         SingleOutput(ctx.node(relu)) && StaticF32(g, Out(ctx.node(relu), 0)) &&
                         g.v(Out(ctx.node(relu), 0)).dims == g.v(y).dims;
  bool plain;
  Md src, dst;
  auto try_fn = [&](const Md& s, const Md& d) { return s == d && TryBnPd(s, eps, fuse_relu); };
  if (!ChooseSameLayout(ctx, x, g.v(x).dims, g.v(y).dims, try_fn, &plain, &src, &dst))
    return ctx.Fail(node, "oneDNN refuses this batch normalization");
  Step st;
  st.kind = StepKind::kBatchNorm;
  st.name = NodeName(ctx, node);
  st.ops.push_back(plain ? ctx.UsePlain(x) : ctx.Use(x));
  if (!(DescOfOperand(st.ops[0]) == src)) return ctx.Fail(node, "source operand layout mismatch");
  for (size_t i = 1; i < 5; ++i) st.ops.push_back(ctx.UsePlain(In(n, i)));
  if (fuse_relu) {
    st.name = JoinNames(ctx, node, {relu});
    st.post_ops.push_back(EltwisePostOp(dnnl_eltwise_relu, 0, 0));
    ctx.Absorb(relu);
    y = Out(ctx.node(relu), 0);
  }
  st.ops.push_back(ctx.Define(y, dst));
  st.floats.push_back(eps);
  ctx.Emit(std::move(st));
  return Ok();
}

bool SupportPool(const Graph& g, const Node& n, std::string* why) {
  PoolSpec spec;
  if (!ResolvePool(g, n, &spec, why)) return false;
  if (!TryPoolPd(spec, PlainDesc(spec.src_dims, kF32), PlainDesc(spec.dst_dims, kF32)))
    return Reject(why, "oneDNN refuses this pooling");
  return true;
}

CheckResult LowerPool(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  PoolSpec spec;
  std::string why;
  if (!ResolvePool(ctx.graph(), n, &spec, &why)) return ctx.Fail(node, why);
  const int x = In(n, 0), y = Out(n, 0);
  bool plain;
  Md src, dst;
  auto try_fn = [&](const Md& s, const Md& d) { return TryPoolPd(spec, s, d); };
  if (!ChooseSameLayout(ctx, x, spec.src_dims, spec.dst_dims, try_fn, &plain, &src, &dst))
    return ctx.Fail(node, "oneDNN refuses this pooling");
  // On a plain layout oneDNN 2.6 pools with its simple_nchw (or reference) kernel: 2.2 ms for a MaxPool that ONNX
  // Runtime runs in 0.17 ms (issue 24's performance tester, a pool of a plain graph input; also the TensorFlow face
  // detector's pools at AVX2). Then the source is reordered once into the first layout with a jit kernel
  // (channels-last, then channel blocks of 16 and 8), and the result keeps that layout.
  bool moved = false;
  if (plain && !ctx.options().portable_layouts) {
    auto impl_of = [&](const Md& s, const Md& d) -> std::string {
      try {
        dnnl::pooling_v2_forward::desc pdd(dnnl::prop_kind::forward_inference, static_cast<dnnl::algorithm>(spec.alg),
                                           s, d, spec.w.stride, spec.w.kernel, DnnlDilations(spec.w), spec.w.pad_begin,
                                           spec.w.pad_end_dnnl);
        dnnl::pooling_v2_forward::primitive_desc pd(pdd, ProbeEngine());
        if (pd.src_desc() == s && pd.dst_desc() == d) return pd.impl_info_str();
      } catch (const dnnl::error&) {
      }
      return std::string();
    };
    auto slow = [](const std::string& impl) { return impl.rfind("simple", 0) == 0 || impl.rfind("ref", 0) == 0; };
    if (slow(impl_of(src, dst))) {
      const size_t rank = spec.src_dims.size();
      for (uint32_t tag : {ChannelsLastTag(rank), ChannelBlockedTag(rank, 16), ChannelBlockedTag(rank, 8)}) {
        if (tag == 0) continue;
        const Md s2 = F32Desc(spec.src_dims, tag), d2 = F32Desc(spec.dst_dims, tag);
        const std::string impl = impl_of(s2, d2);
        if (impl.empty() || slow(impl)) continue;
        src = AsStored(s2);
        dst = AsStored(d2);
        plain = false;
        moved = true;
        break;
      }
    }
  }
  Step st;
  st.kind = StepKind::kPool;
  st.name = NodeName(ctx, node);
  st.ops.push_back(moved ? ctx.UseAs(x, src) : plain ? ctx.UsePlain(x) : ctx.Use(x));
  if (!(DescOfOperand(st.ops[0]) == src)) return ctx.Fail(node, "source operand layout mismatch");
  st.ops.push_back(ctx.Define(y, dst));
  st.ints.push_back(static_cast<int64_t>(spec.alg));
  st.ints.push_back(static_cast<int64_t>(spec.w.rank()));
  std::vector<int64_t> dil = DnnlDilations(spec.w);
  for (const std::vector<int64_t>* v : {&spec.w.kernel, &spec.w.stride, &spec.w.pad_begin, &spec.w.pad_end_dnnl, &dil})
    st.ints.insert(st.ints.end(), v->begin(), v->end());
  ctx.Emit(std::move(st));
  return Ok();
}

bool SupportResize(const Graph& g, const Node& n, std::string* why) {
  ResizeSpec spec;
  if (!ResolveResize(g, n, &spec, why)) return false;
  if (!TryResamplePd(spec, PlainDesc(spec.src_dims, kF32), PlainDesc(spec.dst_dims, kF32)))
    return Reject(why, "oneDNN refuses this resampling");
  return true;
}

CheckResult LowerResize(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  ResizeSpec spec;
  std::string why;
  if (!ResolveResize(ctx.graph(), n, &spec, &why)) return ctx.Fail(node, why);
  const int x = In(n, 0), y = Out(n, 0);
  bool plain;
  Md src, dst;
  auto try_fn = [&](const Md& s, const Md& d) { return TryResamplePd(spec, s, d); };
  if (!ChooseSameLayout(ctx, x, spec.src_dims, spec.dst_dims, try_fn, &plain, &src, &dst))
    return ctx.Fail(node, "oneDNN refuses this resampling");
  Step st;
  st.kind = StepKind::kResample;
  st.name = NodeName(ctx, node);
  st.ops.push_back(plain ? ctx.UsePlain(x) : ctx.Use(x));
  if (!(DescOfOperand(st.ops[0]) == src)) return ctx.Fail(node, "source operand layout mismatch");
  st.ops.push_back(ctx.Define(y, dst));
  st.ints.push_back(static_cast<int64_t>(spec.alg));
  ctx.Emit(std::move(st));
  return Ok();
}

bool SupportGemm(const Graph& g, const Node& n, std::string* why) {
  GemmSpec s;
  return ResolveGemm(g, n, &s, why);
}

CheckResult LowerGemm(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  GemmSpec s;
  std::string why;
  if (!ResolveGemm(g, n, &s, &why)) return ctx.Fail(node, why);
  const bool portable = ctx.options().portable_layouts;
  const size_t K = static_cast<size_t>(s.k), N = static_cast<size_t>(s.n);

  // Bias: beta * C, folded when constant (with 1/alpha when alpha becomes a post-op scale, see below).
  std::vector<float> cvals;
  if (s.c >= 0 && s.const_c) {
    const float* c = ConstF32(g, s.c);
    cvals.assign(c, c + g.v(s.c).numel());
  }
  std::vector<PostOp> first;  // the alpha post-op of the matmul form (below), as the chain must fit after it
  if (!s.const_b && s.alpha != 1.f) {
    first.emplace_back();
    first.back().alg = dnnl_eltwise_linear;
    first.back().alpha = s.alpha;
  }
  std::vector<FusedOp> chain = CollectPostOps(ctx, s.y, first);
  std::vector<Md> other_mds;
  OtherDescs(ctx, &chain, &other_mds);
  std::vector<int> absorbed;
  Step st;

  // Inner product when B is constant and C (if any) is a constant per-column bias: weights [N,K] = alpha * B',
  // bias [N] = beta * C. Otherwise (or when oneDNN refuses it) a matmul.
  std::vector<float> w, bias;
  const Md src_md = PlainDesc({s.m, s.k}, kF32);
  const Md dst_md = PlainDesc({s.m, s.n}, kF32);
  Md w_md, bias_md;
  size_t kept = 0;
  bool found = false;
  if (UseInnerProduct(s)) {
    const float* b = ConstF32(g, s.b);
    w.resize(N * K);
    for (size_t i = 0; i < N; ++i)
      for (size_t k = 0; k < K; ++k) w[i * K + k] = s.alpha * (s.trans_b ? b[i * K + k] : b[k * N + i]);
    if (s.c >= 0) {
      bias.resize(N);
      for (size_t i = 0; i < N; ++i) bias[i] = s.beta * cvals[s.c_dims2[1] == 1 ? 0 : i];
      bias_md = PlainDesc({s.n}, kF32);
    }
    const Md w_req = portable ? PlainDesc({s.n, s.k}, kF32) : F32Desc({s.n, s.k}, dnnl_format_tag_any);
    for (size_t k = chain.size() + 1; k-- > 0 && !found;) {
      try {
        dnnl::inner_product_forward::desc d =
            bias.empty()
                ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, src_md, w_req, dst_md)
                : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, src_md, w_req, bias_md, dst_md);
        const dnnl::primitive_attr attr = PostOpAttr(chain, k, other_mds);
        dnnl::inner_product_forward::primitive_desc pd(d, attr, ctx.engine());
        if (!(pd.src_desc() == src_md) || !(pd.dst_desc() == dst_md)) continue;
        // Only an inner product on a direct kernel at every thread count: a gemm-based one (oneDNN's choice for
        // one output column, openWakeWord's score) JITs the sgemm on the first run, 3 ms of hey_jarvis's first
        // run on AVX-512, where the matmul step runs brgemm (issue 14).
        bool direct = !portable;
        for (int t : ProbeThreadCounts()) {
          if (!direct) break;
          OmpThreadsScope scope(t);
          const dnnl::inner_product_forward::desc again =
              bias.empty() ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, src_md,
                                                               AsStored(pd.weights_desc()), dst_md)
                           : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, src_md,
                                                               AsStored(pd.weights_desc()), bias_md, dst_md);
          direct = ConvImplScore(dnnl::inner_product_forward::primitive_desc(again, attr, ctx.engine())
                                     .impl_info_str()) == 2;
        }
        if (!direct && !portable) continue;
        w_md = pd.weights_desc();
        kept = k;
        found = true;
      } catch (const dnnl::error&) {
      }
    }
  }

  if (found) {
    for (size_t i = 0; i < kept; ++i) absorbed.push_back(chain[i].node);
    st.kind = StepKind::kInnerProduct;
    st.ops.push_back(ctx.UsePlain(s.a));
    Operand wop, bop;
    CheckResult r =
        ctx.PackWeight(WeightName(ctx, node, s.b, "packed"), w.data(), PlainDesc({s.n, s.k}, kF32), w_md, &wop);
    if (!r.ok) return r;
    st.ops.push_back(wop);
    if (!bias.empty()) {
      r = ctx.AddWeight(WeightName(ctx, node, s.c, "bias"),
                        std::string(reinterpret_cast<const char*>(bias.data()), bias.size() * sizeof(float)), bias_md,
                        &bop);
      if (!r.ok) return r;
    }
    st.ops.push_back(bop);
    st.ops.push_back(Operand());
    r = AppendPostOps(ctx, node, chain, kept, other_mds, &st);
    if (!r.ok) return r;
    st.ops[3] = ctx.Define(kept == 0 ? s.y : chain[kept - 1].out, dst_md);
  } else {
    // kMatMul: src [M,K] (a strided view when transA), weights [K,N], bias broadcastable [1|M, 1|N], dst [M,N].
    // alpha: folded into constant B; else (non-constant B) a leading linear post-op, with a constant C pre-divided.
    const bool alpha_post = !s.const_b && s.alpha != 1.f;
    Operand a = ctx.UsePlain(s.a);
    if (s.trans_a) {
      a.dims = {s.m, s.k};
      a.tag = 0;
      a.strides = {1, s.m};
    }
    st.ops.push_back(a);
    if (s.const_b) {
      const float* b = ConstF32(g, s.b);
      std::vector<float> w(K * N);
      for (size_t k = 0; k < K; ++k)
        for (size_t i = 0; i < N; ++i) w[k * N + i] = s.alpha * (s.trans_b ? b[i * K + k] : b[k * N + i]);
      Operand wop;
      CheckResult r = ctx.AddWeight(WeightName(ctx, node, s.b, "kn"),
                                    std::string(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float)),
                                    PlainDesc({s.k, s.n}, kF32), &wop);
      if (!r.ok) return r;
      st.ops.push_back(wop);
    } else {
      Operand b = ctx.UsePlain(s.b);
      if (s.trans_b) {
        b.dims = {s.k, s.n};
        b.tag = 0;
        b.strides = {1, s.k};
      }
      st.ops.push_back(b);
    }
    Operand bop;
    if (s.c >= 0 && s.const_c) {
      const float f = alpha_post ? s.beta / s.alpha : s.beta;
      for (float& v : cvals) v *= f;
      CheckResult r =
          ctx.AddWeight(WeightName(ctx, node, s.c, "bias"),
                        std::string(reinterpret_cast<const char*>(cvals.data()), cvals.size() * sizeof(float)),
                        PlainDesc(s.c_dims2, kF32), &bop);
      if (!r.ok) return r;
    } else if (s.c >= 0) {
      bop = ctx.UsePlain(s.c);
      bop.dims = s.c_dims2;
      bop.tag = 0;
      bop.strides = {s.c_dims2[1], 1};
    }
    st.ops.push_back(bop);
    st.ops.push_back(Operand());
    st.kind = StepKind::kMatMul;
    if (alpha_post) {
      PostOp p;
      p.kind = PostOp::kEltwise;
      p.alg = dnnl_eltwise_linear;
      p.alpha = s.alpha;
      p.beta = 0;
      st.post_ops.push_back(p);
    }
    // Fused activations / Adds: oneDNN matmul takes the same post-ops as inner product.
    size_t kept = chain.size();
    CheckResult r = AppendPostOps(ctx, node, chain, kept, other_mds, &st);
    if (!r.ok) return r;
    for (size_t i = 0; i < kept; ++i) absorbed.push_back(chain[i].node);
    st.ops[3] = ctx.Define(kept == 0 ? s.y : chain[kept - 1].out, PlainDesc({s.m, s.n}, kF32));
  }
  st.name = JoinNames(ctx, node, absorbed);
  for (int a : absorbed) ctx.Absorb(a);
  ctx.Emit(std::move(st));
  return Ok();
}

// =============================================================================================================
// Step builders (hostile input: everything checked)
// =============================================================================================================

namespace {

std::string I2S(int64_t v) { return std::to_string(v); }

bool InRange(const std::vector<int64_t>& v, size_t at, size_t count, int64_t lo, int64_t hi) {
  for (size_t i = at; i < at + count; ++i)
    if (v[i] < lo || v[i] > hi) return false;
  return true;
}

memory::dims Slice(const std::vector<int64_t>& v, size_t at, size_t count) {
  return memory::dims(v.begin() + static_cast<std::ptrdiff_t>(at), v.begin() + static_cast<std::ptrdiff_t>(at + count));
}

// Binary post-op operands must come after the step's fixed operands, one per post-op.
CheckResult CheckPostOpOperands(BuildContext& bc, size_t fixed) {
  const Step& s = bc.step();
  size_t binaries = 0;
  for (const PostOp& p : s.post_ops) {
    if (p.kind == PostOp::kBinary) {
      ++binaries;
      if (p.operand < fixed || p.operand >= s.ops.size()) return bc.Fail("post-op operand index out of range");
    } else if (p.kind != PostOp::kEltwise) {
      return bc.Fail("unsupported post-op kind " + I2S(p.kind));
    }
  }
  if (s.ops.size() != fixed + binaries) return bc.Fail("operand count does not match the binary post-ops");
  return CheckResult::Ok();
}

CheckResult DescsOf(BuildContext& bc, size_t count, std::vector<Md>* mds) {
  mds->resize(count);
  for (size_t i = 0; i < count; ++i) {
    CheckResult r = bc.Desc(i, &(*mds)[i]);
    if (!r.ok) return r;
  }
  return CheckResult::Ok();
}

bool IsF32(const Md& d) { return d.data.data_type == dnnl_f32; }

CheckResult BuildConvLike(BuildContext& bc, std::unique_ptr<StepExec>* out, bool deconv) {
  const Step& s = bc.step();
  if (s.ints.size() < 2) return bc.Fail("expected groups and spatial rank in ints");
  const int64_t groups = s.ints[0], r64 = s.ints[1];
  if (r64 < 1 || r64 > 3) return bc.Fail("spatial rank " + I2S(r64) + " is outside 1..3");
  const size_t r = static_cast<size_t>(r64);
  CheckResult c = bc.ExpectCounts(4, true, 2 + 4 * r, 0);
  if (!c.ok) return c;
  if (groups < 1 || groups > kMaxWindow) return bc.Fail("groups " + I2S(groups) + " out of range");
  c = CheckPostOpOperands(bc, 4);
  if (!c.ok) return c;
  const memory::dims strides = Slice(s.ints, 2, r), dil = Slice(s.ints, 2 + r, r), pb = Slice(s.ints, 2 + 2 * r, r),
                     pe = Slice(s.ints, 2 + 3 * r, r);
  if (!InRange(s.ints, 2, r, 1, kMaxWindow)) return bc.Fail("stride out of range");
  if (!InRange(s.ints, 2 + r, r, 0, kMaxWindow)) return bc.Fail("dilation out of range");
  if (!InRange(s.ints, 2 + 2 * r, r, 0, kMaxWindow)) return bc.Fail("pads_begin out of range");
  for (size_t i = 0; i < r; ++i) {
    const int64_t lo = deconv ? -(std::max(strides[i], dil[i] + 1) - 1) : 0;
    if (pe[i] < lo || pe[i] > kMaxWindow) return bc.Fail("pads_end out of range");
  }
  std::vector<Md> md;
  c = DescsOf(bc, 4, &md);
  if (!c.ok) return c;
  const bool has_bias = s.ops[2].present();
  const int nd = static_cast<int>(r) + 2;
  if (md[0].data.ndims != nd || md[3].data.ndims != nd || md[1].data.ndims != nd + (groups > 1 ? 1 : 0))
    return bc.Fail("operand ranks do not match the spatial rank and groups");
  if (!IsF32(md[0]) || !IsF32(md[1]) || !IsF32(md[3]) || (has_bias && !IsF32(md[2])))
    return bc.Fail("operands must be f32");
  const memory::dims sd = md[0].dims(), wd = md[1].dims(), dd = md[3].dims();
  const size_t off = groups > 1 ? 1 : 0;
  if (groups > 1 && wd[0] != groups) return bc.Fail("weights group dim differs from groups");
  const int64_t oc = wd[off] * groups, ic = wd[off + 1] * groups;
  if (sd[1] != ic || dd[1] != oc || sd[0] != dd[0]) return bc.Fail("channel/batch dims inconsistent");
  if (has_bias && (md[2].data.ndims != 1 || md[2].dims()[0] != oc)) return bc.Fail("bias is not [OC]");
  // Residual operands have dst's dims (the compiler fuses equal-shaped Adds only). oneDNN 2.6 takes a binary
  // post-op operand of lower rank than dst without complaint (a lifted step's 3-D residual against its 4-D dst).
  for (const PostOp& p : s.post_ops) {
    if (p.kind != PostOp::kBinary) continue;
    const Operand& o = s.ops[p.operand];
    if (o.dims.size() != dd.size() || !std::equal(o.dims.begin(), o.dims.end(), dd.begin()))
      return bc.Fail("binary post-op operand " + I2S(p.operand) + " does not have the destination's dims");
  }
  dnnl::primitive_attr attr;
  std::vector<std::pair<int, int>> args;
  c = bc.PostOps(&attr, &args);
  if (!c.ok) return c;
  ConvSpec spec;
  spec.deconv = deconv;
  spec.w.stride = strides;
  spec.w.pad_begin = pb;
  spec.w.pad_end_dnnl = pe;
  spec.w.dilation.clear();
  for (int64_t d : dil) spec.w.dilation.push_back(d + 1);
  const Md bias_md = has_bias ? md[2] : Md();
  dnnl::primitive prim;
  try {
    if (deconv) {
      auto pd = MakeConvPd<dnnl::deconvolution_forward>(spec, md[0], md[1], bias_md, md[3], attr, bc.engine());
      if (!(pd.src_desc() == md[0]) || !(pd.weights_desc() == md[1]) || !(pd.dst_desc() == md[3]) ||
          (has_bias && !(pd.bias_desc() == md[2])))
        return bc.Fail("the deconvolution chose other layouts than the step's operands");
      prim = dnnl::deconvolution_forward(pd);
    } else {
      auto pd = MakeConvPd<dnnl::convolution_forward>(spec, md[0], md[1], bias_md, md[3], attr, bc.engine());
      if (!(pd.src_desc() == md[0]) || !(pd.weights_desc() == md[1]) || !(pd.dst_desc() == md[3]) ||
          (has_bias && !(pd.bias_desc() == md[2])))
        return bc.Fail("the convolution chose other layouts than the step's operands");
      prim = dnnl::convolution_forward(pd);
    }
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("oneDNN refused the step: ") + e.what());
  }
  args.push_back({DNNL_ARG_SRC, bc.Slot(0, md[0])});
  args.push_back({DNNL_ARG_WEIGHTS, bc.Slot(1, md[1])});
  if (has_bias) args.push_back({DNNL_ARG_BIAS, bc.Slot(2, md[2])});
  args.push_back({DNNL_ARG_DST, bc.Slot(3, md[3])});
  *out = std::make_unique<PrimitiveExec>(std::move(prim), std::move(args));
  return CheckResult::Ok();
}

// src and dst: f32, rank 3..5, same batch and channels.
CheckResult CheckSpatialPair(BuildContext& bc, const Md& src, const Md& dst, size_t* r) {
  const int nd = src.data.ndims;
  if (nd < 3 || nd > 5 || dst.data.ndims != nd) return bc.Fail("src/dst must have the same rank in 3..5");
  if (!IsF32(src) || !IsF32(dst)) return bc.Fail("operands must be f32");
  const memory::dims sd = src.dims(), dd = dst.dims();
  if (sd[0] != dd[0] || sd[1] != dd[1]) return bc.Fail("src/dst batch or channels differ");
  *r = static_cast<size_t>(nd - 2);
  return CheckResult::Ok();
}

}  // namespace

CheckResult BuildConv(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  try {
    return BuildConvLike(bc, out, false);
  } catch (const std::exception& e) {
    return bc.Fail(e.what());
  }
}

CheckResult BuildDeconv(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  try {
    return BuildConvLike(bc, out, true);
  } catch (const std::exception& e) {
    return bc.Fail(e.what());
  }
}

CheckResult BuildPool(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  try {
    const Step& s = bc.step();
    if (s.ints.size() < 2) return bc.Fail("expected alg and spatial rank in ints");
    const int64_t alg = s.ints[0], r64 = s.ints[1];
    if (r64 < 1 || r64 > 3) return bc.Fail("spatial rank " + I2S(r64) + " is outside 1..3");
    const size_t r = static_cast<size_t>(r64);
    CheckResult c = bc.ExpectCounts(2, false, 2 + 5 * r, 0);
    if (!c.ok) return c;
    if (!s.post_ops.empty()) return bc.Fail("pooling takes no post-ops");
    if (alg != dnnl_pooling_max && alg != dnnl_pooling_avg_include_padding && alg != dnnl_pooling_avg_exclude_padding)
      return bc.Fail("unknown pooling algorithm " + I2S(alg));
    if (!InRange(s.ints, 2, 2 * r, 1, kMaxWindow)) return bc.Fail("kernel or stride out of range");
    if (!InRange(s.ints, 2 + 2 * r, 3 * r, 0, kMaxWindow)) return bc.Fail("pads or dilation out of range");
    std::vector<Md> md;
    c = DescsOf(bc, 2, &md);
    if (!c.ok) return c;
    size_t nr = 0;
    c = CheckSpatialPair(bc, md[0], md[1], &nr);
    if (!c.ok) return c;
    if (nr != r) return bc.Fail("operand rank does not match the spatial rank");
    dnnl::primitive prim;
    try {
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, static_cast<dnnl::algorithm>(alg), md[0],
                                       md[1], Slice(s.ints, 2 + r, r), Slice(s.ints, 2, r), Slice(s.ints, 2 + 4 * r, r),
                                       Slice(s.ints, 2 + 2 * r, r), Slice(s.ints, 2 + 3 * r, r));
      dnnl::pooling_v2_forward::primitive_desc pd(d, UserScratchpad(), bc.engine());
      if (!(pd.src_desc() == md[0]) || !(pd.dst_desc() == md[1]))
        return bc.Fail("the pooling chose other layouts than the step's operands");
      prim = dnnl::pooling_v2_forward(pd);
    } catch (const dnnl::error& e) {
      return bc.Fail(std::string("oneDNN refused the step: ") + e.what());
    }
    std::vector<std::pair<int, int>> args{{DNNL_ARG_SRC, bc.Slot(0, md[0])}, {DNNL_ARG_DST, bc.Slot(1, md[1])}};
    *out = std::make_unique<PrimitiveExec>(std::move(prim), std::move(args));
    return CheckResult::Ok();
  } catch (const std::exception& e) {
    return bc.Fail(e.what());
  }
}

CheckResult BuildResample(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  try {
    const Step& s = bc.step();
    CheckResult c = bc.ExpectCounts(2, false, 1, 0);
    if (!c.ok) return c;
    if (!s.post_ops.empty()) return bc.Fail("resampling takes no post-ops");
    const int64_t alg = s.ints[0];
    if (alg != dnnl_resampling_nearest && alg != dnnl_resampling_linear)
      return bc.Fail("unknown resampling algorithm " + I2S(alg));
    std::vector<Md> md;
    c = DescsOf(bc, 2, &md);
    if (!c.ok) return c;
    size_t r = 0;
    c = CheckSpatialPair(bc, md[0], md[1], &r);
    if (!c.ok) return c;
    dnnl::primitive prim;
    try {
      dnnl::resampling_forward::desc d(dnnl::prop_kind::forward_inference, static_cast<dnnl::algorithm>(alg), md[0],
                                       md[1]);
      dnnl::resampling_forward::primitive_desc pd(d, UserScratchpad(), bc.engine());
      if (!(pd.src_desc() == md[0]) || !(pd.dst_desc() == md[1]))
        return bc.Fail("the resampling chose other layouts than the step's operands");
      prim = dnnl::resampling_forward(pd);
    } catch (const dnnl::error& e) {
      return bc.Fail(std::string("oneDNN refused the step: ") + e.what());
    }
    std::vector<std::pair<int, int>> args{{DNNL_ARG_SRC, bc.Slot(0, md[0])}, {DNNL_ARG_DST, bc.Slot(1, md[1])}};
    *out = std::make_unique<PrimitiveExec>(std::move(prim), std::move(args));
    return CheckResult::Ok();
  } catch (const std::exception& e) {
    return bc.Fail(e.what());
  }
}

CheckResult BuildInnerProduct(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  try {
    const Step& s = bc.step();
    CheckResult c = bc.ExpectCounts(4, true, 0, 0);
    if (!c.ok) return c;
    c = CheckPostOpOperands(bc, 4);
    if (!c.ok) return c;
    std::vector<Md> md;
    c = DescsOf(bc, 4, &md);
    if (!c.ok) return c;
    const bool has_bias = s.ops[2].present();
    if (md[0].data.ndims != 2 || md[1].data.ndims != 2 || md[3].data.ndims != 2)
      return bc.Fail("src, weights and dst must be 2-D");
    if (!IsF32(md[0]) || !IsF32(md[1]) || !IsF32(md[3]) || (has_bias && !IsF32(md[2])))
      return bc.Fail("operands must be f32");
    const memory::dims sd = md[0].dims(), wd = md[1].dims(), dd = md[3].dims();
    if (sd[1] != wd[1] || dd[0] != sd[0] || dd[1] != wd[0]) return bc.Fail("src [M,K], weights [N,K], dst [M,N]");
    if (has_bias && (md[2].data.ndims != 1 || md[2].dims()[0] != wd[0])) return bc.Fail("bias is not [N]");
    dnnl::primitive_attr attr;
    std::vector<std::pair<int, int>> args;
    c = bc.PostOps(&attr, &args);
    if (!c.ok) return c;
    dnnl::primitive prim;
    try {
      dnnl::inner_product_forward::desc d =
          has_bias ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, md[0], md[1], md[2], md[3])
                   : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, md[0], md[1], md[3]);
      dnnl::inner_product_forward::primitive_desc pd(d, attr, bc.engine());
      if (!(pd.src_desc() == md[0]) || !(pd.weights_desc() == md[1]) || !(pd.dst_desc() == md[3]) ||
          (has_bias && !(pd.bias_desc() == md[2])))
        return bc.Fail("the inner product chose other layouts than the step's operands");
      prim = dnnl::inner_product_forward(pd);
    } catch (const dnnl::error& e) {
      return bc.Fail(std::string("oneDNN refused the step: ") + e.what());
    }
    args.push_back({DNNL_ARG_SRC, bc.Slot(0, md[0])});
    args.push_back({DNNL_ARG_WEIGHTS, bc.Slot(1, md[1])});
    if (has_bias) args.push_back({DNNL_ARG_BIAS, bc.Slot(2, md[2])});
    args.push_back({DNNL_ARG_DST, bc.Slot(3, md[3])});
    *out = std::make_unique<PrimitiveExec>(std::move(prim), std::move(args));
    return CheckResult::Ok();
  } catch (const std::exception& e) {
    return bc.Fail(e.what());
  }
}

CheckResult BuildBatchNorm(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  try {
    const Step& s = bc.step();
    CheckResult c = bc.ExpectCounts(6, false, 0, 1);
    if (!c.ok) return c;
    // One post-op at most: a ReLU (alpha 0), run by oneDNN's fused ReLU.
    const bool relu = s.post_ops.size() == 1;
    if (s.post_ops.size() > 1 || (relu && (s.post_ops[0].kind != PostOp::kEltwise ||
                                          s.post_ops[0].alg != dnnl_eltwise_relu || s.post_ops[0].alpha != 0 ||
                                          s.post_ops[0].beta != 0 || s.post_ops[0].scale != 1)))
      return bc.Fail("batch normalization takes no post-op but a ReLU");
    const float eps = s.floats[0];
    if (!std::isfinite(eps) || eps < 0) return bc.Fail("epsilon must be finite and >= 0");
    std::vector<Md> md;
    c = DescsOf(bc, 6, &md);
    if (!c.ok) return c;
    const int nd = md[0].data.ndims;
    if (nd < 2 || nd > 5 || !IsF32(md[0])) return bc.Fail("src must be f32 of rank 2..5");
    if (!(md[5] == md[0])) return bc.Fail("dst layout differs from src");
    const int64_t ch = md[0].dims()[1];
    const Md param = PlainDesc({ch}, kF32);
    for (size_t i = 1; i < 5; ++i)
      if (!(md[i] == param)) return bc.Fail("scale/shift/mean/variance must be plain f32 [C]");
    dnnl::primitive prim;
    try {
      dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, md[0], eps, BnFlags(relu));
      dnnl::batch_normalization_forward::primitive_desc pd(d, UserScratchpad(), bc.engine());
      if (!(pd.src_desc() == md[0]) || !(pd.dst_desc() == md[5]) || !(pd.mean_desc() == md[3]) ||
          !(pd.variance_desc() == md[4]))
        return bc.Fail("the batch normalization chose other layouts than the step's operands");
      prim = dnnl::batch_normalization_forward(pd);
    } catch (const dnnl::error& e) {
      return bc.Fail(std::string("oneDNN refused the step: ") + e.what());
    }
    std::vector<std::pair<int, int>> args{{DNNL_ARG_SRC, bc.Slot(0, md[0])},      {DNNL_ARG_SCALE, bc.Slot(1, md[1])},
                                          {DNNL_ARG_SHIFT, bc.Slot(2, md[2])},    {DNNL_ARG_MEAN, bc.Slot(3, md[3])},
                                          {DNNL_ARG_VARIANCE, bc.Slot(4, md[4])}, {DNNL_ARG_DST, bc.Slot(5, md[5])}};
    *out = std::make_unique<PrimitiveExec>(std::move(prim), std::move(args));
    return CheckResult::Ok();
  } catch (const std::exception& e) {
    return bc.Fail(e.what());
  }
}

// ---- LSTM ------------------------------------------------------------------------------------------------------

namespace {
// ONNX gate order is i, o, f, c; oneDNN's is i, f, c~, o: oneDNN gate g reads ONNX gate kOnnxGate[g].
constexpr int64_t kOnnxGate[4] = {0, 2, 3, 1};

struct LstmSpec {
  int64_t t = 0, n = 0, i = 0, h = 0;
  int64_t direction = 0;  // 0 forward (left to right), 1 reverse
  int x = -1, w = -1, r = -1, b = -1, h0 = -1, c0 = -1, y = -1, yh = -1, yc = -1;
};

// An LSTM oneDNN's vanilla LSTM computes exactly as ONNX defines it: one direction, default activations
// (Sigmoid, Tanh, Tanh), no clip, no input_forget coupling, no peepholes, layout 0, every sequence full length;
// constant W, R, B.
bool ResolveLstm(const Graph& g, const Node& n, LstmSpec* s, std::string* why) {
  if (!IsOnnx(n)) return Reject(why, "not an ONNX op");
  if (n.opset < 7) return Reject(why, "LSTM-1 is not supported");
  s->x = In(n, 0);
  s->w = In(n, 1);
  s->r = In(n, 2);
  s->b = In(n, 3);
  const int seq = In(n, 4);
  s->h0 = In(n, 5);
  s->c0 = In(n, 6);
  if (In(n, 7) >= 0) return Reject(why, "peephole weights (P) are not supported");
  s->y = Out(n, 0);
  s->yh = Out(n, 1);
  s->yc = Out(n, 2);
  if (n.outputs.size() > 3) return Reject(why, "too many outputs");
  if (s->y < 0) return Reject(why, "the Y output is absent");
  const std::string dir = n.Str("direction", "forward");
  if (dir == "forward") {
    s->direction = 0;
  } else if (dir == "reverse") {
    s->direction = 1;
  } else {
    return Reject(why, "direction '" + dir + "' is not supported");
  }
  if (n.Has("clip")) return Reject(why, "clip is not supported");
  if (n.Int("input_forget", 0) != 0) return Reject(why, "input_forget is not supported");
  if (n.Int("layout", 0) != 0) return Reject(why, "layout 1 is not supported");
  if (n.Has("activation_alpha") || n.Has("activation_beta")) return Reject(why, "activation parameters");
  if (n.Has("activations")) return Reject(why, "explicit activations are not supported");
  if (!StaticF32(g, s->x) || !StaticF32(g, s->y)) return Reject(why, "X and Y must be float32 with static shapes");
  const std::vector<int64_t>& xd = g.v(s->x).dims;
  if (xd.size() != 3) return Reject(why, "X must be [seq, batch, input]");
  s->t = xd[0];
  s->n = xd[1];
  s->i = xd[2];
  s->h = n.Int("hidden_size", 0);
  const float* w = ConstF32(g, s->w);
  const float* r = ConstF32(g, s->r);
  if (!w || !r) return Reject(why, "W and R must be constant float32 tensors");
  if (g.v(s->w).dims != std::vector<int64_t>{1, 4 * s->h, s->i}) return Reject(why, "W is not [1, 4*hidden, input]");
  if (g.v(s->r).dims != std::vector<int64_t>{1, 4 * s->h, s->h}) return Reject(why, "R is not [1, 4*hidden, hidden]");
  if (s->h <= 0 || s->h > (int64_t{1} << 20)) return Reject(why, "hidden_size must be given and positive");
  if (s->b >= 0 && (!ConstF32(g, s->b) || g.v(s->b).dims != std::vector<int64_t>{1, 8 * s->h}))
    return Reject(why, "B must be a constant float32 [1, 8*hidden]");
  if (seq >= 0) {
    std::vector<int64_t> lens;
    if (!g.ConstInts(seq, &lens) || static_cast<int64_t>(lens.size()) != s->n) return Reject(why, "sequence_lens");
    for (int64_t l : lens)
      if (l != s->t) return Reject(why, "sequence_lens shorter than the sequence are not supported");
  }
  const std::vector<int64_t> state = {1, s->n, s->h};
  for (int v : {s->h0, s->c0})
    if (v >= 0 && (!StaticF32(g, v) || g.v(v).dims != state)) return Reject(why, "initial_h/c must be [1, batch, hidden]");
  if (g.v(s->y).dims != std::vector<int64_t>{s->t, 1, s->n, s->h}) return Reject(why, "Y is not [seq, 1, batch, hidden]");
  for (int v : {s->yh, s->yc})
    if (v >= 0 && (!StaticF32(g, v) || g.v(v).dims != state)) return Reject(why, "Y_h/Y_c must be [1, batch, hidden]");
  return true;
}

Md LstmMd(const std::vector<int64_t>& dims, memory::format_tag tag) { return Md(dims, memory::data_type::f32, tag); }

struct LstmMds {
  Md src_layer, src_iter, src_iter_c, weights_layer, weights_iter, bias, dst_layer, dst_iter, dst_iter_c;
};

LstmMds LstmDescs(int64_t t, int64_t n, int64_t i, int64_t h, bool h0, bool c0, bool yh, bool yc) {
  using tag = memory::format_tag;
  LstmMds m;
  m.src_layer = LstmMd({t, n, i}, tag::tnc);
  if (h0) m.src_iter = LstmMd({1, 1, n, h}, tag::ldnc);
  if (c0) m.src_iter_c = LstmMd({1, 1, n, h}, tag::ldnc);
  m.weights_layer = LstmMd({1, 1, i, 4, h}, tag::ldigo);
  m.weights_iter = LstmMd({1, 1, h, 4, h}, tag::ldigo);
  m.bias = LstmMd({1, 1, 4, h}, tag::ldgo);
  m.dst_layer = LstmMd({t, n, h}, tag::tnc);
  if (yh) m.dst_iter = LstmMd({1, 1, n, h}, tag::ldnc);
  if (yc) m.dst_iter_c = LstmMd({1, 1, n, h}, tag::ldnc);
  return m;
}

dnnl::lstm_forward::primitive_desc LstmPd(const LstmMds& m, int64_t direction, dnnl::engine& engine) {
  dnnl::lstm_forward::desc d(dnnl::prop_kind::forward_inference,
                             direction ? dnnl::rnn_direction::unidirectional_right2left
                                       : dnnl::rnn_direction::unidirectional_left2right,
                             m.src_layer, m.src_iter, m.src_iter_c, m.weights_layer, m.weights_iter, m.bias,
                             m.dst_layer, m.dst_iter, m.dst_iter_c);
  return dnnl::lstm_forward::primitive_desc(d, UserScratchpad(), engine);
}
}  // namespace

bool SupportLstm(const Graph& g, const Node& n, std::string* why) {
  LstmSpec s;
  if (!ResolveLstm(g, n, &s, why)) return false;
  try {
    // One initial state without the other gets zeros for the other (oneDNN takes both or neither).
    const bool iter = s.h0 >= 0 || s.c0 >= 0;
    LstmPd(LstmDescs(s.t, s.n, s.i, s.h, iter, iter, s.yh >= 0, s.yc >= 0), s.direction, ProbeEngine());
  } catch (const dnnl::error&) {
    return Reject(why, "oneDNN refuses this LSTM");
  }
  return true;
}

CheckResult LowerLstm(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  LstmSpec s;
  std::string why;
  if (!ResolveLstm(g, ctx.node(node), &s, &why)) return ctx.Fail(node, why);
  const int64_t h = s.h, in = s.i;
  // Weights into oneDNN's plain ldigo: wl[k][gate][j] = W[0][onnx_gate * H + j][k] (k over the input or hidden
  // features), gates reordered; the bias is Wb + Rb per gate.
  const float* w = ConstF32(g, s.w);
  const float* r = ConstF32(g, s.r);
  const float* b = s.b >= 0 ? ConstF32(g, s.b) : nullptr;
  auto pack = [&](const float* src, int64_t k_dim) {
    std::vector<float> out(static_cast<size_t>(k_dim * 4 * h));
    for (int64_t k = 0; k < k_dim; ++k)
      for (int64_t gate = 0; gate < 4; ++gate)
        for (int64_t j = 0; j < h; ++j)
          out[static_cast<size_t>((k * 4 + gate) * h + j)] = src[(kOnnxGate[gate] * h + j) * k_dim + k];
    return std::string(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(float));
  };
  std::vector<float> bias(static_cast<size_t>(4 * h), 0.f);
  if (b)
    for (int64_t gate = 0; gate < 4; ++gate)
      for (int64_t j = 0; j < h; ++j)
        bias[static_cast<size_t>(gate * h + j)] = b[kOnnxGate[gate] * h + j] + b[4 * h + kOnnxGate[gate] * h + j];
  const bool iter = s.h0 >= 0 || s.c0 >= 0;
  const LstmMds m = LstmDescs(s.t, s.n, in, h, iter, iter, s.yh >= 0, s.yc >= 0);
  Step st;
  st.kind = StepKind::kLstm;
  st.name = NodeName(ctx, node);
  Operand x = ctx.UsePlain(s.x);
  st.ops.push_back(x);
  for (int v : {s.h0, s.c0}) {
    Operand o;
    if (v >= 0) {
      o = ctx.UsePlain(v);
      o.dims = {1, 1, s.n, h};
      o.strides = {s.n * h, s.n * h, h, 1};
    } else if (iter) {  // the other initial state is given: this one is zeros (ONNX's default)
      CheckResult rc = ctx.AddWeight(NodeName(ctx, node) + (st.ops.size() == 1 ? "/initial_h" : "/initial_c") + ":zeros",
                                     std::string(static_cast<size_t>(s.n * h) * sizeof(float), '\0'), m.src_iter, &o);
      if (!rc.ok) return rc;
    }
    st.ops.push_back(o);
  }
  Operand wl, wi, bo;
  CheckResult rc = ctx.AddWeight(WeightName(ctx, node, s.w, "ldigo"), pack(w, in), m.weights_layer, &wl);
  if (!rc.ok) return rc;
  if (!(rc = ctx.AddWeight(WeightName(ctx, node, s.r, "ldigo"), pack(r, h), m.weights_iter, &wi)).ok) return rc;
  if (!(rc = ctx.AddWeight(WeightName(ctx, node, s.b, "ldgo"),
                           std::string(reinterpret_cast<const char*>(bias.data()), bias.size() * sizeof(float)),
                           m.bias, &bo)).ok)
    return rc;
  st.ops.push_back(wl);
  st.ops.push_back(wi);
  st.ops.push_back(bo);
  Operand y = ctx.DefinePlain(s.y);  // [T,1,N,H] is [T,N,H]
  y.dims = {s.t, s.n, h};
  y.strides = {s.n * h, h, 1};
  st.ops.push_back(y);
  for (int v : {s.yh, s.yc}) {
    Operand o;
    if (v >= 0) {
      o = ctx.DefinePlain(v);
      o.dims = {1, 1, s.n, h};
      o.strides = {s.n * h, s.n * h, h, 1};
    }
    st.ops.push_back(o);
  }
  st.ints = {s.direction};
  ctx.Emit(std::move(st));
  return Ok();
}

// An LSTM step on two oneDNN matmuls and a gate loop. oneDNN 2.6's f32 LSTM is its reference RNN on the jit
// sgemm, whose kernels are generated on the first call: 20-25 ms of the Silero models' first run on an AVX-512
// machine, against 0.1 ms to create a brgemm matmul (issue 14). X * W for every time step is one matmul into the
// gates buffer (bias added there); each time step adds H(t-1) * R into its rows (a sum post-op) and applies the
// gates in order i, f, c~, o (the step's ldigo layout): c = f*c + i*tanh(c~), h = o*tanh(c). The weights are
// packed once, at build, into the layouts the matmuls prefer (an owned copy: W and R of one layer).
class LstmExec : public StepExec {
 public:
  // slots: src_layer, src_iter, src_iter_c, weights_layer, weights_iter, bias, dst_layer, dst_iter, dst_iter_c
  // (-1 when absent).
  LstmExec(int64_t t, int64_t n, int64_t i, int64_t h, bool reverse, std::vector<int> slots)
      : t_(t), n_(n), i_(i), h_(h), reverse_(reverse), slots_(std::move(slots)) {}

  CheckResult Build(BuildContext& bc) {
    using tag = memory::format_tag;
    const dnnl::engine& eng = bc.engine();
    const int64_t g4 = 4 * h_;
    const Md x_md({t_ * n_, i_}, memory::data_type::f32, tag::ab), gx_md({t_ * n_, g4}, memory::data_type::f32, tag::ab);
    const Md h_md({n_, h_}, memory::data_type::f32, tag::ab), gh_md({n_, g4}, memory::data_type::f32, tag::ab);
    const Md bias_md({1, g4}, memory::data_type::f32, tag::ab);
    const Md wl_plain({i_, g4}, memory::data_type::f32, tag::ab), wi_plain({h_, g4}, memory::data_type::f32, tag::ab);
    try {
      dnnl::matmul::primitive_desc px(
          dnnl::matmul::desc(x_md, Md({i_, g4}, memory::data_type::f32, tag::any), bias_md, gx_md), UserScratchpad(),
          eng);
      dnnl::post_ops sum;
      sum.append_sum(1.f);
      dnnl::primitive_attr attr;
      attr.set_post_ops(sum);
      dnnl::matmul::primitive_desc ph(
          dnnl::matmul::desc(h_md, Md({h_, g4}, memory::data_type::f32, tag::any), gh_md), UserScratchpad(attr), eng);
      impl_ = std::string("lstm:") + px.impl_info_str();
      // The step's weights are checked to fit their buffers (BuildContext::Desc); packed here from the mapped
      // bytes. Weight slots point at fixed bytes, known at build.
      wl_ = Pack(bc, 3, wl_plain, px.weights_desc());
      wi_ = Pack(bc, 4, wi_plain, ph.weights_desc());
      if (!wl_ || !wi_) return bc.Fail("weights_layer and weights_iter (operands 3, 4) must be weights of the binary");
      mm_x_ = dnnl::matmul(px);
      mm_h_ = dnnl::matmul(ph);
      x_md_ = x_md;
      gx_md_ = gx_md;
      h_md_ = h_md;
      gh_md_ = gh_md;
      bias_md_ = bias_md;
      scratch_x_ = px.scratchpad_desc();
      scratch_h_ = ph.scratchpad_desc();
    } catch (const dnnl::error& e) {
      return bc.Fail(std::string("oneDNN refused the LSTM's matmuls: ") + e.what());
    }
    gates_bytes_ = Round64(static_cast<size_t>(t_ * n_ * g4) * sizeof(float));
    c_bytes_ = Round64(static_cast<size_t>(n_ * h_) * sizeof(float));
    return CheckResult::Ok();
  }

  size_t ScratchpadBytes() const override {
    return gates_bytes_ + c_bytes_ + std::max(scratch_x_.get_size(), scratch_h_.get_size());
  }
  std::string Impl() const override { return impl_; }

  void Run(RunContext& rc) override {
    unsigned char* scratch = static_cast<unsigned char*>(rc.scratchpad());
    float* gates = reinterpret_cast<float*>(scratch);
    float* c = reinterpret_cast<float*>(scratch + gates_bytes_);
    void* mm_scratch = scratch + gates_bytes_ + c_bytes_;
    const dnnl::engine eng = rc.stream().get_engine();
    std::unordered_map<int, dnnl::memory>& args = rc.step_args();
    if (args.empty()) {  // this context's memory objects, kept; their data handles are set below
      args[kX] = dnnl::memory(x_md_, eng, rc.ptr(slots_[0]));
      args[kWl] = wl_;
      args[kBias] = dnnl::memory(bias_md_, eng, rc.ptr(slots_[5]));
      args[kGx] = dnnl::memory(gx_md_, eng, gates);
      args[kH] = dnnl::memory(h_md_, eng, gates);
      args[kWi] = wi_;
      args[kGh] = dnnl::memory(gh_md_, eng, gates);
      args[kScratchX] = dnnl::memory(scratch_x_, eng, mm_scratch);
      args[kScratchH] = dnnl::memory(scratch_h_, eng, mm_scratch);
    }
    args[kX].set_data_handle(rc.ptr(slots_[0]));
    args[kBias].set_data_handle(rc.ptr(slots_[5]));
    mm_x_.execute(rc.stream(), {{DNNL_ARG_SRC, args[kX]}, {DNNL_ARG_WEIGHTS, args[kWl]}, {DNNL_ARG_BIAS, args[kBias]},
                                {DNNL_ARG_DST, args[kGx]}, {DNNL_ARG_SCRATCHPAD, args[kScratchX]}});
    const int64_t g4 = 4 * h_, nh = n_ * h_;
    float* y = static_cast<float*>(rc.ptr(slots_[6]));
    const float* h_prev = slots_[1] >= 0 ? static_cast<const float*>(rc.ptr(slots_[1])) : nullptr;
    const float* c_prev = slots_[2] >= 0 ? static_cast<const float*>(rc.ptr(slots_[2])) : nullptr;
    for (int64_t step = 0; step < t_; ++step) {
      const int64_t tt = reverse_ ? t_ - 1 - step : step;
      float* g = gates + tt * n_ * g4;
      if (h_prev != nullptr) {  // a zero state adds nothing
        args[kH].set_data_handle(const_cast<float*>(h_prev));
        args[kGh].set_data_handle(g);
        mm_h_.execute(rc.stream(), {{DNNL_ARG_SRC, args[kH]}, {DNNL_ARG_WEIGHTS, args[kWi]},
                                    {DNNL_ARG_DST, args[kGh]}, {DNNL_ARG_SCRATCHPAD, args[kScratchH]}});
      }
      float* yt = y + tt * nh;
      for (int64_t b = 0; b < n_; ++b) {
        const float* gb = g + b * g4;
        const float* cp = c_prev ? c_prev + b * h_ : nullptr;
        float* cb = c + b * h_;
        float* hb = yt + b * h_;
        for (int64_t j = 0; j < h_; ++j) {
          const float ig = Sigmoid(gb[j]), fg = Sigmoid(gb[h_ + j]), cg = std::tanh(gb[2 * h_ + j]),
                      og = Sigmoid(gb[3 * h_ + j]);
          const float cn = (cp ? fg * cp[j] : 0.f) + ig * cg;
          cb[j] = cn;
          hb[j] = og * std::tanh(cn);
        }
      }
      h_prev = yt;
      c_prev = c;
    }
    if (slots_[7] >= 0) std::memcpy(rc.ptr(slots_[7]), h_prev, static_cast<size_t>(nh) * sizeof(float));
    if (slots_[8] >= 0) std::memcpy(rc.ptr(slots_[8]), c_prev, static_cast<size_t>(nh) * sizeof(float));
  }

 private:
  enum : int { kX = 1, kWl, kBias, kGx, kH, kWi, kGh, kScratchX, kScratchH };
  static size_t Round64(size_t b) { return (b + 63) / 64 * 64; }
  static float Sigmoid(float v) { return 1.f / (1.f + std::exp(-v)); }

  // The weight operand `k` reordered into `want`, owned by this step.
  dnnl::memory Pack(BuildContext& bc, size_t k, const Md& plain, const Md& want) {
    const WeightRef w = bc.WeightBytes(k);
    if (w.data == nullptr || plain.get_size() > w.length) return dnnl::memory();
    owned_.emplace_back(want.get_size() / sizeof(float) + 16);
    float* dst = owned_.back().data();
    dnnl::memory from(plain, bc.engine(), const_cast<void*>(w.data)), to(want, bc.engine(), dst);
    dnnl::stream st(bc.engine());
    dnnl::reorder(from, to).execute(st, from, to);
    st.wait();
    return to;
  }

  int64_t t_, n_, i_, h_;
  bool reverse_;
  std::vector<int> slots_;
  std::deque<std::vector<float>> owned_;
  dnnl::memory wl_, wi_;
  dnnl::matmul mm_x_, mm_h_;
  Md x_md_, gx_md_, h_md_, gh_md_, bias_md_, scratch_x_, scratch_h_;
  size_t gates_bytes_ = 0, c_bytes_ = 0;
  std::string impl_;
};

CheckResult BuildLstm(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  try {
    const Step& s = bc.step();
    CheckResult c = bc.ExpectCounts(9, false, 1, 0);
    if (!c.ok) return c;
    if (!s.post_ops.empty()) return bc.Fail("LSTM takes no post-ops");
    const int64_t direction = s.ints[0];
    if (direction != 0 && direction != 1) return bc.Fail("direction must be 0 or 1");
    for (size_t k : {0u, 3u, 4u, 5u, 6u})
      if (!s.ops[k].present()) return bc.Fail("operand " + std::to_string(k) + " is required");
    for (size_t k : {7u, 8u})
      if (s.ops[k].present() && s.ops[k].buf != Buf::kArena && s.ops[k].buf != Buf::kOutput)
        return bc.Fail("its destination (operand " + std::to_string(k) + ") is not the arena or an output");
    for (const Operand& o : s.ops)
      if (o.present() && o.dtype != kF32) return bc.Fail("operands must be f32");
    const std::vector<int64_t>& sl = s.ops[0].dims;
    if (sl.size() != 3 || s.ops[4].dims.size() != 5) return bc.Fail("src_layer [T,N,I] and weights_iter [1,1,H,4,H]");
    const int64_t t = sl[0], n = sl[1], i = sl[2], h = s.ops[4].dims[4];
    for (int64_t d : {t, n, i, h})
      if (d <= 0 || d > (int64_t{1} << 24)) return bc.Fail("dims out of range");
    const LstmMds m = LstmDescs(t, n, i, h, s.ops[1].present(), s.ops[2].present(), s.ops[7].present(),
                                s.ops[8].present());
    const Md* want[9] = {&m.src_layer,    &m.src_iter, &m.src_iter_c, &m.weights_layer, &m.weights_iter,
                         &m.bias,         &m.dst_layer, &m.dst_iter,  &m.dst_iter_c};
    std::vector<Md> md;
    if (!(c = DescsOf(bc, 9, &md)).ok) return c;  // each present operand fits its buffer
    for (size_t k = 0; k < 9; ++k)
      if (s.ops[k].present() && !(md[k] == *want[k]))
        return bc.Fail("operand " + std::to_string(k) + " is not the LSTM's plain layout for its dims");
    std::vector<int> slots(9, -1);
    for (size_t k = 0; k < 9; ++k)
      if (s.ops[k].present()) slots[k] = bc.Slot(k, md[k]);
    std::unique_ptr<LstmExec> e(new LstmExec(t, n, i, h, direction != 0, slots));
    if (!(c = e->Build(bc)).ok) return c;
    *out = std::move(e);
    return CheckResult::Ok();
  } catch (const std::exception& e) {
    return bc.Fail(e.what());
  }
}

}  // namespace aotcpu
}  // namespace epctx
