// The attributes by which the level-2 pass (passes/cpu_fusion.h) tells the CPU EP's Conv kernel to
// apply an activation as a oneDNN post-op. Internal: they never reach a saved model.
#pragma once

namespace epctx {

inline constexpr const char* kFusedActivationAttr = "_epctx_activation";               // "Relu", "HardSwish", ...
inline constexpr const char* kFusedActivationParamsAttr = "_epctx_activation_params";  // alpha, beta (floats)
// y * scale + shift applied after the activation (floats: scale, shift): Mul / Add by one-element constants that
// followed it (PP-OCR's learnable affine blocks).
inline constexpr const char* kFusedLinearAttr = "_epctx_linear";
// On ConvInteger / MatMulInteger (int 1): the Cast to float and the Mul by a one-element float that followed it
// (ONNX Runtime's dynamic quantizer) are fused: the node's output is float(acc) * scale, scale its fifth input
// (index 4; absent optional inputs before it are empty names).
inline constexpr const char* kFusedOutputScaleAttr = "_epctx_output_scale";
// With kFusedOutputScaleAttr (int 1): the Add of a constant float per output channel (ConvInteger, axis 1) or column
// (MatMulInteger, last axis) after the Mul is fused too, the bias being input 5. A Relu after that is
// kFusedActivationAttr = "Relu" on the same node.
inline constexpr const char* kFusedOutputBiasAttr = "_epctx_output_bias";

}  // namespace epctx
