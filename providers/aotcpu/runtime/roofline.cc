#include "providers/aotcpu/runtime/roofline.h"

#include <unistd.h>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "providers/aotcpu/binary/isa.h"

namespace epctx {
namespace aotcpu {

namespace {

// In double: this runs before the builders check the operands, so the dims may be anything a damaged program holds
// (context_binary_fuzz: 4294967300 * 4294967294 overflowed int64).
double Numel(const std::vector<int64_t>& d) {
  double n = 1;
  for (int64_t x : d) n *= static_cast<double>(std::max<int64_t>(x, 0));
  return n;
}

double ElementBytes(uint32_t onnx_dtype) {
  switch (onnx_dtype) {
    case 2: case 3: case 9: return 1;   // u8, i8, bool
    case 10: case 16: return 2;         // f16, bf16
    case 7: case 11: return 8;          // i64, f64
    default: return 4;                  // f32, i32
  }
}

// Per-ISA clones of the read loop (as generic_ops.cc; not under ThreadSanitizer, whose runtime is not initialized when
// an ifunc resolver runs). AVX2 at most: the figure is what a kernel of the AVX2 level reaches, a floor for AVX-512.
#if defined(__SANITIZE_THREAD__)
#define EPCTX_READ_CLONES
#else
#define EPCTX_READ_CLONES __attribute__((target_clones("avx2", "default")))
#endif

EPCTX_READ_CLONES
uint64_t SumWords(const uint64_t* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s;
}

using Clock = std::chrono::steady_clock;

// GB/s of `threads` threads each reading its share of `bytes` (total) `passes` times per repetition. Each thread
// times its own repetitions and keeps its best; the figure is the sum of the threads' bests, so a repetition in which
// another process held a core lowers only that repetition (on a shared 2-core machine, a parallel region's time is
// its slowest thread's).
double ReadBandwidth(size_t bytes, int threads, int passes, int reps) {
  const size_t words = bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new (std::nothrow) uint64_t[words]);
  if (!buf) return 0;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (size_t i = 0; i < words; ++i) buf[i] = i;  // touched by the threads that read it (first touch)
  std::vector<double> best(static_cast<size_t>(threads), 0);
  volatile uint64_t sink = 0;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const size_t lo = words * static_cast<size_t>(t) / static_cast<size_t>(nt);
    const size_t hi = words * static_cast<size_t>(t + 1) / static_cast<size_t>(nt);
    uint64_t s = 0;
    double b = 0;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      for (int p = 0; p < passes; ++p) s += SumWords(buf.get() + lo, hi - lo);
      const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
      if (sec > 0) b = std::max(b, static_cast<double>((hi - lo) * sizeof(uint64_t)) * passes / sec / 1e9);
    }
    best[static_cast<size_t>(t)] = b;
#pragma omp critical
    sink = sink + s;
  }
  double sum = 0;
  for (double b : best) sum += b;
  return sum;
}

// GFLOP/s of an f32 oneDNN matmul n x n x n on `threads` threads; the best of `reps` runs after one warm-up.
double MatmulGflops(int threads, int64_t n, int reps) {
  try {
    omp_set_num_threads(threads);
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(eng);
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc md({n, n}, dnnl::memory::data_type::f32, tag::ab);
    const dnnl::memory::desc any({n, n}, dnnl::memory::data_type::f32, tag::any);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md, any, md), eng);
    dnnl::memory a(md, eng), b(pd.weights_desc(), eng), c(md, eng);
    std::fill_n(static_cast<float*>(a.get_data_handle()), n * n, 0.5f);
    std::fill_n(static_cast<float*>(b.get_data_handle()), pd.weights_desc().get_size() / sizeof(float), 0.25f);
    dnnl::matmul mm(pd);
    double best = 0;
    for (int r = 0; r <= reps; ++r) {
      const auto t0 = Clock::now();
      mm.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
      stream.wait();
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r > 0 && s > 0) best = std::max(best, 2.0 * static_cast<double>(n) * n * n / s / 1e9);
    }
    return best;
  } catch (const dnnl::error&) {
    return 0;
  }
}

MachinePeak Probe(int threads) {
  MachinePeak m;
  m.threads = threads;
  m.isa = EffectiveIsaName();
  m.gflops = MatmulGflops(threads, 768, 20);
  m.gflops_one = threads == 1 ? m.gflops : MatmulGflops(1, 768, 10);
  // A matmul's threads scale on separate cores; a parallel run slowed by another process's use of a core would
  // understate the peak, so the peak is at least the single-thread figure times the threads.
  m.gflops = std::max(m.gflops, m.gflops_one * threads);
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE), l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l2 <= 0) l2 = 1 << 20;
  if (l3 <= 0) l3 = 32 << 20;
  m.cache_bytes = static_cast<double>(l2);
  // Half the L2 per thread, re-read often enough to take milliseconds; memory: 4x the L3, at least 256 MB.
  const size_t cache_buf = static_cast<size_t>(l2 / 2) * static_cast<size_t>(threads);
  m.cache_gbps = ReadBandwidth(cache_buf, threads, std::max<int>(1, static_cast<int>((2u << 20) / cache_buf)), 40);
  m.mem_gbps = ReadBandwidth(std::max<size_t>(static_cast<size_t>(l3) * 4, size_t{256} << 20), threads, 1, 10);
  return m;
}

}  // namespace

StepWork EstimateStepWork(const Step& s) {
  StepWork w;
  for (const Operand& op : s.ops)
    if (op.present()) w.bytes += Numel(op.dims) * ElementBytes(op.dtype);
  auto dims = [&](size_t i) -> const std::vector<int64_t>& {
    static const std::vector<int64_t> kNone;
    return i < s.ops.size() && s.ops[i].present() ? s.ops[i].dims : kNone;
  };
  double macs = 0;
  switch (s.kind) {
    case StepKind::kConv:
    case StepKind::kConvInt8:
    case StepKind::kQConv:
    case StepKind::kDeconv: {  // every output (deconv: input) element takes weights / out-channels products
      const auto& wd = dims(1);
      const auto& big = s.kind == StepKind::kConv ? dims(3) : dims(0);
      const int64_t ch = big.size() > 1 ? std::max<int64_t>(big[1], 1) : 1;
      macs = Numel(big) * Numel(wd) / static_cast<double>(ch);
      break;
    }
    case StepKind::kConvInt8Avx2:
    case StepKind::kQConvAvx2: {  // every output element: C x taps products (ints: groups, r, kernel[r], ...)
      const auto& src = dims(0);
      double taps = 1;
      const size_t r = s.ints.size() > 1 && s.ints[1] > 0 && s.ints[1] <= 3 ? static_cast<size_t>(s.ints[1]) : 0;
      for (size_t i = 0; i < r && 2 + i < s.ints.size(); ++i) taps *= static_cast<double>(std::max<int64_t>(s.ints[2 + i], 1));
      macs = Numel(dims(3)) * taps * static_cast<double>(src.size() > 1 ? std::max<int64_t>(src[1], 0) : 0);
      break;
    }
    case StepKind::kMatMulInt8:
    case StepKind::kMatMulInt8Avx2: {
      const auto& a = dims(0);
      macs = Numel(dims(2)) * static_cast<double>(a.empty() ? 1 : std::max<int64_t>(a.back(), 0));
      break;
    }
    case StepKind::kMatMul:
    case StepKind::kInnerProduct: {
      const auto& a = dims(0);
      macs = Numel(dims(3)) * static_cast<double>(a.empty() ? 1 : std::max<int64_t>(a.back(), 0));
      break;
    }
    case StepKind::kLstm:
      macs = Numel(dims(3)) + Numel(dims(4));  // weights per time step
      macs *= dims(0).empty() ? 1 : Numel(dims(0)) / static_cast<double>(std::max<int64_t>(dims(0).back(), 1));
      break;
    default:
      break;
  }
  w.flops = 2 * macs;
  return w;
}

const MachinePeak& ProbeMachine(int threads) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<MachinePeak>> probed;
  std::lock_guard<std::mutex> lock(mu);
  threads = std::max(threads, 1);
  auto& slot = probed[threads];
  if (!slot) {
    const int before = omp_get_max_threads();
    slot.reset(new MachinePeak(Probe(threads)));
    omp_set_num_threads(before);
  }
  return *slot;
}

double RooflineUs(const StepWork& w, const MachinePeak& m, int step_threads) {
  const int t = std::max(1, std::min(step_threads, m.threads));
  const double gflops = t == 1 ? m.gflops_one : m.gflops * t / m.threads;
  const bool fits = w.bytes <= m.cache_bytes * t;
  const double gbps = (fits ? m.cache_gbps : m.mem_gbps) * t / m.threads;
  double us = 0;
  if (gflops > 0) us = std::max(us, w.flops / gflops / 1e3);
  if (gbps > 0) us = std::max(us, w.bytes / gbps / 1e3);
  return us;
}

std::string EffectiveIsaName() {
  Isa isa;
  try {
    if (IsaFromOneDnn(static_cast<unsigned>(dnnl::get_effective_cpu_isa()), &isa)) return IsaName(isa);
  } catch (const dnnl::error&) {
  }
  return "unknown";
}

}  // namespace aotcpu
}  // namespace epctx
