// Gradient through a graph with broadcasting and a chain of ops; unsupported ops are refused by name.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "session/session.h"

namespace epctx {
namespace {

void AddInput(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims) {
  auto* in = g->add_input();
  in->set_name(name);
  auto* t = in->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}
void AddNode(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in, std::string out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (auto& i : in) n->add_input(i);
  n->add_output(out);
}

// y = Sum-free chain: c = a * b (b broadcast over rows), d = c / b, e = Tanh(d) + a ; gradients wrt a and b.
onnx::ModelProto GradModel(const std::string& middle_op) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* os = m.add_opset_import();
  os->set_version(17);
  auto* tr = m.add_opset_import();
  tr->set_domain("ai.onnx.preview.training");
  tr->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name("grad");
  AddInput(g, "a", {2, 2});
  AddInput(g, "b", {2});
  AddNode(g, "Mul", {"a", "b"}, "c");
  AddNode(g, "Div", {"c", "b"}, "d");
  AddNode(g, middle_op, {"d"}, "t");
  AddNode(g, "Add", {"t", "a"}, "e");
  auto* gr = g->add_node();
  gr->set_op_type("Gradient");
  gr->set_domain("ai.onnx.preview.training");
  gr->add_input("a");
  gr->add_input("b");
  gr->add_output("ga");
  gr->add_output("gb");
  auto* xs = gr->add_attribute();
  xs->set_name("xs");
  xs->set_type(onnx::AttributeProto::STRINGS);
  xs->add_strings("a");
  xs->add_strings("b");
  auto* y = gr->add_attribute();
  y->set_name("y");
  y->set_type(onnx::AttributeProto::STRING);
  y->set_s("e");
  for (const char* o : {"ga", "gb"}) {
    auto* out = g->add_output();
    out->set_name(o);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    out->mutable_type()->mutable_tensor_type()->mutable_shape();
  }
  return m;
}

TEST(Gradient, ChainWithBroadcasting) {
  std::string bytes;
  GradModel("Tanh").SerializeToString(&bytes);
  auto s = InferenceSession::CreateFromBytes(bytes.data(), bytes.size(), SessionConfig());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Tensor a = Tensor::Allocate(DataType::kFloat, {2, 2}).value();
  Tensor b = Tensor::Allocate(DataType::kFloat, {2}).value();
  float av[] = {0.5f, -1.f, 2.f, 0.f}, bv[] = {3.f, -2.f};
  std::copy(av, av + 4, a.data<float>());
  std::copy(bv, bv + 2, b.data<float>());
  std::vector<IValue> out;
  ASSERT_TRUE(s.value()->Run({"a", "b"}, {IValue(a), IValue(b)}, {}, &out).ok());
  // e = tanh(a*b/b) + a = tanh(a) + a: de/da = 1 - tanh(a)^2 + 1, de/db = 0 (the b's cancel).
  for (int i = 0; i < 4; ++i) {
    double t = std::tanh(av[i]);
    EXPECT_NEAR(out[0].tensor().data<float>()[i], 2 - t * t, 1e-6) << i;
  }
  ASSERT_EQ(out[1].tensor().shape(), (Shape{2}));
  EXPECT_NEAR(out[1].tensor().data<float>()[0], 0.0, 1e-6);
  EXPECT_NEAR(out[1].tensor().data<float>()[1], 0.0, 1e-6);
}

TEST(Gradient, UnsupportedOpIsNamed) {
  std::string bytes;
  GradModel("Softplus").SerializeToString(&bytes);
  auto s = InferenceSession::CreateFromBytes(bytes.data(), bytes.size(), SessionConfig());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::NOT_IMPLEMENTED);
  EXPECT_NE(s.status().message().find("Softplus"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace epctx
