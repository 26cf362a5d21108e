// End-to-end tests of plugin execution providers through the public C++ API: library registration and its error
// paths, devices (virtual ones included), EP selection (explicit, policy, delegate), partitioning across the example
// EP and the CPU EP, options, profiling, the AotCpu shell and a plugin built outside the tree.
//
// Plugins used: build/lib/libepctx_example.so (ExampleExecutionProvider: claims Add, Mul, Relu; failure injection
// through the registration names "fail_factory" / "bad_version"; a virtual NPU for "*.virtual" names or the env
// config allow_virtual_devices=1), build/lib/libepctx_aotcpu.so (claims nothing yet) and
// tests/plugin_out_of_tree (MinimalExecutionProvider, built here through run.sh; claims each Relu on its own).
// Plugin log lines are observed by setting EPCTX_LOG_LEVEL and capturing stderr.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "epctx/epctx.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::testing::AddNode;
using epctx::testing::AddTensorValueInfo;
using epctx::testing::Catch;
using epctx::testing::Contains;
using epctx::testing::DevicesOf;
using epctx::testing::kExample;
using epctx::testing::kExampleLib;
using epctx::testing::NewModel;
using epctx::testing::ReadFile;
using epctx::testing::Serialize;
using epctx::testing::StartsWith;
using epctx::testing::TempDir;
using epctx::testing::WithExample;

const char* kAotCpuLib = EPCTX_BINARY_DIR "/lib/libepctx_aotcpu.so";
const char* kCpu = "CPUExecutionProvider";

// Sets EPCTX_LOG_LEVEL (the plugin log threshold) for the scope and captures what goes to stderr.
class CapturedLog {
 public:
  explicit CapturedLog(int level) {
    const char* old = std::getenv("EPCTX_LOG_LEVEL");
    had_old_ = old != nullptr;
    if (old) old_ = old;
    setenv("EPCTX_LOG_LEVEL", std::to_string(level).c_str(), 1);
    ::testing::internal::CaptureStderr();
  }
  // The captured text; ends the capture and restores the log level.
  std::string Take() {
    if (done_) return text_;
    text_ = ::testing::internal::GetCapturedStderr();
    done_ = true;
    if (had_old_) setenv("EPCTX_LOG_LEVEL", old_.c_str(), 1);
    else unsetenv("EPCTX_LOG_LEVEL");
    return text_;
  }
  ~CapturedLog() { Take(); }

 private:
  bool had_old_ = false, done_ = false;
  std::string old_, text_;
};

std::vector<std::string> EpNames(const Env& env) {
  std::vector<std::string> v;
  for (const ConstEpDevice& d : env.GetEpDevices()) v.push_back(d.EpName());
  return v;
}

size_t CountVirtual(const Env& env) {
  size_t n = 0;
  for (const ConstEpDevice& d : env.GetEpDevices()) {
    const KeyValuePairs metadata = d.Device().Metadata();  // a copy: GetValue points into it
    const char* v = metadata.GetValue("is_virtual");
    n += v && std::string(v) == "1";
  }
  return n;
}

// ---- models ----

const std::vector<int64_t> kShape = {2, 3, 4};

// X, Y: float[2,3,4]; W: float[4] initializer.
//   A = Add(X, W); B = Mul(A, Y); R = Relu(B)            -> example EP (one fused node)
//   S = Sigmoid(R)                                        -> CPU EP
//   M = Mul(S, X); R2 = Relu(M)                           -> example EP (a second fused node)
//   Z = Softmax(R2, axis=-1)                              -> CPU EP
// Outputs R (an intermediate value that is also a graph output) and Z.
onnx::ModelProto MixedModel() {
  onnx::ModelProto m = NewModel("mixed");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", kShape);
  AddTensorValueInfo(g->add_input(), "Y", kShape);
  AddTensorValueInfo(g->add_output(), "R", kShape);
  AddTensorValueInfo(g->add_output(), "Z", kShape);
  auto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  for (float v : {0.5f, -1.f, 2.f, -0.25f}) w->add_float_data(v);
  AddNode(g, "Add", "add", {"X", "W"}, "A");
  AddNode(g, "Mul", "mul", {"A", "Y"}, "B");
  AddNode(g, "Relu", "relu", {"B"}, "R");
  AddNode(g, "Sigmoid", "sigmoid", {"R"}, "S");
  AddNode(g, "Mul", "mul2", {"S", "X"}, "M");
  AddNode(g, "Relu", "relu2", {"M"}, "R2");
  auto* sm = AddNode(g, "Softmax", "softmax", {"R2"}, "Z");
  auto* axis = sm->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(-1);
  return m;
}

// X: float[2,3,4]. R1 = Relu(X); N = Neg(R1); R2 = Relu(N + X) -- two Relus apart, with CPU nodes between.
onnx::ModelProto ReluModel() {
  onnx::ModelProto m = NewModel("relus");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", kShape);
  AddTensorValueInfo(g->add_output(), "R1", kShape);
  AddTensorValueInfo(g->add_output(), "R2", kShape);
  AddNode(g, "Relu", "relu1", {"X"}, "R1");
  AddNode(g, "Neg", "neg", {"R1"}, "N");
  AddNode(g, "Sub", "sub", {"N", "X"}, "D");
  AddNode(g, "Relu", "relu2", {"D"}, "R2");
  return m;
}

// Deterministic inputs in [-3, 3): Relu outputs above 1 exist, so relu_clip=1 changes them.
std::vector<float> Inputs(unsigned seed) {
  std::vector<float> v(24);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>((s >> 8) % 6000) / 1000.f - 3.f;
  }
  return v;
}

using Outputs = std::vector<std::vector<float>>;

Outputs RunModel(const Session& s, const std::vector<std::string>& input_names,
                 const std::vector<std::vector<float>>& inputs, const std::vector<std::string>& output_names) {
  std::vector<std::vector<float>> copies = inputs;  // the tensors borrow this memory
  std::vector<Value> values;
  for (auto& x : copies) values.push_back(Value::CreateTensor<float>(x.data(), x.size(), kShape.data(), kShape.size()));
  std::vector<Value> out = s.Run(input_names, values, output_names);
  Outputs result;
  for (const Value& v : out) {
    auto info = v.GetTensorTypeAndShapeInfo();
    EXPECT_EQ(info.GetElementType(), ElementType::FLOAT);
    EXPECT_EQ(info.GetShape(), kShape);
    const float* p = v.GetTensorData<float>();
    result.emplace_back(p, p + info.GetElementCount());
  }
  return result;
}

Outputs RunMixed(const Session& s, unsigned seed = 1) {
  return RunModel(s, {"X", "Y"}, {Inputs(seed), Inputs(seed + 100)}, {"R", "Z"});
}

// Same values within 1e-6 (the example EP computes Add/Mul/Relu exactly as the CPU EP does).
::testing::AssertionResult Near(const Outputs& a, const Outputs& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " outputs vs " << b.size();
  for (size_t o = 0; o < a.size(); ++o) {
    if (a[o].size() != b[o].size())
      return ::testing::AssertionFailure() << "output " << o << ": " << a[o].size() << " vs " << b[o].size();
    for (size_t i = 0; i < a[o].size(); ++i)
      if (!(std::fabs(a[o][i] - b[o][i]) <= 1e-6f))
        return ::testing::AssertionFailure() << "output " << o << "[" << i << "]: " << a[o][i] << " vs " << b[o][i];
  }
  return ::testing::AssertionSuccess();
}

// Outputs of the CPU EP alone.
Outputs CpuReference(const std::string& model, unsigned seed = 1) {
  Env env;
  SessionOptions opts;
  Session s(env, model.data(), model.size(), opts);
  EXPECT_EQ(s.GetExecutionProviders(), std::vector<std::string>{kCpu});
  EXPECT_TRUE(s.GetPartitionAssignments().empty());
  return RunMixed(s, seed);
}

// Fused node names are "<ep>_<ep>_<graph hash>_<n>_<n>" (ONNX Runtime: <ep type>_<metadef name>_<id> with the
// metadef name <ep>_<model hash>_<id>).
void ExpectFusedNames(const std::map<std::string, std::string>& assignments, const std::string& ep, size_t count) {
  EXPECT_EQ(assignments.size(), count);
  std::regex re(ep + "_" + ep + "_[0-9a-f]+_([0-9]+)_([0-9]+)");
  std::set<std::string> ids;
  for (const auto& [name, owner] : assignments) {
    EXPECT_EQ(owner, ep) << name;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(name, m, re)) << name;
    EXPECT_EQ(m[1].str(), m[2].str()) << name;
    ids.insert(m[1].str());
  }
  EXPECT_EQ(ids.size(), count) << "fused node ids must be unique";
}

// ---- 1. registration ----

TEST(PluginRegistration, ExampleListsDevicesAfterTheCpuEp) {
  Env env;
  ASSERT_EQ(EpNames(env), std::vector<std::string>{kCpu});
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  std::vector<ConstEpDevice> devices = env.GetEpDevices();
  ASSERT_EQ(EpNames(env), (std::vector<std::string>{kCpu, kExample}));
  EXPECT_STREQ(devices[0].EpVendor(), "epctx");
  EXPECT_EQ(devices[0].Device().Type(), HardwareDeviceType::CPU);

  const ConstEpDevice& ex = devices[1];
  EXPECT_STREQ(ex.EpVendor(), "epctx");
  ASSERT_NE(ex.EpMetadata().GetValue("version"), nullptr);
  EXPECT_STREQ(ex.EpMetadata().GetValue("version"), "0.1.0");
  ASSERT_NE(ex.EpOptions().GetValue("optimize"), nullptr);
  EXPECT_STREQ(ex.EpOptions().GetValue("optimize"), "1");
  EXPECT_EQ(ex.Device().Type(), HardwareDeviceType::CPU);
  KeyValuePairs meta = ex.Device().Metadata();
  EXPECT_NE(meta.GetValue("isa"), nullptr);
  EXPECT_NE(meta.GetValue("vendor"), nullptr);
  EXPECT_EQ(meta.GetValue("is_virtual"), nullptr);
  // The example pairs with the CPU the runtime discovered: the same hardware device as the CPU EP's.
  EXPECT_EQ(ex.Device().Type(), devices[0].Device().Type());
  EXPECT_EQ(ex.Device().Metadata().GetKeyValuePairs(), devices[0].Device().Metadata().GetKeyValuePairs());

  env.UnregisterExecutionProviderLibrary("example");
  EXPECT_EQ(EpNames(env), std::vector<std::string>{kCpu});
}

TEST(PluginRegistration, DuplicateAndUnknownNames) {
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  Exception dup = Catch([&] { env.RegisterExecutionProviderLibrary("example", kExampleLib); });
  EXPECT_EQ(dup.code(), ErrorCode::FAIL);
  EXPECT_STREQ(dup.what(), "library is already registered under example");
  EXPECT_EQ(EpNames(env), (std::vector<std::string>{kCpu, kExample}));  // the first registration is untouched

  Exception unknown = Catch([&] { env.UnregisterExecutionProviderLibrary("nope"); });
  EXPECT_EQ(unknown.code(), ErrorCode::FAIL);
  EXPECT_STREQ(unknown.what(), "Execution provider library: nope was not registered.");

  Exception empty = Catch([&] { env.RegisterExecutionProviderLibrary("", kExampleLib); });
  EXPECT_EQ(empty.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(empty.what(), "registration name")) << empty.what();

  // The same library under a second name is a second registration with its own devices.
  env.RegisterExecutionProviderLibrary("example2", kExampleLib);
  EXPECT_EQ(EpNames(env), (std::vector<std::string>{kCpu, kExample, kExample}));
  env.UnregisterExecutionProviderLibrary("example");
  env.UnregisterExecutionProviderLibrary("example2");
  Exception twice = Catch([&] { env.UnregisterExecutionProviderLibrary("example"); });
  EXPECT_EQ(twice.code(), ErrorCode::FAIL);
  EXPECT_STREQ(twice.what(), "Execution provider library: example was not registered.");
  EXPECT_EQ(EpNames(env), std::vector<std::string>{kCpu});
}

TEST(PluginRegistration, LibraryThatDoesNotLoad) {
  Env env;
  const std::string path = EPCTX_BINARY_DIR "/lib/no_such_library.so";
  Exception e = Catch([&] { env.RegisterExecutionProviderLibrary("missing", path.c_str()); });
  EXPECT_EQ(e.code(), ErrorCode::FAIL);
  EXPECT_TRUE(StartsWith(e.what(), "Failed to load execution provider library: " + path + " with error:")) << e.what();
  EXPECT_TRUE(Contains(e.what(), "no_such_library.so")) << e.what();
  EXPECT_EQ(EpNames(env), std::vector<std::string>{kCpu});
  // Nothing stays registered under the name.
  Exception un = Catch([&] { env.UnregisterExecutionProviderLibrary("missing"); });
  EXPECT_STREQ(un.what(), "Execution provider library: missing was not registered.");
}

TEST(PluginRegistration, LibraryWithoutTheEntryPoints) {
  Env env;
  std::vector<std::string> paths = {EPCTX_BINARY_DIR "/lib/libepctx.so"};
  if (FILE* f = std::fopen("/lib/x86_64-linux-gnu/libz.so.1", "rb")) {
    std::fclose(f);
    paths.push_back("/lib/x86_64-linux-gnu/libz.so.1");
  }
  for (const std::string& path : paths) {
    Exception e = Catch([&] { env.RegisterExecutionProviderLibrary("nosym", path.c_str()); });
    EXPECT_EQ(e.code(), ErrorCode::FAIL) << path;
    EXPECT_TRUE(StartsWith(e.what(), "Failed to load execution provider library: " + path + " with error:"))
        << e.what();
    EXPECT_TRUE(Contains(e.what(), "CreateEpFactories")) << "must name the missing symbol: " << e.what();
    EXPECT_EQ(EpNames(env), std::vector<std::string>{kCpu});
    Exception un = Catch([&] { env.UnregisterExecutionProviderLibrary("nosym"); });
    EXPECT_EQ(un.code(), ErrorCode::FAIL);
  }
}

TEST(PluginRegistration, FailingFactoryLeavesNothingRegistered) {
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  const std::vector<std::string> before = EpNames(env);
  Exception e = Catch([&] { env.RegisterExecutionProviderLibrary("fail_factory", kExampleLib); });
  EXPECT_EQ(e.code(), ErrorCode::EP_FAIL) << e.what();
  EXPECT_TRUE(Contains(e.what(), "example factory refused: fail_factory")) << e.what();
  EXPECT_EQ(EpNames(env), before);
  Exception un = Catch([&] { env.UnregisterExecutionProviderLibrary("fail_factory"); });
  EXPECT_EQ(un.code(), ErrorCode::FAIL);
  EXPECT_STREQ(un.what(), "Execution provider library: fail_factory was not registered.");
  // The library itself is fine: a good name registers it again.
  env.RegisterExecutionProviderLibrary("example_again", kExampleLib);
  EXPECT_EQ(EpNames(env), (std::vector<std::string>{kCpu, kExample, kExample}));
  env.UnregisterExecutionProviderLibrary("example_again");
  EXPECT_EQ(EpNames(env), before);
}

TEST(PluginRegistration, FactoryOfAnUnknownApiVersionIsRefused) {
  Env env;
  Exception e = Catch([&] { env.RegisterExecutionProviderLibrary("bad_version", kExampleLib); });
  EXPECT_EQ(e.code(), ErrorCode::FAIL);
  EXPECT_TRUE(StartsWith(e.what(), std::string("Failed to load execution provider library: ") + kExampleLib +
                                       " with error:"))
      << e.what();
  EXPECT_TRUE(Contains(e.what(), "version 9999")) << e.what();
  EXPECT_EQ(EpNames(env), std::vector<std::string>{kCpu});
  Exception un = Catch([&] { env.UnregisterExecutionProviderLibrary("bad_version"); });
  EXPECT_STREQ(un.what(), "Execution provider library: bad_version was not registered.");
  env.RegisterExecutionProviderLibrary("good_version", kExampleLib);
  EXPECT_EQ(EpNames(env), (std::vector<std::string>{kCpu, kExample}));
}

TEST(PluginRegistration, UnregisterRefusedWhileASessionUsesTheLibrary) {
  const std::string model = Serialize(MixedModel());
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  {
    Session s(env, model.data(), model.size(), WithExample(env));
    Exception e = Catch([&] { env.UnregisterExecutionProviderLibrary("example"); });
    EXPECT_EQ(e.code(), ErrorCode::FAIL);
    EXPECT_TRUE(Contains(e.what(), "cannot unregister execution provider library 'example'")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "still use it")) << e.what();
    // Still registered and still working.
    EXPECT_EQ(EpNames(env), (std::vector<std::string>{kCpu, kExample}));
    EXPECT_TRUE(Near(RunMixed(s), CpuReference(model)));
  }
  env.UnregisterExecutionProviderLibrary("example");
  EXPECT_EQ(EpNames(env), std::vector<std::string>{kCpu});
}

// ---- 2. virtual devices ----

TEST(PluginVirtualDevices, OnlyForVirtualNamesOrTheEnvConfig) {
  {
    Env env;
    env.RegisterExecutionProviderLibrary("example", kExampleLib);
    EXPECT_EQ(CountVirtual(env), 0u);
    EXPECT_EQ(DevicesOf(env, kExample).size(), 1u);
  }
  {
    Env env;
    env.RegisterExecutionProviderLibrary("example.virtual", kExampleLib);
    std::vector<ConstEpDevice> ex = DevicesOf(env, kExample);
    ASSERT_EQ(ex.size(), 2u);
    EXPECT_EQ(ex[0].Device().Type(), HardwareDeviceType::CPU);
    EXPECT_EQ(ex[0].Device().Metadata().GetValue("is_virtual"), nullptr);
    EXPECT_EQ(ex[1].Device().Type(), HardwareDeviceType::NPU);
    ASSERT_NE(ex[1].Device().Metadata().GetValue("is_virtual"), nullptr);
    EXPECT_STREQ(ex[1].Device().Metadata().GetValue("is_virtual"), "1");
    EXPECT_STREQ(ex[1].EpVendor(), "epctx");
    EXPECT_STREQ(ex[1].EpMetadata().GetValue("version"), "0.1.0");
    EXPECT_EQ(CountVirtual(env), 1u);
    // While a *.virtual library is registered, others may offer virtual devices too (ONNX Runtime sets the env
    // config allow_virtual_devices=1); once it is gone, they may not.
    env.RegisterExecutionProviderLibrary("plain", kExampleLib);
    EXPECT_EQ(CountVirtual(env), 2u);
    env.UnregisterExecutionProviderLibrary("plain");
    env.UnregisterExecutionProviderLibrary("example.virtual");
    env.RegisterExecutionProviderLibrary("plain", kExampleLib);
    EXPECT_EQ(CountVirtual(env), 0u);
  }
  {
    // A *.virtual registration that fails (factory error, duplicate name) leaves no permission behind (ONNX Runtime
    // leaks it, spec S15; epctx counts only registrations that succeed).
    Env env;
    EXPECT_EQ(Catch([&] { env.RegisterExecutionProviderLibrary("fail_factory.virtual", kExampleLib); }).code(),
              ErrorCode::EP_FAIL);
    env.RegisterExecutionProviderLibrary("a.virtual", kExampleLib);
    EXPECT_EQ(Catch([&] { env.RegisterExecutionProviderLibrary("a.virtual", kExampleLib); }).code(), ErrorCode::FAIL);
    env.UnregisterExecutionProviderLibrary("a.virtual");
    env.RegisterExecutionProviderLibrary("plain", kExampleLib);
    EXPECT_EQ(CountVirtual(env), 0u);
  }
  {
    Env env(LoggingLevel::WARNING, "virt", KeyValuePairs{{"allow_virtual_devices", "1"}});
    env.RegisterExecutionProviderLibrary("example", kExampleLib);
    std::vector<ConstEpDevice> ex = DevicesOf(env, kExample);
    ASSERT_EQ(ex.size(), 2u);
    EXPECT_EQ(ex[1].Device().Type(), HardwareDeviceType::NPU);
    EXPECT_EQ(CountVirtual(env), 1u);
  }
  {
    Env env(LoggingLevel::WARNING, "novirt", KeyValuePairs{{"allow_virtual_devices", "0"}});
    env.RegisterExecutionProviderLibrary("example", kExampleLib);
    EXPECT_EQ(CountVirtual(env), 0u);
  }
}

TEST(PluginVirtualDevices, NeverPickedByAutomaticSelection) {
  const std::string model = Serialize(MixedModel());
  const Outputs reference = CpuReference(model);
  Env env;
  env.RegisterExecutionProviderLibrary("example.virtual", kExampleLib);
  ASSERT_EQ(CountVirtual(env), 1u);
  const ExecutionProviderDevicePolicy policies[] = {
      ExecutionProviderDevicePolicy::DEFAULT,          ExecutionProviderDevicePolicy::PREFER_CPU,
      ExecutionProviderDevicePolicy::PREFER_NPU,       ExecutionProviderDevicePolicy::PREFER_GPU,
      ExecutionProviderDevicePolicy::MAX_PERFORMANCE,  ExecutionProviderDevicePolicy::MAX_EFFICIENCY,
      ExecutionProviderDevicePolicy::MIN_OVERALL_POWER};
  for (ExecutionProviderDevicePolicy policy : policies) {
    SCOPED_TRACE("policy " + std::to_string(static_cast<int>(policy)));
    SessionOptions opts;
    opts.SetEpSelectionPolicy(policy);
    CapturedLog log(0);  // the example logs "EP created for <n> device(s)" at VERBOSE
    std::unique_ptr<Session> s;
    try {
      s = std::make_unique<Session>(env, model.data(), model.size(), opts);
    } catch (const Exception& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    const std::string text = log.Take();
    // The example's only real device is a CPU; every policy may pick it, none may add the virtual NPU.
    EXPECT_FALSE(Contains(text, "EP created for 2 device(s)")) << text;
    const auto eps = s->GetExecutionProviders();
    if (eps.size() == 2) {
      EXPECT_EQ(eps, (std::vector<std::string>{kExample, kCpu}));
      EXPECT_TRUE(Contains(text, "ExampleExecutionProvider: EP created for 1 device(s)")) << text;
      ExpectFusedNames(s->GetPartitionAssignments(), kExample, 2);
    } else {
      EXPECT_EQ(eps, std::vector<std::string>{kCpu});
      EXPECT_TRUE(s->GetPartitionAssignments().empty());
    }
    EXPECT_TRUE(Near(RunMixed(*s), reference));
  }

  // PREFER_NPU where the only NPU is virtual: the NPU is not used; the CPU plugin device is the fallback.
  SessionOptions npu;
  npu.SetEpSelectionPolicy(ExecutionProviderDevicePolicy::PREFER_NPU);
  CapturedLog log(0);
  Session s(env, model.data(), model.size(), npu);
  const std::string text = log.Take();
  EXPECT_TRUE(Contains(text, "ExampleExecutionProvider: EP created for 1 device(s)")) << text;
  EXPECT_EQ(s.GetExecutionProviders(), (std::vector<std::string>{kExample, kCpu}));
  ExpectFusedNames(s.GetPartitionAssignments(), kExample, 2);

  // Explicitly appended, the virtual device is used (cross-compilation is what it is for).
  std::vector<ConstEpDevice> virt;
  for (const ConstEpDevice& d : DevicesOf(env, kExample))
    if (d.Device().Type() == HardwareDeviceType::NPU) virt.push_back(d);
  ASSERT_EQ(virt.size(), 1u);
  SessionOptions explicit_opts;
  explicit_opts.AppendExecutionProvider_V2(env, virt);
  CapturedLog log2(0);
  Session sv(env, model.data(), model.size(), explicit_opts);
  EXPECT_TRUE(Contains(log2.Take(), "ExampleExecutionProvider: EP created for 1 device(s)"));
  EXPECT_EQ(sv.GetExecutionProviders(), (std::vector<std::string>{kExample, kCpu}));
}

// ---- 3. partitioning and execution ----

TEST(PluginPartitioning, ExampleAndCpuGiveTheCpuOutputs) {
  const std::string model = Serialize(MixedModel());
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  Session s(env, model.data(), model.size(), WithExample(env));
  EXPECT_EQ(s.GetExecutionProviders(), (std::vector<std::string>{kExample, kCpu}));
  // {add, mul, relu} and {mul2, relu2}: Sigmoid and Softmax stay on the CPU EP between them.
  ExpectFusedNames(s.GetPartitionAssignments(), kExample, 2);
  for (unsigned seed = 1; seed <= 3; ++seed) EXPECT_TRUE(Near(RunMixed(s, seed), CpuReference(model, seed)));
  // Loaded from a file as well.
  TempDir dir;
  epctx::testing::WriteFile(dir / "mixed.onnx", model);
  Session from_file(env, (dir / "mixed.onnx").c_str(), WithExample(env));
  ExpectFusedNames(from_file.GetPartitionAssignments(), kExample, 2);
  EXPECT_TRUE(Near(RunMixed(from_file), CpuReference(model)));
}

TEST(PluginPartitioning, NothingToClaimRunsEverythingOnTheCpu) {
  // Sigmoid -> Softmax only: the example claims nothing, the session still runs.
  onnx::ModelProto m = MixedModel();
  auto* g = m.mutable_graph();
  g->clear_node();
  AddNode(g, "Sigmoid", "s", {"X"}, "R");
  auto* sm = AddNode(g, "Softmax", "softmax", {"Y"}, "Z");
  auto* axis = sm->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(-1);
  g->clear_initializer();
  const std::string model = Serialize(m);
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  Session s(env, model.data(), model.size(), WithExample(env));
  EXPECT_TRUE(s.GetPartitionAssignments().empty());
  EXPECT_TRUE(Near(RunMixed(s), CpuReference(model)));
}

TEST(PluginPartitioning, ReportListsNodesLeftOnTheCpuWithTheEpsReason) {
  // EpGraphSupportInfo_SetNodeRejectionReason: the example EP says why it leaves Sigmoid and Softmax.
  const std::string model = Serialize(MixedModel());
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  Session s(env, model.data(), model.size(), WithExample(env));
  const std::string report = s.GetSessionReport();
  const std::string why = ": this EP takes only Add and Mul (opset >= 7) and Relu on float tensors";
  EXPECT_TRUE(Contains(report, "\"left_on_cpu\":[{\"node\":\"sigmoid\",\"op\":\"Sigmoid\",\"reasons\":{\"" +
                                   std::string(kExample) + "\":\"op Sigmoid" + why + "\"}},{\"node\":\"softmax\","
                                   "\"op\":\"Softmax\",\"reasons\":{\"" + std::string(kExample) + "\":\"op Softmax" +
                                   why + "\"}}]"))
      << report;
  EXPECT_TRUE(Contains(report, "\"free_dims\":[]")) << report;
  // The CPU EP alone: no EP was asked, nothing is listed.
  Session cpu(env, model.data(), model.size(), SessionOptions());
  EXPECT_TRUE(Contains(cpu.GetSessionReport(), "\"left_on_cpu\":[]")) << cpu.GetSessionReport();
}

// Reads "ts" of the first event whose line contains `needle` (the profile writes one event per line); -1 if none.
long long EventTs(const std::string& json, const std::string& needle) {
  size_t at = json.find(needle);
  if (at == std::string::npos) return -1;
  size_t line = json.rfind('\n', at);
  size_t ts = json.find("\"ts\":", line == std::string::npos ? 0 : line);
  return ts == std::string::npos ? -1 : std::atoll(json.c_str() + ts + 5);
}

TEST(PluginPartitioning, ProfileShowsTheSplitAndTheEpsEvents) {
  const std::string model = Serialize(MixedModel());
  TempDir dir;
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  SessionOptions opts = WithExample(env);
  opts.EnableProfiling((dir / "prof").c_str());
  Session s(env, model.data(), model.size(), opts);
  EXPECT_TRUE(Near(RunMixed(s), CpuReference(model)));
  const std::string path = s.EndProfiling();
  EXPECT_TRUE(StartsWith(path, dir / "prof_")) << path;
  const std::string json = ReadFile(path);
  ASSERT_FALSE(json.empty()) << path;
  EXPECT_TRUE(Contains(json, "\"provider\":\"ExampleExecutionProvider\"")) << json;
  EXPECT_TRUE(Contains(json, "\"provider\":\"CPUExecutionProvider\"")) << json;
  // The CPU ran Sigmoid and Softmax; every fused node ran on the example EP.
  for (const char* op : {"\"op_name\":\"Sigmoid\"", "\"op_name\":\"Softmax\""}) {
    size_t at = json.find(op);
    ASSERT_NE(at, std::string::npos) << op;
    std::string line = json.substr(json.rfind('\n', at) + 1, json.find('\n', at) - json.rfind('\n', at) - 1);
    EXPECT_TRUE(Contains(line, "\"provider\":\"CPUExecutionProvider\"")) << line;
  }
  for (const auto& [fused, ep] : s.GetPartitionAssignments()) {
    size_t at = json.find("\"name\":\"" + fused + "\"");
    ASSERT_NE(at, std::string::npos) << fused << " missing from the profile";
    std::string line = json.substr(at, json.find('\n', at) - at);
    EXPECT_TRUE(Contains(line, "\"provider\":\"ExampleExecutionProvider\"")) << line;
  }
  // The EP's own profiler events (one "example_compute" per Compute call), on the session's time base.
  EXPECT_TRUE(Contains(json, "\"name\":\"example_compute\"")) << json;
  const long long ts = EventTs(json, "\"name\":\"example_compute\"");
  if (ts != -1) {
    EXPECT_GE(ts, 0);
    EXPECT_LT(ts, 600LL * 1000 * 1000);  // within ten minutes of the profile's start
  }
  Exception not_enabled = Catch([&] {
    Session plain(env, model.data(), model.size(), WithExample(env));
    plain.EndProfiling();
  });
  EXPECT_EQ(not_enabled.code(), ErrorCode::FAIL);
  EXPECT_TRUE(Contains(not_enabled.what(), "profiling is not enabled")) << not_enabled.what();
}

TEST(PluginPartitioning, ProviderOptionsBecomeSessionConfig) {
  const std::string model = Serialize(MixedModel());
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  // The EP reads ep.exampleexecutionprovider.<key> and logs it at INFO in OnSessionInitializationEnd.
  {
    CapturedLog log(1);
    Session s(env, model.data(), model.size(), WithExample(env));
    const std::string text = log.Take();
    // The device's default option optimize=1 arrives; serialize_runs is unset.
    EXPECT_TRUE(Contains(text, "2 fused graph(s), optimize=1, concurrent runs on")) << text;
  }
  {
    CapturedLog log(1);
    Session s(env, model.data(), model.size(), WithExample(env, KeyValuePairs{{"serialize_runs", "1"}, {"optimize", "3"}}));
    const std::string text = log.Take();
    // The application's options win over the device's defaults.
    EXPECT_TRUE(Contains(text, "2 fused graph(s), optimize=3, concurrent runs off")) << text;
  }
  {
    // The application's own config entry ep.exampleexecutionprovider.optimize is not overridden by the device's
    // default option.
    SessionOptions opts = WithExample(env);
    opts.AddConfigEntry("ep.exampleexecutionprovider.optimize", "7");
    CapturedLog log(1);
    Session s(env, model.data(), model.size(), opts);
    EXPECT_TRUE(Contains(log.Take(), "optimize=7,"));
  }
}

void RunConcurrently(const Session& s, const std::string& model) {
  std::vector<Outputs> reference;
  for (unsigned seed = 0; seed < 4; ++seed) reference.push_back(CpuReference(model, seed));
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        try {
          if (!Near(RunMixed(s, t), reference[t])) ++mismatches;
        } catch (const Exception&) {
          ++errors;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(errors.load(), 0);
}

TEST(PluginPartitioning, ConcurrentRunsWithAndWithoutSerializeRuns) {
  const std::string model = Serialize(MixedModel());
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  {
    Session s(env, model.data(), model.size(), WithExample(env, KeyValuePairs{{"serialize_runs", "1"}}));
    RunConcurrently(s, model);
  }
  {
    Session s(env, model.data(), model.size(), WithExample(env));
    RunConcurrently(s, model);
  }
}

// (ts, dur) of every event named `name` in a profile (one event per line).
std::vector<std::pair<long long, long long>> Events(const std::string& json, const std::string& name) {
  std::vector<std::pair<long long, long long>> v;
  const std::string key = "{\"name\":\"" + name + "\"";
  for (size_t at = json.find(key); at != std::string::npos; at = json.find(key, at + 1)) {
    size_t ts = json.find("\"ts\":", at), dur = json.find("\"dur\":", at);
    if (ts == std::string::npos || dur == std::string::npos) break;
    v.emplace_back(std::atoll(json.c_str() + ts + 5), std::atoll(json.c_str() + dur + 6));
  }
  return v;
}

TEST(PluginPartitioning, SerializeRunsKeepsComputeCallsApart) {
  // serialize_runs=1 makes IsConcurrentRunSupported false: the example's Compute calls (its profiler events) never
  // overlap, even with Run called from 4 threads.
  const std::string model = Serialize(MixedModel());
  TempDir dir;
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  SessionOptions opts = WithExample(env, KeyValuePairs{{"serialize_runs", "1"}});
  opts.EnableProfiling((dir / "serial").c_str());
  Session s(env, model.data(), model.size(), opts);
  RunConcurrently(s, model);
  const std::string json = ReadFile(s.EndProfiling());
  auto events = Events(json, "example_compute");
  EXPECT_EQ(events.size(), 4u * 40u * 2u) << "one event per Compute call: 160 runs x 2 fused nodes";
  std::sort(events.begin(), events.end());
  for (size_t i = 1; i < events.size(); ++i)
    EXPECT_GE(events[i].first, events[i - 1].first + events[i - 1].second) << "Compute calls " << i - 1 << " and " << i
                                                                           << " overlap";
}

TEST(PluginPartitioning, DynamicOptionReluClip) {
  const std::string model = Serialize(MixedModel());
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  Session s(env, model.data(), model.size(), WithExample(env));
  const Outputs plain = RunMixed(s);
  ASSERT_TRUE(Near(plain, CpuReference(model)));
  const std::vector<float>& r = plain[0];  // R = Relu(B), computed by the example EP
  ASSERT_GT(*std::max_element(r.begin(), r.end()), 1.f) << "the test needs Relu outputs above the clip";

  s.SetEpDynamicOptions({"relu_clip"}, {"1.0"});
  const Outputs clipped = RunMixed(s);
  for (size_t i = 0; i < r.size(); ++i) EXPECT_EQ(clipped[0][i], std::min(r[i], 1.f)) << i;
  EXPECT_FALSE(Near(clipped, plain));  // Z depends on R through Sigmoid, so it changes too

  // Unknown key: INVALID_ARGUMENT naming it, and nothing applied (also not the valid key given with it).
  s.SetEpDynamicOptions({"relu_clip"}, {"0"});
  Exception unknown = Catch([&] { s.SetEpDynamicOptions({"relu_clip", "zz_unknown"}, {"1.0", "1"}); });
  EXPECT_EQ(unknown.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(unknown.what(), "zz_unknown")) << unknown.what();
  EXPECT_TRUE(Near(RunMixed(s), plain));

  Exception bad = Catch([&] { s.SetEpDynamicOptions({"relu_clip"}, {"-1"}); });
  EXPECT_EQ(bad.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(bad.what(), "relu_clip")) << bad.what();
  EXPECT_TRUE(Near(RunMixed(s), plain));

  Exception mismatch = Catch([&] { s.SetEpDynamicOptions({"relu_clip"}, {}); });
  EXPECT_EQ(mismatch.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(PluginSelection, PolicyPreferCpuPicksTheCpuPluginDevice) {
  const std::string model = Serialize(MixedModel());
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  SessionOptions opts;
  opts.SetEpSelectionPolicy(ExecutionProviderDevicePolicy::PREFER_CPU);
  Session s(env, model.data(), model.size(), opts);
  EXPECT_EQ(s.GetExecutionProviders(), (std::vector<std::string>{kExample, kCpu}));
  ExpectFusedNames(s.GetPartitionAssignments(), kExample, 2);
  EXPECT_TRUE(Near(RunMixed(s), CpuReference(model)));

  // Without a policy and without appended EPs, only the CPU EP runs.
  Session none(env, model.data(), model.size(), SessionOptions());
  EXPECT_EQ(none.GetExecutionProviders(), std::vector<std::string>{kCpu});
  EXPECT_TRUE(none.GetPartitionAssignments().empty());
}

TEST(PluginSelection, DelegatePicksExactlyWhatItReturns) {
  const std::string model = Serialize(MixedModel());
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  std::vector<std::string> seen;
  {
    SessionOptions opts;
    opts.SetEpSelectionPolicyDelegate([&](const std::vector<ConstEpDevice>& devices) {
      seen.clear();
      for (const auto& d : devices) seen.push_back(d.EpName());
      std::vector<ConstEpDevice> out;
      for (const auto& d : devices)
        if (d.EpName() == std::string(kExample)) out.push_back(d);
      return out;
    });
    Session s(env, model.data(), model.size(), opts);
    EXPECT_EQ(seen, (std::vector<std::string>{kCpu, kExample}));  // every device, the CPU EP's first
    EXPECT_EQ(s.GetExecutionProviders(), (std::vector<std::string>{kExample, kCpu}));
    ExpectFusedNames(s.GetPartitionAssignments(), kExample, 2);
    EXPECT_TRUE(Near(RunMixed(s), CpuReference(model)));
  }
  {
    SessionOptions opts;
    opts.SetEpSelectionPolicyDelegate([](const std::vector<ConstEpDevice>& devices) {
      return std::vector<ConstEpDevice>{devices[0]};  // the CPU EP only
    });
    Session s(env, model.data(), model.size(), opts);
    EXPECT_EQ(s.GetExecutionProviders(), std::vector<std::string>{kCpu});
    EXPECT_TRUE(s.GetPartitionAssignments().empty());
  }
  {
    // A device of another Env is not one the delegate was given.
    Env other;
    other.RegisterExecutionProviderLibrary("example", kExampleLib);
    ConstEpDevice foreign = DevicesOf(other, kExample)[0];
    SessionOptions opts;
    opts.SetEpSelectionPolicyDelegate([&](const std::vector<ConstEpDevice>&) {
      return std::vector<ConstEpDevice>{foreign};
    });
    Exception e = Catch([&] { Session s(env, model.data(), model.size(), opts); });
    EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT);
    EXPECT_TRUE(Contains(e.what(), "not one of the devices it was given")) << e.what();
  }
  Exception empty = Catch([] { SessionOptions().SetEpSelectionPolicyDelegate(nullptr); });
  EXPECT_EQ(empty.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(PluginSelection, BuiltInEpsByName) {
  const std::string model = Serialize(MixedModel());
  Env env;
  SessionOptions opts;
  opts.AppendExecutionProvider("CPU");
  Session s(env, model.data(), model.size(), opts);
  EXPECT_EQ(s.GetExecutionProviders(), std::vector<std::string>{kCpu});
  EXPECT_TRUE(Near(RunMixed(s), CpuReference(model)));
  SessionOptions full;
  full.AppendExecutionProvider("CPUExecutionProvider");
  Session s2(env, model.data(), model.size(), full);
  EXPECT_EQ(s2.GetExecutionProviders(), std::vector<std::string>{kCpu});

  Exception cuda = Catch([&] { SessionOptions().AppendExecutionProvider("CUDA"); });
  EXPECT_EQ(cuda.code(), ErrorCode::NOT_IMPLEMENTED);
  EXPECT_TRUE(Contains(cuda.what(), "'CUDA'")) << cuda.what();
}

TEST(PluginSelection, AppendRejectsDevicesOfTwoEps) {
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  env.RegisterExecutionProviderLibrary("aotcpu", kAotCpuLib);
  std::vector<ConstEpDevice> mixed = {DevicesOf(env, kExample)[0], DevicesOf(env, "AotCpuExecutionProvider")[0]};
  SessionOptions opts;
  Exception e = Catch([&] { opts.AppendExecutionProvider_V2(env, mixed); });
  EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(e.what(), "must belong to the same EP")) << e.what();
  Exception none = Catch([&] { opts.AppendExecutionProvider_V2(env, std::vector<ConstEpDevice>{}); });
  EXPECT_EQ(none.code(), ErrorCode::INVALID_ARGUMENT);
}

TEST(PluginPartitioning, DisabledCompileFailsWhenTheEpClaimsNodes) {
  const std::string model = Serialize(MixedModel());
  Env env;
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  SessionOptions opts = WithExample(env);
  opts.AddConfigEntry("session.disable_model_compile", "1");
  Exception e = Catch([&] { Session s(env, model.data(), model.size(), opts); });
  EXPECT_EQ(e.code(), ErrorCode::MODEL_REQUIRES_COMPILATION);
  EXPECT_STREQ(e.what(),
               "User disabled EP compilation but EP 'ExampleExecutionProvider' needs to compile one or more nodes.");
  // With "0" the session compiles as usual.
  opts.AddConfigEntry("session.disable_model_compile", "0");
  Session s(env, model.data(), model.size(), opts);
  ExpectFusedNames(s.GetPartitionAssignments(), kExample, 2);
}

// ---- 4. the AotCpu shell ----

TEST(PluginAotCpu, RegistersReportsTheCpuAndCompilesTheWholeMixedModel) {
  const std::string model = Serialize(MixedModel());
  Env env;
  env.RegisterExecutionProviderLibrary("aotcpu", kAotCpuLib);
  EXPECT_EQ(EpNames(env), (std::vector<std::string>{kCpu, "AotCpuExecutionProvider"}));
  std::vector<ConstEpDevice> aot = DevicesOf(env, "AotCpuExecutionProvider");
  ASSERT_EQ(aot.size(), 1u);  // virtual devices only when allowed
  EXPECT_EQ(aot[0].Device().Type(), HardwareDeviceType::CPU);
  EXPECT_STREQ(aot[0].EpVendor(), "epctx");
  ASSERT_NE(aot[0].Device().Metadata().GetValue("isa"), nullptr);  // the CPU's feature list
  ASSERT_NE(aot[0].EpMetadata().GetValue("isa"), nullptr);         // the ISA level AotCpu compiles for
  const std::string level = aot[0].EpMetadata().GetValue("isa");
  EXPECT_TRUE(level == "avx2" || level.rfind("avx512_core", 0) == 0 || level == "avx" || level == "sse41") << level;
  ASSERT_NE(aot[0].EpMetadata().GetValue("compatibility"), nullptr);
  EXPECT_NE(std::string(aot[0].EpMetadata().GetValue("compatibility")).find("isa=" + level), std::string::npos);
  {
    SessionOptions opts;
    opts.AppendExecutionProvider_V2(env, aot);
    Session s(env, model.data(), model.size(), opts);
    EXPECT_EQ(s.GetExecutionProviders(), (std::vector<std::string>{"AotCpuExecutionProvider", kCpu}));
    ExpectFusedNames(s.GetPartitionAssignments(), "AotCpuExecutionProvider", 1);  // all seven nodes, one partition
    EXPECT_TRUE(Near(RunMixed(s), CpuReference(model)));
  }
  env.UnregisterExecutionProviderLibrary("aotcpu");
  EXPECT_EQ(EpNames(env), std::vector<std::string>{kCpu});
}

TEST(PluginAotCpu, VirtualDevicesOnePerLowerIsaWhenAllowed) {
  Env env;
  env.RegisterExecutionProviderLibrary("aotcpu.virtual", kAotCpuLib);
  std::vector<std::string> virtual_levels;
  std::string host;
  for (const ConstEpDevice& d : DevicesOf(env, "AotCpuExecutionProvider")) {
    const KeyValuePairs metadata = d.Device().Metadata();  // a copy: GetValue points into it
    const char* v = metadata.GetValue("is_virtual");
    if (v && std::string(v) == "1") virtual_levels.push_back(d.EpMetadata().GetValue("isa"));
    else host = d.EpMetadata().GetValue("isa");
  }
  // Exactly the levels below the host among avx2 and avx512_core (docs/aotcpu.md says why only these): none on an
  // avx2 host, avx2 on an avx512_core host, both above that.
  const std::vector<std::string> order = {"sse41", "avx", "avx2", "avx512_core", "avx512_core_vnni",
                                          "avx512_core_bf16", "avx512_core_amx"};
  const auto host_at = std::find(order.begin(), order.end(), host);
  ASSERT_NE(host_at, order.end()) << "host isa '" << host << "'";
  std::vector<std::string> expected;
  for (auto it = order.begin(); it != host_at; ++it)
    if (*it == "avx2" || *it == "avx512_core") expected.push_back(*it);
  std::sort(virtual_levels.begin(), virtual_levels.end());
  EXPECT_EQ(virtual_levels, expected) << "host " << host;
}

TEST(PluginAotCpu, NextToTheExampleEp) {
  // The example EP first takes its Add/Mul/Relu groups; AotCpu compiles what is left (Sigmoid, Softmax) with its
  // partition cost rule off. With the rule on, each is a lone node on 4 floats between the example EP's partitions:
  // not worth a partition (providers/aotcpu/capability/partition_cost.h), so both run on the CPU EP, with that reason.
  const std::string model = Serialize(MixedModel());
  Env env;
  env.RegisterExecutionProviderLibrary("aotcpu", kAotCpuLib);
  env.RegisterExecutionProviderLibrary("example", kExampleLib);
  for (const bool rule : {false, true}) {
    SCOPED_TRACE(rule ? "cost rule on" : "cost rule off");
    SessionOptions opts;
    opts.AppendExecutionProvider_V2(env, DevicesOf(env, kExample));
    opts.AppendExecutionProvider_V2(env, DevicesOf(env, "AotCpuExecutionProvider"),
                                    rule ? KeyValuePairs() : KeyValuePairs{{"partition_switch_us", "0"}});
    Session s(env, model.data(), model.size(), opts);
    std::map<std::string, std::string> example, aot;
    for (const auto& [name, ep] : s.GetPartitionAssignments()) (ep == kExample ? example : aot)[name] = ep;
    ExpectFusedNames(example, kExample, 2);
    ExpectFusedNames(aot, "AotCpuExecutionProvider", rule ? 0 : 2);
    if (rule)
      EXPECT_TRUE(Contains(s.GetSessionReport(), "\"AotCpuExecutionProvider\":\"island too small to pay for its "
                                                 "boundary"))
          << s.GetSessionReport();
    else
      EXPECT_EQ(s.GetExecutionProviders(), (std::vector<std::string>{kExample, "AotCpuExecutionProvider", kCpu}));
    EXPECT_TRUE(Near(RunMixed(s), CpuReference(model)));
  }
}

// ---- 5. a plugin built outside the tree ----

TEST(PluginOutOfTree, BuildsRegistersAndRuns) {
  TempDir dir;
  const std::string cmd = std::string("bash '") + EPCTX_SOURCE_DIR + "/tests/plugin_out_of_tree/run.sh' '" +
                          EPCTX_BINARY_DIR + "' '" + EPCTX_SOURCE_DIR + "' 2>'" + (dir / "build.log") + "'";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int rc = pclose(p);
  ASSERT_EQ(rc, 0) << "run.sh failed:\n" << ReadFile(dir / "build.log");
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  ASSERT_TRUE(Contains(out, "libminimal_ep.so")) << out;
  ASSERT_EQ(out.find('\n'), std::string::npos) << "run.sh must print only the library path: " << out;

  Env env;
  env.RegisterExecutionProviderLibrary("minimal", out.c_str());
  std::vector<ConstEpDevice> minimal = DevicesOf(env, "MinimalExecutionProvider");
  ASSERT_EQ(minimal.size(), 1u);
  EXPECT_EQ(minimal[0].Device().Type(), HardwareDeviceType::CPU);

  const std::string model = Serialize(ReluModel());
  Outputs reference;
  {
    Env cpu_env;
    Session cpu(cpu_env, model.data(), model.size(), SessionOptions());
    for (unsigned seed = 1; seed <= 2; ++seed) {
      Outputs o = RunModel(cpu, {"X"}, {Inputs(seed)}, {"R1", "R2"});
      reference.insert(reference.end(), o.begin(), o.end());
    }
  }
  {
    SessionOptions opts;
    opts.AppendExecutionProvider_V2(env, minimal);
    Session s(env, model.data(), model.size(), opts);
    EXPECT_EQ(s.GetExecutionProviders(), (std::vector<std::string>{"MinimalExecutionProvider", kCpu}));
    // Each Relu on its own (AddSingleNode); Neg and Sub stay on the CPU EP.
    ExpectFusedNames(s.GetPartitionAssignments(), "MinimalExecutionProvider", 2);
    Outputs got;
    for (unsigned seed = 1; seed <= 2; ++seed) {
      Outputs o = RunModel(s, {"X"}, {Inputs(seed)}, {"R1", "R2"});
      got.insert(got.end(), o.begin(), o.end());
    }
    EXPECT_TRUE(Near(got, reference));
  }
  env.UnregisterExecutionProviderLibrary("minimal");
}

}  // namespace
}  // namespace epctx
