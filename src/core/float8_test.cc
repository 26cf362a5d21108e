#include "core/float8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace epctx {
namespace {

constexpr Float8Format kFormats[] = {Float8Format::kE4M3FN, Float8Format::kE4M3FNUZ, Float8Format::kE5M2,
                                     Float8Format::kE5M2FNUZ};
const char* Name(Float8Format f) {
  switch (f) {
    case Float8Format::kE4M3FN: return "e4m3fn";
    case Float8Format::kE4M3FNUZ: return "e4m3fnuz";
    case Float8Format::kE5M2: return "e5m2";
    case Float8Format::kE5M2FNUZ: return "e5m2fnuz";
  }
  return "?";
}
// Largest finite magnitude code per format (the spec's table).
uint8_t MaxCode(Float8Format f) {
  switch (f) {
    case Float8Format::kE4M3FN: return 0x7E;
    case Float8Format::kE5M2: return 0x7B;
    default: return 0x7F;
  }
}
bool Fnuz(Float8Format f) { return f == Float8Format::kE4M3FNUZ || f == Float8Format::kE5M2FNUZ; }
float Inf() { return std::numeric_limits<float>::infinity(); }

// Values read off the spec's bit layouts: 1.0, the smallest subnormal, the smallest normal and the largest finite.
TEST(Float8, DecodesTheSpecsLandmarks) {
  struct Row {
    Float8Format f;
    uint8_t one, min_sub, min_normal;
    float min_sub_v, min_normal_v, max_v;
  } rows[] = {
      {Float8Format::kE4M3FN, 0x38, 0x01, 0x08, std::ldexp(1.0f, -9), std::ldexp(1.0f, -6), 448.0f},
      {Float8Format::kE4M3FNUZ, 0x40, 0x01, 0x08, std::ldexp(1.0f, -10), std::ldexp(1.0f, -7), 240.0f},
      {Float8Format::kE5M2, 0x3C, 0x01, 0x04, std::ldexp(1.0f, -16), std::ldexp(1.0f, -14), 57344.0f},
      {Float8Format::kE5M2FNUZ, 0x40, 0x01, 0x04, std::ldexp(1.0f, -17), std::ldexp(1.0f, -15), 57344.0f},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(Name(r.f));
    EXPECT_EQ(Float8BitsToFloat(r.one, r.f), 1.0f);
    EXPECT_EQ(Float8BitsToFloat(r.one | 0x80, r.f), -1.0f);
    EXPECT_EQ(Float8BitsToFloat(r.min_sub, r.f), r.min_sub_v);
    EXPECT_EQ(Float8BitsToFloat(r.min_normal, r.f), r.min_normal_v);
    EXPECT_EQ(Float8BitsToFloat(MaxCode(r.f), r.f), r.max_v);
    EXPECT_EQ(Float8MaxFinite(r.f), r.max_v);
    EXPECT_EQ(Float8BitsToFloat(0x00, r.f), 0.0f);
    EXPECT_FALSE(std::signbit(Float8BitsToFloat(0x00, r.f)));
  }
  // Special codes.
  EXPECT_TRUE(std::isnan(Float8BitsToFloat(0x7F, Float8Format::kE4M3FN)));
  EXPECT_TRUE(std::isnan(Float8BitsToFloat(0xFF, Float8Format::kE4M3FN)));
  EXPECT_TRUE(std::signbit(Float8BitsToFloat(0x80, Float8Format::kE4M3FN)));  // -0
  EXPECT_EQ(Float8BitsToFloat(0xFF, Float8Format::kE4M3FNUZ), -240.0f);
  EXPECT_TRUE(std::isnan(Float8BitsToFloat(0x80, Float8Format::kE4M3FNUZ)));
  EXPECT_EQ(Float8BitsToFloat(0x7C, Float8Format::kE5M2), Inf());
  EXPECT_EQ(Float8BitsToFloat(0xFC, Float8Format::kE5M2), -Inf());
  for (uint8_t c : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) EXPECT_TRUE(std::isnan(Float8BitsToFloat(c, Float8Format::kE5M2)));
  EXPECT_TRUE(std::signbit(Float8BitsToFloat(0x80, Float8Format::kE5M2)));
  EXPECT_EQ(Float8BitsToFloat(0xFF, Float8Format::kE5M2FNUZ), -57344.0f);
  EXPECT_TRUE(std::isnan(Float8BitsToFloat(0x80, Float8Format::kE5M2FNUZ)));
}

// Every code: NaN codes encode back to a NaN code, every other value to its own code (both saturate modes for finite
// values; infinities without saturation). Positive finite values increase with the code, negatives mirror them.
TEST(Float8, EveryCodeRoundTrips) {
  for (Float8Format f : kFormats) {
    SCOPED_TRACE(Name(f));
    int nans = 0;
    for (int c = 0; c < 256; ++c) {
      const uint8_t code = static_cast<uint8_t>(c);
      const float v = Float8BitsToFloat(code, f);
      if (std::isnan(v)) {
        ++nans;
        EXPECT_TRUE(std::isnan(Float8BitsToFloat(FloatToFloat8Bits(v, f, true), f))) << c;
        continue;
      }
      if (std::isinf(v)) {
        EXPECT_EQ(FloatToFloat8Bits(v, f, false), code) << c;
        continue;
      }
      EXPECT_EQ(FloatToFloat8Bits(v, f, true), code) << c << " = " << v;
      EXPECT_EQ(FloatToFloat8Bits(v, f, false), code) << c << " = " << v;
      if (c >= 1 && c <= MaxCode(f)) {
        EXPECT_GT(v, Float8BitsToFloat(static_cast<uint8_t>(c - 1), f)) << c;
        EXPECT_EQ(Float8BitsToFloat(static_cast<uint8_t>(c | 0x80), f), -v) << c;
      }
    }
    // fn: 2 NaNs (S.1111.111); fnuz: 1 (0x80); e5m2: 6 (S.11111.{01,10,11}).
    EXPECT_EQ(nans, f == Float8Format::kE5M2 ? 6 : Fnuz(f) ? 1 : 2);
  }
}

// Round to nearest, ties to even, between every pair of neighbouring finite values (subnormals, the subnormal/normal
// boundary and binade boundaries included), for both signs.
TEST(Float8, RoundsToNearestEven) {
  for (Float8Format f : kFormats) {
    SCOPED_TRACE(Name(f));
    for (int c = 0; c < MaxCode(f); ++c) {
      const float lo = Float8BitsToFloat(static_cast<uint8_t>(c), f);
      const float hi = Float8BitsToFloat(static_cast<uint8_t>(c + 1), f);
      const float mid = (lo + hi) / 2;  // exact: float has 20 more mantissa bits
      const int even = (c % 2 == 0) ? c : c + 1;
      for (bool sat : {true, false}) {
        EXPECT_EQ(FloatToFloat8Bits(mid, f, sat), even) << "between codes " << c << " and " << c + 1;
        EXPECT_EQ(FloatToFloat8Bits(std::nextafter(mid, Inf()), f, sat), c + 1) << c;
        EXPECT_EQ(FloatToFloat8Bits(std::nextafter(mid, 0.0f), f, sat), c) << c;
        // Negative: the mirror, except that fnuz has no -0 (a negative value rounding to zero is +0).
        const int neg_even = (even == 0 && Fnuz(f)) ? 0 : (even | 0x80);
        EXPECT_EQ(FloatToFloat8Bits(-mid, f, sat), neg_even) << c;
        EXPECT_EQ(FloatToFloat8Bits(-std::nextafter(mid, Inf()), f, sat), (c + 1) | 0x80) << c;
      }
    }
  }
}

// The spec's saturation table: out-of-range finite values and infinities clamp to +-max with saturate; without it,
// float8e5m2 gives +-inf and the others NaN. A value still rounding to max (up to the tie with the next, absent,
// value, ties going to even) is max in both modes. Two windows follow ONNX's reference conversion, as ONNX Runtime
// 1.30 does (checked against it): e4m3fn [480, 496) -> 448 and e5m2 [61440, 65536) -> NaN without saturation.
TEST(Float8, SaturatesOrOverflowsPerTheSpec) {
  constexpr int kNaN = -1;  // any NaN code
  struct Row {
    Float8Format f;
    float x;
    int sat, nosat;  // codes of +x (-x mirrors them; a fnuz NaN is 0x80 for both signs)
  } rows[] = {
      // e4m3fn: max 448 = 1.110b x 2^8 (0x7E, even), the absent next value 480: the tie 464 goes to 448.
      {Float8Format::kE4M3FN, 463.0f, 0x7E, 0x7E},
      {Float8Format::kE4M3FN, 464.0f, 0x7E, 0x7E},
      {Float8Format::kE4M3FN, 465.0f, 0x7E, kNaN},
      {Float8Format::kE4M3FN, 479.0f, 0x7E, kNaN},
      {Float8Format::kE4M3FN, 480.0f, 0x7E, 0x7E},  // the reference's window
      {Float8Format::kE4M3FN, 495.0f, 0x7E, 0x7E},
      {Float8Format::kE4M3FN, 496.0f, 0x7E, kNaN},
      {Float8Format::kE4M3FN, 1e6f, 0x7E, kNaN},
      {Float8Format::kE4M3FN, 3.0e38f, 0x7E, kNaN},
      {Float8Format::kE4M3FN, std::numeric_limits<float>::infinity(), 0x7E, kNaN},
      // e4m3fnuz: max 240 = 1.111b x 2^7 (0x7F, odd): the tie 248 goes to the absent 256.
      {Float8Format::kE4M3FNUZ, 247.0f, 0x7F, 0x7F},
      {Float8Format::kE4M3FNUZ, 248.0f, 0x7F, kNaN},
      {Float8Format::kE4M3FNUZ, 1e6f, 0x7F, kNaN},
      {Float8Format::kE4M3FNUZ, std::numeric_limits<float>::infinity(), 0x7F, kNaN},
      // e5m2: max 57344 = 1.11b x 2^15 (0x7B, odd): the tie 61440 goes up; NaN below 2^16 (the reference's
      // window), infinity (0x7C) from 2^16 on.
      {Float8Format::kE5M2, 61439.0f, 0x7B, 0x7B},
      {Float8Format::kE5M2, 61440.0f, 0x7B, kNaN},
      {Float8Format::kE5M2, 65535.0f, 0x7B, kNaN},
      {Float8Format::kE5M2, 65536.0f, 0x7B, 0x7C},
      {Float8Format::kE5M2, 3.0e38f, 0x7B, 0x7C},
      {Float8Format::kE5M2, std::numeric_limits<float>::infinity(), 0x7B, 0x7C},
      // e5m2fnuz: the same max, no infinity.
      {Float8Format::kE5M2FNUZ, 61439.0f, 0x7F, 0x7F},
      {Float8Format::kE5M2FNUZ, 61440.0f, 0x7F, kNaN},
      {Float8Format::kE5M2FNUZ, 1e6f, 0x7F, kNaN},
      {Float8Format::kE5M2FNUZ, std::numeric_limits<float>::infinity(), 0x7F, kNaN},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(Name(r.f)) + " " + std::to_string(r.x));
    for (float sign : {1.0f, -1.0f}) {
      const uint8_t s = sign < 0 ? 0x80 : 0x00;
      EXPECT_EQ(FloatToFloat8Bits(sign * r.x, r.f, true), s | r.sat) << sign;
      const uint8_t got = FloatToFloat8Bits(sign * r.x, r.f, false);
      if (r.nosat == kNaN) {
        EXPECT_TRUE(std::isnan(Float8BitsToFloat(got, r.f))) << sign << ": code " << int(got);
        if (Fnuz(r.f)) EXPECT_EQ(got, 0x80);
      } else {
        EXPECT_EQ(got, s | r.nosat) << sign;
      }
    }
  }
}

TEST(Float8, ZerosAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Float8Format f : kFormats) {
    SCOPED_TRACE(Name(f));
    EXPECT_EQ(FloatToFloat8Bits(0.0f, f, true), 0x00);
    EXPECT_EQ(FloatToFloat8Bits(-0.0f, f, true), Fnuz(f) ? 0x00 : 0x80);
    EXPECT_EQ(FloatToFloat8Bits(1e-30f, f, false), 0x00);
    EXPECT_EQ(FloatToFloat8Bits(-1e-30f, f, false), Fnuz(f) ? 0x00 : 0x80);
    EXPECT_EQ(FloatToFloat8Bits(std::numeric_limits<float>::denorm_min(), f, true), 0x00);
    for (bool sat : {true, false}) {
      EXPECT_TRUE(std::isnan(Float8BitsToFloat(FloatToFloat8Bits(nan, f, sat), f)));
      EXPECT_TRUE(std::isnan(Float8BitsToFloat(FloatToFloat8Bits(-nan, f, sat), f)));
    }
  }
  EXPECT_EQ(FloatToFloat8Bits(std::numeric_limits<float>::quiet_NaN(), Float8Format::kE4M3FNUZ, true), 0x80);
  EXPECT_EQ(FloatToFloat8Bits(std::numeric_limits<float>::quiet_NaN(), Float8Format::kE5M2FNUZ, false), 0x80);
}

TEST(Float8, StorageTypeConvertsThroughFloat) {
  EXPECT_EQ(Float8E4M3FN(0.3f).bits, FloatToFloat8Bits(0.3f, Float8Format::kE4M3FN, true));
  EXPECT_EQ(static_cast<float>(Float8E5M2(1.5f)), 1.5f);
  EXPECT_EQ(Float8E4M3FNUZ(1000.0f).bits, 0x7F);        // saturates by default
  EXPECT_EQ(Float8E4M3FNUZ(1000.0f, false).bits, 0x80);  // NaN
  EXPECT_EQ(Float8E5M2FNUZ::FromBits(0x40).bits, 0x40);
  EXPECT_EQ(static_cast<float>(Float8E5M2FNUZ::FromBits(0x40)), 1.0f);
}

}  // namespace
}  // namespace epctx
