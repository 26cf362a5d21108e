// FoldConstants on small hand-built graphs: the decoder's position-id/mask subgraph, each folded op's semantics
// (attributes vs inputs per opset, broadcasting, clamping), and what is skipped or refused.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {
namespace {

class GraphBuilder {
 public:
  Graph g;

  // A non-constant value (graph input or node output); has_shape when dims are given.
  int Val(const std::string& name, uint32_t dtype = 0, std::vector<int64_t> dims = {}, bool has_shape = false) {
    const int i = Add(name);
    Value& v = g.v(i);
    v.dtype = dtype;
    v.dims = std::move(dims);
    v.has_shape = has_shape;
    return i;
  }
  int Input(const std::string& name, uint32_t dtype, std::vector<int64_t> dims) {
    const int i = Val(name, dtype, std::move(dims), true);
    g.v(i).is_graph_input = true;
    g.inputs.push_back(i);
    return i;
  }
  template <typename T>
  int Const(const std::string& name, uint32_t dtype, std::vector<int64_t> dims, std::vector<T> data) {
    const int i = Val(name, dtype, std::move(dims), true);
    store_.emplace_back(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(T));
    g.v(i).data = store_.back().data();
    g.v(i).is_initializer = true;
    return i;
  }
  int I64(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> data) {
    return Const<int64_t>(name, kI64, std::move(dims), std::move(data));
  }
  int F32(const std::string& name, std::vector<int64_t> dims, std::vector<float> data) {
    return Const<float>(name, kF32, std::move(dims), std::move(data));
  }
  Node& N(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs, int64_t opset = 17) {
    Node n;
    n.name = op + "_" + std::to_string(g.nodes.size());
    n.op = op;
    n.opset = opset;
    const int index = static_cast<int>(g.nodes.size());
    for (const std::string& s : ins) {
      const int v = s.empty() ? -1 : Find(s);
      n.inputs.push_back(v);
      if (v >= 0) g.v(v).consumers.push_back(index);
    }
    for (const std::string& s : outs) {
      const int v = Find(s);
      n.outputs.push_back(v);
      g.v(v).producer = index;
    }
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }
  const Value& V(const std::string& name) const { return g.v(g.Find(name)); }

 private:
  int Add(const std::string& name) {
    Value v;
    v.name = name;
    g.values.push_back(v);
    const int i = static_cast<int>(g.values.size() - 1);
    g.by_name[name] = i;
    return i;
  }
  int Find(const std::string& name) {
    const int v = g.Find(name);
    return v >= 0 ? v : Val(name);
  }
  std::deque<std::string> store_;
};

Attr IntA(int64_t i) {
  Attr a;
  a.type = EPCTX_ATTR_INT;
  a.i = i;
  return a;
}
Attr IntsA(std::vector<int64_t> v) {
  Attr a;
  a.type = EPCTX_ATTR_INTS;
  a.ints = std::move(v);
  return a;
}
Attr FloatA(float f) {
  Attr a;
  a.type = EPCTX_ATTR_FLOAT;
  a.f = f;
  return a;
}
template <typename T>
Attr TensorA(uint32_t dtype, std::vector<int64_t> dims, std::vector<T> data) {
  Attr a;
  a.type = EPCTX_ATTR_TENSOR;
  a.i = dtype;
  a.ints = std::move(dims);
  a.s.assign(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(T));
  return a;
}

template <typename T>
std::vector<T> Data(const Value& v) {
  EXPECT_TRUE(v.is_const()) << v.name;
  if (!v.is_const()) return {};
  int64_t n = 1;
  for (int64_t d : v.dims) n *= d;
  std::vector<T> out(static_cast<size_t>(n));
  if (n) std::memcpy(out.data(), v.data, out.size() * sizeof(T));
  return out;
}

CheckResult Fold(GraphBuilder& b, std::vector<bool>* folded = nullptr) {
  std::vector<bool> f;
  CheckResult r = FoldConstants(&b.g, folded ? folded : &f);
  return r;
}

// tests/models/make_decoder.py's prefill position ids and causal mask: everything but the token Gather folds.
TEST(FoldConstants, DecoderPositionAndMaskSubgraph) {
  GraphBuilder b;
  const int64_t S = 6, D = 2;
  b.Input("input_ids", kI64, {1, 4});
  std::vector<float> wpe, mask;
  for (int64_t i = 0; i < S * D; ++i) wpe.push_back(static_cast<float>(i));
  for (int64_t r = 0; r < S; ++r)
    for (int64_t c = 0; c < S; ++c) mask.push_back(c > r ? -1e9f : 0.f);
  b.F32("wte", {10, D}, std::vector<float>(10 * D, 1.f));
  b.F32("wpe", {S, D}, wpe);
  b.F32("causal_mask", {S, S}, mask);
  b.I64("one_scalar", {}, {1});
  b.I64("axes_0", {1}, {0});
  b.I64("axes_1", {1}, {1});
  b.I64("zero_1d", {1}, {0});
  Node& shape = b.N("Shape", {"input_ids"}, {"seq_1d"}, 15);
  shape.attrs["start"] = IntA(1);
  shape.attrs["end"] = IntA(2);
  b.N("Add", {"zero_1d", "seq_1d"}, {"end_1d"}, 14);
  b.N("Squeeze", {"zero_1d", "axes_0"}, {"past_0d"}, 13);
  b.N("Squeeze", {"end_1d", "axes_0"}, {"end_0d"}, 13);
  b.N("Range", {"past_0d", "end_0d", "one_scalar"}, {"position_ids"}, 11);
  b.N("Gather", {"wte", "input_ids"}, {"tok_emb"}, 13).attrs["axis"] = IntA(0);
  b.N("Gather", {"wpe", "position_ids"}, {"pos_emb"}, 13).attrs["axis"] = IntA(0);
  b.N("Slice", {"causal_mask", "zero_1d", "end_1d", "axes_0"}, {"mask_rows"}, 13);
  b.N("Slice", {"mask_rows", "zero_1d", "end_1d", "axes_1"}, {"attn_mask"}, 13);

  std::vector<bool> folded;
  ASSERT_TRUE(Fold(b, &folded).ok);
  EXPECT_EQ(folded, (std::vector<bool>{true, true, true, true, true, false, true, true, true}));
  EXPECT_EQ(Data<int64_t>(b.V("seq_1d")), (std::vector<int64_t>{4}));
  EXPECT_EQ(b.V("end_0d").dims, (std::vector<int64_t>{}));
  EXPECT_EQ(Data<int64_t>(b.V("position_ids")), (std::vector<int64_t>{0, 1, 2, 3}));
  const Value& pos = b.V("pos_emb");
  EXPECT_EQ(pos.dims, (std::vector<int64_t>{4, D}));
  EXPECT_EQ(pos.dtype, kF32);
  EXPECT_TRUE(pos.has_shape);
  ASSERT_TRUE(pos.folded);
  EXPECT_EQ(pos.data, pos.folded->data());
  EXPECT_EQ(Data<float>(pos), std::vector<float>(wpe.begin(), wpe.begin() + 4 * D));
  const Value& m = b.V("attn_mask");
  EXPECT_EQ(m.dims, (std::vector<int64_t>{4, 4}));
  const std::vector<float> got = Data<float>(m);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(got[static_cast<size_t>(r * 4 + c)], c > r ? -1e9f : 0.f);
  EXPECT_FALSE(b.V("tok_emb").is_const());
}

// Values the runtime could not shape (they depend on a folded Slice) get static shapes from their inputs, through
// nodes this EP runs.
TEST(FoldConstants, ShapesFlowPastFoldedValues) {
  GraphBuilder b;
  b.Input("ids", kI64, {1, 4});
  b.Input("q", kF32, {1, 2, 4, 8});
  b.Input("kt", kF32, {1, 2, 8, 4});
  b.F32("mask", {6, 6}, std::vector<float>(36, 0.f));
  b.I64("zero", {1}, {0});
  b.I64("axes0", {1}, {0});
  b.I64("shape", {3}, {0, -1, 4});
  Node& shape = b.N("Shape", {"ids"}, {"len"}, 15);
  shape.attrs["start"] = IntA(1);
  b.N("Slice", {"mask", "zero", "len", "axes0"}, {"rows"}, 13);  // folded: [4,6]
  b.I64("axes1", {1}, {1});
  b.N("Slice", {"rows", "zero", "len", "axes1"}, {"m"}, 13);     // folded: [4,4]
  b.N("MatMul", {"q", "kt"}, {"scores"}, 13);
  b.N("Add", {"scores", "m"}, {"masked"}, 14);
  b.N("Softmax", {"masked"}, {"probs"}, 13).attrs["axis"] = IntA(-1);
  b.N("Reshape", {"probs", "shape"}, {"r"}, 14);
  b.N("Transpose", {"r"}, {"t"}, 13).attrs["perm"] = IntsA({2, 1, 0});
  b.N("Gather", {"t", "ids"}, {"g"}, 13).attrs["axis"] = IntA(1);  // runtime indices: shape only
  b.N("Sinh", {"masked"}, {"sin"}, 9);                             // not run by this EP: not shaped,
  b.N("Relu", {"sin"}, {"relu"}, 14);                              // nor what follows it
  b.Input("dyn", kI64, {1});
  b.N("Reshape", {"probs", "dyn"}, {"unknown"}, 14);  // runtime shape: stays unknown
  std::vector<bool> folded;
  ASSERT_TRUE(Fold(b, &folded).ok);
  EXPECT_TRUE(b.V("m").is_const());
  EXPECT_FALSE(b.V("scores").is_const());
  EXPECT_FALSE(folded[3]);
  EXPECT_EQ(b.V("scores").dims, (std::vector<int64_t>{1, 2, 4, 4}));
  EXPECT_TRUE(b.V("masked").has_shape);
  EXPECT_EQ(b.V("masked").dims, (std::vector<int64_t>{1, 2, 4, 4}));
  EXPECT_EQ(b.V("masked").dtype, kF32);
  EXPECT_EQ(b.V("probs").dims, (std::vector<int64_t>{1, 2, 4, 4}));
  EXPECT_EQ(b.V("r").dims, (std::vector<int64_t>{1, 8, 4}));
  EXPECT_EQ(b.V("t").dims, (std::vector<int64_t>{4, 8, 1}));
  EXPECT_EQ(b.V("g").dims, (std::vector<int64_t>{4, 1, 4, 1}));
  EXPECT_FALSE(b.V("sin").has_shape);
  EXPECT_FALSE(b.V("relu").has_shape);
  EXPECT_FALSE(b.V("unknown").has_shape);
}

TEST(FoldConstants, MatMulShapes) {
  GraphBuilder b;
  b.Input("a", kF32, {3, 1, 5, 7});
  b.Input("v", kF32, {7});
  b.Input("w", kF32, {4, 7, 2});
  b.N("MatMul", {"a", "w"}, {"aw"}, 13);
  b.N("MatMul", {"a", "v"}, {"av"}, 13);
  b.N("MatMul", {"v", "w"}, {"vw"}, 13);
  b.N("MatMul", {"w", "a"}, {"bad"}, 13);
  ASSERT_TRUE(Fold(b).ok);
  EXPECT_EQ(b.V("aw").dims, (std::vector<int64_t>{3, 4, 5, 2}));
  EXPECT_EQ(b.V("av").dims, (std::vector<int64_t>{3, 1, 5}));
  EXPECT_EQ(b.V("vw").dims, (std::vector<int64_t>{4, 2}));
  EXPECT_FALSE(b.V("bad").has_shape);
}

TEST(FoldConstants, ShapeAndSize) {
  GraphBuilder b;
  b.Input("x", kF32, {2, 3, 4, 5});
  b.N("Shape", {"x"}, {"all"}, 15);
  Node& s = b.N("Shape", {"x"}, {"tail"}, 15);
  s.attrs["start"] = IntA(-2);
  Node& e = b.N("Shape", {"x"}, {"none"}, 15);
  e.attrs["start"] = IntA(3);
  e.attrs["end"] = IntA(-3);
  Node& c = b.N("Shape", {"x"}, {"clamped"}, 15);
  c.attrs["start"] = IntA(-10);
  c.attrs["end"] = IntA(10);
  b.N("Size", {"x"}, {"size"}, 13);
  ASSERT_TRUE(Fold(b).ok);
  EXPECT_EQ(Data<int64_t>(b.V("all")), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(Data<int64_t>(b.V("tail")), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(b.V("none").dims, (std::vector<int64_t>{0}));
  EXPECT_TRUE(b.V("none").is_const());
  EXPECT_EQ(Data<int64_t>(b.V("clamped")), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(b.V("size").dims, (std::vector<int64_t>{}));
  EXPECT_EQ(Data<int64_t>(b.V("size")), (std::vector<int64_t>{120}));
}

TEST(FoldConstants, ShapeOfUnknownShapeIsSkipped) {
  GraphBuilder b;
  b.Val("x", kF32);  // no static shape
  b.N("Shape", {"x"}, {"s"}, 15);
  std::vector<bool> folded;
  ASSERT_TRUE(Fold(b, &folded).ok);
  EXPECT_FALSE(folded[0]);
  EXPECT_FALSE(b.V("s").is_const());
}

TEST(FoldConstants, ConstantAndConstantOfShape) {
  GraphBuilder b;
  b.N("Constant", {}, {"t"}, 13).attrs["value"] = TensorA<int32_t>(kI32, {2, 2}, {1, 2, 3, 4});
  b.N("Constant", {}, {"f"}, 13).attrs["value_float"] = FloatA(2.5f);
  b.N("Constant", {}, {"is"}, 13).attrs["value_ints"] = IntsA({7, 8, 9});
  b.N("Constant", {}, {"i"}, 13).attrs["value_int"] = IntA(-3);
  b.I64("shape", {2}, {2, 3});
  b.N("ConstantOfShape", {"shape"}, {"zeros"}, 9);
  b.N("ConstantOfShape", {"shape"}, {"sevens"}, 9).attrs["value"] = TensorA<int64_t>(kI64, {1}, {7});
  ASSERT_TRUE(Fold(b).ok);
  EXPECT_EQ(b.V("t").dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(b.V("t").dtype, kI32);
  EXPECT_EQ(Data<int32_t>(b.V("t")), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(Data<float>(b.V("f")), (std::vector<float>{2.5f}));
  EXPECT_EQ(b.V("f").dims, (std::vector<int64_t>{}));
  EXPECT_EQ(Data<int64_t>(b.V("is")), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(Data<int64_t>(b.V("i")), (std::vector<int64_t>{-3}));
  EXPECT_EQ(b.V("zeros").dtype, kF32);
  EXPECT_EQ(Data<float>(b.V("zeros")), std::vector<float>(6, 0.f));
  EXPECT_EQ(Data<int64_t>(b.V("sevens")), std::vector<int64_t>(6, 7));
}

TEST(FoldConstants, RangeAndCast) {
  GraphBuilder b;
  b.F32("fs", {}, {1.f});
  b.F32("fl", {}, {2.f});
  b.F32("fd", {}, {0.25f});
  b.N("Range", {"fs", "fl", "fd"}, {"fr"}, 11);
  b.I64("is", {}, {10});
  b.I64("il", {}, {3});
  b.I64("id", {}, {-3});
  b.N("Range", {"is", "il", "id"}, {"ir"}, 11);
  b.F32("x", {4}, {-1.7f, 0.5f, 2.9f, 0.f});
  b.N("Cast", {"x"}, {"xi"}, 13).attrs["to"] = IntA(kI64);
  b.N("Cast", {"x"}, {"xb"}, 13).attrs["to"] = IntA(kBool);
  b.N("Cast", {"xb"}, {"xbf"}, 13).attrs["to"] = IntA(kF32);
  b.I64("big", {1}, {int64_t{1} << 40});
  b.N("Cast", {"big"}, {"big32"}, 13).attrs["to"] = IntA(kI32);
  b.F32("huge", {1}, {1e20f});
  b.N("Cast", {"huge"}, {"huge64"}, 13).attrs["to"] = IntA(kI64);
  std::vector<bool> folded;
  ASSERT_TRUE(Fold(b, &folded).ok);
  EXPECT_EQ(Data<float>(b.V("fr")), (std::vector<float>{1.f, 1.25f, 1.5f, 1.75f}));
  EXPECT_EQ(Data<int64_t>(b.V("ir")), (std::vector<int64_t>{10, 7, 4}));
  EXPECT_EQ(Data<int64_t>(b.V("xi")), (std::vector<int64_t>{-1, 0, 2, 0}));
  EXPECT_EQ(Data<uint8_t>(b.V("xb")), (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(Data<float>(b.V("xbf")), (std::vector<float>{1, 1, 1, 0}));
  EXPECT_EQ(Data<int32_t>(b.V("big32")), (std::vector<int32_t>{0}));  // wraps like static_cast
  EXPECT_FALSE(folded[6]);  // 1e20 has no int64 value: left to the kernel
}

TEST(FoldConstants, ArithmeticBroadcastsAndWraps) {
  GraphBuilder b;
  b.I64("a", {2, 1}, {7, -7});
  b.I64("b", {3}, {2, -2, 3});
  b.N("Div", {"a", "b"}, {"div"}, 14);
  b.N("Sub", {"a", "b"}, {"sub"}, 14);
  b.I64("max", {1}, {std::numeric_limits<int64_t>::max()});
  b.I64("one", {}, {1});
  b.N("Add", {"max", "one"}, {"wrap"}, 14);
  b.F32("x", {2, 1}, {1.f, 2.f});
  b.F32("y", {1, 3}, {1.f, 10.f, 100.f});
  b.N("Mul", {"x", "y"}, {"mul"}, 14);
  b.I64("zero", {}, {0});
  b.N("Div", {"a", "zero"}, {"divzero"}, 14);
  b.N("Neg", {"a"}, {"neg"}, 13);
  b.N("Max", {"a", "b", "one"}, {"mx"}, 13);
  b.N("Min", {"x", "y"}, {"mn"}, 13);
  std::vector<bool> folded;
  ASSERT_TRUE(Fold(b, &folded).ok);
  EXPECT_EQ(b.V("div").dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Data<int64_t>(b.V("div")), (std::vector<int64_t>{3, -3, 2, -3, 3, -2}));  // truncation
  EXPECT_EQ(Data<int64_t>(b.V("sub")), (std::vector<int64_t>{5, 9, 4, -9, -5, -10}));
  EXPECT_EQ(Data<int64_t>(b.V("wrap")), (std::vector<int64_t>{std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(Data<float>(b.V("mul")), (std::vector<float>{1, 10, 100, 2, 20, 200}));
  EXPECT_FALSE(folded[4]);  // integer division by zero: left to the kernel
  EXPECT_EQ(Data<int64_t>(b.V("neg")), (std::vector<int64_t>{-7, 7}));
  EXPECT_EQ(Data<int64_t>(b.V("mx")), (std::vector<int64_t>{7, 7, 7, 2, 1, 3}));
  EXPECT_EQ(Data<float>(b.V("mn")), (std::vector<float>{1, 1, 1, 1, 2, 2}));
}

TEST(FoldConstants, ComparisonsAndWhere) {
  GraphBuilder b;
  b.I64("a", {3}, {1, 2, 3});
  b.I64("two", {}, {2});
  b.N("Equal", {"a", "two"}, {"eq"}, 13);
  b.N("Less", {"a", "two"}, {"lt"}, 13);
  b.N("Greater", {"a", "two"}, {"gt"}, 13);
  b.N("Not", {"eq"}, {"ne"}, 1);
  b.F32("x", {3}, {1, 2, 3});
  b.F32("y", {1}, {-1});
  b.N("Where", {"gt", "x", "y"}, {"w"}, 16);
  ASSERT_TRUE(Fold(b).ok);
  EXPECT_EQ(b.V("eq").dtype, kBool);
  EXPECT_EQ(Data<uint8_t>(b.V("eq")), (std::vector<uint8_t>{0, 1, 0}));
  EXPECT_EQ(Data<uint8_t>(b.V("lt")), (std::vector<uint8_t>{1, 0, 0}));
  EXPECT_EQ(Data<uint8_t>(b.V("gt")), (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_EQ(Data<uint8_t>(b.V("ne")), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(Data<float>(b.V("w")), (std::vector<float>{-1, -1, 3}));
}

TEST(FoldConstants, ReshapingOpsPerOpset) {
  GraphBuilder b;
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  b.F32("x", {2, 3, 4}, x);
  b.I64("shape", {3}, {0, -1, 2});
  b.N("Reshape", {"x", "shape"}, {"r"}, 14);
  b.I64("zshape", {2}, {0, 24});
  b.I64("empty", {0, 3}, {});
  b.N("Reshape", {"empty", "zshape"}, {"rz"}, 14).attrs["allowzero"] = IntA(1);
  b.I64("axes", {2}, {0, -1});
  b.N("Unsqueeze", {"x", "axes"}, {"u13"}, 13);
  b.N("Unsqueeze", {"x"}, {"u11"}, 11).attrs["axes"] = IntsA({1});
  b.N("Squeeze", {"u13"}, {"sq"}, 13);
  b.N("Flatten", {"x"}, {"fl"}, 13).attrs["axis"] = IntA(-1);
  b.N("Identity", {"x"}, {"id"}, 16);
  ASSERT_TRUE(Fold(b).ok);
  EXPECT_EQ(b.V("r").dims, (std::vector<int64_t>{2, 6, 2}));
  EXPECT_EQ(Data<float>(b.V("r")), x);
  EXPECT_EQ(b.V("rz").dims, (std::vector<int64_t>{0, 24}));
  EXPECT_EQ(b.V("u13").dims, (std::vector<int64_t>{1, 2, 3, 4, 1}));
  EXPECT_EQ(b.V("u11").dims, (std::vector<int64_t>{2, 1, 3, 4}));
  EXPECT_EQ(b.V("sq").dims, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(b.V("fl").dims, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(Data<float>(b.V("id")), x);
}

TEST(FoldConstants, MovementOps) {
  GraphBuilder b;
  b.I64("x", {2, 3}, {0, 1, 2, 3, 4, 5});
  b.I64("y", {2, 1}, {6, 7});
  b.N("Concat", {"x", "y"}, {"cat"}, 13).attrs["axis"] = IntA(-1);
  b.N("Transpose", {"x"}, {"t"}, 13).attrs["perm"] = IntsA({1, 0});
  b.I64("starts", {2}, {1, -1});
  b.I64("ends", {2}, {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()});
  b.I64("axes", {2}, {0, 1});
  b.I64("steps", {2}, {1, -2});
  b.N("Slice", {"x", "starts", "ends", "axes", "steps"}, {"s"}, 13);
  Node& s1 = b.N("Slice", {"x"}, {"s1"}, 1);
  s1.attrs["starts"] = IntsA({0, 1});
  s1.attrs["ends"] = IntsA({1, 1000});
  b.I64("shape", {3}, {2, 2, 3});
  b.N("Expand", {"y", "shape"}, {"e"}, 13);
  b.I64("ind", {2, 2}, {-1, 0, 2, 2});
  b.N("Gather", {"x", "ind"}, {"g"}, 13).attrs["axis"] = IntA(1);
  ASSERT_TRUE(Fold(b).ok);
  EXPECT_EQ(b.V("cat").dims, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(Data<int64_t>(b.V("cat")), (std::vector<int64_t>{0, 1, 2, 6, 3, 4, 5, 7}));
  EXPECT_EQ(Data<int64_t>(b.V("t")), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(b.V("s").dims, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Data<int64_t>(b.V("s")), (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(Data<int64_t>(b.V("s1")), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(b.V("e").dims, (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(Data<int64_t>(b.V("e")), (std::vector<int64_t>{6, 6, 6, 7, 7, 7, 6, 6, 6, 7, 7, 7}));
  EXPECT_EQ(b.V("g").dims, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(Data<int64_t>(b.V("g")), (std::vector<int64_t>{2, 0, 2, 2, 5, 3, 5, 5}));
}

TEST(FoldConstants, SkipsUnknownOpsAndHugeResults) {
  GraphBuilder b;
  b.F32("a", {2, 2}, {1, 2, 3, 4});
  b.N("MatMul", {"a", "a"}, {"mm"}, 13);
  b.I64("shape", {2}, {int64_t{1} << 27, 3});
  b.N("ConstantOfShape", {"shape"}, {"big"}, 9);  // 1.5 GiB of zeros
  std::vector<bool> folded;
  ASSERT_TRUE(Fold(b, &folded).ok);
  EXPECT_EQ(folded, (std::vector<bool>{false, false}));
  EXPECT_FALSE(b.V("mm").is_const());
  EXPECT_FALSE(b.V("big").is_const());
}

TEST(FoldConstants, MalformedNodesFailNamingTheNode) {
  {
    GraphBuilder b;
    b.F32("x", {2, 3}, {0, 1, 2, 3, 4, 5});
    b.I64("shape", {1}, {4});
    b.N("Reshape", {"x", "shape"}, {"r"}, 14).name = "bad_reshape";
    const CheckResult r = Fold(b);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.reason.find("bad_reshape"), std::string::npos) << r.reason;
    EXPECT_NE(r.reason.find("[2,3]"), std::string::npos) << r.reason;
  }
  {
    GraphBuilder b;
    b.F32("x", {2}, {0, 1});
    b.I64("i", {1}, {2});
    b.N("Gather", {"x", "i"}, {"g"}, 13).name = "bad_gather";
    const CheckResult r = Fold(b);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.reason.find("bad_gather"), std::string::npos) << r.reason;
    EXPECT_NE(r.reason.find("index 2"), std::string::npos) << r.reason;
  }
  {  // the graph's own shape for the output disagrees with the folded result
    GraphBuilder b;
    b.I64("a", {2}, {1, 2});
    b.Val("c", kI64, {3}, true);
    b.N("Neg", {"a"}, {"c"}, 13);
    EXPECT_FALSE(Fold(b).ok);
  }
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
