// The QDQ pass (qdq_fusion.h): which DequantizeLinear -> Conv/MatMul -> QuantizeLinear groups become QLinearConv /
// QLinearMatMul, which near misses stay, and that a fused session's outputs equal the plain one's (level 1) within
// one quantization step of the output.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "providers/cpu/passes/qdq_fusion.h"
#include "session/session.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using testing::AddNode;
using testing::AddTensorValueInfo;
using testing::NewModel;
using testing::Serialize;

constexpr float kXScale = 8.f / 255.f;  // x in [-4, 4], uint8 zero point 128
constexpr float kYScale = 0.05f;

void AddFloats(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
               const std::vector<float>& v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float f : v) t->add_float_data(f);
}

// int8 / uint8 / int32 initializer (values in int32_data, as ONNX stores them).
void AddInts(onnx::GraphProto* g, const std::string& name, int type, const std::vector<int64_t>& dims,
             const std::vector<int32_t>& v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  for (int32_t i : v) t->add_int32_data(i);
}

std::vector<int32_t> RandomInts(size_t n, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

onnx::NodeProto* SetAxis(onnx::NodeProto* n, int64_t axis) {
  auto* a = n->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(axis);
  return n;
}

// x float[1,4,6,6] -> Q/DQ (uint8) -> Conv(DQ(w int8 [8,4,3,3] per channel), DQ(b int32 [8])) -> Q/DQ (uint8) -> y,
// with the near misses of `variant`.
onnx::ModelProto ConvModel(const std::string& variant) {
  onnx::ModelProto m = NewModel("qdq_conv", 13);
  onnx::GraphProto* g = m.mutable_graph();
  const bool int8_act = variant == "int8_activations";
  const int act_type = int8_act ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  AddTensorValueInfo(g->add_input(), "x", {1, 4, 6, 6});
  AddTensorValueInfo(g->add_output(), "y", {1, 8, 6, 6});
  AddFloats(g, "xs", {}, {kXScale});
  AddInts(g, "xz", act_type, {}, {int8_act ? 0 : 128});
  AddFloats(g, "ys", {}, {kYScale});
  AddInts(g, "yz", act_type, {}, {int8_act ? 0 : 128});
  if (variant == "y_scale_is_an_input") AddTensorValueInfo(g->add_input(), "ys", {});  // overridable
  AddNode(g, "QuantizeLinear", "qx", {"x", "xs", "xz"}, "xq");
  AddNode(g, "DequantizeLinear", "dqx", {"xq", "xs", "xz"}, "xd");
  // Weights: per output channel m, scale (m + 1) / 2000 (few outputs saturate).
  std::vector<float> ws(8);
  for (int i = 0; i < 8; ++i) ws[i] = static_cast<float>(i + 1) / 2000.f;
  const bool axis1 = variant == "weight_axis_1";
  AddInts(g, "wq", onnx::TensorProto::INT8, {8, 4, 3, 3}, RandomInts(8 * 4 * 9, -127, 127, 3));
  if (axis1) {
    AddFloats(g, "wsc", {4}, {ws[0], ws[1], ws[2], ws[3]});
    AddInts(g, "wz", onnx::TensorProto::INT8, {4}, {0, 0, 0, 0});
    SetAxis(AddNode(g, "DequantizeLinear", "dqw", {"wq", "wsc", "wz"}, "wd"), 1);
  } else {
    AddFloats(g, "wsc", {8}, ws);
    AddInts(g, "wz", onnx::TensorProto::INT8, {8}, std::vector<int32_t>(8, 0));
    SetAxis(AddNode(g, "DequantizeLinear", "dqw", {"wq", "wsc", "wz"}, "wd"), 0);
  }
  std::string bias = "bd";
  if (variant == "float_bias") {
    AddFloats(g, "bf", {8}, {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f, 0.7f, -0.8f});
    bias = "bf";
  } else if (variant != "no_bias") {
    std::vector<float> bs(8);
    for (int i = 0; i < 8; ++i) bs[i] = kXScale * ws[i] * (variant == "bias_scale_differs" && i == 5 ? 1.5f : 1.f);
    AddFloats(g, "bsc", {8}, bs);
    AddInts(g, "bq", onnx::TensorProto::INT32, {8}, RandomInts(8, -3000, 3000, 4));
    SetAxis(AddNode(g, "DequantizeLinear", "dqb", {"bq", "bsc"}, "bd"), 0);
  }
  std::vector<std::string> conv_in{"xd", "wd"};
  if (variant != "no_bias") conv_in.push_back(bias);
  auto* conv = AddNode(g, "Conv", "conv", conv_in, "c");
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  AddNode(g, "QuantizeLinear", "qy", {"c", "ys", "yz"}, "yq");
  AddNode(g, "DequantizeLinear", "dqy", {"yq", "ys", "yz"}, "y");
  if (variant == "conv_output_read_twice") {
    AddNode(g, "Relu", "extra", {"c"}, "c_relu");
    AddTensorValueInfo(g->add_output(), "c_relu", {1, 8, 6, 6});
  } else if (variant == "x_dequantized_twice") {  // another reader keeps dqx
    AddNode(g, "Relu", "extra", {"xd"}, "x_relu");
    AddTensorValueInfo(g->add_output(), "x_relu", {1, 4, 6, 6});
  }
  return m;
}

// a float[2,3,8] -> Q/DQ (uint8) -> MatMul(DQ(b int8 [8,5], per column or per `variant`)) -> Q/DQ (uint8) -> y.
onnx::ModelProto MatMulModel(const std::string& variant) {
  onnx::ModelProto m = NewModel("qdq_matmul", 13);
  onnx::GraphProto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "x", {2, 3, 8});
  AddTensorValueInfo(g->add_output(), "y", {2, 3, 5});
  AddFloats(g, "xs", {}, {kXScale});
  AddInts(g, "xz", onnx::TensorProto::UINT8, {}, {128});
  AddFloats(g, "ys", {}, {kYScale});
  AddInts(g, "yz", onnx::TensorProto::UINT8, {}, {128});
  AddNode(g, "QuantizeLinear", "qx", {"x", "xs", "xz"}, "xq");
  AddNode(g, "DequantizeLinear", "dqx", {"xq", "xs", "xz"}, "xd");
  AddInts(g, "bq", onnx::TensorProto::INT8, {8, 5}, RandomInts(40, -127, 127, 5));
  if (variant == "per_row") {
    AddFloats(g, "bsc", {8}, {0.01f, 0.02f, 0.03f, 0.01f, 0.02f, 0.03f, 0.01f, 0.02f});
    SetAxis(AddNode(g, "DequantizeLinear", "dqb", {"bq", "bsc"}, "bd"), 0);
  } else {
    AddFloats(g, "bsc", {5}, {0.002f, 0.004f, 0.006f, 0.003f, 0.005f});
    SetAxis(AddNode(g, "DequantizeLinear", "dqb", {"bq", "bsc"}, "bd"), 1);
  }
  AddNode(g, "MatMul", "mm", {"xd", "bd"}, "c");
  AddNode(g, "QuantizeLinear", "qy", {"c", "ys", "yz"}, "yq");
  AddNode(g, "DequantizeLinear", "dqy", {"yq", "ys", "yz"}, "y");
  return m;
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

// Every float output for x in [-4, 4] (seeded); "ys" fed too when the model takes it as an input.
std::vector<std::vector<float>> Run(const InferenceSession& s, const Shape& x_shape) {
  auto x = Tensor::Allocate(DataType::kFloat, x_shape);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-4.f, 4.f);
  for (int64_t i = 0; i < x.value().NumElements(); ++i) x.value().data<float>()[i] = d(rng);
  std::vector<std::string> names{"x"};
  std::vector<IValue> feeds{IValue(x.value())};
  for (const auto& in : s.planned_graph().inputs)
    if (in.name == "ys") {
      auto ys = Tensor::Allocate(DataType::kFloat, {});
      ys.value().data<float>()[0] = kYScale;
      names.push_back("ys");
      feeds.emplace_back(ys.value());
    }
  std::vector<IValue> out;
  Status st = s.Run(names, feeds, {}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<std::vector<float>> r;
  for (const IValue& v : out) {
    const Tensor& t = v.tensor();
    r.emplace_back(t.data<float>(), t.data<float>() + t.NumElements());
  }
  return r;
}

// The fused and the plain session agree within one step of y (kYScale): see qdq_fusion.h for why one step.
// Returns how many values differ at all.
int ExpectWithinOneStep(const InferenceSession& fused, const InferenceSession& plain, const Shape& x_shape) {
  auto a = Run(fused, x_shape), b = Run(plain, x_shape);
  EXPECT_EQ(a.size(), b.size());
  int differ = 0;
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
    EXPECT_EQ(a[k].size(), b[k].size());
    for (size_t i = 0; i < a[k].size() && i < b[k].size(); ++i) {
      EXPECT_LE(std::fabs(a[k][i] - b[k][i]), kYScale * 1.001f) << "output " << k << " element " << i;
      differ += a[k][i] != b[k][i];
    }
  }
  return differ;
}

std::vector<std::string> Ops(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

TEST(QdqFusion, ConvGroupBecomesQLinearConv) {
  for (const char* variant : {"", "no_bias", "int8_activations"}) {
    SCOPED_TRACE(variant);
    auto fused = NewSession(ConvModel(variant), 2), plain = NewSession(ConvModel(variant), 1);
    ASSERT_TRUE(fused && plain);
    EXPECT_EQ(fused->cpu_fusions().qdq_convs, 1);
    EXPECT_EQ(plain->cpu_fusions().qdq_convs, 0);
    EXPECT_EQ(Ops(fused->planned_graph()),
              (std::vector<std::string>{"QuantizeLinear", "QLinearConv", "DequantizeLinear"}));
    EXPECT_EQ(fused->model().graph->nodes.size(), plain->planned_graph().nodes.size());  // the model's graph stays
    const int differ = ExpectWithinOneStep(*fused, *plain, {1, 4, 6, 6});
    EXPECT_LT(differ, 8 * 36 / 20) << "more than 5% of the values moved by a step";
  }
}

TEST(QdqFusion, MatMulGroupBecomesQLinearMatMul) {
  auto fused = NewSession(MatMulModel(""), 2), plain = NewSession(MatMulModel(""), 1);
  ASSERT_TRUE(fused && plain);
  EXPECT_EQ(fused->cpu_fusions().qdq_matmuls, 1);
  EXPECT_EQ(Ops(fused->planned_graph()),
            (std::vector<std::string>{"QuantizeLinear", "QLinearMatMul", "DequantizeLinear"}));
  ExpectWithinOneStep(*fused, *plain, {2, 3, 8});
}

TEST(QdqFusion, NearMissesStay) {
  // Each leaves the Conv (or MatMul) and its Q/DQ nodes as they are, and the session still computes the graph.
  for (const char* variant : {"y_scale_is_an_input", "conv_output_read_twice", "weight_axis_1", "bias_scale_differs",
                              "float_bias"}) {
    SCOPED_TRACE(variant);
    auto fused = NewSession(ConvModel(variant), 2), plain = NewSession(ConvModel(variant), 1);
    ASSERT_TRUE(fused && plain);
    EXPECT_EQ(fused->cpu_fusions().qdq_convs, 0);
    for (const Node& n : fused->planned_graph().nodes) EXPECT_NE(n.op_type, "QLinearConv");
    EXPECT_EQ(ExpectWithinOneStep(*fused, *plain, {1, 4, 6, 6}), 0);
  }
  auto fused = NewSession(MatMulModel("per_row"), 2);
  ASSERT_TRUE(fused);
  EXPECT_EQ(fused->cpu_fusions().qdq_matmuls, 0);
}

TEST(QdqFusion, SharedDequantizeStaysForItsOtherReader) {
  auto fused = NewSession(ConvModel("x_dequantized_twice"), 2), plain = NewSession(ConvModel("x_dequantized_twice"), 1);
  ASSERT_TRUE(fused && plain);
  EXPECT_EQ(fused->cpu_fusions().qdq_convs, 1);
  EXPECT_EQ(Ops(fused->planned_graph()), (std::vector<std::string>{"QuantizeLinear", "DequantizeLinear", "QLinearConv",
                                                                   "DequantizeLinear", "Relu"}));
  ExpectWithinOneStep(*fused, *plain, {1, 4, 6, 6});
}

// x float[1,3,16,16] -> Q/DQ -> Mul(0.7) -> Add(-0.2) = t; t * Clip(t + 3, 0, 6) / 6 (HardSwish as PP-OCRv4 spells it)
// -> Q/DQ -> y, with the near misses of `variant`.
onnx::ModelProto HardSwishModel(const std::string& variant) {
  onnx::ModelProto m = NewModel("qdq_hardswish", 13);
  onnx::GraphProto* g = m.mutable_graph();
  const bool int8_act = variant == "int8_activations";
  const int act_type = int8_act ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  AddTensorValueInfo(g->add_input(), "x", {1, 3, 16, 16});
  AddTensorValueInfo(g->add_output(), "y", {1, 3, 16, 16});
  AddFloats(g, "xs", {}, {kXScale});
  AddInts(g, "xz", act_type, {}, {int8_act ? 3 : 128});
  AddFloats(g, "ys", {}, {kYScale});
  AddInts(g, "yz", act_type, {}, {int8_act ? -100 : 20});
  AddFloats(g, "scale", {1}, {0.7f});
  AddFloats(g, "bias", {}, {-0.2f});
  AddFloats(g, "three", {}, {3.f});
  AddFloats(g, "zero", {}, {0.f});
  AddFloats(g, "six", {}, {variant == "divide_by_zero" ? 0.f : 6.f});
  AddNode(g, "QuantizeLinear", "qx", {"x", "xs", "xz"}, "xq");
  AddNode(g, "DequantizeLinear", "dqx", {"xq", "xs", "xz"}, "xd");
  AddNode(g, "Mul", "mul", {"xd", "scale"}, "a");
  AddNode(g, "Add", "add", {"a", "bias"}, "t");
  AddNode(g, "Add", "add3", {"t", "three"}, "t3");
  AddNode(g, "Clip", "clip", {"t3", "zero", "six"}, "c");
  AddNode(g, "Div", "div", {"c", "six"}, "h");
  AddNode(g, "Mul", "hs", {"t", "h"}, "z");
  AddNode(g, "QuantizeLinear", "qy", {"z", "ys", "yz"}, "yq");
  AddNode(g, "DequantizeLinear", "dqy", {"yq", "ys", "yz"}, "y");
  if (variant == "intermediate_is_an_output") AddTensorValueInfo(g->add_output(), "t", {1, 3, 16, 16});
  return m;
}

// The table computes what the graph does bit for bit (the same float operations per element), for every byte.
TEST(QdqFusion, ElementwiseChainBetweenDequantizeAndQuantizeBecomesOneTable) {
  for (const char* variant : {"", "int8_activations"}) {
    SCOPED_TRACE(variant);
    auto fused = NewSession(HardSwishModel(variant), 2), plain = NewSession(HardSwishModel(variant), 1);
    ASSERT_TRUE(fused && plain);
    EXPECT_EQ(fused->cpu_fusions().qdq_lookups, 1);
    EXPECT_EQ(Ops(fused->planned_graph()),
              (std::vector<std::string>{"QuantizeLinear", "Lookup8", "DequantizeLinear"}));
    auto a = epctx::Run(*fused, {1, 3, 16, 16}), b = epctx::Run(*plain, {1, 3, 16, 16});
    ASSERT_EQ(a.size(), 1u);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(a[0], b[0]);
  }
}

TEST(QdqFusion, ElementwiseChainNearMissesStay) {
  // An intermediate value another reader (here the graph's outputs) needs; a division by zero (a table would have
  // to decide the sign of infinities and NaN's fate as every kernel does).
  for (const char* variant : {"intermediate_is_an_output", "divide_by_zero"}) {
    SCOPED_TRACE(variant);
    auto fused = NewSession(HardSwishModel(variant), 2), plain = NewSession(HardSwishModel(variant), 1);
    ASSERT_TRUE(fused && plain);
    EXPECT_EQ(fused->cpu_fusions().qdq_lookups, 0);
    for (const Node& n : fused->planned_graph().nodes) EXPECT_NE(n.op_type, "Lookup8");
    auto a = epctx::Run(*fused, {1, 3, 16, 16}), b = epctx::Run(*plain, {1, 3, 16, 16});
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      ASSERT_EQ(a[k].size(), b[k].size());
      for (size_t i = 0; i < a[k].size(); ++i)
        EXPECT_TRUE(a[k][i] == b[k][i] || (std::isnan(a[k][i]) && std::isnan(b[k][i]))) << "output " << k << " element " << i;
    }
  }
}

}  // namespace
}  // namespace epctx
