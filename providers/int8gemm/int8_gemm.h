// Exact 8-bit matrix products on AVX2 without VNNI: C[m, n] = sum_k A[m, k] * B[k, n] in int32, A uint8, B int8 or
// uint8, no saturation anywhere (oneDNN 2.6's AVX2 int8 kernels add product pairs in saturating int16).
//
// How: B is packed once (PackB) into panels of 16 columns, each k pair of a column stored as 2 adjacent bytes; the
// micro-kernel widens them with vpmovsxbw / vpmovzxbw to int16, multiplies by a pair of A values (widened to int16
// by the driver) with vpmaddwd (two 16-bit products summed in int32: at most 2 * 255 * 255, never saturates) and
// adds in int32. Register tile: 6 rows x 16 columns (12 ymm accumulators). K is blocked so that a panel's slice of
// B stays in L1 while it is reused by every row block.
//
// Zero points are the caller's: with row sums ra[m] = sum_k A[m, k] and column sums cb[n] = sum_k B[k, n] (PackB
// returns them), sum_k (A - az)(B - bz) = C - az * cb[n] - bz * ra[m] + K * az * bz, all mod 2^32 (exact whenever
// the true result fits int32, as the plain loops).
//
// Use: only where `Available()`; callers choose it where oneDNN's int8 kernels are not exact (no VNNI) and keep
// oneDNN on VNNI machines. Everything here is plain C++ over raw pointers; only int8_gemm_avx2.cc is compiled with
// -mavx2 and it is entered only after the CPUID check. Thread safety: PackB and Gemm touch only their arguments;
// concurrent calls on disjoint outputs are safe; packed B is read-only after PackB.
#pragma once

#include <cstddef>
#include <cstdint>

namespace epctx {
namespace int8gemm {

// Whether this CPU runs AVX2 (the kernel's requirement). Computed once.
bool Available();

// Columns per packed panel, and the packed size in bytes of a K x N matrix: ceil(N / 16) panels of
// ceil(K / 2) * 32 bytes (K and N padded with zeros).
constexpr int64_t kPanel = 16;
size_t PackedBSize(int64_t k, int64_t n);

// Packs B[k, n] = b[k * stride_k + n * stride_n] (int8 when `b_signed`, else uint8) into `packed`
// (PackedBSize(k, n) bytes) and, when `col_sums` is not null, writes sum_k B[k, n] for each of the n columns.
// Row-major [K, N] is stride_k = N, stride_n = 1; a [N, K] matrix read transposed (convolution weights
// [M, C * kh * kw]) is stride_k = 1, stride_n = K.
void PackB(const void* b, bool b_signed, int64_t k, int64_t n, int64_t stride_k, int64_t stride_n, uint8_t* packed,
           int32_t* col_sums);

// c[i * ldc + j] = sum_q a[i * lda + q] * B[q, j] for i < m, j < n, with B packed by PackB(k, n, b_signed).
// `threads` >= 1 OpenMP threads (small products run on the caller alone). Needs Available(); m, k, n > 0.
void Gemm(const uint8_t* a, int64_t lda, int64_t m, int64_t k, int64_t n, const uint8_t* packed_b, bool b_signed,
          int32_t* c, int64_t ldc, int threads);

// sum_q a[i * lda + q] for each of the m rows (the row sums the zero-point correction of B needs).
void RowSums(const uint8_t* a, int64_t lda, int64_t m, int64_t k, int32_t* sums);

// Peak multiply-accumulates per cycle per core of the vpmaddwd loop (2 vpmaddwd of 16 products per cycle), for
// roofline reports.
constexpr double kPeakMacsPerCycle = 32.0;

// ---- convolution on the same kernel ------------------------------------------------------------------------------
//
// A convolution is the product of the source's windows (an im2col row per output position, taps outer and channels
// inner) and the weights read as [taps * C, OC]. The rows are built a block at a time straight into the kernel's
// widened int16 form (never the whole im2col matrix), the block's product taken while it is in cache, and the
// source zero point's term removed from it: dst = sum over taps inside the source of (x - xz) * w, exact (mod 2^32).
// 1 x 1 convolutions with unit strides and no padding read the source rows as they are.

// Geometry, spatial dims as D, H, W (rank 1 and 2 padded in front with 1s). Dilations are ONNX's (1 = dense), pads
// the leading ones (the output dims give the trailing ones). Source channels-last [N, D, H, W, C] dense; destination
// [N, OD, OH, OW, OC] dense int32.
struct ConvGeometry {
  int64_t n = 0, c = 0, oc = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1},
          dilation[3] = {1, 1, 1}, pad_begin[3] = {0, 0, 0};
};

// Taps per window (kernel[0] * kernel[1] * kernel[2]) and the packed size of weights [OC, C, taps].
inline int64_t ConvTaps(const ConvGeometry& g) { return g.kernel[0] * g.kernel[1] * g.kernel[2]; }
inline size_t PackedConvWeightsSize(const ConvGeometry& g) { return PackedBSize(ConvTaps(g) * g.c, g.oc); }

// Packs convolution weights w[o, ci, t] (ONNX's [OC, C, kd, kh, kw], int8 when `w_signed`, else uint8) into
// PackedConvWeightsSize(g) bytes in the im2col rows' order, and writes their OC column sums (sum over ci and t).
void PackConvWeights(const ConvGeometry& g, const void* w, bool w_signed, uint8_t* packed, int32_t* col_sums);

// dst[m * oc + o] = sum over the taps of output position m that lie inside the source, and every channel, of
// (x - xz) * w (wrapping mod 2^32 as int32 accumulators do): the padding adds nothing. `col_sums` from
// PackConvWeights. Needs Available(); `threads` >= 1 OpenMP threads. Allocates one row block per thread.
void Conv(const ConvGeometry& g, const uint8_t* src, uint8_t xz, const uint8_t* packed, bool w_signed,
          const int32_t* col_sums, int32_t* dst, int threads);

namespace internal {
// The AVX2 driver for one unit of work (int8_gemm_avx2.cc): rows [m0, m1) of A already widened to int16 pairs
// (a16: rows of kp2 * 2 int16, kp2 = ceil(k / 2), row stride lda16 int16), panels [p0, p1).
void Avx2Unit(const int16_t* a16, int64_t lda16, int64_t m0, int64_t m1, int64_t kp2, int64_t n, int64_t p0,
              int64_t p1, const uint8_t* packed_b, bool b_signed, int32_t* c, int64_t ldc);
// A rows [m0, m1) of uint8 widened to int16 into a16 (row stride lda16), the odd K's pad column zero.
void Avx2Widen(const uint8_t* a, int64_t lda, int64_t m0, int64_t m1, int64_t k, int16_t* a16, int64_t lda16);
// The im2col rows of output positions [m0, m1) of `g` widened to int16 (taps outer, channels inner; a tap outside
// the source reads xz), each row padded with zeros to lda16.
void Avx2Im2Col(const ConvGeometry& g, const uint8_t* src, uint8_t xz, int64_t m0, int64_t m1, int16_t* a16,
                int64_t lda16);
}  // namespace internal

}  // namespace int8gemm
}  // namespace epctx
