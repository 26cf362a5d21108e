// The tensor family (tensor_*.cc) and the reductions on hand-built graphs in the opset-18 forms the runtime cannot load yet (it reads
// opsets up to 17): Split with num_outputs, Pad with an axes input, ReduceMean/ReduceMax with an axes input. Each
// graph is compiled, its program serialized and parsed back, run by the Executor and compared with a reference
// computed here. (tests/aotcpu_ops_test.cc runs the opset <= 17 forms end to end against the CPU EP.)
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "providers/aotcpu/capability/capability.h"
#include "providers/aotcpu/ir/test_graph.h"
#include "providers/aotcpu/lower/ops.h"
#include "providers/aotcpu/plan/compiler.h"
#include "providers/aotcpu/runtime/executor.h"
#include "providers/aotcpu/runtime/program.h"

namespace epctx {
namespace aotcpu {
namespace {

using namespace test_graph;  // GraphBuilder, Dims, Numel, IntA, FloatA, IntsA, StrA

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 101) - 50.f;
  return v;
}

// Compiles every node (each must be supported), round-trips the program, runs it on `inputs`.
std::vector<std::vector<float>> CompileAndRun(const GraphBuilder& b, const std::vector<std::vector<float>>& inputs,
                                              Program* program = nullptr) {
  for (const Node& n : b.g.nodes) {
    std::string why;
    EXPECT_TRUE(IsNodeSupported(b.g, n, &why)) << n.name << ": " << why;
  }
  std::vector<std::string> ins, outs;
  for (int v : b.g.inputs) ins.push_back(b.g.v(v).name);
  for (int v : b.g.outputs) outs.push_back(b.g.v(v).name);
  CompiledGraph cg;
  CheckResult r = CompileGraph(b.g, ins, outs, CompileOptions(), &cg);
  EXPECT_TRUE(r.ok) << r.reason;
  if (!r.ok) return {};
  Program p;
  r = ParseProgram(SerializeProgram(cg.program), static_cast<uint32_t>(cg.weights.size()), &p);
  EXPECT_TRUE(r.ok) << r.reason;
  if (program) *program = p;
  std::vector<WeightRef> w;
  for (const TensorInput& t : cg.weights) w.push_back({t.bytes.data(), t.bytes.size()});
  std::unique_ptr<Executor> exec;
  r = Executor::Create(p, std::move(w), 1, &exec);
  EXPECT_TRUE(r.ok) << r.reason;
  if (!r.ok) return {};
  std::vector<const void*> in;
  for (const auto& v : inputs) in.push_back(v.data());
  std::vector<std::vector<float>> out;
  for (const IoInfo& o : p.outputs) out.emplace_back(static_cast<size_t>(Numel(o.dims)), -999.f);
  std::vector<void*> outp;
  for (auto& v : out) outp.push_back(v.data());
  r = exec->Run(in, outp);
  EXPECT_TRUE(r.ok) << r.reason;
  return out;
}

// Split-18 with num_outputs: equal parts of ceil(dim / n), the last one smaller.
// Sub-blocks of blocked operands as views (Split and Slice read them in place): a batch-1 channel split of nChw16c at
// a block multiple and a row split of nhwc are views at the right byte offset; a split inside a block, of nhwc
// channels, of a batch-2 tensor, or one that would pad are not.
TEST(OpsTensor, BlockedSubViews) {
  using tag = dnnl::memory::format_tag;
  auto op = [](tag t, std::vector<int64_t> dims) {
    Operand o;
    o.buf = Buf::kArena;
    o.offset = 64;
    o.dims = dims;
    o.tag = static_cast<uint32_t>(t);
    return o;
  };
  Operand v;
  ASSERT_TRUE(BlockedSubView(op(tag::nChw16c, {1, 32, 4, 4}), {1, 16, 4, 4}, {0, 16, 0, 0}, &v));
  EXPECT_EQ(v.offset, 64u + 16 * 4 * 4 * 4);
  EXPECT_EQ(v.dims, (std::vector<int64_t>{1, 16, 4, 4}));
  EXPECT_EQ(v.tag, static_cast<uint32_t>(tag::nChw16c));
  ASSERT_TRUE(BlockedSubView(op(tag::acdb, {1, 32, 4, 5}), {1, 32, 2, 5}, {0, 0, 2, 0}, &v));
  EXPECT_EQ(v.offset, 64u + 2 * 5 * 32 * 4);
  EXPECT_FALSE(BlockedSubView(op(tag::nChw16c, {1, 32, 4, 4}), {1, 8, 4, 4}, {0, 8, 0, 0}, &v));    // inside a block
  EXPECT_FALSE(BlockedSubView(op(tag::nChw16c, {1, 48, 4, 4}), {1, 24, 4, 4}, {0, 0, 0, 0}, &v));   // would pad
  EXPECT_FALSE(BlockedSubView(op(tag::acdb, {1, 32, 4, 5}), {1, 16, 4, 5}, {0, 16, 0, 0}, &v));     // nhwc channels
  EXPECT_FALSE(BlockedSubView(op(tag::nChw16c, {2, 32, 4, 4}), {2, 16, 4, 4}, {0, 16, 0, 0}, &v));  // batch 2
  Operand plain = op(tag::nChw16c, {1, 32, 4, 4});
  plain.tag = 0;
  plain.strides = {512, 16, 4, 1};
  EXPECT_FALSE(BlockedSubView(plain, {1, 16, 4, 4}, {0, 16, 0, 0}, &v));  // plain operands are strided views already
}

TEST(OpsTensor, Split18NumOutputs) {
  for (const auto& [dim, parts] : std::vector<std::pair<int64_t, Dims>>{{8, {2, 2, 2, 2}}, {7, {3, 3, 1}}}) {
    GraphBuilder b;
    b.Input("x", {3, dim});
    std::vector<std::string> outs;
    for (size_t i = 0; i < parts.size(); ++i) {
      outs.push_back("y" + std::to_string(i));
      b.Out(outs.back(), {3, parts[i]});
    }
    Node& n = b.N("Split", {"x"}, outs, 18);
    n.attrs["axis"] = IntA(1);
    n.attrs["num_outputs"] = IntA(static_cast<int64_t>(parts.size()));
    for (const auto& o : outs) b.Output(o);
    const std::vector<float> x = Iota(3 * dim);
    const auto got = CompileAndRun(b, {x});
    ASSERT_EQ(got.size(), parts.size());
    int64_t begin = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t c = 0; c < parts[i]; ++c)
          EXPECT_EQ(got[i][static_cast<size_t>(r * parts[i] + c)], x[static_cast<size_t>(r * dim + begin + c)]);
      begin += parts[i];
    }
  }
  // A count that would leave an output empty (5 into 4: 2, 2, 1, 0) is not claimed.
  GraphBuilder b;
  b.Input("x", {5});
  for (const char* o : {"a", "b", "c", "d"}) b.Out(o, {1});
  Node& n = b.N("Split", {"x"}, {"a", "b", "c", "d"}, 18);
  n.attrs["num_outputs"] = IntA(4);
  std::string why;
  EXPECT_FALSE(IsNodeSupported(b.g, b.g.nodes[0], &why));
  EXPECT_FALSE(why.empty());
}

// Pad-18 with an axes input (negative axis): only the named axis is padded; reflect mirrors without the edge.
TEST(OpsTensor, Pad18Axes) {
  GraphBuilder b;
  b.Input("x", {2, 5});
  b.I64("pads", {2}, {3, 2});
  b.I64("axes", {1}, {-1});
  b.Out("y", {2, 10});
  Node& n = b.N("Pad", {"x", "pads", "", "axes"}, {"y"}, 18);
  n.attrs["mode"] = StrA("reflect");
  b.Output("y");
  const std::vector<float> x = Iota(10);
  Program p;
  const auto got = CompileAndRun(b, {x}, &p);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].kind, StepKind::kPad);
  const int src_col[10] = {3, 2, 1, 0, 1, 2, 3, 4, 3, 2};
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 10; ++c) EXPECT_EQ(got[0][r * 10 + c], x[r * 5 + src_col[c]]) << r << "," << c;
}

// ReduceMean-18 / ReduceMax-18 take their axes as an input; keepdims 0 drops them.
TEST(OpsTensor, Reduce18AxesInput) {
  for (const char* op : {"ReduceMean", "ReduceMax"}) {
    GraphBuilder b;
    b.Input("x", {2, 3, 4});
    b.I64("axes", {1}, {1});
    b.Out("y", {2, 4});
    Node& n = b.N(op, {"x", "axes"}, {"y"}, 18);
    n.attrs["keepdims"] = IntA(0);
    b.Output("y");
    const std::vector<float> x = Iota(24);
    const auto got = CompileAndRun(b, {x});
    ASSERT_EQ(got.size(), 1u);
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) {
        float sum = 0, mx = -1e30f;
        for (int j = 0; j < 3; ++j) {
          const float v = x[static_cast<size_t>((i * 3 + j) * 4 + k)];
          sum += v;
          mx = std::max(mx, v);
        }
        const float want = std::string(op) == "ReduceMax" ? mx : sum / 3.f;
        EXPECT_NEAR(got[0][static_cast<size_t>(i * 4 + k)], want, 1e-5f) << op;
      }
  }
  // An axes input that is not constant is not claimed.
  GraphBuilder b;
  b.Input("x", {2, 3});
  b.Input("axes_f", {1});
  b.Out("y", {2});
  Node& n = b.N("ReduceMax", {"x", "axes_f"}, {"y"}, 18);
  n.attrs["keepdims"] = IntA(0);
  std::string why;
  EXPECT_FALSE(IsNodeSupported(b.g, b.g.nodes[0], &why));
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
