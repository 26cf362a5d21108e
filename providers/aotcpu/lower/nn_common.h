// What the nn op family's files share (nn_conv.cc, nn_pool.cc, nn_gemm.cc, nn_lstm.cc): attribute readers, window
// geometry (Conv, ConvTranspose and pooling resolved against their input dims), the fusion chain that turns the
// nodes after a Conv or Gemm into oneDNN post-ops, layout tags and thread probing, and the step builders' operand
// checks. Internal to lower/: nothing outside the nn family includes it.
//
// Step parameters owned by the family (program.h fixes the operand order):
//   kConv / kDeconv  ints: groups, n, strides[n], dilations[n] (oneDNN: ONNX - 1), pads_begin[n], pads_end[n].
//                    Weights have dims [OC, IC/g, k...] when groups == 1, else [g, OC/g, IC/g, k...]. kDeconv's
//                    pads_end may be negative (ConvTranspose's output_padding folded in), down to
//                    -(max(stride, dilation + 1) - 1). Post-op operands follow dst (index >= 4).
//   kPool            ints: alg (dnnl_pooling_max / _avg_include_padding / _avg_exclude_padding), n, kernel[n],
//                    strides[n], pads_begin[n], pads_end[n] (ceil_mode already folded in), dilations[n] (oneDNN).
//   kResample        ints: alg (dnnl_resampling_nearest / _linear). Factors are dst/src dims.
//   kInnerProduct    no params. src [M,K], weights [N,K], bias [N] | none, dst [M,N], post-op operands (>= 4).
//   kBatchNorm       floats: epsilon. scale/shift/mean/variance are plain f32 [C]; dst has src's layout.
//
// Fusion (Conv, ConvTranspose, Gemm): a following inference BatchNormalization with constant parameters is folded
// into the weights and bias at compile time; then elementwise activations (EltwiseFor) and residual Adds whose
// other operand is already computed become oneDNN eltwise / binary-add post-ops, in the order the graph has them.
#ifndef EPCTX_PROVIDERS_AOTCPU_LOWER_NN_COMMON_H_
#define EPCTX_PROVIDERS_AOTCPU_LOWER_NN_COMMON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {

using dnnl::memory;

using Md = dnnl::memory::desc;

constexpr int64_t kMaxWindow = int64_t{1} << 24;  // bound on kernel/stride/pad/dilation values in builders

constexpr const char kSizeDiffers[] = " does not match the computed spatial size";

dnnl::engine& ProbeEngine();

bool Reject(std::string* why, std::string msg);

inline int In(const Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : -1; }

inline int Out(const Node& n, size_t i) { return i < n.outputs.size() ? n.outputs[i] : -1; }

inline bool IsOnnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// Only output 0 present.
bool SingleOutput(const Node& n);

bool StaticF32(const Graph& g, int v);

const float* ConstF32(const Graph& g, int v);

bool IsGraphOutput(const Graph& g, int v);

Md DescOfOperand(const Operand& op);

Md F32Desc(const std::vector<int64_t>& dims, uint32_t tag);

// A node's name, or its first output's name when it has none (names are optional in ONNX).
std::string NodeName(LowerContext& ctx, int node);

// A descriptor for `dims` in the layout of `like` (same format tag, or same dimension order for strided plain
// layouts such as channels-last); empty when `like` is neither.
Md SameLayoutAs(const Md& like, const std::vector<int64_t>& dims);

std::string JoinNames(LowerContext& ctx, int node, const std::vector<int>& absorbed);

// Weight names must be unique per content within a graph: "<node output>/<source value>:<transform>".
std::string WeightName(LowerContext& ctx, int node, int source, const char* how);

inline CheckResult Ok() { return CheckResult::Ok(); }

// ---- window geometry -----------------------------------------------------------------------------------------

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

bool ParseAutoPad(const Node& n, AutoPad* ap, std::string* why);

// ONNX-convention window (dilation >= 1). pad_end_dnnl is the end padding oneDNN needs to produce `out` (differs
// from pad_end for pooling with ceil_mode, and for ConvTranspose where output_padding is folded in).
struct Window {
  std::vector<int64_t> in, out, kernel, stride, dilation, pad_begin, pad_end, pad_end_dnnl;
  size_t rank() const { return in.size(); }
  int64_t Extent(size_t i) const { return (kernel[i] - 1) * dilation[i] + 1; }
};

inline int64_t CeilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// Reads strides / dilations / pads (each absent or of the right length; positive / non-negative).
bool ReadWindowAttrs(const Node& n, size_t r, bool dilations_allowed, Window* w, std::string* why);

// Output size and pads of a convolution / pooling window (w->in, kernel, stride, dilation and explicit pads set).
bool ResolveForward(AutoPad ap, bool ceil_mode, Window* w, std::string* why);

// Every window of every spatial dim covers at least one input element.
bool WindowsTouchInput(const Window& w);

memory::dims DnnlDilations(const Window& w);

// ---- convolution / deconvolution -----------------------------------------------------------------------------

struct ConvSpec {
  bool deconv = false;
  int64_t groups = 1, oc = 0, ic = 0;  // oc/ic: total output/input channels
  Window w;
  std::vector<int64_t> src_dims, dst_dims;
  memory::dims wdims;  // oneDNN weights dims ([g,] OC/g, IC/g, k...)
};

// Validates a Conv / ConvTranspose node and resolves its geometry. Does not look at the fusion chain.
bool ResolveConv(const Graph& g, const Node& n, bool deconv, ConvSpec* s, std::string* why);
// The geometry part of ResolveConv, for any element types (ConvInteger): x = input 0, weights = input 1 (static
// shapes), bias = value `bias` or -1, y = output 0.
bool ResolveConvGeometry(const Graph& g, const Node& n, bool deconv, int bias, ConvSpec* s, std::string* why);

// ---- fusion chain ----------------------------------------------------------------------------------------------

struct FusedOp {
  int node = -1;
  int out = -1;               // the value it produces
  int other = -1;             // a residual Add: its other operand
  std::vector<PostOp> pos;    // the node's post-ops: one binary (a residual Add), or eltwise ones
};

// The activations, affine maps by constant scalars and residual Adds that follow `value` as its sole consumers, in
// order (not yet absorbed), after the step's own post-ops `first` (AppendPostOp: adjacent linears merge; no second
// eltwise of one algorithm with other parameters).
std::vector<FusedOp> CollectPostOps(LowerContext& ctx, int value, std::vector<PostOp> first = {});

// The post-ops of the chain's first `k` entries as a step carries them (adjacent linears merged); a binary entry's
// `operand` is its chain index.
std::vector<PostOp> ChainPostOps(const std::vector<FusedOp>& chain, size_t k);

// The binary operands' current descriptors (empty for eltwise entries). A constant not yet used becomes a plain
// weight when used. The chain is cut before an operand whose layout cannot be described.
void OtherDescs(LowerContext& ctx, std::vector<FusedOp>* chain, std::vector<Md>* mds);

dnnl::primitive_attr PostOpAttr(const std::vector<FusedOp>& chain, size_t k, const std::vector<Md>& other_mds);

inline bool IsRefImpl(const std::string& impl) { return impl.compare(0, 3, "ref") == 0; }

// The channels-last tag of a rank: nwc, nhwc, ndhwc (0 for other ranks).
uint32_t ChannelsLastTag(size_t rank);

// nCw<block>c, nChw<block>c or nCdhw<block>c for an activation of `rank` dims; 0 for other ranks or blocks.
uint32_t ChannelBlockedTag(size_t rank, int block);

// Sets OpenMP's thread count for this thread while in scope.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~OmpThreadsScope() { omp_set_num_threads(saved_); }
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int saved_;
};

// The thread counts a compiled step may be created with: the executor creates each primitive with the threads it
// runs with, which depend on the loading session (1 with intra_op_num_threads=1 or EPCTX_AOTCPU_PARALLEL_MIN_US,
// the processors by default), and oneDNN picks implementations per thread count: on an AVX-512 machine brgconv
// takes a batch-1 channels-last 1-D convolution with 2 threads and refuses it with 1, which then ran the reference
// kernel (issue 14). The machine's processors first (the default), then 1.
const std::vector<int>& ProbeThreadCounts();

// `d` as the executor will see it: through the program's layout encoding (LayoutFromDesc, OperandDesc).
Md AsStored(const Md& d);

// How much a convolution implementation is preferred: 0 reference, 1 gemm-based (im2col), 2 direct kernels.
int ConvImplScore(const std::string& impl);

// Appends the first `k` fused ops to the step: binary operands (Use) after the existing operands.
CheckResult AppendPostOps(LowerContext& ctx, int node, const std::vector<FusedOp>& chain, size_t k,
                          const std::vector<Md>& other_mds, Step* st);

// Inference BatchNormalization on `value` with constant [C] parameters: its per-channel scale and shift.
bool FoldableBatchNorm(const Graph& g, const Node& bn, int value, int64_t channels, std::vector<double>* scale,
                       std::vector<double>* shift);

// `n` reading `value` (dims [N, C, ...]) as a per-channel affine map by a constant: x * s, x + s, x - s, s - x or
// x / s with s broadcasting along C only (one value, or C values on the channel axis). True with y = scale[c] * x +
// shift[c] for every channel c of `channels`.
bool ChannelAffine(const Graph& g, const Node& n, int value, int64_t channels, std::vector<double>* scale,
                   std::vector<double>* shift);

// ---- pooling ---------------------------------------------------------------------------------------------------

struct PoolSpec {
  dnnl_alg_kind_t alg = dnnl_pooling_max;
  Window w;
  std::vector<int64_t> src_dims, dst_dims;
};

bool ResolvePool(const Graph& g, const Node& n, PoolSpec* s, std::string* why);

// ---- step builders (hostile input: everything checked) ------------------------------------------------------

inline std::string I2S(int64_t v) { return std::to_string(v); }

bool InRange(const std::vector<int64_t>& v, size_t at, size_t count, int64_t lo, int64_t hi);

memory::dims Slice(const std::vector<int64_t>& v, size_t at, size_t count);

// Binary post-op operands must come after the step's fixed operands, one per post-op.
CheckResult CheckPostOpOperands(BuildContext& bc, size_t fixed);

CheckResult DescsOf(BuildContext& bc, size_t count, std::vector<Md>* mds);

inline bool IsF32(const Md& d) { return d.data.data_type == dnnl_f32; }

// src and dst: f32, rank 3..5, same batch and channels.
CheckResult CheckSpatialPair(BuildContext& bc, const Md& src, const Md& dst, size_t* r);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_LOWER_NN_COMMON_H_
