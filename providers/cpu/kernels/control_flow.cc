#include "providers/cpu/kernel.h"

namespace epctx {

void RegisterControlFlowKernels(KernelRegistry& r) { (void)r; }

}  // namespace epctx
