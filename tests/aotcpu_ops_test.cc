// AotCpu lowerings of the ops real models needed (Pad, Split, Slice of inner rows, ReduceMax/Min/Sum/Mean with axes
// inputs, Clip with run-time bounds, Cast, Softmax before opset 13): each small model must be claimed whole
// (one partition, no node left on the CPU EP) and its outputs must match the CPU EP's, in a JIT session and in
// sessions loaded from the _ctx.onnx it wrote (embed mode 0 and 1). Attribute values the lowerings do not
// reproduce must leave the node on the CPU EP (and the outputs must still match). The runtime reads opsets up to 17,
// so the opset-18 forms (Pad axes, Split num_outputs, Reduce* axes inputs) are tested on compiled programs in
// providers/aotcpu/lower/ops_tensor_test.cc.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::testing::Contains;
using epctx::testing::DevicesOf;
using epctx::testing::Exists;
using epctx::testing::NewModel;
using epctx::testing::Serialize;
using epctx::testing::TempDir;
using epctx::testing::WriteFile;

constexpr const char* kAotLib = EPCTX_BINARY_DIR "/lib/libepctx_aotcpu.so";
constexpr const char* kAot = "AotCpuExecutionProvider";
using Dims = std::vector<int64_t>;

struct Input {
  std::string name;
  Dims dims;
  std::vector<float> data;
};

// Deterministic values in [-2, 2) with a few repeats (ties for Max/Min) and exact zeros.
std::vector<float> Values(const Dims& dims, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int>(s >> 24) - 128) / 64.f;
  }
  return v;
}

void AddInput(onnx::GraphProto* g, const std::string& name, const Dims& dims,
              int elem = onnx::TensorProto::FLOAT) {
  epctx::testing::AddTensorValueInfo(g->add_input(), name, dims, elem);
}
void AddOutput(onnx::GraphProto* g, const std::string& name, const Dims& dims) {
  epctx::testing::AddTensorValueInfo(g->add_output(), name, dims);
}
void AddInts(onnx::GraphProto* g, const std::string& name, const Dims& values, bool scalar = false) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  if (!scalar) t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
}
void AddFloat(onnx::GraphProto* g, const std::string& name, float value) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_float_data(value);
}
void AddFloats(onnx::GraphProto* g, const std::string& name, const Dims& dims, const std::vector<float>& v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float x : v) t->add_float_data(x);
}
onnx::NodeProto* Node(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& in,
                      const std::vector<std::string>& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + out[0]);
  for (const auto& i : in) n->add_input(i);
  for (const auto& o : out) n->add_output(o);
  return n;
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
void StrAttr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

class AotCpuOps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env_ = new Env(LoggingLevel::ERROR, "aotcpu_ops_test");
    env_->RegisterExecutionProviderLibrary("aotcpu", kAotLib);
  }
  static void TearDownTestSuite() {
    delete env_;
    env_ = nullptr;
  }

  static SessionOptions Options(bool aot, const std::map<std::string, std::string>& config = {}) {
    SessionOptions o;
    o.SetIntraOpNumThreads(1);
    if (aot) o.AppendExecutionProvider_V2(*env_, DevicesOf(*env_, kAot, false), KeyValuePairs());
    for (const auto& [k, v] : config) o.AddConfigEntry(k.c_str(), v.c_str());
    return o;
  }

  static std::vector<std::vector<float>> Run(Session& s, std::vector<Input>& inputs) {
    std::vector<std::string> names;
    std::vector<Value> values;
    for (Input& in : inputs) {
      names.push_back(in.name);
      values.push_back(Value::CreateTensor(ElementType::FLOAT, in.data.data(), in.data.size() * 4, in.dims.data(),
                                           in.dims.size()));
    }
    std::vector<Value> outs = s.Run(names, values, s.GetOutputNames());
    std::vector<std::vector<float>> r;
    for (const Value& v : outs) {
      const auto info = v.GetTensorTypeAndShapeInfo();
      if (info.GetElementType() == ElementType::BOOL) {  // compared as 0/1
        const auto* b = static_cast<const unsigned char*>(v.GetTensorRawData());
        r.emplace_back(b, b + info.GetElementCount());
        continue;
      }
      const float* p = v.GetTensorData<float>();
      r.emplace_back(p, p + info.GetElementCount());
    }
    return r;
  }

  static void ExpectNear(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                         const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].size(), want[i].size()) << what << " output " << i;
      size_t bad = 0;
      for (size_t k = 0; k < got[i].size(); ++k)
        if (!(std::fabs(got[i][k] - want[i][k]) <= 1e-5 + 1e-5 * std::fabs(want[i][k])) &&
            !(std::isnan(got[i][k]) && std::isnan(want[i][k])))
          ++bad;
      EXPECT_EQ(bad, 0u) << what << " output " << i << ": " << bad << " of " << got[i].size() << " differ";
    }
  }

  // Runs `m` on the CPU EP, on AotCpu JIT and from its _ctx.onnx (embed 0 and 1); every AotCpu run matches the CPU
  // EP. `claimed`: AotCpu must take every node in one partition; otherwise some node must stay on the CPU EP.
  static void Check(const onnx::ModelProto& m, std::vector<Input> inputs, bool claimed) {
    TempDir dir;
    const std::string path = dir / "model.onnx";
    WriteFile(path, Serialize(m));
    Session cpu(*env_, path.c_str(), Options(false));
    const auto want = Run(cpu, inputs);
    Session jit(*env_, path.c_str(), Options(true));
    const std::string report = jit.GetSessionReport();
    if (claimed) {
      EXPECT_TRUE(Contains(report, "\"cpu_nodes\":0")) << report;
      EXPECT_EQ(jit.GetPartitionAssignments().size(), 1u) << report;
    } else {
      EXPECT_FALSE(Contains(report, "\"cpu_nodes\":0")) << report;
    }
    ExpectNear(Run(jit, inputs), want, "JIT");
    if (!claimed) return;
    for (int embed : {0, 1}) {
      const std::string ctx = dir / ("model_e" + std::to_string(embed) + "_ctx.onnx");
      {
        Session gen(*env_, path.c_str(),
                    Options(true, {{"ep.context_enable", "1"},
                                   {"ep.context_file_path", ctx},
                                   {"ep.context_embed_mode", std::to_string(embed)}}));
        ExpectNear(Run(gen, inputs), want, "compiling session, embed " + std::to_string(embed));
      }
      ASSERT_TRUE(Exists(ctx));
      Session loaded(*env_, ctx.c_str(), Options(true));
      ExpectNear(Run(loaded, inputs), want, "loaded from _ctx.onnx, embed " + std::to_string(embed));
    }
  }

  static Env* env_;
};
Env* AotCpuOps::env_ = nullptr;

// ---- Pad ----

struct PadCase {
  int opset;
  std::string mode;
  Dims x, pads;  // pads in ONNX order (all begins, then all ends)
  Dims axes;     // opset 18: the axes input (empty = absent)
  float value;
  bool claimed;
};

onnx::ModelProto PadModel(const PadCase& c, Dims* y) {
  onnx::ModelProto m = NewModel("pad", c.opset);
  auto* g = m.mutable_graph();
  AddInput(g, "X", c.x);
  *y = c.x;
  const size_t k = c.axes.empty() ? c.x.size() : c.axes.size();
  for (size_t i = 0; i < k; ++i) {
    int64_t ax = c.axes.empty() ? static_cast<int64_t>(i) : c.axes[i];
    if (ax < 0) ax += static_cast<int64_t>(c.x.size());
    (*y)[static_cast<size_t>(ax)] += c.pads[i] + c.pads[i + k];
  }
  AddOutput(g, "Y", *y);
  onnx::NodeProto* n;
  if (c.opset < 11) {
    n = Node(g, "Pad", {"X"}, {"Y"});
    IntsAttr(n, "pads", c.pads);
    FloatAttr(n, "value", c.value);
  } else {
    AddInts(g, "pads", c.pads);
    AddFloat(g, "value", c.value);
    std::vector<std::string> in = {"X", "pads", c.mode == "constant" ? "value" : ""};
    if (!c.axes.empty()) {
      AddInts(g, "axes", c.axes);
      in.push_back("axes");
    }
    n = Node(g, "Pad", in, {"Y"});
  }
  StrAttr(n, "mode", c.mode);
  return m;
}

TEST_F(AotCpuOps, PadModesMatchTheCpuEp) {
  const PadCase cases[] = {
      {11, "constant", {2, 3, 4, 5}, {0, 1, 2, 3, 1, 0, 3, 2}, {}, 1.5f, true},
      {11, "reflect", {1, 1, 2, 256}, {0, 0, 0, 96, 0, 0, 0, 96}, {}, 0.f, true},  // Silero's STFT padding
      {11, "reflect", {3, 5, 6}, {1, 4, 5, 2, 4, 5}, {}, 0.f, true},
      {11, "edge", {2, 3, 4}, {2, 0, 7, 1, 3, 0}, {}, 0.f, true},
      {2, "constant", {3, 4}, {1, 2, 0, 3}, {}, -2.f, true},
      {2, "edge", {5}, {3, 2}, {}, 0.f, true},
      {11, "reflect", {2, 3}, {0, 3, 0, 0}, {}, 0.f, false},    // reflect pad >= dim: not reproduced
      {11, "constant", {2, 5}, {0, -1, 0, 2}, {}, 0.f, false},  // negative pad (crop): not supported
  };
  for (const PadCase& c : cases) {
    SCOPED_TRACE(c.mode + " opset " + std::to_string(c.opset));
    Dims y;
    onnx::ModelProto m = PadModel(c, &y);
    Check(m, {{"X", c.x, Values(c.x, 7)}}, c.claimed);
  }
}

// ---- Split ----

TEST_F(AotCpuOps, SplitFormsMatchTheCpuEp) {
  struct SplitCase {
    int opset;
    Dims x;
    int64_t axis;
    Dims split;         // empty: absent
    int64_t num_outputs;  // opset 18 attribute (0: absent)
    std::vector<Dims> outs;
    bool claimed;
  };
  const SplitCase cases[] = {
      {11, {2, 6, 3}, 1, {1, 2, 3}, 0, {{2, 1, 3}, {2, 2, 3}, {2, 3, 3}}, true},    // attribute
      {11, {4, 6}, -1, {}, 0, {{4, 3}, {4, 3}}, true},                              // equal parts
      {13, {3, 8}, 1, {5, 3}, 0, {{3, 5}, {3, 3}}, true},                           // input
      {13, {6, 2}, 0, {}, 0, {{2, 2}, {2, 2}, {2, 2}}, true},                       // equal parts, outer axis
  };
  for (const SplitCase& c : cases) {
    SCOPED_TRACE("opset " + std::to_string(c.opset) + " axis " + std::to_string(c.axis));
    onnx::ModelProto m = NewModel("split", c.opset);
    auto* g = m.mutable_graph();
    AddInput(g, "X", c.x);
    std::vector<std::string> outs;
    for (size_t i = 0; i < c.outs.size(); ++i) {
      outs.push_back("Y" + std::to_string(i));
      AddOutput(g, outs.back(), c.outs[i]);
    }
    std::vector<std::string> in = {"X"};
    if (c.opset >= 13 && !c.split.empty()) {
      AddInts(g, "split", c.split);
      in.push_back("split");
    }
    auto* n = Node(g, "Split", in, outs);
    IntAttr(n, "axis", c.axis);
    if (c.opset < 13 && !c.split.empty()) IntsAttr(n, "split", c.split);
    if (c.num_outputs) IntAttr(n, "num_outputs", c.num_outputs);
    Check(m, {{"X", c.x, Values(c.x, 11)}}, c.claimed);
  }
}

// ---- Slice ----

// Views that start inside the input's inner rows and reach its end were refused before (the executor's extent
// check used to measure them as oneDNN sizes them); also omitted axes, steps > 1, negative steps (a StridedCopy
// step) and clamped starts/ends.
TEST_F(AotCpuOps, SliceFormsMatchTheCpuEp) {
  struct SliceCase {
    Dims x, starts, ends, axes, steps, y;
    bool claimed;
  };
  const SliceCase cases[] = {
      {{3, 258}, {129}, {INT64_MAX}, {1}, {1}, {3, 129}, true},   // Silero's STFT: the imaginary half
      {{3, 258}, {0}, {129}, {1}, {1}, {3, 129}, true},
      {{4, 5, 6}, {1, -4}, {3, 100}, {}, {}, {2, 4, 6}, true},   // no axes: the first ones; ends clamp
      {{4, 5, 6}, {-100, 1}, {-1, 6}, {0, 2}, {2, 2}, {2, 5, 3}, true},
      {{2, 6}, {-1}, {-100}, {1}, {-1}, {2, 6}, true},           // negative step: reversed (StridedCopy)
      {{1, 3, 4}, {-1}, {INT64_MIN}, {-1}, {-1}, {1, 3, 4}, true},  // Silero's reflection: steps -1, ends INT64_MIN
      {{5, 7}, {10, -2}, {0, 1}, {}, {-2, -3}, {2, 2}, true},    // starts clamp to dim-1; ends exclusive
      {{5, 3}, {0}, {3}, {1}, {2}, {5, 2}, true},                // strides [3, 2] interleave: oneDNN has no view (StridedCopy)
      {{5, 7}, {1}, {4}, {0}, {-1}, {0, 7}, false},              // start before end with a negative step: empty
  };
  for (const SliceCase& c : cases) {
    onnx::ModelProto m = NewModel("slice", 13);
    auto* g = m.mutable_graph();
    AddInput(g, "X", c.x);
    AddOutput(g, "Y", c.y);
    AddInts(g, "starts", c.starts);
    AddInts(g, "ends", c.ends);
    std::vector<std::string> in = {"X", "starts", "ends"};
    if (!c.axes.empty()) {
      AddInts(g, "axes", c.axes);
      in.push_back("axes");
    }
    if (!c.steps.empty()) {
      AddInts(g, "steps", c.steps);
      if (c.axes.empty()) in.push_back("");
      in.push_back("steps");
    }
    Node(g, "Slice", in, {"Y"});
    Check(m, {{"X", c.x, Values(c.x, 5)}}, c.claimed);
  }
}

// ---- reductions ----

TEST_F(AotCpuOps, ReductionsMatchTheCpuEp) {
  struct ReduceCase {
    std::string op;
    int opset;
    Dims x, axes;
    bool axes_input;
    int64_t keepdims, noop;
    Dims y;
  };
  const ReduceCase cases[] = {
      {"ReduceMax", 13, {1, 5, 32}, {}, false, 0, 0, {}},  // openWakeWord's melspectrogram: every axis, to a scalar
      {"ReduceMax", 13, {2, 3, 4}, {1}, false, 1, 0, {2, 1, 4}},
      {"ReduceMin", 13, {2, 3, 4}, {-1, 0}, false, 0, 0, {3}},
      {"ReduceSum", 13, {2, 3, 4}, {1}, true, 0, 0, {2, 4}},
      {"ReduceSum", 13, {2, 3, 4}, {}, true, 1, 1, {2, 3, 4}},  // no axes + noop_with_empty_axes: identity
      {"ReduceSum", 11, {2, 3, 4}, {0, 2}, false, 1, 0, {1, 3, 1}},
      {"ReduceMean", 13, {2, 1, 4}, {1}, false, 0, 0, {2, 4}},   // a size-1 axis reduced and dropped
  };
  for (const ReduceCase& c : cases) {
    SCOPED_TRACE(c.op + " opset " + std::to_string(c.opset));
    onnx::ModelProto m = NewModel("reduce", c.opset);
    auto* g = m.mutable_graph();
    AddInput(g, "X", c.x);
    AddOutput(g, "Y", c.y);
    std::vector<std::string> in = {"X"};
    if (c.axes_input && !c.axes.empty()) {
      AddInts(g, "axes", c.axes);
      in.push_back("axes");
    }
    auto* n = Node(g, c.op, in, {"Y"});
    if (!c.axes_input && !c.axes.empty()) IntsAttr(n, "axes", c.axes);
    IntAttr(n, "keepdims", c.keepdims);
    if (c.noop) IntAttr(n, "noop_with_empty_axes", 1);
    Check(m, {{"X", c.x, Values(c.x, 13)}}, true);
  }
}

// ---- Clip with run-time bounds, same-type Cast ----

// openWakeWord's melspectrogram tail: m = ReduceMax(x) - 80; y = Clip(x, Cast(m), inf).
TEST_F(AotCpuOps, ClipWithRunTimeBoundsMatchesTheCpuEp) {
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    onnx::ModelProto m = NewModel("clip", 13);
    auto* g = m.mutable_graph();
    const Dims x = {1, 5, 32};
    AddInput(g, "X", x);
    AddOutput(g, "Y", x);
    AddFloat(g, "inf", INFINITY);
    AddFloat(g, "offset", 0.75f);
    AddFloat(g, "half", 0.5f);
    auto* r = Node(g, "ReduceMax", {"X"}, {"mx"});
    IntAttr(r, "keepdims", 0);
    Node(g, "Sub", {"mx", "offset"}, {"lo"});
    auto* cast = Node(g, "Cast", {"lo"}, {"lo_f"});
    IntAttr(cast, "to", onnx::TensorProto::FLOAT);
    if (variant == 0) Node(g, "Clip", {"X", "lo_f", "inf"}, {"Y"});   // run-time min, constant max
    if (variant == 1) Node(g, "Clip", {"X", "", "lo_f"}, {"Y"});      // run-time max only
    if (variant == 2) Node(g, "Clip", {"X", "lo_f"}, {"Y"});          // run-time min only
    if (variant == 3) {                                               // both at run time, min above max
      Node(g, "Neg", {"lo_f"}, {"hi"});
      Node(g, "Clip", {"X", "lo_f", "hi"}, {"Y"});
    }
    Check(m, {{"X", x, Values(x, 17)}}, true);
  }
}

// A Cast to another type changes values (float -> int32 truncates toward zero): not a view but a kTypedEltwise step
// (issue 27, lower/math_int.cc), claimed and equal to the CPU EP's.
TEST_F(AotCpuOps, CastToAnotherTypeTruncatesAsTheCpuEp) {
  onnx::ModelProto m = NewModel("cast", 13);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {2, 3});
  AddOutput(g, "Y", {2, 3});
  auto* c1 = Node(g, "Cast", {"X"}, {"i"});
  IntAttr(c1, "to", onnx::TensorProto::INT32);
  auto* c2 = Node(g, "Cast", {"i"}, {"Y"});
  IntAttr(c2, "to", onnx::TensorProto::FLOAT);
  Check(m, {{"X", {2, 3}, Values({2, 3}, 19)}}, true);
}

// A same-type Cast is a zero-copy view: claimed inside a partition that computes, but a group of only views (a lone
// Cast or Reshape between nodes left on the CPU EP, as hey_jarvis's bool Cast before its If) is not worth a partition.
TEST_F(AotCpuOps, ViewsAloneAreNotAPartition) {
  for (bool with_relu : {false, true}) {
    SCOPED_TRACE(with_relu ? "Relu + Cast + Reshape" : "Cast + Reshape alone");
    onnx::ModelProto m = NewModel("views", 13);
    auto* g = m.mutable_graph();
    AddInput(g, "X", {2, 3});
    AddOutput(g, "Y", {3, 2});
    AddInts(g, "shape", {3, 2});
    if (with_relu) Node(g, "Relu", {"X"}, {"r"});
    auto* c = Node(g, "Cast", {with_relu ? "r" : "X"}, {"c"});
    IntAttr(c, "to", onnx::TensorProto::FLOAT);
    Node(g, "Reshape", {"c", "shape"}, {"Y"});
    Check(m, {{"X", {2, 3}, Values({2, 3}, 21)}}, with_relu);
  }
}

// ---- comparisons ----

// f32 comparisons into bool (oneDNN binary ge/gt/le/lt/eq with a u8 dst), either operand broadcast (a broadcast
// first operand swaps to the mirrored comparison), then a bool -> bool Cast as in hey_jarvis (score >= 0.5 feeds
// its If through one); the bool output is compared as 0/1.
TEST_F(AotCpuOps, ComparisonsMatchTheCpuEp) {
  for (const char* op : {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"}) {
    for (int form = 0; form < 3; ++form) {
      SCOPED_TRACE(std::string(op) + " form " + std::to_string(form));
      onnx::ModelProto m = NewModel("compare", 13);
      auto* g = m.mutable_graph();
      AddInput(g, "X", {2, 3, 4});
      epctx::testing::AddTensorValueInfo(g->add_output(), "Y", {2, 3, 4}, onnx::TensorProto::BOOL);
      AddFloats(g, "row", {4}, {0.5f, -0.5f, 0.f, 1.f});
      AddFloat(g, "half", 0.5f);
      if (form == 0) Node(g, op, {"X", "row"}, {"b"});    // second operand broadcast
      if (form == 1) Node(g, op, {"row", "X"}, {"b"});    // first operand broadcast: mirrored
      if (form == 2) Node(g, op, {"X", "half"}, {"b"});   // a scalar, as hey_jarvis's threshold
      auto* c = Node(g, "Cast", {"b"}, {"Y"});
      IntAttr(c, "to", onnx::TensorProto::BOOL);
      // Values() has exact repeats of 0.5, -0.5, 0 and 1, so equality and the ties of >= and <= are exercised.
      Check(m, {{"X", {2, 3, 4}, Values({2, 3, 4}, 53)}}, true);
    }
  }
}

// ---- Softmax before opset 13: the input coerced to 2-D at `axis` ----

TEST_F(AotCpuOps, SoftmaxBeforeOpset13NormalizesTheFlattenedTail) {
  struct SmCase {
    int opset;
    int64_t axis;  // INT64_MIN: default
  };
  for (const SmCase& c : {SmCase{9, 1}, SmCase{11, INT64_MIN}, SmCase{11, -2}, SmCase{9, 0}, SmCase{11, 3},
                          SmCase{13, 1}}) {
    SCOPED_TRACE("opset " + std::to_string(c.opset) + " axis " + std::to_string(c.axis));
    onnx::ModelProto m = NewModel("softmax", c.opset);
    auto* g = m.mutable_graph();
    const Dims x = {2, 3, 4, 5};
    AddInput(g, "X", x);
    AddOutput(g, "Y", x);
    auto* n = Node(g, "Softmax", {"X"}, {"Y"});
    if (c.axis != INT64_MIN) IntAttr(n, "axis", c.axis);
    Check(m, {{"X", x, Values(x, 23)}}, true);
  }
}

// ---- LSTM ----


struct LstmCase {
  std::string direction;
  bool bias, h0, c0, yh, yc;
  bool claimed;
  std::string extra;  // "clip": a clip attribute (not reproduced)
};

onnx::ModelProto LstmModel(const LstmCase& c, int64_t t, int64_t n, int64_t in, int64_t h) {
  const int64_t d = c.direction == "bidirectional" ? 2 : 1;
  onnx::ModelProto m = NewModel("lstm", 14);
  auto* g = m.mutable_graph();
  AddInput(g, "X", {t, n, in});
  std::vector<float> w = Values({d, 4 * h, in}, 29), r = Values({d, 4 * h, h}, 31), b = Values({d, 8 * h}, 37);
  for (auto& x : w) x *= 0.5f;
  for (auto& x : r) x *= 0.5f;
  AddFloats(g, "W", {d, 4 * h, in}, w);
  AddFloats(g, "R", {d, 4 * h, h}, r);
  std::vector<std::string> ins = {"X", "W", "R", c.bias ? "B" : "", "", c.h0 ? "H0" : "", c.c0 ? "C0" : ""};
  if (c.bias) AddFloats(g, "B", {d, 8 * h}, b);
  if (c.h0) AddInput(g, "H0", {d, n, h});
  if (c.c0) AddInput(g, "C0", {d, n, h});
  while (!ins.empty() && ins.back().empty()) ins.pop_back();
  AddOutput(g, "Y", {t, d, n, h});
  std::vector<std::string> outs = {"Y", c.yh ? "Yh" : "", c.yc ? "Yc" : ""};
  if (c.yh) AddOutput(g, "Yh", {d, n, h});
  if (c.yc) AddOutput(g, "Yc", {d, n, h});
  while (outs.back().empty()) outs.pop_back();
  auto* node = Node(g, "LSTM", ins, outs);
  IntAttr(node, "hidden_size", h);
  StrAttr(node, "direction", c.direction);
  if (c.extra == "clip") FloatAttr(node, "clip", 0.5f);
  return m;
}

// oneDNN's LSTM with the gates reordered (ONNX i, o, f, c -> oneDNN i, f, c~, o) and the two biases summed at
// compile time; optional inputs and outputs absent or present (one initial state alone: the other is zeros, as
// ONNX's default); reverse direction.
TEST_F(AotCpuOps, LstmMatchesTheCpuEp) {
  const int64_t t = 5, n = 2, in = 7, h = 6;
  const LstmCase cases[] = {
      {"forward", true, true, true, true, true, true, ""},
      {"forward", false, false, false, false, false, true, ""},
      {"reverse", true, true, false, true, true, true, ""},
      {"forward", true, false, true, true, true, true, ""},   // initial_c only: initial_h is zeros
      {"forward", true, true, true, false, true, false, ""},  // Y_c without Y_h: oneDNN writes both or neither
      {"bidirectional", true, false, false, false, false, false, ""},  // Y layout differs from oneDNN's: not claimed
      {"forward", true, false, false, false, false, false, "clip"},    // clip: not reproduced
  };
  for (const LstmCase& c : cases) {
    SCOPED_TRACE(c.direction + (c.bias ? " B" : "") + (c.h0 ? " h0" : "") + (c.c0 ? " c0" : "") + " " + c.extra);
    const int64_t d = c.direction == "bidirectional" ? 2 : 1;
    std::vector<Input> inputs = {{"X", {t, n, in}, Values({t, n, in}, 41)}};
    if (c.h0) inputs.push_back({"H0", {d, n, h}, Values({d, n, h}, 43)});
    if (c.c0) inputs.push_back({"C0", {d, n, h}, Values({d, n, h}, 47)});
    Check(LstmModel(c, t, n, in, h), inputs, c.claimed);
  }
}

// ---- partitions that pay (providers/aotcpu/capability/partition_cost.h) ----

// X [1, 16, 32, 32] -> Sinh -> Conv 3x3 (16 -> 16) -> Relu -> Sinh -> Relu -> Sinh -> Y. Sinh is left on the CPU EP
// (not compiled by AotCpu), so the claimable nodes form two islands: the Conv + Relu (2.4 M multiply-adds: it pays) and the
// lone Relu after the second Sinh (16 K floats in and out: its partition would cost more than it saves).
onnx::ModelProto IslandsModel() {
  onnx::ModelProto m = NewModel("islands", 13);
  auto* g = m.mutable_graph();
  const Dims x = {1, 16, 32, 32};
  AddInput(g, "X", x);
  AddOutput(g, "Y", x);
  std::vector<float> w = Values({16, 16, 3, 3}, 59);
  for (float& v : w) v *= 0.05f;
  AddFloats(g, "W", {16, 16, 3, 3}, w);
  Node(g, "Sinh", {"X"}, {"s1"});
  IntsAttr(Node(g, "Conv", {"s1", "W"}, {"c"}), "pads", {1, 1, 1, 1});
  Node(g, "Relu", {"c"}, {"r1"});
  Node(g, "Sinh", {"r1"}, {"s2"});
  Node(g, "Relu", {"s2"}, {"r2"});
  Node(g, "Sinh", {"r2"}, {"Y"});
  return m;
}

class AotCpuIslands : public AotCpuOps {
 protected:
  // The fused node count of a session and its report.
  static size_t Partitions(const std::string& model, const std::map<std::string, std::string>& config,
                           std::string* report) {
    Session s(*env_, model.c_str(), Options(true, config));
    *report = s.GetSessionReport();
    return s.GetPartitionAssignments().size();
  }
};

TEST_F(AotCpuIslands, AHeavyConvIslandIsClaimedALoneReluIsLeftOnTheCpuEp) {
  TempDir dir;
  const std::string path = dir / "islands.onnx";
  WriteFile(path, Serialize(IslandsModel()));
  const char* key = "ep.aotcpuexecutionprovider.partition_switch_us";
  std::string report;
  EXPECT_EQ(Partitions(path, {}, &report), 1u) << report;
  EXPECT_TRUE(Contains(report, "\"node\":\"Relu_r2\",\"op\":\"Relu\",\"reasons\":{\"AotCpuExecutionProvider\":\"island "
                               "too small to pay for its boundary: est. saving 0.6 us (1 node, work 0 us) vs boundary "
                               "9.4 us (switch 1.2 us + 128.0 KB crossing)"))
      << report;
  EXPECT_FALSE(Contains(report, "\"node\":\"Relu_r1\"")) << report;  // in the Conv's partition
  // The option turns the rule off: both islands are partitions again ...
  EXPECT_EQ(Partitions(path, {{key, "0"}}, &report), 2u) << report;
  // ... or sets the switch cost: at 1 ms per partition not even the convolution (~119 us saved) pays.
  EXPECT_EQ(Partitions(path, {{key, "1000"}}, &report), 0u) << report;
  EXPECT_TRUE(Contains(report, "\"node\":\"Conv_c\",\"op\":\"Conv\",\"reasons\":{\"AotCpuExecutionProvider\":\"island "
                               "too small to pay for its boundary: est. saving 119 us (2 nodes, work 236 us) vs "
                               "boundary 1008 us (switch 1000 us + 128.0 KB crossing)"))
      << report;
}

// The _ctx.onnx holds only the claimed partition: one EPContext node, the lone Relu a plain node beside the Sinhs; its
// metadata lists the Relu with the rule's reason; JIT, generating and loaded sessions all match the CPU EP.
TEST_F(AotCpuIslands, TheContextModelHoldsOnlyClaimedPartitions) {
  TempDir dir;
  const onnx::ModelProto m = IslandsModel();
  const std::string path = dir / "islands.onnx";
  WriteFile(path, Serialize(m));
  const Dims x = {1, 16, 32, 32};
  std::vector<Input> inputs = {{"X", x, Values(x, 61)}};
  Session cpu(*env_, path.c_str(), Options(false));
  const auto want = Run(cpu, inputs);
  Session jit(*env_, path.c_str(), Options(true));
  ExpectNear(Run(jit, inputs), want, "JIT");
  for (int embed : {0, 1}) {
    SCOPED_TRACE("embed " + std::to_string(embed));
    const std::string ctx = dir / ("islands_e" + std::to_string(embed) + "_ctx.onnx");
    {
      Session gen(*env_, path.c_str(),
                  Options(true, {{"ep.context_enable", "1"},
                                 {"ep.context_file_path", ctx},
                                 {"ep.context_embed_mode", std::to_string(embed)}}));
      ExpectNear(Run(gen, inputs), want, "compiling session");
    }
    const onnx::ModelProto proto = epctx::testing::LoadProto(ctx);
    std::vector<std::string> ops;
    for (const auto& n : proto.graph().node()) ops.push_back(n.op_type());
    EXPECT_EQ(ops, (std::vector<std::string>{"Sinh", "EPContext", "Sinh", "Relu", "Sinh"}));
    std::string left;
    for (const auto& kv : proto.metadata_props())
      if (kv.key() == "epctx.left_on_cpu") left = kv.value();
    EXPECT_TRUE(Contains(left, "island too small to pay for its boundary")) << left;
    Session loaded(*env_, ctx.c_str(), Options(true));
    ExpectNear(Run(loaded, inputs), want, "loaded from _ctx.onnx");
    EXPECT_EQ(loaded.GetPartitionAssignments().size(), 1u);
  }
}

}  // namespace
}  // namespace epctx
