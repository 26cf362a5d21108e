// ConvInteger as ONNX Runtime's dynamic quantizer writes it (issue 26), on AotCpu in a JIT session and from its
// _ctx.onnx (embed 0 and 1): X f32 -> DynamicQuantizeLinear -> two ConvIntegers with uint8 weights at 0 and 255 and
// zero points 0 and 255 (w - wz leaves int8: with VNNI the weights are stored once, shifted, and window sums add the
// rest) -> Cast -> Mul(scale) -> Add(bias) -> Relu, the second one's result plus the first's (a residual Add the
// epilogue reads in the destination's layout). The outputs must equal the exact int32 reference, bit for bit.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "tests/onnx_build.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::onnx_build::AddFloats;
using epctx::onnx_build::AddUint8s;
using epctx::onnx_build::SetInt;
using epctx::onnx_build::SetInts;
using epctx::testing::AddNode;
using epctx::testing::AddTensorValueInfo;
using epctx::testing::NewModel;
using epctx::testing::Serialize;
using epctx::testing::TempDir;
using epctx::testing::WriteFile;

constexpr int kC = 6, kOC = 8, kH = 11, kW = 10;

struct ConvWeights {
  std::vector<uint8_t> w;  // [kOC, C, 3, 3]
  uint8_t wz = 0;
  float ws = 0;
  std::vector<float> bias;  // [kOC]
};

ConvWeights MakeConv(int cin, uint8_t wz, int salt) {
  ConvWeights c;
  c.wz = wz;
  c.ws = 0.0061f * static_cast<float>(salt + 1);
  for (int i = 0; i < kOC * cin * 9; ++i)
    c.w.push_back(i % 4 == 0 ? 0 : i % 4 == 1 ? 255 : static_cast<uint8_t>(i * 29 + salt * 7));
  for (int i = 0; i < kOC; ++i) c.bias.push_back(static_cast<float>((i * 13 + salt) % 9) - 4.f);
  return c;
}

// conv<i>: ConvInteger(q, W<i>, z, WZ<i>) -> Cast -> Mul(s * WS<i>) -> Add(B<i> [OC, 1, 1]) -> Relu -> r<i>.
void AddConv(onnx::GraphProto* g, int i, const ConvWeights& c, int cin) {
  const std::string s = std::to_string(i);
  AddUint8s(g, "W" + s, {kOC, cin, 3, 3}, c.w);
  AddUint8s(g, "WZ" + s, {}, {c.wz});
  AddFloats(g, "WS" + s, {}, {c.ws});
  AddFloats(g, "B" + s, {kOC, 1, 1}, c.bias);
  auto* conv = AddNode(g, "ConvInteger", "conv" + s, {"q", "W" + s, "z", "WZ" + s}, "acc" + s);
  SetInts(conv, "pads", {1, 1, 1, 1});
  SetInt(AddNode(g, "Cast", "cast" + s, {"acc" + s}, "accf" + s), "to", onnx::TensorProto::FLOAT);
  AddNode(g, "Mul", "scale" + s, {"s", "WS" + s}, "sc" + s);
  AddNode(g, "Mul", "mul" + s, {"accf" + s, "sc" + s}, "m" + s);
  AddNode(g, "Add", "bias" + s, {"m" + s, "B" + s}, "b" + s);
  AddNode(g, "Relu", "relu" + s, {"b" + s}, "r" + s);
}

onnx::ModelProto QuantConvModel(const ConvWeights& c0, const ConvWeights& c1) {
  onnx::ModelProto m = NewModel("quant_conv", 13);
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {1, kC, kH, kW});
  AddTensorValueInfo(g->add_output(), "r0", {1, kOC, kH, kW});
  AddTensorValueInfo(g->add_output(), "Y", {1, kOC, kH, kW});
  auto* dq = g->add_node();
  dq->set_op_type("DynamicQuantizeLinear");
  dq->set_name("dq");
  for (const char* o : {"q", "s", "z"}) dq->add_output(o);
  dq->add_input("X");
  AddConv(g, 0, c0, kC);
  AddConv(g, 1, c1, kC);
  AddNode(g, "Add", "residual", {"r1", "r0"}, "Y");
  return m;
}

// ONNX Runtime's DynamicQuantizeLinear, then ConvInteger in int32 (padding reads as the zero point: adds 0), Cast,
// the Mul by the scale, the bias Add and Relu, each rounded once.
std::vector<float> RefConv(const std::vector<uint8_t>& q, uint8_t z, float s, const ConvWeights& c) {
  const float scale = s * c.ws;
  std::vector<float> y(static_cast<size_t>(kOC * kH * kW));
  for (int o = 0; o < kOC; ++o)
    for (int i = 0; i < kH; ++i)
      for (int j = 0; j < kW; ++j) {
        int32_t acc = 0;
        for (int ci = 0; ci < kC; ++ci)
          for (int di = 0; di < 3; ++di)
            for (int dj = 0; dj < 3; ++dj) {
              const int ii = i + di - 1, jj = j + dj - 1;
              if (ii < 0 || jj < 0 || ii >= kH || jj >= kW) continue;
              acc += (int32_t{q[static_cast<size_t>((ci * kH + ii) * kW + jj)]} - z) *
                     (int32_t{c.w[static_cast<size_t>(((o * kC + ci) * 3 + di) * 3 + dj)]} - c.wz);
            }
        volatile float scaled = static_cast<float>(acc) * scale;
        volatile float biased = scaled + c.bias[static_cast<size_t>(o)];
        y[static_cast<size_t>((o * kH + i) * kW + j)] = std::max(0.f, static_cast<float>(biased));
      }
  return y;
}

using AotCpuQuantConv = epctx::testing::AotCpuSuite;

TEST_F(AotCpuQuantConv, ShiftedWeightsGiveTheExactResultJitAndFromContext) {
  const ConvWeights c0 = MakeConv(kC, 0, 0), c1 = MakeConv(kC, 255, 1);
  TempDir dir;
  const std::string path = dir / "model.onnx";
  WriteFile(path, Serialize(QuantConvModel(c0, c1)));
  const std::vector<int64_t> xd = {1, kC, kH, kW};
  std::vector<float> x(static_cast<size_t>(kC * kH * kW));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 41) % 97) / 13.f - 1.5f;
  // DynamicQuantizeLinear as ONNX Runtime computes it.
  float lo = 0, hi = 0;
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  const float s = hi == lo ? 1.f : (hi - lo) / 255.f;
  const uint8_t z = static_cast<uint8_t>(std::nearbyint(std::min(255.f, std::max(0.f, 0.f - lo / s))));
  std::vector<uint8_t> q(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    q[i] = static_cast<uint8_t>(std::min(255.f, std::max(0.f, std::nearbyint(x[i] / s) + z)));
  const std::vector<float> r0 = RefConv(q, z, s, c0), r1 = RefConv(q, z, s, c1);

  auto check = [&](Session& session, const std::string& what) {
    std::vector<Value> in;
    in.push_back(Value::CreateTensor(ElementType::FLOAT, x.data(), x.size() * 4, xd.data(), xd.size()));
    std::vector<Value> out = session.Run({"X"}, in, {"r0", "Y"});
    ASSERT_EQ(out.size(), 2u) << what;
    const float* a = out[0].GetTensorData<float>();
    const float* y = out[1].GetTensorData<float>();
    size_t wrong = 0;
    for (size_t i = 0; i < r0.size(); ++i) {
      volatile float sum = r1[i] + r0[i];
      wrong += a[i] != r0[i] || y[i] != sum;
      if (wrong && wrong < 4 && (a[i] != r0[i] || y[i] != sum))
        ADD_FAILURE() << what << " at " << i << ": r0 " << a[i] << " want " << r0[i] << ", Y " << y[i] << " want "
                      << static_cast<float>(sum);
    }
    EXPECT_EQ(wrong, 0u) << what;
  };

  CheckJitAndFromContext(path, dir, 2, check);
}

}  // namespace
}  // namespace epctx
