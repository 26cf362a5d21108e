// Unit tests of the reduction family: what the ONNX backend suite does not cover — fragmented axis patterns,
// reductions over empty sets, integer and 16-bit types, opset-dependent softmax axes, long rows (the vectorized
// exp), tie rules, and the error statuses for bad attributes and inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/kernel_test_util.h"

namespace epctx {
namespace {

using namespace ::epctx::testing;  // NOLINT

std::vector<float> Iota(int64_t n, float scale = 1.0f, float offset = 0.0f) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * 0.37f) * scale + offset;
  return v;
}

// Naive sum over `axes` of a row-major tensor (keepdims layout irrelevant: output in kept-dims order).
std::vector<double> NaiveSum(const Shape& shape, const std::vector<float>& x, const std::vector<bool>& reduced) {
  Shape out_shape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d]) out_shape.push_back(shape[d]);
  std::vector<double> out(ShapeSize(out_shape), 0.0);
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t k = 0; k < x.size(); ++k) {
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!reduced[d]) o = o * shape[d] + idx[d];
    out[o] += x[k];
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

TEST(ReductionTest, ReduceSumFragmentedAxesMatchNaive) {
  // [R,K,R,K] (leading reduced block) and [K,R,K,R,K] (general offset tables) patterns.
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;
  };
  for (const Case& c : {Case{{2, 3, 4, 5}, {0, 2}}, Case{{2, 3, 4, 5, 6}, {1, 3}}, Case{{3, 1, 4, 5}, {-1, 0}},
                        Case{{4, 6}, {0}}, Case{{70000}, {0}}}) {
    std::vector<float> x = Iota(ShapeSize(c.shape));
    OpResult r =
        RunOp("ReduceSum", 11, {MakeTensor<float>(c.shape, x)}, {IntsAttr("axes", c.axes), IntAttr("keepdims", 0)});
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    std::vector<bool> reduced(c.shape.size(), false);
    for (int64_t a : c.axes) reduced[a < 0 ? a + c.shape.size() : a] = true;
    std::vector<double> want = NaiveSum(c.shape, x, reduced);
    std::vector<float> got = r.values<float>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-3 * (1 + std::fabs(want[i]))) << i;
  }
}

TEST(ReductionTest, EmptyReducedAxisGivesIdentity) {
  IValue x = MakeTensor<float>({2, 0, 3}, {});
  auto run = [&](const std::string& op) {
    OpResult r = RunOp(op, 11, {x}, {IntsAttr("axes", {1})});
    EXPECT_TRUE(r.status.ok()) << op << ": " << r.status.ToString();
    EXPECT_EQ(r.out().shape(), (Shape{2, 1, 3})) << op;
    return r.values<float>();
  };
  for (float v : run("ReduceSum")) EXPECT_EQ(v, 0.0f);
  for (float v : run("ReduceProd")) EXPECT_EQ(v, 1.0f);
  for (float v : run("ReduceMax")) EXPECT_EQ(v, -std::numeric_limits<float>::infinity());
  for (float v : run("ReduceMin")) EXPECT_EQ(v, std::numeric_limits<float>::infinity());
  for (float v : run("ReduceLogSumExp")) EXPECT_EQ(v, -std::numeric_limits<float>::infinity());
  for (float v : run("ReduceMean")) EXPECT_TRUE(std::isnan(v));
}

TEST(ReductionTest, ReduceSumAxesInputAndNoop) {
  IValue x = MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  IValue empty_axes = MakeTensor<int64_t>({0}, {});
  OpResult noop = RunOp("ReduceSum", 13, {x, empty_axes}, {IntAttr("noop_with_empty_axes", 1)});
  ASSERT_TRUE(noop.status.ok());
  EXPECT_EQ(noop.out().shape(), (Shape{2, 3}));
  EXPECT_EQ(noop.values<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));

  OpResult all = RunOp("ReduceSum", 13, {x, IValue()}, {IntAttr("keepdims", 0)});
  ASSERT_TRUE(all.status.ok());
  EXPECT_EQ(all.out().shape(), Shape{});
  EXPECT_EQ(all.values<float>()[0], 21.0f);

  OpResult cols = RunOp("ReduceSum", 13, {x, MakeTensor<int64_t>({1}, {-2})});
  ASSERT_TRUE(cols.status.ok());
  EXPECT_EQ(cols.out().shape(), (Shape{1, 3}));
  EXPECT_EQ(cols.values<float>(), (std::vector<float>{5, 7, 9}));

  OpResult dup = RunOp("ReduceSum", 13, {x, MakeTensor<int64_t>({2}, {1, -1})});
  EXPECT_EQ(dup.status.code(), ErrorCode::INVALID_ARGUMENT);
  OpResult range = RunOp("ReduceMean", 11, {x}, {IntsAttr("axes", {2})});
  EXPECT_EQ(range.status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(range.status.message().find("out of range"), std::string::npos) << range.status.message();
  OpResult bad_type = RunOp("ReduceSum", 13, {x, MakeTensor<float>({1}, {0})});
  EXPECT_EQ(bad_type.status.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(ReductionTest, IntegerAndHalfTypes) {
  OpResult i32 = RunOp("ReduceSum", 11, {MakeTensor<int32_t>({2, 2}, {1, -7, 100, 5})}, {IntsAttr("axes", {1})});
  ASSERT_TRUE(i32.status.ok());
  EXPECT_EQ(i32.values<int32_t>(), (std::vector<int32_t>{-6, 105}));
  OpResult i8 = RunOp("ReduceMax", 12, {MakeTensor<int8_t>({3}, {-5, 7, -128})});
  ASSERT_TRUE(i8.status.ok());
  EXPECT_EQ(i8.values<int8_t>(), (std::vector<int8_t>{7}));
  OpResult mean = RunOp("ReduceMean", 13, {MakeTensor<int64_t>({3}, {1, 2, 4})});
  ASSERT_TRUE(mean.status.ok());
  EXPECT_EQ(mean.values<int64_t>(), (std::vector<int64_t>{2}));  // 7 / 3 truncated
  OpResult half =
      RunOp("ReduceMean", 13, {MakeTensor<Float16>({2, 2}, {Float16(1.5f), Float16(2.5f), Float16(-1), Float16(3)})},
            {IntsAttr("axes", {0}), IntAttr("keepdims", 0)});
  ASSERT_TRUE(half.status.ok());
  EXPECT_EQ(half.out().dtype(), DataType::kFloat16);
  EXPECT_EQ(float(half.values<Float16>()[0]), 0.25f);
  EXPECT_EQ(float(half.values<Float16>()[1]), 2.75f);
  OpResult bf = RunOp("ReduceSum", 13, {MakeTensor<BFloat16>({3}, {BFloat16(1), BFloat16(2), BFloat16(-0.5f)})});
  ASSERT_TRUE(bf.status.ok());
  EXPECT_EQ(float(bf.values<BFloat16>()[0]), 2.5f);
  // 8-bit integers are ReduceMax/ReduceMin types only.
  OpResult i8sum = RunOp("ReduceSum", 13, {MakeTensor<int8_t>({2}, {1, 2})});
  EXPECT_EQ(i8sum.status.code(), ErrorCode::NOT_IMPLEMENTED);
  OpResult str = RunOp("ReduceSum", 11, {MakeTensor<std::string>({1}, {"a"})});
  EXPECT_EQ(str.status.code(), ErrorCode::NOT_IMPLEMENTED);
}

TEST(ReductionTest, LogSumExpIsStableForLargeAndInfiniteValues) {
  float inf = std::numeric_limits<float>::infinity();
  OpResult r = RunOp("ReduceLogSumExp", 13, {MakeTensor<float>({3, 2}, {1000, 1000, -inf, -inf, -inf, 0})},
                     {IntsAttr("axes", {1}), IntAttr("keepdims", 0)});
  ASSERT_TRUE(r.status.ok());
  std::vector<float> v = r.values<float>();
  EXPECT_NEAR(v[0], 1000 + std::log(2.0f), 1e-3);
  EXPECT_EQ(v[1], -inf);
  EXPECT_NEAR(v[2], 0.0f, 1e-6);
}

TEST(ReductionTest, ArgMaxTiesAndEmptyAxis) {
  IValue x = MakeTensor<float>({2, 3}, {1, 5, 5, 2, 2, 0});
  OpResult first = RunOp("ArgMax", 13, {x}, {IntAttr("axis", 1), IntAttr("keepdims", 0)});
  ASSERT_TRUE(first.status.ok());
  EXPECT_EQ(first.values<int64_t>(), (std::vector<int64_t>{1, 0}));
  OpResult last = RunOp("ArgMax", 13, {x}, {IntAttr("axis", 1), IntAttr("select_last_index", 1)});
  ASSERT_TRUE(last.status.ok());
  EXPECT_EQ(last.out().shape(), (Shape{2, 1}));
  EXPECT_EQ(last.values<int64_t>(), (std::vector<int64_t>{2, 1}));
  OpResult amin = RunOp("ArgMin", 13, {MakeTensor<uint8_t>({4}, {9, 3, 3, 200})});
  ASSERT_TRUE(amin.status.ok());
  EXPECT_EQ(amin.values<int64_t>(), (std::vector<int64_t>{1}));
  OpResult empty = RunOp("ArgMax", 13, {MakeTensor<float>({2, 0}, {})}, {IntAttr("axis", 1)});
  EXPECT_EQ(empty.status.code(), ErrorCode::INVALID_ARGUMENT);
  OpResult axis = RunOp("ArgMax", 13, {x}, {IntAttr("axis", -3)});
  EXPECT_EQ(axis.status.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(ReductionTest, TopKTiesKeepLowerIndexAndValidatesK) {
  IValue x = MakeTensor<int64_t>({6}, {3, 1, 3, 2, 1, 3});
  OpResult largest = RunOp("TopK", 11, {x, MakeTensor<int64_t>({1}, {4})}, {}, 2);
  ASSERT_TRUE(largest.status.ok()) << largest.status.ToString();
  EXPECT_EQ(largest.values<int64_t>(0), (std::vector<int64_t>{3, 3, 3, 2}));
  EXPECT_EQ(largest.values<int64_t>(1), (std::vector<int64_t>{0, 2, 5, 3}));
  OpResult smallest = RunOp("TopK", 11, {x, MakeTensor<int64_t>({1}, {3})}, {IntAttr("largest", 0)}, 2);
  ASSERT_TRUE(smallest.status.ok());
  EXPECT_EQ(smallest.values<int64_t>(1), (std::vector<int64_t>{1, 4, 3}));
  OpResult old = RunOp("TopK", 1, {MakeTensor<float>({2, 2}, {1, 2, 4, 3})}, {IntAttr("k", 1)}, 2);
  ASSERT_TRUE(old.status.ok());
  EXPECT_EQ(old.values<float>(0), (std::vector<float>{2, 4}));
  OpResult too_big = RunOp("TopK", 11, {x, MakeTensor<int64_t>({1}, {7})}, {}, 2);
  EXPECT_EQ(too_big.status.code(), ErrorCode::INVALID_ARGUMENT);
  OpResult negative = RunOp("TopK", 11, {x, MakeTensor<int64_t>({1}, {-1})}, {}, 2);
  EXPECT_EQ(negative.status.code(), ErrorCode::INVALID_ARGUMENT);
  OpResult no_k = RunOp("TopK", 9, {x}, {}, 2);
  EXPECT_EQ(no_k.create_status.code(), ErrorCode::INVALID_GRAPH);
}

TEST(ReductionTest, SoftmaxAxisSemanticsDependOnOpset) {
  // [1,2,2] with axis 1: opset 11 normalizes over the flattened last 4 values, opset 13 over dim 1 only.
  IValue x = MakeTensor<float>({1, 2, 2}, {0, 1, 2, 3});
  OpResult old = RunOp("Softmax", 11, {x}, {IntAttr("axis", 1)});
  OpResult now = RunOp("Softmax", 13, {x}, {IntAttr("axis", 1)});
  ASSERT_TRUE(old.status.ok() && now.status.ok());
  double z = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  std::vector<float> o = old.values<float>(), n = now.values<float>();
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(o[i], std::exp(i) / z, 1e-6);
  EXPECT_NEAR(n[0], 1 / (1 + std::exp(2.0)), 1e-6);
  EXPECT_NEAR(n[2], std::exp(2.0) / (1 + std::exp(2.0)), 1e-6);
  OpResult hard = RunOp("Hardmax", 13, {MakeTensor<double>({2, 2}, {1, 1, 0, 3})}, {IntAttr("axis", 0)});
  ASSERT_TRUE(hard.status.ok());
  EXPECT_EQ(hard.values<double>(), (std::vector<double>{1, 0, 0, 1}));
  OpResult bad = RunOp("Softmax", 13, {x}, {IntAttr("axis", 3)});
  EXPECT_EQ(bad.status.code(), ErrorCode::INVALID_ARGUMENT);
  OpResult ints = RunOp("Softmax", 13, {MakeTensor<int32_t>({2}, {1, 2})});
  EXPECT_EQ(ints.status.code(), ErrorCode::NOT_IMPLEMENTED);
}

// Regression (model_fuzz, UBSan): the vectorized exp converted a NaN to int. NaN in a row makes that row NaN; rows
// without one are unaffected (long rows take the vectorized path).
TEST(ReductionTest, NaNInSoftmaxRowsStaysNaNAndStaysInItsRow) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const int64_t n = 67;
  std::vector<float> x(2 * n, 0.5f);
  x[3] = nan;
  x[n + 5] = inf;  // inf - inf = NaN inside the kernel
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    OpResult r = RunOp(op, 13, {MakeTensor<float>({2, n}, x)});
    ASSERT_TRUE(r.status.ok()) << op;
    for (int64_t i = 0; i < 2 * n; ++i) EXPECT_TRUE(std::isnan(r.values<float>()[i])) << op << " element " << i;
  }
  OpResult ok = RunOp("Softmax", 13, {MakeTensor<float>({2, n}, std::vector<float>(2 * n, 0.5f))});
  ASSERT_TRUE(ok.status.ok());
  for (float v : ok.values<float>()) EXPECT_NEAR(v, 1.0f / n, 1e-6);
  OpResult lse = RunOp("ReduceLogSumExp", 13, {MakeTensor<float>({1, 3}, {nan, 0, 1})},
                       {IntsAttr("axes", {1}), IntAttr("keepdims", 0)});
  ASSERT_TRUE(lse.status.ok());
  EXPECT_TRUE(std::isnan(lse.values<float>()[0]));
}

TEST(ReductionTest, LongSoftmaxRowsMatchDoublePrecision) {
  const int64_t n = 1027;
  std::vector<float> x = Iota(n * 2, 30.0f);
  OpResult soft = RunOp("Softmax", 13, {MakeTensor<float>({2, n}, x)});
  OpResult logs = RunOp("LogSoftmax", 13, {MakeTensor<float>({2, n}, x)});
  OpResult bf = RunOp("Softmax", 13, {MakeTensor<float>({n, 2}, x)}, {IntAttr("axis", 0)});  // strided path
  ASSERT_TRUE(soft.status.ok() && logs.status.ok() && bf.status.ok());
  for (int64_t row = 0; row < 2; ++row) {
    double m = -1e300, s = 0;
    for (int64_t i = 0; i < n; ++i) m = std::max<double>(m, x[row * n + i]);
    for (int64_t i = 0; i < n; ++i) s += std::exp(x[row * n + i] - m);
    for (int64_t i = 0; i < n; ++i) {
      double want = std::exp(x[row * n + i] - m) / s;
      EXPECT_NEAR(soft.values<float>()[row * n + i], want, 1e-5 * want + 1e-30);
      EXPECT_NEAR(logs.values<float>()[row * n + i], std::log(want), 1e-4);
    }
  }
  // Column-wise softmax: each column sums to one.
  for (int col = 0; col < 2; ++col) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += bf.values<float>()[i * 2 + col];
    EXPECT_NEAR(s, 1.0, 1e-4);
  }
}

TEST(ReductionTest, CumSumValidatesAxisAndHandlesInts) {
  IValue x = MakeTensor<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  OpResult r = RunOp("CumSum", 14, {x, MakeTensor<int32_t>({}, {1})}, {IntAttr("exclusive", 1), IntAttr("reverse", 1)});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.values<int32_t>(), (std::vector<int32_t>{5, 3, 0, 11, 6, 0}));
  OpResult shape = RunOp("CumSum", 14, {x, MakeTensor<int64_t>({2}, {0, 1})});
  EXPECT_EQ(shape.status.code(), ErrorCode::INVALID_ARGUMENT);
  OpResult range = RunOp("CumSum", 14, {x, MakeTensor<int64_t>({1}, {2})});
  EXPECT_EQ(range.status.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(ReductionTest, LayerNormalizationStatsAndBadScale) {
  IValue x = MakeTensor<float>({2, 2}, {1, 3, -2, 2});
  IValue scale = MakeTensor<float>({2}, {1, 2});
  OpResult r = RunOp("LayerNormalization", 17, {x, scale}, {}, 3);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out(1).shape(), (Shape{2, 1}));
  EXPECT_EQ(r.values<float>(1), (std::vector<float>{2, 0}));
  std::vector<float> inv = r.values<float>(2);
  EXPECT_NEAR(inv[0], 1 / std::sqrt(1 + 1e-5), 1e-6);
  EXPECT_NEAR(inv[1], 1 / std::sqrt(4 + 1e-5), 1e-6);
  std::vector<float> y = r.values<float>(0);
  EXPECT_NEAR(y[0], -1, 1e-4);
  EXPECT_NEAR(y[1], 2, 1e-4);
  OpResult bad = RunOp("LayerNormalization", 17, {x, MakeTensor<float>({3}, {1, 1, 1})});
  EXPECT_EQ(bad.status.code(), ErrorCode::INVALID_ARGUMENT);
  OpResult bad_stash = RunOp("LayerNormalization", 17, {x, scale}, {IntAttr("stash_type", 7)});
  EXPECT_EQ(bad_stash.create_status.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(ReductionTest, LossesRejectBadLabelsAndReduction) {
  IValue scores = MakeTensor<float>({2, 3}, {0, 1, 2, 2, 1, 0});
  OpResult bad_label = RunOp("SoftmaxCrossEntropyLoss", 13, {scores, MakeTensor<int64_t>({2}, {0, 3})});
  EXPECT_EQ(bad_label.status.code(), ErrorCode::INVALID_ARGUMENT);
  OpResult bad_shape = RunOp("NegativeLogLikelihoodLoss", 13, {scores, MakeTensor<int64_t>({3}, {0, 1, 2})});
  EXPECT_EQ(bad_shape.status.code(), ErrorCode::INVALID_ARGUMENT);
  OpResult bad_red = RunOp("NegativeLogLikelihoodLoss", 13, {scores, MakeTensor<int64_t>({2}, {0, 1})},
                           {StringAttr("reduction", "max")});
  EXPECT_EQ(bad_red.create_status.code(), ErrorCode::INVALID_ARGUMENT);
  // All samples ignored with mean reduction: 0 / 0 like the reference.
  OpResult ignored = RunOp("NegativeLogLikelihoodLoss", 13, {scores, MakeTensor<int32_t>({2}, {-1, -1})},
                           {IntAttr("ignore_index", -1)});
  ASSERT_TRUE(ignored.status.ok()) << ignored.status.ToString();
  EXPECT_TRUE(std::isnan(ignored.values<float>()[0]));
  OpResult sum = RunOp("NegativeLogLikelihoodLoss", 13, {scores, MakeTensor<int32_t>({2}, {2, 0})},
                       {StringAttr("reduction", "sum")});
  ASSERT_TRUE(sum.status.ok());
  EXPECT_EQ(sum.values<float>()[0], -4.0f);
}

TEST(ReductionTest, NormalizationsRejectBadShapes) {
  IValue x = MakeTensor<float>({1, 2, 2}, {1, 2, 3, 4});
  IValue two = MakeTensor<float>({2}, {1, 1});
  IValue three = MakeTensor<float>({3}, {1, 1, 1});
  OpResult bn = RunOp("BatchNormalization", 15, {x, two, two, three, two});
  EXPECT_EQ(bn.status.code(), ErrorCode::INVALID_ARGUMENT);
  OpResult in = RunOp("InstanceNormalization", 6, {x, three, three});
  EXPECT_EQ(in.status.code(), ErrorCode::INVALID_ARGUMENT);
  OpResult lrn = RunOp("LRN", 13, {x});
  EXPECT_EQ(lrn.create_status.code(), ErrorCode::INVALID_GRAPH);  // size is required
  OpResult mvn = RunOp("MeanVarianceNormalization", 13, {x});     // default axes [0,2,3] need rank 4
  EXPECT_EQ(mvn.status.code(), ErrorCode::INVALID_ARGUMENT);
  // Training mode (opset 14): batch statistics and running statistics.
  OpResult train =
      RunOp("BatchNormalization", 15, {x, two, MakeTensor<float>({2}, {0, 0}), MakeTensor<float>({2}, {0, 0}), two},
            {IntAttr("training_mode", 1)}, 3);
  ASSERT_TRUE(train.status.ok()) << train.status.ToString();
  std::vector<float> rm = train.values<float>(1), rv = train.values<float>(2);
  EXPECT_NEAR(rm[0], 0.1f * 1.5f, 1e-6);
  EXPECT_NEAR(rm[1], 0.1f * 3.5f, 1e-6);
  EXPECT_NEAR(rv[0], 0.9f + 0.1f * 0.25f, 1e-6);
}

}  // namespace
}  // namespace epctx
