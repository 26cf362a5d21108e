// DynamicGraph (dynamic.h): one partition serving every input shape. A MatMul + bias + Relu over x [N, 8] with N
// free: every shape's outputs against a reference computed here, the cache (hits, LRU eviction), weights packed once,
// shape errors (rank, fixed dims, a symbol bound twice, ranges), concurrent runs with different shapes; and the
// options that drive it.
#include "providers/aotcpu/runtime/dynamic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "providers/aotcpu/ir/test_graph.h"
#include "providers/aotcpu/plugin/options.h"

namespace epctx {
namespace aotcpu {
namespace {

using namespace test_graph;  // GraphBuilder, Dims, UniformFloats

constexpr int64_t kK = 8, kN = 4;

// y = Relu(x @ W + B) (+ z when `two_inputs`: z [N, 4] shares x's symbol).
struct Model {
  GraphBuilder b;
  std::vector<float> w = UniformFloats(kK * kN, 11), bias = UniformFloats(kN, 12);
  std::vector<std::string> inputs;
  explicit Model(bool two_inputs = false) {
    b.SymInput("x", {-1, kK}, {"N", ""});
    inputs.push_back("x");
    b.F32("W", {kK, kN}, w);
    b.F32("B", {kN}, bias);
    b.FreeOut("xw", {-1, kN});
    b.FreeOut("s", {-1, kN});
    b.FreeOut("y", {-1, kN});
    b.N("MatMul", {"x", "W"}, {"xw"});
    b.N("Add", {"xw", "B"}, {"s"});
    if (two_inputs) {
      b.SymInput("z", {-1, kN}, {"N", ""});
      inputs.push_back("z");
      b.FreeOut("r", {-1, kN});
      b.N("Relu", {"s"}, {"r"});
      b.N("Add", {"r", "z"}, {"y"});
    } else {
      b.N("Relu", {"s"}, {"y"});
    }
    b.Output("y");
  }
  std::vector<float> Reference(const std::vector<float>& x, int64_t n, const std::vector<float>* z = nullptr) const {
    std::vector<float> y(static_cast<size_t>(n * kN));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < kN; ++j) {
        double acc = bias[j];
        for (int64_t k = 0; k < kK; ++k) acc += double(x[i * kK + k]) * w[k * kN + j];
        y[i * kN + j] = static_cast<float>(std::max(acc, 0.0)) + (z ? (*z)[i * kN + j] : 0.f);
      }
    return y;
  }
};

std::unique_ptr<DynamicGraph> Make(const Model& m, size_t cache = 8, std::map<std::string, SymbolRange> ranges = {}) {
  DynamicGraph::Options o;
  o.cache_size = cache;
  o.threads = 1;
  o.ranges = std::move(ranges);
  std::unique_ptr<DynamicGraph> d;
  // The builder owns the initializers for the whole test: a token owner lets the graph read them in place, as the
  // plugin does with the runtime's.
  static const char kOwner = 0;
  CheckResult r = DynamicGraph::Create(m.b.g, m.inputs, {"y"}, o, std::shared_ptr<const void>(&kOwner, [](const void*) {}),
                                       &d);
  EXPECT_TRUE(r.ok) << r.reason;
  return d;
}

// Runs the graph at N = n and checks y against the reference.
void RunAt(DynamicGraph* d, const Model& m, int64_t n, uint32_t seed) {
  std::vector<float> x = UniformFloats(n * kK, seed);
  std::shared_ptr<Executor> exec;
  bool invalid = true;
  CheckResult r = d->Get({{n, kK}}, &exec, &invalid);
  ASSERT_TRUE(r.ok) << r.reason;
  ASSERT_EQ(exec->program().outputs.size(), 1u);
  EXPECT_EQ(exec->program().outputs[0].dims, (Dims{n, kN}));
  std::vector<float> y(static_cast<size_t>(n * kN), -1.f);
  r = exec->Run({x.data()}, {y.data()});
  ASSERT_TRUE(r.ok) << r.reason;
  std::vector<float> want = m.Reference(x, n);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-5f) << "N=" << n << " element " << i;
}

TEST(AotCpuDynamic, EveryShapeMatchesTheReferenceAndWeightsArePackedOnce) {
  Model m;
  auto d = Make(m);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->symbols(), std::vector<std::string>{"N"});
  RunAt(d.get(), m, 3, 1);
  const uint64_t made = d->stats().weight_bytes_made;
  EXPECT_GT(made, 0u);  // the first shape packs W; B is read in place
  RunAt(d.get(), m, 17, 2);
  RunAt(d.get(), m, 1, 3);
  RunAt(d.get(), m, 3, 4);  // cached
  const DynamicGraph::Stats s = d->stats();
  EXPECT_EQ(s.binds, 3u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(s.weight_bytes_made, made) << "a later shape packed or copied weights again";
}

TEST(AotCpuDynamic, LeastRecentlyUsedShapeIsEvicted) {
  Model m;
  auto d = Make(m, /*cache=*/2);
  RunAt(d.get(), m, 2, 1);
  RunAt(d.get(), m, 4, 2);
  RunAt(d.get(), m, 2, 3);  // hit; 4 is now the least recently used
  RunAt(d.get(), m, 6, 4);  // evicts 4
  RunAt(d.get(), m, 2, 5);  // still cached
  RunAt(d.get(), m, 4, 6);  // bound again
  const DynamicGraph::Stats s = d->stats();
  EXPECT_EQ(s.binds, 4u);
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.evictions, 2u);
}

TEST(AotCpuDynamic, ShapesTheGraphCannotTakeAreInvalidArguments) {
  Model m;
  auto d = Make(m, 8, {{"N", {1, 4}}});
  std::shared_ptr<Executor> exec;
  bool invalid = false;
  CheckResult r = d->Get({{5, kK}}, &exec, &invalid);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(invalid);
  EXPECT_NE(r.reason.find("('N') is 5, outside its range 1..4"), std::string::npos) << r.reason;
  r = d->Get({{3, kK + 1}}, &exec, &invalid);
  EXPECT_TRUE(invalid);
  EXPECT_NE(r.reason.find("dim 1 must be 8"), std::string::npos) << r.reason;
  r = d->Get({{3}}, &exec, &invalid);
  EXPECT_TRUE(invalid);
  EXPECT_NE(r.reason.find("has rank 1, the graph 2"), std::string::npos) << r.reason;
  r = d->Get({}, &exec, &invalid);
  EXPECT_TRUE(invalid);
  EXPECT_EQ(d->stats().binds, 0u);
  RunAt(d.get(), m, 4, 9);  // the bounds themselves are accepted

  Model two(/*two_inputs=*/true);
  auto d2 = Make(two);
  r = d2->Get({{3, kK}, {4, kN}}, &exec, &invalid);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(invalid);
  EXPECT_NE(r.reason.find("input 'z' dim 0 ('N') is 4 but another input has 'N' = 3"), std::string::npos) << r.reason;
}

TEST(AotCpuDynamic, ConcurrentRunsWithDifferentShapes) {
  Model m;
  auto d = Make(m, /*cache=*/3);  // smaller than the shapes in use: executors are evicted while others run
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        const int64_t n = 1 + (t * 7 + i) % 6;
        std::vector<float> x = UniformFloats(n * kK, static_cast<uint32_t>(100 * t + i));
        std::shared_ptr<Executor> exec;
        bool invalid = false;
        if (!d->Get({{n, kK}}, &exec, &invalid).ok) {
          ++failures;
          continue;
        }
        std::vector<float> y(static_cast<size_t>(n * kN));
        if (!exec->Run({x.data()}, {y.data()}).ok) {
          ++failures;
          continue;
        }
        const std::vector<float> want = m.Reference(x, n);
        for (size_t k = 0; k < y.size(); ++k)
          if (std::abs(y[k] - want[k]) > 1e-5f) {
            ++failures;
            break;
          }
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(d->stats().evictions, 0u);
}

TEST(AotCpuDynamic, AGraphWhoseShapesCannotBeInferredIsRefused) {
  GraphBuilder b;
  b.SymInput("x", {-1, 4}, {"N", ""});
  b.FreeOut("y", {-1});
  b.N("NonZero", {"x"}, {"y"});  // no symbolic rule: its output size depends on the data
  b.Output("y");
  DynamicGraph::Options o;
  std::unique_ptr<DynamicGraph> d;
  CheckResult r = DynamicGraph::Create(b.g, {"x"}, {"y"}, o, nullptr, &d);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("NonZero"), std::string::npos) << r.reason;
}


std::string OptionError(const std::map<std::string, std::string>& entries) {
  AotCpuOptions o;
  OptionsError e;
  if (ReadOptions(ConfigFromMap(entries), &o, &e)) return "accepted";
  EXPECT_EQ(e.code, EPCTX_INVALID_ARGUMENT);
  return e.message;
}

TEST(AotCpuDynamic, Options) {
  AotCpuOptions o;
  OptionsError e;
  ASSERT_TRUE(ReadOptions(ConfigFromMap({}), &o, &e));
  EXPECT_TRUE(o.dynamic_shapes);  // the default since issue 27
  EXPECT_FALSE(o.dynamic_shapes_set);
  ASSERT_TRUE(ReadOptions(ConfigFromMap({{kDynamicShapesKey, "0"}}), &o, &e)) << e.message;
  EXPECT_FALSE(o.dynamic_shapes);
  EXPECT_TRUE(o.dynamic_shapes_set);
  EXPECT_EQ(o.shape_cache_size, 8u);
  EXPECT_TRUE(o.shape_ranges.empty());
  ASSERT_TRUE(ReadOptions(ConfigFromMap({{kDynamicShapesKey, "1"},
                                  {kShapeCacheSizeKey, "64"},
                                  {kShapeRangesKey, "seq:1..1024,past:0..4096"}}),
                          &o, &e))
      << e.message;
  EXPECT_TRUE(o.dynamic_shapes);
  EXPECT_TRUE(o.dynamic_shapes_set);
  EXPECT_EQ(o.shape_cache_size, 64u);
  ASSERT_EQ(o.shape_ranges.size(), 2u);
  EXPECT_EQ(o.shape_ranges["seq"].lo, 1);
  EXPECT_EQ(o.shape_ranges["seq"].hi, 1024);
  EXPECT_EQ(o.shape_ranges["past"].lo, 0);
  EXPECT_EQ(o.shape_ranges["past"].hi, 4096);
  // A dim_param with ':' or '.' in its name (p2o.DynamicDimension.1) is split at the last ':'.
  ASSERT_TRUE(ReadOptions(ConfigFromMap({{kShapeRangesKey, "p2o.DynamicDimension.1:32..1280"}}), &o, &e)) << e.message;
  EXPECT_EQ(o.shape_ranges["p2o.DynamicDimension.1"].hi, 1280);

  EXPECT_NE(OptionError({{kDynamicShapesKey, "yes"}}).find(kDynamicShapesKey), std::string::npos);
  for (const char* bad : {"0", "4097", "-1", "8x", ""}) {
    if (!*bad) continue;
    EXPECT_NE(OptionError({{kShapeCacheSizeKey, bad}}).find("must be an integer from 1 to 4096"), std::string::npos)
        << bad;
  }
  for (const char* bad : {"seq:5..1", "seq1..3", "seq:1..", ":1..3", "seq:1..3,seq:2..4", "seq:-1..3", "seq:1-3"})
    EXPECT_NE(OptionError({{kShapeRangesKey, bad}}).find("entries are 'name:lo..hi'"), std::string::npos) << bad;
}

// A convolution over x [1, 8, H, W] with H, W free (then Relu): a later shape takes the first shape's layouts and
// fusion from the lowering memo, and its outputs equal those of a graph that searches again at every shape.
TEST(AotCpuDynamic, LaterShapesTakeTheFirstShapesConvolutionChoices) {
  GraphBuilder b;
  b.SymInput("x", {1, 8, -1, -1}, {"", "", "H", "W"});
  b.F32("w", {16, 8, 3, 3}, UniformFloats(16 * 8 * 9, 41));
  b.F32("bias", {16}, UniformFloats(16, 42));
  b.FreeOut("c", {1, 16, -1, -1});
  b.FreeOut("y", {1, 16, -1, -1});
  b.N("Conv", {"x", "w", "bias"}, {"c"}).attrs["pads"] = IntsA({1, 1, 1, 1});
  b.N("Relu", {"c"}, {"y"});
  b.Output("y");
  auto make = [&](bool memo) {
    DynamicGraph::Options o;
    o.threads = 1;
    o.memo = memo;
    std::unique_ptr<DynamicGraph> d;
    static const char kOwner = 0;
    CheckResult r = DynamicGraph::Create(b.g, {"x"}, {"y"}, o, std::shared_ptr<const void>(&kOwner, [](const void*) {}),
                                         &d);
    EXPECT_TRUE(r.ok) << r.reason;
    return d;
  };
  auto with = make(true), without = make(false);
  ASSERT_TRUE(with && without);
  for (auto [h, w] : {std::pair<int64_t, int64_t>{16, 24}, {9, 31}, {40, 8}}) {
    std::vector<float> x = UniformFloats(8 * h * w, static_cast<uint32_t>(h * 100 + w));
    std::vector<std::vector<float>> got;
    for (DynamicGraph* d : {with.get(), without.get()}) {
      std::shared_ptr<Executor> exec;
      bool invalid = false;
      CheckResult r = d->Get({{1, 8, h, w}}, &exec, &invalid);
      ASSERT_TRUE(r.ok) << r.reason;
      got.emplace_back(static_cast<size_t>(16 * h * w));
      r = exec->Run({x.data()}, {got.back().data()});
      ASSERT_TRUE(r.ok) << r.reason;
    }
    for (size_t i = 0; i < got[0].size(); ++i) ASSERT_NEAR(got[0][i], got[1][i], 1e-5f) << h << "x" << w << " @" << i;
  }
  EXPECT_EQ(with->stats().memo_hits, 2u) << "the second and third shapes take the first one's choice";
  EXPECT_EQ(without->stats().memo_hits, 0u);
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
