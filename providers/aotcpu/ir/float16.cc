#include "providers/aotcpu/ir/float16.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "providers/common/float16_rules.h"

namespace epctx {
namespace aotcpu {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {        // subnormal: normalize
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float RoundToFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = x & 0x80000000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return f;                                     // inf, NaN
  if (ax >= 0x477ff000u) {                                             // rounds beyond 65504: infinity
    const uint32_t inf = sign | 0x7f800000u;
    std::memcpy(&f, &inf, 4);
    return f;
  }
  const int e = static_cast<int>(ax >> 23) - 127;
  const int drop = e < -14 ? 13 + (-14 - e) : 13;                      // mantissa bits below float16's precision
  if (drop >= 25) return sign ? -0.0f : 0.0f;                          // below half the smallest subnormal
  const uint64_t m = (ax & 0x7fffffu) | (e >= -126 ? 0x800000u : 0);
  const uint64_t half = uint64_t{1} << (drop - 1), mask = (uint64_t{1} << drop) - 1;
  uint64_t r = m & ~mask;
  const uint64_t rest = m & mask;
  if (rest > half || (rest == half && ((m >> drop) & 1))) r += uint64_t{1} << drop;
  const double v = std::ldexp(static_cast<double>(r), e - 23);
  const float out = static_cast<float>(v);
  return sign ? -out : out;
}

namespace {

// The ops whose float16 output is what they compute in float32 (its dtype follows the inputs'): all but the ones
// the shared rule lists (providers/common/float16_rules.h). Cast is handled apart.
bool OutputTypeFromAttribute(const Node& n) { return Float16OutputFromAttribute(n.domain.c_str(), n.op.c_str()); }

}  // namespace

void PromoteFloat16(Graph* g) {
  std::vector<bool> keep(g->values.size(), false);  // float16 values that must stay float16
  for (const Node& n : g->nodes)
    if (OutputTypeFromAttribute(n))
      for (int v : n.outputs)
        if (v >= 0 && !g->v(v).is_const()) keep[static_cast<size_t>(v)] = true;
  for (size_t i = 0; i < g->values.size(); ++i) {
    Value& v = g->values[i];
    if (v.dtype != kF16 || keep[i]) continue;
    if (v.is_const()) {
      const int64_t n = v.numel();
      if (n < 0) continue;  // no static shape: leave it (nothing takes an unshaped constant)
      auto data = std::make_shared<std::string>(static_cast<size_t>(n) * sizeof(float), '\0');
      const auto* src = static_cast<const unsigned char*>(v.data);
      float* dst = reinterpret_cast<float*>(data->data());
      for (int64_t k = 0; k < n; ++k) {
        uint16_t h;
        std::memcpy(&h, src + 2 * k, 2);
        dst[k] = HalfToFloat(h);
      }
      v.folded = std::move(data);
      v.data = v.folded->data();
    }
    v.dtype = kF32;
    v.float16_storage = true;
  }
  // A Cast from float16 to float32 now reads float32: a same-type Cast (a view). A Cast to float16 keeps to = 10 and
  // rounds (its support check and lowering, lower/tensor_view.cc).
}

}  // namespace aotcpu
}  // namespace epctx
