// ONNX's 4-bit integer types (IR 10, opset 21): int4 (-8..7) and uint4 (0..15).
//
// Files (TensorProto raw_data, int32_data, external data) pack two values per byte, the first in the low nibble; an
// odd count leaves the last byte's high nibble unused (written 0, ignored on read). In memory the runtime keeps ONE
// VALUE PER BYTE (Int4/UInt4 below, sizeof 1): every kernel, copy and size computation that works per element
// (NumElements() * DataTypeSize) is then right for any count, odd ones included, and data movement needs no nibble
// arithmetic. Packing happens only where bytes cross a file: PackInt4/UnpackInt4 here, used by model/tensor_proto.
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"

namespace epctx {

// One int4 value, stored sign-extended in a byte. Construct through FromBits (low nibble of any byte, sign-extended)
// or Wrap (two's complement: keeps the low 4 bits, as an integer narrowing cast does).
struct Int4 {
  int8_t value = 0;
  static constexpr int kMin = -8, kMax = 7;
  static constexpr Int4 FromBits(uint8_t nibble) {
    return Int4{static_cast<int8_t>(static_cast<int8_t>(static_cast<uint8_t>(nibble << 4)) >> 4)};
  }
  static constexpr Int4 Wrap(int64_t v) { return FromBits(static_cast<uint8_t>(v & 0xF)); }
  // Clamps to [-8, 7] (QuantizeLinear's saturation).
  static constexpr Int4 Saturate(int64_t v) { return Int4{static_cast<int8_t>(v < kMin ? kMin : v > kMax ? kMax : v)}; }
  constexpr uint8_t bits() const { return static_cast<uint8_t>(value) & 0xF; }
  constexpr explicit operator int32_t() const { return value; }
};

// One uint4 value, stored zero-extended in a byte.
struct UInt4 {
  uint8_t value = 0;
  static constexpr int kMin = 0, kMax = 15;
  static constexpr UInt4 FromBits(uint8_t nibble) { return UInt4{static_cast<uint8_t>(nibble & 0xF)}; }
  static constexpr UInt4 Wrap(int64_t v) { return FromBits(static_cast<uint8_t>(v & 0xF)); }
  static constexpr UInt4 Saturate(int64_t v) {
    return UInt4{static_cast<uint8_t>(v < kMin ? kMin : v > kMax ? kMax : v)};
  }
  constexpr uint8_t bits() const { return value; }
  constexpr explicit operator int32_t() const { return value; }
};

static_assert(sizeof(Int4) == 1 && sizeof(UInt4) == 1, "one 4-bit value per byte in memory");

template <typename T>
constexpr bool kIsInt4 = false;
template <>
inline constexpr bool kIsInt4<Int4> = true;
template <>
inline constexpr bool kIsInt4<UInt4> = true;

// Bytes that hold `count` packed 4-bit values: ceil(count / 2). `count` must be >= 0.
constexpr uint64_t PackedInt4Bytes(int64_t count) { return (static_cast<uint64_t>(count) + 1) / 2; }

// Unpacks `count` values from `src` (`src_bytes` bytes) into `dst` (count elements). INVALID_ARGUMENT naming `what`
// unless src_bytes == PackedInt4Bytes(count): nothing is read or written then. The unused high nibble of an odd
// count's last byte is ignored.
template <typename T>
Status UnpackInt4(const uint8_t* src, uint64_t src_bytes, int64_t count, T* dst, const char* what);

// Packs `count` values into `dst`, which must hold PackedInt4Bytes(count) bytes; an odd count's last high nibble is 0.
template <typename T>
void PackInt4(const T* src, int64_t count, uint8_t* dst);

}  // namespace epctx
