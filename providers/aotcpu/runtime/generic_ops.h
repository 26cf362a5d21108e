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

// ---- Typed elementwise ops (issue 27 item 6) ---------------------------------------------------------------------
// The integer, bool and cast arithmetic that transformer and TTS graphs do around their float compute (masks, shape
// and index arithmetic, mean pooling), in one implementation for the static step kTypedEltwise (program version 9,
// lower/math_int.cc) and the shape-generic kernels here, so both compute the same bits. ONNX Runtime's semantics:
//   Add/Sub/Mul on integers wrap (two's complement); Div on integers truncates toward zero (a zero divisor, or the
//   minimum divided by -1, fails the run instead of trapping); comparisons give bool; And/Or/Xor/Not on bool;
//   Neg/Abs on integers wrap (Neg of the minimum is the minimum); Sin/Cos/Ceil/Floor on float;
//   Where(cond bool, x, y) of any listed type;
//   Cast: float -> int64/int32 truncates toward zero, NaN, infinities and values outside the target's range give the
//   target's minimum (x86's "integer indefinite", what ONNX Runtime's cast instructions give); int64 -> int32/8-bit
//   keeps the low bits; integers -> float round to nearest; anything -> bool is (x != 0) (NaN is true); bool -> any
//   is 0/1. Float -> 8-bit integers is refused (ONNX Runtime's result there depends on its vectorization).
// bool is one byte, read as (byte != 0), written 0/1. Inputs broadcast to the output (numpy, right-aligned).
enum class ElemOp : int64_t {
  kCast = 0, kNeg = 1, kAbs = 2, kNot = 3, kSin = 4, kCos = 5, kCeil = 6, kFloor = 7,
  kAdd = 10, kSub = 11, kMul = 12, kDiv = 13,
  kEqual = 20, kLess = 21, kGreater = 22, kLessOrEqual = 23, kGreaterOrEqual = 24,
  kAnd = 30, kOr = 31, kXor = 32,
  kWhere = 40,
};
// The op of ONNX op type `op` (Cast, Neg, ..., Where); false for others.
bool ElemOpOf(const std::string& op, ElemOp* out);
// Whether `code` is an ElemOp; its operand count (1, 2 or 3).
bool ValidElemOp(int64_t code, size_t* inputs);
// "" when `op` computes `out` from inputs of types `in` (ONNX codes), else why.
std::string CheckElementwise(ElemOp op, const std::vector<uint32_t>& in, uint32_t out);
// Runs `op` (checked with CheckElementwise) over dense row-major tensors; every input's dims broadcast to out's.
// "" on success, else why (the output dims, an integer division by zero); `out` may be partly written then.
std::string RunElementwise(ElemOp op, const std::vector<GTensor>& in, const GTensor& out, int threads);

// Trilu (ONNX, issue 27 item 6): out = in with the elements outside the kept triangle of each matrix (the last two
// dims) set to zero: upper keeps column - row >= k, lower keeps column - row <= k. Any element type above (bytes
// copied or zeroed); in and out of equal dims, rank >= 2. "" or why.
std::string RunTrilu(const GTensor& in, const GTensor& out, bool upper, int64_t k);
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
