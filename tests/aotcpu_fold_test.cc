// Constant folding before GetCapability (src/session/constant_folding.h) on the shape of graph that kept a third of
// PaddlePaddle's PP-OCRv4 recognizer on the CPU EP: an attention block whose Reshape target is computed at run time
// from Shape(x) (Shape -> Cast -> Slice -> Concat -> Cast -> Reshape). With free dimensions pinned and folding on
// (the default level), AotCpu compiles the whole graph into one partition; with ORT_DISABLE_ALL the computed target
// stays symbolic and AotCpu leaves the block to the CPU EP, as before folding existed. Values match the CPU EP.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::testing::AddNode;
using epctx::testing::Contains;
using epctx::testing::DevicesOf;
using epctx::testing::NewModel;
using epctx::testing::Serialize;

constexpr const char* kAotLib = EPCTX_BINARY_DIR "/lib/libepctx_aotcpu.so";
constexpr const char* kAot = "AotCpuExecutionProvider";
constexpr int kChannels = 8;

void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// A Constant node with an int32 or int64 1-D tensor (as paddle2onnx writes them).
void IntConstant(onnx::GraphProto* g, const std::string& out, int elem, const std::vector<int64_t>& values) {
  auto* n = AddNode(g, "Constant", out, {}, out);
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  auto* t = a->mutable_t();
  t->set_data_type(elem);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) {
    if (elem == onnx::TensorProto::INT32) t->add_int32_data(static_cast<int32_t>(v));
    else t->add_int64_data(v);
  }
}

void FloatConstant(onnx::GraphProto* g, const std::string& out, const std::vector<int64_t>& dims, float scale) {
  auto* n = AddNode(g, "Constant", out, {}, out);
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  auto* t = a->mutable_t();
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t count = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    count *= d;
  }
  for (int64_t i = 0; i < count; ++i) t->add_float_data(scale * static_cast<float>((i * 7) % 11 - 5));
}

// x float[B,8,1,W] -> r0 = Reshape(Transpose(x), Cast(Concat(Slice(Cast(Shape(x))) [B], Slice(..) [W], [8])))
// = [B,W,8]; r = r0 - ReduceMean(r0, last axis); q = r Wq, k = r Wk; y = Softmax(q k^T / sqrt(8)) r + r.
onnx::ModelProto AttentionNeck() {
  onnx::ModelProto m = NewModel("attention_neck", 9);  // paddle2onnx's opset for the recognizer
  auto* g = m.mutable_graph();
  auto* x = g->add_input();
  x->set_name("x");
  auto* xt = x->mutable_type()->mutable_tensor_type();
  xt->set_elem_type(onnx::TensorProto::FLOAT);
  for (const char* d : {"B", "8", "1", "W"}) {
    auto* dim = xt->mutable_shape()->add_dim();
    if (std::string(d) == "8" || std::string(d) == "1") dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
  auto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int i = 0; i < 3; ++i) y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
  AddNode(g, "Shape", "shape", {"x"}, "s");
  IntAttr(AddNode(g, "Cast", "s32", {"s"}, "s32"), "to", onnx::TensorProto::INT32);
  IntConstant(g, "channels", onnx::TensorProto::INT32, {kChannels});
  auto* b = AddNode(g, "Slice", "b", {"s32"}, "b");  // opset 9: starts/ends are attributes
  IntsAttr(b, "axes", {0});
  IntsAttr(b, "starts", {0});
  IntsAttr(b, "ends", {1});
  auto* w = AddNode(g, "Slice", "w", {"s32"}, "w");
  IntsAttr(w, "axes", {0});
  IntsAttr(w, "starts", {3});
  IntsAttr(w, "ends", {4});
  IntAttr(AddNode(g, "Concat", "target32", {"b", "w", "channels"}, "target32"), "axis", 0);
  IntAttr(AddNode(g, "Cast", "target", {"target32"}, "target"), "to", onnx::TensorProto::INT64);
  IntsAttr(AddNode(g, "Transpose", "xt", {"x"}, "xt"), "perm", {0, 3, 1, 2});
  AddNode(g, "Reshape", "r0", {"xt", "target"}, "r0");
  // The recognizer's LayerNormalization starts the same way: ReduceMean over the last axis, then Sub.
  auto* mean = AddNode(g, "ReduceMean", "mean", {"r0"}, "mean");
  IntsAttr(mean, "axes", {-1});
  IntAttr(mean, "keepdims", 1);
  AddNode(g, "Sub", "r", {"r0", "mean"}, "r");
  FloatConstant(g, "wq", {kChannels, kChannels}, 0.05f);
  FloatConstant(g, "wk", {kChannels, kChannels}, -0.04f);
  FloatConstant(g, "scale", {1}, 1.f / std::sqrt(static_cast<float>(kChannels)) / -5.f);
  AddNode(g, "MatMul", "q", {"r", "wq"}, "q");
  AddNode(g, "MatMul", "k", {"r", "wk"}, "k");
  IntsAttr(AddNode(g, "Transpose", "kt", {"k"}, "kt"), "perm", {0, 2, 1});
  AddNode(g, "MatMul", "scores", {"q", "kt"}, "scores");
  AddNode(g, "Mul", "scaled", {"scores", "scale"}, "scaled");
  IntAttr(AddNode(g, "Softmax", "attn", {"scaled"}, "attn"), "axis", 2);  // opset 9: rows of the last axis
  AddNode(g, "MatMul", "ctx", {"attn", "r"}, "ctx");
  AddNode(g, "Add", "y", {"ctx", "r"}, "y");
  return m;
}

constexpr int64_t kB = 1, kW = 16;

std::vector<float> RunNeck(const Session& s) {
  std::vector<float> x(kB * kChannels * kW);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  const int64_t shape[] = {kB, kChannels, 1, kW};
  std::vector<Value> in;
  in.push_back(Value::CreateTensor<float>(x.data(), x.size(), shape, 4));
  std::vector<Value> out = s.Run({"x"}, in, {"y"});
  const float* y = out[0].GetTensorData<float>();
  return std::vector<float>(y, y + kB * kW * kChannels);
}

SessionOptions Options(const Env* env, GraphOptimizationLevel level) {
  SessionOptions o;
  o.SetIntraOpNumThreads(1);
  o.SetGraphOptimizationLevel(level);
  o.AddFreeDimensionOverrideByName("B", kB);
  o.AddFreeDimensionOverrideByName("W", kW);
  if (env) o.AppendExecutionProvider_V2(*env, DevicesOf(*env, kAot, false), KeyValuePairs());
  return o;
}

int Count(const std::string& s, const std::string& part) {
  int n = 0;
  for (size_t p = s.find(part); p != std::string::npos; p = s.find(part, p + 1)) ++n;
  return n;
}

TEST(AotCpuFold, PinnedShapeSubgraphFoldsAndTheWholeGraphCompilesIntoOnePartition) {
  Env env;
  env.RegisterExecutionProviderLibrary("aotcpu", kAotLib);
  const std::string bytes = Serialize(AttentionNeck());
  Session cpu(env, bytes.data(), bytes.size(), Options(nullptr, GraphOptimizationLevel::ORT_DISABLE_ALL));
  const std::vector<float> expected = RunNeck(cpu);

  Session folded(env, bytes.data(), bytes.size(), Options(&env, GraphOptimizationLevel::ORT_ENABLE_ALL));
  const std::string report = folded.GetSessionReport();
  EXPECT_TRUE(Contains(report, "\"cpu_nodes\":0")) << report;
  EXPECT_EQ(Count(report, "\"ep\":\"AotCpuExecutionProvider\""), 1) << report;
  // The 6 shape nodes and the 4 Constant nodes.
  EXPECT_TRUE(Contains(report, "\"constant_folding\":{\"nodes_folded\":10,")) << report;
  const std::vector<float> got = RunNeck(folded);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], 1e-5f + 1e-4f * std::fabs(expected[i])) << i;

  // Without folding the graph stays as loaded: the Reshape's target is a run-time value, and AotCpu leaves the
  // ReduceMean and everything after it to the CPU EP, as on the recognizer (when written: 13 nodes, through the
  // re-check in its GetCapability; not asserted, AotCpu's own folder may learn this). So the 'cpu_nodes 0'
  // above fails without the session's folding. The values are the same.
  Session plain(env, bytes.data(), bytes.size(), Options(&env, GraphOptimizationLevel::ORT_DISABLE_ALL));
  const std::string plain_report = plain.GetSessionReport();
  EXPECT_TRUE(Contains(plain_report, "\"constant_folding\":{\"nodes_folded\":0,")) << plain_report;
  const std::vector<float> unfolded = RunNeck(plain);
  for (size_t i = 0; i < unfolded.size(); ++i)
    EXPECT_NEAR(unfolded[i], expected[i], 1e-5f + 1e-4f * std::fabs(expected[i])) << i;
}

TEST(AotCpuFold, CompileApiFoldsFromLevelOneAndWritesOneEpContextNode) {
  Env env;
  env.RegisterExecutionProviderLibrary("aotcpu", kAotLib);
  testing::TempDir dir;
  const std::string src = dir / "neck.onnx";
  testing::WriteFile(src, Serialize(AttentionNeck()));
  for (GraphOptimizationLevel level : {GraphOptimizationLevel::ORT_DISABLE_ALL, GraphOptimizationLevel::ORT_ENABLE_BASIC}) {
    const std::string out = dir / (level == GraphOptimizationLevel::ORT_DISABLE_ALL ? "neck0_ctx.onnx" : "neck1_ctx.onnx");
    ModelCompilationOptions c(env, Options(&env, GraphOptimizationLevel::ORT_ENABLE_ALL));  // the compile API's own level wins
    c.SetInputModelPath(src.c_str());
    c.SetOutputModelPath(out.c_str());
    c.SetGraphOptimizationLevel(level);
    ASSERT_TRUE(CompileModel(env, c).IsOK());
    const onnx::ModelProto m = testing::LoadProto(out);
    int ctx_nodes = 0, other = 0;
    for (const auto& n : m.graph().node()) (n.op_type() == "EPContext" ? ctx_nodes : other)++;
    if (level != GraphOptimizationLevel::ORT_DISABLE_ALL) {
      EXPECT_EQ(ctx_nodes, 1);
      EXPECT_EQ(other, 0);
      ASSERT_EQ(m.graph().output_size(), 1);
      EXPECT_EQ(m.graph().output(0).name(), "y");
    }
    Session loaded(env, out.c_str(), Options(&env, GraphOptimizationLevel::ORT_ENABLE_ALL));
    const std::vector<float> got = RunNeck(loaded);
    Session cpu(env, src.c_str(), Options(nullptr, GraphOptimizationLevel::ORT_DISABLE_ALL));
    const std::vector<float> expected = RunNeck(cpu);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], expected[i], 1e-5f + 1e-4f * std::fabs(expected[i])) << i;
  }
}

}  // namespace
}  // namespace epctx
