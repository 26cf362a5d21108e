#include "providers/aotcpu/lower/nn_common.h"

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


namespace epctx {
namespace aotcpu {

dnnl::engine& ProbeEngine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

bool Reject(std::string* why, std::string msg) {
  if (why) *why = std::move(msg);
  return false;
}

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

std::string NodeName(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  if (!n.name.empty() || Out(n, 0) < 0) return n.name;
  return ctx.graph().v(Out(n, 0)).name;
}

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

std::string WeightName(LowerContext& ctx, int node, int source, const char* how) {
  const Graph& g = ctx.graph();
  const int out = Out(ctx.node(node), 0);
  return (out >= 0 ? g.v(out).name : NodeName(ctx, node)) + "/" + (source >= 0 ? g.v(source).name : "") + ":" + how;
}

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
  return ResolveConvGeometry(g, n, deconv, b, s, why);
}

bool ResolveConvGeometry(const Graph& g, const Node& n, bool deconv, int b, ConvSpec* s, std::string* why) {
  s->deconv = deconv;
  const int x = In(n, 0), wv = In(n, 1), y = Out(n, 0);
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

std::vector<FusedOp> CollectPostOps(LowerContext& ctx, int value, std::vector<PostOp> first) {
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
    } else if (In(cn, 0) == value && !(cn.op == "Tanh" && OwnTanh(ctx.options())) &&
               EltwiseFor(g, cn, &alg, &alpha, &beta)) {
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

std::vector<PostOp> ChainPostOps(const std::vector<FusedOp>& chain, size_t k) {
  std::vector<PostOp> out;
  for (size_t i = 0; i < k; ++i)
    for (PostOp p : chain[i].pos) {
      if (p.kind == PostOp::kBinary) p.operand = static_cast<uint32_t>(i);
      AppendPostOp(&out, p, true);  // CollectPostOps checked that the chain fits
    }
  return out;
}

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

const std::vector<int>& ProbeThreadCounts() {
  static const std::vector<int> counts = [] {
    std::vector<int> v{std::max(1, omp_get_num_procs())};
    if (v[0] != 1) v.push_back(1);
    return v;
  }();
  return counts;
}

Md AsStored(const Md& d) {
  Operand op;
  if (!LayoutFromDesc(d, &op)) return Md();
  op.buf = Buf::kArena;
  op.dtype = kF32;
  Md out;
  if (!OperandDesc(op, &out).ok) return Md();
  return out;
}

int ConvImplScore(const std::string& impl) {
  if (IsRefImpl(impl)) return 0;
  // "x64:gemm:jit", "gemm:jit" (im2col + sgemm); brgemm ("brgemm:avx512_core", "brgconv") is direct.
  if (impl.find("gemm:jit") != std::string::npos || impl.compare(0, 4, "gemm") == 0) return 1;
  return 2;
}

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

bool InRange(const std::vector<int64_t>& v, size_t at, size_t count, int64_t lo, int64_t hi) {
  for (size_t i = at; i < at + count; ++i)
    if (v[i] < lo || v[i] > hi) return false;
  return true;
}

memory::dims Slice(const std::vector<int64_t>& v, size_t at, size_t count) {
  return memory::dims(v.begin() + static_cast<std::ptrdiff_t>(at), v.begin() + static_cast<std::ptrdiff_t>(at + count));
}

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

CheckResult CheckSpatialPair(BuildContext& bc, const Md& src, const Md& dst, size_t* r) {
  const int nd = src.data.ndims;
  if (nd < 3 || nd > 5 || dst.data.ndims != nd) return bc.Fail("src/dst must have the same rank in 3..5");
  if (!IsF32(src) || !IsF32(dst)) return bc.Fail("operands must be f32");
  const memory::dims sd = src.dims(), dd = dst.dims();
  if (sd[0] != dd[0] || sd[1] != dd[1]) return bc.Fail("src/dst batch or channels differ");
  *r = static_cast<size_t>(nd - 2);
  return CheckResult::Ok();
}

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

}  // namespace aotcpu
}  // namespace epctx
