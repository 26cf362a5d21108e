// The exact 8-bit product against a plain int64 reference: every element equal, extremes included.
#include "providers/int8gemm/int8_gemm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace epctx {
namespace int8gemm {
namespace {

struct Case {
  int64_t m, k, n;
  bool b_signed;
  int threads;
};

// Runs Gemm on a [m, k] (row stride lda) and b [k, n] (row-major, or [n, k] when `transposed`), with zero points
// az, bz applied by the header's identity, and compares with sum (a - az)(b - bz) in int64.
void Check(const Case& c, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, int32_t az, int32_t bz,
           bool transposed, int64_t lda, int64_t ldc) {
  std::vector<uint8_t> packed(PackedBSize(c.k, c.n));
  std::vector<int32_t> col(static_cast<size_t>(c.n)), row(static_cast<size_t>(c.m));
  PackB(b.data(), c.b_signed, c.k, c.n, transposed ? 1 : c.n, transposed ? c.k : 1, packed.data(), col.data());
  const int32_t sentinel = 0x5a5a5a5a;
  std::vector<int32_t> out(static_cast<size_t>(c.m * ldc), sentinel);
  Gemm(a.data(), lda, c.m, c.k, c.n, packed.data(), c.b_signed, out.data(), ldc, c.threads);
  RowSums(a.data(), lda, c.m, c.k, row.data());
  auto bval = [&](int64_t q, int64_t j) -> int64_t {
    const uint8_t v = transposed ? b[j * c.k + q] : b[q * c.n + j];
    return c.b_signed ? static_cast<int8_t>(v) : v;
  };
  int64_t bad = 0;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const int32_t got = out[i * ldc + j];
      if (j >= c.n) {
        if (got != sentinel) ++bad;  // nothing written past n
        continue;
      }
      int64_t raw = 0, zp = 0;
      for (int64_t q = 0; q < c.k; ++q) {
        raw += int64_t{a[i * lda + q]} * bval(q, j);
        zp += (int64_t{a[i * lda + q]} - az) * (bval(q, j) - bz);
      }
      ASSERT_EQ(got, raw) << "raw product at [" << i << ", " << j << "], m " << c.m << " k " << c.k << " n " << c.n;
      const uint32_t corrected = static_cast<uint32_t>(got) - static_cast<uint32_t>(az) * static_cast<uint32_t>(col[j]) -
                                 static_cast<uint32_t>(bz) * static_cast<uint32_t>(row[i]) +
                                 static_cast<uint32_t>(c.k * az * bz);
      ASSERT_EQ(static_cast<int32_t>(corrected), zp) << "with zero points at [" << i << ", " << j << "]";
    }
  }
  EXPECT_EQ(bad, 0) << "elements written past column n";
}

class Int8Gemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Available()) GTEST_SKIP() << "no AVX2 on this CPU";
  }
};

TEST_F(Int8Gemm, RandomShapesWithTailsAreExact) {
  std::mt19937 rng(26);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t m : {1, 5, 6, 7, 13, 97, 200})
    for (int64_t k : {1, 2, 3, 17, 64, 511, 513})
      for (int64_t n : {1, 15, 16, 17, 33, 100}) {
        for (bool s : {true, false}) {
          const Case c{m, k, n, s, (m * k * n) % 2 ? 1 : 2};
          std::vector<uint8_t> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
          for (auto& v : a) v = static_cast<uint8_t>(byte(rng));
          for (auto& v : b) v = static_cast<uint8_t>(byte(rng));
          const int32_t az = byte(rng), bz = s ? byte(rng) - 128 : byte(rng);
          Check(c, a, b, az, bz, (m + n) % 2 == 0, k, n);
          if (HasFatalFailure()) return;
        }
      }
}

TEST_F(Int8Gemm, ExtremeValuesAndLongKAreExact) {
  // 255 x -128 and 255 x 255 in every product, K long enough that int16 pair sums would saturate long before.
  for (int64_t k : {4099, 8192}) {
    for (bool s : {true, false}) {
      const Case c{13, k, 35, s, 2};
      std::vector<uint8_t> a(static_cast<size_t>(c.m * k), 255), b(static_cast<size_t>(k * c.n), s ? 0x80 : 255);
      Check(c, a, b, 0, 0, false, k, c.n);
      if (HasFatalFailure()) return;
      // With the zero points at the opposite extremes: (255 - 0) * (-128 - 127) and (255 - 0) * (255 - 0).
      for (int64_t q = 0; q < k; q += 3) b[static_cast<size_t>(q * c.n)] = s ? 0x7f : 0;
      Check(c, a, b, s ? 0 : 255, s ? 127 : 0, false, k, c.n);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(Int8Gemm, StridedSourceAndOutputAndThreads) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int threads : {1, 2, 3}) {
    const Case c{301, 130, 70, true, threads};
    const int64_t lda = 133, ldc = 75;
    std::vector<uint8_t> a(static_cast<size_t>(c.m * lda)), b(static_cast<size_t>(c.k * c.n));
    for (auto& v : a) v = static_cast<uint8_t>(byte(rng));
    for (auto& v : b) v = static_cast<uint8_t>(byte(rng));
    Check(c, a, b, 3, -5, false, lda, ldc);
    if (HasFatalFailure()) return;
  }
}

// Conv against a plain int64 loop over ONNX's layouts: sum over the taps inside the source of (x - xz) * w.
void CheckConv(const ConvGeometry& g, bool w_signed, const std::vector<uint8_t>& x, const std::vector<uint8_t>& w,
               uint8_t xz, int threads) {
  std::vector<uint8_t> packed(PackedConvWeightsSize(g));
  std::vector<int32_t> sums(static_cast<size_t>(g.oc));
  PackConvWeights(g, w.data(), w_signed, packed.data(), sums.data());
  const int64_t positions = g.n * g.out[0] * g.out[1] * g.out[2], taps = ConvTaps(g);
  std::vector<int32_t> out(static_cast<size_t>(positions * g.oc), 0x5a5a5a5a);
  Conv(g, x.data(), xz, packed.data(), w_signed, sums.data(), out.data(), threads);
  for (int64_t m = 0; m < positions; ++m) {
    const int64_t ox = m % g.out[2], oy = m / g.out[2] % g.out[1], oz = m / (g.out[2] * g.out[1]) % g.out[0],
                  b = m / (g.out[2] * g.out[1] * g.out[0]);
    for (int64_t o = 0; o < g.oc; ++o) {
      int64_t ref = 0;
      for (int64_t ci = 0; ci < g.c; ++ci)
        for (int64_t t = 0; t < taps; ++t) {
          const int64_t kd = t / (g.kernel[1] * g.kernel[2]), kh = t / g.kernel[2] % g.kernel[1], kw = t % g.kernel[2];
          const int64_t id = oz * g.stride[0] - g.pad_begin[0] + kd * g.dilation[0],
                        ih = oy * g.stride[1] - g.pad_begin[1] + kh * g.dilation[1],
                        iw = ox * g.stride[2] - g.pad_begin[2] + kw * g.dilation[2];
          if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1] || iw < 0 || iw >= g.in[2]) continue;
          const uint8_t wv = w[static_cast<size_t>((o * g.c + ci) * taps + t)];
          const int64_t xv = x[static_cast<size_t>((((b * g.in[0] + id) * g.in[1] + ih) * g.in[2] + iw) * g.c + ci)];
          ref += (xv - xz) * (w_signed ? int64_t{static_cast<int8_t>(wv)} : int64_t{wv});
        }
      ASSERT_EQ(out[static_cast<size_t>(m * g.oc + o)], ref)
          << "at position " << m << " channel " << o << " (c " << g.c << " oc " << g.oc << " kernel " << g.kernel[1]
          << "x" << g.kernel[2] << " stride " << g.stride[2] << " dilation " << g.dilation[2] << " pad "
          << g.pad_begin[2] << ")";
    }
  }
}

ConvGeometry Geometry2d(int64_t n, int64_t c, int64_t oc, int64_t h, int64_t w, int64_t k, int64_t stride,
                        int64_t dilation, int64_t pad) {
  ConvGeometry g;
  g.n = n;
  g.c = c;
  g.oc = oc;
  g.in[1] = h;
  g.in[2] = w;
  for (int i = 1; i < 3; ++i) {
    g.kernel[i] = k;
    g.stride[i] = stride;
    g.dilation[i] = dilation;
    g.pad_begin[i] = pad;
    g.out[i] = (g.in[i] + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  }
  return g;
}

TEST_F(Int8Gemm, ConvolutionsAreExact) {
  std::mt19937 rng(30);
  std::uniform_int_distribution<int> byte(0, 255);
  struct Shape {
    int64_t n, c, oc, h, w, k, stride, dilation, pad;
  };
  const Shape shapes[] = {{1, 3, 16, 9, 11, 3, 1, 1, 1},   {2, 17, 33, 7, 5, 3, 2, 1, 1}, {1, 64, 20, 6, 6, 1, 1, 1, 0},
                          {1, 5, 7, 10, 9, 3, 1, 2, 2},    {1, 8, 9, 13, 4, 5, 3, 1, 2},  {1, 33, 48, 5, 5, 1, 2, 1, 0},
                          {1, 130, 17, 8, 8, 3, 1, 1, 1},  {3, 1, 1, 4, 4, 2, 1, 1, 0}};
  for (const Shape& sh : shapes)
    for (bool s : {true, false}) {
      const ConvGeometry g = Geometry2d(sh.n, sh.c, sh.oc, sh.h, sh.w, sh.k, sh.stride, sh.dilation, sh.pad);
      std::vector<uint8_t> x(static_cast<size_t>(sh.n * sh.h * sh.w * sh.c)),
          w(static_cast<size_t>(sh.oc * sh.c * sh.k * sh.k));
      for (auto& v : x) v = static_cast<uint8_t>(byte(rng));
      for (auto& v : w) v = static_cast<uint8_t>(byte(rng));
      CheckConv(g, s, x, w, static_cast<uint8_t>(byte(rng)), 1 + static_cast<int>(sh.c % 2));
      if (HasFatalFailure()) return;
    }
}

TEST_F(Int8Gemm, ConvolutionExtremesAndThreeSpatialDims) {
  // 255 x -128 and 255 x 255 in every product of a 3x3 window over 300 channels (K = 2700), zero point 0 so the
  // padding's xz is 0 too; then a 3-D convolution with a zero point of 255.
  for (bool s : {true, false}) {
    const ConvGeometry g = Geometry2d(1, 300, 19, 5, 6, 3, 1, 1, 1);
    std::vector<uint8_t> x(static_cast<size_t>(5 * 6 * 300), 255), w(static_cast<size_t>(19 * 300 * 9), s ? 0x80 : 255);
    CheckConv(g, s, x, w, 0, 2);
    if (HasFatalFailure()) return;
  }
  ConvGeometry g;
  g.n = 1, g.c = 6, g.oc = 5;
  const int64_t in[3] = {4, 5, 3};
  for (int i = 0; i < 3; ++i) {
    g.in[i] = in[i];
    g.kernel[i] = 2;
    g.pad_begin[i] = 1;
    g.out[i] = in[i] + 1;
  }
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> x(static_cast<size_t>(4 * 5 * 3 * 6)), w(static_cast<size_t>(5 * 6 * 8));
  for (auto& v : x) v = static_cast<uint8_t>(byte(rng));
  for (auto& v : w) v = static_cast<uint8_t>(byte(rng));
  CheckConv(g, true, x, w, 255, 1);
}

}  // namespace
}  // namespace int8gemm
}  // namespace epctx
