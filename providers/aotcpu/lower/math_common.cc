// What the math op family's files share (math_matmul.cc, math_eltwise.cc, math_reduce.cc): shape and operand
// helpers, graph patterns (GELU), the post-op chain MatMul and Binary steps absorb, eltwise emission and the step
// builders' descriptor checks. See math_common.h.
#include "providers/aotcpu/lower/math_common.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace epctx {
namespace aotcpu {

namespace {

constexpr int kMaxFusedGroups = 8;

}  // namespace

bool Reject(std::string* why, const std::string& reason) {
  if (why) *why = reason;
  return false;
}


int64_t Numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

Dims PadLeft(const Dims& d, size_t rank) {
  if (d.size() >= rank) return d;
  Dims r(rank - d.size(), 1);
  r.insert(r.end(), d.begin(), d.end());
  return r;
}

// Rank-0 tensors are computed as [1]: oneDNN has no rank-0 descriptors.
Dims AtLeast1D(const Dims& d) { return d.empty() ? Dims{1} : d; }

bool BroadcastShapes(const Dims& a, const Dims& b, Dims* out) {
  size_t r = std::max(a.size(), b.size());
  Dims pa = PadLeft(a, r), pb = PadLeft(b, r);
  out->assign(r, 0);
  for (size_t i = 0; i < r; ++i) {
    if (pa[i] == pb[i] || pb[i] == 1) (*out)[i] = pa[i];
    else if (pa[i] == 1) (*out)[i] = pb[i];
    else return false;
  }
  return true;
}

// `small` broadcasts to `big` without changing it (numpy rules, `small` not of higher rank).
bool BroadcastsTo(const Dims& small, const Dims& big) {
  if (small.size() > big.size()) return false;
  Dims p = PadLeft(small, big.size());
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != big[i] && p[i] != 1) return false;
  return true;
}

Dims RowMajorStrides(const Dims& d) {
  Dims s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * std::max<int64_t>(d[i], 1);
  return s;
}

memory::desc StridedDesc(const Dims& dims, const Dims& strides) {
  return memory::desc(memory::dims(dims.begin(), dims.end()), memory::data_type::f32,
                      memory::dims(strides.begin(), strides.end()));
}

bool PlainStrides(const Operand& op, std::vector<int64_t>* strides) {
  if (op.dims.empty()) {
    strides->clear();
    return true;
  }
  if (op.tag == 0) {
    *strides = op.strides;
    return op.strides.size() == op.dims.size();
  }
  memory::desc d;
  if (!OperandDesc(op, &d).ok) return false;
  const dnnl_memory_desc_t& c = d.data;
  if (c.format_kind != dnnl_blocked || c.format_desc.blocking.inner_nblks != 0 ||
      c.ndims != static_cast<int>(op.dims.size()))
    return false;
  strides->assign(c.format_desc.blocking.strides, c.format_desc.blocking.strides + c.ndims);
  return true;
}

// Dense row-major (strides of size-1 dims do not matter).
bool IsRowMajor(const Operand& op) {
  Dims s;
  if (!PlainStrides(op, &s)) return false;
  Dims want = RowMajorStrides(op.dims);
  for (size_t i = 0; i < s.size(); ++i)
    if (op.dims[i] != 1 && s[i] != want[i]) return false;
  return true;
}

// The same bytes seen with other dims of the same element count; `op` must be dense row-major.
Operand Reshaped(const Operand& op, const Dims& dims) {
  Operand r = op;
  r.dims = dims;
  r.tag = 0;
  r.strides = RowMajorStrides(dims);
  return r;
}

// Layout usable by layout-preserving steps (eltwise, binary): blocked, or plain without holes.
bool CompactDesc(const memory::desc& d) {
  if (d.data.format_kind != dnnl_blocked || d.data.ndims == 0) return false;
  size_t n = memory::data_type_size(d.data_type());
  for (int i = 0; i < d.data.ndims; ++i) n *= static_cast<size_t>(d.data.padded_dims[i]);
  return d.get_size() == n;
}

bool IsRefImpl(const dnnl::primitive_desc_base& pd) {
  std::string impl = pd.impl_info_str();
  return impl.rfind("ref", 0) == 0;
}

// A stand-in operand for descs of operands not yet taken with Use (dense row-major, f32).
Operand FakePlain(const Dims& dims) {
  Operand o;
  o.buf = Buf::kArena;
  o.dims = dims;
  o.tag = 0;
  o.strides = RowMajorStrides(dims);
  return o;
}

// The post-op attributes the executor builds from the same step (BuildContext::PostOps), for compile-time trials.
bool TrialAttr(const std::vector<PostOp>& post_ops, const std::vector<Operand>& ops, dnnl::primitive_attr* attr) {
  dnnl::post_ops po;
  for (const PostOp& p : post_ops) {
    if (p.kind == PostOp::kEltwise) {
      po.append_eltwise(p.scale, static_cast<dnnl::algorithm>(p.alg), p.alpha, p.beta);
    } else if (p.kind == PostOp::kBinary) {
      memory::desc d;
      if (p.operand >= ops.size() || !OperandDesc(ops[p.operand], &d).ok) return false;
      po.append_binary(static_cast<dnnl::algorithm>(p.alg), d);
    } else if (p.kind == PostOp::kSum) {
      po.append_sum(p.scale);
    } else {
      return false;
    }
  }
  attr->set_post_ops(po);
  return true;
}

// ---- graph patterns ---------------------------------------------------------------------------------------------

int Out0(const Node& n) { return n.outputs.empty() ? -1 : n.outputs[0]; }

// The single consuming node of a value that is not a graph output (graph-level; the lowering also checks
// LowerContext::SoleConsumer).
int OnlyConsumer(const Graph& g, int value) {
  const Value& v = g.v(value);
  if (v.is_graph_output || v.consumers.size() != 1) return -1;
  return v.consumers[0];
}

// For a two-input node reading `value` once: the other input; -1 otherwise.
int OtherInput(const Node& n, int value) {
  if (n.inputs.size() != 2) return -1;
  if (n.inputs[0] == value && n.inputs[1] != value) return n.inputs[1];
  if (n.inputs[1] == value && n.inputs[0] != value) return n.inputs[0];
  return -1;
}

bool ConstNear(const Graph& g, int value, double target) {
  float f;
  return value >= 0 && g.v(value).dtype == kF32 && g.ConstScalar(value, &f) && std::fabs(f - target) <= 1e-6;
}

bool SameF32Shape(const Graph& g, int value, const Dims& dims) {
  if (value < 0) return false;
  const Value& v = g.v(value);
  return v.dtype == kF32 && v.has_shape && v.dims == dims;
}

// The Erf-form GELU rooted at `x`:
//   x * (erf(x / sqrt2) + 1) * 0.5, also with x * (1/sqrt2) inside, 0.5 applied to x first, or 0.5 applied to the
//   (1 + erf) factor first. Constants are matched within 1e-6. Every intermediate has one consumer and is not a
//   graph output; every node keeps x's shape. With `private_root`, x itself is read only by the pattern.
bool MatchGelu(const Graph& g, int x, bool private_root, GeluMatch* m) {
  const Value& xv = g.v(x);
  if (xv.dtype != kF32 || !xv.has_shape) return false;
  const Dims& dims = xv.dims;
  auto node_out = [&](int n, const char* op) -> int {
    if (n < 0) return -1;
    const Node& nd = g.nodes[static_cast<size_t>(n)];
    if (!IsOnnx(nd) || nd.op != op || nd.outputs.size() != 1 || !SameF32Shape(g, Out0(nd), dims)) return -1;
    return Out0(nd);
  };
  std::vector<int> cons = xv.consumers;
  std::sort(cons.begin(), cons.end());
  cons.erase(std::unique(cons.begin(), cons.end()), cons.end());
  for (int head : cons) {
    const Node& h = g.nodes[static_cast<size_t>(head)];
    bool is_head = false;
    if (node_out(head, "Div") >= 0 && h.inputs.size() == 2 && h.inputs[0] == x &&
        ConstNear(g, h.inputs[1], std::sqrt(2.0)))
      is_head = true;
    if (node_out(head, "Mul") >= 0 && ConstNear(g, OtherInput(h, x), std::sqrt(0.5))) is_head = true;
    if (!is_head) continue;
    int e = OnlyConsumer(g, Out0(h));
    int e_out = node_out(e, "Erf");
    if (e_out < 0) continue;
    int a = OnlyConsumer(g, e_out);
    int a_out = node_out(a, "Add");
    if (a_out < 0 || !ConstNear(g, OtherInput(g.nodes[static_cast<size_t>(a)], e_out), 1.0)) continue;
    int k = OnlyConsumer(g, a_out);
    int k_out = node_out(k, "Mul");
    if (k_out < 0) continue;
    const Node& kn = g.nodes[static_cast<size_t>(k)];
    int k_other = OtherInput(kn, a_out);
    GeluMatch found;
    int x_reader = -1;  // the second pattern node reading x
    if (k_other == x) {  // (x * (1 + erf)) * 0.5
      int hf = OnlyConsumer(g, k_out);
      int hf_out = node_out(hf, "Mul");
      if (hf_out < 0 || !ConstNear(g, OtherInput(g.nodes[static_cast<size_t>(hf)], k_out), 0.5)) continue;
      found.nodes = {head, e, a, k, hf};
      found.out = hf_out;
      x_reader = k;
    } else if (ConstNear(g, k_other, 0.5)) {  // x * ((1 + erf) * 0.5)
      int l = OnlyConsumer(g, k_out);
      int l_out = node_out(l, "Mul");
      if (l_out < 0 || OtherInput(g.nodes[static_cast<size_t>(l)], k_out) != x) continue;
      found.nodes = {head, e, a, k, l};
      found.out = l_out;
      x_reader = l;
    } else if (k_other >= 0) {  // (x * 0.5) * (1 + erf)
      int hn = g.v(k_other).producer;
      if (hn < 0 || node_out(hn, "Mul") != k_other || OnlyConsumer(g, k_other) != k) continue;
      if (OtherInput(g.nodes[static_cast<size_t>(hn)], x) < 0 ||
          !ConstNear(g, OtherInput(g.nodes[static_cast<size_t>(hn)], x), 0.5))
        continue;
      found.nodes = {head, e, a, hn, k};
      found.out = k_out;
      x_reader = hn;
    } else {
      continue;
    }
    if (private_root) {
      if (xv.is_graph_output || xv.consumers.size() != 2) continue;
      std::vector<int> want = {head, x_reader};
      std::vector<int> have = xv.consumers;
      std::sort(want.begin(), want.end());
      std::sort(have.begin(), have.end());
      if (want != have) continue;
    }
    *m = found;
    return true;
  }
  return false;
}

bool AnyAbsorbed(const LowerContext& ctx, const std::vector<int>& nodes) {
  for (int n : nodes)
    if (ctx.IsAbsorbed(n)) return true;
  return false;
}

// ---- post-op chains ---------------------------------------------------------------------------------------------

namespace {

bool IsBinaryOp(const std::string& op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min";
}

}  // namespace

uint32_t BinaryAlg(const std::string& op) {
  if (op == "Add") return dnnl_binary_add;
  if (op == "Sub") return dnnl_binary_sub;
  if (op == "Mul") return dnnl_binary_mul;
  if (op == "Div") return dnnl_binary_div;
  if (op == "Max") return dnnl_binary_max;
  return dnnl_binary_min;
}


// Pow(x, c) with a constant scalar exponent (float or integer).
bool ConstExponent(const Graph& g, int value, float* e) {
  if (value < 0 || !g.v(value).is_const()) return false;
  if (g.v(value).dtype == kF32) return g.ConstScalar(value, e);
  std::vector<int64_t> v;
  if ((g.v(value).dtype == kI64 || g.v(value).dtype == kI32) && g.ConstInts(value, &v) && v.size() == 1) {
    *e = static_cast<float>(v[0]);
    return true;
  }
  return false;
}

// HardSigmoid = clip(alpha * x + beta, 0, 1): oneDNN 2.6 has no single algorithm for it.
void HardSigmoidOps(const Node& n, std::vector<PostOp>* out) {
  out->push_back(EltwisePostOp(dnnl_eltwise_linear, n.Float("alpha", 0.2f), n.Float("beta", 0.5f)));
  out->push_back(EltwisePostOp(dnnl_eltwise_clip_v2, 0.f, 1.f));
}

// Follows `value` through the nodes that could become post-ops of the step producing it (see the file comment).
std::vector<Fused> CollectPostOps(LowerContext& ctx, int value, bool allow_binary, const OperandMap& map) {
  const Graph& g = ctx.graph();
  std::vector<Fused> chain;
  std::vector<PostOp> assembled;  // the chain's post-ops as ChainPrefix/ApplyChain will emit them
  auto fits = [&](const Fused& f) {
    std::vector<PostOp> next = assembled;
    for (const PostOp& p : f.post_ops)
      if (!AppendPostOp(&next, p, true)) return false;
    assembled = std::move(next);
    return true;
  };
  while (static_cast<int>(chain.size()) < kMaxFusedGroups) {
    const Dims dims = g.v(value).dims;
    GeluMatch gm;
    if (MatchGelu(g, value, true, &gm) && !AnyAbsorbed(ctx, gm.nodes)) {
      Fused f;
      f.nodes = gm.nodes;
      f.post_ops.push_back(EltwisePostOp(dnnl_eltwise_gelu_erf, 0, 0));
      f.out = gm.out;
      if (!fits(f)) break;
      chain.push_back(f);
      value = gm.out;
      continue;
    }
    int c = ctx.SoleConsumer(value);
    if (c < 0 || ctx.IsAbsorbed(c)) break;
    const Node& m = ctx.node(c);
    if (!IsOnnx(m) || m.outputs.size() != 1 || !SameF32Shape(g, Out0(m), dims)) break;
    Fused f;
    f.nodes = {c};
    f.out = Out0(m);
    uint32_t alg;
    float alpha, beta;
    std::string why;
    if (m.op == "HardSigmoid" && m.inputs.size() == 1 && m.inputs[0] == value) {
      HardSigmoidOps(m, &f.post_ops);
    } else if (m.op == "Erf" || (m.op == "Tanh" && OwnTanh(ctx.options()))) {
      break;  // not an eltwise algorithm (only inside the GELU), or our own loop (OwnTanh)
    } else if (m.inputs.size() >= 1 && m.inputs[0] == value && !IsBinaryOp(m.op) && m.op != "Pow" &&
               SupportUnary(g, m, &why) && EltwiseFor(g, m, &alg, &alpha, &beta)) {
      f.post_ops.push_back(EltwisePostOp(alg, alpha, beta));
    } else if (m.op == "Pow") {
      float e;
      if (m.inputs.size() != 2 || m.inputs[0] != value || !ConstExponent(g, m.inputs[1], &e)) break;
      f.post_ops.push_back(EltwisePostOp(dnnl_eltwise_pow, 1.f, e));
    } else if (IsBinaryOp(m.op)) {
      int other = OtherInput(m, value);
      if (other < 0) break;
      bool first = m.inputs[0] == value;
      bool commutative = m.op == "Add" || m.op == "Mul" || m.op == "Max" || m.op == "Min";
      const Value& ov = g.v(other);
      if (ov.dtype != kF32 || !ov.has_shape || !BroadcastsTo(ov.dims, dims)) break;
      // x / c by a constant scalar is x * (1/c) (ScalarAffine): a binary division post-op or step instead costs a
      // conversion of blocked activations to plain (issue 14: the hard-swish's / 6 in MobileNetV3).
      float a, b;
      if (ScalarAffine(g, m, value, &a, &b)) {
        f.post_ops.push_back(EltwisePostOp(dnnl_eltwise_linear, a, b));
      } else {
        Dims cd;
        if (!allow_binary || !ctx.IsAvailable(other) || !map(ov.dims, &cd)) break;
        if (!first && !commutative && m.op != "Sub") break;  // Div(other, x): no exact rewrite
        PostOp p;
        p.kind = PostOp::kBinary;
        p.alg = BinaryAlg(m.op);
        f.post_ops.push_back(p);
        if (!first && !commutative) f.post_ops.push_back(EltwisePostOp(dnnl_eltwise_linear, -1, 0));  // other - x
        f.operand_value = other;
      }
    } else {
      break;
    }
    if (!fits(f)) break;
    chain.push_back(f);
    value = f.out;
  }
  return chain;
}

// Post-ops of the first `k` groups; binary operands get operand indices from `first_operand` on and stand-in
// operands (compute dims from `map`) appended to `ops`.
void ChainPrefix(const Graph& g, const std::vector<Fused>& chain, size_t k, const OperandMap& map,
                 std::vector<PostOp>* post_ops, std::vector<Operand>* ops) {
  post_ops->clear();
  for (size_t i = 0; i < k; ++i) {
    for (PostOp p : chain[i].post_ops) {
      if (p.kind == PostOp::kBinary) {
        Dims cd;
        map(g.v(chain[i].operand_value).dims, &cd);
        p.operand = static_cast<uint32_t>(ops->size());
        ops->push_back(FakePlain(cd));
      }
      AppendPostOp(post_ops, p, true);  // CollectPostOps checked that every group fits
    }
  }
}

// Longest usable prefix of `chain`: `make_pd(post_ops, ops)` returns 0 when oneDNN refuses, 1 for a reference
// implementation, 2 for an optimized one. A prefix is kept when it is not worse than no fusion.
size_t ChooseChain(const Graph& g, const std::vector<Fused>& chain, const std::vector<Operand>& base_ops,
                   const OperandMap& map,
                   const std::function<int(const std::vector<PostOp>&, const std::vector<Operand>&)>& make_pd) {
  int base = make_pd({}, base_ops);
  for (size_t k = chain.size(); k > 0; --k) {
    std::vector<PostOp> post_ops;
    std::vector<Operand> ops = base_ops;
    ChainPrefix(g, chain, k, map, &post_ops, &ops);
    int q = make_pd(post_ops, ops);
    if (q > 0 && q >= base) return k;
  }
  return 0;
}

// Takes the chosen prefix into the step: absorbs its nodes, adds binary operands (row-major views with compute
// dims) and post-ops. Returns the value the step now produces.
CheckResult ApplyChain(LowerContext& ctx, int node, const std::vector<Fused>& chain, size_t k, const OperandMap& map,
                       Step* step, int* final_value) {
  const Graph& g = ctx.graph();
  for (size_t i = 0; i < k; ++i) {
    const Fused& f = chain[i];
    for (PostOp p : f.post_ops) {
      if (p.kind == PostOp::kBinary) {
        Dims cd;
        map(g.v(f.operand_value).dims, &cd);
        Operand o = ctx.UsePlain(f.operand_value);
        if (!IsRowMajor(o))
          return ctx.Fail(node, "post-op operand '" + g.v(f.operand_value).name + "' is not row-major");
        p.operand = static_cast<uint32_t>(step->ops.size());
        step->ops.push_back(Reshaped(o, cd));
      }
      if (!AppendPostOp(&step->post_ops, p, true)) return ctx.Fail(node, "post-op chain changed while fused");
    }
    for (int n : f.nodes) {
      ctx.Absorb(n);
      step->name += "+" + ctx.node(n).name;
    }
    *final_value = f.out;
  }
  return CheckResult::Ok();
}

// The dst operand of `value`, defined plain (written straight into a fused output when it is one) and viewed with
// `compute_dims` (same element count).
Operand DefineAs(LowerContext& ctx, int value, const Dims& compute_dims) {
  Operand o = ctx.DefinePlain(value);
  if (o.dims != compute_dims) o = Reshaped(o, compute_dims);
  return o;
}

namespace {

// Operand for a layout-preserving step (eltwise): the current layout when it is compact, else plain.
Operand UseCompact(LowerContext& ctx, int value) {
  const Operand* p = ctx.Peek(value);
  memory::desc d;
  if (p && !p->dims.empty() && OperandDesc(*p, &d).ok && CompactDesc(d)) return ctx.Use(value);
  Operand o = ctx.UsePlain(value);
  if (o.dims.empty()) o = Reshaped(o, {1});
  return o;
}

// True when oneDNN runs every eltwise of `algs` on `d` with an optimized kernel.
bool EltwiseOptimized(LowerContext& ctx, const memory::desc& d, const std::vector<PostOp>& algs) {
  try {
    for (const PostOp& a : algs) {
      dnnl::eltwise_forward::primitive_desc pd(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, static_cast<dnnl::algorithm>(a.alg), d,
                                      a.alpha, a.beta),
          ctx.engine());
      if (IsRefImpl(pd)) return false;
    }
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace

CheckResult EmitEltwise(LowerContext& ctx, int node, const std::string& name, int src_value, int dst_value,
                        const std::vector<PostOp>& algs) {
  // A blocked layout whose channels do not fill the blocks (PP-OCRv4 rec: 60 channels in blocks of 8) leaves oneDNN
  // 2.6 only its reference eltwise kernel: such a source is taken plain.
  const Operand* p = ctx.Peek(src_value);
  memory::desc pd_src;
  const bool to_plain = p && !IsRowMajor(*p) && OperandDesc(*p, &pd_src).ok && CompactDesc(pd_src) &&
                        !EltwiseOptimized(ctx, pd_src, algs);
  Operand src = to_plain ? ctx.UsePlain(src_value) : UseCompact(ctx, src_value);
  if (src.dims.empty()) src = Reshaped(src, {1});
  memory::desc d;
  CheckResult r = OperandDesc(src, &d);
  if (!r.ok) return ctx.Fail(node, r.reason);
  Operand dst;
  if (IsRowMajor(src)) {
    src = Reshaped(src, src.dims);  // canonical strides, so that src and dst descs are equal
    dst = DefineAs(ctx, dst_value, src.dims);
  } else {
    dst = ctx.Define(dst_value, d);
    memory::desc dd;
    if (!OperandDesc(dst, &dd).ok || dd != d) return ctx.Fail(node, "eltwise dst layout differs from src");
  }
  for (size_t i = 0; i < algs.size(); ++i) {
    Step s;
    s.kind = StepKind::kEltwise;
    s.name = name;
    s.ops = {i == 0 ? src : dst, dst};  // later steps run in place on dst
    s.ints = {static_cast<int64_t>(algs[i].alg)};
    s.floats = {algs[i].alpha, algs[i].beta};
    ctx.Emit(std::move(s));
  }
  return CheckResult::Ok();
}

// ---- builders' shared checks -------------------------------------------------------------------------------------

CheckResult GetDescs(BuildContext& bc, size_t n, std::vector<memory::desc>* descs) {
  descs->resize(n);
  for (size_t i = 0; i < n; ++i) {
    CheckResult r = bc.Desc(i, &(*descs)[i]);
    if (!r.ok) return r;
  }
  return CheckResult::Ok();
}

CheckResult CheckSame(BuildContext& bc, const char* what, const memory::desc& chosen, const memory::desc& given) {
  if (chosen == given) return CheckResult::Ok();
  return bc.Fail(std::string("oneDNN chose another ") + what + " layout than the program has (compiled for another "
                 "oneDNN build or ISA?)");
}

}  // namespace aotcpu
}  // namespace epctx
