// Shape-inference rules the loader adds to libonnx 1.12's (src/model/inference_guards.h).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/model.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

// Y = -Sigmoid(Reshape(X, S)): X float [2, 3], S an int64 [shape_len] input (its data unknown before the run; a
// negative shape_len leaves S's length a free dim).
std::string ReshapeToRuntimeShape(int64_t shape_len) {
  onnx::ModelProto m = testing::NewModel("reshape_runtime_shape");
  auto* g = m.mutable_graph();
  testing::AddTensorValueInfo(g->add_input(), "X", {2, 3});
  testing::AddTensorValueInfo(g->add_input(), "S", {std::max<int64_t>(shape_len, 1)}, onnx::TensorProto::INT64);
  if (shape_len < 0)
    g->mutable_input(1)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("L");
  testing::AddNode(g, "Reshape", "reshape", {"X", "S"}, "R");
  testing::AddNode(g, "Sigmoid", "sigmoid", {"R"}, "Z");
  testing::AddNode(g, "Neg", "neg", {"Z"}, "Y");
  auto* y = g->add_output();  // the checker wants a shape on a graph output: rank 3, dims unknown
  y->set_name("Y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int i = 0; i < 3; ++i) y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
  return testing::Serialize(m);
}

TEST(ShapeInference, ReshapeToARunTimeShapeKeepsTheRankOfTheShapeInput) {
  const std::string bytes = ReshapeToRuntimeShape(3);
  StatusOr<std::shared_ptr<Model>> m = LoadModelFromBytes(bytes.data(), bytes.size(), ModelLoadOptions{});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (const char* name : {"R", "Z"}) {  // the rank flows on to the ops after the Reshape
    const ValueType* t = m.value()->graph->FindType(name);
    ASSERT_TRUE(t && t->has_shape) << name;
    ASSERT_EQ(t->dims.size(), 3u) << name;
    for (const Dim& d : t->dims) EXPECT_FALSE(d.known()) << name << ": its dims are not known before the run";
  }
}

TEST(ShapeInference, ReshapeToAShapeOfUnknownLengthHasNoRank) {
  const std::string bytes = ReshapeToRuntimeShape(-1);
  StatusOr<std::shared_ptr<Model>> m = LoadModelFromBytes(bytes.data(), bytes.size(), ModelLoadOptions{});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ValueType* r = m.value()->graph->FindType("R");
  EXPECT_TRUE(!r || !r->has_shape);
}

}  // namespace
}  // namespace epctx
