// The window-sum correction of an int8 convolution whose weights are stored shifted (kConvInt8 with a correction
// factor; nn_quant_conv.cc lowers and builds it). ONNX Runtime's dynamic quantizer writes uint8 weights w with a zero
// point wz that leaves w - wz outside int8; the step stores s = w - shift (int8) once and lets oneDNN sum
// (x - xz) * s into int32; this adds the rest, d * sum over the window of (x - xz) with d = shift - wz, in int32 (the
// padding reads as xz and adds 0), then runs the float epilogue a oneDNN int8 convolution would have run as post-ops
// (the scale, the bias, activations, residual Adds), with the same roundings: one per operation, in order, no fused
// multiply-add except where oneDNN's own eltwise uses one (linear). Our loops; internal to lower/.
//
// Thread safety: ConvInt8WindowEpilogue only reads `geom` and the epilogue list; it runs on the calling thread's
// OpenMP team and writes only `acc_dst`.
#ifndef EPCTX_PROVIDERS_AOTCPU_LOWER_NN_QUANT_WINDOW_H_
#define EPCTX_PROVIDERS_AOTCPU_LOWER_NN_QUANT_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace epctx {
namespace aotcpu {

// Geometry of the convolution, spatial dims as D, H, W (rank 1 and 2 padded in front with 1s). Dilations are ONNX's
// (1 = dense), pads the leading ones (the trailing pads only size the output, which `out` gives).
struct WindowGeometry {
  int64_t n = 0, c = 0, oc = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1},
          dilation[3] = {1, 1, 1}, pad_begin[3] = {0, 0, 0};

};

// One operation of the float epilogue, applied to every element y of the convolution's result in order.
struct EpilogueOp {
  enum Kind : uint32_t {
    kAdd = 0,     // y = y + b
    kMul = 1,     // y = y * b
    kRelu = 2,    // y = y > 0 ? y : y * alpha (alpha 0: y > 0 ? y : 0, as oneDNN's max)
    kClip = 3,    // y = min(max(y, alpha), beta), oneDNN's clip_v2 order
    kLinear = 4,  // y = fma(y, alpha, beta), as oneDNN's linear eltwise
  };
  enum Operand : uint32_t {
    kNone = 0,     // eltwise
    kScalar = 1,   // b = operand[0]
    kChannel = 2,  // b = operand[oc]
    kFull = 3,     // b = operand at y's own position (the destination's layout)
  };
  Kind kind = kAdd;
  Operand operand = kNone;
  float alpha = 0, beta = 0;
  const float* data = nullptr;  // kScalar / kChannel / kFull: set per run
};

// src: the convolution's source, u8 channels-last [N, D, H, W, C] dense. acc_dst: the convolution's int32 sums
// sum (x - xz) * s in channels-last [N, OD, OH, OW, OC] dense, replaced in place by the float results. xz: the
// source zero point. d: the weights' correction factor. Every sum wraps modulo 2^32, as oneDNN's int32 accumulators
// do. Allocates a few rows of per-thread buffers.
void ConvInt8WindowEpilogue(const WindowGeometry& geom, const uint8_t* src, int32_t xz, int32_t d, void* acc_dst,
                            const std::vector<EpilogueOp>& ops);

// kQConvAvx2's epilogue, kQConv's arithmetic (oneDNN's int8 convolution with output scales and a round post-op):
// acc holds `positions` x `oc` int32 sums (channels-last); v = float(acc + bias[o]) * scales[o] (the bias added in
// int32, wrapping; none when null), rounded half to even, then `ops`; written as float to `dst` (dst_dtype 1; dst
// may be acc itself), or (dst_dtype 2 u8, 3 i8) + dst_zp and saturated. One rounding per operation.
void QConvEpilogue(const int32_t* acc, int64_t positions, int64_t oc, const int32_t* bias, const float* scales,
                   const std::vector<EpilogueOp>& ops, uint32_t dst_dtype, int32_t dst_zp, void* dst);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_LOWER_NN_QUANT_WINDOW_H_
