#include "providers/cpu/kernel.h"

namespace epctx {

void RegisterMiscKernels(KernelRegistry& r) { (void)r; }

}  // namespace epctx
