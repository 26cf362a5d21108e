// Registration of the CPU EP's less common ops: text (extra_text.cc), random generators (extra_random.cc) and the
// ai.onnx.preview.training optimizers (extra_training.cc). `Gradient` needs automatic differentiation and is
// deliberately not registered, so sessions report it as unsupported.
#include "providers/cpu/kernel.h"

namespace epctx {

void RegisterExtraTextKernels(KernelRegistry& r);
void RegisterExtraRandomKernels(KernelRegistry& r);
void RegisterExtraTrainingKernels(KernelRegistry& r);

void RegisterExtraKernels(KernelRegistry& r) {
  RegisterExtraTextKernels(r);
  RegisterExtraRandomKernels(r);
  RegisterExtraTrainingKernels(r);
}

}  // namespace epctx
