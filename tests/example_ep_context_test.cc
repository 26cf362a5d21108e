// End-to-end tests of EPContext generation and loading with the example plugin EP (ExampleExecutionProvider),
// through the public C++ API only: ctx models are generated with ep.context_enable=1, inspected and damaged with
// onnx protobuf, and loaded again.
//
// What the example EP promises (providers/example/README.md):
// - generation: EPContext nodes named ep.context_node_name_prefix + fused node name (= partition_name), source
//   "ExampleExecutionProvider", ep_sdk_version "0.1.0"; embed mode 1: every node main_context=1 with its program in
//   ep_cache_context; embed mode 0 (default): one binary "<ctx stem>_example.bin" beside the ctx model holding every
//   graph, the first node main_context=1 naming it, the others main_context=0 without ep_cache_context;
// - loading: it claims EPContext nodes whose source is ExampleExecutionProvider/example (any case); every failure
//   to load a context is INVALID_GRAPH "Failed to load from EpContext model. ..." naming the file and the reason.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

namespace fs = std::filesystem;
using epctx::testing::AddNode;
using epctx::testing::AddReluModel;
using epctx::testing::AddWeight;
using epctx::testing::Catch;
using epctx::testing::Contains;
using epctx::testing::ContextNodes;
using epctx::testing::CpuReference;
using epctx::testing::DevicesOf;
using epctx::testing::FilesIn;
using epctx::testing::FindAttr;
using epctx::testing::FloatNx4;
using epctx::testing::kExample;
using epctx::testing::kExampleLib;
using epctx::testing::LoadProto;
using epctx::testing::NewModel;
using epctx::testing::ReadFile;
using epctx::testing::RunOne;
using epctx::testing::Serialize;
using epctx::testing::StrAttr;
using epctx::testing::TempDir;
using epctx::testing::WithExample;
using epctx::testing::WriteFile;

const char* kLoadError = "Failed to load from EpContext model. ";

// Y = Relu(Mul(Sigmoid(Add(X, W)), V)): the example EP takes {Add} and {Mul, Relu}, Sigmoid stays on the CPU, so
// the ctx model has two EPContext nodes around a CPU node.
onnx::ModelProto TwoPartitionModel() {
  onnx::ModelProto m = NewModel("two_partitions");
  auto* g = m.mutable_graph();
  *g->add_input() = FloatNx4("X");
  *g->add_output() = FloatNx4("Y");
  AddWeight(g, "W", {1, -2, 3, -4});
  AddWeight(g, "V", {2, -1, 0.5f, 3});
  AddNode(g, "Add", "add", {"X", "W"}, "A");
  AddNode(g, "Sigmoid", "sigmoid", {"A"}, "S");
  AddNode(g, "Mul", "mul", {"S", "V"}, "M");
  AddNode(g, "Relu", "relu", {"M"}, "Y");
  return m;
}

bool HasAttr(const onnx::NodeProto& n, const std::string& name) { return FindAttr(n, name) != nullptr; }
int64_t IntAttr(const onnx::NodeProto& n, const std::string& name) {
  const auto* a = FindAttr(n, name);
  EXPECT_TRUE(a) << "node " << n.name() << " lacks " << name;
  return a ? a->i() : -1;
}
void SetStrAttr(onnx::NodeProto* n, const std::string& name, const std::string& value) {
  for (auto& a : *n->mutable_attribute())
    if (a.name() == name) {
      a.set_s(value);
      return;
    }
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
}

class ExampleEpContext : public ::testing::Test {
 protected:
  void SetUp() override { env_.RegisterExecutionProviderLibrary("example", kExampleLib); }

  // Session options selecting the example EP on the CPU, plus session config entries.
  SessionOptions Options(const std::map<std::string, std::string>& config = {}) {
    EXPECT_EQ(DevicesOf(env_, kExample, false).size(), 1u);
    return WithExample(env_, KeyValuePairs{}, config);
  }

  // Writes `model` as dir/m.onnx and generates its ctx model (m_ctx.onnx beside it unless config says otherwise).
  void Generate(const std::string& dir, const onnx::ModelProto& model, std::map<std::string, std::string> config) {
    WriteFile(dir + "/m.onnx", Serialize(model));
    config["ep.context_enable"] = "1";
    Session s(env_, (dir + "/m.onnx").c_str(), Options(config));
    EXPECT_EQ(RunOne(s), CpuReference(model));  // the generating session runs too
  }

  // Loads a ctx model with the example EP, checks its EPContext nodes ran on the example EP and returns outputs.
  std::vector<float> RunContextModel(const std::string& path, const std::map<std::string, std::string>& config = {}) {
    Session s(env_, path.c_str(), Options(config));
    for (const auto& [node, ep] : s.GetPartitionAssignments()) EXPECT_EQ(ep, kExample) << node;
    EXPECT_FALSE(s.GetPartitionAssignments().empty());
    return RunOne(s);
  }

  // Loading `path` with the example EP fails with INVALID_GRAPH "Failed to load from EpContext model. ..." holding
  // every string in `parts`.
  void ExpectLoadError(const std::string& path, const std::vector<std::string>& parts) {
    Exception e = Catch([&] { Session s(env_, path.c_str(), Options()); });
    EXPECT_EQ(e.code(), ErrorCode::INVALID_GRAPH) << e.what();
    EXPECT_TRUE(Contains(e.what(), kLoadError)) << e.what();
    for (const auto& p : parts) EXPECT_TRUE(Contains(e.what(), p)) << "'" << p << "' not in: " << e.what();
  }

  Env env_;
};

// ---- generation ----

TEST_F(ExampleEpContext, GenerateEmbedMode1PutsEachProgramInItsNode) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {{"ep.context_embed_mode", "1"}});
  EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"m.onnx", "m_ctx.onnx"}));  // no binary in embed mode
  onnx::ModelProto ctx = LoadProto(dir / "m_ctx.onnx");
  auto nodes = ContextNodes(&ctx);
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(ctx.graph().node_size(), 1);  // Add and Relu were fused into one EPContext node
  const onnx::NodeProto& n = *nodes[0];
  EXPECT_EQ(n.domain(), "com.microsoft");
  EXPECT_EQ(IntAttr(n, "main_context"), 1);
  EXPECT_EQ(IntAttr(n, "embed_mode"), 1);
  EXPECT_EQ(StrAttr(n, "source"), kExample);
  EXPECT_EQ(StrAttr(n, "ep_sdk_version"), "0.1.0");
  EXPECT_EQ(StrAttr(n, "partition_name"), n.name());
  EXPECT_EQ(n.name().rfind(kExample, 0), 0u) << n.name();  // the fused node's name, no prefix
  EXPECT_EQ(StrAttr(n, "ep_cache_context").rfind("example-program 1\n", 0), 0u);
  EXPECT_EQ(std::vector<std::string>(n.input().begin(), n.input().end()), (std::vector<std::string>{"X", "W"}));
  EXPECT_EQ(std::vector<std::string>(n.output().begin(), n.output().end()), std::vector<std::string>{"Y"});
  EXPECT_EQ(RunContextModel(dir / "m_ctx.onnx"), CpuReference(AddReluModel()));
}

TEST_F(ExampleEpContext, GenerateEmbedMode0WritesOneBinaryBesideTheModel) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});  // embed mode 0 is the default
  EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"m.onnx", "m_ctx.onnx", "m_ctx_example.bin"}));
  onnx::ModelProto ctx = LoadProto(dir / "m_ctx.onnx");
  auto nodes = ContextNodes(&ctx);
  ASSERT_EQ(nodes.size(), 1u);
  const onnx::NodeProto& n = *nodes[0];
  EXPECT_EQ(IntAttr(n, "main_context"), 1);
  EXPECT_EQ(IntAttr(n, "embed_mode"), 0);
  EXPECT_EQ(StrAttr(n, "ep_cache_context"), "m_ctx_example.bin");  // relative: a file name
  EXPECT_EQ(StrAttr(n, "source"), kExample);
  EXPECT_EQ(StrAttr(n, "ep_sdk_version"), "0.1.0");
  EXPECT_EQ(StrAttr(n, "partition_name"), n.name());
  const std::string bin = ReadFile(dir / "m_ctx_example.bin");
  EXPECT_EQ(bin.rfind("example-context 1\ngraphs 1\ngraph " + n.name() + "\nexample-program 1\n", 0), 0u) << bin;
  EXPECT_EQ(RunContextModel(dir / "m_ctx.onnx"), CpuReference(AddReluModel()));
}

TEST_F(ExampleEpContext, EmbedModeOtherThan1MeansBinary) {
  for (const char* mode : {"0", "yes", ""}) {
    TempDir dir;
    Generate(dir.path(), AddReluModel(), {{"ep.context_embed_mode", mode}});
    EXPECT_TRUE(fs::exists(dir / "m_ctx_example.bin")) << "embed mode '" << mode << "'";
  }
}

TEST_F(ExampleEpContext, ExplicitContextFilePathNamesTheBinary) {
  TempDir dir;
  fs::create_directory(dir / "out");
  Generate(dir.path(), AddReluModel(), {{"ep.context_file_path", dir / "out/compiled.v2.onnx"}});
  EXPECT_EQ(FilesIn(dir / "out"), (std::set<std::string>{"compiled.v2.onnx", "compiled.v2_example.bin"}));
  onnx::ModelProto ctx = LoadProto(dir / "out/compiled.v2.onnx");
  EXPECT_EQ(StrAttr(*ContextNodes(&ctx)[0], "ep_cache_context"), "compiled.v2_example.bin");
  EXPECT_EQ(RunContextModel(dir / "out/compiled.v2.onnx"), CpuReference(AddReluModel()));
}

TEST_F(ExampleEpContext, MultiplePartitionsEmbedMode0ShareOneBinary) {
  TempDir dir;
  Generate(dir.path(), TwoPartitionModel(), {});
  EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"m.onnx", "m_ctx.onnx", "m_ctx_example.bin"}));
  onnx::ModelProto ctx = LoadProto(dir / "m_ctx.onnx");
  ASSERT_EQ(ctx.graph().node_size(), 3);
  EXPECT_EQ(ctx.graph().node(1).op_type(), "Sigmoid");  // the CPU node stays an ordinary node between them
  auto nodes = ContextNodes(&ctx);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(IntAttr(*nodes[0], "main_context"), 1);
  EXPECT_EQ(IntAttr(*nodes[0], "embed_mode"), 0);
  EXPECT_EQ(StrAttr(*nodes[0], "ep_cache_context"), "m_ctx_example.bin");
  EXPECT_EQ(IntAttr(*nodes[1], "main_context"), 0);
  EXPECT_EQ(IntAttr(*nodes[1], "embed_mode"), 0);
  EXPECT_FALSE(HasAttr(*nodes[1], "ep_cache_context"));
  EXPECT_NE(nodes[0]->name(), nodes[1]->name());
  const std::string bin = ReadFile(dir / "m_ctx_example.bin");
  EXPECT_EQ(bin.rfind("example-context 1\ngraphs 2\n", 0), 0u) << bin;
  for (const auto* n : nodes) {
    EXPECT_EQ(StrAttr(*n, "partition_name"), n->name());
    EXPECT_TRUE(Contains(bin, "\ngraph " + n->name() + "\n")) << n->name();
  }
  EXPECT_EQ(RunContextModel(dir / "m_ctx.onnx"), CpuReference(TwoPartitionModel()));
}

TEST_F(ExampleEpContext, MultiplePartitionsEmbedMode1AreAllMainContexts) {
  TempDir dir;
  Generate(dir.path(), TwoPartitionModel(), {{"ep.context_embed_mode", "1"}});
  EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"m.onnx", "m_ctx.onnx"}));
  onnx::ModelProto ctx = LoadProto(dir / "m_ctx.onnx");
  auto nodes = ContextNodes(&ctx);
  ASSERT_EQ(nodes.size(), 2u);
  for (const auto* n : nodes) {
    EXPECT_EQ(IntAttr(*n, "main_context"), 1);
    EXPECT_EQ(IntAttr(*n, "embed_mode"), 1);
    EXPECT_EQ(StrAttr(*n, "ep_cache_context").rfind("example-program 1\n", 0), 0u);
  }
  EXPECT_EQ(RunContextModel(dir / "m_ctx.onnx"), CpuReference(TwoPartitionModel()));
}

TEST_F(ExampleEpContext, NodeNamePrefixAppliesToNamesPartitionsAndBinaryGraphs) {
  TempDir dir;
  Generate(dir.path(), TwoPartitionModel(), {{"ep.context_node_name_prefix", "modelA_"}});
  onnx::ModelProto ctx = LoadProto(dir / "m_ctx.onnx");
  auto nodes = ContextNodes(&ctx);
  ASSERT_EQ(nodes.size(), 2u);
  const std::string bin = ReadFile(dir / "m_ctx_example.bin");
  for (const auto* n : nodes) {
    EXPECT_EQ(n->name().rfind(std::string("modelA_") + kExample, 0), 0u) << n->name();
    EXPECT_EQ(StrAttr(*n, "partition_name"), n->name());
    EXPECT_TRUE(Contains(bin, "\ngraph " + n->name() + "\n")) << bin;
  }
  EXPECT_EQ(RunContextModel(dir / "m_ctx.onnx"), CpuReference(TwoPartitionModel()));
}

// Two ctx models made from the same source with different prefixes, glued into one model: two main_context=1
// nodes, each with its own binary, in one session.
TEST_F(ExampleEpContext, PrefixedContextsFromTwoModelsGlueIntoOneModel) {
  TempDir dir;
  WriteFile(dir / "m.onnx", Serialize(AddReluModel()));
  for (const char* name : {"a", "b"}) {
    Session s(env_, (dir / "m.onnx").c_str(),
              Options({{"ep.context_enable", "1"},
                       {"ep.context_file_path", dir / (std::string(name) + "_ctx.onnx")},
                       {"ep.context_node_name_prefix", std::string(name) + "_"}}));
  }
  onnx::ModelProto glued = LoadProto(dir / "a_ctx.onnx");
  onnx::ModelProto b = LoadProto(dir / "b_ctx.onnx");
  auto* g = glued.mutable_graph();
  // b's values renamed (b_*) except the shared input X; its node, initializers and output added.
  auto rename = [](const std::string& v) { return v == "X" ? v : "b_" + v; };
  for (const auto& n : b.graph().node()) {
    onnx::NodeProto* c = g->add_node();
    *c = n;
    for (auto& i : *c->mutable_input()) i = rename(i);
    for (auto& o : *c->mutable_output()) o = rename(o);
  }
  for (const auto& init : b.graph().initializer()) {
    auto* c = g->add_initializer();
    *c = init;
    c->set_name(rename(init.name()));
  }
  for (const auto& o : b.graph().output()) {
    auto* c = g->add_output();
    *c = o;
    c->set_name(rename(o.name()));
  }
  WriteFile(dir / "glued.onnx", Serialize(glued));
  auto nodes = ContextNodes(&glued);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(StrAttr(*nodes[0], "ep_cache_context"), "a_ctx_example.bin");
  EXPECT_EQ(StrAttr(*nodes[1], "ep_cache_context"), "b_ctx_example.bin");
  Session s(env_, (dir / "glued.onnx").c_str(), Options());
  EXPECT_EQ(s.GetPartitionAssignments().size(), 2u);
  const std::vector<float> expected = CpuReference(AddReluModel());
  EXPECT_EQ(RunOne(s, "X", "Y"), expected);
  EXPECT_EQ(RunOne(s, "X", "b_Y"), expected);
}

TEST_F(ExampleEpContext, GenerateFromBytesPutsTheBinaryBesideContextFilePath) {
  TempDir dir;
  const std::string bytes = Serialize(TwoPartitionModel());
  {
    Session s(env_, bytes.data(), bytes.size(),
              Options({{"ep.context_enable", "1"}, {"ep.context_file_path", dir / "from_bytes_ctx.onnx"}}));
  }
  EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"from_bytes_ctx.onnx", "from_bytes_ctx_example.bin"}));
  EXPECT_EQ(RunContextModel(dir / "from_bytes_ctx.onnx"), CpuReference(TwoPartitionModel()));
}

TEST_F(ExampleEpContext, BinaryWriteFailureFailsTheSessionAndLeavesNoFile) {
  TempDir dir;
  // A non-empty folder where the binary should go: the rename onto it fails.
  fs::create_directory(dir / "m_ctx_example.bin");
  WriteFile(dir / "m_ctx_example.bin/keep", "x");
  WriteFile(dir / "m.onnx", Serialize(AddReluModel()));
  Exception e = Catch([&] { Session s(env_, (dir / "m.onnx").c_str(), Options({{"ep.context_enable", "1"}})); });
  EXPECT_EQ(e.code(), ErrorCode::EP_FAIL) << e.what();
  EXPECT_TRUE(Contains(e.what(), dir / "m_ctx_example.bin")) << e.what();
  EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"m.onnx", "m_ctx_example.bin"}));  // no temp, no ctx model
}

TEST_F(ExampleEpContext, ContextModelWithGenerationOnLoadsAndWritesNothing) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});
  const std::set<std::string> before = FilesIn(dir.path());
  EXPECT_EQ(RunContextModel(dir / "m_ctx.onnx", {{"ep.context_enable", "1"}}), CpuReference(AddReluModel()));
  EXPECT_EQ(FilesIn(dir.path()), before);
}

// ---- loading ----

TEST_F(ExampleEpContext, SourceMatchesCaseInsensitively) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {{"ep.context_embed_mode", "1"}});
  for (const char* source : {"example", "EXAMPLE", "Example", "exampleexecutionprovider", "EXAMPLEEXECUTIONPROVIDER"}) {
    onnx::ModelProto ctx = LoadProto(dir / "m_ctx.onnx");
    SetStrAttr(ContextNodes(&ctx)[0], "source", source);
    WriteFile(dir / "s.onnx", Serialize(ctx));
    EXPECT_EQ(RunContextModel(dir / "s.onnx"), CpuReference(AddReluModel())) << source;
  }
}

TEST_F(ExampleEpContext, OtherEpsContextNodeIsNotImplemented) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {{"ep.context_embed_mode", "1"}});
  onnx::ModelProto ctx = LoadProto(dir / "m_ctx.onnx");
  onnx::NodeProto* n = ContextNodes(&ctx)[0];
  SetStrAttr(n, "source", "OtherEP");
  WriteFile(dir / "other.onnx", Serialize(ctx));
  Exception e = Catch([&] { Session s(env_, (dir / "other.onnx").c_str(), Options()); });
  EXPECT_EQ(e.code(), ErrorCode::NOT_IMPLEMENTED) << e.what();
  EXPECT_TRUE(Contains(e.what(), n->name())) << e.what();
  EXPECT_TRUE(Contains(e.what(), "OtherEP")) << e.what();
}

TEST_F(ExampleEpContext, BufferLoadedModelFindsBinaryThroughContextFilePath) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});
  const std::string bytes = ReadFile(dir / "m_ctx.onnx");
  const std::vector<float> expected = CpuReference(AddReluModel());
  // The ctx model's path, the folder itself, the folder with a trailing '/'.
  for (const std::string& where : {dir / "m_ctx.onnx", dir.path(), dir.path() + "/"}) {
    Session s(env_, bytes.data(), bytes.size(), Options({{"ep.context_file_path", where}}));
    EXPECT_EQ(RunOne(s), expected) << where;
  }
  Exception e = Catch([&] { Session s(env_, bytes.data(), bytes.size(), Options()); });
  EXPECT_EQ(e.code(), ErrorCode::INVALID_GRAPH) << e.what();
  EXPECT_TRUE(Contains(e.what(), kLoadError)) << e.what();
  EXPECT_TRUE(Contains(e.what(), "loaded from bytes")) << e.what();
  EXPECT_TRUE(Contains(e.what(), "ep.context_file_path")) << e.what();
}

// session.model_external_initializers_file_folder_path makes the model path <folder>/virtual_model.onnx, so the
// binary is found in that folder.
TEST_F(ExampleEpContext, BufferLoadedModelFindsBinaryThroughExternalInitializersFolder) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});
  const std::string bytes = ReadFile(dir / "m_ctx.onnx");
  Session s(env_, bytes.data(), bytes.size(),
            Options({{"session.model_external_initializers_file_folder_path", dir.path()}}));
  EXPECT_EQ(RunOne(s), CpuReference(AddReluModel()));
}

TEST_F(ExampleEpContext, BinaryInSubfolderOrBehindInsideSymlinkLoads) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});
  fs::create_directories(dir / "sub/deeper");
  fs::copy_file(dir / "m_ctx_example.bin", dir / "sub/deeper/x.bin");
  fs::create_symlink("m_ctx_example.bin", dir / "alias.bin");
  const std::vector<float> expected = CpuReference(AddReluModel());
  for (const char* rel : {"sub/deeper/x.bin", "./sub/deeper/x.bin", "alias.bin"}) {
    onnx::ModelProto ctx = LoadProto(dir / "m_ctx.onnx");
    SetStrAttr(ContextNodes(&ctx)[0], "ep_cache_context", rel);
    WriteFile(dir / "sub.onnx", Serialize(ctx));
    EXPECT_EQ(RunContextModel(dir / "sub.onnx"), expected) << rel;
  }
}

// Writes dir/m_ctx.onnx's variant with ep_cache_context = `rel` as dir/bad.onnx.
std::string WithCachePath(const TempDir& dir, const std::string& rel) {
  onnx::ModelProto ctx = LoadProto(dir / "m_ctx.onnx");
  SetStrAttr(ContextNodes(&ctx)[0], "ep_cache_context", rel);
  WriteFile(dir / "bad.onnx", Serialize(ctx));
  return dir / "bad.onnx";
}

TEST_F(ExampleEpContext, EmptyCachePathIsInvalidGraph) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});
  ExpectLoadError(WithCachePath(dir, ""), {"ep_cache_context is empty"});
}

TEST_F(ExampleEpContext, AbsoluteCachePathIsInvalidGraph) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});
  ExpectLoadError(WithCachePath(dir, dir / "m_ctx_example.bin"), {dir / "m_ctx_example.bin", "absolute path"});
}

TEST_F(ExampleEpContext, DotDotInCachePathIsInvalidGraph) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});
  ExpectLoadError(WithCachePath(dir, "../x.bin"), {"'../x.bin'", "'..'"});
  ExpectLoadError(WithCachePath(dir, "sub/../m_ctx_example.bin"), {"sub/../m_ctx_example.bin", "'..'"});
}

TEST_F(ExampleEpContext, SymlinkEscapingTheFolderIsInvalidGraph) {
  TempDir root;
  fs::create_directory(root / "ctx");
  fs::create_directory(root / "outside");
  Generate(root / "ctx", AddReluModel(), {});
  fs::copy_file(root / "ctx/m_ctx_example.bin", root / "outside/evil.bin");
  fs::create_symlink("../outside/evil.bin", root / "ctx/link.bin");
  onnx::ModelProto ctx = LoadProto(root / "ctx/m_ctx.onnx");
  SetStrAttr(ContextNodes(&ctx)[0], "ep_cache_context", "link.bin");
  WriteFile(root / "ctx/bad.onnx", Serialize(ctx));
  ExpectLoadError(root / "ctx/bad.onnx", {"link.bin", "outside the model's folder"});
}

TEST_F(ExampleEpContext, MissingBinaryIsInvalidGraph) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});
  fs::remove(dir / "m_ctx_example.bin");
  ExpectLoadError(dir / "m_ctx.onnx", {dir / "m_ctx_example.bin", "does not exist"});
}

TEST_F(ExampleEpContext, BinaryThatIsAFolderIsInvalidGraph) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});
  fs::create_directory(dir / "folder.bin");
  ExpectLoadError(WithCachePath(dir, "folder.bin"), {"folder.bin", "not a regular file"});
}

TEST_F(ExampleEpContext, UnreadableBinaryIsInvalidGraph) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});
  chmod((dir / "m_ctx_example.bin").c_str(), 0);
  ExpectLoadError(dir / "m_ctx.onnx", {dir / "m_ctx_example.bin", "cannot be read"});
}

TEST_F(ExampleEpContext, EmptyBinaryIsInvalidGraph) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});
  WriteFile(dir / "m_ctx_example.bin", "");
  ExpectLoadError(dir / "m_ctx.onnx", {dir / "m_ctx_example.bin", "is empty"});
}

TEST_F(ExampleEpContext, TruncatedBinaryIsInvalidGraph) {
  TempDir dir;
  Generate(dir.path(), TwoPartitionModel(), {});
  const std::string bin = ReadFile(dir / "m_ctx_example.bin");
  // Cut anywhere: in the header, between graphs, inside a program line.
  for (size_t keep : {size_t{10}, bin.size() / 2, bin.size() - 1, bin.find("end\n") + 4}) {
    WriteFile(dir / "m_ctx_example.bin", bin.substr(0, keep));
    ExpectLoadError(dir / "m_ctx.onnx", {dir / "m_ctx_example.bin", "truncated"});
  }
}

TEST_F(ExampleEpContext, GarbageBinaryIsInvalidGraph) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});
  WriteFile(dir / "m_ctx_example.bin", std::string("\x7f" "ELF garbage\0\x01\x02 not a context\n", 30));
  ExpectLoadError(dir / "m_ctx.onnx", {dir / "m_ctx_example.bin", "corrupted", "bad header"});
}

TEST_F(ExampleEpContext, CorruptedProgramInBinaryIsInvalidGraph) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {});
  const std::string bin = ReadFile(dir / "m_ctx_example.bin");
  const std::map<std::string, std::string> damage = {
      {"step Add", "step Sub"},           // unknown operator
      {"slots 4", "slots 99999999999"},   // absurd slot count
      {"\noutput 3 Y", "\noutput 7 Y"},   // slot out of range
      {"graphs 1", "graphs x"},           // bad graph count
  };
  for (const auto& [from, to] : damage) {
    std::string bad = bin;
    const size_t at = bad.find(from);
    ASSERT_NE(at, std::string::npos) << from << " not in " << bin;
    bad.replace(at, from.size(), to);
    WriteFile(dir / "m_ctx_example.bin", bad);
    ExpectLoadError(dir / "m_ctx.onnx", {dir / "m_ctx_example.bin", "corrupted"});
  }
  WriteFile(dir / "m_ctx_example.bin", bin + "trailing\n");
  ExpectLoadError(dir / "m_ctx.onnx", {dir / "m_ctx_example.bin", "corrupted", "after"});
}

TEST_F(ExampleEpContext, CorruptedEmbeddedProgramIsInvalidGraph) {
  TempDir dir;
  Generate(dir.path(), AddReluModel(), {{"ep.context_embed_mode", "1"}});
  onnx::ModelProto ctx = LoadProto(dir / "m_ctx.onnx");
  onnx::NodeProto* n = ContextNodes(&ctx)[0];
  SetStrAttr(n, "ep_cache_context", "example-program 1\nslots 2\ninput 0 X\nstep Relu 1 5\noutput 1 Y\n");
  WriteFile(dir / "bad.onnx", Serialize(ctx));
  ExpectLoadError(dir / "bad.onnx", {n->name(), "corrupted"});
}

TEST_F(ExampleEpContext, SecondaryNodeWithUnknownPartitionIsInvalidGraph) {
  TempDir dir;
  Generate(dir.path(), TwoPartitionModel(), {});
  onnx::ModelProto ctx = LoadProto(dir / "m_ctx.onnx");
  onnx::NodeProto* second = ContextNodes(&ctx)[1];
  ASSERT_EQ(IntAttr(*second, "main_context"), 0);
  SetStrAttr(second, "partition_name", "no_such_partition");
  WriteFile(dir / "bad.onnx", Serialize(ctx));
  ExpectLoadError(dir / "bad.onnx", {second->name(), "'no_such_partition'"});
}

TEST_F(ExampleEpContext, MainNodeWithoutItsGraphInTheBinaryIsInvalidGraph) {
  TempDir dir;
  Generate(dir.path(), TwoPartitionModel(), {});
  onnx::ModelProto ctx = LoadProto(dir / "m_ctx.onnx");
  SetStrAttr(ContextNodes(&ctx)[0], "partition_name", "elsewhere");
  WriteFile(dir / "bad.onnx", Serialize(ctx));
  ExpectLoadError(dir / "bad.onnx", {"m_ctx_example.bin", "no graph named 'elsewhere'"});
}

}  // namespace
}  // namespace epctx
