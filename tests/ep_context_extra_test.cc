// EPContext generation rules that need more than one model or more than one process, end to end with the example
// plugin EP (providers/example):
// - ep.context_node_name_prefix is what lets EPContext nodes of two ctx models be glued into one model without
//   renaming anything (the glued model passes the ONNX checker, loads and gives both originals' outputs);
// - two processes generating the same ctx model at once leave one complete model (no temp file, no crash; one of
//   them may fail with "exists already", never both);
// - generation into a folder that cannot be written fails naming the path and leaves no file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "model/ep_context_schema.h"
#include "tests/test_util.h"

extern char** environ;

namespace epctx {
namespace {

namespace fs = std::filesystem;
using epctx::testing::AddNode;
using epctx::testing::AddWeight;
using epctx::testing::Catch;
using epctx::testing::Contains;
using epctx::testing::ContextNodes;
using epctx::testing::CpuReference;
using epctx::testing::DevicesOf;
using epctx::testing::FilesIn;
using epctx::testing::FloatNx4;
using epctx::testing::InputTensor;
using epctx::testing::kExample;
using epctx::testing::kExampleLib;
using epctx::testing::LoadProto;
using epctx::testing::NewModel;
using epctx::testing::ReadFile;
using epctx::testing::RunOne;
using epctx::testing::Serialize;
using epctx::testing::StrAttr;
using epctx::testing::TempDir;
using epctx::testing::ToVector;
using epctx::testing::WithExample;
using epctx::testing::WriteFile;

const char* kEpctxCli = EPCTX_BINARY_DIR "/bin/epctx";

// Y<s> = Relu(Mul(Add(X<s>, W<s>), V<s>)) with weights chosen by `seed`. Graph name and node names/op types do not
// depend on the suffix, so two such models compile to the same fused node names (the runtime derives them from
// the graph's name and its nodes) — exactly the case the prefix exists for. Value names differ, so the two ctx
// models can be glued without renaming anything.
onnx::ModelProto AddMulReluModel(const std::string& s, float seed) {
  onnx::ModelProto m = NewModel("add_mul_relu");
  auto* g = m.mutable_graph();
  *g->add_input() = FloatNx4("X" + s);
  *g->add_output() = FloatNx4("Y" + s);
  AddWeight(g, "W" + s, {seed, -2 * seed, 3, -4});
  AddWeight(g, "V" + s, {2, -seed, 0.5f, 3 * seed});
  AddNode(g, "Add", "add", {"X" + s, "W" + s}, "A" + s);
  AddNode(g, "Mul", "mul", {"A" + s, "V" + s}, "M" + s);
  AddNode(g, "Relu", "relu", {"M" + s}, "Y" + s);
  return m;
}

// Runs the ONNX checker (with the EPContext schema registered); "" when it passes, else its message.
std::string CheckerError(const onnx::ModelProto& m) {
  RegisterEpContextSchema();
  try {
    onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

class EpContextExtra : public ::testing::Test {
 protected:
  void SetUp() override { env_.RegisterExecutionProviderLibrary("example", kExampleLib); }

  SessionOptions Options(const std::map<std::string, std::string>& config = {}) {
    EXPECT_EQ(DevicesOf(env_, kExample, false).size(), 1u);
    return WithExample(env_, KeyValuePairs{}, config);
  }

  // Writes `model` to `src` and generates its ctx model at `out` with `config` added.
  void Generate(const std::string& src, const onnx::ModelProto& model, const std::string& out,
                std::map<std::string, std::string> config) {
    WriteFile(src, Serialize(model));
    config["ep.context_enable"] = "1";
    config["ep.context_file_path"] = out;
    Session s(env_, src.c_str(), Options(config));
  }

  Env env_;
};

// ---- a. gluing two ctx models made with different prefixes ----

// Glues `b` into `a`: nodes, initializers, inputs, outputs and metadata absent from `a`; nothing renamed.
onnx::ModelProto Glue(onnx::ModelProto a, const onnx::ModelProto& b) {
  auto* g = a.mutable_graph();
  for (const auto& n : b.graph().node()) *g->add_node() = n;
  for (const auto& t : b.graph().initializer()) *g->add_initializer() = t;
  for (const auto& v : b.graph().input()) *g->add_input() = v;
  for (const auto& v : b.graph().output()) *g->add_output() = v;
  for (const auto& v : b.graph().value_info()) *g->add_value_info() = v;
  std::set<std::string> keys;
  for (const auto& p : a.metadata_props()) keys.insert(p.key());
  for (const auto& p : b.metadata_props())
    if (!keys.count(p.key())) *a.add_metadata_props() = p;
  std::set<std::string> domains;
  for (const auto& os : a.opset_import()) domains.insert(os.domain());
  for (const auto& os : b.opset_import())
    if (!domains.count(os.domain())) *a.add_opset_import() = os;
  return a;
}

// Runs a glued model on X_a and X_b (both kInput) and returns Y_a and Y_b.
std::vector<std::vector<float>> RunGlued(const Session& s) {
  std::vector<float> xa, xb;
  std::vector<Value> inputs;
  inputs.push_back(InputTensor(&xa));
  inputs.push_back(InputTensor(&xb));
  auto out = s.Run({"X_a", "X_b"}, inputs, {"Y_a", "Y_b"});
  if (out.size() != 2) {
    ADD_FAILURE() << out.size() << " outputs";
    return {};
  }
  return {ToVector(out[0]), ToVector(out[1])};
}

TEST_F(EpContextExtra, NodeNamePrefixLetsTwoContextModelsBeGluedWithoutRenaming) {
  TempDir dir;
  const onnx::ModelProto src_a = AddMulReluModel("_a", 1.f), src_b = AddMulReluModel("_b", -0.5f);
  ASSERT_NE(CpuReference(src_a), CpuReference(src_b));  // two different models
  Generate(dir / "a.onnx", src_a, dir / "a_ctx.onnx",
           {{"ep.context_embed_mode", "1"}, {"ep.context_node_name_prefix", "a_"}});
  Generate(dir / "b.onnx", src_b, dir / "b_ctx.onnx",
           {{"ep.context_embed_mode", "1"}, {"ep.context_node_name_prefix", "b_"}});
  const onnx::ModelProto ctx_a = LoadProto(dir / "a_ctx.onnx"), ctx_b = LoadProto(dir / "b_ctx.onnx");
  ASSERT_EQ(ContextNodes(ctx_a).size(), 1u);
  ASSERT_EQ(ContextNodes(ctx_b).size(), 1u);
  const onnx::NodeProto& na = *ContextNodes(ctx_a)[0];
  const onnx::NodeProto& nb = *ContextNodes(ctx_b)[0];
  EXPECT_EQ(na.name().rfind("a_", 0), 0u) << na.name();
  EXPECT_EQ(nb.name().rfind("b_", 0), 0u) << nb.name();
  EXPECT_EQ(StrAttr(na, "partition_name"), na.name());
  EXPECT_EQ(StrAttr(nb, "partition_name"), nb.name());
  // Without their prefixes the two names are the same: the prefix is all that tells them apart.
  EXPECT_EQ(na.name().substr(2), nb.name().substr(2));

  const onnx::ModelProto glued = Glue(ctx_a, ctx_b);
  EXPECT_EQ(CheckerError(glued), "");
  EXPECT_EQ(ContextNodes(glued).size(), 2u);
  WriteFile(dir / "glued.onnx", Serialize(glued));

  Session s(env_, (dir / "glued.onnx").c_str(), Options());
  const auto assignments = s.GetPartitionAssignments();
  EXPECT_EQ(assignments.size(), 2u);
  for (const auto& [node, ep] : assignments) EXPECT_EQ(ep, kExample) << node;
  EXPECT_EQ(RunGlued(s), (std::vector<std::vector<float>>{CpuReference(src_a), CpuReference(src_b)}));
}

TEST_F(EpContextExtra, WithoutNodeNamePrefixTheContextNodeNamesClash) {
  TempDir dir;
  Generate(dir / "a.onnx", AddMulReluModel("_a", 1.f), dir / "a_ctx.onnx", {{"ep.context_embed_mode", "1"}});
  Generate(dir / "b.onnx", AddMulReluModel("_b", -0.5f), dir / "b_ctx.onnx", {{"ep.context_embed_mode", "1"}});
  const onnx::ModelProto ctx_a = LoadProto(dir / "a_ctx.onnx"), ctx_b = LoadProto(dir / "b_ctx.onnx");
  ASSERT_EQ(ContextNodes(ctx_a).size(), 1u);
  ASSERT_EQ(ContextNodes(ctx_b).size(), 1u);
  // Same fused node name, same partition_name: a glued model would hold two EPContext nodes of one name.
  EXPECT_EQ(ContextNodes(ctx_a)[0]->name(), ContextNodes(ctx_b)[0]->name());
  EXPECT_EQ(StrAttr(*ContextNodes(ctx_a)[0], "partition_name"), StrAttr(*ContextNodes(ctx_b)[0], "partition_name"));
}

// Embed mode 0: each glued node is a main context naming its own binary; the prefixes keep the graph names inside
// the two binaries distinct too.
TEST_F(EpContextExtra, PrefixedEmbedMode0ContextsGlueWithTheirOwnBinaries) {
  TempDir dir;
  const onnx::ModelProto src_a = AddMulReluModel("_a", 1.f), src_b = AddMulReluModel("_b", -0.5f);
  Generate(dir / "a.onnx", src_a, dir / "a_ctx.onnx", {{"ep.context_node_name_prefix", "a_"}});
  Generate(dir / "b.onnx", src_b, dir / "b_ctx.onnx", {{"ep.context_node_name_prefix", "b_"}});
  const onnx::ModelProto glued = Glue(LoadProto(dir / "a_ctx.onnx"), LoadProto(dir / "b_ctx.onnx"));
  EXPECT_EQ(CheckerError(glued), "");
  auto nodes = ContextNodes(glued);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(StrAttr(*nodes[0], "ep_cache_context"), "a_ctx_example.bin");
  EXPECT_EQ(StrAttr(*nodes[1], "ep_cache_context"), "b_ctx_example.bin");
  WriteFile(dir / "glued.onnx", Serialize(glued));
  Session s(env_, (dir / "glued.onnx").c_str(), Options());
  EXPECT_EQ(s.GetPartitionAssignments().size(), 2u);
  EXPECT_EQ(RunGlued(s), (std::vector<std::vector<float>>{CpuReference(src_a), CpuReference(src_b)}));
}

// ---- b. two processes generating the same output at once ----

struct Child {
  pid_t pid = -1;
  std::string stderr_path;
};

// Starts `epctx perf` generating `out` from `model`; its stdout is discarded, its stderr kept in `stderr_path`.
Child SpawnGenerator(const std::string& model, const std::string& out, const std::string& stderr_path) {
  Child c;
  c.stderr_path = stderr_path;
  const std::string file_path = "ep.context_file_path|" + out;
  std::vector<std::string> args = {kEpctxCli, "perf", "-e", "example", "-C", "ep.context_enable|1", "-C", file_path,
                                   "-r", "1", "-x", "1", "-I", model};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int rc = posix_spawn(&c.pid, kEpctxCli, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  EXPECT_EQ(rc, 0) << "posix_spawn " << kEpctxCli << ": " << std::strerror(rc);
  if (rc != 0) c.pid = -1;
  return c;
}

TEST_F(EpContextExtra, TwoProcessesGeneratingTheSameOutputLeaveOneCompleteModel) {
  ASSERT_TRUE(fs::exists(kEpctxCli)) << kEpctxCli;
  const onnx::ModelProto src = AddMulReluModel("", 1.f);
  const std::vector<float> expected = CpuReference(src);
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    TempDir dir, logs;
    WriteFile(dir / "m.onnx", Serialize(src));
    const std::string out = dir / "out_ctx.onnx";
    Child children[2] = {SpawnGenerator(dir / "m.onnx", out, logs / "0.err"),
                         SpawnGenerator(dir / "m.onnx", out, logs / "1.err")};
    int succeeded = 0;
    for (const Child& c : children) {
      ASSERT_GT(c.pid, 0);
      int status = 0;
      ASSERT_EQ(waitpid(c.pid, &status, 0), c.pid);
      const std::string err = ReadFile(c.stderr_path);
      ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << "; stderr: " << err;
      if (WEXITSTATUS(status) == 0) {
        ++succeeded;
      } else {
        // The loser may only lose to the other process's model.
        EXPECT_TRUE(Contains(err, "epctx: FAIL: ")) << err;
        EXPECT_TRUE(Contains(err, "exists already")) << err;
      }
    }
    EXPECT_GE(succeeded, 1) << "both generations failed";
    // One model, one binary, nothing else: no temporary file left by either process.
    EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"m.onnx", "out_ctx.onnx", "out_ctx_example.bin"}));
    onnx::ModelProto ctx;
    ASSERT_TRUE(ctx.ParseFromString(ReadFile(out))) << "the ctx model is incomplete";
    EXPECT_EQ(CheckerError(ctx), "");
    ASSERT_EQ(ContextNodes(ctx).size(), 1u);
    EXPECT_EQ(StrAttr(*ContextNodes(ctx)[0], "ep_cache_context"), "out_ctx_example.bin");
    Session s(env_, out.c_str(), Options());
    for (const auto& [node, ep] : s.GetPartitionAssignments()) EXPECT_EQ(ep, kExample) << node;
    EXPECT_EQ(RunOne(s, "X", "Y"), expected);
  }
}

// Two processes generating ctx models of two DIFFERENT sources at one output path: the model left there must come
// with its own binary (not the other process's), and only one of them may report success — the other must be told
// "exists already", since the model at the path is not its own.
TEST_F(EpContextExtra, TwoProcessesGeneratingDifferentModelsToOneOutputNeverMixModelAndBinary) {
  ASSERT_TRUE(fs::exists(kEpctxCli)) << kEpctxCli;
  onnx::ModelProto src[2] = {AddMulReluModel("", 1.f), AddMulReluModel("", -0.5f)};
  src[1].mutable_graph()->set_name("add_mul_relu_v2");  // other fused node names, so the binaries differ in them
  const std::vector<float> expected[2] = {CpuReference(src[0]), CpuReference(src[1])};
  ASSERT_NE(expected[0], expected[1]);
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    TempDir dir, logs;
    WriteFile(dir / "m0.onnx", Serialize(src[0]));
    WriteFile(dir / "m1.onnx", Serialize(src[1]));
    const std::string out = dir / "out_ctx.onnx";
    Child children[2] = {SpawnGenerator(dir / "m0.onnx", out, logs / "0.err"),
                         SpawnGenerator(dir / "m1.onnx", out, logs / "1.err")};
    bool ok[2] = {false, false};
    for (int i = 0; i < 2; ++i) {
      ASSERT_GT(children[i].pid, 0);
      int status = 0;
      ASSERT_EQ(waitpid(children[i].pid, &status, 0), children[i].pid);
      const std::string err = ReadFile(children[i].stderr_path);
      ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << "; stderr: " << err;
      ok[i] = WEXITSTATUS(status) == 0;
      if (!ok[i]) {
        EXPECT_TRUE(Contains(err, "exists already")) << err;
      }
    }
    EXPECT_TRUE(ok[0] || ok[1]) << "both generations failed";
    EXPECT_FALSE(ok[0] && ok[1]) << "both processes reported writing " << out << ", which holds one model";
    EXPECT_EQ(FilesIn(dir.path()),
              (std::set<std::string>{"m0.onnx", "m1.onnx", "out_ctx.onnx", "out_ctx_example.bin"}));
    std::vector<float> got;
    try {
      Session s(env_, out.c_str(), Options());
      got = RunOne(s, "X", "Y");
    } catch (const Exception& e) {
      ADD_FAILURE() << "the ctx model left at " << out << " does not load with the binary beside it: " << e.what();
      continue;
    }
    EXPECT_TRUE((ok[0] && got == expected[0]) || (ok[1] && got == expected[1]))
        << "the ctx model left is not the one a successful process generated";
  }
}

// ---- c. a folder that cannot be written ----

// Creating a session on `src` with `so` (generation on) fails with an error whose message holds `expect_in_message`.
void ExpectGenerationFails(Env& env, const SessionOptions& so, const std::string& src,
                           const std::string& expect_in_message) {
  Exception e = Catch([&] { Session s(env, src.c_str(), so); });
  EXPECT_NE(e.code(), ErrorCode::OK);
  EXPECT_TRUE(Contains(e.what(), expect_in_message)) << "'" << expect_in_message << "' not in: " << e.what();
}

TEST_F(EpContextExtra, GenerationIntoAFolderWhoseParentDoesNotExistFailsNamingThePath) {
  TempDir dir;
  WriteFile(dir / "m.onnx", Serialize(AddMulReluModel("", 1.f)));
  for (const char* embed : {"0", "1"}) {
    SCOPED_TRACE(std::string("embed mode ") + embed);
    const std::string out = dir / "missing/deeper/out_ctx.onnx";
    ExpectGenerationFails(env_,
                          Options({{"ep.context_enable", "1"}, {"ep.context_embed_mode", embed},
                                   {"ep.context_file_path", out}}),
                          dir / "m.onnx", dir / "missing/deeper/out_ctx");
    EXPECT_FALSE(fs::exists(dir / "missing"));
    EXPECT_EQ(FilesIn(dir.path()), std::set<std::string>{"m.onnx"});
  }
  // A parent that is a file, not a folder.
  WriteFile(dir / "plain", "x");
  for (const char* embed : {"0", "1"}) {
    SCOPED_TRACE(std::string("embed mode ") + embed);
    ExpectGenerationFails(env_,
                          Options({{"ep.context_enable", "1"}, {"ep.context_embed_mode", embed},
                                   {"ep.context_file_path", dir / "plain/out_ctx.onnx"}}),
                          dir / "m.onnx", dir / "plain/out_ctx");
    EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"m.onnx", "plain"}));
    EXPECT_EQ(ReadFile(dir / "plain"), "x");
  }
}

TEST_F(EpContextExtra, GenerationIntoAReadOnlyFolderFailsNamingThePathAndLeavesNoFile) {
  if (geteuid() == 0)
    GTEST_SKIP() << "running as root, which writes into a 0555 folder regardless of its mode (the missing-parent "
                    "case above runs for root too)";
  TempDir dir;
  WriteFile(dir / "m.onnx", Serialize(AddMulReluModel("", 1.f)));
  fs::create_directory(dir / "ro");
  ASSERT_EQ(chmod((dir / "ro").c_str(), 0555), 0);
  for (const char* embed : {"0", "1"}) {
    SCOPED_TRACE(std::string("embed mode ") + embed);
    ExpectGenerationFails(env_,
                          Options({{"ep.context_enable", "1"}, {"ep.context_embed_mode", embed},
                                   {"ep.context_file_path", dir / "ro/out_ctx.onnx"}}),
                          dir / "m.onnx", dir / "ro/out_ctx");
    EXPECT_TRUE(FilesIn(dir / "ro").empty());
  }
  // Derived output beside a model in a read-only folder.
  WriteFile(dir / "m2.onnx", Serialize(AddMulReluModel("", 1.f)));
  ASSERT_EQ(chmod(dir.path().c_str(), 0555), 0);
  ExpectGenerationFails(env_, Options({{"ep.context_enable", "1"}}), dir / "m2.onnx", dir / "m2_ctx");
  chmod(dir.path().c_str(), 0755);
  chmod((dir / "ro").c_str(), 0755);  // so TempDir can clean up
  EXPECT_EQ(FilesIn(dir.path()), (std::set<std::string>{"m.onnx", "m2.onnx", "ro"}));
}

}  // namespace
}  // namespace epctx
