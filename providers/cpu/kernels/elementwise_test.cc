// Behaviours of the elementwise kernels and the broadcasting utility that ONNX's backend suite does not cover:
// error statuses, integer edge cases (wrap, division by zero, INT_MIN / -1, Python modulo), legacy broadcasting,
// the float fast paths' accuracy on large tensors, and Cast corner cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/broadcast.h"
#include "providers/cpu/kernels/kernel_test_util.h"

namespace epctx {
namespace {

using namespace ::epctx::testing;  // NOLINT

// ---- broadcast.h ----------------------------------------------------------------------------------------------

TEST(Broadcast, ShapesAndErrors) {
  EXPECT_EQ(BroadcastShapes(Shape{2, 1, 3}, Shape{4, 1}).value(), (Shape{2, 4, 3}));
  EXPECT_EQ(BroadcastShapes(Shape{}, Shape{5}).value(), (Shape{5}));
  EXPECT_EQ(BroadcastShapes(Shape{0, 3}, Shape{1, 3}).value(), (Shape{0, 3}));
  auto bad = BroadcastShapes(Shape{2, 3}, Shape{4});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.status().message().find("[2,3]"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("[4]"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(CheckUnidirectionalBroadcast(Shape{3, 1}, Shape{2, 3}).ok());
  EXPECT_TRUE(CheckUnidirectionalBroadcast(Shape{3, 1}, Shape{2, 3, 5}).ok());
  EXPECT_EQ(BroadcastStrides(Shape{3, 1}, Shape{2, 3, 5}), (std::vector<int64_t>{0, 1, 0}));
}

TEST(Broadcast, PlanRuns) {
  // Row broadcast: runs are rows, the row operand restarts at 0 each run.
  Shape a{4, 3}, b{3};
  auto plan = BroadcastPlan::Make({&a, &b}).value();
  EXPECT_EQ(plan.run_length(), 3);
  EXPECT_EQ(plan.num_runs(), 4);
  EXPECT_TRUE(plan.steps(0) && plan.steps(1));
  std::vector<int64_t> a_off, b_off;
  plan.ForEachRun(1, 4, [&](int64_t out, const int64_t* off) {
    EXPECT_EQ(out, off[0]);
    a_off.push_back(off[0]);
    b_off.push_back(off[1]);
  });
  EXPECT_EQ(a_off, (std::vector<int64_t>{3, 6, 9}));
  EXPECT_EQ(b_off, (std::vector<int64_t>{0, 0, 0}));
  // Column broadcast: the column operand is constant within a run and advances per run.
  Shape c{2, 1, 4}, d{2, 3, 1};
  auto p2 = BroadcastPlan::Make({&c, &d}).value();
  EXPECT_EQ(p2.out_shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(p2.run_length(), 4);
  EXPECT_TRUE(p2.steps(0));
  EXPECT_FALSE(p2.steps(1));
  std::vector<int64_t> c_off, d_off;
  p2.ForEachRun(0, p2.num_runs(), [&](int64_t, const int64_t* off) {
    c_off.push_back(off[0]);
    d_off.push_back(off[1]);
  });
  EXPECT_EQ(c_off, (std::vector<int64_t>{0, 0, 0, 4, 4, 4}));
  EXPECT_EQ(d_off, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  // Same shapes collapse to one run.
  Shape e{2, 3, 4};
  auto p3 = BroadcastPlan::Make({&e, &e}).value();
  EXPECT_TRUE(p3.all_same());
  EXPECT_EQ(p3.num_runs(), 1);
  EXPECT_EQ(p3.run_length(), 24);
}

// ---- binary ops -----------------------------------------------------------------------------------------------

TEST(ElementwiseBinary, AddBroadcastsAndRejectsBadShapes) {
  auto r = RunOp("Add", 14, {MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}), MakeTensor<float>({3}, {10, 20, 30})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{2, 3}));
  EXPECT_EQ(Values<float>(r.out()), (std::vector<float>{11, 22, 33, 14, 25, 36}));

  auto bad = RunOp("Add", 14, {MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}), MakeTensor<float>({2}, {1, 2})});
  EXPECT_EQ(bad.status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.status.message().find("n0"), std::string::npos) << bad.status.message();
  EXPECT_NE(bad.status.message().find("[2,3]"), std::string::npos) << bad.status.message();

  auto mixed = RunOp("Add", 14, {MakeTensor<float>({1}, {1}), MakeTensor<int32_t>({1}, {1})});
  EXPECT_EQ(mixed.status.code(), ErrorCode::INVALID_ARGUMENT);

  auto missing = RunOp("Add", 14, {MakeTensor<float>({1}, {1}), Tensor()});
  EXPECT_EQ(missing.status.code(), ErrorCode::INVALID_ARGUMENT);

  auto str = RunOp("Add", 14, {MakeTensor<std::string>({1}, {"a"}), MakeTensor<std::string>({1}, {"b"})});
  EXPECT_EQ(str.status.code(), ErrorCode::NOT_IMPLEMENTED);
  // The message (built only on this error, from the node itself) names the node, the op and the type.
  EXPECT_NE(str.status.message().find("Add node 'n0'"), std::string::npos) << str.status.message();
  EXPECT_NE(str.status.message().find("element type string is not supported"), std::string::npos)
      << str.status.message();
  auto sig = RunOp("Sigmoid", 13, {MakeTensor<int32_t>({1}, {1})});
  EXPECT_EQ(sig.status.code(), ErrorCode::NOT_IMPLEMENTED);
  EXPECT_NE(sig.status.message().find("Sigmoid node 'n0': element type int32"), std::string::npos)
      << sig.status.message();
}

TEST(ElementwiseBinary, IntegerEdgeCases) {
  const int32_t kMin = std::numeric_limits<int32_t>::min(), kMax = std::numeric_limits<int32_t>::max();
  auto add = RunOp("Add", 14, {MakeTensor<int32_t>({2}, {kMax, 5}), MakeTensor<int32_t>({1}, {1})});
  ASSERT_TRUE(add.status.ok());
  EXPECT_EQ(Values<int32_t>(add.out()), (std::vector<int32_t>{kMin, 6}));

  auto div = RunOp("Div", 14, {MakeTensor<int32_t>({3}, {-7, kMin, 7}), MakeTensor<int32_t>({3}, {2, -1, -2})});
  ASSERT_TRUE(div.status.ok());
  EXPECT_EQ(Values<int32_t>(div.out()), (std::vector<int32_t>{-3, kMin, -3}));

  auto div0 = RunOp("Div", 14, {MakeTensor<int64_t>({2}, {1, 2}), MakeTensor<int64_t>({2}, {1, 0})});
  EXPECT_EQ(div0.status.code(), ErrorCode::INVALID_ARGUMENT);
  auto fdiv0 = RunOp("Div", 14, {MakeTensor<float>({1}, {1}), MakeTensor<float>({1}, {0})});
  ASSERT_TRUE(fdiv0.status.ok());
  EXPECT_TRUE(std::isinf(Values<float>(fdiv0.out())[0]));

  auto mod = RunOp("Mod", 13, {MakeTensor<int32_t>({4}, {-7, 7, -7, kMin}), MakeTensor<int32_t>({4}, {3, -3, -3, -1})});
  ASSERT_TRUE(mod.status.ok());
  EXPECT_EQ(Values<int32_t>(mod.out()), (std::vector<int32_t>{2, -2, -1, 0}));
  auto fmod =
      RunOp("Mod", 13, {MakeTensor<int32_t>({2}, {-7, 7}), MakeTensor<int32_t>({2}, {3, -3})}, {IntAttr("fmod", 1)});
  ASSERT_TRUE(fmod.status.ok());
  EXPECT_EQ(Values<int32_t>(fmod.out()), (std::vector<int32_t>{-1, 1}));
  auto mod0 = RunOp("Mod", 13, {MakeTensor<uint8_t>({1}, {3}), MakeTensor<uint8_t>({1}, {0})});
  EXPECT_EQ(mod0.status.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(ElementwiseBinary, PowMixedTypes) {
  auto ii = RunOp("Pow", 15, {MakeTensor<int64_t>({3}, {3, 2, -2}), MakeTensor<int32_t>({3}, {4, -1, 3})});
  ASSERT_TRUE(ii.status.ok()) << ii.status.ToString();
  EXPECT_EQ(Values<int64_t>(ii.out()), (std::vector<int64_t>{81, 0, -8}));
  auto fi = RunOp("Pow", 15, {MakeTensor<float>({2}, {2.0f, 0.5f}), MakeTensor<uint8_t>({1}, {3})});
  ASSERT_TRUE(fi.status.ok());
  EXPECT_EQ(Values<float>(fi.out()), (std::vector<float>{8.0f, 0.125f}));
  auto bad = RunOp("Pow", 15, {MakeTensor<bool>({1}, {true}), MakeTensor<float>({1}, {1})});
  EXPECT_EQ(bad.status.code(), ErrorCode::NOT_IMPLEMENTED);
}

TEST(ElementwiseBinary, LegacyBroadcastAxis) {
  // Opset 6: B of shape [3] aligned at axis 1 of A [2,3,2].
  std::vector<float> a(12, 1.0f);
  auto r = RunOp("Mul", 6, {MakeTensor<float>({2, 3, 2}, a), MakeTensor<float>({3}, {1, 2, 3})},
                 {IntAttr("broadcast", 1), IntAttr("axis", 1)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values<float>(r.out()), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  auto no_bcast = RunOp("Mul", 6, {MakeTensor<float>({2, 3, 2}, a), MakeTensor<float>({3}, {1, 2, 3})});
  EXPECT_EQ(no_bcast.status.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(ElementwiseBinary, PReluSlopeBroadcast) {
  // Opset 6: a 1-D slope is per channel (axis 1); opset 16: it must broadcast unidirectionally from the right.
  Tensor x = MakeTensor<float>({1, 2, 3}, {-1, -1, -1, -1, -1, 2});
  Tensor slope = MakeTensor<float>({2}, {0.5f, 0.25f});
  auto old = RunOp("PRelu", 6, {x, slope});
  ASSERT_TRUE(old.status.ok()) << old.status.ToString();
  EXPECT_EQ(Values<float>(old.out()), (std::vector<float>{-0.5f, -0.5f, -0.5f, -0.25f, -0.25f, 2}));
  auto now = RunOp("PRelu", 16, {x, slope});
  EXPECT_EQ(now.status.code(), ErrorCode::INVALID_ARGUMENT);
  auto now_ok = RunOp("PRelu", 16, {x, MakeTensor<float>({2, 1}, {0.5f, 0.25f})});
  ASSERT_TRUE(now_ok.status.ok());
  EXPECT_EQ(Values<float>(now_ok.out()), Values<float>(old.out()));
  // Legacy broadcasting with an absurd axis is an error, not an overflow.
  auto bad_axis =
      RunOp("Add", 6, {x, slope}, {IntAttr("broadcast", 1), IntAttr("axis", std::numeric_limits<int64_t>::max())});
  EXPECT_EQ(bad_axis.status.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(ElementwiseBinary, ComparisonsBitShiftAndVariadic) {
  auto eq = RunOp("Equal", 13, {MakeTensor<std::string>({2}, {"a", "b"}), MakeTensor<std::string>({1}, {"b"})});
  ASSERT_TRUE(eq.status.ok());
  EXPECT_EQ(eq.out().dtype(), DataType::kBool);
  EXPECT_EQ(Values<bool>(eq.out()), (std::vector<bool>{false, true}));

  auto shl = RunOp("BitShift", 11, {MakeTensor<uint8_t>({3}, {1, 1, 255}), MakeTensor<uint8_t>({3}, {7, 8, 200})},
                   {StringAttr("direction", "LEFT")});
  ASSERT_TRUE(shl.status.ok());
  EXPECT_EQ(Values<uint8_t>(shl.out()), (std::vector<uint8_t>{128, 0, 0}));
  auto bad_dir = RunOp("BitShift", 11, {MakeTensor<uint8_t>({1}, {1}), MakeTensor<uint8_t>({1}, {1})},
                       {StringAttr("direction", "UP")});
  EXPECT_EQ(bad_dir.status.code(), ErrorCode::INVALID_GRAPH);

  auto sum =
      RunOp("Sum", 13,
            {MakeTensor<float>({2, 1}, {1, 2}), MakeTensor<float>({3}, {10, 20, 30}), MakeTensor<float>({1}, {100})});
  ASSERT_TRUE(sum.status.ok()) << sum.status.ToString();
  EXPECT_EQ(sum.out().shape(), (Shape{2, 3}));
  EXPECT_EQ(Values<float>(sum.out()), (std::vector<float>{111, 121, 131, 112, 122, 132}));

  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto mx = RunOp("Max", 13, {MakeTensor<float>({2}, {nan, 1}), MakeTensor<float>({2}, {1, nan})});
  ASSERT_TRUE(mx.status.ok());
  EXPECT_TRUE(std::isnan(Values<float>(mx.out())[0]) && std::isnan(Values<float>(mx.out())[1]));

  auto where = RunOp("Where", 16,
                     {MakeTensor<bool>({2, 1}, {true, false}), MakeTensor<std::string>({2}, {"x0", "x1"}),
                      MakeTensor<std::string>({1}, {"y"})});
  ASSERT_TRUE(where.status.ok()) << where.status.ToString();
  EXPECT_EQ(Values<std::string>(where.out()), (std::vector<std::string>{"x0", "x1", "y", "y"}));
}

// ---- unary ops ----------------------------------------------------------------------------------------------

// The vectorized float Exp/Tanh/Sigmoid/Erf over a large tensor (parallel path) against double-precision libm.
TEST(ElementwiseUnary, FastFloatMathIsAccurate) {
  const int64_t n = 1 << 18;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = -30.0f + 60.0f * static_cast<float>(i) / static_cast<float>(n);
  x[0] = 1e-6f;
  x[1] = -0.3f;
  struct Case {
    const char* op;
    double (*ref)(double);
  } cases[] = {{"Exp", [](double v) { return std::exp(v); }},
               {"Tanh", [](double v) { return std::tanh(v); }},
               {"Sigmoid", [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
               {"Erf", [](double v) { return std::erf(v); }}};
  for (const Case& c : cases) {
    auto r = RunOp(c.op, 13, {MakeTensor<float>({n}, x)});
    ASSERT_TRUE(r.status.ok()) << c.op;
    const float* y = r.out().data<float>();
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double ref = c.ref(x[i]);
      const double err = std::fabs(y[i] - ref) / std::max(std::fabs(ref), 1e-30);
      worst = std::max(worst, err);
    }
    EXPECT_LT(worst, 5e-7) << c.op;
  }
  auto special =
      RunOp("Exp", 13, {MakeTensor<float>({4}, {std::numeric_limits<float>::quiet_NaN(), 100.0f, -200.0f, -100.0f})});
  ASSERT_TRUE(special.status.ok());
  auto v = Values<float>(special.out());
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_TRUE(std::isinf(v[1]));
  EXPECT_EQ(v[2], 0.0f);
  EXPECT_NEAR(v[3] / std::exp(-100.0), 1.0, 0.05);  // subnormal result (coarse spacing)
}

TEST(ElementwiseUnary, TypesAndClip) {
  auto relu16 = RunOp("Relu", 14, {MakeTensor<Float16>({2}, {Float16(-1.5f), Float16(2.5f)})});
  ASSERT_TRUE(relu16.status.ok());
  EXPECT_EQ(static_cast<float>(relu16.out().data<Float16>()[0]), 0.0f);
  EXPECT_EQ(static_cast<float>(relu16.out().data<Float16>()[1]), 2.5f);

  auto neg = RunOp("Neg", 13, {MakeTensor<int32_t>({1}, {std::numeric_limits<int32_t>::min()})});
  ASSERT_TRUE(neg.status.ok());
  EXPECT_EQ(Values<int32_t>(neg.out())[0], std::numeric_limits<int32_t>::min());

  auto not_float = RunOp("Not", 1, {MakeTensor<float>({1}, {1})});
  EXPECT_EQ(not_float.status.code(), ErrorCode::NOT_IMPLEMENTED);
  auto sqrt_int = RunOp("Sqrt", 13, {MakeTensor<int32_t>({1}, {4})});
  EXPECT_EQ(sqrt_int.status.code(), ErrorCode::NOT_IMPLEMENTED);

  auto round = RunOp("Round", 11, {MakeTensor<float>({4}, {0.5f, 1.5f, 2.5f, -0.5f})});
  ASSERT_TRUE(round.status.ok());
  EXPECT_EQ(Values<float>(round.out()), (std::vector<float>{0.0f, 2.0f, 2.0f, -0.0f}));

  auto clip =
      RunOp("Clip", 13,
            {MakeTensor<int8_t>({4}, {-100, -5, 5, 100}), MakeTensor<int8_t>({}, {-10}), MakeTensor<int8_t>({}, {10})});
  ASSERT_TRUE(clip.status.ok());
  EXPECT_EQ(Values<int8_t>(clip.out()), (std::vector<int8_t>{-10, -5, 5, 10}));
  auto clip_max_only = RunOp("Clip", 13, {MakeTensor<float>({2}, {-3, 3}), Tensor(), MakeTensor<float>({}, {1})});
  ASSERT_TRUE(clip_max_only.status.ok());
  EXPECT_EQ(Values<float>(clip_max_only.out()), (std::vector<float>{-3, 1}));
  auto clip_bad = RunOp("Clip", 13, {MakeTensor<float>({2}, {-3, 3}), MakeTensor<float>({2}, {0, 1})});
  EXPECT_EQ(clip_bad.status.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(ElementwiseUnary, DropoutTrainingIsSeededAndScaled) {
  std::vector<float> x(1000, 1.0f);
  auto run = [&] {
    return RunOp("Dropout", 13,
                 {MakeTensor<float>({1000}, x), MakeTensor<float>({}, {0.25f}), MakeTensor<bool>({}, {true})},
                 {IntAttr("seed", 7)}, 2);
  };
  auto a = run(), b = run();
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(Values<float>(a.out()), Values<float>(b.out()));
  int kept = 0;
  for (int i = 0; i < 1000; ++i) {
    const float y = a.out().data<float>()[i];
    const bool m = a.out(1).data<bool>()[i];
    EXPECT_FLOAT_EQ(y, m ? 1.0f / 0.75f : 0.0f);
    kept += m;
  }
  EXPECT_GT(kept, 650);
  EXPECT_LT(kept, 850);
  auto bad =
      RunOp("Dropout", 13, {MakeTensor<float>({1}, {1}), MakeTensor<float>({}, {1.5f}), MakeTensor<bool>({}, {true})});
  EXPECT_EQ(bad.status.code(), ErrorCode::INVALID_ARGUMENT);
}

// ---- Cast -----------------------------------------------------------------------------------------------------

TEST(ElementwiseCast, CornerCases) {
  // String parsing: numbers, special values, and an error naming the bad string.
  auto s2f = RunOp("Cast", 13, {MakeTensor<std::string>({4}, {"1e-5", "-INF", "nan", " 2.5"})}, {IntAttr("to", 1)});
  ASSERT_TRUE(s2f.status.ok()) << s2f.status.ToString();
  auto f = Values<float>(s2f.out());
  EXPECT_FLOAT_EQ(f[0], 1e-5f);
  EXPECT_TRUE(std::isinf(f[1]) && f[1] < 0);
  EXPECT_TRUE(std::isnan(f[2]));
  EXPECT_EQ(f[3], 2.5f);
  auto bad = RunOp("Cast", 13, {MakeTensor<std::string>({1}, {"hello"})}, {IntAttr("to", 1)});
  EXPECT_EQ(bad.status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.status.message().find("hello"), std::string::npos);
  auto s2i = RunOp("Cast", 13, {MakeTensor<std::string>({2}, {"9007199254740993", "100.7"})}, {IntAttr("to", 7)});
  ASSERT_TRUE(s2i.status.ok());
  EXPECT_EQ(Values<int64_t>(s2i.out()), (std::vector<int64_t>{9007199254740993LL, 100}));

  // Numbers to strings: shortest round-trip text.
  auto f2s = RunOp("Cast", 13, {MakeTensor<float>({3}, {0.1f, -std::numeric_limits<float>::infinity(), 1e-5f})},
                   {IntAttr("to", 8)});
  ASSERT_TRUE(f2s.status.ok());
  EXPECT_EQ(Values<std::string>(f2s.out()), (std::vector<std::string>{"0.1", "-INF", "1e-05"}));

  // Out-of-range and NaN float -> int are defined (no UB), in range truncates.
  auto f2i = RunOp("Cast", 13, {MakeTensor<float>({3}, {std::numeric_limits<float>::quiet_NaN(), 3e10f, -2.7f})},
                   {IntAttr("to", 6)});
  ASSERT_TRUE(f2i.status.ok());
  EXPECT_EQ(Values<int32_t>(f2i.out()),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::min(), -2}));

  // double -> float16 rounds once: 1 + 2^-11 + 2^-40 is just above the halfway point, so it rounds up.
  const double d = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  auto d2h = RunOp("Cast", 13, {MakeTensor<double>({1}, {d})}, {IntAttr("to", 10)});
  ASSERT_TRUE(d2h.status.ok());
  EXPECT_EQ(d2h.out().data<Float16>()[0].bits, 0x3c01);

  // float <-> float16 in bulk (vector path plus a tail) matches the scalar conversion bit for bit.
  std::vector<float> fx;
  for (int i = 0; i < 37; ++i) fx.push_back(std::ldexp(1.0f + i / 37.0f, i - 26) * (i % 2 ? -1.0f : 1.0f));
  fx[3] = std::numeric_limits<float>::infinity();
  fx[4] = std::numeric_limits<float>::quiet_NaN();
  fx[5] = 70000.0f;
  auto f2h = RunOp("Cast", 13, {MakeTensor<float>({37}, fx)}, {IntAttr("to", 10)});
  ASSERT_TRUE(f2h.status.ok());
  for (int i = 0; i < 37; ++i) EXPECT_EQ(f2h.out().data<Float16>()[i].bits, Float16(fx[i]).bits) << i;
  auto h2f = RunOp("Cast", 13, {f2h.out()}, {IntAttr("to", 1)});
  ASSERT_TRUE(h2f.status.ok());
  for (int i = 0; i < 37; ++i) {
    const float want = static_cast<float>(f2h.out().data<Float16>()[i]);
    const float got = h2f.out().data<float>()[i];
    EXPECT_TRUE(got == want || (std::isnan(got) && std::isnan(want))) << i;
  }

  // Opset 1 names the type with a string; unknown names and complex targets are rejected at creation.
  auto old = RunOp("Cast", 1, {MakeTensor<int32_t>({2}, {0, 5})}, {StringAttr("to", "BOOL")});
  ASSERT_TRUE(old.status.ok()) << old.status.ToString();
  EXPECT_EQ(Values<bool>(old.out()), (std::vector<bool>{false, true}));
  EXPECT_EQ(RunOp("Cast", 1, {MakeTensor<int32_t>({1}, {0})}, {StringAttr("to", "QUATERNION")}).status.code(),
            ErrorCode::INVALID_GRAPH);
  EXPECT_EQ(RunOp("Cast", 13, {MakeTensor<int32_t>({1}, {0})}, {IntAttr("to", 14)}).status.code(),
            ErrorCode::NOT_IMPLEMENTED);
  EXPECT_EQ(RunOp("Cast", 13, {MakeTensor<int32_t>({1}, {0})}, {IntAttr("to", 99)}).status.code(),
            ErrorCode::INVALID_GRAPH);
}

}  // namespace
}  // namespace epctx
