// The AVX2 micro-kernel and its loops (int8_gemm.h). This file alone is compiled with -mavx2 and is entered only
// after int8_gemm.cc's CPUID check; it includes no C++ library templates, whose AVX2 copies could otherwise be the
// ones the linker keeps for the whole library.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "providers/int8gemm/int8_gemm.h"

namespace epctx {
namespace int8gemm {
namespace internal {
namespace {

constexpr int kRows = 6;          // rows per register tile (12 accumulators + 2 weights + 1 source register)
constexpr int64_t kBlockK2 = 256;  // k pairs per block: 8 KB of a panel's bytes, in L1 beside 6 widened rows

inline __m256i Widen(__m128i v, bool is_signed) { return is_signed ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v); }

// c[r][0..nc) (+)= the R x 16 tile of sum over kq pairs of a (widened rows, stride lda16) times b (one panel slice).
template <int R, bool kSigned>
void Tile(const int16_t* a, int64_t lda16, const uint8_t* b, int64_t kq, int32_t* c, int64_t ldc, int64_t nc,
          bool accumulate) {
  __m256i acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < kq; ++q) {
    const __m256i w0 = Widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + q * 32)), kSigned);
    const __m256i w1 = Widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + q * 32 + 16)), kSigned);
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * lda16 + 2 * q, 4);
      const __m256i x = _mm256_set1_epi32(pair);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(x, w0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(x, w1));
    }
  }
  for (int r = 0; r < R; ++r) {
    int32_t* cr = c + r * ldc;
    if (nc == kPanel) {
      __m256i* p0 = reinterpret_cast<__m256i*>(cr);
      __m256i* p1 = reinterpret_cast<__m256i*>(cr + 8);
      if (accumulate) {
        acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_loadu_si256(p0));
        acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_loadu_si256(p1));
      }
      _mm256_storeu_si256(p0, acc[r][0]);
      _mm256_storeu_si256(p1, acc[r][1]);
    } else {
      alignas(32) int32_t t[kPanel];
      _mm256_store_si256(reinterpret_cast<__m256i*>(t), acc[r][0]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(t + 8), acc[r][1]);
      for (int64_t j = 0; j < nc; ++j) cr[j] = accumulate ? static_cast<int32_t>(static_cast<uint32_t>(cr[j]) +
                                                                                  static_cast<uint32_t>(t[j]))
                                                         : t[j];
    }
  }
}

template <bool kSigned>
void TileRows(int rows, const int16_t* a, int64_t lda16, const uint8_t* b, int64_t kq, int32_t* c, int64_t ldc,
              int64_t nc, bool accumulate) {
  switch (rows) {
    case 6: return Tile<6, kSigned>(a, lda16, b, kq, c, ldc, nc, accumulate);
    case 5: return Tile<5, kSigned>(a, lda16, b, kq, c, ldc, nc, accumulate);
    case 4: return Tile<4, kSigned>(a, lda16, b, kq, c, ldc, nc, accumulate);
    case 3: return Tile<3, kSigned>(a, lda16, b, kq, c, ldc, nc, accumulate);
    case 2: return Tile<2, kSigned>(a, lda16, b, kq, c, ldc, nc, accumulate);
    default: return Tile<1, kSigned>(a, lda16, b, kq, c, ldc, nc, accumulate);
  }
}

template <bool kSigned>
void Unit(const int16_t* a16, int64_t lda16, int64_t m0, int64_t m1, int64_t kp2, int64_t n, int64_t p0, int64_t p1,
          const uint8_t* packed_b, int32_t* c, int64_t ldc) {
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t nc = n - p * kPanel < kPanel ? n - p * kPanel : kPanel;
    const uint8_t* bp = packed_b + p * kp2 * 32;
    for (int64_t q0 = 0; q0 < kp2; q0 += kBlockK2) {
      const int64_t kq = kp2 - q0 < kBlockK2 ? kp2 - q0 : kBlockK2;
      for (int64_t i = m0; i < m1; i += kRows) {
        const int rows = static_cast<int>(m1 - i < kRows ? m1 - i : kRows);
        TileRows<kSigned>(rows, a16 + (i - m0) * lda16 + 2 * q0, lda16, bp + q0 * 32, kq, c + i * ldc + p * kPanel,
                          ldc, nc, q0 > 0);
      }
    }
  }
}

}  // namespace

void Avx2Unit(const int16_t* a16, int64_t lda16, int64_t m0, int64_t m1, int64_t kp2, int64_t n, int64_t p0,
              int64_t p1, const uint8_t* packed_b, bool b_signed, int32_t* c, int64_t ldc) {
  if (b_signed)
    Unit<true>(a16, lda16, m0, m1, kp2, n, p0, p1, packed_b, c, ldc);
  else
    Unit<false>(a16, lda16, m0, m1, kp2, n, p0, p1, packed_b, c, ldc);
}

void Avx2Widen(const uint8_t* a, int64_t lda, int64_t m0, int64_t m1, int64_t k, int16_t* a16, int64_t lda16) {
  for (int64_t i = m0; i < m1; ++i) {
    const uint8_t* src = a + i * lda;
    int16_t* dst = a16 + (i - m0) * lda16;
    int64_t q = 0;
    for (; q + 16 <= k; q += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + q),
                          _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + q))));
    for (; q < k; ++q) dst[q] = src[q];
    for (; q < lda16; ++q) dst[q] = 0;
  }
}

namespace {

inline void WidenBytes(const uint8_t* src, int64_t c, int16_t* dst) {
  int64_t q = 0;
  for (; q + 16 <= c; q += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + q),
                        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + q))));
  for (; q < c; ++q) dst[q] = src[q];
}

}  // namespace

void Avx2Im2Col(const ConvGeometry& g, const uint8_t* src, uint8_t xz, int64_t m0, int64_t m1, int16_t* a16,
                int64_t lda16) {
  const int64_t c = g.c, k = ConvTaps(g) * c;
  const int64_t od = g.out[0], oh = g.out[1], ow = g.out[2];
  for (int64_t m = m0; m < m1; ++m) {
    int64_t r = m;
    const int64_t x = r % ow;
    r /= ow;
    const int64_t y = r % oh;
    r /= oh;
    const int64_t z = r % od;
    const int64_t b = r / od;
    int16_t* row = a16 + (m - m0) * lda16;
    int16_t* dst = row;
    for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
      const int64_t id = z * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
      for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
        const int64_t ih = y * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
        const bool dh_in = id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1];
        const uint8_t* line = src + ((b * g.in[0] + (dh_in ? id : 0)) * g.in[1] + (dh_in ? ih : 0)) * g.in[2] * c;
        for (int64_t kw = 0; kw < g.kernel[2]; ++kw, dst += c) {
          const int64_t iw = x * g.stride[2] - g.pad_begin[2] + kw * g.dilation[2];
          if (dh_in && iw >= 0 && iw < g.in[2]) {
            WidenBytes(line + iw * c, c, dst);
          } else {
            for (int64_t q = 0; q < c; ++q) dst[q] = xz;
          }
        }
      }
    }
    for (int64_t q = k; q < lda16; ++q) row[q] = 0;
  }
}

}  // namespace internal
}  // namespace int8gemm
}  // namespace epctx
