// Nested subgraphs (If branches) are offered to plugin EPs on their own, bottom-up: the example EP takes the
// Add/Relu inside a branch, the If itself stays on the CPU EP, and the outputs equal the CPU-only run.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "epctx/epctx.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::testing::AddTensorValueInfo;
using epctx::testing::AddWeight;
using epctx::testing::kExampleLib;
using epctx::testing::RunIf;
using epctx::testing::WithExample;

// Y = If(cond, then: Relu(X + W) * W, else: X - W) with X read from the outer scope.
onnx::ModelProto IfModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("if_model");
  AddTensorValueInfo(g->add_input(), "cond", {}, onnx::TensorProto::BOOL);
  AddTensorValueInfo(g->add_input(), "X", {4});
  AddTensorValueInfo(g->add_output(), "Y", {4});
  AddWeight(g, "W", {1.f, -2.f, 3.f, -4.f});
  auto* node = g->add_node();
  node->set_op_type("If");
  node->set_name("if");
  node->add_input("cond");
  node->add_output("Y");
  auto branch = [](const std::string& name, bool then) {
    onnx::GraphProto b;
    b.set_name(name);
    AddTensorValueInfo(b.add_output(), name + "_out", {4});
    auto add = [&](const std::string& op, std::vector<std::string> in, const std::string& out) {
      auto* n = b.add_node();
      n->set_op_type(op);
      n->set_name(name + "_" + out);
      for (auto& i : in) n->add_input(i);
      n->add_output(out);
    };
    if (then) {
      add("Add", {"X", "W"}, "s");
      add("Relu", {"s"}, "r");
      add("Mul", {"r", "W"}, name + "_out");
    } else {
      add("Sub", {"X", "W"}, name + "_out");
    }
    return b;
  };
  auto* a1 = node->add_attribute();
  a1->set_name("then_branch");
  a1->set_type(onnx::AttributeProto::GRAPH);
  *a1->mutable_g() = branch("then", true);
  auto* a2 = node->add_attribute();
  a2->set_name("else_branch");
  a2->set_type(onnx::AttributeProto::GRAPH);
  *a2->mutable_g() = branch("else", false);
  return m;
}

TEST(PluginSubgraphs, BranchNodesGoToThePluginAndMatchTheCpu) {
  std::string bytes;
  IfModel().SerializeToString(&bytes);
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  Session plugin(env, bytes.data(), bytes.size(), WithExample(env));
  Session cpu(env, bytes.data(), bytes.size(), SessionOptions());
  auto parts = plugin.GetPartitionAssignments();
  ASSERT_EQ(parts.size(), 1u) << "the then-branch's Add/Relu/Mul form one partition";
  EXPECT_EQ(parts.begin()->second, "ExampleExecutionProvider");
  for (bool c : {true, false}) EXPECT_EQ(RunIf(plugin, c), RunIf(cpu, c)) << "cond " << c;
  EXPECT_EQ(RunIf(cpu, true), (std::vector<float>{1.5f, 0.f, 0.f, 0.f}));  // Relu(X+W)*W
}

}  // namespace
}  // namespace epctx
