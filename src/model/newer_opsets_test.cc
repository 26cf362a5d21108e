// The loader's reach beyond libonnx 1.12 (issue 25): IR 9-13 and opsets 18-26 as ONNX Runtime 1.30 reads them, the
// schemas of schemas_18_26.h with their shape inference, model-local functions (functions.h) and the element types
// the runtime does not run (tensor_proto.h CheckElementTypes).
#include <gtest/gtest.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <google/protobuf/unknown_field_set.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/model.h"
#include "model/schemas_18_26.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using testing::AddNode;
using testing::AddTensorValueInfo;
using testing::NewModel;
using testing::Serialize;

StatusOr<std::shared_ptr<Model>> Load(const onnx::ModelProto& m) {
  const std::string bytes = Serialize(m);
  return LoadModelFromBytes(bytes.data(), bytes.size(), ModelLoadOptions{});
}

void AddInt64Initializer(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& values,
                         bool scalar = false) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  if (!scalar) t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
}

void AddFloatInitializer(onnx::GraphProto* g, const std::string& name, const std::vector<float>& values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (float v : values) t->add_float_data(v);
}

void SetInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void SetInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void SetString(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// The values a test reads stay intermediate (their shapes come from inference; the checker wants a shape on every
// graph output): the graph's one output is a copy of input `x` of shape `dims`.
void AddPassThrough(onnx::GraphProto* g, const std::string& x, const std::vector<int64_t>& dims) {
  AddNode(g, "Identity", "pass_through", {x}, "Out");
  AddTensorValueInfo(g->add_output(), "Out", dims);
}

// "[2,?,4]" for a value's inferred shape; "none" without one.
std::string ShapeOf(const Model& m, const std::string& value) {
  const ValueType* t = m.graph->FindType(value);
  if (!t || !t->has_shape) return "none";
  std::string s = "[";
  for (size_t k = 0; k < t->dims.size(); ++k) {
    if (k) s += ",";
    s += t->dims[k].known() ? std::to_string(t->dims[k].value) : "?";
  }
  return s + "]";
}

DataType TypeOf(const Model& m, const std::string& value) {
  const ValueType* t = m.graph->FindType(value);
  return t ? t->elem_type : DataType::kUndefined;
}

onnx::ModelProto ReluModel(int64_t ir, int opset) {
  onnx::ModelProto m = NewModel("relu", opset);
  m.set_ir_version(ir);
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {2, 3});
  AddNode(g, "Relu", "relu", {"X"}, "Y");
  AddTensorValueInfo(g->add_output(), "Y", {2, 3});
  return m;
}

TEST(NewerOpsets, ReadsIr13AndOpset26AsOnnxRuntime130) {
  for (int64_t ir = 9; ir <= 13; ++ir) {
    auto m = Load(ReluModel(ir, 26));
    ASSERT_TRUE(m.ok()) << "IR " << ir << ": " << m.status().ToString();
    EXPECT_EQ(m.value()->ir_version, ir);
  }
  for (int opset = 18; opset <= 26; ++opset) {
    auto m = Load(ReluModel(10, opset));
    ASSERT_TRUE(m.ok()) << "opset " << opset << ": " << m.status().ToString();
    EXPECT_EQ(ShapeOf(*m.value(), "Y"), "[2,3]");
  }
}

TEST(NewerOpsets, RefusesIr14Opset27AndAiOnnxMl6NamingTheLimit) {
  auto ir14 = Load(ReluModel(14, 26));
  ASSERT_FALSE(ir14.ok());
  EXPECT_EQ(ir14.status().code(), ErrorCode::INVALID_GRAPH);
  EXPECT_NE(ir14.status().message().find(
                "model (from memory) has IR version 14; epctx reads IR versions 3 to 13, as ONNX Runtime 1.30"),
            std::string::npos)
      << ir14.status().ToString();

  auto opset27 = Load(ReluModel(13, 27));
  ASSERT_FALSE(opset27.ok());
  EXPECT_EQ(opset27.status().code(), ErrorCode::INVALID_GRAPH);
  EXPECT_NE(opset27.status().message().find(
                "model (from memory) uses ONNX opset 27; epctx reads opsets 1 to 26, as ONNX Runtime 1.30"),
            std::string::npos)
      << opset27.status().ToString();

  onnx::ModelProto ml = ReluModel(13, 26);
  auto* os = ml.add_opset_import();
  os->set_domain("ai.onnx.ml");
  os->set_version(6);
  auto ml6 = Load(ml);
  ASSERT_FALSE(ml6.ok());
  EXPECT_NE(ml6.status().message().find("uses ai.onnx.ml opset 6; epctx reads ai.onnx.ml opsets 1 to 5"),
            std::string::npos)
      << ml6.status().ToString();
  os->set_version(5);
  EXPECT_TRUE(Load(ml).ok());
}

TEST(NewerOpsets, SchemasOfChangedAndNewOpVersionsAreRegistered) {
  RegisterNewerOpsetSchemas();
  const std::vector<std::pair<const char*, int>> registered = {
      {"ReduceMean", 18}, {"ReduceMax", 20},        {"Split", 18},           {"Pad", 18},
      {"Resize", 19},     {"LpPool", 18},           {"AveragePool", 19},     {"Cast", 19},
      {"Cast", 24},       {"CastLike", 19},         {"QuantizeLinear", 21},  {"DequantizeLinear", 21},
      {"BitwiseAnd", 18}, {"Mish", 18},             {"GroupNormalization", 21}, {"CenterCropPad", 18},
      {"Col2Im", 18},     {"DFT", 20},              {"AffineGrid", 20},      {"GridSample", 20},
      {"Gelu", 20},       {"DeformConv", 19},       {"RMSNormalization", 23}, {"RotaryEmbedding", 23},
      {"Attention", 24},  {"Swish", 24},            {"TensorScatter", 24},   {"CumProd", 26}};
  for (const auto& [op, version] : registered) {
    const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(op, 26, "");
    ASSERT_NE(s, nullptr) << op;
    const onnx::OpSchema* at = onnx::OpSchemaRegistry::Schema(op, version, "");
    ASSERT_NE(at, nullptr) << op;
    EXPECT_EQ(at->SinceVersion(), version) << op;
  }
  // Below opset 18 the registry still answers with libonnx's own schemas.
  EXPECT_EQ(onnx::OpSchemaRegistry::Schema("ReduceMean", 17, "")->SinceVersion(), 13);
  EXPECT_EQ(onnx::OpSchemaRegistry::Schema("Split", 17, "")->SinceVersion(), 13);
  EXPECT_EQ(onnx::OpSchemaRegistry::Schema("Relu", 26, "")->SinceVersion(), 14);
}

// ReduceMean-18: axes an input. Constant axes give the exact shape; run-time axes keep the rank with keepdims and
// give no shape without.
TEST(NewerOpsets, ReduceAxesInputShapes) {
  onnx::ModelProto m = NewModel("reduce", 18);
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {2, 3, 4});
  AddTensorValueInfo(g->add_input(), "A", {1}, onnx::TensorProto::INT64);
  AddInt64Initializer(g, "axes", {1});
  SetInt(AddNode(g, "ReduceMean", "const_axes", {"X", "axes"}, "Y0"), "keepdims", 0);
  AddNode(g, "ReduceMean", "runtime_axes_keep", {"X", "A"}, "Y1");
  SetInt(AddNode(g, "ReduceMean", "runtime_axes_drop", {"X", "A"}, "Y2"), "keepdims", 0);
  AddNode(g, "ReduceMax", "all_axes", {"X"}, "Y3");
  SetInt(AddNode(g, "ReduceSumSquare", "noop", {"X"}, "Y4"), "noop_with_empty_axes", 1);
  AddPassThrough(g, "X", {2, 3, 4});
  auto loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Model& model = *loaded.value();
  EXPECT_EQ(ShapeOf(model, "Y0"), "[2,4]");
  EXPECT_EQ(ShapeOf(model, "Y1"), "[?,?,?]");
  EXPECT_EQ(ShapeOf(model, "Y2"), "none");
  EXPECT_EQ(ShapeOf(model, "Y3"), "[1,1,1]");
  EXPECT_EQ(ShapeOf(model, "Y4"), "[2,3,4]");
  EXPECT_EQ(TypeOf(model, "Y0"), DataType::kFloat);
}

TEST(NewerOpsets, SplitPadResizeShapes) {
  onnx::ModelProto m = NewModel("shapes", 19);
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {7, 3});
  AddTensorValueInfo(g->add_input(), "I", {1, 1, 4, 4});
  // Split-18 num_outputs=3 of 7: ceil(7/3) = 3, 3, then 1.
  auto* split = g->add_node();
  split->set_op_type("Split");
  split->set_name("split");
  split->add_input("X");
  for (const char* o : {"S0", "S1", "S2"}) split->add_output(o);
  SetInt(split, "num_outputs", 3);
  SetInt(split, "axis", 0);
  // Pad-18 with axes: pads [1, 2] on axis 1 only.
  AddInt64Initializer(g, "pads", {1, 2});
  AddInt64Initializer(g, "pad_axes", {-1});
  SetString(AddNode(g, "Pad", "pad", {"X", "pads", "", "pad_axes"}, "P"), "mode", "reflect");
  // Resize-19 with axes [2, 3] and sizes [8, 6].
  AddInt64Initializer(g, "sizes", {8, 6});
  auto* resize = AddNode(g, "Resize", "resize", {"I", "", "", "sizes"}, "R");
  SetInts(resize, "axes", {2, 3});
  SetInt(resize, "antialias", 1);
  SetString(resize, "mode", "linear");
  // Resize-19 with scales [2, 0.5] on axes [2, 3].
  AddFloatInitializer(g, "scales", {2.0f, 0.5f});
  SetInts(AddNode(g, "Resize", "resize_scales", {"I", "", "scales"}, "RS"), "axes", {2, 3});
  // keep_aspect_ratio_policy with sizes [8, 6] on 4 x 4: one scale, min (1.5) or max (2) of sizes / input.
  auto* keep = AddNode(g, "Resize", "resize_keep", {"I", "", "", "sizes"}, "RK");
  SetInts(keep, "axes", {2, 3});
  SetString(keep, "keep_aspect_ratio_policy", "not_larger");
  auto* keep_big = AddNode(g, "Resize", "resize_keep_big", {"I", "", "", "sizes"}, "RB");
  SetInts(keep_big, "axes", {2, 3});
  SetString(keep_big, "keep_aspect_ratio_policy", "not_smaller");
  AddPassThrough(g, "X", {7, 3});
  auto loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Model& model = *loaded.value();
  EXPECT_EQ(ShapeOf(model, "S0"), "[3,3]");
  EXPECT_EQ(ShapeOf(model, "S1"), "[3,3]");
  EXPECT_EQ(ShapeOf(model, "S2"), "[1,3]");
  EXPECT_EQ(ShapeOf(model, "P"), "[7,6]");
  EXPECT_EQ(ShapeOf(model, "R"), "[1,1,8,6]");
  EXPECT_EQ(ShapeOf(model, "RS"), "[1,1,8,2]");
  EXPECT_EQ(ShapeOf(model, "RK"), "[1,1,6,6]");
  EXPECT_EQ(ShapeOf(model, "RB"), "[1,1,8,8]");
}

TEST(NewerOpsets, DftPoolQuantizeAndNewOpShapes) {
  onnx::ModelProto m = NewModel("more", 23);
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "S", {1, 8, 1});
  AddTensorValueInfo(g->add_input(), "X", {1, 2, 9, 9});
  AddTensorValueInfo(g->add_input(), "Q", {2, 4});
  AddTensorValueInfo(g->add_input(), "T", {1, 2, 3});
  AddTensorValueInfo(g->add_input(), "size", {4}, onnx::TensorProto::INT64);
  AddInt64Initializer(g, "dft_axis", {1}, /*scalar=*/true);
  AddInt64Initializer(g, "dft_length", {8}, /*scalar=*/true);
  SetInt(AddNode(g, "DFT", "dft", {"S", "dft_length", "dft_axis"}, "F"), "onesided", 1);
  // An optional input given as "" looks like an input of unknown type to libonnx: the length is left unknown.
  SetInt(AddNode(g, "DFT", "dft_no_length", {"S", "", "dft_axis"}, "F2"), "onesided", 1);
  auto* pool = AddNode(g, "AveragePool", "pool", {"X"}, "AP");
  SetInts(pool, "kernel_shape", {3, 3});
  SetInts(pool, "dilations", {2, 2});
  auto* plain = AddNode(g, "AveragePool", "pool_plain", {"X"}, "AP1");
  SetInts(plain, "kernel_shape", {3, 3});
  auto* ceil = AddNode(g, "AveragePool", "pool_ceil", {"X"}, "AP2");
  SetInts(ceil, "kernel_shape", {3, 3});
  SetInts(ceil, "strides", {2, 2});
  SetInts(ceil, "pads", {0, 0, 1, 1});
  SetInt(ceil, "ceil_mode", 1);
  AddFloatInitializer(g, "qscale", {0.5f});
  SetInt(AddNode(g, "QuantizeLinear", "quant", {"Q", "qscale"}, "QY"), "output_dtype", onnx::TensorProto::INT8);
  AddNode(g, "Gelu", "gelu", {"Q"}, "G");
  AddFloatInitializer(g, "rms_scale", {1, 1, 1, 1});
  AddNode(g, "RMSNormalization", "rms", {"Q", "rms_scale"}, "N");
  AddNode(g, "Mish", "mish", {"Q"}, "M");
  AddNode(g, "AffineGrid", "grid", {"T", "size"}, "AG");
  AddPassThrough(g, "Q", {2, 4});
  auto loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Model& model = *loaded.value();
  EXPECT_EQ(ShapeOf(model, "F"), "[1,5,2]");      // onesided: 8 / 2 + 1
  EXPECT_EQ(ShapeOf(model, "F2"), "[1,?,2]");
  EXPECT_EQ(ShapeOf(model, "AP"), "[1,2,5,5]");   // dilated: extent (3 - 1) * 2 + 1 = 5, 9 - 5 + 1
  EXPECT_EQ(ShapeOf(model, "AP2"), "[1,2,5,5]");  // ceil_mode: ceil((9 + 1 - 3) / 2) + 1 (floor would give 4)
  EXPECT_EQ(ShapeOf(model, "AP1"), "[1,2,7,7]");  // libonnx's opset-11 rule
  EXPECT_EQ(ShapeOf(model, "QY"), "[2,4]");
  EXPECT_EQ(TypeOf(model, "QY"), DataType::kInt8);
  for (const char* y : {"G", "N", "M"}) EXPECT_EQ(ShapeOf(model, y), "[2,4]") << y;
  EXPECT_EQ(ShapeOf(model, "AG"), "[?,?,?,2]");  // size known only at run time: rank 4, last dim 2
}

TEST(NewerOpsets, ChangedSignatureIsCheckedAgainstItsOwnVersion) {
  // num_outputs is an attribute of Split from opset 18 only: at 17 the checker refuses it, naming the node.
  for (int opset : {17, 18}) {
    onnx::ModelProto m = NewModel("split", opset);
    auto* g = m.mutable_graph();
    AddTensorValueInfo(g->add_input(), "X", {4});
    auto* n = AddNode(g, "Split", "the_split", {"X"}, "A");
    n->add_output("B");
    SetInt(n, "num_outputs", 2);
    AddTensorValueInfo(g->add_output(), "A", {2});
    AddTensorValueInfo(g->add_output(), "B", {2});
    auto loaded = Load(m);
    if (opset == 18) {
      EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
    } else {
      ASSERT_FALSE(loaded.ok());
      EXPECT_EQ(loaded.status().code(), ErrorCode::INVALID_GRAPH);
      EXPECT_NE(loaded.status().message().find("num_outputs"), std::string::npos) << loaded.status().ToString();
      EXPECT_NE(loaded.status().message().find("the_split"), std::string::npos) << loaded.status().ToString();
    }
  }
}

// An op of opsets 18-26 that epctx has no schema for (ImageDecoder-20, which ONNX Runtime 1.30 does not run on CPU
// either) is refused by the checker, naming the op, the opset and the node.
TEST(NewerOpsets, OpWithoutSchemaIsRefusedNamingTheNode) {
  onnx::ModelProto m = NewModel("image", 20);
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "B", {16}, onnx::TensorProto::UINT8);
  AddNode(g, "ImageDecoder", "decode_png", {"B"}, "I");
  AddTensorValueInfo(g->add_output(), "I", {4, 4, 3}, onnx::TensorProto::UINT8);
  auto loaded = Load(m);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), ErrorCode::INVALID_GRAPH);
  for (const char* part : {"ImageDecoder", "20", "decode_png"})
    EXPECT_NE(loaded.status().message().find(part), std::string::npos) << part << ": " << loaded.status().ToString();
}

// The string ops of opset 20 and BitCast-26 have schemas: their types and shapes are inferred. (A BitCast between
// element types of different widths fails inference, which the loader does not treat as fatal; the kernel refuses it
// at session creation: Opset26Test.CumProdAndBitCast.)
TEST(NewerOpsets, StringOpsAndBitCastShapes) {
  onnx::ModelProto m = NewModel("strings", 26);
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "S", {2, 3}, onnx::TensorProto::STRING);
  AddTensorValueInfo(g->add_input(), "S1", {3}, onnx::TensorProto::STRING);
  AddTensorValueInfo(g->add_input(), "F", {2, 4});
  AddNode(g, "StringConcat", "join", {"S", "S1"}, "J");
  SetString(AddNode(g, "RegexFullMatch", "match", {"S"}, "R"), "pattern", "a.*");
  AddNode(g, "StringSplit", "split", {"S"}, "P")->add_output("C");
  SetInt(AddNode(g, "BitCast", "bits", {"F"}, "B"), "to", onnx::TensorProto::INT32);
  AddTensorValueInfo(g->add_output(), "J", {2, 3}, onnx::TensorProto::STRING);
  auto loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Model& model = *loaded.value();
  EXPECT_EQ(ShapeOf(model, "J"), "[2,3]");
  EXPECT_EQ(ShapeOf(model, "R"), "[2,3]");
  EXPECT_EQ(TypeOf(model, "R"), DataType::kBool);
  EXPECT_EQ(ShapeOf(model, "P"), "[2,3,?]");  // the largest piece count is known only from the data
  EXPECT_EQ(ShapeOf(model, "C"), "[2,3]");
  EXPECT_EQ(TypeOf(model, "C"), DataType::kInt64);
  EXPECT_EQ(ShapeOf(model, "B"), "[2,4]");
  EXPECT_EQ(TypeOf(model, "B"), DataType::kInt32);

}

TEST(NewerOpsets, NewerElementTypesAreRefusedNamingTheValueAndType) {
  onnx::ModelProto m = ReluModel(13, 25);
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(25);
  auto in = Load(m);
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().code(), ErrorCode::INVALID_GRAPH);
  EXPECT_NE(in.status().message().find("graph input 'X' has element type uint2 (25), which epctx does not run"),
            std::string::npos)
      << in.status().ToString();
  // float8e8m0 (24, IR 12) is refused too; the float8 types 17-20 and int4/uint4 (21, 22) are not (next tests).
  onnx::ModelProto e8m0 = ReluModel(12, 24);
  e8m0.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(24);
  auto o = Load(e8m0);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("graph output 'Y' has element type float8e8m0 (24)"), std::string::npos)
      << o.status().ToString();

  onnx::ModelProto cast = ReluModel(13, 25);
  auto* g = cast.mutable_graph();
  SetInt(AddNode(g, "Cast", "to_int2", {"Y"}, "Z"), "to", 26);
  auto c = Load(cast);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("node 'to_int2' (Cast) attribute 'to' names element type int2 (26)"),
            std::string::npos)
      << c.status().ToString();

  onnx::ModelProto init = ReluModel(11, 23);
  auto* t = init.mutable_graph()->add_initializer();
  t->set_name("W");
  t->set_data_type(23);
  t->add_dims(2);
  t->set_raw_data(std::string(1, '\0'));
  auto i = Load(init);
  ASSERT_FALSE(i.ok());
  EXPECT_NE(i.status().message().find("initializer 'W' has element type float4e2m1 (23)"), std::string::npos)
      << i.status().ToString();
}

// float8 (IR 9, opset 19): the checker passes them (libonnx 1.12 does not know the types), shape inference gives Cast's
// output the type `to` names with the input's shape, and initializers read from raw_data or int32_data (one code per
// int32). Values of the types read back as the runtime's float8 types.
TEST(NewerOpsets, Float8ModelsLoadWithTheirElementTypes) {
  onnx::ModelProto m = NewModel("float8", 19);
  m.set_ir_version(9);
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {2, 3});
  SetInt(AddNode(g, "Cast", "to_e4m3", {"X"}, "F8"), "to", 17);
  SetInt(AddNode(g, "Cast", "to_e5m2fnuz", {"F8"}, "G8"), "to", 20);
  AddNode(g, "Identity", "copy", {"G8"}, "H8");
  SetInt(AddNode(g, "Cast", "back", {"H8"}, "Y"), "to", onnx::TensorProto::FLOAT);
  AddTensorValueInfo(g->add_output(), "Y", {2, 3});
  auto* raw = g->add_initializer();  // e5m2 1.0 (0x3C) and -2.0 (0xC0)
  raw->set_name("R");
  raw->set_data_type(19);
  raw->add_dims(2);
  raw->set_raw_data(std::string("\x3c\xc0", 2));
  auto* ints = g->add_initializer();  // e4m3fnuz 1.0 (0x40), the NaN code 0x80
  ints->set_name("I");
  ints->set_data_type(18);
  ints->add_dims(2);
  ints->add_int32_data(0x40);
  ints->add_int32_data(0x80);
  auto loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Model& model = *loaded.value();
  EXPECT_EQ(TypeOf(model, "F8"), DataType::kFloat8E4M3FN);
  EXPECT_EQ(TypeOf(model, "G8"), DataType::kFloat8E5M2FNUZ);
  EXPECT_EQ(TypeOf(model, "H8"), DataType::kFloat8E5M2FNUZ);
  EXPECT_EQ(ShapeOf(model, "H8"), "[2,3]");
  EXPECT_EQ(TypeOf(model, "Y"), DataType::kFloat);
  const Tensor& r = model.graph->initializers.at("R");
  ASSERT_EQ(r.dtype(), DataType::kFloat8E5M2);
  EXPECT_EQ(static_cast<float>(r.data<Float8E5M2>()[0]), 1.0f);
  EXPECT_EQ(static_cast<float>(r.data<Float8E5M2>()[1]), -2.0f);
  const Tensor& i = model.graph->initializers.at("I");
  ASSERT_EQ(i.dtype(), DataType::kFloat8E4M3FNUZ);
  EXPECT_EQ(static_cast<float>(i.data<Float8E4M3FNUZ>()[0]), 1.0f);
  EXPECT_TRUE(std::isnan(static_cast<float>(i.data<Float8E4M3FNUZ>()[1])));

  // An int32_data value that is no float8 code is refused, naming the value and the type.
  ints->set_int32_data(1, 300);
  auto bad = Load(m);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::INVALID_GRAPH);
  EXPECT_NE(bad.status().message().find("initializer 'I': int32_data value 300 at index 1 is not a float8e4m3fnuz code"),
            std::string::npos)
      << bad.status().ToString();
}

// int4/uint4 (IR 10, opset 21): initializers packed two per byte in raw_data or one packed byte per int32_data entry
// (onnx.proto), odd counts included; the runtime holds one value per byte. A packed size that does not match the
// shape is refused naming the tensor before anything is copied.
TEST(NewerOpsets, Int4InitializersLoadPackedAndShortDataIsRefused) {
  onnx::ModelProto m = NewModel("int4", 21);
  m.set_ir_version(10);
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {3});
  SetInt(AddNode(g, "Cast", "to_int4", {"X"}, "Q"), "to", 22);
  SetInt(AddNode(g, "Cast", "back", {"Q"}, "Y"), "to", onnx::TensorProto::FLOAT);
  AddTensorValueInfo(g->add_output(), "Y", {3});
  auto* raw = g->add_initializer();  // int4 [-8, -1, 7]: bytes 0xF8, 0x07
  raw->set_name("W");
  raw->set_data_type(22);
  raw->add_dims(3);
  raw->set_raw_data(std::string("\xf8\x07", 2));
  auto* ints = g->add_initializer();  // uint4 [1, 15, 9] as int32_data 0xF1, 0x09
  ints->set_name("U");
  ints->set_data_type(21);
  ints->add_dims(3);
  ints->add_int32_data(0xF1);
  ints->add_int32_data(0x09);
  auto loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(TypeOf(*loaded.value(), "Q"), DataType::kInt4);
  const Tensor& w = loaded.value()->graph->initializers.at("W");
  ASSERT_EQ(w.dtype(), DataType::kInt4);
  ASSERT_EQ(w.NumElements(), 3);
  EXPECT_EQ(w.data<Int4>()[0].value, -8);
  EXPECT_EQ(w.data<Int4>()[1].value, -1);
  EXPECT_EQ(w.data<Int4>()[2].value, 7);
  const Tensor& u = loaded.value()->graph->initializers.at("U");
  ASSERT_EQ(u.dtype(), DataType::kUint4);
  EXPECT_EQ(u.data<UInt4>()[0].value, 1);
  EXPECT_EQ(u.data<UInt4>()[1].value, 15);
  EXPECT_EQ(u.data<UInt4>()[2].value, 9);

  raw->set_raw_data(std::string("\xf8", 1));  // one byte short
  auto short_raw = Load(m);
  ASSERT_FALSE(short_raw.ok());
  EXPECT_EQ(short_raw.status().code(), ErrorCode::INVALID_GRAPH);
  EXPECT_NE(short_raw.status().message().find("initializer 'W': raw_data holds 1 bytes but shape [3] of int4 needs 2"),
            std::string::npos)
      << short_raw.status().ToString();
  raw->set_raw_data(std::string("\xf8\x07", 2));
  ints->add_int32_data(0);  // one entry too many (moved to raw_data for the checker, then size-checked)
  auto long_ints = Load(m);
  ASSERT_FALSE(long_ints.ok());
  EXPECT_NE(long_ints.status().message().find("initializer 'U': raw_data holds 3 bytes but shape [3] of uint4 needs 2"),
            std::string::npos)
      << long_ints.status().ToString();
}

// ---- model-local functions ----

void AddLengthDelimited(google::protobuf::Message* m, int field, const std::string& bytes) {
  m->GetReflection()->MutableUnknownFields(m)->AddLengthDelimited(field, bytes);
}

// my.fns.AddMul(x, y) <alpha = 0.5>: (x + y) * alpha, alpha from a Constant whose value_float references the
// attribute.
onnx::FunctionProto AddMul(int opset, float default_alpha, const std::string& overload = "") {
  onnx::FunctionProto f;
  f.set_name("AddMul");
  f.set_domain("my.fns");
  f.add_input("x");
  f.add_input("y");
  f.add_output("out");
  f.add_attribute("alpha");
  auto* os = f.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  auto* add = f.add_node();
  add->set_op_type("Add");
  add->add_input("x");
  add->add_input("y");
  add->add_output("t");
  auto* c = f.add_node();
  c->set_op_type("Constant");
  c->add_output("c");
  auto* ref = c->add_attribute();
  ref->set_name("value_float");
  ref->set_type(onnx::AttributeProto::FLOAT);
  ref->set_ref_attr_name("alpha");
  auto* mul = f.add_node();
  mul->set_op_type("Mul");
  mul->add_input("t");
  mul->add_input("c");
  mul->add_output("out");
  onnx::AttributeProto def;
  def.set_name("alpha");
  def.set_type(onnx::AttributeProto::FLOAT);
  def.set_f(default_alpha);
  AddLengthDelimited(&f, 11, def.SerializeAsString());  // FunctionProto.attribute_proto (IR 9)
  if (!overload.empty()) AddLengthDelimited(&f, 13, overload);  // FunctionProto.overload (IR 10)
  return f;
}

onnx::NodeProto* Call(onnx::GraphProto* g, const std::string& fn, const std::string& name,
                      const std::vector<std::string>& inputs, const std::string& output) {
  auto* n = AddNode(g, fn, name, inputs, output);
  n->set_domain("my.fns");
  return n;
}

void SetFloat(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

TEST(ModelFunctions, InlinedWithAttributesDefaultsNestingAndFreshNames) {
  onnx::ModelProto m = NewModel("functions", 18);
  m.set_ir_version(10);
  auto* os = m.add_opset_import();
  os->set_domain("my.fns");
  os->set_version(1);
  *m.add_functions() = AddMul(18, 0.5f);
  // my.fns.Outer(x) <beta>: AddMul<alpha = @beta>(x, x).
  onnx::FunctionProto outer;
  outer.set_name("Outer");
  outer.set_domain("my.fns");
  outer.add_input("x");
  outer.add_output("o");
  outer.add_attribute("beta");
  auto* oi = outer.add_opset_import();
  oi->set_domain("my.fns");
  oi->set_version(1);
  auto* inner = outer.add_node();
  inner->set_op_type("AddMul");
  inner->set_domain("my.fns");
  inner->add_input("x");
  inner->add_input("x");
  inner->add_output("o");
  auto* ref = inner->add_attribute();
  ref->set_name("alpha");
  ref->set_type(onnx::AttributeProto::FLOAT);
  ref->set_ref_attr_name("beta");
  *m.add_functions() = outer;
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {2, 4});
  SetFloat(Call(g, "AddMul", "a", {"X", "X"}, "A"), "alpha", 2.0f);  // 4X
  Call(g, "AddMul", "b", {"X", "A"}, "B");                             // (X + 4X) * 0.5 = 2.5X
  SetFloat(Call(g, "Outer", "y", {"B"}, "Y"), "beta", 3.0f);           // (B + B) * 3 = 15X
  AddTensorValueInfo(g->add_output(), "Y", {2, 4});
  auto loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Model& model = *loaded.value();
  EXPECT_EQ(model.proto->functions_size(), 0);
  std::set<std::string> outputs;
  int constants = 0;
  for (const Node& n : model.graph->nodes) {
    EXPECT_NE(n.domain, "my.fns") << n.Describe();
    for (const auto& o : n.outputs) EXPECT_TRUE(outputs.insert(o).second) << o << " is defined twice";
    if (n.op_type == "Constant") {
      ++constants;
      auto it = n.attributes.find("value_float");
      ASSERT_NE(it, n.attributes.end()) << n.Describe();
      EXPECT_TRUE(it->second.f == 2.0f || it->second.f == 0.5f || it->second.f == 3.0f) << it->second.f;
    }
  }
  EXPECT_EQ(constants, 3);
  EXPECT_EQ(model.graph->nodes.size(), 9u);
  EXPECT_EQ(ShapeOf(model, "Y"), "[2,4]");
}

// An attribute reference and a read of a function input inside a subgraph of the body (an If branch) resolve too; a
// name the branch defines itself is its own.
TEST(ModelFunctions, SubgraphsOfTheBodyResolveReferencesAndReads) {
  onnx::ModelProto m = NewModel("branchy", 18);
  m.set_ir_version(10);
  auto* os = m.add_opset_import();
  os->set_domain("my.fns");
  os->set_version(1);
  onnx::FunctionProto* f = m.add_functions();
  f->set_name("Branchy");
  f->set_domain("my.fns");
  f->add_input("c");
  f->add_input("x");
  f->add_output("y");
  f->add_attribute("k");
  f->add_opset_import()->set_version(18);
  auto* iff = f->add_node();
  iff->set_op_type("If");
  iff->add_input("c");
  iff->add_output("y");
  auto* then_attr = iff->add_attribute();
  then_attr->set_name("then_branch");
  then_attr->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* then_g = then_attr->mutable_g();
  then_g->set_name("then");
  auto* kc = then_g->add_node();
  kc->set_op_type("Constant");
  kc->add_output("x");  // shadows the function's x inside the branch
  auto* ref = kc->add_attribute();
  ref->set_name("value_float");
  ref->set_type(onnx::AttributeProto::FLOAT);
  ref->set_ref_attr_name("k");
  AddNode(then_g, "Identity", "", {"x"}, "t");
  then_g->add_output()->set_name("t");
  auto* else_attr = iff->add_attribute();
  else_attr->set_name("else_branch");
  else_attr->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* else_g = else_attr->mutable_g();
  else_g->set_name("else");
  AddNode(else_g, "Identity", "", {"x"}, "e");  // the function's x: the call's X
  else_g->add_output()->set_name("e");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "C", {}, onnx::TensorProto::BOOL);
  AddTensorValueInfo(g->add_input(), "X", {});
  auto* call = Call(g, "Branchy", "call", {"C", "X"}, "Y");
  SetFloat(call, "k", 4.0f);
  AddTensorValueInfo(g->add_output(), "Y", {});
  auto loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Graph& graph = *loaded.value()->graph;
  ASSERT_EQ(graph.nodes.size(), 1u);
  const Node& n = graph.nodes[0];
  ASSERT_EQ(n.op_type, "If");
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"C"}));
  EXPECT_EQ(n.outputs, (std::vector<std::string>{"Y"}));
  const Graph& then_b = *n.attributes.at("then_branch").g;
  ASSERT_EQ(then_b.nodes.size(), 2u);
  EXPECT_EQ(then_b.nodes[0].attributes.at("value_float").f, 4.0f);
  EXPECT_EQ(then_b.nodes[1].inputs, (std::vector<std::string>{"x"}));
  const Graph& else_b = *n.attributes.at("else_branch").g;
  ASSERT_EQ(else_b.nodes.size(), 1u);
  EXPECT_EQ(else_b.nodes[0].inputs, (std::vector<std::string>{"X"}));
}

TEST(ModelFunctions, OverloadsPickTheirFunction) {
  onnx::ModelProto m = NewModel("overloads", 18);
  m.set_ir_version(10);
  auto* os = m.add_opset_import();
  os->set_domain("my.fns");
  os->set_version(1);
  *m.add_functions() = AddMul(18, 1.0f, "one");
  *m.add_functions() = AddMul(18, 7.0f, "seven");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {2});
  AddLengthDelimited(Call(g, "AddMul", "first", {"X", "X"}, "A"), 8, "seven");  // NodeProto.overload
  AddLengthDelimited(Call(g, "AddMul", "second", {"A", "X"}, "Y"), 8, "one");
  AddTensorValueInfo(g->add_output(), "Y", {2});
  auto loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  std::vector<float> alphas;
  for (const Node& n : loaded.value()->graph->nodes)
    if (n.op_type == "Constant") alphas.push_back(n.attributes.at("value_float").f);
  EXPECT_EQ(alphas, (std::vector<float>{7.0f, 1.0f}));
}

TEST(ModelFunctions, OtherOpsetsInlineOnlyWhereTheOpIsTheSameAndRecursionIsRefused) {
  onnx::ModelProto m = NewModel("functions", 18);
  m.set_ir_version(10);
  auto* os = m.add_opset_import();
  os->set_domain("my.fns");
  os->set_version(1);
  *m.add_functions() = AddMul(17, 0.5f);
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {2});
  Call(g, "AddMul", "a", {"X", "X"}, "Y");
  AddTensorValueInfo(g->add_output(), "Y", {2});
  // Add-14, Constant-13 and Mul-14 are the same ops at opsets 17 and 18: inlined as they are.
  auto loaded = Load(m);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded.value()->graph->nodes.size(), 3u);

  // ReduceMean changed at 18 (axes became an input): ReduceMean-13 in the function is not ReduceMean-18.
  onnx::ModelProto d = m;
  auto* mean = d.mutable_functions(0)->add_node();
  mean->set_op_type("ReduceMean");
  mean->set_name("mean");
  mean->add_input("out");
  mean->add_output("avg");
  auto dis = Load(d);
  ASSERT_FALSE(dis.ok());
  EXPECT_EQ(dis.status().code(), ErrorCode::INVALID_GRAPH);
  EXPECT_NE(dis.status().message().find("function 'my.fns.AddMul' imports domain 'ai.onnx' at version 17 and the "
                                        "model at version 18; its node 'mean' (ReduceMean) is ReduceMean-13 there "
                                        "and ReduceMean-18 in the model"),
            std::string::npos)
      << dis.status().ToString();

  // A function that calls itself.
  onnx::ModelProto r = m;
  *r.mutable_functions(0) = AddMul(18, 0.5f);
  auto* self = r.mutable_functions(0)->add_node();
  self->set_op_type("AddMul");
  self->set_domain("my.fns");
  self->add_input("out");
  self->add_input("out");
  self->add_output("again");
  auto rec = Load(r);
  ASSERT_FALSE(rec.ok());
  EXPECT_NE(rec.status().message().find("nest deeper than 32"), std::string::npos) << rec.status().ToString();
}

}  // namespace
}  // namespace epctx
