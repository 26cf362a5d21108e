// The activation layouts of the CPU EP's layout pass (passes/cpu_layout.h, ONNX Runtime's NCHWc transformer
// with oneDNN's choice of layout). A "laid-out" value is an ordinary float Tensor whose shape is the physical one:
//
//   logical [N, C, S...]   plain (ONNX's order)
//   kChannelsLast          [N, S..., C]             oneDNN's nhwc / nwc
//   kBlocked8 / 16         [N, C/B, S..., B]        oneDNN's nChw8c / nChw16c (only when B divides C: no padding)
//
// so elementwise kernels, broadcasting against a value of the same layout and channel count, Concat along the
// channel axis and nearest Resize run unchanged on the physical shape. The internal ops and attributes below are
// only produced by the pass; the ONNX checker refuses the attributes on Conv in a model file, and the internal ops'
// kernels validate their inputs like any kernel (a hand-written model using them gets an error, never a crash).
// Thread safety: everything here is a pure function except PreferredCpuLayout, which is safe to call concurrently.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace epctx {

enum class CpuLayout { kPlain, kChannelsLast, kBlocked8, kBlocked16 };

// Domain of the internal ops (never in a model file the runtime writes).
inline constexpr const char* kCpuInternalDomain = "epctx.cpu";
// epctx.cpu::Reorder(x) -> y, attributes "from" and "to" (CpuLayoutName), "channels" (C, for checks).
inline constexpr const char* kReorderOp = "Reorder";
// epctx.cpu::GlobalAveragePool(x) -> y on a laid-out x: attribute "layout"; y keeps the layout with spatial dims 1.
inline constexpr const char* kLaidOutGlobalAveragePoolOp = "GlobalAveragePool";
// On Conv: the layout of X (src) and of Y (dst) when not plain (CpuLayoutName strings). On MaxPool and
// AveragePool, kSrcLayoutAttr is the layout of X and Y.
inline constexpr const char* kSrcLayoutAttr = "_epctx_src_layout";
inline constexpr const char* kDstLayoutAttr = "_epctx_dst_layout";
// On MatMul (1): a third input is a bias of shape [N] added to every row (the session's MatMul + Add fusion).
inline constexpr const char* kMatMulBiasAttr = "_epctx_bias";

// "plain", "nhwc", "nChw8c", "nChw16c" (oneDNN's names for rank 4; the same names serve ranks 3 and 5).
const char* CpuLayoutName(CpuLayout layout);
// The inverse; false for another string.
bool ParseCpuLayout(const std::string& name, CpuLayout* layout);
// The channel block (8, 16), 0 for plain and channels-last.
int64_t CpuLayoutBlock(CpuLayout layout);
// Whether a value of `channels` channels can take `layout` (blocked layouts need the block to divide C).
bool CpuLayoutFits(CpuLayout layout, int64_t channels);

// The layout oneDNN picks for the activations of a typical float convolution on this machine (asked once, then
// cached): kChannelsLast, kBlocked16 or kBlocked8, or kPlain when it picks something else (the pass then stays off).
CpuLayout PreferredCpuLayout();

// Physical shape of a logical [N, C, S...] (rank >= 2) in `layout`. INVALID_ARGUMENT when C does not fit
// (`*physical` untouched).
Status PhysicalShape(const Shape& logical, CpuLayout layout, Shape* physical);
// Logical shape of a physical tensor of `layout` whose logical channel count is `channels`. INVALID_ARGUMENT
// naming the shapes when the physical shape cannot hold that layout and channel count (`*logical` untouched).
Status LogicalShape(const Shape& physical, CpuLayout layout, int64_t channels, Shape* logical);
// The physical axis holding logical axis `axis` (for blocked layouts, the axis of the channel blocks for axis 1).
size_t PhysicalAxis(size_t logical_rank, size_t axis, CpuLayout layout);

}  // namespace epctx
