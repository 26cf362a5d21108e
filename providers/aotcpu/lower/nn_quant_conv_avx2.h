// ConvInteger -> Cast -> Mul [-> bias Add] [-> activations, residual Adds] on our own exact AVX2 kernel
// (providers/int8gemm's Conv) for targets without VNNI: step kind 30, kConvInt8Avx2. oneDNN 2.6's int8 kernels
// there add pairs of products in saturating int16, so kConvInt8 splits such weights in 2 to 4 parts over a source
// copied as many times; this step keeps each weight once (s = w - shift, int8, the ConvInt8 window-sum form) packed
// at compile time in the kernel's panels, builds the im2col rows a block at a time, and then runs kConvInt8's
// window-sum correction and float epilogue (nn_quant_window.h) in place. Internal to lower/; nn_quant_conv.cc
// routes to it.
//
// Thread safety: as every lowering and builder (one LowerContext / BuildContext per call).
#ifndef EPCTX_PROVIDERS_AOTCPU_LOWER_NN_QUANT_CONV_AVX2_H_
#define EPCTX_PROVIDERS_AOTCPU_LOWER_NN_QUANT_CONV_AVX2_H_

#include <cstdint>
#include <vector>

#include "providers/aotcpu/lower/nn_common.h"
#include "providers/aotcpu/lower/nn_quant_window.h"
#include "providers/aotcpu/lower/quant_common.h"
#include "providers/int8gemm/int8_gemm.h"

namespace epctx {
namespace aotcpu {

// Whether int8 convolutions whose weights need more than one part at the target's range run on kConvInt8Avx2:
// the target's oneDNN int8 products are not exact (no VNNI) and it has AVX2 (a compile for this machine: its CPU).
bool OwnInt8Conv(const CompileOptions& options);

// What LowerConvInteger has chosen before the weights: the channels-last u8 source and its zero point (i32 [1] or
// none), the scale Mul's post-op and the bias Add's (`first`, operands 5 and 6), the bias values, the fusion chain
// after them and its operands' descriptors, and the value after the scale and bias.
struct ConvInt8Avx2Plan {
  Operand src, zp;
  std::vector<PostOp> first;
  int bias_node = -1;
  const float* bias = nullptr;
  std::vector<FusedOp> chain;
  std::vector<Md> other_mds;
  int cur = -1;
};

// Emits one kConvInt8Avx2 step for ConvInteger `node` (group 1; geometry `spec`; weights `wv` with the constant
// zero point `wz`) and absorbs the Cast, the Mul, the bias Add and the chain entries it runs.
CheckResult LowerConvInt8Avx2(LowerContext& ctx, int node, const ConvSpec& spec, const Int8Tail& tail, const Value& wv,
                              int32_t wz, const ConvInt8Avx2Plan& plan);

// Packs the int8 weights `w` ([OC, C, kernel...] of `spec`, group 1) in int8gemm's panels (taps outer, channels
// inner) and adds them and their OC column sums as weights named after value `weights_value` of `node`. `geom` gets
// the kernel's geometry. Shared by kConvInt8Avx2 and kQConvAvx2.
CheckResult AddOwnConvWeights(LowerContext& ctx, int node, int weights_value, const ConvSpec& spec, const int8_t* w,
                              int8gemm::ConvGeometry* geom, Operand* w_op, Operand* sums_op);

// How many leading entries of `chain` the window-sum epilogue runs with the destination `dst` (each post-op one it
// runs, each operand in dst's layout).
size_t EpilogueChainLength(const std::vector<FusedOp>& chain, const std::vector<Md>& other_mds, const Md& dst);

// 8-bit weights stored once as s = w - shift in int8 (both ConvInteger forms that keep whole weights): the shift
// nearest the zero point `wz` that brings every weight of `wv` (uint8 or int8) into [-128, 127] (8-bit weights span
// at most 256 values), and the shifted values written to `s` (wv.numel() of them).
int32_t WeightShift(const Value& wv, int32_t wz);
void ShiftWeights(const Value& wv, int32_t shift, int8_t* s);

// The window-sum epilogue's ops (nn_quant_window.h) for the step's post-ops: eltwise relu, clip and linear (scale 1),
// binary add and mul of one value, one per channel (plain) or a tensor of the destination's dims `dd` in its layout
// `dst_md`; `slots` gets each op's operand slot, or -1. Anything else is refused with its reason. Shared by
// kConvInt8's shifted form (nn_quant_conv.cc) and kConvInt8Avx2.
CheckResult WindowEpilogueOps(BuildContext& bc, const memory::dims& dd, const Md& dst_md, std::vector<EpilogueOp>* ops,
                              std::vector<int>* slots, size_t first_post_op = 0);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_LOWER_NN_QUANT_CONV_AVX2_H_
