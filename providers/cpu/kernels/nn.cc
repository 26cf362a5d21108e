// The nn family: Conv/ConvTranspose (nn_conv.cc), MatMul/Gemm (nn_matmul.cc), pooling (nn_pool.cc) and the
// quantized ops (nn_quant.cc), the layout pass's internal ops (nn_layout.cc), RotaryEmbedding and Attention
// (nn_attention.cc). Shared geometry, oneDNN plumbing
// and plain-loop fallbacks live in nn_common.*.
#include "providers/cpu/kernels/nn_common.h"

namespace epctx {

void RegisterAttentionKernels(KernelRegistry& r);  // nn_attention.cc

void RegisterNnKernels(KernelRegistry& r) {
  nn::RegisterConvKernels(r);
  nn::RegisterMatMulKernels(r);
  nn::RegisterPoolKernels(r);
  nn::RegisterQuantKernels(r);
  nn::RegisterLayoutKernels(r);
  RegisterAttentionKernels(r);
}

}  // namespace epctx
