// build/bin/epctx_int8_gemm_bench [threads]: the exact AVX2 8-bit product (providers/int8gemm) at the shapes of
// issue 26's models, in GMAC/s and as a fraction of the vpmaddwd roofline (int8_gemm.h kPeakMacsPerCycle per core
// per cycle, the clock measured here by a chain of dependent adds). A helper for reading numbers, not a test.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "providers/int8gemm/int8_gemm.h"

namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Cycles per second: 2^28 dependent adds take one cycle each.
double ClockHz() {
  const int64_t n = int64_t{1} << 28;
  uint64_t x = 1;
  const double t0 = Seconds();
  for (int64_t i = 0; i < n; ++i) asm volatile("add $1, %0" : "+r"(x));
  return static_cast<double>(n) / (Seconds() - t0);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace epctx::int8gemm;
  if (!Available()) {
    std::printf("no AVX2\n");
    return 0;
  }
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const double hz = ClockHz();
  std::printf("clock ~%.2f GHz, roofline %.0f GMAC/s on %d threads\n", hz / 1e9, hz * kPeakMacsPerCycle * threads / 1e9,
              threads);
  struct Shape {
    const char* what;
    int64_t m, k, n;
    bool s;
  } shapes[] = {{"turn_detector q/k/v", 24, 576, 576, false},   {"turn_detector mlp up", 24, 576, 768, false},
                {"turn_detector mlp down", 24, 768, 576, false}, {"turn_detector lm head (1 row)", 1, 576, 49155, true},
                {"turn_detector lm head (24 rows)", 24, 576, 49155, true},
                {"isnet conv 3x3 64->64 at 128^2", 16384, 576, 64, false},
                {"isnet conv 3x3 16->16 at 512^2", 262144, 144, 16, false},
                {"square 512", 512, 512, 512, true}};
  for (const Shape& s : shapes) {
    std::vector<uint8_t> a(static_cast<size_t>(s.m * s.k), 200), b(static_cast<size_t>(s.k * s.n), 100);
    std::vector<uint8_t> packed(PackedBSize(s.k, s.n));
    PackB(b.data(), s.s, s.k, s.n, s.n, 1, packed.data(), nullptr);
    std::vector<int32_t> c(static_cast<size_t>(s.m * s.n));
    const double macs = static_cast<double>(s.m) * s.k * s.n;
    const int reps = static_cast<int>(std::max(3.0, 2e9 / macs));
    Gemm(a.data(), s.k, s.m, s.k, s.n, packed.data(), s.s, c.data(), s.n, threads);
    const double t0 = Seconds();
    for (int r = 0; r < reps; ++r) Gemm(a.data(), s.k, s.m, s.k, s.n, packed.data(), s.s, c.data(), s.n, threads);
    const double t = (Seconds() - t0) / reps;
    std::printf("%-34s m %6lld k %5lld n %6lld: %8.3f ms, %6.1f GMAC/s, %4.0f %% of roofline\n", s.what,
                static_cast<long long>(s.m), static_cast<long long>(s.k), static_cast<long long>(s.n), t * 1e3,
                macs / t / 1e9, 100 * macs / t / (hz * kPeakMacsPerCycle * threads));
  }
  return 0;
}
