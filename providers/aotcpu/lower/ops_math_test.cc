// The math family (math_*.cc) on small hand-built graphs: each is compiled (CompileGraph), serialized and parsed
// back, run by the Executor and compared with a float64 reference; the step lists check what was fused (bias, GELU,
// scale + mask, residual) and what was not. Also erf's accuracy against the correctly rounded value over a sweep of
// floats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "providers/aotcpu/capability/capability.h"
#include "providers/aotcpu/ir/test_graph.h"
#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {
namespace {

using namespace test_graph;  // GraphBuilder, Dims, Numel, IntA, FloatA, IntsA, StrA

std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

struct Compiled {
  CompiledGraph cg;
  Program parsed;  // the program after a SerializeProgram/ParseProgram round trip
  std::unique_ptr<Executor> exec;
};

// Every node of the graph must be supported; compiles, round-trips the program and builds an executor.
::testing::AssertionResult Compile(const GraphBuilder& b, Compiled* c, bool portable = false,
                                   const std::string& isa = "") {
  for (const Node& n : b.g.nodes) {
    std::string why;
    if (!IsNodeSupported(b.g, n, &why)) return ::testing::AssertionFailure() << n.name << " unsupported: " << why;
  }
  std::vector<std::string> ins, outs;
  for (int v : b.g.inputs) ins.push_back(b.g.v(v).name);
  for (int v : b.g.outputs) outs.push_back(b.g.v(v).name);
  CompileOptions options;
  options.portable_layouts = portable;
  options.isa = isa;
  CheckResult r = CompileGraph(b.g, ins, outs, options, &c->cg);
  if (!r.ok) return ::testing::AssertionFailure() << "compile: " << r.reason;
  std::string records = SerializeProgram(c->cg.program);
  r = ParseProgram(records, static_cast<uint32_t>(c->cg.weights.size()), &c->parsed);
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

std::string Kinds(const Program& p) {
  std::string s;
  for (const Step& st : p.steps) {
    s += (s.empty() ? "" : ",") + std::string(StepKindName(static_cast<uint32_t>(st.kind)));
    if (!st.post_ops.empty()) s += "(" + std::to_string(st.post_ops.size()) + ")";
  }
  return s;
}

// The step kind a MatMul by constant 2-D weights compiles to: "Conv" (oneDNN's jit 1x1 convolution over an nhwc
// view) where this host's oneDNN has that kernel, else "MatMul".
std::string ConstMatMulKind() {
  static const std::string kind = [] {
    try {
      dnnl::engine eng(dnnl::engine::kind::cpu, 0);
      const dnnl::memory::desc src({1, 16, 4, 1}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::acdb);
      const dnnl::memory::desc w({8, 16, 1, 1}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
      const dnnl::memory::desc dst({1, 8, 4, 1}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::acdb);
      const std::string impl =
          dnnl::convolution_forward::primitive_desc(
              dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                              dnnl::algorithm::convolution_direct, src, w, dst, {1, 1}, {0, 0},
                                              {0, 0}),
              eng)
              .impl_info_str();
      return std::string(impl.rfind("jit", 0) == 0 ? "Conv" : "MatMul");
    } catch (const dnnl::error&) {
      return std::string("MatMul");
    }
  }();
  return kind;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-4) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
}

// Row-major reference matmul with numpy batch broadcasting over rank-equal [.., M, K] x [.., K, N].
std::vector<double> RefMatMul(const std::vector<float>& a, Dims ad, const std::vector<float>& b, Dims bd) {
  const size_t r = std::max(ad.size(), bd.size());
  while (ad.size() < r) ad.insert(ad.begin(), 1);
  while (bd.size() < r) bd.insert(bd.begin(), 1);
  const int64_t M = ad[r - 2], K = ad[r - 1], N = bd[r - 1];
  Dims cb(r - 2);
  for (size_t i = 0; i + 2 < r; ++i) cb[i] = std::max(ad[i], bd[i]);
  const int64_t batches = Numel(cb);
  std::vector<double> out(static_cast<size_t>(batches * M * N));
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t rem = bi, aoff = 0, boff = 0, astr = M * K, bstr = K * N;
    for (size_t i = r - 2; i-- > 0;) {
      int64_t idx = rem % cb[i];
      rem /= cb[i];
      aoff += (ad[i] == 1 ? 0 : idx) * astr;
      boff += (bd[i] == 1 ? 0 : idx) * bstr;
      astr *= ad[i];
      bstr *= bd[i];
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += double(a[aoff + m * K + k]) * b[boff + k * N + n];
        out[static_cast<size_t>((bi * M + m) * N + n)] = s;
      }
  }
  return out;
}

double Gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

// ---- tests ------------------------------------------------------------------------------------------------------

TEST(OpsMath, ErfIsCorrectlyRoundedWithinOneUlp) {
  std::vector<float> xs;
  for (float x = 0; x < 5.f; x = std::nextafter(x, 10.f) + x * 1e-5f) {
    xs.push_back(x);
    xs.push_back(-x);
  }
  xs.push_back(INFINITY);
  xs.push_back(-INFINITY);
  xs.push_back(1e-40f);
  xs.push_back(30.f);
  GraphBuilder b;
  const Dims d = {static_cast<int64_t>(xs.size())};
  b.Input("x", d);
  b.Out("y", d);
  b.N("Erf", {"x"}, {"y"}, 13);
  b.Output("y");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed), "Erf");
  std::vector<float> y = Execute(c, {xs})[0];
  int off_by_one = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    float want = static_cast<float>(std::erf(static_cast<double>(xs[i])));
    if (y[i] == want) continue;
    ASSERT_TRUE(y[i] == std::nextafter(want, 2.f) || y[i] == std::nextafter(want, -2.f))
        << "erf(" << xs[i] << ") = " << y[i] << ", want " << want;
    ++off_by_one;
  }
  EXPECT_LT(off_by_one, static_cast<int>(xs.size() / 1000));
  // NaN propagates.
  GraphBuilder nb;
  nb.Input("x", {2});
  nb.Out("y", {2});
  nb.N("Erf", {"x"}, {"y"}, 13);
  nb.Output("y");
  Compiled nc;
  ASSERT_TRUE(Compile(nb, &nc));
  std::vector<float> ny = Execute(nc, {{NAN, 0.5f}})[0];
  EXPECT_TRUE(std::isnan(ny[0]));
}

// Below avx512_core Tanh is our own loop (OwnTanh: oneDNN 2.6's tanh there gathers its table), alone and after a
// MatMul (not a post-op); at avx512_core it stays oneDNN's eltwise / post-op. Values against double tanh.
TEST(OpsMath, TanhBelowAvx512IsOurOwnLoop) {
  std::vector<float> xs;
  for (float x = 0; x < 12.f; x += 0.0137f) {
    xs.push_back(x);
    xs.push_back(-x);
  }
  for (float x : {INFINITY, -INFINITY, 1e-40f, -1e-30f, 0.624999f, 0.625f, 44.f, -90.f}) xs.push_back(x);
  const Dims d = {static_cast<int64_t>(xs.size())};
  for (const char* isa : {"avx2", "avx512_core"}) {
    GraphBuilder b;
    b.Input("x", d);
    b.Out("y", d);
    b.N("Tanh", {"x"}, {"y"}, 13);
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c, false, isa));
    EXPECT_EQ(Kinds(c.parsed), std::string(isa) == "avx2" ? "Erf" : "Eltwise") << isa;
    std::vector<float> y = Execute(c, {xs})[0];
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = std::tanh(static_cast<double>(xs[i]));
      ASSERT_NEAR(y[i], want, 3e-7 * std::max(1.0, std::fabs(want))) << isa << " tanh(" << xs[i] << ")";
    }
  }
  // NaN propagates through our loop.
  GraphBuilder nb;
  nb.Input("x", {2});
  nb.Out("y", {2});
  nb.N("Tanh", {"x"}, {"y"}, 13);
  nb.Output("y");
  Compiled nc;
  ASSERT_TRUE(Compile(nb, &nc, false, "avx2"));
  EXPECT_TRUE(std::isnan(Execute(nc, {{NAN, 0.5f}})[0][0]));
  // After a MatMul: a post-op at avx512_core, a step of its own at avx2; the same values.
  std::vector<std::vector<float>> results;
  for (const char* isa : {"avx2", "avx512_core"}) {
    GraphBuilder b;
    b.Input("a", {4, 8});
    b.Input("w", {8, 5});
    b.Out("m", {4, 5});
    b.Out("y", {4, 5});
    b.N("MatMul", {"a", "w"}, {"m"}, 13);
    b.N("Tanh", {"m"}, {"y"}, 13);
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c, false, isa));
    EXPECT_EQ(Kinds(c.parsed), std::string(isa) == "avx2" ? "MatMul,Erf" : "MatMul(1)") << isa;  // (1): one post-op
    std::vector<float> a(32), w(40);
    for (size_t i = 0; i < a.size(); ++i) a[i] = 0.3f * std::sin(0.7f * static_cast<float>(i));
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * std::cos(0.3f * static_cast<float>(i));
    results.push_back(Execute(c, {a, w})[0]);
  }
  for (size_t i = 0; i < results[0].size(); ++i) EXPECT_NEAR(results[0][i], results[1][i], 1e-6f) << i;
}

// MatMul + bias + GELU (all three spellings) is one matmul step with one eltwise post-op.
TEST(OpsMath, MatMulBiasGeluIsOneStep) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    const int64_t M = 5, K = 16, N = 24;
    GraphBuilder b;
    std::vector<float> x = Random(2 * M * K, 1), w = Random(K * N, 2, 0.3f), bias = Random(N, 3);
    b.Input("x", {2, M, K});
    b.F32("w", {K, N}, w);
    b.F32("bias", {N}, bias);
    b.F32("sqrt2", {}, {std::sqrt(2.f)});
    b.F32("inv_sqrt2", {}, {1.f / std::sqrt(2.f)});
    b.F32("one", {}, {1.f});
    b.F32("half", {}, {0.5f});
    const Dims d = {2, M, N};
    for (const char* v : {"mm", "f", "t", "e", "a", "m", "y"}) b.Out(v, d);
    b.N("MatMul", {"x", "w"}, {"mm"});
    b.N("Add", {"mm", "bias"}, {"f"});
    if (variant == 0) {  // x * (1 + erf(x / sqrt2)) * 0.5
      b.N("Div", {"f", "sqrt2"}, {"t"});
      b.N("Erf", {"t"}, {"e"});
      b.N("Add", {"e", "one"}, {"a"});
      b.N("Mul", {"f", "a"}, {"m"});
      b.N("Mul", {"m", "half"}, {"y"});
    } else if (variant == 1) {  // (x * 0.5) * (1 + erf(x * (1/sqrt2)))
      b.N("Mul", {"f", "half"}, {"m"});
      b.N("Mul", {"inv_sqrt2", "f"}, {"t"});
      b.N("Erf", {"t"}, {"e"});
      b.N("Add", {"one", "e"}, {"a"});
      b.N("Mul", {"m", "a"}, {"y"});
    } else {  // x * ((1 + erf(x / sqrt2)) * 0.5)
      b.N("Div", {"f", "sqrt2"}, {"t"});
      b.N("Erf", {"t"}, {"e"});
      b.N("Add", {"e", "one"}, {"a"});
      b.N("Mul", {"a", "half"}, {"m"});
      b.N("Mul", {"f", "m"}, {"y"});
    }
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    EXPECT_EQ(Kinds(c.parsed), ConstMatMulKind() + "(1)");
    std::vector<double> want = RefMatMul(x, {2, M, K}, w, {K, N});
    for (size_t i = 0; i < want.size(); ++i) want[i] = Gelu(want[i] + bias[i % N]);
    ExpectNear(Execute(c, {x})[0], want);
  }
}

// The GELU on a non-MatMul producer is one eltwise step; a lone Erf stays an Erf step.
TEST(OpsMath, StandaloneGeluAndErf) {
  GraphBuilder b;
  const Dims d = {3, 7};
  std::vector<float> x = Random(21, 4, 2.f);
  b.Input("x", d);
  b.F32("sqrt2", {1}, {1.41421356f});
  b.F32("one", {}, {1.f});
  b.F32("half", {}, {0.5f});
  for (const char* v : {"r", "t", "e", "a", "m", "y", "e2"}) b.Out(v, d);
  b.N("Relu", {"x"}, {"r"});
  b.N("Div", {"r", "sqrt2"}, {"t"});
  b.N("Erf", {"t"}, {"e"});
  b.N("Add", {"e", "one"}, {"a"});
  b.N("Mul", {"r", "a"}, {"m"});
  b.N("Mul", {"m", "half"}, {"y"});
  b.N("Erf", {"x"}, {"e2"});
  b.Output("y");
  b.Output("e2");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed), "Eltwise,Eltwise,Erf");
  auto out = Execute(c, {x});
  std::vector<double> want(21), want_e(21);
  for (size_t i = 0; i < 21; ++i) {
    want[i] = Gelu(std::max(0.f, x[i]));
    want_e[i] = std::erf(double(x[i]));
  }
  ExpectNear(out[0], want);
  ExpectNear(out[1], want_e, 1e-6);
}

// Attention scores: Q.K^T, scale and mask as post-ops, then softmax; then P.V.
TEST(OpsMath, AttentionScaleMaskFusion) {
  const int64_t H = 2, S = 5, D = 8;
  GraphBuilder b;
  std::vector<float> q = Random(H * S * D, 5), kt = Random(H * D * S, 6), v = Random(H * S * D, 7);
  std::vector<float> mask(S * S);
  for (int64_t i = 0; i < S; ++i)
    for (int64_t j = 0; j < S; ++j) mask[i * S + j] = j > i ? -1e9f : 0.f;
  b.Input("q", {1, H, S, D});
  b.Input("kt", {1, H, D, S});
  b.Input("v", {1, H, S, D});
  b.F32("scale", {}, {0.35355339f});
  b.F32("mask", {S, S}, mask);
  for (const char* n : {"s", "ss", "sm", "p"}) b.Out(n, {1, H, S, S});
  b.Out("o", {1, H, S, D});
  b.N("MatMul", {"q", "kt"}, {"s"});
  b.N("Mul", {"s", "scale"}, {"ss"});
  b.N("Add", {"ss", "mask"}, {"sm"});
  b.N("Softmax", {"sm"}, {"p"}).attrs["axis"] = IntA(-1);
  b.N("MatMul", {"p", "v"}, {"o"});
  b.Output("o");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  // The scale stays a post-op; the mask Add and the Softmax become one step.
  EXPECT_EQ(Kinds(c.parsed), "MatMul(1),MaskedSoftmax,MatMul");
  std::vector<double> s = RefMatMul(q, {1, H, S, D}, kt, {1, H, D, S});
  std::vector<float> p(s.size());
  for (int64_t r = 0; r < H * S; ++r) {
    double mx = -1e30, sum = 0;
    std::vector<double> row(S);
    for (int64_t j = 0; j < S; ++j) {
      row[j] = s[r * S + j] * 0.35355339 + mask[(r % S) * S + j];
      mx = std::max(mx, row[j]);
    }
    for (int64_t j = 0; j < S; ++j) sum += row[j] = std::exp(row[j] - mx);
    for (int64_t j = 0; j < S; ++j) p[r * S + j] = static_cast<float>(row[j] / sum);
  }
  ExpectNear(Execute(c, {q, kt, v})[0], RefMatMul(p, {1, H, S, S}, v, {1, H, S, D}));
}


// Reference softmax(x + mask) over the last dim, mask broadcast per numpy rules (mask padded to x's rank).
std::vector<double> RefMaskedSoftmax(const std::vector<float>& x, const Dims& xd, const std::vector<float>& m, Dims md) {
  while (md.size() < xd.size()) md.insert(md.begin(), 1);
  const int64_t cols = xd.back(), rows = Numel(xd) / cols;
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, mrow = 0, stride = 1;
    for (size_t k = xd.size() - 1; k-- > 0;) {
      mrow += (md[k] == 1 ? 0 : rest % xd[k]) * stride;
      rest /= xd[k];
      stride *= md[k];
    }
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, double(x[r * cols + j]) + m[mrow * cols + j]);
    for (int64_t j = 0; j < cols; ++j) sum += out[r * cols + j] = std::exp(double(x[r * cols + j]) + m[mrow * cols + j] - mx);
    for (int64_t j = 0; j < cols; ++j) out[r * cols + j] /= sum;
  }
  return out;
}

// MaskedSoftmax against the unfused reference: masks broadcast over heads or rows, either Add operand order, -inf and
// large negative mask entries, rows longer than a vector (tails), and scores far from 0 (exp range reduction).
TEST(OpsMath, MaskedSoftmaxMatchesUnfusedReference) {
  struct Case {
    Dims x, mask;
    bool mask_first;
    float scale;
  };
  for (const Case& k : {Case{{1, 2, 5, 5}, {5, 5}, false, 1.f}, Case{{2, 3, 4, 37}, {3, 1, 37}, true, 30.f},
                        Case{{3, 130}, {1, 130}, false, 5.f}, Case{{2, 4, 16}, {2, 4, 16}, true, 0.01f},
                        Case{{7}, {7}, false, 50.f}}) {
    GraphBuilder b;
    std::vector<float> x = Random(Numel(k.x), 11, k.scale);
    std::vector<float> mask = Random(Numel(k.mask), 12, 2.f);
    for (size_t i = 0; i < mask.size(); i += 3) mask[i] = i % 2 ? -1e9f : -INFINITY;  // never a whole row
    mask[mask.size() - 1] = 0.f;
    b.Input("x", k.x);
    b.F32("mask", k.mask, mask);
    b.Out("sum", k.x);
    b.Out("p", k.x);
    if (k.mask_first) b.N("Add", {"mask", "x"}, {"sum"});
    else b.N("Add", {"x", "mask"}, {"sum"});
    b.N("Softmax", {"sum"}, {"p"}).attrs["axis"] = IntA(-1);
    b.Output("p");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    EXPECT_EQ(Kinds(c.parsed), "MaskedSoftmax") << DimsText(k.x);
    std::vector<double> want = RefMaskedSoftmax(x, k.x, mask, k.mask);
    std::vector<float> got = Execute(c, {x})[0];
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6 + 1e-5 * want[i]) << DimsText(k.x) << " element " << i;
  }
}

// Not fused: a mask that is not constant, a softmax on another axis, a sum read twice.
TEST(OpsMath, MaskedSoftmaxOnlyWhereItApplies) {
  GraphBuilder b;
  b.Input("x", {2, 3, 4});
  b.Input("live_mask", {3, 4});
  b.F32("mask", {3, 4}, Random(12, 3));
  for (const char* n : {"a", "pa", "s", "ps", "t", "pt"}) b.Out(n, {2, 3, 4});
  b.N("Add", {"x", "live_mask"}, {"a"});
  b.N("Softmax", {"a"}, {"pa"}).attrs["axis"] = IntA(-1);
  b.N("Add", {"x", "mask"}, {"s"});
  b.N("Softmax", {"s"}, {"ps"}).attrs["axis"] = IntA(1);
  b.N("Add", {"x", "mask"}, {"t"});
  b.N("Softmax", {"t"}, {"pt"}).attrs["axis"] = IntA(-1);
  for (const char* n : {"pa", "ps", "t", "pt"}) b.Output(n);
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed), "Binary,Softmax,Binary,Softmax,Binary,Softmax");
}

// Attention with head split/merge: Reshape + Transpose of Q/K/V and of the context, K transposed once more for
// Q x K^T, K and V also graph outputs through Identity (the decoder's present_key/value). The transposes become
// strided operands of the matmuls; only the two outputs are copied (one reorder each, into the output buffers).
// (`merged` is rounded to float before the reference projection: the step's input is a float tensor too.)
TEST(OpsMath, AttentionTransposesAreReadAndWrittenInPlace) {
  const int64_t S = 6, H = 2, D = 4;
  GraphBuilder b;
  std::vector<float> q = Random(S * H * D, 21), k = Random(S * H * D, 22), v = Random(S * H * D, 23);
  b.Input("q", {S, H * D});
  b.Input("k", {S, H * D});
  b.Input("v", {S, H * D});
  b.I64("shape_shd", {4}, {1, S, H, D});
  b.I64("shape_sd", {2}, {S, H * D});
  for (const char* n : {"q4", "k4", "v4"}) b.Out(n, {1, S, H, D});
  for (const char* n : {"qh", "kh", "vh", "present_k", "present_v", "ctx"}) b.Out(n, {1, H, S, D});
  b.Out("kt", {1, H, D, S});
  b.Out("scores", {1, H, S, S});
  b.Out("ctx_t", {1, S, H, D});
  b.Out("merged", {S, H * D});
  b.Out("out", {S, H * D});
  std::vector<float> w = Random(H * D * H * D, 24);
  b.F32("w", {H * D, H * D}, w);
  b.N("Reshape", {"q", "shape_shd"}, {"q4"});
  b.N("Reshape", {"k", "shape_shd"}, {"k4"});
  b.N("Reshape", {"v", "shape_shd"}, {"v4"});
  b.N("Transpose", {"q4"}, {"qh"}).attrs["perm"] = IntsA({0, 2, 1, 3});
  b.N("Transpose", {"k4"}, {"kh"}).attrs["perm"] = IntsA({0, 2, 1, 3});
  b.N("Transpose", {"v4"}, {"vh"}).attrs["perm"] = IntsA({0, 2, 1, 3});
  b.N("Identity", {"kh"}, {"present_k"});
  b.N("Identity", {"vh"}, {"present_v"});
  b.N("Transpose", {"present_k"}, {"kt"}).attrs["perm"] = IntsA({0, 1, 3, 2});
  b.N("MatMul", {"qh", "kt"}, {"scores"});
  b.N("MatMul", {"scores", "present_v"}, {"ctx"});
  b.N("Transpose", {"ctx"}, {"ctx_t"}).attrs["perm"] = IntsA({0, 2, 1, 3});
  b.N("Reshape", {"ctx_t", "shape_sd"}, {"merged"});
  b.N("MatMul", {"merged", "w"}, {"out"});  // the output projection
  for (const char* n : {"out", "present_k", "present_v"}) b.Output(n);
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed), "Reorder,Reorder,MatMul,MatMul," + ConstMatMulKind());  // the outputs are copied first, hot
  // Reference: heads split by index arithmetic.
  auto head = [&](const std::vector<float>& t, int64_t h, int64_t s, int64_t d) { return t[s * H * D + h * D + d]; };
  std::vector<double> out(S * H * D), pk(H * S * D), pv(H * S * D);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < D; ++d) {
        pk[(h * S + s) * D + d] = head(k, h, s, d);
        pv[(h * S + s) * D + d] = head(v, h, s, d);
      }
    for (int64_t i = 0; i < S; ++i)
      for (int64_t d = 0; d < D; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < S; ++j) {
          double sc = 0;
          for (int64_t e = 0; e < D; ++e) sc += double(head(q, h, i, e)) * head(k, h, j, e);
          acc += sc * head(v, h, j, d);
        }
        out[i * H * D + h * D + d] = acc;
      }
  }
  std::vector<float> merged(out.begin(), out.end());
  std::vector<std::vector<float>> got = Execute(c, {q, k, v});
  ExpectNear(got[0], RefMatMul(merged, {S, H * D}, w, {H * D, H * D}));
  ExpectNear(got[1], pk, 0);
  ExpectNear(got[2], pv, 0);
}

// Output projection + bias + residual Add (the residual is computed earlier): one step with a binary post-op.
TEST(OpsMath, ResidualAddIsBinaryPostOp) {
  const int64_t S = 4, D = 16;
  GraphBuilder b;
  std::vector<float> x = Random(S * D, 8), w = Random(D * D, 9, 0.25f), bias = Random(D, 10);
  b.Input("x", {1, S, D});
  b.F32("w", {D, D}, w);
  b.F32("bias", {D}, bias);
  for (const char* n : {"r", "mm", "o", "y"}) b.Out(n, {1, S, D});
  b.N("Relu", {"x"}, {"r"});
  b.N("MatMul", {"r", "w"}, {"mm"});
  b.N("Add", {"mm", "bias"}, {"o"});
  b.N("Add", {"r", "o"}, {"y"});
  b.Output("y");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed), "Eltwise,MatMul(1)");
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = std::max(0.f, x[i]);
  std::vector<double> want = RefMatMul(r, {1, S, D}, w, {D, D});
  for (size_t i = 0; i < want.size(); ++i) want[i] += bias[i % D] + r[i];
  ExpectNear(Execute(c, {x})[0], want);
}

// oneDNN 2.6 runs every eltwise post-op of one algorithm with the first one's parameters (issue 13, found by
// tests/difftest): PaddlePaddle's affine y = Mul(w, x), z = Add(y, b) with [1]-shaped w and b after a MatMul gave
// x * w * w. The pair becomes one linear post-op; a second LeakyRelu with another alpha is a step of its own; a
// Clip with only a max gets the float range as its min (a finite parameter: the program round trip accepts it).
TEST(OpsMath, RepeatedEltwisePostOps) {
  const int64_t S = 5, K = 16, N = 8;
  GraphBuilder b;
  std::vector<float> x = Random(S * K, 31), w = Random(K * N, 32, 0.25f);
  b.Input("x", {1, S, K});
  b.F32("w", {K, N}, w);
  b.F32("scale", {1}, {1.7f});
  b.F32("shift", {1}, {-0.6f});
  b.F32("hi", {}, {2.5f});
  for (const char* n : {"mm", "y", "z", "l1", "l2", "c"}) b.Out(n, {1, S, N});
  b.N("MatMul", {"x", "w"}, {"mm"});
  b.N("Mul", {"scale", "mm"}, {"y"});
  b.N("Add", {"y", "shift"}, {"z"});
  b.N("LeakyRelu", {"z"}, {"l1"}).attrs["alpha"] = FloatA(0.1f);
  b.N("LeakyRelu", {"l1"}, {"l2"}).attrs["alpha"] = FloatA(0.5f);
  b.N("Clip", {"l2", "", "hi"}, {"c"}, 13);
  b.Output("c");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_EQ(Kinds(c.parsed), ConstMatMulKind() + "(2),Eltwise,Eltwise");  // affine merged + leaky 0.1; leaky 0.5; Clip
  std::vector<double> want = RefMatMul(x, {1, S, K}, w, {K, N});
  for (double& v : want) {
    v = v * 1.7f - 0.6f;
    v = v > 0 ? v : 0.1 * v;
    v = v > 0 ? v : 0.5 * v;
    v = std::min(v, 2.5);
  }
  ExpectNear(Execute(c, {x})[0], want);

  std::vector<PostOp> list;
  PostOp lin1, lin2, relu1, relu2;
  lin1.alg = lin2.alg = dnnl_eltwise_linear;
  lin1.alpha = 2.f;
  lin1.beta = 1.f;
  lin2.alpha = 3.f;
  lin2.beta = -1.f;
  relu1.alg = relu2.alg = dnnl_eltwise_relu;
  relu2.alpha = 0.5f;
  ASSERT_TRUE(AppendPostOp(&list, lin1, true));
  ASSERT_TRUE(AppendPostOp(&list, lin2, true));  // 3 * (2x + 1) - 1 = 6x + 2
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].alpha, 6.f);
  EXPECT_EQ(list[0].beta, 2.f);
  EXPECT_TRUE(AppendPostOp(&list, relu1, true));
  EXPECT_TRUE(AppendPostOp(&list, relu1, true));  // equal parameters are harmless
  EXPECT_FALSE(AppendPostOp(&list, relu2, true));
  EXPECT_FALSE(AppendPostOp(&list, lin1, true));  // a linear after the relus: a second linear with other params
  EXPECT_EQ(list.size(), 3u);
  std::vector<PostOp> unmerged;
  ASSERT_TRUE(AppendPostOp(&unmerged, lin1, false));
  EXPECT_FALSE(AppendPostOp(&unmerged, lin2, false));
}

// ONNX 1-D promotion and batch broadcasting, with constant (packed) and non-constant B.
TEST(OpsMath, MatMulShapes) {
  struct Case {
    Dims a, b, y;
  };
  const Case cases[] = {
      {{6}, {6, 4}, {4}},          {{3, 6}, {6}, {3}},           {{6}, {6}, {}},
      {{2, 3, 6}, {6}, {2, 3}},    {{6}, {2, 6, 4}, {2, 4}},     {{2, 1, 3, 6}, {3, 6, 4}, {2, 3, 3, 4}},
      {{1, 3, 6}, {2, 6, 4}, {2, 3, 4}},
  };
  for (const Case& cs : cases) {
    for (int mode : {0, 1, 2}) {  // B: input, constant (packed), constant with portable (plain) layouts
      const bool const_b = mode > 0;
      SCOPED_TRACE(::testing::Message() << "a " << cs.a.size() << "-D, b " << cs.b.size() << "-D, mode " << mode);
      GraphBuilder b;
      std::vector<float> av = Random(Numel(cs.a), 11), bv = Random(Numel(cs.b), 12);
      b.Input("a", cs.a);
      if (const_b) b.F32("b", cs.b, bv);
      else b.Input("b", cs.b);
      b.Out("y", cs.y);
      b.N("MatMul", {"a", "b"}, {"y"}, 13);
      b.Output("y");
      Compiled c;
      ASSERT_TRUE(Compile(b, &c, mode == 2));
      Dims ad = cs.a.size() == 1 ? Dims{1, cs.a[0]} : cs.a;
      Dims bd = cs.b.size() == 1 ? Dims{cs.b[0], 1} : cs.b;
      std::vector<std::vector<float>> ins = {av};
      if (!const_b) ins.push_back(bv);
      ExpectNear(Execute(c, ins)[0], RefMatMul(av, ad, bv, bd));
    }
  }
}

// Broadcasting binaries: a broadcasting first operand is swapped (commutative) or negated (Sub).
TEST(OpsMath, BinaryBroadcastAndSwap) {
  for (const char* op : {"Add", "Sub", "Mul", "Max", "Min", "Div"}) {
    SCOPED_TRACE(op);
    GraphBuilder b;
    std::vector<float> x = Random(60, 13), c5 = Random(5, 14);
    for (float& v : c5) v += v > 0 ? 0.5f : -0.5f;
    b.Input("x", {3, 4, 5});
    b.F32("c", {5}, c5);
    b.Out("y", {3, 4, 5});
    const bool div = std::string(op) == "Div";
    b.N(op, div ? std::vector<std::string>{"x", "c"} : std::vector<std::string>{"c", "x"}, {"y"}, 14);
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    std::vector<double> want(60);
    for (size_t i = 0; i < 60; ++i) {
      double p = c5[i % 5], q = x[i];
      std::string o = op;
      want[i] = o == "Add" ? p + q : o == "Sub" ? p - q : o == "Mul" ? p * q : o == "Max" ? std::max(p, q)
              : o == "Min" ? std::min(p, q) : q / p;
    }
    ExpectNear(Execute(c, {x})[0], want);
  }
}

TEST(OpsMath, UnaryOps) {
  struct Case {
    const char* op;
    std::function<double(double)> f;
    float lo, hi;
  };
  const Case cases[] = {
      {"Relu", [](double x) { return std::max(0.0, x); }, -3, 3},
      {"Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, -8, 8},
      {"HardSigmoid", [](double x) { return std::max(0.0, std::min(1.0, 0.2 * x + 0.5)); }, -4, 4},
      {"HardSwish", [](double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); }, -5, 5},
      {"Tanh", [](double x) { return std::tanh(x); }, -4, 4},
      {"Exp", [](double x) { return std::exp(x); }, -5, 5},
      {"Log", [](double x) { return std::log(x); }, 0.01f, 9},
      {"Sqrt", [](double x) { return std::sqrt(x); }, 0, 9},
      {"Abs", [](double x) { return std::fabs(x); }, -3, 3},
      {"Neg", [](double x) { return -x; }, -3, 3},
      {"Elu", [](double x) { return x > 0 ? x : std::exp(x) - 1; }, -3, 3},
      {"Softplus", [](double x) { return std::log1p(std::exp(x)); }, -6, 6},
      {"LeakyRelu", [](double x) { return x > 0 ? x : 0.01 * x; }, -3, 3},
  };
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.op);
    GraphBuilder b;
    std::vector<float> x(64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = cs.lo + (cs.hi - cs.lo) * i / (x.size() - 1);
    b.Input("x", {4, 16});
    b.Out("y", {4, 16});
    b.N(cs.op, {"x"}, {"y"}, 14);
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = cs.f(x[i]);
    ExpectNear(Execute(c, {x})[0], want, 2e-5);
  }
}

// A mean or sum over a block of middle axes is a matrix product with a constant row (oneDNN 2.6's jit reduction
// reduces trailing axes only; the rest ran its reference kernel, a third of Silero v4's run): ReduceMean over axes
// 1, 2 of [2, 3, 4, 5] (keepdims) and ReduceSum over axis 1 of [1, 129, 24] (not kept); a trailing-axis reduction
// stays a reduction.
TEST(OpsMath, MiddleAxisMeanAndSumAreMatMuls) {
  struct Case {
    const char* op;
    Dims xd;
    std::vector<int64_t> axes;
    int64_t keep;
    Dims yd;
    const char* kinds;
  };
  for (const Case& k : {Case{"ReduceMean", {2, 3, 4, 5}, {1, 2}, 1, {2, 1, 1, 5}, "MatMul"},
                        Case{"ReduceSum", {1, 129, 24}, {1}, 0, {1, 24}, "MatMul"},
                        Case{"ReduceMean", {2, 3, 4}, {2}, 1, {2, 3, 1}, "Reduction"}}) {
    SCOPED_TRACE(k.op);
    const std::vector<float> x = Random(Numel(k.xd), 91);
    GraphBuilder b;
    b.Input("x", k.xd);
    b.Out("y", k.yd);
    const bool sum = std::string(k.op) == "ReduceSum";  // axes as an input (opset 13), else an attribute
    if (sum) b.I64("axes", k.axes);
    Node& n = sum ? b.N(k.op, {"x", "axes"}, {"y"}, 13) : b.N(k.op, {"x"}, {"y"}, 13);
    if (!sum) n.attrs["axes"] = IntsA(k.axes);
    n.attrs["keepdims"] = IntA(k.keep);
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    EXPECT_EQ(Kinds(c.parsed), k.kinds);
    // Reference: sum (mean) over the reduced axes.
    std::vector<double> want(static_cast<size_t>(Numel(k.yd)), 0.0);
    const size_t rank = k.xd.size();
    int64_t count = 1;
    for (int64_t a : k.axes) count *= k.xd[static_cast<size_t>(a)];
    for (int64_t i = 0; i < Numel(k.xd); ++i) {
      int64_t rem = i, out = 0, stride = 1;
      std::vector<int64_t> idx(rank);
      for (size_t d = rank; d-- > 0;) idx[d] = rem % k.xd[d], rem /= k.xd[d];
      for (size_t d = rank; d-- > 0;) {
        if (std::find(k.axes.begin(), k.axes.end(), static_cast<int64_t>(d)) != k.axes.end()) continue;
        out += idx[d] * stride;
        stride *= k.xd[d];
      }
      want[static_cast<size_t>(out)] += x[static_cast<size_t>(i)];
    }
    if (std::string(k.op) == "ReduceMean")
      for (double& v : want) v /= static_cast<double>(count);
    ExpectNear(Execute(c, {x})[0], want);
  }
}

// A max or min over a block of middle axes (CBAM's channel max of [1, C, H, W]) is one transposing copy and a
// trailing-axis reduction (oneDNN 2.6's jit reduction reduces trailing axes only; the rest ran its reference kernel,
// 0.04x ONNX Runtime, issue 24's performance tester): a Reorder then a Reduction, values exact.
TEST(OpsMath, MiddleAxisMaxAndMinAreTrailingReductions) {
  struct Case {
    const char* op;
    Dims xd;
    std::vector<int64_t> axes;
    Dims yd;
  };
  for (const Case& k : {Case{"ReduceMax", {1, 6, 5, 7}, {1}, {1, 1, 5, 7}}, Case{"ReduceMin", {2, 3, 4, 5}, {1, 2}, {2, 1, 1, 5}}}) {
    SCOPED_TRACE(k.op);
    const std::vector<float> x = Random(Numel(k.xd), 93);
    GraphBuilder b;
    b.Input("x", k.xd);
    b.Out("y", k.yd);
    b.N(k.op, {"x"}, {"y"}, 13).attrs["axes"] = IntsA(k.axes);
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    EXPECT_EQ(Kinds(c.parsed), "Reorder,Reduction");  // the transposing copy, then the jit reduction
    const bool is_max = std::string(k.op) == "ReduceMax";
    std::vector<double> want(static_cast<size_t>(Numel(k.yd)), is_max ? -1e30 : 1e30);
    const size_t rank = k.xd.size();
    for (int64_t i = 0; i < Numel(k.xd); ++i) {
      int64_t rem = i, out = 0, stride = 1;
      std::vector<int64_t> idx(rank);
      for (size_t d = rank; d-- > 0;) idx[d] = rem % k.xd[d], rem /= k.xd[d];
      for (size_t d = rank; d-- > 0;) {
        if (std::find(k.axes.begin(), k.axes.end(), static_cast<int64_t>(d)) != k.axes.end()) continue;
        out += idx[d] * stride;
        stride *= k.xd[d];
      }
      double& w = want[static_cast<size_t>(out)];
      w = is_max ? std::max<double>(w, x[static_cast<size_t>(i)]) : std::min<double>(w, x[static_cast<size_t>(i)]);
    }
    ExpectNear(Execute(c, {x})[0], want, 0);
  }
}

// Pow by 2, 3 and 0.5 runs as square, x * x * x (one binary step with a post-op) and sqrt, not oneDNN's general pow
// (x^3 at 1.7 GB/s, 0.13x ONNX Runtime in the tanh-form GELU); negative bases stay right for the integer exponents.
TEST(OpsMath, SmallPowExponents) {
  const Dims xd = {3, 4, 5};
  for (float e : {2.f, 3.f, 0.5f}) {
    SCOPED_TRACE(e);
    std::vector<float> x = Random(Numel(xd), 95, 2.f);
    if (e == 0.5f)
      for (float& v : x) v = std::fabs(v);
    GraphBuilder b;
    b.Input("x", xd);
    b.F32("e", {}, {e});
    b.Out("y", xd);
    b.N("Pow", {"x", "e"}, {"y"}, 15);
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    EXPECT_EQ(Kinds(c.parsed), e == 3.f ? "Binary(1)" : "Eltwise");
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = std::pow(static_cast<double>(x[i]), static_cast<double>(e));
    ExpectNear(Execute(c, {x})[0], want, 1e-6);
  }
}

TEST(OpsMath, ClipPowLayerNormReduceMean) {
  GraphBuilder b;
  const int64_t R = 3, C = 10;
  std::vector<float> x = Random(R * C, 15, 2.f), scale = Random(C, 16), shift = Random(C, 17);
  b.Input("x", {R, C});
  b.F32("lo", {}, {-0.5f});
  b.F32("hi", {}, {1.5f});
  b.F32("two", {}, {2.f});
  b.F32("scale", {C}, scale);
  b.F32("shift", {C}, shift);
  for (const char* n : {"clip", "pow", "ln"}) b.Out(n, {R, C});
  b.Out("mean", {C});
  b.N("Clip", {"x", "lo", "hi"}, {"clip"}, 13);
  b.N("Pow", {"x", "two"}, {"pow"}, 15);
  Node& ln = b.N("LayerNormalization", {"x", "scale", "shift"}, {"ln"}, 17);
  ln.attrs["epsilon"] = FloatA(1e-3f);
  Node& rm = b.N("ReduceMean", {"x"}, {"mean"}, 13);
  rm.attrs["axes"] = IntsA({0});
  rm.attrs["keepdims"] = IntA(0);
  for (const char* n : {"clip", "pow", "ln", "mean"}) b.Output(n);
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  auto out = Execute(c, {x});
  std::vector<double> clip(x.size()), pw(x.size()), lnw(x.size()), mean(C, 0.0);
  for (size_t i = 0; i < x.size(); ++i) {
    clip[i] = std::min(1.5, std::max(-0.5, double(x[i])));
    pw[i] = double(x[i]) * x[i];
    mean[i % C] += x[i] / double(R);
  }
  for (int64_t r = 0; r < R; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < C; ++j) m += x[r * C + j] / double(C);
    for (int64_t j = 0; j < C; ++j) v += (x[r * C + j] - m) * (x[r * C + j] - m) / double(C);
    for (int64_t j = 0; j < C; ++j) lnw[r * C + j] = (x[r * C + j] - m) / std::sqrt(v + 1e-3) * scale[j] + shift[j];
  }
  ExpectNear(out[0], clip);
  ExpectNear(out[1], pw);
  ExpectNear(out[2], lnw);
  ExpectNear(out[3], mean);
}

// Scalar and [1, N] biases: the scalar becomes an eltwise post-op, the [1, N] one the matmul's bias.
TEST(OpsMath, MatMulBiasShapes) {
  for (bool scalar : {false, true}) {
    SCOPED_TRACE(scalar);
    const int64_t M = 3, K = 8, N = 5;
    GraphBuilder b;
    std::vector<float> x = Random(M * K, 20), w = Random(K * N, 21), bias = Random(scalar ? 1 : N, 22);
    b.Input("x", {M, K});
    b.F32("w", {K, N}, w);
    b.F32("bias", scalar ? Dims{} : Dims{1, N}, bias);
    b.Out("mm", {M, N});
    b.Out("y", {M, N});
    b.N("MatMul", {"x", "w"}, {"mm"});
    b.N("Add", {"bias", "mm"}, {"y"});
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    ASSERT_EQ(c.parsed.steps.size(), 1u);
    EXPECT_EQ(c.parsed.steps[0].ops[2].present(), !scalar);
    std::vector<double> want = RefMatMul(x, {M, K}, w, {K, N});
    for (size_t i = 0; i < want.size(); ++i) want[i] += bias[scalar ? 0 : i % N];
    ExpectNear(Execute(c, {x})[0], want);
  }
}

// [.., M, K] x constant [K, N] (+ bias, activations) runs as oneDNN's jit 1x1 convolution over an nhwc view of the same
// bytes, not on the sgemm driver, whose kernels a process generates on its first call (~40 ms, issue 14); with a
// binary post-op (a residual Add of a computed tensor) it stays a matmul. Values equal the reference either way.
TEST(OpsMath, ConstantWeightMatMulIsA1x1Convolution) {
  for (bool residual : {false, true}) {
    SCOPED_TRACE(residual);
    const int64_t M = 7, K = 24, N = 40;
    GraphBuilder b;
    std::vector<float> x = Random(2 * M * K, 30), w = Random(K * N, 31, 0.3f), bias = Random(N, 32),
                       r = Random(2 * M * N, 33);
    b.Input("x", {2, M, K});
    b.Input("r", {2, M, N});
    b.F32("w", {K, N}, w);
    b.F32("bias", {N}, bias);
    for (const char* v : {"mm", "f", "a", "y"}) b.Out(v, {2, M, N});
    b.N("MatMul", {"x", "w"}, {"mm"});
    b.N("Add", {"mm", "bias"}, {"f"});
    if (residual) {
      b.N("Add", {"f", "r"}, {"a"});
      b.N("Relu", {"a"}, {"y"});
    } else {
      b.N("Relu", {"f"}, {"a"});
      b.N("Neg", {"a"}, {"y"});
    }
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    const std::string kinds = Kinds(c.parsed);
    if (residual) {
      EXPECT_EQ(kinds.rfind("MatMul", 0), 0u) << kinds;
    } else {
      EXPECT_EQ(kinds, ConstMatMulKind() + "(2)");  // Relu and Neg as post-ops
    }
    std::vector<double> want = RefMatMul(x, {2, M, K}, w, {K, N});
    for (size_t i = 0; i < want.size(); ++i) {
      const double f = want[i] + bias[i % N];
      want[i] = residual ? std::max(0.0, f + r[i]) : -std::max(0.0, f);
    }
    ExpectNear(Execute(c, {x, r})[0], want);
  }
}

// Builders read only the step: damaged parameters and operands are refused with a reason, never run.
TEST(OpsMath, BuildersRefuseDamagedSteps) {
  GraphBuilder b;
  b.Input("q", {1, 2, 4, 8});
  b.Input("kt", {1, 2, 8, 4});
  b.Input("x", {3, 4});
  b.F32("scale", {4}, {1, 2, 3, 4});
  for (const char* n : {"s", "p"}) b.Out(n, {1, 2, 4, 4});
  for (const char* n : {"e", "t", "ln", "r"}) b.Out(n, {3, 4});
  b.Out("m", {3, 1});
  b.N("MatMul", {"q", "kt"}, {"s"});
  b.N("Softmax", {"s"}, {"p"});
  b.N("Erf", {"x"}, {"e"});
  b.N("Tanh", {"x"}, {"t"});
  b.N("LayerNormalization", {"x", "scale"}, {"ln"});
  b.N("Add", {"x", "scale"}, {"r"});
  b.N("ReduceMean", {"x"}, {"m"}, 13).attrs["axes"] = IntsA({1});
  for (const char* n : {"p", "e", "t", "ln", "r", "m"}) b.Output(n);
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  auto damaged = [&](const std::function<void(Program*)>& damage) {
    Program p = c.parsed;
    damage(&p);
    std::vector<WeightRef> w;
    for (const TensorInput& t : c.cg.weights) w.push_back({t.bytes.data(), t.bytes.size()});
    std::unique_ptr<Executor> e;
    CheckResult r = Executor::Create(p, std::move(w), 1, &e);
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(r.reason.empty());
  };
  auto step = [&](Program* p, StepKind k) -> Step& {
    for (Step& s : p->steps)
      if (s.kind == k) return s;
    ADD_FAILURE() << "no step of kind " << static_cast<int>(k);
    return p->steps[0];
  };
  damaged([&](Program* p) { step(p, StepKind::kSoftmax).ints[0] = 7; });
  damaged([&](Program* p) { step(p, StepKind::kSoftmax).ints[1] = 2; });
  damaged([&](Program* p) { step(p, StepKind::kSoftmax).ints.pop_back(); });
  damaged([&](Program* p) { step(p, StepKind::kEltwise).ints[0] = 12345; });
  damaged([&](Program* p) { step(p, StepKind::kEltwise).floats[0] = NAN; });
  damaged([&](Program* p) { step(p, StepKind::kEltwise).ops[1].dims = {4, 3}; });
  damaged([&](Program* p) { step(p, StepKind::kBinary).ints[0] = dnnl_eltwise_relu; });
  damaged([&](Program* p) { step(p, StepKind::kMatMul).ops[1].dims = {1, 2, 4, 4}; });
  damaged([&](Program* p) { step(p, StepKind::kMatMul).ops.resize(3); });
  damaged([&](Program* p) { step(p, StepKind::kMatMul).ops[3].offset = 1ull << 40; });
  damaged([&](Program* p) { step(p, StepKind::kErf).ops[1].dims = {4, 3}; });
  damaged([&](Program* p) { step(p, StepKind::kErf).ops[0].strides = {1, 3}; });
  damaged([&](Program* p) { step(p, StepKind::kLayerNorm).floats[0] = -1; });
  damaged([&](Program* p) { step(p, StepKind::kLayerNorm).ops[1].dims = {3}; });
  damaged([&](Program* p) { step(p, StepKind::kReduction).ints[0] = 0; });
  damaged([&](Program* p) { step(p, StepKind::kReduction).ops[1].dims = {3, 4}; });
  // MaskedSoftmax: operand count, dims, mask broadcast, layout, dtype.
  damaged([&](Program* p) {
    Step& s = step(p, StepKind::kSoftmax);
    s.kind = StepKind::kMaskedSoftmax;  // src, dst only: a mask operand is missing
    s.ints.clear();
  });
  auto masked = [&](const std::function<void(Step*)>& damage) {
    damaged([&](Program* p) {
      Step& s = step(p, StepKind::kSoftmax);
      s.kind = StepKind::kMaskedSoftmax;
      s.ints.clear();
      Operand mask = s.ops[0];
      mask.dims = {1, 1, 4, 4};
      s.ops.insert(s.ops.begin() + 1, mask);
      damage(&s);
    });
  };
  masked([](Step* s) { s->ops[1].dims = {1, 1, 4, 3}; });
  masked([](Step* s) { s->ops[1].dims = {1, 4, 4}; });
  masked([](Step* s) { s->ops[1].dims = {1, 3, 4, 4}; });
  masked([](Step* s) { s->ops[2].dims = {1, 2, 4, 3}; });
  masked([](Step* s) { s->ops[0].strides = {32, 16, 1, 4}; });
  masked([](Step* s) { s->ops[1].dtype = 6; });
  masked([](Step* s) { s->ints = {1}; });
  PostOp bad;
  bad.kind = PostOp::kBinary;
  bad.alg = dnnl_binary_add;
  bad.operand = 9;
  damaged([&](Program* p) { step(p, StepKind::kMatMul).post_ops.push_back(bad); });
}

TEST(OpsMath, SupportIsConservative) {
  GraphBuilder b;
  b.Input("x", {3, 4});
  b.Input("y4", {4});
  b.Input("e", {});
  b.Input("a", {3, 1});
  b.Out("o1", {3, 4});
  b.Out("o2", {3, 4});
  b.Out("o3", {3, 4});
  b.Out("mean", {3, 4});
  b.Out("inv", {3, 4});
  std::string why;
  // Pow with a runtime exponent.
  EXPECT_FALSE(SupportBinary(b.g, b.N("Pow", {"x", "e"}, {"o1"}, 15), &why));
  // (A Div with a broadcasting dividend and broadcasting both ways are supported: BinaryBroadcastsTheFirstOperand.)
  // Softmax before opset 13 on any axis (lowered on the input coerced to 2-D: tests/aotcpu_ops_test.cc checks the
  // values); an axis out of range is refused.
  Node& sm = b.N("Softmax", {"x"}, {"o3"}, 11);
  sm.attrs["axis"] = IntA(0);
  EXPECT_TRUE(SupportSoftmax(b.g, sm, &why)) << why;
  sm.attrs["axis"] = IntA(1);
  EXPECT_TRUE(SupportSoftmax(b.g, sm, &why)) << why;
  sm.attrs["axis"] = IntA(2);
  EXPECT_FALSE(SupportSoftmax(b.g, sm, &why));
  // LayerNormalization with Mean requested.
  b.Output("mean");
  Node& ln = b.N("LayerNormalization", {"x", "y4"}, {"o3", "mean", "inv"}, 17);
  EXPECT_FALSE(SupportLayerNorm(b.g, ln, &why));
}

// oneDNN's binary takes its first operand at the output's shape. When neither operand has it ([3, 1] + [4]) or a
// Div's dividend broadcasts ([4] / [3, 4]), the first operand is broadcast into a copy (a StridedCopy step) and the
// values are the node's (difftest --dynamic, seed 20261209: a shape at which the broadcast direction flips).
TEST(OpsMath, BinaryBroadcastsTheFirstOperand) {
  GraphBuilder b;
  const std::vector<float> a = Random(3, 51), y4 = Random(4, 52), x = Random(12, 53, 2.f);
  b.Input("a", {3, 1});
  b.Input("y4", {4});
  b.Input("x", {3, 4});
  b.Out("sum", {3, 4});
  b.Out("quot", {3, 4});
  b.Out("diff", {3, 4});
  b.N("Add", {"a", "y4"}, {"sum"}, 14);
  b.N("Div", {"y4", "x"}, {"quot"}, 14);
  b.N("Sub", {"a", "y4"}, {"diff"}, 14);
  for (const char* o : {"sum", "quot", "diff"}) b.Output(o);
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  EXPECT_NE(Kinds(c.parsed).find("StridedCopy"), std::string::npos) << Kinds(c.parsed);
  const auto out = Execute(c, {a, y4, x});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      EXPECT_FLOAT_EQ(out[0][i * 4 + j], a[i] + y4[j]);
      EXPECT_FLOAT_EQ(out[1][i * 4 + j], y4[j] / x[i * 4 + j]);
      EXPECT_FLOAT_EQ(out[2][i * 4 + j], a[i] - y4[j]);
    }
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
