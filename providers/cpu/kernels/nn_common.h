// Shared pieces of the CPU EP's convolution, matmul, pooling and quantized kernels (providers/cpu/kernels/nn_*.cc):
// sliding-window geometry (auto_pad, pads, dilations, ceil_mode), the oneDNN engine and its error translation,
// per-thread scratch memory, dtype conversions and the plain-loop fallbacks (double, integer, odd shapes).
//
// Private to nn_*.cc and recurrent.cc (which packs its weights for oneDNN the same way); nothing else includes it
// (it pulls in dnnl.hpp).
// Thread safety: every function here is safe to call concurrently; ThreadScratch hands out memory owned by the
// calling thread.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "providers/cpu/kernel.h"
#include "providers/cpu/layout.h"

namespace epctx {
namespace nn {

// Registration of each file of the family (called by RegisterNnKernels in nn.cc).
void RegisterConvKernels(KernelRegistry& r);
void RegisterMatMulKernels(KernelRegistry& r);
void RegisterPoolKernels(KernelRegistry& r);
void RegisterQuantKernels(KernelRegistry& r);
void RegisterLayoutKernels(KernelRegistry& r);  // the internal epctx.cpu ops of providers/cpu/layout.h

// ---------------------------------------------------------------------------------------------------------------
// Sliding-window geometry.

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

// Window attributes as written on the node. Vectors are empty when the attribute is absent; the spatial rank is
// only known at Compute time (from the input), when Resolve fills the defaults.
struct WindowAttrs {
  AutoPad auto_pad = AutoPad::kNotSet;
  std::vector<int64_t> kernel_shape, strides, dilations, pads;
  bool ceil_mode = false;

  // Reads auto_pad, kernel_shape, strides, dilations (when `has_dilations`), pads and ceil_mode (when
  // `has_ceil_mode`). INVALID_GRAPH for an unknown auto_pad, non-positive strides/dilations/kernel dims, negative
  // pads or inconsistent lengths.
  Status Parse(const KernelInfo& info, bool has_dilations, bool has_ceil_mode);
};

// The resolved geometry of one window op for one input shape (spatial dims only).
struct WindowGeom {
  std::vector<int64_t> in, kernel, stride, dilation, pad_begin, pad_end, out;
  size_t rank() const { return in.size(); }
  int64_t InSize() const;      // product of in
  int64_t OutSize() const;     // product of out
  int64_t KernelSize() const;  // product of kernel
  // Effective (dilated) kernel extent along axis i.
  int64_t Extent(size_t i) const { return (kernel[i] - 1) * dilation[i] + 1; }
};

// Forward window (Conv, pooling): fills `g` for the given input spatial dims and kernel dims. `is_pool` enables
// ceil_mode (windows starting in the end padding are dropped). INVALID_ARGUMENT (message without the node name)
// for attribute lengths that do not match the rank or an input smaller than the window.
Status ResolveWindow(const WindowAttrs& a, const Shape& in_spatial, const Shape& kernel, bool is_pool,
                     WindowGeom* g);

// ---------------------------------------------------------------------------------------------------------------
// oneDNN.

// The one CPU engine of the process.
const dnnl::engine& CpuEngine();

// Limits the OpenMP threads oneDNN uses on this thread for the guard's lifetime (oneDNN sizes its parallel
// regions from omp_get_max_threads()).
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int num_threads);
  ~ScopedOmpThreads();
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int saved_;
};

// The threads a oneDNN product of `macs` multiply-adds is built and run with: one below 2^18 (~5 us on one core, the
// rule the recurrent kernels' per-step products already use), else `threads`. A second thread gains nothing on such
// a product but costs an OpenMP fork/join per call and, under load, waits for a busy core: silero_vad_legacy (tiny
// MatMuls and 1x1 convolutions) ran 0.23 ms on one thread and 0.35-0.45 ms on two, its p90 57 ms on two beside a
// build (issue 24). The choice is part of a plan's key, so a kernel builds each problem once for its thread count.
inline int ThreadsForWork(int64_t macs, int threads) { return macs < (int64_t{1} << 18) ? 1 : threads; }

// Runs fn (which may throw dnnl::error) and converts an exception into a Status (FAIL) naming `what`.
// This is the one place where oneDNN's C++ exceptions are caught; nothing escapes a kernel.
template <typename Fn>
Status DnnlCall(const char* what, Fn&& fn) {
  try {
    fn();
    return Status::OK();
  } catch (const dnnl::error& e) {
    return MakeStatus(ErrorCode::FAIL, "oneDNN ", what, " failed: ", e.what(), " (status ", static_cast<int>(e.status),
                      ")");
  } catch (const std::exception& e) {
    return MakeStatus(ErrorCode::FAIL, "oneDNN ", what, " failed: ", e.what());
  }
}

// A dense row-major f32 (or `dt`) descriptor for any rank (no format tag needed).
dnnl::memory::desc PlainDesc(const dnnl::memory::dims& dims,
                             dnnl::memory::data_type dt = dnnl::memory::data_type::f32);
// The descriptor of a logical [N, C, S...] f32 tensor (rank 3 to 5) stored in `layout` (PlainDesc for kPlain).
dnnl::memory::desc LayoutDesc(const dnnl::memory::dims& logical, CpuLayout layout);
// Copies a logical [N, C, S...] float tensor (rank 3 to 5) from layout `from` at `src` to layout `to` at `dst`
// (oneDNN reorder, cached per shape). INVALID_ARGUMENT for another rank; FAIL when oneDNN fails.
Status ReorderLayout(const Shape& logical, const float* src, CpuLayout from, float* dst, CpuLayout to, int threads);
// The default primitive attributes of this family: user-managed scratchpad (so primitives run concurrently).
dnnl::primitive_attr UserScratchpadAttr();

// Constant weights in layout `prim`: the user memory itself when no reorder is needed, else reordered once and kept
// in `cache` (one entry per layout; the caller holds its mutex).
dnnl::memory PackedConstantWeights(const dnnl::engine& eng, const dnnl::memory::desc& user,
                                   const dnnl::memory::desc& prim, const dnnl::reorder& reorder, void* data,
                                   std::vector<std::pair<dnnl::memory::desc, dnnl::memory>>* cache);

// Per-thread 64-byte aligned scratch memory. Take() returns regions valid until the carver of the same thread is
// created again; one carver per Compute call. Nullptr on allocation failure.
class ScratchCarver {
 public:
  explicit ScratchCarver(size_t total_bytes);
  bool ok() const { return base_ != nullptr || total_ == 0; }
  void* Take(size_t bytes);
  // Bytes Take() uses for a request (rounded up to the alignment); sum these to size the carver.
  static size_t Rounded(size_t bytes) { return (bytes + 63) / 64 * 64; }

 private:
  char* base_ = nullptr;
  size_t total_ = 0, used_ = 0;
};

// Caches up to this many primitives (one per input shape) per kernel before starting over.
constexpr size_t kMaxCachedShapes = 64;

// ---------------------------------------------------------------------------------------------------------------
// Element conversions (float16/bfloat16 compute via float).

template <typename T>
void ToFloat(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}
template <typename T>
void FromFloat(const float* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = T(src[i]);
}
// A float copy of a float16/bfloat16/float tensor (a view when it already is float).
StatusOr<Tensor> AsFloat(const Tensor& t);
// Writes a float tensor's values into `dst` of dtype float16/bfloat16/float (same element count).
void StoreFloat(const Tensor& src, Tensor* dst);

// ---------------------------------------------------------------------------------------------------------------
// Plain-loop convolution, used for double, for integer convolutions (after zero points are subtracted) and for
// shapes oneDNN does not take. Layouts are ONNX's: x [N, C, in...], w [M, C/group, kernel...], y [N, M, out...]
// (y must be zero-filled or hold nothing useful; it is overwritten). bias may be null.
// Both return FAIL when the im2col/col2im buffer cannot be allocated.
template <typename T>
Status ConvPlain(const WindowGeom& g, int64_t n, int64_t c, int64_t m, int64_t group, const T* x, const T* w,
               const T* bias, T* y, int num_threads);
// Transposed convolution: x [N, C, in...], w [C, M/group, kernel...], y [N, M, out...] zero-filled by the caller.
// `g.out` is the output size; pads may be negative (output wider than the natural extent).
template <typename T>
Status ConvTransposePlain(const WindowGeom& g, int64_t n, int64_t c, int64_t m, int64_t group, const T* x, const T* w,
                        const T* bias, T* y, int num_threads);

// Plain GEMM: c[M,N] = a[M,K] * b[K,N] (+ c when accumulate), all dense row-major. Parallel over rows.
template <typename T>
void GemmPlain(int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c, bool accumulate, int num_threads);


// Rounds half to even and saturates to the range of Q (uint8/int8/...).
template <typename Q>
inline Q SaturateRound(float v);

}  // namespace nn
}  // namespace epctx

#include <cmath>
#include <limits>

namespace epctx {
namespace nn {
template <typename Q>
inline Q SaturateRound(float v) {
  float r = std::nearbyint(v);  // default rounding mode: to nearest, ties to even
  constexpr float lo = static_cast<float>(std::numeric_limits<Q>::min());
  constexpr float hi = static_cast<float>(std::numeric_limits<Q>::max());
  if (!(r >= lo)) return std::numeric_limits<Q>::min();  // also NaN
  if (r > hi) return std::numeric_limits<Q>::max();
  return static_cast<Q>(r);
}
}  // namespace nn
}  // namespace epctx
