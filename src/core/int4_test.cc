// int4/uint4 packing (two values per byte, low nibble first) and the one-value-per-byte memory form.
#include "core/int4.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/data_type.h"

namespace epctx {
namespace {

TEST(Int4, FromBitsSignExtendsAndWrapKeepsTheLowNibble) {
  EXPECT_EQ(Int4::FromBits(0x7).value, 7);
  EXPECT_EQ(Int4::FromBits(0x8).value, -8);
  EXPECT_EQ(Int4::FromBits(0xF).value, -1);
  EXPECT_EQ(Int4::Wrap(-9).value, 7);   // 0x...F7 -> 0x7
  EXPECT_EQ(Int4::Wrap(100).value, 4);  // 0x64 -> 0x4
  EXPECT_EQ(UInt4::Wrap(-1).value, 15);
  EXPECT_EQ(Int4::Saturate(-100).value, -8);
  EXPECT_EQ(UInt4::Saturate(16).value, 15);
  EXPECT_EQ(Int4{-3}.bits(), 0xD);
}

TEST(Int4, OddCountUnpacksAndPacksBack) {
  // [-8, -1, 0, 3, 7]: nibbles 8 F | 0 3 | 7 (high nibble of the last byte unused, here garbage 0xA).
  const std::vector<uint8_t> packed = {0xF8, 0x30, 0xA7};
  std::vector<Int4> v(5);
  ASSERT_TRUE(UnpackInt4(packed.data(), packed.size(), 5, v.data(), "t").ok());
  std::vector<int> got;
  for (Int4 x : v) got.push_back(x.value);
  EXPECT_EQ(got, (std::vector<int>{-8, -1, 0, 3, 7}));
  std::vector<uint8_t> back(PackedInt4Bytes(5), 0xEE);
  PackInt4(v.data(), 5, back.data());
  EXPECT_EQ(back, (std::vector<uint8_t>{0xF8, 0x30, 0x07}));  // unused nibble written as 0

  std::vector<UInt4> u(3);
  ASSERT_TRUE(UnpackInt4(packed.data(), 2, 3, u.data(), "u").ok());
  EXPECT_EQ(u[0].value, 8);
  EXPECT_EQ(u[1].value, 15);
  EXPECT_EQ(u[2].value, 0);
}

TEST(Int4, WrongByteCountIsRefusedBeforeReading) {
  const std::vector<uint8_t> packed = {0x12, 0x34};
  std::vector<Int4> v(5, Int4{1});
  Status s = UnpackInt4(packed.data(), packed.size(), 5, v.data(), "initializer 'w'");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("initializer 'w': 2 bytes of packed 4-bit data for 5 values; expected 3"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(v[0].value, 1);  // untouched
  EXPECT_FALSE(UnpackInt4(packed.data(), 2, 2 * 2 + 1, v.data(), "t").ok());
  EXPECT_FALSE(UnpackInt4(packed.data(), 2, 2, v.data(), "t").ok());  // one byte too many
}

TEST(Int4, DataTypeSizesAndFileSizes) {
  EXPECT_EQ(DataTypeSize(DataType::kInt4), 1u);
  EXPECT_STREQ(DataTypeName(DataType::kUint4), "uint4");
  EXPECT_TRUE(IsValidDataType(21));
  EXPECT_TRUE(IsValidDataType(22));
  EXPECT_FALSE(IsValidDataType(23));
  EXPECT_EQ(FileByteSize(DataType::kInt4, 0), 0u);
  EXPECT_EQ(FileByteSize(DataType::kInt4, 7), 4u);
  EXPECT_EQ(FileByteSize(DataType::kUint4, 8), 4u);
  EXPECT_EQ(FileByteSize(DataType::kFloat, 7), 28u);
}

}  // namespace
}  // namespace epctx
