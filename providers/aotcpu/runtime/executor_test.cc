// Executor::Create builds a program's steps on several threads (build_threads). The executor must not depend on
// that: a parallel build gives the steps the same oneDNN implementations and the runs the same bytes as a serial one,
// and a damaged program fails with the same error (the first failing step in step order) however it was built.
#include "providers/aotcpu/runtime/executor.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "providers/aotcpu/capability/capability.h"
#include "providers/aotcpu/ir/test_graph.h"
#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {
namespace {

using namespace test_graph;  // GraphBuilder, Dims, Numel, UniformFloats, IntA, IntsA

constexpr int kParallel = 4;  // more building threads than this machine may have: they interleave

// A small CNN with a head: 3x3 convolution + Relu, depthwise convolution, max pool, a second convolution, a concat
// of both branches, a transpose and a matmul with a softmax: steps of several kinds and layouts (reorders between
// oneDNN's blocked layouts and the plain graph output), every one a oneDNN primitive or an executor loop.
struct Net {
  GraphBuilder b;
  CompiledGraph cg;
  Program program;
  std::vector<float> x;

  ::testing::AssertionResult Make() {
    x = UniformFloats(1 * 8 * 16 * 16, 1);
    b.Input("x", {1, 8, 16, 16});
    b.F32("w1", {16, 8, 3, 3}, UniformFloats(16 * 8 * 9, 2));
    b.F32("b1", {16}, UniformFloats(16, 3));
    b.F32("wd", {16, 1, 3, 3}, UniformFloats(16 * 9, 4));
    b.F32("w2", {8, 16, 1, 1}, UniformFloats(8 * 16, 5));
    b.F32("w3", {8, 16, 1, 1}, UniformFloats(8 * 16, 6));
    b.F32("m", {8, 8}, UniformFloats(64, 7));
    b.Out("c1", {1, 16, 16, 16});
    b.Out("r1", {1, 16, 16, 16});
    b.Out("dw", {1, 16, 16, 16});
    b.Out("p", {1, 16, 8, 8});
    b.Out("c2", {1, 8, 8, 8});
    b.Out("c3", {1, 8, 8, 8});
    b.Out("cat", {1, 16, 8, 8});
    b.Out("t", {1, 16, 8, 8});
    b.Out("mm", {1, 16, 8, 8});
    b.Out("y", {1, 16, 8, 8});
    Node& c1 = b.N("Conv", {"x", "w1", "b1"}, {"c1"}, 11);
    c1.attrs["pads"] = IntsA({1, 1, 1, 1});
    b.N("Relu", {"c1"}, {"r1"}, 14);
    Node& dw = b.N("Conv", {"r1", "wd"}, {"dw"}, 11);
    dw.attrs["group"] = IntA(16);
    dw.attrs["pads"] = IntsA({1, 1, 1, 1});
    Node& pool = b.N("MaxPool", {"dw"}, {"p"}, 12);
    pool.attrs["kernel_shape"] = IntsA({2, 2});
    pool.attrs["strides"] = IntsA({2, 2});
    b.N("Conv", {"p", "w2"}, {"c2"}, 11);
    b.N("Conv", {"p", "w3"}, {"c3"}, 11);
    b.N("Concat", {"c2", "c3"}, {"cat"}, 13).attrs["axis"] = IntA(1);
    b.N("Transpose", {"cat"}, {"t"}, 13).attrs["perm"] = IntsA({0, 1, 3, 2});
    b.N("MatMul", {"t", "m"}, {"mm"}, 13);
    b.N("Softmax", {"mm"}, {"y"}, 13).attrs["axis"] = IntA(-1);
    b.Output("y");
    for (const Node& n : b.g.nodes) {
      std::string why;
      if (!IsNodeSupported(b.g, n, &why)) return ::testing::AssertionFailure() << n.name << " unsupported: " << why;
    }
    CheckResult r = CompileGraph(b.g, {"x"}, {"y"}, CompileOptions(), &cg);
    if (!r.ok) return ::testing::AssertionFailure() << "compile: " << r.reason;
    r = ParseProgram(SerializeProgram(cg.program), static_cast<uint32_t>(cg.weights.size()), &program);
    if (!r.ok) return ::testing::AssertionFailure() << "parse: " << r.reason;
    if (program.steps.size() < 6) return ::testing::AssertionFailure() << "only " << program.steps.size() << " steps";
    return ::testing::AssertionSuccess();
  }

  std::vector<WeightRef> Weights() const {
    std::vector<WeightRef> w;
    for (const TensorInput& t : cg.weights) w.push_back({t.bytes.data(), t.bytes.size()});
    return w;
  }
};

// Creates an executor for `p` with `build_threads`; the error's reason, or "" when it was created.
std::string CreateError(const Program& p, std::vector<WeightRef> w, int threads, int build_threads,
                        std::unique_ptr<Executor>* out = nullptr) {
  std::unique_ptr<Executor> e;
  CheckResult r = Executor::Create(p, std::move(w), threads, &e, build_threads);
  if (r.ok && out) *out = std::move(e);
  return r.ok ? std::string() : r.reason;
}

std::vector<float> RunOnce(Executor& e, const std::vector<float>& x) {
  std::vector<float> y(static_cast<size_t>(Numel(e.program().outputs[0].dims)), -7.f);
  CheckResult r = e.Run({x.data()}, {y.data()});
  EXPECT_TRUE(r.ok) << r.reason;
  return y;
}

TEST(AotCpuExecutor, AParallelBuildIsTheSerialBuild) {
  Net net;
  ASSERT_TRUE(net.Make());
  for (int threads : {1, 2}) {
    std::unique_ptr<Executor> serial;
    ASSERT_EQ(CreateError(net.program, net.Weights(), threads, 1, &serial), "");
    const std::vector<float> want = RunOnce(*serial, net.x);
    for (int round = 0; round < 8; ++round) {  // builds interleave differently from round to round
      std::unique_ptr<Executor> parallel;
      ASSERT_EQ(CreateError(net.program, net.Weights(), threads, kParallel, &parallel), "");
      for (size_t i = 0; i < net.program.steps.size(); ++i)
        EXPECT_EQ(parallel->step_impl(i), serial->step_impl(i))
            << threads << " threads: step " << i << " " << DescribeStep(net.program.steps[i]);
      EXPECT_EQ(parallel->serialized(), serial->serialized());
      for (int run = 0; run < 2; ++run) {  // the first run of a fresh executor, then a warm one
        const std::vector<float> got = RunOnce(*parallel, net.x);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
            << threads << " threads, round " << round << ", run " << run << ": outputs differ from the serial build's";
      }
    }
  }
}

// Two damaged steps: the error names the first, whichever thread built it and however far the others got.
TEST(AotCpuExecutor, TheFirstFailingStepIsReportedWhateverTheBuildThreads) {
  Net net;
  ASSERT_TRUE(net.Make());
  const size_t n = net.program.steps.size();
  for (size_t first : {size_t{0}, size_t{1}, n / 2, n - 2}) {
    Program p = net.program;
    p.steps[first].ops.resize(1);                  // too few operands for any builder
    p.steps[n - 1].kind = static_cast<StepKind>(999);  // no builder
    const std::string serial = CreateError(p, net.Weights(), 2, 1);
    ASSERT_NE(serial, "");
    EXPECT_EQ(serial.rfind("step " + std::to_string(first) + " ", 0), 0u) << serial;
    for (int round = 0; round < 8; ++round)
      EXPECT_EQ(CreateError(p, net.Weights(), 2, kParallel), serial) << "first damaged step " << first;
  }
}

// Every single-bit flip of the serialized program: a parallel build accepts what a serial one accepts, refuses what it
// refuses with the same message, and the accepted programs compute the same bytes.
TEST(AotCpuExecutor, DamagedProgramsFailAlikeSeriallyAndInParallel) {
  Net net;
  ASSERT_TRUE(net.Make());
  const std::string records = SerializeProgram(net.program);
  size_t compared = 0, refused = 0, racy = 0;
  for (size_t pos = 0; pos < records.size(); pos += 3) {  // every third byte: a few seconds
    for (int bit : {0, 5}) {
      std::string g = records;
      g[pos] = static_cast<char>(g[pos] ^ (1 << bit));
      Program p;
      if (!ParseProgram(g, static_cast<uint32_t>(net.cg.weights.size()), &p).ok) continue;
      if (p.arena_bytes > (64u << 20)) continue;  // a flipped size bit: would only allocate more
      std::unique_ptr<Executor> a, b;
      const std::string serial = CreateError(p, net.Weights(), 2, 1, &a);
      const std::string parallel = CreateError(p, net.Weights(), 2, kParallel, &b);
      ASSERT_EQ(parallel, serial) << "byte " << pos << " bit " << bit;
      ++compared;
      if (!serial.empty()) {
        ++refused;
        continue;
      }
      bool io_fits = p.inputs.size() == 1 && p.outputs.size() == 1 && p.inputs[0].dims == net.program.inputs[0].dims &&
                     p.outputs[0].dims == net.program.outputs[0].dims && p.inputs[0].dtype == 1 &&
                     p.outputs[0].dtype == 1;
      if (!io_fits) continue;
      const std::vector<float> ya = RunOnce(*a, net.x), yb = RunOnce(*b, net.x);
      // A damaged program the validator accepts may read arena bytes no step wrote, or make two steps that run side by
      // side share bytes (found at AVX2: byte 531 bit 5, about 1 run in 6): its parallel result then changes from run
      // to run. Such a program is counted, not compared: the validator checks bounds, not that every read was written
      // or that parallel steps are disjoint (known gap, issue 26 note).
      // A parallel result that is the same three times must equal the serial one.
      const std::vector<float> yc = RunOnce(*b, net.x), yd = RunOnce(*b, net.x);
      const size_t bytes = ya.size() * sizeof(float);
      if (std::memcmp(yb.data(), yc.data(), bytes) != 0 || std::memcmp(yb.data(), yd.data(), bytes) != 0) {
        ++racy;
        continue;
      }
      EXPECT_EQ(std::memcmp(ya.data(), yb.data(), bytes), 0) << "byte " << pos << " bit " << bit;
    }
  }
  EXPECT_GT(compared, 0u);
  EXPECT_GT(refused, 0u);
  ::testing::Test::RecordProperty("unstable_damaged_programs", static_cast<int>(racy));  // 3 at AVX2 (issue 26 note)
}

// Empty values (issue 27): a graph bound at a size that empties its batch compiles to a program with no step for the
// values that have no elements (no convolution primitive: oneDNN refuses zero dims in many) and a reduction over the
// empty batch that is the constant ONNX defines (ReduceSum of nothing: 0); the executor runs it, writing no empty
// output.
TEST(AotCpuExecutor, ValuesWithNoElementsGetNoSteps) {
  GraphBuilder b;
  b.Input("x", {0, 8, 6, 6});
  b.F32("w", {8, 8, 3, 3}, UniformFloats(8 * 8 * 9, 1));
  b.Out("c", {0, 8, 6, 6});
  b.Out("r", {0, 8, 6, 6});
  b.Out("s", {1, 8, 6, 6});
  b.N("Conv", {"x", "w"}, {"c"}, 11).attrs["pads"] = IntsA({1, 1, 1, 1});
  b.N("Relu", {"c"}, {"r"}, 14);
  Node& sum = b.N("ReduceSum", {"r"}, {"s"}, 11);
  sum.attrs["axes"] = IntsA({0});
  sum.attrs["keepdims"] = IntA(1);
  b.Output("r");
  b.Output("s");
  CompiledGraph cg;
  CheckResult r = CompileGraph(b.g, {"x"}, {"r", "s"}, CompileOptions(), &cg);
  ASSERT_TRUE(r.ok) << r.reason;
  for (const Step& st : cg.program.steps) {
    EXPECT_NE(st.kind, StepKind::kConv) << DescribeStep(st);
    EXPECT_NE(st.kind, StepKind::kEltwise) << DescribeStep(st);
    EXPECT_NE(st.kind, StepKind::kReduction) << DescribeStep(st);
  }
  std::vector<WeightRef> w;
  for (const TensorInput& t : cg.weights) w.push_back({t.bytes.data(), t.bytes.size()});
  std::unique_ptr<Executor> e;
  ASSERT_EQ(CreateError(cg.program, w, 1, 1, &e), "");
  std::vector<float> s(8 * 36, -7.f);
  r = e->Run({nullptr}, {nullptr, s.data()});
  ASSERT_TRUE(r.ok) << r.reason;
  for (float v : s) ASSERT_EQ(v, 0.0f);
}

// A step whose destination has no elements (a program from a binary may hold one) is built as nothing and runs as
// nothing: no oneDNN primitive is asked to take a zero dim.
TEST(AotCpuExecutor, AStepWritingNoElementsRunsNothing) {
  Program p;
  p.inputs.push_back({"x", 1, {0, 4}});
  p.outputs.push_back({"y", 1, {0, 4}});
  Step s;
  s.kind = StepKind::kEltwise;
  s.name = "relu";
  Operand src, dst;
  src.buf = Buf::kInput;
  dst.buf = Buf::kOutput;
  src.dims = dst.dims = {0, 4};
  s.ops = {src, dst};
  s.ints = {static_cast<int64_t>(dnnl::algorithm::eltwise_relu)};
  s.floats = {0.f, 0.f};
  p.steps.push_back(s);
  std::unique_ptr<Executor> e;
  ASSERT_EQ(CreateError(p, {}, 1, 1, &e), "");
  EXPECT_EQ(e->step_impl(0), "own");
  CheckResult r = e->Run({nullptr}, {nullptr});
  EXPECT_TRUE(r.ok) << r.reason;
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
