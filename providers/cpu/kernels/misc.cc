// The CPU EP's resize, sampling, detection, signal and linear-algebra kernels. Each group lives in its own
// misc_*.cc file and registers itself here.
#include "providers/cpu/kernel.h"

namespace epctx {
namespace misc {
void RegisterResizeKernels(KernelRegistry& r);     // misc_resize.cc: Resize, Upsample
void RegisterSamplingKernels(KernelRegistry& r);   // misc_sampling.cc: GridSample, RoiAlign
void RegisterDetectionKernels(KernelRegistry& r);  // misc_detection.cc: NonMaxSuppression
void RegisterEinsumKernels(KernelRegistry& r);     // misc_einsum.cc: Einsum
void RegisterLinalgKernels(KernelRegistry& r);     // misc_linalg.cc: Det
void RegisterSignalKernels(KernelRegistry& r);     // misc_signal.cc: windows, MelWeightMatrix, DFT, STFT
}  // namespace misc

void RegisterMiscKernels(KernelRegistry& r) {
  misc::RegisterResizeKernels(r);
  misc::RegisterSamplingKernels(r);
  misc::RegisterDetectionKernels(r);
  misc::RegisterEinsumKernels(r);
  misc::RegisterLinalgKernels(r);
  misc::RegisterSignalKernels(r);
}

}  // namespace epctx
