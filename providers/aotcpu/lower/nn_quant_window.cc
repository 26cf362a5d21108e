// Compiled without floating-point contraction (CMakeLists.txt): the epilogue rounds once per operation, as oneDNN's
// post-ops do, so a multiply followed by an add must not become a fused multiply-add.
#include "providers/aotcpu/lower/nn_quant_window.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace epctx {
namespace aotcpu {
namespace {

// out[p] = sum over the c channels of pixel p + base, for `pixels` pixels (modulo 2^32).
void ChannelSumsPlain(const uint8_t* x, int64_t pixels, int64_t c, uint32_t base, int32_t* out) {
  for (int64_t p = 0; p < pixels; ++p) {
    const uint8_t* xp = x + p * c;
    uint32_t s = 0;
    for (int64_t k = 0; k < c; ++k) s += xp[k];
    out[p] = static_cast<int32_t>(s + base);
  }
}

#if defined(__x86_64__)
// The same with vpsadbw: 64 bytes summed into eight 64-bit lanes per instruction, the tail by a masked load.
__attribute__((target("avx512f,avx512bw"))) void ChannelSumsAvx512(const uint8_t* x, int64_t pixels, int64_t c,
                                                                    uint32_t base, int32_t* out) {
  const __m512i zero = _mm512_setzero_si512();
  const int64_t full = c / 64 * 64;
  const __mmask64 tail = c % 64 == 0 ? 0 : (~uint64_t{0} >> (64 - c % 64));
  for (int64_t p = 0; p < pixels; ++p) {
    const uint8_t* xp = x + p * c;
    __m512i acc = zero;
    for (int64_t k = 0; k < full; k += 64) acc = _mm512_add_epi64(acc, _mm512_sad_epu8(_mm512_loadu_si512(xp + k), zero));
    if (tail) acc = _mm512_add_epi64(acc, _mm512_sad_epu8(_mm512_maskz_loadu_epi8(tail, xp + full), zero));
    out[p] = static_cast<int32_t>(static_cast<uint32_t>(_mm512_reduce_add_epi64(acc)) + base);
  }
}

bool HasAvx512Bw() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return has;
}
#endif

void ChannelSums(const uint8_t* x, int64_t pixels, int64_t c, uint32_t base, int32_t* out) {
#if defined(__x86_64__)
  if (c >= 16 && HasAvx512Bw()) return ChannelSumsAvx512(x, pixels, c, base, out);
#endif
  ChannelSumsPlain(x, pixels, c, base, out);
}

// `win`[ow] = sum over the window of output pixel (n, od, oh, ow) of the channel sums (taps inside the input only);
// `row(key)` gives the channel sums of source row key = (n * D + id) * H + ih.
template <typename RowFn>
void RowWindowSums(const WindowGeometry& g, RowFn&& row, int64_t n, int64_t od, int64_t oh, uint32_t* win) {
  const int64_t D = g.in[0], H = g.in[1], W = g.in[2], OW = g.out[2];
  std::fill(win, win + OW, 0u);
  for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
    const int64_t id = od * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0];
    if (id < 0 || id >= D) continue;
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
      const int64_t ih = oh * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1];
      if (ih < 0 || ih >= H) continue;
      const int32_t* srow = row((n * D + id) * H + ih);
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
        // The ow with 0 <= ow * stride + off < W.
        const int64_t off = kw * g.dilation[2] - g.pad_begin[2], sw = g.stride[2];
        const int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
        const int64_t hi = std::min(OW, W - off <= 0 ? int64_t{0} : (W - off - 1) / sw + 1);
        if (sw == 1) {
          for (int64_t ow = lo; ow < hi; ++ow) win[ow] += static_cast<uint32_t>(srow[ow + off]);
        } else {
          for (int64_t ow = lo; ow < hi; ++ow) win[ow] += static_cast<uint32_t>(srow[ow * sw + off]);
        }
      }
    }
  }
}

// One epilogue operation over `np` pixels of `oc` channels in `y`; `full` is the operand at y's first element.
void Apply(const EpilogueOp& op, float* y, int64_t np, int64_t oc, const float* full) {
  const int64_t cnt = np * oc;
  if (op.operand == EpilogueOp::kNone) {
    const float a = op.alpha, b = op.beta;
    switch (op.kind) {
      case EpilogueOp::kRelu:
        if (a == 0.f) {
          for (int64_t i = 0; i < cnt; ++i) y[i] = y[i] > 0.f ? y[i] : 0.f;
        } else {
          for (int64_t i = 0; i < cnt; ++i) y[i] = y[i] > 0.f ? y[i] : y[i] * a;
        }
        return;
      case EpilogueOp::kClip:
        for (int64_t i = 0; i < cnt; ++i) {
          const float v = y[i] > a ? y[i] : a;
          y[i] = v < b ? v : b;
        }
        return;
      case EpilogueOp::kLinear:
        for (int64_t i = 0; i < cnt; ++i) y[i] = std::fma(y[i], a, b);
        return;
      default:
        return;
    }
  }
  const bool mul = op.kind == EpilogueOp::kMul;
  if (op.operand == EpilogueOp::kScalar) {
    const float b = op.data[0];
    if (mul) {
      for (int64_t i = 0; i < cnt; ++i) y[i] = y[i] * b;
    } else {
      for (int64_t i = 0; i < cnt; ++i) y[i] = y[i] + b;
    }
  } else if (op.operand == EpilogueOp::kChannel) {
    const float* b = op.data;
    for (int64_t p = 0; p < np; ++p) {
      float* yp = y + p * oc;
      if (mul) {
        for (int64_t k = 0; k < oc; ++k) yp[k] = yp[k] * b[k];
      } else {
        for (int64_t k = 0; k < oc; ++k) yp[k] = yp[k] + b[k];
      }
    }
  } else {
    if (mul) {
      for (int64_t i = 0; i < cnt; ++i) y[i] = y[i] * full[i];
    } else {
      for (int64_t i = 0; i < cnt; ++i) y[i] = y[i] + full[i];
    }
  }
}

constexpr int64_t kChunk = 2048;     // elements finished at a time (8 KB of int32 and 8 KB of float: L1)
constexpr int64_t kMaxCachedRows = 64;  // channel-sum rows a thread keeps

}  // namespace

void ConvInt8WindowEpilogue(const WindowGeometry& g, const uint8_t* src, int32_t xz, int32_t d, void* acc_dst,
                            const std::vector<EpilogueOp>& ops) {
  const int64_t C = g.c, OC = g.oc, D = g.in[0], H = g.in[1], W = g.in[2], OD = g.out[0], OH = g.out[1],
                OW = g.out[2];
  const int64_t rows = g.n * OD * OH;
  const int64_t per_chunk = std::max<int64_t>(1, kChunk / OC);
  const uint32_t ud = static_cast<uint32_t>(d), base = 0u - static_cast<uint32_t>(C) * static_cast<uint32_t>(xz);
  // Each thread takes a contiguous range of output rows and computes the channel sums of the source rows their
  // windows read as it goes, keeping the rows a window span covers: one parallel region and no barrier inside (the
  // rows at a range's edge are summed by both neighbours).
  const int64_t span = std::min(D, (g.kernel[0] - 1) * g.dilation[0] + 1) *
                       std::min(H, (g.kernel[1] - 1) * g.dilation[1] + 1);
  const int64_t cap = std::max<int64_t>(1, std::min(span, kMaxCachedRows));
  unsigned char* base_ptr = static_cast<unsigned char*>(acc_dst);
#pragma omp parallel if (rows > 1)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
    std::vector<uint32_t> win(static_cast<size_t>(OW));
    std::vector<int32_t> ibuf(static_cast<size_t>(per_chunk * OC));
    std::vector<float> fbuf(static_cast<size_t>(per_chunk * OC));
    std::vector<int32_t> cache(static_cast<size_t>(cap * W));
    std::vector<int64_t> keys(static_cast<size_t>(cap), -1);
    int64_t next = 0;
    auto source_row = [&](int64_t key) -> const int32_t* {
      for (int64_t i = 0; i < cap; ++i)
        if (keys[static_cast<size_t>(i)] == key) return cache.data() + i * W;
      const int64_t slot = next;  // oldest first: the rows come in increasing order
      next = (next + 1) % cap;
      keys[static_cast<size_t>(slot)] = key;
      int32_t* out = cache.data() + slot * W;
      ChannelSums(src + key * W * C, W, C, base, out);
      return out;
    };
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t n = row / (OD * OH), od = row / OH % OD, oh = row % OH;
      RowWindowSums(g, source_row, n, od, oh, win.data());
      for (int64_t ow = 0; ow < OW; ++ow) win[static_cast<size_t>(ow)] *= ud;
      unsigned char* rowp = base_ptr + static_cast<size_t>(row * OW * OC) * sizeof(int32_t);
      for (int64_t ow0 = 0; ow0 < OW; ow0 += per_chunk) {
        const int64_t np = std::min(per_chunk, OW - ow0), cnt = np * OC;
        unsigned char* at = rowp + static_cast<size_t>(ow0 * OC) * sizeof(int32_t);
        std::memcpy(ibuf.data(), at, static_cast<size_t>(cnt) * sizeof(int32_t));  // int32 in, float out: same bytes
        for (int64_t p = 0; p < np; ++p) {
          const uint32_t corr = win[static_cast<size_t>(ow0 + p)];
          const int32_t* a = ibuf.data() + p * OC;
          float* y = fbuf.data() + p * OC;
          for (int64_t k = 0; k < OC; ++k)
            y[k] = static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(a[k]) + corr));
        }
        const int64_t first = (row * OW + ow0) * OC;
        for (const EpilogueOp& op : ops)
          Apply(op, fbuf.data(), np, OC, op.operand == EpilogueOp::kFull ? op.data + first : nullptr);
        std::memcpy(at, fbuf.data(), static_cast<size_t>(cnt) * sizeof(float));
      }
    }
  }
}

void QConvEpilogue(const int32_t* acc, int64_t positions, int64_t oc, const int32_t* bias, const float* scales,
                   const std::vector<EpilogueOp>& ops, uint32_t dst_dtype, int32_t dst_zp, void* dst) {
  const int64_t per_chunk = std::max<int64_t>(1, kChunk / oc);
  const int64_t chunks = (positions + per_chunk - 1) / per_chunk;
  const float lo = dst_dtype == 2 ? 0.f : -128.f, hi = dst_dtype == 2 ? 255.f : 127.f, zp = static_cast<float>(dst_zp);
#pragma omp parallel if (chunks > 1)
  {
    std::vector<float> fbuf(static_cast<size_t>(per_chunk * oc));
#pragma omp for schedule(static)
    for (int64_t ci = 0; ci < chunks; ++ci) {
      const int64_t p0 = ci * per_chunk, np = std::min(per_chunk, positions - p0), first = p0 * oc;
      const int32_t* a = acc + first;
      for (int64_t p = 0; p < np; ++p)
        for (int64_t k = 0; k < oc; ++k) {
          const int64_t i = p * oc + k;
          const int32_t s = bias ? static_cast<int32_t>(static_cast<uint32_t>(a[i]) + static_cast<uint32_t>(bias[k]))
                                 : a[i];
          fbuf[static_cast<size_t>(i)] = std::nearbyint(static_cast<float>(s) * scales[k]);
        }
      for (const EpilogueOp& op : ops)
        Apply(op, fbuf.data(), np, oc, op.operand == EpilogueOp::kFull ? op.data + first : nullptr);
      const int64_t cnt = np * oc;
      if (dst_dtype == 1) {
        std::memcpy(static_cast<float*>(dst) + first, fbuf.data(), static_cast<size_t>(cnt) * sizeof(float));
      } else if (dst_dtype == 2) {
        uint8_t* out = static_cast<uint8_t*>(dst) + first;
        for (int64_t i = 0; i < cnt; ++i)
          out[i] = static_cast<uint8_t>(static_cast<int32_t>(std::min(hi, std::max(lo, fbuf[static_cast<size_t>(i)] + zp))));
      } else {
        int8_t* out = static_cast<int8_t*>(dst) + first;
        for (int64_t i = 0; i < cnt; ++i)
          out[i] = static_cast<int8_t>(static_cast<int32_t>(std::min(hi, std::max(lo, fbuf[static_cast<size_t>(i)] + zp))));
      }
    }
  }
}

}  // namespace aotcpu
}  // namespace epctx
