// Shared helpers of the CPU EP's tensor-manipulation kernels (tensor*.cc). Internal to providers/cpu/kernels.
//
// Data-movement kernels are type-agnostic: they move elements of DataTypeSize(dtype) bytes, and copy strings
// element by element (std::string is not trivially copyable). DispatchByElementSize picks the storage type.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "providers/cpu/kernel.h"

namespace epctx {
namespace tensor_kernels {

// Storage for 16-byte elements (complex128); only ever copied.
struct Bytes16 {
  uint64_t lo, hi;
};

// Calls fn(T{}) with T = std::string for strings, else an unsigned integer (or Bytes16) of the element's size.
// NOT_IMPLEMENTED naming `what` for element types of other sizes (undefined).
template <typename Fn>
Status DispatchByElementSize(DataType dt, const char* what, Fn&& fn) {
  if (dt == DataType::kString) return fn(std::string{});
  switch (DataTypeSize(dt)) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
    case 16: return fn(Bytes16{});
    default: break;
  }
  return MakeStatus(ErrorCode::NOT_IMPLEMENTED, what, ": element type ", DataTypeName(dt), " is not supported");
}

// Pointer to element i of a tensor's storage (works for strings too: DataTypeSize(kString) = sizeof(std::string)).
inline char* ElementPtr(void* base, DataType dt, int64_t i) {
  return static_cast<char*>(base) + static_cast<size_t>(i) * DataTypeSize(dt);
}
inline const char* ElementPtr(const void* base, DataType dt, int64_t i) {
  return static_cast<const char*>(base) + static_cast<size_t>(i) * DataTypeSize(dt);
}

// Copies n contiguous elements (assigns strings, memcpy for everything else). Ranges must not overlap.
inline void CopyElements(DataType dt, const void* src, void* dst, int64_t n) {
  if (n <= 0) return;
  if (dt == DataType::kString) {
    const auto* s = static_cast<const std::string*>(src);
    auto* d = static_cast<std::string*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
  } else {
    std::memcpy(dst, src, static_cast<size_t>(n) * DataTypeSize(dt));
  }
}

// dst[i] = src[offset + sum_k i_k * src_strides[k]] for every index i of `dims`, dst contiguous row-major.
// Strides are in elements and may be zero (broadcast) or negative (reversed). The caller guarantees that every
// addressed source element exists. Uses memcpy for contiguous rows and a blocked 2-D transpose when the
// second-innermost output dim is the contiguous one in the source.
void StridedCopy(DataType dt, const void* src, void* dst, Shape dims, std::vector<int64_t> src_strides,
                 int num_threads);

// Row-major strides (in elements) of a shape.
std::vector<int64_t> ContiguousStrides(const Shape& shape);

// Axis in [-rank, rank-1] -> [0, rank-1]; INVALID_ARGUMENT naming the node otherwise.
template <typename C>
StatusOr<int64_t> NormalizeAxis(const C& c, int64_t axis, int64_t rank, const char* what = "axis") {
  if (axis < -rank || axis >= rank)
    return c.Error(ErrorCode::INVALID_ARGUMENT, what, " ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

// Values of an integer tensor (int8..uint64) as int64. INVALID_ARGUMENT naming `what` for other types.
StatusOr<std::vector<int64_t>> ReadInts(const KernelContext& ctx, const Tensor& t, const char* what);
// The single value of a one-element numeric tensor as double / int64.
StatusOr<double> ReadScalarDouble(const KernelContext& ctx, const Tensor& t, const char* what);
StatusOr<int64_t> ReadScalarInt(const KernelContext& ctx, const Tensor& t, const char* what);

// Reads an index tensor (int32/int64), maps negatives by adding `dim` and checks every index lies in
// [-dim, dim-1]; INVALID_ARGUMENT naming the node, the offending index and the bound otherwise.
StatusOr<std::vector<int64_t>> ReadIndices(const KernelContext& ctx, const Tensor& t, int64_t dim, const char* what);

// The input tensor i, or INVALID_ARGUMENT naming the node when it is missing or not a tensor.
StatusOr<const Tensor*> RequireInput(const KernelContext& ctx, size_t i, const char* what);

// `st` with the node's description prefixed when it is an error (for statuses from DispatchType and friends).
inline Status WithNode(const KernelContext& ctx, Status st) {
  if (st.ok() || st.message().rfind(ctx.node().Describe(), 0) == 0) return st;  // OK or already named
  return ctx.Error(st.code(), st.message());
}

// Registration of each group of kernels (tensor_*.cc).
void RegisterShapeKernels(KernelRegistry& r);    // Reshape, Flatten, Squeeze, Unsqueeze, Shape, Size, Identity, ...
void RegisterCopyKernels(KernelRegistry& r);     // Transpose, Slice, Expand, Tile, DepthToSpace, SpaceToDepth
void RegisterConcatKernels(KernelRegistry& r);   // Concat, Split, Pad, Compress, ReverseSequence, Trilu
void RegisterIndexKernels(KernelRegistry& r);    // Gather*, Scatter*, OneHot, NonZero, Unique
void RegisterRearrangeKernels(KernelRegistry& r);  // CenterCropPad, Col2Im, TensorScatter, BitCast

}  // namespace tensor_kernels
}  // namespace epctx
