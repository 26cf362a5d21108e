#include "core/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace epctx {
namespace {

TEST(Float16, RoundTripsEveryHalf) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    float f = HalfBitsToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToHalfBits(f), b) << "bits " << b;
  }
}

TEST(Float16, RoundsToNearestEven) {
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7c00);  // rounds up to inf
  EXPECT_EQ(FloatToHalfBits(1.0f + 1.0f / 2048), 0x3c00);  // halfway, even stays
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);  // halfway to 0, even
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(BFloat16BitsToFloat(FloatToBFloat16Bits(3.0f)), 3.0f);
}

}  // namespace
}  // namespace epctx
