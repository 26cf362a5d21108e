// ops_nn.cc on small hand-built graphs: compiled (CompileGraph), serialized and parsed back, run by the Executor
// and compared with float64 references; the step lists check the fusion (BatchNormalization folded, activations and
// residual Adds as post-ops) and the support checks refuse what oneDNN would compute differently. The builders get
// hostile steps (counts, ranges, operand shapes) and must fail with a message, never crash.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "providers/aotcpu/binary/isa.h"
#include "providers/aotcpu/capability/capability.h"
#include "providers/aotcpu/ir/test_graph.h"
#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {
namespace {

using namespace test_graph;  // GraphBuilder, Dims, Numel, UniformFloats, IntA, FloatA, IntsA, StrA

struct Compiled {
  CompiledGraph cg;
  Program parsed;
  std::unique_ptr<Executor> exec;
};

::testing::AssertionResult Compile(const GraphBuilder& b, Compiled* c, const CompileOptions& options = CompileOptions()) {
  for (const Node& n : b.g.nodes) {
    std::string why;
    if (!IsNodeSupported(b.g, n, &why)) return ::testing::AssertionFailure() << n.name << " unsupported: " << why;
  }
  std::vector<std::string> ins, outs;
  for (int v : b.g.inputs) ins.push_back(b.g.v(v).name);
  for (int v : b.g.outputs) outs.push_back(b.g.v(v).name);
  CheckResult r = CompileGraph(b.g, ins, outs, options, &c->cg);
  if (!r.ok) return ::testing::AssertionFailure() << "compile: " << r.reason;
  r = ParseProgram(SerializeProgram(c->cg.program), static_cast<uint32_t>(c->cg.weights.size()), &c->parsed);
  if (!r.ok) return ::testing::AssertionFailure() << "parse: " << r.reason;
  std::vector<WeightRef> w;
  for (const TensorInput& t : c->cg.weights) w.push_back({t.bytes.data(), t.bytes.size()});
  r = Executor::Create(c->parsed, std::move(w), 1, &c->exec);
  if (!r.ok) return ::testing::AssertionFailure() << "executor: " << r.reason;
  if (c->exec->serialized()) return ::testing::AssertionFailure() << "a primitive has a library-managed scratchpad";
  return ::testing::AssertionSuccess();
}

std::vector<std::vector<float>> Execute(Compiled& c, const std::vector<std::vector<float>>& inputs) {
  std::vector<const void*> in;
  for (const auto& v : inputs) in.push_back(v.data());
  std::vector<std::vector<float>> out;
  for (const IoInfo& o : c.parsed.outputs) out.emplace_back(static_cast<size_t>(Numel(o.dims)));
  std::vector<void*> outp;
  for (auto& v : out) outp.push_back(v.data());
  CheckResult r = c.exec->Run(in, outp);
  EXPECT_TRUE(r.ok) << r.reason;
  return out;
}

// An executor for `c` created with `threads`, every step checked to run an optimized kernel (not oneDNN's `ref`);
// null (with a failure) when creation fails.
std::unique_ptr<Executor> OptimizedExecutor(const Compiled& c, int threads) {
  std::vector<WeightRef> wr;
  for (const TensorInput& t : c.cg.weights) wr.push_back({t.bytes.data(), t.bytes.size()});
  std::unique_ptr<Executor> e;
  CheckResult r = Executor::Create(c.parsed, std::move(wr), threads, &e);
  EXPECT_TRUE(r.ok) << r.reason;
  if (!r.ok) return nullptr;
  for (size_t i = 0; i < c.parsed.steps.size(); ++i)
    EXPECT_NE(e->step_impl(i).rfind("ref", 0), 0u)
        << threads << " threads: step " << i << " " << DescribeStep(c.parsed.steps[i]) << " runs " << e->step_impl(i);
  return e;
}

// Step kinds with post-op counts, skipping layout copies: "Conv(2),Pool".
std::string Kinds(const Program& p) {
  std::string s;
  for (const Step& st : p.steps) {
    if (st.kind == StepKind::kReorder) continue;
    s += (s.empty() ? "" : ",") + std::string(StepKindName(static_cast<uint32_t>(st.kind)));
    if (!st.post_ops.empty()) s += "(" + std::to_string(st.post_ops.size()) + ")";
  }
  return s;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-4) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
}

bool Supported(const GraphBuilder& b, size_t node, std::string* why) {
  return IsNodeSupported(b.g, b.g.nodes[node], why);
}

// 2-D convolution reference (NCHW, OIHW, groups, strides, dilations, pads begin/end).
std::vector<double> RefConv2d(const std::vector<float>& x, Dims xd, const std::vector<float>& w, Dims wd,
                              const std::vector<float>* bias, Dims strides, Dims dil, Dims pads, int64_t group) {
  const int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], M = wd[0], KH = wd[2], KW = wd[3];
  const int64_t OH = (H + pads[0] + pads[2] - ((KH - 1) * dil[0] + 1)) / strides[0] + 1;
  const int64_t OW = (W + pads[1] + pads[3] - ((KW - 1) * dil[1] + 1)) / strides[1] + 1;
  const int64_t Cg = C / group, Mg = M / group;
  std::vector<double> y(static_cast<size_t>(N * M * OH * OW));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = bias ? (*bias)[static_cast<size_t>(m)] : 0.0;
          const int64_t g = m / Mg;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * strides[0] - pads[0] + kh * dil[0],
                              iw = ow * strides[1] - pads[1] + kw * dil[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += double(x[static_cast<size_t>(((n * C + g * Cg + c) * H + ih) * W + iw)]) *
                     w[static_cast<size_t>(((m * Cg + c) * KH + kh) * KW + kw)];
              }
          y[static_cast<size_t>(((n * M + m) * OH + oh) * OW + ow)] = s;
        }
  return y;
}

void AddBatchNorm(GraphBuilder& b, const std::string& in, const std::string& out, int64_t c, Dims dims,
                  std::vector<std::vector<float>>* params) {
  params->clear();
  params->push_back(UniformFloats(c, 11, 0.5f, 1.5f));
  params->push_back(UniformFloats(c, 12));
  params->push_back(UniformFloats(c, 13));
  params->push_back(UniformFloats(c, 14, 0.5f, 1.5f));
  const char* names[] = {"_s", "_b", "_m", "_v"};
  for (int i = 0; i < 4; ++i) b.F32(out + names[i], {c}, (*params)[static_cast<size_t>(i)]);
  b.Out(out, std::move(dims));
  b.N("BatchNormalization", {in, out + "_s", out + "_b", out + "_m", out + "_v"}, {out}, 15).attrs["epsilon"] =
      FloatA(1e-3f);
}

void RefBatchNorm(std::vector<double>* y, int64_t c, int64_t plane, const std::vector<std::vector<float>>& p) {
  for (size_t i = 0; i < y->size(); ++i) {
    const size_t ch = (i / static_cast<size_t>(plane)) % static_cast<size_t>(c);
    (*y)[i] = ((*y)[i] - p[2][ch]) / std::sqrt(double(p[3][ch]) + 1e-3) * p[0][ch] + p[1][ch];
  }
}

// ---- fusion ------------------------------------------------------------------------------------------------------

TEST(OpsNn, ConvBatchNormAddReluIsOneStep) {
  // x -> 1x1 Conv -> r; r -> Conv -> BatchNormalization -> Add(r) -> Relu -> y -> 1x1 Conv -> z. The residual r and
  // the result y are in oneDNN's chosen layouts (a graph input or output is plain, and on plain layouts oneDNN has
  // only the gemm-based kernel, which loses to a direct kernel with a shorter chain).
  const Dims xd = {1, 16, 9, 9}, wd = {16, 16, 3, 3}, w1d = {16, 16, 1, 1}, w2d = {4, 16, 1, 1};
  const std::vector<float> x = UniformFloats(Numel(xd), 1), w = UniformFloats(Numel(wd), 2, -0.2f, 0.2f), bias = UniformFloats(16, 3);
  const std::vector<float> w1 = UniformFloats(Numel(w1d), 8, -0.3f, 0.3f), w2 = UniformFloats(Numel(w2d), 9, -0.2f, 0.2f);
  GraphBuilder b;
  b.Input("x", xd);
  b.F32("w1", w1d, w1);
  b.Out("r", xd);
  b.N("Conv", {"x", "w1"}, {"r"}, 11);
  b.F32("w", wd, w);
  b.F32("bias", {16}, bias);
  b.Out("c", xd);
  Node& conv = b.N("Conv", {"r", "w", "bias"}, {"c"}, 11);
  conv.attrs["pads"] = IntsA({1, 1, 1, 1});
  std::vector<std::vector<float>> p;
  AddBatchNorm(b, "c", "n", 16, xd, &p);
  b.Out("a", xd);
  b.N("Add", {"r", "n"}, {"a"}, 14);
  b.Out("y", xd);
  b.N("Relu", {"a"}, {"y"}, 14);
  b.F32("w2", w2d, w2);
  b.Out("z", {1, 4, 9, 9});
  b.N("Conv", {"y", "w2"}, {"z"}, 11);
  b.Output("z");
  std::string why;
  for (size_t i = 0; i < b.g.nodes.size(); ++i)
    if (!Supported(b, i, &why)) GTEST_SKIP() << "needs ops_math (" << b.g.nodes[i].op << "): " << why;
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  // Where brgemm kernels exist and brgconv refuses the fused Add, the Add (with the Relu) is its own step.
  const unsigned avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  const bool brg = (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & avx512) == avx512;
  const std::string kinds = Kinds(c.parsed);
  EXPECT_TRUE(kinds == "Conv,Conv(2),Conv" || (brg && kinds == "Conv,Conv,Binary(1),Conv")) << kinds;
  auto to_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const std::vector<float> r = to_float(RefConv2d(x, xd, w1, w1d, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1));
  std::vector<double> want = RefConv2d(r, xd, w, wd, &bias, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1);
  RefBatchNorm(&want, 16, 81, p);
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0, want[i] + r[i]);
  ExpectNear(Execute(c, {x})[0], RefConv2d(to_float(want), xd, w2, w2d, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1));
}

// A residual block as ISNet's (x -> 1x1 Conv -> Relu -> r; r -> 3x3 Conv -> Relu -> Add(r) -> y -> 1x1 Conv -> z): where
// oneDNN has brgemm convolutions (AVX-512) every Conv step runs one, the residual Add fused only when brgconv takes
// it, else its own step (fusing it put ISNet's 11 such convolutions on the jit kernel at about half the speed).
TEST(OpsNn, ResidualConvKeepsBrgemmKernel) {
  const Dims xd = {1, 32, 12, 12}, wd = {32, 32, 3, 3}, w1d = {32, 32, 1, 1}, w2d = {8, 32, 1, 1};
  const std::vector<float> x = UniformFloats(Numel(xd), 51), w = UniformFloats(Numel(wd), 52, -0.1f, 0.1f),
                           bias = UniformFloats(32, 53), w1 = UniformFloats(Numel(w1d), 54, -0.3f, 0.3f),
                           w2 = UniformFloats(Numel(w2d), 55, -0.2f, 0.2f);
  GraphBuilder b;
  b.Input("x", xd);
  b.F32("w1", w1d, w1);
  b.Out("c1", xd);
  b.N("Conv", {"x", "w1"}, {"c1"}, 11);
  b.Out("r", xd);
  b.N("Relu", {"c1"}, {"r"}, 14);
  b.F32("w", wd, w);
  b.F32("bias", {32}, bias);
  b.Out("c", xd);
  b.N("Conv", {"r", "w", "bias"}, {"c"}, 11).attrs["pads"] = IntsA({1, 1, 1, 1});
  b.Out("cr", xd);
  b.N("Relu", {"c"}, {"cr"}, 14);
  b.Out("y", xd);
  b.N("Add", {"cr", "r"}, {"y"}, 14);
  b.F32("w2", w2d, w2);
  b.Out("z", {1, 8, 12, 12});
  b.N("Conv", {"y", "w2"}, {"z"}, 11);
  b.Output("z");
  std::string why;
  for (size_t i = 0; i < b.g.nodes.size(); ++i)
    if (!Supported(b, i, &why)) GTEST_SKIP() << "needs ops_math (" << b.g.nodes[i].op << "): " << why;
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  auto to_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  std::vector<double> r = RefConv2d(x, xd, w1, w1d, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1);
  for (double& v : r) v = std::max(0.0, v);
  const std::vector<float> rf = to_float(r);
  std::vector<double> y = RefConv2d(rf, xd, w, wd, &bias, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1);
  for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(0.0, y[i]) + rf[i];
  ExpectNear(Execute(c, {x})[0], RefConv2d(to_float(y), xd, w2, w2d, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1));
  const unsigned avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  if ((static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & avx512) != avx512) return;
  for (int threads : {1, 2}) {
    std::unique_ptr<Executor> e = OptimizedExecutor(c, threads);
    ASSERT_NE(e, nullptr);
    for (size_t i = 0; i < c.parsed.steps.size(); ++i)  // the 3x3 residual convolution (the last one writes plain)
      if (c.parsed.steps[i].kind == StepKind::kConv &&
          c.parsed.steps[i].ops[1].dims == std::vector<int64_t>{32, 32, 3, 3})
        EXPECT_EQ(e->step_impl(i).rfind("brg", 0), 0u)
            << threads << " threads: step " << i << " " << DescribeStep(c.parsed.steps[i]) << " runs " << e->step_impl(i);
  }
}

// PP-OCRv4's convolution block as PaddlePaddle exports it: Conv -> Mul/Add by constants (a batch normalization as
// an affine: per-channel [1,C,1,1] scale, [C,1,1] shift) -> hard-swish spelled x * clip(x + 3, 0, 6) / 6 -> Mul/Add by
// scalars (a "learnable affine block") -> the next convolution. Both convolutions become one step each: the affine
// maps folded into weights and bias, the hard-swish and the scalar affine as post-ops (issue 14).
TEST(OpsNn, PaddleConvBlockIsOneStep) {
  const Dims xd = {1, 16, 8, 8}, wd = {16, 16, 3, 3}, w2d = {16, 16, 1, 1};
  const std::vector<float> x = UniformFloats(Numel(xd), 21), w = UniformFloats(Numel(wd), 22, -0.2f, 0.2f),
                           bias = UniformFloats(16, 23), w2 = UniformFloats(Numel(w2d), 24, -0.3f, 0.3f);
  const std::vector<float> scale = UniformFloats(16, 25, 0.5f, 2.f), shift = UniformFloats(16, 26);
  GraphBuilder b;
  b.Input("x", xd);
  b.F32("w", wd, w);
  b.F32("bias", {16}, bias);
  b.Out("c", xd);
  b.N("Conv", {"x", "w", "bias"}, {"c"}, 11).attrs["pads"] = IntsA({1, 1, 1, 1});
  b.F32("scale", {1, 16, 1, 1}, scale);
  b.Out("m", xd);
  b.N("Mul", {"scale", "c"}, {"m"}, 14);
  b.F32("shift", {16, 1, 1}, shift);
  b.Out("a", xd);
  b.N("Add", {"m", "shift"}, {"a"}, 14);
  // hard-swish: (a * clip(a + 3, 0, 6)) / 6
  b.F32("three", {1}, {3.f});
  b.Out("a3", xd);
  b.N("Add", {"a", "three"}, {"a3"}, 14);
  b.F32("lo", {}, {0.f});
  b.F32("hi", {}, {6.f});
  b.Out("cl", xd);
  b.N("Clip", {"a3", "lo", "hi"}, {"cl"}, 13);
  b.Out("ac", xd);
  b.N("Mul", {"a", "cl"}, {"ac"}, 14);
  b.F32("six", {}, {6.f});
  b.Out("hs", xd);
  b.N("Div", {"ac", "six"}, {"hs"}, 14);
  b.F32("k", {1}, {1.5f});
  b.Out("hk", xd);
  b.N("Mul", {"k", "hs"}, {"hk"}, 14);
  b.F32("t", {1}, {-0.25f});
  b.Out("y", xd);
  b.N("Sub", {"hk", "t"}, {"y"}, 14);
  b.F32("w2", w2d, w2);
  b.Out("z", xd);
  b.N("Conv", {"y", "w2"}, {"z"}, 11);
  b.Output("z");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed), "Conv(2),Conv");
  std::vector<double> y = RefConv2d(x, xd, w, wd, &bias, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1);
  for (size_t i = 0; i < y.size(); ++i) {
    const size_t ch = (i / 64) % 16;
    const double a = y[i] * scale[ch] + shift[ch];
    y[i] = a * std::min(6.0, std::max(0.0, a + 3)) / 6 * 1.5 + 0.25;
  }
  const std::vector<float> yf(y.begin(), y.end());
  ExpectNear(Execute(c, {x})[0], RefConv2d(yf, xd, w2, w2d, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1));
}

// The other spellings of the hard-swish (x * (clip(x + 3, 0, 6) * (1/6)), x * HardSigmoid(x, 1/6, 1/2)) on a value
// that is not a convolution's: each becomes one eltwise step. A pattern whose intermediate is read elsewhere (here a
// graph output) is left as it is, and every value stays right.
TEST(OpsNn, SpelledHardSwishBecomesOneStep) {
  const Dims xd = {2, 3, 4, 5};
  const std::vector<float> x = UniformFloats(Numel(xd), 31, -5.f, 5.f);
  auto hswish = [](double v) { return v * std::min(1.0, std::max(0.0, v / 6 + 0.5)); };
  for (int form = 0; form < 3; ++form) {
    SCOPED_TRACE(form);
    GraphBuilder b;
    b.Input("x", xd);
    b.Out("y", xd);
    if (form == 0 || form == 2) {
      b.F32("three", {}, {3.f});
      b.Out("a3", xd);
      b.N("Add", {"three", "x"}, {"a3"}, 14);
      b.Out("cl", xd);
      Node& clip = b.N("Clip", {"a3"}, {"cl"}, 6);
      clip.attrs["min"] = FloatA(0.f);
      clip.attrs["max"] = FloatA(6.f);
      b.F32("sixth", {1}, {1.f / 6.f});
      b.Out("d", xd);
      b.N("Mul", {"cl", "sixth"}, {"d"}, 14);
      b.N("Mul", {"d", "x"}, {"y"}, 14);
    } else {
      b.Out("h", xd);
      Node& hs = b.N("HardSigmoid", {"x"}, {"h"}, 6);
      hs.attrs["alpha"] = FloatA(1.f / 6.f);
      hs.attrs["beta"] = FloatA(0.5f);
      b.N("Mul", {"x", "h"}, {"y"}, 14);
    }
    b.Output("y");
    if (form == 2) b.Output("cl");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = hswish(x[i]);
    std::vector<std::vector<float>> out = Execute(c, {x});
    if (form == 2) {
      EXPECT_NE(Kinds(c.parsed), "Eltwise");
      std::vector<double> cl(x.size());
      for (size_t i = 0; i < x.size(); ++i) cl[i] = std::min(6.0, std::max(0.0, x[i] + 3.0));
      ExpectNear(out[1], cl);
    } else {
      EXPECT_EQ(Kinds(c.parsed), "Eltwise");
    }
    ExpectNear(out[0], want);
  }
}

// The swish spelled out as exporters write SiLU (x * Sigmoid(x), either order) and the quick GELU (x * Sigmoid(1.702 x)):
// between two convolutions each becomes the first one's post-op ("Conv(1)": one post-op); on a plain value, one eltwise step. A Sigmoid read
// elsewhere (a graph output) leaves the pattern as it is, and every value stays right.
TEST(OpsNn, SpelledSwishBecomesAPostOp) {
  const Dims xd = {1, 16, 8, 8}, wd = {16, 16, 1, 1};
  const std::vector<float> x = UniformFloats(Numel(xd), 33, -4.f, 4.f), w = UniformFloats(Numel(wd), 34);
  for (int form = 0; form < 4; ++form) {
    SCOPED_TRACE(form);
    const bool conv = form != 3;
    const float a = form == 1 ? 1.702f : 1.f;
    GraphBuilder b;
    b.Input("x", xd);
    std::string v = "x";
    if (conv) {
      b.F32("w", wd, w);
      b.Out("c", xd);
      b.N("Conv", {"x", "w"}, {"c"}, 11);
      v = "c";
    }
    std::string sin = v;
    if (form == 1) {
      b.F32("a", {}, {a});
      b.Out("ax", xd);
      b.N("Mul", {v, "a"}, {"ax"}, 14);
      sin = "ax";
    }
    b.Out("s", xd);
    b.N("Sigmoid", {sin}, {"s"}, 13);
    b.Out("y", xd);
    if (form == 0) b.N("Mul", {"s", v}, {"y"}, 14);
    else b.N("Mul", {v, "s"}, {"y"}, 14);
    if (conv) {  // then another convolution, as in a network (a graph output is written plain, in no fused step)
      b.F32("w2", wd, w);
      b.Out("z", xd);
      b.N("Conv", {"y", "w2"}, {"z"}, 11);
      b.Output("z");
    } else {
      b.Output("y");
    }
    if (form == 2) b.Output("s");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    std::vector<double> pre(x.begin(), x.end());
    if (conv) pre = RefConv2d(x, xd, w, wd, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1);
    std::vector<double> want(pre.size()), sig(pre.size());
    for (size_t i = 0; i < pre.size(); ++i) {
      sig[i] = 1 / (1 + std::exp(-a * pre[i]));
      want[i] = pre[i] * sig[i];
    }
    if (conv) {
      const std::vector<float> wf(want.begin(), want.end());
      want = RefConv2d(wf, xd, w, wd, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1);
    }
    std::vector<std::vector<float>> out = Execute(c, {x});
    if (form == 2) {
      EXPECT_NE(Kinds(c.parsed), "Conv(1),Conv");
      ExpectNear(out[1], sig);
    } else {
      EXPECT_EQ(Kinds(c.parsed), conv ? "Conv(1),Conv" : "Eltwise");
    }
    ExpectNear(out[0], want);
  }
}

// A transposed convolution takes neither a folded affine map nor post-ops: oneDNN 2.6 runs a deconvolution's bias and
// post-ops in slow loops of their own (PP-OCRv4's upsampling: 1.8 -> 106 ms).
TEST(OpsNn, ConvTransposeTakesNoFusion) {
  const Dims xd = {1, 8, 4, 4}, wd = {8, 8, 2, 2}, yd = {1, 8, 8, 8};
  const std::vector<float> x = UniformFloats(Numel(xd), 41), w = UniformFloats(Numel(wd), 42);
  GraphBuilder b;
  b.Input("x", xd);
  b.F32("w", wd, w);
  b.Out("d", yd);
  b.N("ConvTranspose", {"x", "w"}, {"d"}, 11).attrs["strides"] = IntsA({2, 2});
  b.F32("k", {1}, {2.f});
  b.Out("m", yd);
  b.N("Mul", {"d", "k"}, {"m"}, 14);
  b.Out("y", yd);
  b.N("Relu", {"m"}, {"y"}, 14);
  b.Output("y");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed).rfind("Deconv,", 0), 0u) << Kinds(c.parsed);
  std::vector<double> want(static_cast<size_t>(Numel(yd)), 0.0);
  for (int64_t ci = 0; ci < 8; ++ci)
    for (int64_t ih = 0; ih < 4; ++ih)
      for (int64_t iw = 0; iw < 4; ++iw)
        for (int64_t m = 0; m < 8; ++m)
          for (int64_t kh = 0; kh < 2; ++kh)
            for (int64_t kw = 0; kw < 2; ++kw)
              want[static_cast<size_t>((m * 8 + ih * 2 + kh) * 8 + iw * 2 + kw)] +=
                  double(x[static_cast<size_t>((ci * 4 + ih) * 4 + iw)]) *
                  w[static_cast<size_t>(((ci * 8 + m) * 2 + kh) * 2 + kw)];
  for (double& v : want) v = std::max(0.0, 2 * v);
  ExpectNear(Execute(c, {x})[0], want);
}

// A Concat of blocked convolution results along a blocked axis (24 channels each: not a multiple of the block) is
// done in place: each source is reordered straight into its slice of the destination, with no concat step, and the
// convolution reading the result gets the right values.
TEST(OpsNn, ConcatOfBlockedValuesIsInPlace) {
  const Dims xd = {1, 16, 6, 6}, wd = {24, 16, 3, 3}, cd = {1, 24, 6, 6}, yd = {1, 48, 6, 6}, w2d = {16, 48, 1, 1};
  const std::vector<float> x = UniformFloats(Numel(xd), 51), wa = UniformFloats(Numel(wd), 52, -0.2f, 0.2f),
                           wb = UniformFloats(Numel(wd), 53, -0.2f, 0.2f), w2 = UniformFloats(Numel(w2d), 54, -0.2f, 0.2f);
  GraphBuilder b;
  b.Input("x", xd);
  b.F32("wa", wd, wa);
  b.F32("wb", wd, wb);
  b.Out("a", cd);
  b.N("Conv", {"x", "wa"}, {"a"}, 11).attrs["pads"] = IntsA({1, 1, 1, 1});
  b.Out("b", cd);
  b.N("Conv", {"x", "wb"}, {"b"}, 11).attrs["pads"] = IntsA({1, 1, 1, 1});
  b.Out("y", yd);
  b.N("Concat", {"b", "a"}, {"y"}, 13).attrs["axis"] = IntA(-3);
  b.F32("w2", w2d, w2);
  b.Out("z", {1, 16, 6, 6});
  b.N("Conv", {"y", "w2"}, {"z"}, 11);
  b.Output("z");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed), "Conv,Conv,Conv");
  const std::vector<double> ra = RefConv2d(x, xd, wa, wd, nullptr, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1);
  const std::vector<double> rb = RefConv2d(x, xd, wb, wd, nullptr, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1);
  std::vector<float> y(rb.begin(), rb.end());
  y.insert(y.end(), ra.begin(), ra.end());
  ExpectNear(Execute(c, {x})[0], RefConv2d(y, yd, w2, w2d, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1));
}

// A graph shaped as tf2onnx and PyTorch write them (issue 24): an NHWC input transposed to NCHW, a convolution, a
// Split along channels, a residual Add of a part and a convolution of the other, a channel Pad, a Concat, a last
// convolution and the Transpose back to NHWC. The values are right with the layout plan's choice and with channels-last
// forced (CompileOptions::channels_last, the plan's other candidate), at any ISA. With channels-last, at avx2 and
// avx512_core alike (oneDNN 2.6 has direct nhwc kernels for these convolutions at both): the first convolution reads
// the network input in place (the Transpose is a view of it), the Pad runs on the nhwc bytes, and no step copies a
// value to plain and back.
TEST(OpsNn, ExporterLayoutsRunWithoutCopies) {
  const int64_t H = 6, W = 5;
  const Dims xd = {1, H, W, 4}, w1d = {16, 4, 3, 3}, w2d = {8, 8, 1, 1}, w3d = {16, 20, 1, 1};
  const std::vector<float> x = UniformFloats(Numel(xd), 71, -1.f, 1.f), w1 = UniformFloats(Numel(w1d), 72, -0.3f, 0.3f),
                           w2 = UniformFloats(Numel(w2d), 73, -0.3f, 0.3f), w3 = UniformFloats(Numel(w3d), 74, -0.3f, 0.3f);
  GraphBuilder b;
  b.Input("x", xd);
  b.Out("xt", {1, 4, H, W});
  b.N("Transpose", {"x"}, {"xt"}, 13).attrs["perm"] = IntsA({0, 3, 1, 2});
  b.F32("w1", w1d, w1);
  b.Out("c1", {1, 16, H, W});
  b.N("Conv", {"xt", "w1"}, {"c1"}, 11).attrs["pads"] = IntsA({1, 1, 1, 1});
  b.Out("r1", {1, 16, H, W});
  b.N("Relu", {"c1"}, {"r1"}, 14);
  b.Out("pa", {1, 8, H, W});
  b.Out("pb", {1, 8, H, W});
  b.N("Split", {"r1"}, {"pa", "pb"}, 11).attrs["axis"] = IntA(1);
  b.F32("w2", w2d, w2);
  b.Out("c2", {1, 8, H, W});
  b.N("Conv", {"pb", "w2"}, {"c2"}, 11);
  b.Out("d", {1, 8, H, W});
  b.N("Add", {"c2", "pa"}, {"d"}, 14);
  b.I64("pads", {8}, {0, 2, 0, 0, 0, 2, 0, 0});
  b.Out("e", {1, 12, H, W});
  b.N("Pad", {"d", "pads"}, {"e"}, 13);
  b.Out("f", {1, 20, H, W});
  b.N("Concat", {"e", "pb"}, {"f"}, 13).attrs["axis"] = IntA(1);
  b.F32("w3", w3d, w3);
  b.Out("g", {1, 16, H, W});
  b.N("Conv", {"f", "w3"}, {"g"}, 11);
  b.Out("y", {1, H, W, 16});
  b.N("Transpose", {"g"}, {"y"}, 13).attrs["perm"] = IntsA({0, 2, 3, 1});
  b.Output("y");

  // The reference, in NCHW.
  std::vector<float> xt(static_cast<size_t>(4 * H * W));
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t i = 0; i < H * W; ++i) xt[static_cast<size_t>(c * H * W + i)] = x[static_cast<size_t>(i * 4 + c)];
  std::vector<double> r1 = RefConv2d(xt, {1, 4, H, W}, w1, w1d, nullptr, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1);
  for (double& v : r1) v = std::max(0.0, v);
  const size_t plane = static_cast<size_t>(H * W);
  const std::vector<float> pa(r1.begin(), r1.begin() + 8 * plane), pb(r1.begin() + 8 * plane, r1.end());
  const std::vector<double> c2 = RefConv2d(pb, {1, 8, H, W}, w2, w2d, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1);
  std::vector<float> f(20 * plane, 0.f);  // [pad 2 | d (8) | pad 2 | pb (8)]
  for (size_t i = 0; i < 8 * plane; ++i) {
    f[2 * plane + i] = static_cast<float>(c2[i] + pa[i]);
    f[12 * plane + i] = pb[i];
  }
  const std::vector<double> g = RefConv2d(f, {1, 20, H, W}, w3, w3d, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1);
  std::vector<double> want(g.size());
  for (size_t c = 0; c < 16; ++c)
    for (size_t i = 0; i < plane; ++i) want[i * 16 + c] = g[c * plane + i];

  for (bool channels_last : {false, true}) {
    SCOPED_TRACE(channels_last);
    CompileOptions o;
    o.channels_last = channels_last;
    Compiled c;
    ASSERT_TRUE(Compile(b, &c, o));
    ExpectNear(Execute(c, {x})[0], want);
    if (!channels_last) continue;
    const Step* first_conv = nullptr;
    size_t to_plain = 0;
    for (const Step& st : c.parsed.steps) {
      if (st.kind == StepKind::kConv && !first_conv) first_conv = &st;
      if (st.kind == StepKind::kPad) {
        EXPECT_FALSE(IsPlain(st.ops[0]) && IsPlain(st.ops[1]) && st.ops[0].dims[1] == 8)
            << "the Pad ran on plain NCHW values: " << DescribeStep(st);
      }
      if (st.kind == StepKind::kReorder && st.name.find(":to_plain") != std::string::npos) ++to_plain;
    }
    ASSERT_NE(first_conv, nullptr);
    EXPECT_EQ(first_conv->ops[0].buf, Buf::kInput) << "the first convolution does not read the input in place";
    EXPECT_EQ(to_plain, 0u) << Kinds(c.parsed);
  }
}

// A MaxPool of a plain value (a graph input) takes a layout with a jit kernel: on plain layouts oneDNN 2.6 has only
// simple_nchw (2.2 ms against ONNX Runtime's 0.17 ms for [1, 24, 152, 152], issue 24's performance tester). At every
// ISA the pool step runs no simple or reference kernel, and the values are exact.
TEST(OpsNn, PoolOfAPlainValueRunsAJitKernel) {
  const Dims xd = {1, 24, 16, 16}, yd = {1, 24, 8, 8};
  const std::vector<float> x = UniformFloats(Numel(xd), 81, -3.f, 3.f);
  GraphBuilder b;
  b.Input("x", xd);
  b.Out("y", yd);
  Node& p = b.N("MaxPool", {"x"}, {"y"}, 12);
  p.attrs["kernel_shape"] = IntsA({2, 2});
  p.attrs["strides"] = IntsA({2, 2});
  b.Output("y");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  for (int threads : {1, 2}) {
    std::unique_ptr<Executor> e = OptimizedExecutor(c, threads);
    ASSERT_NE(e, nullptr);
    for (size_t i = 0; i < c.parsed.steps.size(); ++i) {
      if (c.parsed.steps[i].kind == StepKind::kPool) {
        EXPECT_NE(e->step_impl(i).rfind("simple", 0), 0u) << threads << " threads: " << e->step_impl(i);
      }
    }
  }
  std::vector<double> want(static_cast<size_t>(Numel(yd)));
  for (int64_t ch = 0; ch < 24; ++ch)
    for (int64_t i = 0; i < 8; ++i)
      for (int64_t j = 0; j < 8; ++j) {
        double m = -1e30;
        for (int64_t di = 0; di < 2; ++di)
          for (int64_t dj = 0; dj < 2; ++dj)
            m = std::max<double>(m, x[static_cast<size_t>((ch * 16 + 2 * i + di) * 16 + 2 * j + dj)]);
        want[static_cast<size_t>((ch * 8 + i) * 8 + j)] = m;
      }
  ExpectNear(Execute(c, {x})[0], want, 0);
}

// A per-channel constant Add that only a BatchNormalization reads is folded into its mean, and a Relu after it runs
// inside the normalization (PP-OCRv4's upsampling path: ConvTranspose -> Add(bias) -> BatchNormalization -> Relu,
// three steps before). With the Add's result also read elsewhere, nothing is folded and every value stays right.
TEST(OpsNn, AddBatchNormReluIsOneStep) {
  const Dims xd = {1, 5, 4, 6};
  const std::vector<float> x = UniformFloats(Numel(xd), 61, -2.f, 2.f), c = UniformFloats(5, 62);
  for (bool shared : {false, true}) {
    SCOPED_TRACE(shared);
    GraphBuilder b;
    b.Input("x", xd);
    b.F32("c", {1, 5, 1, 1}, c);
    b.Out("a", xd);
    b.N("Add", {"x", "c"}, {"a"}, 14);
    std::vector<std::vector<float>> p;
    AddBatchNorm(b, "a", "n", 5, xd, &p);
    b.Out("y", xd);
    b.N("Relu", {"n"}, {"y"}, 14);
    b.Output("y");
    if (shared) b.Output("a");
    Compiled c2;
    ASSERT_TRUE(Compile(b, &c2));
    if (!shared) EXPECT_EQ(Kinds(c2.parsed), "BatchNorm(1)");
    else EXPECT_NE(Kinds(c2.parsed).find("Binary"), std::string::npos) << Kinds(c2.parsed);
    std::vector<double> a(x.size());
    for (size_t i = 0; i < x.size(); ++i) a[i] = double(x[i]) + c[(i / 24) % 5];
    std::vector<double> want = a;
    RefBatchNorm(&want, 5, 24, p);
    for (double& v : want) v = std::max(0.0, v);
    std::vector<std::vector<float>> out = Execute(c2, {x});
    ExpectNear(out[0], want);
    if (shared) ExpectNear(out[1], a);
  }
}

// A ConvTranspose with one output channel (the detector's last layer) gets the candidate layouts with the fewest bytes
// among equally good kernels: not oneDNN's 16-channel blocks, which pad its one channel 16-fold (3x slower there).
TEST(OpsNn, OneChannelConvTransposeAvoidsPadding) {
  const Dims xd = {1, 24, 8, 8}, w1d = {24, 24, 1, 1}, wd = {24, 1, 2, 2}, yd = {1, 1, 16, 16};
  const std::vector<float> x = UniformFloats(Numel(xd), 71), w1 = UniformFloats(Numel(w1d), 72, -0.3f, 0.3f),
                           w = UniformFloats(Numel(wd), 73);
  GraphBuilder b;
  b.Input("x", xd);
  b.F32("w1", w1d, w1);
  b.Out("c", xd);
  b.N("Conv", {"x", "w1"}, {"c"}, 11);
  b.F32("w", wd, w);
  b.Out("d", yd);
  b.N("ConvTranspose", {"c", "w"}, {"d"}, 11).attrs["strides"] = IntsA({2, 2});
  b.Out("y", yd);
  b.N("Relu", {"d"}, {"y"}, 14);
  b.Output("y");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  for (const Step& st : c.parsed.steps) {
    if (st.kind != StepKind::kDeconv) continue;
    dnnl::memory::desc d;
    ASSERT_TRUE(OperandDesc(st.ops[3], &d).ok);
    EXPECT_LT(d.get_size(), size_t{16} * 16 * 16 * 4) << DescribeStep(st);
  }
  const std::vector<double> cr = RefConv2d(x, xd, w1, w1d, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1);
  std::vector<double> want(static_cast<size_t>(Numel(yd)), 0.0);
  for (int64_t ci = 0; ci < 24; ++ci)
    for (int64_t ih = 0; ih < 8; ++ih)
      for (int64_t iw = 0; iw < 8; ++iw)
        for (int64_t kh = 0; kh < 2; ++kh)
          for (int64_t kw = 0; kw < 2; ++kw)
            want[static_cast<size_t>((ih * 2 + kh) * 16 + iw * 2 + kw)] +=
                cr[static_cast<size_t>((ci * 8 + ih) * 8 + iw)] * w[static_cast<size_t>((ci * 2 + kh) * 2 + kw)];
  for (double& v : want) v = std::max(0.0, v);
  ExpectNear(Execute(c, {x})[0], want);
}

// openWakeWord's embedding block: Conv -> LeakyRelu -> Max(x, -0.4): one step, the Max as a clip to [-0.4, inf]. A
// Min after it would be a second clip with other bounds, which oneDNN 2.6's post-op injectors get wrong
// (AppendPostOp): it stays a step of its own, and the values are right either way.
TEST(OpsNn, ConvLeakyReluMaxIsOneStep) {
  const Dims xd = {1, 8, 6, 7}, wd = {16, 8, 1, 3}, yd = {1, 16, 6, 5};
  const std::vector<float> x = UniformFloats(Numel(xd), 81, -2.f, 2.f), w = UniformFloats(Numel(wd), 82, -0.5f, 0.5f);
  GraphBuilder b;
  b.Input("x", xd);
  b.F32("w", wd, w);
  b.Out("c", yd);
  b.N("Conv", {"x", "w"}, {"c"}, 11);
  b.Out("l", yd);
  b.N("LeakyRelu", {"c"}, {"l"}, 6).attrs["alpha"] = FloatA(0.2f);
  b.F32("lo", {1, 1, 1, 1}, {-0.4f});
  b.Out("m", yd);
  b.N("Max", {"l", "lo"}, {"m"}, 13);
  b.F32("hi", {}, {0.5f});
  b.Out("y", yd);
  b.N("Min", {"hi", "m"}, {"y"}, 13);
  b.F32("w2", {4, 16, 1, 1}, UniformFloats(64, 83, -0.3f, 0.3f));
  b.Out("z", {1, 4, 6, 5});
  b.N("Conv", {"y", "w2"}, {"z"}, 11);
  b.Output("y");
  b.Output("z");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed).rfind("Conv(2),Binary,", 0), 0u) << Kinds(c.parsed);
  std::vector<double> want = RefConv2d(x, xd, w, wd, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1);
  for (double& v : want) v = std::min(0.5, std::max(-0.4, v < 0 ? 0.2 * v : v));
  ExpectNear(Execute(c, {x})[0], want);
}

// A constant-zero Pad of spatial axes read only by a Conv becomes part of the Conv's pads (TensorFlow's explicit
// padding before a strided convolution): no Pad step. With another pad value it stays a step, and the values are
// right either way.
TEST(OpsNn, ZeroPadBeforeConvIsFolded) {
  const Dims xd = {1, 8, 7, 6}, wd = {8, 8, 3, 3};
  const std::vector<float> x = UniformFloats(Numel(xd), 91), w = UniformFloats(Numel(wd), 92, -0.3f, 0.3f);
  for (float value : {0.f, 1.5f}) {
    SCOPED_TRACE(value);
    // Pad H by 1/2 and W by 0/1, then a stride-2 Conv with its own pads 1 on every side.
    const Dims pd = {1, 8, 10, 7};
    const int64_t oh = (10 + 2 - 3) / 2 + 1, ow = (7 + 2 - 3) / 2 + 1;
    GraphBuilder b;
    b.Input("x", xd);
    b.I64("pads", {0, 0, 1, 0, 0, 0, 2, 1});
    b.F32("v", {}, {value});
    b.Out("p", pd);
    b.N("Pad", {"x", "pads", "v"}, {"p"}, 13);
    b.F32("w", wd, w);
    b.Out("y", {1, 8, oh, ow});
    Node& conv = b.N("Conv", {"p", "w"}, {"y"}, 11);
    conv.attrs["pads"] = IntsA({1, 1, 1, 1});
    conv.attrs["strides"] = IntsA({2, 2});
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    if (value == 0.f) EXPECT_EQ(Kinds(c.parsed), "Conv");
    else EXPECT_EQ(Kinds(c.parsed), "Pad,Conv");
    std::vector<float> padded(static_cast<size_t>(Numel(pd)), value);
    for (int64_t ch = 0; ch < 8; ++ch)
      for (int64_t i = 0; i < 7; ++i)
        for (int64_t j = 0; j < 6; ++j)
          padded[static_cast<size_t>((ch * 10 + i + 1) * 7 + j)] = x[static_cast<size_t>((ch * 7 + i) * 6 + j)];
    ExpectNear(Execute(c, {x})[0], RefConv2d(padded, pd, w, wd, nullptr, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1));
  }
}

// Split and Slice of a convolution's blocked result read sub-blocks in place where the layout makes them contiguous
// (OpsTensor.BlockedSubViews); whichever layout oneDNN picks on this machine, the two convolutions after a channel
// split, a row split and a channel slice get the right values.
TEST(OpsNn, SplitAndSliceOfBlockedResults) {
  const Dims xd = {1, 16, 6, 6}, wd = {32, 16, 1, 1}, w2d = {8, 16, 3, 3}, w3d = {8, 32, 1, 1};
  const std::vector<float> x = UniformFloats(Numel(xd), 101), w = UniformFloats(Numel(wd), 102, -0.3f, 0.3f),
                           w2 = UniformFloats(Numel(w2d), 103, -0.2f, 0.2f), w3 = UniformFloats(Numel(w3d), 104, -0.2f, 0.2f);
  auto to_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const std::vector<float> c = to_float(RefConv2d(x, xd, w, wd, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1));
  // Channel split [16, 16] -> Conv each; row split [2, 4] -> Conv (1x1, 32 -> 8) of the first; Slice channels 16..32.
  GraphBuilder b;
  b.Input("x", xd);
  b.F32("w", wd, w);
  b.Out("c", {1, 32, 6, 6});
  b.N("Conv", {"x", "w"}, {"c"}, 11);
  b.Out("a", {1, 16, 6, 6});
  b.Out("bb", {1, 16, 6, 6});
  b.N("Split", {"c"}, {"a", "bb"}, 11).attrs["axis"] = IntA(1);
  b.Out("r0", {1, 32, 2, 6});
  b.Out("r1", {1, 32, 4, 6});
  Node& rs = b.N("Split", {"c"}, {"r0", "r1"}, 11);
  rs.attrs["axis"] = IntA(2);
  rs.attrs["split"] = IntsA({2, 4});
  b.I64("starts", {16});
  b.I64("ends", {32});
  b.I64("axes", {1});
  b.Out("s", {1, 16, 6, 6});
  b.N("Slice", {"c", "starts", "ends", "axes"}, {"s"}, 13);
  b.F32("w2", w2d, w2);
  b.F32("w3", w3d, w3);
  for (const char* in : {"a", "bb", "s"}) {
    b.Out(std::string(in) + "_y", {1, 8, 6, 6});
    b.N("Conv", {in, "w2"}, {std::string(in) + "_y"}, 11).attrs["pads"] = IntsA({1, 1, 1, 1});
    b.Output(std::string(in) + "_y");
  }
  b.Out("r_y", {1, 8, 2, 6});
  b.N("Conv", {"r0", "w3"}, {"r_y"}, 11);
  b.Output("r_y");
  b.Out("r1_y", {1, 32, 4, 6});
  b.N("Relu", {"r1"}, {"r1_y"}, 14);
  b.Output("r1_y");
  Compiled cp;
  ASSERT_TRUE(Compile(b, &cp));
  std::vector<std::vector<float>> out = Execute(cp, {x});
  const std::vector<float> a(c.begin(), c.begin() + 16 * 36), s(c.begin() + 16 * 36, c.end());
  const Dims hd = {1, 16, 6, 6};
  ExpectNear(out[0], RefConv2d(a, hd, w2, w2d, nullptr, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1));
  ExpectNear(out[1], RefConv2d(s, hd, w2, w2d, nullptr, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1));
  ExpectNear(out[2], RefConv2d(s, hd, w2, w2d, nullptr, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1));
  std::vector<float> r0, r1;
  for (int64_t ch = 0; ch < 32; ++ch)
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 6; ++j) (i < 2 ? r0 : r1).push_back(c[static_cast<size_t>((ch * 6 + i) * 6 + j)]);
  ExpectNear(out[3], RefConv2d(r0, {1, 32, 2, 6}, w3, w3d, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1));
  std::vector<double> r1y(r1.begin(), r1.end());
  for (double& v : r1y) v = std::max(0.0, v);
  ExpectNear(out[4], r1y);
}

// Batch-1 convolutions of the zoo's shapes (a 1-D STFT-like convolution on a channel-1 source, a 1x1 convolution on a
// 1x1 map, a strided 1-D convolution + Relu) compile to layouts oneDNN runs with an optimized kernel whatever the
// thread count the executor creates them with: on an AVX-512 machine oneDNN's equality ignores strides of size-1
// dims and brgconv refuses some of these with one thread, and each ran the reference kernel (32 ms instead of
// 0.05 ms; issue 14). Values against the float64 reference at every thread count.
TEST(OpsNn, BatchOneConvsRunOptimizedKernelsAtEveryThreadCount) {
  struct Case {
    Dims xd, wd;
    int64_t stride, pad;
    bool relu;
  };
  const Case cases[] = {{{1, 1, 1, 1760}, {257, 1, 1, 512}, 160, 0, false},
                        {{1, 96, 1, 1}, {24, 96, 1, 1}, 1, 0, true},
                        {{1, 128, 1, 7}, {64, 128, 1, 3}, 2, 1, true}};
  for (const Case& k : cases) {
    SCOPED_TRACE(::testing::Message() << "x " << k.xd[1] << "x" << k.xd[3] << " w " << k.wd[0] << "x" << k.wd[3]);
    // The 1-D convolutions as ONNX has them: [N, C, W] with a [M, C, k] kernel.
    const bool one_d = k.xd[3] > 1;
    const Dims x1 = one_d ? Dims{k.xd[0], k.xd[1], k.xd[3]} : k.xd;
    const Dims w1 = one_d ? Dims{k.wd[0], k.wd[1], k.wd[3]} : k.wd;
    const int64_t ow = (k.xd[3] + 2 * k.pad - k.wd[3]) / k.stride + 1;
    const Dims y1 = one_d ? Dims{1, k.wd[0], ow} : Dims{1, k.wd[0], 1, 1};
    const std::vector<float> x = UniformFloats(Numel(x1), 21), w = UniformFloats(Numel(w1), 22, -0.1f, 0.1f);
    GraphBuilder b;
    b.Input("x", x1);
    b.F32("w", w1, w);
    b.Out("c", y1);
    Node& n = b.N("Conv", {"x", "w"}, {"c"}, 11);
    if (one_d) {
      n.attrs["strides"] = IntsA({k.stride});
      n.attrs["pads"] = IntsA({k.pad, k.pad});
    }
    std::string out = "c";
    if (k.relu) {  // fused as a post-op
      b.Out("r", y1);
      b.N("Relu", {"c"}, {"r"}, 14);
      out = "r";
    }
    // A second convolution reads it, so its layout is oneDNN's choice (a graph output is plain).
    const Dims w2d = one_d ? Dims{4, k.wd[0], 1} : Dims{4, k.wd[0], 1, 1};
    const Dims zd = one_d ? Dims{1, 4, ow} : Dims{1, 4, 1, 1};
    const std::vector<float> w2 = UniformFloats(Numel(w2d), 23, -0.1f, 0.1f);
    b.F32("w2", w2d, w2);
    b.Out("z", zd);
    b.N("Conv", {out, "w2"}, {"z"}, 11);
    b.Output("z");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    std::vector<double> first = RefConv2d(x, k.xd, w, k.wd, nullptr, {1, k.stride}, {1, 1}, {0, k.pad, 0, k.pad}, 1);
    std::vector<float> mid(first.size());
    for (size_t i = 0; i < first.size(); ++i) mid[i] = static_cast<float>(k.relu ? std::max(0.0, first[i]) : first[i]);
    const std::vector<double> want =
        RefConv2d(mid, {1, k.wd[0], 1, ow}, w2, {4, k.wd[0], 1, 1}, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1);
    for (int threads : {1, 2}) {
      std::unique_ptr<Executor> e = OptimizedExecutor(c, threads);
      ASSERT_TRUE(e);
      std::vector<float> y(want.size());
      CheckResult r = e->Run({x.data()}, {y.data()});
      ASSERT_TRUE(r.ok) << r.reason;
      ExpectNear(y, want);
    }
  }
}

// A 1-D depthwise convolution [N, C, W] (group C) with the parameters of `k`, between two 1x1 convolutions so its
// source and destination are in oneDNN's layouts: x -> 1x1 Conv -> r -> depthwise Conv -> c [-> Add(r)] [-> Relu]
// -> 1x1 Conv -> z.
struct Dw1dCase {
  int64_t channels, width, kernel, stride, dilation, pad;
  bool relu, residual;
};

struct Dw1dGraph {
  GraphBuilder b;
  Dims xd, wd, pd, yd, zd;
  std::vector<float> x, pw, dw, bias, out_w;
};

void BuildDw1d(const Dw1dCase& k, Dw1dGraph* t) {
  const int64_t C = k.channels, W = k.width;
  const int64_t ow = (W + 2 * k.pad - (k.kernel - 1) * k.dilation - 1) / k.stride + 1;
  t->xd = {1, C, W};
  t->pd = {C, C, 1};
  t->wd = {C, 1, k.kernel};
  t->yd = {1, C, ow};
  t->zd = {1, 4, ow};
  t->x = UniformFloats(Numel(t->xd), 60);
  t->pw = UniformFloats(Numel(t->pd), 61, -0.2f, 0.2f);
  t->dw = UniformFloats(Numel(t->wd), 62, -0.5f, 0.5f);
  t->bias = UniformFloats(C, 63);
  t->out_w = UniformFloats(4 * C, 64, -0.2f, 0.2f);
  GraphBuilder& b = t->b;
  b.Input("x", t->xd);
  b.F32("pw", t->pd, t->pw);
  b.Out("r", t->xd);
  b.N("Conv", {"x", "pw"}, {"r"}, 11);
  b.F32("dw", t->wd, t->dw);
  b.F32("dwb", {C}, t->bias);
  b.Out("c", t->yd);
  Node& n = b.N("Conv", {"r", "dw", "dwb"}, {"c"}, 11);
  n.attrs["group"] = IntA(C);
  n.attrs["strides"] = IntsA({k.stride});
  n.attrs["dilations"] = IntsA({k.dilation});
  n.attrs["pads"] = IntsA({k.pad, k.pad});
  std::string out = "c";
  if (k.residual) {
    b.Out("a", t->yd);
    b.N("Add", {out, "r"}, {"a"}, 14);
    out = "a";
  }
  if (k.relu) {
    b.Out("y", t->yd);
    b.N("Relu", {out}, {"y"}, 14);
    out = "y";
  }
  b.F32("ow", {4, C, 1}, t->out_w);
  b.Out("z", t->zd);
  b.N("Conv", {out, "ow"}, {"z"}, 11);
  b.Output("z");
}

// The float64 reference: the 1-D convolutions are the 2-D ones with H = 1.
std::vector<double> RefDw1d(const Dw1dCase& k, const Dw1dGraph& t) {
  const int64_t C = k.channels, W = k.width, ow = t.yd[2];
  auto to_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const std::vector<float> r =
      to_float(RefConv2d(t.x, {1, C, 1, W}, t.pw, {C, C, 1, 1}, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1));
  std::vector<double> c = RefConv2d(r, {1, C, 1, W}, t.dw, {C, 1, 1, k.kernel}, &t.bias, {1, k.stride},
                                    {1, k.dilation}, {0, k.pad, 0, k.pad}, C);
  for (size_t i = 0; i < c.size(); ++i) {
    if (k.residual) c[i] += r[i];
    if (k.relu) c[i] = std::max(0.0, c[i]);
  }
  return RefConv2d(to_float(c), {1, C, 1, ow}, t.out_w, {4, C, 1, 1}, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1);
}

// Whether this machine's oneDNN has a direct (not reference, not gemm-based) kernel for the 2-D depthwise problem
// with H = 1 in a channel-blocked layout: jit_dw needs AVX2 (nChw8c) or AVX-512 (nChw16c).
bool HasDirectDepthwise2d(const Dw1dCase& k, int64_t ow) {
  using tag = dnnl::memory::format_tag;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  const int64_t C = k.channels;
  for (tag t : {tag::nChw16c, tag::nChw8c}) {
    try {
      const dnnl::memory::desc src({1, C, 1, k.width}, dnnl::memory::data_type::f32, t),
          dst({1, C, 1, ow}, dnnl::memory::data_type::f32, t),
          wts({C, 1, 1, 1, k.kernel}, dnnl::memory::data_type::f32, tag::any);
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                        wts, dst, {1, k.stride}, {0, k.dilation - 1}, {0, k.pad}, {0, k.pad});
      const std::string impl = dnnl::convolution_forward::primitive_desc(d, eng).impl_info_str();
      if (impl.rfind("ref", 0) != 0 && impl.find("gemm") == std::string::npos) return true;
    } catch (const dnnl::error&) {
    }
  }
  return false;
}

// oneDNN 2.6 runs a 1-D depthwise convolution with the gemm-based kernel (im2col + sgemm, JIT-generated on the first
// run) and has its depthwise jit kernels for 2-D only: the step is the 2-D convolution with H = 1 over 4-D views of
// the 3-D values, and runs a direct kernel at every thread count. Values against the float64 reference.
TEST(OpsNn, DepthwiseConv1dRunsAsTwoDimensional) {
  const Dw1dCase cases[] = {
      {32, 24, 5, 1, 1, 2, false, false},  // Silero VAD v4's shape class, pads 2
      {32, 24, 5, 2, 1, 2, false, false},  // stride 2
      {24, 19, 3, 1, 2, 2, false, false},  // dilation 2, 24 channels (not a multiple of 16)
      {32, 24, 5, 1, 1, 2, true, false},   // fused Relu
      {32, 24, 5, 1, 1, 2, true, true},    // fused residual Add and Relu
  };
  for (const Dw1dCase& k : cases) {
    SCOPED_TRACE(::testing::Message() << "C " << k.channels << " W " << k.width << " k " << k.kernel << " s "
                                      << k.stride << " d " << k.dilation << " relu " << k.relu << " residual "
                                      << k.residual);
    Dw1dGraph t;
    BuildDw1d(k, &t);
    Compiled c;
    ASSERT_TRUE(Compile(t.b, &c));
    const size_t post_ops = (k.relu ? 1 : 0) + (k.residual ? 1 : 0);
    EXPECT_EQ(Kinds(c.parsed), post_ops ? "Conv,Conv(" + std::to_string(post_ops) + "),Conv" : "Conv,Conv,Conv");
    size_t dw = c.parsed.steps.size();
    for (size_t i = 0; i < c.parsed.steps.size(); ++i) {
      const Step& s = c.parsed.steps[i];
      if (s.kind != StepKind::kConv) continue;
      if (s.ints[0] == k.channels) dw = i;
      // Every 1-D convolution is lifted: spatial rank 2, H entries stride 1, dilation 0 (oneDNN's), pads 0; its
      // activation operands (src, dst, the residual) are [N, C, 1, W] views.
      ASSERT_EQ(s.ints.size(), 10u) << DescribeStep(s);
      EXPECT_EQ(s.ints[1], 2);
      EXPECT_EQ(s.ints[2], 1);
      EXPECT_EQ(s.ints[4], 0);
      EXPECT_EQ(s.ints[6], 0);
      EXPECT_EQ(s.ints[8], 0);
      for (size_t o : {size_t{0}, size_t{3}})
        EXPECT_TRUE(s.ops[o].dims.size() == 4 && s.ops[o].dims[2] == 1) << DescribeStep(s);
      for (size_t o = 4; o < s.ops.size(); ++o)
        EXPECT_TRUE(s.ops[o].dims.size() == 4 && s.ops[o].dims[2] == 1) << DescribeStep(s);
    }
    ASSERT_LT(dw, c.parsed.steps.size());
    EXPECT_EQ(c.parsed.steps[dw].ops.size(), 4 + (k.residual ? 1u : 0u));
    // The values stay 3-D for the graph: the output and every non-convolution step's operands.
    EXPECT_EQ(c.parsed.outputs[0].dims, t.zd);
    for (const Step& s : c.parsed.steps) {
      if (s.kind == StepKind::kConv) continue;
      for (const Operand& o : s.ops) EXPECT_EQ(o.dims.size(), 3u) << DescribeStep(s);
    }
    const std::vector<double> want = RefDw1d(k, t);
    const bool direct = HasDirectDepthwise2d(k, t.yd[2]);
    for (int threads : {1, 2}) {
      std::unique_ptr<Executor> e = OptimizedExecutor(c, threads);
      ASSERT_TRUE(e);
      if (direct) {
        EXPECT_EQ(e->step_impl(dw).find("gemm:jit"), std::string::npos)
            << threads << " threads: " << DescribeStep(c.parsed.steps[dw]) << " runs " << e->step_impl(dw);
      }
      std::vector<float> z(want.size());
      CheckResult r = e->Run({t.x.data()}, {z.data()});
      ASSERT_TRUE(r.ok) << r.reason;
      ExpectNear(z, want);
    }
  }
}

// A 1-D transposed convolution (stride 2, output_padding 1, groups) is lifted the same way; values as ONNX defines.
TEST(OpsNn, ConvTranspose1dIsLifted) {
  // x [1, 4, 5], W [4, 3, 3] (C, M/g, k), group 2 -> M = 6; stride 2, pads 1/1, output_padding 1 -> W' 10.
  const Dims xd = {1, 4, 5}, wd = {4, 3, 3}, yd = {1, 6, 10};
  const std::vector<float> x = UniformFloats(Numel(xd), 70), w = UniformFloats(Numel(wd), 71), bias = UniformFloats(6, 72);
  GraphBuilder b;
  b.Input("x", xd);
  b.F32("w", wd, w);
  b.F32("bias", {6}, bias);
  b.Out("y", yd);
  Node& n = b.N("ConvTranspose", {"x", "w", "bias"}, {"y"}, 11);
  n.attrs["group"] = IntA(2);
  n.attrs["strides"] = IntsA({2});
  n.attrs["pads"] = IntsA({1, 1});
  n.attrs["output_padding"] = IntsA({1});
  b.Output("y");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  ASSERT_EQ(Kinds(c.parsed), "Deconv,Binary");  // the bias as a step of its own (SplitConvTransposeBias)
  for (const Step& s : c.parsed.steps) {
    if (s.kind == StepKind::kDeconv) {
      EXPECT_EQ(s.ints[1], 2) << DescribeStep(s);
    }
  }
  std::vector<double> want(static_cast<size_t>(Numel(yd)));
  for (int64_t m = 0; m < 6; ++m)
    for (int64_t o = 0; o < 10; ++o) want[static_cast<size_t>(m * 10 + o)] = bias[static_cast<size_t>(m)];
  for (int64_t ci = 0; ci < 4; ++ci)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t mo = 0; mo < 3; ++mo)
        for (int64_t kw = 0; kw < 3; ++kw) {
          const int64_t o = i * 2 - 1 + kw, m = (ci / 2) * 3 + mo;
          if (o < 0 || o >= 10) continue;
          want[static_cast<size_t>(m * 10 + o)] +=
              double(x[static_cast<size_t>(ci * 5 + i)]) * w[static_cast<size_t>((ci * 3 + mo) * 3 + kw)];
        }
  ExpectNear(Execute(c, {x})[0], want);
}

TEST(OpsNn, ConvReadTwiceIsNotFused) {
  const Dims xd = {1, 4, 5, 5}, wd = {4, 4, 3, 3}, yd = {1, 4, 3, 3};
  const std::vector<float> x = UniformFloats(Numel(xd), 4), w = UniformFloats(Numel(wd), 5);
  GraphBuilder b;
  b.Input("x", xd);
  b.F32("w", wd, w);
  b.Out("c", yd);
  b.N("Conv", {"x", "w"}, {"c"}, 11);
  std::vector<std::vector<float>> p;
  AddBatchNorm(b, "c", "n", 4, yd, &p);
  b.Output("n");
  b.Output("c");  // a graph output too: BatchNormalization must not be folded into it
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed), "Conv,BatchNorm");
  std::vector<double> conv = RefConv2d(x, xd, w, wd, nullptr, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1), bn = conv;
  RefBatchNorm(&bn, 4, 9, p);
  std::vector<std::vector<float>> out = Execute(c, {x});
  ExpectNear(out[0], bn);
  ExpectNear(out[1], conv);
}

TEST(OpsNn, GroupedDilatedStridedConvWithSameLower) {
  const Dims xd = {2, 6, 11, 10}, wd = {9, 2, 3, 2};
  const std::vector<float> x = UniformFloats(Numel(xd), 6), w = UniformFloats(Numel(wd), 7);
  // SAME_LOWER, stride 2, dilation (2,1): out 6x5; H: total = 5*2 + 5 - 11 = 4 -> 2/2; W: total = 4*2 + 2 - 10 = 0.
  GraphBuilder b;
  b.Input("x", xd);
  b.F32("w", wd, w);
  b.Out("y", {2, 9, 6, 5});
  Node& n = b.N("Conv", {"x", "w"}, {"y"}, 11);
  n.attrs["group"] = IntA(3);
  n.attrs["strides"] = IntsA({2, 2});
  n.attrs["dilations"] = IntsA({2, 1});
  n.attrs["auto_pad"] = StrA("SAME_LOWER");
  b.Output("y");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed), "Conv");
  ExpectNear(Execute(c, {x})[0], RefConv2d(x, xd, w, wd, nullptr, {2, 2}, {2, 1}, {2, 0, 2, 0}, 3));
}

TEST(OpsNn, ConvTransposeWithOutputPaddingAndGroups) {
  // x [1,4,3,3], W [4, 3, 3, 3] (C, M/g, kh, kw), group 2 -> M = 6; stride 2, pads 1, output_padding 1 -> 6x6.
  const Dims xd = {1, 4, 3, 3}, wd = {4, 3, 3, 3}, yd = {1, 6, 6, 6};
  const std::vector<float> x = UniformFloats(Numel(xd), 8), w = UniformFloats(Numel(wd), 9), bias = UniformFloats(6, 10);
  GraphBuilder b;
  b.Input("x", xd);
  b.F32("w", wd, w);
  b.F32("bias", {6}, bias);
  b.Out("y", yd);
  Node& n = b.N("ConvTranspose", {"x", "w", "bias"}, {"y"}, 11);
  n.attrs["group"] = IntA(2);
  n.attrs["strides"] = IntsA({2, 2});
  n.attrs["pads"] = IntsA({1, 1, 1, 1});
  n.attrs["output_padding"] = IntsA({1, 1});
  b.Output("y");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed), "Deconv,Binary");  // the bias as a step of its own (SplitConvTransposeBias)
  for (const Step& st : c.parsed.steps) {  // oneDNN 2.6's deconvolution with a bias: 6-70x slower
    if (st.kind == StepKind::kDeconv) {
      EXPECT_FALSE(st.ops[2].present()) << DescribeStep(st);
    }
  }
  std::vector<double> want(static_cast<size_t>(Numel(yd)));
  for (int64_t m = 0; m < 6; ++m)
    for (size_t i = 0; i < 36; ++i) want[static_cast<size_t>(m) * 36 + i] = bias[static_cast<size_t>(m)];
  for (int64_t ci = 0; ci < 4; ++ci)
    for (int64_t ih = 0; ih < 3; ++ih)
      for (int64_t iw = 0; iw < 3; ++iw)
        for (int64_t mo = 0; mo < 3; ++mo)
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw) {
              const int64_t oh = ih * 2 - 1 + kh, ow = iw * 2 - 1 + kw, m = (ci / 2) * 3 + mo;
              if (oh < 0 || oh >= 6 || ow < 0 || ow >= 6) continue;
              want[static_cast<size_t>((m * 6 + oh) * 6 + ow)] +=
                  double(x[static_cast<size_t>((ci * 3 + ih) * 3 + iw)]) *
                  w[static_cast<size_t>(((ci * 3 + mo) * 3 + kh) * 3 + kw)];
            }
  ExpectNear(Execute(c, {x})[0], want);
}

TEST(OpsNn, NonConstantWeightsAreUnsupported) {
  GraphBuilder b;
  b.Input("x", {1, 2, 4, 4});
  b.Input("w", {2, 2, 1, 1});
  b.Out("y", {1, 2, 4, 4});
  b.N("Conv", {"x", "w"}, {"y"}, 11);
  std::string why;
  EXPECT_FALSE(Supported(b, 0, &why));
  EXPECT_NE(why.find("constant"), std::string::npos) << why;
}

// ---- pooling -----------------------------------------------------------------------------------------------------

TEST(OpsNn, PoolingCeilModeAndPadding) {
  const Dims xd = {1, 3, 7, 6};
  const std::vector<float> x = UniformFloats(Numel(xd), 20);
  GraphBuilder b;
  b.Input("x", xd);
  // MaxPool k3 s2 ceil: H (7-3)/2 -> 3 (floor 3), W ceil((6-3)/2)+1 = 3 (floor 2).
  b.Out("mp", {1, 3, 3, 3});
  Node& mp = b.N("MaxPool", {"x"}, {"mp"}, 12);
  mp.attrs["kernel_shape"] = IntsA({3, 3});
  mp.attrs["strides"] = IntsA({2, 2});
  mp.attrs["ceil_mode"] = IntA(1);
  // AveragePool k2 s1 pads 1, count_include_pad: 8x7.
  b.Out("ap", {1, 3, 8, 7});
  Node& ap = b.N("AveragePool", {"x"}, {"ap"}, 11);
  ap.attrs["kernel_shape"] = IntsA({2, 2});
  ap.attrs["pads"] = IntsA({1, 1, 1, 1});
  ap.attrs["count_include_pad"] = IntA(1);
  b.Out("gp", {1, 3, 1, 1});
  b.N("GlobalAveragePool", {"x"}, {"gp"}, 1);
  b.Output("mp");
  b.Output("ap");
  b.Output("gp");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed), "Pool,Pool,Pool");
  std::vector<std::vector<float>> out = Execute(c, {x});
  auto at = [&](int64_t ch, int64_t h, int64_t w) { return double(x[static_cast<size_t>((ch * 7 + h) * 6 + w)]); };
  std::vector<double> mpw, apw, gpw;
  for (int64_t ch = 0; ch < 3; ++ch) {
    for (int64_t oh = 0; oh < 3; ++oh)
      for (int64_t ow = 0; ow < 3; ++ow) {
        double m = -INFINITY;
        for (int64_t h = oh * 2; h < std::min<int64_t>(oh * 2 + 3, 7); ++h)
          for (int64_t w = ow * 2; w < std::min<int64_t>(ow * 2 + 3, 6); ++w) m = std::max(m, at(ch, h, w));
        mpw.push_back(m);
      }
    for (int64_t oh = 0; oh < 8; ++oh)
      for (int64_t ow = 0; ow < 7; ++ow) {
        double s = 0;
        for (int64_t h = oh - 1; h < oh + 1; ++h)
          for (int64_t w = ow - 1; w < ow + 1; ++w)
            if (h >= 0 && h < 7 && w >= 0 && w < 6) s += at(ch, h, w);
        apw.push_back(s / 4);
      }
    double s = 0;
    for (int64_t i = 0; i < 42; ++i) s += x[static_cast<size_t>(ch * 42 + i)];
    gpw.push_back(s / 42);
  }
  ExpectNear(out[0], mpw);
  ExpectNear(out[1], apw);
  ExpectNear(out[2], gpw);
}

TEST(OpsNn, PoolingRefusals) {
  GraphBuilder b;
  b.Input("x", {1, 1, 5, 5});
  // count_include_pad with a ceil_mode window past the explicit padding: oneDNN's divisor would differ.
  b.Out("a", {1, 1, 3, 3});
  Node& a = b.N("AveragePool", {"x"}, {"a"}, 11);
  a.attrs["kernel_shape"] = IntsA({2, 2});
  a.attrs["strides"] = IntsA({2, 2});
  a.attrs["ceil_mode"] = IntA(1);
  a.attrs["count_include_pad"] = IntA(1);
  // MaxPool with Indices.
  b.Out("m", {1, 1, 4, 4});
  b.Out("i", {1, 1, 4, 4});
  b.g.v(b.g.Find("i")).dtype = kI64;
  b.N("MaxPool", {"x"}, {"m", "i"}, 12).attrs["kernel_shape"] = IntsA({2, 2});
  std::string why;
  EXPECT_FALSE(Supported(b, 0, &why));
  EXPECT_FALSE(Supported(b, 1, &why));
}

// ---- resize ------------------------------------------------------------------------------------------------------

TEST(OpsNn, ResizeSupportFollowsOnnxRounding) {
  GraphBuilder b;
  b.Input("x", {1, 2, 4, 6});
  b.F32("up2", {4}, {1, 1, 2, 2});
  b.F32("down", {4}, {1, 1, 0.6f, 0.6f});
  b.Out("y0", {1, 2, 8, 12});
  b.N("Resize", {"x", "", "up2"}, {"y0"}, 13);  // nearest, half_pixel, round_prefer_floor: no ties at 2x
  b.Out("y1", {1, 2, 8, 12});
  b.N("Resize", {"x", "", "up2"}, {"y1"}, 13).attrs["mode"] = StrA("linear");
  b.Out("y2", {1, 2, 2, 3});
  b.N("Resize", {"x", "", "down"}, {"y2"}, 13);  // scale 0.6 is not out/in: ONNX maps with 0.6
  b.Out("y3", {1, 2, 8, 12});
  Node& ac = b.N("Resize", {"x", "", "up2"}, {"y3"}, 13);
  ac.attrs["mode"] = StrA("linear");
  ac.attrs["coordinate_transformation_mode"] = StrA("align_corners");
  b.I64("sz", {1, 2, 7, 6});
  b.Out("y4", {1, 2, 7, 6});
  b.N("Resize", {"x", "", "", "sz"}, {"y4"}, 13);  // 4 -> 7 at half_pixel hits an exact .5: floor vs oneDNN's round
  b.Out("y5", {1, 2, 8, 12});
  Node& asym = b.N("Resize", {"x", "", "up2"}, {"y5"}, 13);
  asym.attrs["coordinate_transformation_mode"] = StrA("asymmetric");
  asym.attrs["nearest_mode"] = StrA("floor");  // floor(y/2) equals oneDNN's mapping at 2x
  std::string why;
  EXPECT_TRUE(Supported(b, 0, &why)) << why;
  EXPECT_TRUE(Supported(b, 1, &why)) << why;
  EXPECT_FALSE(Supported(b, 2, &why));
  EXPECT_FALSE(Supported(b, 3, &why));
  EXPECT_FALSE(Supported(b, 4, &why));
  EXPECT_TRUE(Supported(b, 5, &why)) << why;
}

TEST(OpsNn, ResizeNearestAndLinear) {
  const Dims xd = {1, 2, 3, 4};
  const std::vector<float> x = UniformFloats(Numel(xd), 30);
  GraphBuilder b;
  b.Input("x", xd);
  b.F32("sc", {4}, {1, 1, 2, 2});
  b.Out("n", {1, 2, 6, 8});
  b.N("Resize", {"x", "", "sc"}, {"n"}, 13);
  b.Out("l", {1, 2, 6, 8});
  b.N("Resize", {"x", "", "sc"}, {"l"}, 13).attrs["mode"] = StrA("linear");
  b.Output("n");
  b.Output("l");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  // Nearest is oneDNN's resampling; linear over H and W is our kBilinear (ONNX Runtime's summation order).
  EXPECT_EQ(Kinds(c.parsed), "Resample,Bilinear");
  std::vector<std::vector<float>> out = Execute(c, {x});
  std::vector<double> nw, lw;
  auto src = [&](int64_t ch, int64_t h, int64_t w) { return double(x[static_cast<size_t>((ch * 3 + h) * 4 + w)]); };
  auto coord = [](int64_t o, int64_t in) { return std::min(std::max((o + 0.5) / 2 - 0.5, 0.0), double(in - 1)); };
  for (int64_t ch = 0; ch < 2; ++ch)
    for (int64_t oh = 0; oh < 6; ++oh)
      for (int64_t ow = 0; ow < 8; ++ow) {
        nw.push_back(src(ch, oh / 2, ow / 2));  // half_pixel at 2x never ties
        const double h = coord(oh, 3), w = coord(ow, 4);
        const int64_t h0 = static_cast<int64_t>(h), w0 = static_cast<int64_t>(w);
        const int64_t h1 = std::min<int64_t>(h0 + 1, 2), w1 = std::min<int64_t>(w0 + 1, 3);
        const double th = h - h0, tw = w - w0;
        lw.push_back((src(ch, h0, w0) * (1 - tw) + src(ch, h0, w1) * tw) * (1 - th) +
                     (src(ch, h1, w0) * (1 - tw) + src(ch, h1, w1) * tw) * th);
      }
  ExpectNear(out[0], nw);
  ExpectNear(out[1], lw);
  // Bit for bit ONNX Runtime's floats: product weights, one rounding per operation (volatile), left to right.
  size_t k = 0;
  for (int64_t ch = 0; ch < 2; ++ch)
    for (int64_t oh = 0; oh < 6; ++oh)
      for (int64_t ow = 0; ow < 8; ++ow, ++k) {
        auto axis = [](int64_t o, int64_t in, int64_t* c1, int64_t* c2, float* d1, float* d2) {
          const float c = std::min(std::max((static_cast<float>(o) + 0.5f) / 2.0f - 0.5f, 0.0f), float(in - 1));
          *c1 = static_cast<int64_t>(c);
          *c2 = std::min(*c1 + 1, in - 1);
          *d1 = *c1 == *c2 ? 0.5f : std::fabs(c - float(*c1));
          *d2 = *c1 == *c2 ? 0.5f : std::fabs(c - float(*c2));
        };
        int64_t h1, h2, w1, w2;
        float dh1, dh2, dw1, dw2;
        axis(oh, 3, &h1, &h2, &dh1, &dh2);
        axis(ow, 4, &w1, &w2, &dw1, &dw2);
        auto at = [&](int64_t h, int64_t w) { return x[static_cast<size_t>((ch * 3 + h) * 4 + w)]; };
        volatile float p1 = dw2 * dh2, p2 = dw1 * dh2, p3 = dw2 * dh1, p4 = dw1 * dh1;
        volatile float a = p1 * at(h1, w1), bb = p2 * at(h1, w2), cc = p3 * at(h2, w1), d = p4 * at(h2, w2);
        volatile float ab = a + bb;
        volatile float abc = ab + cc;
        const float want = abc + d;
        EXPECT_EQ(out[1][k], want) << ch << " " << oh << " " << ow;
      }
}

// ONNX Runtime's bilinear floats for an nchw `x` (half_pixel): product weights, one rounding per operation
// (volatile), summed left to right.
std::vector<float> BilinearReference(const std::vector<float>& x, int64_t c, int64_t h, int64_t w, int64_t oh,
                                     int64_t ow, float sh, float sw) {
  auto axis = [](int64_t o, int64_t in, float scale, int64_t* c1, int64_t* c2, float* d1, float* d2) {
    const float v = std::min(std::max((static_cast<float>(o) + 0.5f) / scale - 0.5f, 0.0f), float(in - 1));
    *c1 = static_cast<int64_t>(v);
    *c2 = std::min(*c1 + 1, in - 1);
    *d1 = *c1 == *c2 ? 0.5f : std::fabs(v - float(*c1));
    *d2 = *c1 == *c2 ? 0.5f : std::fabs(v - float(*c2));
  };
  std::vector<float> y;
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        int64_t h1, h2, w1, w2;
        float dh1, dh2, dw1, dw2;
        axis(i, h, sh, &h1, &h2, &dh1, &dh2);
        axis(j, w, sw, &w1, &w2, &dw1, &dw2);
        auto at = [&](int64_t r, int64_t q) { return x[static_cast<size_t>((ch * h + r) * w + q)]; };
        volatile float p1 = dw2 * dh2, p2 = dw1 * dh2, p3 = dw2 * dh1, p4 = dw1 * dh1;
        volatile float a = p1 * at(h1, w1), bb = p2 * at(h1, w2), cc = p3 * at(h2, w1), d = p4 * at(h2, w2);
        volatile float ab = a + bb;
        volatile float abc = ab + cc;
        y.push_back(abc + d);
      }
  return y;
}

// kBilinear reads a Conv's output in a channels-last layout (a blocked one is reordered to nhwc, not to plain), so
// each pixel's channels are one vector; a plain source is swept plane by plane. Both give ONNX Runtime's floats.
TEST(OpsNn, BilinearKeepsChannelsLastAndPlainSourcesExact) {
  const int64_t c = 16, h = 5, w = 6;
  const Dims xd = {1, 3, h, w};
  const std::vector<float> x = UniformFloats(Numel(xd), 31), wt = UniformFloats(c * 3, 32);
  for (bool conv_first : {true, false}) {
    GraphBuilder b;
    b.Input("x", conv_first ? xd : Dims{1, c, h, w});
    b.F32("w", {c, 3, 1, 1}, wt);
    b.F32("sc", {4}, {1, 1, 2, 1.5f});
    b.Out("l", {1, c, 2 * h, 9});
    if (conv_first) {
      b.Out("c", {1, c, h, w});
      b.N("Conv", {"x", "w"}, {"c"}, 11);
      b.Output("c");
    }
    b.N("Resize", {conv_first ? "c" : "x", "", "sc"}, {"l"}, 13).attrs["mode"] = StrA("linear");
    b.Output("l");
    Compiled comp;
    ASSERT_TRUE(Compile(b, &comp));
    const Step* bil = nullptr;
    for (const Step& st : comp.parsed.steps)
      if (st.kind == StepKind::kBilinear) bil = &st;
    ASSERT_NE(bil, nullptr);
    const Operand& src = bil->ops[0];
    // The Conv's output is read channels-last (channel stride 1); the graph input is read plain.
    ASSERT_EQ(src.tag, 0u);
    if (conv_first) {
      ASSERT_EQ(src.strides.size(), 4u);
      EXPECT_EQ(src.strides[1], 1);
    } else {
      EXPECT_TRUE(src.strides.empty() || src.strides[3] == 1);
    }
    const std::vector<float> in = conv_first ? x : UniformFloats(c * h * w, 33);
    std::vector<std::vector<float>> out = Execute(comp, {in});
    const std::vector<float>& plane = conv_first ? out[0] : in;
    const std::vector<float> want = BilinearReference(plane, c, h, w, 2 * h, 9, 2.0f, 1.5f);
    const std::vector<float>& got = out.back();
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) ASSERT_EQ(got[k], want[k]) << (conv_first ? "conv" : "plain") << " " << k;
  }
}

// ---- gemm --------------------------------------------------------------------------------------------------------

TEST(OpsNn, GemmConstantWeightsIsInnerProduct) {
  const std::vector<float> a = UniformFloats(3 * 5, 40), bt = UniformFloats(4 * 5, 41), c = UniformFloats(4, 42);
  GraphBuilder b;
  b.Input("a", {3, 5});
  b.F32("b", {4, 5}, bt);
  b.F32("c", {4}, c);
  b.Out("y", {3, 4});
  Node& n = b.N("Gemm", {"a", "b", "c"}, {"y"}, 13);
  n.attrs["transB"] = IntA(1);
  n.attrs["alpha"] = FloatA(0.5f);
  n.attrs["beta"] = FloatA(2.f);
  b.Output("y");
  Compiled comp;
  ASSERT_TRUE(Compile(b, &comp));
  // The step depends on the ISA oneDNN runs at: the lowering takes an inner product only where oneDNN has a direct
  // kernel for it at every thread count. At avx512_core and above it has one for this [3, 5] x [5, 4] product; at
  // avx2 (a real AVX2 machine, or ONEDNN_MAX_CPU_ISA=AVX2) only the gemm-based one, so the same Gemm is a matmul
  // step (brgemm/gemm). The values below are checked either way.
  Isa isa = Isa::kSse41;
  ASSERT_TRUE(IsaFromOneDnn(static_cast<unsigned>(dnnl::get_effective_cpu_isa()), &isa));
  const bool avx512 = IsaRank(isa) >= IsaRank(Isa::kAvx512Core);
  EXPECT_EQ(Kinds(comp.parsed), avx512 ? "InnerProduct" : "MatMul") << "effective ISA avx512_core or above: " << avx512;
  std::vector<double> want;
  for (int m = 0; m < 3; ++m)
    for (int j = 0; j < 4; ++j) {
      double s = 0;
      for (int k = 0; k < 5; ++k) s += double(a[m * 5 + k]) * bt[j * 5 + k];
      want.push_back(0.5 * s + 2.0 * c[j]);
    }
  ExpectNear(Execute(comp, {a})[0], want);
}

// ---- hostile steps -----------------------------------------------------------------------------------------------

// Compiles a one-conv graph, then each mutation of its step must make Executor::Create fail (not crash).
TEST(OpsNn, BuildersRejectHostileSteps) {
  GraphBuilder b;
  b.Input("x", {1, 4, 6, 6});
  b.F32("w", {8, 4, 3, 3}, UniformFloats(8 * 4 * 9, 50));
  b.F32("bias", {8}, UniformFloats(8, 51));
  b.Out("y", {1, 8, 6, 6});
  b.N("Conv", {"x", "w", "bias"}, {"y"}, 11).attrs["pads"] = IntsA({1, 1, 1, 1});
  b.Out("p", {1, 8, 3, 3});
  Node& p = b.N("MaxPool", {"y"}, {"p"}, 12);
  p.attrs["kernel_shape"] = IntsA({2, 2});
  p.attrs["strides"] = IntsA({2, 2});
  b.Output("p");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  size_t conv = 0, pool = 0;
  for (size_t i = 0; i < c.parsed.steps.size(); ++i) {
    if (c.parsed.steps[i].kind == StepKind::kConv) conv = i;
    if (c.parsed.steps[i].kind == StepKind::kPool) pool = i;
  }
  auto expect_fail = [&](const char* what, const std::function<void(Program*)>& mutate) {
    Program bad = c.parsed;
    mutate(&bad);
    std::vector<WeightRef> w;
    for (const TensorInput& t : c.cg.weights) w.push_back({t.bytes.data(), t.bytes.size()});
    std::unique_ptr<Executor> exec;
    CheckResult r = Executor::Create(std::move(bad), std::move(w), 1, &exec);
    EXPECT_FALSE(r.ok) << what;
    EXPECT_FALSE(r.reason.empty()) << what;
  };
  expect_fail("conv: no ints", [&](Program* q) { q->steps[conv].ints.clear(); });
  expect_fail("conv: spatial rank 4", [&](Program* q) { q->steps[conv].ints[1] = 4; });
  expect_fail("conv: ints count", [&](Program* q) { q->steps[conv].ints.push_back(0); });
  expect_fail("conv: stride 0", [&](Program* q) { q->steps[conv].ints[2] = 0; });
  expect_fail("conv: negative pad", [&](Program* q) { q->steps[conv].ints[6] = -1; });
  expect_fail("conv: groups 0", [&](Program* q) { q->steps[conv].ints[0] = 0; });
  expect_fail("conv: groups 2", [&](Program* q) { q->steps[conv].ints[0] = 2; });
  expect_fail("conv: pad changes the output size", [&](Program* q) { q->steps[conv].ints[8] = 3; });
  expect_fail("conv: missing dst", [&](Program* q) { q->steps[conv].ops.resize(3); });
  expect_fail("conv: stray operand", [&](Program* q) { q->steps[conv].ops.push_back(q->steps[conv].ops[0]); });
  expect_fail("conv: weights of other dims", [&](Program* q) {
    Operand& w = q->steps[conv].ops[1];
    w.tag = 0;
    w.dims = {8, 4, 2, 2};
    w.strides = {16, 4, 2, 1};
  });
  expect_fail("conv: bias too long", [&](Program* q) {
    Operand& bo = q->steps[conv].ops[2];
    bo.tag = 0;
    bo.dims = {9};
    bo.strides = {1};
  });
  expect_fail("conv: binary post-op on src", [&](Program* q) {
    PostOp po;
    po.kind = PostOp::kBinary;
    po.alg = dnnl_binary_add;
    po.operand = 0;
    q->steps[conv].post_ops.push_back(po);
  });
  // Strides that overlap (a row of 6 at stride 2 runs into the next row): footprint 149 elements, while oneDNN's
  // size, max(dims[k] * strides[k]), is the input's 144. oneDNN refuses such strides itself.
  expect_fail("input view with overlapping strides", [&](Program* q) {
    for (Step& st : q->steps)
      for (Operand& o : st.ops)
        if (o.buf == Buf::kInput) {
          o.tag = 0;
          o.dims = {1, 4, 6, 6};
          o.strides = {144, 36, 6, 2};
          return;
        }
    ADD_FAILURE() << "no step reads the input";
  });
  expect_fail("pool: unknown alg", [&](Program* q) { q->steps[pool].ints[0] = 12345; });
  expect_fail("pool: kernel 0", [&](Program* q) { q->steps[pool].ints[2] = 0; });
  expect_fail("pool: floats", [&](Program* q) { q->steps[pool].floats.push_back(1.f); });
  expect_fail("pool: post-op", [&](Program* q) { q->steps[pool].post_ops.push_back(PostOp()); });
  expect_fail("pool: kernel larger than input", [&](Program* q) {
    q->steps[pool].ints[2] = 100;
    q->steps[pool].ints[3] = 100;
  });
  expect_fail("pool as resample", [&](Program* q) { q->steps[pool].kind = StepKind::kResample; });
  expect_fail("pool as batch norm", [&](Program* q) { q->steps[pool].kind = StepKind::kBatchNorm; });
  expect_fail("conv as inner product", [&](Program* q) {
    q->steps[conv].kind = StepKind::kInnerProduct;
    q->steps[conv].ints.clear();
  });
}

// A lifted 1-D depthwise step (4-D views of 3-D values) damaged in the ways a file could: each must make
// Executor::Create fail with a message naming the step, never crash or run.
TEST(OpsNn, BuildersRejectDamagedLiftedConv) {
  Dw1dGraph t;
  BuildDw1d({32, 24, 5, 1, 1, 2, true, true}, &t);
  Compiled c;
  ASSERT_TRUE(Compile(t.b, &c));
  size_t dw = c.parsed.steps.size();
  for (size_t i = 0; i < c.parsed.steps.size(); ++i)
    if (c.parsed.steps[i].kind == StepKind::kConv && c.parsed.steps[i].ints[0] == 32) dw = i;
  ASSERT_LT(dw, c.parsed.steps.size());
  ASSERT_EQ(c.parsed.steps[dw].ops.size(), 5u);
  auto expect_fail = [&](const char* what, const std::function<void(Step*)>& mutate) {
    Program bad = c.parsed;
    mutate(&bad.steps[dw]);
    std::vector<WeightRef> w;
    for (const TensorInput& x : c.cg.weights) w.push_back({x.bytes.data(), x.bytes.size()});
    std::unique_ptr<Executor> exec;
    CheckResult r = Executor::Create(std::move(bad), std::move(w), 1, &exec);
    EXPECT_FALSE(r.ok) << what;
    EXPECT_NE(r.reason.find("step " + std::to_string(dw)), std::string::npos) << what << ": " << r.reason;
  };
  // A 3-D operand (plain, fitting the bytes) with the 2-D parameters: the ranks disagree.
  auto drop_h = [](Operand* o) {
    o->dims.erase(o->dims.begin() + 2);
    o->tag = 0;
    o->strides = {o->dims[1] * o->dims[2], o->dims[2], 1};
  };
  expect_fail("src without H", [&](Step* s) { drop_h(&s->ops[0]); });
  expect_fail("dst without H", [&](Step* s) { drop_h(&s->ops[3]); });
  expect_fail("residual without H", [&](Step* s) { drop_h(&s->ops[4]); });
  expect_fail("weights without H", [&](Step* s) {
    Operand& w = s->ops[1];
    w.tag = 0;
    w.dims = {32, 1, 1, 5};
    w.strides = {5, 5, 5, 1};
  });
  expect_fail("spatial rank 1 with 4-D operands", [&](Step* s) {
    s->ints = {s->ints[0], 1, s->ints[3], s->ints[5], s->ints[7], s->ints[9]};
  });
  expect_fail("src with H 2", [&](Step* s) { s->ops[0].dims[2] = 2; });
  expect_fail("dst with H 2", [&](Step* s) { s->ops[3].dims[2] = 2; });
  expect_fail("residual with H 2", [&](Step* s) { s->ops[4].dims[2] = 2; });
  expect_fail("H pads 1", [&](Step* s) {
    s->ints[6] = 1;
    s->ints[8] = 1;
  });
  expect_fail("W pads change the output size", [&](Step* s) { s->ints[9] = 5; });
  expect_fail("src with 8 times the width", [&](Step* s) { s->ops[0].dims[3] *= 8; });
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
