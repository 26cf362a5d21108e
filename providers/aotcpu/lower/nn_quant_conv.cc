// ConvInteger -> Cast(float) -> Mul(scale) [-> Add(per-channel bias)] [-> activations, residual Adds] as one oneDNN
// int8 convolution (kConvInt8): u8 source in channels-last layout with its zero point read at run time (oneDNN pads
// with it, so a padded tap adds (xz - xz) * w = 0, as ONNX), s8 weights packed at compile time, f32 dst; the scale and
// the bias are binary post-ops ([1, 1, 1, 1] and [1, OC, 1, 1]: oneDNN 2.6's int8 convolution refuses a runtime output
// scale, the binary post-ops keep its jit kernels), then what a float Conv's result absorbs.
//
// oneDNN has no weight zero point, and uint8 weights minus theirs do not always fit int8 (ONNX Runtime's dynamic
// quantizer: 114 of isnet_quint8's 119 convolutions). A correction (wz' - wz) * sum over the window of (x - xz) as a
// [N, 1, OH, OW] binary post-op runs oneDNN's reference kernel (measured), so instead each weight v = w - wz is split
// into P parts that each fit the kernels' range (quant_common.h: Int8PartRange) and the parts are stacked along the
// input channels over a source copied P times side by side: one convolution of P * C input channels sums exactly
// sum (x - xz) * v in int32. P is 1 when the weights fit (signed, or a zero point in their middle), 2 for most uint8
// weights with VNNI, and up to 4 without VNNI (parts in [-64, 64] keep oneDNN's int16 pair sums from saturating).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "providers/aotcpu/lower/nn_common.h"
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

  // Weights v = w - wz in P parts along the input channels: [OC, P * C, k...].
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
  const int64_t parts = PartsFor(vmin, vmax, lo, hi);
  if (parts > kMaxParts) return ctx.Fail(node, "weights minus their zero point need more than 4 int8 parts");
  const int64_t pc = parts * c;
  std::string wbytes(static_cast<size_t>(oc * pc * ksize), '\0');
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t k = 0; k < ksize; ++k) {
        int32_t rest = v[static_cast<size_t>((o * c + ci) * ksize + k)];
        for (int64_t p = 0; p < parts; ++p) {  // greedy: every part but the last at a bound; PartsFor left room
          const int32_t part = p + 1 == parts ? rest : std::min(hi, std::max(lo, rest));
          rest -= part;
          wbytes[static_cast<size_t>((o * pc + p * c + ci) * ksize + k)] = static_cast<char>(static_cast<int8_t>(part));
        }
      }
  memory::dims wdims = spec.wdims;
  wdims[1] = pc;

  // The source, channels-last u8 (oneDNN's int8 kernels' layout), copied `parts` times side by side.
  const int x = In(n, 0);
  const uint32_t cl = ChannelsLastTag(spec.src_dims.size());
  memory::desc cl_src(memory::dims(spec.src_dims.begin(), spec.src_dims.end()), memory::data_type::u8,
                      static_cast<memory::format_tag>(cl));
  Operand src_op = ctx.UseAs(x, cl_src);
  if (!src_op.present()) return ctx.Fail(node, "its source has no channels-last form");
  std::vector<int64_t> src_dims = spec.src_dims;
  src_dims[1] = pc;
  if (parts > 1) {
    const std::string key = "parts" + std::to_string(parts) + ":" + g.v(x).name;
    if (const Operand* d = ctx.FindDerived(key)) {
      src_op = *d;
    } else {
      std::vector<int64_t> storage = {spec.src_dims[0]};
      storage.insert(storage.end(), spec.src_dims.begin() + 2, spec.src_dims.end());
      storage.push_back(pc);
      const Operand base = ctx.NewPlain(kU8, storage);
      for (int64_t p = 0; p < parts; ++p) {
        Step s;
        s.kind = StepKind::kReorder;
        s.name = g.v(x).name + ":part" + std::to_string(p);
        s.ops = {src_op, ChannelsLastView(base, spec.src_dims, pc, p * c)};
        ctx.Emit(std::move(s));
      }
      src_op = ChannelsLastView(base, src_dims, pc, 0);
      ctx.SetDerived(key, src_op);
    }
  }
  Operand zp_op;
  if (CheckResult rz = SourceZeroPoint32(ctx, n, 2, &zp_op); !rz.ok) return rz;

  // Post-ops: the scale, the per-channel bias, then what a float Conv absorbs.
  const size_t rank = spec.dst_dims.size();
  std::vector<PostOp> first;
  PostOp mul;
  mul.kind = PostOp::kBinary;
  mul.alg = dnnl_binary_mul;
  mul.operand = 5;
  first.push_back(mul);
  int cur = Out(ctx.node(tail.mul), 0);
  int bias_node = -1;
  const float* bias = nullptr;
  if (const int a = ctx.SoleConsumer(cur); a >= 0 && !ctx.IsAbsorbed(a)) {
    const Node& an = ctx.node(a);
    const int other = an.num_inputs() == 2 ? (In(an, 0) == cur ? In(an, 1) : In(an, 0)) : -1;
    if (IsOnnx(an) && an.op == "Add" && other >= 0 && other != cur && StaticF32(g, Out(an, 0)) &&
        g.v(Out(an, 0)).dims == spec.dst_dims && (bias = ChannelBias(g, other, oc, rank)) != nullptr) {
      bias_node = a;
      PostOp add;
      add.kind = PostOp::kBinary;
      add.alg = dnnl_binary_add;
      add.operand = 6;
      first.push_back(add);
      cur = Out(an, 0);
    }
  }
  std::vector<FusedOp> chain = CollectPostOps(ctx, cur, first);
  std::vector<Md> other_mds;
  OtherDescs(ctx, &chain, &other_mds);
  std::vector<int64_t> ones(rank, 1), per_channel(rank, 1);
  per_channel[1] = oc;
  const Md scale_md = PlainDesc(ones, kF32), bias_md = PlainDesc(per_channel, kF32);

  const Md src_md = DescOfOperand(src_op);
  const Md w_any(wdims, memory::data_type::s8, memory::format_tag::any);
  auto attr_for = [&](size_t k) {
    dnnl::post_ops po;
    po.append_binary(dnnl::algorithm::binary_mul, scale_md);
    if (bias) po.append_binary(dnnl::algorithm::binary_add, bias_md);
    for (const PostOp& p : ChainPostOps(chain, k)) {
      if (p.kind == PostOp::kEltwise)
        po.append_eltwise(p.scale, static_cast<dnnl::algorithm>(p.alg), p.alpha, p.beta);
      else
        po.append_binary(static_cast<dnnl::algorithm>(p.alg), other_mds[p.operand]);
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(po);
    if (zp_op.present()) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    return attr;
  };
  auto make_pd = [&](const Md& wd, const Md& dst, const dnnl::primitive_attr& attr) {
    const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                            src_md, wd, dst, spec.w.stride, DnnlDilations(spec.w), spec.w.pad_begin,
                                            spec.w.pad_end_dnnl);
    return dnnl::convolution_forward::primitive_desc(d, attr, ProbeEngine());
  };
  // The longest chain on a direct kernel at every thread count the executor may use, else the longest that works.
  size_t best_k = 0;
  int best_score = -1;
  Md best_w, best_dst;
  for (size_t k = chain.size() + 1; k-- > 0 && best_score < 2;) {
    const int final_value = k == 0 ? cur : chain[k - 1].out;
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
      best_k = k;
      best_w = chosen_w;
      best_dst = dst;
    }
  }
  if (best_score < 0) return ctx.Fail(node, "oneDNN has no int8 convolution for this geometry");

  Step st;
  st.kind = StepKind::kConvInt8;
  std::vector<int> absorbed = {tail.cast, tail.mul};
  if (bias_node >= 0) absorbed.push_back(bias_node);
  for (size_t i = 0; i < best_k; ++i) absorbed.push_back(chain[i].node);
  st.name = JoinNames(ctx, node, absorbed);
  Operand w_op;
  CheckResult r = ctx.PackWeight(WeightName(ctx, node, In(n, 1), "int8"), wbytes.data(), PlainDesc(wdims, kI8),
                                 best_w, &w_op);
  if (!r.ok) return r;
  Operand scale_op = ctx.UsePlain(tail.scale);
  scale_op.dims = ones;
  scale_op.strides = ones;
  st.ops = {src_op, w_op, Operand(), Operand(), zp_op, scale_op};
  st.post_ops = {first[0]};
  if (bias) {
    std::string bytes(reinterpret_cast<const char*>(bias), static_cast<size_t>(oc) * sizeof(float));
    Operand bop;
    r = ctx.AddWeight(WeightName(ctx, node, In(n, 1), "bias"), std::move(bytes), bias_md, &bop);
    if (!r.ok) return r;
    st.ops.push_back(bop);
    st.post_ops.push_back(first[1]);
  }
  r = AppendPostOps(ctx, node, chain, best_k, other_mds, &st);
  if (!r.ok) return r;
  const int final_value = best_k == 0 ? cur : chain[best_k - 1].out;
  st.ops[3] = ctx.Define(final_value, best_dst);
  st.ints = {1, static_cast<int64_t>(spec.w.rank())};
  std::vector<int64_t> dil = DnnlDilations(spec.w);
  for (const std::vector<int64_t>* p : {&spec.w.stride, &dil, &spec.w.pad_begin, &spec.w.pad_end_dnnl})
    st.ints.insert(st.ints.end(), p->begin(), p->end());
  for (int a : absorbed) ctx.Absorb(a);
  ctx.Emit(std::move(st));
  return CheckResult::Ok();
}

CheckResult BuildConvInt8(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  const Step& s = bc.step();
  if (s.ints.size() < 2) return bc.Fail("expected groups and spatial rank in ints");
  if (s.ints[0] != 1) return bc.Fail("int8 convolution groups " + I2S(s.ints[0]) + " is not 1");
  const int64_t r64 = s.ints[1];
  if (r64 < 1 || r64 > 3) return bc.Fail("spatial rank " + I2S(r64) + " is outside 1..3");
  const size_t r = static_cast<size_t>(r64);
  CheckResult c = bc.ExpectCounts(5, true, 2 + 4 * r, 0);
  if (!c.ok) return c;
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
