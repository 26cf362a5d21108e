#include "session/constant_folding.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <string>
#include <vector>

#include "session/session.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using testing::AddNode;
using testing::NewModel;
using testing::Serialize;

// A graph input of element type `elem` whose dims are numbers or, for names, free dimensions.
void AddInput(onnx::GraphProto* g, const std::string& name, const std::vector<std::string>& dims,
              int elem = onnx::TensorProto::FLOAT) {
  auto* t = g->add_input();
  t->set_name(name);
  auto* tt = t->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  tt->mutable_shape();  // a scalar has a shape with no dims
  for (const std::string& d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if (!d.empty() && (std::isdigit(static_cast<unsigned char>(d[0])) != 0)) dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

// A graph output of rank `rank` whose dims are unknown: ONNX shape inference fills them in. Subgraph outputs
// (rank < 0) have no shape at all.
void AddOutput(onnx::GraphProto* g, const std::string& name, int rank, int elem = onnx::TensorProto::FLOAT) {
  auto* t = g->add_output();
  t->set_name(name);
  auto* tt = t->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  if (rank < 0) return;
  auto* shape = tt->mutable_shape();
  for (int i = 0; i < rank; ++i) shape->add_dim();
}

void SetInt64s(onnx::TensorProto* t, const std::vector<int64_t>& dims, const std::vector<int64_t>& values) {
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
}

void AddInt64Init(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                  const std::vector<int64_t>& values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  SetInt64s(t, dims, values);
}

// A Constant node holding an int64 tensor.
void AddInt64Constant(onnx::GraphProto* g, const std::string& out, const std::vector<int64_t>& dims,
                      const std::vector<int64_t>& values) {
  auto* n = AddNode(g, "Constant", out + "_node", {}, out);
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  SetInt64s(a->mutable_t(), dims, values);
}

void AddIntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// X float[N,4] -> Y = Reshape(X + Cast(Expand(Range(0, 4, 1), [N,4])), [2N, -1]) where every shape is computed
// from Shape(X) through Cast, Slice, Gather, Squeeze, Unsqueeze, Mul, Concat: a shape subgraph exporters write.
// The graph attribute `branch` ("then_branch" / "else_branch") of an If node, named `name`.
onnx::GraphProto* AddBranch(onnx::NodeProto* iff, const std::string& branch, const std::string& name) {
  auto* a = iff->add_attribute();
  a->set_name(branch);
  a->set_type(onnx::AttributeProto::GRAPH);
  auto* b = a->mutable_g();
  b->set_name(name);
  return b;
}

onnx::ModelProto ShapeSubgraphModel() {
  onnx::ModelProto m = NewModel("shape_subgraph", 13);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {"N", "4"});
  AddOutput(g, "Y", 2);
  AddInt64Constant(g, "zero_idx", {}, {0});
  AddInt64Init(g, "starts", {1}, {1});
  AddInt64Init(g, "ends", {1}, {2});
  AddInt64Init(g, "axes0", {1}, {0});
  AddInt64Init(g, "two", {}, {2});
  AddInt64Init(g, "minus1", {1}, {-1});
  AddInt64Constant(g, "r_start", {}, {0});
  AddInt64Constant(g, "r_delta", {}, {1});
  AddNode(g, "Shape", "shape", {"X"}, "s");
  AddIntAttr(AddNode(g, "Cast", "to_float", {"s"}, "sf"), "to", onnx::TensorProto::FLOAT);
  AddIntAttr(AddNode(g, "Cast", "to_int", {"sf"}, "si"), "to", onnx::TensorProto::INT64);
  AddNode(g, "Slice", "slice", {"si", "starts", "ends"}, "cols1");             // [4]
  AddNode(g, "Squeeze", "squeeze", {"cols1", "axes0"}, "cols");                // 4
  AddNode(g, "Gather", "gather", {"si", "zero_idx"}, "rows");                  // N
  AddNode(g, "Range", "range", {"r_start", "cols", "r_delta"}, "iota");        // [0,1,2,3]
  AddNode(g, "Unsqueeze", "unsq_rows", {"rows", "axes0"}, "rows1");            // [N]
  AddNode(g, "Concat", "concat_e", {"rows1", "cols1"}, "eshape");              // [N,4]
  AddIntAttr(g->mutable_node(g->node_size() - 1), "axis", 0);
  AddNode(g, "Expand", "expand", {"iota", "eshape"}, "e");                     // int64 [N,4]
  AddIntAttr(AddNode(g, "Cast", "e_float", {"e"}, "ef"), "to", onnx::TensorProto::FLOAT);
  AddNode(g, "Add", "add", {"X", "ef"}, "xa");
  AddNode(g, "Mul", "twice", {"rows", "two"}, "rows2");                        // 2N
  AddNode(g, "Unsqueeze", "unsq_rows2", {"rows2", "axes0"}, "rows2_1");
  AddNode(g, "Concat", "concat_r", {"rows2_1", "minus1"}, "rshape");           // [2N,-1]
  AddIntAttr(g->mutable_node(g->node_size() - 1), "axis", 0);
  AddNode(g, "Reshape", "reshape", {"xa", "rshape"}, "xr");
  AddNode(g, "Relu", "relu", {"xr"}, "Y");
  return m;
}

std::shared_ptr<Model> Load(const onnx::ModelProto& m, const std::map<std::string, int64_t>& overrides) {
  const std::string bytes = Serialize(m);
  ModelLoadOptions o;
  o.free_dimension_overrides = overrides;
  StatusOr<std::shared_ptr<Model>> model = LoadModelFromBytes(bytes.data(), bytes.size(), o);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? model.value() : nullptr;
}

std::vector<std::string> OpTypes(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

std::string TypeOf(const Graph& g, const std::string& value) {
  const ValueType* t = g.FindType(value);
  return t ? t->ToString() : "(none)";
}

std::vector<int64_t> Int64s(const Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.NumElements());
}

// ---- through a session: the optimization level decides, and folding changes no value ----

StatusOr<std::unique_ptr<InferenceSession>> NewSession(const onnx::ModelProto& m, int level,
                                                       const std::map<std::string, int64_t>& overrides) {
  const std::string bytes = Serialize(m);
  SessionConfig config;
  config.graph_optimization_level = level;
  config.intra_op_num_threads = 1;
  config.free_dimension_overrides = overrides;
  return InferenceSession::CreateFromBytes(bytes.data(), bytes.size(), config);
}

std::vector<float> RunFloat(const InferenceSession& s, const std::string& input, const Tensor& x) {
  std::vector<IValue> out;
  Status st = s.Run({input}, {IValue(x)}, {}, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok() || out.empty() || !out[0].is_tensor()) return {};
  const Tensor& y = out[0].tensor();
  return std::vector<float>(y.data<float>(), y.data<float>() + y.NumElements());
}

// `name` has a shape of `rank` dims, none of them known.
void ExpectRankOnly(const Graph& g, const std::string& name, size_t rank) {
  const ValueType* t = g.FindType(name);
  ASSERT_TRUE(t && t->has_shape) << name << ": " << TypeOf(g, name);
  ASSERT_EQ(t->dims.size(), rank) << TypeOf(g, name);
  for (const Dim& d : t->dims) EXPECT_FALSE(d.known()) << TypeOf(g, name);
}

TEST(ConstantFoldingTest, ShapeSubgraphFoldsToAStaticReshape) {
  std::shared_ptr<Model> model = Load(ShapeSubgraphModel(), {{"N", 3}});
  ASSERT_TRUE(model);
  const Graph& g = *model->graph;
  // ONNX shape inference alone cannot see through the computed shapes: only the rank, the shape input's length.
  ExpectRankOnly(g, "xr", 2);
  StatusOr<ConstantFoldingStats> stats = FoldConstants(model.get(), ConstantFoldingOptions());
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(OpTypes(g), (std::vector<std::string>{"Add", "Reshape", "Relu"}));
  EXPECT_EQ(stats.value().nodes_folded, 17u);  // 3 Constant nodes and the 14 nodes computing e and rshape
  EXPECT_TRUE(stats.value().inference_error.empty());
  ASSERT_TRUE(g.initializers.count("rshape"));
  EXPECT_EQ(Int64s(g.initializers.at("rshape")), (std::vector<int64_t>{6, -1}));
  ASSERT_TRUE(g.initializers.count("ef"));
  const Tensor& ef = g.initializers.at("ef");
  EXPECT_EQ(ef.shape(), (Shape{3, 4}));
  EXPECT_EQ(std::vector<float>(ef.data<float>(), ef.data<float>() + 12),
            (std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
  // Downstream shapes are static now, the graph output's too.
  EXPECT_EQ(TypeOf(g, "xr"), "tensor(float)[6,2]");
  EXPECT_EQ(TypeOf(g, "Y"), "tensor(float)[6,2]");
  // Initializers only folded nodes read are gone; the proto matches the graph (what context models are written from).
  for (const char* gone : {"starts", "ends", "two", "minus1", "s", "si", "rows"}) EXPECT_FALSE(g.initializers.count(gone)) << gone;
  ASSERT_EQ(model->proto->graph().node_size(), 3);
  EXPECT_EQ(model->proto->graph().node(1).op_type(), "Reshape");
  int proto_inits = 0;
  for (const auto& t : model->proto->graph().initializer()) proto_inits += t.name() == "rshape" || t.name() == "ef";
  EXPECT_EQ(proto_inits, 2);
  EXPECT_EQ(model->proto->graph().initializer_size(), 2);
  // Graph inputs and outputs keep their names.
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.inputs[0].name, "X");
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.outputs[0].name, "Y");
}

TEST(ConstantFoldingTest, AFreeDimensionKeepsItsShapePath) {
  std::shared_ptr<Model> model = Load(ShapeSubgraphModel(), {});  // N not pinned
  ASSERT_TRUE(model);
  StatusOr<ConstantFoldingStats> stats = FoldConstants(model.get(), ConstantFoldingOptions());
  ASSERT_TRUE(stats.ok());
  const Graph& g = *model->graph;
  // Only what does not depend on N folds: the Constant nodes and the column count (Shape's data is not constant,
  // so nothing after Shape folds, not even the Slice of its static part).
  EXPECT_EQ(stats.value().nodes_folded, 3u);
  std::vector<std::string> ops = OpTypes(g);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Shape"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Constant"), 0);
  EXPECT_EQ(ops.size(), 20u - 3u);
  ExpectRankOnly(g, "xr", 2);
}

TEST(ConstantFoldingTest, DataDependentValuesStay) {
  // Y = Tile(X, Concat(ArgMax(X), [1])): the repeats depend on X's values, not on its shape. V = Expand(Relu(X),
  // Shape(X)): X's shape is static, so Shape folds.
  onnx::ModelProto m = NewModel("data_dependent", 13);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {"1", "4"});
  AddOutput(g, "Y", 2);
  AddOutput(g, "V", 2);
  AddInt64Init(g, "one", {1}, {1});
  AddNode(g, "Shape", "shape", {"X"}, "s");
  auto* am = AddNode(g, "ArgMax", "argmax", {"X"}, "am");
  AddIntAttr(am, "axis", 1);
  AddIntAttr(am, "keepdims", 0);
  AddIntAttr(AddNode(g, "Concat", "concat", {"am", "one"}, "c"), "axis", 0);
  AddNode(g, "Tile", "tile", {"X", "c"}, "Y");
  AddNode(g, "Relu", "relu", {"X"}, "r");
  AddNode(g, "Expand", "expand", {"r", "s"}, "V");
  std::shared_ptr<Model> model = Load(m, {});
  ASSERT_TRUE(model);
  StatusOr<ConstantFoldingStats> stats = FoldConstants(model.get(), ConstantFoldingOptions());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats.value().nodes_folded, 1u);
  EXPECT_EQ(OpTypes(*model->graph), (std::vector<std::string>{"ArgMax", "Concat", "Tile", "Relu", "Expand"}));
  EXPECT_EQ(Int64s(model->graph->initializers.at("s")), (std::vector<int64_t>{1, 4}));
  EXPECT_TRUE(model->graph->initializers.count("one"));
}

// Y = X + ConstantOfShape([rows, 256]) : 1 MiB at 1024 rows, 4 MiB at 4096.
onnx::ModelProto ConstantOfShapeModel(int64_t rows) {
  onnx::ModelProto m = NewModel("constant_of_shape", 13);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {"1", "256"});
  AddOutput(g, "Y", 2);
  AddInt64Init(g, "shape", {2}, {rows, 256});
  AddNode(g, "ConstantOfShape", "cos", {"shape"}, "big");
  AddNode(g, "Add", "add", {"X", "big"}, "Y");
  return m;
}

TEST(ConstantFoldingTest, LargeResultsStayNodes) {
  {
    std::shared_ptr<Model> model = Load(ConstantOfShapeModel(4096), {});
    ASSERT_TRUE(model);
    ASSERT_TRUE(FoldConstants(model.get(), ConstantFoldingOptions()).ok());
    EXPECT_EQ(OpTypes(*model->graph), (std::vector<std::string>{"ConstantOfShape", "Add"}));
    EXPECT_FALSE(model->graph->initializers.count("big"));
  }
  {
    std::shared_ptr<Model> model = Load(ConstantOfShapeModel(1024), {});  // exactly at the default cap
    ASSERT_TRUE(model);
    ASSERT_TRUE(FoldConstants(model.get(), ConstantFoldingOptions()).ok());
    EXPECT_EQ(OpTypes(*model->graph), (std::vector<std::string>{"Add"}));
    ASSERT_TRUE(model->graph->initializers.count("big"));
    EXPECT_EQ(model->graph->initializers.at("big").SizeInBytes(), size_t{1} << 20);
  }
  {
    std::shared_ptr<Model> model = Load(ConstantOfShapeModel(1024), {});
    ASSERT_TRUE(model);
    ConstantFoldingOptions small;
    small.max_output_bytes = 1000;
    ASSERT_TRUE(FoldConstants(model.get(), small).ok());
    EXPECT_EQ(OpTypes(*model->graph), (std::vector<std::string>{"ConstantOfShape", "Add"}));
  }
}

TEST(ConstantFoldingTest, GraphOutputsOverridableInitializersRandomOpsAndLoopBodiesStay) {
  onnx::ModelProto m = NewModel("kept", 13);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {"2"});
  AddInput(g, "W", {"2"});  // an initializer that is also a graph input: a feed may replace it
  testing::AddWeight(g, "W", {1, 2});
  testing::AddWeight(g, "C", {3, 4});
  AddOutput(g, "Y", 1);
  AddOutput(g, "K", 1);
  AddOutput(g, "Z", 1);
  AddOutput(g, "L", 1);
  AddNode(g, "Add", "w_plus_c", {"W", "C"}, "wc");           // reads W: not constant
  AddNode(g, "Neg", "neg_c", {"C"}, "K");                    // a graph output: keeps its node
  auto* rnd = AddNode(g, "RandomUniform", "rnd", {}, "u");   // not a function of its inputs
  auto* shape = rnd->add_attribute();
  shape->set_name("shape");
  shape->set_type(onnx::AttributeProto::INTS);
  shape->add_ints(2);
  AddNode(g, "Add", "add_u", {"X", "u"}, "xu");
  AddNode(g, "Add", "add", {"xu", "wc"}, "Y");
  testing::AddWeight(g, "one", {1});
  AddNode(g, "Neg", "neg1", {"one"}, "m1");  // folds; the If branches read it from the outer scope
  AddInput(g, "cond", {}, onnx::TensorProto::BOOL);  // not a constant: the If stays (a constant one is inlined)
  // If: each branch folds its constant work and the shape of the outer X, but not the node making its output.
  auto* iff = AddNode(g, "If", "if", {"cond"}, "Z");
  for (const std::string branch : {"then_branch", "else_branch"}) {
    auto* b = AddBranch(iff, branch, branch);
    AddNode(b, "Neg", branch + "_neg", {"C"}, branch + "_nc");
    AddNode(b, "Add", branch + "_add", {branch + "_nc", "m1"}, branch + "_t");
    AddNode(b, "Shape", branch + "_shape", {"X"}, branch + "_sx");
    AddIntAttr(AddNode(b, "Cast", branch + "_cast", {branch + "_sx"}, branch + "_sxf"), "to", onnx::TensorProto::FLOAT);
    AddNode(b, "Add", branch + "_out", {branch + "_t", branch + "_sxf"}, branch + "_out");
    AddOutput(b, branch + "_out", -1);
  }
  // Loop (3 iterations): its body's constant work stays (bodies of loops are never folded).
  AddInt64Init(g, "trips", {}, {3});
  auto* loop = AddNode(g, "Loop", "loop", {"trips", "", "X"}, "L");
  auto* body_attr = loop->add_attribute();
  body_attr->set_name("body");
  body_attr->set_type(onnx::AttributeProto::GRAPH);
  auto* body = body_attr->mutable_g();
  body->set_name("body");
  AddInput(body, "i", {}, onnx::TensorProto::INT64);
  AddInput(body, "c_in", {}, onnx::TensorProto::BOOL);
  AddInput(body, "v_in", {"2"});
  AddNode(body, "Identity", "c_out", {"c_in"}, "c_out");
  AddNode(body, "Neg", "body_neg", {"C"}, "body_nc");
  AddNode(body, "Add", "v_out", {"v_in", "body_nc"}, "v_out");
  AddOutput(body, "c_out", -1, onnx::TensorProto::BOOL);
  AddOutput(body, "v_out", -1);
  std::shared_ptr<Model> model = Load(m, {});
  ASSERT_TRUE(model);
  StatusOr<ConstantFoldingStats> stats = FoldConstants(model.get(), ConstantFoldingOptions());
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats.value().nodes_folded, 9u);  // neg1, and Neg, Add, Shape, Cast in each branch
  EXPECT_EQ(OpTypes(*model->graph),
            (std::vector<std::string>{"Add", "Neg", "RandomUniform", "Add", "Add", "If", "Loop"}));
  const Node& if_node = model->graph->nodes[5];
  for (const char* branch : {"then_branch", "else_branch"}) {
    const Attribute* a = if_node.attr(branch);
    ASSERT_TRUE(a && a->g);
    EXPECT_EQ(OpTypes(*a->g), (std::vector<std::string>{"Add"}));
    ASSERT_TRUE(a->g->initializers.count(std::string(branch) + "_sxf"));
    const Tensor& sxf = a->g->initializers.at(std::string(branch) + "_sxf");
    EXPECT_EQ(std::vector<float>(sxf.data<float>(), sxf.data<float>() + 1), (std::vector<float>{2}));
  }
  EXPECT_EQ(OpTypes(*model->graph->nodes[6].attr("body")->g), (std::vector<std::string>{"Identity", "Neg", "Add"}));
  // The proto's branches match (context models are written from it).
  const auto& if_proto = model->proto->graph().node(5);
  ASSERT_EQ(if_proto.op_type(), "If");
  for (const auto& a : if_proto.attribute()) EXPECT_EQ(a.g().node_size(), 1);
}

TEST(ConstantFoldingTest, FoldedIfBranchesGiveTheValuesOfUnfoldedOnes) {
  // Z = If(X.sum > 0) then (X + Cast(Shape(X)) + Neg(C)) else (X - Neg(C)): both branches run on the same inputs
  // folded and unfolded.
  onnx::ModelProto m = NewModel("branches", 13);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {"2"});
  AddOutput(g, "Z", 1);
  testing::AddWeight(g, "C", {3.25f, -4.5f});
  testing::AddWeight(g, "zero", {0});
  AddNode(g, "ReduceSum", "sum", {"X"}, "sum");
  AddNode(g, "Greater", "positive", {"sum", "zero"}, "positive1");
  AddNode(g, "Squeeze", "cond", {"positive1"}, "cond");
  auto* iff = AddNode(g, "If", "if", {"cond"}, "Z");
  for (const std::string branch : {"then_branch", "else_branch"}) {
    auto* b = AddBranch(iff, branch, branch);
    AddNode(b, "Neg", branch + "_neg", {"C"}, branch + "_nc");
    if (branch == "then_branch") {
      AddNode(b, "Shape", "shape", {"X"}, "sx");
      AddIntAttr(AddNode(b, "Cast", "cast", {"sx"}, "sxf"), "to", onnx::TensorProto::FLOAT);
      AddNode(b, "Add", "plus_shape", {"X", "sxf"}, "xs");
      AddNode(b, "Add", branch + "_out", {"xs", branch + "_nc"}, branch + "_out");
    } else {
      AddNode(b, "Sub", branch + "_out", {"X", branch + "_nc"}, branch + "_out");
    }
    AddOutput(b, branch + "_out", -1);
  }
  StatusOr<std::unique_ptr<InferenceSession>> plain = NewSession(m, 0, {});
  StatusOr<std::unique_ptr<InferenceSession>> folded = NewSession(m, 99, {});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_EQ(folded.value()->folding().nodes_folded, 4u);
  for (float sign : {1.f, -1.f}) {
    auto x = Tensor::Allocate(DataType::kFloat, {2});
    ASSERT_TRUE(x.ok());
    x.value().data<float>()[0] = 0.75f * sign;
    x.value().data<float>()[1] = 1.5f * sign;
    const std::vector<float> a = RunFloat(*plain.value(), "X", x.value());
    const std::vector<float> b = RunFloat(*folded.value(), "X", x.value());
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a, b);
    if (sign > 0) EXPECT_EQ(a, (std::vector<float>{0.75f + 2 - 3.25f, 1.5f + 2 + 4.5f}));
    else EXPECT_EQ(a, (std::vector<float>{-0.75f + 3.25f, -1.5f - 4.5f}));
  }
}

// Y = If(dim 0 of X == 2) then (t := X * C; u := If(flag) then t + 1 else t - 1; outputs u and C) else (X, X)
//     + If(flag) then Neg(X) (a value also named "t") else X.
// The constant condition makes the first If its then branch, whose "t" moves to the main graph under a fresh name
// (the sibling branch's "t" would shadow it) that the nested If (run at run time: flag is an input) reads; its
// outputs take the If's names, C through an Identity.
onnx::ModelProto ConstantIfModel() {
  onnx::ModelProto m = NewModel("const_if", 13);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {"2"});
  AddInput(g, "flag", {}, onnx::TensorProto::BOOL);
  AddOutput(g, "Y", 1);
  AddOutput(g, "Z2", 1);
  testing::AddWeight(g, "C", {3.25f, -4.5f});
  testing::AddWeight(g, "one", {1});
  AddInt64Init(g, "zero_i", {}, {0});
  AddInt64Init(g, "two", {}, {2});
  AddNode(g, "Shape", "shape", {"X"}, "sx");
  AddNode(g, "Gather", "dim0", {"sx", "zero_i"}, "n");
  AddNode(g, "Equal", "is_two", {"n", "two"}, "cond");
  // w = If(flag) then Neg(X) (named "t") else X: a sibling scope that defines "t" too.
  auto* other = AddNode(g, "If", "other", {"flag"}, "w");
  for (const std::string branch : {"then_branch", "else_branch"}) {
    auto* b = AddBranch(other, branch, "other_" + branch);
    const std::string out = branch == "then_branch" ? "t" : "x_copy";
    AddNode(b, branch == "then_branch" ? "Neg" : "Identity", "other_" + branch, {"X"}, out);
    AddOutput(b, out, -1);
  }
  auto* iff = AddNode(g, "If", "if", {"cond"}, "Z");
  iff->add_output("Z2");
  for (const std::string branch : {"then_branch", "else_branch"}) {
    auto* b = AddBranch(iff, branch, branch);
    if (branch == "else_branch") {
      AddNode(b, "Identity", "else_id", {"X"}, "e1");
      AddOutput(b, "e1", -1);
      AddOutput(b, "X", -1);
      continue;
    }
    AddNode(b, "Mul", "mul", {"X", "C"}, "t");
    auto* inner = AddNode(b, "If", "inner", {"flag"}, "u");
    for (const std::string ib : {"then_branch", "else_branch"}) {
      auto* ig = AddBranch(inner, ib, "inner_" + ib);
      AddNode(ig, ib == "then_branch" ? "Add" : "Sub", "inner_" + ib, {"t", "one"}, "inner_" + ib + "_out");
      AddOutput(ig, "inner_" + ib + "_out", -1);
    }
    AddOutput(b, "u", -1);
    AddOutput(b, "C", -1);
  }
  AddNode(g, "Add", "add", {"Z", "w"}, "Y");
  return m;
}

TEST(ConstantFoldingTest, AnIfWithAConstantConditionBecomesItsBranch) {
  const onnx::ModelProto m = ConstantIfModel();
  StatusOr<std::unique_ptr<InferenceSession>> plain = NewSession(m, 0, {});
  StatusOr<std::unique_ptr<InferenceSession>> folded = NewSession(m, 99, {});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  const Graph& g = *folded.value()->model().graph;
  // Shape, Gather, Equal fold; the outer If becomes Mul, the inner If and an Identity copying C to Z2.
  EXPECT_EQ(OpTypes(g), (std::vector<std::string>{"If", "Mul", "If", "Identity", "Add"}));
  const Node& mul = g.nodes[1];
  ASSERT_EQ(mul.outputs.size(), 1u);
  EXPECT_NE(mul.outputs[0], "t");  // the sibling branch's "t" keeps its name; the inlined one gets a fresh one
  const Node& inner = g.nodes[2];
  EXPECT_EQ(inner.outputs, (std::vector<std::string>{"Z"}));
  for (const char* b : {"then_branch", "else_branch"}) {
    ASSERT_TRUE(inner.attr(b) && inner.attr(b)->g);
    EXPECT_EQ(inner.attr(b)->g->nodes[0].inputs[0], mul.outputs[0]) << b;
    EXPECT_EQ(inner.attr(b)->g->parent, &g) << b;
  }
  EXPECT_EQ(g.nodes[3].inputs, (std::vector<std::string>{"C"}));
  EXPECT_EQ(g.nodes[3].outputs, (std::vector<std::string>{"Z2"}));
  // The proto (what context models are written from) says the same.
  const onnx::GraphProto& gp = folded.value()->model().proto->graph();
  ASSERT_EQ(gp.node_size(), 5);
  EXPECT_EQ(gp.node(1).output(0), mul.outputs[0]);
  EXPECT_EQ(gp.node(2).op_type(), "If");
  EXPECT_EQ(gp.node(2).attribute(0).g().node(0).input(0), mul.outputs[0]);
  for (const bool flag : {true, false}) {
    auto x = Tensor::Allocate(DataType::kFloat, {2});
    auto f = Tensor::Allocate(DataType::kBool, {});
    ASSERT_TRUE(x.ok() && f.ok());
    x.value().data<float>()[0] = 0.5f;
    x.value().data<float>()[1] = -2.0f;
    f.value().data<bool>()[0] = flag;
    std::vector<IValue> a, b;
    ASSERT_TRUE(plain.value()->Run({"X", "flag"}, {IValue(x.value()), IValue(f.value())}, {}, &a).ok());
    Status st = folded.value()->Run({"X", "flag"}, {IValue(x.value()), IValue(f.value())}, {}, &b);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(a.size(), 2u);
    ASSERT_EQ(b.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      const Tensor& ta = a[k].tensor();
      const Tensor& tb = b[k].tensor();
      EXPECT_EQ(std::vector<float>(ta.data<float>(), ta.data<float>() + ta.NumElements()),
                std::vector<float>(tb.data<float>(), tb.data<float>() + tb.NumElements()));
    }
    // Y = X * C + 1 - X (flag) or X * C - 1 + X
    const float d = flag ? 1.f : -1.f;
    const Tensor& y = b[0].tensor();
    EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + 2),
              (std::vector<float>{0.5f * 3.25f + d - d * 0.5f, -2.0f * -4.5f + d + d * 2.0f}));
  }
}

void AddIntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// Y = If(flag) then Relu(If(X.shape[1] == 1) then Squeeze(X, [1]) else X) * If(X.shape[0] == 1) then 2 else 3
//     else Squeeze(Neg(X), [1]), with X float[N, 1] and N free (Silero VAD's bodies test static dims like this).
// The inner If on the static dim 1 folds into its branch inside the outer body, so the Relu there reads a value of
// rank 1 whose dim is the enclosing graph's symbol N; the one on the free dim 0 stays.
onnx::ModelProto StaticDimIfInBodyModel() {
  onnx::ModelProto m = NewModel("static_dim_if", 11);  // Squeeze's axes an attribute, as shape inference needs them
  auto* g = m.mutable_graph();
  AddInput(g, "X", {"N", "1"});
  AddInput(g, "flag", {}, onnx::TensorProto::BOOL);
  AddOutput(g, "Y", 1);
  auto* outer = AddNode(g, "If", "outer", {"flag"}, "Y");
  auto* then_b = AddBranch(outer, "then_branch", "outer_then");
  AddOutput(then_b, "y_then", -1);
  AddInt64Constant(then_b, "idx1", {1}, {1});
  AddInt64Constant(then_b, "idx0", {1}, {0});
  AddInt64Constant(then_b, "one", {1}, {1});
  AddNode(then_b, "Shape", "shape", {"X"}, "s");
  AddNode(then_b, "Gather", "gather1", {"s", "idx1"}, "d1");
  AddNode(then_b, "Equal", "eq1", {"d1", "one"}, "c1");
  auto* inner = AddNode(then_b, "If", "inner", {"c1"}, "x1");
  auto* sq = AddBranch(inner, "then_branch", "inner_then");
  AddOutput(sq, "x_sq", -1);
  AddIntsAttr(AddNode(sq, "Squeeze", "squeeze", {"X"}, "x_sq"), "axes", {1});
  auto* id = AddBranch(inner, "else_branch", "inner_else");
  AddOutput(id, "x_id", -1);
  AddNode(id, "Identity", "identity", {"X"}, "x_id");
  AddNode(then_b, "Relu", "relu", {"x1"}, "r");
  AddNode(then_b, "Gather", "gather0", {"s", "idx0"}, "d0");
  AddNode(then_b, "Equal", "eq0", {"d0", "one"}, "c0");
  auto* free_if = AddNode(then_b, "If", "on_free_dim", {"c0"}, "k");
  for (const auto& [b, v] : {std::pair<const char*, float>{"then_branch", 2.f}, {"else_branch", 3.f}}) {
    auto* kb = AddBranch(free_if, b, std::string("k_") + b);
    AddOutput(kb, std::string("k_") + b, -1);
    auto* c = AddNode(kb, "Constant", std::string("kc_") + b, {}, std::string("k_") + b);
    auto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_float_data(v);
  }
  AddNode(then_b, "Mul", "scale", {"r", "k"}, "y_then");
  auto* else_b = AddBranch(outer, "else_branch", "outer_else");
  AddOutput(else_b, "y_else", -1);
  AddNode(else_b, "Neg", "neg", {"X"}, "nx");
  AddIntsAttr(AddNode(else_b, "Squeeze", "squeeze_neg", {"nx"}, "y_else"), "axes", {1});
  return m;
}

TEST(ConstantFoldingTest, AnIfOnAStaticDimInABodyBecomesItsBranchWithTheOuterSymbolicShape) {
  const onnx::ModelProto m = StaticDimIfInBodyModel();
  StatusOr<std::unique_ptr<InferenceSession>> plain = NewSession(m, 0, {});
  StatusOr<std::unique_ptr<InferenceSession>> folded = NewSession(m, 1, {});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  const Graph& g = *folded.value()->model().graph;
  ASSERT_EQ(OpTypes(g), (std::vector<std::string>{"If"}));
  const Attribute* then_attr = g.nodes[0].attr("then_branch");
  ASSERT_TRUE(then_attr && then_attr->g);
  const Graph& body = *then_attr->g;
  // Shape, both Gathers' static one and Equal of dim 1 fold; the If on dim 1 is its Squeeze; the Gather of the free
  // dim 0 and its If stay.
  EXPECT_EQ(OpTypes(body), (std::vector<std::string>{"Shape", "Squeeze", "Relu", "Gather", "Equal", "If", "Mul"}));
  EXPECT_EQ(body.parent, &g);
  // The Relu reads a rank-1 value whose dim is the enclosing graph's free dim N (it had no rank while the If stayed:
  // its branches give ranks 1 and 2).
  const ValueType* t = body.FindType(body.nodes[2].inputs[0]);
  ASSERT_TRUE(t && t->has_shape) << TypeOf(body, body.nodes[2].inputs[0]);
  ASSERT_EQ(t->dims.size(), 1u) << TypeOf(body, body.nodes[2].inputs[0]);
  EXPECT_FALSE(t->dims[0].known());
  EXPECT_EQ(t->dims[0].symbol, "N");
  // The same values as without folding, at sizes of N that take each branch of the If on the free dim.
  for (const int64_t n : {1, 3}) {
    for (const bool flag : {true, false}) {
      auto x = Tensor::Allocate(DataType::kFloat, {n, 1});
      auto f = Tensor::Allocate(DataType::kBool, {});
      ASSERT_TRUE(x.ok() && f.ok());
      for (int64_t i = 0; i < n; ++i) x.value().data<float>()[i] = static_cast<float>(i) - 0.5f;
      f.value().data<bool>()[0] = flag;
      std::vector<IValue> a, b;
      ASSERT_TRUE(plain.value()->Run({"X", "flag"}, {IValue(x.value()), IValue(f.value())}, {}, &a).ok());
      Status st = folded.value()->Run({"X", "flag"}, {IValue(x.value()), IValue(f.value())}, {}, &b);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(b.size(), 1u);
      const Tensor& y = b[0].tensor();
      ASSERT_EQ(y.shape(), (Shape{n}));
      std::vector<float> want;
      for (int64_t i = 0; i < n; ++i) {
        const float xi = static_cast<float>(i) - 0.5f;
        want.push_back(flag ? std::max(xi, 0.f) * (n == 1 ? 2.f : 3.f) : -xi);
      }
      EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + n), want) << "N " << n << " flag " << flag;
      const Tensor& ya = a[0].tensor();
      EXPECT_EQ(std::vector<float>(ya.data<float>(), ya.data<float>() + ya.NumElements()), want);
    }
  }
}

TEST(ConstantFoldingTest, CompiledModelsAreNotFolded) {
  Model model;
  model.graph = std::make_shared<Graph>();
  Node c;
  c.op_type = "Constant";
  c.outputs = {"c"};
  Attribute v;
  v.name = "value_float";
  v.type = Attribute::Type::kFloat;
  v.f = 1;
  c.attributes["value_float"] = v;
  Node ctx;
  ctx.op_type = "EPContext";
  ctx.domain = "com.microsoft";
  ctx.inputs = {"c"};
  ctx.outputs = {"y"};
  model.graph->nodes = {c, ctx};
  StatusOr<ConstantFoldingStats> stats = FoldConstants(&model, ConstantFoldingOptions());
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats.value().nodes_folded, 0u);
  EXPECT_EQ(model.graph->nodes.size(), 2u);
}

TEST(ConstantFoldingTest, OptimizationLevelZeroKeepsTheGraph) {
  for (int level : {0, 1, 2, 99}) {
    StatusOr<std::unique_ptr<InferenceSession>> s = NewSession(ShapeSubgraphModel(), level, {{"N", 3}});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const size_t nodes = s.value()->model().graph->nodes.size();
    if (level == 0) {
      EXPECT_EQ(nodes, 20u);
      EXPECT_EQ(s.value()->folding().nodes_folded, 0u);
    } else {
      EXPECT_EQ(nodes, 3u) << "level " << level;
    }
  }
}

TEST(ConstantFoldingTest, FoldedOutputsEqualUnfoldedOnes) {
  // The shape subgraph, plus float work on constants whose rounding must be the CPU kernels' (Sqrt, Div, Exp).
  onnx::ModelProto m = ShapeSubgraphModel();
  auto* g = m.mutable_graph();
  testing::AddWeight(g, "a", {2.f, 3.f, 5.f, 7.f});
  testing::AddWeight(g, "b", {0.1f, 0.3f, 0.7f, 1.1f});
  AddNode(g, "Sqrt", "sqrt", {"a"}, "sa");
  AddNode(g, "Div", "div", {"sa", "b"}, "q");
  AddNode(g, "Exp", "exp", {"b"}, "eb");
  AddNode(g, "Sub", "sub", {"q", "eb"}, "k");
  AddNode(g, "Mul", "mul", {"xa", "k"}, "Z");
  AddOutput(g, "Z", 2);
  auto x = Tensor::Allocate(DataType::kFloat, {3, 4});
  ASSERT_TRUE(x.ok());
  for (int i = 0; i < 12; ++i) x.value().data<float>()[i] = 0.37f * static_cast<float>(i) - 1.9f;
  StatusOr<std::unique_ptr<InferenceSession>> plain = NewSession(m, 0, {{"N", 3}});
  StatusOr<std::unique_ptr<InferenceSession>> folded = NewSession(m, 99, {{"N", 3}});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_EQ(folded.value()->model().graph->nodes.size(), 4u);  // Add, Reshape, Relu, Mul
  for (const char* out : {"Y", "Z"}) {
    std::vector<IValue> a, b;
    ASSERT_TRUE(plain.value()->Run({"X"}, {IValue(x.value())}, {out}, &a).ok());
    ASSERT_TRUE(folded.value()->Run({"X"}, {IValue(x.value())}, {out}, &b).ok());
    const Tensor& ta = a[0].tensor();
    const Tensor& tb = b[0].tensor();
    ASSERT_EQ(ta.shape(), tb.shape()) << out;
    EXPECT_EQ(std::memcmp(ta.raw_data(), tb.raw_data(), ta.SizeInBytes()), 0) << out << " differs bit for bit";
  }
  std::vector<float> y = RunFloat(*folded.value(), "X", x.value());
  ASSERT_EQ(y.size(), 12u);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(y[i], std::max(0.f, x.value().data<float>()[i] + static_cast<float>(i % 4))) << i;
  // Another batch size than the pinned one is refused, as before folding.
  auto x2 = Tensor::Allocate(DataType::kFloat, {2, 4});
  std::vector<IValue> out;
  EXPECT_FALSE(folded.value()->Run({"X"}, {IValue(x2.value())}, {}, &out).ok());
}

}  // namespace
}  // namespace epctx
