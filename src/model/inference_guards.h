// Guards around libonnx 1.12 shape-inference functions that index a tensor's dims without checking its rank: on a
// hostile model they read past the end of a protobuf repeated field and crash the process (found by model_fuzz:
// STFT, ConvInteger; the same code serves Conv, QLinearConv, ConvTranspose and the pools, guarded alike).
// InstallInferenceGuards wraps each such schema's inference function with a check that refuses the model the way
// ONNX does (fail_shape_inference, which the loader reports as INVALID_GRAPH) before the original runs. It also adds
// rules libonnx 1.12 lacks after the original runs (Reshape to a run-time shape keeps its rank).
#pragma once

namespace epctx {

// Installs the guards once per process (thread-safe); call before the first onnx::shape_inference::InferShapes.
void InstallInferenceGuards();

}  // namespace epctx
