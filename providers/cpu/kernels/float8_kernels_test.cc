// The CPU EP on ONNX's float8 element types (opset 19+): Cast/CastLike with `saturate`, QuantizeLinear and
// DequantizeLinear with float8 zero points, data movement by bytes, and a clear refusal from arithmetic kernels.
// Expected codes are worked out by hand from the bit layouts (core/float8.h); tests/opset compares with ORT 1.30.
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

template <typename F8>
std::vector<int> Codes(const OpResult& r, size_t i = 0) {
  std::vector<int> out;
  for (const F8& v : r.values<F8>(i)) out.push_back(v.bits);
  return out;
}

template <typename F8>
Tensor F8Tensor(const Shape& shape, const std::vector<uint8_t>& codes) {
  std::vector<F8> v;
  for (uint8_t c : codes) v.push_back(F8::FromBits(c));
  return MakeTensor<F8>(shape, v);
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// float -> float8e4m3fn: 1.5 = 1.100b (0x3C), -2.25 = -1.001b x 2 (0xC1), 300 between 288 (1.001b x 2^8, 0x79) and
// 320 rounds to 288, 1e-3 is 0.51 of the smallest subnormal 2^-9 (0x01); 500, -600 and inf are beyond 464 (the tie
// between 448 and the absent 480): +-448 (0x7E/0xFE) saturating, NaN (0x7F/0xFF) not.
TEST(Float8KernelTest, CastFloatToE4M3FNWithAndWithoutSaturation) {
  const IValue x = MakeTensor<float>({9}, {0.0f, 1.5f, -2.25f, 300.0f, 500.0f, -600.0f, 1e-3f, kNaN, kInf});
  OpResult sat = RunOp("Cast", 19, {x}, {IntAttr("to", 17)});
  ASSERT_TRUE(sat.status.ok()) << sat.status.ToString();
  ASSERT_EQ(sat.out().dtype(), DataType::kFloat8E4M3FN);
  EXPECT_EQ(Codes<Float8E4M3FN>(sat), (std::vector<int>{0x00, 0x3C, 0xC1, 0x79, 0x7E, 0xFE, 0x01, 0x7F, 0x7E}));
  OpResult nosat = RunOp("Cast", 19, {x}, {IntAttr("to", 17), IntAttr("saturate", 0)});
  ASSERT_TRUE(nosat.status.ok()) << nosat.status.ToString();
  EXPECT_EQ(Codes<Float8E4M3FN>(nosat), (std::vector<int>{0x00, 0x3C, 0xC1, 0x79, 0x7F, 0xFF, 0x01, 0x7F, 0x7F}));

  // And back: every code is exact in float.
  OpResult back = RunOp("Cast", 19, {sat.outputs[0]}, {IntAttr("to", 1)});
  ASSERT_TRUE(back.status.ok()) << back.status.ToString();
  const std::vector<float> f = back.values<float>();
  const std::vector<float> want = {0.0f, 1.5f, -2.25f, 288.0f, 448.0f, -448.0f, 0.001953125f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(f[i], want[i]) << i;
  EXPECT_TRUE(std::isnan(f[7]));
  EXPECT_EQ(f[8], 448.0f);
}

// CastLike takes `saturate` too; float8e5m2 overflows to infinity: 60000 is below 61440 (the tie between 57344 and
// 65536) and stays 57344 (0x7B), 70000 gives +inf (0x7C) without saturation and 57344 with it.
TEST(Float8KernelTest, CastLikeToE5M2OverflowsToInfinity) {
  const IValue x = MakeTensor<float>({3}, {60000.0f, 70000.0f, -70000.0f});
  const IValue like = F8Tensor<Float8E5M2>({1}, {0});
  OpResult nosat = RunOp("CastLike", 19, {x, like}, {IntAttr("saturate", 0)});
  ASSERT_TRUE(nosat.status.ok()) << nosat.status.ToString();
  EXPECT_EQ(Codes<Float8E5M2>(nosat), (std::vector<int>{0x7B, 0x7C, 0xFC}));
  OpResult sat = RunOp("CastLike", 19, {x, like});
  ASSERT_TRUE(sat.status.ok()) << sat.status.ToString();
  EXPECT_EQ(Codes<Float8E5M2>(sat), (std::vector<int>{0x7B, 0x7B, 0xFB}));
}

// Through float to and from integers, other float8 types and strings.
TEST(Float8KernelTest, CastBetweenFloat8AndOtherTypes) {
  // e5m2 4.0 (0x44), -2.0 (0xC0), 0.5 (0x38) to int32, to e4m3fnuz (4.0 = 0x50: exponent 2 + bias 8) and to string.
  const IValue x = F8Tensor<Float8E5M2>({3}, {0x44, 0xC0, 0x38});
  OpResult i = RunOp("Cast", 21, {x}, {IntAttr("to", 6)});
  ASSERT_TRUE(i.status.ok()) << i.status.ToString();
  EXPECT_EQ(i.values<int32_t>(), (std::vector<int32_t>{4, -2, 0}));
  OpResult u = RunOp("Cast", 21, {x}, {IntAttr("to", 18)});
  ASSERT_TRUE(u.status.ok()) << u.status.ToString();
  EXPECT_EQ(Codes<Float8E4M3FNUZ>(u), (std::vector<int>{0x50, 0xC8, 0x38}));
  OpResult s = RunOp("Cast", 21, {x}, {IntAttr("to", 8)});
  ASSERT_TRUE(s.status.ok()) << s.status.ToString();
  EXPECT_EQ(s.values<std::string>(), (std::vector<std::string>{"4", "-2", "0.5"}));
  // "0.3" lies between 0.28125 (1.001b x 2^-2) and 0.3125 (1.010b x 2^-2, code 0101 010 = 0x2A), nearer the latter.
  OpResult p = RunOp("Cast", 21, {MakeTensor<std::string>({1}, {"0.3"})}, {IntAttr("to", 17)});
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  EXPECT_EQ(Codes<Float8E4M3FN>(p), (std::vector<int>{0x2A}));
  // int64 to e4m3fnuz: 1000 is beyond 240; without saturation the fnuz NaN 0x80; -0 does not exist (0 -> 0x00).
  OpResult n = RunOp("Cast", 21, {MakeTensor<int64_t>({2}, {1000, 0})}, {IntAttr("to", 18), IntAttr("saturate", 0)});
  ASSERT_TRUE(n.status.ok()) << n.status.ToString();
  EXPECT_EQ(Codes<Float8E4M3FNUZ>(n), (std::vector<int>{0x80, 0x00}));
}

// QuantizeLinear-19 to float8e4m3fn: x / scale rounded like Cast (0.5 = 0x30, 500 saturates to 448 or is NaN); -0
// keeps its sign as in ONNX Runtime. DequantizeLinear reads float8 x: e5m2 1.0, -2.0 and inf times 0.5.
TEST(Float8KernelTest, QuantizeAndDequantizeLinear) {
  const IValue x = MakeTensor<float>({3}, {1.0f, 1000.0f, -0.0f});
  const IValue scale = MakeTensor<float>({}, {2.0f});
  const IValue zp = F8Tensor<Float8E4M3FN>({}, {0x00});
  OpResult sat = RunOp("QuantizeLinear", 19, {x, scale, zp});
  ASSERT_TRUE(sat.status.ok()) << sat.status.ToString();
  EXPECT_EQ(Codes<Float8E4M3FN>(sat), (std::vector<int>{0x30, 0x7E, 0x80}));
  OpResult nosat = RunOp("QuantizeLinear", 19, {x, scale, zp}, {IntAttr("saturate", 0)});
  ASSERT_TRUE(nosat.status.ok()) << nosat.status.ToString();
  EXPECT_EQ(Codes<Float8E4M3FN>(nosat), (std::vector<int>{0x30, 0x7F, 0x80}));
  // output_dtype (opset 21) names the float8 type without a zero point.
  OpResult od = RunOp("QuantizeLinear", 21, {x, scale}, {IntAttr("output_dtype", 20)});
  ASSERT_TRUE(od.status.ok()) << od.status.ToString();
  ASSERT_EQ(od.out().dtype(), DataType::kFloat8E5M2FNUZ);
  EXPECT_EQ(static_cast<float>(od.values<Float8E5M2FNUZ>()[1]), 512.0f);  // 500 between 448 and 512: nearer 512

  OpResult dq = RunOp("DequantizeLinear", 19,
                      {F8Tensor<Float8E5M2>({3}, {0x3C, 0xC0, 0x7C}), MakeTensor<float>({}, {0.5f}),
                       F8Tensor<Float8E5M2>({}, {0x00})});
  ASSERT_TRUE(dq.status.ok()) << dq.status.ToString();
  EXPECT_EQ(dq.values<float>(), (std::vector<float>{0.5f, -1.0f, kInf}));
}

// ONNX Runtime ignores a non-zero float8 zero point in QuantizeLinear and refuses one in DequantizeLinear; epctx
// refuses it in both, naming the node, the type and the value.
TEST(Float8KernelTest, NonZeroFloat8ZeroPointIsRefused) {
  const IValue one = F8Tensor<Float8E4M3FN>({}, {0x38});  // 1.0
  OpResult q = RunOp("QuantizeLinear", 19, {MakeTensor<float>({1}, {1.0f}), MakeTensor<float>({}, {1.0f}), one});
  EXPECT_EQ(q.status.code(), ErrorCode::NOT_IMPLEMENTED);
  EXPECT_NE(q.status.message().find("float8e4m3fn zero point value 1 (index 0) is not supported"), std::string::npos)
      << q.status.ToString();
  OpResult d = RunOp("DequantizeLinear", 19, {F8Tensor<Float8E4M3FN>({1}, {0x38}), MakeTensor<float>({}, {1.0f}), one});
  EXPECT_EQ(d.status.code(), ErrorCode::NOT_IMPLEMENTED);
}

// Data movement copies the bytes; kernels that compute refuse float8 by name.
TEST(Float8KernelTest, DataMovementCopiesBytesAndArithmeticRefuses) {
  const IValue x = F8Tensor<Float8E4M3FN>({2, 3}, {1, 2, 3, 4, 5, 6});
  OpResult t = RunOp("Transpose", 21, {x}, {IntsAttr("perm", {1, 0})});
  ASSERT_TRUE(t.status.ok()) << t.status.ToString();
  EXPECT_EQ(t.out().dtype(), DataType::kFloat8E4M3FN);
  EXPECT_EQ(Codes<Float8E4M3FN>(t), (std::vector<int>{1, 4, 2, 5, 3, 6}));
  OpResult c = RunOp("Concat", 13, {x, x}, {IntAttr("axis", 1)});
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  EXPECT_EQ(Codes<Float8E4M3FN>(c), (std::vector<int>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  OpResult g = RunOp("Gather", 13, {x, MakeTensor<int64_t>({1}, {1})}, {IntAttr("axis", 1)});
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  EXPECT_EQ(Codes<Float8E4M3FN>(g), (std::vector<int>{2, 5}));
  OpResult r = RunOp("Reshape", 21, {x, MakeTensor<int64_t>({1}, {6})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Codes<Float8E4M3FN>(r), (std::vector<int>{1, 2, 3, 4, 5, 6}));

  OpResult add = RunOp("Add", 14, {x, x});
  EXPECT_EQ(add.status.code(), ErrorCode::NOT_IMPLEMENTED);
  EXPECT_NE(add.status.message().find("float8e4m3fn"), std::string::npos) << add.status.ToString();
  OpResult relu = RunOp("Relu", 14, {x});
  EXPECT_EQ(relu.status.code(), ErrorCode::NOT_IMPLEMENTED);
  EXPECT_NE(relu.status.message().find("float8e4m3fn"), std::string::npos) << relu.status.ToString();
}

}  // namespace
}  // namespace epctx
