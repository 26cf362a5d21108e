// What the int8 products share (nn_quant.cc defines them; nn_quant_conv.cc uses them too): the Cast -> Mul(scale)
// tail after an int32 product, the per-tensor zero points, and whether the target ISA sums u8 x s8 products exactly.
// Internal to lower/. Includes only ops.h, so that both the math family (math_common.h) and the nn family
// (nn_common.h) can include it.
#ifndef EPCTX_PROVIDERS_AOTCPU_LOWER_QUANT_COMMON_H_
#define EPCTX_PROVIDERS_AOTCPU_LOWER_QUANT_COMMON_H_

#include <cstdint>
#include <string>

#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {

// The pattern Product(...) -> Cast(to float) -> Mul(., scale): the Cast and Mul nodes and the scale value.
struct Int8Tail {
  int cast = -1, mul = -1, scale = -1;
};

// Matches the tail after the int32 value `y` (read by that Cast alone; the scale one float element not computed
// from the product). False with *why otherwise.
bool MatchInt8Tail(const Graph& g, int y, Int8Tail* t, std::string* why);

// The scale of an int8 step computed by a node that comes later in the graph's order (a Mul of the source's and the
// weights' scales placed after the product): that node is lowered now, ahead of its turn, when its inputs are ready.
CheckResult LowerScaleEarly(LowerContext& ctx, int node, const Int8Tail& t);

// The constant per-tensor zero point of input `i` of `n` (0 when absent); false when it is not a constant 8-bit
// value of one element.
bool ConstZeroPoint(const Graph& g, const Node& n, size_t i, int32_t* zp);

// The source zero point (input `i` of `n`) as the int32 [1] operand oneDNN reads: a constant becomes a weight (none
// when 0); a computed one (DynamicQuantizeLinear's) is converted by one reorder step, shared by every product that
// reads it. *out is kNone when there is no zero point.
CheckResult SourceZeroPoint32(LowerContext& ctx, const Node& n, size_t i, Operand* out);

// Whether oneDNN's int8 kernels on the target ISA sum u8 x s8 products exactly. Without VNNI (avx2, avx512_core)
// they add pairs of products in int16 with saturation (vpmaddubsw): 255 * 127 * 2 > 32767, so a product of extreme
// values is silently wrong. The target is the ISA the program is compiled for (CompileOptions::isa; a binary compiled
// for avx512_core_vnni is refused by a machine without VNNI), else the one oneDNN runs on here.
bool Int8ProductsExact(const CompileOptions& options);

// The largest weight part the target's int8 kernels take without saturating: [-128, 127] with exact products, else
// [-64, 64] (255 * 64 * 2 = 32640 fits int16).
inline void Int8PartRange(const CompileOptions& options, int32_t* lo, int32_t* hi) {
  const bool exact = Int8ProductsExact(options);
  *lo = exact ? -128 : -64;
  *hi = exact ? 127 : 64;
}

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_LOWER_QUANT_COMMON_H_
