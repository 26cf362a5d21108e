// The op versions of opsets 18-26 (issue 25) against hand-computed or double-precision values: each test names
// the version whose semantics it checks. tests/opset/ compares the same ops with ONNX Runtime 1.30.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/kernel_test_util.h"

namespace epctx {
namespace {

using namespace ::epctx::testing;  // NOLINT

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

std::vector<float> Iota(int n, float start = 0) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

TEST(Opset18Test, SplitNumOutputsGivesASmallerLastChunk) {
  OpResult r = RunOp("Split", 18, {MakeTensor<float>({7}, Iota(7))}, {IntAttr("num_outputs", 3)}, 3);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(0), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(r.values<float>(1), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(r.values<float>(2), (std::vector<float>{6}));
  OpResult bad = RunOp("Split", 18, {MakeTensor<float>({7}, Iota(7))}, {IntAttr("num_outputs", 2)}, 3);
  EXPECT_EQ(bad.status.code(), ErrorCode::INVALID_GRAPH);
}

TEST(Opset18Test, PadWithAxesAndWrap) {
  IValue x = MakeTensor<float>({2, 3}, Iota(6, 1));
  OpResult r = RunOp("Pad", 18, {x, MakeTensor<int64_t>({2}, {1, 1}), IValue(), MakeTensor<int64_t>({1}, {1})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{2, 5}));
  EXPECT_EQ(r.values<float>(), (std::vector<float>{0, 1, 2, 3, 0, 0, 4, 5, 6, 0}));
  // Pad-19 wrap: axis 1 gets 2 before (3, 1... read cyclically) and 1 after.
  r = RunOp("Pad", 19, {x, MakeTensor<int64_t>({2}, {2, 1}), IValue(), MakeTensor<int64_t>({1}, {-1})},
            {StringAttr("mode", "wrap")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{2, 3, 1, 2, 3, 1, 5, 6, 4, 5, 6, 4}));
  OpResult old = RunOp("Pad", 18, {x, MakeTensor<int64_t>({4}, {0, 1, 0, 1})}, {StringAttr("mode", "wrap")});
  EXPECT_EQ(old.status.code(), ErrorCode::INVALID_GRAPH);
}

TEST(Opset18Test, LpPoolCeilModeAndDilations) {
  std::vector<float> ones(9, 1.0f);
  OpResult r = RunOp("LpPool", 18, {MakeTensor<float>({1, 1, 3, 3}, ones)},
                     {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2}), IntAttr("ceil_mode", 1),
                      IntAttr("p", 2)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{1, 1, 2, 2}));
  ExpectNear(r.values<float>(), {2, std::sqrt(2.0), std::sqrt(2.0), 1}, 1e-6);
  r = RunOp("LpPool", 18, {MakeTensor<float>({1, 1, 3, 3}, Iota(9))},
            {IntsAttr("kernel_shape", {2, 2}), IntsAttr("dilations", {2, 2}), IntAttr("p", 1)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(r.values<float>(), {0 + 2 + 6 + 8}, 1e-6);
}

TEST(Opset19Test, AveragePoolDilations) {
  OpResult r = RunOp("AveragePool", 19, {MakeTensor<float>({1, 1, 4, 4}, Iota(16))},
                     {IntsAttr("kernel_shape", {2, 2}), IntsAttr("dilations", {2, 2})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{1, 1, 2, 2}));
  ExpectNear(r.values<float>(), {5, 6, 9, 10}, 1e-6);
}

TEST(Opset18Test, BitwiseOps) {
  IValue a = MakeTensor<int32_t>({2}, {12, -1}), b = MakeTensor<int32_t>({2}, {10, 7});
  EXPECT_EQ(RunOp("BitwiseAnd", 18, {a, b}).values<int32_t>(), (std::vector<int32_t>{8, 7}));
  EXPECT_EQ(RunOp("BitwiseOr", 18, {a, b}).values<int32_t>(), (std::vector<int32_t>{14, -1}));
  EXPECT_EQ(RunOp("BitwiseXor", 18, {a, b}).values<int32_t>(), (std::vector<int32_t>{6, -8}));
  EXPECT_EQ(RunOp("BitwiseNot", 18, {MakeTensor<uint8_t>({3}, {0, 255, 5})}).values<uint8_t>(),
            (std::vector<uint8_t>{255, 0, 250}));
  // Broadcasting, as the other binary ops.
  EXPECT_EQ(RunOp("BitwiseAnd", 18, {MakeTensor<int64_t>({2, 2}, {1, 2, 3, 4}), MakeTensor<int64_t>({}, {6})})
                .values<int64_t>(),
            (std::vector<int64_t>{0, 2, 2, 4}));
  EXPECT_FALSE(RunOp("BitwiseAnd", 18, {MakeTensor<float>({1}, {1}), MakeTensor<float>({1}, {1})}).status.ok());
}

TEST(Opset18Test, MishGeluSwish) {
  const std::vector<float> x = {-4, -1.5f, -0.25f, 0, 0.3f, 1, 2.5f, 6};
  std::vector<double> mish, gelu, gelu_tanh, swish;
  for (float v : x) {
    const double d = v;
    mish.push_back(d * std::tanh(std::log1p(std::exp(d))));
    gelu.push_back(0.5 * d * (1 + std::erf(d / std::sqrt(2.0))));
    gelu_tanh.push_back(0.5 * d * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (d + 0.044715 * d * d * d))));
    swish.push_back(d / (1 + std::exp(-1.5 * d)));
  }
  IValue t = MakeTensor<float>({8}, x);
  // The float kernels use the vectorizable tanh/erf/sigmoid of fast_math.h (a few ulp).
  ExpectNear(RunOp("Mish", 18, {t}).values<float>(), mish, 1e-5);
  ExpectNear(RunOp("Gelu", 20, {t}).values<float>(), gelu, 1e-5);
  ExpectNear(RunOp("Gelu", 20, {t}, {StringAttr("approximate", "tanh")}).values<float>(), gelu_tanh, 1e-5);
  ExpectNear(RunOp("Swish", 24, {t}, {FloatAttr("alpha", 1.5f)}).values<float>(), swish, 1e-5);
  EXPECT_EQ(RunOp("Gelu", 20, {t}, {StringAttr("approximate", "fast")}).status.code(), ErrorCode::INVALID_GRAPH);
}

TEST(Opset26Test, CumProdAndBitCast) {
  IValue x = MakeTensor<float>({2, 3}, Iota(6, 1));
  OpResult r = RunOp("CumProd", 26, {x, MakeTensor<int64_t>({}, {1})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{1, 2, 6, 4, 20, 120}));
  r = RunOp("CumProd", 26, {x, MakeTensor<int64_t>({}, {1})}, {IntAttr("exclusive", 1), IntAttr("reverse", 1)});
  EXPECT_EQ(r.values<float>(), (std::vector<float>{6, 3, 1, 30, 6, 1}));
  r = RunOp("CumProd", 26, {MakeTensor<int32_t>({3}, {-2, 3, 4}), MakeTensor<int64_t>({}, {0})});
  EXPECT_EQ(r.values<int32_t>(), (std::vector<int32_t>{-2, -6, -24}));

  r = RunOp("BitCast", 26, {MakeTensor<float>({2}, {1.0f, -2.0f})}, {IntAttr("to", 6)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<int32_t>(), (std::vector<int32_t>{0x3f800000, static_cast<int32_t>(0xc0000000u)}));
  EXPECT_EQ(RunOp("BitCast", 26, {MakeTensor<float>({1}, {1})}, {IntAttr("to", 7)}).status.code(),
            ErrorCode::NOT_IMPLEMENTED);  // float -> int64: different sizes
}

TEST(Opset18Test, GroupNormalizationPerGroupAnd21PerChannel) {
  IValue x = MakeTensor<float>({1, 4, 2}, Iota(8));
  // Groups {0..3} and {4..7}: mean 1.5 / 5.5, variance 1.25.
  const double inv = 1.0 / std::sqrt(1.25 + 1e-5);
  std::vector<double> norm;
  for (int i = 0; i < 8; ++i) norm.push_back(((i % 4) - 1.5) * inv);
  // Version 18: scale/bias per group.
  OpResult r = RunOp("GroupNormalization", 18,
                     {x, MakeTensor<float>({2}, {2, 1}), MakeTensor<float>({2}, {0, 1})}, {IntAttr("num_groups", 2)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  std::vector<double> want;
  for (int i = 0; i < 8; ++i) want.push_back(i < 4 ? 2 * norm[i] : norm[i] + 1);
  ExpectNear(r.values<float>(), want, 1e-5);
  // Version 21: per channel (channel c covers elements 2c, 2c+1).
  r = RunOp("GroupNormalization", 21,
            {x, MakeTensor<float>({4}, {1, 2, 3, 4}), MakeTensor<float>({4}, {0, 0, 0, 1})}, {IntAttr("num_groups", 2)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  want.clear();
  const double sc[4] = {1, 2, 3, 4}, bi[4] = {0, 0, 0, 1};
  for (int i = 0; i < 8; ++i) want.push_back(norm[i] * sc[i / 2] + bi[i / 2]);
  ExpectNear(r.values<float>(), want, 1e-5);
  // A per-group scale at 21 is an error, not a silent broadcast.
  EXPECT_EQ(RunOp("GroupNormalization", 21, {x, MakeTensor<float>({2}, {1, 1}), MakeTensor<float>({2}, {0, 0})},
                  {IntAttr("num_groups", 2)})
                .status.code(),
            ErrorCode::INVALID_ARGUMENT);
}

TEST(Opset23Test, RMSNormalization) {
  OpResult r = RunOp("RMSNormalization", 23,
                     {MakeTensor<float>({2, 4}, {1, 2, 3, 4, -1, 0, 0, 1}), MakeTensor<float>({4}, {1, 1, 2, 1})},
                     {FloatAttr("epsilon", 0.0f)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const double a = 1 / std::sqrt(7.5), b = 1 / std::sqrt(0.5);
  ExpectNear(r.values<float>(), {1 * a, 2 * a, 6 * a, 4 * a, -b, 0, 0, b}, 1e-6);
}

TEST(Opset18Test, ReduceNoopKeepsTheElementwisePart) {
  IValue x = MakeTensor<float>({3}, {-2, 0.5f, 4});
  const std::vector<Attribute> noop = {IntAttr("noop_with_empty_axes", 1)};
  ExpectNear(RunOp("ReduceL1", 18, {x}, noop).values<float>(), {2, 0.5, 4}, 1e-6);
  ExpectNear(RunOp("ReduceL2", 18, {x}, noop).values<float>(), {2, 0.5, 4}, 1e-6);
  ExpectNear(RunOp("ReduceSumSquare", 18, {x}, noop).values<float>(), {4, 0.25, 16}, 1e-6);
  ExpectNear(RunOp("ReduceMean", 18, {x}, noop).values<float>(), {-2, 0.5, 4}, 1e-6);
  ExpectNear(RunOp("ReduceLogSum", 18, {MakeTensor<float>({2}, {1, 4})}, noop).values<float>(), {0, std::log(4.0)},
             1e-6);
}

TEST(Opset20Test, ReduceMaxMinOfBool) {
  IValue x = MakeTensor<bool>({2, 3}, {true, false, false, true, true, true});
  OpResult r = RunOp("ReduceMax", 20, {x, MakeTensor<int64_t>({1}, {1})}, {IntAttr("keepdims", 0)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<bool>(), (std::vector<bool>{true, true}));
  r = RunOp("ReduceMin", 20, {x, MakeTensor<int64_t>({1}, {1})}, {IntAttr("keepdims", 0)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<bool>(), (std::vector<bool>{false, true}));
}

TEST(Opset20Test, StringOps) {
  OpResult r = RunOp("StringConcat", 20, {MakeTensor<std::string>({2, 1}, {"ab", ""}),
                                          MakeTensor<std::string>({2}, {"1", "22"})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<std::string>(), (std::vector<std::string>{"ab1", "ab22", "1", "22"}));

  IValue x = MakeTensor<std::string>({3}, {"a,b,,c", "", ",x"});
  r = RunOp("StringSplit", 20, {x}, {StringAttr("delimiter", ",")}, 2);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out(0).shape(), (Shape{3, 4}));
  EXPECT_EQ(r.values<std::string>(0),
            (std::vector<std::string>{"a", "b", "", "c", "", "", "", "", "", "x", "", ""}));
  EXPECT_EQ(r.values<int64_t>(1), (std::vector<int64_t>{4, 0, 2}));  // an empty string has no substrings
  r = RunOp("StringSplit", 20, {x}, {StringAttr("delimiter", ","), IntAttr("maxsplit", 1)}, 2);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<std::string>(0), (std::vector<std::string>{"a", "b,,c", "", "", "", "x"}));
  r = RunOp("StringSplit", 20, {MakeTensor<std::string>({2}, {"  hi   there ", ""})}, {}, 2);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<std::string>(0), (std::vector<std::string>{"hi", "there", "", ""}));
  EXPECT_EQ(r.values<int64_t>(1), (std::vector<int64_t>{2, 0}));

  r = RunOp("RegexFullMatch", 20, {MakeTensor<std::string>({3}, {"apple", "pineapple", "a"})},
            {StringAttr("pattern", "a.*e")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(RunOp("RegexFullMatch", 20, {MakeTensor<std::string>({1}, {"a"})}, {StringAttr("pattern", "(")})
                .status.code(),
            ErrorCode::NOT_IMPLEMENTED);
}

TEST(Opset18Test, CenterCropPad) {
  OpResult r = RunOp("CenterCropPad", 18, {MakeTensor<float>({3}, {1, 2, 3}), MakeTensor<int64_t>({1}, {6})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{0, 1, 2, 3, 0, 0}));
  r = RunOp("CenterCropPad", 18, {MakeTensor<float>({2, 4}, Iota(8, 1)), MakeTensor<int64_t>({2}, {1, 2})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{2, 3}));
  r = RunOp("CenterCropPad", 18, {MakeTensor<float>({2, 4}, Iota(8, 1)), MakeTensor<int64_t>({1}, {3})},
            {IntsAttr("axes", {0})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0}));
}

TEST(Opset18Test, Col2ImSumsOverlappingBlocks) {
  // 2x2 blocks over a 3x3 image, stride 1: 4 blocks; all ones count how many blocks cover each pixel.
  OpResult r = RunOp("Col2Im", 18, {MakeTensor<float>({1, 4, 4}, std::vector<float>(16, 1.0f)),
                                    MakeTensor<int64_t>({2}, {3, 3}), MakeTensor<int64_t>({2}, {2, 2})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(r.values<float>(), (std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
  // Stride 2 over a 4x4 image: blocks do not overlap, the image is the blocks laid out.
  std::vector<float> cols(16);
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 4; ++l) cols[k * 4 + l] = static_cast<float>(10 * l + k);
  r = RunOp("Col2Im", 18, {MakeTensor<float>({1, 4, 4}, cols), MakeTensor<int64_t>({2}, {4, 4}),
                           MakeTensor<int64_t>({2}, {2, 2})},
            {IntsAttr("strides", {2, 2})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{0, 1, 10, 11, 2, 3, 12, 13, 20, 21, 30, 31, 22, 23, 32, 33}));
}

TEST(Opset20Test, AffineGrid) {
  IValue theta = MakeTensor<float>({1, 2, 3}, {1, 0, 0, 0, 1, 0});
  IValue size = MakeTensor<int64_t>({4}, {1, 1, 2, 2});
  OpResult r = RunOp("AffineGrid", 20, {theta, size});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{1, 2, 2, 2}));
  ExpectNear(r.values<float>(), {-0.5, -0.5, 0.5, -0.5, -0.5, 0.5, 0.5, 0.5}, 1e-6);
  r = RunOp("AffineGrid", 20, {MakeTensor<float>({1, 2, 3}, {2, 0, 1, 0, 1, -1}), size}, {IntAttr("align_corners", 1)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(r.values<float>(), {-1, -2, 3, -2, -1, 0, 3, 0}, 1e-6);
}

TEST(Opset24Test, TensorScatterLinearAndCircular) {
  IValue cache = MakeTensor<float>({1, 1, 4, 1}, {0, 0, 0, 0});
  IValue upd = MakeTensor<float>({1, 1, 2, 1}, {7, 8});
  OpResult r = RunOp("TensorScatter", 24, {cache, upd, MakeTensor<int64_t>({1}, {1})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{0, 7, 8, 0}));
  r = RunOp("TensorScatter", 24, {cache, upd, MakeTensor<int64_t>({1}, {3})}, {StringAttr("mode", "circular")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{8, 0, 0, 7}));
  EXPECT_EQ(RunOp("TensorScatter", 24, {cache, upd, MakeTensor<int64_t>({1}, {3})}).status.code(),
            ErrorCode::INVALID_ARGUMENT);  // linear mode past the end
}

TEST(Opset21Test, BlockedQuantization) {
  // x (2, 4), axis 1, block 2: scale (2, 2).
  IValue xq = MakeTensor<int8_t>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  IValue scale = MakeTensor<float>({2, 2}, {1, 2, 3, 4});
  OpResult r = RunOp("DequantizeLinear", 21, {xq, scale}, {IntAttr("axis", 1), IntAttr("block_size", 2)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{1, 2, 6, 8, 15, 18, 28, 32}));
  r = RunOp("QuantizeLinear", 21,
            {MakeTensor<float>({2, 4}, {1, 2, 6, 8, 15, 18, 28, 32}), scale, MakeTensor<int8_t>({2, 2}, {0, 1, 0, -1})},
            {IntAttr("axis", 1), IntAttr("block_size", 2)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<int8_t>(), (std::vector<int8_t>{1, 2, 4, 5, 5, 6, 6, 7}));
  // An uneven last block: 3 rows, block 2 along axis 0 -> 2 scale rows.
  r = RunOp("DequantizeLinear", 21, {MakeTensor<uint8_t>({3, 1}, {10, 20, 30}), MakeTensor<float>({2, 1}, {0.5f, 2})},
            {IntAttr("axis", 0), IntAttr("block_size", 2)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{5, 10, 60}));
  EXPECT_EQ(RunOp("DequantizeLinear", 21, {xq, MakeTensor<float>({2, 3}, {1, 1, 1, 1, 1, 1})},
                  {IntAttr("axis", 1), IntAttr("block_size", 2)})
                .status.code(),
            ErrorCode::INVALID_ARGUMENT);
}

TEST(Opset20Test, DftAxisInput) {
  IValue x = MakeTensor<float>({1, 4, 1}, {1, 2, 3, 4});
  const std::vector<double> want = {10, 0, -2, 2, -2, 0, -2, -2};
  OpResult r = RunOp("DFT", 20, {x});  // default axis -2
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(r.values<float>(), want, 1e-5);
  r = RunOp("DFT", 20, {x, IValue(), MakeTensor<int64_t>({}, {1})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(r.values<float>(), want, 1e-5);
  // Axis 0 (allowed from 20): x (4, 1, 1) transforms along its first dim.
  r = RunOp("DFT", 20, {MakeTensor<float>({4, 1, 1}, {1, 2, 3, 4}), IValue(), MakeTensor<int64_t>({}, {0})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(r.values<float>(), want, 1e-5);
}

TEST(Opset20Test, GridSampleModeNames) {
  IValue x = MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  IValue grid = MakeTensor<float>({1, 1, 1, 2}, {0, 0});
  OpResult r = RunOp("GridSample", 20, {x, grid}, {StringAttr("mode", "linear")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(r.values<float>(), {2.5}, 1e-6);
  EXPECT_TRUE(RunOp("GridSample", 20, {x, grid}).status.ok());  // default "linear"
  EXPECT_EQ(RunOp("GridSample", 20, {x, grid}, {StringAttr("mode", "bilinear")}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("GridSample", 16, {x, grid}, {StringAttr("mode", "linear")}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
}

// Volumetric X (1, 2, 2, 2, 2): channel 0 holds v = 4 d + 2 h + w, channel 1 holds 100 + v. Trilinear sampling
// reproduces a linear function exactly, so a point inside reads 4 sz + 2 sy + sx (plus 100 on channel 1), where
// (sx, sy, sz) are the unnormalized coordinates of the grid point (x, y, z).
std::vector<float> Volume222() {
  std::vector<float> v = Iota(8);
  for (int i = 0; i < 8; ++i) v.push_back(100.0f + static_cast<float>(i));
  return v;
}

TEST(Opset20Test, GridSampleVolumetricLinear) {
  const IValue x = MakeTensor<float>({1, 2, 2, 2, 2}, Volume222());
  // align_corners = 1: s = (g + 1) / 2, so (0, 0, 0) is the centre (3.5), (-1, 1, 0.5) is (0, 1, 0.75) -> 5 and
  // (1, -1, -1) is the corner w = 1 -> 1.
  OpResult r = RunOp("GridSample", 20,
                     {x, MakeTensor<float>({1, 1, 1, 3, 3}, {0, 0, 0, -1, 1, 0.5f, 1, -1, -1})},
                     {IntAttr("align_corners", 1)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{1, 2, 1, 1, 3}));
  ExpectNear(r.values<float>(), {3.5, 5, 1, 103.5, 105, 101}, 1e-6);
  // align_corners = 0, zeros padding: s = g + 0.5. (0.25, -0.25, 0) -> (0.75, 0.25, 0.5) -> 3.25 is inside;
  // (1, 1, 1) -> (1.5, 1.5, 1.5) keeps one of eight taps, voxel 7 with weight 1/8; (-1.5, 0, 0) -> sx = -1 puts
  // every tap with weight outside.
  r = RunOp("GridSample", 22, {x, MakeTensor<float>({1, 3, 1, 1, 3}, {0.25f, -0.25f, 0, 1, 1, 1, -1.5f, 0, 0})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{1, 2, 3, 1, 1}));
  ExpectNear(r.values<float>(), {3.25, 0.875, 0, 103.25, 13.375, 0}, 1e-6);
  // Reflection with align_corners = 1 folds s = 1.5 and s = -0.5 back to 0.5: (2, -1, -1) -> (0.5, 0, 0) -> 0.5;
  // (-2, 1, 1) -> (0.5, 1, 1) -> 6.5.
  r = RunOp("GridSample", 20, {x, MakeTensor<float>({1, 1, 1, 2, 3}, {2, -1, -1, -2, 1, 1})},
            {IntAttr("align_corners", 1), StringAttr("padding_mode", "reflection")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(r.values<float>(), {0.5, 6.5, 100.5, 106.5}, 1e-6);
  // The same sampling in double.
  std::vector<double> xd;
  for (float f : Volume222()) xd.push_back(f);
  r = RunOp("GridSample", 20, {MakeTensor<double>({1, 2, 2, 2, 2}, xd),
                               MakeTensor<double>({1, 1, 1, 1, 3}, {-1, 1, 0.5})},
            {IntAttr("align_corners", 1)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<double>(), (std::vector<double>{5, 105}));
}

TEST(Opset20Test, GridSampleVolumetricNearest) {
  const IValue x = MakeTensor<float>({1, 2, 2, 2, 2}, Volume222());
  // align_corners = 0, s = g + 0.5. (-0.5, 0.5, -0.5) -> (0, 1, 0) -> 2. (0, 0, 0) -> (0.5, 0.5, 0.5): halfway on
  // every axis, rounds to the even index 0 -> 0 (rounding half up would read 7). Zeros padding: (5, 0, 0) reads 0.
  OpResult r = RunOp("GridSample", 20,
                     {x, MakeTensor<float>({1, 1, 1, 3, 3}, {-0.5f, 0.5f, -0.5f, 0, 0, 0, 5, 0, 0})},
                     {StringAttr("mode", "nearest")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{2, 0, 0, 102, 100, 0}));
  // Border padding clamps each axis on its own: (5, -5, 0.2) -> (1, 0, 0.7 -> 1) -> 4 + 1 = 5.
  r = RunOp("GridSample", 22, {x, MakeTensor<float>({1, 1, 1, 1, 3}, {5, -5, 0.2f})},
            {StringAttr("mode", "nearest"), StringAttr("padding_mode", "border")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{5, 105}));
}

TEST(Opset20Test, GridSampleVolumetricRejectsBadShapesAndCubic) {
  const IValue x = MakeTensor<float>({1, 2, 2, 2, 2}, Volume222());
  auto expect_error = [](const OpResult& r, ErrorCode code, const std::string& needle) {
    EXPECT_EQ(r.status.code(), code) << r.status.ToString();
    EXPECT_NE(r.status.message().find(needle), std::string::npos) << r.status.message();
    EXPECT_NE(r.status.message().find("GridSample"), std::string::npos) << r.status.message();
  };
  // grid of rank 4 for 5-D X, grid points of 2 coordinates, another batch size.
  const char* want = "grid must have shape (N,D_out,H_out,W_out,3)";
  expect_error(RunOp("GridSample", 20, {x, MakeTensor<float>({1, 1, 1, 3}, {0, 0, 0})}),
               ErrorCode::INVALID_ARGUMENT, want);
  expect_error(RunOp("GridSample", 20, {x, MakeTensor<float>({1, 1, 1, 1, 2}, {0, 0})}),
               ErrorCode::INVALID_ARGUMENT, want);
  expect_error(RunOp("GridSample", 20, {x, MakeTensor<float>({2, 1, 1, 1, 3}, {0, 0, 0, 0, 0, 0})}),
               ErrorCode::INVALID_ARGUMENT, want);
  // 4-D X with a volumetric grid.
  expect_error(RunOp("GridSample", 20, {MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4}),
                                        MakeTensor<float>({1, 1, 1, 1, 3}, {0, 0, 0})}),
               ErrorCode::INVALID_ARGUMENT, "grid must have shape (N,H_out,W_out,2)");
  // Tricubic is not implemented (ORT 1.30 refuses it too).
  expect_error(RunOp("GridSample", 20, {x, MakeTensor<float>({1, 1, 1, 1, 3}, {0, 0, 0})},
                     {StringAttr("mode", "cubic")}),
               ErrorCode::NOT_IMPLEMENTED, "'cubic'");
  // GridSample-16 is 4-D only; GridSample-20 allows X of rank 3 (1 spatial dim), not implemented here.
  expect_error(RunOp("GridSample", 16, {x, MakeTensor<float>({1, 1, 1, 1, 3}, {0, 0, 0})}),
               ErrorCode::INVALID_ARGUMENT, "4-D");
  expect_error(RunOp("GridSample", 20, {MakeTensor<float>({1, 1, 2}, {1, 2}), MakeTensor<float>({1, 1, 1}, {0})}),
               ErrorCode::NOT_IMPLEMENTED, "rank 3");
  expect_error(RunOp("GridSample", 20, {MakeTensor<float>({1, 2}, {1, 2}), MakeTensor<float>({1, 1, 1}, {0})}),
               ErrorCode::INVALID_ARGUMENT, "rank 3 or more");
}

TEST(Opset23Test, RotaryEmbedding) {
  // One head of size 4, position 1: angles cos = (0, 1), sin = (1, 0) rotate pairs (x0, x2) and (x1, x3).
  IValue cos = MakeTensor<float>({2, 2}, {1, 1, 0, 1});
  IValue sin = MakeTensor<float>({2, 2}, {0, 0, 1, 0});
  OpResult r = RunOp("RotaryEmbedding", 23,
                     {MakeTensor<float>({1, 1, 1, 4}, {1, 2, 3, 4}), cos, sin, MakeTensor<int64_t>({1, 1}, {1})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{-3, 2, 1, 4}));
  // Interleaved pairs (x0, x1), (x2, x3); 3-D input with num_heads.
  r = RunOp("RotaryEmbedding", 23, {MakeTensor<float>({1, 1, 4}, {1, 2, 3, 4}), cos, sin, MakeTensor<int64_t>({1, 1}, {1})},
            {IntAttr("interleaved", 1), IntAttr("num_heads", 1)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{-2, 1, 3, 4}));
}

TEST(Opset23Test, AttentionSoftmaxMaskAndGroupedHeads) {
  // One query [1, 0] against keys [1, 0], [0, 1]; values 10, 20; scale 1/sqrt(2).
  IValue q = MakeTensor<float>({1, 1, 1, 2}, {1, 0});
  IValue k = MakeTensor<float>({1, 1, 2, 2}, {1, 0, 0, 1});
  IValue v = MakeTensor<float>({1, 1, 2, 1}, {10, 20});
  OpResult r = RunOp("Attention", 23, {q, k, v});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const double e = std::exp(1 / std::sqrt(2.0));
  ExpectNear(r.values<float>(), {(10 * e + 20) / (e + 1)}, 1e-5);
  // A bool mask hiding the first key.
  r = RunOp("Attention", 23, {q, k, v, MakeTensor<bool>({1, 2}, {false, true})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(r.values<float>(), {20}, 1e-5);
  // Two query heads share the single kv head; a causal query at position 0 sees key 0 only.
  r = RunOp("Attention", 23, {MakeTensor<float>({1, 2, 1, 2}, {1, 0, 0, 1}), k, v}, {IntAttr("is_causal", 1)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(r.values<float>(), {10, 10}, 1e-5);
  // past_key/past_value are prepended and returned.
  r = RunOp("Attention", 23,
            {q, MakeTensor<float>({1, 1, 1, 2}, {0, 1}), MakeTensor<float>({1, 1, 1, 1}, {20}), IValue(),
             MakeTensor<float>({1, 1, 1, 2}, {1, 0}), MakeTensor<float>({1, 1, 1, 1}, {10})},
            {}, 3);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(r.values<float>(0), {(10 * e + 20) / (e + 1)}, 1e-5);
  EXPECT_EQ(r.values<float>(1), (std::vector<float>{1, 0, 0, 1}));
  EXPECT_EQ(r.values<float>(2), (std::vector<float>{10, 20}));
}

TEST(Opset18Test, ResizeAxesPolicyAntialiasAndSymmetricHalfPixel) {
  // axes: scales for axis 3 only.
  OpResult r = RunOp("Resize", 18, {MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4}), IValue(), MakeTensor<float>({1}, {2})},
                     {IntsAttr("axes", {3})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{1, 1, 2, 4}));
  EXPECT_EQ(r.values<float>(), (std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4}));
  // not_smaller: one scale max(5/4, 5/6) = 1.25 for every axis; 6 * 1.25 = 7.5 rounds to 8.
  r = RunOp("Resize", 18, {MakeTensor<float>({1, 1, 4, 6}, Iota(24)), IValue(), IValue(),
                           MakeTensor<int64_t>({4}, {1, 1, 5, 5})},
            {StringAttr("keep_aspect_ratio_policy", "not_smaller")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{1, 1, 5, 8}));
  // Antialiased linear downscale by 2 of [0, 1, 2, 3] (ONNX's reference): triangle of half-width 2 around
  // x = 0.5 and 2.5, taps at offsets -1..2 weighted 1/8, 3/8, 3/8, 1/8, clamped to the edge.
  r = RunOp("Resize", 18, {MakeTensor<float>({1, 4}, {0, 1, 2, 3}), IValue(), MakeTensor<float>({2}, {1, 0.5f})},
            {StringAttr("mode", "linear"), IntAttr("antialias", 1)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(r.values<float>(), {0.625, 2.375}, 1e-6);
  // Resize-19 half_pixel_symmetric; before 19 it is refused.
  r = RunOp("Resize", 19, {MakeTensor<float>({1, 2}, {0, 1}), IValue(), MakeTensor<float>({2}, {1, 2})},
            {StringAttr("mode", "linear"), StringAttr("coordinate_transformation_mode", "half_pixel_symmetric")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  // Integral output width: adjustment 1, offset 0 -> half_pixel: x = (j + 0.5) / 2 - 0.5, clamped at the edges.
  ExpectNear(r.values<float>(), {0, 0.25, 0.75, 1}, 1e-6);
  EXPECT_FALSE(RunOp("Resize", 18, {MakeTensor<float>({1, 2}, {0, 1}), IValue(), MakeTensor<float>({2}, {1, 2})},
                     {StringAttr("coordinate_transformation_mode", "half_pixel_symmetric")})
                   .status.ok());
}

TEST(OpVersionTest, UnimplementedVersionsAreRefusedByName) {
  OpResult r = RunOp("ImageDecoder", 20, {MakeTensor<uint8_t>({1}, {0})});
  EXPECT_EQ(r.status.code(), ErrorCode::NOT_IMPLEMENTED);
  EXPECT_NE(r.status.message().find("ImageDecoder-20"), std::string::npos) << r.status.message();
  EXPECT_NE(r.status.message().find("n0"), std::string::npos) << r.status.message();
  r = RunOp("ImageDecoder", 25, {MakeTensor<uint8_t>({1}, {0})});  // opset 25 still resolves to ImageDecoder-20
  EXPECT_NE(r.status.message().find("ImageDecoder-20"), std::string::npos) << r.status.message();
  EXPECT_EQ(OnnxOpVersionsSince18("Pad"), (std::vector<int>{18, 19, 21, 23, 24, 25}));
  EXPECT_TRUE(OnnxOpVersionsSince18("Relu").empty());
}

TEST(Opset19Test, DeformConvWithZeroOffsetsIsAConvolution) {
  // Zero offsets and a full mask: a plain 2x2 convolution of a 3x3 image.
  IValue x = MakeTensor<float>({1, 1, 3, 3}, Iota(9));
  IValue w = MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  OpResult r = RunOp("DeformConv", 19, {x, w, MakeTensor<float>({1, 8, 2, 2}, std::vector<float>(32, 0.0f))});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  // (0,0): 0*1 + 1*2 + 3*3 + 4*4 = 27; the others shift by 10 per column step and 30 per row step.
  EXPECT_EQ(r.values<float>(), (std::vector<float>{27, 37, 57, 67}));
  // Offset dx = 0.5 for every tap samples halfway to the right neighbour (zero beyond the image).
  std::vector<float> off(32, 0.0f);
  for (int t = 0; t < 4; ++t)
    for (int p = 0; p < 4; ++p) off[(2 * t + 1) * 4 + p] = 0.5f;
  r = RunOp("DeformConv", 19, {x, w, MakeTensor<float>({1, 8, 2, 2}, off)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  // Position (0,0): taps sample x at (0,0.5)=0.5, (0,1.5)=1.5, (1,0.5)=3.5, (1,1.5)=4.5.
  EXPECT_NEAR(r.values<float>()[0], 0.5 * 1 + 1.5 * 2 + 3.5 * 3 + 4.5 * 4, 1e-5);
  // Position (0,1): taps at columns 1.5 and 2.5 (2.5 is half outside: 0.5 * x[., 2]).
  EXPECT_NEAR(r.values<float>()[1], 1.5 * 1 + 0.5 * 2 * 2 + 4.5 * 3 + 0.5 * 5 * 4, 1e-5);
}

TEST(Opset22Test, LpNormalization) {
  OpResult r = RunOp("LpNormalization", 22, {MakeTensor<float>({2, 2}, {3, 4, 0, 0})}, {IntAttr("p", 2)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(r.values<float>(), {0.6, 0.8, 0, 0}, 1e-6);  // a zero norm gives zeros
  r = RunOp("LpNormalization", 22, {MakeTensor<float>({2, 2}, {1, -3, 1, 1})}, {IntAttr("p", 1), IntAttr("axis", 0)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(r.values<float>(), {0.5, -0.75, 0.5, 0.25}, 1e-6);
}

TEST(Opset22Test, MaxRoiPool) {
  OpResult r = RunOp("MaxRoiPool", 22, {MakeTensor<float>({1, 1, 4, 4}, Iota(16)),
                                        MakeTensor<float>({1, 5}, {0, 0, 0, 3, 3})},
                     {IntsAttr("pooled_shape", {2, 2})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.values<float>(), (std::vector<float>{5, 7, 13, 15}));
}

}  // namespace
}  // namespace epctx
