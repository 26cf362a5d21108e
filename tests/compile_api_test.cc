// End-to-end tests of the compile API (ModelCompilationOptions / CompileModel, docs/compile-api.md) through the
// public C++ API: every setter's error message, Check()'s messages, defaults, each output kind (file, buffer, write
// function), the initializer-location function, flags, optimization levels, buffer input, binary naming, and the
// example and AotCpu plugin EPs. Every compiled model is loaded again and run against the source model.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

namespace fs = std::filesystem;
using epctx::testing::AddNode;
using epctx::testing::AddReluModel;
using epctx::testing::AddTensorValueInfo;
using epctx::testing::AddWeight;
using epctx::testing::Catch;
using epctx::testing::Contains;
using epctx::testing::ContextNodes;
using epctx::testing::CpuReference;
using epctx::testing::DevicesOf;
using epctx::testing::Exists;
using epctx::testing::FilesIn;
using epctx::testing::FindAttr;
using epctx::testing::kExampleLib;
using epctx::testing::LoadProto;
using epctx::testing::MakeWeightExternal;
using epctx::testing::ReadFile;
using epctx::testing::RunOne;
using epctx::testing::Serialize;
using epctx::testing::StrAttr;
using epctx::testing::TempDir;
using epctx::testing::WithExample;
using epctx::testing::WriteFile;

constexpr const char* kAotLib = EPCTX_BINARY_DIR "/lib/libepctx_aotcpu.so";
constexpr const char* kAot = "AotCpuExecutionProvider";
constexpr size_t kBig = 100000;  // floats in BigModel's "Big" initializer (400 KB: several 64 KiB chunks)

// AddReluModel (Y = Relu(X + W), the example EP takes Add+Relu) plus B = Identity(Big) on the CPU EP, so the
// compiled model keeps a 400 KB initializer.
onnx::ModelProto BigModel() {
  onnx::ModelProto m = AddReluModel();
  auto* g = m.mutable_graph();
  std::vector<float> big(kBig);
  for (size_t i = 0; i < kBig; ++i) big[i] = static_cast<float>(i % 97) * 0.5f;
  AddWeight(g, "Big", big);
  AddTensorValueInfo(g->add_output(), "B", {static_cast<int64_t>(kBig)});
  AddNode(g, "Identity", "identity", {"Big"}, "B");
  return m;
}

std::string CodeName(ErrorCode c) { return ErrorCodeName(c); }

// Y and B of a model made by BigModel (or one compiled from it).
std::pair<std::vector<float>, std::vector<float>> RunBig(const Session& s) {
  std::vector<float> x = epctx::testing::kInput;
  const int64_t shape[] = {2, 4};
  std::vector<Value> in;
  in.push_back(Value::CreateTensor<float>(x.data(), x.size(), shape, 2));
  std::vector<Value> out = s.Run({"X"}, in, {"Y", "B"});
  const float* y = out[0].GetTensorData<float>();
  const float* b = out[1].GetTensorData<float>();
  return {std::vector<float>(y, y + 8), std::vector<float>(b, b + kBig)};
}

class CompileApi : public ::testing::Test {
 protected:
  void SetUp() override { env_.RegisterExecutionProviderLibrary("example", kExampleLib); }

  // Options for the example EP with `config` entries.
  ModelCompilationOptions Example(const std::map<std::string, std::string>& config = {}) {
    return ModelCompilationOptions(env_, WithExample(env_, {}, config));
  }
  // Writes `m` as dir/name and returns its path.
  std::string Save(const onnx::ModelProto& m, const std::string& name = "m.onnx") {
    const std::string p = dir_ / name;
    WriteFile(p, Serialize(m));
    return p;
  }
  // A session on a compiled model with the example EP.
  Session Load(const std::string& path) { return Session(env_, path.c_str(), WithExample(env_)); }
  void ExpectOk(const Status& st) { EXPECT_TRUE(st.IsOK()) << CodeName(st.GetErrorCode()) << ": " << st.GetErrorMessage(); }

  Env env_{LoggingLevel::WARNING, "compile_api_test"};
  TempDir dir_;
};

// ---- setters: ONNX Runtime's messages, INVALID_ARGUMENT ----

void ExpectInvalid(const Exception& e, const std::string& message) {
  EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << e.what();
  EXPECT_EQ(std::string(e.what()), message);
}

TEST_F(CompileApi, SetterErrorMessages) {
  ModelCompilationOptions o = Example();
  ExpectInvalid(Catch([&] { o.SetInputModelPath(""); }), "Invalid input model: path string is empty");
  ExpectInvalid(Catch([&] { o.SetInputModelFromBuffer(nullptr, 10); }), "Invalid input model: data pointer is null");
  const char data[4] = {1, 2, 3, 4};
  ExpectInvalid(Catch([&] { o.SetInputModelFromBuffer(data, 0); }), "Invalid input model: data size is 0");
  ExpectInvalid(Catch([&] { o.SetOutputModelPath(""); }), "Invalid output model path: path is empty");
  ExpectInvalid(Catch([&] { o.SetOutputModelExternalInitializersFile("", 10); }),
                "Invalid external initializer file: path is empty");
  AllocatorWithDefaultOptions alloc;
  void* buffer = nullptr;
  size_t size = 0;
  ExpectInvalid(Catch([&] { o.SetOutputModelBuffer(alloc, nullptr, &size); }),
                "Invalid output model buffer: data pointer is null");
  ExpectInvalid(Catch([&] { o.SetOutputModelBuffer(alloc, &buffer, nullptr); }),
                "Invalid output model buffer: size pointer is null");
  ExpectInvalid(Catch([&] { o.SetOutputModelWriteFunc(nullptr); }),
                "OrtWriteBufferFunc function for output model is null");
  ExpectInvalid(Catch([&] { o.SetOutputModelGetInitializerLocationFunc(nullptr); }),
                "OrtGetInitializerLocationFunc function for output model is null");
  ExpectInvalid(Catch([&] { o.SetEpContextBinaryInformation("", "m.onnx"); }), "Invalid output directory: path is empty");
  ExpectInvalid(Catch([&] { o.SetEpContextBinaryInformation(dir_.path() + "/", ""); }),
                "Invalid model name: string is empty");
  for (int level : {-1, 4, 98, 100}) {
    ExpectInvalid(Catch([&] { o.SetGraphOptimizationLevel(static_cast<GraphOptimizationLevel>(level)); }),
                  "graph_optimization_level with value " + std::to_string(level) +
                      " is invalid. Valid values are: ORT_DISABLE_ALL (0), ORT_ENABLE_BASIC (1), ORT_ENABLE_EXTENDED "
                      "(2), ORT_ENABLE_LAYOUT (3), and ORT_ENABLE_ALL (99).");
  }
  for (GraphOptimizationLevel level :
       {GraphOptimizationLevel::ORT_DISABLE_ALL, GraphOptimizationLevel::ORT_ENABLE_BASIC,
        GraphOptimizationLevel::ORT_ENABLE_EXTENDED, GraphOptimizationLevel::ORT_ENABLE_LAYOUT,
        GraphOptimizationLevel::ORT_ENABLE_ALL})
    EXPECT_NO_THROW(o.SetGraphOptimizationLevel(level));
  EXPECT_NO_THROW(o.SetFlags(0xffffffffu));  // unknown bits ignored
}

TEST_F(CompileApi, BinaryInformationDirectoryRules) {
  ModelCompilationOptions o = Example();
  const std::string not_dir = dir_ / "no_such_dir";  // no trailing '/', no extension, does not exist
  ExpectInvalid(Catch([&] { o.SetEpContextBinaryInformation(not_dir, "m.onnx"); }),
                "output_dir is not a valid directory.");
  WriteFile(dir_ / "file.txt", "x");
  ExpectInvalid(Catch([&] { o.SetEpContextBinaryInformation(dir_ / "file.txt", "m.onnx"); }),
                "output_dir is not a valid directory.");
  EXPECT_NO_THROW(o.SetEpContextBinaryInformation(not_dir + "/", "m.onnx"));    // trailing '/'
  EXPECT_NO_THROW(o.SetEpContextBinaryInformation(dir_.path(), "m.onnx"));      // an existing directory (S3)
  EXPECT_NO_THROW(o.SetEpContextBinaryInformation(dir_ / "out.d", "m.onnx"));   // ONNX Runtime: has an extension
}

// ---- Check() ----

TEST_F(CompileApi, CheckMessages) {
  {
    ModelCompilationOptions o = Example();
    Status st = CompileModel(env_, o);
    EXPECT_EQ(st.GetErrorCode(), ErrorCode::INVALID_ARGUMENT);
    EXPECT_EQ(st.GetErrorMessage(), "Input model to compile must be loaded from either a file or a memory buffer");
  }
  {
    ModelCompilationOptions o = Example();
    o.SetInputModelPath(dir_ / "missing.onnx");
    Status st = CompileModel(env_, o);
    EXPECT_EQ(st.GetErrorCode(), ErrorCode::INVALID_ARGUMENT);
    EXPECT_EQ(st.GetErrorMessage(), "Input model path does not exist: " + (dir_ / "missing.onnx"));
  }
  {
    // Buffer input and no output: ONNX Runtime's check is dead code there (S9); here it answers.
    const std::string bytes = Serialize(AddReluModel());
    ModelCompilationOptions o = Example();
    o.SetInputModelFromBuffer(bytes.data(), bytes.size());
    Status st = CompileModel(env_, o);
    EXPECT_EQ(st.GetErrorCode(), ErrorCode::INVALID_ARGUMENT);
    EXPECT_EQ(st.GetErrorMessage(),
              "Unable to generate an output model path: require an input model path if the location of the output "
              "model (e.g., file, buffer, or stream) is not specified.");
  }
  {
    // An absolute external initializers file is refused before any EP runs (S17).
    ModelCompilationOptions o = Example();
    o.SetInputModelPath(Save(AddReluModel()));
    o.SetOutputModelExternalInitializersFile(dir_ / "abs.data", 0);
    Status st = CompileModel(env_, o);
    EXPECT_EQ(st.GetErrorCode(), ErrorCode::INVALID_ARGUMENT);
    EXPECT_TRUE(Contains(st.GetErrorMessage(), "absolute path")) << st.GetErrorMessage();
    EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"m.onnx"}));
  }
}

// ---- defaults and file output ----

TEST_F(CompileApi, DefaultsWriteCtxModelAndBinaryBesideInput) {
  const onnx::ModelProto src = AddReluModel();
  const std::string in = Save(src);
  SessionOptions so = WithExample(env_, {}, {{"session.disable_model_compile", "1"}});
  ModelCompilationOptions o(env_, so);
  o.SetInputModelPath(in);
  ExpectOk(CompileModel(env_, o));
  // The caller's options are untouched.
  EXPECT_FALSE(so.HasConfigEntry("ep.context_enable"));
  EXPECT_EQ(so.GetConfigEntryOrDefault("session.disable_model_compile", ""), "1");
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"m.onnx", "m_ctx.onnx", "m_ctx_example.bin"}));
  onnx::ModelProto ctx = LoadProto(dir_ / "m_ctx.onnx");
  ASSERT_EQ(ContextNodes(ctx).size(), 1u);
  EXPECT_EQ(FindAttr(*ContextNodes(ctx)[0], "embed_mode")->i(), 0);  // SetEpContextEmbedMode defaults to false
  EXPECT_EQ(StrAttr(*ContextNodes(ctx)[0], "ep_cache_context"), "m_ctx_example.bin");
  EXPECT_EQ(RunOne(Load(dir_ / "m_ctx.onnx")), CpuReference(src));
}

TEST_F(CompileApi, SessionOptionsCarryOver) {
  // ep.context_file_path, ep.context_embed_mode and the external initializers key of the session options apply.
  const onnx::ModelProto src = BigModel();
  const std::string in = Save(src);
  fs::create_directory(dir_ / "out");
  ModelCompilationOptions o = Example({{"ep.context_file_path", dir_ / "out/c.onnx"},
                                       {"ep.context_embed_mode", "1"},
                                       {"ep.context_model_external_initializers_file_name", "c.data"}});
  o.SetInputModelPath(in);
  ExpectOk(CompileModel(env_, o));
  EXPECT_EQ(FilesIn(dir_ / "out"), (std::set<std::string>{"c.onnx", "c.data"}));  // embedded: no binary
  onnx::ModelProto ctx = LoadProto(dir_ / "out/c.onnx");
  EXPECT_EQ(FindAttr(*ContextNodes(ctx)[0], "embed_mode")->i(), 1);
  for (const auto& t : ctx.graph().initializer())  // threshold 0: every initializer external
    EXPECT_EQ(t.data_location(), onnx::TensorProto::EXTERNAL) << t.name();
  EXPECT_EQ(RunBig(Load(dir_ / "out/c.onnx")), RunBig(Session(env_, in.c_str(), SessionOptions())));
}

TEST_F(CompileApi, ExistingOutputOverwrittenUnlessFlag) {
  const onnx::ModelProto src = AddReluModel();
  const std::string in = Save(src);
  WriteFile(dir_ / "m_ctx.onnx", "old");
  {
    ModelCompilationOptions o = Example();
    o.SetInputModelPath(in).SetFlags(OrtCompileApiFlags_ERROR_IF_OUTPUT_FILE_EXISTS);
    Status st = CompileModel(env_, o);
    EXPECT_EQ(st.GetErrorCode(), ErrorCode::FAIL);
    EXPECT_TRUE(Contains(st.GetErrorMessage(), "exists already")) << st.GetErrorMessage();
    EXPECT_EQ(ReadFile(dir_ / "m_ctx.onnx"), "old");
    EXPECT_FALSE(Exists(dir_ / "m_ctx_example.bin"));  // checked before any EP compiled
  }
  {
    ModelCompilationOptions o = Example();
    o.SetInputModelPath(in);  // flags NONE: replaced
    ExpectOk(CompileModel(env_, o));
    EXPECT_EQ(RunOne(Load(dir_ / "m_ctx.onnx")), CpuReference(src));
  }
}

TEST_F(CompileApi, ExplicitOutputPathAndEmbedMode) {
  const onnx::ModelProto src = AddReluModel();
  fs::create_directory(dir_ / "out");
  ModelCompilationOptions o = Example();
  o.SetInputModelPath(Save(src)).SetOutputModelPath(dir_ / "out/compiled.onnx").SetEpContextEmbedMode(true);
  ExpectOk(CompileModel(env_, o));
  EXPECT_EQ(FilesIn(dir_ / "out"), (std::set<std::string>{"compiled.onnx"}));
  EXPECT_EQ(RunOne(Load(dir_ / "out/compiled.onnx")), CpuReference(src));
  // A folder is not an output path.
  ModelCompilationOptions bad = Example();
  bad.SetInputModelPath(dir_ / "m.onnx").SetOutputModelPath(dir_ / "out/");
  Status st = CompileModel(env_, bad);
  EXPECT_EQ(st.GetErrorCode(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.GetErrorMessage(), "context_file_path should not point to a folder.");
}

// ---- buffer and write-function outputs ----

TEST_F(CompileApi, BufferOutput) {
  const onnx::ModelProto src = AddReluModel();
  const std::string in = Save(src);
  // An unrelated m_ctx.onnx does not matter for a buffer output, even with ERROR_IF_OUTPUT_FILE_EXISTS (S7).
  WriteFile(dir_ / "m_ctx.onnx", "unrelated");
  AllocatorWithDefaultOptions alloc;
  void* buffer = nullptr;
  size_t size = 0;
  ModelCompilationOptions o = Example();
  o.SetInputModelPath(in).SetOutputModelBuffer(alloc, &buffer, &size).SetFlags(
      OrtCompileApiFlags_ERROR_IF_OUTPUT_FILE_EXISTS);
  ExpectOk(CompileModel(env_, o));
  ASSERT_NE(buffer, nullptr);
  ASSERT_GT(size, 0u);
  const std::string bytes(static_cast<const char*>(buffer), size);
  alloc.Free(buffer);
  EXPECT_EQ(ReadFile(dir_ / "m_ctx.onnx"), "unrelated");
  // The binary goes beside the input model, named after <input stem>_ctx.onnx, which the buffer's model names.
  onnx::ModelProto ctx;
  ASSERT_TRUE(ctx.ParseFromString(bytes));
  EXPECT_EQ(StrAttr(*ContextNodes(ctx)[0], "ep_cache_context"), "m_ctx_example.bin");
  EXPECT_TRUE(Exists(dir_ / "m_ctx_example.bin"));
  WriteFile(dir_ / "from_buffer.onnx", bytes);
  EXPECT_EQ(RunOne(Load(dir_ / "from_buffer.onnx")), CpuReference(src));
}

TEST_F(CompileApi, WriteFuncReceivesChunksOfAtMost64KiB) {
  const onnx::ModelProto src = BigModel();
  const std::string in = Save(src);
  std::string streamed;
  std::vector<size_t> chunks;
  ModelCompilationOptions o = Example();
  o.SetInputModelPath(in).SetEpContextEmbedMode(true).SetOutputModelWriteFunc([&](const void* data, size_t n) {
    chunks.push_back(n);
    streamed.append(static_cast<const char*>(data), n);
  });
  ExpectOk(CompileModel(env_, o));
  ASSERT_GE(chunks.size(), 7u);  // > 400 KB
  for (size_t n : chunks) EXPECT_LE(n, 65536u);
  for (size_t i = 0; i + 1 < chunks.size(); ++i) EXPECT_EQ(chunks[i], 65536u);
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"m.onnx"}));  // nothing else written
  // The same bytes as a buffer output.
  AllocatorWithDefaultOptions alloc;
  void* buffer = nullptr;
  size_t size = 0;
  o.SetOutputModelBuffer(alloc, &buffer, &size);
  ExpectOk(CompileModel(env_, o));
  EXPECT_EQ(std::string(static_cast<const char*>(buffer), size), streamed);
  alloc.Free(buffer);
  Session s(env_, streamed.data(), streamed.size(), WithExample(env_));
  EXPECT_EQ(RunBig(s), RunBig(Session(env_, in.c_str(), SessionOptions())));
}

TEST_F(CompileApi, WriteFuncFailureIsReturnedAndLeavesNothing) {
  const std::string in = Save(BigModel());
  int calls = 0;
  // Midway: Big is embedded, so the model takes 7 chunks; the third throws. Embed mode 0: the EP's binary was
  // written before the model is streamed and must be gone afterwards.
  ModelCompilationOptions o = Example();
  o.SetInputModelPath(in).SetOutputModelWriteFunc([&](const void*, size_t) {
    if (++calls == 3) throw Exception(ErrorCode::EP_FAIL, "Error from OrtOutStreamWriteFunc callback");
  });
  Status st = CompileModel(env_, o);
  EXPECT_EQ(st.GetErrorCode(), ErrorCode::EP_FAIL);
  EXPECT_EQ(st.GetErrorMessage(), "Error from OrtOutStreamWriteFunc callback");
  EXPECT_EQ(calls, 3);  // no call after the failure
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"m.onnx"}));  // no m_ctx_example.bin

  // With an external initializers file (written before the model): removed too.
  calls = 0;
  o.SetOutputModelExternalInitializersFile("m.data", 1024);
  st = CompileModel(env_, o.SetOutputModelWriteFunc([&](const void*, size_t) {
    ++calls;
    throw Exception(ErrorCode::FAIL, "Error from OrtOutStreamWriteFunc callback");
  }));
  EXPECT_EQ(st.GetErrorCode(), ErrorCode::FAIL);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"m.onnx"}));  // no m.data, no binary

  // Any other exception: FAIL with ONNX Runtime's wording.
  o.SetOutputModelWriteFunc([](const void*, size_t) { throw std::runtime_error("disk full"); });
  st = CompileModel(env_, o);
  EXPECT_EQ(st.GetErrorCode(), ErrorCode::FAIL);
  EXPECT_EQ(st.GetErrorMessage(), "Caught exception while calling user's OrtOutStreamWriteFunc callback: disk full");
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"m.onnx"}));
}

// ---- external initializers file ----

TEST_F(CompileApi, ExternalInitializersFileThreshold) {
  const onnx::ModelProto src = BigModel();
  const std::string in = Save(src);
  fs::create_directory(dir_ / "out");
  ModelCompilationOptions o = Example();
  o.SetInputModelPath(in).SetOutputModelPath(dir_ / "out/c.onnx").SetOutputModelExternalInitializersFile("c.data",
                                                                                                         1024);
  ExpectOk(CompileModel(env_, o));
  // Relative to the output model's folder; W (16 bytes) stays inline, Big goes out.
  EXPECT_EQ(FilesIn(dir_ / "out"), (std::set<std::string>{"c.onnx", "c.data", "c_example.bin"}));
  onnx::ModelProto ctx = LoadProto(dir_ / "out/c.onnx");
  std::map<std::string, bool> external;
  for (const auto& t : ctx.graph().initializer()) external[t.name()] = t.data_location() == onnx::TensorProto::EXTERNAL;
  EXPECT_EQ(external, (std::map<std::string, bool>{{"Big", true}, {"W", false}}));
  EXPECT_EQ(RunBig(Load(dir_ / "out/c.onnx")), RunBig(Session(env_, in.c_str(), SessionOptions())));

  // Nothing reaches the threshold: no file at all.
  ModelCompilationOptions none = Example();
  none.SetInputModelPath(in).SetOutputModelPath(dir_ / "out/d.onnx").SetOutputModelExternalInitializersFile(
      "d.data", kBig * 4 + 1);
  ExpectOk(CompileModel(env_, none));
  EXPECT_FALSE(Exists(dir_ / "out/d.data"));
}

// ---- initializer-location function ----

TEST_F(CompileApi, InitializerLocationFuncExternalizesLargeKeepsSmall) {
  const onnx::ModelProto src = BigModel();
  const std::string in = Save(src);
  fs::create_directory(dir_ / "out");
  std::vector<std::string> seen;
  std::ofstream data(dir_ / "out/weights.data", std::ios::binary);
  int64_t offset = 0;
  ModelCompilationOptions o = Example();
  o.SetInputModelPath(in).SetOutputModelPath(dir_ / "out/c.onnx").SetOutputModelGetInitializerLocationFunc(
      [&](const std::string& name, const Value& value, const ExternalInitializerInfo* source)
          -> std::optional<ExternalInitializerInfo> {
        seen.push_back(name);
        EXPECT_EQ(source, nullptr);  // embedded in the source model
        const size_t bytes = value.GetTensorTypeAndShapeInfo().GetElementCount() * sizeof(float);
        if (bytes < 1024) return std::nullopt;
        // Left in the stream's buffer until after the compile (as ONNX Runtime's Python example does).
        data.write(static_cast<const char*>(value.GetTensorRawData()), static_cast<std::streamsize>(bytes));
        ExternalInitializerInfo info("weights.data", offset, bytes);
        offset += static_cast<int64_t>(bytes);
        return info;
      });
  ExpectOk(CompileModel(env_, o));
  data.close();
  EXPECT_EQ(seen, (std::vector<std::string>{"Big", "W"}));  // ascending names
  onnx::ModelProto ctx = LoadProto(dir_ / "out/c.onnx");
  for (const auto& t : ctx.graph().initializer())
    EXPECT_EQ(t.data_location() == onnx::TensorProto::EXTERNAL, t.name() == "Big") << t.name();
  EXPECT_EQ(RunBig(Load(dir_ / "out/c.onnx")), RunBig(Session(env_, in.c_str(), SessionOptions())));
}

TEST_F(CompileApi, InitializerLocationFuncReusesSourceExternalData) {
  onnx::ModelProto src = AddReluModel();
  // W lives in weights.bin at offset 8 (after 8 bytes of padding).
  std::string weights(8, '\0');
  const float w[4] = {1, -2, 3, -4};
  weights.append(reinterpret_cast<const char*>(w), sizeof(w));
  WriteFile(dir_ / "weights.bin", weights);
  MakeWeightExternal(&src, "weights.bin", 8);
  const std::string in = Save(src);
  int reused = 0;
  // No EP: the model is written without EPContext nodes and keeps W (compile API default, kGenerateModel).
  ModelCompilationOptions o(env_, SessionOptions());
  o.SetInputModelPath(in).SetOutputModelPath(dir_ / "c.onnx").SetOutputModelGetInitializerLocationFunc(
      [&](const std::string& name, const Value&, const ExternalInitializerInfo* source)
          -> std::optional<ExternalInitializerInfo> {
        if (!source) return std::nullopt;
        EXPECT_EQ(source->GetFilePath(), "weights.bin");
        EXPECT_EQ(source->GetFileOffset(), 8);
        EXPECT_EQ(source->GetByteSize(), 16u);
        ++reused;
        return *source;  // a copy: reuse is always allowed (no aliasing of ONNX Runtime's external_info)
      });
  ExpectOk(CompileModel(env_, o));
  EXPECT_EQ(reused, 1);
  onnx::ModelProto out = LoadProto(dir_ / "c.onnx");
  ASSERT_EQ(out.graph().initializer_size(), 1);
  EXPECT_EQ(out.graph().initializer(0).data_location(), onnx::TensorProto::EXTERNAL);
  EXPECT_TRUE(ContextNodes(out).empty());
  Session s(env_, (dir_ / "c.onnx").c_str(), SessionOptions());
  EXPECT_EQ(RunOne(s), CpuReference(AddReluModel()));
}

TEST_F(CompileApi, InitializerLocationFuncErrors) {
  const std::string in = Save(BigModel());
  auto compile = [&](GetInitializerLocationFunc f) {
    ModelCompilationOptions o = Example();
    o.SetInputModelPath(in).SetOutputModelPath(dir_ / "c.onnx").SetOutputModelGetInitializerLocationFunc(f);
    return CompileModel(env_, o);
  };
  // A file that does not exist.
  Status st = compile([](const std::string&, const Value& v, const ExternalInitializerInfo*) {
    return std::optional<ExternalInitializerInfo>(
        ExternalInitializerInfo("nowhere.data", 0, v.GetTensorTypeAndShapeInfo().GetElementCount() * 4));
  });
  EXPECT_EQ(st.GetErrorCode(), ErrorCode::FAIL);
  EXPECT_TRUE(Contains(st.GetErrorMessage(), "nowhere.data")) << st.GetErrorMessage();
  // A size that is not the tensor's.
  WriteFile(dir_ / "w.data", std::string(kBig * 4, '\0'));
  st = compile([](const std::string&, const Value&, const ExternalInitializerInfo*) {
    return std::optional<ExternalInitializerInfo>(ExternalInitializerInfo("w.data", 0, 12));
  });
  EXPECT_EQ(st.GetErrorCode(), ErrorCode::FAIL);
  EXPECT_TRUE(Contains(st.GetErrorMessage(), "initializer 'Big'")) << st.GetErrorMessage();
  // A path leaving the output model's folder.
  st = compile([](const std::string&, const Value& v, const ExternalInitializerInfo*) {
    return std::optional<ExternalInitializerInfo>(
        ExternalInitializerInfo("../w.data", 0, v.GetTensorTypeAndShapeInfo().GetElementCount() * 4));
  });
  EXPECT_EQ(st.GetErrorCode(), ErrorCode::FAIL);
  // The callback's exceptions.
  st = compile([](const std::string&, const Value&, const ExternalInitializerInfo*)
                   -> std::optional<ExternalInitializerInfo> { throw Exception(ErrorCode::NOT_FOUND, "no room"); });
  EXPECT_EQ(st.GetErrorCode(), ErrorCode::NOT_FOUND);
  EXPECT_EQ(st.GetErrorMessage(), "no room");
  st = compile([](const std::string&, const Value&, const ExternalInitializerInfo*)
                   -> std::optional<ExternalInitializerInfo> { throw std::out_of_range("boom"); });
  EXPECT_EQ(st.GetErrorCode(), ErrorCode::FAIL);
  EXPECT_EQ(st.GetErrorMessage(), "Caught exception while calling user's OrtGetInitializerLocationFunc callback: boom");
  // Nothing of any failed compile remains (the example EP's binary is removed too).
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"m.onnx", "w.data"}));
}

TEST_F(CompileApi, InitializerLocationFuncVisitsSubgraphsFirst) {
  // Y = If(C, then: Add(X, T), else: Add(X, E)) + W: initializers T, E in the branches, W and C in the main graph.
  onnx::ModelProto m = epctx::testing::NewModel("with_if");
  auto* g = m.mutable_graph();
  *g->add_input() = epctx::testing::FloatNx4("X");
  *g->add_output() = epctx::testing::FloatNx4("Y");
  AddWeight(g, "W", {1, 1, 1, 1});
  auto* c = g->add_initializer();
  c->set_name("C");
  c->set_data_type(onnx::TensorProto::BOOL);
  c->set_raw_data(std::string(1, '\1'));
  auto branch = [](const std::string& name, const std::string& weight, float v) {
    onnx::GraphProto b;
    b.set_name(name);
    AddWeight(&b, weight, {v, v, v, v});
    AddNode(&b, "Add", name + "_add", {"X", weight}, name + "_out");
    AddTensorValueInfo(b.add_output(), name + "_out", {2, 4});
    return b;
  };
  onnx::NodeProto* iff = AddNode(g, "If", "if", {"C"}, "I");
  auto* then_attr = iff->add_attribute();
  then_attr->set_name("then_branch");
  then_attr->set_type(onnx::AttributeProto::GRAPH);
  *then_attr->mutable_g() = branch("then", "T", 2);
  auto* else_attr = iff->add_attribute();
  else_attr->set_name("else_branch");
  else_attr->set_type(onnx::AttributeProto::GRAPH);
  *else_attr->mutable_g() = branch("else", "E", 3);
  AddNode(g, "Add", "final", {"I", "W"}, "Y");
  const std::string in = Save(m);
  std::vector<std::string> seen;
  ModelCompilationOptions o(env_, SessionOptions());
  o.SetInputModelPath(in).SetOutputModelPath(dir_ / "c.onnx").SetOutputModelGetInitializerLocationFunc(
      [&](const std::string& name, const Value&, const ExternalInitializerInfo*) {
        seen.push_back(name);
        return std::optional<ExternalInitializerInfo>();
      });
  ExpectOk(CompileModel(env_, o));
  EXPECT_EQ(seen, (std::vector<std::string>{"T", "E", "C", "W"}));
  Session s(env_, (dir_ / "c.onnx").c_str(), SessionOptions());
  EXPECT_EQ(RunOne(s), CpuReference(m));
}

// ---- flags and compiled input ----

TEST_F(CompileApi, NoCompiledNodes) {
  const onnx::ModelProto src = AddReluModel();
  const std::string in = Save(src);
  {
    ModelCompilationOptions o(env_, SessionOptions());  // CPU EP only
    o.SetInputModelPath(in).SetFlags(OrtCompileApiFlags_ERROR_IF_NO_NODES_COMPILED);
    Status st = CompileModel(env_, o);
    EXPECT_EQ(st.GetErrorCode(), ErrorCode::FAIL);
    EXPECT_EQ(st.GetErrorMessage(), "Unable to compile any nodes. Check that the session EPs support compilation and "
                                    "can execute at least one subgraph in the model.");
    EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"m.onnx"}));
  }
  {
    ModelCompilationOptions o(env_, SessionOptions());  // default: a model without EPContext nodes
    o.SetInputModelPath(in);
    ExpectOk(CompileModel(env_, o));
    onnx::ModelProto out = LoadProto(dir_ / "m_ctx.onnx");
    EXPECT_TRUE(ContextNodes(out).empty());
    EXPECT_EQ(out.graph().node_size(), 2);
    Session s(env_, (dir_ / "m_ctx.onnx").c_str(), SessionOptions());
    EXPECT_EQ(RunOne(s), CpuReference(src));
  }
}

TEST_F(CompileApi, CompilingACompiledModelIsInvalidGraph) {
  const std::string in = Save(AddReluModel());
  ModelCompilationOptions first = Example();
  first.SetInputModelPath(in).SetEpContextEmbedMode(true);
  ExpectOk(CompileModel(env_, first));
  const std::set<std::string> before = FilesIn(dir_.path());
  ModelCompilationOptions again = Example();
  again.SetInputModelPath(dir_ / "m_ctx.onnx");
  Status st = CompileModel(env_, again);
  EXPECT_EQ(st.GetErrorCode(), ErrorCode::INVALID_GRAPH);
  EXPECT_TRUE(Contains(st.GetErrorMessage(), "ensure the input model is not already compiled")) << st.GetErrorMessage();
  EXPECT_EQ(FilesIn(dir_.path()), before);  // no m_ctx_ctx.onnx
}

// ---- buffer input ----

TEST_F(CompileApi, BufferInputToFile) {
  const onnx::ModelProto src = AddReluModel();
  const std::string bytes = Serialize(src);
  ModelCompilationOptions o = Example();
  o.SetInputModelFromBuffer(bytes.data(), bytes.size()).SetOutputModelPath(dir_ / "mem_ctx.onnx");
  ExpectOk(CompileModel(env_, o));
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"mem_ctx.onnx", "mem_ctx_example.bin"}));
  EXPECT_EQ(RunOne(Load(dir_ / "mem_ctx.onnx")), CpuReference(src));
}

TEST_F(CompileApi, BinaryInformationNamesTheBinary) {
  // ONNX Runtime's test: buffer in, buffer out, SetEpContextBinaryInformation("./testdata/", "test_model_in_mem.onnx")
  // -> ./testdata/test_model_in_mem_<ep>.bin.
  const onnx::ModelProto src = AddReluModel();
  const std::string bytes = Serialize(src);
  fs::create_directory(dir_ / "testdata");
  AllocatorWithDefaultOptions alloc;
  void* buffer = nullptr;
  size_t size = 0;
  ModelCompilationOptions o = Example();
  o.SetInputModelFromBuffer(bytes.data(), bytes.size())
      .SetOutputModelBuffer(alloc, &buffer, &size)
      .SetEpContextBinaryInformation(dir_ / "testdata/", "test_model_in_mem.onnx");
  ExpectOk(CompileModel(env_, o));
  EXPECT_EQ(FilesIn(dir_ / "testdata"), (std::set<std::string>{"test_model_in_mem_example.bin"}));
  const std::string out(static_cast<const char*>(buffer), size);
  alloc.Free(buffer);
  onnx::ModelProto ctx;
  ASSERT_TRUE(ctx.ParseFromString(out));
  EXPECT_EQ(StrAttr(*ContextNodes(ctx)[0], "ep_cache_context"), "test_model_in_mem_example.bin");
  WriteFile(dir_ / "testdata/test_model_in_mem.onnx", out);
  EXPECT_EQ(RunOne(Load(dir_ / "testdata/test_model_in_mem.onnx")), CpuReference(src));

  // With an output path too, the binary follows the binary information (ONNX Runtime: the last call wins).
  ModelCompilationOptions both = Example();
  both.SetInputModelFromBuffer(bytes.data(), bytes.size())
      .SetOutputModelPath(dir_ / "out_ctx.onnx")
      .SetEpContextBinaryInformation(dir_ / "testdata/", "named.onnx");
  ExpectOk(CompileModel(env_, both));
  EXPECT_TRUE(Exists(dir_ / "out_ctx.onnx"));
  EXPECT_TRUE(Exists(dir_ / "testdata/named_example.bin"));
}

TEST_F(CompileApi, BufferInputBufferOutputWithoutPathsUsesWorkingDirectory) {
  const onnx::ModelProto src = AddReluModel();
  const std::string bytes = Serialize(src);
  char old_cwd[4096];
  ASSERT_NE(getcwd(old_cwd, sizeof(old_cwd)), nullptr);
  ASSERT_EQ(chdir(dir_.path().c_str()), 0);
  AllocatorWithDefaultOptions alloc;
  void* buffer = nullptr;
  size_t size = 0;
  ModelCompilationOptions o = Example();
  o.SetInputModelFromBuffer(bytes.data(), bytes.size()).SetOutputModelBuffer(alloc, &buffer, &size);
  Status st = CompileModel(env_, o);
  std::set<std::string> files = FilesIn(dir_.path());
  ASSERT_EQ(chdir(old_cwd), 0);
  ExpectOk(st);
  // One binary, named after the model's content: epctx_model_<16 hex digits>_ctx_example.bin.
  ASSERT_EQ(files.size(), 1u);
  const std::string bin = *files.begin();
  EXPECT_TRUE(epctx::testing::StartsWith(bin, "epctx_model_")) << bin;
  EXPECT_EQ(bin.size(), std::string("epctx_model_0123456789abcdef_ctx_example.bin").size()) << bin;
  const std::string out(static_cast<const char*>(buffer), size);
  alloc.Free(buffer);
  onnx::ModelProto ctx;
  ASSERT_TRUE(ctx.ParseFromString(out));
  EXPECT_EQ(StrAttr(*ContextNodes(ctx)[0], "ep_cache_context"), bin);
  WriteFile(dir_ / "c.onnx", out);
  EXPECT_EQ(RunOne(Load(dir_ / "c.onnx")), CpuReference(src));
}

// ---- the decoder (external weights) and AotCpu ----

class CompileApiDecoder : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new TempDir();
    const std::string cmd = std::string("/usr/bin/python3 ") + EPCTX_SOURCE_DIR + "/tests/models/make_decoder.py --out " +
                            models_->path() + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() {
    delete models_;
    models_ = nullptr;
  }
  static std::string Model(const std::string& name) { return models_->path() + "/" + name; }

  // Every output of `s` on a fixed 5-token prompt.
  static std::vector<std::vector<float>> Run(const Session& s) {
    std::vector<int64_t> ids = {3, 14, 15, 92, 65};
    const int64_t shape[] = {1, 5};
    std::vector<Value> in;
    in.push_back(Value::CreateTensor<int64_t>(ids.data(), ids.size(), shape, 2));
    std::vector<std::vector<float>> out;
    for (const Value& v : s.Run({"input_ids"}, in)) {
      const float* p = v.GetTensorData<float>();
      out.emplace_back(p, p + v.GetTensorTypeAndShapeInfo().GetElementCount());
    }
    return out;
  }
  static void ExpectClose(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
                          float rtol) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].size(), b[i].size()) << "output " << i;
      for (size_t j = 0; j < a[i].size(); ++j)
        ASSERT_LE(std::fabs(a[i][j] - b[i][j]), 1e-5f + rtol * std::fabs(b[i][j])) << "output " << i << " [" << j << "]";
    }
  }

  static TempDir* models_;
  Env env_{LoggingLevel::WARNING, "compile_api_decoder_test"};
  TempDir dir_;
};
TempDir* CompileApiDecoder::models_ = nullptr;

TEST_F(CompileApiDecoder, ExampleEpReusingSourceWeights) {
  env_.RegisterExecutionProviderLibrary("example", kExampleLib);
  const auto reference = Run(Session(env_, Model("prefill.onnx").c_str(), SessionOptions()));
  // Output beside the source so the reused decoder.weights locations resolve.
  std::set<std::string> reused;
  size_t embedded = 0;
  ModelCompilationOptions o(env_, WithExample(env_));
  o.SetInputModelPath(Model("prefill.onnx"))
      .SetOutputModelPath(Model("prefill_reuse.onnx"))
      .SetOutputModelGetInitializerLocationFunc(
          [&](const std::string& name, const Value&, const ExternalInitializerInfo* source)
              -> std::optional<ExternalInitializerInfo> {
            if (!source) {
              ++embedded;
              return std::nullopt;
            }
            EXPECT_EQ(source->GetFilePath(), "decoder.weights");
            reused.insert(name);
            return *source;
          });
  Status st = CompileModel(env_, o);
  ASSERT_TRUE(st.IsOK()) << st.GetErrorMessage();
  onnx::ModelProto out = LoadProto(Model("prefill_reuse.onnx"));
  EXPECT_FALSE(ContextNodes(out).empty());  // the example EP took the Adds/Muls it can run
  EXPECT_FALSE(reused.empty());
  for (const auto& t : out.graph().initializer()) {
    if (reused.count(t.name())) {
      EXPECT_EQ(t.data_location(), onnx::TensorProto::EXTERNAL) << t.name();
    }
  }
  EXPECT_LT(ReadFile(Model("prefill_reuse.onnx")).size(), ReadFile(Model("prefill.onnx")).size() + 65536);
  ExpectClose(Run(Session(env_, Model("prefill_reuse.onnx").c_str(), WithExample(env_))), reference, 1e-6f);
}

TEST_F(CompileApiDecoder, AotCpuFileAndBufferOutputs) {
  env_.RegisterExecutionProviderLibrary("aotcpu", kAotLib);
  const auto reference = Run(Session(env_, Model("prefill.onnx").c_str(), SessionOptions()));
  // seq pinned to the prompt's length: AotCpu compiles the whole decoder (with seq free it claims nothing; a lone
  // view node between CPU nodes is no partition).
  auto options = [&] {
    SessionOptions so;
    so.SetIntraOpNumThreads(2);
    so.AppendExecutionProvider_V2(env_, DevicesOf(env_, kAot, false), KeyValuePairs());
    so.AddFreeDimensionOverrideByName("seq", 5);
    return so;
  };
  // File output into another folder: the binary goes beside it.
  ModelCompilationOptions o(env_, options());
  o.SetInputModelPath(Model("prefill.onnx")).SetOutputModelPath(dir_ / "prefill_ctx.onnx");
  Status st = CompileModel(env_, o);
  ASSERT_TRUE(st.IsOK()) << st.GetErrorMessage();
  EXPECT_EQ(FilesIn(dir_.path()), (std::set<std::string>{"prefill_ctx.onnx", "prefill_ctx_aotcpu.bin"}));
  onnx::ModelProto ctx = LoadProto(dir_ / "prefill_ctx.onnx");
  ASSERT_EQ(ContextNodes(ctx).size(), 1u);
  EXPECT_EQ(StrAttr(*ContextNodes(ctx)[0], "source"), kAot);
  const auto compiled = Run(Session(env_, (dir_ / "prefill_ctx.onnx").c_str(), options()));
  ExpectClose(compiled, reference, 1e-4f);

  // Write-function output with the binary embedded: loads from bytes, same outputs as the file's.
  std::string streamed;
  ModelCompilationOptions w(env_, options());
  w.SetInputModelPath(Model("prefill.onnx")).SetEpContextEmbedMode(true).SetOutputModelWriteFunc(
      [&](const void* p, size_t n) { streamed.append(static_cast<const char*>(p), n); });
  st = CompileModel(env_, w);
  ASSERT_TRUE(st.IsOK()) << st.GetErrorMessage();
  Session from_bytes(env_, streamed.data(), streamed.size(), options());
  ExpectClose(Run(from_bytes), compiled, 0);
}

}  // namespace
}  // namespace epctx
