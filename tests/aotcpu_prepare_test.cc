// AotCpu's prepare_and_load / prepare_only behaviour matrix (../shared/spec/prepare-and-load.md) end to end, through
// the public C++ API on a small model: which files each mode writes, that every mode that runs gives the JIT
// session's outputs, and the checks' errors.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::testing::AddNode;
using epctx::testing::AddTensorValueInfo;
using epctx::testing::Catch;
using epctx::testing::Contains;
using epctx::testing::ContextNodes;
using epctx::testing::DevicesOf;
using epctx::testing::Exists;
using epctx::testing::FilesIn;
using epctx::testing::FindAttr;
using epctx::testing::LoadProto;
using epctx::testing::NewModel;
using epctx::testing::RunOne;
using epctx::testing::Serialize;
using epctx::testing::TempDir;
using epctx::testing::WriteFile;

constexpr const char* kAotLib = EPCTX_BINARY_DIR "/lib/libepctx_aotcpu.so";
constexpr const char* kAot = "AotCpuExecutionProvider";
constexpr const char* kPrepareAndLoad = "ep.aotcpuexecutionprovider.enable_prepare_and_load";
constexpr const char* kPrepareOnly = "ep.aotcpuexecutionprovider.enable_prepare_only";

// Y = Relu(MatMul(X, W) + B), X [2,4]: one AotCpu partition with a packed weight.
onnx::ModelProto SmallModel() {
  onnx::ModelProto m = NewModel("small");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {2, 4});
  AddTensorValueInfo(g->add_output(), "Y", {2, 4});
  auto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->add_dims(4);
  for (int i = 0; i < 16; ++i) w->add_float_data(0.125f * static_cast<float>((i * 5) % 7) - 0.25f);
  auto* b = g->add_initializer();
  b->set_name("B");
  b->set_data_type(onnx::TensorProto::FLOAT);
  b->add_dims(4);
  for (float v : {0.5f, -0.5f, 0.25f, 0.f}) b->add_float_data(v);
  AddNode(g, "MatMul", "mm", {"X", "W"}, "P");
  AddNode(g, "Add", "bias", {"P", "B"}, "Q");
  AddNode(g, "Relu", "relu", {"Q"}, "Y");
  return m;
}

class AotCpuPrepare : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.RegisterExecutionProviderLibrary("aotcpu", kAotLib);
    model_ = dir_ / "small.onnx";
    WriteFile(model_, Serialize(SmallModel()));
    jit_ = RunOne(Session(env_, model_.c_str(), Options({})), "X", "Y");
  }
  SessionOptions Options(const std::map<std::string, std::string>& config) {
    SessionOptions o;
    o.SetIntraOpNumThreads(1);
    o.AppendExecutionProvider_V2(env_, DevicesOf(env_, kAot, false), KeyValuePairs());
    for (const auto& [k, v] : config) o.AddConfigEntry(k.c_str(), v.c_str());
    return o;
  }
  Env env_;
  TempDir dir_;
  std::string model_;
  std::vector<float> jit_;
};

TEST_F(AotCpuPrepare, PathAReloadsInMemoryAndWritesNothing) {
  Session s(env_, model_.c_str(), Options({{kPrepareAndLoad, "1"}}));
  EXPECT_EQ(RunOne(s, "X", "Y"), jit_);
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"small.onnx"}));
}

TEST_F(AotCpuPrepare, PathBWritesTheContextThenRunsFromIt) {
  const std::string ctx = dir_ / "small_ctx.onnx";
  {
    Session s(env_, model_.c_str(),
              Options({{kPrepareAndLoad, "1"}, {"ep.context_enable", "1"}, {"ep.context_file_path", ctx}}));
    EXPECT_EQ(RunOne(s, "X", "Y"), jit_);
  }
  EXPECT_TRUE(Exists(ctx));
  EXPECT_TRUE(Exists(dir_ / "small_ctx_aotcpu.bin"));
  Session loaded(env_, ctx.c_str(), Options({}));  // the artifact loads as any ctx model
  EXPECT_EQ(RunOne(loaded, "X", "Y"), jit_);
}

TEST_F(AotCpuPrepare, PathBOverridesEmbedModeToAnExternalBinary) {
  const std::string ctx = dir_ / "embed_ctx.onnx";
  Session s(env_, model_.c_str(),
            Options({{kPrepareAndLoad, "1"},
                     {"ep.context_enable", "1"},
                     {"ep.context_file_path", ctx},
                     {"ep.context_embed_mode", "1"}}));
  EXPECT_EQ(RunOne(s, "X", "Y"), jit_);
  EXPECT_TRUE(Exists(dir_ / "embed_ctx_aotcpu.bin"));
  const onnx::ModelProto proto = LoadProto(ctx);
  const auto nodes = ContextNodes(proto);
  ASSERT_EQ(nodes.size(), 1u);
  const onnx::AttributeProto* embed = FindAttr(*nodes[0], "embed_mode");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->i(), 0);
}

TEST_F(AotCpuPrepare, PrepareOnlyWritesTheContextAndRefusesToRun) {
  const std::string ctx = dir_ / "prep_ctx.onnx";
  Session s(env_, model_.c_str(), Options({{kPrepareOnly, "1"}, {"ep.context_enable", "1"}, {"ep.context_file_path", ctx}}));
  EXPECT_TRUE(Exists(ctx));
  EXPECT_TRUE(Exists(dir_ / "prep_ctx_aotcpu.bin"));
  const Exception e = Catch([&] { RunOne(s, "X", "Y"); });
  EXPECT_EQ(e.GetOrtErrorCode(), ErrorCode::EP_FAIL) << e.what();
  EXPECT_TRUE(Contains(e.what(), "enable_prepare_only=1")) << e.what();
  EXPECT_TRUE(Contains(e.what(), ctx)) << e.what();
  Session loaded(env_, ctx.c_str(), Options({}));
  EXPECT_EQ(RunOne(loaded, "X", "Y"), jit_);
}

TEST_F(AotCpuPrepare, BothFlagsAreMutuallyExclusive) {
  const Exception e = Catch([&] {
    Session s(env_, model_.c_str(),
              Options({{kPrepareAndLoad, "1"}, {kPrepareOnly, "1"}, {"ep.context_enable", "1"},
                       {"ep.context_file_path", dir_ / "x_ctx.onnx"}}));
  });
  EXPECT_EQ(e.GetOrtErrorCode(), ErrorCode::INVALID_ARGUMENT) << e.what();
  EXPECT_TRUE(Contains(e.what(), "mutually exclusive")) << e.what();
  EXPECT_FALSE(Exists(dir_ / "x_ctx.onnx"));
}

TEST_F(AotCpuPrepare, FilePathWithoutContextEnableIsContradictory) {
  const Exception e = Catch([&] {
    Session s(env_, model_.c_str(), Options({{kPrepareAndLoad, "1"}, {"ep.context_file_path", dir_ / "y_ctx.onnx"}}));
  });
  EXPECT_EQ(e.GetOrtErrorCode(), ErrorCode::INVALID_ARGUMENT) << e.what();
  EXPECT_TRUE(Contains(e.what(), "Contradictory")) << e.what();
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"small.onnx"}));
}

TEST_F(AotCpuPrepare, FlagOnACompiledModelIsIgnored) {
  const std::string ctx = dir_ / "small_ctx.onnx";
  { Session s(env_, model_.c_str(), Options({{"ep.context_enable", "1"}, {"ep.context_file_path", ctx}})); }
  Session loaded(env_, ctx.c_str(), Options({{kPrepareAndLoad, "1"}}));
  EXPECT_EQ(RunOne(loaded, "X", "Y"), jit_);
  EXPECT_EQ(loaded.GetPartitionAssignments().size(), 1u);
}

TEST_F(AotCpuPrepare, FlagValuesOtherThan0Or1AreRefusedNamingTheKey) {
  const Exception e = Catch([&] { Session s(env_, model_.c_str(), Options({{kPrepareAndLoad, "yes"}})); });
  EXPECT_EQ(e.GetOrtErrorCode(), ErrorCode::INVALID_ARGUMENT) << e.what();
  EXPECT_TRUE(Contains(e.what(), kPrepareAndLoad)) << e.what();
}

}  // namespace
}  // namespace epctx
