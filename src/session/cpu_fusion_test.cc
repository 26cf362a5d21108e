// The level-2 pass on the CPU EP's nodes (cpu_fusion.h): what it fuses, what it must leave alone, and that a fused
// session computes what the unfused one (level 1) does.
#include "session/cpu_fusion.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "session/session.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using testing::AddNode;
using testing::AddTensorValueInfo;
using testing::NewModel;
using testing::Serialize;

void AddInit(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims, uint32_t seed,
             float lo = -0.5f, float hi = 0.5f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t v : dims) t->add_dims(v), n *= v;
  for (int64_t i = 0; i < n; ++i) t->add_float_data(d(rng));
}

void AddScalar(onnx::GraphProto* g, const std::string& name, float v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_float_data(v);
}

void Conv(onnx::GraphProto* g, const std::string& name, const std::string& x, const std::string& w,
          const std::string& b, const std::string& y, int64_t pad) {
  auto* n = AddNode(g, "Conv", name, b.empty() ? std::vector<std::string>{x, w} : std::vector<std::string>{x, w, b}, y);
  auto* a = n->add_attribute();
  a->set_name("pads");
  a->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) a->add_ints(pad);
}

// x [1,4,6,6] -> Conv(8, 3x3) -> BatchNormalization -> x*Clip(x+3,0,6)/6 -> c1
// c1 -> Conv(8, 1x1) -> Mul(k[8,1,1]) -> Add(0.25) -> LeakyRelu -> c2;  c2 -> Conv(4, 1x1) -> Relu -> y  (+ extra readers per `variant`)
onnx::ModelProto FusionModel(const std::string& variant) {
  onnx::ModelProto m = NewModel("fusion", 17);
  onnx::GraphProto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "x", {1, 4, 6, 6});
  AddTensorValueInfo(g->add_output(), "y", {1, 4, 6, 6});
  AddInit(g, "w1", {8, 4, 3, 3}, 1);
  AddInit(g, "b1", {8}, 2);
  Conv(g, "conv1", "x", "w1", "b1", "a1", 1);
  AddInit(g, "s", {8}, 3, 0.5f, 1.5f);
  AddInit(g, "sh", {8}, 4);
  AddInit(g, "mu", {8}, 5);
  AddInit(g, "var", {8}, 6, 0.5f, 1.5f);
  AddNode(g, "BatchNormalization", "bn", {"a1", "s", "sh", "mu", "var"}, "n1");
  AddScalar(g, "three", 3.f);
  AddScalar(g, "zero", 0.f);
  AddScalar(g, "six", 6.f);
  AddNode(g, "Add", "hs_add", {"n1", "three"}, "h1");
  AddNode(g, "Clip", "hs_clip", {"h1", "zero", "six"}, "h2");
  if (variant == "detector_hardswish_order") {  // (x * Clip(x + 3, 0, 6)) / 6
    AddNode(g, "Mul", "hs_mul", {"h2", "n1"}, "h3");
    AddNode(g, "Div", "hs_div", {"h3", "six"}, "c1");
  } else {  // x * (Clip(x + 3, 0, 6) / 6)
    AddNode(g, "Div", "hs_div", {"h2", "six"}, "h3");
    AddNode(g, "Mul", "hs_mul", {"n1", "h3"}, "c1");
  }
  AddInit(g, "w2", {8, 8, 1, 1}, 7);
  Conv(g, "conv2", "c1", "w2", "", "a0", 0);
  // A learnable scale and bias per channel (PaddleOCR's detector): folded into conv2.
  AddInit(g, "k", {8, 1, 1}, 10, 0.5f, 1.5f);
  AddNode(g, "Mul", "scale", {"k", "a0"}, "a00");
  AddScalar(g, "bias2", 0.25f);
  AddNode(g, "Add", "shift", {"a00", "bias2"}, "a2");
  auto* lr = AddNode(g, "LeakyRelu", "lrelu", {"a2"}, "c2");
  auto* alpha = lr->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.2f);
  AddInit(g, "w3", {4, 8, 1, 1}, 8);
  Conv(g, "conv3", "c2", "w3", "", "a3", 0);
  AddNode(g, "Relu", "relu", {"a3"}, "y");
  if (variant == "conv_output_is_a_graph_output") {
    AddTensorValueInfo(g->add_output(), "a2", {1, 8, 6, 6});
  } else if (variant == "bn_input_read_twice") {
    AddNode(g, "Identity", "extra", {"a1"}, "a1_copy");
    AddTensorValueInfo(g->add_output(), "a1_copy", {1, 8, 6, 6});
  } else if (variant == "weights_overridable") {
    AddTensorValueInfo(g->add_input(), "w2", {8, 8, 1, 1});
  }
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

std::vector<std::vector<float>> Run(const InferenceSession& s) {
  auto x = Tensor::Allocate(DataType::kFloat, {1, 4, 6, 6});
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> d(-4.f, 4.f);  // both sides of HardSwish's -3 and 3
  for (int64_t i = 0; i < 144; ++i) x.value().data<float>()[i] = d(rng);
  std::vector<IValue> out;
  Status st = s.Run({"x"}, {IValue(x.value())}, {}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<std::vector<float>> r;
  for (const IValue& v : out) {
    const Tensor& t = v.tensor();
    r.emplace_back(t.data<float>(), t.data<float>() + t.NumElements());
  }
  return r;
}

void ExpectSameValues(const InferenceSession& a, const InferenceSession& b) {
  auto ra = Run(a), rb = Run(b);
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t k = 0; k < ra.size(); ++k) {
    ASSERT_EQ(ra[k].size(), rb[k].size());
    for (size_t i = 0; i < ra[k].size(); ++i)
      ASSERT_NEAR(ra[k][i], rb[k][i], 1e-5f * (1 + std::fabs(rb[k][i]))) << "output " << k << " element " << i;
  }
}

std::vector<std::string> Ops(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) {
    const Attribute* a = n.attr(kFusedActivationAttr);
    ops.push_back(n.op_type + (a ? "+" + a->s : ""));
  }
  return ops;
}

TEST(CpuFusion, ConvBatchNormAndActivationsBecomeThreeConvs) {
  auto fused = NewSession(FusionModel(""), 99), plain = NewSession(FusionModel(""), 1);
  ASSERT_TRUE(fused && plain);
  EXPECT_EQ(fused->cpu_fusions().batch_norms, 1);
  EXPECT_EQ(fused->cpu_fusions().affines, 2);
  EXPECT_EQ(fused->cpu_fusions().activations, 3);
  EXPECT_EQ(Ops(fused->planned_graph()),
            (std::vector<std::string>{"Conv+HardSwish", "Conv+LeakyRelu", "Conv+Relu"}));
  EXPECT_EQ(plain->cpu_fusions().activations, 0);
  EXPECT_EQ(plain->planned_graph().nodes.size(), 12u);
  EXPECT_EQ(fused->model().graph->nodes.size(), 12u);  // the model's own graph is untouched
  ExpectSameValues(*fused, *plain);
  auto fused2 = NewSession(FusionModel("detector_hardswish_order"), 99);
  auto plain2 = NewSession(FusionModel("detector_hardswish_order"), 1);
  ASSERT_TRUE(fused2 && plain2);
  EXPECT_EQ(Ops(fused2->planned_graph()),
            (std::vector<std::string>{"Conv+HardSwish", "Conv+LeakyRelu", "Conv+Relu"}));
  ExpectSameValues(*fused2, *plain2);
}

TEST(CpuFusion, ValuesOthersReadStay) {
  {
    // conv2's output is also a graph output: its LeakyRelu stays.
    auto fused = NewSession(FusionModel("conv_output_is_a_graph_output"), 99);
    auto plain = NewSession(FusionModel("conv_output_is_a_graph_output"), 1);
    ASSERT_TRUE(fused && plain);
    EXPECT_EQ(Ops(fused->planned_graph()),
              (std::vector<std::string>{"Conv+HardSwish", "Conv", "LeakyRelu", "Conv+Relu"}));
    ExpectSameValues(*fused, *plain);
  }
  {
    // conv1's output is read twice: no BatchNormalization fold (nor the HardSwish after it).
    auto fused = NewSession(FusionModel("bn_input_read_twice"), 99);
    auto plain = NewSession(FusionModel("bn_input_read_twice"), 1);
    ASSERT_TRUE(fused && plain);
    EXPECT_EQ(fused->cpu_fusions().batch_norms, 0);
    ExpectSameValues(*fused, *plain);
  }
  {
    // w2 is a graph input too (an overridable initializer): conv2 is not fused.
    auto fused = NewSession(FusionModel("weights_overridable"), 99);
    ASSERT_TRUE(fused);
    EXPECT_EQ(Ops(fused->planned_graph()),
              (std::vector<std::string>{"Conv+HardSwish", "Conv", "Mul", "Add", "LeakyRelu", "Conv+Relu"}));
  }
}

// The internal attribute cannot come from a model file: the ONNX checker refuses it on Conv.
TEST(CpuFusion, TheInternalAttributeInAModelIsAnInvalidGraph) {
  onnx::ModelProto m = FusionModel("");
  auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name(kFusedActivationAttr);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("Gelu");
  const std::string bytes = Serialize(m);
  SessionConfig config;
  config.graph_optimization_level = 0;
  auto s = InferenceSession::CreateFromBytes(bytes.data(), bytes.size(), config);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::INVALID_GRAPH);
  EXPECT_NE(s.status().ToString().find(kFusedActivationAttr), std::string::npos) << s.status().ToString();
}

}  // namespace
}  // namespace epctx
