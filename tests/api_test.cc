// End-to-end tests of the public C++ API: loading from path and bytes, running, input validation, free
// dimension overrides, external data (mapped, path rules) and hostile model files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "epctx/epctx.h"
#include "core/mapped_file.h"
#include "model/model.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::testing::AddReluModel;
using epctx::testing::Catch;
using epctx::testing::MakeWeightExternal;
using epctx::testing::Serialize;
using epctx::testing::TempDir;
using epctx::testing::WriteFile;

std::vector<float> RunAddRelu(const Session& s, std::vector<float> x) {
  int64_t shape[] = {static_cast<int64_t>(x.size() / 4), 4};
  std::vector<Value> in;
  in.push_back(Value::CreateTensor<float>(MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault), x.data(),
                                          x.size(), shape, 2));
  auto out = s.Run({"X"}, in, {"Y"});
  EXPECT_EQ(out.size(), 1u);
  auto info = out[0].GetTensorTypeAndShapeInfo();
  EXPECT_EQ(info.GetElementType(), ElementType::FLOAT);
  EXPECT_EQ(info.GetShape(), (std::vector<int64_t>{shape[0], 4}));
  const float* y = out[0].GetTensorData<float>();
  return std::vector<float>(y, y + x.size());
}

TEST(Api, RunsFromPathAndFromBytes) {
  TempDir dir;
  WriteFile(dir / "m.onnx", Serialize(AddReluModel()));
  Env env;
  SessionOptions opts;
  opts.SetIntraOpNumThreads(1);
  Session from_path(env, (dir / "m.onnx").c_str(), opts);
  EXPECT_EQ(RunAddRelu(from_path, {0, 0, 0, 0, 1, 1, 1, 1}), (std::vector<float>{1, 0, 3, 0, 2, 0, 4, 0}));
  std::string bytes = Serialize(AddReluModel());
  Session from_bytes(env, bytes.data(), bytes.size(), opts);
  EXPECT_EQ(RunAddRelu(from_bytes, {-1, 5, -3, 10}), (std::vector<float>{0, 3, 0, 6}));
  EXPECT_EQ(from_bytes.GetInputNames(), std::vector<std::string>{"X"});
  EXPECT_EQ(from_bytes.GetOutputNames(), std::vector<std::string>{"Y"});
  auto ti = from_bytes.GetInputTypeInfo(0).GetTensorTypeAndShapeInfo();
  EXPECT_EQ(ti.GetShape(), (std::vector<int64_t>{-1, 4}));
  EXPECT_EQ(ti.GetSymbolicDimensions()[0], "N");
  EXPECT_EQ(Catch([&] { from_bytes.GetInputTypeInfo(3); }).code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(Api, RunRejectsBadInputsNamingThem) {
  std::string bytes = Serialize(AddReluModel());
  Env env;
  Session s(env, bytes.data(), bytes.size(), SessionOptions());
  std::vector<float> x(8, 1.f);
  int64_t shape[] = {2, 4};
  auto make = [&] {
    std::vector<Value> v;
    v.push_back(Value::CreateTensor<float>(x.data(), x.size(), shape, 2));
    return v;
  };
  Exception missing = Catch([&] { s.Run({}, {}, {"Y"}); });
  EXPECT_EQ(missing.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(std::string(missing.what()).find("'X' is missing"), std::string::npos) << missing.what();

  Exception unknown = Catch([&] { s.Run({"Z"}, make(), {"Y"}); });
  EXPECT_EQ(unknown.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(std::string(unknown.what()).find("'Z'"), std::string::npos) << unknown.what();

  std::vector<int64_t> ix(8, 1);
  std::vector<Value> wrong_type;
  wrong_type.push_back(Value::CreateTensor<int64_t>(ix.data(), ix.size(), shape, 2));
  Exception dtype = Catch([&] { s.Run({"X"}, wrong_type, {"Y"}); });
  EXPECT_EQ(dtype.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(std::string(dtype.what()).find("input 'X' expects element type float but got int64"), std::string::npos)
      << dtype.what();

  int64_t bad_shape[] = {4, 2};
  std::vector<Value> wrong_shape;
  wrong_shape.push_back(Value::CreateTensor<float>(x.data(), x.size(), bad_shape, 2));
  Exception shp = Catch([&] { s.Run({"X"}, wrong_shape, {"Y"}); });
  EXPECT_EQ(shp.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(std::string(shp.what()).find("input 'X' expects shape"), std::string::npos) << shp.what();

  Exception out = Catch([&] { s.Run({"X"}, make(), {"nope"}); });
  EXPECT_EQ(out.code(), ErrorCode::INVALID_ARGUMENT);

  // A caller buffer whose size does not match the shape is refused before any run.
  EXPECT_EQ(Catch([&] { Value::CreateTensor<float>(x.data(), 3, shape, 2); }).code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(Api, ConfigEntryLimits) {
  SessionOptions opts;
  opts.AddConfigEntry("ep.context_enable", "1");
  opts.AddConfigEntry("ep.context_enable", "0");  // re-adding overwrites
  EXPECT_EQ(opts.GetConfigEntryOrDefault("ep.context_enable", ""), "0");
  EXPECT_EQ(opts.GetConfigEntryOrDefault("absent", "dflt"), "dflt");
  Exception empty = Catch([&] { opts.AddConfigEntry("", "x"); });
  EXPECT_EQ(empty.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_STREQ(empty.what(), "Config key is empty or longer than maximum length 1024");
  EXPECT_EQ(Catch([&] { opts.AddConfigEntry(std::string(1025, 'k').c_str(), "x"); }).code(), ErrorCode::INVALID_ARGUMENT);
  Exception long_value = Catch([&] { opts.AddConfigEntry("k", std::string(4097, 'v').c_str()); });
  EXPECT_STREQ(long_value.what(), "Config value is longer than maximum length: 4096");
  opts.AddConfigEntry(std::string(1024, 'k').c_str(), std::string(4096, 'v').c_str());
}

TEST(Api, FreeDimensionOverrideFixesShape) {
  std::string bytes = Serialize(AddReluModel());
  SessionOptions opts;
  opts.AddFreeDimensionOverrideByName("N", 2);
  Session s(Env(), bytes.data(), bytes.size(), opts);
  EXPECT_EQ(s.GetInputTypeInfo(0).GetTensorTypeAndShapeInfo().GetShape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(RunAddRelu(s, std::vector<float>(8, 0.f)), (std::vector<float>{1, 0, 3, 0, 1, 0, 3, 0}));
  EXPECT_EQ(Catch([&] { RunAddRelu(s, std::vector<float>(4, 0.f)); }).code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(Catch([&] { opts.AddFreeDimensionOverrideByName("N", -1); }).code(), ErrorCode::INVALID_ARGUMENT);
}

std::string WeightBytes(size_t pad) {
  std::string bytes(pad, '\x7f');
  float w[] = {1.f, -2.f, 3.f, -4.f};
  bytes.append(reinterpret_cast<const char*>(w), sizeof(w));
  return bytes;
}

TEST(ExternalData, MappedNotCopied) {
  TempDir dir;
  auto m = AddReluModel();
  MakeWeightExternal(&m, "weights.bin", 64);
  WriteFile(dir / "m.onnx", Serialize(m));
  WriteFile(dir / "weights.bin", WeightBytes(64));
  Session s(Env(), (dir / "m.onnx").c_str(), SessionOptions());
  EXPECT_EQ(RunAddRelu(s, {0, 0, 0, 0}), (std::vector<float>{1, 0, 3, 0}));
  // The initializer points into the mapping of weights.bin, not into a copy.
  auto model = LoadModelFromFile(dir / "m.onnx", ModelLoadOptions());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Tensor& w = model.value()->graph->initializers.at("W");
  auto* mapped = static_cast<const MappedFile*>(w.holder().get());
  ASSERT_NE(mapped, nullptr);
  EXPECT_EQ(static_cast<const uint8_t*>(w.raw_data()), mapped->data() + 64);
}

TEST(ExternalData, BufferModelUsesConfiguredFolder) {
  TempDir dir;
  auto m = AddReluModel();
  MakeWeightExternal(&m, "weights.bin", 0);
  WriteFile(dir / "weights.bin", WeightBytes(0));
  std::string bytes = Serialize(m);
  Exception no_folder = Catch([&] { Session(Env(), bytes.data(), bytes.size(), SessionOptions()); });
  EXPECT_EQ(no_folder.code(), ErrorCode::INVALID_GRAPH);
  EXPECT_NE(std::string(no_folder.what()).find("session.model_external_initializers_file_folder_path"),
            std::string::npos)
      << no_folder.what();
  SessionOptions opts;
  opts.AddConfigEntry("session.model_external_initializers_file_folder_path", dir.path().c_str());
  Session s(Env(), bytes.data(), bytes.size(), opts);
  EXPECT_EQ(RunAddRelu(s, {0, 0, 0, 0}), (std::vector<float>{1, 0, 3, 0}));
}

// Loads a model whose W lives at `location` and returns the error message (INVALID_GRAPH expected).
std::string LoadWithLocation(const TempDir& dir, const std::string& location, int64_t offset = 0) {
  auto m = AddReluModel();
  MakeWeightExternal(&m, location, offset);
  mkdir((dir / "model").c_str(), 0755);
  WriteFile(dir / "model/m.onnx", Serialize(m));
  Exception e = Catch([&] { Session(Env(), (dir / "model/m.onnx").c_str(), SessionOptions()); });
  EXPECT_EQ(e.code(), ErrorCode::INVALID_GRAPH) << e.what();
  return e.what();
}

TEST(ExternalData, RefusesPathsOutsideTheModelFolder) {
  TempDir dir;
  WriteFile(dir / "outside.bin", WeightBytes(0));
  std::string abs = LoadWithLocation(dir, dir / "outside.bin");
  EXPECT_NE(abs.find("initializer 'W'"), std::string::npos) << abs;
  EXPECT_NE(abs.find("absolute path"), std::string::npos) << abs;

  std::string dots = LoadWithLocation(dir, "../outside.bin");
  EXPECT_NE(dots.find("initializer 'W'"), std::string::npos) << dots;
  EXPECT_NE(dots.find("'../outside.bin'"), std::string::npos) << dots;

  mkdir((dir / "model").c_str(), 0755);
  ASSERT_EQ(symlink((dir / "outside.bin").c_str(), (dir / "model/link.bin").c_str()), 0);
  std::string link = LoadWithLocation(dir, "link.bin");
  EXPECT_NE(link.find("initializer 'W'"), std::string::npos) << link;
  EXPECT_NE(link.find("outside the model's folder"), std::string::npos) << link;

  WriteFile(dir / "model/short.bin", WeightBytes(0));
  std::string range = LoadWithLocation(dir, "short.bin", 8);
  EXPECT_NE(range.find("outside 'short.bin'"), std::string::npos) << range;

  std::string missing = LoadWithLocation(dir, "missing.bin");
  EXPECT_NE(missing.find("does not exist"), std::string::npos) << missing;
}

TEST(HostileModels, ClearErrorsNeverCrashes) {
  TempDir dir;
  Env env;
  std::string good = Serialize(AddReluModel());
  // Every truncation of a valid model is refused cleanly (or, for a prefix that happens to parse, still checked).
  for (size_t len = 1; len < good.size(); len += 7) {
    std::string cut = good.substr(0, len);
    try {
      Session(env, cut.data(), cut.size(), SessionOptions());
    } catch (const Exception& e) {
      EXPECT_NE(e.code(), ErrorCode::OK);
    }
  }
  WriteFile(dir / "trunc.onnx", good.substr(0, good.size() / 2));
  Exception trunc = Catch([&] { Session(env, (dir / "trunc.onnx").c_str(), SessionOptions()); });
  EXPECT_TRUE(trunc.code() == ErrorCode::INVALID_PROTOBUF || trunc.code() == ErrorCode::INVALID_GRAPH) << trunc.what();
  EXPECT_NE(std::string(trunc.what()).find("trunc.onnx"), std::string::npos) << trunc.what();

  WriteFile(dir / "garbage.onnx", std::string("\xff\xff\xff\xff garbage", 12));
  EXPECT_EQ(Catch([&] { Session(env, (dir / "garbage.onnx").c_str(), SessionOptions()); }).code(),
            ErrorCode::INVALID_PROTOBUF);
  EXPECT_EQ(Catch([&] { Session(env, (dir / "absent.onnx").c_str(), SessionOptions()); }).code(),
            ErrorCode::NO_SUCHFILE);
  std::string empty;
  EXPECT_EQ(Catch([&] { Session(env, empty.data(), 0, SessionOptions()); }).code(), ErrorCode::INVALID_PROTOBUF);

  auto unknown_op = AddReluModel();
  unknown_op.mutable_graph()->mutable_node(1)->set_op_type("NoSuchOp");
  std::string b1 = Serialize(unknown_op);
  Exception e1 = Catch([&] { Session(env, b1.data(), b1.size(), SessionOptions()); });
  EXPECT_EQ(e1.code(), ErrorCode::INVALID_GRAPH);
  EXPECT_NE(std::string(e1.what()).find("NoSuchOp"), std::string::npos) << e1.what();

  auto custom_op = AddReluModel();
  custom_op.mutable_graph()->mutable_node(1)->set_domain("my.domain");
  auto* os = custom_op.add_opset_import();
  os->set_domain("my.domain");
  os->set_version(1);
  std::string b2 = Serialize(custom_op);
  Exception e2 = Catch([&] { Session(env, b2.data(), b2.size(), SessionOptions()); });
  EXPECT_TRUE(e2.code() == ErrorCode::NOT_IMPLEMENTED || e2.code() == ErrorCode::INVALID_GRAPH) << e2.what();
  EXPECT_NE(std::string(e2.what()).find("Relu"), std::string::npos) << e2.what();

  // ONNX Runtime 1.30 reads opsets up to 26 and IR versions up to 13, and so does epctx.
  std::string b3 = Serialize(AddReluModel(27));
  Exception e3 = Catch([&] { Session(env, b3.data(), b3.size(), SessionOptions()); });
  EXPECT_EQ(e3.code(), ErrorCode::INVALID_GRAPH);
  EXPECT_NE(std::string(e3.what()).find("opset 27; epctx reads opsets 1 to 26, as ONNX Runtime 1.30"),
            std::string::npos)
      << e3.what();

  auto dangling = AddReluModel();
  dangling.mutable_graph()->mutable_node(1)->set_input(0, "nowhere");
  std::string b4 = Serialize(dangling);
  Exception e4 = Catch([&] { Session(env, b4.data(), b4.size(), SessionOptions()); });
  EXPECT_EQ(e4.code(), ErrorCode::INVALID_GRAPH);
  EXPECT_NE(std::string(e4.what()).find("nowhere"), std::string::npos) << e4.what();

  auto ir = AddReluModel();
  ir.set_ir_version(14);
  std::string b5 = Serialize(ir);
  Exception e5 = Catch([&] { Session(env, b5.data(), b5.size(), SessionOptions()); });
  EXPECT_EQ(e5.code(), ErrorCode::INVALID_GRAPH);
  EXPECT_NE(std::string(e5.what()).find("has IR version 14; epctx reads IR versions 3 to 13, as ONNX Runtime 1.30"),
            std::string::npos)
      << e5.what();

  auto cycle = AddReluModel();
  cycle.mutable_graph()->mutable_node(0)->set_input(0, "Y");
  cycle.mutable_graph()->clear_input();
  std::string b6 = Serialize(cycle);
  EXPECT_EQ(Catch([&] { Session(env, b6.data(), b6.size(), SessionOptions()); }).code(), ErrorCode::INVALID_GRAPH);

  auto bad_raw = AddReluModel();
  auto* w = bad_raw.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_raw_data(std::string(3, '\0'));
  std::string b7 = Serialize(bad_raw);
  Exception e7 = Catch([&] { Session(env, b7.data(), b7.size(), SessionOptions()); });
  EXPECT_EQ(e7.code(), ErrorCode::INVALID_GRAPH);
}

}  // namespace
}  // namespace epctx
