// Elementwise ops: unary (with Erf, our own loop), binary (with the Erf-form GELU and post-ops absorbed) and
// comparisons; the rewrite FuseSpelledActivations (a hard-swish spelled out in ONNX ops); the elementwise
// semantics nn shares (ScalarAffine, AppendPostOp, EltwiseFor). See ops.h and math_common.h.
#include "providers/aotcpu/binary/isa.h"
#include "providers/aotcpu/lower/math_common.h"
#include "providers/common/fast_math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace epctx {
namespace aotcpu {

namespace {

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

// tanh with fast_math.h's TanhF (1.3 ulp), vectorized per ISA like ErfLoop.
#if !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void TanhLoop(const float* src, float* dst, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) dst[i] = TanhF(src[i]);
}

// Step kErf: our own elementwise loop (kOwnErf or kOwnTanh), in chunks across the step's threads above 64K elements.
enum OwnUnary : int64_t { kOwnErf = 0, kOwnTanh = 1 };

class OwnUnaryExec : public StepExec {
 public:
  OwnUnaryExec(int src, int dst, size_t n, int64_t fn) : src_(src), dst_(dst), n_(n), fn_(fn) {}
  void Run(RunContext& rc) override {
    const float* src = static_cast<const float*>(rc.ptr(src_));
    float* dst = static_cast<float*>(rc.ptr(dst_));
    constexpr size_t kChunk = 16384;
    const int64_t chunks = static_cast<int64_t>((n_ + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static) if (n_ > 4 * kChunk)
    for (int64_t c = 0; c < chunks; ++c) {
      const size_t b = static_cast<size_t>(c) * kChunk, len = std::min(kChunk, n_ - b);
      if (fn_ == kOwnTanh)
        TanhLoop(src + b, dst + b, len);
      else
        ErfLoop(src + b, dst + b, len);
    }
  }

 private:
  int src_, dst_;
  size_t n_;
  int64_t fn_;
};

// ---- builders' shared checks -------------------------------------------------------------------------------------

bool IsEltwiseAlg(int64_t a) {
  static const int64_t kAlgs[] = {dnnl_eltwise_relu,   dnnl_eltwise_tanh,     dnnl_eltwise_elu,
                                  dnnl_eltwise_square, dnnl_eltwise_abs,      dnnl_eltwise_sqrt,
                                  dnnl_eltwise_linear, dnnl_eltwise_soft_relu, dnnl_eltwise_logistic,
                                  dnnl_eltwise_exp,    dnnl_eltwise_gelu_tanh, dnnl_eltwise_swish,
                                  dnnl_eltwise_log,    dnnl_eltwise_clip,     dnnl_eltwise_clip_v2,
                                  dnnl_eltwise_pow,    dnnl_eltwise_gelu_erf, dnnl_eltwise_hardswish,
                                  dnnl_eltwise_mish};
  return std::find(std::begin(kAlgs), std::end(kAlgs), a) != std::end(kAlgs);
}

bool IsBinaryAlg(int64_t a) { return a >= dnnl_binary_add && a <= dnnl_binary_ne; }
bool IsCompareAlg(int64_t a) { return a >= dnnl_binary_ge && a <= dnnl_binary_ne; }

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

bool OwnTanh(const CompileOptions& options) {
  Isa isa;
  return ParseIsa(options.isa, &isa) && isa < Isa::kAvx512Core;
}

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
  } else if (op == "Gelu") {  // opset 20: x * Phi(x), or its tanh approximation
    const std::string approximate = n.Str("approximate", "none");
    if (approximate == "none") *alg = dnnl_eltwise_gelu_erf;
    else if (approximate == "tanh") *alg = dnnl_eltwise_gelu_tanh;
    else return false;
  } else if (op == "Mish") {
    *alg = dnnl_eltwise_mish;  // x * tanh(softplus(x))
  } else {
    return false;  // HardSigmoid needs two algorithms; Erf is not an eltwise algorithm
  }
  return true;
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
  if (n.op == "Erf" || (n.op == "Tanh" && OwnTanh(ctx.options()))) {
    Operand src = ctx.UsePlain(x);
    const Dims dims = AtLeast1D(g.v(x).dims);
    if (!IsRowMajor(src)) return ctx.Fail(node, n.op + " input is not row-major");
    Step s;
    s.kind = StepKind::kErf;
    s.name = n.name;
    if (n.op == "Tanh") s.ints = {kOwnTanh};
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
  const Step& st = bc.step();
  // Binaries written before the tanh loop carry no function (erf).
  CheckResult r = bc.ExpectCounts(2, false, st.ints.empty() ? 0 : 1, 0);
  if (!r.ok) return r;
  const int64_t fn = st.ints.empty() ? kOwnErf : st.ints[0];
  if (fn != kOwnErf && fn != kOwnTanh) return bc.Fail("unknown elementwise function " + std::to_string(fn));
  std::vector<memory::desc> d;
  if (!(r = GetDescs(bc, 2, &d)).ok) return r;
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
  out->reset(new OwnUnaryExec(bc.Slot(0, d[0]), bc.Slot(1, d[1]), static_cast<size_t>(n), fn));
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

}  // namespace aotcpu
}  // namespace epctx
