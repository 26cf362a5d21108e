// Empty tensors in a dynamic AotCpu partition (issue 27 item 5): models with a free dim run at a size that gives some
// value a zero-sized dim (a Slice that selects nothing, the free dim itself 0), after a run at a size that does not.
// Every output must have the CPU EP's shape and values (where the CPU EP and ONNX Runtime 1.30 differ, the expected
// values are written out and say why), just in time and from a _ctx.onnx compiled with the dims free.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::testing::DevicesOf;
using epctx::testing::Exists;
using epctx::testing::NewModel;
using epctx::testing::Serialize;
using epctx::testing::TempDir;
using epctx::testing::WriteFile;

constexpr const char* kAotLib = EPCTX_BINARY_DIR "/lib/libepctx_aotcpu.so";
constexpr const char* kAot = "AotCpuExecutionProvider";
using Dims = std::vector<int64_t>;

struct Out {
  Dims dims;
  std::vector<float> data;
};

// A float value with `dims`, -1 for the free dim "n".
void AddValue(onnx::ValueInfoProto* vi, const std::string& name, const Dims& dims) {
  vi->set_name(name);
  auto* t = vi->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = t->mutable_shape();
  for (int64_t d : dims) {
    if (d < 0)
      shape->add_dim()->set_dim_param("n");
    else
      shape->add_dim()->set_dim_value(d);
  }
}
onnx::NodeProto* Node(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& in,
                      const std::string& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + out);
  for (const auto& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}
void Ints(onnx::GraphProto* g, const std::string& name, const Dims& v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
}
void Floats(onnx::GraphProto* g, const std::string& name, const Dims& dims) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) t->add_dims(d), n *= d;
  for (int64_t i = 0; i < n; ++i) t->add_float_data(static_cast<float>((i * 7) % 11 - 5) / 8.f);
}
void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void IntsAttr(onnx::NodeProto* n, const std::string& name, const Dims& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

class AotCpuEmpty : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env_ = new Env(LoggingLevel::ERROR, "aotcpu_empty_test");
    env_->RegisterExecutionProviderLibrary("aotcpu", kAotLib);
  }
  static void TearDownTestSuite() {
    delete env_;
    env_ = nullptr;
  }
  static SessionOptions Options(bool aot) {
    SessionOptions o;
    o.SetIntraOpNumThreads(1);
    // partition_switch_us=0: these small graphs are claimed whatever their boundary costs.
    if (aot)
      o.AppendExecutionProvider_V2(*env_, DevicesOf(*env_, kAot, false),
                                   KeyValuePairs{{"dynamic_shapes", "1"}, {"partition_switch_us", "0"}});
    return o;
  }
  // Runs `s` with each input at its dims (values from a fixed pattern).
  static std::vector<Out> Run(Session& s, const std::vector<std::string>& names, const std::vector<Dims>& dims) {
    std::vector<std::vector<float>> data(dims.size());
    std::vector<Value> values;
    for (size_t i = 0; i < dims.size(); ++i) {
      int64_t n = 1;
      for (int64_t d : dims[i]) n *= d;
      for (int64_t k = 0; k < n; ++k) data[i].push_back(static_cast<float>((k * 5 + static_cast<int64_t>(i)) % 13 - 6) / 4.f);
      values.push_back(Value::CreateTensor(ElementType::FLOAT, data[i].data(), data[i].size() * 4, dims[i].data(),
                                           dims[i].size()));
    }
    std::vector<Value> outs = s.Run(names, values, s.GetOutputNames());
    std::vector<Out> r;
    for (const Value& v : outs) {
      const auto info = v.GetTensorTypeAndShapeInfo();
      EXPECT_EQ(info.GetElementType(), ElementType::FLOAT);
      Out o;
      o.dims = info.GetShape();
      const size_t n = info.GetElementCount();
      if (n) {
        const float* p = v.GetTensorData<float>();
        o.data.assign(p, p + n);
      }
      r.push_back(std::move(o));
    }
    return r;
  }
  static void ExpectSame(const std::vector<Out>& got, const std::vector<Out>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].dims, want[i].dims) << what << " output " << i;
      ASSERT_EQ(got[i].data.size(), want[i].data.size()) << what << " output " << i;
      for (size_t k = 0; k < got[i].data.size(); ++k) {
        const float a = got[i].data[k], b = want[i].data[k];
        if (std::isnan(b)) {
          EXPECT_TRUE(std::isnan(a)) << what << " output " << i << "[" << k << "]";
        } else if (std::isinf(b)) {
          EXPECT_EQ(a, b) << what << " output " << i << "[" << k << "]";
        } else {
          EXPECT_NEAR(a, b, 1e-5 + 1e-5 * std::fabs(b)) << what << " output " << i << "[" << k << "]";
        }
      }
    }
  }

  // `m` on the CPU EP, AotCpu JIT and from its _ctx.onnx (dims free), at each shape in turn on one session. The
  // expected outputs are the CPU EP's unless `fix` changes them (where the CPU EP and ONNX Runtime differ).
  template <typename Fix>
  static void Check(const onnx::ModelProto& m, const std::vector<std::vector<Dims>>& shapes, Fix fix) {
    TempDir dir;
    const std::string path = dir / "model.onnx";
    WriteFile(path, Serialize(m));
    std::vector<std::string> names;
    for (const auto& in : m.graph().input()) names.push_back(in.name());
    Session cpu(*env_, path.c_str(), Options(false));
    std::vector<std::vector<Out>> want;
    for (const auto& s : shapes) {
      want.push_back(Run(cpu, names, s));
      fix(s, &want.back());
    }
    const std::string ctx = dir / "model_ctx.onnx";
    {
      SessionOptions o = Options(true);
      o.AddConfigEntry("ep.context_enable", "1");
      o.AddConfigEntry("ep.context_file_path", ctx.c_str());
      Session jit(*env_, path.c_str(), o);
      EXPECT_TRUE(epctx::testing::Contains(jit.GetSessionReport(), "\"cpu_nodes\":0")) << jit.GetSessionReport();
      for (size_t i = 0; i < shapes.size(); ++i) ExpectSame(Run(jit, names, shapes[i]), want[i], "JIT, shape " + std::to_string(i));
    }
    ASSERT_TRUE(Exists(ctx));
    Session loaded(*env_, ctx.c_str(), Options(true));
    for (size_t i = 0; i < shapes.size(); ++i)
      ExpectSame(Run(loaded, names, shapes[i]), want[i], "from _ctx.onnx, shape " + std::to_string(i));
  }
  static void Check(const onnx::ModelProto& m, const std::vector<std::vector<Dims>>& shapes) {
    Check(m, shapes, [](const std::vector<Dims>&, std::vector<Out>*) {});
  }
  static Env* env_;
};
Env* AotCpuEmpty::env_ = nullptr;

// As difftest seed 20261127 model 5985: a Slice whose rows are empty at some sizes, then Flatten and more.
TEST_F(AotCpuEmpty, SliceThenViewsAndElementwise) {
  onnx::ModelProto m = NewModel("slice", 13);
  auto* g = m.mutable_graph();
  AddValue(g->add_input(), "x", {-1, 8});
  Ints(g, "st", {5});
  Ints(g, "en", {1000});
  Ints(g, "ax", {0});
  Node(g, "Slice", {"x", "st", "en", "ax"}, "s");
  IntAttr(Node(g, "Flatten", {"s"}, "f"), "axis", 1);
  Node(g, "Relu", {"f"}, "r");
  IntsAttr(Node(g, "Transpose", {"r"}, "t"), "perm", {1, 0});
  Floats(g, "b", {1, 8});
  Node(g, "Add", {"s", "b"}, "a");
  IntAttr(Node(g, "Softmax", {"a"}, "sm"), "axis", 1);
  AddValue(g->add_output(), "t", {8, -1});
  AddValue(g->add_output(), "sm", {-1, 8});
  // n = 8: rows 5..7; n = 4 and n = 0: none.
  Check(m, {{{8, 8}}, {{4, 8}}, {{0, 8}}, {{8, 8}}});
}

// MatMul with an empty batch (M = 0, constant weights) and with K = 0 (zeros); Gemm with K = 0 is beta * C, as ONNX
// defines it and the CPU EP computes (ONNX Runtime 1.30 returns C there).
TEST_F(AotCpuEmpty, MatMulAndGemm) {
  onnx::ModelProto m = NewModel("matmul", 13);
  auto* g = m.mutable_graph();
  AddValue(g->add_input(), "x", {3, -1});
  AddValue(g->add_input(), "w", {-1, 5});
  Floats(g, "W", {3, 4});
  Floats(g, "C", {5});
  Node(g, "MatMul", {"x", "w"}, "k0");
  FloatAttr(Node(g, "Gemm", {"x", "w", "C"}, "gm"), "beta", 2.0f);
  IntsAttr(Node(g, "Transpose", {"x"}, "xt"), "perm", {1, 0});
  Node(g, "MatMul", {"xt", "W"}, "m0");  // [n, 3] x [3, 4]: M = n
  AddValue(g->add_output(), "k0", {3, 5});
  AddValue(g->add_output(), "gm", {3, 5});
  AddValue(g->add_output(), "m0", {-1, 4});
  Check(m, {{{3, 4}, {4, 5}}, {{3, 0}, {0, 5}}, {{3, 2}, {2, 5}}}, [](const std::vector<Dims>& s, std::vector<Out>* w) {
    if (s[0][1] != 0) return;
    for (float v : (*w)[0].data) EXPECT_EQ(v, 0.0f);
    const float c[5] = {-5 / 8.f, 2 / 8.f, -2 / 8.f, 5 / 8.f, 1 / 8.f};  // Floats' pattern
    for (size_t k = 0; k < 15; ++k) EXPECT_FLOAT_EQ((*w)[1].data[k], 2.0f * c[k % 5]) << "CPU EP Gemm " << k;
  });
}

// Reductions over an empty axis: ReduceSum 0, ReduceMax -inf, ReduceMin +inf (ONNX, the CPU EP and ONNX Runtime
// agree), ReduceMean 0 as ONNX Runtime 1.30 gives (ONNX leaves it undefined; the CPU EP gives NaN). Concat with an
// empty operand; a constant Pad of an empty tensor.
TEST_F(AotCpuEmpty, ReductionsConcatPad) {
  onnx::ModelProto m = NewModel("reduce", 13);
  auto* g = m.mutable_graph();
  AddValue(g->add_input(), "x", {3, -1});
  Ints(g, "ax", {1});
  IntAttr(Node(g, "ReduceSum", {"x", "ax"}, "sum"), "keepdims", 0);
  IntsAttr(Node(g, "ReduceMax", {"x"}, "max"), "axes", {1});
  IntsAttr(Node(g, "ReduceMin", {"x"}, "min"), "axes", {1});
  auto* mean = Node(g, "ReduceMean", {"x"}, "mean");
  IntsAttr(mean, "axes", {1});
  IntAttr(mean, "keepdims", 0);
  Floats(g, "y", {3, 2});
  IntAttr(Node(g, "Concat", {"x", "y"}, "cat"), "axis", 1);
  Ints(g, "pads", {0, 1, 0, 2});
  Node(g, "Pad", {"x", "pads"}, "pad");
  for (const char* o : {"sum", "max", "min", "mean", "cat", "pad"}) {
    auto* vi = g->add_output();
    vi->set_name(o);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  const float inf = std::numeric_limits<float>::infinity();
  Check(m, {{{3, 4}}, {{3, 0}}, {{3, 1}}}, [inf](const std::vector<Dims>& s, std::vector<Out>* w) {
    if (s[0][1] != 0) return;
    for (float v : (*w)[0].data) EXPECT_EQ(v, 0.0f);
    for (float v : (*w)[1].data) EXPECT_EQ(v, -inf);
    for (float v : (*w)[2].data) EXPECT_EQ(v, inf);
    (*w)[3].data.assign(3, 0.0f);  // ONNX Runtime 1.30's ReduceMean of nothing
    for (float v : (*w)[5].data) EXPECT_EQ(v, 0.0f);
  });
}

// Conv, pooling and normalization with an empty batch (the free dim 0): empty results, no oneDNN primitive run.
TEST_F(AotCpuEmpty, ConvPoolNormWithEmptyBatch) {
  onnx::ModelProto m = NewModel("conv", 17);
  auto* g = m.mutable_graph();
  AddValue(g->add_input(), "x", {-1, 4, 6, 6});
  Floats(g, "cw", {8, 4, 3, 3});
  Floats(g, "cb", {8});
  IntsAttr(Node(g, "Conv", {"x", "cw", "cb"}, "c"), "pads", {1, 1, 1, 1});
  Node(g, "Relu", {"c"}, "r");
  IntsAttr(Node(g, "MaxPool", {"r"}, "p"), "kernel_shape", {2, 2});
  Node(g, "GlobalAveragePool", {"p"}, "gap");
  IntAttr(Node(g, "Flatten", {"gap"}, "f"), "axis", 1);
  Floats(g, "ls", {8});
  Floats(g, "lb", {8});
  Node(g, "LayerNormalization", {"f", "ls", "lb"}, "ln");
  AddValue(g->add_output(), "ln", {-1, 8});
  AddValue(g->add_output(), "p", {-1, 8, 5, 5});
  Check(m, {{{2, 4, 6, 6}}, {{0, 4, 6, 6}}, {{1, 4, 6, 6}}});
}

// A pooling window over a zero-sized spatial dim is the caller's error (ONNX Runtime refuses it: only the batch may
// be 0), named with the node, the input and its shape.
TEST_F(AotCpuEmpty, PoolingOverAnEmptySpatialDimIsInvalidArgument) {
  onnx::ModelProto m = NewModel("gap", 13);
  auto* g = m.mutable_graph();
  AddValue(g->add_input(), "x", {2, 3, -1, 4});
  Node(g, "GlobalAveragePool", {"x"}, "gap");
  AddValue(g->add_output(), "gap", {2, 3, 1, 1});
  TempDir dir;
  const std::string path = dir / "model.onnx";
  WriteFile(path, Serialize(m));
  Session s(*env_, path.c_str(), Options(true));
  EXPECT_EQ(Run(s, {"x"}, {{2, 3, 5, 4}})[0].dims, (Dims{2, 3, 1, 1}));
  try {
    Run(s, {"x"}, {{2, 3, 0, 4}});
    ADD_FAILURE() << "no error";
  } catch (const Exception& e) {
    EXPECT_EQ(e.GetOrtErrorCode(), ErrorCode::INVALID_ARGUMENT) << e.what();
    EXPECT_TRUE(epctx::testing::Contains(e.what(), "GlobalAveragePool")) << e.what();
    EXPECT_TRUE(epctx::testing::Contains(e.what(), "[2,3,0,4]")) << e.what();
  }
}

}  // namespace
}  // namespace epctx
