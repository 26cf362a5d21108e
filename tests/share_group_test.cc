// The runtime side of weight sharing (src/epcontext/shared_group.h) through the public API, with the example EP
// (providers/example): it has no weight sharing of its own but its sessions go through the same runtime path.
// Sessions with ep.context_enable=1 + ep.share_ep_contexts=1 form a group; until the last one
// (ep.stop_share_ep_contexts=1) succeeds, their context models exist only under hidden pending names; a failure
// anywhere removes them; a dead process's pending files are swept by the next group writing into that folder.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "tests/test_util.h"

extern char** environ;

namespace epctx {
namespace {

using epctx::testing::AddReluModel;
using epctx::testing::Catch;
using epctx::testing::Contains;
using epctx::testing::ContextNodes;
using epctx::testing::CpuReference;
using epctx::testing::DevicesOf;
using epctx::testing::Exists;
using epctx::testing::FilesIn;
using epctx::testing::kExample;
using epctx::testing::kExampleLib;
using epctx::testing::LoadProto;
using epctx::testing::ReadFile;
using epctx::testing::RunOne;
using epctx::testing::Serialize;
using epctx::testing::StartsWith;
using epctx::testing::TempDir;
using epctx::testing::WithExample;
using epctx::testing::WriteFile;

constexpr const char* kPendingTag = ".epctx-pending.";
constexpr const char* kChildDirEnv = "EPCTX_SHARE_GROUP_CHILD_DIR";
constexpr const char* kChildModeEnv = "EPCTX_SHARE_GROUP_CHILD_MODE";

std::map<std::string, std::string> Group(bool stop) {
  std::map<std::string, std::string> c = {{"ep.context_enable", "1"}, {"ep.share_ep_contexts", "1"}};
  if (stop) c["ep.stop_share_ep_contexts"] = "1";
  return c;
}

// The pending files in `dir` (hidden names holding ".epctx-pending.").
std::set<std::string> PendingIn(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& f : FilesIn(dir))
    if (StartsWith(f, ".") && Contains(f, kPendingTag)) out.insert(f);
  return out;
}

// The files in `dir` named like context models.
std::set<std::string> ContextModelsIn(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& f : FilesIn(dir))
    if (!StartsWith(f, ".") && f.size() > 9 && f.compare(f.size() - 9, 9, "_ctx.onnx") == 0) out.insert(f);
  return out;
}

class ShareGroup : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.RegisterExecutionProviderLibrary("example", kExampleLib);
    ASSERT_EQ(DevicesOf(env_, kExample, false).size(), 1u);
  }
  void TearDown() override { EndGroup(); }

  // dir/<name>.onnx = AddReluModel.
  std::string Model(const std::string& name, const std::string& folder = "") {
    const std::string path = (folder.empty() ? dir_.path() : folder) + "/" + name + ".onnx";
    WriteFile(path, Serialize(AddReluModel()));
    return path;
  }
  std::unique_ptr<Session> Create(const std::string& path, const std::map<std::string, std::string>& config) {
    return std::make_unique<Session>(env_, path.c_str(), WithExample(env_, KeyValuePairs{}, config));
  }
  // Ends whatever group a test left open: a member that fails (a model from bytes without an output path) aborts it.
  void EndGroup() {
    const std::string bytes = Serialize(AddReluModel());
    try {
      Session s(env_, bytes.data(), bytes.size(), WithExample(env_, KeyValuePairs{}, Group(false)));
    } catch (const Exception&) {
    }
  }
  // The ctx model loads alone (no sharing at inference) and runs on the example EP.
  void ExpectLoads(const std::string& ctx) {
    Session s(env_, ctx.c_str(), WithExample(env_));
    for (const auto& [node, ep] : s.GetPartitionAssignments()) EXPECT_EQ(ep, kExample) << node;
    EXPECT_EQ(RunOne(s), CpuReference(AddReluModel())) << ctx;
  }

  Env env_;
  TempDir dir_;
};

TEST_F(ShareGroup, ContextModelsAreVisibleOnlyAfterTheLastSession) {
  const std::string a = Model("a"), b = Model("b");
  auto first = Create(a, Group(false));
  EXPECT_EQ(RunOne(*first), CpuReference(AddReluModel()));  // a pending session runs normally
  EXPECT_EQ(ContextModelsIn(dir_.path()), std::set<std::string>{});
  const std::set<std::string> pending = PendingIn(dir_.path());
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_TRUE(StartsWith(*pending.begin(), ".a_ctx.onnx.epctx-pending." + std::to_string(::getpid()) + "."))
      << *pending.begin();
  // The pending file is the complete model (only its name differs).
  const onnx::ModelProto staged = LoadProto(dir_ / *pending.begin());
  EXPECT_EQ(ContextNodes(staged).size(), 1u);

  auto last = Create(b, Group(true));
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"a.onnx", "b.onnx", "a_ctx.onnx", "b_ctx.onnx",
                                                          "a_ctx_example.bin", "b_ctx_example.bin"}));
  ExpectLoads(dir_ / "a_ctx.onnx");
  ExpectLoads(dir_ / "b_ctx.onnx");
  // The group is over: the next sharing session starts a new one and stays pending on its own.
  auto next = Create(Model("c"), Group(false));
  EXPECT_EQ(PendingIn(dir_.path()).size(), 1u);
  EXPECT_FALSE(Exists(dir_ / "c_ctx.onnx"));
}

TEST_F(ShareGroup, ASingleSessionGroupPublishesItself) {
  auto only = Create(Model("a"), Group(true));
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"a.onnx", "a_ctx.onnx", "a_ctx_example.bin"}));
}

TEST_F(ShareGroup, AFailingLastSessionLeavesNothingOfTheGroupAndANewGroupWorks) {
  const std::string a = Model("a"), b = Model("b");
  WriteFile(dir_ / "b_ctx.onnx", "someone else's model");
  {
    auto first = Create(a, Group(false));
    const Exception e = Catch([&] { Create(b, Group(true)); });
    EXPECT_EQ(e.code(), ErrorCode::FAIL) << e.what();
    EXPECT_TRUE(Contains(e.what(), "b_ctx.onnx' exists already")) << e.what();
  }
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"a.onnx", "b.onnx", "b_ctx.onnx"}));  // binary removed too
  EXPECT_EQ(ReadFile(dir_ / "b_ctx.onnx"), "someone else's model");
  // A new group starts clean: session a's ctx model of the failed group does not come back.
  std::remove((dir_ / "b_ctx.onnx").c_str());
  auto c = Create(Model("c"), Group(false));
  auto last = Create(b, Group(true));
  EXPECT_EQ(ContextModelsIn(dir_.path()), (std::set<std::string>{"b_ctx.onnx", "c_ctx.onnx"}));
  EXPECT_EQ(PendingIn(dir_.path()), std::set<std::string>{});
  ExpectLoads(dir_ / "b_ctx.onnx");
  ExpectLoads(dir_ / "c_ctx.onnx");
}

TEST_F(ShareGroup, AMemberThatFailsBeforeLoadingItsModelEndsTheGroup) {
  auto first = Create(Model("a"), Group(false));
  EXPECT_EQ(PendingIn(dir_.path()).size(), 1u);
  const Exception e = Catch([&] { Create(dir_ / "missing.onnx", Group(false)); });
  EXPECT_EQ(PendingIn(dir_.path()), std::set<std::string>{});
  EXPECT_FALSE(Exists(dir_ / "a_ctx_example.bin"));
  auto last = Create(Model("b"), Group(true));  // a group of its own
  EXPECT_EQ(ContextModelsIn(dir_.path()), std::set<std::string>{"b_ctx.onnx"});
}

TEST_F(ShareGroup, TwoSessionsOfAGroupCannotWriteTheSameContextModel) {
  const std::string a = Model("a");
  auto first = Create(a, Group(false));
  const Exception e = Catch([&] { Create(a, Group(true)); });
  EXPECT_EQ(e.code(), ErrorCode::FAIL) << e.what();
  EXPECT_TRUE(Contains(e.what(), "a_ctx.onnx' is already the output of an earlier session of this weight-sharing "
                                 "group")) << e.what();
  EXPECT_EQ(FilesIn(dir_.path()), std::set<std::string>{"a.onnx"});
}

TEST_F(ShareGroup, AFinalNameThatAppearsBeforePublishingFailsTheWholeGroup) {
  const std::string a = Model("a"), b = Model("b");
  auto first = Create(a, Group(false));
  WriteFile(dir_ / "a_ctx.onnx", "written meanwhile");  // e.g. by another process
  const Exception e = Catch([&] { Create(b, Group(true)); });
  EXPECT_EQ(e.code(), ErrorCode::FAIL) << e.what();
  EXPECT_TRUE(Contains(e.what(), "the file '" + (dir_ / "a_ctx.onnx") + "' exists already")) << e.what();
  EXPECT_TRUE(Contains(e.what(), "None of the group's files was kept")) << e.what();
  // All or nothing: b's model was rolled back, the group's binaries removed, the other file untouched.
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"a.onnx", "b.onnx", "a_ctx.onnx"}));
  EXPECT_EQ(ReadFile(dir_ / "a_ctx.onnx"), "written meanwhile");
}

TEST_F(ShareGroup, AGroupMayWriteIntoSeveralFolders) {
  std::filesystem::create_directory(dir_ / "one");
  std::filesystem::create_directory(dir_ / "two");
  auto first = Create(Model("a", dir_ / "one"), Group(false));
  EXPECT_EQ(PendingIn(dir_ / "one").size(), 1u);
  auto last = Create(Model("b", dir_ / "two"), Group(true));
  EXPECT_EQ(ContextModelsIn(dir_ / "one"), std::set<std::string>{"a_ctx.onnx"});
  EXPECT_EQ(ContextModelsIn(dir_ / "two"), std::set<std::string>{"b_ctx.onnx"});
  EXPECT_EQ(PendingIn(dir_ / "one"), std::set<std::string>{});
  ExpectLoads(dir_ / "one/a_ctx.onnx");
  ExpectLoads(dir_ / "two/b_ctx.onnx");
}

TEST_F(ShareGroup, ExternalInitializerFilesArePendingWithTheirModels) {
  auto config = [](bool stop, const std::string& file) {
    auto c = Group(stop);
    c["ep.context_model_external_initializers_file_name"] = file;
    return c;
  };
  auto first = Create(Model("a"), config(false, "a_weights.bin"));
  EXPECT_FALSE(Exists(dir_ / "a_weights.bin"));
  EXPECT_EQ(PendingIn(dir_.path()).size(), 2u);
  // One file name for two sessions of a group would leave the first model reading the second's offsets.
  const Exception e = Catch([&] { Create(Model("b"), config(false, "a_weights.bin")); });
  EXPECT_TRUE(Contains(e.what(), "ep.context_model_external_initializers_file_name")) << e.what();
  EXPECT_EQ(PendingIn(dir_.path()), std::set<std::string>{});  // that aborted the group

  auto a = Create(Model("a2"), config(false, "a2_weights.bin"));
  auto b = Create(Model("b"), config(true, "b_weights.bin"));
  EXPECT_EQ(PendingIn(dir_.path()), std::set<std::string>{});
  for (const char* ctx : {"a2_ctx.onnx", "b_ctx.onnx"}) {
    const onnx::ModelProto m = LoadProto(dir_ / ctx);
    ASSERT_EQ(m.graph().initializer_size(), 1) << ctx;
    const auto& ext = m.graph().initializer(0).external_data();
    ASSERT_GE(ext.size(), 1) << ctx;
    EXPECT_EQ(ext.Get(0).value(), std::string(ctx).substr(0, std::string(ctx).size() - 9) + "_weights.bin") << ctx;
    ExpectLoads(dir_ / ctx);
  }
}

TEST_F(ShareGroup, InferenceWithShareEpContextsWritesNothing) {
  auto only = Create(Model("a"), Group(true));
  const std::set<std::string> before = FilesIn(dir_.path());
  Session s(env_, (dir_ / "a_ctx.onnx").c_str(), WithExample(env_, KeyValuePairs{}, {{"ep.share_ep_contexts", "1"}}));
  EXPECT_EQ(RunOne(s), CpuReference(AddReluModel()));
  EXPECT_EQ(FilesIn(dir_.path()), before);
}

// ---- other processes ----

// A process that died before its group ended: a child running ShareGroupChild below.
pid_t SpawnChild(const std::string& dir, const std::string& mode) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.push_back(*e);
  env_strings.push_back(std::string(kChildDirEnv) + "=" + dir);
  env_strings.push_back(std::string(kChildModeEnv) + "=" + mode);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=ShareGroupChild.*";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  posix_spawn_file_actions_t quiet;  // the child's gtest report would only clutter the parent's
  ::posix_spawn_file_actions_init(&quiet);
  ::posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  EXPECT_EQ(::posix_spawn(&pid, exe.c_str(), &quiet, nullptr, argv, envp.data()), 0);
  ::posix_spawn_file_actions_destroy(&quiet);
  return pid;
}

// Waits for the child; returns its wait status.
int Reap(pid_t pid) {
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return status;
}

TEST_F(ShareGroup, AKilledProcessLeavesNoVisibleContextModelAndItsPendingFileIsSweptByTheNextGroup) {
  for (const char* mode : {"kill", "_exit"}) {
    SCOPED_TRACE(mode);
    TempDir dir;
    Model("a", dir.path());
    const pid_t child = SpawnChild(dir.path(), mode);
    const int status = Reap(child);
    if (std::string(mode) == "kill")
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
    else
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 42) << status;
    EXPECT_EQ(ContextModelsIn(dir.path()), std::set<std::string>{});
    const std::set<std::string> pending = PendingIn(dir.path());
    ASSERT_EQ(pending.size(), 1u);  // the child's, hidden
    EXPECT_TRUE(Contains(*pending.begin(), kPendingTag + std::to_string(child) + ".")) << *pending.begin();
    // A new group writing into that folder sweeps it (the child is dead); a live process's file is kept.
    const std::string live = ".x_ctx.onnx.epctx-pending." + std::to_string(::getppid()) + ".7";
    WriteFile(dir / live, "a live process's pending model");
    auto first = Create(Model("b", dir.path()), Group(false));
    std::set<std::string> now = PendingIn(dir.path());
    EXPECT_EQ(now.count(*pending.begin()), 0u);
    EXPECT_EQ(now.count(live), 1u);
    auto last = Create(Model("c", dir.path()), Group(true));
    EXPECT_EQ(ContextModelsIn(dir.path()), (std::set<std::string>{"b_ctx.onnx", "c_ctx.onnx"}));
    EXPECT_EQ(PendingIn(dir.path()), std::set<std::string>{live});
  }
}

TEST_F(ShareGroup, ANormalExitWithAGroupOpenRemovesItsFiles) {
  Model("a");
  const int status = Reap(SpawnChild(dir_.path(), "return"));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(FilesIn(dir_.path()), std::set<std::string>{"a.onnx"});  // no pending model, no example binary
}

TEST_F(ShareGroup, StaleFilesOfTheSameNameShapeAreRecognisedStrictly) {
  // A dead pid: a child that has been reaped.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  Reap(dead);
  const std::string d = std::to_string(dead);
  const std::set<std::string> stale = {".m_ctx.onnx.epctx-pending." + d + ".3",
                                       ".m_ctx.onnx.epctx-pending." + d + ".3.tmp." + d};
  const std::set<std::string> kept = {"m_ctx.onnx.epctx-pending." + d + ".3",   // not hidden
                                      ".m_ctx.onnx.epctx-pending." + d,         // no counter
                                      ".m_ctx.onnx.epctx-pending.x" + d + ".3",  // not a pid
                                      ".m_ctx.onnx.tmp." + d};
  for (const auto& f : stale) WriteFile(dir_ / f, "x");
  for (const auto& f : kept) WriteFile(dir_ / f, "x");
  auto first = Create(Model("a"), Group(false));
  for (const auto& f : stale) EXPECT_FALSE(Exists(dir_ / f)) << f;
  for (const auto& f : kept) EXPECT_TRUE(Exists(dir_ / f)) << f;
}

// Runs only inside SpawnChild's process: the first session of a group, then the process ends as told.
TEST(ShareGroupChild, CreatesTheFirstSessionOfAGroupThenEnds) {
  const char* dir = std::getenv(kChildDirEnv);
  const char* mode = std::getenv(kChildModeEnv);
  if (!dir || !mode) GTEST_SKIP() << "runs in a child process of ShareGroup tests";
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  Session s(env, (std::string(dir) + "/a.onnx").c_str(), WithExample(env, KeyValuePairs{}, Group(false)));
  if (std::string(mode) == "kill") ::kill(::getpid(), SIGKILL);
  if (std::string(mode) == "_exit") ::_exit(42);
  // "return": the process exits normally with the group open.
}

}  // namespace
}  // namespace epctx
