// What the math op family's files share (math_matmul.cc, math_eltwise.cc, math_reduce.cc): dims and operand helpers,
// graph patterns (the Erf-form GELU), the post-op chain a MatMul or Binary step absorbs, eltwise emission, the step
// builders' descriptor checks, and the mask Add + Softmax lowering both MatMul and Binary hand off to. Internal to
// lower/: the math family includes it, and tensor_common.h for Reject, Numel and RowMajorStrides.
//
// Fusion: a MatMul or Binary step absorbs the nodes that follow it while each is the sole consumer of the previous
// result: a constant bias Add (MatMul only, as the primitive's bias), activations and constant-scalar Mul/Add/Sub
// (eltwise post-ops), the Erf-form GELU (eltwise_gelu_erf), a Pow by a constant scalar and an Add/Sub/Mul/Div/Max/
// Min with an already computed or constant tensor (binary post-op). Each candidate chain is tried on a primitive
// descriptor at compile time; the longest prefix oneDNN implements without falling back to a reference kernel is
// kept, the rest is lowered on its own.
//
// Attention scores: an Add of a constant mask whose result only a last-axis Softmax reads stays out of the MatMul's
// chain; the Add and the Softmax become one MaskedSoftmax step (our own loop: one read of the scores, the mask
// broadcast from cache), cheaper than oneDNN's binary post-op plus its softmax primitive.
//
// Everything here runs at compile time on one thread, except GetDescs/CheckSame (step builders, at load).
#ifndef EPCTX_PROVIDERS_AOTCPU_LOWER_MATH_COMMON_H_
#define EPCTX_PROVIDERS_AOTCPU_LOWER_MATH_COMMON_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {

using dnnl::memory;
using Dims = std::vector<int64_t>;

// --- dims and operands ---------------------------------------------------------------------------------------------

// Sets *why (when given) and returns false: `return Reject(why, "...")` in support checks.
bool Reject(std::string* why, const std::string& reason);

int64_t Numel(const Dims& d);

// `d` with 1s prepended up to `rank`.
Dims PadLeft(const Dims& d, size_t rank);

// Rank-0 tensors are computed as [1]: oneDNN has no rank-0 descriptors.
Dims AtLeast1D(const Dims& d);

// numpy broadcast of `a` and `b` into *out; false when they do not broadcast.
bool BroadcastShapes(const Dims& a, const Dims& b, Dims* out);

// `small` broadcasts to `big` without changing it (numpy rules, `small` not of higher rank).
bool BroadcastsTo(const Dims& small, const Dims& big);

Dims RowMajorStrides(const Dims& d);

// An f32 descriptor of `dims` with explicit `strides`.
memory::desc StridedDesc(const Dims& dims, const Dims& strides);

// Dense row-major (strides of size-1 dims do not matter).
bool IsRowMajor(const Operand& op);

// The same bytes seen with other dims of the same element count; `op` must be dense row-major.
Operand Reshaped(const Operand& op, const Dims& dims);

// Layout usable by layout-preserving steps (eltwise, binary): blocked, or plain without holes.
bool CompactDesc(const memory::desc& d);

// oneDNN picked a reference (slow) implementation.
bool IsRefImpl(const dnnl::primitive_desc_base& pd);

// A stand-in operand for descs of operands not yet taken with Use (dense row-major, f32).
Operand FakePlain(const Dims& dims);

// The post-op attributes the executor builds from the same step (BuildContext::PostOps), for compile-time trials.
bool TrialAttr(const std::vector<PostOp>& post_ops, const std::vector<Operand>& ops, dnnl::primitive_attr* attr);

// --- graph patterns ------------------------------------------------------------------------------------------------

// Same definition as nn_common.h's (one inline function; the two headers are never included together).
inline bool IsOnnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// The node's first output, -1 when it has none.
int Out0(const Node& n);

// The single consuming node of a value that is not a graph output (graph-level; the lowering also checks
// LowerContext::SoleConsumer); -1 otherwise.
int OnlyConsumer(const Graph& g, int value);

// For a two-input node reading `value` once: the other input; -1 otherwise.
int OtherInput(const Node& n, int value);

// `value` is a constant f32 scalar within 1e-6 of `target`.
bool ConstNear(const Graph& g, int value, double target);

// `value` is f32 with static dims equal to `dims`.
bool SameF32Shape(const Graph& g, int value, const Dims& dims);

struct GeluMatch {
  std::vector<int> nodes;  // every node of the pattern
  int out = -1;
};

// The Erf-form GELU rooted at `x` (math_common.cc lists the spellings); with `private_root`, x itself is read only by
// the pattern. Sets *m and returns true on a match.
bool MatchGelu(const Graph& g, int x, bool private_root, GeluMatch* m);

// Some node of `nodes` was already absorbed by another step.
bool AnyAbsorbed(const LowerContext& ctx, const std::vector<int>& nodes);

// --- post-op chains ------------------------------------------------------------------------------------------------

// A group of nodes absorbed together as post-ops of the step that produces their input.
struct Fused {
  std::vector<int> nodes;
  std::vector<PostOp> post_ops;  // kBinary operand fields are filled in when the step is assembled
  int operand_value = -1;        // the value read by the kBinary post-op, if any
  int out = -1;                  // the value this group produces
};

// oneDNN's binary algorithm for Add/Sub/Mul/Div/Max/Min (Min for anything else).
uint32_t BinaryAlg(const std::string& op);

// Pow(x, c) with a constant scalar exponent (float or integer).
bool ConstExponent(const Graph& g, int value, float* e);

// HardSigmoid = clip(alpha * x + beta, 0, 1): oneDNN 2.6 has no single algorithm for it.
void HardSigmoidOps(const Node& n, std::vector<PostOp>* out);

// Which post-op operand shapes the step can take: maps an operand's ONNX dims (broadcastable to the result) to
// the step's compute dims, or returns false.
using OperandMap = std::function<bool(const Dims& onnx_dims, Dims* compute_dims)>;

// Follows `value` through the nodes that could become post-ops of the step producing it (the fusion rule above).
std::vector<Fused> CollectPostOps(LowerContext& ctx, int value, bool allow_binary, const OperandMap& map);

// Post-ops of the first `k` groups; binary operands get operand indices from `first_operand` on and stand-in
// operands (compute dims from `map`) appended to `ops`.
void ChainPrefix(const Graph& g, const std::vector<Fused>& chain, size_t k, const OperandMap& map,
                 std::vector<PostOp>* post_ops, std::vector<Operand>* ops);

// Longest usable prefix of `chain`: `make_pd(post_ops, ops)` returns 0 when oneDNN refuses, 1 for a reference
// implementation, 2 for an optimized one. A prefix is kept when it is not worse than no fusion.
size_t ChooseChain(const Graph& g, const std::vector<Fused>& chain, const std::vector<Operand>& base_ops,
                   const OperandMap& map,
                   const std::function<int(const std::vector<PostOp>&, const std::vector<Operand>&)>& make_pd);

// Takes the chosen prefix into the step: absorbs its nodes, adds binary operands (row-major views with compute
// dims) and post-ops. Sets *final_value to the value the step now produces.
CheckResult ApplyChain(LowerContext& ctx, int node, const std::vector<Fused>& chain, size_t k, const OperandMap& map,
                       Step* step, int* final_value);

// --- steps ---------------------------------------------------------------------------------------------------------

// The dst operand of `value`, defined plain (written straight into a fused output when it is one) and viewed with
// `compute_dims` (same element count).
Operand DefineAs(LowerContext& ctx, int value, const Dims& compute_dims);

// One eltwise step (or a chain of them) computing `algs` from `src_value` into `dst_value`, named `name`.
CheckResult EmitEltwise(LowerContext& ctx, int node, const std::string& name, int src_value, int dst_value,
                        const std::vector<PostOp>& algs);

// Builders: the descriptors of the step's first `n` operands; a failure when oneDNN chose another layout for an
// operand than the program has (`what` names it).
CheckResult GetDescs(BuildContext& bc, size_t n, std::vector<memory::desc>* descs);
CheckResult CheckSame(BuildContext& bc, const char* what, const memory::desc& chosen, const memory::desc& given);

// --- mask Add + Softmax (math_reduce.cc) ---------------------------------------------------------------------------

// Normalized softmax axis, or -1 when out of range.
int SoftmaxAxis(const Node& n, size_t rank);

// Add node `add` = x + mask with `mask` constant f32 (its dims broadcast to x's, last dim equal), x not constant,
// and a last-axis Softmax as the sole reader of the sum: one MaskedSoftmax step. Sets *x, *mask and *softmax.
bool MaskedSoftmaxOf(const LowerContext& ctx, int add, int* x, int* mask, int* softmax);

// Emits that MaskedSoftmax step, absorbing the Softmax.
CheckResult LowerMaskedSoftmax(LowerContext& ctx, int add, int x, int mask, int softmax);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_LOWER_MATH_COMMON_H_
