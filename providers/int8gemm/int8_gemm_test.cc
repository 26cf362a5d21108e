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

}  // namespace
}  // namespace int8gemm
}  // namespace epctx
