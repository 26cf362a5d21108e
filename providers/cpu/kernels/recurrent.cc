#include "providers/cpu/kernel.h"

namespace epctx {

void RegisterRecurrentKernels(KernelRegistry& r) { (void)r; }

}  // namespace epctx
