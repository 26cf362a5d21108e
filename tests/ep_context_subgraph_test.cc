// EPContext generation for partitions inside control-flow bodies (issue 13, the Silero VAD models): plugin EPs
// compile nodes inside If branches just in time (plugin_subgraph_test.cc); the context model must carry those
// partitions' EPContext nodes inside the branches, their binaries must hold every partition (one binary per EP and
// session, one main_context=1 node naming it), subgraph initializers must follow the same location rules as the main
// graph's, and a session loaded from it must give the CPU EP's outputs for both branch conditions.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::testing::AddTensorValueInfo;
using epctx::testing::AddWeight;
using epctx::testing::Contains;
using epctx::testing::DevicesOf;
using epctx::testing::Exists;
using epctx::testing::FindAttr;
using epctx::testing::kExample;
using epctx::testing::kExampleLib;
using epctx::testing::LoadProto;
using epctx::testing::Serialize;
using epctx::testing::RunIf;
using epctx::testing::StrAttr;
using epctx::testing::TempDir;

constexpr const char* kAotLib = EPCTX_BINARY_DIR "/lib/libepctx_aotcpu.so";
constexpr const char* kAot = "AotCpuExecutionProvider";

// A = X + W (main graph), then Y = If(cond, then: Relu(A) * Wt, else: Relu((A - We) * We)), with Wt and We
// initializers of their branches and A, W read from the outer scope. The example EP takes Add/Mul/Relu (not Sub), so
// it compiles one partition in each of the three graphs and leaves the else branch's Sub to the CPU EP; AotCpu takes
// every node but the If.
onnx::ModelProto IfModel() {
  onnx::ModelProto m = epctx::testing::NewModel("if_ctx");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "cond", {}, onnx::TensorProto::BOOL);
  AddTensorValueInfo(g->add_input(), "X", {4});
  AddTensorValueInfo(g->add_output(), "Y", {4});
  AddWeight(g, "W", {1.f, -2.f, 3.f, -4.f});
  epctx::testing::AddNode(g, "Add", "pre", {"X", "W"}, "A");
  auto* node = epctx::testing::AddNode(g, "If", "if", {"cond"}, "Y");
  auto branch = [](const std::string& name, bool then) {
    onnx::GraphProto b;
    b.set_name(name);
    AddTensorValueInfo(b.add_output(), name + "_out", {4});
    if (then) {
      AddWeight(&b, "Wt", {0.5f, 2.f, -1.f, 3.f});
      epctx::testing::AddNode(&b, "Relu", "then_relu", {"A"}, "t1");
      epctx::testing::AddNode(&b, "Mul", "then_mul", {"t1", "Wt"}, name + "_out");
    } else {
      AddWeight(&b, "We", {-1.f, 0.25f, 2.f, -0.5f});
      epctx::testing::AddNode(&b, "Sub", "else_sub", {"A", "We"}, "e1");
      epctx::testing::AddNode(&b, "Mul", "else_mul", {"e1", "We"}, "e2");
      epctx::testing::AddNode(&b, "Relu", "else_relu", {"e2"}, name + "_out");
    }
    return b;
  };
  for (bool then : {true, false}) {
    auto* a = node->add_attribute();
    a->set_name(then ? "then_branch" : "else_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = branch(then ? "then" : "else", then);
  }
  return m;
}

const onnx::GraphProto& Branch(const onnx::GraphProto& main, const std::string& attr) {
  for (const auto& n : main.node())
    if (n.op_type() == "If")
      for (const auto& a : n.attribute())
        if (a.name() == attr) return a.g();
  ADD_FAILURE() << "no If node with attribute " << attr;
  static const onnx::GraphProto kEmpty;
  return kEmpty;
}

std::vector<std::string> OpTypes(const onnx::GraphProto& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.node()) ops.push_back(n.op_type());
  return ops;
}

// Every EPContext node of the model, subgraphs included.
void CollectContextNodes(const onnx::GraphProto& g, std::vector<const onnx::NodeProto*>* out) {
  for (const auto& n : g.node()) {
    if (n.op_type() == "EPContext") out->push_back(&n);
    for (const auto& a : n.attribute())
      if (a.has_g()) CollectContextNodes(a.g(), out);
  }
}

int64_t IntAttr(const onnx::NodeProto& n, const std::string& name) {
  const onnx::AttributeProto* a = FindAttr(n, name);
  EXPECT_TRUE(a) << n.name() << " lacks " << name;
  return a ? a->i() : -1;
}

struct Ep {
  std::string name, lib, binary_suffix;
};

// AotCpu with its partition cost rule off (partition_switch_us=0): these graphs of 4 floats are about where
// partitions are written, and the rule would leave the main graph's lone Add on the CPU EP.
SessionOptions With(const Env& env, const Ep& ep, const std::map<std::string, std::string>& config = {}) {
  SessionOptions o;
  o.SetIntraOpNumThreads(1);
  o.AppendExecutionProvider_V2(env, DevicesOf(env, ep.name, false),
                               ep.name == kAot ? KeyValuePairs{{"partition_switch_us", "0"}} : KeyValuePairs());
  for (const auto& [k, v] : config) o.AddConfigEntry(k.c_str(), v.c_str());
  return o;
}

class SubgraphContext : public ::testing::TestWithParam<std::tuple<int, int>> {  // (EP: 0 example 1 aotcpu, embed)
 protected:
  Ep ep() const {
    return std::get<0>(GetParam()) == 0 ? Ep{kExample, kExampleLib, "_example.bin"}
                                        : Ep{kAot, kAotLib, "_aotcpu.bin"};
  }
  int embed() const { return std::get<1>(GetParam()); }
};

TEST_P(SubgraphContext, BranchPartitionsAreWrittenInsideTheBranchesAndLoadBack) {
  const Ep e = ep();
  const bool example = e.name == kExample;
  Env env;
  env.RegisterExecutionProviderLibrary("ep", e.lib.c_str());
  TempDir dir;
  const std::string src = dir / "m.onnx", ctx = dir / "m_ctx.onnx";
  epctx::testing::WriteFile(src, Serialize(IfModel()));
  Session cpu(env, src.c_str(), SessionOptions());
  std::map<bool, std::vector<float>> expected;
  for (bool c : {true, false}) expected[c] = RunIf(cpu, c);
  EXPECT_EQ(expected[true], (std::vector<float>{0.75f, 0.f, 0.f, 0.f}));  // Relu(X+W)*Wt
  EXPECT_EQ(expected[false], (std::vector<float>{0.f, 0.f, 0.f, 0.75f}));  // Relu((X+W-We)*We)

  size_t jit_partitions = 0;
  {
    Session gen(env, src.c_str(),
                With(env, e, {{"ep.context_enable", "1"}, {"ep.context_file_path", ctx},
                              {"ep.context_embed_mode", std::to_string(embed())}}));
    jit_partitions = gen.GetPartitionAssignments().size();
    for (bool c : {true, false}) EXPECT_EQ(RunIf(gen, c), expected[c]) << "JIT, cond " << c;
  }
  EXPECT_EQ(jit_partitions, 3u) << "one partition in the main graph and one in each branch";
  ASSERT_TRUE(Exists(ctx));
  const onnx::ModelProto proto = LoadProto(ctx);
  const onnx::GraphProto& then_g = Branch(proto.graph(), "then_branch");
  const onnx::GraphProto& else_g = Branch(proto.graph(), "else_branch");
  EXPECT_EQ(OpTypes(proto.graph()), (std::vector<std::string>{"EPContext", "If"}));
  EXPECT_EQ(OpTypes(then_g), (std::vector<std::string>{"EPContext"}));
  EXPECT_EQ(OpTypes(else_g), example ? (std::vector<std::string>{"Sub", "EPContext"})
                                     : (std::vector<std::string>{"EPContext"}));
  // The branches keep their declared outputs; an initializer stays only while a written node reads it.
  EXPECT_EQ(then_g.output(0).name(), "then_out");
  EXPECT_EQ(else_g.output(0).name(), "else_out");
  bool sub_reads_we = example;
  size_t we = 0;
  for (const auto& tp : else_g.initializer()) we += tp.name() == "We";
  if (sub_reads_we) {
    EXPECT_EQ(we, 1u) << "the CPU EP's Sub still reads We";
  }
  for (const auto& tp : then_g.initializer()) {  // a branch initializer that remains must be read there
    bool read = false;
    for (const auto& n : then_g.node())
      for (const auto& in : n.input()) read |= in == tp.name();
    EXPECT_TRUE(read) << tp.name();
  }

  std::vector<const onnx::NodeProto*> nodes;
  CollectContextNodes(proto.graph(), &nodes);
  ASSERT_EQ(nodes.size(), 3u);
  size_t mains = 0;
  for (const auto* n : nodes) {
    EXPECT_EQ(n->domain(), "com.microsoft");
    EXPECT_EQ(StrAttr(*n, "source"), e.name);
    EXPECT_EQ(IntAttr(*n, "embed_mode"), embed());
    if (embed() == 1) {
      EXPECT_FALSE(StrAttr(*n, "ep_cache_context").empty());
      continue;
    }
    if (IntAttr(*n, "main_context") == 1) {
      ++mains;
      EXPECT_EQ(StrAttr(*n, "ep_cache_context"), "m_ctx" + e.binary_suffix);
    } else {
      EXPECT_FALSE(StrAttr(*n, "partition_name").empty());
    }
  }
  if (embed() == 0) {
    EXPECT_EQ(mains, 1u) << "one context binary per EP and session, named by one main_context=1 node";
    EXPECT_TRUE(Exists(dir / ("m_ctx" + e.binary_suffix)));
  } else {
    EXPECT_FALSE(Exists(dir / ("m_ctx" + e.binary_suffix)));
  }

  // Loaded: the EP claims the EPContext nodes in every graph; nothing is compiled again.
  SessionOptions lo = With(env, e, {{"session.disable_model_compile", "1"}});
  Session loaded(env, ctx.c_str(), lo);
  EXPECT_EQ(loaded.GetPartitionAssignments().size(), 3u) << loaded.GetSessionReport();
  for (bool c : {true, false}) EXPECT_EQ(RunIf(loaded, c), expected[c]) << "from the context model, cond " << c;
}

INSTANTIATE_TEST_SUITE_P(EpAndEmbed, SubgraphContext,
                         ::testing::Combine(::testing::Values(0, 1), ::testing::Values(0, 1)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == 0 ? "Example" : "AotCpu") + "Embed" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Subgraph initializers follow the external-initializers rule of the main graph's: the else branch's We (still read
// by the CPU EP's Sub) goes to the external file, and the model loads and runs from it.
TEST(SubgraphContextInitializers, BranchInitializerGoesToTheExternalFile) {
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  const Ep e{kExample, kExampleLib, "_example.bin"};
  TempDir dir;
  const std::string src = dir / "m.onnx", ctx = dir / "m_ctx.onnx";
  epctx::testing::WriteFile(src, Serialize(IfModel()));
  Session cpu(env, src.c_str(), SessionOptions());
  {
    Session gen(env, src.c_str(),
                With(env, e, {{"ep.context_enable", "1"}, {"ep.context_file_path", ctx},
                              {"ep.context_model_external_initializers_file_name", "m_ctx_weights.bin"}}));
  }
  ASSERT_TRUE(Exists(dir / "m_ctx_weights.bin"));
  const onnx::ModelProto proto = LoadProto(ctx);
  const onnx::GraphProto& else_g = Branch(proto.graph(), "else_branch");
  ASSERT_EQ(else_g.initializer_size(), 1);
  const onnx::TensorProto& we = else_g.initializer(0);
  EXPECT_EQ(we.name(), "We");
  EXPECT_EQ(we.data_location(), onnx::TensorProto::EXTERNAL);
  std::string location;
  for (const auto& kv : we.external_data())
    if (kv.key() == "location") location = kv.value();
  EXPECT_EQ(location, "m_ctx_weights.bin");
  Session loaded(env, ctx.c_str(), With(env, e));
  for (bool c : {true, false}) EXPECT_EQ(RunIf(loaded, c), RunIf(cpu, c)) << "cond " << c;
}

// A Loop body is rewritten the same way: Y = 3 iterations of x <- Relu(x + W) * W' with W' a body initializer.
TEST(SubgraphContextLoop, BodyPartitionIsWrittenInsideTheBodyAndLoadsBack) {
  onnx::ModelProto m = epctx::testing::NewModel("loop_ctx");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {4});
  AddTensorValueInfo(g->add_output(), "Y", {4});
  AddWeight(g, "W", {0.5f, -1.f, 0.25f, 2.f});
  auto* trip = g->add_initializer();
  trip->set_name("M");
  trip->set_data_type(onnx::TensorProto::INT64);
  trip->add_int64_data(3);
  auto* loop = epctx::testing::AddNode(g, "Loop", "loop", {"M", "", "X"}, "Y");
  onnx::GraphProto body;
  body.set_name("body");
  AddTensorValueInfo(body.add_input(), "i", {}, onnx::TensorProto::INT64);
  AddTensorValueInfo(body.add_input(), "c", {}, onnx::TensorProto::BOOL);
  AddTensorValueInfo(body.add_input(), "x", {4});
  AddTensorValueInfo(body.add_output(), "c_out", {}, onnx::TensorProto::BOOL);
  AddTensorValueInfo(body.add_output(), "x_out", {4});
  AddWeight(&body, "Wb", {1.5f, 0.5f, -2.f, 1.f});
  epctx::testing::AddNode(&body, "Identity", "cond_copy", {"c"}, "c_out");
  epctx::testing::AddNode(&body, "Add", "body_add", {"x", "W"}, "s");
  epctx::testing::AddNode(&body, "Relu", "body_relu", {"s"}, "r");
  epctx::testing::AddNode(&body, "Mul", "body_mul", {"r", "Wb"}, "x_out");
  auto* a = loop->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body;

  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  const Ep e{kExample, kExampleLib, "_example.bin"};
  TempDir dir;
  const std::string src = dir / "loop.onnx", ctx = dir / "loop_ctx.onnx";
  epctx::testing::WriteFile(src, Serialize(m));
  auto run = [](const Session& s) {
    std::vector<float> x{0.5f, 1.f, -5.f, 2.f};
    int64_t shape[] = {4};
    std::vector<Value> in;
    in.push_back(Value::CreateTensor<float>(x.data(), 4, shape, 1));
    auto out = s.Run({"X"}, in, {"Y"});
    const float* y = out[0].GetTensorData<float>();
    return std::vector<float>(y, y + 4);
  };
  Session cpu(env, src.c_str(), SessionOptions());
  const std::vector<float> expected = run(cpu);
  EXPECT_NE(expected, (std::vector<float>(4, 0.f)));
  {
    Session gen(env, src.c_str(), With(env, e, {{"ep.context_enable", "1"}, {"ep.context_file_path", ctx}}));
    EXPECT_EQ(gen.GetPartitionAssignments().size(), 1u);
    EXPECT_EQ(run(gen), expected);
  }
  const onnx::ModelProto proto = LoadProto(ctx);
  ASSERT_EQ(OpTypes(proto.graph()), (std::vector<std::string>{"Loop"}));
  const onnx::GraphProto& b = proto.graph().node(0).attribute(0).g();
  std::vector<const onnx::NodeProto*> nodes;
  CollectContextNodes(b, &nodes);
  EXPECT_EQ(nodes.size(), 1u) << "the example EP's partition of the body";
  EXPECT_EQ(OpTypes(b)[0], "Identity");
  EXPECT_EQ(b.input_size(), 3);
  EXPECT_EQ(b.output_size(), 2);
  Session loaded(env, ctx.c_str(), With(env, e, {{"session.disable_model_compile", "1"}}));
  EXPECT_EQ(run(loaded), expected);
}

// Free dims reach If and Loop bodies only through outer-scope values (issue 27, item 4): X float[N,4] with N free,
// Y = If(cond, then: Relu(X + W) * Wt, else: Relu((X - We) * We)) and Z = 2 iterations of x <- Relu(x * W) + X
// (x declared float[N,4] in the body). AotCpu with dynamic_shapes=1 compiles each body (the outer X carries the
// symbol N into it), just in time and from a _ctx.onnx, and gives the CPU EP's values at several N. Before, each
// body's nodes stayed on the CPU EP ("dim 0 is free ('N')").
TEST(SubgraphContextDynamic, BodiesTakeTheOuterScopeFreeDimsAndCompile) {
  onnx::ModelProto m = epctx::testing::NewModel("dyn_bodies");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "cond", {}, onnx::TensorProto::BOOL);
  *g->add_input() = epctx::testing::FloatNx4("X");
  *g->add_output() = epctx::testing::FloatNx4("Y");
  *g->add_output() = epctx::testing::FloatNx4("Z");
  AddWeight(g, "W", {1.f, -2.f, 3.f, -4.f});
  auto* iff = epctx::testing::AddNode(g, "If", "if", {"cond"}, "Y");
  for (bool then : {true, false}) {
    onnx::GraphProto b;
    b.set_name(then ? "then" : "else");
    AddTensorValueInfo(b.add_output(), b.name() + "_out", {});
    b.mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
    if (then) {
      AddWeight(&b, "Wt", {0.5f, 2.f, -1.f, 3.f});
      epctx::testing::AddNode(&b, "Add", "then_add", {"X", "W"}, "t0");
      epctx::testing::AddNode(&b, "Relu", "then_relu", {"t0"}, "t1");
      epctx::testing::AddNode(&b, "Mul", "then_mul", {"t1", "Wt"}, "then_out");
    } else {
      AddWeight(&b, "We", {-1.f, 0.25f, 2.f, -0.5f});
      epctx::testing::AddNode(&b, "Sub", "else_sub", {"X", "We"}, "e1");
      epctx::testing::AddNode(&b, "Mul", "else_mul", {"e1", "We"}, "e2");
      epctx::testing::AddNode(&b, "Relu", "else_relu", {"e2"}, "else_out");
    }
    auto* a = iff->add_attribute();
    a->set_name(then ? "then_branch" : "else_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = b;
  }
  auto* trip = g->add_initializer();
  trip->set_name("M");
  trip->set_data_type(onnx::TensorProto::INT64);
  trip->add_int64_data(2);
  auto* loop = epctx::testing::AddNode(g, "Loop", "loop", {"M", "", "X"}, "Z");
  onnx::GraphProto body;
  body.set_name("body");
  AddTensorValueInfo(body.add_input(), "i", {}, onnx::TensorProto::INT64);
  AddTensorValueInfo(body.add_input(), "c", {}, onnx::TensorProto::BOOL);
  *body.add_input() = epctx::testing::FloatNx4("x");
  AddTensorValueInfo(body.add_output(), "c_out", {}, onnx::TensorProto::BOOL);
  *body.add_output() = epctx::testing::FloatNx4("x_out");
  epctx::testing::AddNode(&body, "Identity", "cond_copy", {"c"}, "c_out");
  epctx::testing::AddNode(&body, "Mul", "body_mul", {"x", "W"}, "s");
  epctx::testing::AddNode(&body, "Relu", "body_relu", {"s"}, "r");
  epctx::testing::AddNode(&body, "Add", "body_add", {"r", "X"}, "x_out");
  auto* la = loop->add_attribute();
  la->set_name("body");
  la->set_type(onnx::AttributeProto::GRAPH);
  *la->mutable_g() = body;

  Env env;
  env.RegisterExecutionProviderLibrary("aotcpu", kAotLib);
  TempDir dir;
  const std::string src = dir / "m.onnx", ctx = dir / "m_ctx.onnx";
  epctx::testing::WriteFile(src, Serialize(m));
  auto options = [&](const std::map<std::string, std::string>& config) {
    SessionOptions o;
    o.SetIntraOpNumThreads(1);
    o.AppendExecutionProvider_V2(env, DevicesOf(env, kAot, false),
                                 KeyValuePairs{{"partition_switch_us", "0"}, {"dynamic_shapes", "1"}});
    for (const auto& [k, v] : config) o.AddConfigEntry(k.c_str(), v.c_str());
    return o;
  };
  auto run = [](const Session& s, int64_t n, bool cond) {
    std::vector<float> x(static_cast<size_t>(n * 4));
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.75f * static_cast<float>(i % 7) - 2.f;
    int64_t shape[] = {n, 4};
    bool c = cond;
    std::vector<Value> in;
    in.push_back(Value::CreateTensor<bool>(&c, 1, nullptr, 0));
    in.push_back(Value::CreateTensor<float>(x.data(), x.size(), shape, 2));
    auto out = s.Run({"cond", "X"}, in, {"Y", "Z"});
    std::vector<float> v;
    for (auto& o : out) v.insert(v.end(), o.GetTensorData<float>(), o.GetTensorData<float>() + x.size());
    return v;
  };
  Session cpu(env, src.c_str(), SessionOptions());
  auto expect_all = [&](const Session& s, const char* what) {
    for (int64_t n : {1, 3, 6})
      for (bool c : {true, false}) EXPECT_EQ(run(s, n, c), run(cpu, n, c)) << what << ", N " << n << ", cond " << c;
  };
  {
    Session jit(env, src.c_str(), options({{"ep.context_enable", "1"}, {"ep.context_file_path", ctx}}));
    const auto assigned = jit.GetPartitionAssignments();
    EXPECT_EQ(assigned.size(), 3u) << "one partition in each branch and in the loop body\n" << jit.GetSessionReport();
    for (const auto& [node, ep] : assigned) EXPECT_EQ(ep, kAot) << node;
    expect_all(jit, "just in time");
  }
  const onnx::ModelProto proto = LoadProto(ctx);
  std::vector<const onnx::NodeProto*> nodes;
  CollectContextNodes(proto.graph(), &nodes);
  EXPECT_EQ(nodes.size(), 3u);
  EXPECT_EQ(OpTypes(Branch(proto.graph(), "then_branch")), (std::vector<std::string>{"EPContext"}));
  EXPECT_EQ(OpTypes(Branch(proto.graph(), "else_branch")), (std::vector<std::string>{"EPContext"}));
  Session loaded(env, ctx.c_str(), options({{"session.disable_model_compile", "1"}}));
  EXPECT_EQ(loaded.GetPartitionAssignments().size(), 3u) << loaded.GetSessionReport();
  expect_all(loaded, "from the context model");
}

// Weight sharing (AotCpu, ep.share_ep_contexts=1): two If models compiled as a group write one binary named after
// the first model; each ctx model's EPContext nodes, branches included, reference it, and each model loads from it
// alone and with sharing, giving the CPU EP's outputs.
TEST(SubgraphContextShare, GroupBinaryHoldsTheBranchPartitionsOfBothModels) {
  Env env;
  env.RegisterExecutionProviderLibrary("aotcpu", kAotLib);
  const Ep e{kAot, kAotLib, "_aotcpu.bin"};
  TempDir dir;
  onnx::ModelProto b = IfModel();  // its own graph names: partition names differ from a's
  b.mutable_graph()->set_name("if_ctx_b");
  for (auto& a : *b.mutable_graph()->mutable_node(1)->mutable_attribute()) a.mutable_g()->set_name(a.g().name() + "_b");
  epctx::testing::WriteFile(dir / "a.onnx", Serialize(IfModel()));
  epctx::testing::WriteFile(dir / "b.onnx", Serialize(b));
  Session cpu(env, (dir / "a.onnx").c_str(), SessionOptions());
  {
    Session ga(env, (dir / "a.onnx").c_str(), With(env, e, {{"ep.context_enable", "1"}, {"ep.share_ep_contexts", "1"}}));
    Session gb(env, (dir / "b.onnx").c_str(),
               With(env, e, {{"ep.context_enable", "1"}, {"ep.share_ep_contexts", "1"},
                             {"ep.stop_share_ep_contexts", "1"}}));
  }
  EXPECT_EQ(epctx::testing::FilesIn(dir.path()),
            (std::set<std::string>{"a.onnx", "b.onnx", "a_ctx.onnx", "b_ctx.onnx", "a_aotcpu.bin"}));
  for (const char* name : {"a_ctx.onnx", "b_ctx.onnx"}) {
    const onnx::ModelProto proto = LoadProto(dir / name);
    std::vector<const onnx::NodeProto*> nodes;
    CollectContextNodes(proto.graph(), &nodes);
    ASSERT_EQ(nodes.size(), 3u) << name;
    EXPECT_EQ(OpTypes(Branch(proto.graph(), "then_branch")), (std::vector<std::string>{"EPContext"})) << name;
    size_t mains = 0;
    for (const auto* n : nodes)
      if (IntAttr(*n, "main_context") == 1) {
        ++mains;
        EXPECT_EQ(StrAttr(*n, "ep_cache_context"), "a_aotcpu.bin") << name;
      }
    EXPECT_EQ(mains, 1u) << name;
  }
  for (const std::map<std::string, std::string>& load :
       {std::map<std::string, std::string>{}, std::map<std::string, std::string>{{"ep.share_ep_contexts", "1"}}}) {
    Session la(env, (dir / "a_ctx.onnx").c_str(), With(env, e, load));
    Session lb(env, (dir / "b_ctx.onnx").c_str(), With(env, e, load));
    for (bool c : {true, false}) {
      EXPECT_EQ(RunIf(la, c), RunIf(cpu, c)) << "a, cond " << c << ", sharing " << load.size();
      EXPECT_EQ(RunIf(lb, c), RunIf(cpu, c)) << "b, cond " << c << ", sharing " << load.size();
    }
  }
}

// A model whose only EPContext nodes lie inside control-flow bodies is a compiled model: the compile API refuses it
// as ONNX Runtime does for any compiled model.
TEST(SubgraphContextInitializers, ModelCompiledInsideBranchesIsNotCompiledAgain) {
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  const Ep e{kExample, kExampleLib, "_example.bin"};
  onnx::ModelProto m = IfModel();
  m.mutable_graph()->mutable_node()->erase(m.mutable_graph()->mutable_node()->begin());  // no main-graph partition
  m.mutable_graph()->mutable_node(0)->set_input(0, "cond");
  for (auto& a : *m.mutable_graph()->mutable_node(0)->mutable_attribute())
    for (auto& n : *a.mutable_g()->mutable_node())
      for (auto& in : *n.mutable_input())
        if (in == "A") in = "X";
  TempDir dir;
  const std::string src = dir / "m.onnx", ctx = dir / "m_ctx.onnx";
  epctx::testing::WriteFile(src, Serialize(m));
  {
    Session gen(env, src.c_str(), With(env, e, {{"ep.context_enable", "1"}, {"ep.context_file_path", ctx}}));
  }
  const onnx::ModelProto proto = LoadProto(ctx);
  EXPECT_EQ(OpTypes(proto.graph()), (std::vector<std::string>{"If"}));
  std::vector<const onnx::NodeProto*> nodes;
  CollectContextNodes(proto.graph(), &nodes);
  EXPECT_EQ(nodes.size(), 2u);
  ModelCompilationOptions co(env, With(env, e));
  co.SetInputModelPath(ctx.c_str());
  co.SetOutputModelPath((dir / "again_ctx.onnx").c_str());
  const Status st = CompileModel(env, co);
  EXPECT_EQ(st.code(), ErrorCode::INVALID_GRAPH) << st.message();
  EXPECT_TRUE(Contains(st.message(), "already compiled")) << st.message();
}

// A branch that reads a weight of the main graph (the Silero VAD models keep every branch's weights there): the EP
// sees it as a constant initializer from the outer scope, with its shape (ONNX Runtime's EP API does the same), so
// AotCpu compiles the whole branch; JIT and the context model give the CPU EP's outputs.
TEST(SubgraphContextInitializers, BranchReadingAMainGraphWeightIsCompiled) {
  Env env;
  env.RegisterExecutionProviderLibrary("aotcpu", kAotLib);
  const Ep e{kAot, kAotLib, "_aotcpu.bin"};
  onnx::ModelProto m = epctx::testing::NewModel("outer_weight");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "cond", {}, onnx::TensorProto::BOOL);
  AddTensorValueInfo(g->add_input(), "X", {4});
  AddTensorValueInfo(g->add_output(), "Y", {4});
  AddWeight(g, "Wm", {2.f, -1.f, 0.5f, 4.f});
  auto* node = epctx::testing::AddNode(g, "If", "if", {"cond"}, "Y");
  for (bool then : {true, false}) {
    auto* a = node->add_attribute();
    a->set_name(then ? "then_branch" : "else_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* b = a->mutable_g();
    const std::string name = then ? "then" : "else";
    b->set_name(name);
    AddTensorValueInfo(b->add_output(), name + "_out", {4});
    epctx::testing::AddNode(b, then ? "Mul" : "Add", name + "_op", {"X", "Wm"}, name + "_t");
    epctx::testing::AddNode(b, "Relu", name + "_relu", {name + "_t"}, name + "_out");
  }
  TempDir dir;
  const std::string src = dir / "m.onnx", ctx = dir / "m_ctx.onnx";
  epctx::testing::WriteFile(src, Serialize(m));
  Session cpu(env, src.c_str(), SessionOptions());
  EXPECT_EQ(RunIf(cpu, true), (std::vector<float>{1.f, 0.f, 0.f, 8.f}));   // Relu(X * Wm)
  EXPECT_EQ(RunIf(cpu, false), (std::vector<float>{2.5f, 0.f, 0.f, 6.f}));  // Relu(X + Wm)
  {
    Session gen(env, src.c_str(), With(env, e, {{"ep.context_enable", "1"}, {"ep.context_file_path", ctx}}));
    EXPECT_EQ(gen.GetPartitionAssignments().size(), 2u) << gen.GetSessionReport();
    for (bool c : {true, false}) EXPECT_EQ(RunIf(gen, c), RunIf(cpu, c)) << "JIT, cond " << c;
  }
  const onnx::ModelProto proto = LoadProto(ctx);
  EXPECT_EQ(OpTypes(Branch(proto.graph(), "then_branch")), (std::vector<std::string>{"EPContext"}));
  EXPECT_EQ(OpTypes(Branch(proto.graph(), "else_branch")), (std::vector<std::string>{"EPContext"}));
  Session loaded(env, ctx.c_str(), With(env, e, {{"session.disable_model_compile", "1"}}));
  for (bool c : {true, false}) EXPECT_EQ(RunIf(loaded, c), RunIf(cpu, c)) << "from the context model, cond " << c;
}

}  // namespace
}  // namespace epctx
