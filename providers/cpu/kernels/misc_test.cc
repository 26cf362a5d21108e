// Behaviours of the misc kernels (misc_*.cc) that ONNX's backend suite does not cover: error statuses for bad
// inputs and attributes, element types other than float, N-D resizing, broadcasting and implicit outputs in
// Einsum, transform lengths that take the Bluestein path, and degenerate sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <string>
#include <vector>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/kernel_test_util.h"

namespace epctx {
namespace {

using namespace ::epctx::testing;  // NOLINT

void ExpectNear(const std::vector<float>& actual, const std::vector<float>& expected, float tol = 1e-5f) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], tol) << "element " << i;
}

// ---------------------------------------------------------------------------------------------------- Resize

TEST(MiscResizeTest, ScalesAndSizesTogetherIsAnError) {
  OpResult r = RunOp("Resize", 13,
                     {MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4}), Tensor(), MakeTensor<float>({4}, {1, 1, 2, 2}),
                      MakeTensor<int64_t>({4}, {1, 1, 4, 4})});
  EXPECT_EQ(r.status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(r.status.message().find("n0"), std::string::npos) << r.status.message();
}

TEST(MiscResizeTest, BadScalesAreErrors) {
  const Tensor x = MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(RunOp("Resize", 13, {x, Tensor(), MakeTensor<float>({3}, {1, 1, 2})}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("Resize", 13, {x, Tensor(), MakeTensor<float>({4}, {1, 1, 0, 2})}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("Resize", 13, {x, Tensor(), MakeTensor<float>({4}, {1, 1, NAN, 2})}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("Resize", 13, {x, Tensor(), Tensor(), MakeTensor<int64_t>({4}, {1, 1, -1, 2})}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  // Neither scales nor sizes.
  EXPECT_EQ(RunOp("Resize", 13, {x}).status.code(), ErrorCode::INVALID_ARGUMENT);
  // Upsample needs scales >= 1.
  EXPECT_EQ(RunOp("Upsample", 9, {x, MakeTensor<float>({4}, {1, 1, 0.5f, 2})}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
}

TEST(MiscResizeTest, BadAttributesFailAtCreation) {
  const Tensor x = MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const Tensor s = MakeTensor<float>({4}, {1, 1, 2, 2});
  EXPECT_EQ(RunOp("Resize", 13, {x, Tensor(), s}, {StringAttr("mode", "area")}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("Resize", 13, {x, Tensor(), s}, {StringAttr("coordinate_transformation_mode", "x")}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("Resize", 13, {x, Tensor(), s}, {StringAttr("nearest_mode", "up")}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("Upsample", 7, {x}).status.code(), ErrorCode::INVALID_GRAPH);  // scales attribute missing
}

TEST(MiscResizeTest, EmptyInputDimensionCannotGrow) {
  const Tensor x = Tensor::Allocate(DataType::kFloat, {1, 1, 0, 2}).value();
  EXPECT_EQ(RunOp("Resize", 13, {x, Tensor(), Tensor(), MakeTensor<int64_t>({4}, {1, 1, 3, 4})}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  OpResult r = RunOp("Resize", 13, {x, Tensor(), MakeTensor<float>({4}, {1, 1, 2, 2})}, {StringAttr("mode", "linear")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{1, 1, 0, 4}));
}

TEST(MiscResizeTest, NearestCopiesStringsAndInt64) {
  OpResult r = RunOp("Resize", 13, {MakeTensor<std::string>({2}, {"a", "b"}), Tensor(), MakeTensor<float>({1}, {2})},
                     {StringAttr("coordinate_transformation_mode", "asymmetric"), StringAttr("nearest_mode", "floor")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values<std::string>(r.out()), (std::vector<std::string>{"a", "a", "b", "b"}));
  OpResult q = RunOp(
      "Resize", 13,
      {MakeTensor<int64_t>({1, 3}, {int64_t{1} << 60, -5, 7}), Tensor(), Tensor(), MakeTensor<int64_t>({2}, {2, 2})});
  ASSERT_TRUE(q.status.ok()) << q.status.ToString();
  // half_pixel, round_prefer_floor: x_out 0 -> 0.25 -> 0; x_out 1 -> 1.75 -> 2.
  EXPECT_EQ(Values<int64_t>(q.out()), (std::vector<int64_t>{int64_t{1} << 60, 7, int64_t{1} << 60, 7}));
}

// Float bilinear over H and W gives ONNX Runtime's floats: per output element the four taps weighted by products of
// the axes' distances, summed left to right with one rounding per operation (the reference below forces each one
// through a volatile). Summing per axis instead (the separable passes) rounds after the first axis and differs in the
// last bit on 267 of these 640 elements; a DynamicQuantizeLinear after the Resize turns that into quantization steps.
TEST(MiscResizeTest, BilinearSumsInOnnxRuntimesOrder) {
  const int64_t h = 7, w = 9, oh = 16, ow = 20;
  std::vector<float> x(static_cast<size_t>(2 * h * w));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.77f) * 3.3f + 0.1f;
  OpResult r = RunOp("Resize", 13,
                     {MakeTensor<float>({1, 2, h, w}, x), Tensor(), Tensor(), MakeTensor<int64_t>({4}, {1, 2, oh, ow})},
                     {StringAttr("mode", "linear")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const std::vector<float> got = Values<float>(r.out());
  auto axis = [](int64_t out, int64_t in, int64_t len_out, int64_t* c1, int64_t* c2, float* d1, float* d2) {
    const float scale = static_cast<float>(len_out) / static_cast<float>(in);
    float c = (static_cast<float>(out) + 0.5f) / scale - 0.5f;  // half_pixel
    c = std::max(0.0f, std::min(c, static_cast<float>(in - 1)));
    *c1 = static_cast<int64_t>(c);
    *c2 = std::min(*c1 + 1, in - 1);
    *d1 = *c1 == *c2 ? 0.5f : std::fabs(c - static_cast<float>(*c1));
    *d2 = *c1 == *c2 ? 0.5f : std::fabs(c - static_cast<float>(*c2));
  };
  size_t k = 0;
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j, ++k) {
        int64_t y1, y2, x1, x2;
        float dy1, dy2, dx1, dx2;
        axis(i, h, oh, &y1, &y2, &dy1, &dy2);
        axis(j, w, ow, &x1, &x2, &dx1, &dx2);
        const float* plane = x.data() + p * h * w;
        volatile float t1 = dx2 * dy2, t2 = dx1 * dy2, t3 = dx2 * dy1, t4 = dx1 * dy1;
        volatile float a = t1 * plane[y1 * w + x1], b = t2 * plane[y1 * w + x2];
        volatile float c = t3 * plane[y2 * w + x1], d = t4 * plane[y2 * w + x2];
        volatile float ab = a + b;
        volatile float abc = ab + c;
        const float want = abc + d;
        EXPECT_EQ(got[k], want) << "plane " << p << " (" << i << ", " << j << ")";
      }
}

TEST(MiscResizeTest, LinearOnUint8TruncatesAndSaturates) {
  OpResult r =
      RunOp("Resize", 13, {MakeTensor<uint8_t>({1, 2}, {0, 255}), Tensor(), Tensor(), MakeTensor<int64_t>({2}, {1, 4})},
            {StringAttr("mode", "linear"), StringAttr("coordinate_transformation_mode", "align_corners")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  // Exact values 0, 85, 170, 255.
  EXPECT_EQ(Values<uint8_t>(r.out()), (std::vector<uint8_t>{0, 85, 170, 255}));
  // Cubic over- and undershoot around a step saturates to [0, 255] instead of wrapping.
  const std::vector<double> in = {0, 0, 255, 255};
  OpResult c =
      RunOp("Resize", 13,
            {MakeTensor<uint8_t>({1, 4}, {0, 0, 255, 255}), Tensor(), Tensor(), MakeTensor<int64_t>({2}, {1, 8})},
            {StringAttr("mode", "cubic")});
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  bool saw_overshoot = false;
  for (int x = 0; x < 8; ++x) {
    // half_pixel with scale 2, Keys kernel a = -0.75, edge-clamped taps.
    const double xo = (x + 0.5) / 2 - 0.5, base = std::ceil(xo) - 1, r = xo - base;
    auto k = [](double d) {
      const double a = -0.75;
      d = std::fabs(d);
      return d <= 1 ? ((a + 2) * d - (a + 3)) * d * d + 1 : ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
    };
    const double w[4] = {k(1 + r), k(r), k(1 - r), k(2 - r)};
    double sum = 0;
    for (int t = 0; t < 4; ++t) sum += w[t] * in[std::min(std::max(static_cast<int>(base) - 1 + t, 0), 3)];
    saw_overshoot = saw_overshoot || sum > 255 || sum < 0;
    const double expected = std::min(255.0, std::max(0.0, std::trunc(sum)));
    EXPECT_NEAR(c.out().data<uint8_t>()[x], expected, 1.0) << "x=" << x << " exact " << sum;
  }
  EXPECT_TRUE(saw_overshoot);
}

TEST(MiscResizeTest, TrilinearMatchesSeparableHandComputation) {
  // 2x2x2 cube, align_corners upsampling to 3x3x3: the centre is the mean of all 8 corners.
  std::vector<float> v = {0, 1, 2, 3, 4, 5, 6, 7};
  OpResult r =
      RunOp("Resize", 13, {MakeTensor<float>({2, 2, 2}, v), Tensor(), Tensor(), MakeTensor<int64_t>({3}, {3, 3, 3})},
            {StringAttr("mode", "linear"), StringAttr("coordinate_transformation_mode", "align_corners")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.out().shape(), (Shape{3, 3, 3}));
  EXPECT_NEAR(r.out().data<float>()[13], 3.5f, 1e-6);
  EXPECT_NEAR(r.out().data<float>()[0], 0.0f, 1e-6);
  EXPECT_NEAR(r.out().data<float>()[26], 7.0f, 1e-6);
  EXPECT_NEAR(r.out().data<float>()[1], 0.5f, 1e-6);  // between v[0] and v[1]
}

TEST(MiscResizeTest, CropAndResizeExtrapolatesOnIntegers) {
  OpResult r =
      RunOp("Resize", 13,
            {MakeTensor<int32_t>({1, 3}, {10, 20, 30}), MakeTensor<float>({4}, {0, -0.5f, 1, 1}), Tensor(),
             MakeTensor<int64_t>({2}, {1, 4})},
            {StringAttr("coordinate_transformation_mode", "tf_crop_and_resize"), FloatAttr("extrapolation_value", -7)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  // x_original = -1 + x: 0 is outside, then 0, 1, 2.
  EXPECT_EQ(Values<int32_t>(r.out()), (std::vector<int32_t>{-7, 10, 20, 30}));
  // A roi of the wrong length is an error.
  EXPECT_EQ(RunOp("Resize", 13,
                  {MakeTensor<int32_t>({1, 3}, {10, 20, 30}), MakeTensor<float>({3}, {0, 0, 1}), Tensor(),
                   MakeTensor<int64_t>({2}, {1, 4})},
                  {StringAttr("coordinate_transformation_mode", "tf_crop_and_resize")})
                .status.code(),
            ErrorCode::INVALID_ARGUMENT);
}

TEST(MiscResizeTest, UpsampleOpset7UsesTheScalesAttribute) {
  OpResult r = RunOp("Upsample", 7, {MakeTensor<float>({1, 2}, {1, 2})}, {FloatsAttr("scales", {2, 2})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values<float>(r.out()), (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2}));
}

// ---------------------------------------------------------------------------------------- GridSample, RoiAlign

TEST(MiscSamplingTest, GridSampleValidatesShapesAndReadsZerosOutside) {
  const Tensor x = MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(RunOp("GridSample", 16, {x, MakeTensor<float>({1, 1, 1, 3}, {0, 0, 0})}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("GridSample", 16, {MakeTensor<float>({1, 4}, {1, 2, 3, 4}), MakeTensor<float>({1, 1, 1, 2}, {0, 0})})
                .status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(
      RunOp("GridSample", 16, {x, MakeTensor<float>({1, 1, 1, 2}, {0, 0})}, {StringAttr("mode", "area")}).status.code(),
      ErrorCode::INVALID_ARGUMENT);
  // Far outside, NaN and infinite grid points read zeros; the centre is the mean with align_corners.
  const float inf = std::numeric_limits<float>::infinity();
  OpResult r = RunOp("GridSample", 16, {x, MakeTensor<float>({1, 1, 4, 2}, {50, 50, NAN, 0, inf, 0, 0, 0})},
                     {IntAttr("align_corners", 1)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(Values<float>(r.out()), {0, 0, 0, 2.5f});
  // Border padding clamps a far point to the corner.
  OpResult b = RunOp("GridSample", 16, {x, MakeTensor<float>({1, 1, 1, 2}, {50, 50})},
                     {StringAttr("padding_mode", "border"), StringAttr("mode", "bicubic")});
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  ExpectNear(Values<float>(b.out()), {4});
}

TEST(MiscSamplingTest, RoiAlignRejectsBadBatchIndicesAndRois) {
  const Tensor x = MakeTensor<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(
      RunOp("RoiAlign", 16, {x, MakeTensor<float>({1, 4}, {0, 0, 1, 1}), MakeTensor<int64_t>({1}, {1})}).status.code(),
      ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("RoiAlign", 16, {x, MakeTensor<float>({1, 4}, {0, 0, NAN, 1}), MakeTensor<int64_t>({1}, {0})})
                .status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(
      RunOp("RoiAlign", 16, {x, MakeTensor<float>({1, 3}, {0, 0, 1}), MakeTensor<int64_t>({1}, {0})}).status.code(),
      ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("RoiAlign", 16, {x, MakeTensor<float>({1, 4}, {0, 0, 1, 1}), MakeTensor<int64_t>({1}, {0})},
                  {IntAttr("output_height", 0)})
                .status.code(),
            ErrorCode::INVALID_ARGUMENT);
  // A huge roi with an adaptive grid would take forever: refused.
  EXPECT_EQ(RunOp("RoiAlign", 16, {x, MakeTensor<float>({1, 4}, {0, 0, 1e9f, 1e9f}), MakeTensor<int64_t>({1}, {0})})
                .status.code(),
            ErrorCode::INVALID_ARGUMENT);
  // The whole 2x2 map, one bin, output_half_pixel, sampling 2x2 at pixel centres: the mean.
  OpResult r = RunOp("RoiAlign", 16, {x, MakeTensor<float>({1, 4}, {0, 0, 1, 1}), MakeTensor<int64_t>({1}, {0})},
                     {StringAttr("coordinate_transformation_mode", "output_half_pixel"), IntAttr("sampling_ratio", 2)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ExpectNear(Values<float>(r.out()), {2.5f});
}

// ------------------------------------------------------------------------------------------- NonMaxSuppression

TEST(MiscDetectionTest, NonMaxSuppressionValidatesInputs) {
  const Tensor boxes = MakeTensor<float>({1, 2, 4}, {0, 0, 1, 1, 0, 0, 1, 1});
  EXPECT_EQ(RunOp("NonMaxSuppression", 11, {boxes, MakeTensor<float>({1, 1, 3}, {0.9f, 0.8f, 0.7f})}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("NonMaxSuppression", 11,
                  {boxes, MakeTensor<float>({1, 1, 2}, {0.9f, 0.8f}), MakeTensor<int64_t>({1}, {5}),
                   MakeTensor<float>({1}, {1.5f})})
                .status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("NonMaxSuppression", 11, {boxes, MakeTensor<float>({1, 1, 2}, {0.9f, 0.8f})},
                  {IntAttr("center_point_box", 2)})
                .status.code(),
            ErrorCode::INVALID_ARGUMENT);
}

TEST(MiscDetectionTest, NonMaxSuppressionDefaultsAndNaNScores) {
  const Tensor boxes = MakeTensor<float>({1, 3, 4}, {0, 0, 1, 1, 0, 0, 1, 1, 5, 5, 6, 6});
  // No max_output_boxes_per_class: nothing is selected.
  OpResult none = RunOp("NonMaxSuppression", 11, {boxes, MakeTensor<float>({1, 1, 3}, {0.9f, 0.8f, 0.7f})});
  ASSERT_TRUE(none.status.ok()) << none.status.ToString();
  EXPECT_EQ(none.out().shape(), (Shape{0, 3}));
  // A NaN score is never selected, so box 1 (identical to box 0) survives; box 2 does not overlap it.
  OpResult r = RunOp("NonMaxSuppression", 11,
                     {boxes, MakeTensor<float>({1, 1, 3}, {NAN, 0.8f, 0.7f}), MakeTensor<int64_t>({1}, {10}),
                      MakeTensor<float>({1}, {0.5f})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values<int64_t>(r.out()), (std::vector<int64_t>{0, 0, 1, 0, 0, 2}));
}

// ----------------------------------------------------------------------------------------------------- Einsum

TEST(MiscEinsumTest, BadEquationsAreErrors) {
  const Tensor a = MakeTensor<float>({2, 2}, {1, 2, 3, 4});
  Attribute eq = StringAttr("equation", "ij,j1->i");
  EXPECT_EQ(RunOp("Einsum", 12, {a, a}, {eq}).status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("Einsum", 12, {a, a}, {StringAttr("equation", "ij->k")}).status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("Einsum", 12, {a}, {StringAttr("equation", "ij,jk")}).status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("Einsum", 12, {a}, {StringAttr("equation", "ijk->i")}).status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("Einsum", 12, {a}).status.code(), ErrorCode::INVALID_GRAPH);
  // Mismatched sizes of one label.
  EXPECT_EQ(
      RunOp("Einsum", 12, {a, MakeTensor<float>({3}, {1, 2, 3})}, {StringAttr("equation", "ij,j->i")}).status.code(),
      ErrorCode::INVALID_ARGUMENT);
  // Repeated label over different sizes.
  EXPECT_EQ(RunOp("Einsum", 12, {MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6})}, {StringAttr("equation", "ii->i")})
                .status.code(),
            ErrorCode::INVALID_ARGUMENT);
}

TEST(MiscEinsumTest, ImplicitOutputSortsUpperCaseFirstAndBroadcastsSizeOne) {
  // "bA" implicit -> "Ab": a transpose.
  OpResult t = RunOp("Einsum", 12, {MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6})}, {StringAttr("equation", "bA")});
  ASSERT_TRUE(t.status.ok()) << t.status.ToString();
  EXPECT_EQ(t.out().shape(), (Shape{3, 2}));
  EXPECT_EQ(Values<float>(t.out()), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  // A size-1 dimension broadcasts against the same label elsewhere (as NumPy does).
  OpResult b = RunOp("Einsum", 12, {MakeTensor<float>({1}, {2}), MakeTensor<float>({3}, {1, 2, 3})},
                     {StringAttr("equation", "i,i->i")});
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  EXPECT_EQ(Values<float>(b.out()), (std::vector<float>{2, 4, 6}));
}

TEST(MiscEinsumTest, IntegerContractionsWrapAndEmptySumsAreZero) {
  OpResult r = RunOp("Einsum", 12, {MakeTensor<int8_t>({2}, {100, 100}), MakeTensor<int8_t>({2}, {2, 1})},
                     {StringAttr("equation", "i,i->")});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().data<int8_t>()[0], static_cast<int8_t>(300 - 256));
  // Contracting over an empty dimension gives zeros.
  OpResult e =
      RunOp("Einsum", 12,
            {Tensor::Allocate(DataType::kFloat, {2, 0}).value(), Tensor::Allocate(DataType::kFloat, {0, 3}).value()},
            {StringAttr("equation", "ij,jk->ik")});
  ASSERT_TRUE(e.status.ok()) << e.status.ToString();
  EXPECT_EQ(Values<float>(e.out()), std::vector<float>(6, 0.0f));
  // Three operands with a diagonal and an ellipsis.
  OpResult d = RunOp("Einsum", 12,
                     {MakeTensor<double>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), MakeTensor<double>({2}, {1, 10}),
                      MakeTensor<double>({2}, {1, 1})},
                     {StringAttr("equation", "...ii,i,j->...")});
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  // batch 0: diag (1,4) . (1,10) = 41, times sum_j 1 = 2 -> 82; batch 1: (5,8) -> 85 * 2 = 170.
  EXPECT_EQ(Values<double>(d.out()), (std::vector<double>{82, 170}));
}

TEST(MiscEinsumTest, OversizedIntermediateIsRefusedNotAllocated) {
  // The third operand broadcasts (1x1), so contracting the first two makes a 70000 x 70000 outer product.
  Tensor a = Tensor::Allocate(DataType::kFloat, {70000}).value();
  Tensor b = Tensor::Allocate(DataType::kFloat, {70000}).value();
  OpResult r = RunOp("Einsum", 12, {a, b, MakeTensor<float>({1, 1}, {1})}, {StringAttr("equation", "a,b,ab->")});
  EXPECT_EQ(r.status.code(), ErrorCode::FAIL) << r.status.ToString();
  EXPECT_NE(r.status.message().find("intermediate"), std::string::npos) << r.status.message();
}

// -------------------------------------------------------------------------------------------------------- Det

TEST(MiscLinalgTest, DetShapesAndValues) {
  EXPECT_EQ(RunOp("Det", 11, {MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6})}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("Det", 11, {MakeTensor<float>({2}, {1, 2})}).status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("Det", 11, {MakeTensor<int32_t>({1, 1}, {1})}).status.code(), ErrorCode::NOT_IMPLEMENTED);
  OpResult empty = RunOp("Det", 11, {Tensor::Allocate(DataType::kFloat, {2, 0, 0}).value()});
  ASSERT_TRUE(empty.status.ok()) << empty.status.ToString();
  EXPECT_EQ(Values<float>(empty.out()), (std::vector<float>{1, 1}));
  // A singular matrix and one needing a row swap (det = -(2*1*1) with pivoting).
  OpResult r = RunOp("Det", 11,
                     {MakeTensor<double>({2, 3, 3}, {1, 2, 3, 2, 4, 6, 0, 1, 1,  //
                                                     0, 1, 0, 2, 0, 0, 0, 0, 1})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values<double>(r.out()), (std::vector<double>{0, -2}));
  OpResult h =
      RunOp("Det", 11, {MakeTensor<Float16>({2, 2}, {Float16(2.0f), Float16(1.0f), Float16(1.0f), Float16(3.0f)})});
  ASSERT_TRUE(h.status.ok()) << h.status.ToString();
  EXPECT_EQ(static_cast<float>(h.out().data<Float16>()[0]), 5.0f);
}

// ----------------------------------------------------------------------------------------------------- Signal

TEST(MiscSignalTest, WindowsValidateAndConvert) {
  EXPECT_EQ(RunOp("HannWindow", 17, {MakeTensor<int64_t>({}, {4})}, {IntAttr("output_datatype", 8)}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("HannWindow", 17, {MakeTensor<int64_t>({}, {-1})}).status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("HannWindow", 17, {MakeTensor<float>({}, {4})}).status.code(), ErrorCode::INVALID_ARGUMENT);
  OpResult r = RunOp("HammingWindow", 17, {MakeTensor<int32_t>({}, {4})},
                     {IntAttr("output_datatype", 11), IntAttr("periodic", 0)});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const std::vector<double> w = Values<double>(r.out());
  ASSERT_EQ(w.size(), 4u);
  EXPECT_NEAR(w[0], 25.0 / 46 - 21.0 / 46, 1e-12);
  EXPECT_NEAR(w[1], 25.0 / 46 - 21.0 / 46 * std::cos(2 * M_PI / 3), 1e-12);
  OpResult e = RunOp("BlackmanWindow", 17, {MakeTensor<int64_t>({}, {0})});
  ASSERT_TRUE(e.status.ok()) << e.status.ToString();
  EXPECT_EQ(e.out().shape(), (Shape{0}));
}

TEST(MiscSignalTest, MelWeightMatrixValidatesAndStaysInBounds) {
  auto run = [](int64_t sr, float hi) {
    return RunOp("MelWeightMatrix", 17,
                 {MakeTensor<int64_t>({}, {4}), MakeTensor<int64_t>({}, {16}), MakeTensor<int64_t>({}, {sr}),
                  MakeTensor<float>({}, {0}), MakeTensor<float>({}, {hi})});
  };
  EXPECT_EQ(run(0, 100).status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(run(8000, NAN).status.code(), ErrorCode::INVALID_ARGUMENT);
  // An upper edge far above Nyquist puts filter points beyond the last bin: they are clipped, not written.
  OpResult r = run(8000, 1e6f);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.out().shape(), (Shape{9, 4}));
  for (float v : Values<float>(r.out())) EXPECT_TRUE(v >= 0 && v <= 1);
}

// Naive DFT of a complex sequence, in double.
std::vector<std::complex<double>> NaiveDft(const std::vector<std::complex<double>>& x, bool inverse) {
  const size_t n = x.size();
  std::vector<std::complex<double>> y(n);
  for (size_t k = 0; k < n; ++k)
    for (size_t j = 0; j < n; ++j)
      y[k] += x[j] * std::polar(1.0, (inverse ? 2 : -2) * M_PI * static_cast<double>((j * k) % n) / n);
  if (inverse)
    for (auto& v : y) v /= static_cast<double>(n);
  return y;
}

TEST(MiscSignalTest, DftMatchesNaiveSumForAnyLength) {
  for (int64_t n : {1, 7, 45, 64, 97}) {
    std::vector<double> data(static_cast<size_t>(2 * n));
    std::vector<std::complex<double>> x(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      data[2 * k] = std::sin(0.3 * k) + 0.1 * k;
      data[2 * k + 1] = std::cos(1.7 * k);
      x[k] = {data[2 * k], data[2 * k + 1]};
    }
    for (bool inverse : {false, true}) {
      OpResult r = RunOp("DFT", 17, {MakeTensor<double>({1, n, 2}, data)}, {IntAttr("inverse", inverse ? 1 : 0)});
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      const auto expected = NaiveDft(x, inverse);
      const double* y = r.out().data<double>();
      for (int64_t k = 0; k < n; ++k) {
        EXPECT_NEAR(y[2 * k], expected[k].real(), 1e-9) << "n=" << n << " k=" << k;
        EXPECT_NEAR(y[2 * k + 1], expected[k].imag(), 1e-9) << "n=" << n << " k=" << k;
      }
    }
  }
}

TEST(MiscSignalTest, DftAndStftRejectBadShapes) {
  const Tensor x = MakeTensor<float>({1, 4, 1}, {1, 2, 3, 4});
  EXPECT_EQ(RunOp("DFT", 17, {x}, {IntAttr("axis", 2)}).status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("DFT", 17, {x}, {IntAttr("axis", 0)}).status.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("DFT", 17, {MakeTensor<float>({1, 2, 3}, {1, 2, 3, 4, 5, 6})}).status.code(),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(RunOp("DFT", 17, {x, MakeTensor<int64_t>({}, {0})}).status.code(), ErrorCode::INVALID_ARGUMENT);
  // dft_length pads with zeros: DFT of [1,2,3,4,0,0,0,0] at bin 0 is 10.
  OpResult p = RunOp("DFT", 17, {x, MakeTensor<int64_t>({}, {8})}, {IntAttr("onesided", 1)});
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  EXPECT_EQ(p.out().shape(), (Shape{1, 5, 2}));
  EXPECT_NEAR(p.out().data<float>()[0], 10.0f, 1e-5);
  const Tensor s = MakeTensor<float>({1, 4, 1}, {1, 2, 3, 4});
  EXPECT_EQ(RunOp("STFT", 17, {s, MakeTensor<int64_t>({}, {1}), Tensor(), MakeTensor<int64_t>({}, {8})}).status.code(),
            ErrorCode::INVALID_ARGUMENT);  // frame longer than the signal
  EXPECT_EQ(
      RunOp("STFT", 17, {s, MakeTensor<int64_t>({}, {1}), MakeTensor<float>({2}, {1, 1}), MakeTensor<int64_t>({}, {3})})
          .status.code(),
      ErrorCode::INVALID_ARGUMENT);  // window and frame_length disagree
  EXPECT_EQ(RunOp("STFT", 17, {s, MakeTensor<int64_t>({}, {0}), MakeTensor<float>({2}, {1, 1})}).status.code(),
            ErrorCode::INVALID_ARGUMENT);  // frame_step 0
  EXPECT_EQ(RunOp("STFT", 17, {s, MakeTensor<int64_t>({}, {1})}).status.code(), ErrorCode::INVALID_ARGUMENT);
  OpResult r = RunOp("STFT", 17, {s, MakeTensor<int64_t>({}, {2}), MakeTensor<float>({2}, {1, 1})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.out().shape(), (Shape{1, 2, 2, 2}));
  ExpectNear(Values<float>(r.out()), {3, 0, -1, 0, 7, 0, -1, 0});
}

}  // namespace
}  // namespace epctx
