// What the tensor (data movement) family's files share: tensor_view.cc, tensor_concat.cc, tensor_gather.cc,
// tensor_pad.cc. Step names, the element types views and copies carry, the static-shape check, constant int lists
// from inputs or attributes per opset, axis normalization, and strided views of a layout (its axis order, dense
// permutations such as nhwc). Internal to lower/. Reject, Numel and RowMajorStrides come from math_common.h.
#ifndef EPCTX_PROVIDERS_AOTCPU_LOWER_TENSOR_COMMON_H_
#define EPCTX_PROVIDERS_AOTCPU_LOWER_TENSOR_COMMON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "providers/aotcpu/lower/math_common.h"
#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {

// The node's name for steps and run-time messages; unnamed nodes are named by their output.
std::string StepName(const Graph& g, const Node& n);

// Types a zero-copy view can carry (any fixed-size element).
bool ViewableType(uint32_t dt);

// Types the reorder/concat/gather steps move (int64 through the executor's stand-in descriptors).
bool MovableType(uint32_t dt);

// The node has one output, and its first `in_count` inputs and its output are present with static shapes (rank at
// most kMaxRank); else false with why.
bool StaticIo(const Graph& g, const Node& n, size_t in_count, std::string* why);

// A constant int list from an input (opset >= `since`) or an attribute (older opsets). *present tells whether the
// list was given at all; false when given but not constant.
bool IntsArg(const Graph& g, const Node& n, size_t input, const char* attr, int64_t since, std::vector<int64_t>* out,
             bool* present);

// Axis `a` of a rank-`rank` tensor, negative counting from the end; false when out of range.
bool NormAxis(int64_t a, int64_t rank, int64_t* out);

// When `op`'s bytes are a dense tensor whose axes are a permutation of op.dims other than the identity (nhwc's acdb):
// `order` gets the axes from outermost to innermost.
bool DensePermutation(const Operand& op, std::vector<size_t>* order);

// The axis order of an operand with element strides, dense or not (a channel slice of an nhwc value is nhwc-ordered),
// when it is not the identity.
bool StrideOrder(const Operand& op, std::vector<size_t>* order);

// A strided view of the plain operand `in`: element (i0..) of the view is element offset + sum(i_k * strides_k) of
// `in`.
Operand StridedView(const Operand& in, uint32_t dtype, std::vector<int64_t> dims, std::vector<int64_t> strides,
                    int64_t elem_offset);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_LOWER_TENSOR_COMMON_H_
