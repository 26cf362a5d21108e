// ir/float16's two conversions (HalfToFloat for float16 constants, RoundToFloat16 for kRoundFloat16's scalar path)
// against the runtime's src/core/float16.h and, where the CPU has it, F16C: every float16 bit pattern, and floats
// around every float16 value (each one, the half-way points to its neighbours and one ulp either side of them).
#include "providers/aotcpu/ir/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/float16.h"

namespace epctx {
namespace aotcpu {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(AotCpuFloat16Convert, HalfToFloatIsExactForEveryBitPattern) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float want = HalfBitsToFloat(static_cast<uint16_t>(h));
    const float got = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      EXPECT_EQ(Bits(got), Bits(want)) << h;
    }
  }
}

TEST(AotCpuFloat16Convert, RoundToFloat16RoundsToNearestEvenLikeTheRuntime) {
  std::vector<float> probes = {0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, -65520.0f, 1e-8f, 2.98e-8f, 2.99e-8f,
                               std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::max(), std::numeric_limits<float>::min()};
  for (uint32_t h = 0; h < 0x7c00u; ++h) {  // every finite non-negative float16 value and the points between them
    const float v = HalfBitsToFloat(static_cast<uint16_t>(h));
    const float next = HalfBitsToFloat(static_cast<uint16_t>(h + 1));
    const float mid = v + (next - v) / 2;  // exact: a float16 step is far above float's precision
    for (float p : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      probes.push_back(p);
      probes.push_back(-p);
    }
  }
  size_t wrong = 0;
  for (float p : probes) {
    const float want = HalfBitsToFloat(FloatToHalfBits(p));
    if (Bits(RoundToFloat16(p)) != Bits(want) && ++wrong <= 10)
      ADD_FAILURE() << "RoundToFloat16(" << p << ") = " << RoundToFloat16(p) << ", want " << want;
  }
  EXPECT_EQ(wrong, 0u) << "of " << probes.size();
  EXPECT_TRUE(std::isnan(RoundToFloat16(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
