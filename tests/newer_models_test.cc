// End to end through the public API: models of IR 9-13 and opsets 18-26 (issue 25) load and run on the CPU EP;
// model-local functions run as their inlined bodies.
#include <gtest/gtest.h>

#include <google/protobuf/unknown_field_set.h>

#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using testing::AddNode;
using testing::AddTensorValueInfo;
using testing::NewModel;
using testing::Serialize;

std::vector<float> RunModel(const onnx::ModelProto& m, std::vector<float> x, std::vector<int64_t> shape,
                       std::vector<int64_t>* out_shape) {
  Env env;
  const std::string bytes = Serialize(m);
  Session s(env, bytes.data(), bytes.size(), SessionOptions());
  std::vector<Value> in;
  in.push_back(Value::CreateTensor<float>(x.data(), x.size(), shape.data(), shape.size()));
  auto out = s.Run({"X"}, in, {"Y"});
  *out_shape = out[0].GetTensorTypeAndShapeInfo().GetShape();
  const float* y = out[0].GetTensorData<float>();
  size_t n = 1;
  for (int64_t d : *out_shape) n *= static_cast<size_t>(d);
  return std::vector<float>(y, y + n);
}

TEST(NewerModels, ReduceMeanOpset18WithAxesInputRunsOnCpu) {
  onnx::ModelProto m = NewModel("reduce18", 18);
  m.set_ir_version(10);
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {2, 4});
  auto* axes = g->add_initializer();
  axes->set_name("axes");
  axes->set_data_type(onnx::TensorProto::INT64);
  axes->add_dims(1);
  axes->add_int64_data(1);
  auto* n = AddNode(g, "ReduceMean", "mean", {"X", "axes"}, "Y");
  auto* keep = n->add_attribute();
  keep->set_name("keepdims");
  keep->set_type(onnx::AttributeProto::INT);
  keep->set_i(0);
  AddTensorValueInfo(g->add_output(), "Y", {2});
  std::vector<int64_t> shape;
  const std::vector<float> y = RunModel(m, {0.5f, -1, 2, 7, -3, 1.25f, 0, -0.75f}, {2, 4}, &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(y, (std::vector<float>{2.125f, -0.625f}));
}

// my.fns.Scale(x) <alpha = 0.5>: x * alpha, called with alpha = 3 and with the default (IR 10, opset 26).
TEST(NewerModels, ModelLocalFunctionRunsAsItsBody) {
  onnx::ModelProto m = NewModel("functions", 26);
  m.set_ir_version(10);
  auto* os = m.add_opset_import();
  os->set_domain("my.fns");
  os->set_version(1);
  onnx::FunctionProto* f = m.add_functions();
  f->set_name("Scale");
  f->set_domain("my.fns");
  f->add_input("x");
  f->add_output("y");
  f->add_attribute("alpha");
  auto* fos = f->add_opset_import();
  fos->set_domain("");
  fos->set_version(26);
  auto* c = f->add_node();
  c->set_op_type("Constant");
  c->add_output("a");
  auto* ref = c->add_attribute();
  ref->set_name("value_float");
  ref->set_type(onnx::AttributeProto::FLOAT);
  ref->set_ref_attr_name("alpha");
  auto* mul = f->add_node();
  mul->set_op_type("Mul");
  mul->add_input("x");
  mul->add_input("a");
  mul->add_output("y");
  onnx::AttributeProto def;
  def.set_name("alpha");
  def.set_type(onnx::AttributeProto::FLOAT);
  def.set_f(0.5f);
  f->GetReflection()->MutableUnknownFields(f)->AddLengthDelimited(11, def.SerializeAsString());
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {2, 4});
  auto* first = AddNode(g, "Scale", "times_three", {"X"}, "T");
  first->set_domain("my.fns");
  auto* alpha = first->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(3.0f);
  AddNode(g, "Scale", "halve", {"T"}, "Y")->set_domain("my.fns");
  AddTensorValueInfo(g->add_output(), "Y", {2, 4});
  std::vector<int64_t> shape;
  const std::vector<float> y = RunModel(m, {0.5f, -1, 2, 7, -3, 1.25f, 0, -0.75f}, {2, 4}, &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(y, (std::vector<float>{0.75f, -1.5f, 3, 10.5f, -4.5f, 1.875f, 0, -1.125f}));
}

}  // namespace
}  // namespace epctx
