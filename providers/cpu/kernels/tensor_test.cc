// Behaviours of the tensor-manipulation kernels that ONNX's backend suite does not cover: error statuses for bad
// input, strings/bool/float16, the transpose fast paths, aliasing, extreme slice bounds.
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

TEST(TensorKernels, GatherRejectsOutOfRangeIndex) {
  OpResult r = RunOp("Gather", 13, {MakeTensor<float>({3, 2}, {1, 2, 3, 4, 5, 6}), MakeTensor<int64_t>({2}, {0, 3})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(r.status.message().find("n0"), std::string::npos) << r.status.message();
  EXPECT_NE(r.status.message().find("3"), std::string::npos) << r.status.message();
  r = RunOp("Gather", 13, {MakeTensor<float>({3, 2}, {1, 2, 3, 4, 5, 6}), MakeTensor<int64_t>({1}, {-4})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(TensorKernels, GatherInt32NegativeIndicesOnStrings) {
  OpResult r = RunOp("Gather", 13,
                     {MakeTensor<std::string>({3}, {"a", "bb", "ccc"}), MakeTensor<int32_t>({2, 2}, {-1, 0, 1, -3})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{2, 2}));
  EXPECT_EQ(Values<std::string>(r.out()), (std::vector<std::string>{"ccc", "a", "bb", "a"}));
}

TEST(TensorKernels, GatherNDBatchDims) {
  // data [2,2,2], indices [2,1,1] with batch_dims=1 -> output [2,1,2].
  OpResult r = RunOp("GatherND", 13,
                     {MakeTensor<int32_t>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), MakeTensor<int64_t>({2, 1, 1}, {1, 0})},
                     {IntAttr("batch_dims", 1)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(Values<int32_t>(r.out()), (std::vector<int32_t>{2, 3, 4, 5}));
  r = RunOp("GatherND", 13, {MakeTensor<int32_t>({2, 2}, {0, 1, 2, 3}), MakeTensor<int64_t>({1, 2}, {1, 2})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(TensorKernels, ScatterNDRejectsOutOfRangeAndAddsFloat16) {
  std::vector<Float16> data = {Float16(1.f), Float16(2.f), Float16(3.f)};
  OpResult r = RunOp("ScatterND", 16,
                     {MakeTensor<Float16>({3}, data), MakeTensor<int64_t>({2, 1}, {2, 2}),
                      MakeTensor<Float16>({2}, {Float16(0.5f), Float16(0.25f)})},
                     {StringAttr("reduction", "add")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_FLOAT_EQ(float(r.out().data<Float16>()[2]), 3.75f);
  EXPECT_FLOAT_EQ(float(r.out().data<Float16>()[0]), 1.f);
  r = RunOp(
      "ScatterND", 16,
      {MakeTensor<Float16>({3}, data), MakeTensor<int64_t>({1, 1}, {3}), MakeTensor<Float16>({1}, {Float16(0.f)})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
  r = RunOp("ScatterElements", 16,
            {MakeTensor<float>({2}, {1, 2}), MakeTensor<int64_t>({1}, {-3}), MakeTensor<float>({1}, {9})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
  // Reductions need arithmetic: strings are refused, not mangled.
  r = RunOp(
      "ScatterElements", 16,
      {MakeTensor<std::string>({2}, {"a", "b"}), MakeTensor<int64_t>({1}, {0}), MakeTensor<std::string>({1}, {"c"})},
      {StringAttr("reduction", "mul")});
  EXPECT_EQ(r.status.code(), ErrorCode::NOT_IMPLEMENTED);
}

TEST(TensorKernels, TransposeFastPathsMatchNaive) {
  // NCHW -> NHWC and back with odd sizes (partial tiles), and a 2-D transpose.
  const int64_t N = 2, C = 19, H = 5, W = 7;
  std::vector<float> x(N * C * H * W);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  OpResult r = RunOp("Transpose", 13, {MakeTensor<float>({N, C, H, W}, x)}, {IntsAttr("perm", {0, 2, 3, 1})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.out().shape(), (Shape{N, H, W, C}));
  const float* y = r.out().data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          ASSERT_EQ(y[((n * H + h) * W + w) * C + c], x[((n * C + c) * H + h) * W + w]);
  OpResult back = RunOp("Transpose", 13, {r.out()}, {IntsAttr("perm", {0, 3, 1, 2})});
  ASSERT_TRUE(back.status.ok());
  EXPECT_EQ(Values<float>(back.out()), x);
  // Default perm reverses the dims.
  OpResult t2 = RunOp("Transpose", 13, {MakeTensor<std::string>({2, 3}, {"a", "b", "c", "d", "e", "f"})});
  ASSERT_TRUE(t2.status.ok());
  EXPECT_EQ(Values<std::string>(t2.out()), (std::vector<std::string>{"a", "d", "b", "e", "c", "f"}));
  OpResult bad = RunOp("Transpose", 13, {MakeTensor<float>({2, 2}, {1, 2, 3, 4})}, {IntsAttr("perm", {0, 0})});
  EXPECT_EQ(bad.status.code(), ErrorCode::INVALID_GRAPH);
}

TEST(TensorKernels, ReshapeAliasesAndValidates) {
  Tensor x = MakeTensor<float>({2, 3, 4}, std::vector<float>(24, 1.f));
  OpResult r = RunOp("Reshape", 14, {x, MakeTensor<int64_t>({3}, {0, -1, 2})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{2, 6, 2}));
  EXPECT_EQ(r.out().raw_data(), x.raw_data());  // no copy
  r = RunOp("Reshape", 14, {x, MakeTensor<int64_t>({2}, {5, -1})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
  r = RunOp("Reshape", 14, {x, MakeTensor<int64_t>({2}, {-1, -1})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
  // allowzero: 0 is a real zero, so [0, 4] cannot hold 24 elements.
  r = RunOp("Reshape", 14, {x, MakeTensor<int64_t>({2}, {0, 4})}, {IntAttr("allowzero", 1)});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(TensorKernels, SliceExtremeBoundsAndNegativeSteps) {
  const int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  Tensor x = MakeTensor<int32_t>({5}, {0, 1, 2, 3, 4});
  OpResult r = RunOp("Slice", 13,
                     {x, MakeTensor<int64_t>({1}, {kMax}), MakeTensor<int64_t>({1}, {kMin}),
                      MakeTensor<int64_t>({1}, {0}), MakeTensor<int64_t>({1}, {-2})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values<int32_t>(r.out()), (std::vector<int32_t>{4, 2, 0}));
  r = RunOp("Slice", 13,
            {x, MakeTensor<int64_t>({1}, {1}), MakeTensor<int64_t>({1}, {kMax}), MakeTensor<int64_t>({1}, {-1}),
             MakeTensor<int64_t>({1}, {kMax})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values<int32_t>(r.out()), (std::vector<int32_t>{1}));
  r = RunOp("Slice", 13,
            {x, MakeTensor<int64_t>({1}, {0}), MakeTensor<int64_t>({1}, {5}), MakeTensor<int64_t>({1}, {0}),
             MakeTensor<int64_t>({1}, {0})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
  r = RunOp("Slice", 13,
            {x, MakeTensor<int64_t>({1}, {0}), MakeTensor<int64_t>({1}, {5}), MakeTensor<int64_t>({1}, {1})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);  // axis 1 of a 1-D tensor
}

TEST(TensorKernels, ExpandAndTileBoolAndStrings) {
  OpResult r = RunOp("Expand", 13, {MakeTensor<bool>({2, 1}, {true, false}), MakeTensor<int64_t>({3}, {2, 1, 3})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(Values<bool>(r.out()), (std::vector<bool>{1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0}));
  r = RunOp("Expand", 13, {MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}), MakeTensor<int64_t>({1}, {2})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
  r = RunOp("Tile", 13, {MakeTensor<std::string>({2}, {"x", "y"}), MakeTensor<int64_t>({1}, {3})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values<std::string>(r.out()), (std::vector<std::string>{"x", "y", "x", "y", "x", "y"}));
  r = RunOp("Tile", 13, {MakeTensor<float>({2}, {1, 2}), MakeTensor<int64_t>({1}, {-1})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(TensorKernels, PadReflectBeyondOneDimAndErrors) {
  // numpy.pad([1,2,3], (5,4), 'reflect') reflects repeatedly.
  OpResult r = RunOp("Pad", 13, {MakeTensor<int64_t>({3}, {1, 2, 3}), MakeTensor<int64_t>({2}, {5, 4})},
                     {StringAttr("mode", "reflect")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values<int64_t>(r.out()), (std::vector<int64_t>{2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3}));
  // Negative pads crop; a constant value input of the data's type fills.
  r = RunOp("Pad", 13,
            {MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}), MakeTensor<int64_t>({4}, {0, -1, 1, 0}),
             MakeTensor<float>({}, {9.f})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{3, 2}));
  EXPECT_EQ(Values<float>(r.out()), (std::vector<float>{2, 3, 5, 6, 9, 9}));
  r = RunOp("Pad", 13, {MakeTensor<float>({0}, {}), MakeTensor<int64_t>({2}, {1, 1})}, {StringAttr("mode", "edge")});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
  r = RunOp("Pad", 13, {MakeTensor<float>({2}, {1, 2}), MakeTensor<int64_t>({3}, {1, 1, 1})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
  r = RunOp("Pad", 13, {MakeTensor<float>({2}, {1, 2}), MakeTensor<int64_t>({2}, {1, 1})},
            {StringAttr("mode", "wrap")});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_GRAPH);
}

TEST(TensorKernels, ConcatAndSplitValidateShapes) {
  OpResult r = RunOp("Concat", 13,
                     {MakeTensor<float>({2, 2}, {1, 2, 3, 4}), MakeTensor<float>({3, 3}, std::vector<float>(9, 0))},
                     {IntAttr("axis", 1)});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
  r = RunOp("Concat", 13, {MakeTensor<float>({2, 2}, {1, 2, 3, 4}), MakeTensor<int32_t>({2, 1}, {5, 6})},
            {IntAttr("axis", 1)});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);  // mixed types
  r = RunOp("Split", 13, {MakeTensor<float>({5}, {1, 2, 3, 4, 5})}, {}, 2);
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);  // 5 does not split evenly in 2
  r = RunOp("Split", 13, {MakeTensor<float>({5}, {1, 2, 3, 4, 5}), MakeTensor<int64_t>({2}, {2, 2})}, {}, 2);
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);  // sizes do not sum to 5
  r = RunOp("Split", 11, {MakeTensor<float>({5}, {1, 2, 3, 4, 5})}, {IntsAttr("split", {2, 3})}, 2);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values<float>(r.out(1)), (std::vector<float>{3, 4, 5}));
}

TEST(TensorKernels, UniqueHandlesNaNWithoutUndefinedOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  OpResult r = RunOp("Unique", 11, {MakeTensor<float>({5}, {3, nan, 1, 3, nan})}, {}, 4);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.out().NumElements(), 3);
  EXPECT_EQ(r.out().data<float>()[0], 1.f);
  EXPECT_EQ(r.out().data<float>()[1], 3.f);
  EXPECT_TRUE(std::isnan(r.out().data<float>()[2]));
  EXPECT_EQ(Values<int64_t>(r.out(1)), (std::vector<int64_t>{2, 0, 1}));
  EXPECT_EQ(Values<int64_t>(r.out(2)), (std::vector<int64_t>{1, 2, 0, 1, 2}));
  EXPECT_EQ(Values<int64_t>(r.out(3)), (std::vector<int64_t>{1, 2, 2}));
}

TEST(TensorKernels, RangeAndOneHotEdgeCases) {
  OpResult r =
      RunOp("Range", 11, {MakeTensor<int32_t>({}, {10}), MakeTensor<int32_t>({}, {3}), MakeTensor<int32_t>({}, {-3})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values<int32_t>(r.out()), (std::vector<int32_t>{10, 7, 4}));
  r = RunOp("Range", 11, {MakeTensor<int64_t>({}, {0}), MakeTensor<int64_t>({}, {5}), MakeTensor<int64_t>({}, {-1})});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.out().NumElements(), 0);
  r = RunOp("Range", 11, {MakeTensor<float>({}, {0}), MakeTensor<float>({}, {1}), MakeTensor<float>({}, {0})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
  // Out-of-range one-hot indices give an all-off row, not an error.
  r = RunOp(
      "OneHot", 11,
      {MakeTensor<int64_t>({2}, {1, 7}), MakeTensor<int64_t>({}, {3}), MakeTensor<std::string>({2}, {"off", "on"})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values<std::string>(r.out()), (std::vector<std::string>{"off", "on", "off", "off", "off", "off"}));
}

TEST(TensorKernels, SqueezeUnsqueezeAndConstant) {
  OpResult r = RunOp("Squeeze", 13, {MakeTensor<float>({1, 2}, {1, 2}), MakeTensor<int64_t>({1}, {1})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);  // dim 1 has size 2
  r = RunOp("Unsqueeze", 13, {MakeTensor<float>({2}, {1, 2}), MakeTensor<int64_t>({2}, {0, -3})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);  // both mean axis 0
  r = RunOp("Unsqueeze", 11, {MakeTensor<float>({2}, {1, 2})}, {IntsAttr("axes", {-1, 0})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{1, 2, 1}));
  Attribute sparse;
  sparse.name = "sparse_value";
  sparse.type = Attribute::Type::kSparseTensor;
  r = RunOp("Constant", 13, {}, {sparse});
  EXPECT_EQ(r.status.code(), ErrorCode::NOT_IMPLEMENTED);
  r = RunOp("Constant", 13, {}, {IntsAttr("value_ints", {4, 5})});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(Values<int64_t>(r.out()), (std::vector<int64_t>{4, 5}));
}

TEST(TensorKernels, IdentityPassesSequencesThrough) {
  Node node;
  node.name = "id";
  node.op_type = "Identity";
  node.opset = 16;
  node.inputs = {"s"};
  node.outputs = {"t"};
  Graph graph;
  KernelInfo info(node, graph, 1);
  auto kernel = (*CpuKernelRegistry().Find("", "Identity", 16))(info);
  ASSERT_TRUE(kernel.ok());
  IValue seq = IValue::Sequence({MakeTensor<float>({1}, {1.f}), MakeTensor<float>({2}, {2.f, 3.f})}, DataType::kFloat);
  KernelContext ctx(node, {&seq}, 1);
  ASSERT_TRUE((*kernel)->Compute(ctx).ok());
  ASSERT_TRUE(ctx.outputs()[0].is_sequence());
  EXPECT_EQ(ctx.outputs()[0].sequence().size(), 2u);
}

}  // namespace
}  // namespace epctx
