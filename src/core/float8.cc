#include "core/float8.h"

#include <array>
#include <algorithm>
#include <cmath>
#include <limits>

namespace epctx {

namespace {

struct Layout {
  int mant_bits;
  int bias;
  uint8_t max_code;  // magnitude code of the largest finite value
  bool fnuz;         // NaN is 0x80; no -0, no infinity
  bool has_inf;      // e5m2: S.11111.00 is infinity
};

constexpr Layout kLayouts[] = {
    {3, 7, 0x7E, false, false},   // e4m3fn: 0x7F is NaN
    {3, 8, 0x7F, true, false},    // e4m3fnuz
    {2, 15, 0x7B, false, true},   // e5m2: 0x7C infinity, 0x7D..0x7F NaN
    {2, 16, 0x7F, true, false},   // e5m2fnuz
};

const Layout& LayoutOf(Float8Format f) { return kLayouts[static_cast<int>(f)]; }

float Decode(uint8_t b, const Layout& l) {
  const bool neg = (b & 0x80) != 0;
  const int mag = b & 0x7F;
  if (l.fnuz && b == 0x80) return std::numeric_limits<float>::quiet_NaN();
  if (mag > l.max_code) {
    if (l.has_inf && mag == l.max_code + 1)
      return neg ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    return std::copysign(std::numeric_limits<float>::quiet_NaN(), neg ? -1.0f : 1.0f);
  }
  const int exp_field = mag >> l.mant_bits;
  const int mant = mag & ((1 << l.mant_bits) - 1);
  // A subnormal (exp_field 0) has the quantum of exp_field 1 and no implicit bit.
  const int significand = exp_field == 0 ? mant : (1 << l.mant_bits) + mant;
  const int exponent = (exp_field == 0 ? 1 : exp_field) - l.bias - l.mant_bits;
  const float v = std::ldexp(static_cast<float>(significand), exponent);
  return neg ? -v : v;
}

using Table = std::array<float, 256>;

const Table& TableOf(Float8Format f) {
  static const std::array<Table, 4> tables = [] {
    std::array<Table, 4> t{};
    for (int k = 0; k < 4; ++k)
      for (int b = 0; b < 256; ++b) t[k][b] = Decode(static_cast<uint8_t>(b), kLayouts[k]);
    return t;
  }();
  return tables[static_cast<int>(f)];
}

}  // namespace

float Float8BitsToFloat(uint8_t bits, Float8Format format) { return TableOf(format)[bits]; }

float Float8MaxFinite(Float8Format format) { return Decode(LayoutOf(format).max_code, LayoutOf(format)); }

uint8_t FloatToFloat8Bits(float f, Float8Format format, bool saturate) {
  const Layout& l = LayoutOf(format);
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  if (std::isnan(f)) return l.fnuz ? 0x80 : static_cast<uint8_t>(sign | 0x7F);
  // What a magnitude beyond the largest finite value becomes.
  auto overflow = [&]() -> uint8_t {
    if (saturate) return static_cast<uint8_t>(sign | l.max_code);
    if (l.has_inf) return static_cast<uint8_t>(sign | (l.max_code + 1));
    return l.fnuz ? 0x80 : static_cast<uint8_t>(sign | 0x7F);
  };
  if (std::isinf(f)) return overflow();
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0) return l.fnuz ? 0x00 : sign;
  // Quantum of a's binade, floored at the subnormal quantum; a / quantum is exact in double (a is a float), and
  // nearbyint rounds it to nearest even (the default rounding mode). The code is then (biased exponent << mant)
  // plus the fraction, where a significand that rounded up to the next power of two carries into the exponent.
  int e2 = 0;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1): floor(log2 a) = e2 - 1
  const int min_exp = 1 - l.bias;
  const int e = std::max(e2 - 1, min_exp);
  if (e + l.bias > 64) return overflow();  // far beyond every format's range; keeps the shifts below small
  const double n = std::nearbyint(std::ldexp(a, l.mant_bits - e));
  const int64_t code = (static_cast<int64_t>(e + l.bias) << l.mant_bits) + static_cast<int64_t>(n) -
                       (int64_t{1} << l.mant_bits);
  if (code > l.max_code) {
    // Without saturation, two windows follow ONNX's reference conversion (onnx.helper.float32_to_float8e4m3/e5m2,
    // which ONNX Runtime 1.30 implements the same way) rather than "round, then overflow": e4m3fn keeps the
    // truncated mantissa 1.111b x 2^8 (the NaN pattern) at 1.110b (448) and rounds only on the next bit, so
    // [480, 496) gives 448; e5m2 gives NaN, not infinity, to values below 2^16 that round past 57344.
    if (!saturate && format == Float8Format::kE4M3FN && a >= 480.0 && a < 496.0)
      return static_cast<uint8_t>(sign | l.max_code);
    if (!saturate && format == Float8Format::kE5M2 && a < 65536.0) return static_cast<uint8_t>(sign | 0x7F);
    return overflow();
  }
  if (code == 0 && l.fnuz) return 0x00;  // no -0
  return static_cast<uint8_t>(sign | code);
}

}  // namespace epctx
