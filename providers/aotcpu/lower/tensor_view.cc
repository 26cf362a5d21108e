// Views and strided copies: Reshape/Squeeze/Unsqueeze/Flatten/Identity/same-type Cast (zero-copy views), Transpose
// (a deferred strided view, or one reorder), Slice (a sub-view of a blocked value, one reorder from a strided view, or
// our StridedCopy loop for negative or interleaved steps); BlockedSubView, which Split and Concat use too.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "providers/aotcpu/ir/float16.h"
#include "providers/aotcpu/ir/slice_params.h"
#include "providers/aotcpu/lower/tensor_common.h"

namespace epctx {
namespace aotcpu {
namespace {

// ---- Reshape family ----------------------------------------------------------------------------------------------

// The output dims of a Reshape/Squeeze/Unsqueeze/Flatten/Identity per the spec; false (with why) when the node's
// shape/axes are not constant or the result disagrees with the graph.
bool ReshapeDims(const Graph& g, const Node& n, std::vector<int64_t>* out, std::string* why) {
  const std::vector<int64_t>& x = g.v(n.inputs[0]).dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  const std::string& op = n.op;
  if (op == "Identity" || op == "Cast") {  // Cast: the support check lets only same-type casts through
    *out = x;
    return true;
  }
  if (op == "Flatten") {
    int64_t axis = n.Int("axis", 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis > rank) return Reject(why, "axis out of range");
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? a : b) *= x[static_cast<size_t>(i)];
    *out = {a, b};
    return true;
  }
  std::vector<int64_t> list;
  bool present = false;
  if (op == "Reshape") {
    if (n.opset < 5) return Reject(why, "Reshape-1 (shape attribute) is not supported");
    if (!IntsArg(g, n, 1, "", 5, &list, &present) || !present) return Reject(why, "shape is not constant");
    const bool allowzero = n.opset >= 14 && n.Int("allowzero", 0) != 0;
    int64_t infer = -1, known = 1;
    for (size_t i = 0; i < list.size(); ++i) {
      int64_t& d = list[i];
      if (d == 0 && !allowzero) {
        if (i >= x.size()) return Reject(why, "shape copies a dim the input lacks");
        d = x[i];
      }
      if (d == -1) {
        if (infer >= 0) return Reject(why, "shape has more than one -1");
        infer = static_cast<int64_t>(i);
        continue;
      }
      if (d < 0) return Reject(why, "shape has a negative dim");
      known *= d;
    }
    const int64_t numel = Numel(x);
    if (infer >= 0) {
      if (known == 0 || numel % known) return Reject(why, "shape does not fit the input");
      list[static_cast<size_t>(infer)] = numel / known;
    }
    *out = list;
    return true;
  }
  if (!IntsArg(g, n, 1, "axes", 13, &list, &present)) return Reject(why, "axes are not constant");
  if (op == "Squeeze") {
    std::vector<bool> drop(x.size(), false);
    if (!present) {
      for (size_t i = 0; i < x.size(); ++i) drop[i] = x[i] == 1;
    } else {
      for (int64_t a : list) {
        int64_t ax;
        if (!NormAxis(a, rank, &ax) || x[static_cast<size_t>(ax)] != 1) return Reject(why, "bad squeeze axis");
        drop[static_cast<size_t>(ax)] = true;
      }
    }
    out->clear();
    for (size_t i = 0; i < x.size(); ++i)
      if (!drop[i]) out->push_back(x[i]);
    return true;
  }
  if (op == "Unsqueeze") {
    if (!present) return Reject(why, "axes are required");
    const int64_t out_rank = rank + static_cast<int64_t>(list.size());
    std::vector<bool> insert(static_cast<size_t>(out_rank), false);
    for (int64_t a : list) {
      int64_t ax;
      if (!NormAxis(a, out_rank, &ax) || insert[static_cast<size_t>(ax)]) return Reject(why, "bad unsqueeze axes");
      insert[static_cast<size_t>(ax)] = true;
    }
    out->clear();
    size_t j = 0;
    for (int64_t i = 0; i < out_rank; ++i) out->push_back(insert[static_cast<size_t>(i)] ? 1 : x[j++]);
    return true;
  }
  return Reject(why, "not a reshaping op");
}

// ---- Slice -------------------------------------------------------------------------------------------------------

struct SliceParams {
  std::vector<int64_t> begin, step, dims;  // per input axis
  std::vector<int64_t> strides;            // of the view, in elements of the input
  int64_t offset = 0;                      // of the view's first element
};

bool SliceOf(const Graph& g, const Node& n, SliceParams* p, std::string* why) {
  const std::vector<int64_t>& x = g.v(n.inputs[0]).dims;
  std::vector<int64_t> starts, ends, axes, steps;
  bool has_axes = false;
  if (n.opset < 10) {
    starts = n.Ints("starts");
    ends = n.Ints("ends");
    axes = n.Ints("axes");
    has_axes = n.Has("axes");
  } else {
    bool present;
    if (!IntsArg(g, n, 1, "", 10, &starts, &present) || !present) return Reject(why, "starts are not constant");
    if (!IntsArg(g, n, 2, "", 10, &ends, &present) || !present) return Reject(why, "ends are not constant");
    if (!IntsArg(g, n, 3, "", 10, &axes, &has_axes)) return Reject(why, "axes are not constant");
    bool has_steps;
    if (!IntsArg(g, n, 4, "", 10, &steps, &has_steps)) return Reject(why, "steps are not constant");
  }
  for (int64_t s : steps)
    if (s < -(int64_t{1} << 40) || s > (int64_t{1} << 40)) return Reject(why, "step out of range");
  SliceAxes sa;
  std::string bad;
  if (!ResolveSlice(x, starts, ends, axes, has_axes, steps, &sa, &bad)) return Reject(why, bad);
  p->dims = sa.dims;
  p->begin.assign(x.size(), 0);
  p->step.assign(x.size(), 1);
  for (size_t k = 0; k < x.size(); ++k) {
    p->begin[k] = sa.dims[k] ? sa.begin[k] : 0;
    p->step[k] = sa.dims[k] > 1 ? sa.step[k] : 1;
  }
  const std::vector<int64_t> rs = RowMajorStrides(x);
  p->strides.resize(rs.size());
  p->offset = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    p->strides[i] = rs[i] * p->step[i];
    p->offset += rs[i] * p->begin[i];
  }
  // The executor checks a strided view up to its last element (not oneDNN's max(dims * strides), which passes the
  // end of the input for a view of inner rows), so every in-range view is accepted. A negative step gives a
  // negative stride: oneDNN's reorder cannot read that, our StridedCopy step can.
  return true;
}

bool Reversed(const SliceParams& p) {
  for (int64_t st : p.strides)
    if (st < 0) return true;
  return false;
}

}  // namespace


// The sub-block [offsets, offsets + dims) of a blocked (format-tag) operand as an operand of the same tag at a byte
// offset, when those bytes are exactly a `dims` tensor in that layout: oneDNN's sub-memory of the parent (offsets on a
// blocked axis block-aligned) has a `dims` tensor's strides on every dim larger than 1, and no padding. A batch-1
// split of channel-blocked channels at block multiples, or of nhwc rows, is one; a consumer then reads the parent's
// bytes in place (Split and Slice otherwise copy through plain, issue 14).
bool BlockedSubView(const Operand& parent, const std::vector<int64_t>& dims, const std::vector<int64_t>& offsets,
                    Operand* out) {
  if (parent.tag == 0 || parent.dims.size() != dims.size() || offsets.size() != dims.size()) return false;
  dnnl::memory::desc whole;
  if (!OperandDesc(parent, &whole).ok || whole.data.format_kind != dnnl_blocked) return false;
  try {
    const dnnl::memory::desc sub =
        whole.submemory_desc(dnnl::memory::dims(dims.begin(), dims.end()), dnnl::memory::dims(offsets.begin(), offsets.end()));
    const dnnl::memory::desc want(dnnl::memory::dims(dims.begin(), dims.end()), whole.data_type(),
                                  static_cast<dnnl::memory::format_tag>(parent.tag));
    const auto& a = sub.data.format_desc.blocking;
    const auto& b = want.data.format_desc.blocking;
    if (want.data.format_kind != dnnl_blocked || a.inner_nblks != b.inner_nblks) return false;
    for (int k = 0; k < a.inner_nblks; ++k)
      if (a.inner_blks[k] != b.inner_blks[k] || a.inner_idxs[k] != b.inner_idxs[k]) return false;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (want.data.padded_dims[d] != dims[d]) return false;  // padding would read the parent's next values
      if (dims[d] > 1 && a.strides[d] != b.strides[d]) return false;
    }
    if (sub.data.offset0 < 0) return false;
    *out = parent;
    out->dims = dims;
    out->offset = parent.offset + static_cast<uint64_t>(sub.data.offset0) * DtypeSize(parent.dtype);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// ---- Reshape, Squeeze, Unsqueeze, Flatten, Identity --------------------------------------------------------------

namespace {
// Casts a oneDNN reorder computes as ONNX does: 8-bit integers to float (exact), int32 to float (rounded to nearest
// even, as a C conversion in the default rounding mode). Float to integer is left out: ONNX truncates toward zero,
// oneDNN's reorder rounds.
bool IsIntToFloatCast(uint32_t from, uint32_t to) { return to == kF32 && (from == kU8 || from == kI8 || from == kI32); }
}  // namespace

bool SupportReshape(const Graph& g, const Node& n, std::string* why) {
  if (!StaticIo(g, n, 1, why)) return false;
  const Value &x = g.v(n.inputs[0]), &y = g.v(n.outputs[0]);
  if (n.op == "Cast" && IsIntToFloatCast(x.dtype, y.dtype)) {
    if (x.dims != y.dims) return Reject(why, "output shape differs from the input's");
    if (Numel(x.dims) == 0) return Reject(why, "empty tensor");
    return true;
  }
  if (!ViewableType(x.dtype) || x.dtype != y.dtype) return Reject(why, "unsupported element type");
  std::vector<int64_t> dims;
  if (!ReshapeDims(g, n, &dims, why)) return false;
  if (dims != y.dims) return Reject(why, "computed shape " + DimsText(dims) + " differs from the graph's " + DimsText(y.dims));
  if (Numel(dims) != Numel(x.dims)) return Reject(why, "element count changes");
  if (Numel(dims) == 0) return Reject(why, "empty tensor");
  return true;
}

// A Cast to float16 inside a promoted float16 graph (ir/float16.h): float32 in and out, rounded to float16's
// precision (round to nearest even, overflow to infinity) by a round trip through a float16 copy, as ONNX Runtime's
// Cast does before its float32 kernels read the value back.
bool RoundsToFloat16(const Node& n) { return n.op == "Cast" && n.domain.empty() && n.Int("to", 0) == kF16; }

CheckResult LowerRoundToFloat16(LowerContext& ctx, const Node& n) {
  Step st;
  st.kind = StepKind::kRoundFloat16;
  st.name = n.name;
  st.ops.push_back(ctx.UsePlain(n.inputs[0]));
  st.ops.push_back(ctx.DefinePlain(n.outputs[0]));
  ctx.Emit(std::move(st));
  return CheckResult::Ok();
}

#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) void RoundToHalfF16c(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) y[i] = RoundToFloat16(x[i]);
}
#endif

class RoundFloat16Exec : public StepExec {
 public:
  RoundFloat16Exec(int src, int dst, int64_t n) : src_(src), dst_(dst), n_(n) {}
  void Run(RunContext& rc) override {
    const float* x = static_cast<const float*>(rc.ptr(src_));
    float* y = static_cast<float*>(rc.ptr(dst_));
    constexpr int64_t kChunk = 1 << 16;
    const int64_t chunks = (n_ + kChunk - 1) / kChunk;
#if defined(__x86_64__)
    static const bool f16c = [] {  // CPUID.1:ECX bit 29 (clang's __builtin_cpu_supports has no "f16c")
      unsigned a = 0, b = 0, c = 0, d = 0;
      return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0 && __builtin_cpu_supports("avx2");
    }();
#else
    constexpr bool f16c = false;
#endif
#pragma omp parallel for schedule(static) if (chunks > 4)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t b = c * kChunk, len = std::min(kChunk, n_ - b);
#if defined(__x86_64__)
      if (f16c) {
        RoundToHalfF16c(x + b, y + b, len);
        continue;
      }
#endif
      for (int64_t i = 0; i < len; ++i) y[b + i] = RoundToFloat16(x[b + i]);
    }
  }

 private:
  int src_, dst_;
  int64_t n_;
};

CheckResult LowerReshape(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  if (RoundsToFloat16(n)) return LowerRoundToFloat16(ctx, n);
  const Graph& g = ctx.graph();
  if (n.op == "Cast" && g.v(n.inputs[0]).dtype != g.v(n.outputs[0]).dtype) {  // int -> float: one reorder
    Step s;
    s.kind = StepKind::kReorder;
    s.name = StepName(g, n);
    Operand src = ctx.UsePlain(n.inputs[0]), dst = ctx.DefinePlain(n.outputs[0]);
    if (src.dims.empty()) src = Reshaped(src, {1});
    if (dst.dims.empty()) dst = Reshaped(dst, {1});
    s.ops = {src, dst};
    ctx.Emit(std::move(s));
    return CheckResult::Ok();
  }
  const std::vector<int64_t>& dims = ctx.graph().v(n.outputs[0]).dims;
  // An Identity (or any same-dims view) of a deferred view stays deferred: present_key = Identity(Transpose(k)).
  if (const Operand* view = ctx.PeekView(n.inputs[0]); view && view->dims == dims) {
    ctx.DefineView(n.outputs[0], *view, StepName(ctx.graph(), n));
    return CheckResult::Ok();
  }
  return ctx.Alias(n.outputs[0], n.inputs[0], dims);
}

// ---- Transpose ---------------------------------------------------------------------------------------------------

bool TransposePermutation(const Node& n, size_t rank, std::vector<int64_t>* perm) {
  *perm = n.Ints("perm");
  if (!n.Has("perm"))
    for (size_t i = 0; i < rank; ++i) perm->push_back(static_cast<int64_t>(rank - 1 - i));
  if (perm->size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int64_t a : *perm) {
    if (a < 0 || a >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(a)]) return false;
    seen[static_cast<size_t>(a)] = true;
  }
  return true;
}

namespace {
bool PermOf(const Graph& g, const Node& n, std::vector<int64_t>* perm) {
  return TransposePermutation(n, g.v(n.inputs[0]).dims.size(), perm);
}

}  // namespace

bool SupportTranspose(const Graph& g, const Node& n, std::string* why) {
  if (!StaticIo(g, n, 1, why)) return false;
  const Value &x = g.v(n.inputs[0]), &y = g.v(n.outputs[0]);
  if (x.dtype != y.dtype || !MovableType(x.dtype)) return Reject(why, "unsupported element type");
  if (x.dims.empty()) return Reject(why, "scalar input");
  std::vector<int64_t> perm;
  if (!PermOf(g, n, &perm)) return Reject(why, "perm is not a permutation of the input's axes");
  for (size_t i = 0; i < perm.size(); ++i)
    if (y.dims[i] != x.dims[static_cast<size_t>(perm[i])]) return Reject(why, "output shape disagrees with perm");
  return true;
}

CheckResult LowerTranspose(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  const Value &x = ctx.graph().v(n.inputs[0]), &y = ctx.graph().v(n.outputs[0]);
  std::vector<int64_t> perm;
  if (!PermOf(ctx.graph(), n, &perm)) return ctx.Fail(node, "perm is not a permutation");
  // When only size-1 axes move, the element order is unchanged: a view.
  std::vector<int64_t> order;
  for (int64_t a : perm)
    if (x.dims[static_cast<size_t>(a)] != 1) order.push_back(a);
  if (std::is_sorted(order.begin(), order.end())) return ctx.Alias(n.outputs[0], n.inputs[0], y.dims);
  // A deferred view (no copy unless a consumer needs the value plain, or it is a graph output), composed with the
  // input's own layout when that is one of strides: the input's deferred view, a permutation such as nhwc, plain.
  // A MatMul reads it in place; a convolution reads it in place when it is the layout it asks for (tf2onnx's NHWC
  // input transposed to NCHW is nhwc); an nhwc convolution result transposed back to NHWC is plain bytes (issue 24).
  if (x.dtype == 1) {
    Operand in;
    std::vector<int64_t> xs;
    if (const Operand* v = ctx.PeekView(n.inputs[0])) {
      in = *v;
      xs = v->strides;
    } else if (const Operand* p = ctx.Peek(n.inputs[0]); p && p->buf != Buf::kWeight && PlainStrides(*p, &xs)) {
      in = *p;
    } else {
      in = ctx.UsePlain(n.inputs[0]);
      xs = RowMajorStrides(x.dims);
    }
    if (in.present() && xs.size() == perm.size()) {
      std::vector<int64_t> strides(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) strides[i] = xs[static_cast<size_t>(perm[i])];
      ctx.DefineView(n.outputs[0], StridedView(in, x.dtype, y.dims, strides, 0), StepName(ctx.graph(), n));
      return CheckResult::Ok();
    }
  }
  const Operand in = ctx.UsePlain(n.inputs[0]);
  const std::vector<int64_t> rs = RowMajorStrides(x.dims);
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = rs[static_cast<size_t>(perm[i])];
  Step s;
  s.kind = StepKind::kReorder;
  s.name = StepName(ctx.graph(), n);
  s.ops.push_back(StridedView(in, x.dtype, y.dims, strides, 0));
  s.ops.push_back(ctx.DefinePlain(n.outputs[0]));
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

// ---- Slice -------------------------------------------------------------------------------------------------------

bool SupportSlice(const Graph& g, const Node& n, std::string* why) {
  if (!StaticIo(g, n, 1, why)) return false;
  const Value &x = g.v(n.inputs[0]), &y = g.v(n.outputs[0]);
  if (x.dtype != y.dtype || !MovableType(x.dtype)) return Reject(why, "unsupported element type");
  if (x.dims.empty()) return Reject(why, "scalar input");
  SliceParams p;
  if (!SliceOf(g, n, &p, why)) return false;
  if (p.dims != y.dims) return Reject(why, "computed shape " + DimsText(p.dims) + " differs from the graph's " + DimsText(y.dims));
  if (Numel(p.dims) == 0) return Reject(why, "empty result");
  return true;
}

// oneDNN describes a strided view only when its strides are non-negative and, sorted, do not interleave: a step on
// an inner axis ([5, 3] sliced with step 2 on axis 1: dims [5, 2], strides [3, 2]) is refused (found by
// tests/difftest: the whole compile failed). Such slices, and reversed ones, are copied by our StridedCopy loop.
static bool NeedsStridedCopy(uint32_t dtype, const SliceParams& p) {
  if (Reversed(p)) return true;
  Operand view;
  view.buf = Buf::kArena;
  view.dtype = dtype;
  view.dims = p.dims;
  view.strides = p.strides;
  dnnl::memory::desc d;
  return !OperandDesc(view, &d).ok;
}

CheckResult LowerSlice(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  const Value& x = ctx.graph().v(n.inputs[0]);
  SliceParams p;
  std::string why;
  if (!SliceOf(ctx.graph(), n, &p, &why)) return ctx.Fail(node, why);
  // A unit-step slice of a blocked source that is a sub-block: a view of its bytes, no copy.
  const Operand* cur = ctx.Peek(n.inputs[0]);
  const Value& y = ctx.graph().v(n.outputs[0]);
  if (cur && cur->tag != 0 && !ctx.options().portable_layouts && !y.is_graph_output && !y.consumers.empty() &&
      std::all_of(p.step.begin(), p.step.end(), [](int64_t v) { return v == 1; })) {
    Operand view;
    if (BlockedSubView(ctx.Use(n.inputs[0]), p.dims, p.begin, &view) && ctx.DefineSubView(n.outputs[0], view))
      return CheckResult::Ok();
  }
  const Operand in = ctx.UsePlain(n.inputs[0]);
  Step s;
  s.name = StepName(ctx.graph(), n);
  if (NeedsStridedCopy(x.dtype, p)) {
    s.kind = StepKind::kStridedCopy;
    s.ops.push_back(in);
    s.ops.push_back(ctx.DefinePlain(n.outputs[0]));
    s.ints.push_back(p.offset);
    s.ints.insert(s.ints.end(), p.strides.begin(), p.strides.end());
  } else {
    s.kind = StepKind::kReorder;
    s.ops.push_back(StridedView(in, x.dtype, p.dims, p.strides, p.offset));
    s.ops.push_back(ctx.DefinePlain(n.outputs[0]));
  }
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

// ---- StridedCopy step (Slice with negative steps) ----------------------------------------------------------------

namespace {
class StridedCopyExec : public StepExec {
 public:
  StridedCopyExec(int src, int dst, std::vector<int64_t> dims, std::vector<int64_t> strides, int64_t offset,
                  size_t elem)
      : src_(src), dst_(dst), dims_(std::move(dims)), strides_(std::move(strides)), offset_(offset), elem_(elem) {}

  void Run(RunContext& rc) override {
    const char* src = static_cast<const char*>(rc.ptr(src_));
    char* dst = static_cast<char*>(rc.ptr(dst_));
    const size_t rank = dims_.size();
    const int64_t inner = dims_[rank - 1], is = strides_[rank - 1];
    int64_t rows = 1;
    for (size_t k = 0; k + 1 < rank; ++k) rows *= dims_[k];
    for (int64_t r = 0; r < rows; ++r) {
      int64_t off = offset_, rem = r;
      for (size_t k = rank - 1; k-- > 0;) {
        off += (rem % dims_[k]) * strides_[k];
        rem /= dims_[k];
      }
      char* out = dst + static_cast<size_t>(r * inner) * elem_;
      for (int64_t j = 0; j < inner; ++j)
        std::memcpy(out + static_cast<size_t>(j) * elem_, src + static_cast<size_t>(off + j * is) * elem_, elem_);
    }
  }

 private:
  int src_, dst_;
  std::vector<int64_t> dims_, strides_;
  int64_t offset_;
  size_t elem_;
};
}  // namespace

CheckResult BuildStridedCopy(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  const Step& s = bc.step();
  CheckResult r = bc.ExpectCounts(2, false, SIZE_MAX, 0);
  if (!r.ok) return r;
  const Operand &src = s.ops[0], &dst = s.ops[1];
  if (!src.present() || !dst.present()) return bc.Fail("src and dst are required");
  if (src.dtype != dst.dtype || DtypeSize(src.dtype) == 0) return bc.Fail("src and dst differ in type");
  if (!IsPlain(src) || !IsPlain(dst)) return bc.Fail("operands must be plain row-major");
  const size_t rank = dst.dims.size();
  if (rank == 0 || s.ints.size() != 1 + rank) return bc.Fail("needs an offset and one stride per dst dim");
  // Every element read lies in src: the lowest and highest offsets the loop reaches, without overflow (dims and
  // strides are bounded so that no sum below can overflow).
  const int64_t kBound = int64_t{1} << 40;
  int64_t lo = s.ints[0], hi = s.ints[0], src_numel = 1, dst_numel = 1;
  if (lo < 0 || lo > kBound) return bc.Fail("offset out of range");
  for (int64_t d : src.dims) {
    if (d <= 0 || d > kBound) return bc.Fail("src dims out of range");
    src_numel *= d;
    if (src_numel > kBound) return bc.Fail("src too large");
  }
  for (size_t k = 0; k < rank; ++k) {
    const int64_t d = dst.dims[k], st = s.ints[1 + k];
    if (d <= 0 || d > kBound || st < -kBound || st > kBound) return bc.Fail("dims or strides out of range");
    dst_numel *= d;
    if (dst_numel > kBound) return bc.Fail("dst too large");
    int64_t reach;
    if (__builtin_mul_overflow(d - 1, st, &reach) || reach < -kBound || reach > kBound)
      return bc.Fail("strides reach out of range");
    (reach < 0 ? lo : hi) += reach;
    if (lo < -kBound || hi > kBound) return bc.Fail("strides reach out of range");
  }
  if (lo < 0 || hi >= src_numel) return bc.Fail("the copy reads outside src");
  dnnl::memory::desc d0, d1;
  if (!(r = bc.Desc(0, &d0)).ok || !(r = bc.Desc(1, &d1)).ok) return r;  // both fit their buffers
  *out = std::make_unique<StridedCopyExec>(bc.Slot(0, d0), bc.Slot(1, d1), dst.dims,
                                           std::vector<int64_t>(s.ints.begin() + 1, s.ints.end()), s.ints[0],
                                           DtypeSize(src.dtype));
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx

namespace epctx {
namespace aotcpu {

// ---- Expand ------------------------------------------------------------------------------------------------------

namespace {
// The dims Expand(x, shape) produces (numpy broadcast of x's dims and the constant shape); false when not constant or
// not broadcastable.
bool ExpandDims(const Graph& g, const Node& n, std::vector<int64_t>* out, std::string* why) {
  std::vector<int64_t> shape;
  bool present = false;
  if (!IntsArg(g, n, 1, "", 8, &shape, &present) || !present) return Reject(why, "shape is not constant");
  if (!BroadcastShapes(g.v(n.inputs[0]).dims, shape, out)) return Reject(why, "shape does not broadcast with the input");
  return true;
}
}  // namespace

bool SupportExpand(const Graph& g, const Node& n, std::string* why) {
  if (!StaticIo(g, n, 1, why)) return false;
  const Value &x = g.v(n.inputs[0]), &y = g.v(n.outputs[0]);
  if (x.dtype != y.dtype || DtypeSize(x.dtype) == 0 || !MovableType(x.dtype)) return Reject(why, "unsupported element type");
  std::vector<int64_t> dims;
  if (!ExpandDims(g, n, &dims, why)) return false;
  if (dims != y.dims) return Reject(why, "computed shape " + DimsText(dims) + " differs from the graph's " + DimsText(y.dims));
  if (dims.empty() || Numel(dims) == 0) return Reject(why, "empty or scalar result");
  return true;
}

CheckResult LowerExpand(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  const Graph& g = ctx.graph();
  const std::vector<int64_t>& xd = g.v(n.inputs[0]).dims;
  const std::vector<int64_t>& yd = g.v(n.outputs[0]).dims;
  if (Numel(xd) == Numel(yd)) return ctx.Alias(n.outputs[0], n.inputs[0], yd);  // only size-1 dims added
  std::vector<int64_t> in(yd.size() - xd.size(), 1);
  in.insert(in.end(), xd.begin(), xd.end());
  const std::vector<int64_t> rs = RowMajorStrides(in);
  Step s;
  s.kind = StepKind::kStridedCopy;
  s.name = StepName(g, n);
  s.ops = {ctx.UsePlain(n.inputs[0]), ctx.DefinePlain(n.outputs[0])};
  s.ints.push_back(0);
  for (size_t i = 0; i < yd.size(); ++i) s.ints.push_back(in[i] == 1 ? 0 : rs[i]);
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}


CheckResult BuildRoundFloat16(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult c = bc.ExpectCounts(2, false, 0, 0);
  if (!c.ok) return c;
  const Step& s = bc.step();
  if (!s.post_ops.empty()) return bc.Fail("takes no post-ops");
  const Operand &src = s.ops[0], &dst = s.ops[1];
  if (!src.present() || !dst.present() || src.dtype != kF32 || dst.dtype != kF32)
    return bc.Fail("src and dst must be float");
  if (src.dims != dst.dims) return bc.Fail("src and dst dims differ");
  if (!IsPlain(src) || !IsPlain(dst)) return bc.Fail("src and dst must be dense row-major");
  const int64_t n = Numel(src.dims);
  if (n <= 0) return bc.Fail("empty tensor");
  dnnl::memory::desc ds, dd;
  if (!(c = bc.Desc(0, &ds)).ok || !(c = bc.Desc(1, &dd)).ok) return c;
  *out = std::make_unique<RoundFloat16Exec>(bc.Slot(0, ds), bc.Slot(1, dd), n);
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
