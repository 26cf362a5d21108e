// MatMul, elementwise unary/binary ops (with the Erf-form GELU), Softmax, LayerNormalization and reductions:
// support checks, lowering with post-op fusion, and the executor's step builders (see ops.h).
//
// Fusion: a MatMul or Binary step absorbs the nodes that follow it while each is the sole consumer of the previous
// result: a constant bias Add (MatMul only, as the primitive's bias), activations and constant-scalar Mul/Add/Sub
// (eltwise post-ops), the Erf-form GELU (eltwise_gelu_erf), a Pow by a constant scalar and an Add/Sub/Mul/Div/Max/
// Min with an already computed or constant tensor (binary post-op). Each candidate chain is tried on a primitive
// descriptor at compile time; the longest prefix oneDNN implements without falling back to a reference kernel is
// kept, the rest is lowered on its own.
//
// Attention scores: an Add of a constant mask whose result only a last-axis Softmax reads stays out of the MatMul's
// chain; the Add and the Softmax become one MaskedSoftmax step (our own loop: one read of the scores, the mask
// broadcast from cache), cheaper than oneDNN's binary post-op plus its softmax primitive.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {
namespace {

using dnnl::memory;
using Dims = std::vector<int64_t>;

constexpr int kMaxFusedGroups = 8;

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

}  // namespace

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

namespace {

// Dense row-major (strides of size-1 dims do not matter).
bool IsRowMajor(const Operand& op) {
  Dims s;
  if (!PlainStrides(op, &s)) return false;
  Dims want = RowMajorStrides(op.dims);
  for (size_t i = 0; i < s.size(); ++i)
    if (op.dims[i] != 1 && s[i] != want[i]) return false;
  return true;
}

bool IsPlainStrided(const Operand& op) {
  Dims s;
  return PlainStrides(op, &s);
}

// The same bytes seen with other dims of the same element count; `op` must be dense row-major.
Operand Reshaped(const Operand& op, const Dims& dims) {
  Operand r = op;
  r.dims = dims;
  r.tag = 0;
  r.strides = RowMajorStrides(dims);
  return r;
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

bool IsOnnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

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

struct GeluMatch {
  std::vector<int> nodes;  // every node of the pattern
  int out = -1;
};

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

// A group of nodes absorbed together as post-ops of the step that produces their input.
struct Fused {
  std::vector<int> nodes;
  std::vector<PostOp> post_ops;  // kBinary operand fields are filled in when the step is assembled
  int operand_value = -1;        // the value read by the kBinary post-op, if any
  int out = -1;                  // the value this group produces
};

bool IsBinaryOp(const std::string& op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min";
}

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

// Which post-op operand shapes the step can take: maps an operand's ONNX dims (broadcastable to the result) to
// the step's compute dims, or returns false.
using OperandMap = std::function<bool(const Dims& onnx_dims, Dims* compute_dims)>;

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
    } else if (m.op == "Erf") {
      break;  // not an eltwise algorithm (only inside the GELU)
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

CheckResult LowerGelu(LowerContext& ctx, int node, int x, const GeluMatch& gm) {
  std::string name;
  for (int n : gm.nodes) {
    if (n != node) ctx.Absorb(n);
    name += (name.empty() ? "" : "+") + ctx.node(n).name;
  }
  return EmitEltwise(ctx, node, name, x, gm.out, {EltwisePostOp(dnnl_eltwise_gelu_erf, 0, 0)});
}

// ---- erf --------------------------------------------------------------------------------------------------------

// erf on f32 computed in double with two polynomial pieces (|x| < 1.5: x * P(x^2); 1.5 <= |x| < 3.9: Q((|x| - 2.7)
// / 1.2); beyond, erf rounds to +-1 in f32). Both pieces are Chebyshev fits with relative error below 4e-12, so the
// f32 result is the correctly rounded erf except within 1 ulp on rare ties (more accurate than glibc's erff).
// Branch-free so the compiler vectorizes it; NaN propagates through the polynomial.
// ThreadSanitizer builds skip the clones: their ifunc resolver, instrumented, runs during relocation of an
// executable that links this statically, before the TSan runtime exists, and crashes the program at start-up.
#if !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void ErfLoop(const float* src, float* dst, size_t n) {
  static const double kSmall[11] = {
      1.1283791670939176,     -0.37612638885100586,    0.11283791346035735,    -0.026866147828590942,
      0.0052238952001205366,  -0.0008546582017135894,  0.00012032141204783762, -1.4725463178727728e-05,
      1.5329923178696322e-06, -1.2231501686181936e-07, 5.45201142995764e-09};
  static const double kLarge[17] = {
      0.999865667258695,       0.0009239097636104107,   -0.0029934672328329574, 0.006022410497162002,
      -0.008319450994577385,   0.00818035546168767,     -0.005640013061860624,  0.002416170670770906,
      -0.00021725833812074122, -0.000519516260249413,   0.00039369064084059286, -0.00011060431978406659,
      -2.8533437130807147e-05, 3.786533504599886e-05,   -9.818521877972618e-06, -3.1817796879720854e-06,
      1.7395299488924865e-06};
  for (size_t i = 0; i < n; ++i) {
    double x = src[i];
    double y = std::fabs(x);
    double t = y * y;
    double p = kSmall[10];
    for (int k = 9; k >= 0; --k) p = p * t + kSmall[k];
    p *= y;
    double u = (y - 2.7) * (1.0 / 1.2);
    double q = kLarge[16];
    for (int k = 15; k >= 0; --k) q = q * u + kLarge[k];
    double r = y < 1.5 ? p : q;
    r = y >= 3.9 ? 1.0 : r;
    dst[i] = static_cast<float>(std::copysign(r, x));
  }
}

class ErfExec : public StepExec {
 public:
  ErfExec(int src, int dst, size_t n) : src_(src), dst_(dst), n_(n) {}
  void Run(RunContext& rc) override {
    ErfLoop(static_cast<const float*>(rc.ptr(src_)), static_cast<float*>(rc.ptr(dst_)), n_);
  }

 private:
  int src_, dst_;
  size_t n_;
};

// ---- builders' shared checks -------------------------------------------------------------------------------------

bool IsEltwiseAlg(int64_t a) {
  static const int64_t kAlgs[] = {dnnl_eltwise_relu,   dnnl_eltwise_tanh,     dnnl_eltwise_elu,
                                  dnnl_eltwise_square, dnnl_eltwise_abs,      dnnl_eltwise_sqrt,
                                  dnnl_eltwise_linear, dnnl_eltwise_soft_relu, dnnl_eltwise_logistic,
                                  dnnl_eltwise_exp,    dnnl_eltwise_gelu_tanh, dnnl_eltwise_swish,
                                  dnnl_eltwise_log,    dnnl_eltwise_clip,     dnnl_eltwise_clip_v2,
                                  dnnl_eltwise_pow,    dnnl_eltwise_gelu_erf, dnnl_eltwise_hardswish};
  return std::find(std::begin(kAlgs), std::end(kAlgs), a) != std::end(kAlgs);
}

bool IsBinaryAlg(int64_t a) { return a >= dnnl_binary_add && a <= dnnl_binary_ne; }
bool IsCompareAlg(int64_t a) { return a >= dnnl_binary_ge && a <= dnnl_binary_ne; }

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

// ---- spelled-out hard-swish ---------------------------------------------------------------------------------------

namespace {

// The hard-swish spelled out in ONNX ops, rooted at x, as PaddlePaddle and TensorFlow export it:
//   x * clip(x + 3, 0, 6) / 6  (the / 6 as Div or as Mul by 1/6, before or after the product, either operand order)
//   x * HardSigmoid(x) with alpha 1/6 and beta 0.5.
// Constants match within 1e-6; every intermediate has one consumer, is not a graph output and keeps x's shape.
// Sets `nodes` (every pattern node, the last one producing the result) and returns true.
bool MatchHardSwish(const Graph& g, int x, std::vector<int>* nodes, std::string* op, float* alpha) {
  const Value& xv = g.v(x);
  if (xv.dtype != kF32 || !xv.has_shape || xv.is_const()) return false;
  const Dims& dims = xv.dims;
  auto is = [&](int n, const char* op) {
    if (n < 0) return false;
    const Node& nd = g.nodes[static_cast<size_t>(n)];
    return IsOnnx(nd) && nd.op == op && nd.outputs.size() == 1 && SameF32Shape(g, Out0(nd), dims);
  };
  auto node = [&](int n) -> const Node& { return g.nodes[static_cast<size_t>(n)]; };
  // d = v / 6 or v * (1/6): true when node `d` is that for v.
  auto sixth = [&](int d, int v) {
    if (is(d, "Div"))
      return node(d).inputs.size() == 2 && node(d).inputs[0] == v && ConstNear(g, node(d).inputs[1], 6.0);
    return is(d, "Mul") && ConstNear(g, OtherInput(node(d), v), 1.0 / 6.0);
  };
  std::vector<int> cons = xv.consumers;
  std::sort(cons.begin(), cons.end());
  cons.erase(std::unique(cons.begin(), cons.end()), cons.end());
  *op = "HardSwish";
  *alpha = 0;
  for (int head : cons) {
    // Swish (SiLU): x * Sigmoid(x), or x * Sigmoid(a * x) with a constant scalar a (x * sigmoid(1.702 x), the quick
    // GELU), as PyTorch and TensorFlow export SiLU/swish; either operand order.
    int sig = is(head, "Sigmoid") ? head : -1;
    float scale = 1;
    if (sig < 0 && is(head, "Mul") && g.ConstScalar(OtherInput(node(head), x), &scale) && std::isfinite(scale)) {
      sig = OnlyConsumer(g, Out0(node(head)));
      if (!is(sig, "Sigmoid")) sig = -1;
    }
    if (sig >= 0) {
      const int m = OnlyConsumer(g, Out0(node(sig)));
      if (is(m, "Mul") && node(m).inputs.size() == 2 && OtherInput(node(m), Out0(node(sig))) == x) {
        *nodes = sig == head ? std::vector<int>{sig, m} : std::vector<int>{head, sig, m};
        *op = "Swish";
        *alpha = scale;
        return true;
      }
      continue;
    }
    if (is(head, "HardSigmoid")) {
      const Node& h = node(head);
      if (h.inputs.size() != 1 || std::fabs(h.Float("alpha", 0.2f) - 1.0 / 6.0) > 1e-6 ||
          std::fabs(h.Float("beta", 0.5f) - 0.5) > 1e-6)
        continue;
      const int m = OnlyConsumer(g, Out0(h));
      if (!is(m, "Mul") || OtherInput(node(m), Out0(h)) != x) continue;
      *nodes = {head, m};
      return true;
    }
    if (!is(head, "Add") || !ConstNear(g, OtherInput(node(head), x), 3.0)) continue;
    const int c = OnlyConsumer(g, Out0(node(head)));
    uint32_t alg;
    float lo, hi;
    if (!is(c, "Clip") || node(c).inputs.empty() || node(c).inputs[0] != Out0(node(head)) ||
        !EltwiseFor(g, node(c), &alg, &lo, &hi) || lo != 0.f || hi != 6.f)
      continue;
    const int cv = Out0(node(c));
    const int a = OnlyConsumer(g, cv);
    if (a < 0) continue;
    if (is(a, "Mul") && OtherInput(node(a), cv) == x) {  // (x * clip) / 6
      const int d = OnlyConsumer(g, Out0(node(a)));
      if (!sixth(d, Out0(node(a)))) continue;
      *nodes = {head, c, a, d};
      return true;
    }
    if (sixth(a, cv)) {  // x * (clip / 6)
      const int m = OnlyConsumer(g, Out0(node(a)));
      if (!is(m, "Mul") || OtherInput(node(m), Out0(node(a))) != x) continue;
      *nodes = {head, c, a, m};
      return true;
    }
  }
  return false;
}

}  // namespace

int FuseSpelledActivations(Graph* g, std::vector<bool>* folded) {
  int fused = 0;
  folded->resize(g->nodes.size(), false);
  for (size_t vi = 0; vi < g->values.size(); ++vi) {
    const int x = static_cast<int>(vi);
    std::vector<int> nodes;
    std::string op;
    float alpha = 0;
    while (MatchHardSwish(*g, x, &nodes, &op, &alpha)) {
      bool skip = false;
      for (int n : nodes) skip = skip || (*folded)[static_cast<size_t>(n)];
      if (skip) break;
      // The last node becomes HardSwish(x) or Swish(x); the others are dropped (their outputs have no other reader).
      Node& last = g->nodes[static_cast<size_t>(nodes.back())];
      std::string name;
      for (int n : nodes) name += (name.empty() ? "" : "+") + g->nodes[static_cast<size_t>(n)].name;
      for (int n : nodes) {
        for (int in : g->nodes[static_cast<size_t>(n)].inputs) {
          if (in < 0) continue;
          std::vector<int>& c = g->v(in).consumers;
          c.erase(std::remove(c.begin(), c.end(), n), c.end());
        }
        if (n != nodes.back()) (*folded)[static_cast<size_t>(n)] = true;
      }
      last.name = name;
      last.op = op;
      last.domain.clear();
      last.opset = op == "Swish" ? 24 : 14;  // ONNX's Swish (opset 24): x * sigmoid(alpha * x)
      last.attrs.clear();
      if (op == "Swish") {
        Attr a;
        a.type = EPCTX_ATTR_FLOAT;
        a.f = alpha;
        last.attrs["alpha"] = a;
      }
      last.inputs = {x};
      g->v(x).consumers.push_back(nodes.back());
      ++fused;
    }
  }
  return fused;
}

// ---- affine maps by constant scalars ----------------------------------------------------------------------------

bool ScalarAffine(const Graph& g, const Node& n, int value, float* alpha, float* beta) {
  if (n.num_inputs() != 2 || (n.op != "Mul" && n.op != "Add" && n.op != "Sub" && n.op != "Div")) return false;
  const bool first = n.inputs[0] == value;
  const int other = first ? n.inputs[1] : n.inputs[0];
  float s;
  if (other == value || (!first && n.inputs[1] != value) || !g.ConstScalar(other, &s)) return false;
  *alpha = 1;
  *beta = 0;
  if (n.op == "Mul") {
    *alpha = s;
  } else if (n.op == "Add") {
    *beta = s;
  } else if (n.op == "Sub") {
    *alpha = first ? 1.f : -1.f;
    *beta = first ? -s : s;
  } else {
    if (!first || !std::isfinite(s) || s == 0 || std::fpclassify(1.f / s) != FP_NORMAL) return false;
    *alpha = 1.f / s;
  }
  return true;
}

// ---- post-op lists -------------------------------------------------------------------------------------------------

bool AppendPostOp(std::vector<PostOp>* list, const PostOp& p, bool merge_linear) {
  if (p.kind != PostOp::kEltwise) {
    list->push_back(p);
    return true;
  }
  auto linear = [](const PostOp& q) {
    return q.kind == PostOp::kEltwise && q.alg == dnnl_eltwise_linear && q.scale == 1.f;
  };
  PostOp add = p;
  size_t end = list->size();
  if (merge_linear && linear(p) && !list->empty() && linear(list->back())) {
    const PostOp& prev = list->back();
    add.alpha = prev.alpha * p.alpha;
    add.beta = prev.beta * p.alpha + p.beta;
    --end;  // replaces the previous linear
  }
  for (size_t i = 0; i < end; ++i) {
    const PostOp& q = (*list)[i];
    if (q.kind == PostOp::kEltwise && q.alg == add.alg &&
        (q.alpha != add.alpha || q.beta != add.beta || q.scale != add.scale))
      return false;
  }
  // Clip bounds may be infinite (max(x, c) is a clip to [c, inf]: an infinite input stays infinite); nothing else.
  const bool clip = add.kind == PostOp::kEltwise && (add.alg == dnnl_eltwise_clip || add.alg == dnnl_eltwise_clip_v2);
  if (clip ? std::isnan(add.alpha) || std::isnan(add.beta) : !std::isfinite(add.alpha) || !std::isfinite(add.beta))
    return false;
  list->resize(end);
  list->push_back(add);
  return true;
}

// ---- EltwiseFor --------------------------------------------------------------------------------------------------

bool EltwiseFor(const Graph& g, const Node& n, uint32_t* alg, float* alpha, float* beta) {
  if (!IsOnnx(n)) return false;
  const std::string& op = n.op;
  *alpha = 0;
  *beta = 0;
  if (op == "Relu") {
    *alg = dnnl_eltwise_relu;
  } else if (op == "LeakyRelu") {
    *alg = dnnl_eltwise_relu;
    *alpha = n.Float("alpha", 0.01f);
  } else if (op == "Clip") {
    float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
    if (n.opset < 11) {
      lo = n.Float("min", lo);
      hi = n.Float("max", hi);
    } else {
      // Absent bounds are the float range, as in the CPU EP and ONNX Runtime (an infinite input is clamped to it).
      if (n.inputs.size() > 1 && n.inputs[1] >= 0 && !g.ConstScalar(n.inputs[1], &lo)) return false;
      if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !g.ConstScalar(n.inputs[2], &hi)) return false;
    }
    if (std::isnan(lo) || std::isnan(hi)) return false;
    *alg = dnnl_eltwise_clip_v2;
    *alpha = lo;
    *beta = hi;
  } else if (op == "Sigmoid") {
    *alg = dnnl_eltwise_logistic;
  } else if (op == "HardSwish") {
    *alg = dnnl_eltwise_hardswish;  // x * relu6(x + 3) / 6 = ONNX's alpha 1/6, beta 0.5
  } else if (op == "Swish") {
    *alg = dnnl_eltwise_swish;  // x * sigmoid(alpha * x) (opset 24; also FuseSpelledActivations' rewrite)
    *alpha = n.Float("alpha", 1.0f);
  } else if (op == "Tanh") {
    *alg = dnnl_eltwise_tanh;
  } else if (op == "Exp") {
    *alg = dnnl_eltwise_exp;
  } else if (op == "Log") {
    *alg = dnnl_eltwise_log;
  } else if (op == "Sqrt") {
    *alg = dnnl_eltwise_sqrt;
  } else if (op == "Abs") {
    *alg = dnnl_eltwise_abs;
  } else if (op == "Neg") {
    *alg = dnnl_eltwise_linear;
    *alpha = -1;
  } else if (op == "Elu") {
    *alg = dnnl_eltwise_elu;
    *alpha = n.Float("alpha", 1.0f);
  } else if (op == "Softplus") {
    *alg = dnnl_eltwise_soft_relu;  // 2.6: log(1 + exp(x)), alpha ignored
  } else {
    return false;  // HardSigmoid needs two algorithms; Erf is not an eltwise algorithm
  }
  return true;
}

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

int SoftmaxAxis(const Node& n, size_t rank);  // below

// Add node `add` = x + mask with `mask` constant f32 (its dims broadcast to x's, last dim equal), x not constant,
// and a last-axis Softmax as the sole reader of the sum: one MaskedSoftmax step. Sets *x, *mask and *softmax.
bool MaskedSoftmaxOf(const LowerContext& ctx, int add, int* x, int* mask, int* softmax) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(add);
  if (!IsOnnx(n) || n.op != "Add" || n.inputs.size() != 2 || n.inputs[0] < 0 || n.inputs[1] < 0) return false;
  const int sm = ctx.SoleConsumer(Out0(n));
  if (sm < 0) return false;
  const Node& s = ctx.node(sm);
  const Value& y = g.v(Out0(n));
  if (!IsOnnx(s) || s.op != "Softmax" || s.inputs.size() != 1 || s.outputs.size() != 1 || y.dims.empty() ||
      SoftmaxAxis(s, y.dims.size()) != static_cast<int>(y.dims.size()) - 1 || y.dtype != kF32 ||
      g.v(Out0(s)).dims != y.dims)
    return false;
  for (int i = 0; i < 2; ++i) {
    const Value& xv = g.v(n.inputs[i]);
    const Value& mv = g.v(n.inputs[1 - i]);
    if (xv.is_const() || !mv.is_const() || xv.dtype != kF32 || mv.dtype != kF32 || xv.dims != y.dims ||
        mv.dims.size() > y.dims.size() || mv.dims.empty())
      continue;
    const Dims md = PadLeft(mv.dims, y.dims.size());
    bool ok = md.back() == y.dims.back();
    for (size_t k = 0; k + 1 < md.size(); ++k) ok = ok && (md[k] == 1 || md[k] == y.dims[k]);
    if (!ok) continue;
    *x = n.inputs[i];
    *mask = n.inputs[1 - i];
    *softmax = sm;
    return true;
  }
  return false;
}

CheckResult LowerMaskedSoftmax(LowerContext& ctx, int add, int x, int mask, int softmax) {
  const Graph& g = ctx.graph();
  const Dims& d = g.v(x).dims;
  Operand src = ctx.UsePlain(x);
  Operand m = ctx.UsePlain(mask);
  if (!IsRowMajor(src) || !IsRowMajor(m)) return ctx.Fail(add, "scores or mask are not row-major");
  ctx.Absorb(softmax);
  Step s;
  s.kind = StepKind::kMaskedSoftmax;
  s.name = ctx.node(add).name + "+" + ctx.node(softmax).name;
  s.ops = {Reshaped(src, d), Reshaped(m, PadLeft(g.v(mask).dims, d.size())),
           DefineAs(ctx, Out0(ctx.node(softmax)), d)};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
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

// ---- unary ------------------------------------------------------------------------------------------------------

bool SupportUnary(const Graph& g, const Node& n, std::string* why) {
  if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0] < 0)
    return Reject(why, "needs one input and one output");
  if (n.op == "Clip") {
    // Bounds are float scalars, constant or not: only X and Y need to be static float tensors.
    const Value& x = g.v(n.inputs[0]);
    const Value& yv = g.v(n.outputs[0]);
    if (x.dtype != kF32 || yv.dtype != kF32) return Reject(why, "Clip: only float tensors");
    if (!x.has_shape || !yv.has_shape) return Reject(why, "Clip: shapes must be static");
    if (n.opset < 11 && n.inputs.size() != 1) return Reject(why, "expects one input");
    if (n.inputs.size() > 3) return Reject(why, "Clip: too many inputs");
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      if (n.inputs[i] < 0) continue;
      const Value& b = g.v(n.inputs[i]);
      // Constant bounds become eltwise parameters; others (computed at run time) binary max/min operands.
      if (b.dtype != kF32 || !b.has_shape || b.numel() != 1 || b.dims.size() > 1)
        return Reject(why, "Clip: min/max must be float scalars");
      float f;
      if (b.is_const() && (!g.ConstScalar(n.inputs[i], &f) || std::isnan(f)))
        return Reject(why, "Clip: a constant min/max is NaN");
    }
  } else {
    if (!StaticFloatTensors(g, n, why)) return false;
    if (n.inputs.size() != 1) return Reject(why, "expects one input");
  }
  const Value& x = g.v(n.inputs[0]);
  if (x.dims != g.v(n.outputs[0]).dims) return Reject(why, "output shape differs from the input");
  if (x.dims.size() > kMaxRank) return Reject(why, "rank above " + std::to_string(kMaxRank));
  if (Numel(x.dims) == 0) return Reject(why, "empty tensor");
  if (n.op == "Erf" || n.op == "HardSigmoid") return true;
  if (n.op == "Clip" && n.opset >= 11) return true;  // constant bounds: eltwise; others: LowerClipRuntime
  uint32_t alg;
  float alpha, beta;
  if (!EltwiseFor(g, n, &alg, &alpha, &beta)) return Reject(why, "not expressible as a oneDNN eltwise");
  return true;
}

namespace {
// Clip whose bounds are computed at run time: y = min(max(x, lo), hi) as one binary step, max(x, lo) with the min by
// hi as a binary post-op (either bound may be absent; a constant bound is a weight operand like any other).
CheckResult LowerClipRuntime(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  const int x = n.inputs[0], y = n.outputs[0];
  const Dims cd = AtLeast1D(g.v(y).dims);
  std::vector<std::pair<int, uint32_t>> bounds;  // value, binary algorithm
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) bounds.push_back({n.inputs[1], dnnl_binary_max});
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) bounds.push_back({n.inputs[2], dnnl_binary_min});
  if (bounds.empty()) return ctx.Fail(node, "Clip without bounds is not a run-time clip");
  Operand src = ctx.UsePlain(x);
  if (!IsRowMajor(src)) return ctx.Fail(node, "input is not row-major");
  Step step;
  step.kind = StepKind::kBinary;
  step.name = n.name;
  step.ints = {static_cast<int64_t>(bounds[0].second)};
  step.ops = {Reshaped(src, cd)};
  for (size_t i = 0; i < bounds.size(); ++i) {
    Operand b = ctx.UsePlain(bounds[i].first);
    if (!IsRowMajor(b)) return ctx.Fail(node, "bound is not row-major");
    step.ops.push_back(Reshaped(b, Dims(cd.size(), 1)));
    if (i == 0) step.ops.push_back(Operand());  // dst, defined below
  }
  if (bounds.size() == 2) {
    PostOp q;
    q.kind = PostOp::kBinary;
    q.alg = bounds[1].second;
    q.operand = 3;
    step.post_ops.push_back(q);
  }
  step.ops[2] = DefineAs(ctx, y, cd);
  ctx.Emit(std::move(step));
  return CheckResult::Ok();
}
}  // namespace

CheckResult LowerUnary(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  const int x = n.inputs[0], y = n.outputs[0];
  uint32_t alg0;
  float alpha0, beta0;
  if (n.op == "Erf") {
    Operand src = ctx.UsePlain(x);
    const Dims dims = AtLeast1D(g.v(x).dims);
    if (!IsRowMajor(src)) return ctx.Fail(node, "Erf input is not row-major");
    Step s;
    s.kind = StepKind::kErf;
    s.name = n.name;
    s.ops = {Reshaped(src, dims), DefineAs(ctx, y, dims)};
    ctx.Emit(std::move(s));
    return CheckResult::Ok();
  }
  if (n.op == "Clip" && !EltwiseFor(g, n, &alg0, &alpha0, &beta0)) return LowerClipRuntime(ctx, node);
  std::vector<PostOp> algs;
  if (n.op == "HardSigmoid") {
    HardSigmoidOps(n, &algs);
  } else {
    uint32_t alg;
    float alpha, beta;
    if (!EltwiseFor(g, n, &alg, &alpha, &beta)) return ctx.Fail(node, "not expressible as a oneDNN eltwise");
    algs.push_back(EltwisePostOp(alg, alpha, beta));
  }
  return EmitEltwise(ctx, node, n.name, x, y, algs);
}

CheckResult BuildEltwise(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(2, true, 1, 2);
  if (!r.ok) return r;
  const Step& st = bc.step();
  if (!IsEltwiseAlg(st.ints[0])) return bc.Fail("unknown eltwise algorithm " + std::to_string(st.ints[0]));
  if (std::isnan(st.floats[0]) || std::isnan(st.floats[1])) return bc.Fail("eltwise parameter is NaN");
  std::vector<memory::desc> d;
  if (!(r = GetDescs(bc, 2, &d)).ok) return r;
  if (d[0] != d[1]) return bc.Fail("eltwise src and dst layouts differ");
  dnnl::primitive_attr attr;
  std::vector<std::pair<int, int>> args;
  if (!(r = bc.PostOps(&attr, &args)).ok) return r;
  try {
    dnnl::eltwise_forward::primitive_desc pd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, static_cast<dnnl::algorithm>(st.ints[0]), d[0],
                                    st.floats[0], st.floats[1]),
        attr, bc.engine());
    if (!(r = CheckSame(bc, "src", pd.src_desc(), d[0])).ok) return r;
    if (!(r = CheckSame(bc, "dst", pd.dst_desc(), d[1])).ok) return r;
    args.push_back({DNNL_ARG_SRC, bc.Slot(0, d[0])});
    args.push_back({DNNL_ARG_DST, bc.Slot(1, d[1])});
    out->reset(new PrimitiveExec(dnnl::eltwise_forward(pd), std::move(args)));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("eltwise: ") + e.what());
  }
  return CheckResult::Ok();
}

CheckResult BuildErf(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(2, false, 0, 0);
  if (!r.ok) return r;
  std::vector<memory::desc> d;
  if (!(r = GetDescs(bc, 2, &d)).ok) return r;
  const Step& st = bc.step();
  if (st.ops[0].dtype != kF32 || st.ops[1].dtype != kF32 || st.ops[0].dims != st.ops[1].dims || st.ops[0].dims.empty())
    return bc.Fail("erf needs f32 src and dst of equal dims");
  const Dims& dims = st.ops[0].dims;
  memory::desc plain = StridedDesc(dims, RowMajorStrides(dims));
  if (d[0] != plain || d[1] != plain) return bc.Fail("erf operands must be dense row-major");
  int64_t n = 1;
  for (int64_t x : dims) {
    if (x < 0) return bc.Fail("negative dim");
    n *= x;
  }
  out->reset(new ErfExec(bc.Slot(0, d[0]), bc.Slot(1, d[1]), static_cast<size_t>(n)));
  return CheckResult::Ok();
}

// ---- binary -----------------------------------------------------------------------------------------------------

bool SupportBinary(const Graph& g, const Node& n, std::string* why) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || n.inputs[0] < 0 || n.inputs[1] < 0)
    return Reject(why, "needs exactly 2 inputs and 1 output");
  const Value& a = g.v(n.inputs[0]);
  const Value& b = g.v(n.inputs[1]);
  const Value& y = g.v(n.outputs[0]);
  if (n.op == "Pow") {
    float e;
    if (a.dtype != kF32 || y.dtype != kF32) return Reject(why, "Pow: only float base");
    if (!a.has_shape || !y.has_shape || a.dims != y.dims) return Reject(why, "Pow: shapes must be static and equal");
    if (!ConstExponent(g, n.inputs[1], &e) || b.dims.size() > a.dims.size()) {
      return Reject(why, "Pow: exponent must be a constant scalar");
    }
    if (Numel(a.dims) == 0 || a.dims.size() > kMaxRank) return Reject(why, "empty tensor or rank too high");
    return true;
  }
  if (!StaticFloatTensors(g, n, why)) return false;
  Dims out;
  if (!BroadcastShapes(a.dims, b.dims, &out) || out != y.dims)
    return Reject(why, "shapes do not broadcast to the output");
  int64_t since_broadcast = (n.op == "Max" || n.op == "Min") ? 8 : 7;
  if (n.opset < since_broadcast && a.dims != b.dims)
    return Reject(why, "opset " + std::to_string(n.opset) + " broadcasting (axis attribute) not supported");
  if (y.dims.size() > kMaxRank) return Reject(why, "rank above " + std::to_string(kMaxRank));
  if (Numel(y.dims) == 0) return Reject(why, "empty tensor");
  // oneDNN's binary needs its first operand at the output's shape: the lowering swaps the operands when the second
  // one has it (Sub negated), else broadcasts the first into a copy (LowerContext::BroadcastCopy).
  return true;
}

// The layout of a broadcast src1 of dims `b` (the output's rank) beside a blocked src0 (`d0`): src0's format tag with
// b's dims, when oneDNN has an optimized binary kernel for that pair (oneDNN 2.6 has none for a plain broadcast src1
// beside a blocked src0: ref:any). A zero desc otherwise.
memory::desc BlockedBroadcastDesc(LowerContext& ctx, dnnl::algorithm alg, const memory::desc& d0, const Dims& b) {
  const uint32_t tag = FormatTagOf(d0);
  if (!tag) return memory::desc();
  try {
    const memory::desc d1(b, memory::data_type::f32, static_cast<memory::format_tag>(tag));
    dnnl::binary::primitive_desc pd(dnnl::binary::desc(alg, d0, d1, d0), ctx.engine());
    if (IsRefImpl(pd)) return memory::desc();
    Operand probe;
    if (!LayoutFromDesc(d1, &probe)) return memory::desc();
    return d1;
  } catch (const dnnl::error&) {
    return memory::desc();
  }
}

CheckResult LowerBinary(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  {
    int x, mask, sm;
    if (MaskedSoftmaxOf(ctx, node, &x, &mask, &sm) && ctx.IsAvailable(x))
      return LowerMaskedSoftmax(ctx, node, x, mask, sm);
  }
  if (n.op == "Div" || n.op == "Mul") {
    for (int x : n.inputs) {
      GeluMatch gm;
      if (x >= 0 && !g.v(x).is_const() && MatchGelu(g, x, false, &gm) &&
          std::find(gm.nodes.begin(), gm.nodes.end(), node) != gm.nodes.end() && !AnyAbsorbed(ctx, gm.nodes))
        return LowerGelu(ctx, node, x, gm);
    }
  }
  if (n.op == "Pow") {
    float e;
    if (!ConstExponent(g, n.inputs[1], &e)) return ctx.Fail(node, "exponent is not a constant scalar");
    // Small exponents by their own kernels: oneDNN 2.6's eltwise pow (exp(e * log|x|) with sign handling) ran x^3
    // at 1.7 GB/s, 0.7% of the machine (issue 24's performance tester: the tanh-form GELU, 0.13x ORT).
    if (e == 2.f) return EmitEltwise(ctx, node, n.name, n.inputs[0], n.outputs[0], {EltwisePostOp(dnnl_eltwise_square, 0, 0)});
    if (e == 0.5f) return EmitEltwise(ctx, node, n.name, n.inputs[0], n.outputs[0], {EltwisePostOp(dnnl_eltwise_sqrt, 0, 0)});
    if (e == 3.f) {  // x * x * x: one binary step with a binary post-op, on plain bytes of any shape seen as 1-D
      const Dims xd = g.v(n.inputs[0]).dims;
      int64_t numel = 1;
      for (int64_t d : xd) numel *= d;
      if (numel > 0) {
        Operand x = Reshaped(ctx.UsePlain(n.inputs[0]), {numel});
        Step st;
        st.kind = StepKind::kBinary;
        st.name = n.name;
        st.ints = {static_cast<int64_t>(dnnl_binary_mul)};
        PostOp cube;
        cube.kind = PostOp::kBinary;
        cube.alg = dnnl_binary_mul;
        cube.operand = 3;
        st.post_ops = {cube};
        st.ops = {x, x, Reshaped(DefineAs(ctx, n.outputs[0], xd), {numel}), x};
        ctx.Emit(std::move(st));
        return CheckResult::Ok();
      }
    }
    return EmitEltwise(ctx, node, n.name, n.inputs[0], n.outputs[0], {EltwisePostOp(dnnl_eltwise_pow, 1.f, e)});
  }
  const Dims yd = g.v(n.outputs[0]).dims;
  const Dims cd = AtLeast1D(yd);
  int s0 = n.inputs[0], s1 = n.inputs[1];
  bool negate = false;
  if (PadLeft(g.v(s0).dims, yd.size()) != yd) {
    std::swap(s0, s1);
    negate = n.op == "Sub";  // a - b computed as -(b - a)
  }
  // Neither operand at the output's shape ([4, 1] + [1, 5]), or a Div whose dividend broadcasts: the first operand
  // broadcast into a copy, in the node's order (difftest --dynamic: a shape at which the broadcast direction flips).
  const bool bcast0 = PadLeft(g.v(s0).dims, yd.size()) != yd || (n.op == "Div" && s0 != n.inputs[0]);
  if (bcast0) {
    s0 = n.inputs[0];
    s1 = n.inputs[1];
    negate = false;
  }

  Step step;
  step.kind = StepKind::kBinary;
  step.name = n.name;
  step.ints = {static_cast<int64_t>(BinaryAlg(n.op))};
  if (negate) step.post_ops.push_back(EltwisePostOp(dnnl_eltwise_linear, -1, 0));

  // Same dims and the same (possibly blocked) layout: run in that layout. A blocked first operand with a broadcast
  // second one (a scalar, per-channel or per-(N, C) values: x + 3 of a hard-swish, the Mul of a squeeze-excitation
  // block) stays blocked too when oneDNN has an optimized kernel for it, the second operand in the first one's blocked
  // format with broadcast dims (packed once when constant, else one reorder of the small operand): converting the
  // activations to plain and back around every such op cost more than the op (issue 14).
  // Otherwise plain.
  Operand o0, o1;
  bool blocked = false;
  const Operand* p0 = ctx.Peek(s0);
  const Operand* p1 = ctx.Peek(s1);
  memory::desc d0, d1;
  const bool blocked0 = !bcast0 && p0 && !p0->dims.empty() && OperandDesc(*p0, &d0).ok && CompactDesc(d0) &&
                       !IsRowMajor(*p0);
  if (bcast0) {
    o0 = ctx.BroadcastCopy(s0, yd);
    if (!o0.present()) return ctx.Fail(node, "the first operand does not broadcast to the output");
    o1 = ctx.UsePlain(s1);
  } else if (blocked0 && g.v(s0).dims == g.v(s1).dims && p1 && OperandDesc(*p1, &d1).ok && d0 == d1) {
    o0 = ctx.Use(s0);
    o1 = ctx.Use(s1);
    blocked = true;
  } else if (blocked0 && g.v(s0).dims == g.v(s1).dims && ctx.IsAvailable(s1) && !g.v(s1).is_const() &&
             !IsCompareAlg(step.ints[0])) {
    // Same dims, the second operand in another layout (plain, a strided slice, another block): it takes the first
    // one's layout with one reorder, and the result keeps it. Before, both went to plain and the result back for the
    // next convolution (issue 24: a C2f block's residual Add of a Split part and an nhwc convolution result).
    o1 = ctx.UseAs(s1, d0);
    if (o1.present()) {
      o0 = ctx.Use(s0);
      blocked = true;
    }
  } else if (blocked0 && g.v(s0).dims != g.v(s1).dims && !IsCompareAlg(step.ints[0]) &&
             (g.v(s1).is_const() ? g.v(s1).dtype == kF32 && g.v(s1).data != nullptr : p1 && g.v(s1).dims.size() == yd.size())) {
    const Dims b = PadLeft(AtLeast1D(g.v(s1).dims), cd.size());
    const memory::desc d1b = BlockedBroadcastDesc(ctx, static_cast<dnnl::algorithm>(step.ints[0]), d0, b);
    if (d1b.data.ndims != 0) {
      if (g.v(s1).is_const()) {
        const memory::desc plain1(b, memory::data_type::f32, RowMajorStrides(b));
        CheckResult r = ctx.PackWeight(g.v(s1).name + ":blocked", g.v(s1).data, plain1, d1b, &o1);
        if (!r.ok) return r;
      } else {
        o1 = ctx.UseAs(s1, d1b);
      }
      if (o1.present()) {
        o0 = ctx.Use(s0);
        blocked = true;
      }
    }
  }
  if (!blocked && !bcast0) {
    o0 = ctx.UsePlain(s0);
    o1 = ctx.UsePlain(s1);
  }
  if (!blocked && (!IsRowMajor(o0) || !IsRowMajor(o1))) return ctx.Fail(node, "operands are not row-major");
  // Plain operands (post-op operands too) drop the output's size-1 axes, which keeps their bytes: oneDNN 2.6's binary
  // primitive misreads a post-op operand [1, C, 1, 1] against a dst [N, C, 1, 1] (every element wrong; found by
  // tests/difftest), and reads [1, C] against [N, C] right.
  // Dropping the size-1 axes can also turn a per-channel broadcast into one oneDNN 2.6 only has a reference kernel
  // for ([24, 160, 224] + [24, 1, 1] after a batch of 1: ref:any, 161 ms on the PaddleOCR detector; [1, 24, 160, 224] +
  // [1, 24, 1, 1]: jit). Then the full-rank dims are kept, without binary post-ops (where the misreading was seen).
  bool full_rank = false;
  if (!blocked && !IsCompareAlg(step.ints[0])) {
    auto plain_pd_ref = [&](const Dims& a, const Dims& b) {
      try {
        const memory::desc da(a, memory::data_type::f32, RowMajorStrides(a));
        const memory::desc db(b, memory::data_type::f32, RowMajorStrides(b));
        dnnl::binary::primitive_desc pd(dnnl::binary::desc(static_cast<dnnl::algorithm>(step.ints[0]), da, db, da),
                                        ctx.engine());
        return IsRefImpl(pd) ? 1 : 2;
      } catch (const dnnl::error&) {
        return 0;
      }
    };
    Dims a_drop, b_drop;
    const Dims pb = PadLeft(g.v(s1).dims, yd.size());
    for (size_t i = 0; i < yd.size(); ++i)
      if (yd[i] != 1) {
        a_drop.push_back(yd[i]);
        b_drop.push_back(pb[i]);
      }
    if (plain_pd_ref(AtLeast1D(a_drop), AtLeast1D(b_drop)) == 1 &&
        plain_pd_ref(cd, PadLeft(AtLeast1D(g.v(s1).dims), cd.size())) == 2)
      full_rank = true;
  }
  auto compute_dims = [&](const Dims& od) {
    if (blocked || full_rank) return PadLeft(AtLeast1D(od), cd.size());
    const Dims p = PadLeft(od, yd.size());
    Dims r;
    for (size_t i = 0; i < yd.size(); ++i)
      if (yd[i] != 1) r.push_back(p[i]);
    return AtLeast1D(r);
  };
  const Dims dd = compute_dims(yd);
  if (!blocked) {
    o0 = Reshaped(o0, dd);
    o1 = Reshaped(o1, compute_dims(g.v(s1).dims));
  }
  memory::desc dst_d;
  if (!OperandDesc(o0, &dst_d).ok) return ctx.Fail(node, "bad operand layout");

  int y = n.outputs[0];
  OperandMap map = [&](const Dims& od, Dims* out) {
    *out = compute_dims(od);
    return true;
  };
  std::vector<Fused> chain;
  if (!negate) chain = CollectPostOps(ctx, y, !blocked && !full_rank, map);
  auto make_pd = [&](const std::vector<PostOp>& post_ops, const std::vector<Operand>& ops) -> int {
    try {
      dnnl::primitive_attr attr;
      if (!TrialAttr(post_ops, ops, &attr)) return 0;
      memory::desc a_d, b_d;
      if (!OperandDesc(ops[0], &a_d).ok || !OperandDesc(ops[1], &b_d).ok) return 0;
      dnnl::binary::primitive_desc pd(
          dnnl::binary::desc(static_cast<dnnl::algorithm>(step.ints[0]), a_d, b_d, dst_d), attr, ctx.engine());
      return IsRefImpl(pd) ? 1 : 2;
    } catch (const dnnl::error&) {
      return 0;
    }
  };
  std::vector<Operand> base = {o0, o1, FakePlain(dd)};
  size_t k = ChooseChain(g, chain, base, map, make_pd);
  step.ops = {o0, o1, Operand()};
  CheckResult rc = ApplyChain(ctx, node, chain, k, map, &step, &y);
  if (!rc.ok) return rc;
  if (blocked) {
    step.ops[2] = ctx.Define(y, dst_d);
  } else {
    step.ops[2] = DefineAs(ctx, y, dd);
  }
  ctx.Emit(std::move(step));
  return CheckResult::Ok();
}

namespace {

// The product of a layout's inner blocks (1 for a plain or strided layout).
int64_t InnerBlock(const memory::desc& d) {
  const dnnl_blocking_desc_t& b = d.data.format_desc.blocking;
  if (d.data.format_kind != dnnl_blocked) return 1;
  int64_t p = 1;
  for (int i = 0; i < b.inner_nblks; ++i) p *= b.inner_blks[i];
  return p;
}

// A binary primitive followed by its post-ops as primitives of their own, each in place on the destination.
// oneDNN 2.6's jit binary kernel with any post-op on a layout blocked by 4 or 8 channels (aBcd4b, aBcd8b) leaves
// elements unwritten and writes 224 bytes past the destination on an AVX-512 machine (difftest seed 20261127,
// model 2588: ConvTranspose with 2 groups of 4 channels, Add, Softplus; reproduced with oneDNN alone: relu,
// logistic, soft_relu, exp, log, tanh post-ops alike). Without post-ops the kernel is correct.
class SplitBinaryExec : public StepExec {
 public:
  struct Part {
    dnnl::primitive prim;
    std::vector<std::pair<int, int>> args;  // (DNNL_ARG_*, slot)
    memory::desc scratch;
  };
  explicit SplitBinaryExec(std::vector<Part> parts) : parts_(std::move(parts)) {}
  void Run(RunContext& rc) override {
    for (const Part& p : parts_) {
      std::unordered_map<int, dnnl::memory> args;
      for (const auto& a : p.args) args.emplace(a.first, rc.mem(a.second));
      if (p.scratch.get_size() > 0)
        args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(p.scratch, rc.stream().get_engine(), rc.scratchpad()));
      p.prim.execute(rc.stream(), args);
    }
  }
  size_t ScratchpadBytes() const override {
    size_t m = 0;
    for (const Part& p : parts_) m = std::max(m, p.scratch.get_size());
    return m;
  }
  std::string Impl() const override {
    const char* impl = nullptr;
    dnnl_primitive_desc_query(parts_[0].prim.get_primitive_desc(), dnnl_query_impl_info_str, 0, &impl);
    return std::string(impl ? impl : "?") + "+split";
  }

 private:
  std::vector<Part> parts_;
};

CheckResult BuildSplitBinary(BuildContext& bc, const std::vector<memory::desc>& d, std::unique_ptr<StepExec>* out) {
  const Step& st = bc.step();
  std::vector<SplitBinaryExec::Part> parts;
  const int dst = bc.Slot(2, d[2]);
  try {
    dnnl::binary::primitive_desc pd(dnnl::binary::desc(static_cast<dnnl::algorithm>(st.ints[0]), d[0], d[1], d[2]),
                                    UserScratchpad(), bc.engine());
    CheckResult r;
    if (!(r = CheckSame(bc, "src0", pd.src0_desc(), d[0])).ok || !(r = CheckSame(bc, "src1", pd.src1_desc(), d[1])).ok ||
        !(r = CheckSame(bc, "dst", pd.dst_desc(), d[2])).ok)
      return r;
    parts.push_back({dnnl::binary(pd), {{DNNL_ARG_SRC_0, bc.Slot(0, d[0])}, {DNNL_ARG_SRC_1, bc.Slot(1, d[1])},
                                        {DNNL_ARG_DST, dst}}, pd.scratchpad_desc()});
    for (size_t k = 0; k < st.post_ops.size(); ++k) {
      const PostOp& q = st.post_ops[k];
      if (q.kind == PostOp::kEltwise) {
        dnnl::eltwise_forward::primitive_desc ed(
            dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, static_cast<dnnl::algorithm>(q.alg),
                                        d[2], q.alpha, q.beta),
            UserScratchpad(), bc.engine());
        parts.push_back({dnnl::eltwise_forward(ed), {{DNNL_ARG_SRC, dst}, {DNNL_ARG_DST, dst}}, ed.scratchpad_desc()});
        if (q.scale != 1.f) {
          dnnl::eltwise_forward::primitive_desc sd(
              dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_linear, d[2],
                                          q.scale, 0.f),
              UserScratchpad(), bc.engine());
          parts.push_back({dnnl::eltwise_forward(sd), {{DNNL_ARG_SRC, dst}, {DNNL_ARG_DST, dst}}, sd.scratchpad_desc()});
        }
      } else if (q.kind == PostOp::kBinary) {
        memory::desc od;
        if (!(r = bc.Desc(q.operand, &od)).ok) return r;
        dnnl::binary::primitive_desc bd(dnnl::binary::desc(static_cast<dnnl::algorithm>(q.alg), d[2], od, d[2]),
                                        UserScratchpad(), bc.engine());
        parts.push_back({dnnl::binary(bd), {{DNNL_ARG_SRC_0, dst}, {DNNL_ARG_SRC_1, bc.Slot(q.operand, od)},
                                            {DNNL_ARG_DST, dst}}, bd.scratchpad_desc()});
      } else {
        return bc.Fail("post-op " + std::to_string(k) + " of kind " + std::to_string(q.kind) + " on a binary step");
      }
    }
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("binary: ") + e.what());
  }
  out->reset(new SplitBinaryExec(std::move(parts)));
  return CheckResult::Ok();
}

}  // namespace

CheckResult BuildBinary(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(3, true, 1, 0);
  if (!r.ok) return r;
  const Step& st = bc.step();
  if (!IsBinaryAlg(st.ints[0])) return bc.Fail("unknown binary algorithm " + std::to_string(st.ints[0]));
  // Comparisons write bool (u8 0/1) and take no post-ops; arithmetic writes f32.
  const bool compare = IsCompareAlg(st.ints[0]);
  if (compare && (!st.post_ops.empty() || st.ops.size() != 3)) return bc.Fail("a comparison takes no post-ops");
  if (st.ops[2].dtype != (compare ? kBool : kF32) || st.ops[0].dtype != kF32 || st.ops[1].dtype != kF32)
    return bc.Fail(compare ? "a comparison reads f32 and writes bool" : "binary operands must be f32");
  std::vector<memory::desc> d;
  if (!(r = GetDescs(bc, 3, &d)).ok) return r;
  if (!st.post_ops.empty()) {
    int64_t block = 0;
    for (const memory::desc& x : d) {
      const int64_t b = InnerBlock(x);
      if (b > 1 && (block == 0 || b < block)) block = b;
    }
    if (block > 1 && block < 16) return BuildSplitBinary(bc, d, out);
  }
  dnnl::primitive_attr attr;
  std::vector<std::pair<int, int>> args;
  if (!(r = bc.PostOps(&attr, &args)).ok) return r;
  try {
    dnnl::binary::primitive_desc pd(dnnl::binary::desc(static_cast<dnnl::algorithm>(st.ints[0]), d[0], d[1], d[2]),
                                    attr, bc.engine());
    if (!(r = CheckSame(bc, "src0", pd.src0_desc(), d[0])).ok) return r;
    if (!(r = CheckSame(bc, "src1", pd.src1_desc(), d[1])).ok) return r;
    if (!(r = CheckSame(bc, "dst", pd.dst_desc(), d[2])).ok) return r;
    args.push_back({DNNL_ARG_SRC_0, bc.Slot(0, d[0])});
    args.push_back({DNNL_ARG_SRC_1, bc.Slot(1, d[1])});
    args.push_back({DNNL_ARG_DST, bc.Slot(2, d[2])});
    out->reset(new PrimitiveExec(dnnl::binary(pd), std::move(args)));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("binary: ") + e.what());
  }
  return CheckResult::Ok();
}

// ---- comparisons ------------------------------------------------------------------------------------------------

namespace {
// The oneDNN comparison for an ONNX op, and the one with operands swapped (a < b == b > a).
bool CompareAlgs(const std::string& op, uint32_t* alg, uint32_t* swapped) {
  if (op == "Equal") *alg = *swapped = dnnl_binary_eq;
  else if (op == "Greater") *alg = dnnl_binary_gt, *swapped = dnnl_binary_lt;
  else if (op == "GreaterOrEqual") *alg = dnnl_binary_ge, *swapped = dnnl_binary_le;
  else if (op == "Less") *alg = dnnl_binary_lt, *swapped = dnnl_binary_gt;
  else if (op == "LessOrEqual") *alg = dnnl_binary_le, *swapped = dnnl_binary_ge;
  else return false;
  return true;
}
}  // namespace

bool SupportCompare(const Graph& g, const Node& n, std::string* why) {
  uint32_t alg, swapped;
  if (!CompareAlgs(n.op, &alg, &swapped)) return Reject(why, "not a comparison");
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || n.inputs[0] < 0 || n.inputs[1] < 0)
    return Reject(why, "needs exactly 2 inputs and 1 output");
  const Value& a = g.v(n.inputs[0]);
  const Value& b = g.v(n.inputs[1]);
  const Value& y = g.v(n.outputs[0]);
  if (a.dtype != kF32 || b.dtype != kF32) return Reject(why, "only float inputs");
  if (y.dtype != kBool) return Reject(why, "output is not bool");
  if (!a.has_shape || !b.has_shape || !y.has_shape) return Reject(why, "shapes must be static");
  if (n.opset < 7 && a.dims != b.dims) return Reject(why, "opset " + std::to_string(n.opset) + " broadcasting");
  Dims out;
  if (!BroadcastShapes(a.dims, b.dims, &out) || out != y.dims) return Reject(why, "shapes do not broadcast to the output");
  if (y.dims.size() > kMaxRank || Numel(y.dims) == 0) return Reject(why, "empty tensor or rank too high");
  if (PadLeft(a.dims, y.dims.size()) != y.dims && PadLeft(b.dims, y.dims.size()) != y.dims)
    return Reject(why, "oneDNN binary needs one operand with the output shape");
  return true;
}

CheckResult LowerCompare(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  uint32_t alg, swapped;
  if (!CompareAlgs(n.op, &alg, &swapped)) return ctx.Fail(node, "not a comparison");
  const Dims yd = g.v(n.outputs[0]).dims;
  const Dims cd = AtLeast1D(yd);
  int s0 = n.inputs[0], s1 = n.inputs[1];
  if (PadLeft(g.v(s0).dims, yd.size()) != yd) {  // the full-shape operand goes first: a > b computed as b < a
    std::swap(s0, s1);
    alg = swapped;
  }
  Operand o0 = ctx.UsePlain(s0), o1 = ctx.UsePlain(s1);
  if (!IsRowMajor(o0) || !IsRowMajor(o1)) return ctx.Fail(node, "operands are not row-major");
  Step step;
  step.kind = StepKind::kBinary;
  step.name = n.name;
  step.ints = {static_cast<int64_t>(alg)};
  step.ops = {Reshaped(o0, cd), Reshaped(o1, PadLeft(AtLeast1D(g.v(s1).dims), cd.size())), DefineAs(ctx, n.outputs[0], cd)};
  ctx.Emit(std::move(step));
  return CheckResult::Ok();
}

// ---- Softmax ----------------------------------------------------------------------------------------------------

namespace {
// Normalized softmax axis, or -1 when out of range.
int SoftmaxAxis(const Node& n, size_t rank) {
  int64_t axis = n.Int("axis", n.opset >= 13 ? -1 : 1);
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) return -1;
  if (axis < 0) axis += r;
  return static_cast<int>(axis);
}

// The dims the softmax runs over and its axis in them. Opset 13+: the input's dims, the node's axis. Before 13 the
// input is coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])] and normalized over the second dim (the same as
// opset 13 only for the last axis).
Dims SoftmaxDims(const Node& n, const Dims& d, int axis, int* compute_axis) {
  if (n.opset >= 13) {
    *compute_axis = axis;
    return d;
  }
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < d.size(); ++i) (static_cast<int>(i) < axis ? outer : inner) *= d[i];
  *compute_axis = 1;
  return {outer, inner};
}
}  // namespace

bool SupportSoftmax(const Graph& g, const Node& n, std::string* why) {
  if (!StaticFloatTensors(g, n, why)) return false;
  if (n.inputs.size() != 1 || n.outputs.size() != 1) return Reject(why, "needs one input and one output");
  const Dims& d = g.v(n.inputs[0]).dims;
  if (d.empty() || d.size() > kMaxRank) return Reject(why, "rank must be 1.." + std::to_string(kMaxRank));
  if (Numel(d) == 0) return Reject(why, "empty tensor");
  if (g.v(n.outputs[0]).dims != d) return Reject(why, "output shape differs from the input");
  if (SoftmaxAxis(n, d.size()) < 0) return Reject(why, "axis out of range");
  return true;
}

CheckResult LowerSoftmax(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  const Dims& d = g.v(n.inputs[0]).dims;
  int axis = SoftmaxAxis(n, d.size());
  if (axis < 0) return ctx.Fail(node, "unsupported axis");
  int compute_axis = axis;
  const Dims cd = SoftmaxDims(n, d, axis, &compute_axis);
  Operand src = ctx.UsePlain(n.inputs[0]);
  if (!IsRowMajor(src)) return ctx.Fail(node, "input is not row-major");
  Step s;
  s.kind = StepKind::kSoftmax;
  s.name = n.name;
  s.ops = {Reshaped(src, cd), DefineAs(ctx, n.outputs[0], cd)};
  s.ints = {compute_axis, 0};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildSoftmax(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(2, true, 2, 0);
  if (!r.ok) return r;
  const Step& st = bc.step();
  std::vector<memory::desc> d;
  if (!(r = GetDescs(bc, 2, &d)).ok) return r;
  if (st.ints[0] < 0 || st.ints[0] >= d[0].data.ndims) return bc.Fail("softmax axis out of range");
  if (st.ints[1] != 0 && st.ints[1] != 1) return bc.Fail("softmax log flag must be 0 or 1");
  dnnl::primitive_attr attr;
  std::vector<std::pair<int, int>> args;
  if (!(r = bc.PostOps(&attr, &args)).ok) return r;
  try {
    dnnl::softmax_v2_forward::primitive_desc pd(
        dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_inference,
                                       st.ints[1] ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate,
                                       d[0], d[1], static_cast<int>(st.ints[0])),
        attr, bc.engine());
    if (!(r = CheckSame(bc, "src", pd.src_desc(), d[0])).ok) return r;
    if (!(r = CheckSame(bc, "dst", pd.dst_desc(), d[1])).ok) return r;
    args.push_back({DNNL_ARG_SRC, bc.Slot(0, d[0])});
    args.push_back({DNNL_ARG_DST, bc.Slot(1, d[1])});
    out->reset(new PrimitiveExec(dnnl::softmax_v2_forward(pd), std::move(args)));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("softmax: ") + e.what());
  }
  return CheckResult::Ok();
}

// ---- MaskedSoftmax -----------------------------------------------------------------------------------------------

namespace {
// exp(x) for x <= 0 (a softmax's x - max), branch-free so the row loops vectorize: exp(x) = 2^k e^r with
// k = round(x log2 e) (|k| <= 126), r = x - k ln 2 (ln 2 in two parts, |r| <= ln2 / 2), e^r by its degree-6 Taylor polynomial
// (relative error below 2e-7). Below -87.3 (results below FLT_MIN) the result is 0; NaN stays NaN.
inline float ExpNonPositive(float x) {
  const float xc = x < -87.3f ? -87.3f : x;
  const float xs = xc == xc ? xc : 0.f;
  // Round to nearest by adding and removing 1.5 * 2^23 (no floorf call, which would stop vectorization).
  const float k = (xs * 1.44269504f + 12582912.f) - 12582912.f;
  const float r = (xs - k * 0.693359375f) - k * -2.12194440e-4f;
  float p = 1.f / 720;
  p = p * r + 1.f / 120;
  p = p * r + 1.f / 24;
  p = p * r + 1.f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x >= -87.3f ? p * scale : (x == x ? 0.f : x);
}

// One row: max of x + mask, exponentials, division by their sum. With AVX-512 in the build (EPCTX_NATIVE), GCC is
// told to use 16-lane vectors (its default tuning stops at 8; a row of 128 scores then takes 8 instead of 16
// vectors: 105 vs 160 us for the decoder's 1024 rows on one core); otherwise clones as for Erf.
#if defined(__AVX512F__)
__attribute__((target("prefer-vector-width=512")))
#elif !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void MaskedSoftmaxRow(const float* x, const float* mask, float* y, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n; ++j) {
    const float t = x[j] + mask[j];
    y[j] = t;
    mx = t > mx ? t : mx;
  }
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    const float e = ExpNonPositive(y[j] - mx);
    y[j] = e;
    sum += e;
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] /= sum;
}

class MaskedSoftmaxExec : public StepExec {
 public:
  // rows x cols scores; row r reads mask row sum_k index_k(r) * mask_strides[k] (0 where the mask broadcasts).
  MaskedSoftmaxExec(int src, int mask, int dst, Dims lead, Dims mask_strides, int64_t cols)
      : src_(src), mask_(mask), dst_(dst), lead_(std::move(lead)), mask_strides_(std::move(mask_strides)), cols_(cols) {
    rows_ = Numel(lead_);
  }
  void Run(RunContext& rc) override {
    const float* x = static_cast<const float*>(rc.ptr(src_));
    const float* m = static_cast<const float*>(rc.ptr(mask_));
    float* y = static_cast<float*>(rc.ptr(dst_));
    // Rows are independent and each is computed by one thread in one order: results do not depend on the split.
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      int64_t rest = r, mrow = 0;
      for (size_t k = lead_.size(); k-- > 0;) {
        mrow += (rest % lead_[k]) * mask_strides_[k];
        rest /= lead_[k];
      }
      MaskedSoftmaxRow(x + r * cols_, m + mrow * cols_, y + r * cols_, cols_);
    }
  }

 private:
  int src_, mask_, dst_;
  Dims lead_, mask_strides_;
  int64_t cols_, rows_ = 0;
};
}  // namespace

CheckResult BuildMaskedSoftmax(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(3, false, 0, 0);
  if (!r.ok) return r;
  std::vector<memory::desc> d;
  if (!(r = GetDescs(bc, 3, &d)).ok) return r;
  const Step& st = bc.step();
  for (const Operand& o : st.ops)
    if (!o.present() || o.dtype != kF32) return bc.Fail("masked softmax needs three f32 operands");
  const Dims& dims = st.ops[0].dims;
  const Dims& md = st.ops[1].dims;
  if (dims.empty() || st.ops[2].dims != dims || md.size() != dims.size() || md.back() != dims.back())
    return bc.Fail("masked softmax: dst must have src's dims, the mask src's rank and last dim");
  for (size_t k = 0; k < dims.size(); ++k)
    if (md[k] != 1 && md[k] != dims[k]) return bc.Fail("masked softmax: the mask does not broadcast to src");
  for (size_t i = 0; i < 3; ++i)
    if (d[i] != StridedDesc(st.ops[i].dims, RowMajorStrides(st.ops[i].dims)))
      return bc.Fail("masked softmax operands must be dense row-major");
  Dims lead(dims.begin(), dims.end() - 1), mask_strides(lead.size(), 0);
  int64_t stride = 1;  // in mask rows
  for (size_t k = lead.size(); k-- > 0;) {
    mask_strides[k] = md[k] == 1 ? 0 : stride;
    stride *= md[k];
  }
  out->reset(new MaskedSoftmaxExec(bc.Slot(0, d[0]), bc.Slot(1, d[1]), bc.Slot(2, d[2]), std::move(lead),
                                   std::move(mask_strides), dims.back()));
  return CheckResult::Ok();
}

// ---- LayerNormalization -----------------------------------------------------------------------------------------

namespace {
bool ValueUsed(const Graph& g, const Node& n, size_t output) {
  if (output >= n.outputs.size() || n.outputs[output] < 0) return false;
  const Value& v = g.v(n.outputs[output]);
  return v.is_graph_output || !v.consumers.empty();
}

// Normalized rows as oneDNN sees them: rank >= 2 (a 1-D input is one row).
Dims LayerNormDims(const Dims& d) { return d.size() == 1 ? Dims{1, d[0]} : d; }
}  // namespace

bool SupportLayerNorm(const Graph& g, const Node& n, std::string* why) {
  if (n.inputs.size() < 2 || n.inputs.size() > 3 || n.inputs[0] < 0 || n.inputs[1] < 0)
    return Reject(why, "needs X, Scale and optionally B");
  if (ValueUsed(g, n, 1) || ValueUsed(g, n, 2)) return Reject(why, "Mean/InvStdDev outputs are not produced");
  for (int v : {n.inputs[0], n.inputs[1], n.inputs.size() > 2 ? n.inputs[2] : -1, n.outputs[0]}) {
    if (v < 0) continue;
    if (g.v(v).dtype != kF32 || !g.v(v).has_shape) return Reject(why, "tensors must be float with static shapes");
  }
  if (n.Int("stash_type", 1) != 1) return Reject(why, "stash_type other than float");
  const Dims& d = g.v(n.inputs[0]).dims;
  int64_t r = static_cast<int64_t>(d.size());
  int64_t axis = n.Int("axis", -1);
  if (r == 0 || axis < -r || axis >= r) return Reject(why, "axis out of range");
  if (axis < 0) axis += r;
  if (axis != r - 1) return Reject(why, "only the last axis is normalized");
  if (Numel(d) == 0) return Reject(why, "empty tensor");
  if (g.v(n.outputs[0]).dims != d) return Reject(why, "output shape differs from X");
  const int64_t c = d.back();
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (n.inputs[i] < 0) continue;
    const Dims& sd = g.v(n.inputs[i]).dims;
    if (sd.size() > d.size() || Numel(sd) != c || (!sd.empty() && sd.back() != c))
      return Reject(why, "Scale/B must have the normalized shape [" + std::to_string(c) + "]");
  }
  try {
    Dims ld = LayerNormDims(d);
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::layer_normalization_forward::primitive_desc pd(
        dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, PlainDesc(ld, kF32), 1e-5f,
                                                dnnl::normalization_flags::use_scale |
                                                    dnnl::normalization_flags::use_shift),
        eng);
  } catch (const dnnl::error& e) {
    return Reject(why, std::string("oneDNN layer normalization: ") + e.what());
  }
  return true;
}

CheckResult LowerLayerNorm(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  const Dims ld = LayerNormDims(g.v(n.inputs[0]).dims);
  const Dims cd = {ld.back()};
  Operand src = ctx.UsePlain(n.inputs[0]);
  Operand scale = ctx.UsePlain(n.inputs[1]);
  Operand shift;
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) shift = ctx.UsePlain(n.inputs[2]);
  if (!IsRowMajor(src) || !IsRowMajor(scale) || (shift.present() && !IsRowMajor(shift)))
    return ctx.Fail(node, "operands are not row-major");
  Step s;
  s.kind = StepKind::kLayerNorm;
  s.name = n.name;
  s.ops = {Reshaped(src, ld), Reshaped(scale, cd), shift.present() ? Reshaped(shift, cd) : Operand(),
           DefineAs(ctx, n.outputs[0], ld)};
  s.floats = {n.Float("epsilon", 1e-5f)};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildLayerNorm(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(4, false, 0, 1);
  if (!r.ok) return r;
  const Step& st = bc.step();
  float eps = st.floats[0];
  if (!std::isfinite(eps) || eps < 0) return bc.Fail("epsilon must be finite and >= 0");
  std::vector<memory::desc> d;
  if (!(r = GetDescs(bc, 4, &d)).ok) return r;
  if (d[0].data.ndims < 1) return bc.Fail("layer norm src has no dims");
  const bool has_scale = st.ops[1].present(), has_shift = st.ops[2].present();
  const int64_t c = d[0].data.dims[d[0].data.ndims - 1];
  memory::desc vec({c}, memory::data_type::f32, memory::format_tag::a);
  if ((has_scale && d[1] != vec) || (has_shift && d[2] != vec))
    return bc.Fail("scale/shift must be dense f32 [" + std::to_string(c) + "]");
  dnnl::normalization_flags flags = dnnl::normalization_flags::none;
  if (has_scale) flags = flags | dnnl::normalization_flags::use_scale;
  if (has_shift) flags = flags | dnnl::normalization_flags::use_shift;
  dnnl::primitive_attr attr;
  std::vector<std::pair<int, int>> args;
  if (!(r = bc.PostOps(&attr, &args)).ok) return r;
  try {
    dnnl::layer_normalization_forward::primitive_desc pd(
        dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, d[0], eps, flags), attr,
        bc.engine());
    if (!(r = CheckSame(bc, "src", pd.src_desc(), d[0])).ok) return r;
    if (!(r = CheckSame(bc, "dst", pd.dst_desc(), d[3])).ok) return r;
    args.push_back({DNNL_ARG_SRC, bc.Slot(0, d[0])});
    if (has_scale) args.push_back({DNNL_ARG_SCALE, bc.Slot(1, d[1])});
    if (has_shift) args.push_back({DNNL_ARG_SHIFT, bc.Slot(2, d[2])});
    args.push_back({DNNL_ARG_DST, bc.Slot(3, d[3])});
    out->reset(new PrimitiveExec(dnnl::layer_normalization_forward(pd), std::move(args)));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("layer normalization: ") + e.what());
  }
  return CheckResult::Ok();
}

// ---- ReduceMean, ReduceMax, ReduceMin, ReduceSum ----------------------------------------------------------------

namespace {
// The oneDNN algorithm of a reduce op; false for others.
bool ReduceAlg(const std::string& op, dnnl_alg_kind_t* alg) {
  if (op == "ReduceMean") *alg = dnnl_reduction_mean;
  else if (op == "ReduceMax") *alg = dnnl_reduction_max;
  else if (op == "ReduceMin") *alg = dnnl_reduction_min;
  else if (op == "ReduceSum") *alg = dnnl_reduction_sum;
  else return false;
  return true;
}

// Src dims with the reduced axes set to 1 (keepdims form); false (with why) for bad or non-constant axes. Axes are
// an attribute, or an input from opset 18 (ReduceSum: 13); with none (or an empty list) every axis is reduced
// unless noop_with_empty_axes (then nothing is).
bool ReducedDims(const Graph& g, const Node& n, const Dims& d, Dims* out, std::string* why,
                 std::vector<bool>* reduced = nullptr) {
  const int64_t since_input = n.op == "ReduceSum" ? 13 : 18;
  std::vector<int64_t> axes;
  if (n.opset >= since_input) {
    if (n.inputs.size() > 1 && n.inputs[1] >= 0 && !g.ConstInts(n.inputs[1], &axes))
      return Reject(why, "axes are not constant");
  } else {
    axes = n.Ints("axes");
  }
  const int64_t r = static_cast<int64_t>(d.size());
  *out = d;
  std::vector<bool> seen(d.size(), false);
  if (axes.empty()) {
    if (!(n.opset >= since_input && n.Int("noop_with_empty_axes", 0) != 0)) {
      for (auto& x : *out) x = 1;
      seen.assign(d.size(), true);
    }
  }
  for (int64_t a : axes) {
    if (a < -r || a >= r) return Reject(why, "axis out of range");
    if (a < 0) a += r;
    if (seen[static_cast<size_t>(a)]) return Reject(why, "repeated axis");
    seen[static_cast<size_t>(a)] = true;
    (*out)[static_cast<size_t>(a)] = 1;
  }
  if (reduced) *reduced = seen;
  return true;
}

// The ONNX output dims: keepdims keeps the reduced axes as 1, otherwise they are dropped.
Dims ReduceOutputDims(const Node& n, const Dims& kd, const std::vector<bool>& reduced) {
  if (n.Int("keepdims", 1) != 0) return kd;
  Dims out;
  for (size_t i = 0; i < kd.size(); ++i)
    if (!reduced[i]) out.push_back(kd[i]);
  return out;
}
}  // namespace

bool SupportReduce(const Graph& g, const Node& n, std::string* why) {
  dnnl_alg_kind_t alg;
  if (!ReduceAlg(n.op, &alg)) return Reject(why, "not a supported reduction");
  if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1) return Reject(why, "needs an input and one output");
  const int64_t since_input = n.op == "ReduceSum" ? 13 : 18;
  if (n.inputs.size() > (n.opset >= since_input ? 2u : 1u)) return Reject(why, "too many inputs");
  const Value& x = g.v(n.inputs[0]);
  const Value& y = g.v(n.outputs[0]);
  if (x.dtype != kF32 || y.dtype != kF32) return Reject(why, "only float tensors");
  if (!x.has_shape || !y.has_shape) return Reject(why, "shapes must be static");
  const Dims& d = x.dims;
  if (d.size() > kMaxRank) return Reject(why, "rank above " + std::to_string(kMaxRank));
  if (Numel(d) == 0) return Reject(why, "empty tensor");
  Dims kd;
  std::vector<bool> reduced;
  if (!ReducedDims(g, n, d, &kd, why, &reduced)) return false;
  if (y.dims != ReduceOutputDims(n, kd, reduced))
    return Reject(why, "output shape does not match the axes and keepdims");
  return true;
}

namespace {
// Whether the reduced axes (kd: sd with 1 on each) are one block of consecutive axes, every axis between the first and
// the last reduced: sd is then [a, r, b] with r reduced. False when nothing is reduced or the axes are not a block.
bool ReducedBlock(const Dims& sd, const Dims& kd, int64_t* a, int64_t* r, int64_t* b) {
  if (kd == sd) return false;
  size_t lo = sd.size(), hi = 0;
  for (size_t i = 0; i < sd.size(); ++i)
    if (kd[i] != sd[i]) lo = std::min(lo, i), hi = i;
  bool block = true;
  *a = *r = *b = 1;
  for (size_t i = 0; i < sd.size(); ++i) {
    if (i < lo) *a *= sd[i];
    else if (i > hi) *b *= sd[i];
    else *r *= sd[i], block = block && kd[i] == 1;
  }
  return block;
}
}  // namespace

CheckResult LowerReduce(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  dnnl_alg_kind_t alg;
  if (!ReduceAlg(n.op, &alg)) return ctx.Fail(node, "not a supported reduction");
  const Dims sd = AtLeast1D(g.v(n.inputs[0]).dims);
  Dims kd;
  std::string why;
  if (!ReducedDims(g, n, g.v(n.inputs[0]).dims, &kd, &why)) return ctx.Fail(node, why);
  kd = AtLeast1D(kd);
  Operand src = ctx.UsePlain(n.inputs[0]);
  if (!IsRowMajor(src)) return ctx.Fail(node, "input is not row-major");
  // A mean or sum over one block of axes followed by others is a matrix product with a constant row of 1/R (or 1):
  // [1, R] x [A, R, B] -> [A, 1, B]. oneDNN 2.6's jit reduction reduces trailing axes only, and the rest ran its
  // reference kernel (Silero v4's ReduceMean over the middle axis of [1, 129, 24]: 60 us, a third of its run).
  int64_t a = 1, r = 1, b = 1;
  const bool block = ReducedBlock(sd, kd, &a, &r, &b);
  if (block && (alg == dnnl_reduction_mean || alg == dnnl_reduction_sum)) {
    if (b > 1 && r > 1 && r <= (int64_t{1} << 24)) {
      const Dims wdims = {1, 1, r}, xdims = {a, r, b}, ydims = {a, 1, b};
      try {
        dnnl::matmul::primitive_desc pd(
            dnnl::matmul::desc(PlainDesc(wdims, kF32), PlainDesc(xdims, kF32), PlainDesc(ydims, kF32)), ctx.engine());
        if (!IsRefImpl(pd)) {
          const std::vector<float> w(static_cast<size_t>(r), alg == dnnl_reduction_mean ? 1.f / static_cast<float>(r) : 1.f);
          Operand wop;
          CheckResult cr = ctx.AddWeight(n.name + ":row", std::string(reinterpret_cast<const char*>(w.data()),
                                                                     w.size() * sizeof(float)),
                                         PlainDesc(wdims, kF32), &wop);
          if (!cr.ok) return cr;
          Step m;
          m.kind = StepKind::kMatMul;
          m.name = n.name;
          m.ops = {wop, Reshaped(src, xdims), Operand(), DefineAs(ctx, n.outputs[0], ydims)};
          ctx.Emit(std::move(m));
          return CheckResult::Ok();
        }
      } catch (const dnnl::error&) {
      }
    }
  }
  // Any other reduction over one block of axes followed by others (a max over the channels of [1, C, H, W], CBAM's
  // channel attention): the block moved innermost by one transposing copy ([A, R, B] -> [A, B, R]), then oneDNN's jit
  // reduction over the trailing axis, whose [A, B, 1] result has the bytes of [A, 1, B]. Before, the reference
  // kernel: 2.96 ms for [1, 96, 68, 68] against ONNX Runtime's 0.11 ms (issue 24's performance tester).
  {
    if (block && b > 1 && r > 1) {
      const Dims tdims = {a, b, r}, ydims = {a, b, 1};
      try {
        dnnl::reduction::primitive_desc pd(
            dnnl::reduction::desc(static_cast<dnnl::algorithm>(alg), PlainDesc(tdims, kF32), PlainDesc(ydims, kF32), 0.f, 0.f),
            ctx.engine());
        if (!IsRefImpl(pd)) {
          const Operand t = ctx.NewPlain(kF32, tdims);
          Step c;
          c.kind = StepKind::kReorder;
          c.name = n.name + ":transpose";
          Operand view = src;  // [A, R, B] row-major read as [A, B, R]
          view.tag = 0;
          view.dims = tdims;
          view.strides = {r * b, 1, b};
          c.ops = {view, t};
          ctx.Emit(std::move(c));
          Step red;
          red.kind = StepKind::kReduction;
          red.name = n.name;
          red.ops = {t, DefineAs(ctx, n.outputs[0], ydims)};
          red.ints = {static_cast<int64_t>(alg)};
          red.floats = {0.f, 0.f};
          ctx.Emit(std::move(red));
          return CheckResult::Ok();
        }
      } catch (const dnnl::error&) {
      }
    }
  }
  Step s;
  // Nothing reduced (every reduced axis has size 1): oneDNN refuses a reduction with equal shapes; a copy it is.
  s.kind = kd == sd ? StepKind::kReorder : StepKind::kReduction;
  s.name = n.name;
  s.ops = {Reshaped(src, sd), DefineAs(ctx, n.outputs[0], kd)};
  if (s.kind == StepKind::kReduction) {
    s.ints = {static_cast<int64_t>(alg)};
    s.floats = {0.f, 0.f};
  }
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildReduction(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(2, true, 1, 2);
  if (!r.ok) return r;
  const Step& st = bc.step();
  if (st.ints[0] < dnnl_reduction_max || st.ints[0] > dnnl_reduction_norm_lp_power_p_sum)
    return bc.Fail("unknown reduction algorithm " + std::to_string(st.ints[0]));
  if (!std::isfinite(st.floats[0]) || !std::isfinite(st.floats[1])) return bc.Fail("reduction p/eps not finite");
  std::vector<memory::desc> d;
  if (!(r = GetDescs(bc, 2, &d)).ok) return r;
  dnnl::primitive_attr attr;
  std::vector<std::pair<int, int>> args;
  if (!(r = bc.PostOps(&attr, &args)).ok) return r;
  try {
    dnnl::reduction::primitive_desc pd(dnnl::reduction::desc(static_cast<dnnl::algorithm>(st.ints[0]), d[0], d[1],
                                                             st.floats[0], st.floats[1]),
                                       attr, bc.engine());
    if (!(r = CheckSame(bc, "src", pd.src_desc(), d[0])).ok) return r;
    if (!(r = CheckSame(bc, "dst", pd.dst_desc(), d[1])).ok) return r;
    args.push_back({DNNL_ARG_SRC, bc.Slot(0, d[0])});
    args.push_back({DNNL_ARG_DST, bc.Slot(1, d[1])});
    out->reset(new PrimitiveExec(dnnl::reduction(pd), std::move(args)));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("reduction: ") + e.what());
  }
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
