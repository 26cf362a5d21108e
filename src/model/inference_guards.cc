#include "model/inference_guards.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <functional>
#include <mutex>
#include <string>

namespace epctx {

namespace {

// Fails inference when input `i` has a known shape whose rank is not `rank`.
void RequireRank(onnx::InferenceContext& ctx, const char* op, size_t i, int rank, const char* what) {
  if (i >= ctx.getNumInputs() || !onnx::hasInputShape(ctx, i)) return;
  const int have = ctx.getInputType(i)->tensor_type().shape().dim_size();
  if (have != rank)
    fail_shape_inference(op, ": ", what, " (input ", i, ") must have rank ", rank, ", has rank ", have);
}

void Guard(const char* op, int version, std::function<void(onnx::InferenceContext&)> check) {
  auto* schema = const_cast<onnx::OpSchema*>(onnx::OpSchemaRegistry::Schema(op, version, ""));
  if (!schema || schema->SinceVersion() != version) return;
  onnx::InferenceFunction original = schema->GetTypeAndShapeInferenceFunction();
  if (!original) return;
  schema->TypeAndShapeInferenceFunction([check, original](onnx::InferenceContext& ctx) {
    check(ctx);
    original(ctx);
  });
}

}  // namespace

void InstallInferenceGuards() {
  static std::once_flag once;
  std::call_once(once, [] {
    // STFT-17 reads signal dims 0..2 and window dim 0 (signal [batch, length, 1|2], window [length]).
    Guard("STFT", 17, [](onnx::InferenceContext& ctx) {
      RequireRank(ctx, "STFT", 0, 3, "signal");
      RequireRank(ctx, "STFT", 2, 1, "window");
    });
  });
}

}  // namespace epctx
