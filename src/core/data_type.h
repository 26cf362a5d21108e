// Element types. Values equal onnx.TensorProto.DataType so a proto's data_type converts by cast.
// Names, sizes and C++ types come from the one table EPCTX_FOR_EACH_DATA_TYPE.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/float16.h"
#include "core/float8.h"
#include "core/int4.h"
#include "core/status.h"

namespace epctx {

enum class DataType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUint4 = 21,  // one value per byte in memory, packed two per byte in files (core/int4.h)
  kInt4 = 22,
};

// X(enum, c++ type, onnx name)
#define EPCTX_FOR_EACH_DATA_TYPE(X)        \
  X(kFloat, float, "float")                \
  X(kUint8, uint8_t, "uint8")              \
  X(kInt8, int8_t, "int8")                 \
  X(kUint16, uint16_t, "uint16")           \
  X(kInt16, int16_t, "int16")              \
  X(kInt32, int32_t, "int32")              \
  X(kInt64, int64_t, "int64")              \
  X(kString, std::string, "string")        \
  X(kBool, bool, "bool")                   \
  X(kFloat16, Float16, "float16")          \
  X(kDouble, double, "double")             \
  X(kUint32, uint32_t, "uint32")           \
  X(kUint64, uint64_t, "uint64")           \
  X(kComplex64, std::complex<float>, "complex64") \
  X(kComplex128, std::complex<double>, "complex128") \
  X(kBFloat16, BFloat16, "bfloat16")      \
  X(kFloat8E4M3FN, Float8E4M3FN, "float8e4m3fn") \
  X(kFloat8E4M3FNUZ, Float8E4M3FNUZ, "float8e4m3fnuz") \
  X(kFloat8E5M2, Float8E5M2, "float8e5m2") \
  X(kFloat8E5M2FNUZ, Float8E5M2FNUZ, "float8e5m2fnuz") \
  X(kUint4, UInt4, "uint4")                \
  X(kInt4, Int4, "int4")

// Size in bytes of one element in memory; 0 for kUndefined or unknown values. int4/uint4 are 1 here (one value per
// byte in memory); their packed size in files is PackedInt4Bytes (core/int4.h).
size_t DataTypeSize(DataType t);
// "float", "int64", ...; "undefined" for unknown values.
const char* DataTypeName(DataType t);
// True if the value is one of the enumerators above (used to validate numbers read from files).
bool IsValidDataType(int32_t v);

template <typename T>
struct DataTypeOf;
#define EPCTX_DATA_TYPE_OF(e, T, n) \
  template <>                       \
  struct DataTypeOf<T> {            \
    static constexpr DataType value = DataType::e; \
  };
EPCTX_FOR_EACH_DATA_TYPE(EPCTX_DATA_TYPE_OF)
#undef EPCTX_DATA_TYPE_OF

template <typename T>
constexpr DataType DataTypeFor() {
  return DataTypeOf<T>::value;
}

// Calls fn.template operator()<T>() for the C++ type of `t` among the listed types and returns its result
// (fn must return Status). Unlisted types give NOT_IMPLEMENTED naming `what` and the type.
//   return DispatchType<float, double, int64_t>(t, "Relu", [&](auto tag) { using T = decltype(tag); ... });
// The error is built only when no type matches: it formats through a stream, and building it on every call cost
// 40% of a run of small elementwise nodes (a chain of 1,000 on [1, 16]).
// `what` is anything MakeStatus streams (a string, or a graph node).
template <typename... Ts, typename W, typename Fn>
Status DispatchType(DataType t, const W& what, Fn&& fn) {
  Status result;
  const bool matched = ((DataTypeFor<Ts>() == t ? (result = fn(Ts{}), true) : false) || ...);
  if (!matched)
    return MakeStatus(ErrorCode::NOT_IMPLEMENTED, what, ": element type ", DataTypeName(t), " is not supported");
  return result;
}

// True for the four float8 types (storage only: kernels convert them through float; see core/float8.h).
inline bool IsFloat8(DataType t) {
  return t == DataType::kFloat8E4M3FN || t == DataType::kFloat8E4M3FNUZ || t == DataType::kFloat8E5M2 ||
         t == DataType::kFloat8E5M2FNUZ;
}

// True for int4/uint4 (IR 10): storage one value per byte; kernels that compute list them themselves (Cast,
// QuantizeLinear, DequantizeLinear), data movement works by element size.
inline bool IsInt4(DataType t) { return t == DataType::kInt4 || t == DataType::kUint4; }

// Bytes `count` elements of type `t` take in a file (TensorProto raw_data, external data): count * DataTypeSize(t),
// except int4/uint4, packed two per byte: ceil(count / 2). `count` must be >= 0 and the product must fit (callers
// check shapes first).
inline uint64_t FileByteSize(DataType t, int64_t count) {
  return IsInt4(t) ? PackedInt4Bytes(count) : static_cast<uint64_t>(count) * DataTypeSize(t);
}

// Common type lists for DispatchType. The float8 types are in none of them: a kernel that does arithmetic lists them
// itself (Cast, QuantizeLinear), and data-movement kernels dispatch by element size (tensor_util.h).
#define EPCTX_FLOAT_TYPES float, double, ::epctx::Float16, ::epctx::BFloat16
#define EPCTX_INT_TYPES int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
#define EPCTX_NUMERIC_TYPES EPCTX_FLOAT_TYPES, EPCTX_INT_TYPES
#define EPCTX_ALL_TYPES EPCTX_NUMERIC_TYPES, bool, std::string
#define EPCTX_FLOAT8_TYPES \
  ::epctx::Float8E4M3FN, ::epctx::Float8E4M3FNUZ, ::epctx::Float8E5M2, ::epctx::Float8E5M2FNUZ
#define EPCTX_INT4_TYPES ::epctx::Int4, ::epctx::UInt4

}  // namespace epctx
