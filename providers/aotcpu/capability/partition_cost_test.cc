// The partition cost rule (partition_cost.h): its estimates on hand-made graphs and its decisions. The sessions that
// leave such islands on the CPU EP are tested end to end in tests/aotcpu_ops_test.cc (AotCpuIslands).
#include "providers/aotcpu/capability/partition_cost.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "providers/aotcpu/ir/test_graph.h"

namespace epctx {
namespace aotcpu {
namespace {

using test_graph::Dims;
using test_graph::GraphBuilder;
using test_graph::IntA;
using test_graph::IntsA;

// x -> Sin -> <island> -> Sin -> y: the Sins stand for nodes AotCpu leaves on the CPU EP. `island`: the ops of a
// chain on [1, n] floats (binary ops take a constant second operand); returns the island's node indices.
std::vector<int> Island(GraphBuilder* b, int64_t n, const std::vector<std::string>& island) {
  b->Input("x", {1, n});
  b->F32("c", {1, n}, std::vector<float>(static_cast<size_t>(n), 0.5f));
  b->Out("s", {1, n});
  b->N("Sin", {"x"}, {"s"});
  std::string cur = "s";
  std::vector<int> group;
  for (size_t i = 0; i < island.size(); ++i) {
    const std::string out = "i" + std::to_string(i);
    b->Out(out, {1, n});
    const bool binary = island[i] == "Mul" || island[i] == "Add";
    group.push_back(static_cast<int>(b->g.nodes.size()));
    b->N(island[i], binary ? std::vector<std::string>{cur, "c"} : std::vector<std::string>{cur}, {out});
    cur = out;
  }
  b->Out("y", {1, n});
  b->N("Sin", {cur}, {"y"});
  b->Output("y");
  return group;
}

TEST(AotCpuPartitionCost, ALoneEltwiseBetweenCpuNodesDoesNotPay) {
  GraphBuilder b;
  const std::vector<int> group = Island(&b, 128, {"Relu"});
  const PartitionCostRule rule;
  const GroupCost c = EstimateGroupCost(b.g, group, std::vector<bool>(b.g.nodes.size(), false), rule);
  EXPECT_EQ(c.nodes_run, 1);
  EXPECT_DOUBLE_EQ(c.macs, 0);
  EXPECT_DOUBLE_EQ(c.saving_us, kNodeSavedUs);
  EXPECT_EQ(c.boundary_bytes, 1024u);  // s in, i0 out
  EXPECT_DOUBLE_EQ(c.boundary_us, kDefaultSwitchUs + 1024 / kCrossBytesPerUs);
  EXPECT_FALSE(c.whole_graph);
  EXPECT_FALSE(GroupPays(c, rule));
  EXPECT_EQ(NotPayingReason(c, rule),
            "island too small to pay for its boundary: est. saving 0.6 us (1 node, work 0 us) vs boundary 1.3 us "
            "(switch 1.2 us + 1.0 KB crossing); provider option partition_switch_us=0 claims it anyway");
  PartitionCostRule off;
  off.enabled = false;
  EXPECT_TRUE(GroupPays(c, off));
}

// Three nodes the CPU EP would dispatch one by one pay on 128 floats (the measured case: 0.55 us saved per island),
// not on 4096 (1.3 us lost): the crossing bytes outweigh the dispatches saved.
TEST(AotCpuPartitionCost, AShortChainPaysOnlyOnSmallTensors) {
  for (int64_t n : {128, 4096}) {
    SCOPED_TRACE(n);
    GraphBuilder b;
    const std::vector<int> group = Island(&b, n, {"Relu", "Mul", "Add"});
    const GroupCost c = EstimateGroupCost(b.g, group, std::vector<bool>(b.g.nodes.size(), false), PartitionCostRule());
    EXPECT_DOUBLE_EQ(c.saving_us, 3 * kNodeSavedUs);
    EXPECT_EQ(c.boundary_bytes, static_cast<uint64_t>(2 * 4 * n));  // the constant operand does not cross
    EXPECT_EQ(GroupPays(c, PartitionCostRule()), n == 128);
  }
}

TEST(AotCpuPartitionCost, AHeavyConvIslandPays) {
  GraphBuilder b;
  const Dims act = {1, 16, 32, 32};
  b.Input("x", act);
  b.Out("s", act);
  b.F32("w", {16, 16, 3, 3}, std::vector<float>(16 * 16 * 9, 0.01f));
  b.Out("c", act);
  b.Out("r", act);
  b.Out("y", act);
  b.N("Sin", {"x"}, {"s"});
  b.N("Conv", {"s", "w"}, {"c"}).attrs["pads"] = IntsA({1, 1, 1, 1});
  b.N("Relu", {"c"}, {"r"});
  b.N("Sin", {"r"}, {"y"});
  b.Output("y");
  const PartitionCostRule rule;
  const GroupCost c = EstimateGroupCost(b.g, {1, 2}, std::vector<bool>(4, false), rule);
  EXPECT_DOUBLE_EQ(c.macs, 16.0 * 32 * 32 * 16 * 9);  // every output element: 16 input channels x 3 x 3
  EXPECT_DOUBLE_EQ(c.work_us, c.macs / kMacsPerUs);
  EXPECT_DOUBLE_EQ(c.saving_us, 2 * kNodeSavedUs + kSavedFraction * c.work_us);
  EXPECT_EQ(c.boundary_bytes, 2u * 16 * 32 * 32 * 4);  // s in, r out; the weights do not cross
  EXPECT_TRUE(GroupPays(c, rule));
  EXPECT_GT(c.saving_us, 10 * c.boundary_us);
}

TEST(AotCpuPartitionCost, TheWholeGraphIsAlwaysClaimed) {
  GraphBuilder b;
  b.Input("x", {2, 3});
  b.Out("y", {2, 3});
  b.N("Relu", {"x"}, {"y"});
  b.Output("y");
  const PartitionCostRule rule;
  const GroupCost c = EstimateGroupCost(b.g, {0}, {false}, rule);
  EXPECT_TRUE(c.whole_graph);
  EXPECT_LT(c.saving_us, c.boundary_us);
  EXPECT_TRUE(GroupPays(c, rule));
}

// A group is still the whole graph when the only nodes outside it are constants the compiler folds.
TEST(AotCpuPartitionCost, FoldedConstantsOutsideTheGroupKeepItWhole) {
  GraphBuilder b;
  b.Input("x", {2, 3});
  b.I64("dims", {3, 2});
  b.Out("shape", {2});
  b.Out("y", {3, 2});
  b.N("Identity", {"dims"}, {"shape"});
  b.N("Reshape", {"x", "shape"}, {"y"});
  b.Output("y");
  EXPECT_TRUE(EstimateGroupCost(b.g, {1}, {true, false}, PartitionCostRule()).whole_graph);
  EXPECT_FALSE(EstimateGroupCost(b.g, {1}, {false, false}, PartitionCostRule()).whole_graph);
}

// Folded nodes run on neither EP; views are nodes the CPU EP dispatches. A value read by no node of the graph (an If
// body's outer-scope read) leaves the group.
TEST(AotCpuPartitionCost, FoldedNodesAreFreeViewsAreNodes) {
  GraphBuilder b;
  b.Input("x", {4, 8});
  b.I64("shape", {32});
  b.Out("flat", {32});
  b.Out("e", {32});
  b.Out("s", {32});
  b.N("Reshape", {"x", "shape"}, {"flat"});
  b.N("Exp", {"flat"}, {"e"});
  b.N("Sin", {"e"}, {"s"});  // the CPU EP's
  b.Output("s");
  GroupCost c = EstimateGroupCost(b.g, {0, 1}, {false, false, false}, PartitionCostRule());
  EXPECT_EQ(c.nodes_run, 2);
  EXPECT_EQ(c.boundary_bytes, 256u);  // x in, e out; the shape is a constant
  EXPECT_EQ(EstimateGroupCost(b.g, {0, 1}, {false, true, false}, PartitionCostRule()).nodes_run, 1);
  b.g.nodes[2].inputs.clear();
  b.g.v(b.g.Find("e")).consumers.clear();
  EXPECT_EQ(EstimateGroupCost(b.g, {0, 1}, {false, false, false}, PartitionCostRule()).boundary_bytes, 256u);
  EXPECT_TRUE(IsZeroCopyView(b.g, b.g.nodes[0]));
  EXPECT_FALSE(IsZeroCopyView(b.g, b.g.nodes[1]));
  // A Cast is a view only to its own type.
  b.Out("si", {32});
  b.g.v(b.g.Find("si")).dtype = kI64;
  b.Out("sf", {32});
  EXPECT_FALSE(IsZeroCopyView(b.g, b.N("Cast", {"e"}, {"si"})));
  EXPECT_TRUE(IsZeroCopyView(b.g, b.N("Cast", {"e"}, {"sf"})));
}

TEST(AotCpuPartitionCost, MultiplyAddsOfTheHeavyOps) {
  GraphBuilder b;
  b.Input("a", {2, 5, 7});
  b.F32("wm", {7, 3}, std::vector<float>(21, 1.f));
  b.Out("mm", {2, 5, 3});
  b.N("MatMul", {"a", "wm"}, {"mm"});
  EXPECT_DOUBLE_EQ(NodeMacs(b.g, b.g.nodes[0]), 2.0 * 5 * 3 * 7);

  b.Input("g", {7, 5});  // transA: A is [K, M]
  b.F32("wg", {7, 4}, std::vector<float>(28, 1.f));
  b.Out("gy", {5, 4});
  Node& gemm = b.N("Gemm", {"g", "wg"}, {"gy"});
  gemm.attrs["transA"] = IntA(1);
  EXPECT_DOUBLE_EQ(NodeMacs(b.g, b.g.nodes[1]), 5.0 * 4 * 7);

  b.Input("d", {1, 8, 4, 4});  // W [Cin 8, Cout/group 2, 3, 3]: every input element feeds 2 x 3 x 3 products
  b.F32("wd", {8, 2, 3, 3}, std::vector<float>(144, 1.f));
  b.Out("dy", {1, 2, 6, 6});
  b.N("ConvTranspose", {"d", "wd"}, {"dy"});
  EXPECT_DOUBLE_EQ(NodeMacs(b.g, b.g.nodes[2]), 8.0 * 4 * 4 * 2 * 9);

  b.Input("seq", {3, 1, 10});  // T 3, N 1, I 10, H 6
  b.F32("W", {1, 24, 10}, std::vector<float>(240, 0.f));
  b.F32("R", {1, 24, 6}, std::vector<float>(144, 0.f));
  b.Out("Y", {3, 1, 1, 6});
  b.N("LSTM", {"seq", "W", "R"}, {"Y"});
  EXPECT_DOUBLE_EQ(NodeMacs(b.g, b.g.nodes[3]), 3.0 * (240 + 144));

  b.Out("ry", {2, 5, 3});
  b.N("Relu", {"mm"}, {"ry"});
  EXPECT_DOUBLE_EQ(NodeMacs(b.g, b.g.nodes[4]), 0);
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
