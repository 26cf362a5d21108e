#include "providers/cpu/kernel.h"

namespace epctx {

void RegisterExtraKernels(KernelRegistry& r) { (void)r; }

}  // namespace epctx
