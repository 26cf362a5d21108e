// AotCpu weight sharing on the project's decoder (build/test-models, from the test_models fixture): prefill and
// decode compiled as a group write 3 files with the weights stored once; loading with ep.share_ep_contexts=1 hands
// the second graph over without opening the binary again; failures abort the group cleanly.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

namespace fs = std::filesystem;
using epctx::testing::Catch;
using epctx::testing::Contains;
using epctx::testing::ContextNodes;
using epctx::testing::DevicesOf;
using epctx::testing::Exists;
using epctx::testing::FilesIn;
using epctx::testing::LoadProto;
using epctx::testing::ReadFile;
using epctx::testing::StrAttr;
using epctx::testing::TempDir;

constexpr const char* kModels = EPCTX_BINARY_DIR "/test-models";
constexpr const char* kAotLib = EPCTX_BINARY_DIR "/lib/libepctx_aotcpu.so";
constexpr const char* kAot = "AotCpuExecutionProvider";

class AotCpuShare : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Exists(std::string(kModels) + "/prefill.onnx")) << "the test_models fixture did not run";
    env_.RegisterExecutionProviderLibrary("aotcpu", kAotLib);
    for (const char* f : {"prefill.onnx", "decode.onnx", "decoder.weights"})
      fs::copy_file(std::string(kModels) + "/" + f, dir_ / f);
  }
  SessionOptions Options(const std::map<std::string, std::string>& config, const std::map<std::string, int64_t>& dims) {
    SessionOptions o;
    o.SetIntraOpNumThreads(2);
    o.AppendExecutionProvider_V2(env_, DevicesOf(env_, kAot, false), KeyValuePairs());
    for (const auto& [k, v] : config) o.AddConfigEntry(k.c_str(), v.c_str());
    for (const auto& [k, v] : dims) o.AddFreeDimensionOverrideByName(k.c_str(), v);
    return o;
  }
  // Runs with zero-filled inputs (token ids 0) and returns the first output's bytes.
  static std::string RunZeros(Session& s) {
    std::vector<std::string> names = s.GetInputNames();
    std::vector<Value> values;
    std::vector<std::vector<char>> storage;
    for (size_t i = 0; i < names.size(); ++i) {
      const auto info = s.GetInputTypeInfo(i).GetTensorTypeAndShapeInfo();
      std::vector<int64_t> shape = info.GetShape();
      size_t n = 1;
      for (int64_t d : shape) n *= static_cast<size_t>(d);
      const size_t elem = info.GetElementType() == ElementType::INT64 ? 8 : 4;
      storage.emplace_back(n * elem, 0);
      values.push_back(Value::CreateTensor(info.GetElementType(), storage.back().data(), storage.back().size(),
                                           shape.data(), shape.size()));
    }
    std::vector<Value> out = s.Run(names, values, {s.GetOutputNames()[0]});
    const size_t bytes = out[0].GetTensorTypeAndShapeInfo().GetElementCount() * 4;
    return std::string(static_cast<const char*>(out[0].GetTensorRawData()), bytes);
  }
  std::map<std::string, std::string> Share(bool stop) {
    std::map<std::string, std::string> c = {{"ep.context_enable", "1"}, {"ep.share_ep_contexts", "1"}};
    if (stop) c["ep.stop_share_ep_contexts"] = "1";
    return c;
  }
  const std::map<std::string, int64_t> kPrefillDims{{"seq", 16}};
  const std::map<std::string, int64_t> kDecodeDims{{"past", 16}};

  Env env_;
  TempDir dir_;
};

TEST_F(AotCpuShare, GroupWritesOneBinaryWithTheWeightsStoredOnce) {
  std::string prefill_out, decode_out;
  {
    Session a(env_, (dir_ / "prefill.onnx").c_str(), Options(Share(false), kPrefillDims));
    prefill_out = RunZeros(a);
    Session b(env_, (dir_ / "decode.onnx").c_str(), Options(Share(true), kDecodeDims));
    decode_out = RunZeros(b);
  }
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"prefill.onnx", "decode.onnx", "decoder.weights",
                                                         "prefill_ctx.onnx", "decode_ctx.onnx", "prefill_aotcpu.bin"}));
  const double weights = static_cast<double>(fs::file_size(dir_ / "decoder.weights"));
  const double binary = static_cast<double>(fs::file_size(dir_ / "prefill_aotcpu.bin"));
  EXPECT_LE(binary, 1.05 * weights) << "binary " << binary << " bytes, source weights " << weights;
  for (const char* ctx : {"prefill_ctx.onnx", "decode_ctx.onnx"}) {
    const onnx::ModelProto m = LoadProto(dir_ / ctx);
    const auto nodes = ContextNodes(m);
    ASSERT_EQ(nodes.size(), 1u) << ctx;
    EXPECT_EQ(StrAttr(*nodes[0], "ep_cache_context"), "prefill_aotcpu.bin") << ctx;
  }
  // Each ctx model loads alone (no sharing at inference) and gives the generating session's outputs.
  Session p(env_, (dir_ / "prefill_ctx.onnx").c_str(), Options({}, {}));
  EXPECT_EQ(RunZeros(p), prefill_out);
  Session d(env_, (dir_ / "decode_ctx.onnx").c_str(), Options({}, {}));
  EXPECT_EQ(RunZeros(d), decode_out);
}

TEST_F(AotCpuShare, InferenceHandsTheSecondGraphOverWithoutOpeningTheFile) {
  {
    Session a(env_, (dir_ / "prefill.onnx").c_str(), Options(Share(false), kPrefillDims));
    Session b(env_, (dir_ / "decode.onnx").c_str(), Options(Share(true), kDecodeDims));
  }
  const std::map<std::string, std::string> share = {{"ep.share_ep_contexts", "1"}};
  auto first = std::make_unique<Session>(env_, (dir_ / "prefill_ctx.onnx").c_str(), Options(share, {}));
  EXPECT_TRUE(Contains(first->GetSessionReport(), "\"bytes_mapped\":" + std::to_string(fs::file_size(dir_ / "prefill_aotcpu.bin"))))
      << first->GetSessionReport();
  Session second(env_, (dir_ / "decode_ctx.onnx").c_str(), Options(share, {}));
  EXPECT_TRUE(Contains(second.GetSessionReport(), "\"bytes_mapped\":0,\"bytes_read\":0")) << second.GetSessionReport();
  const std::string expect = RunZeros(second);
  first.reset();  // destroyed first: the second still runs on the shared mapping
  EXPECT_EQ(RunZeros(second), expect);
  // A second session of the same ctx model finds its graph handed out already and maps the file itself.
  Session again(env_, (dir_ / "decode_ctx.onnx").c_str(), Options(share, {}));
  EXPECT_EQ(RunZeros(again), expect);
}

TEST_F(AotCpuShare, EmbedModeOneCannotShare) {
  std::map<std::string, std::string> c = Share(false);
  c["ep.context_embed_mode"] = "1";
  const Exception e = Catch([&] { Session a(env_, (dir_ / "prefill.onnx").c_str(), Options(c, kPrefillDims)); });
  EXPECT_EQ(e.GetOrtErrorCode(), ErrorCode::INVALID_ARGUMENT) << e.what();
  EXPECT_TRUE(Contains(e.what(), "ep.context_embed_mode")) << e.what();
}

TEST_F(AotCpuShare, AContextModelOutsideTheBinarysFolderFailsTheGroupUpFrontAndANewGroupStartsClean) {
  fs::create_directory(dir_ / "other");
  fs::copy_file(dir_ / "decode.onnx", dir_ / "other/decode.onnx");
  fs::copy_file(dir_ / "decoder.weights", dir_ / "other/decoder.weights");
  {
    Session a(env_, (dir_ / "prefill.onnx").c_str(), Options(Share(false), kPrefillDims));
    // Its ctx model would live in other/, the group's binary in the parent: not referenceable.
    const Exception e = Catch([&] {
      Session b(env_, (dir_ / "other/decode.onnx").c_str(), Options(Share(true), kDecodeDims));
    });
    EXPECT_EQ(e.GetOrtErrorCode(), ErrorCode::INVALID_ARGUMENT) << e.what();
    EXPECT_TRUE(Contains(e.what(), "outside its folder")) << e.what();
  }
  EXPECT_FALSE(Exists(dir_ / "prefill_aotcpu.bin"));
  EXPECT_FALSE(Exists(dir_ / "prefill_ctx.onnx"));  // the aborted group publishes none of its ctx models
  EXPECT_FALSE(Exists(dir_ / "other/decode_ctx.onnx"));
  // The failed group is gone: a new group names its binary after its own first model.
  {
    Session b(env_, (dir_ / "other/decode.onnx").c_str(), Options(Share(false), kDecodeDims));
    fs::copy_file(dir_ / "prefill.onnx", dir_ / "other/prefill.onnx");
    Session a(env_, (dir_ / "other/prefill.onnx").c_str(), Options(Share(true), kPrefillDims));
  }
  EXPECT_TRUE(Exists(dir_ / "other/decode_aotcpu.bin"));
  EXPECT_TRUE(Exists(dir_ / "other/decode_ctx.onnx"));
  EXPECT_TRUE(Exists(dir_ / "other/prefill_ctx.onnx"));
}

}  // namespace
}  // namespace epctx
