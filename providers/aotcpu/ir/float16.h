// Float16 graphs are compiled in float32 (issue 26). ONNX Runtime's CPU EP has no float16 kernels for most ops on
// x86: its InsertCastTransformer runs them in float32 and drops the float16 round trips between them, so what ORT
// returns for a float16 model is the float32 computation on the float16 weights, rounded to float16 only where the
// model itself casts to float16. PromoteFloat16 makes our graph say the same thing:
//   - every float16 constant becomes a float32 constant with the same values (exact);
//   - every float16 value becomes a float32 value marked `float16_storage`: where it crosses the partition's
//     boundary (a fused input or output) its bytes are float16 and the compiler converts at the edge;
//   - a Cast to float16 keeps its rounding: it stays a Cast with to = 10 between two float32 values, lowered as a
//     round trip through float16 (lower/tensor_view.cc); a Cast from float16 to float32 becomes a same-type Cast.
// Runs after FoldConstants (which folds float16 constants in their own type) and before support checks/lowering.
#ifndef EPCTX_PROVIDERS_AOTCPU_IR_FLOAT16_H_
#define EPCTX_PROVIDERS_AOTCPU_IR_FLOAT16_H_

#include <cstdint>

#include "providers/aotcpu/ir/ir.h"

namespace epctx {
namespace aotcpu {

inline constexpr uint32_t kF16 = 10;

// IEEE binary16 bits -> float, exact (subnormals, infinities and NaN kept).
float HalfToFloat(uint16_t h);

// float -> nearest float16 -> float, ties to even, beyond 65504 to infinity: kRoundFloat16's scalar path (F16C's
// vcvtps2ph rounds the same way).
float RoundToFloat16(float f);

// Rewrites `g` as above. Nodes whose meaning depends on producing float16 from an attribute (EyeLike, Random*,
// ConstantOfShape with a float16 value, a CastLike to float16...) keep their float16 outputs' dtype as float16, so
// no support check takes them.
void PromoteFloat16(Graph* g);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_IR_FLOAT16_H_
