// nn_quant.cc on small hand-built graphs: compiled, serialized and parsed back (program version 6), run by the
// Executor and compared with plain loops that follow ONNX Runtime's arithmetic (int32 sums, one float multiply):
// DynamicQuantizeLinear, DequantizeLinear, and MatMulInteger -> Cast -> Mul (+ bias Add) as one int8 step. The
// support checks refuse what the steps do not compute; the builders refuse damaged steps with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "providers/aotcpu/capability/capability.h"
#include "providers/aotcpu/ir/test_graph.h"
#include "providers/aotcpu/lower/nn_common.h"
#include "providers/aotcpu/lower/nn_quant_conv_avx2.h"
#include "providers/aotcpu/lower/ops.h"
#include "providers/aotcpu/lower/quant_common.h"
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
  uint32_t want = 6;  // kConvInt8Avx2 is version 7, kQConvAvx2 8, the other 8-bit kinds 6
  for (const Step& s : c->cg.program.steps) {
    if (s.kind == StepKind::kConvInt8Avx2) want = std::max(want, 7u);
    if (s.kind == StepKind::kQConvAvx2) want = std::max(want, 8u);
  }
  if (version != want) return ::testing::AssertionFailure() << "stamped version " << version << ", want " << want;
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

// The range pass runs 16 lanes at a time plus a scalar tail: the extremes placed in each lane, in the tail and at a
// chunk's last element must all be found (the scale and zero point equal the scalar reference's).
TEST(OpsQuant, DynamicQuantizeRangeFindsExtremesInEveryLane) {
  const int64_t n = 16384 * 2 + 16 * 3 + 7;
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
  ASSERT_TRUE(Compile(b, &c));
  std::vector<int64_t> places = {n - 1, n - 7, 16383, 16384, 0};
  for (int64_t lane = 0; lane < 16; ++lane) places.push_back(16 * 37 + lane);
  for (int64_t at : places) {
    for (int sign = 0; sign < 2; ++sign) {
      std::vector<float> x = UniformFloats(n, 11, -1.f, 1.f);
      x[static_cast<size_t>(at)] = sign ? 9.5f : -7.25f;
      std::vector<uint8_t> q(static_cast<size_t>(n), 99), want_q;
      float s = 0, want_s = 0;
      uint8_t z = 7, want_z = 0;
      ASSERT_TRUE(c.exec->Run({x.data()}, {q.data(), &s, &z}).ok);
      RefDynamicQuantize(x, &want_q, &want_s, &want_z);
      EXPECT_EQ(s, want_s) << at << " " << sign;
      EXPECT_EQ(z, want_z) << at << " " << sign;
      EXPECT_EQ(q, want_q) << at << " " << sign;
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

// See GatheredRowIsOneAvx2StepOverThatRow below.
void CheckGatheredRow(const std::string& isa) {
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
    ASSERT_TRUE(Compile(b, &c, isa));
    if (isa == "avx2") {
      ASSERT_EQ(c.parsed.steps.size(), 1u);
      EXPECT_EQ(c.parsed.steps[0].kind, StepKind::kMatMulInt8Avx2);
    }
    const Step& mm = c.parsed.steps[0];
    EXPECT_TRUE(mm.kind == StepKind::kMatMulInt8Avx2 || mm.kind == StepKind::kMatMulInt8) << isa;
    EXPECT_EQ(mm.ops[0].dims, (Dims{1, K})) << isa;
    EXPECT_EQ(Numel(mm.ops[2].dims), N) << isa << ": the product has one row";
    std::vector<uint8_t> a(static_cast<size_t>(S * K));
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i % 5 ? 255 : i % 256);
    std::vector<float> y(static_cast<size_t>(N));
    ASSERT_TRUE(c.exec->Run({a.data()}, {y.data()}).ok);
    const int64_t r = index < 0 ? index + S : index;
    for (int64_t j = 0; j < N; ++j) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += (int32_t{a[r * K + k]} - az) * w[k * N + j];
      volatile float scaled = static_cast<float>(acc) * ws;
      EXPECT_EQ(y[j], scaled + bias[j]) << isa << " index " << index << " column " << j;
    }
  }
}

// a [1, 5, K] uint8 -> MatMulInteger -> Cast -> Mul -> Gather(axis 1, one index) -> Add(bias [N]): for a no-VNNI
// target one kMatMulInt8Avx2 step over that row alone (a language model's head at the last position), exact. On
// this machine's own target (oneDNN's kMatMulInt8 with VNNI) the product is over that row alone too.
TEST(OpsQuant, GatheredRowIsOneAvx2StepOverThatRow) {
  if (!int8gemm::Available()) GTEST_SKIP() << "no AVX2";
  for (const char* isa : {"avx2", ""}) CheckGatheredRow(isa);
}

// x [1, C, H, W] float -> DynamicQuantizeLinear -> ConvInteger(q, W uint8 with zero point 143, zq; 3x3, padding,
// dilation) -> Cast -> Mul(s * ws) -> Add(bias [C, 1, 1]) -> Relu: one int8 convolution step (w - 143 leaves int8:
// shifted weights and window sums with VNNI, else weights in parts along the input channels), equal to the int32
// reference bit for bit, padding adding 0.
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
    for (const Step& s : c.parsed.steps)
      int8_steps += s.kind == StepKind::kConvInt8 || s.kind == StepKind::kConvInt8Avx2;
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

// ConvInteger's uint8 (or int8) weights with zero points 0, 128 and 255 (and an int8 one), weights at 0 and 255,
// a constant or dynamic source zero point, padding, strides, dilations and spatial ranks 1 to 3: one int8
// convolution step equal to the exact int32 reference after Cast, Mul, bias Add and Relu, bit for bit. With VNNI
// the weights that leave int8 minus their zero point are stored once, shifted (the step's trailing correction
// int), and the window sums add the rest; without it (CTest's aotcpu_int8_avx2) they are split into parts.
PostOp EltwisePostOpForTest(uint32_t alg) {
  PostOp p;
  p.kind = PostOp::kEltwise;
  p.alg = alg;
  return p;
}

struct ConvCase {
  int64_t rank, c, oc, size, stride, dil, pad_lo, pad_hi;
  bool u8w;
  int32_t wz;
  int xz_kind;  // 0 dynamic (DynamicQuantizeLinear), 1 constant 0 (absent), 2 constant 200
};

TEST(OpsQuant, ConvIntegerExtremeWeightsAreExact) {
  const std::vector<ConvCase> cases = {
      {2, 5, 7, 9, 1, 1, 1, 1, true, 0, 0},    {2, 5, 7, 9, 1, 2, 2, 2, true, 255, 0},
      {2, 6, 9, 11, 2, 1, 1, 0, true, 128, 0}, {2, 19, 17, 10, 2, 3, 3, 2, true, 0, 2},
      {1, 4, 6, 13, 1, 2, 2, 1, true, 255, 1}, {3, 3, 5, 6, 1, 1, 1, 1, true, 7, 0},
      {2, 70, 33, 7, 1, 1, 1, 1, true, 0, 0},  {2, 8, 5, 8, 1, 1, 0, 0, false, -100, 2},
  };
  // This machine's target, then "avx2" (no VNNI: weights that need parts run whole on kConvInt8Avx2).
  for (const std::string isa : {"", "avx2"})
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    CompileOptions target;
    target.isa = isa;
    const bool vnni = Int8ProductsExact(target), own = OwnInt8Conv(target);
    const ConvCase& k = cases[ci];
    const int64_t r = k.rank, C = k.c, OC = k.oc, S = k.size, K = 3;
    Dims xd = {1, C}, wdims = {OC, C}, yd = {1, OC};
    int64_t in_n = 1, out_n = 1, ks = 1;
    const int64_t o = (S + k.pad_lo + k.pad_hi - k.dil * (K - 1) - 1) / k.stride + 1;
    for (int64_t i = 0; i < r; ++i) {
      xd.push_back(S), wdims.push_back(K), yd.push_back(o);
      in_n *= S, out_n *= o, ks *= K;
    }
    std::vector<uint8_t> w(static_cast<size_t>(OC * C * ks));
    for (size_t i = 0; i < w.size(); ++i)  // 0 and 255 (-128 and 127 signed) at every fifth, the rest spread
      w[i] = i % 5 == 0 ? 0 : i % 5 == 1 ? 255 : static_cast<uint8_t>(i * 37 + ci);
    if (!k.u8w)
      for (uint8_t& v : w) v = static_cast<uint8_t>(v ^ 0x80);  // as int8: 0 -> -128, 255 -> 127
    const uint8_t wz_byte = static_cast<uint8_t>(k.wz);
    const float ws = 0.0173f, one = 1.f;
    const uint8_t xz_const = k.xz_kind == 2 ? 200 : 0;
    const std::vector<float> bias = UniformFloats(OC, 5 + static_cast<uint32_t>(ci), -30.f, 30.f);
    GraphBuilder b;
    b.Input("x", xd);
    if (k.xz_kind == 0) {
      b.Out("q", xd);
      b.Out("s", {});
      b.Out("z", {});
      b.g.v(b.g.Find("q")).dtype = kU8;
      b.g.v(b.g.Find("z")).dtype = kU8;
    } else {
      b.g.v(b.g.Find("x")).dtype = kU8;
      Const(b, "z", kU8, {}, &xz_const);
      Const(b, "s", kF32, {}, &one);
    }
    Const(b, "w", k.u8w ? kU8 : kI8, wdims, w.data());
    Const(b, "wz", k.u8w ? kU8 : kI8, {}, &wz_byte);
    Const(b, "ws", kF32, {}, &ws);
    Dims bd = {OC};
    for (int64_t i = 0; i < r; ++i) bd.push_back(1);
    b.F32("bias", bd, bias);
    for (const char* v : {"acc", "accf", "scaled", "biased", "y"}) b.Out(v, yd);
    b.g.v(b.g.Find("acc")).dtype = kI32;
    b.Out("scale", {});
    if (k.xz_kind == 0) b.N("DynamicQuantizeLinear", {"x"}, {"q", "s", "z"}, 11);
    Node& conv = b.N("ConvInteger", {k.xz_kind == 0 ? "q" : "x", "w", k.xz_kind == 1 ? "" : "z", "wz"}, {"acc"}, 10);
    Dims pads(static_cast<size_t>(r), k.pad_lo);
    pads.insert(pads.end(), static_cast<size_t>(r), k.pad_hi);
    conv.attrs["pads"] = IntsA(pads);
    conv.attrs["strides"] = IntsA(Dims(static_cast<size_t>(r), k.stride));
    conv.attrs["dilations"] = IntsA(Dims(static_cast<size_t>(r), k.dil));
    b.N("Cast", {"acc"}, {"accf"}, 13).attrs["to"] = IntA(kF32);
    b.N("Mul", {"s", "ws"}, {"scale"}, 14);
    b.N("Mul", {"accf", "scale"}, {"scaled"}, 14);
    b.N("Add", {"scaled", "bias"}, {"biased"}, 14);
    b.N("Relu", {"biased"}, {"y"}, 14);
    b.Output("y");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c, isa)) << ci;
    int int8_steps = 0, shifted = 0, whole = 0;
    for (const Step& s : c.parsed.steps) {
      int8_steps += s.kind == StepKind::kConvInt8 || s.kind == StepKind::kConvInt8Avx2;
      shifted += s.kind == StepKind::kConvInt8 && s.ints.size() == static_cast<size_t>(3 + 4 * r);
      whole += s.kind == StepKind::kConvInt8Avx2;
    }
    EXPECT_EQ(int8_steps, 1) << ci;
    // Shifted exactly when the target has exact products and w - wz leaves int8 (here: all but zero point 128);
    // without VNNI every case's weights leave [-64, 64] and run whole on our own kernel.
    const bool leaves = k.u8w ? k.wz != 128 : true;
    EXPECT_EQ(shifted, vnni && leaves ? 1 : 0) << isa << " " << ci;
    EXPECT_EQ(whole, own ? 1 : 0) << isa << " " << ci;

    // The quantized source and its zero point, as the graph computes them.
    std::vector<float> xf = UniformFloats(C * in_n, 17 + static_cast<uint32_t>(ci), -1.f, 4.f);
    std::vector<uint8_t> q(static_cast<size_t>(C * in_n));
    float s = 1.f;
    uint8_t z = xz_const;
    if (k.xz_kind == 0) {
      RefDynamicQuantize(xf, &q, &s, &z);
    } else {
      for (size_t i = 0; i < q.size(); ++i) q[i] = i % 7 == 0 ? 255 : i % 7 == 1 ? 0 : static_cast<uint8_t>(i * 53);
    }
    std::vector<float> y(static_cast<size_t>(OC * out_n));
    const void* in = k.xz_kind == 0 ? static_cast<const void*>(xf.data()) : static_cast<const void*>(q.data());
    ASSERT_TRUE(c.exec->Run({in}, {y.data()}).ok) << ci;
    const float scale = s * ws;
    const int64_t D = r == 3 ? S : 1, H = r >= 2 ? S : 1, W = S, OD = r == 3 ? o : 1, OH = r >= 2 ? o : 1;
    const int64_t KD = r == 3 ? K : 1, KH = r >= 2 ? K : 1;
    size_t wrong = 0;
    for (int64_t oc = 0; oc < OC; ++oc)
      for (int64_t od = 0; od < OD; ++od)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < o; ++ow) {
            int32_t acc = 0;
            for (int64_t ic = 0; ic < C; ++ic)
              for (int64_t kd = 0; kd < KD; ++kd)
                for (int64_t kh = 0; kh < KH; ++kh)
                  for (int64_t kw = 0; kw < K; ++kw) {
                    const int64_t id = od * k.stride - (r == 3 ? k.pad_lo : 0) + kd * k.dil;
                    const int64_t ih = oh * k.stride - (r >= 2 ? k.pad_lo : 0) + kh * k.dil;
                    const int64_t iw = ow * k.stride - k.pad_lo + kw * k.dil;
                    if (id < 0 || id >= D || ih < 0 || ih >= H || iw < 0 || iw >= W) continue;  // adds (xz - xz) * w
                    const uint8_t wb = w[static_cast<size_t>((((oc * C + ic) * KD + kd) * KH + kh) * K + kw)];
                    const int32_t wv = k.u8w ? int32_t{wb} : int32_t{static_cast<int8_t>(wb)};
                    acc += (int32_t{q[static_cast<size_t>(((ic * D + id) * H + ih) * W + iw)]} - z) * (wv - k.wz);
                  }
            volatile float scaled = static_cast<float>(acc) * scale;
            volatile float biased = scaled + bias[static_cast<size_t>(oc)];
            const float want = std::max(0.f, static_cast<float>(biased));
            const float got = y[static_cast<size_t>(((oc * OD + od) * OH + oh) * o + ow)];
            if (got != want && wrong++ < 5)
              ADD_FAILURE() << "case " << ci << " at " << oc << "," << od << "," << oh << "," << ow << ": " << got
                            << " want " << want;
          }
    EXPECT_EQ(wrong, 0u) << "case " << ci;

    // A damaged shifted or own-kernel step is refused by its builder with the reason, never run.
    if (whole == 1) {
      const char* const want[] = {"weight correction", "not run by the window-sum epilogue", "column sums",
                                  "do not give the destination's", "stride out of range", "needs a uint8 src",
                                  "post-op operand index out of range"};
      for (int damage = 0; damage < 7; ++damage) {
        Program p = c.parsed;
        std::vector<WeightRef> wr;
        for (const TensorInput& t : c.cg.weights) wr.push_back({t.bytes.data(), t.bytes.size()});
        for (Step& st : p.steps) {
          if (st.kind != StepKind::kConvInt8Avx2) continue;
          if (damage == 0) st.ints.back() = 300;
          if (damage == 1) st.post_ops.push_back(EltwisePostOpForTest(dnnl_eltwise_logistic));
          if (damage == 2) st.ops[2].dims[0] -= 1;   // one column sum short
          if (damage == 3) st.ints[2] += 2;         // a wider kernel than the destination was computed for
          if (damage == 4) st.ints[2 + r] = 0;      // stride 0
          if (damage == 5) st.ops[0].dtype = kI8;
          if (damage == 6) st.post_ops[0].operand = 3;
        }
        std::unique_ptr<Executor> e;
        CheckResult rr = Executor::Create(p, wr, 1, &e);
        EXPECT_FALSE(rr.ok) << damage;
        EXPECT_NE(rr.reason.find(want[damage]), std::string::npos) << damage << ": " << rr.reason;
      }
    }
    if (shifted == 0) continue;
    for (int damage = 0; damage < 3; ++damage) {
      Program p = c.parsed;
      std::vector<WeightRef> wr;
      for (const TensorInput& t : c.cg.weights) wr.push_back({t.bytes.data(), t.bytes.size()});
      for (Step& st : p.steps) {
        if (st.kind != StepKind::kConvInt8) continue;
        if (damage == 0) st.ints.back() = 0;
        if (damage == 1) st.ints.back() = 300;
        if (damage == 2) st.post_ops.push_back(EltwisePostOpForTest(dnnl_eltwise_logistic));
      }
      std::unique_ptr<Executor> e;
      CheckResult rr = Executor::Create(p, wr, 1, &e);
      EXPECT_FALSE(rr.ok) << damage;
      EXPECT_NE(rr.reason.find(damage < 2 ? "weight correction" : "not run by the window-sum epilogue"),
                std::string::npos) << rr.reason;
    }
  }
}

// A grouped ConvInteger is left to the CPU EP (its exact int8 kernels) with the reason.
TEST(OpsQuant, GroupedConvIntegerIsLeftToTheCpuEp) {
  const std::vector<uint8_t> w(4 * 2 * 9, 255);
  const uint8_t wz = 0;
  GraphBuilder b;
  b.Input("x", {1, 4, 5, 5});
  b.g.v(b.g.Find("x")).dtype = kU8;
  Const(b, "w", kU8, {4, 2, 3, 3}, w.data());
  Const(b, "wz", kU8, {}, &wz);
  b.Out("acc", {1, 4, 3, 3});
  b.g.v(b.g.Find("acc")).dtype = kI32;
  Node& n = b.N("ConvInteger", {"x", "w", "", "wz"}, {"acc"}, 10);
  n.attrs["group"] = IntA(2);
  std::string why;
  EXPECT_FALSE(IsNodeSupported(b.g, n, &why));
  EXPECT_NE(why.find("only group 1"), std::string::npos) << why;
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

// ---- QDQ (nn_qdq.cc): QuantizeLinear, DequantizeLinear -> Conv -> QuantizeLinear ---------------------------------

// ONNX Runtime's QuantizeLinear: round(x / scale) half to even, plus the zero point, saturated; NaN gives the minimum.
template <typename T>
T RefQuantize(float x, float scale, int32_t zp) {
  const float lo = std::is_signed<T>::value ? -128.f : 0.f, hi = std::is_signed<T>::value ? 127.f : 255.f;
  if (std::isnan(x)) return static_cast<T>(lo);
  return static_cast<T>(std::min(hi, std::max(lo, std::nearbyint(x / scale) + static_cast<float>(zp))));
}

TEST(OpsQuantQdq, QuantizeLinearMatchesOnnxRuntime) {
  const float scale = 0.25f;
  std::vector<float> x = UniformFloats(16384 * 5 + 7, 11, -40.f, 40.f);
  const float special[] = {0.125f, 0.375f, -0.125f, -0.375f, 1e9f, -1e9f, std::nanf(""), 0.f};  // ties, saturation, NaN
  std::copy(std::begin(special), std::end(special), x.begin());
  const int64_t n = static_cast<int64_t>(x.size());
  for (uint32_t dt : {kU8, kI8}) {
    const uint8_t zu = 130;
    const int8_t zs = -3;
    GraphBuilder b;
    b.Input("x", {n});
    Const(b, "s", kF32, {}, &scale);
    Const(b, "z", dt, {}, dt == kU8 ? static_cast<const void*>(&zu) : static_cast<const void*>(&zs));
    b.Out("q", {n});
    b.g.v(b.g.Find("q")).dtype = dt;
    b.N("QuantizeLinear", {"x", "s", "z"}, {"q"}, 13);
    b.Output("q");
    Compiled c;
    ASSERT_TRUE(Compile(b, &c));
    ASSERT_EQ(c.parsed.steps.size(), 1u);
    EXPECT_EQ(c.parsed.steps[0].kind, StepKind::kQuantize);
    std::vector<uint8_t> q(x.size());
    ASSERT_TRUE(c.exec->Run({x.data()}, {q.data()}).ok);
    for (size_t i = 0; i < x.size(); ++i) {
      const uint8_t want = dt == kU8 ? RefQuantize<uint8_t>(x[i], scale, zu)
                                     : static_cast<uint8_t>(RefQuantize<int8_t>(x[i], scale, zs));
      ASSERT_EQ(q[i], want) << dt << " element " << i << " x " << x[i];
    }
  }
}

struct QdqConvCase {
  int64_t c, oc, k, group, stride, pad;
  bool bias, per_channel, extreme, float_out;  // float_out: a DequantizeLinear after the QuantizeLinear (QDQ pair)
  uint8_t xz, yz;
  int64_t hw = 0;  // the source's height and width; 0: 12 x 11
};

// Q(x) -> DQ -> Conv(DQ(w int8 per channel), DQ(b int32)) -> Q [-> DQ]: one kQConv step, no dequantized weights in
// the program, and the result equal to the exact int32 sum requantized once (QLinearConv's arithmetic). `isa`
// "avx2" compiles for a CPU without VNNI: a group-1 convolution whose weights oneDNN would split runs whole on
// kQConvAvx2 instead (with the same arithmetic).
void CheckQdqConv(const QdqConvCase& t, const std::string& isa = "") {
  SCOPED_TRACE("isa '" + isa + "' c " + std::to_string(t.c) + " oc " + std::to_string(t.oc) + " group " +
               std::to_string(t.group));
  const int64_t H = t.hw ? t.hw : 12, W = t.hw ? t.hw : 11, icg = t.c / t.group;
  const int64_t OH = (H + 2 * t.pad - t.k) / t.stride + 1, OW = (W + 2 * t.pad - t.k) / t.stride + 1;
  std::vector<int8_t> w(static_cast<size_t>(t.oc * icg * t.k * t.k));
  for (size_t i = 0; i < w.size(); ++i)  // extreme: every product at its largest, so int16 pair sums would saturate
    w[i] = t.extreme ? static_cast<int8_t>(i % 3 == 0 ? -128 : 127)
                     : static_cast<int8_t>(static_cast<int>((i * 53) % 255) - 127);
  std::vector<float> ws(static_cast<size_t>(t.oc)), bs(static_cast<size_t>(t.oc));
  std::vector<int32_t> bq(static_cast<size_t>(t.oc)), bz(static_cast<size_t>(t.oc), 0);
  std::vector<int8_t> wz(static_cast<size_t>(t.oc), 0);
  const float xs = 0.02f, ys = t.extreme ? 0.02f * 0.001f * 2500.f : 0.35f;
  for (int64_t o = 0; o < t.oc; ++o) {
    ws[static_cast<size_t>(o)] = t.per_channel ? 0.001f + 0.0005f * static_cast<float>(o % 7) : 0.001f;
    bs[static_cast<size_t>(o)] = xs * ws[static_cast<size_t>(o)];
    bq[static_cast<size_t>(o)] = static_cast<int32_t>((o * 7919) % 20001) - 10000;
  }
  const int64_t nws = t.per_channel ? t.oc : 1;
  GraphBuilder b;
  b.Input("x", {1, t.c, H, W});
  Const(b, "xs", kF32, {}, &xs);
  Const(b, "xz", kU8, {}, &t.xz);
  Const(b, "wq", kI8, {t.oc, icg, t.k, t.k}, w.data());
  Const(b, "ws", kF32, {nws}, ws.data());
  Const(b, "wz", kI8, {nws}, wz.data());
  Const(b, "bq", kI32, {t.oc}, bq.data());
  Const(b, "bs", kF32, {t.oc}, bs.data());
  Const(b, "bz", kI32, {t.oc}, bz.data());
  Const(b, "ys", kF32, {}, &ys);
  Const(b, "yz", kU8, {}, &t.yz);
  b.Out("xq", {1, t.c, H, W});
  b.g.v(b.g.Find("xq")).dtype = kU8;
  b.Out("xd", {1, t.c, H, W});
  b.Out("wd", {t.oc, icg, t.k, t.k});
  b.Out("bd", {t.oc});
  b.Out("y", {1, t.oc, OH, OW});
  b.Out("yq", {1, t.oc, OH, OW});
  b.g.v(b.g.Find("yq")).dtype = kU8;
  b.Out("out", {1, t.oc, OH, OW});
  b.N("QuantizeLinear", {"x", "xs", "xz"}, {"xq"}, 13);
  b.N("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"}, 13);
  b.N("DequantizeLinear", {"wq", "ws", "wz"}, {"wd"}, 13).attrs["axis"] = IntA(0);
  if (t.bias) b.N("DequantizeLinear", {"bq", "bs", "bz"}, {"bd"}, 13).attrs["axis"] = IntA(0);
  Node& conv = b.N("Conv", {"xd", "wd", t.bias ? "bd" : ""}, {"y"}, 11);
  if (!t.bias) conv.inputs.pop_back();
  conv.attrs["group"] = IntA(t.group);
  conv.attrs["strides"] = IntsA({t.stride, t.stride});
  conv.attrs["pads"] = IntsA({t.pad, t.pad, t.pad, t.pad});
  b.N("QuantizeLinear", {"y", "ys", "yz"}, {"yq"}, 13);
  if (t.float_out) {
    b.N("DequantizeLinear", {"yq", "ys", "yz"}, {"out"}, 13);
    b.Output("out");
  } else {
    b.Output("yq");
  }
  Compiled c;
  ASSERT_TRUE(Compile(b, &c, isa));
  int qconv = 0, own = 0;
  for (const Step& s : c.parsed.steps) {
    qconv += s.kind == StepKind::kQConv || s.kind == StepKind::kQConvAvx2;
    own += s.kind == StepKind::kQConvAvx2;
    EXPECT_NE(s.kind, StepKind::kDequantize) << "step " << s.name;
    EXPECT_NE(s.kind, StepKind::kConv) << "step " << s.name;
  }
  EXPECT_EQ(qconv, 1);
  // The test's weights (|w| up to 127) need parts; group-1 convolutions with windows of at least 64 values run
  // whole on kQConvAvx2, the others (depthwise, grouped, short windows) on kQConv.
  if (isa == "avx2" && int8gemm::Available()) EXPECT_EQ(own, t.group == 1 && t.c * t.k * t.k >= 64 ? 1 : 0);
  for (size_t i = 0; i < c.parsed.steps.size(); ++i)  // oneDNN's reference kernel is 10-100x slower (issue 26)
    if (c.parsed.steps[i].kind == StepKind::kQConv)
      EXPECT_NE(c.exec->step_impl(i).compare(0, 3, "ref"), 0) << "step " << i << " runs " << c.exec->step_impl(i);
  for (const TensorInput& wt : c.cg.weights)  // the weights stay int8: no float copy of them in the binary
    EXPECT_LT(wt.bytes.size(), w.size() * 4 + 4096u);
  std::vector<float> x = UniformFloats(t.c * H * W, 23, -1.f, 5.f);
  if (t.extreme) std::fill(x.begin(), x.end(), 100.f);
  std::vector<float> out(static_cast<size_t>(t.oc * OH * OW));
  std::vector<uint8_t> outq(out.size());
  ASSERT_TRUE(c.exec->Run({x.data()}, {t.float_out ? static_cast<void*>(out.data()) : outq.data()}).ok);
  std::vector<int32_t> xq(x.size());
  for (size_t i = 0; i < x.size(); ++i) xq[i] = RefQuantize<uint8_t>(x[i], xs, t.xz);
  const int64_t ocg = t.oc / t.group;
  for (int64_t o = 0; o < t.oc; ++o)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        int64_t acc = t.bias ? bq[static_cast<size_t>(o)] : 0;
        const int64_t g0 = o / ocg * icg;
        for (int64_t ci = 0; ci < icg; ++ci)
          for (int64_t ki = 0; ki < t.k; ++ki)
            for (int64_t kj = 0; kj < t.k; ++kj) {
              const int64_t ii = i * t.stride - t.pad + ki, jj = j * t.stride - t.pad + kj;
              if (ii < 0 || ii >= H || jj < 0 || jj >= W) continue;  // the padding reads as the zero point
              acc += (xq[static_cast<size_t>(((g0 + ci) * H + ii) * W + jj)] - t.xz) *
                     int64_t{w[static_cast<size_t>(((o * icg + ci) * t.k + ki) * t.k + kj)]};
            }
        const float scale = xs * ws[static_cast<size_t>(o)] / ys;
        const float q = std::min(255.f, std::max(0.f, std::nearbyint(static_cast<float>(acc) * scale) + t.yz));
        const size_t at = static_cast<size_t>((o * OH + i) * OW + j);
        if (t.float_out)
          ASSERT_EQ(out[at], (q - t.yz) * ys) << o << "," << i << "," << j << " acc " << acc;
        else
          ASSERT_EQ(outq[at], static_cast<uint8_t>(q)) << o << "," << i << "," << j << " acc " << acc;
      }
}

TEST(OpsQuantQdq, QdqConvIsOneInt8StepEqualToTheInt32Reference) {
  // c, oc, k, group, stride, pad, bias, per_channel, extreme, float_out, xz, yz
  CheckQdqConv({8, 16, 3, 1, 1, 1, true, true, false, true, 111, 128});    // 3x3, the QDQ pair written as float
  CheckQdqConv({8, 16, 3, 1, 1, 1, true, true, false, false, 111, 128});   // u8 result
  CheckQdqConv({16, 16, 3, 16, 2, 1, true, true, false, true, 97, 3});     // depthwise, stride 2
  CheckQdqConv({24, 40, 1, 1, 1, 0, false, false, false, true, 0, 0});     // 1x1, no bias, per tensor, no zero points
  CheckQdqConv({12, 12, 3, 3, 1, 1, true, true, false, false, 5, 200});    // grouped
}

// The same cases compiled for a CPU without VNNI: group-1 convolutions on kQConvAvx2 (whole weights), the others
// (depthwise, grouped) on kQConv, every value equal to the int32 reference.
TEST(OpsQuantQdq, QdqConvWithoutVnniRunsWholeWeightsEqualToTheInt32Reference) {
  if (!int8gemm::Available()) GTEST_SKIP() << "no AVX2";
  for (int threads : {1, 2}) {
    OmpThreadsScope scope(threads);
    // c, oc, k, group, stride, pad, bias, per_channel, extreme, float_out, xz, yz, hw
    CheckQdqConv({8, 16, 3, 1, 1, 1, true, true, false, true, 111, 128}, "avx2");
    CheckQdqConv({8, 16, 3, 1, 1, 1, true, true, false, false, 111, 128}, "avx2");
    CheckQdqConv({16, 16, 3, 16, 2, 1, true, true, false, true, 97, 3}, "avx2");
    CheckQdqConv({24, 40, 1, 1, 1, 0, false, false, false, true, 0, 0}, "avx2");
    CheckQdqConv({12, 12, 3, 3, 1, 1, true, true, false, false, 5, 200}, "avx2");
    CheckQdqConv({8, 19, 3, 1, 2, 1, true, true, false, false, 0, 0}, "avx2");  // odd OC, stride 2, zero points 0
    CheckQdqConv({3, 16, 3, 1, 2, 1, true, true, false, true, 9, 128}, "avx2");  // an RGB stem: split (short windows)
    CheckQdqConv({80, 12, 1, 1, 1, 0, true, true, false, true, 3, 128, 5}, "avx2");  // 1x1 on 5x5
    CheckQdqConv({96, 24, 1, 1, 1, 0, true, true, false, true, 111, 128, 1}, "avx2");
    CheckQdqConv({32, 16, 3, 1, 1, 1, false, false, true, true, 0, 128}, "avx2");   // extremes
    CheckQdqConv({32, 16, 3, 1, 1, 1, true, false, true, false, 255, 128}, "avx2");  // extremes, u8 result
  }
}

// 1x1 convolutions over a 1x1 input (ppocr_v4_det_qdq's squeeze-excitation blocks: 96 -> 24 -> 96 channels, and
// 24 -> 6): oneDNN's brgconv_1x1 chooses its weights block by thread count and binds neither choice at the other
// count, so a layout chosen at one count ran ref_int8 at the other. Values as above, and no reference kernel.
TEST(OpsQuantQdq, QdqConvOnOneByOneInputBindsAFastKernelAtEveryThreadCount) {
  for (int threads : {1, 2}) {
    OmpThreadsScope scope(threads);
    // c, oc, k, group, stride, pad, bias, per_channel, extreme, float_out, xz, yz, hw
    CheckQdqConv({96, 24, 1, 1, 1, 0, true, true, false, true, 111, 128, 1});
    CheckQdqConv({24, 96, 1, 1, 1, 0, true, true, false, true, 0, 128, 1});
    CheckQdqConv({24, 6, 1, 1, 1, 0, true, true, false, false, 7, 100, 1});
    CheckQdqConv({6, 24, 1, 1, 1, 0, false, true, false, true, 3, 128, 1});
  }
}

// Products of 255 and -128/127 in every tap: oneDNN without VNNI (CTest aotcpu_int8_avx2 runs this at AVX2) sums
// pairs in int16 and would saturate; the split weights (and the depthwise kernels' widening) keep it exact.
TEST(OpsQuantQdq, QdqConvExtremesAreExactWithoutVnni) {
  CheckQdqConv({32, 16, 3, 1, 1, 1, false, false, true, true, 0, 128});
  CheckQdqConv({32, 32, 3, 32, 1, 1, false, false, true, true, 0, 128});  // depthwise, whole weights
}

// DequantizeLinear parameters that ONNX does not allow are refused with the tensor and the reason, and not folded.
TEST(OpsQuantQdq, BadDequantizeParametersAreRefusedWithAReason) {
  const int8_t wq[6] = {1, 2, 3, 4, 5, 6};
  const float scales[3] = {0.5f, 0.25f, 0.125f};
  const uint8_t uz[3] = {0, 0, 0};
  struct Bad {
    Dims scale_dims;
    int64_t axis;
    bool u8_zero_point;
    const char* expect;
  };
  const Bad cases[] = {
      {{3}, 0, false, "scale 's' has 3 values; axis 0 of input 'w' has 2"},
      {{3}, 2, false, "axis 2 is out of range for input 'w' of rank 2"},
      {{3}, -3, false, "axis -3 is out of range"},
      {{3}, 1, true, "zero point 'z' has element type 2, input 'w' 3"},
  };
  for (const Bad& bad : cases) {
    GraphBuilder b;
    Const(b, "w", kI8, {2, 3}, wq);
    Const(b, "s", kF32, bad.scale_dims, scales);
    Const(b, "z", bad.u8_zero_point ? kU8 : kI8, bad.scale_dims, uz);
    b.Out("y", {2, 3});
    b.N("DequantizeLinear", {"w", "s", "z"}, {"y"}, 13).attrs["axis"] = IntA(bad.axis);
    b.Output("y");
    std::string why;
    EXPECT_FALSE(IsNodeSupported(b.g, b.g.nodes[0], &why)) << bad.expect;
    EXPECT_NE(why.find(bad.expect), std::string::npos) << why;
    Graph g = b.g;
    std::vector<bool> folded;
    ASSERT_TRUE(FoldConstants(&g, &folded).ok);
    EXPECT_FALSE(folded[0]) << bad.expect;
  }
  // The valid per-axis one is folded to float (y = (w - 0) * scale[axis 1]).
  GraphBuilder b;
  Const(b, "w", kI8, {2, 3}, wq);
  Const(b, "s", kF32, {3}, scales);
  b.Out("y", {2, 3});
  b.N("DequantizeLinear", {"w", "s"}, {"y"}, 13).attrs["axis"] = IntA(1);
  b.Output("y");
  std::vector<bool> folded;
  ASSERT_TRUE(FoldConstants(&b.g, &folded).ok);
  ASSERT_TRUE(folded[0]);
  const float* y = static_cast<const float*>(b.g.v(b.g.Find("y")).data);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], static_cast<float>(wq[i]) * scales[i % 3]) << i;
}

// A damaged kQConv step (scales of the wrong length) is refused at load with a message, not run.
TEST(OpsQuantQdq, DamagedQConvStepIsRefused) {
  GraphBuilder unused;
  (void)unused;
  const float xs = 0.02f, ys = 0.5f, ws = 0.001f;
  const uint8_t xz = 3, yz = 7;
  const int8_t w[4 * 2] = {1, -2, 3, -4, 5, -6, 7, -8}, wz = 0;
  GraphBuilder b;
  b.Input("x", {1, 2, 5, 5});
  Const(b, "xs", kF32, {}, &xs);
  Const(b, "xz", kU8, {}, &xz);
  Const(b, "wq", kI8, {4, 2, 1, 1}, w);
  Const(b, "ws", kF32, {}, &ws);
  Const(b, "wz", kI8, {}, &wz);
  Const(b, "ys", kF32, {}, &ys);
  Const(b, "yz", kU8, {}, &yz);
  b.Out("xq", {1, 2, 5, 5});
  b.g.v(b.g.Find("xq")).dtype = kU8;
  b.Out("xd", {1, 2, 5, 5});
  b.Out("wd", {4, 2, 1, 1});
  b.Out("y", {1, 4, 5, 5});
  b.Out("yq", {1, 4, 5, 5});
  b.g.v(b.g.Find("yq")).dtype = kU8;
  b.N("QuantizeLinear", {"x", "xs", "xz"}, {"xq"}, 13);
  b.N("DequantizeLinear", {"xq", "xs", "xz"}, {"xd"}, 13);
  b.N("DequantizeLinear", {"wq", "ws", "wz"}, {"wd"}, 13);
  b.N("Conv", {"xd", "wd"}, {"y"}, 11);
  b.N("QuantizeLinear", {"y", "ys", "yz"}, {"yq"}, 13);
  b.Output("yq");
  Compiled c;
  ASSERT_TRUE(Compile(b, &c));
  Program p = c.parsed;
  bool found = false;
  for (Step& s : p.steps)
    if (s.kind == StepKind::kQConv) {
      found = true;
      s.ops[6].dims = {3};
      s.ops[6].strides = {1};
    }
  ASSERT_TRUE(found);
  std::vector<WeightRef> wr;
  for (const TensorInput& t : c.cg.weights) wr.push_back({t.bytes.data(), t.bytes.size()});
  std::unique_ptr<Executor> exec;
  const CheckResult r = Executor::Create(p, std::move(wr), 1, &exec);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("scales must be plain float [OC]"), std::string::npos) << r.reason;

  // The same convolution with weights that need parts, compiled for a CPU without VNNI: one kQConvAvx2 step; damaged
  // copies of it are refused by its builder with the reason.
  if (!int8gemm::Available()) return;
  std::vector<int8_t> big(4 * 64);  // 64 input channels: long enough windows for kQConvAvx2
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int8_t>(i % 2 ? 127 - i % 50 : -100);
  // The same graph with 64 input channels and weights that need parts.
  GraphBuilder b2 = b;
  for (const char* v : {"x", "xq", "xd"}) b2.g.v(b2.g.Find(v)).dims = {1, 64, 5, 5};
  b2.g.v(b2.g.Find("wq")).dims = {4, 64, 1, 1};
  b2.g.v(b2.g.Find("wd")).dims = {4, 64, 1, 1};
  b2.g.v(b2.g.Find("wq")).data = big.data();
  Compiled own;
  ASSERT_TRUE(Compile(b2, &own, "avx2"));
  int at = -1;
  for (size_t i = 0; i < own.parsed.steps.size(); ++i)
    if (own.parsed.steps[i].kind == StepKind::kQConvAvx2) at = static_cast<int>(i);
  ASSERT_GE(at, 0);
  struct Damage {
    std::function<void(Step&)> apply;
    const char* expect;
  };
  const Damage damages[] = {
      {[](Step& s) { s.ops[6].dims = {3}, s.ops[6].strides = {1}; }, "the scales must be plain float [OC]"},
      {[](Step& s) { s.ops[1].dims = {s.ops[1].dims[0] - 1}; }, "filters of 64 values need"},
      {[](Step& s) { s.post_ops[0].alg = dnnl_eltwise_relu; }, "the first post-op must be the round half to even"},
      {[](Step& s) { s.post_ops.push_back(EltwisePostOp(dnnl_eltwise_relu, 0.f, 0.f)); },
       "an 8-bit dst takes no post-op after the round"},
      {[](Step& s) { s.ints[0] = 2; }, "groups 2 is not 1"},
      {[](Step& s) { s.ints[2 + 1] = 2; }, "do not give the destination's"},
      {[](Step& s) { s.ops[7] = s.ops[6]; }, "the bias must be plain int32 [OC]"},
      {[](Step& s) { s.ops[4].dtype = kU8; }, "zero point operand 4 must be one plain int32"},
  };
  for (const Damage& d : damages) {
    Program q = own.parsed;
    d.apply(q.steps[static_cast<size_t>(at)]);
    std::vector<WeightRef> wo;
    for (const TensorInput& t : own.cg.weights) wo.push_back({t.bytes.data(), t.bytes.size()});
    std::unique_ptr<Executor> e;
    const CheckResult rr = Executor::Create(q, std::move(wo), 1, &e);
    EXPECT_FALSE(rr.ok) << d.expect;
    EXPECT_NE(rr.reason.find(d.expect), std::string::npos) << rr.reason;
  }
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
