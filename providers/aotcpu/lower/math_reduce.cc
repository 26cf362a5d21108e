// The ops that normalize or reduce along axes: Softmax (and the mask Add + Softmax of attention scores, one
// MaskedSoftmax step of our own), LayerNormalization and ReduceMean/Max/Min/Sum: support checks, lowering and
// step builders (see ops.h and math_common.h).
#include "providers/aotcpu/lower/math_common.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace epctx {
namespace aotcpu {

// ---- Softmax ----------------------------------------------------------------------------------------------------

// Normalized softmax axis, or -1 when out of range.
int SoftmaxAxis(const Node& n, size_t rank) {
  int64_t axis = n.Int("axis", n.opset >= 13 ? -1 : 1);
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) return -1;
  if (axis < 0) axis += r;
  return static_cast<int>(axis);
}

namespace {

// The dims the softmax runs over and its axis in them. Opset 13+: the input's dims, the node's axis. Before 13 the
// input is coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])] and normalized over the second dim (the same as
// opset 13 only for the last axis).
Dims SoftmaxDims(const Node& n, const Dims& d, int axis, int* compute_axis) {
  if (n.opset >= 13) {
    *compute_axis = axis;
    return d;
  }
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < d.size(); ++i) (static_cast<int>(i) < axis ? outer : inner) *= d[i];
  *compute_axis = 1;
  return {outer, inner};
}
}  // namespace

bool SupportSoftmax(const Graph& g, const Node& n, std::string* why) {
  if (!StaticFloatTensors(g, n, why)) return false;
  if (n.inputs.size() != 1 || n.outputs.size() != 1) return Reject(why, "needs one input and one output");
  const Dims& d = g.v(n.inputs[0]).dims;
  if (d.empty() || d.size() > kMaxRank) return Reject(why, "rank must be 1.." + std::to_string(kMaxRank));
  if (Numel(d) == 0) return Reject(why, "empty tensor");
  if (g.v(n.outputs[0]).dims != d) return Reject(why, "output shape differs from the input");
  if (SoftmaxAxis(n, d.size()) < 0) return Reject(why, "axis out of range");
  return true;
}

CheckResult LowerSoftmax(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  const Dims& d = g.v(n.inputs[0]).dims;
  int axis = SoftmaxAxis(n, d.size());
  if (axis < 0) return ctx.Fail(node, "unsupported axis");
  int compute_axis = axis;
  const Dims cd = SoftmaxDims(n, d, axis, &compute_axis);
  Operand src = ctx.UsePlain(n.inputs[0]);
  if (!IsRowMajor(src)) return ctx.Fail(node, "input is not row-major");
  Step s;
  s.kind = StepKind::kSoftmax;
  s.name = n.name;
  s.ops = {Reshaped(src, cd), DefineAs(ctx, n.outputs[0], cd)};
  s.ints = {compute_axis, 0};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildSoftmax(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(2, true, 2, 0);
  if (!r.ok) return r;
  const Step& st = bc.step();
  std::vector<memory::desc> d;
  if (!(r = GetDescs(bc, 2, &d)).ok) return r;
  if (st.ints[0] < 0 || st.ints[0] >= d[0].data.ndims) return bc.Fail("softmax axis out of range");
  if (st.ints[1] != 0 && st.ints[1] != 1) return bc.Fail("softmax log flag must be 0 or 1");
  dnnl::primitive_attr attr;
  std::vector<std::pair<int, int>> args;
  if (!(r = bc.PostOps(&attr, &args)).ok) return r;
  try {
    dnnl::softmax_v2_forward::primitive_desc pd(
        dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_inference,
                                       st.ints[1] ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate,
                                       d[0], d[1], static_cast<int>(st.ints[0])),
        attr, bc.engine());
    if (!(r = CheckSame(bc, "src", pd.src_desc(), d[0])).ok) return r;
    if (!(r = CheckSame(bc, "dst", pd.dst_desc(), d[1])).ok) return r;
    args.push_back({DNNL_ARG_SRC, bc.Slot(0, d[0])});
    args.push_back({DNNL_ARG_DST, bc.Slot(1, d[1])});
    out->reset(new PrimitiveExec(dnnl::softmax_v2_forward(pd), std::move(args)));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("softmax: ") + e.what());
  }
  return CheckResult::Ok();
}

// ---- MaskedSoftmax -----------------------------------------------------------------------------------------------


// Add node `add` = x + mask with `mask` constant f32 (its dims broadcast to x's, last dim equal), x not constant,
// and a last-axis Softmax as the sole reader of the sum: one MaskedSoftmax step. Sets *x, *mask and *softmax.
bool MaskedSoftmaxOf(const LowerContext& ctx, int add, int* x, int* mask, int* softmax) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(add);
  if (!IsOnnx(n) || n.op != "Add" || n.inputs.size() != 2 || n.inputs[0] < 0 || n.inputs[1] < 0) return false;
  const int sm = ctx.SoleConsumer(Out0(n));
  if (sm < 0) return false;
  const Node& s = ctx.node(sm);
  const Value& y = g.v(Out0(n));
  if (!IsOnnx(s) || s.op != "Softmax" || s.inputs.size() != 1 || s.outputs.size() != 1 || y.dims.empty() ||
      SoftmaxAxis(s, y.dims.size()) != static_cast<int>(y.dims.size()) - 1 || y.dtype != kF32 ||
      g.v(Out0(s)).dims != y.dims)
    return false;
  for (int i = 0; i < 2; ++i) {
    const Value& xv = g.v(n.inputs[i]);
    const Value& mv = g.v(n.inputs[1 - i]);
    if (xv.is_const() || !mv.is_const() || xv.dtype != kF32 || mv.dtype != kF32 || xv.dims != y.dims ||
        mv.dims.size() > y.dims.size() || mv.dims.empty())
      continue;
    const Dims md = PadLeft(mv.dims, y.dims.size());
    bool ok = md.back() == y.dims.back();
    for (size_t k = 0; k + 1 < md.size(); ++k) ok = ok && (md[k] == 1 || md[k] == y.dims[k]);
    if (!ok) continue;
    *x = n.inputs[i];
    *mask = n.inputs[1 - i];
    *softmax = sm;
    return true;
  }
  return false;
}

CheckResult LowerMaskedSoftmax(LowerContext& ctx, int add, int x, int mask, int softmax) {
  const Graph& g = ctx.graph();
  const Dims& d = g.v(x).dims;
  Operand src = ctx.UsePlain(x);
  Operand m = ctx.UsePlain(mask);
  if (!IsRowMajor(src) || !IsRowMajor(m)) return ctx.Fail(add, "scores or mask are not row-major");
  ctx.Absorb(softmax);
  Step s;
  s.kind = StepKind::kMaskedSoftmax;
  s.name = ctx.node(add).name + "+" + ctx.node(softmax).name;
  s.ops = {Reshaped(src, d), Reshaped(m, PadLeft(g.v(mask).dims, d.size())),
           DefineAs(ctx, Out0(ctx.node(softmax)), d)};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

namespace {
// exp(x) for x <= 0 (a softmax's x - max), branch-free so the row loops vectorize: exp(x) = 2^k e^r with
// k = round(x log2 e) (|k| <= 126), r = x - k ln 2 (ln 2 in two parts, |r| <= ln2 / 2), e^r by its degree-6 Taylor polynomial
// (relative error below 2e-7). Below -87.3 (results below FLT_MIN) the result is 0; NaN stays NaN.
inline float ExpNonPositive(float x) {
  const float xc = x < -87.3f ? -87.3f : x;
  const float xs = xc == xc ? xc : 0.f;
  // Round to nearest by adding and removing 1.5 * 2^23 (no floorf call, which would stop vectorization).
  const float k = (xs * 1.44269504f + 12582912.f) - 12582912.f;
  const float r = (xs - k * 0.693359375f) - k * -2.12194440e-4f;
  float p = 1.f / 720;
  p = p * r + 1.f / 120;
  p = p * r + 1.f / 24;
  p = p * r + 1.f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x >= -87.3f ? p * scale : (x == x ? 0.f : x);
}

// One row: max of x + mask, exponentials, division by their sum. With AVX-512 in the build (EPCTX_NATIVE), GCC is
// told to use 16-lane vectors (its default tuning stops at 8; a row of 128 scores then takes 8 instead of 16
// vectors: 105 vs 160 us for the decoder's 1024 rows on one core); otherwise clones as for Erf.
#if defined(__AVX512F__)
__attribute__((target("prefer-vector-width=512")))
#elif !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void MaskedSoftmaxRow(const float* x, const float* mask, float* y, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n; ++j) {
    const float t = x[j] + mask[j];
    y[j] = t;
    mx = t > mx ? t : mx;
  }
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    const float e = ExpNonPositive(y[j] - mx);
    y[j] = e;
    sum += e;
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] /= sum;
}

class MaskedSoftmaxExec : public StepExec {
 public:
  // rows x cols scores; row r reads mask row sum_k index_k(r) * mask_strides[k] (0 where the mask broadcasts).
  MaskedSoftmaxExec(int src, int mask, int dst, Dims lead, Dims mask_strides, int64_t cols)
      : src_(src), mask_(mask), dst_(dst), lead_(std::move(lead)), mask_strides_(std::move(mask_strides)), cols_(cols) {
    rows_ = Numel(lead_);
  }
  void Run(RunContext& rc) override {
    const float* x = static_cast<const float*>(rc.ptr(src_));
    const float* m = static_cast<const float*>(rc.ptr(mask_));
    float* y = static_cast<float*>(rc.ptr(dst_));
    // Rows are independent and each is computed by one thread in one order: results do not depend on the split.
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      int64_t rest = r, mrow = 0;
      for (size_t k = lead_.size(); k-- > 0;) {
        mrow += (rest % lead_[k]) * mask_strides_[k];
        rest /= lead_[k];
      }
      MaskedSoftmaxRow(x + r * cols_, m + mrow * cols_, y + r * cols_, cols_);
    }
  }

 private:
  int src_, mask_, dst_;
  Dims lead_, mask_strides_;
  int64_t cols_, rows_ = 0;
};
}  // namespace

CheckResult BuildMaskedSoftmax(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(3, false, 0, 0);
  if (!r.ok) return r;
  std::vector<memory::desc> d;
  if (!(r = GetDescs(bc, 3, &d)).ok) return r;
  const Step& st = bc.step();
  for (const Operand& o : st.ops)
    if (!o.present() || o.dtype != kF32) return bc.Fail("masked softmax needs three f32 operands");
  const Dims& dims = st.ops[0].dims;
  const Dims& md = st.ops[1].dims;
  if (dims.empty() || st.ops[2].dims != dims || md.size() != dims.size() || md.back() != dims.back())
    return bc.Fail("masked softmax: dst must have src's dims, the mask src's rank and last dim");
  for (size_t k = 0; k < dims.size(); ++k)
    if (md[k] != 1 && md[k] != dims[k]) return bc.Fail("masked softmax: the mask does not broadcast to src");
  for (size_t i = 0; i < 3; ++i)
    if (d[i] != StridedDesc(st.ops[i].dims, RowMajorStrides(st.ops[i].dims)))
      return bc.Fail("masked softmax operands must be dense row-major");
  Dims lead(dims.begin(), dims.end() - 1), mask_strides(lead.size(), 0);
  int64_t stride = 1;  // in mask rows
  for (size_t k = lead.size(); k-- > 0;) {
    mask_strides[k] = md[k] == 1 ? 0 : stride;
    stride *= md[k];
  }
  out->reset(new MaskedSoftmaxExec(bc.Slot(0, d[0]), bc.Slot(1, d[1]), bc.Slot(2, d[2]), std::move(lead),
                                   std::move(mask_strides), dims.back()));
  return CheckResult::Ok();
}

// ---- LayerNormalization -----------------------------------------------------------------------------------------

namespace {
bool ValueUsed(const Graph& g, const Node& n, size_t output) {
  if (output >= n.outputs.size() || n.outputs[output] < 0) return false;
  const Value& v = g.v(n.outputs[output]);
  return v.is_graph_output || !v.consumers.empty();
}

// Normalized rows as oneDNN sees them: rank >= 2 (a 1-D input is one row).
Dims LayerNormDims(const Dims& d) { return d.size() == 1 ? Dims{1, d[0]} : d; }
}  // namespace

bool SupportLayerNorm(const Graph& g, const Node& n, std::string* why) {
  if (n.inputs.size() < 2 || n.inputs.size() > 3 || n.inputs[0] < 0 || n.inputs[1] < 0)
    return Reject(why, "needs X, Scale and optionally B");
  if (ValueUsed(g, n, 1) || ValueUsed(g, n, 2)) return Reject(why, "Mean/InvStdDev outputs are not produced");
  for (int v : {n.inputs[0], n.inputs[1], n.inputs.size() > 2 ? n.inputs[2] : -1, n.outputs[0]}) {
    if (v < 0) continue;
    if (g.v(v).dtype != kF32 || !g.v(v).has_shape) return Reject(why, "tensors must be float with static shapes");
  }
  if (n.Int("stash_type", 1) != 1) return Reject(why, "stash_type other than float");
  const Dims& d = g.v(n.inputs[0]).dims;
  int64_t r = static_cast<int64_t>(d.size());
  int64_t axis = n.Int("axis", -1);
  if (r == 0 || axis < -r || axis >= r) return Reject(why, "axis out of range");
  if (axis < 0) axis += r;
  if (axis != r - 1) return Reject(why, "only the last axis is normalized");
  if (Numel(d) == 0) return Reject(why, "empty tensor");
  if (g.v(n.outputs[0]).dims != d) return Reject(why, "output shape differs from X");
  const int64_t c = d.back();
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (n.inputs[i] < 0) continue;
    const Dims& sd = g.v(n.inputs[i]).dims;
    if (sd.size() > d.size() || Numel(sd) != c || (!sd.empty() && sd.back() != c))
      return Reject(why, "Scale/B must have the normalized shape [" + std::to_string(c) + "]");
  }
  try {
    Dims ld = LayerNormDims(d);
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::layer_normalization_forward::primitive_desc pd(
        dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, PlainDesc(ld, kF32), 1e-5f,
                                                dnnl::normalization_flags::use_scale |
                                                    dnnl::normalization_flags::use_shift),
        eng);
  } catch (const dnnl::error& e) {
    return Reject(why, std::string("oneDNN layer normalization: ") + e.what());
  }
  return true;
}

CheckResult LowerLayerNorm(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  const Dims ld = LayerNormDims(g.v(n.inputs[0]).dims);
  const Dims cd = {ld.back()};
  Operand src = ctx.UsePlain(n.inputs[0]);
  Operand scale = ctx.UsePlain(n.inputs[1]);
  Operand shift;
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) shift = ctx.UsePlain(n.inputs[2]);
  if (!IsRowMajor(src) || !IsRowMajor(scale) || (shift.present() && !IsRowMajor(shift)))
    return ctx.Fail(node, "operands are not row-major");
  Step s;
  s.kind = StepKind::kLayerNorm;
  s.name = n.name;
  s.ops = {Reshaped(src, ld), Reshaped(scale, cd), shift.present() ? Reshaped(shift, cd) : Operand(),
           DefineAs(ctx, n.outputs[0], ld)};
  s.floats = {n.Float("epsilon", 1e-5f)};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildLayerNorm(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(4, false, 0, 1);
  if (!r.ok) return r;
  const Step& st = bc.step();
  float eps = st.floats[0];
  if (!std::isfinite(eps) || eps < 0) return bc.Fail("epsilon must be finite and >= 0");
  std::vector<memory::desc> d;
  if (!(r = GetDescs(bc, 4, &d)).ok) return r;
  if (d[0].data.ndims < 1) return bc.Fail("layer norm src has no dims");
  const bool has_scale = st.ops[1].present(), has_shift = st.ops[2].present();
  const int64_t c = d[0].data.dims[d[0].data.ndims - 1];
  memory::desc vec({c}, memory::data_type::f32, memory::format_tag::a);
  if ((has_scale && d[1] != vec) || (has_shift && d[2] != vec))
    return bc.Fail("scale/shift must be dense f32 [" + std::to_string(c) + "]");
  dnnl::normalization_flags flags = dnnl::normalization_flags::none;
  if (has_scale) flags = flags | dnnl::normalization_flags::use_scale;
  if (has_shift) flags = flags | dnnl::normalization_flags::use_shift;
  dnnl::primitive_attr attr;
  std::vector<std::pair<int, int>> args;
  if (!(r = bc.PostOps(&attr, &args)).ok) return r;
  try {
    dnnl::layer_normalization_forward::primitive_desc pd(
        dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, d[0], eps, flags), attr,
        bc.engine());
    if (!(r = CheckSame(bc, "src", pd.src_desc(), d[0])).ok) return r;
    if (!(r = CheckSame(bc, "dst", pd.dst_desc(), d[3])).ok) return r;
    args.push_back({DNNL_ARG_SRC, bc.Slot(0, d[0])});
    if (has_scale) args.push_back({DNNL_ARG_SCALE, bc.Slot(1, d[1])});
    if (has_shift) args.push_back({DNNL_ARG_SHIFT, bc.Slot(2, d[2])});
    args.push_back({DNNL_ARG_DST, bc.Slot(3, d[3])});
    out->reset(new PrimitiveExec(dnnl::layer_normalization_forward(pd), std::move(args)));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("layer normalization: ") + e.what());
  }
  return CheckResult::Ok();
}

// ---- ReduceMean, ReduceMax, ReduceMin, ReduceSum ----------------------------------------------------------------

namespace {
// The oneDNN algorithm of a reduce op; false for others.
bool ReduceAlg(const std::string& op, dnnl_alg_kind_t* alg) {
  if (op == "ReduceMean") *alg = dnnl_reduction_mean;
  else if (op == "ReduceMax") *alg = dnnl_reduction_max;
  else if (op == "ReduceMin") *alg = dnnl_reduction_min;
  else if (op == "ReduceSum") *alg = dnnl_reduction_sum;
  else if (op == "ReduceL2") *alg = dnnl_reduction_norm_lp_sum;             // sqrt(sum x^2): p 2, eps 0
  else if (op == "ReduceSumSquare") *alg = dnnl_reduction_norm_lp_power_p_sum;  // sum x^2: p 2, eps 0
  else return false;
  return true;
}

// oneDNN's p parameter of reduction algorithm `alg` (2 for the L2 forms, unused by the others).
float ReduceP(dnnl_alg_kind_t alg) {
  return alg == dnnl_reduction_norm_lp_sum || alg == dnnl_reduction_norm_lp_power_p_sum ? 2.f : 0.f;
  return true;
}

// Src dims with the reduced axes set to 1 (keepdims form); false (with why) for bad or non-constant axes. Axes are
// an attribute, or an input from opset 18 (ReduceSum: 13); with none (or an empty list) every axis is reduced
// unless noop_with_empty_axes (then nothing is).
bool ReducedDims(const Graph& g, const Node& n, const Dims& d, Dims* out, std::string* why,
                 std::vector<bool>* reduced = nullptr) {
  const int64_t since_input = n.op == "ReduceSum" ? 13 : 18;
  std::vector<int64_t> axes;
  if (n.opset >= since_input) {
    if (n.inputs.size() > 1 && n.inputs[1] >= 0 && !g.ConstInts(n.inputs[1], &axes))
      return Reject(why, "axes are not constant");
  } else {
    axes = n.Ints("axes");
  }
  const int64_t r = static_cast<int64_t>(d.size());
  *out = d;
  std::vector<bool> seen(d.size(), false);
  if (axes.empty()) {
    if (!(n.opset >= since_input && n.Int("noop_with_empty_axes", 0) != 0)) {
      for (auto& x : *out) x = 1;
      seen.assign(d.size(), true);
    }
  }
  for (int64_t a : axes) {
    if (a < -r || a >= r) return Reject(why, "axis out of range");
    if (a < 0) a += r;
    if (seen[static_cast<size_t>(a)]) return Reject(why, "repeated axis");
    seen[static_cast<size_t>(a)] = true;
    (*out)[static_cast<size_t>(a)] = 1;
  }
  if (reduced) *reduced = seen;
  return true;
}

// The ONNX output dims: keepdims keeps the reduced axes as 1, otherwise they are dropped.
Dims ReduceOutputDims(const Node& n, const Dims& kd, const std::vector<bool>& reduced) {
  if (n.Int("keepdims", 1) != 0) return kd;
  Dims out;
  for (size_t i = 0; i < kd.size(); ++i)
    if (!reduced[i]) out.push_back(kd[i]);
  return out;
}
}  // namespace

bool SupportReduce(const Graph& g, const Node& n, std::string* why) {
  dnnl_alg_kind_t alg;
  if (!ReduceAlg(n.op, &alg)) return Reject(why, "not a supported reduction");
  if (n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1) return Reject(why, "needs an input and one output");
  const int64_t since_input = n.op == "ReduceSum" ? 13 : 18;
  if (n.inputs.size() > (n.opset >= since_input ? 2u : 1u)) return Reject(why, "too many inputs");
  const Value& x = g.v(n.inputs[0]);
  const Value& y = g.v(n.outputs[0]);
  if (x.dtype != kF32 || y.dtype != kF32) return Reject(why, "only float tensors");
  if (!x.has_shape || !y.has_shape) return Reject(why, "shapes must be static");
  const Dims& d = x.dims;
  if (d.size() > kMaxRank) return Reject(why, "rank above " + std::to_string(kMaxRank));
  if (Numel(d) == 0) return Reject(why, "empty tensor");
  Dims kd;
  std::vector<bool> reduced;
  if (!ReducedDims(g, n, d, &kd, why, &reduced)) return false;
  if (y.dims != ReduceOutputDims(n, kd, reduced))
    return Reject(why, "output shape does not match the axes and keepdims");
  // Nothing reduced (noop_with_empty_axes with empty axes) lowers as a copy, which is right for ReduceSum/Mean/Max/Min
  // but not for the norms: ReduceL2 is then |x| and ReduceSumSquare x^2 (ONNX backend *_noop_empty_axes).
  if ((alg == dnnl_reduction_norm_lp_sum || alg == dnnl_reduction_norm_lp_power_p_sum) &&
      std::none_of(reduced.begin(), reduced.end(), [](bool b) { return b; }))
    return Reject(why, "nothing reduced (noop_with_empty_axes): " + n.op + " is then element-wise, not lowered");
  return true;
}

namespace {
// Whether the reduced axes (kd: sd with 1 on each) are one block of consecutive axes, every axis between the first and
// the last reduced: sd is then [a, r, b] with r reduced. False when nothing is reduced or the axes are not a block.
bool ReducedBlock(const Dims& sd, const Dims& kd, int64_t* a, int64_t* r, int64_t* b) {
  if (kd == sd) return false;
  size_t lo = sd.size(), hi = 0;
  for (size_t i = 0; i < sd.size(); ++i)
    if (kd[i] != sd[i]) lo = std::min(lo, i), hi = i;
  bool block = true;
  *a = *r = *b = 1;
  for (size_t i = 0; i < sd.size(); ++i) {
    if (i < lo) *a *= sd[i];
    else if (i > hi) *b *= sd[i];
    else *r *= sd[i], block = block && kd[i] == 1;
  }
  return block;
}
}  // namespace

CheckResult LowerReduce(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  dnnl_alg_kind_t alg;
  if (!ReduceAlg(n.op, &alg)) return ctx.Fail(node, "not a supported reduction");
  const Dims sd = AtLeast1D(g.v(n.inputs[0]).dims);
  Dims kd;
  std::string why;
  if (!ReducedDims(g, n, g.v(n.inputs[0]).dims, &kd, &why)) return ctx.Fail(node, why);
  kd = AtLeast1D(kd);
  Operand src = ctx.UsePlain(n.inputs[0]);
  if (!IsRowMajor(src)) return ctx.Fail(node, "input is not row-major");
  // A mean or sum over one block of axes followed by others is a matrix product with a constant row of 1/R (or 1):
  // [1, R] x [A, R, B] -> [A, 1, B]. oneDNN 2.6's jit reduction reduces trailing axes only, and the rest ran its
  // reference kernel (Silero v4's ReduceMean over the middle axis of [1, 129, 24]: 60 us, a third of its run).
  int64_t a = 1, r = 1, b = 1;
  const bool block = ReducedBlock(sd, kd, &a, &r, &b);
  if (block && (alg == dnnl_reduction_mean || alg == dnnl_reduction_sum)) {
    if (b > 1 && r > 1 && r <= (int64_t{1} << 24)) {
      const Dims wdims = {1, 1, r}, xdims = {a, r, b}, ydims = {a, 1, b};
      try {
        dnnl::matmul::primitive_desc pd(
            dnnl::matmul::desc(PlainDesc(wdims, kF32), PlainDesc(xdims, kF32), PlainDesc(ydims, kF32)), ctx.engine());
        if (!IsRefImpl(pd)) {
          const std::vector<float> w(static_cast<size_t>(r), alg == dnnl_reduction_mean ? 1.f / static_cast<float>(r) : 1.f);
          Operand wop;
          CheckResult cr = ctx.AddWeight(n.name + ":row", std::string(reinterpret_cast<const char*>(w.data()),
                                                                     w.size() * sizeof(float)),
                                         PlainDesc(wdims, kF32), &wop);
          if (!cr.ok) return cr;
          Step m;
          m.kind = StepKind::kMatMul;
          m.name = n.name;
          m.ops = {wop, Reshaped(src, xdims), Operand(), DefineAs(ctx, n.outputs[0], ydims)};
          ctx.Emit(std::move(m));
          return CheckResult::Ok();
        }
      } catch (const dnnl::error&) {
      }
    }
  }
  // Any other reduction over one block of axes followed by others (a max over the channels of [1, C, H, W], CBAM's
  // channel attention): the block moved innermost by one transposing copy ([A, R, B] -> [A, B, R]), then oneDNN's jit
  // reduction over the trailing axis, whose [A, B, 1] result has the bytes of [A, 1, B]. Before, the reference
  // kernel: 2.96 ms for [1, 96, 68, 68] against ONNX Runtime's 0.11 ms (issue 24's performance tester).
  {
    if (block && b > 1 && r > 1) {
      const Dims tdims = {a, b, r}, ydims = {a, b, 1};
      try {
        dnnl::reduction::primitive_desc pd(
            dnnl::reduction::desc(static_cast<dnnl::algorithm>(alg), PlainDesc(tdims, kF32), PlainDesc(ydims, kF32), ReduceP(alg), 0.f),
            ctx.engine());
        if (!IsRefImpl(pd)) {
          const Operand t = ctx.NewPlain(kF32, tdims);
          Step c;
          c.kind = StepKind::kReorder;
          c.name = n.name + ":transpose";
          Operand view = src;  // [A, R, B] row-major read as [A, B, R]
          view.tag = 0;
          view.dims = tdims;
          view.strides = {r * b, 1, b};
          c.ops = {view, t};
          ctx.Emit(std::move(c));
          Step red;
          red.kind = StepKind::kReduction;
          red.name = n.name;
          red.ops = {t, DefineAs(ctx, n.outputs[0], ydims)};
          red.ints = {static_cast<int64_t>(alg)};
          red.floats = {ReduceP(alg), 0.f};
          ctx.Emit(std::move(red));
          return CheckResult::Ok();
        }
      } catch (const dnnl::error&) {
      }
    }
  }
  Step s;
  // Nothing reduced (every reduced axis has size 1): oneDNN refuses a reduction with equal shapes; a copy it is.
  s.kind = kd == sd ? StepKind::kReorder : StepKind::kReduction;
  s.name = n.name;
  s.ops = {Reshaped(src, sd), DefineAs(ctx, n.outputs[0], kd)};
  if (s.kind == StepKind::kReduction) {
    s.ints = {static_cast<int64_t>(alg)};
    s.floats = {ReduceP(alg), 0.f};
  }
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildReduction(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(2, true, 1, 2);
  if (!r.ok) return r;
  const Step& st = bc.step();
  if (st.ints[0] < dnnl_reduction_max || st.ints[0] > dnnl_reduction_norm_lp_power_p_sum)
    return bc.Fail("unknown reduction algorithm " + std::to_string(st.ints[0]));
  if (!std::isfinite(st.floats[0]) || !std::isfinite(st.floats[1])) return bc.Fail("reduction p/eps not finite");
  std::vector<memory::desc> d;
  if (!(r = GetDescs(bc, 2, &d)).ok) return r;
  dnnl::primitive_attr attr;
  std::vector<std::pair<int, int>> args;
  if (!(r = bc.PostOps(&attr, &args)).ok) return r;
  try {
    dnnl::reduction::primitive_desc pd(dnnl::reduction::desc(static_cast<dnnl::algorithm>(st.ints[0]), d[0], d[1],
                                                             st.floats[0], st.floats[1]),
                                       attr, bc.engine());
    if (!(r = CheckSame(bc, "src", pd.src_desc(), d[0])).ok) return r;
    if (!(r = CheckSame(bc, "dst", pd.dst_desc(), d[1])).ok) return r;
    args.push_back({DNNL_ARG_SRC, bc.Slot(0, d[0])});
    args.push_back({DNNL_ARG_DST, bc.Slot(1, d[1])});
    out->reset(new PrimitiveExec(dnnl::reduction(pd), std::move(args)));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("reduction: ") + e.what());
  }
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
