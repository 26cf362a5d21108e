// The four 8-bit float element types of ONNX (IR 9, opset 19: https://onnx.ai/onnx/technical/float8.html) as
// 1-byte storage types, with exact conversions to and from float.
//
//   type            ONNX code  exponent/mantissa bits  bias  max finite  infinities  NaN            -0
//   float8e4m3fn    17         4 / 3                   7     448         none        S.1111.111     yes
//   float8e4m3fnuz  18         4 / 3                   8     240         none        1.0000.000     no
//   float8e5m2      19         5 / 2                   15    57344       S.11111.00  S.11111.{01,10,11}  yes
//   float8e5m2fnuz  20         5 / 2                   16    57344       none        1.00000.00     no
//
// float -> float8 (ONNX Cast with `saturate`, QuantizeLinear):
//  - finite values round to nearest, ties to even, on the exact value (subnormals included);
//  - a value whose rounded magnitude exceeds the max finite value (and +-infinity): with saturate, +-max finite;
//    without, NaN for the three types without infinities and +-infinity for float8e5m2, except in two windows
//    where ONNX's reference conversion (and ONNX Runtime 1.30) differ from "round, then overflow", kept as they
//    are: float8e4m3fn maps [480, 496) to +-448, float8e5m2 maps [61440, 65536) to NaN (from 2^16 on: +-inf);
//  - NaN gives NaN (S.1111.111 keeping the sign for e4m3fn, S.11111.11 for e5m2, 0x80 for the fnuz types);
//  - fnuz types have no -0: -0 and negative values that round to zero give +0.
// float8 -> float is exact (every float8 value is a float).
//
// Thread-safe: plain functions of their arguments.
#pragma once

#include <cstdint>

namespace epctx {

enum class Float8Format : uint8_t { kE4M3FN, kE4M3FNUZ, kE5M2, kE5M2FNUZ };

// The code of `f` in `format` (rules above).
uint8_t FloatToFloat8Bits(float f, Float8Format format, bool saturate);
// The value of code `bits` in `format`; NaN for the NaN codes, +-infinity for e5m2's infinities.
float Float8BitsToFloat(uint8_t bits, Float8Format format);
// The largest finite value of `format` (448, 240, 57344, 57344).
float Float8MaxFinite(Float8Format format);

// A float8 storage type: one byte, trivially copyable; arithmetic goes through float.
template <Float8Format F>
struct Float8 {
  static constexpr Float8Format kFormat = F;
  uint8_t bits = 0;

  Float8() = default;
  // Rounds `f` (rules above); saturate defaults to 1, as ONNX's Cast and QuantizeLinear attribute does.
  explicit Float8(float f, bool saturate = true) : bits(FloatToFloat8Bits(f, F, saturate)) {}
  static Float8 FromBits(uint8_t b) {
    Float8 r;
    r.bits = b;
    return r;
  }
  explicit operator float() const { return Float8BitsToFloat(bits, F); }
};

using Float8E4M3FN = Float8<Float8Format::kE4M3FN>;
using Float8E4M3FNUZ = Float8<Float8Format::kE4M3FNUZ>;
using Float8E5M2 = Float8<Float8Format::kE5M2>;
using Float8E5M2FNUZ = Float8<Float8Format::kE5M2FNUZ>;

static_assert(sizeof(Float8E4M3FN) == 1 && sizeof(Float8E5M2FNUZ) == 1, "float8 types are one byte");

template <typename T>
inline constexpr bool kIsFloat8 = false;
template <Float8Format F>
inline constexpr bool kIsFloat8<Float8<F>> = true;

}  // namespace epctx
