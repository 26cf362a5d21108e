// The loader's topological sort (src/model/topo_sort.h): unsorted graphs load and run as their sorted form does, the
// order is stable, subgraphs may read outer values produced later in the file, cycles and unknown names are refused.
#include "model/topo_sort.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "model/model.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using testing::AddNode;
using testing::AddTensorValueInfo;
using testing::AddWeight;
using testing::Contains;
using testing::FloatNx4;
using testing::NewModel;
using testing::Serialize;

std::vector<std::string> NodeNames(const onnx::GraphProto& g) {
  std::vector<std::string> names;
  for (const auto& n : g.node()) names.push_back(n.name());
  return names;
}

// Y = Sigmoid((float)(float16)X * W), with the nodes in the order given (the float16 converter's shape: the input's
// Cast last).
onnx::ModelProto CastModel(const std::vector<std::string>& order) {
  onnx::ModelProto m = NewModel("cast_last");
  auto* g = m.mutable_graph();
  *g->add_input() = FloatNx4("X");
  *g->add_output() = FloatNx4("Y");
  AddWeight(g, "W", {0.5f, -1.f, 2.f, 0.25f});
  for (const std::string& name : order) {
    if (name == "to_half") {
      AddNode(g, "Cast", name, {"X"}, "graph_input_cast_0");
      auto* a = g->mutable_node(g->node_size() - 1)->add_attribute();
      a->set_name("to");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(onnx::TensorProto::FLOAT16);
    } else if (name == "to_float") {
      AddNode(g, "Cast", name, {"graph_input_cast_0"}, "C");
      auto* a = g->mutable_node(g->node_size() - 1)->add_attribute();
      a->set_name("to");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(onnx::TensorProto::FLOAT);
    } else if (name == "mul") {
      AddNode(g, "Mul", name, {"C", "W"}, "M");
    } else {
      AddNode(g, "Sigmoid", name, {"M"}, "Y");
    }
  }
  return m;
}

StatusOr<std::shared_ptr<Model>> Load(const onnx::ModelProto& m) {
  const std::string bytes = Serialize(m);
  return LoadModelFromBytes(bytes.data(), bytes.size(), ModelLoadOptions{});
}

TEST(TopoSort, AnUnsortedGraphLoadsSortedAndRunsAsTheSortedOne) {
  const onnx::ModelProto sorted = CastModel({"to_half", "to_float", "mul", "sigmoid"});
  const onnx::ModelProto unsorted = CastModel({"mul", "sigmoid", "to_float", "to_half"});
  auto m = Load(unsorted);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(NodeNames(m.value()->proto->graph()), (std::vector<std::string>{"to_half", "to_float", "mul", "sigmoid"}));
  ASSERT_EQ(m.value()->graph->nodes.size(), 4u);
  EXPECT_EQ(m.value()->graph->nodes[0].name, "to_half");  // the Graph follows the sorted proto, index for index

  Env env;
  const std::string a = Serialize(sorted), b = Serialize(unsorted);
  Session s_sorted(env, a.data(), a.size(), SessionOptions());
  Session s_unsorted(env, b.data(), b.size(), SessionOptions());
  const std::vector<float> want = testing::RunOne(s_sorted);
  EXPECT_EQ(testing::RunOne(s_unsorted), want);
  // And not trivially: the float16 round trip and the weights are in the result.
  ASSERT_EQ(want.size(), testing::kInput.size());
  const float w[4] = {0.5f, -1.f, 2.f, 0.25f};
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(want[i], 1.f / (1.f + std::exp(-testing::kInput[i] * w[i % 4])), 2e-3f) << i;
}

TEST(TopoSort, TheOrderIsStable) {
  // Three independent chains: a sorted graph keeps its file order exactly (no regrouping by depth) ...
  onnx::GraphProto g;
  g.set_name("g");
  *g.add_input() = FloatNx4("X");
  AddNode(&g, "Relu", "a1", {"X"}, "a");
  AddNode(&g, "Neg", "b1", {"X"}, "b");
  AddNode(&g, "Neg", "a2", {"a"}, "a_2");
  AddNode(&g, "Abs", "c1", {"X"}, "c");
  AddNode(&g, "Sum", "s", {"a_2", "b", "c"}, "Y");
  *g.add_output() = FloatNx4("Y");
  onnx::GraphProto copy = g;
  ASSERT_TRUE(SortNodesTopologically(&copy, "'t'").ok());
  EXPECT_EQ(NodeNames(copy), NodeNames(g));
  // ... and an unsorted one moves only the nodes that must: the earliest ready node in file order goes first.
  onnx::GraphProto u;
  u.set_name("u");
  *u.add_input() = FloatNx4("X");
  AddNode(&u, "Neg", "a2", {"a"}, "a_2");
  AddNode(&u, "Neg", "b1", {"X"}, "b");
  AddNode(&u, "Sum", "s", {"a_2", "b"}, "Y");
  AddNode(&u, "Relu", "a1", {"X"}, "a");
  *u.add_output() = FloatNx4("Y");
  ASSERT_TRUE(SortNodesTopologically(&u, "'t'").ok());
  EXPECT_EQ(NodeNames(u), (std::vector<std::string>{"b1", "a1", "a2", "s"}));
}

// Y = If(cond, then: 2 * late, else: -X) with late = X * X computed by a node AFTER the If in the file, and the then
// branch itself unsorted.
onnx::ModelProto IfReadingALaterValue() {
  onnx::ModelProto m = NewModel("if_late");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "cond", {}, onnx::TensorProto::BOOL);
  AddTensorValueInfo(g->add_input(), "X", {4});
  AddTensorValueInfo(g->add_output(), "Y", {4});
  auto* node = AddNode(g, "If", "if", {"cond"}, "Y");
  AddNode(g, "Mul", "square", {"X", "X"}, "late");
  onnx::GraphProto then_g, else_g;
  then_g.set_name("then");
  AddTensorValueInfo(then_g.add_output(), "then_out", {4});
  AddNode(&then_g, "Identity", "then_id", {"t"}, "then_out");
  AddNode(&then_g, "Add", "then_add", {"late", "late"}, "t");
  else_g.set_name("else");
  AddTensorValueInfo(else_g.add_output(), "else_out", {4});
  AddNode(&else_g, "Neg", "else_neg", {"X"}, "else_out");
  for (const auto& [attr, body] : std::vector<std::pair<const char*, onnx::GraphProto*>>{{"then_branch", &then_g},
                                                                                        {"else_branch", &else_g}}) {
    auto* a = node->add_attribute();
    a->set_name(attr);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = *body;
  }
  return m;
}

TEST(TopoSort, ASubgraphMayReadAnOuterValueThatALaterNodeProduces) {
  const onnx::ModelProto m = IfReadingALaterValue();
  auto loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const onnx::GraphProto& g = loaded.value()->proto->graph();
  EXPECT_EQ(NodeNames(g), (std::vector<std::string>{"square", "if"}));
  EXPECT_EQ(NodeNames(g.node(1).attribute(0).g()), (std::vector<std::string>{"then_add", "then_id"}));

  Env env;
  const std::string bytes = Serialize(m);
  Session s(env, bytes.data(), bytes.size(), SessionOptions());
  EXPECT_EQ(testing::RunIf(s, true), (std::vector<float>{0.5f, 2.f, 50.f, 8.f}));
  EXPECT_EQ(testing::RunIf(s, false), (std::vector<float>{-0.5f, -1.f, 5.f, -2.f}));
}

TEST(TopoSort, ANestedSubgraphsOuterReadOrdersTheOutermostNode) {
  // outer If -> inner If -> Identity(late); late is produced after the outer If.
  onnx::GraphProto inner;
  inner.set_name("inner");
  AddTensorValueInfo(inner.add_output(), "inner_out", {4});
  AddNode(&inner, "Identity", "deep_read", {"late"}, "inner_out");
  onnx::GraphProto branch;
  branch.set_name("branch");
  AddTensorValueInfo(branch.add_output(), "branch_out", {4});
  auto* inner_if = AddNode(&branch, "If", "inner_if", {"cond"}, "branch_out");
  for (const char* attr : {"then_branch", "else_branch"}) {
    auto* a = inner_if->add_attribute();
    a->set_name(attr);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = inner;
  }
  onnx::GraphProto g;
  g.set_name("main");
  AddTensorValueInfo(g.add_input(), "cond", {}, onnx::TensorProto::BOOL);
  AddTensorValueInfo(g.add_input(), "X", {4});
  AddTensorValueInfo(g.add_output(), "Y", {4});
  auto* outer_if = AddNode(&g, "If", "outer_if", {"cond"}, "Y");
  for (const char* attr : {"then_branch", "else_branch"}) {
    auto* a = outer_if->add_attribute();
    a->set_name(attr);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = branch;
  }
  AddNode(&g, "Relu", "late_producer", {"X"}, "late");
  ASSERT_TRUE(SortNodesTopologically(&g, "'t'").ok());
  EXPECT_EQ(NodeNames(g), (std::vector<std::string>{"late_producer", "outer_if"}));
}

TEST(TopoSort, ACycleIsRefusedNamingItsNodesAndValuesInOrder) {
  onnx::ModelProto m = NewModel("cycle");
  auto* g = m.mutable_graph();
  *g->add_input() = FloatNx4("X");
  *g->add_output() = FloatNx4("Y");
  AddNode(g, "Relu", "before", {"X"}, "R");
  AddNode(g, "Add", "n1", {"R", "B"}, "A");
  AddNode(g, "Relu", "n2", {"A"}, "B");
  AddNode(g, "Identity", "n3", {"A"}, "Y");
  auto loaded = Load(m);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), ErrorCode::INVALID_GRAPH);
  EXPECT_TRUE(Contains(loaded.status().message(),
                       "graph 'cycle' has a cycle: Add node 'n1' -> 'A' -> Relu node 'n2' -> 'B' -> Add node 'n1'"))
      << loaded.status().ToString();

  // A node reading its own output, unnamed: named by position and output.
  onnx::GraphProto self;
  self.set_name("self");
  *self.add_input() = FloatNx4("X");
  AddNode(&self, "Add", "", {"X", "S"}, "S");
  Status st = SortNodesTopologically(&self, "'t'");
  EXPECT_EQ(st.code(), ErrorCode::INVALID_GRAPH);
  EXPECT_TRUE(Contains(st.message(), "has a cycle: Add node #0 (output 'S') -> 'S' -> Add node #0 (output 'S')"))
      << st.ToString();

  // Through a subgraph: the If's branch reads 'B', which a node computes from the If's output.
  onnx::ModelProto c = IfReadingALaterValue();
  auto* square = c.mutable_graph()->mutable_node(1);
  square->set_input(0, "Y");
  auto sub = Load(c);
  ASSERT_FALSE(sub.ok());
  EXPECT_TRUE(Contains(sub.status().message(), "has a cycle: If node 'if' -> 'Y' -> Mul node 'square' -> 'late' -> "
                                               "If node 'if'"))
      << sub.status().ToString();
}

TEST(TopoSort, ALongCycleIsShortenedInTheMessage) {
  onnx::GraphProto g;
  g.set_name("ring");
  const int n = 40;
  for (int i = 0; i < n; ++i)
    AddNode(&g, "Relu", "r" + std::to_string(i), {"v" + std::to_string((i + n - 1) % n)}, "v" + std::to_string(i));
  Status st = SortNodesTopologically(&g, "'t'");
  EXPECT_EQ(st.code(), ErrorCode::INVALID_GRAPH);
  EXPECT_TRUE(Contains(st.message(), "(40 nodes on the cycle)")) << st.ToString();
  EXPECT_LT(st.message().size(), 1000u);
}

TEST(TopoSort, ANameNothingProducesIsRefusedNamingTheNodeAndTheGraph) {
  onnx::ModelProto m = NewModel("missing");
  auto* g = m.mutable_graph();
  *g->add_input() = FloatNx4("X");
  *g->add_output() = FloatNx4("Y");
  AddNode(g, "Add", "add", {"X", "nowhere"}, "Y");
  auto loaded = Load(m);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), ErrorCode::INVALID_GRAPH);
  EXPECT_TRUE(Contains(loaded.status().message(), "Add node 'add' in graph 'missing' reads 'nowhere', which no node, "
                                                  "graph input or initializer of that graph produces"))
      << loaded.status().ToString();

  // In a subgraph the message names the branch and the node that owns it.
  onnx::ModelProto s = IfReadingALaterValue();
  s.mutable_graph()->mutable_node(1)->set_output(0, "not_late");
  auto sub = Load(s);
  ASSERT_FALSE(sub.ok());
  EXPECT_TRUE(Contains(sub.status().message(),
                       "Add node 'then_add' in graph 'then' (attribute 'then_branch' of If node 'if' in graph "
                       "'if_late') reads 'late', which no node, graph input or initializer of that graph or of an "
                       "enclosing graph produces"))
      << sub.status().ToString();

  onnx::ModelProto o = NewModel("out");
  *o.mutable_graph()->add_input() = FloatNx4("X");
  *o.mutable_graph()->add_output() = FloatNx4("Z");
  AddNode(o.mutable_graph(), "Relu", "r", {"X"}, "Y");
  auto out = Load(o);
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(Contains(out.status().message(), "graph output 'Z' is produced by no node, graph input or initializer of graph 'out'"))
      << out.status().ToString();
}

TEST(TopoSort, AValueProducedTwiceIsLeftToTheChecker) {
  onnx::ModelProto m = NewModel("dup");
  auto* g = m.mutable_graph();
  *g->add_input() = FloatNx4("X");
  *g->add_output() = FloatNx4("Y");
  AddNode(g, "Relu", "b", {"X"}, "Y");
  AddNode(g, "Neg", "a", {"X"}, "Y");
  auto loaded = Load(m);
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(Contains(loaded.status().message(), "SSA")) << loaded.status().ToString();
}

}  // namespace
}  // namespace epctx
