// ConvInteger -> Cast(float) -> Mul(scale) [-> Add(per-channel bias)] [-> activations, residual Adds] as one oneDNN
// int8 convolution (kConvInt8): u8 source in channels-last layout with its zero point read at run time (oneDNN pads
// with it, so a padded tap adds (xz - xz) * w = 0, as ONNX), s8 weights packed at compile time, f32 dst; the scale and
// the bias are binary post-ops ([1, 1, 1, 1] and [1, OC, 1, 1]: oneDNN 2.6's int8 convolution refuses a runtime output
// scale, the binary post-ops keep its jit kernels), then what a float Conv's result absorbs.
//
// oneDNN has no weight zero point, and uint8 weights minus theirs do not always fit int8 (ONNX Runtime's dynamic
// quantizer: 114 of isnet_quint8's 119 convolutions). A correction (wz' - wz) * sum over the window of (x - xz) as a
// [N, 1, OH, OW] binary post-op runs oneDNN's reference kernel (measured), and its float add would round twice. So:
// - where the target's int8 products are exact (VNNI), the weights are stored once, shifted into int8 (s = w - shift),
//   oneDNN sums (x - xz) * s into int32 in the destination's bytes, and our loops (nn_quant_window.h) add
//   (shift - wz) * the window sums in int32 and run the float epilogue (the step's post-ops) in place: the binary
//   holds each weight once, the result is bit for bit the exact one (the trailing ints entry d = shift - wz marks it);
// - without VNNI (the kernels add pairs of products in int16 and saturate) each weight v = w - wz is split into P
//   parts that each fit the kernels' range (quant_common.h: Int8PartRange) and the parts are stacked along the
//   input channels over a source copied P times side by side: one convolution of P * C input channels sums exactly
//   sum (x - xz) * v in int32. P is 1 when the weights fit (signed, or a zero point in their middle), and up to 4
//   without VNNI (parts in [-64, 64] keep oneDNN's int16 pair sums from saturating).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "providers/aotcpu/lower/nn_common.h"
#include "providers/aotcpu/lower/nn_quant_conv_avx2.h"
#include "providers/aotcpu/lower/nn_quant_window.h"
#include "providers/aotcpu/lower/quant_common.h"

namespace epctx {
namespace aotcpu {
namespace {

constexpr int64_t kMaxParts = 4;

// `v` as a per-channel bias of `oc` channels on axis 1 of a rank-`rank` value: a float constant (or a Reshape of one,
// as ONNX Runtime's quantizer writes it) of oc values whose dims, right-aligned, are 1 except on axis 1.
const float* ChannelBias(const Graph& g, int v, int64_t oc, size_t rank) {
  const Value& b = g.v(v);
  if (!b.has_shape || b.numel() != oc || b.dims.size() > rank) return nullptr;
  const size_t lead = rank - b.dims.size();
  for (size_t i = 0; i < b.dims.size(); ++i)
    if (b.dims[i] != (i + lead == 1 ? oc : 1)) return nullptr;
  if (const float* d = ConstF32(g, v)) return d;
  const int p = b.producer;
  if (p < 0) return nullptr;
  const Node& r = g.nodes[static_cast<size_t>(p)];
  if (!IsOnnx(r) || r.op != "Reshape" || In(r, 0) < 0 || g.v(In(r, 0)).numel() != oc) return nullptr;
  return ConstF32(g, In(r, 0));
}

// The number of parts the weights v = w - wz need so that each part lies in [lo, hi].
int64_t PartsFor(int32_t vmin, int32_t vmax, int32_t lo, int32_t hi) {
  int64_t p = 1;
  if (vmax > hi) p = std::max<int64_t>(p, (vmax + hi - 1) / hi);
  if (vmin < lo) p = std::max<int64_t>(p, (-vmin + -lo - 1) / -lo);
  return p;
}

// An operand over `base` (plain channels-last storage [N, H.., P * C]) viewing the channels [c0, c0 + c) as an
// [N, c, H..] value.
Operand ChannelsLastView(const Operand& base, const std::vector<int64_t>& nchw, int64_t total_c, int64_t c0) {
  Operand o = base;
  o.tag = 0;
  o.dims = nchw;
  o.strides.assign(nchw.size(), 0);
  int64_t stride = total_c;
  for (size_t i = nchw.size(); i-- > 2;) {
    o.strides[i] = stride;
    stride *= nchw[i];
  }
  o.strides[1] = 1;
  o.strides[0] = stride;
  o.offset += static_cast<uint64_t>(c0);  // 1-byte elements
  return o;
}

}  // namespace

bool SupportConvInteger(const Graph& g, const Node& n, std::string* why) {
  if (!IsOnnx(n) || !SingleOutput(n) || n.num_inputs() < 2 || n.num_inputs() > 4)
    return Reject(why, "ConvInteger needs 2 to 4 inputs and one output");
  const int x = In(n, 0), w = In(n, 1), y = Out(n, 0);
  if (x < 0 || w < 0 || y < 0) return Reject(why, "an input or the output is absent");
  const Value &xv = g.v(x), &wv = g.v(w), &yv = g.v(y);
  if (xv.dtype != kU8 || !xv.has_shape || xv.numel() <= 0) return Reject(why, "input must be uint8 with a static shape");
  if ((wv.dtype != kU8 && wv.dtype != kI8) || !wv.is_const() || !wv.has_shape)
    return Reject(why, "weights must be a constant 8-bit tensor");
  if (yv.dtype != kI32 || !yv.has_shape || yv.numel() <= 0) return Reject(why, "output must be int32, static");
  if (xv.dims.size() < 3 || xv.dims.size() > 5) return Reject(why, "spatial rank must be 1..3");
  if (n.Int("group", 1) != 1) return Reject(why, "only group 1 is compiled");
  ConvSpec spec;
  if (!ResolveConvGeometry(g, n, false, -1, &spec, why)) return false;
  if (spec.dst_dims != yv.dims) return Reject(why, "output shape does not match the convolution");
  const int xz = In(n, 2);
  if (xz >= 0 && (!g.v(xz).has_shape || g.v(xz).numel() != 1 || g.v(xz).dtype != kU8))
    return Reject(why, "only a per-tensor uint8 input zero point is compiled");
  int32_t wz = 0;
  if (!ConstZeroPoint(g, n, 3, &wz)) return Reject(why, "only a constant per-tensor weight zero point is compiled");
  if (In(n, 3) >= 0 && g.v(In(n, 3)).dtype != wv.dtype) return Reject(why, "weight zero point type differs");
  Int8Tail t;
  return MatchInt8Tail(g, y, &t, why);
}

namespace {

// The per-channel bias Add reading the scaled value `cur` alone: its node (and *bias its oc values), or -1.
int BiasAdd(LowerContext& ctx, int cur, const ConvSpec& spec, const float** bias) {
  const Graph& g = ctx.graph();
  *bias = nullptr;
  const int a = ctx.SoleConsumer(cur);
  if (a < 0 || ctx.IsAbsorbed(a)) return -1;
  const Node& an = ctx.node(a);
  const int other = an.num_inputs() == 2 ? (In(an, 0) == cur ? In(an, 1) : In(an, 0)) : -1;
  if (!IsOnnx(an) || an.op != "Add" || other < 0 || other == cur || !StaticF32(g, Out(an, 0)) ||
      g.v(Out(an, 0)).dims != spec.dst_dims)
    return -1;
  *bias = ChannelBias(g, other, spec.oc, spec.dst_dims.size());
  return *bias ? a : -1;
}

// What the two forms of the step share once the source, weights, post-ops and layouts are chosen.
struct ConvInt8Parts {
  Operand src, zp;
  std::string wbytes;          // plain [OC, C', k...] int8
  memory::dims wdims;
  Md packed_w, dst;            // the layouts the primitive chose
  std::vector<PostOp> first;   // the scale (and the bias)
  int bias_node = -1;
  const float* bias = nullptr;
  std::vector<FusedOp> chain;
  std::vector<Md> other_mds;
  size_t k = 0;                // chain entries taken
  int cur = -1;                // the value after the scale and bias
  int64_t correction = 0;      // d = shift - wz for stored-shifted weights, else 0 (no trailing int)
};

CheckResult EmitConvInt8(LowerContext& ctx, int node, const ConvSpec& spec, const Int8Tail& tail, ConvInt8Parts& p) {
  const Node& n = ctx.node(node);
  const size_t rank = spec.dst_dims.size();
  std::vector<int64_t> ones(rank, 1), per_channel(rank, 1);
  per_channel[1] = spec.oc;
  Step st;
  st.kind = StepKind::kConvInt8;
  std::vector<int> absorbed = {tail.cast, tail.mul};
  if (p.bias_node >= 0) absorbed.push_back(p.bias_node);
  for (size_t i = 0; i < p.k; ++i) absorbed.push_back(p.chain[i].node);
  st.name = JoinNames(ctx, node, absorbed);
  Operand w_op;
  CheckResult r = ctx.PackWeight(WeightName(ctx, node, In(n, 1), "int8"), p.wbytes.data(), PlainDesc(p.wdims, kI8),
                                 p.packed_w, &w_op);
  if (!r.ok) return r;
  Operand scale_op = ctx.UsePlain(tail.scale);
  scale_op.dims = ones;
  scale_op.strides = ones;
  st.ops = {p.src, w_op, Operand(), Operand(), p.zp, scale_op};
  st.post_ops = {p.first[0]};
  if (p.bias) {
    std::string bytes(reinterpret_cast<const char*>(p.bias), static_cast<size_t>(spec.oc) * sizeof(float));
    Operand bop;
    r = ctx.AddWeight(WeightName(ctx, node, In(n, 1), "bias"), std::move(bytes), PlainDesc(per_channel, kF32), &bop);
    if (!r.ok) return r;
    st.ops.push_back(bop);
    st.post_ops.push_back(p.first[1]);
  }
  r = AppendPostOps(ctx, node, p.chain, p.k, p.other_mds, &st);
  if (!r.ok) return r;
  const int final_value = p.k == 0 ? p.cur : p.chain[p.k - 1].out;
  st.ops[3] = ctx.Define(final_value, p.dst);
  st.ints = {1, static_cast<int64_t>(spec.w.rank())};
  const std::vector<int64_t> dil = DnnlDilations(spec.w);
  for (const std::vector<int64_t>* v : {&spec.w.stride, &dil, &spec.w.pad_begin, &spec.w.pad_end_dnnl})
    st.ints.insert(st.ints.end(), v->begin(), v->end());
  if (p.correction != 0) st.ints.push_back(p.correction);
  for (int a : absorbed) ctx.Absorb(a);
  ctx.Emit(std::move(st));
  return CheckResult::Ok();
}

// The post-op the shifted form's epilogue runs (nn_quant_window.h), as the step carries it.
bool EpilogueRuns(const PostOp& p) {
  if (p.kind == PostOp::kBinary) return p.alg == dnnl_binary_add || p.alg == dnnl_binary_mul;
  return p.kind == PostOp::kEltwise && p.scale == 1.f &&
         (p.alg == dnnl_eltwise_relu || p.alg == dnnl_eltwise_clip_v2 || p.alg == dnnl_eltwise_linear);
}

// The shifted form: weights stored once as s = w - shift in int8, the int32 rest added by the window-sum epilogue.
// False (nothing emitted) when oneDNN has no direct int8 kernel for it here: the caller splits the weights instead.
bool ShiftedConvInt8(const ConvSpec& spec, const Value& wv, int32_t wz, ConvInt8Parts* p) {
  const int32_t shift = WeightShift(wv, wz);
  if (shift == wz) return false;  // w - wz fits int8 already: the plain form
  p->wbytes.assign(static_cast<size_t>(wv.numel()), '\0');
  ShiftWeights(wv, shift, reinterpret_cast<int8_t*>(p->wbytes.data()));
  p->wdims = spec.wdims;

  // The epilogue's post-ops: the chain up to the first one it does not run, or whose operand is not in the
  // destination's layout (it reads residuals at the destination's positions).
  const uint32_t cl = ChannelsLastTag(spec.dst_dims.size());
  p->dst = F32Desc(spec.dst_dims, cl);
  for (p->k = 0; p->k < p->chain.size(); ++p->k) {
    const FusedOp& f = p->chain[p->k];
    bool runs = f.other < 0 || SameLayout(p->other_mds[p->k], p->dst);
    for (const PostOp& q : f.pos) runs = runs && EpilogueRuns(q);
    if (!runs) break;
  }
  // oneDNN's convolution into int32 in the destination's layout, with no post-ops.
  Md acc = p->dst;
  acc.data.data_type = dnnl_s32;
  const Md src_md = DescOfOperand(p->src);
  const Md w_any(p->wdims, memory::data_type::s8, memory::format_tag::any);
  dnnl::primitive_attr attr;
  if (p->zp.present()) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  Md chosen;
  for (int t : ProbeThreadCounts()) {
    OmpThreadsScope scope(t);
    try {
      const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                              src_md, chosen.data.ndims == 0 ? w_any : chosen, acc, spec.w.stride,
                                              DnnlDilations(spec.w), spec.w.pad_begin, spec.w.pad_end_dnnl);
      dnnl::convolution_forward::primitive_desc pd(d, attr, ProbeEngine());
      if (IsRefImpl(pd.impl_info_str())) return false;
      if (chosen.data.ndims == 0) chosen = pd.weights_desc();
    } catch (const dnnl::error&) {
      return false;
    }
  }
  p->packed_w = chosen;
  p->correction = shift - wz;
  return true;
}

}  // namespace

CheckResult LowerConvInteger(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  ConvSpec spec;
  std::string why;
  if (!ResolveConvGeometry(g, n, false, -1, &spec, &why)) return ctx.Fail(node, why);
  Int8Tail tail;
  if (!MatchInt8Tail(g, Out(n, 0), &tail, &why)) return ctx.Fail(node, why);
  if (ctx.IsAbsorbed(tail.cast) || ctx.IsAbsorbed(tail.mul)) return ctx.Fail(node, "its Cast or Mul was fused elsewhere");
  if (CheckResult rs = LowerScaleEarly(ctx, node, tail); !rs.ok) return rs;

  const Value& wv = g.v(In(n, 1));
  int32_t wz = 0;
  ConstZeroPoint(g, n, 3, &wz);
  const int64_t oc = spec.oc, c = spec.ic, ksize = wv.numel() / (oc * c);
  std::vector<int32_t> v(static_cast<size_t>(wv.numel()));
  int32_t vmin = 0, vmax = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = (wv.dtype == kU8 ? static_cast<const uint8_t*>(wv.data)[i] : static_cast<const int8_t*>(wv.data)[i]) - wz;
    vmin = std::min(vmin, v[i]);
    vmax = std::max(vmax, v[i]);
  }
  int32_t lo, hi;
  Int8PartRange(ctx.options(), &lo, &hi);
  int64_t parts = PartsFor(vmin, vmax, lo, hi);

  // The source, channels-last u8 (oneDNN's int8 kernels' layout), and its zero point.
  const int x = In(n, 0);
  const uint32_t cl = ChannelsLastTag(spec.src_dims.size());
  memory::desc cl_src(memory::dims(spec.src_dims.begin(), spec.src_dims.end()), memory::data_type::u8,
                      static_cast<memory::format_tag>(cl));
  ConvInt8Parts p;
  p.src = ctx.UseAs(x, cl_src);
  if (!p.src.present()) return ctx.Fail(node, "its source has no channels-last form");
  if (CheckResult rz = SourceZeroPoint32(ctx, n, 2, &p.zp); !rz.ok) return rz;

  // Post-ops: the scale, the per-channel bias, then what a float Conv absorbs.
  const size_t rank = spec.dst_dims.size();
  PostOp mul;
  mul.kind = PostOp::kBinary;
  mul.alg = dnnl_binary_mul;
  mul.operand = 5;
  p.first.push_back(mul);
  p.cur = Out(ctx.node(tail.mul), 0);
  p.bias_node = BiasAdd(ctx, p.cur, spec, &p.bias);
  if (p.bias_node >= 0) {
    PostOp add;
    add.kind = PostOp::kBinary;
    add.alg = dnnl_binary_add;
    add.operand = 6;
    p.first.push_back(add);
    p.cur = Out(ctx.node(p.bias_node), 0);
  }
  p.chain = CollectPostOps(ctx, p.cur, p.first);
  OtherDescs(ctx, &p.chain, &p.other_mds);

  // Without VNNI, weights that need parts run whole on our own kernel (nn_quant_conv_avx2.h); one part stays on oneDNN.
  if (parts > 1 && OwnInt8Conv(ctx.options()))
    return LowerConvInt8Avx2(ctx, node, spec, tail, wv, wz,
                             {p.src, p.zp, p.first, p.bias_node, p.bias, p.chain, p.other_mds, p.cur});
  if (parts > 1 && Int8ProductsExact(ctx.options()) && ShiftedConvInt8(spec, wv, wz, &p))
    return EmitConvInt8(ctx, node, spec, tail, p);

  // Weights v = w - wz in P parts along the input channels: [OC, P * C, k...].
  if (parts > kMaxParts) return ctx.Fail(node, "weights minus their zero point need more than 4 int8 parts");
  const int64_t pc = parts * c;
  p.wbytes.assign(static_cast<size_t>(oc * pc * ksize), '\0');
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t k = 0; k < ksize; ++k) {
        int32_t rest = v[static_cast<size_t>((o * c + ci) * ksize + k)];
        for (int64_t q = 0; q < parts; ++q) {  // greedy: every part but the last at a bound; PartsFor left room
          const int32_t part = q + 1 == parts ? rest : std::min(hi, std::max(lo, rest));
          rest -= part;
          p.wbytes[static_cast<size_t>((o * pc + q * c + ci) * ksize + k)] = static_cast<char>(static_cast<int8_t>(part));
        }
      }
  p.wdims = spec.wdims;
  p.wdims[1] = pc;

  // The source copied `parts` times side by side.
  std::vector<int64_t> src_dims = spec.src_dims;
  src_dims[1] = pc;
  if (parts > 1) {
    const std::string key = "parts" + std::to_string(parts) + ":" + g.v(x).name;
    if (const Operand* d = ctx.FindDerived(key)) {
      p.src = *d;
    } else {
      std::vector<int64_t> storage = {spec.src_dims[0]};
      storage.insert(storage.end(), spec.src_dims.begin() + 2, spec.src_dims.end());
      storage.push_back(pc);
      const Operand base = ctx.NewPlain(kU8, storage);
      for (int64_t q = 0; q < parts; ++q) {
        Step s;
        s.kind = StepKind::kReorder;
        s.name = g.v(x).name + ":part" + std::to_string(q);
        s.ops = {p.src, ChannelsLastView(base, spec.src_dims, pc, q * c)};
        ctx.Emit(std::move(s));
      }
      p.src = ChannelsLastView(base, src_dims, pc, 0);
      ctx.SetDerived(key, p.src);
    }
  }

  std::vector<int64_t> ones(rank, 1), per_channel(rank, 1);
  per_channel[1] = oc;
  const Md scale_md = PlainDesc(ones, kF32), bias_md = PlainDesc(per_channel, kF32);
  const Md src_md = DescOfOperand(p.src);
  const Md w_any(p.wdims, memory::data_type::s8, memory::format_tag::any);
  auto attr_for = [&](size_t k) {
    dnnl::post_ops po;
    po.append_binary(dnnl::algorithm::binary_mul, scale_md);
    if (p.bias) po.append_binary(dnnl::algorithm::binary_add, bias_md);
    for (const PostOp& q : ChainPostOps(p.chain, k)) {
      if (q.kind == PostOp::kEltwise)
        po.append_eltwise(q.scale, static_cast<dnnl::algorithm>(q.alg), q.alpha, q.beta);
      else
        po.append_binary(static_cast<dnnl::algorithm>(q.alg), p.other_mds[q.operand]);
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    if (p.zp.present()) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    return attr;
  };
  auto make_pd = [&](const Md& wd, const Md& dst, const dnnl::primitive_attr& attr) {
    const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                            src_md, wd, dst, spec.w.stride, DnnlDilations(spec.w), spec.w.pad_begin,
                                            spec.w.pad_end_dnnl);
    return dnnl::convolution_forward::primitive_desc(d, attr, ProbeEngine());
  };
  // The longest chain on a direct kernel at every thread count the executor may use, else the longest that works.
  int best_score = -1;
  for (size_t k = p.chain.size() + 1; k-- > 0 && best_score < 2;) {
    const int final_value = k == 0 ? p.cur : p.chain[k - 1].out;
    const bool plain_dst = IsGraphOutput(g, final_value) && g.v(final_value).consumers.empty();
    const Md dst = plain_dst ? PlainDesc(spec.dst_dims, kF32) : F32Desc(spec.dst_dims, cl);
    const dnnl::primitive_attr attr = attr_for(k);
    int score = 2;
    Md chosen_w;
    for (int t : ProbeThreadCounts()) {
      OmpThreadsScope scope(t);
      try {
        auto pd = make_pd(chosen_w.data.ndims == 0 ? w_any : chosen_w, dst, attr);
        if (chosen_w.data.ndims == 0) chosen_w = pd.weights_desc();
        score = std::min(score, IsRefImpl(pd.impl_info_str()) ? 0 : 2);
      } catch (const dnnl::error&) {
        score = -1;
        break;
      }
    }
    if (score > best_score) {
      best_score = score;
      p.k = k;
      p.packed_w = chosen_w;
      p.dst = dst;
    }
  }
  if (best_score < 0) return ctx.Fail(node, "oneDNN has no int8 convolution for this geometry");
  return EmitConvInt8(ctx, node, spec, tail, p);
}

namespace {

// The shifted form at run time: oneDNN's convolution into int32 in the destination's bytes, then the window-sum
// correction and the float epilogue in place (nn_quant_window.h).
class ShiftedConvInt8Exec : public StepExec {
 public:
  ShiftedConvInt8Exec(dnnl::convolution_forward::primitive_desc pd, std::vector<std::pair<int, int>> args,
                      WindowGeometry geom, int32_t d, int src, int dst, int zp, std::vector<EpilogueOp> ops,
                      std::vector<int> op_slots)
      : prim_(pd), args_(std::move(args)), scratch_md_(pd.scratchpad_desc()), impl_(pd.impl_info_str()),
        geom_(geom), d_(d), src_(src), dst_(dst), zp_(zp), ops_(std::move(ops)), op_slots_(std::move(op_slots)) {}
  void Run(RunContext& rc) override {
    std::unordered_map<int, dnnl::memory>& args = rc.step_args();
    if (args.empty()) {
      for (const auto& a : args_) args.emplace(a.first, rc.mem(a.second));
      if (scratch_md_.get_size() > 0)
        args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(scratch_md_, rc.stream().get_engine(), rc.scratchpad()));
    }
    prim_.execute(rc.stream(), args);
    rc.stream().wait();
    std::vector<EpilogueOp> ops = ops_;
    for (size_t i = 0; i < ops.size(); ++i)
      if (op_slots_[i] >= 0) ops[i].data = static_cast<const float*>(rc.ptr(op_slots_[i]));
    const int32_t xz = zp_ >= 0 ? *static_cast<const int32_t*>(rc.ptr(zp_)) : 0;
    ConvInt8WindowEpilogue(geom_, static_cast<const uint8_t*>(rc.ptr(src_)), xz, d_, rc.ptr(dst_), ops);
  }
  size_t ScratchpadBytes() const override { return scratch_md_.get_size(); }
  std::string Impl() const override { return impl_ + "+window_sums"; }

 private:
  dnnl::convolution_forward prim_;
  std::vector<std::pair<int, int>> args_;
  dnnl::memory::desc scratch_md_;
  std::string impl_;
  WindowGeometry geom_;
  int32_t d_;
  int src_, dst_, zp_;
  std::vector<EpilogueOp> ops_;
  std::vector<int> op_slots_;  // per epilogue op: its operand's slot, or -1
};

// Builds the shifted form (the trailing ints entry d): operands checked as the plain form's by BuildConvInt8; here
// the layouts the loops read, and the post-ops they run.
CheckResult BuildShiftedConvInt8(BuildContext& bc, const std::vector<Md>& md, size_t r, int32_t d,
                                 std::unique_ptr<StepExec>* out) {
  const Step& s = bc.step();
  const memory::dims sd = md[0].dims(), wd = md[1].dims(), dd = md[3].dims();
  const auto cl = static_cast<memory::format_tag>(ChannelsLastTag(r + 2));
  if (!SameLayout(md[0], Md(sd, memory::data_type::u8, cl)))
    return bc.Fail("a shifted int8 convolution needs a dense channels-last source");
  if (!SameLayout(md[3], Md(dd, memory::data_type::f32, cl)))
    return bc.Fail("a shifted int8 convolution needs a dense channels-last destination");
  std::vector<EpilogueOp> ops;
  std::vector<int> op_slots;
  if (CheckResult c = WindowEpilogueOps(bc, dd, md[3], &ops, &op_slots); !c.ok) return c;
  WindowGeometry g;
  g.n = sd[0];
  g.c = sd[1];
  g.oc = dd[1];
  const size_t lead = 3 - r;
  for (size_t i = 0; i < r; ++i) {
    g.in[lead + i] = sd[2 + i];
    g.out[lead + i] = dd[2 + i];
    g.kernel[lead + i] = wd[2 + i];
    g.stride[lead + i] = s.ints[2 + i];
    g.dilation[lead + i] = s.ints[2 + r + i] + 1;  // oneDNN's dilations count the gaps
    g.pad_begin[lead + i] = s.ints[2 + 2 * r + i];
  }
  dnnl::primitive_attr attr = UserScratchpad();
  if (md[4].data.ndims != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  Md acc = md[3];
  acc.data.data_type = dnnl_s32;
  dnnl::convolution_forward::primitive_desc pd;
  try {
    const Md w_any(wd, memory::data_type::s8, memory::format_tag::any);
    pd = dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                        md[0], w_any, acc, Slice(s.ints, 2, r), Slice(s.ints, 2 + r, r),
                                        Slice(s.ints, 2 + 2 * r, r), Slice(s.ints, 2 + 3 * r, r)),
        attr, bc.engine());
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("int8 convolution: ") + e.what());
  }
  if (!(pd.src_desc() == md[0]) || !(pd.dst_desc() == acc))
    return bc.Fail("the int8 convolution chose other src or dst layouts than the step's operands");
  const Md wc = pd.weights_desc();
  Md plain_part = wc;
  plain_part.data.extra = dnnl_memory_extra_desc_t();
  if (!(plain_part == md[1])) return bc.Fail("the int8 convolution chose another weights layout than the step's");
  if (bc.WeightBytes(1).length < wc.get_size())
    return bc.Fail("weights hold " + std::to_string(bc.WeightBytes(1).length) + " bytes; the packed layout needs " +
                   std::to_string(wc.get_size()));
  std::vector<std::pair<int, int>> args;
  const int src = bc.Slot(0, md[0]), dst = bc.Slot(3, acc);
  const int zp = md[4].data.ndims != 0 ? bc.Slot(4, md[4]) : -1;
  args.push_back({DNNL_ARG_SRC, src});
  args.push_back({DNNL_ARG_WEIGHTS, bc.Slot(1, wc)});
  args.push_back({DNNL_ARG_DST, dst});
  if (zp >= 0) args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp});
  try {
    out->reset(new ShiftedConvInt8Exec(pd, std::move(args), g, d, src, dst, zp, std::move(ops), std::move(op_slots)));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("int8 convolution: ") + e.what());
  }
  return CheckResult::Ok();
}

}  // namespace

CheckResult BuildConvInt8(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  const Step& s = bc.step();
  if (s.ints.size() < 2) return bc.Fail("expected groups and spatial rank in ints");
  if (s.ints[0] != 1) return bc.Fail("int8 convolution groups " + I2S(s.ints[0]) + " is not 1");
  const int64_t r64 = s.ints[1];
  if (r64 < 1 || r64 > 3) return bc.Fail("spatial rank " + I2S(r64) + " is outside 1..3");
  const size_t r = static_cast<size_t>(r64);
  // 2 + 4r ints; one more (d, the weights' correction) for the shifted form.
  const bool shifted = s.ints.size() == 2 + 4 * r + 1;
  CheckResult c = bc.ExpectCounts(5, true, 2 + 4 * r + (shifted ? 1 : 0), 0);
  if (!c.ok) return c;
  if (shifted && (s.ints.back() == 0 || s.ints.back() < -255 || s.ints.back() > 255))
    return bc.Fail("weight correction " + I2S(s.ints.back()) + " is 0 or outside -255..255");
  if (!(c = CheckPostOpOperands(bc, 5)).ok) return c;
  if (!InRange(s.ints, 2, r, 1, kMaxWindow)) return bc.Fail("stride out of range");
  if (!InRange(s.ints, 2 + r, r, 0, kMaxWindow)) return bc.Fail("dilation out of range");
  if (!InRange(s.ints, 2 + 2 * r, r, 0, kMaxWindow)) return bc.Fail("pads_begin out of range");
  if (!InRange(s.ints, 2 + 3 * r, r, 0, kMaxWindow)) return bc.Fail("pads_end out of range");
  if (!s.ops[0].present() || !s.ops[1].present() || !s.ops[3].present())
    return bc.Fail("src, weights and dst are required");
  if (s.ops[2].present()) return bc.Fail("an int8 convolution has no bias operand (the bias is a post-op)");
  if (s.ops[0].dtype != kU8 || s.ops[1].dtype != kI8 || s.ops[3].dtype != kF32)
    return bc.Fail("int8 convolution needs a uint8 src, int8 weights and a float dst");
  if (s.ops[1].buf != Buf::kWeight) return bc.Fail("weights must be a weight tensor");
  const bool has_zp = s.ops[4].present();
  if (has_zp && (s.ops[4].dtype != kI32 || s.ops[4].dims.size() != 1 || s.ops[4].dims[0] != 1 ||
                 s.ops[4].tag != 0 || s.ops[4].strides != std::vector<int64_t>{1}))
    return bc.Fail("the zero point must be one plain int32");
  std::vector<Md> md(5);
  for (size_t i = 0; i < 5; ++i)
    if (s.ops[i].present() && !(c = bc.Desc(i, &md[i])).ok) return c;
  const int nd = static_cast<int>(r) + 2;
  if (md[0].data.ndims != nd || md[1].data.ndims != nd || md[3].data.ndims != nd)
    return bc.Fail("operand ranks do not match the spatial rank");
  const memory::dims sd = md[0].dims(), wd = md[1].dims(), dd = md[3].dims();
  if (sd[1] != wd[1] || dd[1] != wd[0] || sd[0] != dd[0]) return bc.Fail("channel/batch dims inconsistent");
  for (const PostOp& p : s.post_ops) {  // broadcast operands: each dim the destination's or 1
    if (p.kind != PostOp::kBinary) continue;
    const Operand& o = s.ops[p.operand];
    if (o.dims.size() != dd.size()) return bc.Fail("binary post-op operand " + I2S(p.operand) + " has another rank");
    for (size_t i = 0; i < dd.size(); ++i)
      if (o.dims[i] != dd[i] && o.dims[i] != 1)
        return bc.Fail("binary post-op operand " + I2S(p.operand) + " does not broadcast to the destination");
  }
  if (shifted) return BuildShiftedConvInt8(bc, md, r, static_cast<int32_t>(s.ints.back()), out);
  dnnl::primitive_attr attr;
  std::vector<std::pair<int, int>> args;
  if (!(c = bc.PostOps(&attr, &args)).ok) return c;
  if (has_zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  const memory::dims strides = Slice(s.ints, 2, r), dil = Slice(s.ints, 2 + r, r), pb = Slice(s.ints, 2 + 2 * r, r),
                     pe = Slice(s.ints, 2 + 3 * r, r);
  dnnl::convolution_forward::primitive_desc pd;
  try {
    const Md w_any(wd, memory::data_type::s8, memory::format_tag::any);
    pd = dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                        md[0], w_any, md[3], strides, dil, pb, pe),
        attr, bc.engine());
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("int8 convolution: ") + e.what());
  }
  if (!(pd.src_desc() == md[0]) || !(pd.dst_desc() == md[3]))
    return bc.Fail("the int8 convolution chose other src or dst layouts than the step's operands");
  // The packed weights: the stored layout plus the compensation oneDNN appends for a source zero point.
  const Md wc = pd.weights_desc();
  Md plain_part = wc;
  plain_part.data.extra = dnnl_memory_extra_desc_t();
  if (!(plain_part == md[1])) return bc.Fail("the int8 convolution chose another weights layout than the step's");
  if (bc.WeightBytes(1).length < wc.get_size())
    return bc.Fail("weights hold " + std::to_string(bc.WeightBytes(1).length) + " bytes; the packed layout needs " +
                   std::to_string(wc.get_size()));
  args.push_back({DNNL_ARG_SRC, bc.Slot(0, md[0])});
  args.push_back({DNNL_ARG_WEIGHTS, bc.Slot(1, wc)});
  args.push_back({DNNL_ARG_DST, bc.Slot(3, md[3])});
  if (has_zp) args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, bc.Slot(4, md[4])});
  try {
    out->reset(new PrimitiveExec(dnnl::convolution_forward(pd), std::move(args)));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("int8 convolution: ") + e.what());
  }
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
