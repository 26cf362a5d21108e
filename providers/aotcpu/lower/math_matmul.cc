// MatMul: support check, lowering (with a bias Add and post-ops absorbed, Transposes read as strides) and its step
// builder (see ops.h, and math_common.h for the post-op chain).
#include "providers/aotcpu/lower/math_common.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace epctx {
namespace aotcpu {

namespace {

bool IsPlainStrided(const Operand& op) {
  Dims s;
  return PlainStrides(op, &s);
}

// A plain strided operand with size-1 dims inserted in front up to `rank`.
Operand PaddedTo(const Operand& op, size_t rank) {
  Dims s;
  PlainStrides(op, &s);
  Operand r = op;
  if (op.dims.size() >= rank && !op.dims.empty()) {
    r.tag = 0;
    r.strides = s;
    return r;
  }
  int64_t outer = 1;
  for (size_t i = 0; i < s.size(); ++i) outer = std::max(outer, s[i] * std::max<int64_t>(op.dims[i], 1));
  r.dims = PadLeft(op.dims, rank);
  r.strides.assign(rank - op.dims.size(), outer);
  r.strides.insert(r.strides.end(), s.begin(), s.end());
  r.tag = 0;
  return r;
}

// MatMul compute shapes (ONNX 1-D promotion, numpy batch broadcast).
struct MatMulShape {
  Dims a, b, c;        // rank-r operand dims (a: [.., M, K], b: [.., K, N], c: [.., M, N])
  bool a_vec = false;  // A was 1-D (M removed from the ONNX result)
  bool b_vec = false;  // B was 1-D (N removed)
};

bool MatMulShapes(const Dims& ad, const Dims& bd, MatMulShape* s, std::string* why) {
  if (ad.empty() || bd.empty()) return Reject(why, "MatMul operands must have rank >= 1");
  s->a_vec = ad.size() == 1;
  s->b_vec = bd.size() == 1;
  Dims a = s->a_vec ? Dims{1, ad[0]} : ad;
  Dims b = s->b_vec ? Dims{bd[0], 1} : bd;
  size_t r = std::max(a.size(), b.size());
  if (r > kMaxRank) return Reject(why, "rank above " + std::to_string(kMaxRank));
  a = PadLeft(a, r);
  b = PadLeft(b, r);
  if (a[r - 1] != b[r - 2]) return Reject(why, "inner dims differ: " + DimsText(ad) + " x " + DimsText(bd));
  Dims c(r);
  for (size_t i = 0; i + 2 < r; ++i) {
    if (a[i] != b[i] && a[i] != 1 && b[i] != 1)
      return Reject(why, "batch dims do not broadcast: " + DimsText(ad) + " x " + DimsText(bd));
    c[i] = std::max(a[i], b[i]);
  }
  c[r - 2] = a[r - 2];
  c[r - 1] = b[r - 1];
  s->a = a;
  s->b = b;
  s->c = c;
  return true;
}

// ONNX result dims of a MatMul from its compute dims.
Dims OnnxMatMulDims(const MatMulShape& s) {
  Dims y(s.c.begin(), s.c.end() - 2);
  if (!s.a_vec) y.push_back(s.c[s.c.size() - 2]);
  if (!s.b_vec) y.push_back(s.c.back());
  return y;
}

// ONNX dims of a tensor broadcast against the MatMul result -> the same tensor in rank-r compute dims.
Dims ToComputeDims(const MatMulShape& s, const Dims& od) {
  Dims y = OnnxMatMulDims(s);
  Dims p = PadLeft(od, y.size());
  if (s.a_vec && s.b_vec) {
    p.push_back(1);
    p.push_back(1);
  } else if (s.a_vec) {
    p.insert(p.end() - 1, 1);
  } else if (s.b_vec) {
    p.push_back(1);
  }
  return p;
}

}  // namespace

// ---- MatMul -----------------------------------------------------------------------------------------------------

bool SupportMatMul(const Graph& g, const Node& n, std::string* why) {
  if (!StaticFloatTensors(g, n, why)) return false;
  if (n.inputs.size() != 2 || n.outputs.size() != 1) return Reject(why, "MatMul needs 2 inputs and 1 output");
  MatMulShape s;
  if (!MatMulShapes(g.v(n.inputs[0]).dims, g.v(n.inputs[1]).dims, &s, why)) return false;
  if (OnnxMatMulDims(s) != g.v(n.outputs[0]).dims) return Reject(why, "output shape does not match the inputs");
  if (Numel(s.c) == 0 || s.a.back() == 0) return Reject(why, "empty tensor");
  return true;
}

namespace {
// The permutation of a Transpose node of rank `rank` (default: reversed axes); false when it is not one.
bool TransposePerm(const Node& n, size_t rank, std::vector<int64_t>* perm) {
  if (!IsOnnx(n) || n.op != "Transpose" || n.outputs.empty()) return false;
  return TransposePermutation(n, rank, perm);
}

}  // namespace

CheckResult LowerMatMul(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  const int a = n.inputs[0], b = n.inputs[1];
  int y = n.outputs[0];
  MatMulShape s;
  std::string why;
  if (!MatMulShapes(g.v(a).dims, g.v(b).dims, &s, &why)) return ctx.Fail(node, why);
  const size_t r = s.c.size();
  const bool b_const = g.v(b).is_const();
  const bool pack = b_const && !ctx.options().portable_layouts;

  // Operands: plain strided views (a deferred Transpose, see LowerContext::DefineView) are read in place.
  auto take = [&](int v) {
    if (const Operand* view = ctx.PeekView(v)) return *view;
    const Operand* p = ctx.Peek(v);
    return (p && IsPlainStrided(*p)) ? ctx.Use(v) : ctx.UsePlain(v);
  };
  Operand a_op = take(a);
  Operand b_op;
  if (!pack) b_op = take(b);

  // A 2-D B against a row-major A: one [M', K] x [K, N] product (better kernels, weights packed for 2-D).
  const bool b_2d = g.v(b).dims.size() <= 2;
  bool flatten = false;
  Operand av, bv;
  Dims cd, wd;
  auto views = [&]() {
    flatten = b_2d && IsRowMajor(a_op);
    const int64_t k = s.a[r - 1];
    if (flatten) {
      av = Reshaped(a_op, {Numel(s.a) / k, k});
      cd = {Numel(s.a) / k, s.c[r - 1]};
      wd = {k, s.c[r - 1]};
    } else {
      Operand a2 = s.a_vec ? PaddedTo(a_op, 2) : a_op;  // [K] -> [1, K]
      av = PaddedTo(a2, r);
      cd = s.c;
      wd = s.b;
    }
    if (!pack) {
      Operand b2 = b_op;
      if (s.b_vec) {  // [K] -> [K, 1]
        Dims st;
        PlainStrides(b_op, &st);
        b2.dims = {k, 1};
        b2.tag = 0;
        b2.strides = {st.empty() ? 1 : st[0], 1};
      }
      bv = PaddedTo(b2, flatten ? 2 : r);
    }
  };
  views();

  // Bias: a constant Add broadcast along the last dim only.
  int bias_node = -1, bias_value = -1;
  {
    int c = ctx.SoleConsumer(y);
    if (c >= 0 && !ctx.IsAbsorbed(c) && !s.b_vec) {
      const Node& m = ctx.node(c);
      int other = OtherInput(m, y);
      if (IsOnnx(m) && m.op == "Add" && other >= 0 && g.v(other).is_const() && g.v(other).dtype == kF32 &&
          g.v(other).has_shape && SameF32Shape(g, Out0(m), g.v(y).dims) && BroadcastsTo(g.v(other).dims, g.v(y).dims)) {
        Dims p = PadLeft(g.v(other).dims, g.v(y).dims.size());
        bool last_only = true;
        for (size_t i = 0; i + 1 < p.size(); ++i) last_only = last_only && p[i] == 1;
        if (last_only && Numel(p) == s.c.back()) {  // a per-column bias (a scalar becomes an eltwise post-op)
          bias_node = c;
          bias_value = other;
        }
      }
    }
  }

  const int chain_root = bias_node >= 0 ? Out0(ctx.node(bias_node)) : y;
  Dims bias_dims;
  dnnl::engine& eng = ctx.engine();
  memory::desc weights_chosen;
  // In a weight-sharing group, the layout another graph packed this weight into comes first (equal packed bytes
  // are stored once); it is kept only where oneDNN runs it with an optimized kernel.
  memory::desc preferred;
  bool use_preferred = pack && ctx.PreferredLayout(g.v(b).name + ":packed", g.v(b).data, PlainDesc(wd, kF32), &preferred);
  auto make_pd = [&](const std::vector<PostOp>& post_ops, const std::vector<Operand>& ops) -> int {
    try {
      dnnl::primitive_attr attr;
      if (!TrialAttr(post_ops, ops, &attr)) return 0;
      memory::desc src_d, w_d, dst_d;
      if (!OperandDesc(ops[0], &src_d).ok || !OperandDesc(ops[3], &dst_d).ok) return 0;
      if (pack)
        w_d = use_preferred ? preferred
                            : memory::desc(memory::dims(wd.begin(), wd.end()), memory::data_type::f32,
                                           memory::format_tag::any);
      else if (!OperandDesc(ops[1], &w_d).ok) return 0;
      std::unique_ptr<dnnl::matmul::desc> md;
      if (bias_value >= 0)
        md.reset(new dnnl::matmul::desc(src_d, w_d, StridedDesc(bias_dims, RowMajorStrides(bias_dims)), dst_d));
      else md.reset(new dnnl::matmul::desc(src_d, w_d, dst_d));
      dnnl::matmul::primitive_desc pd(*md, attr, eng);
      weights_chosen = pd.weights_desc();
      return IsRefImpl(pd) ? 1 : 2;
    } catch (const dnnl::error&) {
      return 0;
    }
  };
  auto set_bias_dims = [&]() {
    bias_dims.assign(cd.size(), 1);
    if (bias_value >= 0) bias_dims.back() = Numel(g.v(bias_value).dims);
  };
  set_bias_dims();
  std::vector<Operand> base = {av, bv, Operand(), FakePlain(cd)};
  // Strided views the optimized kernels cannot read are copied to plain first.
  if (use_preferred && make_pd({}, base) != 2) use_preferred = false;  // not fast with that layout here: choose anew
  if (make_pd({}, base) <= 1 && (!IsRowMajor(a_op) || (!pack && !IsRowMajor(b_op)))) {
    if (!IsRowMajor(a_op)) a_op = ctx.UsePlain(a);
    if (!pack && !IsRowMajor(b_op)) b_op = ctx.UsePlain(b);
    views();
    set_bias_dims();
    base = {av, bv, Operand(), FakePlain(cd)};
  }

  OperandMap map = [&](const Dims& od, Dims* out) {
    Dims p = ToComputeDims(s, od);
    if (!flatten) {
      *out = p;
      return true;
    }
    bool full = true, ones = true;
    for (size_t i = 0; i + 1 < r; ++i) {
      full = full && p[i] == s.c[i];
      ones = ones && p[i] == 1;
    }
    if (!full && !ones) return false;
    *out = {ones ? 1 : cd[0], p[r - 1]};
    return true;
  };
  std::vector<Fused> chain = CollectPostOps(ctx, chain_root, true, map);
  for (size_t i = 0; i < chain.size(); ++i) {  // a mask Add feeding a Softmax is left to MaskedSoftmax
    int x, mask, sm;
    bool stop = false;
    for (int fn : chain[i].nodes) stop = stop || MaskedSoftmaxOf(ctx, fn, &x, &mask, &sm);
    if (stop) {
      chain.resize(i);
      break;
    }
  }
  size_t k = ChooseChain(g, chain, base, map, make_pd);
  {
    std::vector<PostOp> post_ops;
    std::vector<Operand> ops = base;
    ChainPrefix(g, chain, k, map, &post_ops, &ops);
    if (make_pd(post_ops, ops) == 0)
      return ctx.Fail(node, "oneDNN has no matmul for " + DimsText(s.a) + " x " + DimsText(s.b));
  }

  // The fused bias Add, when there is one: its operand viewed with `dims`, the node absorbed into `step`.
  auto take_bias = [&](const Dims& dims, Step* step, Operand* bias) -> CheckResult {
    if (bias_value < 0) return CheckResult::Ok();
    Operand o = ctx.Use(bias_value);
    if (!IsRowMajor(o)) return ctx.Fail(node, "bias is not row-major");
    *bias = Reshaped(o, dims);
    ctx.Absorb(bias_node);
    step->name += "+" + ctx.node(bias_node).name;
    y = chain_root;
    return CheckResult::Ok();
  };

  // [M, K] x constant [K, N] as a 1x1 convolution over an nhwc view ([1, K, M, 1] with channels innermost is the same
  // bytes as [M, K] row-major): oneDNN's jit 1x1 kernel is created with the primitive (~0.5 ms), while its matmul runs
  // on the sgemm driver, whose kernels are generated on a process's first sgemm call (~40 ms here, paid by the first
  // run: 36 ms vs 0.15 ms steady for the melspectrogram model from its _ctx.onnx, issue 14); steady state is the same
  // or faster. Taken when the fused post-ops are eltwise only (binary operands keep the matmul's [M, N] mapping) and
  // oneDNN has its jit kernel for the shape.
  if (pack && flatten && cd.size() == 2 && !use_preferred) {
    bool eltwise_only = true;
    for (size_t i = 0; i < k; ++i) eltwise_only = eltwise_only && chain[i].operand_value < 0;
    const int64_t M = cd[0], K = wd[0], N = wd[1];
    const Dims conv_src = {1, K, M, 1}, conv_dst = {1, N, M, 1}, conv_w = {N, K, 1, 1};
    const Dims src_strides = {M * K, 1, K, K}, dst_strides = {M * N, 1, N, N};
    memory::desc conv_w_chosen;
    if (eltwise_only) {
      try {
        std::vector<PostOp> post_ops;
        std::vector<Operand> ops = base;
        ChainPrefix(g, chain, k, map, &post_ops, &ops);
        dnnl::primitive_attr attr;
        if (TrialAttr(post_ops, ops, &attr)) {
          const memory::desc src_d = StridedDesc(conv_src, src_strides), dst_d = StridedDesc(conv_dst, dst_strides);
          const memory::desc w_d(conv_w, memory::data_type::f32, memory::format_tag::any);
          std::unique_ptr<dnnl::convolution_forward::desc> cdesc;
          if (bias_value >= 0)
            cdesc.reset(new dnnl::convolution_forward::desc(
                dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_d, w_d,
                memory::desc({N}, memory::data_type::f32, memory::format_tag::a), dst_d, {1, 1}, {0, 0}, {0, 0}));
          else
            cdesc.reset(new dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                            dnnl::algorithm::convolution_direct, src_d, w_d, dst_d,
                                                            {1, 1}, {0, 0}, {0, 0}));
          dnnl::convolution_forward::primitive_desc cpd(*cdesc, attr, eng);
          const std::string impl = cpd.impl_info_str();
          Operand probe;
          if (impl.compare(0, 3, "jit") == 0 && cpd.src_desc() == src_d && cpd.dst_desc() == dst_d &&
              LayoutFromDesc(cpd.weights_desc(), &probe))
            conv_w_chosen = cpd.weights_desc();
        }
      } catch (const dnnl::error&) {
        conv_w_chosen = memory::desc();
      }
    }
    if (conv_w_chosen.data.ndims != 0) {
      Step step;
      step.kind = StepKind::kConv;
      step.name = n.name;
      Operand wop;
      // The source bytes are [K, N] row-major: as conv weights [N, K, 1, 1] their strides are (1, N, 1, 1).
      CheckResult rc = ctx.PackWeight(g.v(b).name + ":packed1x1", g.v(b).data, StridedDesc(conv_w, {1, N, 1, 1}),
                                      conv_w_chosen, &wop);
      if (!rc.ok) return rc;
      Operand bias;
      rc = take_bias({N}, &step, &bias);
      if (!rc.ok) return rc;
      Operand src = av;
      src.dims = conv_src;
      src.tag = 0;
      src.strides = src_strides;
      step.ops = {src, wop, bias, Operand()};
      rc = ApplyChain(ctx, node, chain, k, map, &step, &y);
      if (!rc.ok) return rc;
      Operand dst = DefineAs(ctx, y, cd);
      dst.dims = conv_dst;
      dst.tag = 0;
      dst.strides = dst_strides;
      step.ops[3] = dst;
      step.ints = {1, 2, 1, 1, 0, 0, 0, 0, 0, 0};  // groups, spatial rank, strides, dilations (oneDNN), pads
      ctx.Emit(std::move(step));
      return CheckResult::Ok();
    }
  }

  Step step;
  step.kind = StepKind::kMatMul;
  step.name = n.name;
  if (pack) {
    CheckResult rc = ctx.PackWeight(g.v(b).name + ":packed", g.v(b).data, PlainDesc(wd, kF32), weights_chosen, &bv);
    if (!rc.ok) return rc;
  }
  Operand bias;
  {
    CheckResult rb = take_bias(bias_dims, &step, &bias);
    if (!rb.ok) return rb;
  }
  step.ops = {av, bv, bias, Operand()};
  CheckResult rc = ApplyChain(ctx, node, chain, k, map, &step, &y);
  if (!rc.ok) return rc;
  // A Transpose that alone reads the result (attention's heads back to [batch, seq, heads, dim] before the output
  // projection): the matmul writes the transposed tensor directly, through a strided dst.
  int t = ctx.SoleConsumer(y);
  std::vector<int64_t> perm;
  if (t >= 0 && !pack && !flatten && cd == g.v(y).dims && TransposePerm(ctx.node(t), cd.size(), &perm)) {
    const Node& tn = ctx.node(t);
    const Dims& td = g.v(Out0(tn)).dims;
    const Dims ts = RowMajorStrides(td);
    Operand view = FakePlain(cd);
    for (size_t i = 0; i < perm.size(); ++i) view.strides[static_cast<size_t>(perm[i])] = ts[i];
    std::vector<Operand> trial = step.ops;
    trial[3] = view;
    if (make_pd(step.post_ops, trial) == 2) {
      Operand dst = ctx.DefinePlain(Out0(tn));
      dst.dims = cd;
      dst.strides = view.strides;
      step.ops[3] = dst;
      step.name += "+" + tn.name;
      ctx.Absorb(t);
      ctx.Emit(std::move(step));
      return CheckResult::Ok();
    }
  }
  step.ops[3] = DefineAs(ctx, y, cd);
  ctx.Emit(std::move(step));
  return CheckResult::Ok();
}

CheckResult BuildMatMul(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(4, true, 0, 0);
  if (!r.ok) return r;
  std::vector<memory::desc> d;
  if (!(r = GetDescs(bc, 4, &d)).ok) return r;
  if (d[0].data.ndims < 2 || d[1].data.ndims != d[0].data.ndims || d[3].data.ndims != d[0].data.ndims)
    return bc.Fail("matmul operands need equal ranks >= 2");
  const bool has_bias = bc.step().ops[2].present();
  dnnl::primitive_attr attr;
  std::vector<std::pair<int, int>> args;
  if (!(r = bc.PostOps(&attr, &args)).ok) return r;
  dnnl::matmul::primitive_desc pd;
  try {
    if (has_bias) pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(d[0], d[1], d[2], d[3]), attr, bc.engine());
    else pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(d[0], d[1], d[3]), attr, bc.engine());
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("matmul: ") + e.what());
  }
  if (!(r = CheckSame(bc, "src", pd.src_desc(), d[0])).ok) return r;
  if (!(r = CheckSame(bc, "weights", pd.weights_desc(), d[1])).ok) return r;
  if (has_bias && !(r = CheckSame(bc, "bias", pd.bias_desc(), d[2])).ok) return r;
  if (!(r = CheckSame(bc, "dst", pd.dst_desc(), d[3])).ok) return r;
  args.push_back({DNNL_ARG_SRC, bc.Slot(0, d[0])});
  args.push_back({DNNL_ARG_WEIGHTS, bc.Slot(1, d[1])});
  if (has_bias) args.push_back({DNNL_ARG_BIAS, bc.Slot(2, d[2])});
  args.push_back({DNNL_ARG_DST, bc.Slot(3, d[3])});
  try {
    out->reset(new PrimitiveExec(dnnl::matmul(pd), std::move(args)));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("matmul: ") + e.what());
  }
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
