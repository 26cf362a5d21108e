// Data movement: Reshape/Squeeze/Unsqueeze/Flatten/Identity/same-type Cast (zero-copy views), Transpose, Slice and
// Split (one oneDNN reorder from a strided view per output), Concat (oneDNN concat), Gather (a bounds-checked row
// copy) and Pad (our own row loop, step kind kPad).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "providers/aotcpu/ir/slice_params.h"
#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {
namespace {


bool Why(std::string* why, const std::string& reason) {
  if (why) *why = reason;
  return false;
}

// The node's name for steps and run-time messages; unnamed nodes are named by their output.
std::string StepName(const Graph& g, const Node& n) {
  if (!n.name.empty()) return n.name;
  return n.op + " -> '" + (n.outputs.empty() || n.outputs[0] < 0 ? std::string() : g.v(n.outputs[0]).name) + "'";
}

int64_t Numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

// Types a zero-copy view can carry (any fixed-size element).
bool ViewableType(uint32_t dt) {
  return dt == kF32 || dt == kI64 || dt == kI32 || dt == kBool || dt == kU8 || dt == kI8;
}
// Types the reorder/concat/gather steps move (int64 through the executor's stand-in descriptors).
bool MovableType(uint32_t dt) { return dt == kI64 || DnnlType(dt) != dnnl::memory::data_type::undef; }

// Input `i` and output `o` of `n` are present tensors with static shapes.
bool StaticIo(const Graph& g, const Node& n, size_t in_count, std::string* why) {
  if (n.outputs.size() != 1 || n.outputs[0] < 0) return Why(why, "expects one output");
  for (size_t i = 0; i < in_count; ++i) {
    if (i >= n.inputs.size() || n.inputs[i] < 0) return Why(why, "input " + std::to_string(i) + " is absent");
    if (!g.v(n.inputs[i]).has_shape) return Why(why, "input '" + g.v(n.inputs[i]).name + "' has no static shape");
  }
  const Value& y = g.v(n.outputs[0]);
  if (!y.has_shape) return Why(why, "output '" + y.name + "' has no static shape");
  if (y.dims.size() > kMaxRank) return Why(why, "rank above " + std::to_string(kMaxRank));
  return true;
}

// A constant int list from an input (opset >= `since`) or an attribute (older opsets). *present tells whether the
// list was given at all; false when given but not constant.
bool IntsArg(const Graph& g, const Node& n, size_t input, const char* attr, int64_t since, std::vector<int64_t>* out,
             bool* present) {
  out->clear();
  if (n.opset >= since) {
    *present = input < n.inputs.size() && n.inputs[input] >= 0;
    return !*present || g.ConstInts(n.inputs[input], out);
  }
  *present = n.Has(attr);
  *out = n.Ints(attr);
  return true;
}

bool NormAxis(int64_t a, int64_t rank, int64_t* out) {
  if (a < -rank || a >= rank) return false;
  *out = a < 0 ? a + rank : a;
  return true;
}

// The axis order (outermost first) of an operand with element strides, dense or not: the axes longer than 1 sorted by
// stride (ties by index), each size-1 axis left in its place (its stride carries no order). False for a blocked layout.
bool AxisOrder(const Operand& op, std::vector<int64_t>* st, std::vector<size_t>* order) {
  if (!PlainStrides(op, st) || st->size() < 2) return false;
  std::vector<size_t> moving;
  for (size_t i = 0; i < st->size(); ++i)
    if (op.dims[i] != 1) moving.push_back(i);
  std::vector<size_t> sorted = moving;
  std::stable_sort(sorted.begin(), sorted.end(), [&](size_t a, size_t b) { return (*st)[a] > (*st)[b]; });
  order->resize(st->size());
  for (size_t i = 0; i < st->size(); ++i) (*order)[i] = i;
  for (size_t k = 0; k < moving.size(); ++k) (*order)[moving[k]] = sorted[k];
  return true;
}

bool IsIdentity(const std::vector<size_t>& order) {
  for (size_t k = 0; k < order.size(); ++k)
    if (order[k] != k) return false;
  return true;
}

// When `op`'s bytes are a dense tensor whose axes are a permutation of op.dims other than the identity (nhwc's acdb):
// `order` gets the axes from outermost to innermost (AxisOrder).
bool DensePermutation(const Operand& op, std::vector<size_t>* order) {
  std::vector<int64_t> st;
  if (!AxisOrder(op, &st, order) || IsIdentity(*order)) return false;
  int64_t inner = 1;
  for (size_t k = order->size(); k-- > 0;) {
    const size_t a = (*order)[k];
    if (op.dims[a] != 1 && st[a] != inner) return false;
    inner *= op.dims[a];
  }
  return true;
}

// The axis order of an operand with element strides, dense or not (a channel slice of an nhwc value is nhwc-ordered),
// when it is not the identity.
bool StrideOrder(const Operand& op, std::vector<size_t>* order) {
  std::vector<int64_t> st;
  return AxisOrder(op, &st, order) && !IsIdentity(*order);
}

// A strided view of the plain operand `in` (dims `in_dims`): element (i0..) of the view is element
// offset + sum(i_k * strides_k) of `in`.
Operand StridedView(const Operand& in, uint32_t dtype, std::vector<int64_t> dims, std::vector<int64_t> strides,
                    int64_t elem_offset) {
  Operand v = in;
  v.tag = 0;
  v.dtype = dtype;
  v.dims = std::move(dims);
  v.strides = std::move(strides);
  v.offset = in.offset + static_cast<uint64_t>(elem_offset) * DtypeSize(dtype);
  return v;
}

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
    if (axis < 0 || axis > rank) return Why(why, "axis out of range");
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? a : b) *= x[static_cast<size_t>(i)];
    *out = {a, b};
    return true;
  }
  std::vector<int64_t> list;
  bool present = false;
  if (op == "Reshape") {
    if (n.opset < 5) return Why(why, "Reshape-1 (shape attribute) is not supported");
    if (!IntsArg(g, n, 1, "", 5, &list, &present) || !present) return Why(why, "shape is not constant");
    const bool allowzero = n.opset >= 14 && n.Int("allowzero", 0) != 0;
    int64_t infer = -1, known = 1;
    for (size_t i = 0; i < list.size(); ++i) {
      int64_t& d = list[i];
      if (d == 0 && !allowzero) {
        if (i >= x.size()) return Why(why, "shape copies a dim the input lacks");
        d = x[i];
      }
      if (d == -1) {
        if (infer >= 0) return Why(why, "shape has more than one -1");
        infer = static_cast<int64_t>(i);
        continue;
      }
      if (d < 0) return Why(why, "shape has a negative dim");
      known *= d;
    }
    const int64_t numel = Numel(x);
    if (infer >= 0) {
      if (known == 0 || numel % known) return Why(why, "shape does not fit the input");
      list[static_cast<size_t>(infer)] = numel / known;
    }
    *out = list;
    return true;
  }
  if (!IntsArg(g, n, 1, "axes", 13, &list, &present)) return Why(why, "axes are not constant");
  if (op == "Squeeze") {
    std::vector<bool> drop(x.size(), false);
    if (!present) {
      for (size_t i = 0; i < x.size(); ++i) drop[i] = x[i] == 1;
    } else {
      for (int64_t a : list) {
        int64_t ax;
        if (!NormAxis(a, rank, &ax) || x[static_cast<size_t>(ax)] != 1) return Why(why, "bad squeeze axis");
        drop[static_cast<size_t>(ax)] = true;
      }
    }
    out->clear();
    for (size_t i = 0; i < x.size(); ++i)
      if (!drop[i]) out->push_back(x[i]);
    return true;
  }
  if (op == "Unsqueeze") {
    if (!present) return Why(why, "axes are required");
    const int64_t out_rank = rank + static_cast<int64_t>(list.size());
    std::vector<bool> insert(static_cast<size_t>(out_rank), false);
    for (int64_t a : list) {
      int64_t ax;
      if (!NormAxis(a, out_rank, &ax) || insert[static_cast<size_t>(ax)]) return Why(why, "bad unsqueeze axes");
      insert[static_cast<size_t>(ax)] = true;
    }
    out->clear();
    size_t j = 0;
    for (int64_t i = 0; i < out_rank; ++i) out->push_back(insert[static_cast<size_t>(i)] ? 1 : x[j++]);
    return true;
  }
  return Why(why, "not a reshaping op");
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
    if (!IntsArg(g, n, 1, "", 10, &starts, &present) || !present) return Why(why, "starts are not constant");
    if (!IntsArg(g, n, 2, "", 10, &ends, &present) || !present) return Why(why, "ends are not constant");
    if (!IntsArg(g, n, 3, "", 10, &axes, &has_axes)) return Why(why, "axes are not constant");
    bool has_steps;
    if (!IntsArg(g, n, 4, "", 10, &steps, &has_steps)) return Why(why, "steps are not constant");
  }
  for (int64_t s : steps)
    if (s < -(int64_t{1} << 40) || s > (int64_t{1} << 40)) return Why(why, "step out of range");
  SliceAxes sa;
  std::string bad;
  if (!ResolveSlice(x, starts, ends, axes, has_axes, steps, &sa, &bad)) return Why(why, bad);
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

// ---- Gather step -------------------------------------------------------------------------------------------------

class GatherExec : public StepExec {
 public:
  GatherExec(int data, int indices, int dst, int64_t outer, int64_t bound, int64_t inner_bytes, int64_t num_indices,
             bool i64)
      : data_(data), indices_(indices), dst_(dst), outer_(outer), bound_(bound),
        inner_(inner_bytes), nidx_(num_indices), i64_(i64) {}

  void Run(RunContext& rc) override {
    const char* data = static_cast<const char*>(rc.ptr(data_));
    const void* ind = rc.ptr(indices_);
    char* dst = static_cast<char*>(rc.ptr(dst_));
    rows_.resize(static_cast<size_t>(nidx_));
    for (int64_t j = 0; j < nidx_; ++j) {
      int64_t v;
      if (i64_) {
        std::memcpy(&v, static_cast<const char*>(ind) + j * 8, 8);
      } else {
        int32_t w;
        std::memcpy(&w, static_cast<const char*>(ind) + j * 4, 4);
        v = w;
      }
      if (v < -bound_ || v >= bound_) {
        rc.Fail("index " + std::to_string(v) + " (position " + std::to_string(j) + " of the indices) is out of range [" +
                std::to_string(-bound_) + ", " + std::to_string(bound_) + ") of the gathered axis");
        return;
      }
      rows_[static_cast<size_t>(j)] = v < 0 ? v + bound_ : v;
    }
    for (int64_t o = 0; o < outer_; ++o) {
      const char* src = data + o * bound_ * inner_;
      char* d = dst + o * nidx_ * inner_;
      for (int64_t j = 0; j < nidx_; ++j)
        std::memcpy(d + j * inner_, src + rows_[static_cast<size_t>(j)] * inner_, static_cast<size_t>(inner_));
    }
  }

 private:
  int data_, indices_, dst_;
  int64_t outer_, bound_, inner_, nidx_;
  bool i64_;
  // Validated rows of the current run. A RunContext is used by one run at a time, but this exec is shared between
  // concurrent runs, so the buffer is per thread.
  static thread_local std::vector<int64_t> rows_;
};
thread_local std::vector<int64_t> GatherExec::rows_;

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

bool SupportReshape(const Graph& g, const Node& n, std::string* why) {
  if (!StaticIo(g, n, 1, why)) return false;
  const Value &x = g.v(n.inputs[0]), &y = g.v(n.outputs[0]);
  if (!ViewableType(x.dtype) || x.dtype != y.dtype) return Why(why, "unsupported element type");
  std::vector<int64_t> dims;
  if (!ReshapeDims(g, n, &dims, why)) return false;
  if (dims != y.dims) return Why(why, "computed shape " + DimsText(dims) + " differs from the graph's " + DimsText(y.dims));
  if (Numel(dims) != Numel(x.dims)) return Why(why, "element count changes");
  if (Numel(dims) == 0) return Why(why, "empty tensor");
  return true;
}

CheckResult LowerReshape(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
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
  if (x.dtype != y.dtype || !MovableType(x.dtype)) return Why(why, "unsupported element type");
  if (x.dims.empty()) return Why(why, "scalar input");
  std::vector<int64_t> perm;
  if (!PermOf(g, n, &perm)) return Why(why, "perm is not a permutation of the input's axes");
  for (size_t i = 0; i < perm.size(); ++i)
    if (y.dims[i] != x.dims[static_cast<size_t>(perm[i])]) return Why(why, "output shape disagrees with perm");
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
  if (x.dtype != y.dtype || !MovableType(x.dtype)) return Why(why, "unsupported element type");
  if (x.dims.empty()) return Why(why, "scalar input");
  SliceParams p;
  if (!SliceOf(g, n, &p, why)) return false;
  if (p.dims != y.dims) return Why(why, "computed shape " + DimsText(p.dims) + " differs from the graph's " + DimsText(y.dims));
  if (Numel(p.dims) == 0) return Why(why, "empty result");
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

// ---- Concat ------------------------------------------------------------------------------------------------------

bool SupportConcat(const Graph& g, const Node& n, std::string* why) {
  if (n.inputs.empty()) return Why(why, "no inputs");
  if (!StaticIo(g, n, n.inputs.size(), why)) return false;
  const Value& y = g.v(n.outputs[0]);
  if (!MovableType(y.dtype)) return Why(why, "unsupported element type");
  if (!n.Has("axis")) return Why(why, "axis is required");
  const int64_t rank = static_cast<int64_t>(y.dims.size());
  int64_t axis;
  if (rank == 0 || !NormAxis(n.Int("axis", 0), rank, &axis)) return Why(why, "axis out of range");
  int64_t total = 0;
  for (int vi : n.inputs) {
    const Value& x = g.v(vi);
    if (x.dtype != y.dtype || x.dims.size() != y.dims.size()) return Why(why, "inputs differ in type or rank");
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis && x.dims[static_cast<size_t>(i)] != y.dims[static_cast<size_t>(i)])
        return Why(why, "input shapes differ off the axis");
    total += x.dims[static_cast<size_t>(axis)];
  }
  if (total != y.dims[static_cast<size_t>(axis)]) return Why(why, "output length along the axis disagrees");
  if (Numel(y.dims) == 0) return Why(why, "empty result");
  if (n.inputs.size() + 1 > kMaxStepOperands) return Why(why, "too many inputs");
  return true;
}

CheckResult LowerConcat(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  const Graph& g = ctx.graph();
  const Value& y = g.v(n.outputs[0]);
  int64_t axis = 0;  // the support check validated it
  NormAxis(n.Int("axis", 0), static_cast<int64_t>(y.dims.size()), &axis);
  std::vector<int> srcs;  // empty inputs contribute nothing (and oneDNN refuses zero-size sources)
  for (int vi : n.inputs)
    if (g.v(vi).dims[static_cast<size_t>(axis)] != 0) srcs.push_back(vi);

  // Keep a shared blocked layout when the concatenation axis is not blocked in it.
  uint32_t tag = 0;
  if (!ctx.options().portable_layouts) {
    for (int vi : srcs) {
      const Operand* o = ctx.Peek(vi);
      if (!o || o->tag == 0 || (tag != 0 && o->tag != tag)) {
        tag = 0;
        break;
      }
      tag = o->tag;
    }
    if (tag != 0) {
      dnnl::memory::desc d;
      Operand probe = *ctx.Peek(srcs[0]);
      if (!OperandDesc(probe, &d).ok) {
        tag = 0;
      } else {
        const auto& b = d.data.format_desc.blocking;
        for (int k = 0; k < b.inner_nblks; ++k)
          if (b.inner_idxs[k] == axis) tag = 0;
      }
    }
  }
  // Otherwise the destination takes the layout of the sources when every one can be written into a slice of it:
  //   - a channel-blocked tag (nChw8c at AVX2) along the blocked axis, every source's extent a whole number of blocks
  //     (each slice is then exactly a source-sized tensor in that tag, BlockedSubView);
  //   - a dense permutation of the axes (nhwc), the first source's: each slice is a strided view.
  // Each source is reordered once, into its slice; the consumer (a convolution) reads the result as it is. Before,
  // the result was plain and the next convolution reordered it again (issue 24: a YOLOv8-shaped detector's C2f and
  // SPPF concatenations, 2 copies of every concatenated byte).
  if (tag == 0 && !ctx.options().portable_layouts && y.dtype == kF32 && srcs.size() > 1 && y.dims.size() >= 3) {
    // The layout of the first source in a permutation (dense, or a slice of one such as a Split part), else the
    // first source's.
    const Operand* first = ctx.Peek(srcs[0]);
    std::vector<size_t> order;
    for (int vi : srcs) {
      const Operand* o = ctx.Peek(vi);
      if (o && o->buf != Buf::kWeight && StrideOrder(*o, &order)) {
        first = o;
        break;
      }
    }
    dnnl::memory::desc dst_desc;
    std::vector<int64_t> dst_strides;  // a permutation layout's element strides (empty for a tag)
    if (first && first->buf != Buf::kWeight && StrideOrder(*first, &order)) {
      const size_t r = order.size();
      std::vector<int64_t> pd(r);
      for (size_t k = 0; k < r; ++k) pd[k] = y.dims[order[k]];
      const std::vector<int64_t> phys = RowMajorStrides(pd);
      dst_strides.assign(r, 0);
      for (size_t k = 0; k < r; ++k) dst_strides[order[k]] = phys[k];
      try {
        dst_desc = dnnl::memory::desc(dnnl::memory::dims(y.dims.begin(), y.dims.end()), dnnl::memory::data_type::f32,
                                      dnnl::memory::dims(dst_strides.begin(), dst_strides.end()));
      } catch (const dnnl::error&) {
        dst_desc = dnnl::memory::desc();
      }
    } else if (first && first->buf != Buf::kWeight && first->tag != 0) {
      bool same = true;
      for (int vi : srcs) {
        const Operand* o = ctx.Peek(vi);
        same = same && o && o->tag == first->tag;
      }
      if (same) {
        try {
          dst_desc = dnnl::memory::desc(dnnl::memory::dims(y.dims.begin(), y.dims.end()), dnnl::memory::data_type::f32,
                                        static_cast<dnnl::memory::format_tag>(first->tag));
        } catch (const dnnl::error&) {
          dst_desc = dnnl::memory::desc();
        }
      }
    }
    Operand probe;
    if (dst_desc.data.ndims != 0 && LayoutFromDesc(dst_desc, &probe)) {
      probe.dtype = y.dtype;
      probe.buf = Buf::kArena;
      std::vector<Operand> slices;
      int64_t begin = 0;
      for (int vi : srcs) {
        const Value& x = g.v(vi);
        std::vector<int64_t> offsets(y.dims.size(), 0);
        offsets[static_cast<size_t>(axis)] = begin;
        Operand sub;
        if (dst_strides.empty()) {
          if (!BlockedSubView(probe, x.dims, offsets, &sub)) break;
        } else {
          sub = StridedView(probe, y.dtype, x.dims, dst_strides, begin * dst_strides[static_cast<size_t>(axis)]);
        }
        slices.push_back(sub);
        begin += x.dims[static_cast<size_t>(axis)];
      }
      if (slices.size() == srcs.size()) {
        std::vector<Operand> ins;
        for (int vi : srcs) ins.push_back(ctx.Use(vi));
        const Operand dst = ctx.Define(n.outputs[0], dst_desc);
        if (dst.buf == Buf::kArena && !IsPlain(dst)) {
          for (size_t i = 0; i < srcs.size(); ++i) {
            Operand slice = slices[i];  // placed where Define put the result
            slice.buf = dst.buf;
            slice.index = dst.index;
            slice.offset = dst.offset + (slices[i].offset - probe.offset);
            Step r;
            r.kind = StepKind::kReorder;
            r.name = StepName(g, n) + ":" + std::to_string(i);
            r.ops = {ins[i], slice};
            ctx.Emit(std::move(r));
          }
          return CheckResult::Ok();
        }
        // Define gives a layout other than plain arena storage (a graph output is copied out at the end).
        return ctx.Fail(node, "the concatenation's destination was not placed in its layout");
      }
    }
  }
  // Otherwise in place when the result lives in the arena: each source reordered straight into its slice of a plain
  // destination, with no copy of a blocked source to plain first and no concatenation copy after (PP-OCRv4's detector
  // concatenates four blocked 24-channel maps: 4 plain copies, then a 1.3 ms concat, issue 14).
  Step s;
  s.kind = StepKind::kConcat;
  s.name = StepName(ctx.graph(), n);
  if (tag == 0) {
    std::vector<Operand> ins;
    for (int vi : srcs) ins.push_back(ctx.Use(vi));
    const Operand dst = ctx.DefinePlain(n.outputs[0]);
    if (dst.buf == Buf::kArena && DnnlType(y.dtype) != dnnl::memory::data_type::undef) {
      const std::vector<int64_t> rs = RowMajorStrides(y.dims);
      int64_t begin = 0;
      for (size_t i = 0; i < srcs.size(); ++i) {
        const Value& x = g.v(srcs[i]);
        Step r;
        r.kind = StepKind::kReorder;
        r.name = s.name + ":" + std::to_string(i);
        r.ops = {ins[i], StridedView(dst, y.dtype, x.dims, rs, begin * rs[static_cast<size_t>(axis)])};
        ctx.Emit(std::move(r));
        begin += x.dims[static_cast<size_t>(axis)];
      }
      return CheckResult::Ok();
    }
    for (int vi : srcs) s.ops.push_back(ctx.UsePlain(vi));
    s.ops.push_back(dst);
  } else {
    for (int vi : srcs) s.ops.push_back(ctx.Use(vi));
    try {
      s.ops.push_back(ctx.Define(n.outputs[0], dnnl::memory::desc(dnnl::memory::dims(y.dims.begin(), y.dims.end()),
                                                                  DnnlType(y.dtype),
                                                                  static_cast<dnnl::memory::format_tag>(tag))));
    } catch (const dnnl::error& e) {
      return ctx.Fail(node, std::string("concat layout: ") + e.what());
    }
  }
  s.ints = {axis};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildConcat(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  const Step& s = bc.step();
  CheckResult r = bc.ExpectCounts(2, true, 1, 0);
  if (!r.ok) return r;
  const size_t nsrc = s.ops.size() - 1;
  dnnl::memory::desc dst;
  if (!(r = bc.Desc(nsrc, &dst)).ok) return r;
  if (dst.is_zero()) return bc.Fail("dst is absent or has rank 0");
  const dnnl::memory::dims dd = dst.dims();
  const int64_t rank = static_cast<int64_t>(dd.size());
  const int64_t axis = s.ints[0];
  if (axis < 0 || axis >= rank) return bc.Fail("axis " + std::to_string(axis) + " out of range for rank " +
                                               std::to_string(rank));
  std::vector<dnnl::memory::desc> srcs(nsrc);
  int64_t total = 0;
  for (size_t i = 0; i < nsrc; ++i) {
    if (!(r = bc.Desc(i, &srcs[i])).ok) return r;
    const dnnl::memory::dims sd = srcs[i].dims();
    if (srcs[i].is_zero() || sd.size() != dd.size() || srcs[i].data_type() != dst.data_type())
      return bc.Fail("src " + std::to_string(i) + " differs from dst in rank or type");
    for (int64_t k = 0; k < rank; ++k)
      if (k != axis && sd[static_cast<size_t>(k)] != dd[static_cast<size_t>(k)])
        return bc.Fail("src " + std::to_string(i) + " differs from dst off the axis");
    if (sd[static_cast<size_t>(axis)] <= 0) return bc.Fail("src " + std::to_string(i) + " is empty");
    total += sd[static_cast<size_t>(axis)];
  }
  if (total != dd[static_cast<size_t>(axis)]) return bc.Fail("srcs do not add up to dst along the axis");
  try {
    dnnl::concat::primitive_desc pd(dst, static_cast<int>(axis), srcs, bc.engine(), UserScratchpad());
    if (pd.dst_desc() != dst) return bc.Fail("oneDNN chose another dst layout");
    std::vector<std::pair<int, int>> args;
    for (size_t i = 0; i < nsrc; ++i)
      args.emplace_back(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), bc.Slot(i, srcs[i]));
    args.emplace_back(DNNL_ARG_DST, bc.Slot(nsrc, dst));
    *out = std::make_unique<PrimitiveExec>(dnnl::concat(pd), std::move(args));
  } catch (const dnnl::error& e) {
    return bc.Fail(std::string("oneDNN concat: ") + e.what());
  }
  return CheckResult::Ok();
}

// ---- Gather ------------------------------------------------------------------------------------------------------

bool SupportGather(const Graph& g, const Node& n, std::string* why) {
  if (!StaticIo(g, n, 2, why)) return false;
  const Value &x = g.v(n.inputs[0]), &ind = g.v(n.inputs[1]), &y = g.v(n.outputs[0]);
  if (x.dtype != y.dtype || !MovableType(x.dtype)) return Why(why, "unsupported element type");
  if (ind.dtype != kI64 && ind.dtype != kI32) return Why(why, "indices must be int64 or int32");
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  int64_t axis;
  if (rank == 0 || !NormAxis(n.Int("axis", 0), rank, &axis)) return Why(why, "axis out of range");
  std::vector<int64_t> dims(x.dims.begin(), x.dims.begin() + axis);
  dims.insert(dims.end(), ind.dims.begin(), ind.dims.end());
  dims.insert(dims.end(), x.dims.begin() + axis + 1, x.dims.end());
  if (dims != y.dims) return Why(why, "output shape disagrees with data and indices");
  if (Numel(dims) == 0) return Why(why, "empty result");
  // Constant indices are checked now: an out-of-range one leaves the node to the CPU EP, which reports it.
  std::vector<int64_t> idx;
  if (ind.is_const() && g.ConstInts(n.inputs[1], &idx)) {
    const int64_t bound = x.dims[static_cast<size_t>(axis)];
    for (int64_t i : idx)
      if (i < -bound || i >= bound) return Why(why, "constant index out of range");
  }
  return true;
}

CheckResult LowerGather(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  const Graph& g = ctx.graph();
  const Value& x = g.v(n.inputs[0]);
  int64_t axis = 0;  // the support check validated it
  NormAxis(n.Int("axis", 0), static_cast<int64_t>(x.dims.size()), &axis);
  Step s;
  s.kind = StepKind::kGather;
  s.name = StepName(ctx.graph(), n);
  s.ops.push_back(x.is_const() ? ctx.Use(n.inputs[0]) : ctx.UsePlain(n.inputs[0]));
  s.ops.push_back(ctx.UsePlain(n.inputs[1]));
  s.ops.push_back(ctx.DefinePlain(n.outputs[0]));
  s.ints = {axis};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildGather(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  const Step& s = bc.step();
  CheckResult r = bc.ExpectCounts(3, false, 1, 0);
  if (!r.ok) return r;
  const Operand &data = s.ops[0], &ind = s.ops[1], &dst = s.ops[2];
  if (!data.present() || !ind.present() || !dst.present()) return bc.Fail("data, indices and dst are required");
  const int64_t rank = static_cast<int64_t>(data.dims.size());
  const int64_t axis = s.ints[0];
  if (axis < 0 || axis >= rank)
    return bc.Fail("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  if (ind.dtype != kI64 && ind.dtype != kI32) return bc.Fail("indices must be int64 or int32");
  if (data.dtype != dst.dtype) return bc.Fail("data and dst differ in type");
  const size_t es = DtypeSize(data.dtype);
  if (es == 0) return bc.Fail("unsupported element type " + std::to_string(data.dtype));
  std::vector<int64_t> dims(data.dims.begin(), data.dims.begin() + axis);
  dims.insert(dims.end(), ind.dims.begin(), ind.dims.end());
  dims.insert(dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  if (dims != dst.dims)
    return bc.Fail("dst dims " + DimsText(dst.dims) + " are not data dims " + DimsText(data.dims) + " with axis " +
                   std::to_string(axis) + " replaced by indices dims " + DimsText(ind.dims));
  for (const Operand* o : {&data, &ind, &dst})
    for (int64_t d : o->dims)
      if (d < 0) return bc.Fail("negative dim");
  if (!IsPlain(data) || !IsPlain(ind) || !IsPlain(dst)) return bc.Fail("operands must be plain row-major");
  dnnl::memory::desc dd[3];
  for (size_t i = 0; i < 3; ++i)
    if (!(r = bc.Desc(i, &dd[i])).ok) return r;  // checks that each operand fits its buffer
  int64_t outer = 1, inner = static_cast<int64_t>(es);
  for (int64_t i = 0; i < axis; ++i) outer *= data.dims[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= data.dims[static_cast<size_t>(i)];
  const int d0 = bc.Slot(0, dd[0]), d1 = bc.Slot(1, dd[1]), d2 = bc.Slot(2, dd[2]);
  *out = std::make_unique<GatherExec>(d0, d1, d2, outer, data.dims[static_cast<size_t>(axis)], inner,
                                      Numel(ind.dims), ind.dtype == kI64);
  return CheckResult::Ok();
}

// ---- Split -------------------------------------------------------------------------------------------------------

namespace {
// The lengths of Split's outputs along its axis, per the node's opset: the `split` attribute (opset < 13) or input
// (13+), else equal parts (opset 18: `num_outputs` parts of ceil(dim / num_outputs), the last one smaller; before:
// as many equal parts as outputs, the dim divisible by their count).
bool SplitLengths(const Graph& g, const Node& n, int64_t* axis, std::vector<int64_t>* lengths, std::string* why) {
  if (n.inputs.empty() || n.inputs[0] < 0 || !g.v(n.inputs[0]).has_shape)
    return Why(why, "input has no static shape");
  if (n.opset < 2) return Why(why, "Split-1 is not supported");
  const std::vector<int64_t>& x = g.v(n.inputs[0]).dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0 || !NormAxis(n.Int("axis", 0), rank, axis)) return Why(why, "axis out of range");
  const int64_t dim = x[static_cast<size_t>(*axis)];
  const int64_t outs = static_cast<int64_t>(n.outputs.size());
  if (outs == 0) return Why(why, "no outputs");
  bool present = false;
  if (!IntsArg(g, n, 1, "split", 13, lengths, &present)) return Why(why, "split is not constant");
  if (n.opset >= 13 && n.inputs.size() > 1 && n.inputs[1] >= 0 && g.v(n.inputs[1]).has_shape &&
      g.v(n.inputs[1]).numel() == 0)
    present = false;  // an empty split input counts as absent
  if (present) {
    if (n.opset >= 18 && n.Has("num_outputs")) return Why(why, "both split and num_outputs are given");
    if (static_cast<int64_t>(lengths->size()) != outs) return Why(why, "split has another length than the outputs");
    int64_t total = 0;
    for (int64_t l : *lengths) {
      if (l < 0) return Why(why, "negative split length");
      total += l;
    }
    if (total != dim) return Why(why, "split lengths do not add up to the axis");
    return true;
  }
  lengths->clear();
  if (n.opset >= 18) {
    if (!n.Has("num_outputs")) return Why(why, "neither split nor num_outputs is given");
    if (n.Int("num_outputs", 0) != outs) return Why(why, "num_outputs differs from the number of outputs");
    const int64_t chunk = (dim + outs - 1) / outs;
    for (int64_t i = 0, left = dim; i < outs; ++i, left -= chunk) lengths->push_back(std::clamp<int64_t>(left, 0, chunk));
    if (chunk * (outs - 1) >= dim && outs > 1) return Why(why, "num_outputs leaves an output empty");
    return true;
  }
  if (dim % outs != 0) return Why(why, "the axis is not divisible into equal parts");
  lengths->assign(static_cast<size_t>(outs), dim / outs);
  return true;
}
}  // namespace

bool SupportSplit(const Graph& g, const Node& n, std::string* why) {
  int64_t axis;
  std::vector<int64_t> lengths;
  if (!SplitLengths(g, n, &axis, &lengths, why)) return false;
  const Value& x = g.v(n.inputs[0]);
  if (!MovableType(x.dtype)) return Why(why, "unsupported element type");
  if (x.dims.size() > kMaxRank) return Why(why, "rank above " + std::to_string(kMaxRank));
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (n.outputs[i] < 0) return Why(why, "absent output");
    const Value& y = g.v(n.outputs[i]);
    std::vector<int64_t> dims = x.dims;
    dims[static_cast<size_t>(axis)] = lengths[i];
    if (!y.has_shape || y.dtype != x.dtype || y.dims != dims)
      return Why(why, "output " + std::to_string(i) + " is not " + DimsText(dims) + " of the input's type");
    if (Numel(dims) == 0) return Why(why, "empty output");
  }
  return true;
}

CheckResult LowerSplit(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  int64_t axis;
  std::vector<int64_t> lengths;
  std::string why;
  if (!SplitLengths(ctx.graph(), n, &axis, &lengths, &why)) return ctx.Fail(node, why);
  const Value& x = ctx.graph().v(n.inputs[0]);
  // A blocked source split into sub-blocks: views of its bytes, no copy.
  const Operand* cur = ctx.Peek(n.inputs[0]);
  if (cur && cur->tag != 0 && !ctx.options().portable_layouts) {
    std::vector<Operand> views(n.outputs.size());
    bool all = true;
    int64_t at = 0;
    for (size_t i = 0; i < n.outputs.size() && all; ++i) {
      std::vector<int64_t> dims = x.dims, offsets(x.dims.size(), 0);
      dims[static_cast<size_t>(axis)] = lengths[i];
      offsets[static_cast<size_t>(axis)] = at;
      all = ctx.graph().v(n.outputs[i]).consumers.size() > 0 && !ctx.graph().v(n.outputs[i]).is_graph_output &&
            BlockedSubView(ctx.Use(n.inputs[0]), dims, offsets, &views[i]);
      at += lengths[i];
    }
    if (all) {
      for (size_t i = 0; i < n.outputs.size(); ++i)
        if (!ctx.DefineSubView(n.outputs[i], views[i])) return ctx.Fail(node, "split output is a fused output");
      return CheckResult::Ok();
    }
  }
  // A source in a dense permutation of its axes (nhwc), split along any axis: strided views of its bytes, no copy
  // (issue 24: a YOLOv8-shaped detector's C2f blocks split every nhwc convolution result along channels; it was
  // reordered to plain, copied per part, and each part reordered back to nhwc for the next convolution). A consumer
  // that needs a dense layout reorders its part once.
  std::vector<size_t> order;
  if (cur && cur->buf != Buf::kWeight && x.dtype == kF32 && !ctx.options().portable_layouts &&
      DensePermutation(*cur, &order)) {
    std::vector<int64_t> st;
    bool all = PlainStrides(*cur, &st);
    for (size_t i = 0; i < n.outputs.size() && all; ++i)
      all = ctx.graph().v(n.outputs[i]).consumers.size() > 0 && !ctx.graph().v(n.outputs[i]).is_graph_output;
    if (all) {
      const Operand src = ctx.Use(n.inputs[0]);
      int64_t at = 0;
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        std::vector<int64_t> dims = x.dims;
        dims[static_cast<size_t>(axis)] = lengths[i];
        if (!ctx.DefineSubView(n.outputs[i], StridedView(src, x.dtype, dims, st, at * st[static_cast<size_t>(axis)])))
          return ctx.Fail(node, "split output is a fused output");
        at += lengths[i];
      }
      return CheckResult::Ok();
    }
  }
  const Operand in = ctx.UsePlain(n.inputs[0]);
  const std::vector<int64_t> rs = RowMajorStrides(x.dims);
  int64_t begin = 0;
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    std::vector<int64_t> dims = x.dims;
    dims[static_cast<size_t>(axis)] = lengths[i];
    Step s;
    s.kind = StepKind::kReorder;
    s.name = StepName(ctx.graph(), n) + ":" + std::to_string(i);
    s.ops.push_back(StridedView(in, x.dtype, dims, rs, begin * rs[static_cast<size_t>(axis)]));
    s.ops.push_back(ctx.DefinePlain(n.outputs[i]));
    ctx.Emit(std::move(s));
    begin += lengths[i];
  }
  return CheckResult::Ok();
}

// ---- Pad ---------------------------------------------------------------------------------------------------------

namespace {
enum PadMode : int64_t { kPadConstant = 0, kPadReflect = 1, kPadEdge = 2 };

struct PadSpec {
  int64_t mode = kPadConstant;
  std::vector<int64_t> begin, end;
  float value = 0;
};

// Pad's attributes and inputs per opset (2-10: pads/value attributes; 11+: pads, constant_value inputs; 18+: axes).
bool PadOf(const Graph& g, const Node& n, PadSpec* p, std::string* why) {
  if (n.opset < 2) return Why(why, "Pad-1 is not supported");
  const std::vector<int64_t>& x = g.v(n.inputs[0]).dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  const std::string mode = n.Str("mode", "constant");
  if (mode == "constant") {
    p->mode = kPadConstant;
  } else if (mode == "reflect") {
    p->mode = kPadReflect;
  } else if (mode == "edge") {
    p->mode = kPadEdge;
  } else {
    return Why(why, "mode '" + mode + "' is not supported");
  }
  std::vector<int64_t> pads, axes;
  bool present = false;
  if (!IntsArg(g, n, 1, "pads", 11, &pads, &present) || !present) return Why(why, "pads are not constant");
  if (n.opset < 11) {
    p->value = n.Float("value", 0.f);
  } else if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const Value& cv = g.v(n.inputs[2]);
    if (cv.dtype != kF32 || !g.ConstScalar(n.inputs[2], &p->value)) return Why(why, "constant_value is not a constant float");
  }
  bool has_axes = false;
  if (n.opset >= 18 && !IntsArg(g, n, 3, "", 18, &axes, &has_axes)) return Why(why, "axes are not constant");
  if (!has_axes)
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  if (pads.size() != 2 * axes.size()) return Why(why, "pads has " + std::to_string(pads.size()) + " entries for " +
                                                   std::to_string(axes.size()) + " axes");
  p->begin.assign(x.size(), 0);
  p->end.assign(x.size(), 0);
  std::vector<bool> seen(x.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t ax;
    if (!NormAxis(axes[i], rank, &ax) || seen[static_cast<size_t>(ax)]) return Why(why, "bad or repeated axis");
    seen[static_cast<size_t>(ax)] = true;
    const int64_t b = pads[i], e = pads[i + axes.size()], d = x[static_cast<size_t>(ax)];
    if (b < 0 || e < 0) return Why(why, "negative pads (cropping) are not supported");
    if (b > (int64_t{1} << 32) || e > (int64_t{1} << 32)) return Why(why, "pads too large");
    if (p->mode == kPadReflect && (b >= d || e >= d)) return Why(why, "reflect pads must be smaller than the dim");
    if (p->mode == kPadEdge && d == 0 && (b || e)) return Why(why, "edge-padding an empty axis");
    p->begin[static_cast<size_t>(ax)] = b;
    p->end[static_cast<size_t>(ax)] = e;
  }
  return true;
}

// The source index along one axis for destination index `i` (pads `b` before, source dim `d`); -1 = padding value.
inline int64_t PadSource(int64_t i, int64_t b, int64_t d, int64_t mode) {
  int64_t s = i - b;
  if (s >= 0 && s < d) return s;
  if (mode == kPadConstant) return -1;
  if (mode == kPadEdge) return s < 0 ? 0 : d - 1;
  return s < 0 ? -s : 2 * (d - 1) - s;  // reflect (pads < d, so one reflection lands inside)
}

class PadExec : public StepExec {
 public:
  PadExec(int src, int dst, std::vector<int64_t> sdims, std::vector<int64_t> begin, std::vector<int64_t> ddims,
          int64_t mode, float value)
      : src_(src), dst_(dst), sdims_(std::move(sdims)), begin_(std::move(begin)), ddims_(std::move(ddims)),
        mode_(mode), value_(value) {
    for (size_t k = 0; k + 1 < ddims_.size(); ++k) inner_only_ = inner_only_ && ddims_[k] == sdims_[k] && begin_[k] == 0;
  }

  void Run(RunContext& rc) override {
    const float* src = static_cast<const float*>(rc.ptr(src_));
    float* dst = static_cast<float*>(rc.ptr(dst_));
    const size_t rank = ddims_.size();
    const int64_t dinner = ddims_[rank - 1], sinner = sdims_[rank - 1], b = begin_[rank - 1];
    int64_t rows = 1;
    for (size_t k = 0; k + 1 < rank; ++k) rows *= ddims_[k];
    const std::vector<int64_t> sstrides = RowMajorStrides(sdims_);
    if (inner_only_ && mode_ == kPadConstant) {
      // Only the innermost axis is padded with a constant (a channel pad on nhwc bytes): row r of the destination is
      // row r of the source between two runs of the constant, with no index arithmetic per row.
      const int64_t tail = dinner - b - sinner;
#pragma omp parallel for schedule(static) if (rows * dinner > (1 << 16))
      for (int64_t r = 0; r < rows; ++r) {
        float* out = dst + r * dinner;
        std::fill_n(out, b, value_);
        std::memcpy(out + b, src + r * sinner, static_cast<size_t>(sinner) * sizeof(float));
        std::fill_n(out + b + sinner, tail, value_);
      }
      return;
    }
#pragma omp parallel for schedule(static) if (rows * dinner > (1 << 16))
    for (int64_t r = 0; r < rows; ++r) {
      float* out = dst + r * dinner;
      // The source row for destination row r, or none (a row of the constant).
      int64_t src_off = 0, rem = r;
      bool fill = false;
      for (size_t k = rank - 1; k-- > 0;) {
        const int64_t i = rem % ddims_[k];
        rem /= ddims_[k];
        const int64_t s = PadSource(i, begin_[k], sdims_[k], mode_);
        if (s < 0) {
          fill = true;
          break;
        }
        src_off += s * sstrides[k];
      }
      if (fill) {
        std::fill(out, out + dinner, value_);
        continue;
      }
      const float* in = src + src_off;
      for (int64_t j = 0; j < b; ++j) {
        const int64_t s = PadSource(j, b, sinner, mode_);
        out[j] = s < 0 ? value_ : in[s];
      }
      std::memcpy(out + b, in, static_cast<size_t>(sinner) * sizeof(float));
      for (int64_t j = b + sinner; j < dinner; ++j) {
        const int64_t s = PadSource(j, b, sinner, mode_);
        out[j] = s < 0 ? value_ : in[s];
      }
    }
  }

 private:
  int src_, dst_;
  std::vector<int64_t> sdims_, begin_, ddims_;
  int64_t mode_;
  float value_;
  bool inner_only_ = true;  // no axis but the last is padded
};
}  // namespace

int FoldPadIntoConv(Graph* g, std::vector<bool>* folded) {
  int count = 0;
  folded->resize(g->nodes.size(), false);
  for (size_t pi = 0; pi < g->nodes.size(); ++pi) {
    const Node& pad = g->nodes[pi];
    if ((*folded)[pi] || pad.op != "Pad" || !(pad.domain.empty() || pad.domain == "ai.onnx") || pad.outputs.size() != 1 ||
        pad.inputs.empty() || pad.inputs[0] < 0 || pad.outputs[0] < 0)
      continue;
    const int x = pad.inputs[0], y = pad.outputs[0];
    const Value& xv = g->v(x);
    const Value& yv = g->v(y);
    if (xv.dtype != kF32 || !xv.has_shape || !yv.has_shape || xv.dims.size() < 3 || yv.is_graph_output ||
        yv.consumers.empty())
      continue;
    PadSpec spec;
    if (!PadOf(*g, pad, &spec, nullptr) || spec.mode != kPadConstant || spec.value != 0.f || spec.begin[0] ||
        spec.end[0] || spec.begin[1] || spec.end[1])
      continue;
    // Every reader a Conv taking it as X with explicit pads (auto_pad NOTSET).
    bool all_conv = true;
    for (int c : yv.consumers) {
      const Node& cn = g->nodes[static_cast<size_t>(c)];
      all_conv = all_conv && !(*folded)[static_cast<size_t>(c)] && cn.op == "Conv" &&
                 (cn.domain.empty() || cn.domain == "ai.onnx") && !cn.inputs.empty() && cn.inputs[0] == y &&
                 std::count(cn.inputs.begin(), cn.inputs.end(), y) == 1 && cn.Str("auto_pad", "NOTSET") == "NOTSET";
    }
    if (!all_conv) continue;
    const size_t spatial = xv.dims.size() - 2;
    const std::vector<int> readers = yv.consumers;
    for (int c : readers) {
      Node& cn = g->nodes[static_cast<size_t>(c)];
      std::vector<int64_t> pads = cn.Ints("pads");
      if (pads.size() != 2 * spatial) pads.assign(2 * spatial, 0);
      for (size_t i = 0; i < spatial; ++i) {
        pads[i] += spec.begin[i + 2];
        pads[i + spatial] += spec.end[i + 2];
      }
      Attr a;
      a.type = EPCTX_ATTR_INTS;
      a.ints = pads;
      cn.attrs["pads"] = a;
      cn.inputs[0] = x;
      g->v(x).consumers.push_back(c);
    }
    std::vector<int>& xc = g->v(x).consumers;
    xc.erase(std::find(xc.begin(), xc.end(), static_cast<int>(pi)));
    for (size_t k = 1; k < g->nodes[pi].inputs.size(); ++k) {
      const int in = g->nodes[pi].inputs[k];
      if (in < 0) continue;
      std::vector<int>& ic = g->v(in).consumers;
      auto it = std::find(ic.begin(), ic.end(), static_cast<int>(pi));
      if (it != ic.end()) ic.erase(it);
    }
    g->v(y).consumers.clear();
    (*folded)[pi] = true;
    ++count;
  }
  return count;
}

bool SupportPad(const Graph& g, const Node& n, std::string* why) {
  if (!StaticIo(g, n, 1, why)) return false;
  const Value &x = g.v(n.inputs[0]), &y = g.v(n.outputs[0]);
  if (x.dtype != kF32 || y.dtype != kF32) return Why(why, "only float tensors");
  if (x.dims.empty()) return Why(why, "scalar input");
  if (Numel(x.dims) == 0) return Why(why, "empty input");
  PadSpec p;
  if (!PadOf(g, n, &p, why)) return false;
  std::vector<int64_t> dims = x.dims;
  for (size_t k = 0; k < dims.size(); ++k) dims[k] += p.begin[k] + p.end[k];
  if (dims != y.dims) return Why(why, "computed shape " + DimsText(dims) + " differs from the graph's " + DimsText(y.dims));
  return true;
}

CheckResult LowerPad(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  PadSpec p;
  std::string why;
  if (!PadOf(ctx.graph(), n, &p, &why)) return ctx.Fail(node, why);
  Step s;
  s.kind = StepKind::kPad;
  s.name = StepName(ctx.graph(), n);
  // A source in a dense permutation of its axes (nhwc between convolutions) is padded in that order: the step sees the
  // bytes as a row-major tensor of the permuted dims, with the pads permuted alike, and the result keeps the layout.
  // Before, the source was reordered to plain and the result back for the next convolution (issue 24: a TensorFlow
  // face detector's channel pads, 3 steps where 1 does).
  std::vector<size_t> order;
  const Operand* cur = ctx.Peek(n.inputs[0]);
  const Value& yv = ctx.graph().v(n.outputs[0]);
  if (cur && cur->buf != Buf::kWeight && yv.dtype == kF32 && DensePermutation(*cur, &order)) {
    const size_t r = order.size();
    std::vector<int64_t> ydims(r), begin(r), end(r), ystrides(yv.dims.size());
    for (size_t k = 0; k < r; ++k) {
      ydims[k] = yv.dims[order[k]];
      begin[k] = p.begin[order[k]];
      end[k] = p.end[order[k]];
    }
    const std::vector<int64_t> phys = RowMajorStrides(ydims);
    for (size_t k = 0; k < r; ++k) ystrides[order[k]] = phys[k];
    try {
      const dnnl::memory::desc yd(dnnl::memory::dims(yv.dims.begin(), yv.dims.end()), dnnl::memory::data_type::f32,
                                  dnnl::memory::dims(ystrides.begin(), ystrides.end()));
      Operand src = ctx.Use(n.inputs[0]), dst = ctx.Define(n.outputs[0], yd);
      std::vector<int64_t> xdims(r);
      for (size_t k = 0; k < r; ++k) xdims[k] = src.dims[order[k]];
      src = StridedView(src, kF32, xdims, RowMajorStrides(xdims), 0);
      dst = StridedView(dst, kF32, ydims, phys, 0);
      s.ops = {src, dst};
      s.ints = {p.mode, static_cast<int64_t>(r)};
      s.ints.insert(s.ints.end(), begin.begin(), begin.end());
      s.ints.insert(s.ints.end(), end.begin(), end.end());
      s.floats = {p.value};
      ctx.Emit(std::move(s));
      return CheckResult::Ok();
    } catch (const dnnl::error&) {
      // a layout oneDNN cannot describe: the plain form below
    }
  }
  s.ops.push_back(ctx.UsePlain(n.inputs[0]));
  s.ops.push_back(ctx.DefinePlain(n.outputs[0]));
  s.ints = {p.mode, static_cast<int64_t>(p.begin.size())};
  s.ints.insert(s.ints.end(), p.begin.begin(), p.begin.end());
  s.ints.insert(s.ints.end(), p.end.begin(), p.end.end());
  s.floats = {p.value};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildPad(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  const Step& s = bc.step();
  CheckResult r = bc.ExpectCounts(2, false, SIZE_MAX, 1);
  if (!r.ok) return r;
  if (s.ints.size() < 2) return bc.Fail("needs mode and rank");
  const int64_t mode = s.ints[0], n = s.ints[1];
  if (mode < kPadConstant || mode > kPadEdge) return bc.Fail("unknown pad mode " + std::to_string(mode));
  if (n < 1 || n > static_cast<int64_t>(kMaxRank)) return bc.Fail("rank " + std::to_string(n) + " out of range");
  if (s.ints.size() != static_cast<size_t>(2 + 2 * n)) return bc.Fail("pads do not match the rank");
  const Operand &src = s.ops[0], &dst = s.ops[1];
  if (!src.present() || !dst.present()) return bc.Fail("src and dst are required");
  if (src.dtype != kF32 || dst.dtype != kF32) return bc.Fail("pad operands must be f32");
  if (src.dims.size() != static_cast<size_t>(n) || dst.dims.size() != static_cast<size_t>(n))
    return bc.Fail("operand ranks differ from the pad rank");
  if (!IsPlain(src) || !IsPlain(dst)) return bc.Fail("operands must be plain row-major");
  std::vector<int64_t> begin(s.ints.begin() + 2, s.ints.begin() + 2 + n);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t b = s.ints[static_cast<size_t>(2 + k)], e = s.ints[static_cast<size_t>(2 + n + k)];
    const int64_t sd = src.dims[static_cast<size_t>(k)], dd = dst.dims[static_cast<size_t>(k)];
    if (b < 0 || e < 0 || b > (int64_t{1} << 40) || e > (int64_t{1} << 40)) return bc.Fail("pads out of range");
    if (sd <= 0 || dd < 0) return bc.Fail("empty or negative dims");
    if (dd != sd + b + e) return bc.Fail("dst dim " + std::to_string(k) + " is not src dim plus pads");
    if (mode == kPadReflect && (b >= sd || e >= sd)) return bc.Fail("reflect pads must be smaller than the src dim");
  }
  dnnl::memory::desc d0, d1;
  if (!(r = bc.Desc(0, &d0)).ok || !(r = bc.Desc(1, &d1)).ok) return r;  // both fit their buffers
  *out = std::make_unique<PadExec>(bc.Slot(0, d0), bc.Slot(1, d1), src.dims, std::move(begin), dst.dims, mode,
                                   s.floats[0]);
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
