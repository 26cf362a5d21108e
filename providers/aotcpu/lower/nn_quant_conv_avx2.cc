// kConvInt8Avx2 (nn_quant_conv_avx2.h): lowering and builder. The step's operands follow kConvInt8's (src, weights,
// -, dst, zero point, scale, bias, chain operands) with the column sums of the packed weights in kConvInt8's unused
// bias slot, and its ints carry the kernel dims, since the packed bytes do not: groups (1), rank r, kernel[r],
// strides[r], dilations[r] (oneDNN's: ONNX - 1), pads_begin[r], pads_end[r], d.
#include "providers/aotcpu/lower/nn_quant_conv_avx2.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "providers/aotcpu/binary/isa.h"
#include "providers/aotcpu/lower/nn_quant_window.h"
#include "providers/aotcpu/lower/ops.h"
#include "providers/int8gemm/int8_gemm.h"

namespace epctx {
namespace aotcpu {
namespace {

// The post-ops the window-sum epilogue runs (nn_quant_window.h).
bool EpilogueRuns(const PostOp& p) {
  if (p.kind == PostOp::kBinary) return p.alg == dnnl_binary_add || p.alg == dnnl_binary_mul;
  return p.kind == PostOp::kEltwise && p.scale == 1.f &&
         (p.alg == dnnl_eltwise_relu || p.alg == dnnl_eltwise_clip_v2 || p.alg == dnnl_eltwise_linear);
}

class ConvInt8Avx2Exec : public StepExec {
 public:
  ConvInt8Avx2Exec(int8gemm::ConvGeometry conv, WindowGeometry window, int32_t d, int src, int w, int sums, int dst,
                   int zp, std::vector<EpilogueOp> ops, std::vector<int> op_slots)
      : conv_(conv), window_(window), d_(d), src_(src), w_(w), sums_(sums), dst_(dst), zp_(zp), ops_(std::move(ops)),
        op_slots_(std::move(op_slots)) {}
  std::string Impl() const override { return "own:avx2+window_sums"; }
  void Run(RunContext& rc) override {
    const uint8_t* src = static_cast<const uint8_t*>(rc.ptr(src_));
    // A uint8 source's zero point (the reorder of a uint8 value wrote it): its byte, as the epilogue reads it.
    const int32_t xz = zp_ >= 0 ? static_cast<uint8_t>(*static_cast<const int32_t*>(rc.ptr(zp_))) : 0;
    int8gemm::Conv(conv_, src, static_cast<uint8_t>(xz), static_cast<const uint8_t*>(rc.ptr(w_)), true,
                   static_cast<const int32_t*>(rc.ptr(sums_)), static_cast<int32_t*>(rc.ptr(dst_)),
                   omp_get_max_threads());
    std::vector<EpilogueOp> ops = ops_;
    for (size_t i = 0; i < ops.size(); ++i)
      if (op_slots_[i] >= 0) ops[i].data = static_cast<const float*>(rc.ptr(op_slots_[i]));
    ConvInt8WindowEpilogue(window_, src, xz, d_, rc.ptr(dst_), ops);
  }

 private:
  int8gemm::ConvGeometry conv_;
  WindowGeometry window_;
  int32_t d_;
  int src_, w_, sums_, dst_, zp_;
  std::vector<EpilogueOp> ops_;
  std::vector<int> op_slots_;
};

class QConvAvx2Exec : public StepExec {
 public:
  QConvAvx2Exec(int8gemm::ConvGeometry conv, uint32_t dst_dtype, int src, int w, int sums, int dst, int src_zp,
                int dst_zp, int scales, int bias, std::vector<EpilogueOp> ops, std::vector<int> op_slots)
      : conv_(conv), dst_dtype_(dst_dtype), src_(src), w_(w), sums_(sums), dst_(dst), src_zp_(src_zp),
        dst_zp_(dst_zp), scales_(scales), bias_(bias), ops_(std::move(ops)), op_slots_(std::move(op_slots)) {}
  std::string Impl() const override { return "own:avx2+requant"; }
  void Run(RunContext& rc) override {
    const uint8_t* src = static_cast<const uint8_t*>(rc.ptr(src_));
    const int32_t xz = src_zp_ >= 0 ? *static_cast<const int32_t*>(rc.ptr(src_zp_)) : 0;
    const int32_t yz = dst_zp_ >= 0 ? *static_cast<const int32_t*>(rc.ptr(dst_zp_)) : 0;
    const int64_t positions = conv_.n * conv_.out[0] * conv_.out[1] * conv_.out[2];
    // A float dst holds the int32 sums in place; an 8-bit one needs them beside it (kept per calling thread).
    int32_t* acc = static_cast<int32_t*>(rc.ptr(dst_));
    if (dst_dtype_ != 1) {
      thread_local std::vector<int32_t> scratch;
      scratch.resize(static_cast<size_t>(positions * conv_.oc));
      acc = scratch.data();
    }
    int8gemm::Conv(conv_, src, static_cast<uint8_t>(xz), static_cast<const uint8_t*>(rc.ptr(w_)), true,
                   static_cast<const int32_t*>(rc.ptr(sums_)), acc, omp_get_max_threads());
    std::vector<EpilogueOp> ops = ops_;
    for (size_t i = 0; i < ops.size(); ++i)
      if (op_slots_[i] >= 0) ops[i].data = static_cast<const float*>(rc.ptr(op_slots_[i]));
    QConvEpilogue(acc, positions, conv_.oc, bias_ >= 0 ? static_cast<const int32_t*>(rc.ptr(bias_)) : nullptr,
                  static_cast<const float*>(rc.ptr(scales_)), ops, dst_dtype_, yz, rc.ptr(dst_));
  }

 private:
  int8gemm::ConvGeometry conv_;
  uint32_t dst_dtype_;  // 1 f32, 2 u8, 3 i8 (ONNX codes)
  int src_, w_, sums_, dst_, src_zp_, dst_zp_, scales_, bias_;
  std::vector<EpilogueOp> ops_;
  std::vector<int> op_slots_;
};

}  // namespace

CheckResult AddOwnConvWeights(LowerContext& ctx, int node, int weights_value, const ConvSpec& spec, const int8_t* w,
                              int8gemm::ConvGeometry* geom, Operand* w_op, Operand* sums_op) {
  const size_t r = spec.w.rank();
  int8gemm::ConvGeometry g;
  g.n = spec.src_dims[0];
  g.c = spec.ic;
  g.oc = spec.oc;
  const size_t lead = 3 - r;
  for (size_t i = 0; i < r; ++i) {
    g.in[lead + i] = spec.src_dims[2 + i];
    g.out[lead + i] = spec.dst_dims[2 + i];
    g.kernel[lead + i] = spec.w.kernel[i];
    g.stride[lead + i] = spec.w.stride[i];
    g.dilation[lead + i] = spec.w.dilation[i];
    g.pad_begin[lead + i] = spec.w.pad_begin[i];
  }
  std::string packed(int8gemm::PackedConvWeightsSize(g), '\0');
  std::vector<int32_t> sums(static_cast<size_t>(g.oc));
  int8gemm::PackConvWeights(g, w, true, reinterpret_cast<uint8_t*>(&packed[0]), sums.data());
  const int64_t packed_len = static_cast<int64_t>(packed.size());
  CheckResult rc = ctx.AddWeight(WeightName(ctx, node, weights_value, "int8gemm"), std::move(packed),
                                 PlainDesc({packed_len}, kU8), w_op);
  if (!rc.ok) return rc;
  std::string sum_bytes(sums.size() * 4, '\0');
  std::memcpy(&sum_bytes[0], sums.data(), sum_bytes.size());
  rc = ctx.AddWeight(WeightName(ctx, node, weights_value, "int8gemm_sums"), std::move(sum_bytes),
                     PlainDesc({g.oc}, kI32), sums_op);
  if (!rc.ok) return rc;
  *geom = g;
  return CheckResult::Ok();
}

size_t EpilogueChainLength(const std::vector<FusedOp>& chain, const std::vector<Md>& other_mds, const Md& dst) {
  size_t k = 0;
  for (; k < chain.size(); ++k) {
    const FusedOp& f = chain[k];
    bool runs = f.other < 0 || SameLayout(other_mds[k], dst);
    for (const PostOp& q : f.pos) runs = runs && EpilogueRuns(q);
    if (!runs) break;
  }
  return k;
}

bool OwnInt8Conv(const CompileOptions& options) {
  if (Int8ProductsExact(options)) return false;
  Isa isa;
  if (ParseIsa(options.isa, &isa)) return isa >= Isa::kAvx2;
  return int8gemm::Available();
}

namespace {
int32_t WeightAt(const Value& wv, int64_t i) {
  return wv.dtype == kU8 ? int32_t{static_cast<const uint8_t*>(wv.data)[i]}
                         : int32_t{static_cast<const int8_t*>(wv.data)[i]};
}
}  // namespace

int32_t WeightShift(const Value& wv, int32_t wz) {
  int32_t rmin = 255, rmax = -128;
  for (int64_t i = 0; i < wv.numel(); ++i) {
    const int32_t w = WeightAt(wv, i);
    rmin = std::min(rmin, w);
    rmax = std::max(rmax, w);
  }
  return std::min(std::max(wz, rmax - 127), rmin + 128);
}

void ShiftWeights(const Value& wv, int32_t shift, int8_t* s) {
  for (int64_t i = 0; i < wv.numel(); ++i) s[i] = static_cast<int8_t>(WeightAt(wv, i) - shift);
}

CheckResult LowerConvInt8Avx2(LowerContext& ctx, int node, const ConvSpec& spec, const Int8Tail& tail, const Value& wv,
                              int32_t wz, const ConvInt8Avx2Plan& plan) {
  const Node& n = ctx.node(node);
  const size_t r = spec.w.rank(), rank = r + 2;
  // Stored once as s = w - shift in int8; the step adds d = shift - wz times the window sums.
  const int32_t shift = WeightShift(wv, wz);
  std::vector<int8_t> s(static_cast<size_t>(wv.numel()));
  ShiftWeights(wv, shift, s.data());
  int8gemm::ConvGeometry g;
  Operand w_op, sums_op;
  CheckResult rc = AddOwnConvWeights(ctx, node, In(n, 1), spec, s.data(), &g, &w_op, &sums_op);
  if (!rc.ok) return rc;

  // The chain entries the epilogue runs: up to the first it does not, or whose operand is not in dst's layout.
  const Md dst = F32Desc(spec.dst_dims, ChannelsLastTag(rank));
  const size_t k = EpilogueChainLength(plan.chain, plan.other_mds, dst);

  Step st;
  st.kind = StepKind::kConvInt8Avx2;
  std::vector<int> absorbed = {tail.cast, tail.mul};
  if (plan.bias_node >= 0) absorbed.push_back(plan.bias_node);
  for (size_t i = 0; i < k; ++i) absorbed.push_back(plan.chain[i].node);
  st.name = JoinNames(ctx, node, absorbed);
  std::vector<int64_t> ones(rank, 1), per_channel(rank, 1);
  per_channel[1] = spec.oc;
  Operand scale_op = ctx.UsePlain(tail.scale);
  scale_op.dims = ones;
  scale_op.strides = ones;
  st.ops = {plan.src, w_op, sums_op, Operand(), plan.zp, scale_op};
  st.post_ops = {plan.first[0]};
  if (plan.bias) {
    std::string bytes(reinterpret_cast<const char*>(plan.bias), static_cast<size_t>(spec.oc) * sizeof(float));
    Operand bop;
    if (!(rc = ctx.AddWeight(WeightName(ctx, node, In(n, 1), "bias"), std::move(bytes), PlainDesc(per_channel, kF32),
                             &bop))
             .ok)
      return rc;
    st.ops.push_back(bop);
    st.post_ops.push_back(plan.first[1]);
  }
  if (!(rc = AppendPostOps(ctx, node, plan.chain, k, plan.other_mds, &st)).ok) return rc;
  const int final_value = k == 0 ? plan.cur : plan.chain[k - 1].out;
  st.ops[3] = ctx.Define(final_value, dst);
  st.ints = {1, static_cast<int64_t>(r)};
  const std::vector<int64_t> dil = DnnlDilations(spec.w);
  for (const std::vector<int64_t>* v : {&spec.w.kernel, &spec.w.stride, &dil, &spec.w.pad_begin, &spec.w.pad_end_dnnl})
    st.ints.insert(st.ints.end(), v->begin(), v->end());
  st.ints.push_back(shift - wz);
  for (int a : absorbed) ctx.Absorb(a);
  ctx.Emit(std::move(st));
  return CheckResult::Ok();
}

CheckResult WindowEpilogueOps(BuildContext& bc, const memory::dims& dd, const Md& dst_md, std::vector<EpilogueOp>* ops,
                              std::vector<int>* slots, size_t first_post_op) {
  const Step& s = bc.step();
  for (size_t pi = first_post_op; pi < s.post_ops.size(); ++pi) {
    const PostOp& p = s.post_ops[pi];
    EpilogueOp e;
    int slot = -1;
    if (p.kind == PostOp::kEltwise) {
      if (p.scale != 1.f) return bc.Fail("an eltwise post-op with a scale is not run by the window-sum epilogue");
      if (p.alg == dnnl_eltwise_relu) e.kind = EpilogueOp::kRelu;
      else if (p.alg == dnnl_eltwise_clip_v2) e.kind = EpilogueOp::kClip;
      else if (p.alg == dnnl_eltwise_linear) e.kind = EpilogueOp::kLinear;
      else return bc.Fail("eltwise algorithm " + I2S(p.alg) + " is not run by the window-sum epilogue");
      e.alpha = p.alpha;
      e.beta = p.beta;
    } else if (p.kind == PostOp::kBinary) {
      if (p.alg == dnnl_binary_add) e.kind = EpilogueOp::kAdd;
      else if (p.alg == dnnl_binary_mul) e.kind = EpilogueOp::kMul;
      else return bc.Fail("binary algorithm " + I2S(p.alg) + " is not run by the window-sum epilogue");
      const Operand& o = s.ops[p.operand];
      Md od;
      CheckResult c = bc.Desc(p.operand, &od);
      if (!c.ok) return c;
      if (o.dtype != kF32) return bc.Fail("binary post-op operand " + I2S(p.operand) + " is not float");
      std::vector<int64_t> per_channel(dd.size(), 1);
      per_channel[1] = dd[1];
      if (o.dims == std::vector<int64_t>(dd.size(), 1)) e.operand = EpilogueOp::kScalar;
      else if (o.dims == per_channel && IsPlain(o)) e.operand = EpilogueOp::kChannel;
      else if (o.dims == std::vector<int64_t>(dd.begin(), dd.end()) && SameLayout(od, dst_md))
        e.operand = EpilogueOp::kFull;
      else return bc.Fail("binary post-op operand " + I2S(p.operand) + " is neither one value, one per channel, nor "
                          "in the destination's layout");
      slot = bc.Slot(p.operand, od);
    } else {
      return bc.Fail("post-op kind " + I2S(p.kind) + " is not run by the window-sum epilogue");
    }
    ops->push_back(e);
    slots->push_back(slot);
  }
  return CheckResult::Ok();
}

CheckResult BuildConvInt8Avx2(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  const Step& s = bc.step();
  if (s.ints.size() < 2) return bc.Fail("expected groups and spatial rank in ints");
  if (s.ints[0] != 1) return bc.Fail("int8 convolution groups " + I2S(s.ints[0]) + " is not 1");
  const int64_t r64 = s.ints[1];
  if (r64 < 1 || r64 > 3) return bc.Fail("spatial rank " + I2S(r64) + " is outside 1..3");
  const size_t r = static_cast<size_t>(r64);
  CheckResult c = bc.ExpectCounts(6, true, 2 + 5 * r + 1, 0);
  if (!c.ok) return c;
  if (!int8gemm::Available()) return bc.Fail("this step runs on AVX2, which this CPU does not have; recompile the model");
  const int64_t d = s.ints.back();
  if (d < -255 || d > 255) return bc.Fail("weight correction " + I2S(d) + " is outside -255..255");
  if (!(c = CheckPostOpOperands(bc, 5)).ok) return c;
  if (!InRange(s.ints, 2, r, 1, kMaxWindow)) return bc.Fail("kernel out of range");
  if (!InRange(s.ints, 2 + r, r, 1, kMaxWindow)) return bc.Fail("stride out of range");
  if (!InRange(s.ints, 2 + 2 * r, r, 0, kMaxWindow)) return bc.Fail("dilation out of range");
  if (!InRange(s.ints, 2 + 3 * r, r, 0, kMaxWindow)) return bc.Fail("pads_begin out of range");
  if (!InRange(s.ints, 2 + 4 * r, r, 0, kMaxWindow)) return bc.Fail("pads_end out of range");
  const Operand &src = s.ops[0], &w = s.ops[1], &sums = s.ops[2], &dst = s.ops[3], &zp = s.ops[4];
  if (!src.present() || !w.present() || !sums.present() || !dst.present() || !s.ops[5].present())
    return bc.Fail("src, weights, column sums, dst and scale are required");
  if (src.dtype != kU8 || w.dtype != kU8 || sums.dtype != kI32 || dst.dtype != kF32)
    return bc.Fail("needs a uint8 src, uint8 packed weights, int32 column sums and a float dst");
  if (w.buf != Buf::kWeight || sums.buf != Buf::kWeight) return bc.Fail("weights and column sums must be weights");
  if (s.post_ops.empty() || s.post_ops[0].kind != PostOp::kBinary || s.post_ops[0].alg != dnnl_binary_mul ||
      s.post_ops[0].operand != 5)
    return bc.Fail("the first post-op must be the scale Mul by operand 5");
  if (zp.present() && (zp.dtype != kI32 || !IsPlain(zp) || zp.dims != std::vector<int64_t>(zp.dims.size(), 1) || zp.dims.empty()))
    return bc.Fail("the zero point must be one plain int32");
  std::vector<Md> md(5);
  for (size_t i = 0; i < 5; ++i)
    if (s.ops[i].present() && !(c = bc.Desc(i, &md[i])).ok) return c;
  const int nd = static_cast<int>(r) + 2;
  if (md[0].data.ndims != nd || md[3].data.ndims != nd) return bc.Fail("src and dst ranks do not match the spatial rank");
  const memory::dims sd = md[0].dims(), dd = md[3].dims();
  const auto cl = static_cast<memory::format_tag>(ChannelsLastTag(r + 2));
  if (!SameLayout(md[0], Md(sd, memory::data_type::u8, cl))) return bc.Fail("the source must be dense channels-last");
  if (!SameLayout(md[3], Md(dd, memory::data_type::f32, cl)))
    return bc.Fail("the destination must be dense channels-last");
  if (sd[0] != dd[0]) return bc.Fail("src and dst batch differ");
  int8gemm::ConvGeometry g;
  WindowGeometry wg;
  g.n = wg.n = sd[0];
  g.c = wg.c = sd[1];
  g.oc = wg.oc = dd[1];
  const size_t lead = 3 - r;
  for (size_t i = 0; i < r; ++i) {
    const int64_t kernel = s.ints[2 + i], stride = s.ints[2 + r + i], dil = s.ints[2 + 2 * r + i] + 1,
                  pb = s.ints[2 + 3 * r + i], pe = s.ints[2 + 4 * r + i];
    const int64_t span = (kernel - 1) * dil + 1, padded = sd[2 + i] + pb + pe;
    if (padded < span || (padded - span) / stride + 1 != dd[2 + i])
      return bc.Fail("spatial dim " + I2S(static_cast<int64_t>(i)) + ": source " + I2S(sd[2 + i]) + ", kernel " +
                     I2S(kernel) + ", stride " + I2S(stride) + ", dilation " + I2S(dil) + " and pads " + I2S(pb) +
                     "/" + I2S(pe) + " do not give the destination's " + I2S(dd[2 + i]));
    g.in[lead + i] = wg.in[lead + i] = sd[2 + i];
    g.out[lead + i] = wg.out[lead + i] = dd[2 + i];
    g.kernel[lead + i] = wg.kernel[lead + i] = kernel;
    g.stride[lead + i] = wg.stride[lead + i] = stride;
    g.dilation[lead + i] = wg.dilation[lead + i] = dil;
    g.pad_begin[lead + i] = wg.pad_begin[lead + i] = pb;
  }
  // One im2col row per output position is widened per block of rows: bound its length (each factor is, so the
  // product is computed without overflow).
  constexpr int64_t kMaxRow = int64_t{1} << 20;
  int64_t k = g.c;
  for (int i = 0; i < 3 && k <= kMaxRow; ++i) k *= g.kernel[i];
  if (k > kMaxRow) return bc.Fail("a window of more than " + I2S(kMaxRow) + " values is too long for this step");
  if (w.dims.size() != 1 || w.dims[0] != static_cast<int64_t>(int8gemm::PackedConvWeightsSize(g)) ||
      sums.dims != std::vector<int64_t>{g.oc} || !IsPlain(w) || !IsPlain(sums))
    return bc.Fail("weights hold " + DimsText(w.dims) + " bytes and " + DimsText(sums.dims) + " column sums; " +
                   I2S(g.oc) + " filters of " + I2S(k) + " values need [" +
                   I2S(static_cast<int64_t>(int8gemm::PackedConvWeightsSize(g))) + "] and [" + I2S(g.oc) + "]");
  // The epilogue's ops: the scale, the bias, the chain (as BuildConvInt8's shifted form).
  std::vector<EpilogueOp> ops;
  std::vector<int> op_slots;
  if (!(c = WindowEpilogueOps(bc, dd, md[3], &ops, &op_slots)).ok) return c;
  const int src_slot = bc.Slot(0, md[0]), w_slot = bc.Slot(1, md[1]), sums_slot = bc.Slot(2, md[2]),
            dst_slot = bc.Slot(3, md[3]);
  const int zp_slot = zp.present() ? bc.Slot(4, md[4]) : -1;
  *out = std::make_unique<ConvInt8Avx2Exec>(g, wg, static_cast<int32_t>(d), src_slot, w_slot, sums_slot, dst_slot,
                                            zp_slot, std::move(ops), std::move(op_slots));
  return CheckResult::Ok();
}

// kQConvAvx2: ops src, weights, column sums, dst, src zp, dst zp, scales, bias, post-op operands; ints groups (1),
// r, kernel[r], strides[r], dilations[r], pads_begin[r], pads_end[r].
CheckResult BuildQConvAvx2(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  const Step& s = bc.step();
  if (s.ints.size() < 2) return bc.Fail("expected groups and spatial rank in ints");
  if (s.ints[0] != 1) return bc.Fail("QDQ convolution groups " + I2S(s.ints[0]) + " is not 1");
  const int64_t r64 = s.ints[1];
  if (r64 < 1 || r64 > 3) return bc.Fail("spatial rank " + I2S(r64) + " is outside 1..3");
  const size_t r = static_cast<size_t>(r64);
  CheckResult c = bc.ExpectCounts(8, true, 2 + 5 * r, 0);
  if (!c.ok) return c;
  if (!int8gemm::Available()) return bc.Fail("this step runs on AVX2, which this CPU does not have; recompile the model");
  if (!(c = CheckPostOpOperands(bc, 8)).ok) return c;
  if (!InRange(s.ints, 2, r, 1, kMaxWindow)) return bc.Fail("kernel out of range");
  if (!InRange(s.ints, 2 + r, r, 1, kMaxWindow)) return bc.Fail("stride out of range");
  if (!InRange(s.ints, 2 + 2 * r, r, 0, kMaxWindow)) return bc.Fail("dilation out of range");
  if (!InRange(s.ints, 2 + 3 * r, r, 0, kMaxWindow)) return bc.Fail("pads_begin out of range");
  if (!InRange(s.ints, 2 + 4 * r, r, 0, kMaxWindow)) return bc.Fail("pads_end out of range");
  const Operand &src = s.ops[0], &w = s.ops[1], &sums = s.ops[2], &dst = s.ops[3], &scales = s.ops[6],
                &bias = s.ops[7];
  if (!src.present() || !w.present() || !sums.present() || !dst.present() || !scales.present())
    return bc.Fail("src, weights, column sums, dst and scales are required");
  if (src.dtype != kU8 || w.dtype != kU8 || sums.dtype != kI32 ||
      (dst.dtype != kU8 && dst.dtype != kI8 && dst.dtype != kF32))
    return bc.Fail("needs a uint8 src, uint8 packed weights, int32 column sums and an 8-bit or float dst");
  if (dst.dtype == kF32 && s.ops[5].present()) return bc.Fail("a float dst has no zero point");
  if (w.buf != Buf::kWeight || sums.buf != Buf::kWeight || scales.buf != Buf::kWeight ||
      (bias.present() && bias.buf != Buf::kWeight))
    return bc.Fail("weights, column sums, scales and bias must be weights");
  for (size_t i : {size_t{4}, size_t{5}})
    if (s.ops[i].present() &&
        (s.ops[i].dtype != kI32 || s.ops[i].dims != std::vector<int64_t>{1} || !IsPlain(s.ops[i])))
      return bc.Fail("zero point operand " + I2S(static_cast<int64_t>(i)) + " must be one plain int32");
  if (s.post_ops.empty() || s.post_ops[0].kind != PostOp::kEltwise || s.post_ops[0].alg != dnnl_eltwise_round ||
      s.post_ops[0].scale != 1.f)
    return bc.Fail("the first post-op must be the round half to even");
  if (dst.dtype != kF32 && s.post_ops.size() != 1) return bc.Fail("an 8-bit dst takes no post-op after the round");
  std::vector<Md> md(4);
  for (size_t i = 0; i < 4; ++i)
    if (!(c = bc.Desc(i, &md[i])).ok) return c;
  const int nd = static_cast<int>(r) + 2;
  if (md[0].data.ndims != nd || md[3].data.ndims != nd) return bc.Fail("src and dst ranks do not match the spatial rank");
  const memory::dims sd = md[0].dims(), dd = md[3].dims();
  const auto cl = static_cast<memory::format_tag>(ChannelsLastTag(r + 2));
  if (!SameLayout(md[0], Md(sd, memory::data_type::u8, cl))) return bc.Fail("the source must be dense channels-last");
  if (!SameLayout(md[3], Md(dd, md[3].data_type(), cl))) return bc.Fail("the destination must be dense channels-last");
  if (sd[0] != dd[0]) return bc.Fail("src and dst batch differ");
  int8gemm::ConvGeometry g;
  g.n = sd[0];
  g.c = sd[1];
  g.oc = dd[1];
  const size_t lead = 3 - r;
  for (size_t i = 0; i < r; ++i) {
    const int64_t kernel = s.ints[2 + i], stride = s.ints[2 + r + i], dil = s.ints[2 + 2 * r + i] + 1,
                  pb = s.ints[2 + 3 * r + i], pe = s.ints[2 + 4 * r + i];
    const int64_t span = (kernel - 1) * dil + 1, padded = sd[2 + i] + pb + pe;
    if (padded < span || (padded - span) / stride + 1 != dd[2 + i])
      return bc.Fail("spatial dim " + I2S(static_cast<int64_t>(i)) + ": source " + I2S(sd[2 + i]) + ", kernel " +
                     I2S(kernel) + ", stride " + I2S(stride) + ", dilation " + I2S(dil) + " and pads " + I2S(pb) +
                     "/" + I2S(pe) + " do not give the destination's " + I2S(dd[2 + i]));
    g.in[lead + i] = sd[2 + i];
    g.out[lead + i] = dd[2 + i];
    g.kernel[lead + i] = kernel;
    g.stride[lead + i] = stride;
    g.dilation[lead + i] = dil;
    g.pad_begin[lead + i] = pb;
  }
  constexpr int64_t kMaxRow = int64_t{1} << 20;
  int64_t k = g.c;
  for (int i = 0; i < 3 && k <= kMaxRow; ++i) k *= g.kernel[i];
  if (k > kMaxRow) return bc.Fail("a window of more than " + I2S(kMaxRow) + " values is too long for this step");
  const std::vector<int64_t> per_oc = {g.oc};
  if (w.dims.size() != 1 || w.dims[0] != static_cast<int64_t>(int8gemm::PackedConvWeightsSize(g)) ||
      sums.dims != per_oc || !IsPlain(w) || !IsPlain(sums))
    return bc.Fail("weights hold " + DimsText(w.dims) + " bytes and " + DimsText(sums.dims) + " column sums; " +
                   I2S(g.oc) + " filters of " + I2S(k) + " values need [" +
                   I2S(static_cast<int64_t>(int8gemm::PackedConvWeightsSize(g))) + "] and [" + I2S(g.oc) + "]");
  if (scales.dtype != kF32 || scales.dims != per_oc || !IsPlain(scales))
    return bc.Fail("the scales must be plain float [OC]");
  if (bias.present() && (bias.dtype != kI32 || bias.dims != per_oc || !IsPlain(bias)))
    return bc.Fail("the bias must be plain int32 [OC]");
  const WeightRef sb = bc.WeightBytes(6);
  if (sb.length < static_cast<uint64_t>(g.oc) * sizeof(float)) return bc.Fail("the scales' weight is too short");
  for (int64_t o = 0; o < g.oc; ++o) {
    float v;
    std::memcpy(&v, static_cast<const char*>(sb.data) + o * sizeof(float), sizeof(float));
    if (!(v > 0.f && std::isfinite(v))) return bc.Fail("a requantization scale is not positive and finite");
  }
  std::vector<EpilogueOp> ops;
  std::vector<int> op_slots;
  if (!(c = WindowEpilogueOps(bc, dd, md[3], &ops, &op_slots, 1)).ok) return c;
  std::vector<Md> extra(4);
  for (size_t i = 4; i < 8; ++i)
    if (s.ops[i].present() && !(c = bc.Desc(i, &extra[i - 4])).ok) return c;
  auto slot = [&](size_t i) { return s.ops[i].present() ? bc.Slot(i, extra[i - 4]) : -1; };
  const uint32_t dst_dtype = dst.dtype == kF32 ? 1u : dst.dtype == kU8 ? 2u : 3u;
  *out = std::make_unique<QConvAvx2Exec>(g, dst_dtype, bc.Slot(0, md[0]), bc.Slot(1, md[1]), bc.Slot(2, md[2]),
                                         bc.Slot(3, md[3]), slot(4), slot(5), slot(6), slot(7), std::move(ops),
                                         std::move(op_slots));
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
