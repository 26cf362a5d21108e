// The roofline behind EPCTX_AOTCPU_PROFILE: what a step has to do (floating-point operations, bytes its operands
// hold) and what this machine reaches (a small probe), so a profile shows each step's achieved GFLOP/s and GB/s
// beside the machine's, on any model.
//
// The machine's numbers are measured once per process and thread count, the first time a profile asks for them
// (never otherwise): an f32 oneDNN matmul for compute, a streaming read of a buffer four times the last-level cache
// (memory) and of one that fits the L2 cache (cache), each the best of several repetitions (per thread for the reads).
#ifndef EPCTX_PROVIDERS_AOTCPU_RUNTIME_ROOFLINE_H_
#define EPCTX_PROVIDERS_AOTCPU_RUNTIME_ROOFLINE_H_

#include <string>

#include "providers/aotcpu/runtime/program.h"

namespace epctx {
namespace aotcpu {

// What one step must do. `flops` counts a multiply-add as 2 (convolutions, matrix products, LSTM; elementwise and
// data-movement steps count 0 and are judged by their bytes). `bytes`: every operand the step reads or writes, once.
struct StepWork {
  double flops = 0;
  double bytes = 0;
};
StepWork EstimateStepWork(const Step& s);

struct MachinePeak {
  int threads = 1;
  double gflops = 0;         // f32 matmul, `threads` threads (at least gflops_one * threads)
  double gflops_one = 0;     // the same on one thread
  double mem_gbps = 0;       // streaming read of a buffer beyond the last-level cache, `threads` threads
  double cache_gbps = 0;     // streaming read of an L2-resident buffer, `threads` threads
  double cache_bytes = 0;    // the L2 size the cache figure applies to (per core)
  std::string isa;           // oneDNN's effective ISA when probed (e.g. "avx512_core", "avx2")
};
// Measures (once per thread count; later calls return the remembered numbers). Thread-safe.
const MachinePeak& ProbeMachine(int threads);

// The time a step needs at the roofline, in microseconds: max(flops / compute peak, bytes / bandwidth), the compute
// peak scaled to the step's thread count and the bandwidth chosen by whether its bytes fit the cache.
double RooflineUs(const StepWork& w, const MachinePeak& m, int step_threads);

// "avx512_core" etc.: the ISA oneDNN's jit kernels run at in this process.
std::string EffectiveIsaName();

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_RUNTIME_ROOFLINE_H_
