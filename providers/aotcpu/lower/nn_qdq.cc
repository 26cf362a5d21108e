// QDQ graphs (issue 26; ONNX Runtime's static quantizer): DequantizeLinear(x_q) -> Conv(DequantizeLinear(w_q),
// DequantizeLinear(b_q)) -> QuantizeLinear as one oneDNN int8 convolution with requantization (kQConv): u8 source
// with its zero point (oneDNN pads with it), int8 weights per tensor or per output channel packed at compile time
// (the binary holds them as int8, never as float), the int32 bias, per-channel output scales
// x_scale * w_scale[oc] / y_scale and the output zero point; dst u8/s8. The exact int32 sum is converted and
// rounded once, as ONNX Runtime's QLinearConv (and the CPU EP's QDQ fusion) does.
//
// The DequantizeLinear nodes of such a convolution emit nothing: the weights' and bias's are constants the step
// reads, the source's is computed only when something else reads its float values. Any other constant
// DequantizeLinear is folded to float by ir/fold.cc (a ConvTranspose's weights, say).
//
// Without VNNI oneDNN sums u8 x s8 pairs in int16 with saturation (quant_common.h): each weight is then split into
// parts in [-64, 64] stacked along the input channels of each group, over a source copied once per part, as
// nn_quant_conv.cc does for ConvInteger; the int32 sum stays exact. Where the target has AVX2, a group-1 convolution
// whose weights would need parts runs instead on our own exact kernel with whole weights (kQConvAvx2,
// nn_quant_conv_avx2.h), with the same arithmetic and post-ops.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "providers/aotcpu/lower/nn_common.h"
#include "providers/aotcpu/lower/nn_quant_conv_avx2.h"
#include "providers/aotcpu/lower/quant_common.h"

namespace epctx {
namespace aotcpu {
namespace {

constexpr int64_t kMaxParts = 4;

bool IsDq(const Node& n) { return IsOnnx(n) && n.op == "DequantizeLinear"; }

// The DequantizeLinear node producing `v` with valid parameters, or -1.
int DqProducer(const Graph& g, int v) {
  if (v < 0) return -1;
  const int p = g.v(v).producer;
  if (p < 0 || !IsDq(g.nodes[static_cast<size_t>(p)])) return -1;
  std::string why;
  return CheckDequantizeParams(g, g.nodes[static_cast<size_t>(p)], &why) ? p : -1;
}

// A constant float of one element, positive and finite (a scale).
bool ConstScale(const Graph& g, int v, float* out) {
  if (v < 0 || g.v(v).dtype != kF32 || !g.v(v).is_const() || g.v(v).numel() != 1) return false;
  *out = *static_cast<const float*>(g.v(v).data);
  return *out > 0.f && std::isfinite(*out);
}

// The constant zero point input `i` of `n` as int32 values (`count` zeros when absent); false when not constant.
bool ConstZeroPoints(const Graph& g, const Node& n, size_t i, int64_t count, std::vector<int32_t>* out) {
  out->assign(static_cast<size_t>(count), 0);
  const int v = In(n, i);
  if (v < 0) return true;
  const Value& z = g.v(v);
  if (!z.is_const() || z.numel() != count) return false;
  for (int64_t k = 0; k < count; ++k) {
    switch (z.dtype) {
      case kU8:
        (*out)[static_cast<size_t>(k)] = static_cast<const uint8_t*>(z.data)[k];
        break;
      case kI8:
        (*out)[static_cast<size_t>(k)] = static_cast<const int8_t*>(z.data)[k];
        break;
      case kI32:
        (*out)[static_cast<size_t>(k)] = static_cast<const int32_t*>(z.data)[k];
        break;
      default:
        return false;
    }
  }
  return true;
}

// The matched group: DequantizeLinear(x_q), (w_q), [(b_q)] -> Conv -> QuantizeLinear -> y_q.
struct QdqConv {
  int dq_x = -1, dq_w = -1, dq_b = -1, q = -1;
  int xq = -1, wq = -1, bq = -1, yq = -1;
  float x_scale = 0, y_scale = 0;
  int32_t x_zp = 0, y_zp = 0;
  std::vector<float> w_scales;  // one per output channel
};

bool MatchQdqConv(const Graph& g, const Node& c, QdqConv* m, std::string* why) {
  if (!IsOnnx(c) || c.op != "Conv" || !SingleOutput(c) || c.num_inputs() < 2 || c.num_inputs() > 3)
    return Reject(why, "not a Conv with 2 or 3 inputs and one output");
  m->dq_x = DqProducer(g, In(c, 0));
  m->dq_w = DqProducer(g, In(c, 1));
  if (m->dq_x < 0 || m->dq_w < 0) return Reject(why, "its input and weights are not both DequantizeLinear outputs");
  const Node &dx = g.nodes[static_cast<size_t>(m->dq_x)], &dw = g.nodes[static_cast<size_t>(m->dq_w)];
  m->xq = In(dx, 0);
  m->wq = In(dw, 0);
  const Value &xq = g.v(m->xq), &wq = g.v(m->wq);
  if (xq.dtype != kU8 || !xq.has_shape)
    return Reject(why, "only a uint8 quantized source with a static shape is compiled");
  std::vector<int32_t> zp;
  if (!ConstScale(g, In(dx, 1), &m->x_scale) || !ConstZeroPoints(g, dx, 2, 1, &zp))
    return Reject(why, "the source's scale and zero point are not constants of one element");
  m->x_zp = zp[0];
  if (wq.dtype != kI8 || !wq.is_const() || !wq.has_shape || wq.dims.size() < 3)
    return Reject(why, "the weights are not a constant int8 tensor");
  const int64_t oc = wq.dims[0];
  const Value& ws = g.v(In(dw, 1));
  if (ws.dtype != kF32 || !ws.is_const()) return Reject(why, "the weights' scale is not a float constant");
  const int64_t wcount = ws.numel();
  int64_t waxis = dw.Int("axis", 1);
  if (waxis < 0) waxis += static_cast<int64_t>(wq.dims.size());
  if (wcount != 1 && (waxis != 0 || wcount != oc))
    return Reject(why, "the weights are not quantized per tensor or per output channel");
  m->w_scales.resize(static_cast<size_t>(oc));
  for (int64_t o = 0; o < oc; ++o) {
    const float s = static_cast<const float*>(ws.data)[wcount == 1 ? 0 : o];
    if (!(s > 0.f && std::isfinite(s))) return Reject(why, "a weight scale is not positive and finite");
    m->w_scales[static_cast<size_t>(o)] = s;
  }
  if (!ConstZeroPoints(g, dw, 2, wcount, &zp)) return Reject(why, "the weights' zero point is not constant");
  for (int32_t z : zp)
    if (z != 0) return Reject(why, "the weights' zero point is not 0 (symmetric int8 weights only)");
  if (In(c, 2) >= 0) {
    m->dq_b = DqProducer(g, In(c, 2));
    if (m->dq_b < 0) return Reject(why, "the bias is not a DequantizeLinear output");
    const Node& db = g.nodes[static_cast<size_t>(m->dq_b)];
    m->bq = In(db, 0);
    const Value& bq = g.v(m->bq);
    if (bq.dtype != kI32 || !bq.is_const() || bq.dims != std::vector<int64_t>{oc})
      return Reject(why, "the bias is not a constant int32 [M]");
    const Value& bs = g.v(In(db, 1));
    if (bs.dtype != kF32 || !bs.is_const() || (bs.numel() != 1 && bs.numel() != oc))
      return Reject(why, "the bias scale is not a float constant of 1 or M values");
    // The bias is summed into the int32 accumulator, whose unit is x_scale * w_scale[m]: only when its scale is
    // exactly that (ONNX Runtime's quantizer writes it so) is the sum the graph's.
    for (int64_t o = 0; o < oc; ++o)
      if (static_cast<const float*>(bs.data)[bs.numel() == 1 ? 0 : o] !=
          m->x_scale * m->w_scales[static_cast<size_t>(o)])
        return Reject(why, "the bias scale is not the source scale times the weight scale");
    if (!ConstZeroPoints(g, db, 2, bs.numel(), &zp)) return Reject(why, "the bias zero point is not constant");
    for (int32_t z : zp)
      if (z != 0) return Reject(why, "the bias zero point is not 0");
  }
  const int y = Out(c, 0);
  if (y < 0 || IsGraphOutput(g, y) || g.v(y).consumers.size() != 1)
    return Reject(why, "its result is not read by one QuantizeLinear alone");
  m->q = g.v(y).consumers[0];
  const Node& q = g.nodes[static_cast<size_t>(m->q)];
  if (!IsOnnx(q) || q.op != "QuantizeLinear" || In(q, 0) != y || q.outputs.size() != 1 || Out(q, 0) < 0)
    return Reject(why, "its result is not read by one QuantizeLinear alone");
  m->yq = Out(q, 0);
  const Value& yq = g.v(m->yq);
  if ((yq.dtype != kU8 && yq.dtype != kI8) || !yq.has_shape || yq.dims != g.v(y).dims)
    return Reject(why, "the QuantizeLinear's output is not 8-bit of the convolution's shape");
  if (q.Int("block_size", 0) != 0 || q.Int("saturate", 1) != 1) return Reject(why, "the QuantizeLinear is blocked");
  if (!ConstScale(g, In(q, 1), &m->y_scale))
    return Reject(why, "the output scale is not a positive constant of one element");
  if (In(q, 2) >= 0 && g.v(In(q, 2)).dtype != yq.dtype) return Reject(why, "the output zero point's type differs");
  if (!ConstZeroPoints(g, q, 2, 1, &zp)) return Reject(why, "the output zero point is not a constant of one element");
  m->y_zp = zp[0];
  return true;
}

// `base` (plain channels-last storage [N, spatial..., C]) seen as [N, G, C/G, spatial...]: group g's channels
// [c0, c0 + cg) of each G-sized block, for `cg` channels per group out of `cpg` stored per group.
Operand GroupedChannelsLast(const Operand& base, const std::vector<int64_t>& nchw, int64_t groups, int64_t cg,
                            int64_t cpg, int64_t c0) {
  const int64_t total = groups * cpg;
  Operand o = base;
  o.tag = 0;
  o.dims = {nchw[0], groups, cg};
  o.dims.insert(o.dims.end(), nchw.begin() + 2, nchw.end());
  o.strides.assign(o.dims.size(), 0);
  int64_t stride = total;
  for (size_t i = o.dims.size(); i-- > 3;) {
    o.strides[i] = stride;
    stride *= o.dims[i];
  }
  o.strides[0] = stride;
  o.strides[1] = cpg;
  o.strides[2] = 1;
  o.offset += static_cast<uint64_t>(c0);  // 1-byte elements
  return o;
}

// The channels-last [N, C, spatial...] view of plain storage [N, spatial..., C].
Operand ChannelsLastOf(const Operand& base, const std::vector<int64_t>& nchw) {
  Operand o = base;
  o.tag = 0;
  o.dims = nchw;
  o.strides.assign(nchw.size(), 0);
  int64_t stride = nchw[1];
  for (size_t i = nchw.size(); i-- > 2;) {
    o.strides[i] = stride;
    stride *= nchw[i];
  }
  o.strides[1] = 1;
  o.strides[0] = stride;
  return o;
}

// The int8 convolution's attributes: per-channel output scales, the post-ops `list` (binary operand i described by
// mds[i]), runtime zero points.
dnnl::primitive_attr QConvAttr(const std::vector<float>& scales, const std::vector<PostOp>& list,
                               const std::vector<Md>& mds, bool src_zp, bool dst_zp) {
  dnnl::primitive_attr attr;
  attr.set_output_scales(1 << 1, scales);
  dnnl::post_ops po;
  for (const PostOp& p : list) {
    if (p.kind == PostOp::kEltwise)
      po.append_eltwise(p.scale, static_cast<dnnl::algorithm>(p.alg), p.alpha, p.beta);
    else
      po.append_binary(static_cast<dnnl::algorithm>(p.alg), mds[p.operand]);
  }
  attr.set_post_ops(po);
  if (src_zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  if (dst_zp) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
  return attr;
}

// The weights layouts of oneDNN's jit int8 convolutions (not brgconv), by weights rank: VNNI/AVX-512 (OIhw4i16o4i)
// and AVX2 (OIhw2i8o4i), grouped (a leading G) or not.
std::vector<memory::format_tag> JitInt8WeightTags(size_t wrank, bool grouped) {
  using tag = memory::format_tag;
  if (grouped) {
    if (wrank == 4) return {tag::aBCd4c16b4c, tag::aBCd2c8b4c};
    if (wrank == 5) return {tag::aBCde4c16b4c, tag::aBCde2c8b4c};
    if (wrank == 6) return {tag::aBCdef4c16b4c, tag::aBCdef2c8b4c};
    return {};
  }
  if (wrank == 3) return {tag::ABc4b16a4b, tag::ABc2b8a4b};
  if (wrank == 4) return {tag::ABcd4b16a4b, tag::ABcd2b8a4b};
  if (wrank == 5) return {tag::ABcde4b16a4b, tag::ABcde2b8a4b};
  return {};
}

// The DequantizeLinear that alone reads the convolution's quantized result with the same scale and zero point (the
// QDQ format's Q -> DQ pair), or -1.
int PairedDequantize(LowerContext& ctx, const QdqConv& m) {
  const Graph& g = ctx.graph();
  if (IsGraphOutput(g, m.yq) || g.v(m.yq).consumers.size() != 1) return -1;
  const int c = g.v(m.yq).consumers[0];
  const Node& d = g.nodes[static_cast<size_t>(c)];
  std::string why;
  if (!IsDq(d) || ctx.IsAbsorbed(c) || In(d, 0) != m.yq || !CheckDequantizeParams(g, d, &why)) return -1;
  float s = 0;
  std::vector<int32_t> z;
  if (!ConstScale(g, In(d, 1), &s) || s != m.y_scale || !ConstZeroPoints(g, d, 2, 1, &z) || z[0] != m.y_zp) return -1;
  const int y = Out(d, 0);
  if (y < 0 || !StaticF32(g, y) || g.v(y).dims != g.v(m.yq).dims) return -1;
  for (int reader : g.v(y).consumers) {  // a QDQ convolution reads the quantized values themselves
    QdqConv next;
    if (MatchQdqConv(g, g.nodes[static_cast<size_t>(reader)], &next, &why)) return -1;
  }
  return c;
}

Operand Int32Weight(LowerContext& ctx, const std::string& name, int32_t v, CheckResult* r) {
  std::string bytes(4, '\0');
  std::memcpy(&bytes[0], &v, 4);
  Operand op;
  *r = ctx.AddWeight(name, std::move(bytes), PlainDesc({1}, kI32), &op);
  return op;
}

CheckResult LowerQdqConv(LowerContext& ctx, int node, const QdqConv& m) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  ConvSpec spec;
  std::string why;
  if (!ResolveConvGeometry(g, n, false, -1, &spec, &why)) return ctx.Fail(node, why);
  const int64_t groups = spec.groups, oc = spec.oc, icg = spec.ic / groups;
  const Value& wq = g.v(m.wq);
  const int64_t ksize = wq.numel() / (oc * icg);
  const int8_t* w = static_cast<const int8_t*>(wq.data);

  // Weights [OC, P * ICg, k...] (per group: [G, OCg, P * ICg, k...]), part p of input channel c at p * ICg + c.
  int32_t lo, hi, vmin = 0, vmax = 0;
  Int8PartRange(ctx.options(), &lo, &hi);
  for (int64_t i = 0; i < wq.numel(); ++i) vmin = std::min<int32_t>(vmin, w[i]), vmax = std::max<int32_t>(vmax, w[i]);
  // oneDNN's depthwise int8 kernels widen each product to int32 (no int16 pair sums): whole weights even without VNNI
  // (OpsQuantQdq.QdqConvExtremesAreExactWithoutVnni). Split, a depthwise convolution would run as a grouped one of two
  // input channels per group, on oneDNN's slow path (ppocr_v4_det_qdq at AVX2: 75-150 ms per depthwise layer).
  const bool depthwise = icg == 1 && oc == groups;
  if (depthwise) lo = -128, hi = 127;
  int64_t parts = 1;
  if (vmax > hi) parts = std::max<int64_t>(parts, (vmax + hi - 1) / hi);
  if (vmin < lo) parts = std::max<int64_t>(parts, (-vmin + -lo - 1) / -lo);
  // Below VNNI with AVX2, weights that would need parts run whole on our own exact kernel (kQConvAvx2) instead,
  // when its windows are long enough to feed it: below 64 values per window (an RGB stem's 3 x 3 x 3) building the
  // rows and the epilogue dominate (ppocr_v4_det_qdq's stem: 2.7 ms against 0.56 ms split), and such weights are
  // small, so their parts cost the binary little.
  constexpr int64_t kOwnMinWindow = 64;
  const bool own = parts > 1 && groups == 1 && icg * ksize >= kOwnMinWindow && OwnInt8Conv(ctx.options());
  if (own) parts = 1;
  if (parts > kMaxParts) return ctx.Fail(node, "weights need more than 4 int8 parts");
  const int64_t picg = parts * icg;
  std::string wbytes(static_cast<size_t>(oc * picg * ksize), '\0');
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t c = 0; c < icg; ++c)
      for (int64_t k = 0; k < ksize; ++k) {
        int32_t rest = w[(o * icg + c) * ksize + k];
        for (int64_t p = 0; p < parts; ++p) {  // every part but the last at a bound; `parts` left room
          const int32_t part = p + 1 == parts ? rest : std::min(hi, std::max(lo, rest));
          rest -= part;
          wbytes[static_cast<size_t>((o * picg + p * icg + c) * ksize + k)] =
              static_cast<char>(static_cast<int8_t>(part));
        }
      }
  memory::dims wdims = spec.wdims;
  wdims[groups > 1 ? 2 : 1] = picg;

  // The source: u8 channels-last, copied once per part into each group's P * ICg channels.
  const uint32_t cl = ChannelsLastTag(spec.src_dims.size());
  const Md cl_src(memory::dims(spec.src_dims.begin(), spec.src_dims.end()), memory::data_type::u8,
                  static_cast<memory::format_tag>(cl));
  Operand src_op = ctx.UseAs(m.xq, cl_src);
  if (!src_op.present()) return ctx.Fail(node, "its source has no channels-last form");
  std::vector<int64_t> src_dims = spec.src_dims;
  src_dims[1] = groups * picg;
  if (parts > 1) {
    const std::string key = "qparts" + std::to_string(parts) + "g" + std::to_string(groups) + ":" + g.v(m.xq).name;
    if (const Operand* d = ctx.FindDerived(key)) {
      src_op = *d;
    } else {
      std::vector<int64_t> storage = {spec.src_dims[0]};
      storage.insert(storage.end(), spec.src_dims.begin() + 2, spec.src_dims.end());
      storage.push_back(groups * picg);
      const Operand base = ctx.NewPlain(kU8, storage);
      const Operand from =
          GroupedChannelsLast(ChannelsLastOf(src_op, spec.src_dims), spec.src_dims, groups, icg, icg, 0);
      for (int64_t p = 0; p < parts; ++p) {
        Step s;
        s.kind = StepKind::kReorder;
        s.name = g.v(m.xq).name + ":part" + std::to_string(p);
        s.ops = {from, GroupedChannelsLast(base, spec.src_dims, groups, icg, picg, p * icg)};
        ctx.Emit(std::move(s));
      }
      src_op = ChannelsLastOf(base, src_dims);
      ctx.SetDerived(key, src_op);
    }
  }

  // Requantization: scale[oc] = x_scale * w_scale[oc] / y_scale in float, as ONNX Runtime's QLinearConv.
  std::string scales(static_cast<size_t>(oc) * sizeof(float), '\0');
  for (int64_t o = 0; o < oc; ++o) {
    const float s = m.x_scale * m.w_scales[static_cast<size_t>(o)] / m.y_scale;
    if (!std::isfinite(s) || s <= 0.f) return ctx.Fail(node, "its requantization scale is not positive and finite");
    std::memcpy(&scales[static_cast<size_t>(o) * sizeof(float)], &s, sizeof(float));
  }
  const uint32_t ydt = g.v(m.yq).dtype;
  const bool has_bias = m.bq >= 0;
  const Md bias_md({oc}, memory::data_type::s32, memory::format_tag::a);
  std::vector<float> sv(static_cast<size_t>(oc));
  std::memcpy(sv.data(), scales.data(), scales.size());
  // oneDNN 2.6 adds the destination zero point to the scaled float before its conversion rounds: a value just above
  // a half (2.5000002) plus 128 is 130.5, which rounds to even, one step below round(2.5000002) + 128. So the scaled
  // sum is rounded first by a round post-op (half to even, as ONNX Runtime), and the zero point adds to an integer.
  std::vector<PostOp> list = {EltwisePostOp(dnnl_eltwise_round, 0.f, 0.f)};
  // A QuantizeLinear -> DequantizeLinear pair after it (the QDQ format's) is computed in the step too: a float dst
  // float(q - zp) * y_scale = y_scale * clip(round(v), lo - zp, hi - zp), then what a float Conv's result absorbs
  // (the affine maps and activations between this pair and the next QuantizeLinear).
  const int dq_y = PairedDequantize(ctx, m);
  std::vector<FusedOp> chain;
  std::vector<Md> other_mds;
  int cur = m.yq;
  if (dq_y >= 0) {
    const float lo = ydt == kU8 ? 0.f : -128.f, hi = ydt == kU8 ? 255.f : 127.f;
    list.push_back(
        EltwisePostOp(dnnl_eltwise_clip_v2, lo - static_cast<float>(m.y_zp), hi - static_cast<float>(m.y_zp)));
    list.push_back(EltwisePostOp(dnnl_eltwise_linear, m.y_scale, 0.f));
    cur = Out(ctx.node(dq_y), 0);
    chain = CollectPostOps(ctx, cur, list);
    OtherDescs(ctx, &chain, &other_mds);
  }
  auto list_for = [&](size_t k) {
    std::vector<PostOp> l = list;
    for (const PostOp& p : ChainPostOps(chain, k)) AppendPostOp(&l, p, true);
    return l;
  };
  // A fused output read by nothing else is written plain when oneDNN's direct kernels take that (its int8 kernels
  // want channels-last; the output then gets a reorder).
  bool plain_out = true;
  auto dst_for = [&](size_t k) {
    const int v = k == 0 ? cur : chain[k - 1].out;
    const bool plain = plain_out && IsGraphOutput(g, v) && g.v(v).consumers.empty();
    const memory::data_type dt = dq_y >= 0    ? memory::data_type::f32
                                 : ydt == kU8 ? memory::data_type::u8
                                              : memory::data_type::s8;
    const memory::format_tag plain_tag = spec.dst_dims.size() == 3   ? memory::format_tag::abc
                                         : spec.dst_dims.size() == 4 ? memory::format_tag::abcd
                                                                     : memory::format_tag::abcde;
    return Md(memory::dims(spec.dst_dims.begin(), spec.dst_dims.end()), dt,
              plain ? plain_tag : static_cast<memory::format_tag>(cl));
  };
  const bool dst_zp = dq_y < 0 && m.y_zp != 0;
  if (own) {
    const memory::data_type odt = dq_y >= 0 ? memory::data_type::f32
                                  : ydt == kU8 ? memory::data_type::u8
                                               : memory::data_type::s8;
    const Md dst_md(memory::dims(spec.dst_dims.begin(), spec.dst_dims.end()), odt, static_cast<memory::format_tag>(cl));
    const size_t k = EpilogueChainLength(chain, other_mds, dst_md);
    Step st;
    st.kind = StepKind::kQConvAvx2;
    std::vector<int> absorbed = {m.q};
    if (dq_y >= 0) absorbed.push_back(dq_y);
    for (size_t i = 0; i < k; ++i) absorbed.push_back(chain[i].node);
    st.name = JoinNames(ctx, node, absorbed);
    int8gemm::ConvGeometry geom;
    Operand w_op, sums_op, b_op, s_op, szp, dzp;
    CheckResult r = AddOwnConvWeights(ctx, node, m.wq, spec, w, &geom, &w_op, &sums_op);
    if (!r.ok) return r;
    if (has_bias) {
      const Value& b = g.v(m.bq);
      r = ctx.AddWeight(WeightName(ctx, node, m.bq, "int32"),
                        std::string(static_cast<const char*>(b.data), static_cast<size_t>(oc) * 4),
                        PlainDesc({oc}, kI32), &b_op);
      if (!r.ok) return r;
    }
    r = ctx.AddWeight(WeightName(ctx, node, m.wq, "requant_scales"), scales, PlainDesc({oc}, kF32), &s_op);
    if (!r.ok) return r;
    if (m.x_zp != 0 && !(szp = Int32Weight(ctx, g.v(m.xq).name + ":zp_int32", m.x_zp, &r), r).ok) return r;
    if (dst_zp && !(dzp = Int32Weight(ctx, g.v(m.yq).name + ":zp_int32", m.y_zp, &r), r).ok) return r;
    st.ops = {src_op, w_op, sums_op, Operand(), szp, dzp, s_op, b_op};
    st.post_ops = list;
    if (!(r = AppendPostOps(ctx, node, chain, k, other_mds, &st)).ok) return r;
    st.ops[3] = ctx.Define(k == 0 ? cur : chain[k - 1].out, dst_md);
    st.ints = {1, static_cast<int64_t>(spec.w.rank())};
    std::vector<int64_t> dil = DnnlDilations(spec.w);
    for (const std::vector<int64_t>* v :
         {&spec.w.kernel, &spec.w.stride, &dil, &spec.w.pad_begin, &spec.w.pad_end_dnnl})
      st.ints.insert(st.ints.end(), v->begin(), v->end());
    for (int a : absorbed) ctx.Absorb(a);
    ctx.Emit(std::move(st));
    return CheckResult::Ok();
  }

  // The longest chain oneDNN runs in a direct kernel; the weights layout it chooses at the first thread count the
  // executor may use, checked at the others (the builder finds it again, or binds it explicitly).
  const Md src_md = DescOfOperand(src_op);
  size_t best_k = 0;
  int best_score = -1;
  Md best_w;
  for (int attempt = 0; attempt < 2 && best_score < 2; ++attempt) {
    plain_out = attempt == 0;
    best_score = -1;
    for (size_t k = chain.size() + 1; k-- > 0 && best_score < 2;) {
      const dnnl::primitive_attr attr = QConvAttr(sv, list_for(k), other_mds, m.x_zp != 0, dst_zp);
      const Md dst_md = dst_for(k);
      auto make_pd = [&](const Md& w) {
        const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                                dnnl::algorithm::convolution_direct, src_md, w,
                                                has_bias ? bias_md : Md(), dst_md, spec.w.stride,
                                                DnnlDilations(spec.w), spec.w.pad_begin, spec.w.pad_end_dnnl);
        return dnnl::convolution_forward::primitive_desc(d, attr, ProbeEngine());
      };
      // oneDNN's choice of weights layout depends on the thread count (brgconv_1x1 blocks 24 output channels by 16
      // at two threads and by 32 at one, and binds neither block at the other count: ppocr_v4_det_qdq's SE-block
      // convolutions ran ref_int8 on their 1x1 inputs). Each count's choice is a candidate, scored by the worst
      // implementation it binds to at every count; the best candidate wins. When no count's choice is fast at every
      // count, the layouts of oneDNN's jit int8 kernels (which take any thread count) are tried, with the
      // compensation oneDNN asked for: brgconv_1x1 binds neither of its blocks of those 24 channels at the other
      // count, jit_int8_1x1 binds OIhw4i16o4i at both.
      std::vector<Md> candidates;
      for (int resolve_threads : ProbeThreadCounts()) {
        try {
          OmpThreadsScope scope(resolve_threads);
          candidates.push_back(make_pd(Md(wdims, memory::data_type::s8, memory::format_tag::any)).weights_desc());
        } catch (const dnnl::error&) {
        }
      }
      for (size_t ci = 0; ci < candidates.size() + JitInt8WeightTags(wdims.size(), groups > 1).size(); ++ci) {
        Md chosen_w;
        if (ci < candidates.size()) {
          chosen_w = candidates[ci];
        } else {
          if (candidates.empty()) break;
          const memory::format_tag jit_tag = JitInt8WeightTags(wdims.size(), groups > 1)[ci - candidates.size()];
          chosen_w = Md(wdims, memory::data_type::s8, jit_tag);
          chosen_w.data.extra = candidates[0].data.extra;
        }
        int score = 2;
        for (int t : ProbeThreadCounts()) {
          OmpThreadsScope scope(t);
          try {
            score = std::min(score, IsRefImpl(make_pd(chosen_w).impl_info_str()) ? 0 : 2);
          } catch (const dnnl::error&) {
            score = -1;
            break;
          }
        }
        if (score > best_score) {
          best_score = score;
          best_k = k;
          best_w = chosen_w;
        }
        if (best_score == 2) break;
      }
    }
  }
  if (best_score < 0) return ctx.Fail(node, "oneDNN has no int8 convolution for it");

  Step st;
  st.kind = StepKind::kQConv;
  std::vector<int> absorbed = {m.q};
  if (dq_y >= 0) absorbed.push_back(dq_y);
  for (size_t i = 0; i < best_k; ++i) absorbed.push_back(chain[i].node);
  st.name = JoinNames(ctx, node, absorbed);
  Operand w_op, b_op, s_op, szp, dzp;
  CheckResult r =
      ctx.PackWeight(WeightName(ctx, node, m.wq, "int8"), wbytes.data(), PlainDesc(wdims, kI8), best_w, &w_op);
  if (!r.ok) return r;
  if (has_bias) {
    const Value& b = g.v(m.bq);
    r = ctx.AddWeight(WeightName(ctx, node, m.bq, "int32"),
                      std::string(static_cast<const char*>(b.data), static_cast<size_t>(oc) * 4), bias_md, &b_op);
    if (!r.ok) return r;
  }
  r = ctx.AddWeight(WeightName(ctx, node, m.wq, "requant_scales"), scales, PlainDesc({oc}, kF32), &s_op);
  if (!r.ok) return r;
  if (m.x_zp != 0 && !(szp = Int32Weight(ctx, g.v(m.xq).name + ":zp_int32", m.x_zp, &r), r).ok) return r;
  if (dst_zp && !(dzp = Int32Weight(ctx, g.v(m.yq).name + ":zp_int32", m.y_zp, &r), r).ok) return r;
  st.ops = {src_op, w_op, b_op, Operand(), szp, dzp, s_op};
  st.post_ops = list;
  r = AppendPostOps(ctx, node, chain, best_k, other_mds, &st);
  if (!r.ok) return r;
  st.ops[3] = ctx.Define(best_k == 0 ? cur : chain[best_k - 1].out, dst_for(best_k));
  st.ints = {groups, static_cast<int64_t>(spec.w.rank())};
  std::vector<int64_t> dil = DnnlDilations(spec.w);
  for (const std::vector<int64_t>* p : {&spec.w.stride, &dil, &spec.w.pad_begin, &spec.w.pad_end_dnnl})
    st.ints.insert(st.ints.end(), p->begin(), p->end());
  for (int a : absorbed) ctx.Absorb(a);
  ctx.Emit(std::move(st));
  return CheckResult::Ok();
}

}  // namespace

// ---- DequantizeLinear: parameters, and the ones QDQ convolutions read -------------------------------------------

bool CheckDequantizeParams(const Graph& g, const Node& n, std::string* why) {
  if (n.inputs.size() < 2 || n.inputs.size() > 3 || In(n, 0) < 0 || In(n, 1) < 0 || n.outputs.size() != 1)
    return Reject(why, "DequantizeLinear needs 2 or 3 inputs and one output");
  const Value &x = g.v(In(n, 0)), &s = g.v(In(n, 1));
  if (x.dtype != kU8 && x.dtype != kI8 && x.dtype != kI32)
    return Reject(why, "input '" + x.name + "' has element type " + std::to_string(x.dtype) +
                           "; int8, uint8 and int32 are compiled");
  if (s.dtype != kF32) return Reject(why, "scale '" + s.name + "' is not float");
  const int zi = In(n, 2);
  if (zi >= 0 && g.v(zi).dtype != x.dtype)
    return Reject(why, "zero point '" + g.v(zi).name + "' has element type " + std::to_string(g.v(zi).dtype) +
                           ", input '" + x.name + "' " + std::to_string(x.dtype));
  if (n.Int("block_size", 0) != 0) return Reject(why, "blocked dequantization is not compiled");
  if (!x.has_shape || !s.has_shape || (zi >= 0 && !g.v(zi).has_shape)) return Reject(why, "shapes are not static");
  if (zi >= 0 && g.v(zi).dims != s.dims)
    return Reject(why, "zero point '" + g.v(zi).name + "' has shape " + DimsText(g.v(zi).dims) + ", scale '" + s.name +
                           "' " + DimsText(s.dims));
  if (s.numel() == 1 && s.dims.size() <= 1) return true;  // per tensor
  if (s.dims.size() != 1) return Reject(why, "scale '" + s.name + "' is neither one value nor 1-D (per axis)");
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  int64_t axis = n.Int("axis", 1);
  if (axis < -rank || axis >= rank)
    return Reject(why, "axis " + std::to_string(axis) + " is out of range for input '" + x.name + "' of rank " +
                           std::to_string(rank));
  if (axis < 0) axis += rank;
  if (s.dims[0] != x.dims[static_cast<size_t>(axis)])
    return Reject(why, "scale '" + s.name + "' has " + std::to_string(s.dims[0]) + " values; axis " +
                           std::to_string(axis) + " of input '" + x.name + "' has " +
                           std::to_string(x.dims[static_cast<size_t>(axis)]));
  return true;
}

bool DequantizeReadOnlyByQdqConvs(const Graph& g, const Node& dq) {
  if (!IsDq(dq) || dq.outputs.size() != 1 || dq.outputs[0] < 0) return false;
  const int y = dq.outputs[0];
  if (IsGraphOutput(g, y) || g.v(y).consumers.empty()) return false;
  for (int c : g.v(y).consumers) {
    QdqConv m;
    std::string why;
    if (!MatchQdqConv(g, g.nodes[static_cast<size_t>(c)], &m, &why)) return false;
  }
  return true;
}

bool SupportDequantizeLinear(const Graph& g, const Node& n, std::string* why) {
  if (!CheckDequantizeParams(g, n, why)) return false;
  if (DequantizeReadOnlyByQdqConvs(g, n)) return true;
  if (g.v(In(n, 0)).is_const()) return Reject(why, "a constant DequantizeLinear that could not be folded");
  return SupportDequantize(g, n, why);
}

CheckResult LowerDequantizeLinear(LowerContext& ctx, int node) {
  if (DequantizeReadOnlyByQdqConvs(ctx.graph(), ctx.node(node))) return CheckResult::Ok();  // kQConv reads its input
  return LowerDequantize(ctx, node);
}

// ---- Conv: QDQ or float -------------------------------------------------------------------------------------------

bool SupportConvOrQdq(const Graph& g, const Node& n, std::string* why) {
  QdqConv m;
  std::string qwhy;
  if (!MatchQdqConv(g, n, &m, &qwhy)) {
    if (DqProducer(g, In(n, 1)) >= 0)  // quantized weights that do not fit the int8 convolution
      return Reject(why, "a QDQ convolution that is not compiled as int8: " + qwhy);
    return SupportConv(g, n, why);
  }
  ConvSpec spec;
  if (!ResolveConvGeometry(g, n, false, -1, &spec, why)) return false;
  if (spec.dst_dims != g.v(m.yq).dims) return Reject(why, "output shape does not match the convolution");
  if (spec.src_dims.size() < 3 || spec.src_dims.size() > 5) return Reject(why, "spatial rank must be 1..3");
  return true;
}

CheckResult LowerConvOrQdq(LowerContext& ctx, int node) {
  QdqConv m;
  std::string why;
  if (!MatchQdqConv(ctx.graph(), ctx.node(node), &m, &why)) return LowerConv(ctx, node);
  return LowerQdqConv(ctx, node, m);
}

// ---- QuantizeLinear: in the QDQ convolutions' layout -----------------------------------------------------------

bool SupportQuantizeLinear(const Graph& g, const Node& n, std::string* why) { return SupportQuantize(g, n, why); }

CheckResult LowerQuantizeLinear(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  const int x = In(n, 0), y = Out(n, 0);
  const size_t rank = g.v(x).dims.size();
  bool feeds_qconv = false;  // through the DequantizeLinear the QDQ convolutions skip
  if (!IsGraphOutput(g, y))
    for (int c : g.v(y).consumers)
      feeds_qconv = feeds_qconv || DequantizeReadOnlyByQdqConvs(g, g.nodes[static_cast<size_t>(c)]);
  // A padded blocked source (a deconvolution's nChw16c with C not a multiple of 16) would be copied to plain nchw for
  // the elementwise step: channels-last costs the same copy and keeps what follows (a BatchNormalization, the next
  // deconvolution) on oneDNN's channels-last kernels (ppocr_v4_det_qdq's head: a plain BatchNormalization 2.5 ms).
  bool padded = false;
  if (const Operand* cur = ctx.Peek(x); cur && !IsPlain(*cur)) {
    const Md d = DescOfOperand(*cur);
    for (int i = 0; i < d.data.ndims; ++i) padded = padded || d.data.padded_dims[i] != d.data.dims[i];
  }
  if ((!feeds_qconv && !padded) || rank < 3 || rank > 5) return LowerQuantize(ctx, node);
  // The convolution reads u8 channels-last: quantize from (and into) channels-last, so that one reorder of the float
  // source at most (none after a step that wrote channels-last) replaces a plain copy and a copy of the result.
  const uint32_t cl = ChannelsLastTag(rank);
  Operand src = ctx.UseAs(x, F32Desc(g.v(x).dims, cl));
  if (!src.present()) return LowerQuantize(ctx, node);
  Step s;
  s.kind = StepKind::kQuantize;
  s.name = NodeName(ctx, node);
  auto scalar = [&](int v) {
    if (v < 0) return Operand();
    Operand o = ctx.UsePlain(v);
    o.dims = {1};
    o.strides = {1};
    return o;
  };
  const Md dst_md(memory::dims(g.v(y).dims.begin(), g.v(y).dims.end()),
                  g.v(y).dtype == kU8 ? memory::data_type::u8 : memory::data_type::s8,
                  static_cast<memory::format_tag>(cl));
  s.ops = {src, ctx.Define(y, dst_md), scalar(In(n, 1)), scalar(In(n, 2))};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

// ---- kQConv ---------------------------------------------------------------------------------------------------------

CheckResult BuildQConv(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  const Step& s = bc.step();
  if (s.ints.size() < 2) return bc.Fail("expected groups and spatial rank in ints");
  const int64_t groups = s.ints[0], r64 = s.ints[1];
  if (groups < 1) return bc.Fail("groups " + I2S(groups) + " is below 1");
  if (r64 < 1 || r64 > 3) return bc.Fail("spatial rank " + I2S(r64) + " is outside 1..3");
  const size_t r = static_cast<size_t>(r64);
  CheckResult c = bc.ExpectCounts(7, true, 2 + 4 * r, 0);
  if (!c.ok) return c;
  if (!(c = CheckPostOpOperands(bc, 7)).ok) return c;
  if (!InRange(s.ints, 2, r, 1, kMaxWindow)) return bc.Fail("stride out of range");
  if (!InRange(s.ints, 2 + r, r, 0, kMaxWindow)) return bc.Fail("dilation out of range");
  if (!InRange(s.ints, 2 + 2 * r, r, 0, kMaxWindow)) return bc.Fail("pads_begin out of range");
  if (!InRange(s.ints, 2 + 3 * r, r, 0, kMaxWindow)) return bc.Fail("pads_end out of range");
  const Operand &src = s.ops[0], &wts = s.ops[1], &bias = s.ops[2], &dst = s.ops[3], &scales = s.ops[6];
  if (!src.present() || !wts.present() || !dst.present() || !scales.present())
    return bc.Fail("src, weights, dst and scales are required");
  if (src.dtype != kU8 || wts.dtype != kI8 || (dst.dtype != kU8 && dst.dtype != kI8 && dst.dtype != kF32))
    return bc.Fail("a QDQ convolution needs a uint8 src, int8 weights and an 8-bit or float dst");
  if (dst.dtype == kF32 && s.ops[5].present()) return bc.Fail("a float dst has no zero point");
  if (wts.buf != Buf::kWeight || scales.buf != Buf::kWeight)
    return bc.Fail("weights and scales must be weight tensors");
  if (bias.present() && (bias.dtype != kI32 || bias.dims.size() != 1)) return bc.Fail("the bias must be int32 [OC]");
  for (size_t i : {size_t{4}, size_t{5}})
    if (s.ops[i].present() &&
        (s.ops[i].dtype != kI32 || s.ops[i].dims != std::vector<int64_t>{1} || !IsPlain(s.ops[i])))
      return bc.Fail("zero point operand " + I2S(static_cast<int64_t>(i)) + " must be one plain int32");
  std::vector<Md> md(7);
  for (size_t i = 0; i < 7; ++i)
    if (s.ops[i].present() && !(c = bc.Desc(i, &md[i])).ok) return c;
  const int nd = static_cast<int>(r) + 2;
  if (md[0].data.ndims != nd || md[3].data.ndims != nd || md[1].data.ndims != nd + (groups > 1 ? 1 : 0))
    return bc.Fail("operand ranks do not match the spatial rank and groups");
  const memory::dims sd = md[0].dims(), wd = md[1].dims(), dd = md[3].dims();
  const int64_t ocg = groups > 1 ? wd[1] : wd[0], icg = groups > 1 ? wd[2] : wd[1];
  const int64_t oc = ocg * groups;
  if ((groups > 1 && wd[0] != groups) || sd[1] != icg * groups || dd[1] != oc || sd[0] != dd[0])
    return bc.Fail("channel/batch dims inconsistent");
  if (bias.present() && bias.dims[0] != oc) return bc.Fail("the bias has " + I2S(bias.dims[0]) + " values, not OC");
  if (scales.dtype != kF32 || scales.dims != std::vector<int64_t>{oc} || !IsPlain(scales))
    return bc.Fail("the scales must be plain float [OC]");
  const WeightRef sb = bc.WeightBytes(6);
  if (sb.length < static_cast<uint64_t>(oc) * sizeof(float)) return bc.Fail("the scales' weight is too short");
  std::vector<float> sv(static_cast<size_t>(oc));
  std::memcpy(sv.data(), sb.data, sv.size() * sizeof(float));
  for (float v : sv)
    if (!(v > 0.f && std::isfinite(v))) return bc.Fail("a requantization scale is not positive and finite");
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
  attr.set_output_scales(1 << 1, sv);
  if (s.ops[4].present()) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  if (s.ops[5].present()) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
  const memory::dims strides = Slice(s.ints, 2, r), dil = Slice(s.ints, 2 + r, r), pb = Slice(s.ints, 2 + 2 * r, r),
                     pe = Slice(s.ints, 2 + 3 * r, r);
  // The stored weights layout: the one oneDNN chooses here, else (another thread count chose another kernel) the
  // stored layout with the compensation oneDNN asks for, bound explicitly.
  auto make_pd = [&](const Md& w) {
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, md[0],
                                        w, md[2], md[3], strides, dil, pb, pe),
        attr, bc.engine());
  };
  dnnl::convolution_forward::primitive_desc pd;
  Md wc;
  try {
    pd = make_pd(Md(wd, memory::data_type::s8, memory::format_tag::any));
    wc = pd.weights_desc();
    Md plain_part = wc;
    plain_part.data.extra = dnnl_memory_extra_desc_t();
    if (!(plain_part == md[1])) {
      Md want = md[1];
      want.data.extra = wc.data.extra;
      pd = make_pd(want);
      wc = pd.weights_desc();
      plain_part = wc;
      plain_part.data.extra = dnnl_memory_extra_desc_t();
      if (!(plain_part == md[1])) return bc.Fail("the QDQ convolution takes another weights layout than the step's");
    }
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("QDQ convolution: ") + e.what());
  }
  if (!(pd.src_desc() == md[0]) || !(pd.dst_desc() == md[3]))
    return bc.Fail("the QDQ convolution chose other src or dst layouts than the step's operands");
  if (bc.WeightBytes(1).length < wc.get_size())
    return bc.Fail("weights hold " + std::to_string(bc.WeightBytes(1).length) + " bytes; the packed layout needs " +
                   std::to_string(wc.get_size()));
  args.push_back({DNNL_ARG_SRC, bc.Slot(0, md[0])});
  args.push_back({DNNL_ARG_WEIGHTS, bc.Slot(1, wc)});
  if (bias.present()) args.push_back({DNNL_ARG_BIAS, bc.Slot(2, md[2])});
  args.push_back({DNNL_ARG_DST, bc.Slot(3, md[3])});
  if (s.ops[4].present()) args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, bc.Slot(4, md[4])});
  if (s.ops[5].present()) args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, bc.Slot(5, md[5])});
  try {
    out->reset(new PrimitiveExec(dnnl::convolution_forward(pd), std::move(args)));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("QDQ convolution: ") + e.what());
  }
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
