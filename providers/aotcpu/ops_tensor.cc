// Data movement: Reshape/Squeeze/Unsqueeze/Flatten/Identity (zero-copy views), Transpose and Slice (one oneDNN
// reorder from a strided view), Concat (oneDNN concat) and Gather (a bounds-checked row copy).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ops.h"

namespace epctx {
namespace aotcpu {
namespace {

std::string DimsStr(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

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
  if (op == "Identity") {
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
  const int64_t rank = static_cast<int64_t>(x.size());
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
  if (starts.size() != ends.size()) return Why(why, "starts and ends differ in length");
  if (!has_axes)
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) return Why(why, "axes/steps length mismatch");
  p->dims = x;
  p->begin.assign(x.size(), 0);
  p->step.assign(x.size(), 1);
  std::vector<bool> seen(x.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t ax;
    if (!NormAxis(axes[i], rank, &ax) || seen[static_cast<size_t>(ax)]) return Why(why, "bad or repeated axis");
    seen[static_cast<size_t>(ax)] = true;
    const int64_t dim = x[static_cast<size_t>(ax)], s = steps[i];
    if (s <= 0) return Why(why, "steps <= 0 are not supported");
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    b = std::clamp<int64_t>(b, 0, dim);
    e = std::clamp<int64_t>(e, 0, dim);
    const int64_t count = e > b ? (e - b - 1) / s + 1 : 0;
    p->dims[static_cast<size_t>(ax)] = count;
    p->begin[static_cast<size_t>(ax)] = count ? b : 0;
    p->step[static_cast<size_t>(ax)] = count > 1 ? s : 1;
  }
  const std::vector<int64_t> rs = RowMajorStrides(x);
  p->strides.resize(rs.size());
  p->offset = 0;
  int64_t extent = 1;
  for (size_t i = 0; i < rs.size(); ++i) {
    p->strides[i] = rs[i] * p->step[i];
    p->offset += rs[i] * p->begin[i];
    extent = std::max(extent, p->dims[i] * p->strides[i]);
  }
  // The executor checks a strided operand's bytes as oneDNN sizes it, max(dims[i] * strides[i]) elements from the
  // view's start, which can pass the end of the input for a view starting inside the innermost rows although no
  // element read does. Such slices stay on the CPU EP until that check measures the last element instead.
  if (p->offset + extent > Numel(x)) return Why(why, "the strided view's oneDNN extent passes the end of the input");
  return true;
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

// ---- Reshape, Squeeze, Unsqueeze, Flatten, Identity --------------------------------------------------------------

bool SupportReshape(const Graph& g, const Node& n, std::string* why) {
  if (!StaticIo(g, n, 1, why)) return false;
  const Value &x = g.v(n.inputs[0]), &y = g.v(n.outputs[0]);
  if (!ViewableType(x.dtype) || x.dtype != y.dtype) return Why(why, "unsupported element type");
  std::vector<int64_t> dims;
  if (!ReshapeDims(g, n, &dims, why)) return false;
  if (dims != y.dims) return Why(why, "computed shape " + DimsStr(dims) + " differs from the graph's " + DimsStr(y.dims));
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

// Whether a MatMul would read `value` in place as a strided view: some consumer is a MatMul, or an Identity or
// Transpose whose result is read so (attention's Q/K/V heads, K transposed for Q x K^T, present_key/value outputs).
bool ReadByMatMul(const Graph& g, int value, int depth = 0) {
  if (depth > 4) return false;
  for (int c : g.v(value).consumers) {
    const Node& m = g.nodes[static_cast<size_t>(c)];
    if (!m.domain.empty() && m.domain != "ai.onnx") continue;
    if (m.op == "MatMul") return true;
    if ((m.op == "Identity" || m.op == "Transpose") && !m.outputs.empty() && m.outputs[0] >= 0 &&
        ReadByMatMul(g, m.outputs[0], depth + 1))
      return true;
  }
  return false;
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
  // Read by a MatMul: a deferred view (no copy unless an ordinary consumer or a graph output needs one), composed
  // with the input's own deferred view.
  const Operand* xview = ctx.PeekView(n.inputs[0]);
  if (x.dtype == 1 && (xview || ReadByMatMul(ctx.graph(), n.outputs[0]))) {
    const Operand in = xview ? *xview : ctx.UsePlain(n.inputs[0]);
    const std::vector<int64_t> xs = xview ? xview->strides : RowMajorStrides(x.dims);
    if (xs.size() == perm.size()) {
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
  if (p.dims != y.dims) return Why(why, "computed shape " + DimsStr(p.dims) + " differs from the graph's " + DimsStr(y.dims));
  if (Numel(p.dims) == 0) return Why(why, "empty result");
  // oneDNN describes a strided view only when its strides, sorted, do not interleave: a step on an inner axis
  // ([5, 3] sliced with step 2 on axis 1: dims [5, 2], strides [3, 2]) is refused, and the compile failed (found by
  // tests/difftest). Such slices stay on the CPU EP.
  Operand view;
  view.buf = Buf::kArena;
  view.dtype = x.dtype;
  view.dims = p.dims;
  view.strides = p.strides;
  dnnl::memory::desc d;
  if (!OperandDesc(view, &d).ok) return Why(why, "oneDNN cannot describe the strided view of this step");
  return true;
}

CheckResult LowerSlice(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  const Value& x = ctx.graph().v(n.inputs[0]);
  SliceParams p;
  std::string why;
  if (!SliceOf(ctx.graph(), n, &p, &why)) return ctx.Fail(node, why);
  const Operand in = ctx.UsePlain(n.inputs[0]);
  Step s;
  s.kind = StepKind::kReorder;
  s.name = StepName(ctx.graph(), n);
  s.ops.push_back(StridedView(in, x.dtype, p.dims, p.strides, p.offset));
  s.ops.push_back(ctx.DefinePlain(n.outputs[0]));
  ctx.Emit(std::move(s));
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
  Step s;
  s.kind = StepKind::kConcat;
  s.name = StepName(ctx.graph(), n);
  for (int vi : srcs) s.ops.push_back(tag ? ctx.Use(vi) : ctx.UsePlain(vi));
  if (tag) {
    try {
      s.ops.push_back(ctx.Define(n.outputs[0], dnnl::memory::desc(dnnl::memory::dims(y.dims.begin(), y.dims.end()),
                                                                  DnnlType(y.dtype),
                                                                  static_cast<dnnl::memory::format_tag>(tag))));
    } catch (const dnnl::error& e) {
      return ctx.Fail(node, std::string("concat layout: ") + e.what());
    }
  } else {
    s.ops.push_back(ctx.DefinePlain(n.outputs[0]));
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
    return bc.Fail("dst dims " + DimsStr(dst.dims) + " are not data dims " + DimsStr(data.dims) + " with axis " +
                   std::to_string(axis) + " replaced by indices dims " + DimsStr(ind.dims));
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

}  // namespace aotcpu
}  // namespace epctx
