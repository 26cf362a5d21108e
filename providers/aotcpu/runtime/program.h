// A compiled AotCpu graph: a straight-line list of steps over numbered buffers. The compiler (compiler.h) makes it
// from an ONNX graph; SerializeProgram turns it into the opaque "records" of one GRAPHS entry of the context binary;
// ParseProgram reads records back (hostile input: every count and length is checked); the executor (executor.h)
// turns a parsed program plus weight pointers into oneDNN primitives. The same program drives JIT sessions and
// sessions loaded from a context binary, so their outputs are bit-identical.
//
// Records encoding (little-endian; documented in docs/context-binary-format.md, "GRAPHS records"):
//   "AOTPRG1\0", u32 program version, then inputs, outputs, arena size, weights count, steps; see program.cc.
#ifndef EPCTX_PROVIDERS_AOTCPU_RUNTIME_PROGRAM_H_
#define EPCTX_PROVIDERS_AOTCPU_RUNTIME_PROGRAM_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "providers/aotcpu/check_result.h"

namespace epctx {
namespace aotcpu {

// Program versions: 1 = step kinds 1..16; 2 adds kMaskedSoftmax; 3 adds kPad, kLstm, kStridedCopy and comparison
// algorithms of kBinary; 4 adds a post-op on kBatchNorm (a ReLU, run as oneDNN's fused ReLU); 5 adds the mish
// algorithm (kEltwise or an eltwise post-op: ONNX Mish) and kPad's wrap mode (Pad-19); 6 adds the 8-bit steps
// (kDynamicQuantize, kDequantize, kMatMulInt8, kConvInt8, kQuantize, kQConv, kMatMulInt8Avx2), kBilinear,
// kRoundFloat16 and float16 (dtype 10) operands and fused inputs/outputs (a float16 graph computed in float32
// converts at its edges and where it casts to float16) (issue 26); 7 adds kConvInt8Avx2; 8 adds kQConvAvx2; 9 adds
// kTypedEltwise and kTrilu (issue 27). The writer stamps the
// lowest version that holds the program's step kinds (a program without the newer kinds stays readable by older
// builds); readers accept 1..kProgramVersion and refuse a step kind newer than the stamped version.
inline constexpr uint32_t kProgramVersion = 9;
inline constexpr size_t kMaxRank = 12;
// kPad's mode (its first integer parameter).
enum PadMode : int64_t { kPadConstant = 0, kPadReflect = 1, kPadEdge = 2, kPadWrap = 3 };           // DNNL_MAX_NDIMS
inline constexpr size_t kMaxStepOperands = 64;
inline constexpr size_t kMaxStepParams = 256;

// Where an operand's bytes live.
enum class Buf : uint32_t {
  kNone = 0,    // absent optional operand
  kInput = 1,   // fused-node input `index`
  kOutput = 2,  // fused-node output `index`
  kArena = 3,   // the per-run activation arena, at byte `offset`
  kWeight = 4,  // weight tensor `index` of this graph (TENSORS entry, mapped from the binary)
};

// One tensor operand: a buffer and a memory layout. The layout is a oneDNN format tag (dnnl_format_tag_t value,
// meaningful for the oneDNN version recorded in the binary's compatibility block) or, when tag == 0, explicit
// element strides (plain strided views: transposes, slices). Byte extent = what oneDNN computes for the descriptor.
struct Operand {
  Buf buf = Buf::kNone;
  uint32_t index = 0;
  uint64_t offset = 0;            // bytes from the start of the buffer
  uint32_t dtype = 1;             // ONNX code: 1 f32, 6 i32, 7 i64, 2 u8, 3 i8, 9 bool, 10 f16 (version 6)
  std::vector<int64_t> dims;      // rank 0..kMaxRank (a scalar has rank 0)
  uint32_t tag = 0;               // dnnl_format_tag_t; 0 = use strides
  std::vector<int64_t> strides;   // elements; same rank as dims when tag == 0

  bool present() const { return buf != Buf::kNone; }
};

// A oneDNN post-op attached to a primitive step.
struct PostOp {
  enum Kind : uint32_t { kEltwise = 1, kSum = 2, kBinary = 3 };
  uint32_t kind = kEltwise;
  uint32_t alg = 0;               // dnnl_alg_kind_t for eltwise/binary
  float alpha = 0, beta = 0;      // eltwise parameters
  float scale = 1;                // eltwise/sum scale
  uint32_t operand = 0;           // kBinary: index into Step::ops of the second input; kSum: the accumulated dst
};

// Step kinds. Operand order and parameter meaning per kind (ints/floats) are fixed by the format:
enum class StepKind : uint32_t {
  kReorder = 1,      // ops: src, dst. Copies/converts layout or dtype (also Transpose, Slice, Identity copies).
  kConv = 2,         // ops: src, weights, bias|none, dst, post-op srcs... ints: groups, spatial rank n, strides[n],
                     //   dilations[n] (oneDNN: ONNX - 1), pads_begin[n], pads_end[n].
  kDeconv = 3,       // as kConv.
  kMatMul = 4,       // ops: src, weights, bias|none, dst, post-op srcs...
  kPool = 5,         // ops: src, dst. ints: alg, n, kernel[n], strides[n], pads_begin[n], pads_end[n], dilations[n].
  kEltwise = 6,      // ops: src, dst. ints: alg. floats: alpha, beta.
  kBinary = 7,       // ops: src0, src1, dst, post-op srcs... ints: alg (add..sub: f32; version 3 also ge, gt, le,
                     //   lt, eq, ne: f32 srcs, a bool dst, no post-ops).
  kSoftmax = 8,      // ops: src, dst. ints: axis, log (0/1).
  kLayerNorm = 9,    // ops: src, scale|none, shift|none, dst. floats: epsilon. Normalizes the last dim.
  kReduction = 10,   // ops: src, dst. ints: alg. floats: p, eps.
  kConcat = 11,      // ops: src0..srcN-1, dst. ints: axis.
  kResample = 12,    // ops: src, dst. ints: alg.
  kGather = 13,      // ops: data, indices, dst. ints: axis. Indices checked at run time (negative wraps).
  kErf = 14,         // ops: src, dst (f32, same dims; plain); ints: none (erf) or [function]: 0 erf, 1 tanh.
  kInnerProduct = 15,// ops: src, weights, bias|none, dst, post-op srcs...
  kBatchNorm = 16,   // ops: src, scale, shift, mean, variance, dst. floats: epsilon. Inference (global stats).
  kMaskedSoftmax = 17,  // (version 2) ops: src, mask, dst; f32, dense row-major. dst = softmax(src + mask) over the
                        //   last dim; mask has src's rank and last dim, other dims 1 (broadcast) or src's.
  kPad = 18,         // (version 3) ops: src, dst; f32, dense row-major, equal rank n >= 1. ints: mode (0 constant,
                     //   1 reflect, 2 edge), n, pads_begin[n], pads_end[n] (>= 0; reflect: < src dim). floats: the
                     //   constant value. dst dim k = src dim k + pads_begin[k] + pads_end[k] (ONNX Pad).
  kLstm = 19,        // (version 3) ops: src_layer [T,N,I], src_iter [1,1,N,H]|none, src_iter_c [1,1,N,H]|none,
                     //   weights_layer [1,1,I,4,H], weights_iter [1,1,H,4,H], bias [1,1,4,H] (gates in oneDNN's
                     //   order i, f, c~, o), dst_layer [T,N,H], dst_iter [1,1,N,H]|none, dst_iter_c [1,1,N,H]|none;
                     //   f32, plain (ldigo / ldgo / tnc / ldnc). ints: direction (0 left to right, 1 right to left).
  kStridedCopy = 20, // (version 3) ops: src, dst; dense row-major, same dtype. ints: offset, strides[rank of dst]
                     //   (elements of src, may be negative): dst[i] = src[offset + sum(i_k * strides_k)]; every
                     //   element read must lie in src (a Slice with negative steps).
  // Version 6: 8-bit steps. Scales and zero points are per tensor ([1] operands) and read at run time.
  kDynamicQuantize = 21,  // ops: src f32, dst u8 (src's dims and dense layout), scale f32 [1], zero point u8 [1]
                          //   (ONNX DynamicQuantizeLinear: range [min(0, min x), max(0, max x)] over 255 steps,
                          //   q = saturate(round_half_even(x / scale) + zero point); scale 1, zero point 0 for all
                          //   zeros, as ONNX Runtime).
  kDequantize = 22,  // ops: src u8|i8, dst f32 (src's dims and dense layout), scale f32 [1], zero point [1] of src's
                     //   type|none. dst = float(src - zero point) * scale (ONNX DequantizeLinear, per tensor).
  kMatMulInt8 = 23,  // ops: src u8, weights i8 (oneDNN's packed layout; followed by its compensation when a zero
                     //   point is given), dst f32, src zero point i32 [1]|none, post-op srcs... dst = post-ops(
                     //   float(sum (src - zp) * weights)); the scale is a post-op (binary mul by a [1, 1] operand).
  kConvInt8 = 24,    // ops: src u8, weights i8 (oneDNN's packed layout, plus its compensation when a zero point is
                     //   given), none (no bias), dst f32, src zero point i32 [1]|none, post-op srcs (each dim dst's
                     //   or 1: the scale [1, 1, 1, 1], a bias [1, OC, 1, 1])... ints as kConv with groups 1.
                     //   dst = post-ops(float(sum (src - zp) * weights)); the padding reads as the zero point.
                     //   One more int d (-255..255, not 0): weights stored shifted, the true weights are weights + d;
                     //   the step adds d * sum over each window of (src - zp) in int32 and runs the post-ops in our
                     //   loops (src and dst dense channels-last; lower/nn_quant_window.h lists the post-ops).
  kBilinear = 25,    // (version 6) ops: src, dst; f32 [N, C, H, W], plain strided (nchw, nhwc or another order of the
                     //   same dims, no blocking), N and C equal. ints: mode (0 half_pixel, 1 pytorch_half_pixel).
                     //   floats: scale_h, scale_w (> 0, finite). ONNX Resize linear over H and W, summed in ONNX
                     //   Runtime's order (the CPU EP's misc_resize.cc does the same): per axis the clamped coordinate
                     //   c, taps trunc(c) and min(trunc(c) + 1, len - 1), weights |c - tap|, then d2x*d2y*x11 +
                     //   d1x*d2y*x21 + d2x*d1y*x12 + d1x*d1y*x22 left to right, one rounding per operation.
  kRoundFloat16 = 26,// (version 6) ops: src, dst; f32, equal dims, one dense layout (plain or a format tag without
                     //   padding). dst = src rounded to the nearest float16 (ties to even; beyond float16's range:
                     //   infinity; NaN stays NaN), kept as f32: a Cast to float16 inside a float16 graph computed in
                     //   float32 (ir/float16.h). Our own loop (F16C conversions where the CPU has them).
  kQuantize = 27,    // (version 6) ops: src f32, dst u8|i8 (src's dims and dense layout), scale f32 [1], zero point
                     //   [1] of dst's type|none. dst = saturate(round_half_even(src / scale) + zero point) (ONNX
                     //   QuantizeLinear, per tensor; NaN gives the minimum).
  kQConv = 28,       // (version 6) ops: src u8, weights i8 (oneDNN's packed layout, plus its compensation when a
                     //   source zero point is given), bias i32 [OC]|none, dst u8|i8|f32, src zero point i32 [1]|none,
                     //   dst zero point i32 [1]|none (8-bit dst only), output scales f32 [OC] (a weight), post-op
                     //   srcs... ints as kConv (groups, rank, strides, dilations, pads). A QDQ convolution
                     //   (DequantizeLinear -> Conv -> QuantizeLinear): v = float(sum (src - src zp) * weights + bias)
                     //   * scale[oc], then the post-ops (the first a round half to even), then + dst zp, saturated:
                     //   ONNX Runtime's QLinearConv. A float dst carries the QuantizeLinear -> DequantizeLinear pair
                     //   after it as post-ops (round, clip, linear by the scale) and what follows. The padding reads
                     //   as the source zero point.
  kMatMulInt8Avx2 = 29,  // (version 6) ops: src u8 [M, K] plain, weights u8 [bytes] (providers/int8gemm panels of
                         //   K x N int8 values w - w_zero_point: int8gemm::PackedBSize(K, N) bytes), dst f32 [M, N]
                         //   plain, src zero point i32 [1]|none, scale f32 [1], weight column sums i32 [N] (a weight),
                         //   bias f32 [N]|none. dst = float(sum_k (src - zp) * w) * scale (+ bias[n]), one rounding
                         //   per op: MatMulInteger -> Cast -> Mul (-> Add) on our own exact
                         //   AVX2 kernel, chosen where oneDNN's int8 products are not exact (no VNNI). Needs AVX2.
  kConvInt8Avx2 = 30,    // (version 7) ops: src u8 channels-last dense [N, C, spatial...], weights u8 [bytes] (the
                         //   int8 values s = w - shift of [OC, C, kernel...] in providers/int8gemm's panels, taps
                         //   outer and channels inner: int8gemm::PackedConvWeightsSize bytes), their column sums i32
                         //   [OC] (a weight), dst f32 channels-last dense, src zero point i32 [1]|none, scale f32
                         //   [1...], then post-op operands (first post-op: binary mul by operand 5). ints: groups (1),
                         //   rank r, kernel[r], strides[r], dilations[r] (ONNX - 1), pads_begin[r], pads_end[r], d in
                         //   -255..255. dst = the post-ops of sum over taps inside src of (src - zp) * (s + d) in
                         //   int32, as kConvInt8's shifted form (window sums, then its float epilogue): ConvInteger
                         //   -> Cast -> Mul (-> ...) on our own exact AVX2 kernel with each weight stored once,
                         //   chosen where oneDNN's int8 products are not exact (no VNNI). Needs AVX2.
  kQConvAvx2 = 31,       // (version 8) ops: src u8 channels-last dense [N, C, spatial...], weights u8 [bytes] (the
                         //   symmetric int8 weights [OC, C, kernel...] in providers/int8gemm's panels, taps outer and
                         //   channels inner: int8gemm::PackedConvWeightsSize bytes), their column sums i32 [OC] (a
                         //   weight), dst u8|i8|f32 channels-last dense, src zero point i32 [1]|none, dst zero point
                         //   i32 [1]|none (8-bit dst only), requantization scales f32 [OC] (a weight), bias i32
                         //   [OC]|none (a weight), then post-op operands. ints: groups (1), rank r, kernel[r],
                         //   strides[r], dilations[r] (ONNX - 1), pads_begin[r], pads_end[r]. kQConv's arithmetic
                         //   on our own exact AVX2 kernel with each weight stored once: v = float(sum over taps inside
                         //   src of (src - zp) * w + bias, in int32) * scale[oc], then the post-ops (the first a round
                         //   half to even; after it, for a float dst only: eltwise relu, clip_v2, linear, binary
                         //   add/mul by one value, one per channel or an operand in dst's layout), then + dst zp,
                         //   saturated. Chosen for QDQ convolutions whose weights oneDNN would split (no VNNI).
                         //   Needs AVX2.
  kTypedEltwise = 32,    // (version 9) ops: src0 [, src1 [, src2]], dst; dense row-major, every src of dst's rank
                         //   (>= 1) with each dim equal to dst's or 1 (broadcast; a one-src op: equal dims). ints: op
                         //   (runtime/generic_ops.h ElemOp: 0 Cast, 1 Neg, 2 Abs, 3 Not, 4 Sin, 5 Cos, 10 Add, 11 Sub,
                         //   12 Mul, 13 Div, 20 Equal, 21 Less, 22 Greater, 23 LessOrEqual, 24 GreaterOrEqual, 30 And,
                         //   31 Or, 32 Xor, 40 Where), with the element types and semantics listed there (integer
                         //   arithmetic wraps, Div truncates toward zero and fails the run on a zero divisor, Cast
                         //   float -> int64/int32 truncates, NaN and out-of-range values give the minimum). Our loop.
                         //   Version 9 also: 6 Ceil, 7 Floor (float).
  kTrilu = 33,           // (version 9) ops: src, dst; dense row-major, equal dims of rank >= 2, one element type.
                         //   ints: upper (0/1), k (|k| <= 2^40). ONNX Trilu: each matrix (last two dims) keeps the
                         //   elements with column - row >= k (upper) or <= k (lower), the others are zero.
};
const char* StepKindName(uint32_t kind);  // "Reorder", ..., "unknown"

struct Step {
  StepKind kind = StepKind::kReorder;
  std::string name;                 // the ONNX node(s) it came from, for messages and profiles
  std::vector<Operand> ops;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<PostOp> post_ops;
};

struct IoInfo {
  std::string name;
  uint32_t dtype = 1;
  std::vector<int64_t> dims;
};

struct Program {
  std::vector<IoInfo> inputs, outputs;  // fused-node order
  uint64_t arena_bytes = 0;
  uint32_t num_weights = 0;             // kWeight operands index [0, num_weights)
  std::vector<Step> steps;
};

// Encodes `p` as records. Never fails for a program the compiler made.
std::string SerializeProgram(const Program& p);

// Decodes records (hostile). Checks framing, counts against the limits above, ranks, enum ranges and that every
// kWeight index < `num_weights_available` and matches p->num_weights; operand extents are checked by the executor,
// which knows the layouts. On failure *p is unspecified and the reason names the step and field.
CheckResult ParseProgram(std::string_view records, uint32_t num_weights_available, Program* p);

// One-line human description of a step, for `epctx inspect` and messages.
std::string DescribeStep(const Step& s);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_RUNTIME_PROGRAM_H_
