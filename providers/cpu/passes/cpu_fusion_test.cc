// The passes on the CPU EP's nodes: level 2 (cpu_fusion.h) and level 3 (cpu_layout.h): what they rewrite, what they
// must leave alone, and that a rewritten session computes what the plain one (level 1) does.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "providers/cpu/passes/cpu_fusion.h"
#include "providers/cpu/passes/cpu_layout.h"
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

// `layout`: the session config entry epctx.cpu_layout (level 3).
std::unique_ptr<InferenceSession> NewSession(const onnx::ModelProto& m, int level, const std::string& layout = "auto") {
  const std::string bytes = Serialize(m);
  SessionConfig config;
  config.graph_optimization_level = level;
  config.intra_op_num_threads = 1;
  config.entries["epctx.cpu_layout"] = layout;
  auto s = InferenceSession::CreateFromBytes(bytes.data(), bytes.size(), config);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Runs `s` on input "x" of `x_shape` (values in [-4, 4], both sides of HardSwish's -3 and 3) and, when given, the
// bool input "cond"; every output's values.
std::vector<std::vector<float>> Run(const InferenceSession& s, const Shape& x_shape = {1, 4, 6, 6},
                                    const bool* cond = nullptr) {
  auto x = Tensor::Allocate(DataType::kFloat, x_shape);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> d(-4.f, 4.f);
  for (int64_t i = 0; i < x.value().NumElements(); ++i) x.value().data<float>()[i] = d(rng);
  std::vector<std::string> names{"x"};
  std::vector<IValue> feeds{IValue(x.value())};
  if (cond) {
    auto c = Tensor::Allocate(DataType::kBool, {});
    c.value().data<bool>()[0] = *cond;
    names.push_back("cond");
    feeds.emplace_back(c.value());
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

void ExpectSameValues(const InferenceSession& a, const InferenceSession& b, const Shape& x_shape = {1, 4, 6, 6},
                      const bool* cond = nullptr) {
  auto ra = Run(a, x_shape, cond), rb = Run(b, x_shape, cond);
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
  auto fused = NewSession(FusionModel(""), 2), plain = NewSession(FusionModel(""), 1);
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
  auto fused2 = NewSession(FusionModel("detector_hardswish_order"), 2);
  auto plain2 = NewSession(FusionModel("detector_hardswish_order"), 1);
  ASSERT_TRUE(fused2 && plain2);
  EXPECT_EQ(Ops(fused2->planned_graph()),
            (std::vector<std::string>{"Conv+HardSwish", "Conv+LeakyRelu", "Conv+Relu"}));
  ExpectSameValues(*fused2, *plain2);
}

TEST(CpuFusion, ValuesOthersReadStay) {
  {
    // conv2's output is also a graph output: its LeakyRelu stays.
    auto fused = NewSession(FusionModel("conv_output_is_a_graph_output"), 2);
    auto plain = NewSession(FusionModel("conv_output_is_a_graph_output"), 1);
    ASSERT_TRUE(fused && plain);
    EXPECT_EQ(Ops(fused->planned_graph()),
              (std::vector<std::string>{"Conv+HardSwish", "Conv", "LeakyRelu", "Conv+Relu"}));
    ExpectSameValues(*fused, *plain);
  }
  {
    // conv1's output is read twice: no BatchNormalization fold (nor the HardSwish after it).
    auto fused = NewSession(FusionModel("bn_input_read_twice"), 2);
    auto plain = NewSession(FusionModel("bn_input_read_twice"), 1);
    ASSERT_TRUE(fused && plain);
    EXPECT_EQ(fused->cpu_fusions().batch_norms, 0);
    ExpectSameValues(*fused, *plain);
  }
  {
    // w2 is a graph input too (an overridable initializer): conv2 is not fused.
    auto fused = NewSession(FusionModel("weights_overridable"), 2);
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

// PP-OCR's learnable affine block after an activation: one-element Mul / Sub / Div / reversed Sub fold into a linear
// post-op.
TEST(CpuFusion, OneElementAffinesAfterTheActivationBecomeAPostOp) {
  onnx::ModelProto m = NewModel("linear", 17);
  onnx::GraphProto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "x", {1, 4, 6, 6});
  AddTensorValueInfo(g->add_output(), "y", {1, 8, 6, 6});
  AddInit(g, "w", {8, 4, 3, 3}, 41);
  Conv(g, "conv", "x", "w", "", "c", 1);
  AddNode(g, "Relu", "relu", {"c"}, "r");
  for (auto [name, v] : {std::pair{"k", 1.5f}, std::pair{"quarter", 0.25f}, std::pair{"two", 2.f}, std::pair{"one", 1.f}})
    AddScalar(g, name, v);
  AddNode(g, "Mul", "scale", {"k", "r"}, "a");
  AddNode(g, "Sub", "minus", {"a", "quarter"}, "b");
  AddNode(g, "Div", "half", {"b", "two"}, "d");
  AddNode(g, "Sub", "flip", {"one", "d"}, "y");
  auto fused = NewSession(m, 2), plain = NewSession(m, 1);
  ASSERT_TRUE(fused && plain);
  EXPECT_EQ(fused->cpu_fusions().linears, 4);
  EXPECT_EQ(Ops(fused->planned_graph()), (std::vector<std::string>{"Conv+Relu"}));
  ExpectSameValues(*fused, *plain);
}

// If(cond) -> `out`: `fill` writes each branch's nodes, whose result is "by" of `dims`.
void AddIf(onnx::GraphProto* g, const std::string& out, const std::vector<int64_t>& dims,
           const std::function<void(onnx::GraphProto*, bool)>& fill) {
  auto* iff = AddNode(g, "If", out + "_if", {"cond"}, out);
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = iff->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* b = a->mutable_g();
    b->set_name(branch);
    fill(b, std::string(branch) == "then_branch");
    AddTensorValueInfo(b->add_output(), "by", dims);
  }
}

// An If branch whose Conv reads its weights from the enclosing graph (Silero VAD): fused and laid out there too.
TEST(CpuFusion, BranchConvsWithEnclosingWeights) {
  onnx::ModelProto m = NewModel("branch", 17);
  onnx::GraphProto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "x", {1, 4, 6, 6});
  AddTensorValueInfo(g->add_input(), "cond", {}, onnx::TensorProto::BOOL);
  AddInit(g, "w", {8, 4, 3, 3}, 51);
  AddInit(g, "w2", {4, 8, 1, 1}, 52);
  AddIf(g, "y", {1, 4, 6, 6}, [](onnx::GraphProto* b, bool then_branch) {
    if (then_branch) {
      Conv(b, "conv", "x", "w", "", "c", 1);
      AddNode(b, "Relu", "relu", {"c"}, "r");
      Conv(b, "conv2", "r", "w2", "", "by", 0);
    } else {
      AddNode(b, "Neg", "neg", {"x"}, "by");
    }
  });
  AddTensorValueInfo(g->add_output(), "y", {1, 4, 6, 6});
  auto fused = NewSession(m, 99, "nhwc"), plain = NewSession(m, 1);
  ASSERT_TRUE(fused && plain);
  EXPECT_EQ(fused->cpu_fusions().activations, 1);
  EXPECT_EQ(fused->cpu_fusions().layout_convs, 2);
  for (bool cond : {true, false}) ExpectSameValues(*fused, *plain, {1, 4, 6, 6}, &cond);
}

// ---- MatMul + Add (level 2) ----

// x [2, 3, 8] -> MatMul(w [8, 5]) -> Add(bias) -> y; `bias_dims` as written in the model.
onnx::ModelProto MatMulAddModel(const std::vector<int64_t>& bias_dims) {
  onnx::ModelProto m = NewModel("matmul_add", 17);
  onnx::GraphProto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "x", {2, 3, 8});
  AddTensorValueInfo(g->add_output(), "y", {2, 3, 5});
  AddInit(g, "w", {8, 5}, 21);
  AddInit(g, "bias", bias_dims, 22);
  AddNode(g, "MatMul", "mm", {"x", "w"}, "p");
  AddNode(g, "Add", "add", {"bias", "p"}, "y");
  return m;
}

TEST(CpuFusion, MatMulAddBecomesOneMatMulWithBias) {
  for (const auto& dims : {std::vector<int64_t>{5}, std::vector<int64_t>{1, 1, 5}}) {
    auto fused = NewSession(MatMulAddModel(dims), 2), plain = NewSession(MatMulAddModel(dims), 1);
    ASSERT_TRUE(fused && plain);
    EXPECT_EQ(fused->cpu_fusions().matmul_biases, 1);
    EXPECT_EQ(Ops(fused->planned_graph()), (std::vector<std::string>{"MatMul"}));
    ExpectSameValues(*fused, *plain, {2, 3, 8});
  }
  // A bias that is not one row ([3, 5] broadcasts over rows) stays an Add.
  auto fused = NewSession(MatMulAddModel({3, 5}), 2), plain = NewSession(MatMulAddModel({3, 5}), 1);
  ASSERT_TRUE(fused && plain);
  EXPECT_EQ(fused->cpu_fusions().matmul_biases, 0);
  ExpectSameValues(*fused, *plain, {2, 3, 8});
}

void SetIntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// An 8-bit initializer of `dims` with values from `seed` (uint8 in [0, 255] or int8 in [-128, 127]).
void AddInt8Init(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims, uint32_t seed,
                 bool is_signed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, 255);
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
  int64_t n = 1;
  for (int64_t v : dims) t->add_dims(v), n *= v;
  std::string raw(static_cast<size_t>(n), '\0');
  for (char& c : raw) c = static_cast<char>(d(rng));
  t->set_raw_data(raw);
}

// ONNX Runtime's dynamic quantizer: x [1, 4, 6, 6] -> DynamicQuantizeLinear -> ConvInteger (uint8 weights, zero point
// 143, 3x3, pads 1) -> Cast(float) -> Mul(x_scale * w_scale) -> Add(bias [1, 8, 1, 1]) -> Relu -> yc; and x
// viewed as [1, 24, 6] -> MatMulInteger (int8 [6, 5], zero point 0) -> Cast -> Mul -> Add(bias [5]) -> ym. With `cast_is_output`, the first Cast's output is a graph output.
onnx::ModelProto DynamicQuantModel(bool cast_is_output) {
  onnx::ModelProto m = NewModel("dynamic_quant", 17);
  onnx::GraphProto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "x", {1, 4, 6, 6});
  AddTensorValueInfo(g->add_output(), "yc", {1, 8, 6, 6});
  AddTensorValueInfo(g->add_output(), "ym", {1, 24, 5});
  AddInt8Init(g, "w", {8, 4, 3, 3}, 1, false);
  AddInt8Init(g, "b", {6, 5}, 2, true);
  auto* wz = g->add_initializer();
  wz->set_name("wz");
  wz->set_data_type(onnx::TensorProto::UINT8);
  wz->set_raw_data(std::string(1, static_cast<char>(143)));
  AddScalar(g, "ws", 0.01f);
  AddScalar(g, "bs", 0.02f);
  auto* shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(3);
  for (int64_t v : {1, 24, 6}) shape->add_int64_data(v);
  AddNode(g, "DynamicQuantizeLinear", "dql", {"x"}, "xq");
  g->mutable_node(0)->add_output("xs");
  g->mutable_node(0)->add_output("xz");
  auto* conv = AddNode(g, "ConvInteger", "conv", {"xq", "w", "xz", "wz"}, "acc");
  auto* a = conv->add_attribute();
  a->set_name("pads");
  a->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) a->add_ints(1);
  SetIntAttr(AddNode(g, "Cast", "cast", {"acc"}, "accf"), "to", onnx::TensorProto::FLOAT);
  AddNode(g, "Mul", "scale", {"xs", "ws"}, "s");
  AddNode(g, "Mul", "dequant", {"accf", "s"}, "yc0");
  AddInit(g, "cb", {1, 8, 1, 1}, 3);
  AddNode(g, "Add", "cbias", {"yc0", "cb"}, "yc1");
  AddNode(g, "Relu", "crelu", {"yc1"}, "yc");
  AddNode(g, "Reshape", "view", {"xq", "shape"}, "xq3");
  AddNode(g, "MatMulInteger", "mm", {"xq3", "b", "xz"}, "macc");
  SetIntAttr(AddNode(g, "Cast", "mcast", {"macc"}, "maccf"), "to", onnx::TensorProto::FLOAT);
  AddNode(g, "Mul", "mscale", {"xs", "bs"}, "ms");
  AddNode(g, "Mul", "mdequant", {"ms", "maccf"}, "ym0");
  AddInit(g, "mb", {5}, 4);
  AddNode(g, "Add", "mbias", {"mb", "ym0"}, "ym");
  if (cast_is_output) AddTensorValueInfo(g->add_output(), "accf", {1, 8, 6, 6});
  return m;
}

TEST(CpuFusion, IntegerProductCastMulBecomesOneNode) {
  auto fused = NewSession(DynamicQuantModel(false), 2), plain = NewSession(DynamicQuantModel(false), 1);
  ASSERT_TRUE(fused && plain);
  EXPECT_EQ(fused->cpu_fusions().output_scales, 2);
  EXPECT_EQ(fused->cpu_fusions().output_biases, 2);
  EXPECT_EQ(fused->cpu_fusions().activations, 1);
  EXPECT_EQ(Ops(fused->planned_graph()), (std::vector<std::string>{"DynamicQuantizeLinear", "ConvInteger+Relu", "Mul",
                                                                    "Reshape", "MatMulInteger", "Mul"}));
  // The same roundings as Cast, Mul and Add: equal values.
  ExpectSameValues(*fused, *plain);
  // A Cast output that is also a graph output stays.
  auto kept = NewSession(DynamicQuantModel(true), 2);
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->cpu_fusions().output_scales, 1);
  // The internal attribute in a model is refused.
  onnx::ModelProto m = DynamicQuantModel(false);
  SetIntAttr(m.mutable_graph()->mutable_node(1), kFusedOutputScaleAttr, 1);
  const std::string bytes = Serialize(m);
  auto s = InferenceSession::CreateFromBytes(bytes.data(), bytes.size(), SessionConfig());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::INVALID_GRAPH) << s.status().ToString();
}

// x [1, 7, 6] -> DynamicQuantizeLinear -> MatMulInteger (int8 [6, 40]) -> Cast -> Mul -> Gather(axis 1, index -1):
// the last row alone, as a language model's head. The fused product reads the Gather of A's rows instead.
TEST(CpuFusion, GatheredRowOfAnIntegerProductIsComputedAlone) {
  for (int64_t index : {-1, 2}) {
    onnx::ModelProto m = NewModel("gathered_row", 17);
    onnx::GraphProto* g = m.mutable_graph();
    AddTensorValueInfo(g->add_input(), "x", {1, 7, 6});
    AddTensorValueInfo(g->add_output(), "y", {1, 40});
    AddInt8Init(g, "b", {6, 40}, 5, true);
    AddScalar(g, "bs", 0.02f);
    auto* idx = g->add_initializer();
    idx->set_name("idx");
    idx->set_data_type(onnx::TensorProto::INT64);
    idx->add_int64_data(index);
    AddNode(g, "DynamicQuantizeLinear", "dql", {"x"}, "xq");
    g->mutable_node(0)->add_output("xs");
    g->mutable_node(0)->add_output("xz");
    AddNode(g, "MatMulInteger", "mm", {"xq", "b", "xz"}, "acc");
    SetIntAttr(AddNode(g, "Cast", "cast", {"acc"}, "accf"), "to", onnx::TensorProto::FLOAT);
    AddNode(g, "Mul", "scale", {"xs", "bs"}, "s");
    AddNode(g, "Mul", "dequant", {"accf", "s"}, "rows");
    SetIntAttr(AddNode(g, "Gather", "last", {"rows", "idx"}, "y"), "axis", 1);
    auto fused = NewSession(m, 2), plain = NewSession(m, 1);
    ASSERT_TRUE(fused && plain);
    EXPECT_EQ(fused->cpu_fusions().gathered_rows, 1);
    EXPECT_EQ(Ops(fused->planned_graph()),
              (std::vector<std::string>{"DynamicQuantizeLinear", "Gather", "Mul", "MatMulInteger"}));
    ExpectSameValues(*fused, *plain, {1, 7, 6});
  }
}

// ---- the layout pass (level 3) ----

// A Conv with weights [cout, cin/group, k...] and a bias, "same" padding, of `rank` spatial dims.
void AddConv(onnx::GraphProto* g, const std::string& name, const std::string& x, const std::string& y, int64_t cin,
             int64_t cout, int64_t k, size_t rank, uint32_t seed, int64_t group = 1) {
  std::vector<int64_t> wd{cout, cin / group};
  for (size_t i = 0; i < rank; ++i) wd.push_back(k);
  AddInit(g, name + ".w", wd, seed);
  AddInit(g, name + ".b", {cout}, seed + 1);
  auto* n = AddNode(g, "Conv", name, {x, name + ".w", name + ".b"}, y);
  auto* a = n->add_attribute();
  a->set_name("pads");
  a->set_type(onnx::AttributeProto::INTS);
  for (size_t i = 0; i < 2 * rank; ++i) a->add_ints(k / 2);
  if (group > 1) {
    auto* ga = n->add_attribute();
    ga->set_name("group");
    ga->set_type(onnx::AttributeProto::INT);
    ga->set_i(group);
  }
}

// x [1, 16, 8, 8]: convolutions with a residual Add, a per-channel Mul, a squeeze-excite block (GlobalAveragePool,
// 1x1 Conv, HardSigmoid, Mul), a nearest Resize, a Concat of 12 + 20 channels (not multiples of 16) and one of
// 16 + 16, a depthwise Conv, MaxPool and AveragePool, and values read by a Conv and a graph output ("r1") and from an
// If branch ("a1").
onnx::ModelProto LayoutModel() {
  onnx::ModelProto m = NewModel("layout", 17);
  onnx::GraphProto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "x", {1, 16, 8, 8});
  AddTensorValueInfo(g->add_input(), "cond", {}, onnx::TensorProto::BOOL);
  AddConv(g, "c1", "x", "c1", 16, 16, 3, 2, 1);
  AddNode(g, "Relu", "relu1", {"c1"}, "r1");
  AddConv(g, "c2", "r1", "c2", 16, 16, 3, 2, 3);
  AddNode(g, "Add", "residual", {"r1", "c2"}, "a1");
  AddConv(g, "c3", "a1", "c3", 16, 32, 1, 2, 5);
  AddNode(g, "Sigmoid", "sig3", {"c3"}, "s3");
  AddInit(g, "k", {1, 32, 1, 1}, 7, 0.5f, 1.5f);
  AddNode(g, "Mul", "scale3", {"s3", "k"}, "m3");
  AddNode(g, "GlobalAveragePool", "gap", {"m3"}, "gp");
  AddConv(g, "se", "gp", "se", 32, 32, 1, 2, 9);
  AddNode(g, "HardSigmoid", "hsig", {"se"}, "hs");
  AddNode(g, "Mul", "excite", {"m3", "hs"}, "ex");
  AddInit(g, "scales", {4}, 0);
  auto* sc = g->mutable_initializer(g->initializer_size() - 1);
  sc->clear_float_data();
  for (float v : {1.f, 1.f, 2.f, 2.f}) sc->add_float_data(v);
  auto* rs = AddNode(g, "Resize", "up", {"ex", "", "scales"}, "u");
  auto* mode = rs->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("nearest");
  // The same upsampling by sizes, and both added.
  auto* sz = g->add_initializer();
  sz->set_name("sizes");
  sz->set_data_type(onnx::TensorProto::INT64);
  sz->add_dims(4);
  for (int64_t v : {1, 32, 16, 16}) sz->add_int64_data(v);
  auto* rs2 = AddNode(g, "Resize", "up2", {"ex", "", "", "sizes"}, "u2");
  rs2->add_attribute()->CopyFrom(*mode);
  AddNode(g, "Add", "ups", {"u", "u2"}, "uu");
  AddConv(g, "c4", "uu", "c4", 32, 16, 3, 2, 11);
  AddScalar(g, "two", 2.f);
  AddNode(g, "Div", "half", {"c4", "two"}, "y");
  // Concat of 12 + 20 channels, then of 16 + 16 (a depthwise Conv on the second half).
  AddConv(g, "c5", "a1", "c5", 16, 12, 1, 2, 13);
  AddConv(g, "c6", "a1", "c6", 16, 20, 1, 2, 15);
  SetIntAttr(AddNode(g, "Concat", "cat1", {"c5", "c6"}, "cat1"), "axis", 1);
  AddConv(g, "c7", "cat1", "c7", 32, 16, 1, 2, 17);
  AddConv(g, "dw", "r1", "dw", 16, 16, 3, 2, 19, 16);
  SetIntAttr(AddNode(g, "Concat", "cat2", {"c7", "dw"}, "cat2"), "axis", -3);
  AddConv(g, "c8", "cat2", "w", 32, 8, 1, 2, 21);
  // MaxPool, Conv, AveragePool.
  auto ints = [](onnx::NodeProto* n, const char* name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  };
  auto* mp = AddNode(g, "MaxPool", "maxpool", {"a1"}, "mp");
  ints(mp, "kernel_shape", {2, 2});
  ints(mp, "strides", {2, 2});
  AddConv(g, "c9", "mp", "c9", 16, 16, 1, 2, 23);
  auto* ap = AddNode(g, "AveragePool", "avgpool", {"c9"}, "v");
  ints(ap, "kernel_shape", {3, 3});
  ints(ap, "pads", {1, 1, 1, 1});
  // If(cond) reads a1 from the enclosing graph.
  AddIf(g, "z", {1, 16, 8, 8}, [](onnx::GraphProto* b, bool then_branch) {
    AddNode(b, then_branch ? "Identity" : "Neg", "op", {"a1"}, "by");
  });
  AddTensorValueInfo(g->add_output(), "y", {1, 16, 16, 16});
  AddTensorValueInfo(g->add_output(), "r1", {1, 16, 8, 8});
  AddTensorValueInfo(g->add_output(), "w", {1, 8, 8, 8});
  AddTensorValueInfo(g->add_output(), "z", {1, 16, 8, 8});
  AddTensorValueInfo(g->add_output(), "v", {1, 16, 4, 4});
  return m;
}

int CountOps(const Graph& g, const std::string& domain, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.domain == domain && node.op_type == op;
  return n;
}

TEST(CpuLayout, EveryLayoutComputesWhatThePlainGraphDoes) {
  auto plain = NewSession(LayoutModel(), 1);
  ASSERT_TRUE(plain);
  for (const char* layout : {"nhwc", "nChw8c", "nChw16c"}) {
    SCOPED_TRACE(layout);
    auto laid = NewSession(LayoutModel(), 99, layout);
    ASSERT_TRUE(laid);
    const CpuFusionStats& st = laid->cpu_fusions();
    EXPECT_GE(st.layout_convs, 8);
    EXPECT_GE(st.layout_nodes, 12);  // Add, Mul, GlobalAveragePool, HardSigmoid, Mul, 2 Resize, Add, Div, pools, Concat
    // r1 (a graph output), a1 (read by the If branches), and y, w, and the values of channel counts that do not fit.
    EXPECT_GE(st.layout_reorders, 2);
    const Graph& g = laid->planned_graph();
    EXPECT_EQ(CountOps(g, kCpuInternalDomain, kLaidOutGlobalAveragePoolOp), 1);
    EXPECT_EQ(CountOps(g, kCpuInternalDomain, kReorderOp), st.layout_reorders);
    // The model's own graph is untouched.
    EXPECT_EQ(CountOps(*laid->model().graph, kCpuInternalDomain, kReorderOp), 0);
    for (bool cond : {true, false}) ExpectSameValues(*laid, *plain, {1, 16, 8, 8}, &cond);
  }
  // Concat of 12 + 20 channels runs laid out only where every input fits (channels-last).
  auto nhwc = NewSession(LayoutModel(), 99, "nhwc"), blocked = NewSession(LayoutModel(), 99, "nChw16c");
  ASSERT_TRUE(nhwc && blocked);
  EXPECT_GT(nhwc->cpu_fusions().layout_nodes, blocked->cpu_fusions().layout_nodes);
  // Level 2 and "plain" leave the layouts alone.
  for (auto& s : {NewSession(LayoutModel(), 2, "nhwc"), NewSession(LayoutModel(), 99, "plain")}) {
    ASSERT_TRUE(s);
    EXPECT_EQ(s->cpu_fusions().layout_convs, 0);
    EXPECT_EQ(CountOps(s->planned_graph(), kCpuInternalDomain, kReorderOp), 0);
  }
}

// `m` at level 3 in every layout computes what it does at level 1 (input "x" of `x_shape`); `check` sees the counts.
void ExpectEveryLayoutMatches(const onnx::ModelProto& m, const Shape& x_shape,
                              const std::function<void(const CpuFusionStats&)>& check) {
  auto plain = NewSession(m, 1);
  ASSERT_TRUE(plain);
  for (const char* layout : {"nhwc", "nChw8c", "nChw16c"}) {
    SCOPED_TRACE(layout);
    auto laid = NewSession(m, 99, layout);
    ASSERT_TRUE(laid);
    check(laid->cpu_fusions());
    ExpectSameValues(*laid, *plain, x_shape);
  }
}

// 1-D convolutions (Silero VAD, openWakeWord) run as 2-D with H = 1 on the same bytes.
TEST(CpuLayout, OneDimensionalConvolutions) {
  onnx::ModelProto m = NewModel("conv1d", 17);
  onnx::GraphProto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "x", {2, 8, 20});
  AddConv(g, "c1", "x", "c1", 8, 16, 3, 1, 31);
  AddNode(g, "Relu", "relu", {"c1"}, "r1");
  AddConv(g, "c2", "r1", "c2", 16, 16, 3, 1, 33);
  AddNode(g, "Add", "residual", {"r1", "c2"}, "a");
  AddConv(g, "c3", "a", "y", 16, 8, 1, 1, 35);
  AddTensorValueInfo(g->add_output(), "y", {2, 8, 20});
  ExpectEveryLayoutMatches(m, {2, 8, 20}, [](const CpuFusionStats& st) {
    EXPECT_EQ(st.layout_convs, 3);
    EXPECT_EQ(st.layout_reorders, 0);
  });
}

// An AveragePool oneDNN averages differently (padding counted, ceil_mode's last window reaching past the padding:
// 8 + 2 pads, windows of 3 at 0, 2, 4, 6, 8): the direct loops run between reorders.
TEST(CpuLayout, PoolingFallbackBetweenReorders) {
  onnx::ModelProto m = NewModel("pool_fallback", 17);
  onnx::GraphProto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "x", {1, 16, 8, 8});
  AddConv(g, "c1", "x", "c1", 16, 16, 3, 2, 61);
  auto* ap = AddNode(g, "AveragePool", "pool", {"c1"}, "p");
  for (auto [name, v] : {std::pair{"kernel_shape", std::vector<int64_t>{3, 3}},
                         std::pair{"strides", std::vector<int64_t>{2, 2}},
                         std::pair{"pads", std::vector<int64_t>{1, 1, 1, 1}}}) {
    auto* a = ap->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  SetIntAttr(ap, "ceil_mode", 1);
  SetIntAttr(ap, "count_include_pad", 1);
  AddConv(g, "c2", "p", "y", 16, 16, 1, 2, 63);
  AddTensorValueInfo(g->add_output(), "y", {1, 16, 5, 5});
  ExpectEveryLayoutMatches(m, {1, 16, 8, 8}, [](const CpuFusionStats& st) { EXPECT_EQ(st.layout_nodes, 1); });
}

TEST(CpuLayout, BadLayoutsAreErrorsNotCrashes) {
  {
    // An unknown layout name in the session config.
    const std::string bytes = Serialize(LayoutModel());
    SessionConfig config;
    config.entries["epctx.cpu_layout"] = "nChw4c";
    auto s = InferenceSession::CreateFromBytes(bytes.data(), bytes.size(), config);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), ErrorCode::INVALID_ARGUMENT);
  }
  {
    // The internal attribute on a Conv in a model file.
    onnx::ModelProto m = LayoutModel();
    auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
    a->set_name(kSrcLayoutAttr);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s("nhwc");
    const std::string bytes = Serialize(m);
    SessionConfig config;
    auto s = InferenceSession::CreateFromBytes(bytes.data(), bytes.size(), config);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), ErrorCode::INVALID_GRAPH);
  }
  {
    // A hand-written internal Reorder whose input does not hold the layout it claims.
    onnx::ModelProto m = NewModel("reorder", 17);
    auto* imp = m.add_opset_import();
    imp->set_domain(kCpuInternalDomain);
    imp->set_version(1);
    onnx::GraphProto* g = m.mutable_graph();
    AddTensorValueInfo(g->add_input(), "x", {1, 4, 6, 6});
    auto* n = AddNode(g, kReorderOp, "r", {"x"}, "y");
    n->set_domain(kCpuInternalDomain);
    for (auto [k, v] : {std::pair{"from", "nChw8c"}, std::pair{"to", "plain"}}) {
      auto* a = n->add_attribute();
      a->set_name(k);
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(v);
    }
    SetIntAttr(n, "channels", 8);
    AddTensorValueInfo(g->add_output(), "y", {1, 4, 6, 6});
    const std::string bytes = Serialize(m);
    SessionConfig config;
    auto s = InferenceSession::CreateFromBytes(bytes.data(), bytes.size(), config);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto x = Tensor::Allocate(DataType::kFloat, {1, 4, 6, 6});
    std::vector<IValue> out;
    Status st = s.value()->Run({"x"}, {IValue(x.value())}, {}, &out);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), ErrorCode::INVALID_ARGUMENT);
    EXPECT_NE(st.ToString().find("nChw8c"), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace epctx
