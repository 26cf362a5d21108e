// Per-op support checks, lowering functions and step builders of the AotCpu EP, by family. The tables tying them to
// op types and step kinds are in ops_registry.cc.
//   nn_conv.cc     Conv, ConvTranspose                       (nn_common.h: what the nn files share)
//   nn_pool.cc     pooling, Resize, BatchNormalization
//   nn_gemm.cc     Gemm
//   nn_lstm.cc     LSTM
//   math_matmul.cc MatMul                                    (math_common.h: what the math files share)
//   math_eltwise.cc  elementwise unary/binary/compare (incl. the Erf-form GELU)
//   math_reduce.cc Softmax (and mask Add + Softmax), LayerNormalization, ReduceMean/Max/Min/Sum
//   tensor_view.cc Reshape, Squeeze, Unsqueeze, Flatten, Identity, Cast (same type), Transpose, Slice
//   tensor_concat.cc Concat, Split                           (tensor_common.h: what the tensor files share)
//   tensor_gather.cc Gather
//   tensor_pad.cc  Pad
//   math_int.cc    int64/int32/bool arithmetic, comparisons, logic, Where, Cast across types, Sin/Cos, Shape
//   nn_quant.cc    DynamicQuantizeLinear, DequantizeLinear, QuantizeLinear, MatMulInteger (8-bit steps)
//   nn_quant_conv.cc ConvInteger (int8 convolution step)
//   nn_qdq.cc      QDQ: DequantizeLinear -> Conv -> QuantizeLinear (int8 convolution with requantization)
//   empty.cc       values with no elements (zero-sized dims)
//   ir/fold.cc     constant folding (Shape, Range, int64 arithmetic, ... on constant inputs)
//   runtime/executor.cc  Reorder
#ifndef EPCTX_PROVIDERS_AOTCPU_LOWER_OPS_H_
#define EPCTX_PROVIDERS_AOTCPU_LOWER_OPS_H_

#include <memory>
#include <string>
#include <vector>

#include "providers/aotcpu/plan/compiler.h"
#include "providers/aotcpu/runtime/executor.h"

namespace epctx {
namespace aotcpu {

#define EPCTX_AOT_OP(Name)                                            \
  bool Support##Name(const Graph& g, const Node& n, std::string* why); \
  CheckResult Lower##Name(LowerContext& ctx, int node);
#define EPCTX_AOT_STEP(Name) CheckResult Build##Name(BuildContext& bc, std::unique_ptr<StepExec>* out);

// nn_conv.cc, nn_pool.cc, nn_gemm.cc, nn_lstm.cc
EPCTX_AOT_OP(Conv)
EPCTX_AOT_OP(ConvTranspose)
EPCTX_AOT_OP(BatchNorm)
EPCTX_AOT_OP(Pool)  // MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool
EPCTX_AOT_OP(Resize)
EPCTX_AOT_OP(Gemm)
EPCTX_AOT_OP(Lstm)
EPCTX_AOT_STEP(Conv)
EPCTX_AOT_STEP(Deconv)
EPCTX_AOT_STEP(Pool)
EPCTX_AOT_STEP(Resample)
EPCTX_AOT_STEP(InnerProduct)
EPCTX_AOT_STEP(BatchNorm)
EPCTX_AOT_STEP(Lstm)

// math_matmul.cc, math_eltwise.cc, math_reduce.cc
EPCTX_AOT_OP(MatMul)
EPCTX_AOT_OP(Unary)   // Relu, Clip, Sigmoid, HardSigmoid, HardSwish, Tanh, Exp, Sqrt, Erf, Abs, Neg, Log, ...
EPCTX_AOT_OP(Binary)  // Add, Sub, Mul, Div, Pow, Max, Min
EPCTX_AOT_OP(Compare)  // Equal, Greater, GreaterOrEqual, Less, LessOrEqual (f32 -> bool)
EPCTX_AOT_OP(Softmax)
EPCTX_AOT_OP(LayerNorm)
EPCTX_AOT_OP(Reduce)  // ReduceMean, ReduceMax, ReduceMin, ReduceSum
EPCTX_AOT_STEP(MatMul)
EPCTX_AOT_STEP(Eltwise)
EPCTX_AOT_STEP(Binary)
EPCTX_AOT_STEP(Softmax)
EPCTX_AOT_STEP(LayerNorm)
EPCTX_AOT_STEP(Reduction)
EPCTX_AOT_STEP(Erf)
EPCTX_AOT_STEP(MaskedSoftmax)

// nn_quant.cc
EPCTX_AOT_OP(DynamicQuantize)  // DynamicQuantizeLinear
EPCTX_AOT_OP(Dequantize)       // DequantizeLinear (per tensor)
EPCTX_AOT_OP(MatMulInteger)    // MatMulInteger -> Cast to float -> Mul by a scale
EPCTX_AOT_STEP(DynamicQuantize)
EPCTX_AOT_STEP(Dequantize)
EPCTX_AOT_STEP(MatMulInt8)
EPCTX_AOT_STEP(MatMulInt8Avx2)  // MatMulInteger -> Cast -> Mul on our own AVX2 kernel (no VNNI)
// nn_quant_conv.cc
EPCTX_AOT_OP(ConvInteger)  // ConvInteger -> Cast to float -> Mul by a scale [-> bias Add]
EPCTX_AOT_STEP(ConvInt8)
EPCTX_AOT_STEP(ConvInt8Avx2)  // ConvInteger on our own AVX2 kernel, whole weights (no VNNI; nn_quant_conv_avx2.cc)
EPCTX_AOT_STEP(QConvAvx2)     // a QDQ Conv on our own AVX2 kernel, whole weights (no VNNI; nn_quant_conv_avx2.cc)
EPCTX_AOT_STEP(Bilinear)       // Resize linear over H and W in ONNX Runtime's order (nn_pool.cc)
EPCTX_AOT_STEP(RoundFloat16)   // a Cast to float16 in a float16 graph computed in float32 (tensor_view.cc)
// nn_quant.cc: QuantizeLinear (per tensor)
EPCTX_AOT_OP(Quantize)
EPCTX_AOT_STEP(Quantize)
// nn_qdq.cc: QDQ graphs. Conv dispatches: DequantizeLinear -> Conv -> QuantizeLinear as one int8 convolution with
// requantization (kQConv), any other Conv to nn_conv.cc. DequantizeLinear: per-axis of a constant that only QDQ
// convolutions read (they read its int8 data; no step), else nn_quant.cc's per-tensor step.
EPCTX_AOT_OP(ConvOrQdq)
EPCTX_AOT_OP(DequantizeLinear)
EPCTX_AOT_OP(QuantizeLinear)  // nn_quant.cc's step, channels-last when QDQ convolutions read the result
EPCTX_AOT_STEP(QConv)

// tensor_view.cc, tensor_concat.cc, tensor_gather.cc, tensor_pad.cc
EPCTX_AOT_OP(Reshape)  // Reshape, Squeeze, Unsqueeze, Flatten, Identity, Cast (same type)
EPCTX_AOT_OP(Transpose)
EPCTX_AOT_OP(Slice)
EPCTX_AOT_OP(Gather)
EPCTX_AOT_OP(Concat)
EPCTX_AOT_OP(Split)
EPCTX_AOT_OP(Pad)
EPCTX_AOT_OP(Expand)  // a constant shape: one broadcasting StridedCopy
EPCTX_AOT_STEP(Concat)
EPCTX_AOT_STEP(Gather)
EPCTX_AOT_STEP(Pad)
EPCTX_AOT_STEP(StridedCopy)

// math_int.cc: integer/bool/cast elementwise ops (kTypedEltwise) and the dispatchers that send the float forms of
// shared op types to math_eltwise.cc / tensor_view.cc
EPCTX_AOT_OP(Arith)           // Add, Sub, Mul, Div: float -> Binary, int64/int32 -> typed
EPCTX_AOT_OP(CompareAny)      // Equal, Less, ...: float -> Compare, int64/int32/bool -> typed
EPCTX_AOT_OP(UnaryAny)        // Neg, Abs: float -> Unary, int64/int32 -> typed
EPCTX_AOT_OP(Cast)            // views and int -> float reorders (tensor_view.cc), the rest typed
EPCTX_AOT_OP(Elementwise)     // Where, Not, And, Or, Xor, Sin, Cos, Ceil, Floor
EPCTX_AOT_OP(Trilu)           // a constant k
EPCTX_AOT_OP(Shape)           // Shape of a static value (constant folding normally computes it first)
EPCTX_AOT_STEP(TypedEltwise)
EPCTX_AOT_STEP(Trilu)

// runtime/executor.cc
EPCTX_AOT_STEP(Reorder)

#undef EPCTX_AOT_OP
#undef EPCTX_AOT_STEP

// tensor_view.cc: the permutation of Transpose node `n` over `rank` axes (its perm attribute, by default the axes
// reversed); false when it is not a permutation of [0, rank).
bool TransposePermutation(const Node& n, size_t rank, std::vector<int64_t>* perm);

// math_eltwise.cc: `n` reading `value` as an affine map by a constant scalar (x * s, x + s, x - s, s - x, x / s): true
// with y = alpha * x + beta. x / s becomes x * (1/s), within one ulp of the quotient (exact when s is a power of two);
// a non-finite s gives a non-finite alpha/beta, which AppendPostOp refuses.
bool ScalarAffine(const Graph& g, const Node& n, int value, float* alpha, float* beta);

// math_eltwise.cc: Tanh runs as our own loop (step kErf, function tanh: fast_math.h's TanhF, 1.3 ulp), never as a
// oneDNN eltwise step or post-op, when compiling for an ISA below avx512_core: oneDNN 2.6's tanh there looks its
// coefficients up with vgatherdps, slow on AMD's cores (perftest seed 4 at AVX2: a lone Tanh of 254K elements 0.37 ms
// against ORT's 0.16 ms; the tanh GELU 0.56x).
bool OwnTanh(const CompileOptions& options);

// An eltwise post-op of algorithm `alg` (dnnl_alg_kind_t) with scale 1.
inline PostOp EltwisePostOp(uint32_t alg, float alpha, float beta) {
  PostOp p;
  p.kind = PostOp::kEltwise;
  p.alg = alg;
  p.alpha = alpha;
  p.beta = beta;
  return p;
}

// math_eltwise.cc: appends post-op `p` to `list`. oneDNN 2.6's JIT post-op injectors (convolution, matmul, binary)
// run every eltwise post-op of one algorithm with the parameters of the first one: linear(1, 1.5) then
// linear(1, 0.25) adds 1.5 twice (found by tests/difftest). So a second eltwise post-op of an algorithm already in
// `list` with other parameters is refused: false, `list` unchanged. With `merge_linear`, a linear that follows a
// linear is folded into it instead (a2 * (a1 * x + b1) + b2 = a1 a2 x + (a2 b1 + b2)), which keeps a scale-then-
// shift pair (PaddlePaddle's Mul + Add affine) fused. Any other post-op is appended.
bool AppendPostOp(std::vector<PostOp>* list, const PostOp& p, bool merge_linear);

// math_eltwise.cc: rewrites every hard-swish spelled out in ONNX ops (x * clip(x + 3, 0, 6) / 6 in its orders, x *
// HardSigmoid(x) with alpha 1/6, beta 0.5) as one HardSwish node, and every swish (x * Sigmoid(x), x * Sigmoid(a * x)
// with a constant scalar a: SiLU, quick GELU) as one Swish node (ONNX opset 24's, alpha = a): the last pattern node becomes HardSwish(x) (named
// after every pattern node), the others are marked in `folded` and leave their inputs' consumer lists. A convolution
// then takes it as one post-op (PP-OCR: 2 steps per convolution before, issue 14). Returns the number rewritten.
int FuseSpelledActivations(Graph* g, std::vector<bool>* folded);

// math_common.cc: the element strides of an operand whose layout has no inner blocks (plain, strided, a permutation such
// as nhwc's acdb; a scalar has none); false for a blocked layout.
bool PlainStrides(const Operand& op, std::vector<int64_t>* strides);

// tensor_view.cc: the sub-block [offsets, offsets + dims) of a format-tag operand as an operand of the same tag at a
// byte offset, when those bytes are exactly a `dims` tensor in that layout (no padding); false otherwise. Split and
// Slice of blocked values use it to read the parent's bytes in place.
bool BlockedSubView(const Operand& parent, const std::vector<int64_t>& dims, const std::vector<int64_t>& offsets,
                    Operand* out);

// tensor_pad.cc: a constant-zero Pad of spatial axes read only by Convs (as X, explicit pads) becomes part of their
// pads: the Pad is marked in `folded`, the Convs read its input (TensorFlow exports pad before a strided convolution;
// a padded copy in plain layout otherwise). Returns the number folded.
int FoldPadIntoConv(Graph* g, std::vector<bool>* folded);

// nn_conv.cc: a ConvTranspose's constant bias becomes an Add of its own after it (a new node right after it, node
// indices after it moved up; `folded` grows with them). oneDNN 2.6 runs a deconvolution's bias and post-ops in slow
// loops of their own: 6-70x the deconvolution without them at every layout measured (issue 14). Returns the number
// split.
int SplitConvTransposeBias(Graph* g, std::vector<bool>* folded);

// nn_pool.cc: folds a constant per-channel Add that only an inference BatchNormalization reads into its mean (BN(u +
// c) = BN'(u) with mean' = mean - c): the Add is marked in `folded`, the normalization reads u and a new constant.
// PP-OCRv4's upsampling path spells a ConvTranspose's bias that way. Returns the number folded.
int FoldAddIntoBatchNorm(Graph* g, std::vector<bool>* folded);

// nn_common.cc: libonnx 1.12's shape inference sizes some ceil_mode poolings (a last window starting in the padding
// is not dropped) and SAME ConvTransposes (output_padding added) unlike ONNX Runtime and the kernels (found by
// tests/difftest). Every value whose producer's size, computed as ONNX Runtime does, differs from the graph's static
// shape, and every value computed from it, loses its static shape (has_shape = false), so that no node is claimed
// for a shape the value will not have at run time.
void DistrustContradictedShapes(Graph* g);

// nn_qdq.cc: whether DequantizeLinear node `dq` is read only by QDQ convolutions that kQConv computes from its 8-bit
// (or int32 bias) data: constant folding leaves it alone (any other constant DequantizeLinear is folded to float), and
// its lowering emits nothing when its input is constant.
bool DequantizeReadOnlyByQdqConvs(const Graph& g, const Node& dq);

// nn_qdq.cc: the parameters of DequantizeLinear node `n` (scale, zero point, axis, block_size against its input),
// checked as ONNX requires: false with why naming the tensor and the reason (a per-axis scale of the wrong length, an
// axis out of range, a zero point of another element type or shape).
bool CheckDequantizeParams(const Graph& g, const Node& n, std::string* why);

// empty.cc: values with no elements (a zero-sized dim; a dynamic partition meets them at run time).
// True when every output of `n` present has a static shape with no elements: the compiler defines them and emits no
// step (nothing to compute, and oneDNN refuses zero dims in many primitives).
bool AllOutputsEmpty(const Graph& g, const Node& n);
// Nodes that read a value with no elements but produce elements get the result ONNX defines, before folding:
// Concat drops its empty operands (one left: an Identity); MatMul with K = 0 is zeros; Gemm with K = 0 is beta * C
// (C constant) or zeros; Conv / ConvTranspose of an empty input (a zero-sized spatial dim inside the pads) is its
// bias per channel, or zeros; ReduceSum and ReduceMean over an empty axis are 0, ReduceMax -inf, ReduceMin +inf; a
// constant-mode Pad of an empty tensor is its pad value. The values made constant have their node's flag set in
// `computed` (resized to the node count): the node is then not lowered. Other such nodes are left as they are (their
// support check refuses them). Fails, with a reason starting "shape:" (the caller's input: INVALID_ARGUMENT in a
// dynamic partition), for a pooling over a zero-sized dim other than the batch, which ONNX Runtime refuses.
CheckResult RewriteEmptyOperands(Graph* g, std::vector<bool>* computed);

// ir/fold.cc: evaluates every node whose inputs are all constant (and Shape of a static-shaped value) and whose op it
// knows, storing results as folded constants in the graph; folded[i] is set for each folded node. Results larger
// than 256 MiB are not folded.
CheckResult FoldConstants(Graph* g, std::vector<bool>* folded);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_LOWER_OPS_H_
