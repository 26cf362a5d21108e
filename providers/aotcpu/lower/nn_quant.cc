// 8-bit ops (issue 26): DynamicQuantizeLinear, per-tensor DequantizeLinear and QuantizeLinear (steps
// kDynamicQuantize, kDequantize and kQuantize, our own loops), and MatMulInteger -> Cast(float) -> Mul(scale) as one
// oneDNN int8 matmul (kMatMulInt8): u8/s8 source with a zero point read at run time, s8 weights packed at compile
// time (the binary holds them as int8), the scale as a binary-mul post-op, then the post-ops a float MatMul absorbs
// (bias Add, activations). oneDNN converts the int32 sum to float and multiplies by the scale, as ONNX Runtime's Cast
// then Mul do: bit-identical.
//
// oneDNN 2.6 facts this relies on (checked on its x64 CPU engine): a runtime output scale (DNNL_RUNTIME_F32_VAL) makes
// matmul fall back from brgemm to gemm and int8 convolution refuse altogether, while a binary-mul post-op by a [1, 1]
// tensor keeps the brgemm and jit kernels; a source zero point makes the packed weights carry a compensation (memory
// desc extra flags) that a format tag does not describe, so the builder takes the weights layout oneDNN chooses, checks
// it against the stored tag and the stored length, and binds that.
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "providers/aotcpu/binary/isa.h"
#include "providers/aotcpu/lower/math_common.h"
#include "providers/aotcpu/lower/quant_common.h"
#include "providers/aotcpu/lower/tensor_common.h"
#include "providers/int8gemm/int8_gemm.h"

namespace epctx {
namespace aotcpu {
namespace {

bool Is8Bit(uint32_t dt) { return dt == kU8 || dt == kI8; }

// A value with a static shape of one element (a per-tensor scale or zero point).
bool OneElement(const Graph& g, int v) { return v >= 0 && g.v(v).has_shape && g.v(v).numel() == 1; }

// Dense layouts an elementwise 8-bit step keeps: plain row-major, or a format tag without padding.
bool DenseOperand(const Operand& op) {
  if (IsPlain(op)) return true;
  memory::desc d;
  if (!OperandDesc(op, &d).ok) return false;
  for (int i = 0; i < d.data.ndims; ++i)
    if (d.data.padded_dims[i] != d.data.dims[i]) return false;
  if (op.tag != 0) return true;
  // Strided: dense when the strides leave no gap (a permutation such as channels-last).
  return d.data.format_kind == dnnl_blocked && d.data.format_desc.blocking.inner_nblks == 0 &&
         d.get_size() == static_cast<size_t>(Numel(op.dims)) * memory::data_type_size(d.data_type());
}

// The operand of `value` for an elementwise step: its current layout when dense, else plain.
Operand UseDense(LowerContext& ctx, int value) {
  const Operand* p = ctx.Peek(value);
  if (p && !p->dims.empty() && DenseOperand(*p)) return ctx.Use(value);
  Operand o = ctx.UsePlain(value);
  if (o.dims.empty()) o = Reshaped(o, {1});
  return o;
}

// `value`'s result in the same layout as `like` (dense), with its own dtype.
Operand DefineLike(LowerContext& ctx, int value, const Operand& like) {
  if (IsPlain(like)) {
    Operand o = ctx.DefinePlain(value);
    return o.dims.empty() ? Reshaped(o, {1}) : o;
  }
  memory::desc d;
  OperandDesc(like, &d);
  d.data.data_type = static_cast<dnnl_data_type_t>(DnnlType(ctx.graph().v(value).dtype));
  return ctx.Define(value, d);
}

// A one-element value as a plain [1] operand.
Operand UseScalar(LowerContext& ctx, int value) { return Reshaped(ctx.UsePlain(value), {1}); }

// Rounding as ONNX Runtime quantizes (MLAS: the quotient rounded to nearest even, then clamped).
inline float RoundHalfEven(float v) { return std::nearbyint(v); }

// ---- DynamicQuantizeLinear -------------------------------------------------------------------------------------

constexpr int64_t kQuantChunk = 16384;

#if !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void MinMaxLoop(const float* x, int64_t n, float* lo, float* hi) {
  // 16 lanes in a GCC vector (vminps/vmaxps): `omp simd reduction(min)` over std::min stayed a scalar vminss chain,
  // one element per min latency, which made DynamicQuantizeLinear's range pass 3-4x slower than a memory read.
  // Each lane keeps std::min's rule (an element replaces the running value only when strictly smaller, so NaN is
  // ignored), and min/max are exact, so the result equals the scalar loop's.
  typedef float V16 __attribute__((vector_size(64)));
  float a = *lo, b = *hi;
  V16 va, vb;
  for (int j = 0; j < 16; ++j) va[j] = a, vb[j] = b;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    V16 v;
    std::memcpy(&v, x + i, sizeof v);
    va = v < va ? v : va;
    vb = vb < v ? v : vb;
  }
  for (int j = 0; j < 16; ++j) {
    a = std::min(a, va[j]);
    b = std::max(b, vb[j]);
  }
  for (; i < n; ++i) {
    a = std::min(a, x[i]);
    b = std::max(b, x[i]);
  }
  *lo = a;
  *hi = b;
}

#if !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void QuantizeLoop(const float* x, int64_t n, float scale, float zp, uint8_t* y) {
  // clamp(round(x / scale) + zp, 0, 255) == round(clamp(x / scale, -zp, 255 - zp)) + zp: zp is an integer.
  const float lo = -zp, hi = 255.f - zp;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float q = std::min(std::max(x[i] / scale, lo), hi);
    y[i] = static_cast<uint8_t>(static_cast<int32_t>(RoundHalfEven(q)) + static_cast<int32_t>(zp));
  }
}

class DynamicQuantizeExec : public StepExec {
 public:
  DynamicQuantizeExec(int src, int dst, int scale, int zp, int64_t n)
      : src_(src), dst_(dst), scale_(scale), zp_(zp), n_(n) {}
  void Run(RunContext& rc) override {
    const float* x = static_cast<const float*>(rc.ptr(src_));
    uint8_t* y = static_cast<uint8_t*>(rc.ptr(dst_));
    const int64_t chunks = (n_ + kQuantChunk - 1) / kQuantChunk;
    // Per-chunk ranges combined in chunk order: the result does not depend on the thread count.
    std::vector<float> lo(static_cast<size_t>(chunks), 0.f), hi(static_cast<size_t>(chunks), 0.f);
#pragma omp parallel for schedule(static) if (chunks > 4)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t b = c * kQuantChunk;
      MinMaxLoop(x + b, std::min(kQuantChunk, n_ - b), &lo[static_cast<size_t>(c)], &hi[static_cast<size_t>(c)]);
    }
    float mn = 0.f, mx = 0.f;  // the range always holds 0
    for (int64_t c = 0; c < chunks; ++c) {
      mn = std::min(mn, lo[static_cast<size_t>(c)]);
      mx = std::max(mx, hi[static_cast<size_t>(c)]);
    }
    // ONNX Runtime's GetQuantizationParameter: scale 1 when the range is empty (all zeros).
    const float scale = mx == mn ? 1.f : (mx - mn) / 255.f;
    const float zp = RoundHalfEven(std::min(255.f, std::max(0.f, 0.f - mn / scale)));
    *static_cast<float*>(rc.ptr(scale_)) = scale;
    *static_cast<uint8_t*>(rc.ptr(zp_)) = static_cast<uint8_t>(zp);
#pragma omp parallel for schedule(static) if (chunks > 4)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t b = c * kQuantChunk;
      QuantizeLoop(x + b, std::min(kQuantChunk, n_ - b), scale, zp, y + b);
    }
  }

 private:
  int src_, dst_, scale_, zp_;
  int64_t n_;
};

// ---- DequantizeLinear --------------------------------------------------------------------------------------------

template <typename T>
#if !defined(__SANITIZE_THREAD__) && !defined(__clang__)  // clang has no target_clones on function templates
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void DequantizeLoop(const T* x, int64_t n, int32_t zp, float scale, float* y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zp) * scale;
}

class DequantizeExec : public StepExec {
 public:
  DequantizeExec(int src, int dst, int scale, int zp, int64_t n, bool is_signed)
      : src_(src), dst_(dst), scale_(scale), zp_(zp), n_(n), signed_(is_signed) {}
  void Run(RunContext& rc) override {
    const float scale = *static_cast<const float*>(rc.ptr(scale_));
    int32_t zp = 0;
    if (zp_ >= 0)
      zp = signed_ ? *static_cast<const int8_t*>(rc.ptr(zp_)) : *static_cast<const uint8_t*>(rc.ptr(zp_));
    const void* x = rc.ptr(src_);
    float* y = static_cast<float*>(rc.ptr(dst_));
    const int64_t chunks = (n_ + kQuantChunk - 1) / kQuantChunk;
#pragma omp parallel for schedule(static) if (chunks > 4)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t b = c * kQuantChunk, len = std::min(kQuantChunk, n_ - b);
      if (signed_)
        DequantizeLoop(static_cast<const int8_t*>(x) + b, len, zp, scale, y + b);
      else
        DequantizeLoop(static_cast<const uint8_t*>(x) + b, len, zp, scale, y + b);
    }
  }

 private:
  int src_, dst_, scale_, zp_;
  int64_t n_;
  bool signed_;
};

// Checks shared by the two elementwise 8-bit steps: src and dst of equal dims and the same dense layout, scalar
// operands of one element in plain layout.
CheckResult CheckElementwise8(BuildContext& bc, uint32_t src_type, uint32_t dst_type, std::vector<memory::desc>* d) {
  const Step& s = bc.step();
  const Operand &src = s.ops[0], &dst = s.ops[1];
  if (!src.present() || !dst.present() || !s.ops[2].present()) return bc.Fail("src, dst and scale are required");
  if (src.dtype != src_type || dst.dtype != dst_type) return bc.Fail("src or dst has the wrong element type");
  if (src.dims != dst.dims) return bc.Fail("src and dst dims differ");
  d->resize(s.ops.size());
  for (size_t i = 0; i < s.ops.size(); ++i) {
    CheckResult r = bc.Desc(i, &(*d)[i]);  // checks each operand's extent against its buffer
    if (!r.ok) return r;
  }
  if (src.tag != dst.tag || (src.tag == 0 && (!IsPlain(src) || !IsPlain(dst)))) {
    // Also one layout: both strided without blocks, equal strides, dense (a channels-last permutation).
    const auto &a = (*d)[0].data, &b = (*d)[1].data;
    const int64_t n = Numel(src.dims);
    bool same = a.format_kind == dnnl_blocked && b.format_kind == dnnl_blocked &&
                a.format_desc.blocking.inner_nblks == 0 && b.format_desc.blocking.inner_nblks == 0 &&
                (*d)[0].get_size() == static_cast<size_t>(n) * (src.dtype == kF32 ? 4 : 1) &&
                (*d)[1].get_size() == static_cast<size_t>(n) * (dst.dtype == kF32 ? 4 : 1);
    for (int i = 0; same && i < a.ndims; ++i)
      same = a.dims[i] == 1 || a.format_desc.blocking.strides[i] == b.format_desc.blocking.strides[i];
    if (!same) return bc.Fail("src and dst must share one dense layout");
  } else if (!DenseOperand(src)) {
    return bc.Fail("src has a padded layout");
  }
  for (size_t i = 2; i < s.ops.size(); ++i)
    if (s.ops[i].present() && (!IsPlain(s.ops[i]) || Numel(s.ops[i].dims) != 1))
      return bc.Fail("operand " + std::to_string(i) + " must be one plain element");
  return CheckResult::Ok();
}

}  // namespace

// ---- shared by the int8 products (quant_common.h) ----------------------------------------------------------------

bool Int8ProductsExact(const CompileOptions& options) {
  Isa isa;
  if (!ParseIsa(options.isa, &isa)) {
    const unsigned vnni = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_vnni);
    return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & vnni) == vnni;
  }
  return isa >= Isa::kAvx512CoreVnni;
}

CheckResult SourceZeroPoint32(LowerContext& ctx, const Node& n, size_t i, Operand* out) {
  const Graph& g = ctx.graph();
  const int az = i < n.inputs.size() ? n.inputs[i] : -1;
  // The source zero point, as the int32 [1] oneDNN reads: a constant becomes a weight (none when 0); a computed one
  // (DynamicQuantizeLinear's) is converted by one reorder step, shared by every product that reads it.
  Operand zp_op;
  if (az >= 0) {
    int32_t zc = 0;
    if (g.v(az).is_const()) {
      ConstZeroPoint(g, n, i, &zc);
      if (zc != 0) {
        std::string bytes(4, '\0');
        std::memcpy(&bytes[0], &zc, 4);
        CheckResult rc = ctx.AddWeight(g.v(az).name + ":int32", std::move(bytes), PlainDesc({1}, kI32), &zp_op);
        if (!rc.ok) return rc;
      }
    } else {
      const std::string key = "zp32:" + g.v(az).name;
      if (const Operand* d = ctx.FindDerived(key)) {
        zp_op = *d;
      } else {
        Step cvt;
        cvt.kind = StepKind::kReorder;
        cvt.name = g.v(az).name + ":int32";
        cvt.ops = {UseScalar(ctx, az), ctx.NewPlain(kI32, {1})};
        zp_op = cvt.ops[1];
        ctx.Emit(std::move(cvt));
        ctx.SetDerived(key, zp_op);
      }
    }
  }
  *out = zp_op;
  return CheckResult::Ok();
}

bool MatchInt8Tail(const Graph& g, int y, Int8Tail* t, std::string* why) {
  const int c = OnlyConsumer(g, y);
  if (c < 0) return Reject(why, "its int32 result is not read by one Cast to float alone");
  const Node& cast = g.nodes[static_cast<size_t>(c)];
  if (!IsOnnx(cast) || cast.op != "Cast" || cast.Int("to", 0) != kF32 || cast.outputs.size() != 1)
    return Reject(why, "its int32 result is not read by one Cast to float alone");
  const int m = OnlyConsumer(g, cast.outputs[0]);
  if (m < 0) return Reject(why, "the Cast's result is not read by one Mul alone");
  const Node& mul = g.nodes[static_cast<size_t>(m)];
  const int s = OtherInput(mul, cast.outputs[0]);
  if (!IsOnnx(mul) || mul.op != "Mul" || s < 0 || g.v(s).dtype != kF32 || !OneElement(g, s) ||
      !SameF32Shape(g, Out0(mul), g.v(y).dims))
    return Reject(why, "the Cast's result is not multiplied by a float scale of one element");
  const int sp = g.v(s).producer;  // the scale must not be computed from this product
  if (sp >= 0)
    for (int in : g.nodes[static_cast<size_t>(sp)].inputs)
      if (in >= 0 && (in == y || in == cast.outputs[0]))
        return Reject(why, "the scale is computed from the product it scales");
  t->cast = c;
  t->mul = m;
  t->scale = s;
  return true;
}

CheckResult LowerScaleEarly(LowerContext& ctx, int node, const Int8Tail& t) {
  if (ctx.IsAvailable(t.scale)) return CheckResult::Ok();
  const Graph& g = ctx.graph();
  const int p = g.v(t.scale).producer;
  if (p < 0 || ctx.IsAbsorbed(p)) return ctx.Fail(node, "its scale is not computed before it");
  const Node& pn = g.nodes[static_cast<size_t>(p)];
  for (int in : pn.inputs)
    if (in >= 0 && !ctx.IsAvailable(in)) return ctx.Fail(node, "its scale is not computed before it");
  const OpEntry* e = FindOp(pn.domain, pn.op);
  std::string why;
  if (!e || !e->support(g, pn, &why)) return ctx.Fail(node, "its scale's node is not compiled: " + why);
  ctx.SetCurrentNode(p);
  CheckResult rc = e->lower(ctx, p);
  ctx.SetCurrentNode(node);
  if (!rc.ok) return rc;
  ctx.Absorb(p);
  if (!ctx.IsAvailable(t.scale) || ctx.IsAbsorbed(t.cast) || ctx.IsAbsorbed(t.mul))
    return ctx.Fail(node, "its scale's node took the Cast or Mul");
  return CheckResult::Ok();
}

bool ConstZeroPoint(const Graph& g, const Node& n, size_t i, int32_t* zp) {
  *zp = 0;
  if (i >= n.inputs.size() || n.inputs[i] < 0) return true;
  const Value& v = g.v(n.inputs[i]);
  if (!v.is_const() || !v.has_shape || v.numel() != 1) return false;
  if (v.dtype == kU8) *zp = *static_cast<const uint8_t*>(v.data);
  else if (v.dtype == kI8) *zp = *static_cast<const int8_t*>(v.data);
  else return false;
  return true;
}

namespace {

// The constant 8-bit weights of MatMulInteger / ConvInteger as int8 values w - zp; false (with why) when some value
// does not fit (uint8 weights whose zero point is far from their values' middle).
bool Int8Weights(const Value& w, int32_t zp, std::string* out, std::string* why) {
  const int64_t n = w.numel();
  out->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t v = (w.dtype == kU8 ? static_cast<const uint8_t*>(w.data)[i] : static_cast<const int8_t*>(w.data)[i]) - zp;
    if (v < -128 || v > 127) return Reject(why, "weights minus their zero point do not fit in int8");
    (*out)[static_cast<size_t>(i)] = static_cast<char>(static_cast<int8_t>(v));
  }
  return true;
}

// Without exact products every int8 weight v is split into two halves floor(v / 2) and v - floor(v / 2), both in
// [-64, 64], so that a pair of products stays within int16 (255 * 64 * 2 = 32640); the halves are stacked along the
// reduction axis and the source is read twice (SplitSource), so one product still sums to the exact result.
char HalfOf(char v, int half) {
  const int32_t lo = static_cast<int8_t>(v) >> 1;
  return static_cast<char>(static_cast<int8_t>(half == 0 ? lo : static_cast<int8_t>(v) - lo));
}

// `src` (plain [rows, k] 8-bit) copied twice side by side into new [rows, 2k] storage by two reorder steps.
Operand SplitSource(LowerContext& ctx, const Operand& src, const std::string& name) {
  const int64_t rows = src.dims[0], k = src.dims[1];
  Operand both = ctx.NewPlain(src.dtype, {rows, 2 * k});
  for (int half = 0; half < 2; ++half) {
    Operand part = both;
    part.dims = {rows, k};
    part.strides = {2 * k, 1};
    part.offset += static_cast<uint64_t>(half * k);  // 1-byte elements
    Step s;
    s.kind = StepKind::kReorder;
    s.name = name + (half == 0 ? ":split_lo" : ":split_hi");
    s.ops = {src, part};
    ctx.Emit(std::move(s));
  }
  return both;
}

// Whether MatMulInteger runs on our own exact AVX2 kernel (providers/int8gemm, step kMatMulInt8Avx2): where the
// target's oneDNN int8 products are not exact (no VNNI) and the target has AVX2 (a compile for this machine: its CPU).
bool OwnInt8Gemm(const CompileOptions& options) {
  if (Int8ProductsExact(options)) return false;
  Isa isa;
  if (ParseIsa(options.isa, &isa)) return isa >= Isa::kAvx2;
  return int8gemm::Available();
}

// kMatMulInt8Avx2: y = float(sum (a - zp) * w) * scale, the sum as the kernel's raw product minus zp * sum_k w.
class MatMulInt8Avx2Exec : public StepExec {
 public:
  MatMulInt8Avx2Exec(int src, int w, int dst, int zp, int scale, int sums, int bias, int64_t m, int64_t k, int64_t n)
      : src_(src), w_(w), dst_(dst), zp_(zp), scale_(scale), sums_(sums), bias_(bias), m_(m), k_(k), n_(n) {}
  size_t ScratchpadBytes() const override { return static_cast<size_t>(m_ * n_) * 4; }
  std::string Impl() const override { return "own:avx2"; }
  void Run(RunContext& rc) override {
    const uint8_t* a = static_cast<const uint8_t*>(rc.ptr(src_));
    const uint8_t* packed = static_cast<const uint8_t*>(rc.ptr(w_));
    float* y = static_cast<float*>(rc.ptr(dst_));
    const int32_t* sums = static_cast<const int32_t*>(rc.ptr(sums_));
    int32_t* acc = static_cast<int32_t*>(rc.scratchpad());
    const int threads = omp_get_max_threads();
    int8gemm::Gemm(a, k_, m_, k_, n_, packed, true, acc, n_, threads);
    const uint32_t zp = zp_ >= 0 ? static_cast<uint32_t>(*static_cast<const int32_t*>(rc.ptr(zp_))) : 0;
    const float scale = *static_cast<const float*>(rc.ptr(scale_));
    const float* bias = bias_ >= 0 ? static_cast<const float*>(rc.ptr(bias_)) : nullptr;
    const int64_t m = m_, n = n_;
    // One rounding after the Mul and one after the Add, as the separate ops (this file has no FMA contraction).
#pragma omp parallel for schedule(static) if (threads > 1 && m * n > 16384)
    for (int64_t i = 0; i < m; ++i) {
      const int32_t* __restrict ar = acc + i * n;
      float* __restrict yr = y + i * n;
      for (int64_t j = 0; j < n; ++j)
        yr[j] = static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(ar[j]) -
                                                        zp * static_cast<uint32_t>(sums[j]))) * scale;
      if (bias)
        for (int64_t j = 0; j < n; ++j) yr[j] = yr[j] + bias[j];
    }
  }

 private:
  int src_, w_, dst_, zp_, scale_, sums_, bias_;
  int64_t m_, k_, n_;
};

// When the product's only reader is a Gather of one row (a constant scalar index on the row axis, every axis before
// it of size 1: a language model's head read at the last position), that row's index in the [M, K] source; else -1.
int64_t GatheredRow(LowerContext& ctx, int y, const Dims& a_dims) {
  const Graph& g = ctx.graph();
  const int gn = ctx.SoleConsumer(y);
  if (gn < 0 || ctx.IsAbsorbed(gn) || a_dims.size() < 2) return -1;
  const Node& gather = ctx.node(gn);
  if (gather.op != "Gather" || !gather.domain.empty() || gather.inputs.size() != 2 || gather.inputs[0] != y ||
      gather.outputs.size() != 1 || gather.outputs[0] < 0)
    return -1;
  const int64_t rank = static_cast<int64_t>(a_dims.size());
  int64_t axis = gather.Int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis != rank - 2) return -1;
  for (int64_t i = 0; i < axis; ++i)
    if (a_dims[static_cast<size_t>(i)] != 1) return -1;
  const Value& idx = g.v(gather.inputs[1]);
  if (!idx.is_const() || !idx.has_shape || !idx.dims.empty() || !idx.data) return -1;
  int64_t r;
  if (idx.dtype == kI64) r = *static_cast<const int64_t*>(idx.data);
  else if (idx.dtype == kI32) r = *static_cast<const int32_t*>(idx.data);
  else return -1;
  const int64_t rows = a_dims[static_cast<size_t>(axis)];
  if (r < 0) r += rows;
  return r >= 0 && r < rows ? r : -1;
}

// At no VNNI with AVX2 (OwnInt8Gemm): one kMatMulInt8Avx2 step, weights packed here in the kernel's panels. The
// bias Add and activations after the Mul stay separate steps.
CheckResult LowerMatMulIntegerAvx2(LowerContext& ctx, int node, const Int8Tail& tail, const std::string& wbytes,
                                   int64_t M, int64_t K, int64_t N) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  const std::string& wname = g.v(n.inputs[1]).name;
  std::string packed(int8gemm::PackedBSize(K, N), '\0');
  std::vector<int32_t> sums(static_cast<size_t>(N));
  int8gemm::PackB(wbytes.data(), true, K, N, N, 1, reinterpret_cast<uint8_t*>(&packed[0]), sums.data());
  Operand w_op, sums_op, zp_op;
  const int64_t packed_len = static_cast<int64_t>(packed.size());
  CheckResult rc = ctx.AddWeight(wname + ":int8gemm", std::move(packed), PlainDesc({packed_len}, kU8), &w_op);
  if (!rc.ok) return rc;
  std::string sum_bytes(sums.size() * 4, '\0');
  std::memcpy(&sum_bytes[0], sums.data(), sum_bytes.size());
  if (!(rc = ctx.AddWeight(wname + ":int8gemm_sums", std::move(sum_bytes), PlainDesc({N}, kI32), &sums_op)).ok)
    return rc;
  if (!(rc = SourceZeroPoint32(ctx, n, 2, &zp_op)).ok) return rc;
  Step step;
  step.kind = StepKind::kMatMulInt8Avx2;
  step.name = n.name + "+" + ctx.node(tail.cast).name + "+" + ctx.node(tail.mul).name;
  Operand src = Reshaped(ctx.UsePlain(n.inputs[0]), {M, K});
  int y = Out0(ctx.node(tail.mul));
  int64_t rows = M;
  const int64_t row = GatheredRow(ctx, y, g.v(n.inputs[0]).dims);
  if (row >= 0) {  // only one row of the product is read: compute that row alone
    const int gather = ctx.SoleConsumer(y);
    src.offset += static_cast<uint64_t>(row * K);  // 1-byte elements
    src.dims = {1, K};
    rows = 1;
    step.name += "+" + ctx.node(gather).name;
    ctx.Absorb(gather);
    y = Out0(ctx.node(gather));
  }
  // Then a constant bias per column ([N] or [1, ..., 1, N]) added to the (possibly gathered) product.
  Operand bias_op;
  const int add = ctx.SoleConsumer(y);
  if (add >= 0 && !ctx.IsAbsorbed(add)) {
    const Node& an = ctx.node(add);
    const int other = an.inputs.size() == 2 ? (an.inputs[0] == y ? an.inputs[1] : an.inputs[1] == y ? an.inputs[0] : -1)
                                            : -1;
    if (an.op == "Add" && an.domain.empty() && an.outputs.size() == 1 && an.outputs[0] >= 0 && other >= 0 &&
        g.v(other).is_const() && g.v(other).data && g.v(other).dtype == kF32 && g.v(other).has_shape &&
        g.v(other).numel() == N && !g.v(other).dims.empty() && g.v(other).dims.back() == N &&
        g.v(other).dims.size() <= g.v(y).dims.size() && g.v(an.outputs[0]).dims == g.v(y).dims) {
      std::string bytes(static_cast<size_t>(N) * 4, '\0');
      std::memcpy(&bytes[0], g.v(other).data, bytes.size());
      if (!(rc = ctx.AddWeight(g.v(other).name + ":bias", std::move(bytes), PlainDesc({N}, kF32), &bias_op)).ok)
        return rc;
      step.name += "+" + an.name;
      ctx.Absorb(add);
      y = an.outputs[0];
    }
  }
  step.ops = {src, w_op, Operand(), zp_op, UseScalar(ctx, tail.scale), sums_op, bias_op};
  ctx.Absorb(tail.cast);
  ctx.Absorb(tail.mul);
  step.ops[2] = DefineAs(ctx, y, {rows, N});
  ctx.Emit(std::move(step));
  return CheckResult::Ok();
}

}  // namespace

// ---- DynamicQuantizeLinear ---------------------------------------------------------------------------------------

bool SupportDynamicQuantize(const Graph& g, const Node& n, std::string* why) {
  if (n.inputs.size() != 1 || n.inputs[0] < 0 || n.outputs.size() != 3)
    return Reject(why, "DynamicQuantizeLinear needs 1 input and 3 outputs");
  for (int o : n.outputs)
    if (o < 0) return Reject(why, "an output is absent");
  const Value &x = g.v(n.inputs[0]), &y = g.v(n.outputs[0]);
  if (x.dtype != kF32 || !x.has_shape) return Reject(why, "input must be float with a static shape");
  if (y.dtype != kU8 || g.v(n.outputs[1]).dtype != kF32 || g.v(n.outputs[2]).dtype != kU8)
    return Reject(why, "outputs must be uint8, float and uint8");
  if (!y.has_shape || y.dims != x.dims) return Reject(why, "output shape differs from the input's");
  if (x.dims.size() > kMaxRank) return Reject(why, "rank above " + std::to_string(kMaxRank));
  if (x.numel() <= 0) return Reject(why, "empty tensor");
  return true;
}

CheckResult LowerDynamicQuantize(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  Step s;
  s.kind = StepKind::kDynamicQuantize;
  s.name = StepName(ctx.graph(), n);
  const Operand src = UseDense(ctx, n.inputs[0]);
  s.ops.push_back(src);
  s.ops.push_back(DefineLike(ctx, n.outputs[0], src));
  s.ops.push_back(Reshaped(ctx.DefinePlain(n.outputs[1]), {1}));
  s.ops.push_back(Reshaped(ctx.DefinePlain(n.outputs[2]), {1}));
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildDynamicQuantize(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(4, false, 0, 0);
  if (!r.ok) return r;
  const Step& s = bc.step();
  std::vector<memory::desc> d;
  if (!(r = CheckElementwise8(bc, kF32, kU8, &d)).ok) return r;
  if (!s.ops[3].present() || s.ops[2].dtype != kF32 || s.ops[3].dtype != kU8)
    return bc.Fail("scale must be float and the zero point uint8");
  for (size_t i = 2; i < 4; ++i)  // the executor checks operand 1 (the step's dst); these are written too
    if (s.ops[i].buf != Buf::kArena && s.ops[i].buf != Buf::kOutput)
      return bc.Fail("operand " + std::to_string(i) + " is written but is not the arena or an output");
  const int64_t n = Numel(s.ops[0].dims);
  if (n <= 0) return bc.Fail("empty tensor");
  const int a = bc.Slot(0, d[0]), b = bc.Slot(1, d[1]), c = bc.Slot(2, d[2]), z = bc.Slot(3, d[3]);
  *out = std::make_unique<DynamicQuantizeExec>(a, b, c, z, n);
  return CheckResult::Ok();
}

// ---- DequantizeLinear --------------------------------------------------------------------------------------------

bool SupportDequantize(const Graph& g, const Node& n, std::string* why) {
  if (!StaticIo(g, n, 2, why)) return false;
  const Value &x = g.v(n.inputs[0]), &y = g.v(n.outputs[0]);
  const int scale = n.inputs[1], zp = n.inputs.size() > 2 ? n.inputs[2] : -1;
  if (!Is8Bit(x.dtype)) return Reject(why, "input must be int8 or uint8");
  if (y.dtype != kF32 || g.v(scale).dtype != kF32) return Reject(why, "scale and output must be float");
  if (!OneElement(g, scale) || (zp >= 0 && !OneElement(g, zp)))
    return Reject(why, "only a per-tensor scale and zero point are compiled");
  if (zp >= 0 && g.v(zp).dtype != x.dtype) return Reject(why, "zero point type differs from the input's");
  if (n.Int("block_size", 0) != 0) return Reject(why, "blocked dequantization is not compiled");
  if (y.dims != x.dims) return Reject(why, "output shape differs from the input's");
  if (x.numel() <= 0) return Reject(why, "empty tensor");
  return true;
}

namespace {

// kDequantize and kQuantize: src, dst (src's dims and layout), a per-tensor scale and an optional zero point.
CheckResult LowerPerTensorScaleStep(LowerContext& ctx, int node, StepKind kind) {
  const Node& n = ctx.node(node);
  Step s;
  s.kind = kind;
  s.name = StepName(ctx.graph(), n);
  const Operand src = UseDense(ctx, n.inputs[0]);
  s.ops.push_back(src);
  s.ops.push_back(DefineLike(ctx, n.outputs[0], src));
  s.ops.push_back(UseScalar(ctx, n.inputs[1]));
  s.ops.push_back(n.inputs.size() > 2 && n.inputs[2] >= 0 ? UseScalar(ctx, n.inputs[2]) : Operand());
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

// Checks a kDequantize (8-bit src, f32 dst) or kQuantize (f32 src, 8-bit dst) step and makes its Exec, constructed
// as Exec(src slot, dst slot, scale slot, zero point slot or -1, elements, whether the 8-bit side is signed).
template <class Exec>
CheckResult BuildPerTensorScaleStep(BuildContext& bc, bool quantize, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(4, false, 0, 0);
  if (!r.ok) return r;
  const Step& s = bc.step();
  const char* side = quantize ? "dst" : "src";
  const uint32_t t = s.ops[quantize ? 1 : 0].dtype;
  if (!Is8Bit(t)) return bc.Fail(std::string(side) + " must be int8 or uint8");
  std::vector<memory::desc> d;
  if (!(r = CheckElementwise8(bc, quantize ? kF32 : t, quantize ? t : kF32, &d)).ok) return r;
  if (s.ops[2].dtype != kF32) return bc.Fail("scale must be float");
  if (s.ops[3].present() && s.ops[3].dtype != t)
    return bc.Fail("zero point type differs from " + std::string(side) + "'s");
  const int64_t n = Numel(s.ops[0].dims);
  if (n <= 0) return bc.Fail("empty tensor");
  const int a = bc.Slot(0, d[0]), b = bc.Slot(1, d[1]), c = bc.Slot(2, d[2]);
  const int z = s.ops[3].present() ? bc.Slot(3, d[3]) : -1;
  *out = std::make_unique<Exec>(a, b, c, z, n, t == kI8);
  return CheckResult::Ok();
}

}  // namespace

CheckResult LowerDequantize(LowerContext& ctx, int node) {
  return LowerPerTensorScaleStep(ctx, node, StepKind::kDequantize);
}

CheckResult BuildDequantize(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  return BuildPerTensorScaleStep<DequantizeExec>(bc, false, out);
}

// ---- MatMulInteger -----------------------------------------------------------------------------------------------

bool SupportMatMulInteger(const Graph& g, const Node& n, std::string* why) {
  if (!StaticIo(g, n, 2, why)) return false;
  const Value &a = g.v(n.inputs[0]), &b = g.v(n.inputs[1]), &y = g.v(n.outputs[0]);
  if (!Is8Bit(a.dtype) || !Is8Bit(b.dtype) || y.dtype != kI32) return Reject(why, "unsupported element types");
  if (!b.is_const() || b.dims.size() != 2) return Reject(why, "B must be a constant 2-D tensor");
  if (a.dims.size() < 2 || a.dims.back() != b.dims[0]) return Reject(why, "A must have rank >= 2 and inner dim K");
  Dims yd(a.dims.begin(), a.dims.end() - 1);
  yd.push_back(b.dims[1]);
  if (yd != y.dims) return Reject(why, "output shape does not match the inputs");
  if (Numel(yd) == 0 || b.dims[0] == 0) return Reject(why, "empty tensor");
  const int az = n.inputs.size() > 2 ? n.inputs[2] : -1;
  if (az >= 0 && (!OneElement(g, az) || g.v(az).dtype != a.dtype))
    return Reject(why, "only a per-tensor A zero point of A's type is compiled");
  int32_t bz = 0;
  if (!ConstZeroPoint(g, n, 3, &bz)) return Reject(why, "only a constant per-tensor B zero point is compiled");
  std::string w;
  if (!Int8Weights(b, bz, &w, why)) return false;
  Int8Tail t;
  return MatchInt8Tail(g, n.outputs[0], &t, why);
}

CheckResult LowerMatMulInteger(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  const int a = n.inputs[0], b = n.inputs[1];
  std::string why;
  Int8Tail tail;
  if (!MatchInt8Tail(g, n.outputs[0], &tail, &why)) return ctx.Fail(node, why);
  if (ctx.IsAbsorbed(tail.cast) || ctx.IsAbsorbed(tail.mul)) return ctx.Fail(node, "its Cast or Mul was fused elsewhere");
  if (CheckResult rs = LowerScaleEarly(ctx, node, tail); !rs.ok) return rs;
  int32_t bz = 0;
  std::string wbytes;
  if (!ConstZeroPoint(g, n, 3, &bz) || !Int8Weights(g.v(b), bz, &wbytes, &why)) return ctx.Fail(node, why);
  const int64_t K = g.v(b).dims[0], N = g.v(b).dims[1];
  const Dims& ad = g.v(a).dims;
  const int64_t M = Numel(ad) / K;
  if (OwnInt8Gemm(ctx.options()) && g.v(a).dtype == kU8) return LowerMatMulIntegerAvx2(ctx, node, tail, wbytes, M, K, N);
  const bool split = !Int8ProductsExact(ctx.options());
  const int64_t KK = split ? 2 * K : K;  // the reduction length oneDNN sees
  const Dims wd = {KK, N};
  if (split) {  // rows 0..K-1 the first halves, K..2K-1 the second
    std::string both(static_cast<size_t>(KK * N), '\0');
    for (size_t i = 0; i < wbytes.size(); ++i) {
      both[i] = HalfOf(wbytes[i], 0);
      both[i + wbytes.size()] = HalfOf(wbytes[i], 1);
    }
    wbytes.swap(both);
  }

  Operand a_op = ctx.UsePlain(a);
  a_op = Reshaped(a_op, {M, K});
  // Only one row of the product read (a language model's head at the last position): that row alone, as the AVX2
  // path. turn_detector's head wrote 24 x 49152 floats of which the Gather kept one row: 4.7 MB of fresh arena
  // pages faulted in by the first run (14-33 ms on this VM), and the product computed 24 times over.
  const int64_t row = split ? -1 : GatheredRow(ctx, Out0(ctx.node(tail.mul)), ad);
  const int64_t rows = row >= 0 ? 1 : M;
  if (row >= 0) {
    a_op.offset += static_cast<uint64_t>(row * K);  // 1-byte elements
    a_op.dims = {1, K};
  }
  if (split) {  // one doubled copy per source, shared by every product that reads it (Q, K and V projections)
    const std::string key = "split8:" + g.v(a).name;
    if (const Operand* d = ctx.FindDerived(key)) {
      a_op = *d;
    } else {
      a_op = SplitSource(ctx, a_op, g.v(a).name);
      ctx.SetDerived(key, a_op);
    }
  }
  const Dims cd = {rows, N};
  Operand zp_op;
  if (CheckResult rz = SourceZeroPoint32(ctx, n, 2, &zp_op); !rz.ok) return rz;

  // Post-ops: the scale (a binary mul by the [1, 1] scale), then what a float MatMul's result absorbs.
  OperandMap map = [&](const Dims& od, Dims* out) {
    Dims p = PadLeft(od, ad.size());
    bool full = true, ones = true;
    for (size_t i = 0; i + 1 < p.size(); ++i) {
      full = full && p[i] == ad[i];
      ones = ones && p[i] == 1;
    }
    if (!full && !ones) return false;
    *out = {ones ? 1 : M, p.back()};
    return true;
  };
  PostOp scale_po;
  scale_po.kind = PostOp::kBinary;
  scale_po.alg = dnnl_binary_mul;
  scale_po.operand = 4;
  const int chain_root = Out0(ctx.node(tail.mul));
  std::vector<Fused> chain;
  if (row < 0) chain = CollectPostOps(ctx, chain_root, true, map);
  for (size_t i = 0; i < chain.size(); ++i) {  // a mask Add feeding a Softmax is left to MaskedSoftmax
    int x, mask, sm;
    bool stop = false;
    for (int fn : chain[i].nodes) stop = stop || MaskedSoftmaxOf(ctx, fn, &x, &mask, &sm);
    if (stop) {
      chain.resize(i);
      break;
    }
  }
  memory::desc weights_chosen;
  dnnl::engine& eng = ctx.engine();
  auto make_pd = [&](const std::vector<PostOp>& chain_ops, const std::vector<Operand>& ops) -> int {
    try {
      std::vector<PostOp> all = {scale_po};
      all.insert(all.end(), chain_ops.begin(), chain_ops.end());
      dnnl::primitive_attr attr;
      if (!TrialAttr(all, ops, &attr)) return 0;
      if (zp_op.present()) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
      memory::desc src_d, dst_d;
      if (!OperandDesc(ops[0], &src_d).ok || !OperandDesc(ops[2], &dst_d).ok) return 0;
      const memory::desc w_d(memory::dims(wd.begin(), wd.end()), memory::data_type::s8, memory::format_tag::any);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_d, w_d, dst_d), attr, eng);
      weights_chosen = pd.weights_desc();
      return IsRefImpl(pd) ? 1 : 2;
    } catch (const dnnl::error&) {
      return 0;
    }
  };
  Operand scale_stand_in = FakePlain({1, 1});
  const std::vector<Operand> base = {a_op, Operand(), FakePlain(cd), zp_op.present() ? zp_op : Operand(),
                                     scale_stand_in};
  const size_t k = ChooseChain(g, chain, base, map, make_pd);
  {
    std::vector<PostOp> post_ops;
    std::vector<Operand> ops = base;
    ChainPrefix(g, chain, k, map, &post_ops, &ops);
    if (make_pd(post_ops, ops) == 0)
      return ctx.Fail(node, "oneDNN has no int8 matmul for " + DimsText(ad) + " x " + DimsText(wd));
  }

  Step step;
  step.kind = StepKind::kMatMulInt8;
  step.name = n.name + "+" + ctx.node(tail.cast).name + "+" + ctx.node(tail.mul).name;
  Operand w_op;
  CheckResult rc = ctx.PackWeight(g.v(b).name + ":int8", wbytes.data(), PlainDesc(wd, kI8), weights_chosen, &w_op);
  if (!rc.ok) return rc;
  step.ops = {a_op, w_op, Operand(), zp_op, Reshaped(UseScalar(ctx, tail.scale), {1, 1})};
  step.post_ops.push_back(scale_po);
  ctx.Absorb(tail.cast);
  ctx.Absorb(tail.mul);
  int y = chain_root;
  if (row >= 0) {
    const int gather = ctx.SoleConsumer(y);
    step.name += "+" + ctx.node(gather).name;
    ctx.Absorb(gather);
    y = Out0(ctx.node(gather));
  }
  if (!(rc = ApplyChain(ctx, node, chain, k, map, &step, &y)).ok) return rc;
  step.ops[2] = DefineAs(ctx, y, cd);
  ctx.Emit(std::move(step));
  return CheckResult::Ok();
}

CheckResult BuildMatMulInt8(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(4, true, 0, 0);
  if (!r.ok) return r;
  const Step& s = bc.step();
  std::vector<memory::desc> d(4);
  for (size_t i = 0; i < 4; ++i)
    if (!(r = bc.Desc(i, &d[i])).ok) return r;
  if (!s.ops[0].present() || !s.ops[1].present() || !s.ops[2].present())
    return bc.Fail("src, weights and dst are required");
  if (!Is8Bit(s.ops[0].dtype) || s.ops[1].dtype != kI8 || s.ops[2].dtype != kF32)
    return bc.Fail("int8 matmul needs an 8-bit src, int8 weights and a float dst");
  if (s.ops[1].buf != Buf::kWeight) return bc.Fail("weights must be a weight tensor");
  if (d[0].data.ndims != 2 || d[1].data.ndims != 2 || d[2].data.ndims != 2)
    return bc.Fail("int8 matmul operands must be 2-D");
  const bool has_zp = s.ops[3].present();
  if (has_zp && (s.ops[3].dtype != kI32 || !IsPlain(s.ops[3]) || Numel(s.ops[3].dims) != 1))
    return bc.Fail("the zero point must be one plain int32");
  dnnl::primitive_attr attr;
  std::vector<std::pair<int, int>> args;
  if (!(r = bc.PostOps(&attr, &args)).ok) return r;
  if (has_zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  dnnl::matmul::primitive_desc pd;
  try {
    const memory::desc w_any(d[1].dims(), memory::data_type::s8, memory::format_tag::any);
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(d[0], w_any, d[2]), attr, bc.engine());
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("int8 matmul: ") + e.what());
  }
  if (!(r = CheckSame(bc, "src", pd.src_desc(), d[0])).ok) return r;
  if (!(r = CheckSame(bc, "dst", pd.dst_desc(), d[2])).ok) return r;
  // The packed weights: the stored layout plus the compensation oneDNN appends for a source zero point.
  const memory::desc wc = pd.weights_desc();
  memory::desc plain_part = wc;
  plain_part.data.extra = dnnl_memory_extra_desc_t();
  if (!(r = CheckSame(bc, "weights", plain_part, d[1])).ok) return r;
  if (bc.WeightBytes(1).length < wc.get_size())
    return bc.Fail("weights hold " + std::to_string(bc.WeightBytes(1).length) + " bytes; the packed layout needs " +
                   std::to_string(wc.get_size()));
  args.push_back({DNNL_ARG_SRC, bc.Slot(0, d[0])});
  args.push_back({DNNL_ARG_WEIGHTS, bc.Slot(1, wc)});
  args.push_back({DNNL_ARG_DST, bc.Slot(2, d[2])});
  if (has_zp) args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, bc.Slot(3, d[3])});
  try {
    out->reset(new PrimitiveExec(dnnl::matmul(pd), std::move(args)));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("int8 matmul: ") + e.what());
  }
  return CheckResult::Ok();
}

// ---- QuantizeLinear (per tensor) ----------------------------------------------------------------------------------

namespace {

// y = saturate(round_half_even(x / scale) + zp), as ONNX Runtime's MLAS (a quotient, not a product by 1 / scale).
// Clamping the quotient to [lo - zp, hi - zp] first is the same (zp is an integer); NaN gives the minimum, as the CPU
// EP's QuantizeLinear.
template <typename T>
#if !defined(__SANITIZE_THREAD__) && !defined(__clang__)  // clang has no target_clones on function templates
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void QuantizeLinearLoop(const float* x, int64_t n, float scale, int32_t zp, T* y) {
  constexpr float kLo = std::is_signed<T>::value ? -128.f : 0.f, kHi = std::is_signed<T>::value ? 127.f : 255.f;
  const float lo = kLo - static_cast<float>(zp), hi = kHi - static_cast<float>(zp);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float q = x[i] / scale;
    q = q >= lo ? q : lo;
    q = q <= hi ? q : hi;
    y[i] = static_cast<T>(static_cast<int32_t>(RoundHalfEven(q)) + zp);
  }
}

class QuantizeExec : public StepExec {
 public:
  QuantizeExec(int src, int dst, int scale, int zp, int64_t n, bool is_signed)
      : src_(src), dst_(dst), scale_(scale), zp_(zp), n_(n), signed_(is_signed) {}
  void Run(RunContext& rc) override {
    const float scale = *static_cast<const float*>(rc.ptr(scale_));
    int32_t zp = 0;
    if (zp_ >= 0)
      zp = signed_ ? *static_cast<const int8_t*>(rc.ptr(zp_)) : *static_cast<const uint8_t*>(rc.ptr(zp_));
    const float* x = static_cast<const float*>(rc.ptr(src_));
    void* y = rc.ptr(dst_);
    const int64_t chunks = (n_ + kQuantChunk - 1) / kQuantChunk;
#pragma omp parallel for schedule(static) if (chunks > 4)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t b = c * kQuantChunk, len = std::min(kQuantChunk, n_ - b);
      if (signed_)
        QuantizeLinearLoop(x + b, len, scale, zp, static_cast<int8_t*>(y) + b);
      else
        QuantizeLinearLoop(x + b, len, scale, zp, static_cast<uint8_t*>(y) + b);
    }
  }

 private:
  int src_, dst_, scale_, zp_;
  int64_t n_;
  bool signed_;
};

}  // namespace

bool SupportQuantize(const Graph& g, const Node& n, std::string* why) {
  if (!StaticIo(g, n, 2, why)) return false;
  const Value &x = g.v(n.inputs[0]), &y = g.v(n.outputs[0]);
  const int scale = n.inputs[1], zp = n.inputs.size() > 2 ? n.inputs[2] : -1;
  if (x.dtype != kF32) return Reject(why, "input must be float");
  if (!Is8Bit(y.dtype)) return Reject(why, "output must be int8 or uint8");
  if (g.v(scale).dtype != kF32) return Reject(why, "scale must be float");
  if (!OneElement(g, scale) || (zp >= 0 && !OneElement(g, zp)))
    return Reject(why, "only a per-tensor scale and zero point are compiled");
  if (zp >= 0 && g.v(zp).dtype != y.dtype)
    return Reject(why, "zero point '" + g.v(zp).name + "' has element type " + std::to_string(g.v(zp).dtype) +
                           ", the output " + std::to_string(y.dtype));
  if (n.Int("block_size", 0) != 0) return Reject(why, "blocked quantization is not compiled");
  if (n.Int("saturate", 1) != 1) return Reject(why, "saturate=0 applies to float8 only");
  if (y.dims != x.dims) return Reject(why, "output shape differs from the input's");
  if (x.numel() <= 0) return Reject(why, "empty tensor");
  const Value& sv = g.v(scale);
  const float* s = sv.is_const() ? static_cast<const float*>(sv.data) : nullptr;
  if (s && !(*s > 0.f && std::isfinite(*s)))
    return Reject(why, "scale '" + g.v(scale).name + "' is not a positive finite number");
  return true;
}

CheckResult LowerQuantize(LowerContext& ctx, int node) {
  return LowerPerTensorScaleStep(ctx, node, StepKind::kQuantize);
}

CheckResult BuildQuantize(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  return BuildPerTensorScaleStep<QuantizeExec>(bc, true, out);
}

CheckResult BuildMatMulInt8Avx2(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(7, false, 0, 0);
  if (!r.ok) return r;
  if (!int8gemm::Available()) return bc.Fail("this step runs on AVX2, which this CPU does not have; recompile the model");
  const Step& s = bc.step();
  std::vector<memory::desc> d(7);
  for (size_t i = 0; i < 7; ++i)
    if (!(r = bc.Desc(i, &d[i])).ok) return r;
  const Operand &src = s.ops[0], &w = s.ops[1], &dst = s.ops[2], &zp = s.ops[3], &scale = s.ops[4], &sums = s.ops[5],
                &bias = s.ops[6];
  if (!src.present() || !w.present() || !dst.present() || !scale.present() || !sums.present())
    return bc.Fail("src, weights, dst, scale and column sums are required");
  if (!s.post_ops.empty()) return bc.Fail("this step takes no post-ops");
  if (src.dtype != kU8 || w.dtype != kU8 || dst.dtype != kF32 || scale.dtype != kF32 || sums.dtype != kI32)
    return bc.Fail("needs a u8 src, u8 packed weights, f32 dst and scale, i32 column sums");
  if (!IsPlain(src) || !IsPlain(dst) || !IsPlain(w) || !IsPlain(sums) || !IsPlain(scale))
    return bc.Fail("operands must be plain");
  if (src.dims.size() != 2 || dst.dims.size() != 2 || w.dims.size() != 1 || sums.dims.size() != 1)
    return bc.Fail("src and dst must be 2-D, weights and column sums 1-D");
  const int64_t m = src.dims[0], k = src.dims[1], n = dst.dims[1];
  if (m <= 0 || k <= 0 || n <= 0 || dst.dims[0] != m) return bc.Fail("src " + DimsText(src.dims) + " and dst " +
                                                                      DimsText(dst.dims) + " do not form a product");
  if (w.buf != Buf::kWeight || sums.buf != Buf::kWeight) return bc.Fail("weights and column sums must be weights");
  if (w.dims[0] != static_cast<int64_t>(int8gemm::PackedBSize(k, n)) || sums.dims[0] != n)
    return bc.Fail("weights hold " + std::to_string(w.dims[0]) + " bytes and " + std::to_string(sums.dims[0]) +
                   " column sums; a " + std::to_string(k) + " x " + std::to_string(n) + " product needs " +
                   std::to_string(int8gemm::PackedBSize(k, n)) + " and " + std::to_string(n));
  if (Numel(scale.dims) != 1) return bc.Fail("the scale must be one element");
  if (zp.present() && (zp.dtype != kI32 || !IsPlain(zp) || Numel(zp.dims) != 1))
    return bc.Fail("the zero point must be one plain int32");
  if (bias.present() && (bias.dtype != kF32 || !IsPlain(bias) || bias.dims != std::vector<int64_t>{n}))
    return bc.Fail("the bias must be a plain float [" + std::to_string(n) + "]");
  const int a = bc.Slot(0, d[0]), wi = bc.Slot(1, d[1]), y = bc.Slot(2, d[2]);
  const int z = zp.present() ? bc.Slot(3, d[3]) : -1;
  const int sc = bc.Slot(4, d[4]), su = bc.Slot(5, d[5]);
  const int bi = bias.present() ? bc.Slot(6, d[6]) : -1;
  *out = std::make_unique<MatMulInt8Avx2Exec>(a, wi, y, z, sc, su, bi, m, k, n);
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
