// Float16 graphs on AotCpu (issue 26): the float16 weights become float32 constants at compile time, values are
// computed in float32 (as ONNX Runtime's CPU EP does on x86), a Cast to float16 rounds, and float16 fused inputs and
// outputs are converted at the partition's edge. The model: X f32 -> Cast(to f16) -> Conv(f16 weights, bias)
// -> Relu -> Add(Z, a float16 graph input) -> A (a float16 graph output) and Cast(to f32) -> Y. AotCpu must take
// all of it in one partition, in a JIT session and from its _ctx.onnx (embed 0 and 1), and give the float32
// computation on the float16 weights: Y within float32 rounding of it, A within one float16 step of it.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/float16.h"
#include "epctx/epctx.h"
#include "tests/onnx_build.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::onnx_build::SetInt;
using epctx::onnx_build::SetInts;
using epctx::testing::AddNode;
using epctx::testing::AddTensorValueInfo;
using epctx::testing::NewModel;
using epctx::testing::Serialize;
using epctx::testing::TempDir;
using epctx::testing::WriteFile;

constexpr int kC = 2, kK = 3, kH = 5, kW = 5;

uint16_t ToHalf(float f) { return FloatToHalfBits(f); }
float FromHalf(uint16_t h) { return HalfBitsToFloat(h); }

float Pattern(int i, int salt) { return static_cast<float>(((i * 37 + salt * 11) % 23) - 11) / 7.f; }

void AddHalfInitializer(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                        const std::vector<float>& values) {
  auto* t = epctx::onnx_build::Initializer(g, name, onnx::TensorProto::FLOAT16, dims);
  for (float v : values) t->add_int32_data(ToHalf(v));  // float16 travels in int32_data
}

struct Weights {
  std::vector<float> w, b;  // exactly float16 values
};

Weights MakeWeights() {
  Weights r;
  for (int i = 0; i < kK * kC * 9; ++i) r.w.push_back(FromHalf(ToHalf(Pattern(i, 1) * 0.3f)));
  for (int i = 0; i < kK; ++i) r.b.push_back(FromHalf(ToHalf(Pattern(i, 2) * 0.1f)));
  return r;
}

onnx::ModelProto Float16Model(const Weights& wt) {
  onnx::ModelProto m = NewModel("float16", 13);
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {1, kC, kH, kW});
  AddTensorValueInfo(g->add_input(), "Z", {1, kK, kH, kW}, onnx::TensorProto::FLOAT16);
  AddTensorValueInfo(g->add_output(), "A", {1, kK, kH, kW}, onnx::TensorProto::FLOAT16);
  AddTensorValueInfo(g->add_output(), "Y", {1, kK, kH, kW});
  AddHalfInitializer(g, "W", {kK, kC, 3, 3}, wt.w);
  AddHalfInitializer(g, "B", {kK}, wt.b);
  SetInt(AddNode(g, "Cast", "to_half", {"X"}, "xh"), "to", onnx::TensorProto::FLOAT16);
  SetInts(AddNode(g, "Conv", "conv", {"xh", "W", "B"}, "c"), "pads", {1, 1, 1, 1});
  AddNode(g, "Relu", "relu", {"c"}, "r");
  AddNode(g, "Add", "add", {"r", "Z"}, "A");
  SetInt(AddNode(g, "Cast", "to_float", {"A"}, "Y"), "to", onnx::TensorProto::FLOAT);
  return m;
}

// The float32 computation on the float16 inputs and weights: X rounded to float16 (the model's Cast), then Conv,
// Relu and Add in float32.
std::vector<float> Reference(const Weights& wt, const std::vector<float>& x, const std::vector<uint16_t>& z) {
  std::vector<float> y(static_cast<size_t>(kK * kH * kW));
  for (int k = 0; k < kK; ++k)
    for (int i = 0; i < kH; ++i)
      for (int j = 0; j < kW; ++j) {
        double acc = wt.b[k];
        for (int c = 0; c < kC; ++c)
          for (int di = 0; di < 3; ++di)
            for (int dj = 0; dj < 3; ++dj) {
              const int ii = i + di - 1, jj = j + dj - 1;
              if (ii < 0 || jj < 0 || ii >= kH || jj >= kW) continue;
              acc += double(wt.w[((k * kC + c) * 3 + di) * 3 + dj]) *
                     FromHalf(ToHalf(x[(c * kH + ii) * kW + jj]));
            }
        const size_t o = static_cast<size_t>((k * kH + i) * kW + j);
        y[o] = static_cast<float>(std::max(acc, 0.0) + FromHalf(z[o]));
      }
  return y;
}

using AotCpuFloat16 = epctx::testing::AotCpuSuite;

TEST_F(AotCpuFloat16, AFloat16GraphIsCompiledWholeAndComputedInFloat32) {
  const Weights wt = MakeWeights();
  TempDir dir;
  const std::string path = dir / "model.onnx";
  WriteFile(path, Serialize(Float16Model(wt)));
  std::vector<int64_t> xd = {1, kC, kH, kW}, zd = {1, kK, kH, kW};
  std::vector<float> x(static_cast<size_t>(kC * kH * kW));
  for (size_t i = 0; i < x.size(); ++i) x[i] = Pattern(static_cast<int>(i), 3) + 1e-3f;  // not float16 values
  std::vector<uint16_t> z(static_cast<size_t>(kK * kH * kW));
  for (size_t i = 0; i < z.size(); ++i) z[i] = ToHalf(Pattern(static_cast<int>(i), 4) * 0.5f);
  const std::vector<float> want = Reference(wt, x, z);

  auto check = [&](Session& s, const std::string& what) {
    std::vector<Value> in;
    in.push_back(Value::CreateTensor(ElementType::FLOAT, x.data(), x.size() * 4, xd.data(), xd.size()));
    in.push_back(Value::CreateTensor(ElementType::FLOAT16, z.data(), z.size() * 2, zd.data(), zd.size()));
    std::vector<Value> out = s.Run({"X", "Z"}, in, {"A", "Y"});
    ASSERT_EQ(out.size(), 2u) << what;
    ASSERT_EQ(out[0].GetTensorTypeAndShapeInfo().GetElementType(), ElementType::FLOAT16) << what;
    const auto* a = static_cast<const uint16_t*>(out[0].GetTensorRawData());
    const float* y = out[1].GetTensorData<float>();
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(y[i], want[i], 1e-5 + 1e-5 * std::fabs(want[i])) << what << " Y " << i;
      // A is the same value rounded to float16: within one float16 step (2^-10 relative) of the float32 result.
      EXPECT_NEAR(FromHalf(a[i]), want[i], std::ldexp(std::fabs(want[i]), -10) + 1e-6) << what << " A " << i;
    }
  };

  CheckJitAndFromContext(path, dir, 1, check);
}

}  // namespace
}  // namespace epctx
