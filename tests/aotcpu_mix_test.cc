// Two compiling EPs in one ctx model: the example EP and AotCpu each compile part of a graph, the generated
// _ctx.onnx holds EPContext nodes of both (each with its own binary), and a session with both EPs loads each node
// through the EP that wrote it, giving the same outputs as the CPU EP on the source model.
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
using epctx::testing::AddTensorValueInfo;
using epctx::testing::ContextNodes;
using epctx::testing::CpuReference;
using epctx::testing::DevicesOf;
using epctx::testing::Exists;
using epctx::testing::kExample;
using epctx::testing::kExampleLib;
using epctx::testing::LoadProto;
using epctx::testing::NewModel;
using epctx::testing::RunOne;
using epctx::testing::Serialize;
using epctx::testing::StrAttr;
using epctx::testing::TempDir;

constexpr const char* kAotLib = EPCTX_BINARY_DIR "/lib/libepctx_aotcpu.so";
constexpr const char* kAot = "AotCpuExecutionProvider";

// Y = Softmax(Relu(Add(MatMul(X, W), B))), X [2,4]: the example EP (first in priority) takes Add and Relu,
// AotCpu takes MatMul and Softmax, so the ctx model alternates aotcpu / example / aotcpu EPContext nodes.
onnx::ModelProto MixedModel() {
  onnx::ModelProto m = NewModel("mixed");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {2, 4});
  AddTensorValueInfo(g->add_output(), "Y", {2, 4});
  auto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->add_dims(4);
  for (int i = 0; i < 16; ++i) w->add_float_data(0.25f * static_cast<float>((i * 7) % 5) - 0.5f);
  auto* b = g->add_initializer();
  b->set_name("B");
  b->set_data_type(onnx::TensorProto::FLOAT);
  b->add_dims(4);
  for (float v : {0.1f, -0.2f, 0.3f, 0.0f}) b->add_float_data(v);
  AddNode(g, "MatMul", "mm", {"X", "W"}, "P");
  AddNode(g, "Add", "bias", {"P", "B"}, "Q");
  AddNode(g, "Relu", "relu", {"Q"}, "R");
  auto* sm = AddNode(g, "Softmax", "softmax", {"R"}, "Y");
  auto* axis = sm->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(-1);
  return m;
}

// AotCpu's partition cost rule is off (partition_switch_us=0): the islands the example EP leaves it are single nodes
// on 4 floats, which the rule would leave on the CPU EP, and this test is about a context model from two EPs.
SessionOptions BothEps(const Env& env) {
  SessionOptions o;
  o.SetIntraOpNumThreads(1);
  o.AppendExecutionProvider_V2(env, DevicesOf(env, kExample, false), KeyValuePairs());
  o.AppendExecutionProvider_V2(env, DevicesOf(env, kAot, false), KeyValuePairs{{"partition_switch_us", "0"}});
  return o;
}

TEST(AotCpuMix, ContextModelFromTwoEpsLoadsEachNodeThroughItsOwnEp) {
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  env.RegisterExecutionProviderLibrary("aotcpu", kAotLib);
  const onnx::ModelProto m = MixedModel();
  const std::vector<float> expected = CpuReference(m);
  TempDir dir;
  const std::string src = dir / "mixed.onnx";
  epctx::testing::WriteFile(src, Serialize(m));
  const std::string ctx = dir / "mixed_ctx.onnx";
  std::vector<float> compiled;
  {
    SessionOptions o = BothEps(env);
    o.AddConfigEntry("ep.context_enable", "1");
    o.AddConfigEntry("ep.context_file_path", ctx.c_str());
    Session s(env, src.c_str(), o);
    size_t aot = 0, example = 0;
    for (const auto& [node, ep] : s.GetPartitionAssignments()) (ep == kAot ? aot : example) += 1;
    EXPECT_EQ(aot, 2u) << s.GetSessionReport();
    EXPECT_EQ(example, 1u) << s.GetSessionReport();
    compiled = RunOne(s, "X", "Y");
  }
  ASSERT_TRUE(Exists(ctx));
  EXPECT_TRUE(Exists(dir / "mixed_ctx_aotcpu.bin"));
  EXPECT_TRUE(Exists(dir / "mixed_ctx_example.bin"));
  const onnx::ModelProto proto = LoadProto(ctx);
  std::vector<std::string> sources;
  for (const auto* n : ContextNodes(proto)) sources.push_back(StrAttr(*n, "source"));
  EXPECT_EQ(sources, (std::vector<std::string>{kAot, kExample, kAot}));

  Session loaded(env, ctx.c_str(), BothEps(env));
  const std::vector<float> got = RunOne(loaded, "X", "Y");
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], 1e-6) << i;
    EXPECT_EQ(got[i], compiled[i]) << i;
  }
}

}  // namespace
}  // namespace epctx
