// The CPU EP on ONNX's int4/uint4 element types (opset 21; one value per byte in memory, core/int4.h): Cast,
// QuantizeLinear, DequantizeLinear, data movement, and a clear refusal from kernels that compute on values.
// Expected values are worked out by hand; tests/opset compares the cases ORT 1.30 runs with ORT.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/kernel_test_util.h"

namespace epctx {
namespace {

using namespace ::epctx::testing;  // NOLINT

template <typename T>
std::vector<int> Values(const OpResult& r, size_t i = 0) {
  std::vector<int> out;
  for (const T& v : r.values<T>(i)) out.push_back(static_cast<int32_t>(v));
  return out;
}

IValue I4(const Shape& shape, const std::vector<int>& values) {
  std::vector<Int4> v;
  for (int x : values) v.push_back(Int4::Wrap(x));
  return MakeTensor<Int4>(shape, v);
}

// float -> int4 rounds half away from zero and wraps (as ONNX Runtime 1.30); uint4 likewise; back exactly.
TEST(Int4KernelTest, CastFromFloatRoundsAwayAndWraps) {
  const IValue x = MakeTensor<float>({9}, {-100.0f, -9.0f, -8.5f, -2.5f, -0.5f, 0.5f, 2.5f, 7.5f, 15.5f});
  OpResult q = RunOp("Cast", 21, {x}, {IntAttr("to", 22)});
  ASSERT_TRUE(q.status.ok()) << q.status.ToString();
  ASSERT_EQ(q.out().dtype(), DataType::kInt4);
  // -100 = ...1001 1100 -> 0xC = -4; -9 -> 0x7; -8.5 -> -9 -> 7; 7.5 -> 8 -> -8; 15.5 -> 16 -> 0.
  EXPECT_EQ(Values<Int4>(q), (std::vector<int>{-4, 7, 7, -3, -1, 1, 3, -8, 0}));
  OpResult u = RunOp("Cast", 21, {x}, {IntAttr("to", 21)});
  ASSERT_TRUE(u.status.ok()) << u.status.ToString();
  EXPECT_EQ(Values<UInt4>(u), (std::vector<int>{12, 7, 7, 13, 15, 1, 3, 8, 0}));
  OpResult back = RunOp("Cast", 21, {q.outputs[0]}, {IntAttr("to", 1)});
  ASSERT_TRUE(back.status.ok()) << back.status.ToString();
  EXPECT_EQ(back.values<float>(), (std::vector<float>{-4, 7, 7, -3, -1, 1, 3, -8, 0}));
}

// int4 -> wider integers sign-extends (uint4 zero-extends); integers -> int4 keep the low 4 bits.
TEST(Int4KernelTest, CastBetweenIntegersExtendsAndWraps) {
  OpResult i8 = RunOp("Cast", 21, {I4({3}, {-8, -1, 7})}, {IntAttr("to", 3)});
  ASSERT_TRUE(i8.status.ok()) << i8.status.ToString();
  EXPECT_EQ(i8.values<int8_t>(), (std::vector<int8_t>{-8, -1, 7}));
  OpResult u8 = RunOp("Cast", 21, {I4({3}, {-8, -1, 7})}, {IntAttr("to", 2)});
  ASSERT_TRUE(u8.status.ok()) << u8.status.ToString();
  EXPECT_EQ(u8.values<uint8_t>(), (std::vector<uint8_t>{248, 255, 7}));
  OpResult w = RunOp("Cast", 21, {MakeTensor<int32_t>({3}, {17, -17, 8})}, {IntAttr("to", 22)});
  ASSERT_TRUE(w.status.ok()) << w.status.ToString();
  EXPECT_EQ(Values<Int4>(w), (std::vector<int>{1, -1, -8}));
  OpResult s = RunOp("Cast", 21, {MakeTensor<std::string>({1}, {"3"})}, {IntAttr("to", 22)});
  EXPECT_EQ(s.status.code(), ErrorCode::NOT_IMPLEMENTED) << s.status.ToString();
}

// QuantizeLinear saturates to [-8, 7] / [0, 15] and rounds half to even; DequantizeLinear blocked with an odd count.
TEST(Int4KernelTest, QuantizeSaturatesAndDequantizeBlocks) {
  const IValue x = MakeTensor<float>({7}, {-20.0f, -2.5f, -1.5f, 0.5f, 1.5f, 6.5f, 20.0f});
  OpResult q = RunOp("QuantizeLinear", 21, {x, MakeTensor<float>({}, {1.0f}), I4({}, {0})});
  ASSERT_TRUE(q.status.ok()) << q.status.ToString();
  EXPECT_EQ(Values<Int4>(q), (std::vector<int>{-8, -2, -2, 0, 2, 6, 7}));
  OpResult u = RunOp("QuantizeLinear", 21, {x, MakeTensor<float>({}, {1.0f})}, {IntAttr("output_dtype", 21)});
  ASSERT_TRUE(u.status.ok()) << u.status.ToString();
  ASSERT_EQ(u.out().dtype(), DataType::kUint4);
  EXPECT_EQ(Values<UInt4>(u), (std::vector<int>{0, 0, 0, 0, 2, 6, 15}));

  // x [1, 5] int4 with blocks of 2 along axis 1: scales [1, 3], zero points [1, 3].
  const IValue xq = I4({1, 5}, {-8, 7, 3, -1, 5});
  OpResult d = RunOp("DequantizeLinear", 21,
                     {xq, MakeTensor<float>({1, 3}, {0.5f, 2.0f, -1.0f}), I4({1, 3}, {1, -1, 7})},
                     {IntAttr("axis", 1), IntAttr("block_size", 2)});
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.values<float>(), (std::vector<float>{-4.5f, 3.0f, 8.0f, 0.0f, 2.0f}));
}

// Data movement copies values; kernels that compute refuse int4 by name.
TEST(Int4KernelTest, DataMovementCopiesAndArithmeticRefuses) {
  const IValue x = I4({2, 3}, {-8, -1, 0, 3, 7, 5});
  OpResult t = RunOp("Transpose", 21, {x}, {IntsAttr("perm", {1, 0})});
  ASSERT_TRUE(t.status.ok()) << t.status.ToString();
  EXPECT_EQ(Values<Int4>(t), (std::vector<int>{-8, 3, -1, 7, 0, 5}));
  OpResult r = RunOp("Reshape", 21, {x, MakeTensor<int64_t>({1}, {6})});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(Values<Int4>(r), (std::vector<int>{-8, -1, 0, 3, 7, 5}));
  OpResult add = RunOp("Add", 14, {x, x});
  EXPECT_EQ(add.status.code(), ErrorCode::NOT_IMPLEMENTED);
  EXPECT_NE(add.status.message().find("int4"), std::string::npos) << add.status.ToString();
  OpResult relu = RunOp("Relu", 14, {x});
  EXPECT_EQ(relu.status.code(), ErrorCode::NOT_IMPLEMENTED);
  EXPECT_NE(relu.status.message().find("int4"), std::string::npos) << relu.status.ToString();
}

}  // namespace
}  // namespace epctx
