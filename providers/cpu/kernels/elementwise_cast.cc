// Cast and CastLike between every pair of ONNX element types except complex.
//
// Conversion rules (where C++ leaves them undefined we pick one and keep it):
//  - to bool: any non-zero value (and NaN) is true;
//  - float -> integer truncates toward zero; values out of range and NaN give what x86's truncating conversion gives
//    (INT32_MIN for the types up to 32 bits narrowed to the target, INT64_MIN for int64/uint32), never UB;
//  - integer -> narrower integer wraps (two's complement);
//  - double/integers -> float16 round once, to nearest even (through float with round-to-odd);
//  - float8 (opset 19+): to float8 goes through float (as ONNX Runtime: a double or int64 rounds twice) and then
//    rounds to nearest even with the node's `saturate` (default 1; core/float8.h has the table); from float8 goes
//    through float, which holds every float8 value exactly;
//  - int4/uint4 (opset 21): from them through int32 (exact); to them from integers and bool wraps to the low 4 bits,
//    from floats rounds half away from zero and then wraps (as ONNX Runtime 1.30: Cast(-8.5) = 7, Cast(7.5) = -8);
//  - anything -> bfloat16 truncates toward zero (drops the low 16 bits of the float), which is what ONNX's
//    conformance data for Cast (libonnx 1.12) expects; NaN stays a quiet NaN;
//  - string -> number parses decimal or scientific notation, "INF"/"+INF"/"-INF"/"NaN" in any case, and for integer
//    targets an integer literal or else the truncated number; anything else is INVALID_ARGUMENT naming the string;
//  - number -> string: the shortest text that reads back to the same value ("0.1", "1e-05"), "NaN", "INF", "-INF";
//    integers in decimal; bool as "1"/"0".
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "providers/cpu/kernel.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace epctx {

namespace {

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
// 8- and 16-bit floats: stored as `.bits`, converted through float.
template <typename T>
constexpr bool kIsSmallFloat = kIsHalf<T> || kIsFloat8<T>;

// Nearest float with the sticky bit kept in the last mantissa bit, so a second rounding (to 16 bits) is correct.
inline float DoubleToFloatRoundToOdd(double d) {
  float f = static_cast<float>(d);
  if (std::isfinite(f) && static_cast<double>(f) != d) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
    uint32_t b;
    std::memcpy(&b, &f, 4);
    b |= 1;
    std::memcpy(&f, &b, 4);
  }
  return f;
}

// Round toward zero to float, then keep the high 16 bits.
inline BFloat16 TruncateToBFloat16(double d) {
  float f = static_cast<float>(d);
  if (std::isfinite(f) && std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  uint32_t b;
  std::memcpy(&b, &f, 4);
  uint16_t h = static_cast<uint16_t>(b >> 16);
  if (std::isnan(f)) h |= 0x40;
  return BFloat16::FromBits(h);
}

template <typename D>
inline D FloatToInt(double x) {
  if constexpr (std::is_same_v<D, uint64_t>) {
    if (x >= 0 && x < 18446744073709551616.0) return static_cast<uint64_t>(x);
    if (x < 0 && x > -9223372036854775809.0) return static_cast<uint64_t>(static_cast<int64_t>(x));
    return 0x8000000000000000ull;
  } else if constexpr (sizeof(D) == 8 || std::is_same_v<D, uint32_t>) {
    const int64_t v = (x >= -9223372036854775808.0 && x < 9223372036854775808.0) ? static_cast<int64_t>(x)
                                                                                   : std::numeric_limits<int64_t>::min();
    return static_cast<D>(v);
  } else {
    const int32_t v = (x > -2147483649.0 && x < 2147483648.0) ? static_cast<int32_t>(x)
                                                               : std::numeric_limits<int32_t>::min();
    return static_cast<D>(v);
  }
}

// One numeric (or bool) value to another numeric (or bool) type.
template <typename D, typename S>
inline D CastValue(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (kIsInt4<S>) {  // every int4/uint4 value is exact in int32
    return CastValue<D>(static_cast<int32_t>(v));
  } else if constexpr (kIsInt4<D>) {
    if constexpr (std::is_same_v<S, bool>) {
      return D::Wrap(v ? 1 : 0);
    } else if constexpr (kIsSmallFloat<S> || std::is_floating_point_v<S>) {
      // As ONNX Runtime 1.30: round half away from zero, then keep the low 4 bits (wrap). NaN and values beyond
      // int64 give 0.
      const double r = std::round(static_cast<double>(static_cast<std::conditional_t<kIsSmallFloat<S>, float, S>>(v)));
      return D::Wrap(r > -9.2e18 && r < 9.2e18 ? static_cast<int64_t>(r) : 0);
    } else {  // integer -> 4 bits: wraps like any narrowing integer cast
      return D::Wrap(static_cast<int64_t>(v));
    }
  } else if constexpr (kIsFloat8<D>) {
    return D(CastValue<float>(v));  // saturating; CastToFloat8 takes the node's choice
  } else if constexpr (kIsSmallFloat<S>) {
    return CastValue<D>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<D, bool>) {
    return v != S(0);
  } else if constexpr (std::is_same_v<S, bool>) {
    if constexpr (kIsHalf<D>) {  // 0 and 1 are exact
      return D(v ? 1.0f : 0.0f);
    } else {
      return static_cast<D>(v ? 1 : 0);
    }
  } else if constexpr (std::is_same_v<D, BFloat16>) {
    return TruncateToBFloat16(static_cast<double>(v));
  } else if constexpr (kIsHalf<D>) {
    if constexpr (std::is_same_v<S, float>) {
      return D(v);
    } else {
      return D(DoubleToFloatRoundToOdd(static_cast<double>(v)));
    }
  } else if constexpr (std::is_floating_point_v<D>) {
    return static_cast<D>(v);
  } else if constexpr (std::is_floating_point_v<S>) {  // float -> integer
    return FloatToInt<D>(static_cast<double>(v));
  } else {  // integer -> integer: wraps
    return static_cast<D>(v);
  }
}

// A value to float8 with `saturate` (float8 sources are exact in float, so float8 -> float8 rounds once).
template <typename D, typename S>
inline D CastToFloat8(S v, bool saturate) {
  return D(CastValue<float>(v), saturate);
}

// ---- strings ----------------------------------------------------------------------------------------------

bool EqualsIgnoreCase(const std::string& a, const char* b) {
  const size_t n = std::strlen(b);
  if (a.size() != n) return false;
  for (size_t i = 0; i < n; ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Parses a string as a double (decimal, scientific, INF/NaN). False when it is not a number.
bool ParseDouble(const std::string& text, double* out) {
  const std::string s = Trim(text);
  if (EqualsIgnoreCase(s, "inf") || EqualsIgnoreCase(s, "+inf")) {
    *out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (EqualsIgnoreCase(s, "-inf")) {
    *out = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (EqualsIgnoreCase(s, "nan") || EqualsIgnoreCase(s, "+nan") || EqualsIgnoreCase(s, "-nan")) {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (s.empty()) return false;
  const char* begin = s.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  if (end == begin || *end != '\0') return false;
  *out = v;  // overflow gives +-inf, underflow 0, as a float literal would
  return true;
}

template <typename D>
Status ParseString(const std::string& s, D* out, const std::string& what, bool saturate) {
  auto bad = [&]() {
    return MakeStatus(ErrorCode::INVALID_ARGUMENT, what, ": cannot cast string \"", s, "\" to ",
                      DataTypeName(DataTypeFor<D>()));
  };
  if constexpr (kIsInt4<D>) {  // ONNX Runtime 1.30 has no string -> 4-bit Cast either
    return MakeStatus(ErrorCode::NOT_IMPLEMENTED, what, ": cast from string to ", DataTypeName(DataTypeFor<D>()),
                      " is not supported");
  } else if constexpr (std::is_same_v<D, bool>) {
    const std::string t = Trim(s);
    if (EqualsIgnoreCase(t, "true")) {
      *out = true;
      return Status::OK();
    }
    if (EqualsIgnoreCase(t, "false")) {
      *out = false;
      return Status::OK();
    }
  }
  if constexpr (std::is_integral_v<D> && !std::is_same_v<D, bool>) {
    // An exact integer literal first (keeps all 64 bits), then any number, truncated.
    const std::string t = Trim(s);
    if (!t.empty()) {
      const char* first = t.c_str() + (t[0] == '+' ? 1 : 0);
      const char* last = t.c_str() + t.size();
      if constexpr (std::is_signed_v<D>) {
        int64_t v = 0;
        auto [p, ec] = std::from_chars(first, last, v);
        if (ec == std::errc() && p == last) {
          *out = static_cast<D>(v);
          return Status::OK();
        }
      } else {
        uint64_t v = 0;
        auto [p, ec] = std::from_chars(first, last, v);
        if (ec == std::errc() && p == last) {
          *out = static_cast<D>(v);
          return Status::OK();
        }
      }
    }
  }
  double v;
  if (!ParseDouble(s, &v)) return bad();
  if constexpr (kIsFloat8<D>) *out = CastToFloat8<D>(v, saturate);
  else *out = CastValue<D>(v);
  return Status::OK();
}

template <typename F>
std::string FormatShortest(F v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, p) : std::string();
}

template <typename S>
std::string FormatValue(S v) {
  if constexpr (std::is_same_v<S, bool>) {
    return v ? "1" : "0";
  } else if constexpr (kIsInt4<S>) {
    return std::to_string(static_cast<int32_t>(v));
  } else if constexpr (std::is_integral_v<S>) {
    return std::to_string(v);
  } else {
    const double d = static_cast<double>(static_cast<std::conditional_t<kIsSmallFloat<S>, float, S>>(v));
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d > 0 ? "INF" : "-INF";
    if constexpr (kIsSmallFloat<S>) {
      // Shortest decimal that reads back to the same 8- or 16-bit value.
      char buf[32];
      for (int prec = 1; prec <= 9; ++prec) {
        std::snprintf(buf, sizeof(buf), "%.*g", prec, d);
        if (S(static_cast<float>(std::strtod(buf, nullptr))).bits == v.bits) break;
      }
      return buf;
    } else {
      return FormatShortest(v);
    }
  }
}

#define CAST_TYPES EPCTX_NUMERIC_TYPES, bool, EPCTX_FLOAT8_TYPES, EPCTX_INT4_TYPES

// float <-> float16 in bulk: F16C converts 8 values per instruction with the same rounding (nearest even) as
// Float16(float).
void FloatToHalf(const float* src, Float16* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
#endif
  for (; i < n; ++i) dst[i] = Float16(src[i]);
}
void HalfToFloat(const Float16* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

// Casts `in` into `out` (already allocated with the target type and the same element count); `saturate` applies to
// float8 targets.
Status CastTensor(const Tensor& in, Tensor* out, bool saturate, int threads, const std::string& what) {
  const int64_t n = in.NumElements();
  if (in.dtype() == DataType::kString) {
    const std::string* src = in.data<std::string>();
    if (out->dtype() == DataType::kString) {
      std::copy_n(src, n, out->data<std::string>());
      return Status::OK();
    }
    return DispatchType<CAST_TYPES>(out->dtype(), what.c_str(), [&](auto dtag) -> Status {
      using D = decltype(dtag);
      D* dst = out->data<D>();
      for (int64_t i = 0; i < n; ++i) RETURN_IF_ERROR(ParseString<D>(src[i], &dst[i], what, saturate));
      return Status::OK();
    });
  }
  return DispatchType<CAST_TYPES>(in.dtype(), what.c_str(), [&](auto stag) -> Status {
    using S = decltype(stag);
    const S* src = in.data<S>();
    if (out->dtype() == DataType::kString) {
      std::string* dst = out->data<std::string>();
      for (int64_t i = 0; i < n; ++i) dst[i] = FormatValue(src[i]);
      return Status::OK();
    }
    return DispatchType<CAST_TYPES>(out->dtype(), what.c_str(), [&](auto dtag) -> Status {
      using D = decltype(dtag);
      D* dst = out->data<D>();
      ParallelFor(threads, n, 2, [&](int64_t b, int64_t e) {
        if constexpr (std::is_same_v<S, float> && std::is_same_v<D, Float16>) {
          FloatToHalf(src + b, dst + b, e - b);
        } else if constexpr (std::is_same_v<S, Float16> && std::is_same_v<D, float>) {
          HalfToFloat(src + b, dst + b, e - b);
        } else if constexpr (kIsFloat8<D>) {
          for (int64_t i = b; i < e; ++i) dst[i] = CastToFloat8<D>(src[i], saturate);
        } else {
          for (int64_t i = b; i < e; ++i) dst[i] = CastValue<D>(src[i]);
        }
      });
      return Status::OK();
    });
  });
}

StatusOr<DataType> ParseTypeName(const std::string& name) {
  static const struct {
    const char* name;
    DataType type;
  } kNames[] = {{"FLOAT", DataType::kFloat},   {"UINT8", DataType::kUint8},     {"INT8", DataType::kInt8},
                {"UINT16", DataType::kUint16}, {"INT16", DataType::kInt16},     {"INT32", DataType::kInt32},
                {"INT64", DataType::kInt64},   {"STRING", DataType::kString},   {"BOOL", DataType::kBool},
                {"FLOAT16", DataType::kFloat16}, {"DOUBLE", DataType::kDouble}, {"UINT32", DataType::kUint32},
                {"UINT64", DataType::kUint64}, {"BFLOAT16", DataType::kBFloat16}};
  for (const auto& e : kNames)
    if (EqualsIgnoreCase(name, e.name)) return e.type;
  return MakeStatus(ErrorCode::INVALID_GRAPH, "unknown type name \"", name, "\"");
}

bool Castable(DataType t) {
  return IsValidDataType(static_cast<int32_t>(t)) && t != DataType::kUndefined && t != DataType::kComplex64 &&
         t != DataType::kComplex128;
}

Status CastInto(KernelContext& ctx, const Tensor& in, DataType to, bool saturate) {
  const std::string what = ctx.node().Describe();
  if (!Castable(in.dtype()))
    return ctx.Error(ErrorCode::NOT_IMPLEMENTED, "cannot cast from ", DataTypeName(in.dtype()));
  if (in.dtype() == to) {
    ctx.SetOutput(0, IValue(in));
    return Status::OK();
  }
  ASSIGN_OR_RETURN(Tensor * out, ctx.Output(0, to, in.shape()));
  return CastTensor(in, out, saturate, ctx.num_threads(), what);
}

// `saturate` (opset 19+, default 1) only matters for float8 targets; before opset 19 it is not an attribute and reads
// as its default.
bool SaturateAttr(const KernelInfo& info) { return info.GetInt("saturate", 1) != 0; }

class CastKernel final : public OpKernel {
 public:
  CastKernel(DataType to, bool saturate) : to_(to), saturate_(saturate) {}
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    const Attribute* a = info.node().attr("to");
    if (a == nullptr) return info.Error(ErrorCode::INVALID_GRAPH, "required attribute 'to' is missing");
    DataType to;
    if (a->type == Attribute::Type::kString) {  // opset 1..5 names the type
      auto t = ParseTypeName(a->s);
      if (!t.ok()) return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'to': ", t.status().message());
      to = *t;
    } else if (a->type == Attribute::Type::kInt) {
      if (a->i < 0 || a->i > std::numeric_limits<int32_t>::max() || !IsValidDataType(static_cast<int32_t>(a->i)))
        return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'to' = ", a->i, " is not a data type");
      to = static_cast<DataType>(a->i);
    } else {
      return info.Error(ErrorCode::INVALID_GRAPH, "attribute 'to' must be an int");
    }
    if (!Castable(to))
      return info.Error(ErrorCode::NOT_IMPLEMENTED, "cannot cast to ", DataTypeName(to));
    return std::unique_ptr<OpKernel>(new CastKernel(to, SaturateAttr(info)));
  }
  Status Compute(KernelContext& ctx) const override {
    const Tensor* in = ctx.Input(0);
    if (in == nullptr) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "required input 0 is missing");
    return CastInto(ctx, *in, to_, saturate_);
  }

 private:
  DataType to_;
  bool saturate_;
};

class CastLikeKernel final : public OpKernel {
 public:
  explicit CastLikeKernel(bool saturate) : saturate_(saturate) {}
  Status Compute(KernelContext& ctx) const override {
    const Tensor* in = ctx.Input(0);
    const Tensor* like = ctx.Input(1);
    if (in == nullptr || like == nullptr)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "CastLike needs two inputs (input, target_type)");
    if (!Castable(like->dtype()))
      return ctx.Error(ErrorCode::NOT_IMPLEMENTED, "cannot cast to ", DataTypeName(like->dtype()));
    return CastInto(ctx, *in, like->dtype(), saturate_);
  }

 private:
  bool saturate_;
};

}  // namespace

void RegisterElementwiseCastKernels(KernelRegistry& r) {
  r.Register("", "Cast", CastKernel::Create);
  r.Register("", "CastLike", [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    return std::unique_ptr<OpKernel>(new CastLikeKernel(SaturateAttr(info)));
  });
}

}  // namespace epctx
