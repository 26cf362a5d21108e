// symbolic.{h,cc}: the DimExpr table, the per-op symbolic shape rules, Bind; a decoder-shaped graph bound at several
// (seq, past) and compiled; a Conv/Pool chain with symbolic H/W; the real decoder model (tests/models/make_decoder.py)
// loaded through the runtime's graph view, bound, and compared with the same model loaded with the dims pinned.
#include "providers/aotcpu/ir/symbolic.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "model/model.h"
#include "plugin/ep_objects.h"
#include "providers/aotcpu/capability/capability.h"
#include "providers/aotcpu/ir/test_graph.h"
#include "providers/aotcpu/lower/ops.h"
#include "providers/aotcpu/plan/compiler.h"

namespace epctx {
namespace aotcpu {
namespace {

using namespace test_graph;  // GraphBuilder, Dims, IntA, IntsA, StrA, FloatA
using Binding = std::map<std::string, int64_t>;

// A node output whose shape the runtime does not know.
int Unknown(GraphBuilder& b, const std::string& name, uint32_t dtype = kF32) {
  const int i = b.Out(name, {});
  b.g.v(i).has_shape = false;
  b.g.v(i).dtype = dtype;
  return i;
}
std::vector<int64_t> Eval(const SymbolicShapes& s, const Graph& g, const std::string& name, const Binding& bind) {
  const int vi = g.Find(name);
  EXPECT_GE(vi, 0) << name;
  if (vi < 0) return {-100};
  const SymValue& v = s.values[static_cast<size_t>(vi)];
  EXPECT_TRUE(v.known) << name;
  if (!v.known) return {-100};
  std::vector<int64_t> out;
  for (DimId d : v.dims) {
    int64_t x = -100;
    std::string why;
    EXPECT_TRUE(s.table.EvalDim(d, bind, &x, &why)) << name << ": " << why;
    out.push_back(x);
  }
  return out;
}
std::vector<int64_t> Elems(const SymbolicShapes& s, const Graph& g, const std::string& name, const Binding& bind) {
  const SymValue& v = s.values[static_cast<size_t>(g.Find(name))];
  EXPECT_TRUE(v.has_elems) << name;
  std::vector<int64_t> out;
  for (DimId d : v.elems) {
    int64_t x = -100;
    std::string why;
    EXPECT_TRUE(s.table.Eval(d, bind, &x, &why)) << name << ": " << why;
    out.push_back(x);
  }
  return out;
}
std::vector<int64_t> ConstData(const Graph& g, const std::string& name) {
  std::vector<int64_t> v;
  EXPECT_TRUE(g.ConstInts(g.Find(name), &v)) << name;
  return v;
}
const std::string& Why(const SymbolicShapes& s, const Graph& g, const std::string& out) {
  return s.why[static_cast<size_t>(g.v(g.Find(out)).producer)];
}

// ONNX Slice output length (the spec's algorithm), the reference for the symbolic rule.
int64_t SliceLen(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::min(std::max<int64_t>(start, 0), dim);
    end = std::min(std::max<int64_t>(end, 0), dim);
    int64_t n = 0;
    for (int64_t i = start; i < end; i += step) ++n;
    return n;
  }
  start = std::min(std::max<int64_t>(start, 0), dim - 1);
  end = std::min(std::max<int64_t>(end, -1), dim - 1);
  int64_t n = 0;
  for (int64_t i = start; i > end; i += step) ++n;
  return n;
}

// ---- DimExpr ------------------------------------------------------------------------------------------------------

TEST(Symbolic, DimExprAlgebra) {
  DimTable t;
  const DimId x = t.Sym("x"), y = t.Sym("y");
  EXPECT_EQ(t.Sym("x"), x);
  EXPECT_EQ(t.Add(x, y), t.Add(y, x));
  EXPECT_EQ(t.Mul(x, y), t.Mul(y, x));
  EXPECT_EQ(t.Min(x, y), t.Min(y, x));
  EXPECT_EQ(t.Max(x, y), t.Max(y, x));
  EXPECT_NE(t.Sub(x, y), t.Sub(y, x));
  EXPECT_EQ(t.Add(x, t.Const(0)), x);
  EXPECT_EQ(t.Mul(x, t.Const(1)), x);
  EXPECT_EQ(t.Mul(t.Const(1), x), x);
  EXPECT_EQ(t.Add(t.Const(2), t.Const(3)), t.Const(5));
  EXPECT_EQ(t.Add(t.Add(x, t.Const(1)), t.Const(2)), t.Add(x, t.Const(3)));
  EXPECT_EQ(t.Add(t.Add(x, t.Const(1)), y), t.Add(t.Add(y, x), t.Const(1)));
  EXPECT_EQ(t.Sub(t.Add(x, t.Const(1)), x), t.Const(1));
  EXPECT_EQ(t.Sub(t.Add(x, y), y), x);
  EXPECT_EQ(t.Sub(x, x), t.Const(0));
  EXPECT_EQ(t.Sub(t.Add(x, t.Const(5)), t.Add(x, t.Const(2))), t.Const(3));
  EXPECT_EQ(t.FloorDiv(t.Mul(x, t.Const(128)), t.Const(32)), t.Mul(x, t.Const(4)));
  EXPECT_EQ(t.FloorDiv(x, t.Const(1)), x);
  EXPECT_EQ(t.CeilDiv(t.Const(7), t.Const(2)), t.Const(4));
  EXPECT_EQ(t.FloorDiv(t.Const(-7), t.Const(2)), t.Const(-4));
  EXPECT_EQ(t.CeilDiv(t.Const(-7), t.Const(2)), t.Const(-3));
  EXPECT_EQ(t.Min(x, x), x);
  EXPECT_EQ(t.Min(t.Const(3), t.Const(9)), t.Const(3));
  EXPECT_EQ(t.Max(x, t.Const(0)), x);                    // x is a dim: >= 0
  EXPECT_NE(t.Max(t.Sub(x, y), t.Const(0)), t.Sub(x, y));  // x - y may be negative
  EXPECT_EQ(t.Bcast(x, t.Const(1)), x);
  EXPECT_EQ(t.Bcast(t.Const(1), x), x);
  EXPECT_EQ(t.Bcast(x, x), x);
  EXPECT_TRUE(t.NonNegative(t.Mul(t.Add(x, t.Const(3)), y)));
  EXPECT_FALSE(t.NonNegative(t.Add(x, t.Const(-1))));
  EXPECT_EQ(t.Str(t.Add(x, t.Const(1))), "x + 1");
  EXPECT_EQ(t.Str(t.Max(t.Sub(x, y), t.Const(0))), "max((x - y), 0)");
  int64_t c = 0;
  EXPECT_TRUE(t.IsConst(t.Mul(t.Const(6), t.Const(7)), &c));
  EXPECT_EQ(c, 42);
  EXPECT_FALSE(t.IsConst(x));
  // Constant overflow is not folded: evaluating it fails.
  const DimId big = t.Mul(t.Const(int64_t{1} << 40), t.Const(int64_t{1} << 40));
  EXPECT_FALSE(t.IsConst(big));
  std::string why;
  int64_t v;
  EXPECT_FALSE(t.Eval(big, {}, &v, &why));
  EXPECT_NE(why.find("overflow"), std::string::npos) << why;
}

// Issue 27: dims are at least 1 and shape_ranges bound the symbols (DimTable::Bounds), and a product divided by the
// product of some of its factors is the rest (DimTable::ExactDiv).
TEST(Symbolic, BoundsAndExactDivision) {
  DimTable t;
  const DimId n = t.Sym("n"), w = t.Sym("w");
  int64_t lo = 0, hi = 0;
  t.Bounds(n, &lo, &hi);
  EXPECT_EQ(lo, 1);  // a dim is at least 1
  // (w - 1) // 2 + 1: 0 at w = 0, at least 1 for w >= 1.
  const DimId half = t.Add(t.FloorDiv(t.Add(w, t.Const(-1)), t.Const(2)), t.Const(1));
  EXPECT_FALSE(t.NonNegative(half));
  t.Bounds(half, &lo, &hi);
  EXPECT_EQ(lo, 1);
  // ((w - 1) // 4 - 1) // 2 + 1 is 0 for w < 13: not at least 1 unless it is a tensor's dim.
  const DimId deep = t.Add(t.FloorDiv(t.Add(t.FloorDiv(t.Add(w, t.Const(-1)), t.Const(4)), t.Const(-1)), t.Const(2)),
                           t.Const(1));
  t.Bounds(deep, &lo, &hi);
  EXPECT_EQ(lo, 0);
  t.MarkDim(deep);
  t.Bounds(deep, &lo, &hi);
  EXPECT_EQ(lo, 1);
  // shape_ranges: w in 32..2048.
  const DimId w31 = t.Sub(w, t.Const(31));
  t.Bounds(w31, &lo, &hi);
  EXPECT_LT(lo, 1);
  t.SetRange("w", 32, 2048);
  t.Bounds(w31, &lo, &hi);
  EXPECT_EQ(lo, 1);
  EXPECT_EQ(hi, 2017);
  t.Bounds(t.Sub(n, w), &lo, &hi);
  EXPECT_LT(lo, 0);
  // (n * deep * 120) // (n * 120) is deep, whatever deep is.
  const DimId num = t.Mul(t.Mul(n, deep), t.Const(120)), den = t.Mul(n, t.Const(120));
  EXPECT_EQ(t.ExactDiv(num, den), deep);
  EXPECT_EQ(t.ExactDiv(num, t.Mul(n, t.Const(40))), t.Mul(deep, t.Const(3)));
  EXPECT_EQ(t.ExactDiv(num, t.Mul(w, t.Const(120))), kNoDim);  // w is no factor of num
  EXPECT_EQ(t.ExactDiv(num, t.Mul(n, t.Const(7))), kNoDim);    // 7 does not divide 120
  EXPECT_EQ(t.ExactDiv(t.Mul(n, n), n), n);
  EXPECT_EQ(t.ExactDiv(n, t.Mul(n, n)), kNoDim);
}

// PP-OCRv4's recognizer: a Reshape target computed at run time as (n * w' * C) / (n * C) from a Shape, where w' (a
// strided op's output width, (w - 1) // 2 + 1) is not provably >= 0 as an expression but is a dim. The old rules
// refused the Div ("operands of unknown sign") and the Reshape ("may be -1 or 0").
TEST(Symbolic, ReshapeTargetComputedFromShapeArithmetic) {
  GraphBuilder b;
  b.SymInput("x", {-1, 8, 1, -1}, {"n", "", "", "w"});
  b.FreeOut("p", {-1, 8, 1, -1});
  b.I64("i0", {}, {0});
  b.I64("i3", {}, {3});
  b.I64("c8", {}, {8});
  b.I64("ax0", {0});
  b.I64("eight", {8});
  for (const char* v : {"s", "n0", "w0", "nw", "num", "den", "q", "n1", "q1", "target"}) Unknown(b, v, kI64);
  Unknown(b, "r");
  Node& pool = b.N("MaxPool", {"x"}, {"p"});
  pool.attrs["kernel_shape"] = IntsA({1, 1});
  pool.attrs["strides"] = IntsA({1, 2});
  b.N("Shape", {"p"}, {"s"});
  b.N("Gather", {"s", "i0"}, {"n0"});
  b.N("Gather", {"s", "i3"}, {"w0"});
  b.N("Mul", {"n0", "w0"}, {"nw"});
  b.N("Mul", {"nw", "c8"}, {"num"});
  b.N("Mul", {"n0", "c8"}, {"den"});
  b.N("Div", {"num", "den"}, {"q"});
  b.N("Unsqueeze", {"n0", "ax0"}, {"n1"});
  b.N("Unsqueeze", {"q", "ax0"}, {"q1"});
  b.N("Concat", {"n1", "q1", "eight"}, {"target"}).attrs["axis"] = IntA(0);
  b.N("Reshape", {"p", "target"}, {"r"});
  SymbolicShapes s;
  ASSERT_TRUE(InferSymbolic(b.g, &s)) << Why(s, b.g, "q") << " / " << Why(s, b.g, "r");
  for (int64_t w : {1, 2, 7, 320}) {
    const Binding bind{{"n", 2}, {"w", w}};
    EXPECT_EQ(Elems(s, b.g, "q", bind), Dims{(w - 1) / 2 + 1});
    EXPECT_EQ(Eval(s, b.g, "r", bind), (Dims{2, (w - 1) / 2 + 1, 8}));
    Graph out;
    std::string why;
    EXPECT_TRUE(Bind(b.g, s, bind, &out, &why)) << why;
  }
  // The facts were assumed (dims >= 1), so they are checked: an empty input is refused, not reshaped wrongly.
  Graph out;
  std::string why;
  EXPECT_FALSE(Bind(b.g, s, {{"n", 0}, {"w", 5}}, &out, &why));
  EXPECT_NE(why.find("at least 1"), std::string::npos) << why;
}

// shape_ranges bound the facts: w - 31 is a valid Reshape target only when w >= 32.
TEST(Symbolic, ShapeRangesProveAReshapeTarget) {
  GraphBuilder b;
  b.SymInput("x", {-1}, {"w"});
  b.I64("i0", {1}, {0});
  b.I64("c31", {1}, {31});
  b.I64("minus1", {1}, {-1});
  for (const char* v : {"s", "w1", "k", "target"}) Unknown(b, v, kI64);
  Unknown(b, "y");
  b.N("Shape", {"x"}, {"s"});
  b.N("Gather", {"s", "i0"}, {"w1"});
  b.N("Sub", {"w1", "c31"}, {"k"});
  b.N("Concat", {"k", "minus1"}, {"target"}).attrs["axis"] = IntA(0);
  b.N("Reshape", {"x", "target"}, {"y"});
  SymbolicShapes s;
  EXPECT_FALSE(InferSymbolic(b.g, &s));
  EXPECT_NE(Why(s, b.g, "y").find("may be -1 or 0"), std::string::npos) << Why(s, b.g, "y");
  ASSERT_TRUE(InferSymbolic(b.g, &s, {{"w", {32, 2048}}})) << Why(s, b.g, "y");
  EXPECT_EQ(Eval(s, b.g, "y", {{"w", 64}}), (Dims{33, 64 / 33}));
  Graph out;
  std::string why;
  EXPECT_FALSE(Bind(b.g, s, {{"w", 31}}, &out, &why));  // outside the range: the check refuses it
  EXPECT_NE(why.find("Reshape target dim 0"), std::string::npos) << why;
}

// An exporter's Expand shape: Where(Equal(shape, -1), ones, shape) on shape values keeps the elements.
TEST(Symbolic, EqualAndWhereOnShapeValues) {
  GraphBuilder b;
  b.SymInput("x", {1, -1}, {"", "seq"});
  b.F32("y", {1, 1}, {2.0f});
  b.I64("neg", {2}, {-1, -1});
  b.I64("ones", {2}, {1, 1});
  for (const char* v : {"s", "target"}) Unknown(b, v, kI64);
  Unknown(b, "eq", kBool);
  Unknown(b, "e");
  b.N("Shape", {"x"}, {"s"});
  b.N("Equal", {"s", "neg"}, {"eq"});
  b.N("Where", {"eq", "ones", "s"}, {"target"});
  b.N("Expand", {"y", "target"}, {"e"});
  SymbolicShapes s;
  ASSERT_TRUE(InferSymbolic(b.g, &s)) << Why(s, b.g, "e");
  EXPECT_EQ(Elems(s, b.g, "eq", {{"seq", 5}}), (Dims{0, 0}));
  EXPECT_EQ(Elems(s, b.g, "target", {{"seq", 5}}), (Dims{1, 5}));
  EXPECT_EQ(Eval(s, b.g, "e", {{"seq", 5}}), (Dims{1, 5}));
  Graph out;
  std::string why;
  ASSERT_TRUE(Bind(b.g, s, {{"seq", 3}}, &out, &why)) << why;
  const Value& eq = out.v(out.Find("eq"));
  ASSERT_TRUE(eq.is_const());
  EXPECT_EQ(eq.dtype, kBool);
  EXPECT_EQ(std::string(static_cast<const char*>(eq.data), 2), std::string(2, '\0'));
}

// Quantized transformer ops keep shapes: DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, Trilu.
TEST(Symbolic, QuantizedOpsAndTrilu) {
  GraphBuilder b;
  b.SymInput("x", {1, -1, 16}, {"", "seq", ""});
  b.SymInput("q8", {1, -1, 16}, {"", "seq", ""}, kU8);
  b.F32("sc", {}, {0.5f});
  b.I64("wq", {16, 4}, std::vector<int64_t>(64, 1));
  Unknown(b, "dq");
  Unknown(b, "y", kU8);
  Unknown(b, "ys");
  Unknown(b, "yz", kU8);
  Unknown(b, "m", kI32);
  Unknown(b, "t");
  b.N("DequantizeLinear", {"q8", "sc"}, {"dq"});
  b.N("DynamicQuantizeLinear", {"x"}, {"y", "ys", "yz"});
  b.N("MatMulInteger", {"y", "wq", "yz"}, {"m"});
  b.N("Trilu", {"dq"}, {"t"});
  SymbolicShapes s;
  ASSERT_TRUE(InferSymbolic(b.g, &s));
  const Binding bind{{"seq", 7}};
  EXPECT_EQ(Eval(s, b.g, "dq", bind), (Dims{1, 7, 16}));
  EXPECT_EQ(Eval(s, b.g, "y", bind), (Dims{1, 7, 16}));
  EXPECT_EQ(Eval(s, b.g, "ys", bind), Dims{});
  EXPECT_EQ(Eval(s, b.g, "m", bind), (Dims{1, 7, 4}));
  EXPECT_EQ(Eval(s, b.g, "t", bind), (Dims{1, 7, 16}));
}

TEST(Symbolic, DimExprEvaluation) {
  DimTable t;
  const DimId x = t.Sym("x"), y = t.Sym("y");
  const DimId e = t.Add(t.FloorDiv(t.Sub(t.Add(x, t.Const(2)), t.Const(3)), t.Const(2)), t.Const(1));  // conv out
  std::string why;
  int64_t v = 0;
  for (int64_t xi : {1, 2, 7, 224, 1000}) {
    ASSERT_TRUE(t.Eval(e, {{"x", xi}}, &v, &why)) << why;
    EXPECT_EQ(v, (xi + 2 - 3) / 2 + 1) << xi;
  }
  EXPECT_FALSE(t.Eval(e, {{"y", 3}}, &v, &why));
  EXPECT_NE(why.find("'x' is not bound"), std::string::npos) << why;
  EXPECT_FALSE(t.Eval(x, {{"x", -2}}, &v, &why));
  EXPECT_NE(why.find(">= 0"), std::string::npos) << why;
  EXPECT_FALSE(t.Eval(t.FloorDiv(x, y), {{"x", 3}, {"y", 0}}, &v, &why));
  EXPECT_NE(why.find("division by zero"), std::string::npos) << why;
  EXPECT_FALSE(t.Eval(t.CeilDiv(x, y), {{"x", 3}, {"y", 0}}, &v, &why));
  ASSERT_TRUE(t.Eval(t.CeilDiv(x, y), {{"x", 7}, {"y", 2}}, &v, &why));
  EXPECT_EQ(v, 4);
  ASSERT_TRUE(t.Eval(t.Sub(x, y), {{"x", 2}, {"y", 5}}, &v, &why));
  EXPECT_EQ(v, -3);  // intermediate values may be negative
  EXPECT_FALSE(t.EvalDim(t.Sub(x, y), {{"x", 2}, {"y", 5}}, &v, &why));
  EXPECT_NE(why.find("negative"), std::string::npos) << why;
  EXPECT_FALSE(t.Eval(t.Mul(x, y), {{"x", int64_t{1} << 40}, {"y", int64_t{1} << 40}}, &v, &why));
  EXPECT_NE(why.find("overflow"), std::string::npos) << why;
  const DimId bc = t.Bcast(x, y);
  ASSERT_TRUE(t.Eval(bc, {{"x", 1}, {"y", 5}}, &v, &why));
  EXPECT_EQ(v, 5);
  ASSERT_TRUE(t.Eval(bc, {{"x", 5}, {"y", 1}}, &v, &why));
  EXPECT_EQ(v, 5);
  ASSERT_TRUE(t.Eval(bc, {{"x", 0}, {"y", 1}}, &v, &why));
  EXPECT_EQ(v, 0);
  EXPECT_FALSE(t.Eval(bc, {{"x", 4}, {"y", 5}}, &v, &why));
  EXPECT_NE(why.find("do not broadcast"), std::string::npos) << why;
  ASSERT_TRUE(t.Eval(t.Min(x, t.Max(y, t.Const(3))), {{"x", 9}, {"y", 1}}, &v, &why));
  EXPECT_EQ(v, 3);
  // EvalAll agrees with Eval on every id.
  std::vector<int64_t> all;
  std::vector<bool> ok;
  std::vector<std::string> err;
  t.EvalAll({{"x", 6}, {"y", 3}}, &all, &ok, &err);
  for (size_t i = 0; i < t.size(); ++i) {
    int64_t one = 0;
    std::string w;
    const bool r = t.Eval(static_cast<DimId>(i), {{"x", 6}, {"y", 3}}, &one, &w);
    EXPECT_EQ(r, static_cast<bool>(ok[i])) << t.Str(static_cast<DimId>(i));
    if (r) { EXPECT_EQ(one, all[i]) << t.Str(static_cast<DimId>(i)); }
  }
}

// ---- op rules -----------------------------------------------------------------------------------------------------

TEST(Symbolic, ShapeGatherConcatReshape) {
  GraphBuilder b;
  b.SymInput("x", {-1, -1, 64}, {"batch", "seq", ""});
  b.I64("idx0", {}, {0});
  b.I64("idx1", {1}, {-2});
  b.I64("tail", {2, 16});
  b.I64("axes0", {0});
  for (const char* s : {"shape", "shape12", "b0", "s1", "b_1d", "target", "prod"}) Unknown(b, s, kI64);
  Unknown(b, "y");
  b.N("Shape", {"x"}, {"shape"});
  b.N("Shape", {"x"}, {"shape12"}).attrs["start"] = IntA(-3);
  b.g.nodes.back().attrs["end"] = IntA(2);
  b.N("Gather", {"shape", "idx0"}, {"b0"});
  b.N("Gather", {"shape12", "idx1"}, {"s1"});
  b.N("Unsqueeze", {"b0", "axes0"}, {"b_1d"});
  b.N("Mul", {"b_1d", "s1"}, {"prod"});
  b.N("Concat", {"prod", "tail"}, {"target"}).attrs["axis"] = IntA(0);
  b.N("Reshape", {"x", "target"}, {"y"});
  SymbolicShapes s;
  ASSERT_TRUE(InferSymbolic(b.g, &s));
  EXPECT_EQ(s.symbols, (std::vector<std::string>{"batch", "seq"}));
  const Binding bind{{"batch", 3}, {"seq", 5}};
  EXPECT_EQ(Elems(s, b.g, "shape", bind), (Dims{3, 5, 64}));
  EXPECT_EQ(Elems(s, b.g, "shape12", bind), (Dims{3, 5}));
  EXPECT_EQ(Eval(s, b.g, "b0", bind), Dims{});
  EXPECT_EQ(Elems(s, b.g, "b0", bind), Dims{3});
  EXPECT_EQ(Elems(s, b.g, "s1", bind), Dims{3});  // index -2 of [batch, seq]
  EXPECT_EQ(Eval(s, b.g, "b_1d", bind), Dims{1});
  EXPECT_EQ(Elems(s, b.g, "target", bind), (Dims{9, 2, 16}));
  EXPECT_EQ(Eval(s, b.g, "y", bind), (Dims{9, 2, 16}));
  // Reshape's element count check: batch*batch*32 == batch*seq*64 only when seq = batch / 2.
  Graph out;
  std::string why;
  EXPECT_FALSE(Bind(b.g, s, bind, &out, &why));
  EXPECT_NE(why.find("Reshape element count"), std::string::npos) << why;
  EXPECT_NE(why.find("Reshape_7"), std::string::npos) << why;
  ASSERT_TRUE(Bind(b.g, s, {{"batch", 4}, {"seq", 2}}, &out, &why)) << why;
  EXPECT_EQ(out.v(out.Find("y")).dims, (Dims{16, 2, 16}));
  EXPECT_EQ(ConstData(out, "target"), (Dims{16, 2, 16}));
  EXPECT_EQ(ConstData(out, "shape"), (Dims{4, 2, 64}));
  EXPECT_EQ(ConstData(out, "b0"), Dims{4});
  EXPECT_TRUE(out.v(out.Find("b0")).dims.empty());
  EXPECT_EQ(out.v(out.Find("x")).dims, (Dims{4, 2, 64}));
  EXPECT_TRUE(out.v(out.Find("x")).has_shape);
}

TEST(Symbolic, ReshapeZeroMinusOne) {
  GraphBuilder b;
  b.SymInput("x", {1, -1, 128}, {"", "seq", ""});
  b.I64("t1", {0, -1, 4, 32});
  b.I64("t2", {0, -1, 128});
  b.I64("t3", {-1});
  Unknown(b, "a");
  Unknown(b, "c");
  Unknown(b, "d");
  b.N("Reshape", {"x", "t1"}, {"a"});
  b.N("Reshape", {"a", "t2"}, {"c"});
  b.N("Reshape", {"c", "t3"}, {"d"});
  SymbolicShapes s;
  ASSERT_TRUE(InferSymbolic(b.g, &s));
  const SymValue& a = s.values[static_cast<size_t>(b.g.Find("a"))];
  EXPECT_EQ(a.dims[1], s.table.Sym("seq"));  // (seq*128) // 128 simplified
  EXPECT_EQ(s.values[static_cast<size_t>(b.g.Find("c"))].dims[1], s.table.Sym("seq"));
  for (int64_t seq : {0, 1, 7}) {
    EXPECT_EQ(Eval(s, b.g, "a", {{"seq", seq}}), (Dims{1, seq, 4, 32}));
    EXPECT_EQ(Eval(s, b.g, "d", {{"seq", seq}}), (Dims{seq * 128}));
  }
}

TEST(Symbolic, SliceMatchesOnnxAlgorithm) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  struct Case { int64_t start, end, step; };
  const std::vector<Case> cases = {{0, kMax, 1},  {1, -1, 1}, {-3, kMax, 1}, {2, 100, 2}, {-1, -kMax, -1},
                                   {5, 0, -2},    {0, 3, 3},  {-100, 2, 1},  {3, 3, 1},   {4, 1, 1}};
  for (const Case& c : cases) {
    GraphBuilder b;
    b.SymInput("x", {-1, 6}, {"n", ""});
    b.I64("st", {c.start, 1});
    b.I64("en", {c.end, 5});
    b.I64("ax", {0, 1});
    b.I64("sp", {c.step, 2});
    Unknown(b, "y");
    b.N("Slice", {"x", "st", "en", "ax", "sp"}, {"y"});
    SymbolicShapes s;
    InferSymbolic(b.g, &s);
    const SymValue& y = s.values[static_cast<size_t>(b.g.Find("y"))];
    // Negative steps with constant start and end reverse a free dim too (ONNX's clamping as expressions).
    ASSERT_TRUE(y.known) << Why(s, b.g, "y");
    for (int64_t n : {0, 1, 2, 3, 4, 7, 50})
      EXPECT_EQ(Eval(s, b.g, "y", {{"n", n}}), (Dims{SliceLen(n, c.start, c.end, c.step), 2}))
          << c.start << ":" << c.end << ":" << c.step << " n=" << n;
  }
  // Constant dims with negative steps, and the same cases as data where every dim is constant.
  for (const Case& c : cases) {
    GraphBuilder b;
    b.Input("x", {7});
    b.I64("st", {c.start});
    b.I64("en", {c.end});
    b.I64("sp", {c.step});
    Unknown(b, "y");
    b.N("Slice", {"x", "st", "en", "", "sp"}, {"y"});
    SymbolicShapes s;
    ASSERT_TRUE(InferSymbolic(b.g, &s)) << Why(s, b.g, "y");
    EXPECT_EQ(Eval(s, b.g, "y", {}), Dims{SliceLen(7, c.start, c.end, c.step)}) << c.start << ":" << c.end;
  }
}

TEST(Symbolic, SliceWithComputedStartsAndShapeValues) {
  // The decoder's mask: rows past..past+seq-1, columns 0..past+seq-1 of a [32, 32] constant.
  GraphBuilder b;
  b.SymInput("ids", {1, -1}, {"", "seq"}, kI64);
  b.SymInput("pk", {1, 2, -1, 8}, {"", "", "past", ""});
  b.F32("mask", {32, 32}, std::vector<float>(32 * 32, 0.f));
  b.I64("axes0", {0});
  b.I64("axes1", {1});
  b.I64("zero", {0});
  for (const char* v : {"seq_1d", "past_1d", "end_1d", "all", "mid"}) Unknown(b, v, kI64);
  Unknown(b, "rows");
  Unknown(b, "m");
  b.N("Shape", {"ids"}, {"seq_1d"}).attrs = {{"start", IntA(1)}, {"end", IntA(2)}};
  b.N("Shape", {"pk"}, {"past_1d"}).attrs = {{"start", IntA(2)}, {"end", IntA(3)}};
  b.N("Add", {"past_1d", "seq_1d"}, {"end_1d"});
  b.N("Slice", {"mask", "past_1d", "end_1d", "axes0"}, {"rows"});
  b.N("Slice", {"rows", "zero", "end_1d", "axes1"}, {"m"});
  b.N("Shape", {"pk"}, {"all"});
  b.I64("one", {1});
  b.I64("three", {3});
  b.N("Slice", {"all", "one", "three"}, {"mid"});  // a shape value sliced: [2, past]
  SymbolicShapes s;
  ASSERT_TRUE(InferSymbolic(b.g, &s));
  for (int64_t seq : {1, 4}) {
    for (int64_t past : {0, 3, 27, 40}) {
      const Binding bind{{"seq", seq}, {"past", past}};
      const int64_t total = past + seq;
      EXPECT_EQ(Eval(s, b.g, "rows", bind), (Dims{SliceLen(32, past, total, 1), 32}));
      EXPECT_EQ(Eval(s, b.g, "m", bind), (Dims{SliceLen(32, past, total, 1), std::min<int64_t>(total, 32)}));
      EXPECT_EQ(Elems(s, b.g, "end_1d", bind), Dims{total});
      EXPECT_EQ(Elems(s, b.g, "mid", bind), (Dims{2, past}));
    }
  }
}

TEST(Symbolic, BroadcastMatMulGemmAndElementwise) {
  GraphBuilder b;
  b.SymInput("a", {-1, 1, -1, 8}, {"n", "", "m", ""});
  b.SymInput("bb", {4, -1, 8, 5}, {"", "m", "", ""});
  b.SymInput("c", {-1, 8}, {"k", ""});
  b.F32("w", {8, 3}, std::vector<float>(24, 0.f));
  b.F32("bias", {3}, std::vector<float>(3, 0.f));
  for (const char* v : {"mm", "add", "sm", "ln", "erf", "gemm", "where", "cast", "vec"}) Unknown(b, v);
  b.N("MatMul", {"a", "bb"}, {"mm"});           // [n,1,m,8] x [4,m,8,5] -> [Bcast(n,4), m, m, 5]
  b.N("Add", {"a", "c"}, {"add"});              // [n,1,m,8] + [k,8] -> [n,1,Bcast(m,k),8]
  b.N("Softmax", {"mm"}, {"sm"}).attrs["axis"] = IntA(-1);
  b.N("LayerNormalization", {"c", "w", "bias"}, {"ln"});
  b.N("Erf", {"add"}, {"erf"});
  b.N("Gemm", {"c", "w", "bias"}, {"gemm"});
  b.N("Where", {"erf", "a", "c"}, {"where"});
  b.N("Cast", {"mm"}, {"cast"}).attrs["to"] = IntA(kI32);
  b.N("MatMul", {"c", "bias"}, {"vec"});  // [k,8] x [3]: K 8 vs 3 differ
  SymbolicShapes s;
  EXPECT_FALSE(InferSymbolic(b.g, &s));
  EXPECT_NE(Why(s, b.g, "vec").find("inner dims"), std::string::npos) << Why(s, b.g, "vec");
  const Binding bind{{"n", 1}, {"m", 6}, {"k", 6}};
  EXPECT_EQ(Eval(s, b.g, "mm", bind), (Dims{4, 6, 6, 5}));
  EXPECT_EQ(Eval(s, b.g, "sm", bind), (Dims{4, 6, 6, 5}));
  EXPECT_EQ(Eval(s, b.g, "cast", bind), (Dims{4, 6, 6, 5}));
  EXPECT_EQ(Eval(s, b.g, "add", bind), (Dims{1, 1, 6, 8}));
  EXPECT_EQ(Eval(s, b.g, "erf", bind), (Dims{1, 1, 6, 8}));
  EXPECT_EQ(Eval(s, b.g, "where", bind), (Dims{1, 1, 6, 8}));
  EXPECT_EQ(Eval(s, b.g, "add", {{"n", 2}, {"m", 1}, {"k", 9}}), (Dims{2, 1, 9, 8}));
  EXPECT_EQ(Eval(s, b.g, "ln", bind), (Dims{6, 8}));
  EXPECT_EQ(Eval(s, b.g, "gemm", bind), (Dims{6, 3}));
  // n = 3 does not broadcast with 4: evaluation fails with the reason.
  std::string why;
  int64_t v;
  EXPECT_FALSE(s.table.EvalDim(s.values[static_cast<size_t>(b.g.Find("mm"))].dims[0], {{"n", 3}, {"m", 2}}, &v, &why));
  EXPECT_NE(why.find("do not broadcast"), std::string::npos) << why;
  // Bind reports the failing node and dim (m != k for the Add, through Where as well).
  Graph out;
  EXPECT_FALSE(Bind(b.g, s, {{"n", 1}, {"m", 6}, {"k", 5}}, &out, &why));
  EXPECT_NE(why.find("dim 2"), std::string::npos) << why;
  EXPECT_NE(why.find("do not broadcast"), std::string::npos) << why;
}

TEST(Symbolic, RangeLengths) {
  for (int64_t delta : {1, 2, 3, -1, -2}) {
    GraphBuilder b;
    b.SymInput("x", {-1, -1}, {"p", "q"});
    b.I64("i0", {}, {0});
    b.I64("i1", {}, {1});
    b.I64("d", {}, {delta});
    for (const char* v : {"shape", "p0", "q0", "r"}) Unknown(b, v, kI64);
    b.N("Shape", {"x"}, {"shape"});
    b.N("Gather", {"shape", "i0"}, {"p0"});
    b.N("Gather", {"shape", "i1"}, {"q0"});
    b.N("Range", {"p0", "q0", "d"}, {"r"});
    SymbolicShapes s;
    ASSERT_TRUE(InferSymbolic(b.g, &s)) << Why(s, b.g, "r");
    for (int64_t p : {0, 1, 5, 9})
      for (int64_t q : {0, 3, 9, 10}) {
        int64_t n = 0;
        for (int64_t i = p; delta > 0 ? i < q : i > q; i += delta) ++n;
        EXPECT_EQ(Eval(s, b.g, "r", {{"p", p}, {"q", q}}), Dims{n}) << p << " " << q << " " << delta;
      }
  }
}

TEST(Symbolic, ConvPoolChain) {
  GraphBuilder b;
  b.SymInput("x", {-1, 3, -1, -1}, {"N", "", "H", "W"});
  b.F32("w1", {8, 3, 3, 3}, std::vector<float>(8 * 27, 0.01f));
  b.F32("w2", {8, 1, 3, 3}, std::vector<float>(8 * 9, 0.01f));
  b.F32("wt", {8, 4, 2, 2}, std::vector<float>(8 * 16, 0.01f));
  for (const char* v : {"c1", "p1", "c2", "a1", "ct", "g", "cs", "pad", "rs", "rd", "s0", "s1"}) Unknown(b, v);
  b.N("Conv", {"x", "w1"}, {"c1"}).attrs = {{"strides", IntsA({2, 2})}, {"pads", IntsA({1, 1, 1, 1})}};
  b.N("MaxPool", {"c1"}, {"p1"}).attrs = {{"kernel_shape", IntsA({2, 2})}, {"strides", IntsA({2, 2})}};
  b.N("Conv", {"p1", "w2"}, {"c2"}).attrs = {{"group", IntA(8)}, {"dilations", IntsA({2, 2})},
                                              {"pads", IntsA({2, 0, 2, 0})}};
  b.N("AveragePool", {"c2"}, {"a1"}).attrs = {{"kernel_shape", IntsA({3, 3})}, {"auto_pad", StrA("VALID")}};
  b.N("ConvTranspose", {"p1", "wt"}, {"ct"}).attrs = {{"strides", IntsA({2, 2})}, {"pads", IntsA({0, 0, 1, 1})},
                                                       {"output_padding", IntsA({1, 0})}};
  b.N("Conv", {"x", "w1"}, {"cs"}).attrs = {{"strides", IntsA({3, 2})}, {"auto_pad", StrA("SAME_UPPER")}};
  b.N("GlobalAveragePool", {"ct"}, {"g"});
  b.I64("pads", {0, 0, 1, 2, 0, 0, 3, 4});
  b.N("Pad", {"c1", "pads"}, {"pad"});
  b.F32("roi", {0}, {});
  b.F32("scales", {4}, {1.f, 1.f, 2.f, 3.f});
  b.N("Resize", {"c1", "roi", "scales"}, {"rs"});
  b.I64("split", {3, 5});
  b.N("Split", {"c1", "split"}, {"s0", "s1"}).attrs["axis"] = IntA(1);
  b.I64("rax", {1, -1});
  b.N("ReduceSum", {"c2", "rax"}, {"rd"}).attrs["keepdims"] = IntA(0);
  SymbolicShapes s;
  ASSERT_TRUE(InferSymbolic(b.g, &s));
  {
    // A downscale of a free dim is not claimed: floor(W * 0.5) / W is 0.5 only for even W, and the lowering resamples
    // by output / input (difftest --dynamic, seed 20261210).
    GraphBuilder d;
    d.SymInput("x", {1, 3, -1, -1}, {"", "", "H", "W"});
    d.F32("roi", {0}, {});
    d.F32("scales", {4}, {1.f, 1.f, 1.f, 0.5f});
    Unknown(d, "y");
    d.N("Resize", {"x", "roi", "scales"}, {"y"});
    SymbolicShapes ds;
    EXPECT_FALSE(InferSymbolic(d.g, &ds));
    EXPECT_NE(ds.why[0].find("downscale"), std::string::npos) << ds.why[0];
  }
  for (int64_t H : {7, 8, 32, 63})
    for (int64_t W : {9, 16, 40}) {
      const Binding bind{{"N", 2}, {"H", H}, {"W", W}};
      const int64_t h1 = (H + 2 - 3) / 2 + 1, w1 = (W + 2 - 3) / 2 + 1;
      const int64_t hp = (h1 - 2) / 2 + 1, wp = (w1 - 2) / 2 + 1;
      const int64_t h2 = hp + 4 - 5 + 1, w2 = wp - 5 + 1;  // dilation 2: effective kernel 5
      EXPECT_EQ(Eval(s, b.g, "c1", bind), (Dims{2, 8, h1, w1})) << H << "x" << W;
      EXPECT_EQ(Eval(s, b.g, "p1", bind), (Dims{2, 8, hp, wp}));
      if (w2 < 0) continue;
      EXPECT_EQ(Eval(s, b.g, "c2", bind), (Dims{2, 8, h2, w2}));
      if (h2 >= 3 && w2 >= 3) { EXPECT_EQ(Eval(s, b.g, "a1", bind), (Dims{2, 8, h2 - 2, w2 - 2})); }
      EXPECT_EQ(Eval(s, b.g, "ct", bind), (Dims{2, 4, (hp - 1) * 2 + 1 + 2 - 1, (wp - 1) * 2 + 0 + 2 - 1}));
      EXPECT_EQ(Eval(s, b.g, "cs", bind), (Dims{2, 8, (H + 2) / 3, (W + 1) / 2}));
      EXPECT_EQ(Eval(s, b.g, "g", bind), (Dims{2, 4, 1, 1}));
      EXPECT_EQ(Eval(s, b.g, "pad", bind), (Dims{2, 8, h1 + 4, w1 + 6}));
      EXPECT_EQ(Eval(s, b.g, "rs", bind), (Dims{2, 8, h1 * 2, w1 * 3}));
      EXPECT_EQ(Eval(s, b.g, "s0", bind), (Dims{2, 3, h1, w1}));
      EXPECT_EQ(Eval(s, b.g, "s1", bind), (Dims{2, 5, h1, w1}));
      EXPECT_EQ(Eval(s, b.g, "rd", bind), (Dims{2, h2}));
    }
  // Binding too small an image: the dilated conv has a negative size; Bind names the node.
  Graph out;
  std::string why;
  EXPECT_FALSE(Bind(b.g, s, {{"N", 1}, {"H", 7}, {"W", 7}}, &out, &why));
  EXPECT_NE(why.find("Conv_2"), std::string::npos) << why;
  ASSERT_TRUE(Bind(b.g, s, {{"N", 1}, {"H", 64}, {"W", 48}}, &out, &why)) << why;
  EXPECT_EQ(out.v(out.Find("c2")).dims, (Dims{1, 8, 16, 8}));
}

// The quantized ops of ONNX Runtime's dynamic quantizer and of static QDQ models (issue 27: ppocr_v4_det_qdq and
// turn_detector took nothing with their dims free: "no symbolic shape rule for DequantizeLinear").
TEST(Symbolic, QuantizedOpsKeepTheirShapes) {
  GraphBuilder b;
  b.SymInput("x", {-1, 3, -1, -1}, {"N", "", "H", "W"});
  b.SymInput("a", {-1, 16}, {"N", ""});
  b.F32("w", {8, 3, 3, 3}, std::vector<float>(8 * 27, 1.f));
  b.F32("bm", {16, 5}, std::vector<float>(16 * 5, 1.f));
  b.F32("sc", {}, {0.5f});
  b.F32("zp", {}, {0.f});
  for (const char* v : {"xq", "xs", "xz", "c", "q", "dq", "aq", "as", "az", "mm"}) Unknown(b, v);
  b.N("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  b.N("ConvInteger", {"xq", "w", "xz"}, {"c"}).attrs = {{"strides", IntsA({2, 2})}, {"pads", IntsA({1, 1, 1, 1})}};
  b.N("QuantizeLinear", {"x", "sc", "zp"}, {"q"});
  b.N("DequantizeLinear", {"q", "sc", "zp"}, {"dq"});
  b.N("DynamicQuantizeLinear", {"a"}, {"aq", "as", "az"});
  b.N("MatMulInteger", {"aq", "bm", "az"}, {"mm"});
  SymbolicShapes s;
  ASSERT_TRUE(InferSymbolic(b.g, &s)) << (s.why.empty() ? "" : s.why[0]);
  for (int64_t H : {5, 8, 33}) {
    const Binding bind{{"N", 2}, {"H", H}, {"W", 10}};
    EXPECT_EQ(Eval(s, b.g, "xq", bind), (Dims{2, 3, H, 10}));
    EXPECT_EQ(Eval(s, b.g, "xs", bind), (Dims{}));
    EXPECT_EQ(Eval(s, b.g, "xz", bind), (Dims{}));
    EXPECT_EQ(Eval(s, b.g, "c", bind), (Dims{2, 8, (H - 1) / 2 + 1, 5}));
    EXPECT_EQ(Eval(s, b.g, "dq", bind), (Dims{2, 3, H, 10}));
    EXPECT_EQ(Eval(s, b.g, "mm", bind), (Dims{2, 5}));
  }
}

TEST(Symbolic, SqueezeUnsqueezeTransposeExpandTileFlattenReduce) {
  GraphBuilder b;
  b.SymInput("x", {-1, 1, -1}, {"a", "", "b"});
  b.I64("ax", {1});
  b.I64("ax2", {0, -1});
  b.I64("reps", {2, 1, 3, 1});
  for (const char* v : {"sq", "us", "tr", "ex", "ex2", "tl", "fl", "rm", "rm2", "sq_old"}) Unknown(b, v);
  Unknown(b, "shape", kI64);
  Unknown(b, "shape_t", kI64);
  b.N("Squeeze", {"x", "ax"}, {"sq"});
  b.N("Unsqueeze", {"sq", "ax2"}, {"us"});  // [1, a, b, 1]
  b.N("Transpose", {"us"}, {"tr"}).attrs["perm"] = IntsA({2, 0, 3, 1});
  b.N("Shape", {"us"}, {"shape"});
  b.N("Expand", {"x", "shape"}, {"ex"});  // [a,1,b] with [1,a,b,1] -> [1, a, b, b]
  b.N("Shape", {"tr"}, {"shape_t"});
  b.N("Expand", {"x", "shape_t"}, {"ex2"});  // [a,1,b] with [b,1,1,a] -> [b, a, 1, bcast(b, a)]
  b.N("Tile", {"us", "reps"}, {"tl"});
  b.N("Flatten", {"us"}, {"fl"}).attrs["axis"] = IntA(2);
  b.N("ReduceMean", {"us"}, {"rm"}).attrs["axes"] = IntsA({1});
  b.N("ReduceMean", {"us"}, {"rm2"}).attrs = {{"axes", IntsA({-1, 2})}, {"keepdims", IntA(0)}};
  b.N("Squeeze", {"us"}, {"sq_old"}, 11).attrs["axes"] = IntsA({0, 3});
  SymbolicShapes s;
  ASSERT_TRUE(InferSymbolic(b.g, &s));
  const Binding bind{{"a", 5}, {"b", 5}};
  EXPECT_EQ(Eval(s, b.g, "sq", bind), (Dims{5, 5}));
  EXPECT_EQ(Eval(s, b.g, "us", bind), (Dims{1, 5, 5, 1}));
  EXPECT_EQ(Eval(s, b.g, "tr", {{"a", 2}, {"b", 3}}), (Dims{3, 1, 1, 2}));
  EXPECT_EQ(Eval(s, b.g, "ex", {{"a", 2}, {"b", 3}}), (Dims{1, 2, 3, 3}));
  EXPECT_EQ(Eval(s, b.g, "ex2", {{"a", 4}, {"b", 4}}), (Dims{4, 4, 1, 4}));
  EXPECT_EQ(Eval(s, b.g, "ex2", {{"a", 4}, {"b", 1}}), (Dims{1, 4, 1, 4}));
  EXPECT_EQ(Eval(s, b.g, "tl", {{"a", 2}, {"b", 3}}), (Dims{2, 2, 9, 1}));
  EXPECT_EQ(Eval(s, b.g, "fl", {{"a", 2}, {"b", 3}}), (Dims{2, 3}));
  EXPECT_EQ(Eval(s, b.g, "rm", {{"a", 2}, {"b", 3}}), (Dims{1, 1, 3, 1}));
  EXPECT_EQ(Eval(s, b.g, "rm2", {{"a", 2}, {"b", 3}}), (Dims{1, 2}));
  EXPECT_EQ(Eval(s, b.g, "sq_old", {{"a", 2}, {"b", 3}}), (Dims{2, 3}));
  // Expand of [a,1,b] to [b,1,1,a] needs b == a or one of them 1.
  Graph out;
  std::string why;
  EXPECT_FALSE(Bind(b.g, s, {{"a", 2}, {"b", 3}}, &out, &why));
  EXPECT_NE(why.find("Expand"), std::string::npos) << why;
}

TEST(Symbolic, UnknownWithReasonsAndRuntimeDisagreement) {
  GraphBuilder b;
  b.SymInput("x", {-1, 4}, {"n", ""});
  b.Out("top", {});  // TopK: no rule
  b.g.v(b.g.Find("top")).has_shape = false;
  Unknown(b, "after");
  b.Out("relu", {7, 5});  // the runtime claims a shape that contradicts the input's dim 1
  b.Out("relu2", {3, 4});  // the runtime knows n = 3 here: kept symbolic with a check
  b.I64("k", {1});
  b.N("TopK", {"x", "k"}, {"top"});
  b.N("Relu", {"top"}, {"after"});
  b.N("Relu", {"x"}, {"relu"});
  b.N("Relu", {"x"}, {"relu2"});
  SymbolicShapes s;
  EXPECT_FALSE(InferSymbolic(b.g, &s));
  EXPECT_NE(Why(s, b.g, "top").find("no symbolic shape rule for TopK"), std::string::npos);
  EXPECT_NE(Why(s, b.g, "after").find("'top' is unknown"), std::string::npos) << Why(s, b.g, "after");
  EXPECT_FALSE(s.values[static_cast<size_t>(b.g.Find("relu"))].known);
  EXPECT_NE(Why(s, b.g, "relu").find("the runtime says 5"), std::string::npos) << Why(s, b.g, "relu");
  ASSERT_TRUE(s.values[static_cast<size_t>(b.g.Find("relu2"))].known);
  Graph out;
  std::string why;
  EXPECT_FALSE(Bind(b.g, s, {{"n", 2}}, &out, &why));
  EXPECT_NE(why.find("the runtime says 3"), std::string::npos) << why;
  ASSERT_TRUE(Bind(b.g, s, {{"n", 3}}, &out, &why)) << why;
  EXPECT_FALSE(out.v(out.Find("after")).has_shape);        // unknown values are copied as they are
  EXPECT_EQ(out.v(out.Find("relu")).dims, (Dims{7, 5}));  // ... including the runtime's (wrong) claim
}

TEST(Symbolic, BindErrors) {
  GraphBuilder b;
  b.SymInput("p", {1, 2, -1, 4}, {"", "", "past", ""});
  b.SymInput("k", {1, -1, -1, 4}, {"", "heads", "seq", ""});
  b.SymInput("z", {-1}, {""});
  Unknown(b, "cat");
  Unknown(b, "r");
  Unknown(b, "zz");
  b.I64("t", {2, -1});
  b.N("Concat", {"p", "k"}, {"cat"}).attrs["axis"] = IntA(2);
  b.N("Reshape", {"cat", "t"}, {"r"});
  b.N("Relu", {"z"}, {"zz"});
  SymbolicShapes s;
  ASSERT_TRUE(InferSymbolic(b.g, &s));
  EXPECT_EQ(s.symbols, (std::vector<std::string>{"heads", "past", "seq", "z:0"}));  // unnamed dims get a name
  Graph out;
  std::string why;
  Binding ok{{"past", 3}, {"seq", 1}, {"heads", 2}, {"z:0", 5}};
  ASSERT_TRUE(Bind(b.g, s, ok, &out, &why)) << why;
  EXPECT_EQ(out.v(out.Find("cat")).dims, (Dims{1, 2, 4, 4}));
  EXPECT_EQ(out.v(out.Find("r")).dims, (Dims{2, 16}));
  EXPECT_EQ(out.v(out.Find("zz")).dims, (Dims{5}));
  Binding missing = ok;
  missing.erase("seq");
  EXPECT_FALSE(Bind(b.g, s, missing, &out, &why));
  EXPECT_NE(why.find("'seq' is not bound"), std::string::npos) << why;
  Binding heads = ok;
  heads["heads"] = 3;
  EXPECT_FALSE(Bind(b.g, s, heads, &out, &why));
  EXPECT_NE(why.find("Concat_0"), std::string::npos) << why;
  EXPECT_NE(why.find("dim 1"), std::string::npos) << why;
  Binding negative = ok;
  negative["past"] = -1;
  EXPECT_FALSE(Bind(b.g, s, negative, &out, &why));
  EXPECT_NE(why.find("past"), std::string::npos) << why;
  Binding odd = ok;
  odd["past"] = 4;  // 1*2*5*4 = 40 elements into [2, 20]: fine; [2, -1] of 2*2*... always even here
  ASSERT_TRUE(Bind(b.g, s, odd, &out, &why)) << why;
  // A Reshape target that does not divide: [3, -1] of 40 elements.
  GraphBuilder c;
  c.SymInput("x", {-1, 4}, {"n", ""});
  c.I64("t", {3, -1});
  Unknown(c, "y");
  c.N("Reshape", {"x", "t"}, {"y"});
  SymbolicShapes s2;
  ASSERT_TRUE(InferSymbolic(c.g, &s2));
  ASSERT_TRUE(Bind(c.g, s2, {{"n", 6}}, &out, &why)) << why;
  EXPECT_EQ(out.v(out.Find("y")).dims, (Dims{3, 8}));
  EXPECT_FALSE(Bind(c.g, s2, {{"n", 10}}, &out, &why));
  EXPECT_NE(why.find("Reshape_0"), std::string::npos) << why;
  EXPECT_NE(why.find("element count"), std::string::npos) << why;
  // Inferred for another graph.
  EXPECT_FALSE(Bind(b.g, s2, ok, &out, &why));
}

TEST(Symbolic, HostileGraphsDoNotCrash) {
  GraphBuilder b;
  b.SymInput("x", Dims(12, -1), std::vector<std::string>(12, "d"));
  b.I64("huge", {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), -1, 0});
  b.I64("bad_axes", {40});
  b.I64("zero", {}, {0});
  std::vector<int64_t> many(5000, 3);
  b.I64("many", many);
  for (const char* v : {"r", "sl", "sq", "un", "ga", "rg", "tr", "cv", "ex", "sp0"}) Unknown(b, v);
  b.N("Reshape", {"x", "huge"}, {"r"});
  b.N("Slice", {"x", "huge", "huge", "bad_axes"}, {"sl"});
  b.N("Squeeze", {"x", "bad_axes"}, {"sq"});
  b.N("Unsqueeze", {"x", "many"}, {"un"});
  b.N("Gather", {"x", "huge"}, {"ga"}).attrs["axis"] = IntA(99);
  b.N("Range", {"zero", "zero", "zero"}, {"rg"});
  b.N("Transpose", {"x"}, {"tr"}).attrs["perm"] = IntsA({0, 0, 1});
  b.N("Conv", {"x", "x"}, {"cv"}).attrs["strides"] = IntsA(Dims(10, 0));
  b.N("Expand", {"x", "many"}, {"ex"});
  b.N("Split", {"x", ""}, {"sp0"}).attrs["axis"] = IntA(-13);
  SymbolicShapes s;
  EXPECT_FALSE(InferSymbolic(b.g, &s));
  for (const char* v : {"r", "sl", "sq", "un", "ga", "rg", "tr", "cv", "ex", "sp0"}) {
    EXPECT_FALSE(s.values[static_cast<size_t>(b.g.Find(v))].known) << v;
    EXPECT_FALSE(Why(s, b.g, v).empty()) << v;
  }
  Graph out;
  std::string why;
  EXPECT_TRUE(Bind(b.g, s, {{"d", int64_t{1} << 40}}, &out, &why) == false);  // 2^480 elements overflow
  EXPECT_NE(why.find("overflow"), std::string::npos) << why;
  EXPECT_TRUE(Bind(b.g, s, {{"d", 2}}, &out, &why)) << why;
  // A long chain of shape arithmetic stays cheap and exact.
  GraphBuilder c;
  c.SymInput("x", {-1}, {"n"});
  Unknown(c, "s0", kI64);
  c.N("Shape", {"x"}, {"s0"});
  c.I64("one", {1});
  for (int i = 1; i <= 3000; ++i) {
    Unknown(c, "s" + std::to_string(i), kI64);
    c.N(i % 2 ? "Add" : "Mul", {"s" + std::to_string(i - 1), "one"}, {"s" + std::to_string(i)});
  }
  SymbolicShapes s2;
  ASSERT_TRUE(InferSymbolic(c.g, &s2));
  EXPECT_EQ(Elems(s2, c.g, "s3000", {{"n", 5}}), Dims{5 + 1500});
  // (n + 1) + 1 ... folds into n + 1500: one Add node, not a chain 1500 deep.
  EXPECT_EQ(s2.values[static_cast<size_t>(c.g.Find("s3000"))].elems[0], s2.table.Add(s2.table.Sym("n"), s2.table.Const(1500)));
}

// ---- the decoder shape ------------------------------------------------------------------------------------------

constexpr int64_t kD = 16, kH = 2, kHd = 8, kV = 24, kS = 32, kF = 32;

// One layer of tests/models/make_decoder.py's graph (same ops and wiring), prefill or decode.
GraphBuilder Decoder(bool decode) {
  GraphBuilder b;
  uint32_t seed = 1;
  auto w = [&](const std::string& name, Dims d) { b.F32(name, d, UniformFloats(Numel(d), seed++, -0.3f, 0.3f)); };
  b.SymInput("input_ids", {1, decode ? 1 : -1}, {"", decode ? "" : "seq"}, kI64);
  if (decode) {
    b.SymInput("past_key", {1, kH, -1, kHd}, {"", "", "past", ""});
    b.SymInput("past_value", {1, kH, -1, kHd}, {"", "", "past", ""});
  }
  w("wte", {kV, kD});
  w("wpe", {kS, kD});
  std::vector<float> mask(kS * kS, 0.f);
  for (int64_t i = 0; i < kS; ++i)
    for (int64_t j = i + 1; j < kS; ++j) mask[static_cast<size_t>(i * kS + j)] = -1e9f;
  b.F32("causal_mask", {kS, kS}, mask);
  for (const char* n : {"ln1.w", "ln1.b", "ln2.w", "ln2.b", "lnf.w", "lnf.b", "q.b", "k.b", "v.b", "o.b", "proj.b"})
    w(n, {kD});
  for (const char* n : {"q.w", "k.w", "v.w", "o.w"}) w(n, {kD, kD});
  w("fc.w", {kD, kF});
  w("fc.b", {kF});
  w("proj.w", {kF, kD});
  w("lm_head", {kD, kV});
  b.I64("one_scalar", {}, {1});
  b.I64("axes_0", {0});
  b.I64("axes_1", {1});
  b.I64("zero_1d", {0});
  b.I64("shape_bshd", {0, -1, kH, kHd});
  b.I64("shape_bsd", {0, -1, kD});
  b.F32("attn_scale", {}, {0.35f});
  b.F32("sqrt2", {}, {1.4142135f});
  b.F32("half", {}, {0.5f});
  b.F32("one_f", {}, {1.f});
  for (const char* v : {"seq_1d", "end_1d", "past_0d", "end_0d", "position_ids"}) Unknown(b, v, kI64);
  if (decode) Unknown(b, "past_1d", kI64);
  b.N("Shape", {"input_ids"}, {"seq_1d"}).attrs = {{"start", IntA(1)}, {"end", IntA(2)}};
  std::string past = "zero_1d";
  if (decode) {
    b.N("Shape", {"past_key"}, {"past_1d"}).attrs = {{"start", IntA(2)}, {"end", IntA(3)}};
    past = "past_1d";
  }
  auto node = [&](const std::string& op, std::vector<std::string> ins, const std::string& out) -> Node& {
    if (b.g.Find(out) < 0) Unknown(b, out);
    return b.N(op, std::move(ins), {out});
  };
  node("Add", {past, "seq_1d"}, "end_1d");
  node("Squeeze", {past, "axes_0"}, "past_0d");
  node("Squeeze", {"end_1d", "axes_0"}, "end_0d");
  node("Range", {"past_0d", "end_0d", "one_scalar"}, "position_ids");
  node("Gather", {"wte", "input_ids"}, "tok_emb").attrs["axis"] = IntA(0);
  node("Gather", {"wpe", "position_ids"}, "pos_emb").attrs["axis"] = IntA(0);
  node("Add", {"tok_emb", "pos_emb"}, "x");
  node("Slice", {"causal_mask", past, "end_1d", "axes_0"}, "mask_rows");
  node("Slice", {"mask_rows", "zero_1d", "end_1d", "axes_1"}, "attn_mask");
  node("LayerNormalization", {"x", "ln1.w", "ln1.b"}, "ln_1").attrs = {{"axis", IntA(-1)}, {"epsilon", FloatA(1e-5f)}};
  for (const char* n : {"q", "k", "v"}) {
    const std::string p = n;
    node("MatMul", {"ln_1", p + ".w"}, p + "_mm");
    node("Add", {p + "_mm", p + ".b"}, p);
    node("Reshape", {p, "shape_bshd"}, p + "_bshd");
    node("Transpose", {p + "_bshd"}, p + "_bhsd").attrs["perm"] = IntsA({0, 2, 1, 3});
  }
  if (decode) {
    node("Concat", {"past_key", "k_bhsd"}, "present_key").attrs["axis"] = IntA(2);
    node("Concat", {"past_value", "v_bhsd"}, "present_value").attrs["axis"] = IntA(2);
  } else {
    node("Identity", {"k_bhsd"}, "present_key");
    node("Identity", {"v_bhsd"}, "present_value");
  }
  node("Transpose", {"present_key"}, "k_t").attrs["perm"] = IntsA({0, 1, 3, 2});
  node("MatMul", {"q_bhsd", "k_t"}, "scores");
  node("Mul", {"scores", "attn_scale"}, "scores_scaled");
  node("Add", {"scores_scaled", "attn_mask"}, "scores_masked");
  node("Softmax", {"scores_masked"}, "probs").attrs["axis"] = IntA(-1);
  node("MatMul", {"probs", "present_value"}, "ctx");
  node("Transpose", {"ctx"}, "ctx_bshd").attrs["perm"] = IntsA({0, 2, 1, 3});
  node("Reshape", {"ctx_bshd", "shape_bsd"}, "ctx_bsd");
  node("MatMul", {"ctx_bsd", "o.w"}, "o_mm");
  node("Add", {"o_mm", "o.b"}, "o");
  node("Add", {"x", "o"}, "resid_attn");
  node("LayerNormalization", {"resid_attn", "ln2.w", "ln2.b"}, "ln_2").attrs = {{"axis", IntA(-1)},
                                                                                 {"epsilon", FloatA(1e-5f)}};
  node("MatMul", {"ln_2", "fc.w"}, "fc_mm");
  node("Add", {"fc_mm", "fc.b"}, "fc");
  node("Div", {"fc", "sqrt2"}, "gelu_div");
  node("Erf", {"gelu_div"}, "gelu_erf");
  node("Add", {"gelu_erf", "one_f"}, "gelu_add");
  node("Mul", {"fc", "gelu_add"}, "gelu_mul");
  node("Mul", {"gelu_mul", "half"}, "gelu");
  node("MatMul", {"gelu", "proj.w"}, "proj_mm");
  node("Add", {"proj_mm", "proj.b"}, "proj");
  node("Add", {"resid_attn", "proj"}, "resid_mlp");
  node("LayerNormalization", {"resid_mlp", "lnf.w", "lnf.b"}, "ln_f").attrs = {{"axis", IntA(-1)},
                                                                               {"epsilon", FloatA(1e-5f)}};
  node("MatMul", {"ln_f", "lm_head"}, "logits");
  b.Output("logits");
  b.Output("present_key");
  b.Output("present_value");
  return b;
}

std::map<std::string, Dims> DecoderDims(int64_t seq, int64_t past) {
  const int64_t total = past + seq;
  const Dims bsd{1, seq, kD}, bshd{1, seq, kH, kHd}, bhsd{1, kH, seq, kHd}, kv{1, kH, total, kHd};
  const Dims scores{1, kH, seq, total};
  return {{"seq_1d", {1}}, {"end_1d", {1}}, {"past_0d", {}}, {"end_0d", {}}, {"position_ids", {seq}},
          {"tok_emb", bsd}, {"pos_emb", {seq, kD}}, {"x", bsd}, {"mask_rows", {seq, kS}}, {"attn_mask", {seq, total}},
          {"ln_1", bsd}, {"q_mm", bsd}, {"q", bsd}, {"q_bshd", bshd}, {"q_bhsd", bhsd}, {"k_bhsd", bhsd},
          {"v_bhsd", bhsd}, {"present_key", kv}, {"present_value", kv}, {"k_t", {1, kH, kHd, total}},
          {"scores", scores}, {"scores_scaled", scores}, {"scores_masked", scores}, {"probs", scores},
          {"ctx", bhsd}, {"ctx_bshd", bshd}, {"ctx_bsd", bsd}, {"o", bsd}, {"resid_attn", bsd}, {"ln_2", bsd},
          {"fc", {1, seq, kF}}, {"gelu_erf", {1, seq, kF}}, {"gelu", {1, seq, kF}}, {"proj", bsd},
          {"resid_mlp", bsd}, {"ln_f", bsd}, {"logits", {1, seq, kV}}};
}

void CheckDecoder(bool decode) {
  GraphBuilder b = Decoder(decode);
  SymbolicShapes s;
  ASSERT_TRUE(InferSymbolic(b.g, &s));
  for (size_t i = 0; i < s.why.size(); ++i) EXPECT_TRUE(s.why[i].empty()) << b.g.nodes[i].name << ": " << s.why[i];
  std::vector<std::pair<int64_t, int64_t>> points;  // (seq, past)
  if (decode) points = {{1, 0}, {1, 1}, {1, 7}, {1, 30}};
  else points = {{1, 0}, {2, 0}, {5, 0}, {32, 0}};
  for (auto [seq, past] : points) {
    SCOPED_TRACE("seq " + std::to_string(seq) + " past " + std::to_string(past));
    Binding bind{{"past", past}};
    if (!decode) bind = {{"seq", seq}};
    Graph out;
    std::string why;
    ASSERT_TRUE(Bind(b.g, s, bind, &out, &why)) << why;
    size_t compared = 0;
    for (const auto& [name, dims] : DecoderDims(seq, past)) {
      const Value& v = out.v(out.Find(name));
      EXPECT_TRUE(v.has_shape) << name;
      EXPECT_EQ(v.dims, dims) << name;
      ++compared;
    }
    EXPECT_GE(compared, 30u);
    for (const Value& v : out.values) EXPECT_TRUE(v.has_shape) << v.name;
    // Shape values folded to what they must be.
    EXPECT_EQ(ConstData(out, "seq_1d"), Dims{seq});
    EXPECT_EQ(ConstData(out, "end_1d"), Dims{past + seq});
    EXPECT_EQ(ConstData(out, "end_0d"), Dims{past + seq});
    EXPECT_EQ(ConstData(out, "past_0d"), Dims{past});
    if (decode) {
      EXPECT_EQ(ConstData(out, "past_1d"), Dims{past});
      EXPECT_EQ(ConstData(out, "position_ids"), Dims{past});  // length 1: its element is known
    }
    // The existing pipeline accepts the bound graph: every node folded or supported, and it compiles.
    Graph folded_graph = out;
    std::vector<bool> folded;
    CheckResult r = FoldConstants(&folded_graph, &folded);
    ASSERT_TRUE(r.ok) << r.reason;
    for (size_t i = 0; i < folded_graph.nodes.size(); ++i) {
      std::string w;
      EXPECT_TRUE(folded[i] || IsNodeSupported(folded_graph, folded_graph.nodes[i], &w))
          << folded_graph.nodes[i].name << ": " << w;
    }
    // Where the fold pass computes shape values itself (Shape of a now-static input), it agrees with Bind.
    for (const char* n : {"seq_1d", "end_1d", "position_ids"})
      if (decode || std::string(n) != "position_ids") { EXPECT_EQ(ConstData(folded_graph, n), ConstData(out, n)) << n; }
    if (seq == 5 || past == 7) {
      std::vector<std::string> ins, outs;
      for (int v : out.inputs) ins.push_back(out.v(v).name);
      for (int v : out.outputs) outs.push_back(out.v(v).name);
      CompiledGraph cg;
      r = CompileGraph(out, ins, outs, CompileOptions(), &cg);
      ASSERT_TRUE(r.ok) << r.reason;
      EXPECT_FALSE(cg.program.steps.empty());
    }
  }
  // Beyond the mask's 32 rows the mask no longer broadcasts with the scores: an error, not a wrong shape.
  Graph out;
  std::string why;
  EXPECT_FALSE(Bind(b.g, s, decode ? Binding{{"past", 40}} : Binding{{"seq", 40}}, &out, &why));
  EXPECT_NE(why.find("do not broadcast"), std::string::npos) << why;
}

TEST(Symbolic, DecoderPrefillBindsAndCompiles) { CheckDecoder(false); }
TEST(Symbolic, DecoderDecodeBindsAndCompiles) { CheckDecoder(true); }

// ---- the real decoder model through the runtime's graph view --------------------------------------------------------

// The IR borrows initializer bytes from the model: `keep` holds it (and the view) alive.
struct Loaded {
  std::shared_ptr<Model> model;
  std::unique_ptr<EpctxGraph> view;
};
bool LoadIr(const std::string& path, const std::map<std::string, int64_t>& pins, Graph* ir, Loaded* keep,
            std::string* why) {
  ModelLoadOptions o;
  o.free_dimension_overrides = pins;
  auto m = LoadModelFromFile(path, o);
  if (!m.ok()) return *why = m.status().message(), false;
  keep->model = m.value();
  keep->view = BuildGraphView(*keep->model->graph, {}, path, keep->model->ir_version, keep->model->graph->name, true);
  CheckResult r = BuildGraph(GetEpctxApi(), keep->view.get(), ir);
  if (!r.ok) return *why = r.reason, false;
  return true;
}

TEST(Symbolic, RealDecoderMatchesPinnedRuntimeShapes) {
  const std::string dir = EPCTX_BINARY_DIR "/test-models/symbolic";
  if (!std::ifstream(dir + "/decode.onnx").good()) {
    const std::string cmd = "/usr/bin/python3 " EPCTX_SOURCE_DIR "/tests/models/make_decoder.py --no-check --out " +
                            dir + " > /dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "could not run make_decoder.py (python3 with onnx)";
  }
  for (const char* file : {"prefill.onnx", "decode.onnx"}) {
    const bool decode = std::string(file) == "decode.onnx";
    const std::string path = dir + "/" + file;
    Graph free_ir;
    Loaded free_model;
    std::string why;
    ASSERT_TRUE(LoadIr(path, {}, &free_ir, &free_model, &why)) << why;
    SymbolicShapes s;
    EXPECT_TRUE(InferSymbolic(free_ir, &s));
    for (size_t i = 0; i < s.why.size(); ++i)
      EXPECT_TRUE(s.why[i].empty()) << file << " " << free_ir.nodes[i].name << ": " << s.why[i];
    EXPECT_EQ(s.symbols, std::vector<std::string>{decode ? "past" : "seq"});
    for (int64_t n : {1, 3, 17}) {
      SCOPED_TRACE(std::string(file) + " at " + std::to_string(n));
      const Binding bind{{decode ? "past" : "seq", n}};
      Graph bound, pinned;
      ASSERT_TRUE(Bind(free_ir, s, bind, &bound, &why)) << why;
      Loaded pinned_model;
      ASSERT_TRUE(LoadIr(path, bind, &pinned, &pinned_model, &why)) << why;
      // The plugin's own pipeline on both: the pinned graph (the runtime's static shapes and the fold pass's) is the
      // reference for every value; the bound graph must agree dim for dim and on every folded int64 value.
      std::vector<bool> f1, f2;
      ASSERT_TRUE(FoldConstants(&pinned, &f1).ok);
      ASSERT_TRUE(FoldConstants(&bound, &f2).ok);
      EXPECT_EQ(f1, f2);
      size_t compared = 0;
      for (const Value& pv : pinned.values) {
        const int bi = bound.Find(pv.name);
        ASSERT_GE(bi, 0) << pv.name;
        const Value& bv = bound.v(bi);
        EXPECT_TRUE(bv.has_shape) << pv.name;
        if (!pv.has_shape) continue;
        EXPECT_EQ(bv.dims, pv.dims) << pv.name;
        ++compared;
        std::vector<int64_t> a, c;
        if (pv.producer >= 0 && pinned.ConstInts(pinned.Find(pv.name), &a)) {
          ASSERT_TRUE(bound.ConstInts(bi, &c)) << pv.name;
          EXPECT_EQ(a, c) << pv.name;
        }
      }
      EXPECT_GT(compared, free_ir.nodes.size());
      // Supported nodes: the same on both.
      for (size_t i = 0; i < pinned.nodes.size(); ++i) {
        std::string w1, w2;
        EXPECT_EQ(f1[i] || IsNodeSupported(pinned, pinned.nodes[i], &w1),
                  f2[i] || IsNodeSupported(bound, bound.nodes[i], &w2))
            << pinned.nodes[i].name << ": " << w1 << " / " << w2;
      }
    }
  }
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
