// Gemm: support check, lowering as an inner product (constant B, per-N bias) or a matmul with the fusion chain, and
// the kInnerProduct step builder. Step parameters: nn_common.h.
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

#include "providers/aotcpu/lower/nn_common.h"

namespace epctx {
namespace aotcpu {
namespace {

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

}  // namespace aotcpu
}  // namespace epctx
