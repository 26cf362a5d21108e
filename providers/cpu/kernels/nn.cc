#include "providers/cpu/kernel.h"

namespace epctx {

void RegisterNnKernels(KernelRegistry& r) { (void)r; }

}  // namespace epctx
