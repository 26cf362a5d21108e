// The integer, bool and cast elementwise ops around a transformer's float compute (issue 27 item 6): int64
// arithmetic and comparisons, And/Or/Xor/Not, Where, Neg/Abs of integers, Sin/Cos/Ceil/Floor, Cast between float,
// int64, int32, bool and 8-bit integers, Shape of a static value; Trilu (step kTrilu: a decoder's causal mask). One
// step kind, kTypedEltwise (program version 9), runs runtime/generic_ops.h's RunElementwise, the same loops the
// shape-generic kernels run, so a static, a per-shape and a shape-generic partition compute the same bits. The float
// forms of the shared op types keep their oneDNN lowering (math_eltwise.cc, tensor_view.cc): the dispatchers below
// pick by element type.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "providers/aotcpu/lower/math_common.h"
#include "providers/aotcpu/lower/tensor_common.h"
#include "providers/aotcpu/runtime/generic_ops.h"

namespace epctx {
namespace aotcpu {

namespace {

bool AllFloat(const Graph& g, const Node& n) {
  for (const std::vector<int>* list : {&n.inputs, &n.outputs})
    for (int v : *list)
      if (v >= 0 && g.v(v).dtype != kF32) return false;
  return true;
}

bool SupportTyped(const Graph& g, const Node& n, std::string* why) {
  ElemOp op;
  if (!ElemOpOf(n.op, &op)) return Reject(why, "not an elementwise op");
  size_t arity = 0;
  ValidElemOp(static_cast<int64_t>(op), &arity);
  if (n.inputs.size() != arity || n.outputs.size() != 1 || n.outputs[0] < 0)
    return Reject(why, "needs " + std::to_string(arity) + " input(s) and 1 output");
  std::vector<uint32_t> types;
  Dims out;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const int v = n.inputs[k];
    if (v < 0) return Reject(why, "an input is missing");
    const Value& x = g.v(v);
    if (!x.has_shape) return Reject(why, "the shape of input '" + x.name + "' is not static");
    types.push_back(x.dtype);
    if (k == 0) {
      out = x.dims;
    } else if (!BroadcastShapes(out, x.dims, &out)) {
      return Reject(why, "input shapes do not broadcast");
    }
  }
  const Value& y = g.v(n.outputs[0]);
  if (!y.has_shape) return Reject(why, "the output's shape is not static");
  const std::string type_why = CheckElementwise(op, types, y.dtype);
  if (!type_why.empty()) return Reject(why, type_why);
  if (op == ElemOp::kCast && n.Int("to", 0) != static_cast<int64_t>(y.dtype))
    return Reject(why, "Cast's 'to' differs from the output's element type");
  if (arity == 1 ? g.v(n.inputs[0]).dims != y.dims : out != y.dims)
    return Reject(why, "the output shape " + DimsText(y.dims) + " is not the inputs' " + DimsText(out));
  // Opset 1-6 arithmetic broadcast with an axis attribute; from 7 (And/Or/Xor/comparisons too) numpy rules.
  if (arity == 2 && n.opset < 7 && g.v(n.inputs[0]).dims != g.v(n.inputs[1]).dims)
    return Reject(why, "opset " + std::to_string(n.opset) + " broadcasting (axis attribute) not supported");
  if (y.dims.size() > kMaxRank) return Reject(why, "rank above " + std::to_string(kMaxRank));
  if (Numel(y.dims) == 0) return Reject(why, "empty tensor");
  return true;
}

CheckResult LowerTyped(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  ElemOp op;
  if (!ElemOpOf(n.op, &op)) return ctx.Fail(node, "not an elementwise op");
  const Dims yd = AtLeast1D(g.v(n.outputs[0]).dims);
  Step s;
  s.kind = StepKind::kTypedEltwise;
  s.name = StepName(g, n);
  s.ints = {static_cast<int64_t>(op)};
  for (int v : n.inputs) {
    Operand o = ctx.UsePlain(v);
    if (!IsRowMajor(o)) return ctx.Fail(node, "input '" + g.v(v).name + "' is not row-major");
    s.ops.push_back(Reshaped(o, PadLeft(AtLeast1D(g.v(v).dims), yd.size())));
  }
  s.ops.push_back(DefineAs(ctx, n.outputs[0], yd));
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

class TypedEltwiseExec : public StepExec {
 public:
  TypedEltwiseExec(ElemOp op, std::vector<int> slots, std::vector<GTensor> shapes, std::string name)
      : op_(op), slots_(std::move(slots)), shapes_(std::move(shapes)), name_(std::move(name)) {}
  void Run(RunContext& rc) override {
    std::vector<GTensor> in(shapes_.begin(), shapes_.end() - 1);
    GTensor out = shapes_.back();
    for (size_t k = 0; k < in.size(); ++k) in[k].data = rc.ptr(slots_[k]);
    out.data = rc.ptr(slots_.back());
    const std::string why = RunElementwise(op_, in, out, 1);
    if (!why.empty()) rc.Fail("step '" + name_ + "': " + why);
  }

 private:
  ElemOp op_;
  std::vector<int> slots_;
  std::vector<GTensor> shapes_;  // dims and dtypes; data set per run
  std::string name_;
};

}  // namespace

// ---- dispatchers: the float forms keep their oneDNN lowering ------------------------------------------------------

bool SupportArith(const Graph& g, const Node& n, std::string* why) {
  return AllFloat(g, n) ? SupportBinary(g, n, why) : SupportTyped(g, n, why);
}
CheckResult LowerArith(LowerContext& ctx, int node) {
  return AllFloat(ctx.graph(), ctx.node(node)) ? LowerBinary(ctx, node) : LowerTyped(ctx, node);
}

bool SupportCompareAny(const Graph& g, const Node& n, std::string* why) {
  if (!n.inputs.empty() && n.inputs[0] >= 0 && g.v(n.inputs[0]).dtype == kF32) return SupportCompare(g, n, why);
  return SupportTyped(g, n, why);
}
CheckResult LowerCompareAny(LowerContext& ctx, int node) {
  const Node& n = ctx.node(node);
  return ctx.graph().v(n.inputs[0]).dtype == kF32 ? LowerCompare(ctx, node) : LowerTyped(ctx, node);
}

bool SupportUnaryAny(const Graph& g, const Node& n, std::string* why) {
  return AllFloat(g, n) ? SupportUnary(g, n, why) : SupportTyped(g, n, why);
}
CheckResult LowerUnaryAny(LowerContext& ctx, int node) {
  return AllFloat(ctx.graph(), ctx.node(node)) ? LowerUnary(ctx, node) : LowerTyped(ctx, node);
}

// Cast: same-type casts are views, 8-bit and int32 to float a oneDNN reorder (tensor_view.cc); the rest ours.
bool SupportCast(const Graph& g, const Node& n, std::string* why) {
  std::string view_why;
  if (SupportReshape(g, n, &view_why)) return true;
  return SupportTyped(g, n, why);
}
CheckResult LowerCast(LowerContext& ctx, int node) {
  std::string why;
  return SupportReshape(ctx.graph(), ctx.node(node), &why) ? LowerReshape(ctx, node) : LowerTyped(ctx, node);
}

bool SupportElementwise(const Graph& g, const Node& n, std::string* why) { return SupportTyped(g, n, why); }
CheckResult LowerElementwise(LowerContext& ctx, int node) { return LowerTyped(ctx, node); }

// Shape of a value with a static shape: its dims (start/end from opset 15) as an int64 weight copied to the output.
// Constant folding computes it first in every graph this EP compiles; this is the form for a graph built without it.
bool SupportShape(const Graph& g, const Node& n, std::string* why) {
  if (n.inputs.size() != 1 || n.inputs[0] < 0 || n.outputs.size() != 1 || n.outputs[0] < 0)
    return Reject(why, "needs one input and one output");
  const Value& x = g.v(n.inputs[0]);
  if (!x.has_shape) return Reject(why, "the shape of input '" + x.name + "' is not known before run time");
  if (g.v(n.outputs[0]).dtype != kI64) return Reject(why, "the output is not int64");
  if (x.dims.empty()) return Reject(why, "Shape of a scalar is empty");
  return true;
}
CheckResult LowerShape(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  const Dims& xd = g.v(n.inputs[0]).dims;
  const int64_t r = static_cast<int64_t>(xd.size());
  int64_t start = n.Int("start", 0), end = n.Int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::max<int64_t>(0, std::min(start, r));
  end = std::max<int64_t>(start, std::min(end, r));
  const Dims dims(xd.begin() + start, xd.begin() + end);
  if (dims.empty() || g.v(n.outputs[0]).dims != Dims{static_cast<int64_t>(dims.size())})
    return ctx.Fail(node, "the output's shape is not the selected dims' count (or is empty)");
  Operand w;
  CheckResult cr = ctx.AddWeight(n.name + ":dims",
                                 std::string(reinterpret_cast<const char*>(dims.data()), dims.size() * sizeof(int64_t)),
                                 PlainDesc({static_cast<int64_t>(dims.size()), 2}, kF32), &w);  // int64 as f32 pairs
  if (!cr.ok) return cr;
  w.dtype = kI64;
  w.dims = {static_cast<int64_t>(dims.size())};
  w.tag = 0;
  w.strides = {1};
  Step s;
  s.kind = StepKind::kStridedCopy;
  s.name = StepName(g, n);
  s.ops = {w, ctx.DefinePlain(n.outputs[0])};
  s.ints = {0, 1};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

// ---- Trilu ----------------------------------------------------------------------------------------------------------

namespace {
// k of a Trilu: its constant second input, 0 when absent; false when it is computed at run time or not one int64.
bool TriluK(const Graph& g, const Node& n, int64_t* k) {
  *k = 0;
  if (n.inputs.size() < 2 || n.inputs[1] < 0) return true;
  std::vector<int64_t> ks;
  if (g.v(n.inputs[1]).dtype != kI64 || !g.ConstInts(n.inputs[1], &ks) || ks.size() != 1) return false;
  *k = ks[0];
  return *k >= -(int64_t{1} << 40) && *k <= (int64_t{1} << 40);
}

class TriluExec : public StepExec {
 public:
  TriluExec(int src, int dst, GTensor shape, bool upper, int64_t k, std::string name)
      : src_(src), dst_(dst), shape_(std::move(shape)), upper_(upper), k_(k), name_(std::move(name)) {}
  void Run(RunContext& rc) override {
    GTensor in = shape_, out = shape_;
    in.data = rc.ptr(src_);
    out.data = rc.ptr(dst_);
    const std::string why = RunTrilu(in, out, upper_, k_);
    if (!why.empty()) rc.Fail("step '" + name_ + "': " + why);
  }

 private:
  int src_, dst_;
  GTensor shape_;
  bool upper_;
  int64_t k_;
  std::string name_;
};
}  // namespace

bool SupportTrilu(const Graph& g, const Node& n, std::string* why) {
  if (n.inputs.empty() || n.inputs.size() > 2 || n.inputs[0] < 0 || n.outputs.size() != 1 || n.outputs[0] < 0)
    return Reject(why, "needs an input, an optional k and one output");
  const Value &x = g.v(n.inputs[0]), &y = g.v(n.outputs[0]);
  if (!x.has_shape || !y.has_shape) return Reject(why, "shapes must be static");
  if (x.dtype != y.dtype || GenericElementSize(x.dtype) == 0) return Reject(why, "unsupported element type");
  if (x.dims != y.dims) return Reject(why, "output shape differs from the input's");
  if (x.dims.size() < 2 || x.dims.size() > kMaxRank) return Reject(why, "rank below 2 or above " + std::to_string(kMaxRank));
  if (Numel(x.dims) == 0) return Reject(why, "empty tensor");
  int64_t k;
  if (!TriluK(g, n, &k)) return Reject(why, "k is not a constant int64 scalar (within +-2^40)");
  return true;
}

CheckResult LowerTrilu(LowerContext& ctx, int node) {
  const Graph& g = ctx.graph();
  const Node& n = ctx.node(node);
  int64_t k;
  if (!TriluK(g, n, &k)) return ctx.Fail(node, "k is not a constant int64 scalar");
  Operand src = ctx.UsePlain(n.inputs[0]);
  if (!IsRowMajor(src)) return ctx.Fail(node, "input is not row-major");
  Step s;
  s.kind = StepKind::kTrilu;
  s.name = StepName(g, n);
  s.ints = {n.Int("upper", 1) != 0 ? 1 : 0, k};
  s.ops = {src, ctx.DefinePlain(n.outputs[0])};
  ctx.Emit(std::move(s));
  return CheckResult::Ok();
}

CheckResult BuildTrilu(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(2, false, 2, 0);
  if (!r.ok) return r;
  const Step& s = bc.step();
  if (!s.post_ops.empty()) return bc.Fail("takes no post-ops");
  const Operand &src = s.ops[0], &dst = s.ops[1];
  if (!src.present() || !dst.present() || !IsPlain(src) || !IsPlain(dst)) return bc.Fail("operands must be dense row-major");
  if (src.dtype != dst.dtype || GenericElementSize(src.dtype) == 0) return bc.Fail("unsupported element types");
  if (src.dims != dst.dims || src.dims.size() < 2) return bc.Fail("src and dst must have equal dims of rank >= 2");
  for (int64_t d : src.dims)
    if (d <= 0) return bc.Fail("empty or negative dims");
  if ((s.ints[0] != 0 && s.ints[0] != 1) || s.ints[1] < -(int64_t{1} << 40) || s.ints[1] > (int64_t{1} << 40))
    return bc.Fail("upper must be 0 or 1 and k within +-2^40");
  dnnl::memory::desc d0, d1;
  if (!(r = bc.Desc(0, &d0)).ok || !(r = bc.Desc(1, &d1)).ok) return r;
  GTensor shape;
  shape.dims = src.dims;
  shape.dtype = src.dtype;
  *out = std::make_unique<TriluExec>(bc.Slot(0, d0), bc.Slot(1, d1), shape, s.ints[0] == 1, s.ints[1], s.name);
  return CheckResult::Ok();
}

// ---- the step -------------------------------------------------------------------------------------------------------

CheckResult BuildTypedEltwise(BuildContext& bc, std::unique_ptr<StepExec>* out) {
  CheckResult r = bc.ExpectCounts(2, true, 1, 0);
  if (!r.ok) return r;
  const Step& s = bc.step();
  size_t arity = 0;
  if (!ValidElemOp(s.ints[0], &arity)) return bc.Fail("unknown elementwise op " + std::to_string(s.ints[0]));
  if (s.ops.size() != arity + 1) return bc.Fail("expects " + std::to_string(arity + 1) + " operands");
  if (!s.post_ops.empty()) return bc.Fail("takes no post-ops");
  const Operand& dst = s.ops.back();
  std::vector<uint32_t> types;
  for (const Operand& o : s.ops) {
    if (!o.present()) return bc.Fail("an operand is missing");
    if (!IsPlain(o)) return bc.Fail("operands must be dense row-major");
    if (o.dims.size() != dst.dims.size() || o.dims.empty()) return bc.Fail("operands must have the dst's rank (>= 1)");
  }
  for (size_t k = 0; k < arity; ++k) {
    types.push_back(s.ops[k].dtype);
    for (size_t i = 0; i < dst.dims.size(); ++i) {
      const int64_t d = s.ops[k].dims[i];
      if (arity == 1 ? d != dst.dims[i] : (d != dst.dims[i] && d != 1))
        return bc.Fail("operand " + std::to_string(k) + " dims " + DimsText(s.ops[k].dims) + " do not broadcast to " +
                       DimsText(dst.dims));
    }
  }
  const ElemOp op = static_cast<ElemOp>(s.ints[0]);
  const std::string why = CheckElementwise(op, types, dst.dtype);
  if (!why.empty()) return bc.Fail(why);
  for (int64_t d : dst.dims)
    if (d <= 0) return bc.Fail("empty or negative dims");
  std::vector<int> slots;
  std::vector<GTensor> shapes;
  for (size_t k = 0; k < s.ops.size(); ++k) {
    dnnl::memory::desc d;
    if (!(r = bc.Desc(k, &d)).ok) return r;  // the operand fits its buffer
    slots.push_back(bc.Slot(k, d));
    GTensor t;
    t.dims = s.ops[k].dims;
    t.dtype = s.ops[k].dtype;
    shapes.push_back(t);
  }
  *out = std::make_unique<TypedEltwiseExec>(op, std::move(slots), std::move(shapes), s.name);
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
