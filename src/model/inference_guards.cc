#include "model/inference_guards.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <functional>
#include <mutex>
#include <set>
#include <utility>
#include <string>

#include "model/model.h"
#include "model/schemas_18_26.h"

namespace epctx {

namespace {

// Fails inference when input `i` has a known shape whose rank is not `rank`.
void RequireRank(onnx::InferenceContext& ctx, const char* op, size_t i, int rank, const char* what) {
  if (i >= ctx.getNumInputs() || !onnx::hasInputShape(ctx, i)) return;
  const int have = ctx.getInputType(i)->tensor_type().shape().dim_size();
  if (have != rank)
    fail_shape_inference(op, ": ", what, " (input ", i, ") must have rank ", rank, ", has rank ", have);
}

using InferenceStep = std::function<void(onnx::InferenceContext&)>;

// Wraps the inference function of every version of `op` (default domain): `before` runs first, `after` last (either
// may be empty).
void Wrap(const char* op, InferenceStep before, InferenceStep after) {
  std::set<const onnx::OpSchema*> done;
  for (int version = 1; version <= kMaxDefaultOpset; ++version) {  // libonnx's schemas and schemas_18_26's
    auto* schema = const_cast<onnx::OpSchema*>(onnx::OpSchemaRegistry::Schema(op, version, ""));
    if (!schema || !done.insert(schema).second) continue;
    onnx::InferenceFunction original = schema->GetTypeAndShapeInferenceFunction();
    if (!original) continue;
    schema->TypeAndShapeInferenceFunction([before, original, after](onnx::InferenceContext& ctx) {
      if (before) before(ctx);
      original(ctx);
      if (after) after(ctx);
    });
  }
}

// A check that refuses the node before libonnx's function reads it.
void Guard(const char* op, InferenceStep check) { Wrap(op, std::move(check), nullptr); }

// Convolutions and pools (libonnx's convPoolShapeInference / convTransposeShapeInference index the weight's and the
// attributes' entries by the input's spatial rank): input rank >= 2, weight (input `w`, or none if < 0) of the
// input's rank, per-axis attributes of the spatial rank (pads: twice).
void ConvPoolRanks(onnx::InferenceContext& ctx, const char* op, size_t x, int w) {
  if (!onnx::hasInputShape(ctx, x)) return;
  const int rank = ctx.getInputType(x)->tensor_type().shape().dim_size();
  if (rank < 2) fail_shape_inference(op, ": input ", x, " has rank ", rank, ", below 2");
  if (w >= 0 && static_cast<size_t>(w) < ctx.getNumInputs() && onnx::hasInputShape(ctx, w)) {
    const int wrank = ctx.getInputType(w)->tensor_type().shape().dim_size();
    if (wrank != rank) fail_shape_inference(op, ": weight (input ", w, ") has rank ", wrank, ", input ", rank);
  }
  const int spatial = rank - 2;
  for (const auto& [name, per_axis] : {std::pair<const char*, int>{"kernel_shape", 1}, {"strides", 1},
                                       {"dilations", 1}, {"pads", 2}, {"output_padding", 1}}) {
    const onnx::AttributeProto* a = ctx.getAttribute(name);
    if (a && a->ints_size() != per_axis * spatial)
      fail_shape_inference(op, ": attribute ", name, " has ", a->ints_size(), " values for ", spatial,
                           " spatial axes");
  }
  // The output size is divided by each stride (a stride of 0 was a division by zero inside libonnx).
  for (const char* name : {"strides", "dilations"}) {
    const onnx::AttributeProto* a = ctx.getAttribute(name);
    if (!a) continue;
    for (int64_t v : a->ints())
      if (v < 1) fail_shape_inference(op, ": attribute ", name, " has the value ", v, ", below 1");
  }
}

// Input `i` must be a tensor with a known shape (libonnx reads its dims without checking that it has any).
void RequireTensorShape(onnx::InferenceContext& ctx, const char* op, size_t i, const char* what) {
  const onnx::TypeProto* t = i < ctx.getNumInputs() ? ctx.getInputType(i) : nullptr;
  if (!t || t->value_case() != onnx::TypeProto::kTensorType || !t->tensor_type().has_shape())
    fail_shape_inference(op, ": ", what, " (input ", i, ") has no known tensor shape");
}

// An `axis` attribute (default `def`) must lie in [-rank, rank) of input `x` when its shape is known.
void AxisInRange(onnx::InferenceContext& ctx, const char* op, size_t x, int64_t def) {
  if (!onnx::hasInputShape(ctx, x)) return;
  const int64_t rank = ctx.getInputType(x)->tensor_type().shape().dim_size();
  const onnx::AttributeProto* a = ctx.getAttribute("axis");
  const int64_t axis = a ? a->i() : def;
  if (axis < -rank || axis >= rank)
    fail_shape_inference(op, ": axis ", axis, " is outside [", -rank, ", ", rank, ") for an input of rank ", rank);
}

// A rule that libonnx 1.12 lacks and later ONNX versions have, run after libonnx's own.
void Extend(const char* op, InferenceStep after) { Wrap(op, nullptr, std::move(after)); }

// Reshape to a shape computed at run time: libonnx 1.12 gives no shape at all; ONNX 1.14 and ONNX Runtime give the
// rank, the length of the shape input, with unknown dims. Without it every op after the Reshape lost its rank (the
// VITS decoders of the zoo's piper_vits: their length comes from the predicted durations).
void ReshapeRankFromShapeInput(onnx::InferenceContext& ctx) {
  if (ctx.getNumOutputs() < 1 || ctx.getNumInputs() < 2) return;
  onnx::TypeProto* out = ctx.getOutputType(0);
  if (!out || out->value_case() != onnx::TypeProto::kTensorType || out->tensor_type().has_shape()) return;
  if (!onnx::hasInputShape(ctx, 1)) return;
  const onnx::TensorShapeProto& s = ctx.getInputType(1)->tensor_type().shape();
  if (s.dim_size() != 1 || !s.dim(0).has_dim_value()) return;
  const int64_t rank = s.dim(0).dim_value();
  if (rank < 0 || rank > 64) return;  // a hostile length: leave the shape unknown (the kernel checks at run time)
  onnx::TensorShapeProto* shape = out->mutable_tensor_type()->mutable_shape();
  for (int64_t i = 0; i < rank; ++i) shape->add_dim();
}

}  // namespace

void InstallInferenceGuards() {
  static std::once_flag once;
  std::call_once(once, [] {
    RegisterNewerOpsetSchemas();  // wrapped below like libonnx's own (AveragePool-19, LpPool-18 call libonnx's)
    // STFT-17 reads signal dims 0..2 and window dim 0 (signal [batch, length, 1|2], window [length]).
    Guard("STFT", [](onnx::InferenceContext& ctx) {
      RequireRank(ctx, "STFT", 0, 3, "signal");
      RequireRank(ctx, "STFT", 2, 1, "window");
    });
    for (const char* op : {"Conv", "ConvInteger", "ConvTranspose"})
      Guard(op, [op](onnx::InferenceContext& ctx) { ConvPoolRanks(ctx, op, 0, 1); });
    Guard("QLinearConv", [](onnx::InferenceContext& ctx) { ConvPoolRanks(ctx, "QLinearConv", 0, 3); });
    // MaxUnpool's inference merged dims of X and I by X's rank (I has X's shape: the "weight" check fits it).
    // Without output_shape it reads dim 1 of I whatever I is.
    Guard("MaxUnpool", [](onnx::InferenceContext& ctx) {
      if (onnx::hasInputShape(ctx, 0) && ctx.getNumInputs() < 3) RequireTensorShape(ctx, "MaxUnpool", 1, "I");
      ConvPoolRanks(ctx, "MaxUnpool", 0, 1);
    });
    // MaxRoiPool builds a 4-d output from pooled_shape[0..1], which must have one value per spatial axis of X.
    Guard("MaxRoiPool", [](onnx::InferenceContext& ctx) { RequireRank(ctx, "MaxRoiPool", 0, 4, "X"); });
    // LayerNormalization-17 builds Mean/InvStdDev shapes from dims [0, axis) after adding the rank to a negative axis.
    Guard("LayerNormalization", [](onnx::InferenceContext& ctx) { AxisInRange(ctx, "LayerNormalization", 0, -1); });
    for (const char* op : {"MaxPool", "AveragePool", "LpPool"})
      Guard(op, [op](onnx::InferenceContext& ctx) { ConvPoolRanks(ctx, op, 0, -1); });
    Extend("Reshape", ReshapeRankFromShapeInput);
  });
}

}  // namespace epctx
