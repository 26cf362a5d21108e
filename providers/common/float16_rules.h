// The rule both EPs follow to compute a float16 graph in float32 (issue 26), as ONNX Runtime 1.30's CPU EP does on
// x86: its InsertCastTransformer runs the float16 ops it has no float16 kernel for (nearly all) in float32 and drops
// the float16 round trips between them, so a float16 model's feature maps are float32 values and only the model's
// own Casts to float16 round. The CPU EP's pass (providers/cpu/passes/float16_promotion.h) and AotCpu's
// PromoteFloat16 (providers/aotcpu/ir/float16.h) both promote every float16 value except the outputs of the ops
// listed here. Header only, no dependencies: the runtime's CPU EP includes it as the plugins do.
#pragma once

#include <cstring>

namespace epctx {

// True for the ops whose float16 output is made from an attribute (a dtype, a typed value, a random draw) rather
// than computed from their float16 inputs, so computing them in float32 would not give the same float16 values:
// their outputs stay float16 (readers computed in float32 convert them, exactly). Ops outside ONNX's default domain
// are not promoted either (their float16 kernels, if any, are their own). A Cast to float16 is not listed: each EP
// keeps its rounding its own way.
inline bool Float16OutputFromAttribute(const char* domain, const char* op) {
  if (domain && domain[0] != '\0' && std::strcmp(domain, "ai.onnx") != 0) return true;
  static const char* const kOps[] = {"EyeLike",          "RandomNormal",    "RandomUniform", "RandomNormalLike",
                                     "RandomUniformLike", "Bernoulli",       "Multinomial",   "ConstantOfShape",
                                     "Constant",          "CastLike"};
  for (const char* o : kOps)
    if (std::strcmp(op, o) == 0) return true;
  return false;
}

}  // namespace epctx
