#include "model/schemas_18_26.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/data_type.h"
#include "core/window.h"
#include "model/model.h"

namespace epctx {

namespace {

using onnx::AttributeProto;
using onnx::InferenceContext;
using onnx::OpSchema;
using onnx::TensorShapeProto;

// Type lists, in the names libonnx 1.12 parses (the float8/4-bit/2-bit types of later opsets are not among them; the
// checker does not compare node types with these lists and shape inference runs without check_type, so float8 and
// int4/uint4 values pass; CheckElementTypes refuses the 2-bit/float4/float8e8m0 types before the checker runs).
const std::vector<std::string> kFloats = {"tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)"};
const std::vector<std::string> kInts = {"tensor(uint8)", "tensor(uint16)", "tensor(uint32)", "tensor(uint64)",
                                        "tensor(int8)",  "tensor(int16)",  "tensor(int32)",  "tensor(int64)"};
const std::vector<std::string> kQuantized = {"tensor(uint8)", "tensor(int8)", "tensor(uint16)", "tensor(int16)",
                                             "tensor(int32)"};

std::vector<std::string> Join(std::initializer_list<std::vector<std::string>> lists) {
  std::vector<std::string> all;
  for (const auto& l : lists) all.insert(all.end(), l.begin(), l.end());
  return all;
}
const std::vector<std::string> kNumeric = Join({kFloats, kInts});
const std::vector<std::string> kAll =
    Join({kNumeric, {"tensor(bool)", "tensor(string)", "tensor(complex64)", "tensor(complex128)"}});

OpSchema Op(const char* name, int since) {
  OpSchema s;
  s.SetName(name).SetDomain("").SinceVersion(since).SetLocation(__FILE__, __LINE__);
  s.SetDoc(std::string("ONNX ") + name + "-" + std::to_string(since) + " (registered by epctx for libonnx 1.12)");
  return s;
}

// ---- inference helpers ----------------------------------------------------------------------------------------

// Input `i` is present (a name, not "") and typed. An absent optional input and an input whose type is not known yet
// look alike to an InferenceContext; callers treat both as "not known", which can only make a shape less specific.
bool Typed(InferenceContext& ctx, size_t i) { return i < ctx.getNumInputs() && ctx.getInputType(i) != nullptr; }
bool Given(InferenceContext& ctx, size_t i) { return i < ctx.getNumInputs(); }

// Bits per element of an ONNX element type code libonnx 1.12 parses; 0 for string, undefined or unknown codes.
size_t ElementBits(int64_t code) {
  switch (code) {
    case onnx::TensorProto::BOOL: case onnx::TensorProto::UINT8: case onnx::TensorProto::INT8: return 8;
    case 17: case 18: case 19: case 20: return 8;  // the float8 types, which libonnx 1.12's enum does not name
    case onnx::TensorProto::UINT16: case onnx::TensorProto::INT16: case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16: return 16;
    case onnx::TensorProto::UINT32: case onnx::TensorProto::INT32: case onnx::TensorProto::FLOAT: return 32;
    case onnx::TensorProto::UINT64: case onnx::TensorProto::INT64: case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::COMPLEX64: return 64;
    case onnx::TensorProto::COMPLEX128: return 128;
    default: return 0;
  }
}

// The values of a constant integer input (an initializer or Constant), when its data is in the model.
bool ConstInts(InferenceContext& ctx, size_t i, std::vector<int64_t>* out) {
  if (i >= ctx.getNumInputs()) return false;
  const onnx::TensorProto* t = ctx.getInputData(i);
  if (!t || t->data_location() == onnx::TensorProto::EXTERNAL) return false;
  int64_t n = 1;
  for (int64_t d : t->dims()) {
    if (d < 0 || d > (1 << 20)) return false;
    n *= d;
    if (n > (1 << 20)) return false;
  }
  out->clear();
  if (t->data_type() == onnx::TensorProto::INT64) {
    if (t->has_raw_data()) {
      if (t->raw_data().size() != static_cast<size_t>(n) * 8) return false;
      out->resize(static_cast<size_t>(n));
      if (n) std::memcpy(out->data(), t->raw_data().data(), t->raw_data().size());
    } else {
      out->assign(t->int64_data().begin(), t->int64_data().end());
    }
  } else if (t->data_type() == onnx::TensorProto::INT32) {
    if (t->has_raw_data()) {
      if (t->raw_data().size() != static_cast<size_t>(n) * 4) return false;
      for (int64_t k = 0; k < n; ++k) {
        int32_t v;
        std::memcpy(&v, t->raw_data().data() + 4 * k, 4);
        out->push_back(v);
      }
    } else {
      out->assign(t->int32_data().begin(), t->int32_data().end());
    }
  } else {
    return false;
  }
  return static_cast<int64_t>(out->size()) == n;
}

bool ConstFloats(InferenceContext& ctx, size_t i, std::vector<float>* out) {
  if (i >= ctx.getNumInputs()) return false;
  const onnx::TensorProto* t = ctx.getInputData(i);
  if (!t || t->data_location() == onnx::TensorProto::EXTERNAL || t->data_type() != onnx::TensorProto::FLOAT)
    return false;
  int64_t n = 1;
  for (int64_t d : t->dims()) {
    if (d < 0 || d > (1 << 20)) return false;
    n *= d;
    if (n > (1 << 20)) return false;
  }
  if (t->has_raw_data()) {
    if (t->raw_data().size() != static_cast<size_t>(n) * 4) return false;
    out->resize(static_cast<size_t>(n));
    if (n) std::memcpy(out->data(), t->raw_data().data(), t->raw_data().size());
  } else {
    out->assign(t->float_data().begin(), t->float_data().end());
  }
  return static_cast<int64_t>(out->size()) == n;
}

bool IntsAttr(InferenceContext& ctx, const char* name, std::vector<int64_t>* out) {
  const AttributeProto* a = ctx.getAttribute(name);
  if (!a) return false;
  out->assign(a->ints().begin(), a->ints().end());
  return true;
}

// Normalizes axis `a` for `rank`; fails inference (the output stays unknown) when out of range.
int64_t NormAxis(int64_t a, int64_t rank, const char* op) {
  if (a < -rank || a >= rank) fail_shape_inference(op, ": axis ", a, " is outside [", -rank, ", ", rank, ")");
  return a < 0 ? a + rank : a;
}

// Output `o` gets the rank `rank` with every dim unknown.
void RankOnly(InferenceContext& ctx, size_t o, int64_t rank) {
  TensorShapeProto* s = onnx::getOutputShape(ctx, o);
  s->clear_dim();
  for (int64_t k = 0; k < rank; ++k) s->add_dim();
}

int InputRank(InferenceContext& ctx, size_t i) { return onnx::getInputShape(ctx, i).dim_size(); }

void SameAsInput0(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
}

// The inference function of the latest libonnx 1.12 schema of `op` at or below opset 17 (for versions whose change
// does not touch shapes, or whose new attribute is handled by the caller afterwards).
onnx::InferenceFunction Opset17Inference(const char* op) {
  const OpSchema* s = onnx::OpSchemaRegistry::Schema(op, 17, "");
  return s ? s->GetTypeAndShapeInferenceFunction() : onnx::InferenceFunction();
}

// ---- Reduce*-18 (axes an optional input) ----------------------------------------------------------------------

void ReduceInference(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const TensorShapeProto& in = onnx::getInputShape(ctx, 0);
  const int64_t rank = in.dim_size();
  const bool keepdims = onnx::getAttribute(ctx, "keepdims", 1) != 0;
  const bool noop = onnx::getAttribute(ctx, "noop_with_empty_axes", 0) != 0;
  std::vector<int64_t> axes;
  if (Given(ctx, 1) && !ConstInts(ctx, 1, &axes)) {
    // Axes known only at run time: with keepdims the rank stays; without, even the rank is unknown.
    if (keepdims) RankOnly(ctx, 0, rank);
    return;
  }
  TensorShapeProto* out = onnx::getOutputShape(ctx, 0);
  out->clear_dim();
  if (axes.empty() && noop) {
    *out = in;
    return;
  }
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) reduced[static_cast<size_t>(NormAxis(a, rank, "Reduce"))] = true;
  for (int64_t k = 0; k < rank; ++k) {
    if (!reduced[static_cast<size_t>(k)]) *out->add_dim() = in.dim(static_cast<int>(k));
    else if (keepdims) out->add_dim()->set_dim_value(1);
  }
}

void RegisterReduce(const char* name, int since, const std::vector<std::string>& types) {
  onnx::RegisterSchema(
      Op(name, since)
          .Attr("keepdims", "keep the reduced dimensions (1) or not (0)", AttributeProto::INT, static_cast<int64_t>(1))
          .Attr("noop_with_empty_axes", "with empty axes: 0 reduces every axis, 1 is an identity",
                AttributeProto::INT, static_cast<int64_t>(0))
          .Input(0, "data", "input tensor", "T")
          .Input(1, "axes", "axes to reduce (1-D int64)", "tensor(int64)", OpSchema::Optional)
          .Output(0, "reduced", "reduced tensor", "T")
          .TypeConstraint("T", types, "numeric types")
          .TypeAndShapeInferenceFunction(ReduceInference));
}

// ---- Split-18 (num_outputs) ------------------------------------------------------------------------------------

void SplitInference(InferenceContext& ctx) {
  for (size_t o = 0; o < ctx.getNumOutputs(); ++o) onnx::propagateElemTypeFromInputToOutput(ctx, 0, o);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const TensorShapeProto& in = onnx::getInputShape(ctx, 0);
  const int64_t rank = in.dim_size();
  const int64_t axis = NormAxis(onnx::getAttribute(ctx, "axis", 0), rank, "Split");
  const int64_t n = static_cast<int64_t>(ctx.getNumOutputs());
  const onnx::AttributeProto* num_outputs = ctx.getAttribute("num_outputs");
  if (num_outputs && num_outputs->i() != n)
    fail_shape_inference("Split: num_outputs is ", num_outputs->i(), " but the node has ", n, " outputs");
  std::vector<int64_t> parts;
  const bool has_split = Given(ctx, 1);
  if (has_split) {
    if (!ConstInts(ctx, 1, &parts)) parts.clear();
    else if (static_cast<int64_t>(parts.size()) != n)
      fail_shape_inference("Split: split has ", parts.size(), " values for ", n, " outputs");
  } else if (in.dim(static_cast<int>(axis)).has_dim_value()) {
    // Equal parts of ceil(dim / n), the last one smaller (opset 18; before it, the dim had to divide evenly, and
    // then the two rules agree).
    const int64_t d = in.dim(static_cast<int>(axis)).dim_value();
    const int64_t chunk = (d + n - 1) / n;
    for (int64_t k = 0; k < n; ++k) parts.push_back(k + 1 < n ? chunk : d - chunk * (n - 1));
    if (parts.back() < 0) fail_shape_inference("Split: dim ", d, " cannot be split into ", n, " parts");
  }
  for (int64_t o = 0; o < n; ++o) {
    TensorShapeProto* out = onnx::getOutputShape(ctx, static_cast<size_t>(o));
    *out = in;
    out->mutable_dim(static_cast<int>(axis))->Clear();
    if (!parts.empty()) out->mutable_dim(static_cast<int>(axis))->set_dim_value(parts[static_cast<size_t>(o)]);
  }
}

// ---- Pad-18 (axes input) ---------------------------------------------------------------------------------------

void PadInference(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const TensorShapeProto& in = onnx::getInputShape(ctx, 0);
  const int64_t rank = in.dim_size();
  std::vector<int64_t> pads, axes;
  const bool known_pads = ConstInts(ctx, 1, &pads);
  bool known_axes = true;
  if (Given(ctx, 3)) known_axes = ConstInts(ctx, 3, &axes);
  if (!known_pads || !known_axes) {
    RankOnly(ctx, 0, rank);
    return;
  }
  if (!Given(ctx, 3))
    for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
  if (pads.size() != 2 * axes.size())
    fail_shape_inference("Pad: pads has ", pads.size(), " values for ", axes.size(), " axes");
  TensorShapeProto* out = onnx::getOutputShape(ctx, 0);
  *out = in;
  const size_t na = axes.size();
  for (size_t k = 0; k < na; ++k) {
    const int64_t a = NormAxis(axes[k], rank, "Pad");
    auto* d = out->mutable_dim(static_cast<int>(a));
    if (d->has_dim_value()) {
      const int64_t v = d->dim_value() + pads[k] + pads[k + na];
      if (v < 0) fail_shape_inference("Pad: axis ", a, " would have size ", v);
      d->set_dim_value(v);
    } else {
      d->Clear();
    }
  }
}

// ---- Resize-18/19 (antialias, axes, keep_aspect_ratio_policy) --------------------------------------------------

void ResizeInference(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const TensorShapeProto& in = onnx::getInputShape(ctx, 0);
  const int64_t rank = in.dim_size();
  std::vector<int64_t> axes;
  if (!IntsAttr(ctx, "axes", &axes))
    for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
  for (auto& a : axes) a = NormAxis(a, rank, "Resize");
  std::vector<int64_t> sizes;
  std::vector<float> scales;
  const bool stretch = onnx::getAttribute(ctx, "keep_aspect_ratio_policy", std::string("stretch")) == "stretch";
  TensorShapeProto* out = onnx::getOutputShape(ctx, 0);
  *out = in;
  bool known = false;
  if (Given(ctx, 3) && ConstInts(ctx, 3, &sizes) && !sizes.empty()) {
    if (sizes.size() != axes.size())
      fail_shape_inference("Resize: sizes has ", sizes.size(), " values for ", axes.size(), " axes");
    if (stretch) {
      for (size_t k = 0; k < axes.size(); ++k) out->mutable_dim(static_cast<int>(axes[k]))->set_dim_value(sizes[k]);
      known = true;
    } else {
      // keep_aspect_ratio_policy: one scale, the smallest (not_larger) or largest (not_smaller) of sizes / input over
      // the axes, and each output dim round(scale * input), in float as the CPU EP (misc_resize.cc) and ORT compute
      // it. Known only when every listed input dim is.
      const bool not_larger = onnx::getAttribute(ctx, "keep_aspect_ratio_policy", std::string()) == "not_larger";
      float sc = not_larger ? std::numeric_limits<float>::max() : 0.0f;
      bool dims_known = true;
      for (size_t k = 0; k < axes.size(); ++k) {
        const auto& d = in.dim(static_cast<int>(axes[k]));
        if (!d.has_dim_value() || d.dim_value() <= 0 || sizes[k] < 0) {
          dims_known = false;
          break;
        }
        const float r = static_cast<float>(sizes[k]) / static_cast<float>(d.dim_value());
        sc = not_larger ? std::min(sc, r) : std::max(sc, r);
      }
      if (dims_known) {
        for (size_t k = 0; k < axes.size(); ++k) {
          auto* d = out->mutable_dim(static_cast<int>(axes[k]));
          d->set_dim_value(static_cast<int64_t>(std::round(sc * static_cast<float>(d->dim_value()))));
        }
        known = true;
      }
    }
  } else if (Given(ctx, 2) && ConstFloats(ctx, 2, &scales) && !scales.empty() &&
             onnx::getAttribute(ctx, "coordinate_transformation_mode", std::string()) != "tf_crop_and_resize") {
    // (tf_crop_and_resize scales the roi's extent, known here only with the roi: left unknown.)
    if (scales.size() != axes.size())
      fail_shape_inference("Resize: scales has ", scales.size(), " values for ", axes.size(), " axes");
    for (size_t k = 0; k < axes.size(); ++k) {
      auto* d = out->mutable_dim(static_cast<int>(axes[k]));
      if (d->has_dim_value() && scales[k] > 0)
        d->set_dim_value(static_cast<int64_t>(static_cast<float>(d->dim_value()) * scales[k]));  // floor
      else
        d->Clear();
    }
    known = true;
  }
  if (!known)
    for (int64_t a : axes) out->mutable_dim(static_cast<int>(a))->Clear();
}

// ---- QuantizeLinear-19/21/23, DequantizeLinear-21/23 -----------------------------------------------------------

void QuantizeInference(InferenceContext& ctx) {
  if (Given(ctx, 2)) {
    // The zero point's type is the output's (left unknown while the zero point's is).
    if (Typed(ctx, 2)) onnx::propagateElemTypeFromInputToOutput(ctx, 2, 0);
  } else {
    const int64_t dt = onnx::getAttribute(ctx, "output_dtype", static_cast<int64_t>(0));
    onnx::updateOutputElemType(ctx, 0, dt != 0 ? static_cast<int32_t>(dt) : onnx::TensorProto::UINT8);
  }
  if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
}

void DequantizeInference(InferenceContext& ctx) {
  const int64_t dt = onnx::getAttribute(ctx, "output_dtype", static_cast<int64_t>(0));
  if (dt != 0) onnx::updateOutputElemType(ctx, 0, static_cast<int32_t>(dt));
  else onnx::propagateElemTypeFromInputToOutput(ctx, 1, 0);
  if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
}

void RegisterQuantize(int since) {
  OpSchema s = Op("QuantizeLinear", since);
  s.Attr("axis", "axis of per-axis and blocked quantization", AttributeProto::INT, static_cast<int64_t>(1))
      .Attr("saturate", "float8 outputs: saturate (1) or not", AttributeProto::INT, static_cast<int64_t>(1));
  if (since >= 21) {
    s.Attr("block_size", "block size of blocked quantization (0: none)", AttributeProto::INT, static_cast<int64_t>(0))
        .Attr("output_dtype", "the output type when y_zero_point is absent (0: uint8)", AttributeProto::INT,
              static_cast<int64_t>(0));
  }
  if (since >= 23)
    s.Attr("precision", "the type the division is done in (0: y_scale's)", AttributeProto::INT,
           static_cast<int64_t>(0));
  s.Input(0, "x", "input", "T1")
      .Input(1, "y_scale", "scale", "T2")
      .Input(2, "y_zero_point", "zero point", "T3", OpSchema::Optional)
      .Output(0, "y", "quantized output", "T3")
      .TypeConstraint("T1", Join({kFloats, {"tensor(int32)"}}), "input types")
      .TypeConstraint("T2", Join({kFloats, {"tensor(int32)"}}), "scale types")
      .TypeConstraint("T3", kQuantized, "quantized types")
      .TypeAndShapeInferenceFunction(QuantizeInference);
  onnx::RegisterSchema(std::move(s));
}

void RegisterDequantize(int since) {
  OpSchema s = Op("DequantizeLinear", since);
  s.Attr("axis", "axis of per-axis and blocked dequantization", AttributeProto::INT, static_cast<int64_t>(1))
      .Attr("block_size", "block size of blocked dequantization (0: none)", AttributeProto::INT,
            static_cast<int64_t>(0));
  if (since >= 23)
    s.Attr("output_dtype", "the output type (0: x_scale's)", AttributeProto::INT, static_cast<int64_t>(0));
  s.Input(0, "x", "quantized input", "T1")
      .Input(1, "x_scale", "scale", "T2")
      .Input(2, "x_zero_point", "zero point", "T1", OpSchema::Optional)
      .Output(0, "y", "dequantized output", "T3")
      .TypeConstraint("T1", kQuantized, "quantized types")
      .TypeConstraint("T2", kFloats, "scale types")
      .TypeConstraint("T3", kFloats, "output types")
      .TypeAndShapeInferenceFunction(DequantizeInference);
  onnx::RegisterSchema(std::move(s));
}

// ---- Pools: AveragePool-19 (dilations), LpPool-18 (ceil_mode, dilations) ---------------------------------------

// libonnx 1.12's pool inference where it is right (no dilation other than 1, no ceil_mode: LpPool's opset-11 function
// ignores it, and AveragePool's keeps a last window that starts inside the end padding); otherwise our own, with the
// CPU EP's window rule (core/window.h's WindowOutputSize, as ONNX Runtime 1.30); VALID is that rule without pads,
// SAME_* ceil(in / s). A spatial dim that is not known (or a window that does not fit) is left unknown for the kernel
// to judge at run time.
onnx::InferenceFunction PoolInference(const char* op) {
  onnx::InferenceFunction old = Opset17Inference(op);
  return [old](InferenceContext& ctx) {
    std::vector<int64_t> dilations, kernel, strides, pads;
    IntsAttr(ctx, "dilations", &dilations);
    const bool ceil_mode = onnx::getAttribute(ctx, "ceil_mode", 0) != 0;
    bool plain = true;
    for (int64_t d : dilations) plain = plain && d == 1;
    if (ceil_mode) plain = false;
    if (old && plain) {
      old(ctx);
      return;
    }
    onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
    if (!onnx::hasInputShape(ctx, 0)) return;
    const TensorShapeProto& in = onnx::getInputShape(ctx, 0);
    if (in.dim_size() < 2) fail_shape_inference("pool: input has rank ", in.dim_size(), ", below 2");
    const size_t r = static_cast<size_t>(in.dim_size() - 2);
    IntsAttr(ctx, "kernel_shape", &kernel);
    IntsAttr(ctx, "strides", &strides);
    IntsAttr(ctx, "pads", &pads);
    if (kernel.size() != r) fail_shape_inference("pool: kernel_shape has ", kernel.size(), " values for ", r,
                                                 " spatial dims");
    if ((!strides.empty() && strides.size() != r) || (!dilations.empty() && dilations.size() != r) ||
        (!pads.empty() && pads.size() != 2 * r))
      fail_shape_inference("pool: strides, dilations or pads do not match the ", r, " spatial dims");
    const std::string auto_pad = onnx::getAttribute(ctx, "auto_pad", std::string("NOTSET"));
    TensorShapeProto* out = onnx::getOutputShape(ctx, 0);
    out->clear_dim();
    *out->add_dim() = in.dim(0);
    *out->add_dim() = in.dim(1);
    for (size_t i = 0; i < r; ++i) {
      auto* d = out->add_dim();
      const auto& src = in.dim(static_cast<int>(i + 2));
      const int64_t s = strides.empty() ? 1 : strides[i], dil = dilations.empty() ? 1 : dilations[i];
      if (!src.has_dim_value() || s <= 0 || dil <= 0 || kernel[i] <= 0) continue;
      const int64_t x = src.dim_value(), ek = (kernel[i] - 1) * dil + 1;
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        d->set_dim_value((x + s - 1) / s);
        continue;
      }
      const bool valid = auto_pad == "VALID";
      const int64_t pb = valid || pads.empty() ? 0 : pads[i], pe = valid || pads.empty() ? 0 : pads[i + r];
      const int64_t o = WindowOutputSize(x, ek, s, pb, pe, ceil_mode);
      if (o >= 0) d->set_dim_value(o);
    }
  };
}

// ---- small ops -------------------------------------------------------------------------------------------------

void BroadcastInference(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (onnx::hasNInputShapes(ctx, 2))
    onnx::bidirectionalBroadcastShapeInference(onnx::getInputShape(ctx, 0), onnx::getInputShape(ctx, 1),
                                               *onnx::getOutputShape(ctx, 0));
}

void RegisterUnary(const char* name, int since, const std::vector<std::string>& types,
                   std::vector<std::pair<const char*, float>> float_attrs = {},
                   std::vector<std::pair<const char*, const char*>> string_attrs = {}) {
  OpSchema s = Op(name, since);
  for (const auto& [a, v] : float_attrs) s.Attr(a, "see the ONNX operator documentation", AttributeProto::FLOAT, v);
  for (const auto& [a, v] : string_attrs)
    s.Attr(a, "see the ONNX operator documentation", AttributeProto::STRING, std::string(v));
  s.Input(0, "X", "input", "T").Output(0, "Y", "output", "T").TypeConstraint("T", types, "types")
      .TypeAndShapeInferenceFunction(SameAsInput0);
  onnx::RegisterSchema(std::move(s));
}

void RegisterBitwise(const char* name) {
  onnx::RegisterSchema(Op(name, 18)
                           .Input(0, "A", "first operand", "T")
                           .Input(1, "B", "second operand", "T")
                           .Output(0, "C", "result", "T")
                           .TypeConstraint("T", kInts, "integer types")
                           .TypeAndShapeInferenceFunction(BroadcastInference));
}

void RegisterGroupNormalization(int since) {
  OpSchema s = Op("GroupNormalization", since);
  s.Attr("epsilon", "added to the variance", AttributeProto::FLOAT, 1e-5f)
      .Attr("num_groups", "number of groups the channels are divided into", AttributeProto::INT);
  if (since >= 21)
    s.Attr("stash_type", "type of the mean/variance computation", AttributeProto::INT, static_cast<int64_t>(1));
  s.Input(0, "X", "input [N, C, ...]", "T")
      .Input(1, "scale", since >= 21 ? "scale [C]" : "scale [num_groups]", "T")
      .Input(2, "bias", since >= 21 ? "bias [C]" : "bias [num_groups]", "T")
      .Output(0, "Y", "output, X's shape", "T")
      .TypeConstraint("T", kFloats, "float types")
      .TypeAndShapeInferenceFunction(SameAsInput0);
  onnx::RegisterSchema(std::move(s));
}

// CenterCropPad-18: the axes listed (all by default) take the sizes of the `shape` input.
void CenterCropPadInference(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const TensorShapeProto& in = onnx::getInputShape(ctx, 0);
  const int64_t rank = in.dim_size();
  std::vector<int64_t> axes;
  if (!IntsAttr(ctx, "axes", &axes))
    for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
  std::vector<int64_t> shape;
  TensorShapeProto* out = onnx::getOutputShape(ctx, 0);
  *out = in;
  const bool known = ConstInts(ctx, 1, &shape);
  if (known && shape.size() != axes.size())
    fail_shape_inference("CenterCropPad: shape has ", shape.size(), " values for ", axes.size(), " axes");
  for (size_t k = 0; k < axes.size(); ++k) {
    auto* d = out->mutable_dim(static_cast<int>(NormAxis(axes[k], rank, "CenterCropPad")));
    d->Clear();
    if (known) d->set_dim_value(shape[k]);
  }
}

// Col2Im-18: [N, C * prod(block_shape), L] -> [N, C, image_shape...].
void Col2ImInference(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  std::vector<int64_t> image, block;
  const bool known_image = ConstInts(ctx, 1, &image);
  const bool known_block = ConstInts(ctx, 2, &block);
  int64_t spatial = -1;
  if (known_image) spatial = static_cast<int64_t>(image.size());
  else if (onnx::hasInputShape(ctx, 1) && InputRank(ctx, 1) == 1 && onnx::getInputShape(ctx, 1).dim(0).has_dim_value())
    spatial = onnx::getInputShape(ctx, 1).dim(0).dim_value();
  if (spatial < 0 || spatial > 16) return;
  TensorShapeProto* out = onnx::getOutputShape(ctx, 0);
  out->clear_dim();
  auto* n = out->add_dim();
  auto* c = out->add_dim();
  if (onnx::hasInputShape(ctx, 0) && InputRank(ctx, 0) == 3) {
    const TensorShapeProto& in = onnx::getInputShape(ctx, 0);
    *n = in.dim(0);
    if (known_block && in.dim(1).has_dim_value()) {
      int64_t prod = 1;
      for (int64_t b : block) prod *= b;
      if (prod > 0 && in.dim(1).dim_value() % prod == 0) c->set_dim_value(in.dim(1).dim_value() / prod);
    }
  }
  for (int64_t k = 0; k < spatial; ++k) {
    auto* d = out->add_dim();
    if (known_image) d->set_dim_value(image[static_cast<size_t>(k)]);
  }
}

// DFT-20: dft_length and axis are inputs; the output has the input's rank, its last dim 2 (complex).
void DftInference(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const TensorShapeProto& in = onnx::getInputShape(ctx, 0);
  const int64_t rank = in.dim_size();
  if (rank < 2) fail_shape_inference("DFT: input has rank ", rank, ", below 2");
  std::vector<int64_t> v;
  int64_t axis = -2;
  bool known_axis = true;
  if (Given(ctx, 2)) {
    known_axis = ConstInts(ctx, 2, &v) && v.size() == 1;
    if (known_axis) axis = v[0];
  }
  bool known_length = true;
  int64_t length = -1;
  if (Given(ctx, 1)) {
    known_length = ConstInts(ctx, 1, &v) && v.size() == 1;
    if (known_length) length = v[0];
  }
  const bool onesided = onnx::getAttribute(ctx, "onesided", 0) != 0;
  TensorShapeProto* out = onnx::getOutputShape(ctx, 0);
  *out = in;
  out->mutable_dim(static_cast<int>(rank - 1))->Clear();
  out->mutable_dim(static_cast<int>(rank - 1))->set_dim_value(2);
  if (!known_axis) {
    for (int64_t k = 0; k + 1 < rank; ++k) out->mutable_dim(static_cast<int>(k))->Clear();
    return;
  }
  // The signal axis is one of the dims before the last (which holds real/imaginary parts).
  if (axis < -rank || axis >= rank - 1) fail_shape_inference("DFT: axis ", axis, " is outside the signal dims");
  const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
  if (a == rank - 1) fail_shape_inference("DFT: axis ", axis, " is the complex dim");
  auto* d = out->mutable_dim(a);
  if (!known_length) {
    d->Clear();
    return;
  }
  if (length >= 0) {
    d->Clear();
    d->set_dim_value(length);
  }
  if (onesided) {
    if (d->has_dim_value()) d->set_dim_value(d->dim_value() / 2 + 1);
    else d->Clear();
  }
}

// AffineGrid-20: theta [N, 2, 3] and size [N, C, H, W] -> [N, H, W, 2]; theta [N, 3, 4], size [N, C, D, H, W] ->
// [N, D, H, W, 3].
void AffineGridInference(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  std::vector<int64_t> size;
  int64_t n = -1;
  if (ConstInts(ctx, 1, &size)) n = static_cast<int64_t>(size.size());
  else if (onnx::hasInputShape(ctx, 1) && InputRank(ctx, 1) == 1 && onnx::getInputShape(ctx, 1).dim(0).has_dim_value())
    n = onnx::getInputShape(ctx, 1).dim(0).dim_value();
  if (n != 4 && n != 5) return;
  TensorShapeProto* out = onnx::getOutputShape(ctx, 0);
  out->clear_dim();
  for (int64_t k = 0; k < n; ++k) {
    auto* d = out->add_dim();
    if (k == n - 1) d->set_dim_value(n - 2);
    else if (!size.empty()) d->set_dim_value(size[static_cast<size_t>(k == 0 ? 0 : k + 1)]);
  }
}

// GridSample-20: X [N, C, D1..Dr], grid [N, H1..Hr, r] -> [N, C, H1..Hr].
void GridSampleInference(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 1)) return;
  const TensorShapeProto& grid = onnx::getInputShape(ctx, 1);
  if (grid.dim_size() < 3) fail_shape_inference("GridSample: grid has rank ", grid.dim_size(), ", below 3");
  TensorShapeProto* out = onnx::getOutputShape(ctx, 0);
  out->clear_dim();
  *out->add_dim() = grid.dim(0);
  auto* c = out->add_dim();
  if (onnx::hasInputShape(ctx, 0) && InputRank(ctx, 0) >= 2) *c = onnx::getInputShape(ctx, 0).dim(1);
  for (int k = 1; k + 1 < grid.dim_size(); ++k) *out->add_dim() = grid.dim(k);
}

// DeformConv-19: X [N, C, D1..Dr], W [oC, C/group, k1..kr], offset [N, ..., o1..or] -> [N, oC, o1..or].
void DeformConvInference(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const TensorShapeProto& x = onnx::getInputShape(ctx, 0);
  if (x.dim_size() < 3) fail_shape_inference("DeformConv: input has rank ", x.dim_size(), ", below 3");
  TensorShapeProto* out = onnx::getOutputShape(ctx, 0);
  out->clear_dim();
  *out->add_dim() = x.dim(0);
  auto* oc = out->add_dim();
  if (onnx::hasInputShape(ctx, 1) && InputRank(ctx, 1) == x.dim_size()) *oc = onnx::getInputShape(ctx, 1).dim(0);
  const bool offset = onnx::hasInputShape(ctx, 2) && InputRank(ctx, 2) == x.dim_size();
  for (int k = 2; k < x.dim_size(); ++k) {
    auto* d = out->add_dim();
    if (offset) *d = onnx::getInputShape(ctx, 2).dim(k);
  }
}

// Attention-23/24: Y from Q (rank 4 [B, Hq, Sq, Dv] or rank 3 [B, Sq, Hq * Dv]); present key/value [B, Hkv, S, D]
// (rank only); qk_matmul_output [B, Hq, Sq, S] (rank only).
void AttentionInference(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  for (size_t o = 1; o < ctx.getNumOutputs() && o < 4; ++o) onnx::propagateElemTypeFromInputToOutput(ctx, 0, o);
  if (onnx::hasInputShape(ctx, 0)) {
    const TensorShapeProto& q = onnx::getInputShape(ctx, 0);
    if (q.dim_size() != 3 && q.dim_size() != 4) fail_shape_inference("Attention: Q has rank ", q.dim_size());
    TensorShapeProto* y = onnx::getOutputShape(ctx, 0);
    y->clear_dim();
    for (int k = 0; k + 1 < q.dim_size(); ++k) *y->add_dim() = q.dim(k);
    auto* last = y->add_dim();
    if (onnx::hasInputShape(ctx, 2) && InputRank(ctx, 2) == q.dim_size()) {
      const TensorShapeProto& v = onnx::getInputShape(ctx, 2);
      if (q.dim_size() == 4) {
        *last = v.dim(3);
      } else {
        const int64_t qh = onnx::getAttribute(ctx, "q_num_heads", 0), kvh = onnx::getAttribute(ctx, "kv_num_heads", 0);
        if (qh > 0 && kvh > 0 && v.dim(2).has_dim_value() && v.dim(2).dim_value() % kvh == 0)
          last->set_dim_value(v.dim(2).dim_value() / kvh * qh);
      }
    }
  }
  for (size_t o = 1; o < ctx.getNumOutputs() && o < 4; ++o) RankOnly(ctx, o, 4);
}

void RegisterAttention(int since) {
  OpSchema s = Op("Attention", since);
  s.Attr("is_causal", "mask the upper triangle", AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("kv_num_heads", "key/value heads (rank-3 inputs)", AttributeProto::INT, false)
      .Attr("q_num_heads", "query heads (rank-3 inputs)", AttributeProto::INT, false)
      .Attr("qk_matmul_output_mode", "which stage qk_matmul_output shows", AttributeProto::INT, static_cast<int64_t>(0))
      .Attr("scale", "scale of Q K^T (default 1/sqrt(head size))", AttributeProto::FLOAT, false)
      .Attr("softcap", "softcap value (0: none)", AttributeProto::FLOAT, 0.0f)
      .Attr("softmax_precision", "type of the softmax computation", AttributeProto::INT, false)
      .Input(0, "Q", "query", "T1")
      .Input(1, "K", "key", "T1")
      .Input(2, "V", "value", "T2")
      .Input(3, "attn_mask", "mask (bool or added)", "U", OpSchema::Optional)
      .Input(4, "past_key", "past key", "T1", OpSchema::Optional)
      .Input(5, "past_value", "past value", "T2", OpSchema::Optional);
  if (since >= 24) s.Input(6, "nonpad_kv_seqlen", "valid key/value lengths", "tensor(int64)", OpSchema::Optional);
  s.Output(0, "Y", "output", "T1")
      .Output(1, "present_key", "updated key cache", "T1", OpSchema::Optional)
      .Output(2, "present_value", "updated value cache", "T2", OpSchema::Optional)
      .Output(3, "qk_matmul_output", "Q K^T at the chosen stage", "T1", OpSchema::Optional)
      .TypeConstraint("T1", kFloats, "float types")
      .TypeConstraint("T2", kFloats, "float types")
      .TypeConstraint("U", Join({kFloats, kInts, {"tensor(bool)"}}), "mask types")
      .TypeAndShapeInferenceFunction(AttentionInference);
  onnx::RegisterSchema(std::move(s));
}

// Cast-19/24: the output's element type is `to`, its shape the input's. Not libonnx 1.12's Cast-13 inference: its
// TensorProto enum ends at bfloat16 (16), so it refuses `to` = float8 (17-20) or int4/uint4 (21-22), which these
// opsets allow and the runtime runs (newer codes never get here: CheckElementTypes refuses them first).
void CastInference(InferenceContext& ctx) {
  const AttributeProto* to = ctx.getAttribute("to");
  if (to == nullptr || !to->has_i()) fail_type_inference("Cast: attribute 'to' must be an int naming a type");
  if (to->i() <= 0 || to->i() > INT32_MAX || !IsValidDataType(static_cast<int32_t>(to->i())))
    fail_type_inference("Cast: attribute 'to' = ", to->i(), " is not an element type");
  onnx::updateOutputElemType(ctx, 0, static_cast<int32_t>(to->i()));
  if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
}

// Cast/CastLike 19 and 24 (they add saturate, round_mode). CastLike keeps the opset-15 inference: it copies
// target_type's element type as a number, float8 included.
void RegisterCast(int since) {
  OpSchema s = Op("Cast", since);
  s.Attr("to", "the element type of the output", AttributeProto::INT)
      .Attr("saturate", "float8 outputs: saturate (1) or not", AttributeProto::INT, static_cast<int64_t>(1));
  if (since >= 24)
    s.Attr("round_mode", "rounding to float8e8m0", AttributeProto::STRING, std::string("up"));
  s.Input(0, "input", "input", "T1")
      .Output(0, "output", "output, of type `to`", "T2")
      .TypeConstraint("T1", kAll, "input types")
      .TypeConstraint("T2", kAll, "output types")
      .TypeAndShapeInferenceFunction(CastInference);
  onnx::RegisterSchema(std::move(s));
  OpSchema l = Op("CastLike", since);
  l.Attr("saturate", "float8 outputs: saturate (1) or not", AttributeProto::INT, static_cast<int64_t>(1));
  if (since >= 24)
    l.Attr("round_mode", "rounding to float8e8m0", AttributeProto::STRING, std::string("up"));
  l.Input(0, "input", "input", "T1")
      .Input(1, "target_type", "its element type is the output's", "T2")
      .Output(0, "output", "output, of target_type's element type", "T2")
      .TypeConstraint("T1", kAll, "input types")
      .TypeConstraint("T2", kAll, "output types")
      .TypeAndShapeInferenceFunction(Opset17Inference("CastLike"));
  onnx::RegisterSchema(std::move(l));
}

void RegisterAll() {
  const std::vector<std::string> reduce_types = Join({kFloats, {"tensor(uint32)", "tensor(uint64)", "tensor(int32)",
                                                                "tensor(int64)", "tensor(uint8)", "tensor(int8)"}});
  for (const char* op : {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
                         "ReduceMin", "ReduceProd", "ReduceSumSquare"})
    RegisterReduce(op, 18, reduce_types);
  // ReduceMax/ReduceMin-20 add bool.
  for (const char* op : {"ReduceMax", "ReduceMin"}) RegisterReduce(op, 20, Join({reduce_types, {"tensor(bool)"}}));

  onnx::RegisterSchema(Op("Split", 18)
                           .Attr("axis", "axis to split on", AttributeProto::INT, static_cast<int64_t>(0))
                           .Attr("num_outputs", "number of equal parts (the last may be smaller)", AttributeProto::INT,
                                 false)
                           .Input(0, "input", "tensor to split", "T")
                           .Input(1, "split", "lengths of the parts (1-D int64)", "tensor(int64)", OpSchema::Optional)
                           .Output(0, "outputs", "the parts", "T", OpSchema::Variadic, true, 1)
                           .TypeConstraint("T", kAll, "all tensor types")
                           .TypeAndShapeInferenceFunction(SplitInference));

  onnx::RegisterSchema(Op("Pad", 18)
                           .Attr("mode", "constant, reflect, edge (and wrap from opset 19)", AttributeProto::STRING,
                                 std::string("constant"))
                           .Input(0, "data", "input", "T")
                           .Input(1, "pads", "begin and end pads per axis (1-D int64)", "tensor(int64)")
                           .Input(2, "constant_value", "value for constant mode", "T", OpSchema::Optional)
                           .Input(3, "axes", "axes pads applies to", "Tind", OpSchema::Optional)
                           .Output(0, "output", "padded tensor", "T")
                           .TypeConstraint("T", kAll, "all tensor types")
                           .TypeConstraint("Tind", {"tensor(int32)", "tensor(int64)"}, "axes types")
                           .TypeAndShapeInferenceFunction(PadInference));

  for (int since : {18, 19}) {
    onnx::RegisterSchema(
        Op("Resize", since)
            .Attr("antialias", "antialiasing filter when downscaling (linear, cubic)", AttributeProto::INT,
                  static_cast<int64_t>(0))
            .Attr("axes", "axes roi/scales/sizes refer to", AttributeProto::INTS, false)
            .Attr("coordinate_transformation_mode", "output to input coordinate mapping", AttributeProto::STRING,
                  std::string("half_pixel"))
            .Attr("cubic_coeff_a", "cubic coefficient", AttributeProto::FLOAT, -0.75f)
            .Attr("exclude_outside", "exclude samples outside the input", AttributeProto::INT, static_cast<int64_t>(0))
            .Attr("extrapolation_value", "value outside the input (tf_crop_and_resize)", AttributeProto::FLOAT, 0.0f)
            .Attr("keep_aspect_ratio_policy", "stretch, not_larger or not_smaller (with sizes)",
                  AttributeProto::STRING, std::string("stretch"))
            .Attr("mode", "nearest, linear or cubic", AttributeProto::STRING, std::string("nearest"))
            .Attr("nearest_mode", "rounding of nearest mode", AttributeProto::STRING,
                  std::string("round_prefer_floor"))
            .Input(0, "X", "input", "T1")
            .Input(1, "roi", "region of interest (tf_crop_and_resize)", "T2", OpSchema::Optional)
            .Input(2, "scales", "scale per axis", "tensor(float)", OpSchema::Optional)
            .Input(3, "sizes", "output size per axis", "tensor(int64)", OpSchema::Optional)
            .Output(0, "Y", "resized tensor", "T1")
            .TypeConstraint("T1", kAll, "all tensor types")
            .TypeConstraint("T2", kFloats, "roi types")
            .TypeAndShapeInferenceFunction(ResizeInference));
  }

  onnx::RegisterSchema(
      Op("LpPool", 18)
          .Attr("auto_pad", "NOTSET, SAME_UPPER, SAME_LOWER or VALID", AttributeProto::STRING, std::string("NOTSET"))
          .Attr("ceil_mode", "ceil (1) or floor (0) of the output size", AttributeProto::INT, static_cast<int64_t>(0))
          .Attr("dilations", "dilation per spatial axis", AttributeProto::INTS, false)
          .Attr("kernel_shape", "kernel size per spatial axis", AttributeProto::INTS)
          .Attr("p", "the p of the Lp norm", AttributeProto::INT, static_cast<int64_t>(2))
          .Attr("pads", "begin and end pads per spatial axis", AttributeProto::INTS, false)
          .Attr("strides", "stride per spatial axis", AttributeProto::INTS, false)
          .Input(0, "X", "input [N, C, ...]", "T")
          .Output(0, "Y", "output", "T")
          .TypeConstraint("T", kFloats, "float types")
          .TypeAndShapeInferenceFunction(PoolInference("LpPool")));
  onnx::RegisterSchema(
      Op("AveragePool", 19)
          .Attr("auto_pad", "NOTSET, SAME_UPPER, SAME_LOWER or VALID", AttributeProto::STRING, std::string("NOTSET"))
          .Attr("ceil_mode", "ceil (1) or floor (0) of the output size", AttributeProto::INT, static_cast<int64_t>(0))
          .Attr("count_include_pad", "count pads in the average", AttributeProto::INT, static_cast<int64_t>(0))
          .Attr("dilations", "dilation per spatial axis", AttributeProto::INTS, false)
          .Attr("kernel_shape", "kernel size per spatial axis", AttributeProto::INTS)
          .Attr("pads", "begin and end pads per spatial axis", AttributeProto::INTS, false)
          .Attr("strides", "stride per spatial axis", AttributeProto::INTS, false)
          .Input(0, "X", "input [N, C, ...]", "T")
          .Output(0, "Y", "output", "T")
          .TypeConstraint("T", kFloats, "float types")
          .TypeAndShapeInferenceFunction(PoolInference("AveragePool")));

  RegisterCast(19);
  RegisterCast(24);
  RegisterQuantize(19);
  RegisterQuantize(21);
  RegisterQuantize(23);
  RegisterDequantize(21);
  RegisterDequantize(23);

  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"}) RegisterBitwise(op);
  RegisterUnary("BitwiseNot", 18, kInts);
  RegisterUnary("Mish", 18, kFloats);
  RegisterUnary("Gelu", 20, kFloats, {}, {{"approximate", "none"}});
  RegisterUnary("Swish", 24, kFloats, {{"alpha", 1.0f}});
  RegisterGroupNormalization(18);
  RegisterGroupNormalization(21);

  onnx::RegisterSchema(Op("CenterCropPad", 18)
                           .Attr("axes", "axes `shape` refers to (default: all)", AttributeProto::INTS, false)
                           .Input(0, "input_data", "input", "T")
                           .Input(1, "shape", "output size per axis", "Tind")
                           .Output(0, "output_data", "cropped or padded tensor", "T")
                           .TypeConstraint("T", kAll, "all tensor types")
                           .TypeConstraint("Tind", {"tensor(int32)", "tensor(int64)"}, "shape types")
                           .TypeAndShapeInferenceFunction(CenterCropPadInference));
  onnx::RegisterSchema(Op("Col2Im", 18)
                           .Attr("dilations", "dilation per spatial axis", AttributeProto::INTS, false)
                           .Attr("pads", "begin and end pads per spatial axis", AttributeProto::INTS, false)
                           .Attr("strides", "stride per spatial axis", AttributeProto::INTS, false)
                           .Input(0, "input", "[N, C * prod(block_shape), L]", "T")
                           .Input(1, "image_shape", "spatial output size", "tensor(int64)")
                           .Input(2, "block_shape", "block size per spatial axis", "tensor(int64)")
                           .Output(0, "output", "[N, C, image_shape...]", "T")
                           .TypeConstraint("T", kAll, "all tensor types")
                           .TypeAndShapeInferenceFunction(Col2ImInference));
  onnx::RegisterSchema(Op("DFT", 20)
                           .Attr("inverse", "inverse transform", AttributeProto::INT, static_cast<int64_t>(0))
                           .Attr("onesided", "keep the first half + 1 outputs (real input)", AttributeProto::INT,
                                 static_cast<int64_t>(0))
                           .Input(0, "input", "signal [..., 1 or 2]", "T1")
                           .Input(1, "dft_length", "transform length (scalar)", "T2", OpSchema::Optional)
                           .Input(2, "axis", "signal axis (scalar, default -2)", "tensor(int64)", OpSchema::Optional)
                           .Output(0, "output", "spectrum [..., 2]", "T1")
                           .TypeConstraint("T1", kFloats, "float types")
                           .TypeConstraint("T2", {"tensor(int32)", "tensor(int64)"}, "length types")
                           .TypeAndShapeInferenceFunction(DftInference));
  onnx::RegisterSchema(Op("AffineGrid", 20)
                           .Attr("align_corners", "pixel centers (0) or corners (1) at -1 and 1", AttributeProto::INT,
                                 static_cast<int64_t>(0))
                           .Input(0, "theta", "[N, 2, 3] or [N, 3, 4] affine matrices", "T1")
                           .Input(1, "size", "[N, C, H, W] or [N, C, D, H, W]", "T2")
                           .Output(0, "grid", "[N, H, W, 2] or [N, D, H, W, 3]", "T1")
                           .TypeConstraint("T1", kFloats, "float types")
                           .TypeConstraint("T2", {"tensor(int64)"}, "size type")
                           .TypeAndShapeInferenceFunction(AffineGridInference));
  onnx::RegisterSchema(Op("GridSample", 20)
                           .Attr("align_corners", "pixel corners at -1 and 1", AttributeProto::INT,
                                 static_cast<int64_t>(0))
                           .Attr("mode", "linear, nearest or cubic", AttributeProto::STRING, std::string("linear"))
                           .Attr("padding_mode", "zeros, border or reflection", AttributeProto::STRING,
                                 std::string("zeros"))
                           .Input(0, "X", "[N, C, D1..Dr]", "T1")
                           .Input(1, "grid", "[N, H1..Hr, r]", "T2")
                           .Output(0, "Y", "[N, C, H1..Hr]", "T1")
                           .TypeConstraint("T1", kAll, "input types")
                           .TypeConstraint("T2", kFloats, "grid types")
                           .TypeAndShapeInferenceFunction(GridSampleInference));
  onnx::RegisterSchema(Op("DeformConv", 19)
                           .Attr("dilations", "dilation per spatial axis", AttributeProto::INTS, false)
                           .Attr("group", "groups of channels", AttributeProto::INT, static_cast<int64_t>(1))
                           .Attr("kernel_shape", "kernel size per spatial axis", AttributeProto::INTS, false)
                           .Attr("offset_group", "groups of offsets", AttributeProto::INT, static_cast<int64_t>(1))
                           .Attr("pads", "begin and end pads per spatial axis", AttributeProto::INTS, false)
                           .Attr("strides", "stride per spatial axis", AttributeProto::INTS, false)
                           .Input(0, "X", "input [N, C, ...]", "T")
                           .Input(1, "W", "weights [oC, C/group, k...]", "T")
                           .Input(2, "offset", "offsets [N, offset_group * prod(k) * r, o...]", "T")
                           .Input(3, "B", "bias [oC]", "T", OpSchema::Optional)
                           .Input(4, "mask", "mask [N, offset_group * prod(k), o...]", "T", OpSchema::Optional)
                           .Output(0, "Y", "[N, oC, o...]", "T")
                           .TypeConstraint("T", kFloats, "float types")
                           .TypeAndShapeInferenceFunction(DeformConvInference));

  onnx::RegisterSchema(Op("RMSNormalization", 23)
                           .Attr("axis", "first normalized axis", AttributeProto::INT, static_cast<int64_t>(-1))
                           .Attr("epsilon", "added to the mean square", AttributeProto::FLOAT, 1e-5f)
                           .Attr("stash_type", "type of the computation", AttributeProto::INT, static_cast<int64_t>(1))
                           .Input(0, "X", "input", "T")
                           .Input(1, "scale", "scale, broadcast to the normalized dims", "V")
                           .Output(0, "Y", "output, X's shape", "V")
                           .TypeConstraint("T", kFloats, "float types")
                           .TypeConstraint("V", kFloats, "float types")
                           .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
                             onnx::propagateElemTypeFromInputToOutput(ctx, 1, 0);
                             if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
                           }));
  onnx::RegisterSchema(Op("RotaryEmbedding", 23)
                           .Attr("interleaved", "rotate interleaved pairs (1) or halves (0)", AttributeProto::INT,
                                 static_cast<int64_t>(0))
                           .Attr("num_heads", "heads (rank-3 input)", AttributeProto::INT, false)
                           .Attr("rotary_embedding_dim", "rotated part of the head (0: all)", AttributeProto::INT,
                                 static_cast<int64_t>(0))
                           .Input(0, "X", "[B, H, S, D] or [B, S, H * D]", "T")
                           .Input(1, "cos_cache", "cosines", "T")
                           .Input(2, "sin_cache", "sines", "T")
                           .Input(3, "position_ids", "positions [B, S]", "M", OpSchema::Optional)
                           .Output(0, "Y", "X's shape", "T")
                           .TypeConstraint("T", kFloats, "float types")
                           .TypeConstraint("M", {"tensor(int64)"}, "position type")
                           .TypeAndShapeInferenceFunction(SameAsInput0));
  RegisterAttention(23);
  RegisterAttention(24);
  onnx::RegisterSchema(Op("TensorScatter", 24)
                           .Attr("axis", "sequence axis of the cache", AttributeProto::INT, static_cast<int64_t>(-2))
                           .Attr("mode", "linear or circular", AttributeProto::STRING, std::string("linear"))
                           .Input(0, "past_cache", "cache", "T")
                           .Input(1, "update", "new entries", "T")
                           .Input(2, "write_indices", "write position per batch [B]", "tensor(int64)",
                                  OpSchema::Optional)
                           .Output(0, "present_cache", "updated cache, past_cache's shape", "T")
                           .TypeConstraint("T", kAll, "all tensor types")
                           .TypeAndShapeInferenceFunction(SameAsInput0));
  onnx::RegisterSchema(Op("CumProd", 26)
                           .Attr("exclusive", "exclude the current element", AttributeProto::INT,
                                 static_cast<int64_t>(0))
                           .Attr("reverse", "run from the end", AttributeProto::INT, static_cast<int64_t>(0))
                           .Input(0, "x", "input", "T")
                           .Input(1, "axis", "axis (scalar)", "T2")
                           .Output(0, "y", "x's shape", "T")
                           .TypeConstraint("T", kNumeric, "numeric types")
                           .TypeConstraint("T2", {"tensor(int32)", "tensor(int64)"}, "axis types")
                           .TypeAndShapeInferenceFunction(SameAsInput0));
  // BitCast-26: the same bits read as `to`, which must have the input's bit width (a string has none).
  onnx::RegisterSchema(
      Op("BitCast", 26)
          .Attr("to", "the element type the bits are read as", AttributeProto::INT)
          .Input(0, "input", "input", "T1")
          .Output(0, "output", "output, the input's shape", "T2")
          .TypeConstraint("T1", Join({kNumeric, {"tensor(bool)", "tensor(complex64)", "tensor(complex128)"}}),
                          "non-string types")
          .TypeConstraint("T2", Join({kNumeric, {"tensor(bool)", "tensor(complex64)", "tensor(complex128)"}}),
                          "non-string types")
          .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
            const int64_t to = onnx::getAttribute(ctx, "to", static_cast<int64_t>(0));
            const size_t out_bits = ElementBits(to);
            if (out_bits == 0) fail_type_inference("BitCast: 'to' is ", to, ", not a non-string element type");
            if (Typed(ctx, 0) && ctx.getInputType(0)->has_tensor_type()) {
              const int32_t from = ctx.getInputType(0)->tensor_type().elem_type();
              const size_t in_bits = ElementBits(from);
              if (in_bits == 0) fail_type_inference("BitCast: the input's element type ", from, " has no bit width");
              if (in_bits != out_bits)
                fail_type_inference("BitCast: the input's element type (", from, ") has ", in_bits, " bits and 'to' (",
                                    to, ") has ", out_bits, "; they must be equal");
            }
            onnx::updateOutputElemType(ctx, 0, static_cast<int32_t>(to));
            if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
          }));
  // The string ops of opset 20.
  onnx::RegisterSchema(Op("StringConcat", 20)
                           .Input(0, "X", "first strings", "T")
                           .Input(1, "Y", "second strings", "T")
                           .Output(0, "Z", "X and Y concatenated, broadcast", "T")
                           .TypeConstraint("T", {"tensor(string)"}, "strings")
                           .TypeAndShapeInferenceFunction(BroadcastInference));
  onnx::RegisterSchema(Op("RegexFullMatch", 20)
                           .Attr("pattern", "regular expression (RE2 syntax)", AttributeProto::STRING, false)
                           .Input(0, "X", "strings", "T1")
                           .Output(0, "Y", "whether each string matches in full", "T2")
                           .TypeConstraint("T1", {"tensor(string)"}, "strings")
                           .TypeConstraint("T2", {"tensor(bool)"}, "match results")
                           .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
                             onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::BOOL);
                             if (onnx::hasInputShape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
                           }));
  onnx::RegisterSchema(Op("StringSplit", 20)
                           .Attr("delimiter", "separator (empty: runs of whitespace)", AttributeProto::STRING, false)
                           .Attr("maxsplit", "most splits per string (absent: no limit)", AttributeProto::INT, false)
                           .Input(0, "X", "strings", "T1")
                           .Output(0, "Y", "substrings: X's shape plus the largest count, padded with \"\"", "T2")
                           .Output(1, "Z", "number of substrings per element: X's shape", "T3")
                           .TypeConstraint("T1", {"tensor(string)"}, "strings")
                           .TypeConstraint("T2", {"tensor(string)"}, "strings")
                           .TypeConstraint("T3", {"tensor(int64)"}, "counts")
                           .TypeAndShapeInferenceFunction([](InferenceContext& ctx) {
                             onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::STRING);
                             onnx::updateOutputElemType(ctx, 1, onnx::TensorProto::INT64);
                             if (!onnx::hasInputShape(ctx, 0)) return;
                             const TensorShapeProto& in = onnx::getInputShape(ctx, 0);
                             TensorShapeProto* y = onnx::getOutputShape(ctx, 0);
                             *y = in;
                             y->add_dim();  // the largest count is known only from the data
                             *onnx::getOutputShape(ctx, 1) = in;
                           }));
}

}  // namespace

void RegisterNewerOpsetSchemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Builds libonnx's own registry first (a lookup does), so ours are added to it rather than before it.
    (void)onnx::OpSchemaRegistry::Schema("Relu", 14, "");
    // OpSchemaRegisterOnce refuses a since_version above its domain's range, and libonnx 1.12 caps the default domain
    // at 17. The range lives in a mutable singleton that only hands out a const reference; raising its upper bound
    // is the one change registering opset 18-26 needs. Done once, before any schema of those versions is added.
    auto& ranges = const_cast<std::unordered_map<std::string, std::pair<int, int>>&>(
        onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map());
    auto& range = ranges[""];
    if (range.second < kMaxDefaultOpset) range.second = kMaxDefaultOpset;
    RegisterAll();
  });
}

}  // namespace epctx
