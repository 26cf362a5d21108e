// The float16 pass (float16_promotion.h): a float16 graph on the CPU EP is computed in float32, its constants
// converted once, the model's own Cast to float16 still rounding, float16 outputs keeping their type and rounded
// once. The model (X float32 and Z float16 inputs; A, R float16 and Y float32 outputs):
//
//   X -> Cast(to f16) -> Conv(W f16, B f16, pads 1) -> Mul(S f16) -> Add(Z) = a -> A
//   a -> Sigmoid -> Cast(to f32) -> Mul(3.7 f32) -> Cast(to f16) = th
//   a -> Shape -> ConstantOfShape(f16 0.5) = k      (stays float16: its value comes from an attribute)
//   th + a + k = q -> R, and Cast(q, to f32) -> Y
//
// Expected, in float32 on the float16 weights: a and q unrounded inside, th rounded to float16 (the model's Cast),
// A = half(a), R = half(q), Y = q (not rounded: the Cast from float16 reads the float32 value).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/float16.h"
#include "providers/cpu/passes/float16_promotion.h"
#include "session/session.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using testing::AddNode;
using testing::AddTensorValueInfo;
using testing::NewModel;
using testing::Serialize;

constexpr int kC = 2, kM = 3, kH = 5, kW = 5;

float Round16(float f) { return HalfBitsToFloat(FloatToHalfBits(f)); }

std::vector<float> RandomHalfValues(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = Round16(d(rng));
  return v;
}

void SetHalfData(onnx::TensorProto* t, const std::string& name, const std::vector<int64_t>& dims,
                 const std::vector<float>& v) {
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT16);
  for (int64_t d : dims) t->add_dims(d);
  std::string raw(v.size() * 2, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = FloatToHalfBits(v[i]);
    raw[2 * i] = static_cast<char>(h & 0xff);
    raw[2 * i + 1] = static_cast<char>(h >> 8);
  }
  t->set_raw_data(raw);
}

void SetIntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

struct Weights {
  std::vector<float> w = RandomHalfValues(kM * kC * 9, -0.5f, 0.5f, 1);
  std::vector<float> b = RandomHalfValues(kM, -0.2f, 0.2f, 2);
  float s = Round16(1.37f);
};

onnx::ModelProto Model(const Weights& wt) {
  onnx::ModelProto m = NewModel("float16_regions", 17);
  onnx::GraphProto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {1, kC, kH, kW});
  AddTensorValueInfo(g->add_input(), "Z", {1, kM, kH, kW}, onnx::TensorProto::FLOAT16);
  AddTensorValueInfo(g->add_output(), "A", {1, kM, kH, kW}, onnx::TensorProto::FLOAT16);
  AddTensorValueInfo(g->add_output(), "R", {1, kM, kH, kW}, onnx::TensorProto::FLOAT16);
  AddTensorValueInfo(g->add_output(), "Y", {1, kM, kH, kW});
  SetHalfData(g->add_initializer(), "W", {kM, kC, 3, 3}, wt.w);
  SetHalfData(g->add_initializer(), "B", {kM}, wt.b);
  SetHalfData(g->add_initializer(), "S", {}, {wt.s});
  testing::AddWeight(g, "k37", {3.7f});
  SetIntAttr(AddNode(g, "Cast", "cast_in", {"X"}, "xh"), "to", onnx::TensorProto::FLOAT16);
  auto* conv = AddNode(g, "Conv", "conv", {"xh", "W", "B"}, "c");
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  AddNode(g, "Mul", "scale", {"c", "S"}, "m");
  AddNode(g, "Add", "add_z", {"m", "Z"}, "A");
  AddNode(g, "Sigmoid", "sigmoid", {"A"}, "sg");
  SetIntAttr(AddNode(g, "Cast", "cast_up", {"sg"}, "sf"), "to", onnx::TensorProto::FLOAT);
  AddNode(g, "Mul", "mul37", {"sf", "k37"}, "t");
  SetIntAttr(AddNode(g, "Cast", "cast_down", {"t"}, "th"), "to", onnx::TensorProto::FLOAT16);
  AddNode(g, "Shape", "shape", {"A"}, "sh");
  auto* cos = AddNode(g, "ConstantOfShape", "halves", {"sh"}, "k");
  auto* value = cos->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  SetHalfData(value->mutable_t(), "value", {1}, {0.5f});
  AddNode(g, "Add", "add_th", {"th", "A"}, "r");
  AddNode(g, "Add", "add_k", {"r", "k"}, "R");
  SetIntAttr(AddNode(g, "Cast", "cast_out", {"R"}, "Y"), "to", onnx::TensorProto::FLOAT);
  return m;
}

struct Reference {
  std::vector<float> a, q;  // float32, unrounded
};

Reference Compute(const Weights& wt, const std::vector<float>& x, const std::vector<float>& z) {
  Reference r;
  r.a.resize(kM * kH * kW);
  r.q.resize(r.a.size());
  for (int o = 0; o < kM; ++o)
    for (int h = 0; h < kH; ++h)
      for (int w = 0; w < kW; ++w) {
        double acc = wt.b[o];
        for (int c = 0; c < kC; ++c)
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              const int y = h + i - 1, xx = w + j - 1;
              if (y < 0 || y >= kH || xx < 0 || xx >= kW) continue;
              acc += static_cast<double>(wt.w[((o * kC + c) * 3 + i) * 3 + j]) * Round16(x[(c * kH + y) * kW + xx]);
            }
        const size_t k = (o * kH + h) * kW + w;
        const float a = static_cast<float>(acc) * wt.s + z[k];
        const float th = Round16(static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(a)))) * 3.7f);
        r.a[k] = a;
        r.q[k] = th + a + 0.5f;
      }
  return r;
}

std::unique_ptr<InferenceSession> NewSession(const onnx::ModelProto& m, int level) {
  const std::string bytes = Serialize(m);
  SessionConfig config;
  config.graph_optimization_level = level;
  config.intra_op_num_threads = 1;
  auto s = InferenceSession::CreateFromBytes(bytes.data(), bytes.size(), config);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// One float16 step at |v| (normal range).
float HalfUlp(float v) { return std::ldexp(1.f, std::ilogb(std::fabs(v)) - 10); }

TEST(Float16Promotion, RegionsRunInFloat32AndOutputsKeepFloat16) {
  const Weights wt;
  const std::vector<float> x = RandomHalfValues(kC * kH * kW, -2.f, 2.f, 3);  // float32 input; the Cast rounds it
  std::vector<float> xf = x;
  for (size_t i = 0; i < xf.size(); ++i) xf[i] += 1e-4f * static_cast<float>(i % 7);  // not float16 values
  const std::vector<float> z = RandomHalfValues(kM * kH * kW, -1.f, 1.f, 4);
  const Reference ref = Compute(wt, xf, z);
  for (int level : {0, 1, 99}) {
    SCOPED_TRACE("level " + std::to_string(level));
    auto s = NewSession(Model(wt), level);
    ASSERT_TRUE(s);
    // Promoted: conv, scale, add_z, sigmoid, cast_up, add_th, add_k, cast_out, and at level 0 shape (from level 1
    // on, constant folding has made k a float16 initializer, converted like W). Not: the model's Casts to float16,
    // mul37 (float32 already), halves.
    EXPECT_EQ(s->cpu_fusions().float16_nodes, level == 0 ? 9 : 8);
    const Graph& g = s->planned_graph();
    for (const auto& [name, t] : g.initializers) EXPECT_NE(t.dtype(), DataType::kFloat16) << name;  // all converted
    int casts_to_half = 0;
    for (const Node& n : g.nodes)
      if (n.op_type == "Cast" && n.attr("to")->i == static_cast<int64_t>(DataType::kFloat16)) ++casts_to_half;
    EXPECT_EQ(casts_to_half, 4);  // cast_in, cast_down (the model's) + A and R written back as float16

    Tensor xt = Tensor::Allocate(DataType::kFloat, {1, kC, kH, kW}).value();
    std::copy(xf.begin(), xf.end(), xt.data<float>());
    Tensor zt = Tensor::Allocate(DataType::kFloat16, {1, kM, kH, kW}).value();
    for (size_t i = 0; i < z.size(); ++i) zt.data<uint16_t>()[i] = FloatToHalfBits(z[i]);
    std::vector<IValue> out;
    Status st = s->Run({"X", "Z"}, {IValue(xt), IValue(zt)}, {"A", "R", "Y"}, &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(out.size(), 3u);
    ASSERT_EQ(out[0].tensor().dtype(), DataType::kFloat16);
    ASSERT_EQ(out[1].tensor().dtype(), DataType::kFloat16);
    ASSERT_EQ(out[2].tensor().dtype(), DataType::kFloat);
    const uint16_t* a = out[0].tensor().data<uint16_t>();
    const uint16_t* r = out[1].tensor().data<uint16_t>();
    const float* y = out[2].tensor().data<float>();
    int a_exact = 0, r_exact = 0;
    for (size_t i = 0; i < ref.a.size(); ++i) {
      // Float16 outputs: rounded once from the float32 value (one step apart only at a half-way point).
      EXPECT_LE(std::fabs(HalfBitsToFloat(a[i]) - Round16(ref.a[i])), HalfUlp(ref.a[i])) << i;
      EXPECT_LE(std::fabs(HalfBitsToFloat(r[i]) - Round16(ref.q[i])), HalfUlp(ref.q[i])) << i;
      a_exact += HalfBitsToFloat(a[i]) == Round16(ref.a[i]);
      r_exact += HalfBitsToFloat(r[i]) == Round16(ref.q[i]);
      // Y reads the float32 value: float32 rounding of the reference, far below a float16 step (one op rounded
      // to float16, or th left unrounded, would be off by up to half a step, about 1e-3 here).
      EXPECT_NEAR(y[i], ref.q[i], 2e-5f * (1.f + std::fabs(ref.q[i]))) << i;
    }
    EXPECT_GE(a_exact, static_cast<int>(ref.a.size()) - 2);
    EXPECT_GE(r_exact, static_cast<int>(ref.q.size()) - 2);
  }
}

TEST(Float16Promotion, FloatGraphsAreLeftAlone) {
  onnx::ModelProto m = testing::AddReluModel();
  auto s = NewSession(m, 99);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->cpu_fusions().float16_nodes, 0);
  EXPECT_EQ(s->cpu_fusions().float16_casts, 0);
}

}  // namespace
}  // namespace epctx
