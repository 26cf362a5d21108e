// Shape-generic kernels (issue 16, docs/aotcpu.md "Dynamic shapes"): plain loops that take their dims at run time,
// for the few nodes of a dynamic graph whose shapes change with the free dims while holding no weights (a decoder's
// K/V concat, QK^T, mask, softmax and PV). dynamic.h runs them between the graph's static segments, which stay
// compiled programs, so that a new shape creates no primitive and lowers nothing.
//
// A kernel gets its inputs and outputs with concrete dims (the output dims evaluated from the symbolic shapes before
// the run, so the buffers exist) and checks that they agree with what the op computes; a disagreement is an error
// naming the node, never a write outside a buffer. Every loop is single-threaded and sums in index order.
#ifndef EPCTX_PROVIDERS_AOTCPU_RUNTIME_GENERIC_OPS_H_
#define EPCTX_PROVIDERS_AOTCPU_RUNTIME_GENERIC_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "providers/aotcpu/ir/ir.h"

namespace epctx {
namespace aotcpu {

struct GTensor {
  void* data = nullptr;           // null for an absent optional input
  std::vector<int64_t> dims;
  uint32_t dtype = 0;             // ONNX code
  int64_t numel() const;
};

// Runs node `n`; "" on success, else why (the caller prefixes the node). `g` gives attributes and constant inputs.
// `threads`: OpenMP threads a large kernel may use (the session's intra-op threads; 0 = OpenMP's default).
using GenericKernel = std::string (*)(const Graph& g, const Node& n, const std::vector<GTensor>& in,
                                      const std::vector<GTensor>& out, int threads);

// MatMul with its second input transposed in its last two dims (in[1] is [..., N, K]): what a Transpose feeding a
// MatMul becomes, so that the transpose is never copied (a decoder's K^T).
std::string MatMulTransposedB(const Graph& g, const Node& n, const std::vector<GTensor>& in,
                              const std::vector<GTensor>& out, int threads);

// The kernel for `n` when its op, attributes and the (known) dtypes of its inputs and outputs are supported; null with
// `why` otherwise.
GenericKernel FindGenericKernel(const Graph& g, const Node& n, std::string* why);

// Data-dependent sizes (issue 27 item 3): for a node whose output size depends on its input values (NonZero's count,
// Range's length from run-time bounds), computes the sizes of the run-time symbols it binds (SymbolicShapes::runtime,
// in `elem` order) from its inputs, before its output buffer is placed. "" on success, else why.
using GenericSizer = std::string (*)(const Graph& g, const Node& n, const std::vector<GTensor>& in,
                                     std::vector<int64_t>* sizes);
GenericSizer FindGenericSizer(const Node& n);

// Bytes per element of an ONNX dtype this file handles (f32, i64, i32, bool, u8, i8); 0 otherwise.
size_t GenericElementSize(uint32_t dtype);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_RUNTIME_GENERIC_OPS_H_
