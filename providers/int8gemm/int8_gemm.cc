// Packing, work split and threads of the exact 8-bit product (int8_gemm.h); the AVX2 loops are int8_gemm_avx2.cc.
#include "providers/int8gemm/int8_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace epctx {
namespace int8gemm {

bool Available() {
  static const bool avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return avx2;
}

size_t PackedBSize(int64_t k, int64_t n) {
  const int64_t panels = (n + kPanel - 1) / kPanel, kp2 = (k + 1) / 2;
  return static_cast<size_t>(panels * kp2 * 2 * kPanel);
}

void PackB(const void* b, bool b_signed, int64_t k, int64_t n, int64_t stride_k, int64_t stride_n, uint8_t* packed,
           int32_t* col_sums) {
  const uint8_t* src = static_cast<const uint8_t*>(b);
  const int64_t kp2 = (k + 1) / 2;
  std::memset(packed, 0, PackedBSize(k, n));
  for (int64_t j = 0; j < n; ++j) {
    uint8_t* col = packed + (j / kPanel) * kp2 * 2 * kPanel + (j % kPanel) * 2;
    int32_t sum = 0;
    for (int64_t q = 0; q < k; ++q) {
      const uint8_t v = src[q * stride_k + j * stride_n];
      col[(q / 2) * 2 * kPanel + (q % 2)] = v;
      sum += b_signed ? static_cast<int32_t>(static_cast<int8_t>(v)) : static_cast<int32_t>(v);
    }
    if (col_sums) col_sums[j] = sum;
  }
}

void RowSums(const uint8_t* a, int64_t lda, int64_t m, int64_t k, int32_t* sums) {
  for (int64_t i = 0; i < m; ++i) {
    const uint8_t* r = a + i * lda;
    uint32_t s = 0;
    for (int64_t q = 0; q < k; ++q) s += r[q];
    sums[i] = static_cast<int32_t>(s);
  }
}

void Gemm(const uint8_t* a, int64_t lda, int64_t m, int64_t k, int64_t n, const uint8_t* packed_b, bool b_signed,
          int32_t* c, int64_t ldc, int threads) {
  const int64_t kp2 = (k + 1) / 2, lda16 = 2 * kp2;
  const int64_t panels = (n + kPanel - 1) / kPanel;
  // Rows are taken in chunks whose widened copy (a thread's own) stays in L2 beside the panels it meets.
  const int64_t chunk_rows = std::max<int64_t>(6, std::min<int64_t>(96, (int64_t{192} * 1024 / (lda16 * 2)) / 6 * 6));
  const int64_t chunks = (m + chunk_rows - 1) / chunk_rows;
  int th = std::max(1, threads);
  if (m * k * n < (int64_t{1} << 18)) th = 1;
  // Units of work: (row chunk, group of panels), chunk-major, so a thread widens each chunk once per group run.
  int64_t groups = 1;
  if (chunks < 4 * th) groups = std::min<int64_t>(panels, (4 * th + chunks - 1) / chunks);
  const int64_t units = chunks * groups;
  th = static_cast<int>(std::min<int64_t>(th, units));
  auto work = [&](int t, int nt) {
    const int64_t u0 = units * t / nt, u1 = units * (t + 1) / nt;
    std::vector<int16_t> a16(static_cast<size_t>(std::min(chunk_rows, m) * lda16));
    int64_t widened = -1;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t ch = u / groups, g = u % groups;
      const int64_t m0 = ch * chunk_rows, m1 = std::min(m, m0 + chunk_rows);
      if (widened != ch) {
        internal::Avx2Widen(a, lda, m0, m1, k, a16.data(), lda16);
        widened = ch;
      }
      const int64_t p0 = panels * g / groups, p1 = panels * (g + 1) / groups;
      internal::Avx2Unit(a16.data(), lda16, m0, m1, kp2, n, p0, p1, packed_b, b_signed, c, ldc);
    }
  };
  if (th == 1) {
    work(0, 1);
    return;
  }
#pragma omp parallel num_threads(th)
  work(omp_get_thread_num(), omp_get_num_threads());
}

void PackConvWeights(const ConvGeometry& g, const void* w, bool w_signed, uint8_t* packed, int32_t* col_sums) {
  // Reordered to [OC, taps, C] so that one K stride reads the im2col order, then packed as [OC, K] transposed.
  const int64_t taps = ConvTaps(g), c = g.c, oc = g.oc, k = taps * c;
  const uint8_t* src = static_cast<const uint8_t*>(w);
  std::vector<uint8_t> tap_major(static_cast<size_t>(oc * k));
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t t = 0; t < taps; ++t)
        tap_major[static_cast<size_t>(o * k + t * c + ci)] = src[(o * c + ci) * taps + t];
  PackB(tap_major.data(), w_signed, k, oc, 1, k, packed, col_sums);
}

void Conv(const ConvGeometry& g, const uint8_t* src, uint8_t xz, const uint8_t* packed, bool w_signed,
          const int32_t* col_sums, int32_t* dst, int threads) {
  const int64_t k = ConvTaps(g) * g.c, n = g.oc, m = g.n * g.out[0] * g.out[1] * g.out[2];
  const int64_t kp2 = (k + 1) / 2, lda16 = 2 * kp2;
  const int64_t panels = (n + kPanel - 1) / kPanel;
  // A source row is an im2col row when the window is one tap at the output's own position.
  const bool direct = ConvTaps(g) == 1 && g.pad_begin[0] == 0 && g.pad_begin[1] == 0 && g.pad_begin[2] == 0 &&
                      g.stride[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1 && g.out[0] == g.in[0] &&
                      g.out[1] == g.in[1] && g.out[2] == g.in[2];
  // Row blocks whose widened copy (a thread's own) stays in L2 beside the panels it meets; as Gemm.
  const int64_t block = std::max<int64_t>(6, std::min<int64_t>(96, (int64_t{192} * 1024 / (lda16 * 2)) / 6 * 6));
  const int64_t blocks = (m + block - 1) / block;
  int th = std::max(1, threads);
  if (m * k * n < (int64_t{1} << 18)) th = 1;
  int64_t groups = 1;
  if (blocks < 4 * th) groups = std::min<int64_t>(panels, (4 * th + blocks - 1) / blocks);
  const int64_t units = blocks * groups;
  th = static_cast<int>(std::min<int64_t>(th, units));
  const uint32_t z = xz;
  auto work = [&](int t, int nt) {
    const int64_t u0 = units * t / nt, u1 = units * (t + 1) / nt;
    std::vector<int16_t> a16(static_cast<size_t>(std::min(block, m) * lda16));
    int64_t built = -1;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t bl = u / groups, gr = u % groups;
      const int64_t m0 = bl * block, m1 = std::min(m, m0 + block);
      if (built != bl) {
        if (direct)
          internal::Avx2Widen(src, g.c, m0, m1, k, a16.data(), lda16);
        else
          internal::Avx2Im2Col(g, src, xz, m0, m1, a16.data(), lda16);
        built = bl;
      }
      const int64_t p0 = panels * gr / groups, p1 = panels * (gr + 1) / groups;
      internal::Avx2Unit(a16.data(), lda16, m0, m1, kp2, n, p0, p1, packed, w_signed, dst, n);
      if (z == 0) continue;
      // Every tap read x (or xz for the padding): remove xz * sum of the column, while the block is in cache.
      const int64_t j0 = p0 * kPanel, j1 = std::min(n, p1 * kPanel);
      for (int64_t i = m0; i < m1; ++i) {
        int32_t* __restrict row = dst + i * n;
        for (int64_t j = j0; j < j1; ++j)
          row[j] = static_cast<int32_t>(static_cast<uint32_t>(row[j]) - z * static_cast<uint32_t>(col_sums[j]));
      }
    }
  };
  if (th == 1) {
    work(0, 1);
    return;
  }
#pragma omp parallel num_threads(th)
  work(omp_get_thread_num(), omp_get_num_threads());
}

}  // namespace int8gemm
}  // namespace epctx
