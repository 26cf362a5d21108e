// Data-dependent shapes in the shape-generic form (issue 27 item 3):
//   - the kernels whose output size or values depend on data (NonZero, Range, CumSum, GatherND, ScatterND,
//     GatherElements, RandomNormalLike) against references computed here, and their errors;
//   - a graph whose later steps are sized by values computed by earlier ones (NonZero's count, a Range to the sum of
//     a CumSum'd duration vector, an Expand to a shape read from data) runs at several input sizes without binding a
//     shape, against a reference computed here; a negative size read from data is an INVALID_ARGUMENT error.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "providers/aotcpu/ir/symbolic.h"
#include "providers/aotcpu/ir/test_graph.h"
#include "providers/aotcpu/runtime/dynamic.h"
#include "providers/aotcpu/runtime/generic_ops.h"

namespace epctx {
namespace aotcpu {
namespace {

using namespace test_graph;

template <typename V>
GTensor Over(std::vector<V>& v, Dims d, uint32_t dtype) {
  GTensor t;
  t.data = v.data();
  t.dims = std::move(d);
  t.dtype = dtype;
  return t;
}

// Builds a one-node graph over the tensors' dims and types and runs its kernel (sizer first when it has one: the sizes
// it computes are returned in *sizes).
std::string Run1(const std::string& op, std::map<std::string, Attr> attrs, std::vector<GTensor> in,
                 std::vector<GTensor> out, std::vector<int64_t>* sizes = nullptr) {
  GraphBuilder b;
  std::vector<std::string> names, outs;
  for (size_t i = 0; i < in.size(); ++i) {
    names.push_back("i" + std::to_string(i));
    b.g.v(b.Out(names.back(), in[i].dims)).dtype = in[i].dtype;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    outs.push_back("o" + std::to_string(i));
    b.g.v(b.Out(outs.back(), out[i].dims)).dtype = out[i].dtype;
  }
  Node& n = b.N(op, names, outs, 17);
  n.attrs = std::move(attrs);
  std::string why;
  GenericKernel k = FindGenericKernel(b.g, n, &why);
  if (!k) return "unsupported: " + why;
  if (sizes) {
    GenericSizer s = FindGenericSizer(n);
    if (!s) return "no sizer";
    const std::string err = s(b.g, n, in, sizes);
    if (!err.empty()) return err;
  }
  return k(b.g, n, in, out, 1);
}

TEST(AotCpuGenericOps, NonZeroRangeCumSum) {
  std::vector<float> x = {0, 1.5f, 0, -2, 0, 3};
  std::vector<int64_t> idx(2 * 3, -7), sizes;
  ASSERT_EQ(Run1("NonZero", {}, {Over(x, {2, 3}, kF32)}, {Over(idx, {2, 3}, kI64)}, &sizes), "");
  EXPECT_EQ(sizes, (std::vector<int64_t>{3}));
  EXPECT_EQ(idx, (std::vector<int64_t>{0, 1, 1, 1, 0, 2}));  // rows (0,1), (1,0), (1,2)
  EXPECT_NE(Run1("NonZero", {}, {Over(x, {2, 3}, kF32)}, {Over(idx, {2, 2}, kI64)}), "");  // count is 3
  std::vector<uint8_t> none(4, 0);
  std::vector<int64_t> empty(1);
  ASSERT_EQ(Run1("NonZero", {}, {Over(none, {4}, kBool)}, {Over(empty, {1, 0}, kI64)}, &sizes), "");
  EXPECT_EQ(sizes, (std::vector<int64_t>{0}));

  // Range with run-time bounds: integers exact (negative delta), floats by the CPU EP's formula.
  std::vector<int64_t> s = {10}, l = {3}, dl = {-3}, r(3);
  ASSERT_EQ(Run1("Range", {}, {Over(s, {}, kI64), Over(l, {}, kI64), Over(dl, {}, kI64)}, {Over(r, {3}, kI64)}, &sizes),
            "");
  EXPECT_EQ(sizes, (std::vector<int64_t>{3}));
  EXPECT_EQ(r, (std::vector<int64_t>{10, 7, 4}));
  std::vector<float> fs = {0.5f}, fl = {2.f}, fd = {0.4f}, fr(4);
  ASSERT_EQ(Run1("Range", {}, {Over(fs, {}, kF32), Over(fl, {}, kF32), Over(fd, {}, kF32)}, {Over(fr, {4}, kF32)}, &sizes),
            "");
  EXPECT_EQ(sizes, (std::vector<int64_t>{4}));
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(fr[i], 0.5f + i * 0.4f);
  std::vector<int64_t> zero = {0};
  EXPECT_NE(Run1("Range", {}, {Over(s, {}, kI64), Over(l, {}, kI64), Over(zero, {}, kI64)}, {Over(r, {3}, kI64)}, &sizes),
            "");  // delta 0

  // CumSum along axis 1 of [2, 3], plain, exclusive and reverse.
  std::vector<float> c = {1, 2, 3, 4, 5, 6}, y(6);
  std::vector<int64_t> ax = {-1};
  ASSERT_EQ(Run1("CumSum", {}, {Over(c, {2, 3}, kF32), Over(ax, {}, kI64)}, {Over(y, {2, 3}, kF32)}), "");
  EXPECT_EQ(y, (std::vector<float>{1, 3, 6, 4, 9, 15}));
  ASSERT_EQ(Run1("CumSum", {{"exclusive", IntA(1)}, {"reverse", IntA(1)}}, {Over(c, {2, 3}, kF32), Over(ax, {}, kI64)},
                 {Over(y, {2, 3}, kF32)}),
            "");
  EXPECT_EQ(y, (std::vector<float>{5, 3, 0, 11, 6, 0}));
  std::vector<int64_t> ci = {3, 1, 2}, yi(3), ax0 = {0};
  ASSERT_EQ(Run1("CumSum", {}, {Over(ci, {3}, kI64), Over(ax0, {}, kI64)}, {Over(yi, {3}, kI64)}), "");
  EXPECT_EQ(yi, (std::vector<int64_t>{3, 4, 6}));
  std::vector<int64_t> bad_axis = {2};
  EXPECT_NE(Run1("CumSum", {}, {Over(ci, {3}, kI64), Over(bad_axis, {}, kI64)}, {Over(yi, {3}, kI64)}), "");
}

TEST(AotCpuGenericOps, GatherNDScatterNDGatherElements) {
  // data [2, 3, 2]; indices [2, 2] pick rows (1, 2) and (0, -3) -> [2, 2].
  std::vector<float> d(12);
  for (int i = 0; i < 12; ++i) d[i] = static_cast<float>(i);
  std::vector<int64_t> ix = {1, 2, 0, -3};
  std::vector<float> g(4);
  ASSERT_EQ(Run1("GatherND", {}, {Over(d, {2, 3, 2}, kF32), Over(ix, {2, 2}, kI64)}, {Over(g, {2, 2}, kF32)}), "");
  EXPECT_EQ(g, (std::vector<float>{10, 11, 0, 1}));
  // batch_dims 1: indices [2, 1, 1] pick row 2 of batch 0 and row 0 of batch 1 -> [2, 1, 2].
  std::vector<int64_t> bx = {2, 0};
  ASSERT_EQ(Run1("GatherND", {{"batch_dims", IntA(1)}}, {Over(d, {2, 3, 2}, kF32), Over(bx, {2, 1, 1}, kI64)},
                 {Over(g, {2, 1, 2}, kF32)}),
            "");
  EXPECT_EQ(g, (std::vector<float>{4, 5, 6, 7}));
  std::vector<int64_t> oob = {2, 0, 0, 0};
  EXPECT_NE(Run1("GatherND", {}, {Over(d, {2, 3, 2}, kF32), Over(oob, {2, 2}, kI64)}, {Over(g, {2, 2}, kF32)}), "");

  // ScatterND: rows (1, 0) and (0, 2) of [2, 3, 2] replaced; then with reduction add.
  std::vector<float> u = {-1, -2, -3, -4}, s(12);
  std::vector<int64_t> sx = {1, 0, 0, 2};
  ASSERT_EQ(Run1("ScatterND", {}, {Over(d, {2, 3, 2}, kF32), Over(sx, {2, 2}, kI64), Over(u, {2, 2}, kF32)},
                 {Over(s, {2, 3, 2}, kF32)}),
            "");
  std::vector<float> want = d;
  want[6] = -1, want[7] = -2, want[4] = -3, want[5] = -4;
  EXPECT_EQ(s, want);
  ASSERT_EQ(Run1("ScatterND", {{"reduction", StrA("add")}},
                 {Over(d, {2, 3, 2}, kF32), Over(sx, {2, 2}, kI64), Over(u, {2, 2}, kF32)}, {Over(s, {2, 3, 2}, kF32)}),
            "");
  want = d;
  want[6] += -1, want[7] += -2, want[4] += -3, want[5] += -4;
  EXPECT_EQ(s, want);
  EXPECT_NE(Run1("ScatterND", {}, {Over(d, {2, 3, 2}, kF32), Over(sx, {2, 2}, kI64), Over(u, {4}, kF32)},
                 {Over(s, {2, 3, 2}, kF32)}),
            "");  // updates of the wrong shape

  // GatherElements along axis 1 of [2, 3] with indices [2, 2] (a negative one).
  std::vector<float> e = {1, 2, 3, 4, 5, 6}, ge(4);
  std::vector<int64_t> ex = {2, 0, -1, 1};
  ASSERT_EQ(Run1("GatherElements", {{"axis", IntA(1)}}, {Over(e, {2, 3}, kF32), Over(ex, {2, 2}, kI64)},
                 {Over(ge, {2, 2}, kF32)}),
            "");
  EXPECT_EQ(ge, (std::vector<float>{3, 1, 6, 5}));
  ex[0] = 3;
  EXPECT_NE(Run1("GatherElements", {{"axis", IntA(1)}}, {Over(e, {2, 3}, kF32), Over(ex, {2, 2}, kI64)},
                 {Over(ge, {2, 2}, kF32)}),
            "");
}

TEST(AotCpuGenericOps, RandomNormalLikeWithASeedRepeats) {
  std::vector<float> x(1000), a(1000), b(1000);
  std::map<std::string, Attr> attrs = {{"seed", FloatA(7.f)}, {"mean", FloatA(2.f)}, {"scale", FloatA(0.5f)}};
  ASSERT_EQ(Run1("RandomNormalLike", attrs, {Over(x, {10, 100}, kF32)}, {Over(a, {10, 100}, kF32)}), "");
  ASSERT_EQ(Run1("RandomNormalLike", attrs, {Over(x, {10, 100}, kF32)}, {Over(b, {10, 100}, kF32)}), "");
  EXPECT_EQ(a, b);
  double mean = 0, var = 0;
  for (float v : a) mean += v;
  mean /= 1000;
  for (float v : a) var += (v - mean) * (v - mean);
  EXPECT_NEAR(mean, 2.0, 0.1);
  EXPECT_NEAR(std::sqrt(var / 1000), 0.5, 0.1);
}

// x [n] float, dur [n] int64, z [1, 4] float:
//   sel = GatherND(x, Transpose(NonZero(x > 0)))  * 2     [count of positive x]
//   r   = Cast(Range(0, Squeeze(Slice(CumSum(dur), -1)), 1), float)   [sum of dur]
//   e   = Expand([1.5], Slice(CumSum(dur), -1))                         [sum of dur]
//   zz  = z @ W                                                          [1, 4], the static segment
struct DataDependent {
  GraphBuilder b;
  std::vector<float> w = UniformFloats(16, 41);
  DataDependent() {
    b.SymInput("x", {-1}, {"n"});
    b.SymInput("dur", {-1}, {"n"}, kI64);
    b.Input("z", {1, 4});
    b.F32("W", {4, 4}, w);
    b.F32("zero_f", {}, {0.f});
    b.F32("two_f", {}, {2.f});
    b.F32("one_half", {1}, {1.5f});
    b.I64("ax0s", {}, {0});
    b.I64("zero_s", {}, {0});
    b.I64("one_s", {}, {1});
    b.I64("minus1", {-1});
    b.I64("big", {INT64_MAX});
    b.I64("ax0", {0});
    b.g.v(b.FreeOut("pos", {-1})).dtype = kBool;
    b.g.v(b.FreeOut("nz", {1, -1})).dtype = kI64;
    b.g.v(b.FreeOut("nzt", {-1, 1})).dtype = kI64;
    b.FreeOut("sel", {-1});
    b.FreeOut("sel2", {-1});
    b.N("Greater", {"x", "zero_f"}, {"pos"});
    b.N("NonZero", {"pos"}, {"nz"});
    b.N("Transpose", {"nz"}, {"nzt"}).attrs["perm"] = IntsA({1, 0});
    b.N("GatherND", {"x", "nzt"}, {"sel"});
    b.N("Mul", {"sel", "two_f"}, {"sel2"});
    b.g.v(b.FreeOut("cs", {-1})).dtype = kI64;
    b.g.v(b.Out("tot", {1})).dtype = kI64;
    b.g.v(b.Out("tot_s", {})).dtype = kI64;
    b.g.v(b.FreeOut("r", {-1})).dtype = kI64;
    b.FreeOut("rf", {-1});
    b.FreeOut("e", {-1});
    b.N("CumSum", {"dur", "ax0s"}, {"cs"});
    b.N("Slice", {"cs", "minus1", "big", "ax0"}, {"tot"});
    b.N("Squeeze", {"tot", "ax0"}, {"tot_s"});
    b.N("Range", {"zero_s", "tot_s", "one_s"}, {"r"});
    b.N("Cast", {"r"}, {"rf"}).attrs["to"] = IntA(kF32);
    b.N("Expand", {"one_half", "tot"}, {"e"});
    b.Out("zz", {1, 4});
    b.N("MatMul", {"z", "W"}, {"zz"});
    for (const char* o : {"sel2", "rf", "e", "zz"}) b.Output(o);
  }
};

struct Result {
  CheckResult r;
  bool invalid = false;
  std::vector<std::vector<float>> data;
  std::vector<Dims> dims;
};

Result RunDD(DynamicGraph* d, std::vector<float>& x, std::vector<int64_t>& dur, std::vector<float>& z) {
  Result out;
  out.data.assign(4, {});
  out.dims.assign(4, {});
  const int64_t n = static_cast<int64_t>(x.size());
  out.r = d->Run({x.data(), dur.data(), z.data()}, {{n}, {n}, {1, 4}}, {kF32, kI64, kF32},
                 [&](size_t i, const std::vector<int64_t>& od, void** data) {
                   out.dims[i] = od;
                   out.data[i].assign(static_cast<size_t>(Numel(od)) + 1, NAN);
                   *data = out.data[i].data();
                   return CheckResult::Ok();
                 },
                 &out.invalid);
  return out;
}

TEST(AotCpuGeneric, LaterStepsAreSizedByValuesComputedAtRunTime) {
  DataDependent m;
  SymbolicShapes sym;
  ASSERT_TRUE(InferSymbolicRuntime(m.b.g, &sym));
  std::vector<std::string> names;
  for (const RuntimeSymbol& r : sym.runtime) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"nonzero:NonZero_1", "range:Range_8", "data:tot[0]"})) << ::testing::PrintToString(names);
  SymbolicShapes plain;
  EXPECT_FALSE(InferSymbolic(m.b.g, &plain));  // without run-time symbols NonZero's size is unknown
  EXPECT_TRUE(plain.runtime.empty());

  DynamicGraph::Options o;
  o.threads = 1;
  std::unique_ptr<DynamicGraph> d;
  static const char kOwner = 0;
  CheckResult r = DynamicGraph::Create(m.b.g, {"x", "dur", "z"}, {"sel2", "rf", "e", "zz"}, o,
                                       std::shared_ptr<const void>(&kOwner, [](const void*) {}), &d);
  ASSERT_TRUE(r.ok) << r.reason;
  ASSERT_TRUE(d->generic()) << d->why_not_generic();
  std::vector<float> z = UniformFloats(4, 5);
  uint32_t seed = 50;
  for (int64_t n : {5, 1, 40, 17, 5}) {
    std::vector<float> x = UniformFloats(n, seed++);
    std::vector<int64_t> dur(static_cast<size_t>(n));
    int64_t total = 0;
    for (int64_t i = 0; i < n; ++i) total += dur[i] = (i * 7 + n) % 4;
    Result out = RunDD(d.get(), x, dur, z);
    ASSERT_TRUE(out.r.ok) << "n " << n << ": " << out.r.reason;
    std::vector<float> sel;
    for (float v : x)
      if (v > 0) sel.push_back(2 * v);
    ASSERT_EQ(out.dims[0], (Dims{static_cast<int64_t>(sel.size())})) << "n " << n;
    for (size_t i = 0; i < sel.size(); ++i) EXPECT_EQ(out.data[0][i], sel[i]);
    ASSERT_EQ(out.dims[1], (Dims{total})) << "n " << n;
    ASSERT_EQ(out.dims[2], (Dims{total})) << "n " << n;
    for (int64_t i = 0; i < total; ++i) {
      EXPECT_EQ(out.data[1][i], static_cast<float>(i));
      EXPECT_EQ(out.data[2][i], 1.5f);
    }
    ASSERT_EQ(out.dims[3], (Dims{1, 4}));
    for (int j = 0; j < 4; ++j) {
      double want = 0;
      for (int k = 0; k < 4; ++k) want += double(z[k]) * m.w[k * 4 + j];
      EXPECT_NEAR(out.data[3][j], want, 1e-5);
    }
  }
  const DynamicGraph::Stats s = d->stats();
  EXPECT_EQ(s.generic_runs, 5u);
  EXPECT_EQ(s.binds, 0u);

  // A negative duration makes the total negative: read as a size, it is the caller's error.
  std::vector<float> x = {1, 2};
  std::vector<int64_t> dur = {1, -3};
  Result out = RunDD(d.get(), x, dur, z);
  EXPECT_FALSE(out.r.ok);
  EXPECT_TRUE(out.invalid);
  EXPECT_NE(out.r.reason.find("tot"), std::string::npos) << out.r.reason;
}

// Without the shape-generic form nothing can bind the run-time symbols: Create says why.
TEST(AotCpuGeneric, DataDependentSizesNeedTheGenericForm) {
  DataDependent m;
  DynamicGraph::Options o;
  o.generic = false;
  std::unique_ptr<DynamicGraph> d;
  static const char kOwner = 0;
  CheckResult r = DynamicGraph::Create(m.b.g, {"x", "dur", "z"}, {"sel2", "rf", "e", "zz"}, o,
                                       std::shared_ptr<const void>(&kOwner, [](const void*) {}), &d);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("depend on data"), std::string::npos) << r.reason;
}

// A per-shape segment after run-time sizes: y = 2 * Conv(Unsqueeze(Cast(Range(0, sum(dur), 1))), W, B) with pads 1, a
// Conv over a length known only once the durations are summed. The Conv has no shape-generic kernel: it is bound, lowered
// and built for each total length, and cached (a length seen before builds nothing).
TEST(AotCpuGeneric, APerShapeSegmentFollowsARunTimeLength) {
  GraphBuilder b;
  const std::vector<float> w = UniformFloats(2 * 1 * 3, 61), bias = UniformFloats(2, 62);
  b.SymInput("dur", {-1}, {"n"}, kI64);
  b.F32("W", {2, 1, 3}, w);
  b.F32("B", {2}, bias);
  b.F32("two_f", {}, {2.f});
  b.I64("ax0s", {}, {0});
  b.I64("zero_s", {}, {0});
  b.I64("one_s", {}, {1});
  b.I64("minus1", {-1});
  b.I64("big", {INT64_MAX});
  b.I64("ax0", {0});
  b.I64("ax01", {0, 1});
  b.g.v(b.FreeOut("cs", {-1})).dtype = kI64;
  b.g.v(b.Out("tot", {1})).dtype = kI64;
  b.g.v(b.Out("tot_s", {})).dtype = kI64;
  b.g.v(b.FreeOut("r", {-1})).dtype = kI64;
  b.FreeOut("rf", {-1});
  b.FreeOut("r3", {1, 1, -1});
  b.FreeOut("cv", {1, 2, -1});
  b.FreeOut("y", {1, 2, -1});
  b.N("CumSum", {"dur", "ax0s"}, {"cs"});
  b.N("Slice", {"cs", "minus1", "big", "ax0"}, {"tot"});
  b.N("Squeeze", {"tot", "ax0"}, {"tot_s"});
  b.N("Range", {"zero_s", "tot_s", "one_s"}, {"r"});
  b.N("Cast", {"r"}, {"rf"}).attrs["to"] = IntA(kF32);
  b.N("Unsqueeze", {"rf", "ax01"}, {"r3"});
  Node& conv = b.N("Conv", {"r3", "W", "B"}, {"cv"});
  conv.attrs["pads"] = IntsA({1, 1});
  conv.attrs["kernel_shape"] = IntsA({3});
  b.N("Mul", {"cv", "two_f"}, {"y"});
  b.Output("y");
  DynamicGraph::Options o;
  o.threads = 1;
  std::unique_ptr<DynamicGraph> d;
  static const char kOwner = 0;
  CheckResult r = DynamicGraph::Create(b.g, {"dur"}, {"y"}, o, std::shared_ptr<const void>(&kOwner, [](const void*) {}), &d);
  ASSERT_TRUE(r.ok) << r.reason;
  ASSERT_TRUE(d->generic()) << d->why_not_generic();
  EXPECT_NE(d->GenericSummary().find("1 per-shape segment(s) (1 nodes)"), std::string::npos) << d->GenericSummary();
  size_t totals = 0;
  std::set<int64_t> seen;
  for (int64_t n : {4, 9, 4, 30, 9}) {
    std::vector<int64_t> dur(static_cast<size_t>(n));
    int64_t total = 0;
    for (int64_t i = 0; i < n; ++i) total += dur[i] = 1 + (i * 5 + n) % 3;
    if (seen.insert(total).second) ++totals;
    std::vector<float> y;
    Dims yd;
    bool invalid = false;
    const void* in = dur.data();
    r = d->Run({in}, {{n}}, {kI64},
               [&](size_t, const std::vector<int64_t>& od, void** data) {
                 yd = od;
                 y.assign(static_cast<size_t>(Numel(od)), NAN);
                 *data = y.data();
                 return CheckResult::Ok();
               },
               &invalid);
    ASSERT_TRUE(r.ok) << "n " << n << ": " << r.reason;
    ASSERT_EQ(yd, (Dims{1, 2, total}));
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t t = 0; t < total; ++t) {
        double want = bias[c];
        for (int64_t k = 0; k < 3; ++k) {
          const int64_t at = t + k - 1;
          if (at >= 0 && at < total) want += double(w[c * 3 + k]) * at;
        }
        EXPECT_NEAR(y[c * total + t], 2 * want, 1e-4) << "n " << n << " c " << c << " t " << t;
      }
  }
  const DynamicGraph::Stats s = d->stats();
  EXPECT_EQ(s.binds, totals);
  EXPECT_EQ(s.hits, 5 - totals);
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
