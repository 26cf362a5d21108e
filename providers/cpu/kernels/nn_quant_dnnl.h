// Exact 8-bit products on oneDNN for the quantized kernels (nn_quant.cc): ConvInteger/QLinearConv and
// MatMulInteger/QLinearMatMul accumulate sum((x - x_zero_point) * (w - w_zero_point)) in int32 here.
//
// oneDNN 2.6's int8 primitives take u8 sources, s8 weights and no weight zero point, so operands are rewritten
// (all in int32, wrapping mod 2^32 like the plain loops, so the result is exact whenever the true sum fits int32):
//   - a signed source becomes unsigned by flipping its top bit (x + 128, and the zero point with it);
//   - weights become w' = w - offset (offset 128 for uint8 weights, 0 for int8), which fits s8, and
//       sum (x - xz)(w - wz) = sum x w' - xz * sum w' + (offset - wz) * sum (x - xz),
//     the last two terms added after the primitive (per-channel weight sums; window/row sums of the source);
//   - a convolution's padding is made explicit with the source zero point, so every window is full and the
//     first correction is one constant per output channel (measured: oneDNN 2.6's own src zero point also pads
//     with the zero point, but its kernels with zero points are the slower jit_int8 ones, not brgconv);
//   - without VNNI (oneDNN held to AVX2, or avx512_core) oneDNN multiplies with vpmaddubsw, whose int16 pair sums
//     saturate (measured: 255 * 127 pairs came out halved), so each w' is split into two halves in [-64, 64]
//     run as extra output channels/columns and added back (twice the work, still exact);
//     (depthwise convolutions excepted: oneDNN's depthwise int8 kernels widen every product, see ConvWeightSplit);
//   - except where AVX2 is present: then the matmul, and pointwise one-group convolutions, run on our own exact
//     int16-madd kernel (providers/int8gemm) instead, with B packed once in its panels (offset 0: w' is the
//     weight's own value) and no split.
// Private to nn_quant*.cc. Thread safety: runners are immutable after SetConstantWeights except for their plan
// caches, which are mutex-guarded; Run may be called concurrently.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "providers/cpu/kernels/nn_common.h"

namespace epctx {
namespace nn {

// Whether oneDNN's u8 x s8 products on this machine (at oneDNN's effective ISA) are exact: VNNI or AMX.
bool Int8ProductsExact();

// Whether the int8 matmul runs on our own AVX2 kernel (providers/int8gemm): oneDNN is not exact here
// (!Int8ProductsExact) and the CPU has AVX2. VNNI machines keep oneDNN.
bool UseOwnInt8Gemm();

// How many halves each convolution weight is split into for oneDNN (1 or 2): 2 where its products are not exact,
// except for depthwise convolutions (one input and one output channel per group), whose kernels widen every
// product to int32.
int ConvWeightSplit(int64_t c_per_group, int64_t m_per_group);

// Whether a convolution runs on our own exact AVX2 kernel (providers/int8gemm) instead of oneDNN: pointwise
// (every kernel dim 1) with one group, where UseOwnInt8Gemm(). Its source is then the [pixels, C] matrix of the
// channels-last input (strided pixels gathered), its weights [C, M] packed once, its accumulators [pixels, M] as
// oneDNN's would be, without the split (half the accumulator bytes and no doubled products).
bool ConvOnOwnGemm(int64_t group, int64_t kernel_size);

// 8-bit weights rewritten for oneDNN: s8 values w' = w - offset (split in two halves when `split` is 2) and the
// per-output-channel sums of w'.
struct Int8Weights {
  std::vector<int8_t> data;   // the primitive's user layout (see PrepareConvWeights / PrepareMatMulWeights)
  std::vector<int32_t> sums;  // one per output channel (conv) or column (matmul) of one matrix
  int32_t offset = 0;         // 128 for uint8 weights, 0 for int8
  int split = 1;              // 2 when each weight is stored as two halves (no VNNI)
  bool own = false;           // data is int8gemm::PackB's panels (offset 0), for UseOwnInt8Gemm
  bool is_signed = false;     // own only: the packed bytes are int8 (else uint8)
};

// Convolution weights [M, C/group, k...] (int8 or uint8) as [group, split * M/group, C/group, k...].
void PrepareConvWeights(const Tensor& w, int64_t group, int split, Int8Weights* out);
// Matmul weights: `mats` row-major [K, N] matrices of int8 or uint8 at `data`, each as [K, split * N]; sums per
// column of every matrix (mats * N).
void PrepareMatMulWeights(const void* data, bool is_signed, int64_t mats, int64_t k, int64_t n, int split,
                          Int8Weights* out);
// A [K, N] int8 or uint8 matrix (rows `stride_k` bytes apart, columns `stride_n`) packed for our own kernel.
void PackOwnWeights(const void* data, bool is_signed, int64_t k, int64_t n, int64_t stride_k, int64_t stride_n,
                    Int8Weights* out);

// round_half_even(v) + zp saturated to the 8-bit Q, without calls or branches so loops of it vectorize
// (nearbyint becomes vrndscaleps with -fno-math-errno). NaN gives Q's minimum, as SaturateRound does.
template <typename Q>
inline Q QuantizeValue(float v, float zp) {
  constexpr float lo = static_cast<float>(std::numeric_limits<Q>::min());
  constexpr float hi = static_cast<float>(std::numeric_limits<Q>::max());
  float r = std::nearbyint(v) + zp;
  r = r >= lo ? r : lo;
  r = r <= hi ? r : hi;
  return static_cast<Q>(static_cast<int32_t>(r));
}

// Where a product's exact int32 result goes: int32 values, or float(acc) * scale (the Cast-to-float and Mul that
// ONNX Runtime's dynamic quantizer puts after ConvInteger/MatMulInteger), then + bias[channel] and Relu when set:
// one rounding per op, as the separate ops do (this file is compiled without FMA contraction).
struct Int8Output {
  int32_t* i32 = nullptr;
  float* f32 = nullptr;
  float scale = 1.f;
  const float* bias = nullptr;  // f32 only: one per output channel (conv) or column (matmul)
  bool relu = false;            // f32 only: x > 0 ? x : 0 after the bias
  // Or, for convolutions only (QLinearConv), 8 bits: QuantizeValue(float(acc) * q_scale[channel], q_zero_point),
  // as a separate requantization of the int32 result would give, without writing the int32 tensor.
  void* q = nullptr;
  bool q_signed = false;             // int8 (else uint8)
  const float* q_scale = nullptr;    // one per output channel
  float q_zero_point = 0.f;
};

// ---------------------------------------------------------------------------------------------------------------
// Convolution: x [N, C, S...] (1 to 3 spatial dims, int8 or uint8, plain), y [N, M, out...] plain.

struct Int8ConvProblem {
  int64_t n = 0, c = 0, m = 0, group = 1;
  WindowGeom g;
};

class Int8ConvRunner {
 public:
  Int8ConvRunner();
  // Weights known at kernel creation, prepared once (PrepareConvWeights, split by ConvWeightSplit).
  void SetConstantWeights(const Tensor& w, int64_t group);
  bool has_constant_weights() const { return const_w_ != nullptr; }

  // y = sum over each window of (x - xz) * (w - wz[m]) (+ bias[m]) written to `out`. `w` is ignored when constant
  // weights were set. wz has 1 or M values; bias may be null. Returns NOT_IMPLEMENTED (message without the node)
  // when oneDNN does not take the problem, so the caller falls back to the plain loops; FAIL on oneDNN errors or
  // out of memory.
  Status Run(const Int8ConvProblem& p, const Tensor& x, int32_t xz, const Tensor* w, const std::vector<int32_t>& wz,
             const int32_t* bias, const Int8Output& out, int threads) const;
  // Builds (and caches) the plan Run would build for `p` with `threads`, so a session whose shapes are known when
  // its kernels are created pays for oneDNN's primitive creation then, not at its first run. Failures are not
  // reported here: Run meets the same cached result and reports or falls back as usual.
  void Prepare(const Int8ConvProblem& p, int threads) const;

 private:
  struct Plan;
  StatusOr<std::shared_ptr<const Plan>> GetPlan(const Int8ConvProblem& p, int threads) const;

  std::unique_ptr<Int8Weights> const_w_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans_;
  mutable std::vector<std::pair<dnnl::memory::desc, dnnl::memory>> packed_;
};

// ---------------------------------------------------------------------------------------------------------------
// Matmul: a [rows, K] (int8 or uint8; rows = batch * M when one B serves all), b [K, N] int8 or uint8.

class Int8MatMulRunner {
 public:
  Int8MatMulRunner();
  // A constant 2-D B [K, N] prepared once.
  void SetConstantWeights(const Tensor& b);
  bool has_constant_weights() const { return const_w_ != nullptr; }

  // With constant weights: builds (and caches) the plan Run would build for `rows` rows of A, as
  // Int8ConvRunner::Prepare does.
  void Prepare(int64_t rows, int threads) const;

  // y[i * N + j] = sum_k (a[i, k] - az[i]) * (b[k, j] - bz[j]) for the row-major `rows` x K matrix at `a` (int8
  // when `a_signed`, else uint8) and the K x N matrix at `b_data` (int8 when `b_signed`; ignored with constant
  // weights). az holds 1 value or one per row, bz 1 or N. Same errors as Int8ConvRunner::Run.
  Status Run(const void* a, bool a_signed, int64_t rows, int64_t k, int64_t n, const std::vector<int32_t>& az,
             const void* b_data, bool b_signed, const std::vector<int32_t>& bz, const Int8Output& out,
             int threads) const;

 private:
  struct Plan;
  StatusOr<std::shared_ptr<const Plan>> GetPlan(int64_t rows, int64_t k, int64_t n, bool constant, int threads) const;

  int split_;
  bool own_;  // UseOwnInt8Gemm() when created
  std::unique_ptr<Int8Weights> const_w_;
  int64_t const_k_ = 0, const_n_ = 0;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans_;
  mutable std::vector<std::pair<dnnl::memory::desc, dnnl::memory>> packed_;
};

}  // namespace nn
}  // namespace epctx
