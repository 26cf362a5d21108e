// The EPContext operator (domain com.microsoft, since version 1), registered with libonnx's schema registry so
// the ONNX checker and shape inference accept context models. Attributes and defaults as ONNX Runtime's contrib
// schema: main_context (INT, 1), ep_cache_context (STRING), embed_mode (INT, 1), ep_sdk_version,
// onnx_model_filename, hardware_architecture, partition_name, source, notes (STRING), max_size (INT, 0).
#pragma once

namespace epctx {

constexpr const char* kMsDomain = "com.microsoft";
constexpr const char* kEpContextOp = "EPContext";

// Idempotent and thread-safe.
void RegisterEpContextSchema();

}  // namespace epctx
