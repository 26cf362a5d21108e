// EPContext generation through session options (runtime side), driven by the example plugin EP: output naming
// and validation, what the generated model holds, and the errors. Each test is named after the rule it checks.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <fstream>

#include "epctx/epctx.h"
#include "model/ep_context_schema.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::testing::AddReluModel;
using epctx::testing::Catch;
using epctx::testing::Exists;
using epctx::testing::kExampleLib;
using epctx::testing::MakeWeightExternal;
using epctx::testing::ReadFile;
using epctx::testing::Serialize;
using epctx::testing::TempDir;
using epctx::testing::WithExample;
using epctx::testing::WriteFile;

// Y = Sigmoid(Relu(X + W)): Add+Relu go to the example EP, Sigmoid stays on the CPU EP.
onnx::ModelProto MixedModel() {
  auto m = AddReluModel();
  auto* g = m.mutable_graph();
  g->mutable_node(1)->set_output(0, "R");
  auto* sig = g->add_node();
  sig->set_op_type("Sigmoid");
  sig->set_name("sigmoid");
  sig->add_input("R");
  sig->add_output("Y");
  auto* meta = m.add_metadata_props();
  meta->set_key("author");
  meta->set_value("tests");
  return m;
}

struct Fixture {
  Env env;
  Fixture() { env.RegisterExecutionProviderLibrary("example", kExampleLib); }
  SessionOptions Options(const std::map<std::string, std::string>& config) {
    return WithExample(env, KeyValuePairs{}, config);
  }
};

TEST(EpContextGeneration, DefaultNameIsDerivedFromTheInputFileName) {
  Fixture f;
  TempDir dir;
  mkdir((dir / "v1.2").c_str(), 0755);  // a dot in a folder name must not matter
  WriteFile(dir / "v1.2/model", Serialize(MixedModel()));
  Session s(f.env, (dir / "v1.2/model").c_str(), f.Options({{"ep.context_enable", "1"}}));
  EXPECT_TRUE(Exists(dir / "v1.2/model_ctx.onnx"));
}

TEST(EpContextGeneration, GeneratedModelHoldsEpContextNodesAndPassesTheChecker) {
  Fixture f;
  TempDir dir;
  auto src = MixedModel();
  MakeWeightExternal(&src, "weights.bin", 0);
  float w[] = {1.f, -2.f, 3.f, -4.f};
  WriteFile(dir / "weights.bin", std::string(reinterpret_cast<const char*>(w), sizeof(w)));
  WriteFile(dir / "m.onnx", Serialize(src));
  Session s(f.env, (dir / "m.onnx").c_str(), f.Options({{"ep.context_enable", "1"}, {"ep.context_embed_mode", "1"}}));
  onnx::ModelProto ctx;
  ASSERT_TRUE(ctx.ParseFromString(ReadFile(dir / "m_ctx.onnx")));
  RegisterEpContextSchema();
  EXPECT_NO_THROW(onnx::checker::check_model(ctx));
  int ep_nodes = 0, cpu_nodes = 0;
  for (const auto& n : ctx.graph().node()) {
    if (n.op_type() == "EPContext") {
      ++ep_nodes;
      EXPECT_EQ(n.domain(), "com.microsoft");
      std::map<std::string, const onnx::AttributeProto*> a;
      for (const auto& at : n.attribute()) a[at.name()] = &at;
      ASSERT_TRUE(a.count("source"));
      EXPECT_EQ(a["source"]->s(), "ExampleExecutionProvider");
      EXPECT_EQ(a["partition_name"]->s(), n.name());
    } else {
      ++cpu_nodes;
      EXPECT_EQ(n.op_type(), "Sigmoid");
    }
  }
  EXPECT_EQ(ep_nodes, 1);
  EXPECT_EQ(cpu_nodes, 1);
  // Inputs/outputs keep the source's order; source metadata is kept; compatibility info is stored.
  ASSERT_EQ(ctx.graph().input_size(), 1);
  EXPECT_EQ(ctx.graph().input(0).name(), "X");
  EXPECT_EQ(ctx.graph().output(0).name(), "Y");
  std::map<std::string, std::string> meta;
  for (const auto& p : ctx.metadata_props()) meta[p.key()] = p.value();
  EXPECT_EQ(meta["author"], "tests");
  EXPECT_EQ(meta["ep_compatibility_info.ExampleExecutionProvider"], "example:0.1.0");
  // The generated model never references the source model's external data file.
  for (const auto& t : ctx.graph().initializer()) EXPECT_NE(t.data_location(), onnx::TensorProto::EXTERNAL) << t.name();
}

TEST(EpContextGeneration, CpuInitializersGoToTheConfiguredExternalFile) {
  Fixture f;
  TempDir dir;
  // A CPU node (Sub) reads initializer W2: it must land in the configured external file.
  auto m = MixedModel();
  auto* g = m.mutable_graph();
  g->mutable_node(2)->set_output(0, "SG");
  auto* w2 = g->add_initializer();
  w2->set_name("W2");
  w2->set_data_type(onnx::TensorProto::FLOAT);
  w2->add_dims(4);
  for (float v : {2.f, 2.f, 2.f, 2.f}) w2->add_float_data(v);
  auto* sub = g->add_node();
  sub->set_op_type("Sub");
  sub->add_input("SG");
  sub->add_input("W2");
  sub->add_output("Y");
  WriteFile(dir / "m.onnx", Serialize(m));
  Session s(f.env, (dir / "m.onnx").c_str(),
            f.Options({{"ep.context_enable", "1"}, {"ep.context_model_external_initializers_file_name", "init.bin"}}));
  ASSERT_TRUE(Exists(dir / "init.bin"));
  onnx::ModelProto ctx;
  ASSERT_TRUE(ctx.ParseFromString(ReadFile(dir / "m_ctx.onnx")));
  bool found = false;
  for (const auto& t : ctx.graph().initializer())
    if (t.name() == "W2") {
      found = true;
      EXPECT_EQ(t.data_location(), onnx::TensorProto::EXTERNAL);
      EXPECT_EQ(t.external_data(0).value(), "init.bin");
    }
  EXPECT_TRUE(found);
}

TEST(EpContextGeneration, FolderPathIsInvalidArgument) {
  Fixture f;
  TempDir dir;
  WriteFile(dir / "m.onnx", Serialize(MixedModel()));
  Exception e = Catch([&] {
    Session(f.env, (dir / "m.onnx").c_str(),
            f.Options({{"ep.context_enable", "1"}, {"ep.context_file_path", (dir.path() + "/").c_str()}}));
  });
  EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_STREQ(e.what(), "context_file_path should not point to a folder.");
}

TEST(EpContextGeneration, ExistingOutputFailsAndIsLeftUntouched) {
  Fixture f;
  TempDir dir;
  WriteFile(dir / "m.onnx", Serialize(MixedModel()));
  WriteFile(dir / "m_ctx.onnx", "old contents");
  Exception e = Catch([&] { Session(f.env, (dir / "m.onnx").c_str(), f.Options({{"ep.context_enable", "1"}})); });
  EXPECT_EQ(e.code(), ErrorCode::FAIL);
  EXPECT_NE(std::string(e.what()).find("exists already. Please remove the EP context model if you want to re-generate it."),
            std::string::npos)
      << e.what();
  EXPECT_EQ(ReadFile(dir / "m_ctx.onnx"), "old contents");
}

TEST(EpContextGeneration, BufferModelWithoutOutputPathFails) {
  Fixture f;
  std::string bytes = Serialize(MixedModel());
  Exception e = Catch([&] { Session(f.env, bytes.data(), bytes.size(), f.Options({{"ep.context_enable", "1"}})); });
  EXPECT_EQ(e.code(), ErrorCode::FAIL);
  EXPECT_NE(std::string(e.what()).find("Inference session with a model loaded from bytes was configured with "
                                       "EPContext model generation enabled but without a valid location"),
            std::string::npos)
      << e.what();
  TempDir dir;
  Session ok(f.env, bytes.data(), bytes.size(),
             f.Options({{"ep.context_enable", "1"}, {"ep.context_file_path", (dir / "out_ctx.onnx").c_str()}}));
  EXPECT_TRUE(Exists(dir / "out_ctx.onnx"));
}

TEST(EpContextGeneration, NoCompiledNodeWritesNothing) {
  Env env;
  TempDir dir;
  WriteFile(dir / "m.onnx", Serialize(MixedModel()));
  SessionOptions so;
  so.AddConfigEntry("ep.context_enable", "1");
  Session s(env, (dir / "m.onnx").c_str(), so);  // CPU EP only: nothing compiled
  EXPECT_FALSE(Exists(dir / "m_ctx.onnx"));
}

TEST(EpContextInference, UnclaimedEpContextNodeIsNotImplementedNamingNodeAndSource) {
  TempDir dir;
  {
    Fixture f;
    WriteFile(dir / "m.onnx", Serialize(MixedModel()));
    Session s(f.env, (dir / "m.onnx").c_str(), f.Options({{"ep.context_enable", "1"}}));
  }
  Env plain;  // the example EP is not registered
  Exception e = Catch([&] { Session(plain, (dir / "m_ctx.onnx").c_str(), SessionOptions()); });
  EXPECT_EQ(e.code(), ErrorCode::NOT_IMPLEMENTED);
  EXPECT_NE(std::string(e.what()).find("Could not find an implementation for EPContext(1) node with name '"),
            std::string::npos)
      << e.what();
  EXPECT_NE(std::string(e.what()).find("source 'ExampleExecutionProvider'"), std::string::npos) << e.what();
}

TEST(EpContextGeneration, DisableModelCompileRequiresCompilation) {
  Fixture f;
  TempDir dir;
  WriteFile(dir / "m.onnx", Serialize(MixedModel()));
  Exception e = Catch([&] {
    Session(f.env, (dir / "m.onnx").c_str(), f.Options({{"session.disable_model_compile", "1"}}));
  });
  EXPECT_EQ(e.code(), ErrorCode::MODEL_REQUIRES_COMPILATION);
  EXPECT_STREQ(e.what(), "User disabled EP compilation but EP 'ExampleExecutionProvider' needs to compile one or more nodes.");
}

TEST(EpContextObservability, ReportSaysWhatGenerationAndLoadingDid) {
  Fixture f;
  TempDir dir;
  WriteFile(dir / "m.onnx", Serialize(MixedModel()));
  std::string gen_report;
  {
    Session s(f.env, (dir / "m.onnx").c_str(), f.Options({{"ep.context_enable", "1"}}));
    gen_report = s.GetSessionReport();
  }
  EXPECT_NE(gen_report.find("\"generated_context_model\":\"" + dir / "m_ctx.onnx" + "\""), std::string::npos) << gen_report;
  EXPECT_NE(gen_report.find("\"from_ep_context\":false"), std::string::npos) << gen_report;
  EXPECT_NE(gen_report.find("\"compile_ms\":"), std::string::npos) << gen_report;
  Session loaded(f.env, (dir / "m_ctx.onnx").c_str(), f.Options({}));
  std::string r = loaded.GetSessionReport();
  EXPECT_NE(r.find("\"from_ep_context\":true"), std::string::npos) << r;
  EXPECT_NE(r.find("\"source\":\"ExampleExecutionProvider\""), std::string::npos) << r;
  EXPECT_NE(r.find("\"binary\":\"" + dir / "m_ctx_example.bin" + "\""), std::string::npos) << r;
  EXPECT_NE(r.find("\"compatibility\":\"EP_SUPPORTED_OPTIMAL\""), std::string::npos) << r;
  EXPECT_NE(r.find("\"cpu_nodes\":1"), std::string::npos) << r;
  // The EP's own account of the load (ReportEpContextLoad): the example reads its binary, maps nothing.
  EXPECT_NE(r.find("\"load\":{\"file\":\""), std::string::npos) << r;
  EXPECT_NE(r.find("\"bytes_mapped\":0,\"bytes_read\":"), std::string::npos) << r;
  EXPECT_EQ(r.find("\"bytes_read\":0,"), std::string::npos) << r;
}

// Rewrites the compatibility metadata of a generated model.
void SetCompatibility(const std::string& path, const std::string& value) {
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(ReadFile(path)));
  for (auto& p : *m.mutable_metadata_props())
    if (p.key() == "ep_compatibility_info.ExampleExecutionProvider") p.set_value(value);
  WriteFile(path, Serialize(m));
}

TEST(EpContextCompatibility, InfoIsReadFromMetadataOnly) {
  Fixture f;
  TempDir dir;
  WriteFile(dir / "m.onnx", Serialize(MixedModel()));
  Session s(f.env, (dir / "m.onnx").c_str(), f.Options({{"ep.context_enable", "1"}}));
  auto info = GetCompatibilityInfoFromModel((dir / "m_ctx.onnx").c_str(), "ExampleExecutionProvider");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(*info, "example:0.1.0");
  std::string bytes = ReadFile(dir / "m_ctx.onnx");
  EXPECT_EQ(GetCompatibilityInfoFromModelBytes(bytes.data(), bytes.size(), "ExampleExecutionProvider").value(),
            "example:0.1.0");
  EXPECT_FALSE(GetCompatibilityInfoFromModel((dir / "m_ctx.onnx").c_str(), "OtherEP").has_value());
  EXPECT_FALSE(GetCompatibilityInfoFromModel((dir / "m.onnx").c_str(), "ExampleExecutionProvider").has_value());
  Exception empty = Catch([&] { GetCompatibilityInfoFromModelBytes(bytes.data(), 0, "ExampleExecutionProvider"); });
  EXPECT_EQ(empty.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_STREQ(empty.what(), "Invalid argument provided to GetCompatibilityInfoFromModelBytes.");
  EXPECT_EQ(Catch([&] { GetCompatibilityInfoFromModel((dir / "absent.onnx").c_str(), "X"); }).code(),
            ErrorCode::NO_SUCHFILE);
  std::string junk = "\xff\xff\xff\xff not a model";
  EXPECT_EQ(Catch([&] { GetCompatibilityInfoFromModelBytes(junk.data(), junk.size(), "X"); }).code(),
            ErrorCode::INVALID_GRAPH);
}

TEST(EpContextCompatibility, FactoryJudgesTheString) {
  Fixture f;
  std::vector<ConstEpDevice> example, cpu;
  for (const auto& d : f.env.GetEpDevices()) {
    if (std::string(d.EpName()) == "ExampleExecutionProvider") example.push_back(d);
    if (std::string(d.EpName()) == "CPUExecutionProvider") cpu.push_back(d);
  }
  ASSERT_FALSE(example.empty());
  EXPECT_EQ(GetModelCompatibilityForEpDevices(example, "example:0.1.0"), CompiledModelCompatibility::EP_SUPPORTED_OPTIMAL);
  EXPECT_EQ(GetModelCompatibilityForEpDevices(example, "example:0.0.9"),
            CompiledModelCompatibility::EP_SUPPORTED_PREFER_RECOMPILATION);
  EXPECT_EQ(GetModelCompatibilityForEpDevices(example, "someone-else"), CompiledModelCompatibility::EP_UNSUPPORTED);
  EXPECT_EQ(GetModelCompatibilityForEpDevices(cpu, "anything"), CompiledModelCompatibility::EP_NOT_APPLICABLE);
  Exception none = Catch([&] { GetModelCompatibilityForEpDevices({}, "x"); });
  EXPECT_STREQ(none.what(), "Invalid argument provided to GetModelCompatibilityForEpDevices.");
  Exception mixed = Catch([&] { GetModelCompatibilityForEpDevices({example[0], cpu[0]}, "x"); });
  EXPECT_STREQ(mixed.what(), "All ep_devices must be from the same execution provider.");
}

TEST(EpContextCompatibility, UnsupportedAndSuboptimalAreCheckedBeforePartitioning) {
  Fixture f;
  TempDir dir;
  WriteFile(dir / "m.onnx", Serialize(MixedModel()));
  { Session s(f.env, (dir / "m.onnx").c_str(), f.Options({{"ep.context_enable", "1"}})); }
  SetCompatibility(dir / "m_ctx.onnx", "someone-else");
  Exception e = Catch([&] { Session(f.env, (dir / "m_ctx.onnx").c_str(), f.Options({})); });
  EXPECT_EQ(e.code(), ErrorCode::FAIL);
  EXPECT_STREQ(e.what(), "Compiled model is not supported by execution provider: ExampleExecutionProvider");
  SetCompatibility(dir / "m_ctx.onnx", "example:0.0.9");
  Exception sub = Catch([&] {
    Session(f.env, (dir / "m_ctx.onnx").c_str(), f.Options({{"session.fail_on_suboptimal_compiled_model", "1"}}));
  });
  EXPECT_EQ(sub.code(), ErrorCode::FAIL);
  EXPECT_STREQ(sub.what(), "Compiled model is suboptimal for execution provider: ExampleExecutionProvider. "
                           "Recompilation recommended for better performance.");
}

}  // namespace
}  // namespace epctx
