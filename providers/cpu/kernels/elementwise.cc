// The elementwise family of the CPU EP. The kernels live in elementwise_unary.cc (math, activations, Clip,
// Dropout), elementwise_binary.cc (broadcasting arithmetic, comparisons, logic, variadic ops, Where) and
// elementwise_cast.cc (Cast, CastLike); each exposes one registration function, called from here.
#include "providers/cpu/kernel.h"

namespace epctx {

void RegisterElementwiseUnaryKernels(KernelRegistry& r);
void RegisterElementwiseBinaryKernels(KernelRegistry& r);
void RegisterElementwiseCastKernels(KernelRegistry& r);

void RegisterElementwiseKernels(KernelRegistry& r) {
  RegisterElementwiseUnaryKernels(r);
  RegisterElementwiseBinaryKernels(r);
  RegisterElementwiseCastKernels(r);
}

}  // namespace epctx
