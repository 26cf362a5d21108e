// Whole input shapes (ModelLoadOptions::input_shapes, session config epctx.input_shapes, `--input-shape`): for inputs
// whose free dims have no dim_param, so free dimension overrides cannot name them (Silero VAD v5).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "model/model.h"
#include "session/session.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

// Y = Relu(X), X float [?, ?] with unnamed dims, and a scalar input S.
std::string UnnamedDimsModel() {
  onnx::ModelProto m = testing::NewModel("unnamed");
  auto* g = m.mutable_graph();
  auto* x = g->add_input();
  x->set_name("X");
  auto* tt = x->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim();
  tt->mutable_shape()->add_dim()->set_dim_value(3);
  testing::AddTensorValueInfo(g->add_input(), "S", {});
  testing::AddNode(g, "Relu", "relu", {"X"}, "Y");
  testing::AddNode(g, "Neg", "neg", {"S"}, "T");
  auto* y = g->add_output();
  y->set_name("Y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
  y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
  testing::AddTensorValueInfo(g->add_output(), "T", {});
  return testing::Serialize(m);
}

StatusOr<std::shared_ptr<Model>> LoadWith(const std::string& shapes) {
  const std::string bytes = UnnamedDimsModel();
  ModelLoadOptions o;
  Status st = ParseInputShapes(shapes, &o.input_shapes);
  if (!st.ok()) return st;
  return LoadModelFromBytes(bytes.data(), bytes.size(), o);
}

TEST(InputShapes, ParseForms) {
  std::map<std::string, std::vector<int64_t>> s;
  ASSERT_TRUE(ParseInputShapes("input:1x512;state:2x1x128,sr:", &s).ok());
  EXPECT_EQ(s["input"], (std::vector<int64_t>{1, 512}));
  EXPECT_EQ(s["state"], (std::vector<int64_t>{2, 1, 128}));
  EXPECT_EQ(s["sr"], (std::vector<int64_t>{}));
  EXPECT_TRUE(ParseInputShapes("", &s).ok());
  for (const char* bad : {"input", ":1x2", "input:1xx2", "input:1x", "input:-1", "input:a", "input:1x+2"}) {
    std::map<std::string, std::vector<int64_t>> b;
    const Status st = ParseInputShapes(bad, &b);
    EXPECT_EQ(st.code(), ErrorCode::INVALID_ARGUMENT) << bad;
    EXPECT_NE(st.message().find(bad), std::string::npos) << st.message();
  }
}

TEST(InputShapes, PinUnnamedDimsAndInferenceFollows) {
  StatusOr<std::shared_ptr<Model>> m = LoadWith("X:4x3");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const ValueType* x = m.value()->graph->FindType("X");
  ASSERT_TRUE(x && x->has_shape);
  ASSERT_EQ(x->dims.size(), 2u);
  EXPECT_EQ(x->dims[0].value, 4);
  EXPECT_EQ(x->dims[1].value, 3);
  const ValueType* y = m.value()->graph->FindType("Y");  // shape inference saw the pinned shape
  ASSERT_TRUE(y && y->has_shape);
  ASSERT_EQ(y->dims.size(), 2u);
  EXPECT_EQ(y->dims[0].value, 4);
}

TEST(InputShapes, BadOverridesAreInvalidArgumentNamingTheInput) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"Z:1x3", "no input of that name (inputs: X, S)"},
      {"X:4x3x1", "has rank 3 but the input has rank 2"},
      {"X:4x5", "sets dim 1 to 5 but the model fixes it to 3"},
      {"S:2", "has rank 1 but the input has rank 0"},
  };
  for (const Case& c : cases) {
    StatusOr<std::shared_ptr<Model>> m = LoadWith(c.text);
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_EQ(m.status().code(), ErrorCode::INVALID_ARGUMENT) << c.text;
    EXPECT_NE(m.status().message().find(c.says), std::string::npos) << m.status().message();
  }
}

TEST(InputShapes, SessionConfigEntry) {
  const std::string bytes = UnnamedDimsModel();
  SessionConfig config;
  config.entries["epctx.input_shapes"] = "X:2x3";
  StatusOr<std::unique_ptr<InferenceSession>> s = InferenceSession::CreateFromBytes(bytes.data(), bytes.size(), config);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s.value()->model().graph->FindType("X")->dims[0].value, 2);
  config.entries["epctx.input_shapes"] = "X:2xq";
  s = InferenceSession::CreateFromBytes(bytes.data(), bytes.size(), config);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(s.status().message().find("epctx.input_shapes"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace epctx
