// nn_quant.cc on small hand-built graphs: compiled, serialized and parsed back (program version 6), run by the
// Executor and compared with plain loops that follow ONNX Runtime's arithmetic (int32 sums, one float multiply):
// DynamicQuantizeLinear, DequantizeLinear, and MatMulInteger -> Cast -> Mul (+ bias Add) as one int8 step. The
// support checks refuse what the steps do not compute; the builders refuse damaged steps with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "providers/aotcpu/capability/capability.h"
#include "providers/aotcpu/ir/test_graph.h"
#include "providers/aotcpu/lower/ops.h"
#include "providers/int8gemm/int8_gemm.h"

namespace epctx {
namespace aotcpu {
namespace {

using namespace test_graph;

struct Compiled {
  CompiledGraph cg;
  Program parsed;
  std::unique_ptr<Executor> exec;
};

// A constant of `dtype` over `bytes` (kept alive by the caller).
int Const(GraphBuilder& b, const std::string& name, uint32_t dtype, Dims dims, const void* bytes) {
  const int v = b.Out(name, std::move(dims));
  b.g.v(v).dtype = dtype;
  b.g.v(v).data = bytes;
  b.g.v(v).is_initializer = true;
  return v;
}

// `isa`: the target (CompileOptions::isa), "" for this machine; "avx2" compiles the int8 products for a CPU without
// VNNI (our own kernel, kMatMulInt8Avx2) whatever this one has.
::testing::AssertionResult Compile(const GraphBuilder& b, Compiled* c, const std::string& isa = "") {
  for (const Node& n : b.g.nodes) {
    std::string why;
    if (!IsNodeSupported(b.g, n, &why)) return ::testing::AssertionFailure() << n.name << " unsupported: " << why;
  }
  std::vector<std::string> ins, outs;
  for (int v : b.g.inputs) ins.push_back(b.g.v(v).name);
  for (int v : b.g.outputs) outs.push_back(b.g.v(v).name);
  CompileOptions options;
  options.isa = isa;
  CheckResult r = CompileGraph(b.g, ins, outs, options, &c->cg);
  if (!r.ok) return ::testing::AssertionFailure() << "compile: " << r.reason;
  const std::string records = SerializeProgram(c->cg.program);
  uint32_t version = 0;
  std::memcpy(&version, records.data() + 8, 4);
  if (version != 6) return ::testing::AssertionFailure() << "stamped version " << version;
  r = ParseProgram(records, static_cast<uint32_t>(c->cg.weights.size()), &c->parsed);
  if (!r.ok) return ::testing::AssertionFailure() << "parse: " << r.reason;
  std::vector<WeightRef> w;
  for (const TensorInput& t : c->cg.weights) w.push_back({t.bytes.data(), t.bytes.size()});
  r = Executor::Create(c->parsed, std::move(w), 1, &c->exec);
  if (!r.ok) return ::testing::AssertionFailure() << "executor: " << r.reason;
  return ::testing::AssertionSuccess();
}

// ONNX Runtime's DynamicQuantizeLinear.
void RefDynamicQuantize(const std::vector<float>& x, std::vector<uint8_t>* q, float* scale, uint8_t* zp) {
  float lo = 0, hi = 0;
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  *scale = hi == lo ? 1.f : (hi - lo) / 255.f;
  *zp = static_cast<uint8_t>(std::nearbyint(std::min(255.f, std::max(0.f, 0.f - lo / *scale))));
  q->resize(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    (*q)[i] = static_cast<uint8_t>(std::min(255.f, std::max(0.f, std::nearbyint(x[i] / *scale) + *zp)));
}

TEST(OpsQuant, DynamicQuantizeMatchesOnnxRuntime) {
  // Sizes around the chunking (16384) and the vector widths; an all-zero input gives scale 1, zero point 0.
  for (int64_t n : {int64_t{1}, int64_t{37}, int64_t{16384 * 5 + 3}}) {
    for (int zeros = 0; zeros < 2; ++zeros) {
      GraphBuilder b;
      b.Input("x", {n});
      b.Out("q", {n});
      b.Out("s", {});
      b.Out("z", {});
      b.g.v(b.g.Find("q")).dtype = kU8;
      b.g.v(b.g.Find("z")).dtype = kU8;
      b.N("DynamicQuantizeLinear", {"x"}, {"q", "s", "z"}, 11);
      for (const char* o : {"q", "s", "z"}) b.Output(o);
      Compiled c;
      ASSERT_TRUE(Compile(b, &c)) << n;
      std::vector<float> x = UniformFloats(n, 7, -3.f, 5.f);
      if (zeros) std::fill(x.begin(), x.end(), 0.f);
      std::vector<uint8_t> q(static_cast<size_t>(n), 99), want_q;
      float s = 0, want_s = 0;
      uint8_t z = 7, want_z = 0;
      ASSERT_TRUE(c.exec->Run({x.data()}, {q.data(), &s, &z}).ok);
      RefDynamicQuantize(x, &want_q, &want_s, &want_z);
      EXPECT_EQ(s, want_s);
      EXPECT_EQ(z, want_z);
      EXPECT_EQ(q, want_q);
    }
  }
}

TEST(OpsQuant, DequantizeLinearPerTensor) {
  const std::vector<uint8_t> data = {0, 1, 7, 128, 200, 255, 3, 90};
  const float scale = 0.0375f;
  const uint8_t zp = 131;
  GraphBuilder b;
  b.Input("x", {2, 4});
  b.g.v(b.g.Find("x")).dtype = kU8;
  Const(b, "s", kF32, {}, &scale);
  Const(b, "z", kU8, {}, &zp);
  b.Out("y", {2, 4});
  b.N("DequantizeLinear", {"x", "s", "z"}, {"y"}, 13);
  b.Output("y");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  std::vector<float> y(8);
  ASSERT_TRUE(c.exec->Run({data.data()}, {y.data()}).ok);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(y[i], static_cast<float>(int32_t{data[i]} - zp) * scale) << i;
  // A per-axis scale is left to the CPU EP.
  GraphBuilder p;
  p.Input("x", {2, 4});
  p.g.v(p.g.Find("x")).dtype = kU8;
  const float scales[2] = {0.5f, 0.25f};
  Const(p, "s", kF32, {2}, scales);
  p.Out("y", {2, 4});
  Node& n = p.N("DequantizeLinear", {"x", "s"}, {"y"}, 13);
  n.attrs["axis"] = IntA(0);
  std::string why;
  EXPECT_FALSE(IsNodeSupported(p.g, n, &why));
  EXPECT_NE(why.find("per-tensor"), std::string::npos) << why;
}

// x [2, 3, K] float -> DynamicQuantizeLinear -> MatMulInteger(q, W int8 [K, N], zq) -> Cast -> Mul(s * ws) -> Add b:
// one DynamicQuantize step, one int8 matmul (scale and bias as post-ops), equal to the int32 reference bit for bit.
TEST(OpsQuant, MatMulIntegerCastMulIsOneInt8Step) {
  const int64_t K = 40, N = 24;
  std::vector<int8_t> w(static_cast<size_t>(K * N));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>((i * 37) % 255) - 127);
  const int8_t wz = 0;
  const float ws = 0.0123f;
  const std::vector<float> bias = UniformFloats(N, 3);
  GraphBuilder b;
  b.Input("x", {2, 3, K});
  b.Out("q", {2, 3, K});
  b.Out("s", {});
  b.Out("z", {});
  b.g.v(b.g.Find("q")).dtype = kU8;
  b.g.v(b.g.Find("z")).dtype = kU8;
  Const(b, "w", kI8, {K, N}, w.data());
  Const(b, "wz", kI8, {}, &wz);
  Const(b, "ws", kF32, {}, &ws);
  b.F32("bias", {N}, bias);
  b.Out("acc", {2, 3, N});
  b.g.v(b.g.Find("acc")).dtype = kI32;
  b.Out("accf", {2, 3, N});
  b.Out("scale", {});
  b.Out("scaled", {2, 3, N});
  b.Out("y", {2, 3, N});
  b.N("DynamicQuantizeLinear", {"x"}, {"q", "s", "z"}, 11);
  b.N("MatMulInteger", {"q", "w", "z", "wz"}, {"acc"}, 10);
  b.N("Cast", {"acc"}, {"accf"}, 13).attrs["to"] = IntA(kF32);
  b.N("Mul", {"s", "ws"}, {"scale"}, 14);
  b.N("Mul", {"accf", "scale"}, {"scaled"}, 14);
  b.N("Add", {"scaled", "bias"}, {"y"}, 14);
  b.Output("y");
  for (const char* isa : {"", "avx2"}) {
  SCOPED_TRACE(std::string("isa '") + isa + "'");
  if (*isa && !int8gemm::Available()) continue;
  Compiled c;
  ASSERT_TRUE(Compile(b, &c, isa));
  int int8_steps = 0, other_heavy = 0;
  for (const Step& s : c.parsed.steps) {
    int8_steps += s.kind == StepKind::kMatMulInt8 || s.kind == StepKind::kMatMulInt8Avx2;
    if (*isa) EXPECT_NE(s.kind, StepKind::kMatMulInt8) << "a no-VNNI target runs our own kernel";
    other_heavy += s.kind == StepKind::kMatMul || (s.kind == StepKind::kBinary && s.ops[0].dims.size() > 1);
  }
  EXPECT_EQ(int8_steps, 1);
  EXPECT_EQ(other_heavy, 0);  // the Cast, Mul and bias Add were fused
  const std::vector<float> x = UniformFloats(2 * 3 * K, 11, -2.f, 3.f);
  std::vector<float> y(static_cast<size_t>(6 * N));
  ASSERT_TRUE(c.exec->Run({x.data()}, {y.data()}).ok);
  std::vector<uint8_t> q;
  float s;
  uint8_t z;
  RefDynamicQuantize(x, &q, &s, &z);
  const float scale = s * ws;
  for (int64_t m = 0; m < 6; ++m)
    for (int64_t j = 0; j < N; ++j) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += (int32_t{q[m * K + k]} - z) * w[k * N + j];
      volatile float scaled = static_cast<float>(acc) * scale;  // rounded, as ONNX Runtime's Mul (no FMA with the Add)
      EXPECT_EQ(y[m * N + j], scaled + bias[j]) << m << "," << j;
    }
  // Damaged steps are refused by the builder, never run: float weights, and weights shorter than the packed layout.
  for (int damage = 0; damage < 2; ++damage) {
    Program p = c.parsed;
    std::vector<WeightRef> wr;
    for (const TensorInput& t : c.cg.weights) wr.push_back({t.bytes.data(), t.bytes.size()});
    for (Step& s : p.steps) {
      if (s.kind != StepKind::kMatMulInt8 && s.kind != StepKind::kMatMulInt8Avx2) continue;
      if (damage == 0) s.ops[1].dtype = kF32;
      if (damage == 1) wr[s.ops[1].index].length = 16;
    }
    std::unique_ptr<Executor> e;
    EXPECT_FALSE(Executor::Create(p, wr, 1, &e).ok) << damage;
  }
  }
}

// Extreme values, where oneDNN's int8 kernels on a CPU without VNNI (AVX2, avx512_core) would saturate: they add
// pairs of u8 x s8 products in int16 (255 * 127 * 2 > 32767). The step must still equal the exact int32 sum; CTest
// runs this test again under ONEDNN_MAX_CPU_ISA=AVX2 (ops_quant_avx2). Signed weights at +-127/-128, and uint8 weights
// with zero point 128 (the same values), with and without a source zero point.
TEST(OpsQuant, MatMulIntegerExtremesAreExact) {
  const int64_t M = 5, K = 70, N = 33;
  for (int variant = 0; variant < 4; ++variant) {
    const bool u8w = variant & 1, with_zp = variant & 2;
    std::vector<int32_t> wv(static_cast<size_t>(K * N));
    for (size_t i = 0; i < wv.size(); ++i) {
      const size_t j = i % N;  // columns of all +127, all -128, and alternating
      wv[i] = j % 3 == 0 ? 127 : j % 3 == 1 ? -128 : ((i / N) % 2 ? 127 : -128);
    }
    std::vector<uint8_t> wbytes(wv.size());
    for (size_t i = 0; i < wv.size(); ++i) wbytes[i] = static_cast<uint8_t>(u8w ? wv[i] + 128 : wv[i]);
    const uint8_t wz = u8w ? 128 : 0, az = with_zp ? 3 : 0;
    const float one = 1.f;
    GraphBuilder b;
    b.Input("a", {M, K});
    b.g.v(b.g.Find("a")).dtype = kU8;
    Const(b, "w", u8w ? kU8 : kI8, {K, N}, wbytes.data());
    Const(b, "wz", u8w ? kU8 : kI8, {}, &wz);
    Const(b, "az", kU8, {}, &az);
    Const(b, "one", kF32, {}, &one);
    b.Out("acc", {M, N});
    b.g.v(b.g.Find("acc")).dtype = kI32;
    b.Out("accf", {M, N});
    b.Out("y", {M, N});
    b.N("MatMulInteger", {"a", "w", "az", "wz"}, {"acc"}, 10);
    b.N("Cast", {"acc"}, {"accf"}, 13).attrs["to"] = IntA(kF32);
    b.N("Mul", {"accf", "one"}, {"y"}, 14);
    b.Output("y");
    for (const char* isa : {"", "avx2"}) {
    if (*isa && !int8gemm::Available()) continue;
    Compiled c;
    ASSERT_TRUE(Compile(b, &c, isa)) << variant;
    std::vector<uint8_t> a(static_cast<size_t>(M * K), 255);
    for (int64_t k = 0; k < K; k += 7) a[static_cast<size_t>(k)] = 0;  // row 0 not quite uniform
    std::vector<float> y(static_cast<size_t>(M * N));
    ASSERT_TRUE(c.exec->Run({a.data()}, {y.data()}).ok);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < N; ++j) {
        int32_t acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += (int32_t{a[m * K + k]} - az) * wv[k * N + j];
        EXPECT_EQ(y[m * N + j], static_cast<float>(acc)) << "variant " << variant << " isa '" << isa << "' at " << m
                                                         << "," << j;
      }
    }
  }
}

// a [1, 5, K] uint8 -> MatMulInteger -> Cast -> Mul -> Gather(axis 1, one index) -> Add(bias [N]): for a no-VNNI
// target one kMatMulInt8Avx2 step over that row alone (a language model's head at the last position), exact.
TEST(OpsQuant, GatheredRowIsOneAvx2StepOverThatRow) {
  if (!int8gemm::Available()) GTEST_SKIP() << "no AVX2";
  const int64_t S = 5, K = 37, N = 21;
  std::vector<int8_t> w(static_cast<size_t>(K * N));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(i % 3 ? 127 : -128);
  const std::vector<float> bias = UniformFloats(N, 5);
  const uint8_t az = 9;
  const float ws = 0.5f;
  for (int64_t index : {int64_t{-1}, int64_t{1}}) {
    GraphBuilder b;
    b.Input("a", {1, S, K});
    b.g.v(b.g.Find("a")).dtype = kU8;
    Const(b, "w", kI8, {K, N}, w.data());
    Const(b, "az", kU8, {}, &az);
    Const(b, "ws", kF32, {}, &ws);
    Const(b, "idx", kI64, {}, &index);
    b.F32("bias", {N}, bias);
    b.Out("acc", {1, S, N});
    b.g.v(b.g.Find("acc")).dtype = kI32;
    b.Out("accf", {1, S, N});
    b.Out("rows", {1, S, N});
    b.Out("row", {1, N});
    b.Out("y", {1, N});
    b.N("MatMulInteger", {"a", "w", "az"}, {"acc"}, 10);
    b.N("Cast", {"acc"}, {"accf"}, 13).attrs["to"] = IntA(kF32);
    b.N("Mul", {"accf", "ws"}, {"rows"}, 14);
    b.N("Gather", {"rows", "idx"}, {"row"}, 13).attrs["axis"] = IntA(1);
    b.N("Add", {"row", "bias"}, {"y"}, 14);
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c, "avx2"));
    ASSERT_EQ(c.parsed.steps.size(), 1u);
    EXPECT_EQ(c.parsed.steps[0].kind, StepKind::kMatMulInt8Avx2);
    EXPECT_EQ(c.parsed.steps[0].ops[0].dims, (Dims{1, K}));
    std::vector<uint8_t> a(static_cast<size_t>(S * K));
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i % 5 ? 255 : i % 256);
    std::vector<float> y(static_cast<size_t>(N));
    ASSERT_TRUE(c.exec->Run({a.data()}, {y.data()}).ok);
    const int64_t r = index < 0 ? index + S : index;
    for (int64_t j = 0; j < N; ++j) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += (int32_t{a[r * K + k]} - az) * w[k * N + j];
      volatile float scaled = static_cast<float>(acc) * ws;
      EXPECT_EQ(y[j], scaled + bias[j]) << "index " << index << " column " << j;
    }
  }
}

// x [1, C, H, W] float -> DynamicQuantizeLinear -> ConvInteger(q, W uint8 with zero point 143, zq; 3x3, padding,
// dilation) -> Cast -> Mul(s * ws) -> Add(bias [C, 1, 1]) -> Relu: one int8 convolution step (weights in parts along
// the input channels, since w - 143 leaves int8), equal to the int32 reference bit for bit, padding adding 0.
TEST(OpsQuant, ConvIntegerIsOneExactInt8Step) {
  const int64_t C = 5, OC = 7, H = 9, W = 8;
  for (int64_t dil : {int64_t{1}, int64_t{3}}) {
    std::vector<uint8_t> w(static_cast<size_t>(OC * C * 9));
    for (size_t i = 0; i < w.size(); ++i) w[i] = i % 5 == 0 ? 0 : i % 5 == 1 ? 255 : static_cast<uint8_t>(i * 37);
    const uint8_t wz = 143;
    const float ws = 0.0173f;
    const std::vector<float> bias = UniformFloats(OC, 5);
    GraphBuilder b;
    b.Input("x", {1, C, H, W});
    b.Out("q", {1, C, H, W});
    b.Out("s", {});
    b.Out("z", {});
    b.g.v(b.g.Find("q")).dtype = kU8;
    b.g.v(b.g.Find("z")).dtype = kU8;
    Const(b, "w", kU8, {OC, C, 3, 3}, w.data());
    Const(b, "wz", kU8, {}, &wz);
    Const(b, "ws", kF32, {}, &ws);
    b.F32("bias", {OC, 1, 1}, bias);
    for (const char* v : {"acc", "accf", "scaled", "biased", "y"}) b.Out(v, {1, OC, H, W});
    b.g.v(b.g.Find("acc")).dtype = kI32;
    b.Out("scale", {});
    b.N("DynamicQuantizeLinear", {"x"}, {"q", "s", "z"}, 11);
    Node& conv = b.N("ConvInteger", {"q", "w", "z", "wz"}, {"acc"}, 10);
    conv.attrs["pads"] = IntsA({dil, dil, dil, dil});
    conv.attrs["dilations"] = IntsA({dil, dil});
    b.N("Cast", {"acc"}, {"accf"}, 13).attrs["to"] = IntA(kF32);
    b.N("Mul", {"s", "ws"}, {"scale"}, 14);
    b.N("Mul", {"accf", "scale"}, {"scaled"}, 14);
    b.N("Add", {"scaled", "bias"}, {"biased"}, 14);
    b.N("Relu", {"biased"}, {"y"}, 14);
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    int int8_steps = 0;
    for (const Step& s : c.parsed.steps) int8_steps += s.kind == StepKind::kConvInt8;
    EXPECT_EQ(int8_steps, 1);
    const std::vector<float> x = UniformFloats(C * H * W, 17, -1.f, 4.f);
    std::vector<float> y(static_cast<size_t>(OC * H * W));
    ASSERT_TRUE(c.exec->Run({x.data()}, {y.data()}).ok);
    std::vector<uint8_t> q;
    float s;
    uint8_t z;
    RefDynamicQuantize(x, &q, &s, &z);
    const float scale = s * ws;
    for (int64_t o = 0; o < OC; ++o)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j) {
          int32_t acc = 0;
          for (int64_t ci = 0; ci < C; ++ci)
            for (int64_t ki = 0; ki < 3; ++ki)
              for (int64_t kj = 0; kj < 3; ++kj) {
                const int64_t ii = i - dil + ki * dil, jj = j - dil + kj * dil;
                if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;
                acc += (int32_t{q[(ci * H + ii) * W + jj]} - z) * (int32_t{w[((o * C + ci) * 3 + ki) * 3 + kj]} - wz);
              }
          volatile float scaled = static_cast<float>(acc) * scale;
          volatile float biased = scaled + bias[o];
          EXPECT_EQ(y[(o * H + i) * W + j], std::max(0.f, static_cast<float>(biased))) << dil << ":" << o << "," << i << "," << j;
        }
  }
}

// Weights whose values minus their zero point leave int8, and an int32 result read by anything but one Cast to float,
// are left to the CPU EP with the reason.
TEST(OpsQuant, MatMulIntegerRefusals) {
  for (int variant = 0; variant < 2; ++variant) {
    const std::vector<uint8_t> w = {0, 255, 10, 20};
    const uint8_t wz = variant == 0 ? 100 : 128;
    GraphBuilder b;
    b.Input("a", {1, 2});
    b.g.v(b.g.Find("a")).dtype = kU8;
    Const(b, "w", kU8, {2, 2}, w.data());
    Const(b, "wz", kU8, {}, &wz);
    b.Out("acc", {1, 2});
    b.g.v(b.g.Find("acc")).dtype = kI32;
    Node& n = b.N("MatMulInteger", {"a", "w", "", "wz"}, {"acc"}, 10);
    b.Output("acc");
    std::string why;
    EXPECT_FALSE(IsNodeSupported(b.g, n, &why));
    EXPECT_NE(why.find(variant == 0 ? "do not fit in int8" : "Cast to float"), std::string::npos) << why;
  }
}

// Program version 6: the 8-bit step kinds are stamped 6 and refused under an older stamp.
TEST(OpsQuant, Int8StepsAreVersion6) {
  Program p;
  p.inputs = {{"x", 1, {4}}};
  p.outputs = {{"q", 2, {4}}, {"s", 1, {}}, {"z", 2, {}}};
  Step s;
  s.kind = StepKind::kDynamicQuantize;
  s.name = "dq";
  auto op = [](Buf buf, uint32_t index, uint32_t dtype, Dims dims) {
    Operand o;
    o.buf = buf;
    o.index = index;
    o.dtype = dtype;
    o.dims = dims;
    o.strides = {1};
    return o;
  };
  s.ops = {op(Buf::kInput, 0, kF32, {4}), op(Buf::kOutput, 0, kU8, {4}), op(Buf::kOutput, 1, kF32, {1}),
           op(Buf::kOutput, 2, kU8, {1})};
  p.steps = {s};
  const std::string records = SerializeProgram(p);
  uint32_t stamped = 0;
  std::memcpy(&stamped, records.data() + 8, 4);
  EXPECT_EQ(stamped, 6u);
  Program q;
  ASSERT_TRUE(ParseProgram(records, 0, &q).ok);
  std::string forged = records;
  const uint32_t five = 5;
  std::memcpy(&forged[8], &five, 4);
  CheckResult r = ParseProgram(forged, 0, &q);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("which program version 5 does not have"), std::string::npos) << r.reason;
  // The builder refuses a scale or zero point written into a weight, and a dst of another type.
  for (int damage = 0; damage < 2; ++damage) {
    Program d = p;
    if (damage == 0) d.steps[0].ops[3].buf = Buf::kInput, d.steps[0].ops[3].index = 0, d.steps[0].ops[3].dtype = kF32;
    if (damage == 1) d.steps[0].ops[1].dtype = kF32, d.outputs[0].dtype = kF32;
    std::unique_ptr<Executor> e;
    EXPECT_FALSE(Executor::Create(d, {}, 1, &e).ok) << damage;
  }
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
