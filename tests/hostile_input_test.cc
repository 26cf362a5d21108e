// Hostile input, end to end: model files, test-data tensors and AotCpu context binaries that are truncated at every
// field or section boundary, bit-flipped, sized to overflow, self-contradictory, cyclic, duplicated, path-escaping,
// or made for another EP or format version. Each must give the right status code and a message that names the
// problem; none may crash, hang or read outside the model's folder.
//
// Cases already covered elsewhere are not repeated (docs/reliability.md has the table): the validator's own
// hostile corpus (providers/aotcpu/binary/context_binary_test.cc), program records (program_test.cc), the example EP's
// path rules (example_ep_context_test.cc), external-data absolute/'..'/symlinked files (api_test.cc).
// Every hostile input goes through Hostile(), which counts them for docs/reliability.md.
#include <gtest/gtest.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <onnx/onnx_pb.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "epctx/epctx.h"
#include "model/external_data.h"
#include "model/tensor_proto.h"
#include "providers/aotcpu/binary/context_binary.h"
#include "providers/aotcpu/runtime/program.h"
#include "tests/test_util.h"

namespace epctx {
namespace {

using epctx::testing::AddNode;
using epctx::testing::AddReluModel;
using epctx::testing::AddTensorValueInfo;
using epctx::testing::AddWeight;
using epctx::testing::Catch;
using epctx::testing::Contains;
using epctx::testing::ContextNodes;
using epctx::testing::DevicesOf;
using epctx::testing::FloatNx4;
using epctx::testing::kExample;
using epctx::testing::kExampleLib;
using epctx::testing::LoadProto;
using epctx::testing::NewModel;
using epctx::testing::ReadFile;
using epctx::testing::RunOne;
using epctx::testing::Serialize;
using epctx::testing::TempDir;
using epctx::testing::WriteFile;
namespace aot = epctx::aotcpu;

constexpr const char* kAotLib = EPCTX_BINARY_DIR "/lib/libepctx_aotcpu.so";
constexpr const char* kAot = "AotCpuExecutionProvider";
constexpr const char* kLoadError = "Failed to load from EpContext model.";

// ---- the hostile corpus counter ----

int g_hostile_inputs = 0;

// Counts one hostile input and passes it through.
const std::string& Hostile(const std::string& bytes) {
  ++g_hostile_inputs;
  return bytes;
}

class CountReporter : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_hostile_inputs > 0) std::printf("[hostile corpus] %d hostile inputs tried\n", g_hostile_inputs);
  }
};
const auto* const kReporter = ::testing::AddGlobalTestEnvironment(new CountReporter);

// Loads `path` with `options` and returns the exception (fails the test if the session loads).
Exception LoadFails(const Env& env, const std::string& path, const SessionOptions& options = SessionOptions()) {
  return Catch([&] { Session s(env, path.c_str(), options); });
}

void ExpectError(const Exception& e, ErrorCode code, const std::vector<std::string>& parts) {
  EXPECT_EQ(e.code(), code) << e.what();
  for (const auto& p : parts) EXPECT_TRUE(Contains(e.what(), p)) << "'" << p << "' not in: " << e.what();
}

// Offsets at which a field of the protobuf message in bytes[begin, end) ends, appended to *ends; the fields of the
// length-delimited field `nested` (if >= 0) are walked too, their ends going to *nested_ends.
void FieldEnds(const std::string& bytes, size_t begin, size_t end, int nested, std::vector<size_t>* ends,
               std::vector<size_t>* nested_ends) {
  namespace wfl = google::protobuf::internal;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()) + begin,
                                            static_cast<int>(end - begin));
  while (uint32_t tag = in.ReadTag()) {
    if (static_cast<int>(tag >> 3) == nested &&
        wfl::WireFormatLite::GetTagWireType(tag) == wfl::WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t len = 0;
      ASSERT_TRUE(in.ReadVarint32(&len));
      const size_t start = begin + static_cast<size_t>(in.CurrentPosition());
      FieldEnds(bytes, start, start + len, -1, nested_ends, nullptr);
      ASSERT_TRUE(in.Skip(static_cast<int>(len)));
    } else {
      ASSERT_TRUE(wfl::WireFormatLite::SkipField(&in, tag));
    }
    ends->push_back(begin + static_cast<size_t>(in.CurrentPosition()));
  }
}

// A model with every kind of top-level field: Y = Relu(X + W) with metadata and a doc string.
onnx::ModelProto RichModel() {
  onnx::ModelProto m = AddReluModel();
  m.set_doc_string("hostile input tests");
  m.set_model_version(3);
  auto* kv = m.add_metadata_props();
  kv->set_key("author");
  kv->set_value("epctx");
  return m;
}

// ================================================================================================================
// Models
// ================================================================================================================

TEST(HostileModel, TruncatedAtEveryFieldBoundaryIsRefusedNamingTheFile) {
  TempDir dir;
  Env env;
  const std::string good = Serialize(RichModel());
  std::vector<size_t> top, graph_fields;
  FieldEnds(good, 0, good.size(), /*graph=*/7, &top, &graph_fields);
  ASSERT_GE(top.size(), 5u);
  ASSERT_GE(graph_fields.size(), 6u);  // nodes, name, initializer, input, output
  const std::set<size_t> valid_prefixes(top.begin(), top.end());
  std::set<size_t> cuts(graph_fields.begin(), graph_fields.end());
  cuts.insert(top.begin(), top.end());
  cuts.insert(1);
  for (size_t cut : cuts) {
    if (cut >= good.size()) continue;
    const std::string path = dir / ("cut_" + std::to_string(cut) + ".onnx");
    WriteFile(path, Hostile(good.substr(0, cut)));
    const std::string file = "cut_" + std::to_string(cut) + ".onnx";
    if (valid_prefixes.count(cut)) {
      // A prefix ending at a top-level field boundary parses: a model missing its later fields. Without a graph or
      // an opset import it is INVALID_GRAPH naming the file and what is missing; without its metadata it loads.
      const onnx::ModelProto prefix = LoadProto(path);
      if (prefix.has_graph() && prefix.opset_import_size() > 0) {
        EXPECT_NO_THROW(Session(env, path.c_str(), SessionOptions())) << "cut at " << cut;
        continue;
      }
      const Exception e = LoadFails(env, path);
      ExpectError(e, ErrorCode::INVALID_GRAPH, {file, prefix.has_graph() ? "No opset import" : "has no graph"});
    } else {
      ExpectError(LoadFails(env, path), ErrorCode::INVALID_PROTOBUF,
                  {file, "not a valid ONNX protobuf (truncated or corrupted)"});
    }
  }
}

TEST(HostileModel, OneBitFlippedAtEveryByteGivesAStatusNeverACrash) {
  Env env;
  const std::string good = Serialize(RichModel());
  std::map<ErrorCode, int> codes;
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ (1 << (i % 8)));
    Hostile(bad);
    try {
      Session s(env, bad.data(), bad.size(), SessionOptions());
      // It loaded: it must run on its declared input or refuse the input with a reason.
      try {
        RunOne(s, s.GetInputCount() ? s.GetInputNames()[0] : "X", s.GetOutputCount() ? s.GetOutputNames()[0] : "Y");
        ++codes[ErrorCode::OK];
      } catch (const Exception& e) {
        EXPECT_NE(std::string(e.what()), "") << "byte " << i;
        ++codes[e.code()];
      }
    } catch (const Exception& e) {
      EXPECT_TRUE(e.code() == ErrorCode::INVALID_PROTOBUF || e.code() == ErrorCode::INVALID_GRAPH ||
                  e.code() == ErrorCode::NOT_IMPLEMENTED)
          << "byte " << i << ": " << e.what();
      EXPECT_GT(std::strlen(e.what()), 20u) << "byte " << i;
      ++codes[e.code()];
    }
  }
  EXPECT_GT(codes[ErrorCode::INVALID_PROTOBUF], 0);
  EXPECT_GT(codes[ErrorCode::INVALID_GRAPH], 0);
}

long MaxRssKb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// Models whose initializer W declares far more elements than it stores (the edit gets a W without dims or data).
std::string ModelWithW(const std::function<void(onnx::TensorProto*)>& edit) {
  onnx::ModelProto m = AddReluModel();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->clear_dims();
  edit(w);
  return Serialize(m);
}
// 256 Mi floats (1 GiB) with 4 bytes of raw data; the same with 2 values in float_data; 16 Mi strings with one.
// The sizes stay at 1 GiB so a regression shows in the resident-memory check without endangering the machine.
const std::string& HugeRaw() {
  static const std::string m = ModelWithW([](onnx::TensorProto* w) {
    w->add_dims(int64_t{1} << 28);
    w->set_raw_data(std::string(4, '\0'));
  });
  return m;
}
const std::string& HugeFloats() {
  static const std::string m = ModelWithW([](onnx::TensorProto* w) {
    w->add_dims(int64_t{1} << 28);
    w->add_float_data(1);
    w->add_float_data(2);
  });
  return m;
}
const std::string& HugeStrings() {
  static const std::string m = ModelWithW([](onnx::TensorProto* w) {
    w->set_data_type(onnx::TensorProto::STRING);
    w->add_dims(int64_t{1} << 24);
    w->add_string_data("s");
  });
  return m;
}

Exception LoadBytes(const Env& env, const std::string& bytes) {
  Hostile(bytes);
  return Catch([&] { Session s(env, bytes.data(), bytes.size(), SessionOptions()); });
}

TEST(HostileModel, HugeDimsWithLittleDataAreRefusedNamingTheInitializer) {
  Env env;
  ExpectError(LoadBytes(env, HugeRaw()), ErrorCode::INVALID_GRAPH,
              {"initializer 'W'", "raw_data holds 4 bytes but shape [268435456] of float needs 1073741824"});
  ExpectError(LoadBytes(env, HugeFloats()), ErrorCode::INVALID_GRAPH,
              {"initializer 'W'", "float_data holds 2 values but the shape [268435456] needs 268435456"});
  ExpectError(LoadBytes(env, HugeStrings()), ErrorCode::INVALID_GRAPH,
              {"initializer 'W'", "string_data holds 1 values but the shape [16777216] needs 16777216"});
  // The element count itself overflows: the ONNX checker computes a wrapped size; the message names the tensor.
  ExpectError(LoadBytes(env, ModelWithW([](onnx::TensorProto* w) {
                w->add_dims(int64_t{1} << 40);
                w->add_dims(int64_t{1} << 40);
                w->set_raw_data(std::string(16, '\0'));
              })),
              ErrorCode::INVALID_GRAPH, {"tensor name: W"});
  ExpectError(LoadBytes(env, ModelWithW([](onnx::TensorProto* w) {
                w->add_dims(-1);
                w->add_dims(4);
                w->set_raw_data(std::string(16, '\0'));
              })),
              ErrorCode::INVALID_GRAPH, {"initializer 'W'", "negative dimension in [-1,4]"});
}

// Regression (found writing this corpus): the runtime allocated and zeroed what an initializer's dims ask for
// before comparing them with the data stored, so a 70-byte model cost 1 GiB (or, with larger dims, all memory).
// Measured in a fresh process (a death-test child), where the peak resident size starts low.
TEST(HostileModelDeathTest, HugeDimsAreRefusedBeforeAnythingIsAllocated) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Env env;
        const long before = MaxRssKb();
        for (const std::string* m : {&HugeRaw(), &HugeFloats(), &HugeStrings()}) {
          try {
            Session s(env, m->data(), m->size(), SessionOptions());
          } catch (const Exception&) {
          }
        }
        const long grown_mb = (MaxRssKb() - before) / 1024;
        std::fprintf(stderr, "peak resident memory grew by %ld MiB\n", grown_mb);
        std::exit(grown_mb < 256 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "peak resident memory grew by");
}

TEST(HostileModel, NegativeOrHugeDimsOnGraphInputsAreFreeDimsOrInputErrors) {
  Env env;
  // Exporters write -1 for a dynamic dim: like ONNX Runtime, a negative dim_value is an unknown dim.
  onnx::ModelProto neg = NewModel("neg");
  auto* g = neg.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {-3, 4});
  AddTensorValueInfo(g->add_output(), "Y", {-3, 4});
  AddNode(g, "Relu", "relu", {"X"}, "Y");
  const std::string nb = Hostile(Serialize(neg));
  Session s(env, nb.data(), nb.size(), SessionOptions());
  std::vector<float> relu;
  for (float x : testing::kInput) relu.push_back(x > 0 ? x : 0);
  EXPECT_EQ(RunOne(s), relu);

  // A huge declared dim loads; feeding anything else is INVALID_ARGUMENT naming the input and both shapes.
  onnx::ModelProto huge = NewModel("huge");
  g = huge.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {int64_t{1} << 62, 4});
  AddTensorValueInfo(g->add_output(), "Y", {int64_t{1} << 62, 4});
  AddNode(g, "Relu", "relu", {"X"}, "Y");
  const std::string hb = Hostile(Serialize(huge));
  Session h(env, hb.data(), hb.size(), SessionOptions());
  const Exception e = Catch([&] { RunOne(h); });
  ExpectError(e, ErrorCode::INVALID_ARGUMENT, {"'X'", "4611686018427387904"});
}

TEST(HostileModel, CyclesAndDuplicateNamesAreInvalidGraphNamingTheValue) {
  Env env;
  auto load = [&](const onnx::ModelProto& m) {
    const std::string b = Hostile(Serialize(m));
    return Catch([&] { Session s(env, b.data(), b.size(), SessionOptions()); });
  };
  {  // n1 reads B, which n2 computes from n1's output.
    onnx::ModelProto m = NewModel("cycle");
    auto* g = m.mutable_graph();
    *g->add_input() = FloatNx4("X");
    *g->add_output() = FloatNx4("Y");
    AddNode(g, "Add", "n1", {"X", "B"}, "A");
    AddNode(g, "Relu", "n2", {"A"}, "B");
    AddNode(g, "Identity", "n3", {"A"}, "Y");
    ExpectError(load(m), ErrorCode::INVALID_GRAPH,
                {"graph 'cycle' has a cycle: Add node 'n1' -> 'A' -> Relu node 'n2' -> 'B' -> Add node 'n1'"});
  }
  {
    onnx::ModelProto m = NewModel("dup_out");
    auto* g = m.mutable_graph();
    *g->add_input() = FloatNx4("X");
    *g->add_output() = FloatNx4("Y");
    AddNode(g, "Relu", "a", {"X"}, "Y");
    AddNode(g, "Neg", "b", {"X"}, "Y");
    ExpectError(load(m), ErrorCode::INVALID_GRAPH, {"SSA", "'Y'", "output names multiple times"});
  }
  {
    onnx::ModelProto m = AddReluModel();
    AddWeight(m.mutable_graph(), "W", {5, 6, 7, 8});
    ExpectError(load(m), ErrorCode::INVALID_GRAPH, {"W initializer name is not unique"});
  }
  {
    onnx::ModelProto m = AddReluModel();
    *m.mutable_graph()->add_input() = FloatNx4("X");
    ExpectError(load(m), ErrorCode::INVALID_GRAPH, {"'X'", "graph input names multiple times"});
  }
  {
    onnx::ModelProto m = AddReluModel();
    auto* os = m.add_opset_import();
    os->set_domain("");
    os->set_version(16);
    ExpectError(load(m), ErrorCode::INVALID_GRAPH, {"imports domain '' twice"});
  }
}

// Every model input a fuzzer found a crash with is kept in tests/fuzz/corpus/model/regress_*.onnx (fuzz.sh replays
// them under ASan/UBSan); here each goes through session creation and one Run in the ordinary build: a session or a
// clean error, never a crash.
TEST(HostileModel, EveryFuzzerRegressionModelLoadsOrFailsCleanly) {
  Env env;
  int tried = 0;
  for (const auto& entry : std::filesystem::directory_iterator(EPCTX_SOURCE_DIR "/tests/fuzz/corpus/model")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("regress_", 0) != 0) continue;
    ++tried;
    const std::string b = Hostile(ReadFile(entry.path().string()));
    try {
      Session s(env, b.data(), b.size(), SessionOptions());
      // Inputs of the declared type and shape, zero-filled, when every dim is known and small.
      std::vector<std::string> names;
      std::vector<Value> feeds;
      std::vector<std::vector<char>> storage;
      bool runnable = true;
      for (size_t i = 0; i < s.GetInputCount() && runnable; ++i) {
        const TypeInfo t = s.GetInputTypeInfo(i);
        if (t.GetONNXType() != OnnxType::TENSOR) {
          runnable = false;
          break;
        }
        std::vector<int64_t> shape = t.GetTensorTypeAndShapeInfo().GetShape();
        int64_t n = 1;
        for (int64_t d : shape) n = d < 0 || d > 4096 ? -1 : (n < 0 ? -1 : n * d);
        if (n < 0 || n > 65536 || t.GetTensorTypeAndShapeInfo().GetElementType() != ElementType::FLOAT) {
          runnable = false;
          break;
        }
        storage.emplace_back(static_cast<size_t>(n) * sizeof(float), 0);
        names.push_back(s.GetInputNames()[i]);
        feeds.push_back(Value::CreateTensor<float>(reinterpret_cast<float*>(storage.back().data()),
                                                   static_cast<size_t>(n), shape.data(), shape.size()));
      }
      if (runnable) {
        try {
          s.Run(names, feeds);
        } catch (const Exception& e) {
          EXPECT_NE(std::string(e.what()), "") << name;
        }
      }
    } catch (const Exception& e) {
      EXPECT_NE(e.code(), ErrorCode::OK) << name;
      EXPECT_NE(std::string(e.what()), "") << name;
    }
  }
  EXPECT_GE(tried, 8);
}

// Regression (model_fuzz, ASan SEGV inside libonnx): ONNX 1.12's STFT shape inference reads dims 0..2 of the signal
// without checking its rank. The guard (src/model/inference_guards.h) refuses the node's inference; the kernel then
// refuses the run naming the shape.
TEST(HostileModel, StftOfARank1SignalIsRefusedNotACrash) {
  Env env;
  onnx::ModelProto m = NewModel("stft");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "signal", {1});
  AddTensorValueInfo(g->add_input(), "frame_step", {}, onnx::TensorProto::INT64);
  AddTensorValueInfo(g->add_output(), "output", {1, 15, 9, 2});
  auto* n = g->add_node();
  n->set_op_type("STFT");
  n->set_name("stft");
  for (const char* in : {"signal", "frame_step"}) n->add_input(in);
  n->add_output("output");
  const std::string b = Hostile(Serialize(m));
  Session s(env, b.data(), b.size(), SessionOptions());
  std::vector<float> signal = {1};
  std::vector<int64_t> step = {1};
  const int64_t shape1[] = {1};
  std::vector<Value> feeds;
  feeds.push_back(Value::CreateTensor<float>(signal.data(), 1, shape1, 1));
  feeds.push_back(Value::CreateTensor<int64_t>(step.data(), 1, nullptr, 0));
  ExpectError(Catch([&] { s.Run({"signal", "frame_step"}, feeds); }), ErrorCode::INVALID_ARGUMENT,
              {"STFT node 'stft'", "signal must have shape [batch, length, 1 or 2], got [1]"});
}

// Regression (model_fuzz in CI, ASan SEGV inside libonnx's LayerNormalization inference): an axis far below -rank.
TEST(HostileModel, LayerNormalizationWithAnAxisOutOfRangeIsRefusedNotACrash) {
  Env env;
  for (int64_t axis : {-2049, -3, 2, 9}) {
    onnx::ModelProto m = NewModel("layer_norm");
    auto* g = m.mutable_graph();
    AddTensorValueInfo(g->add_input(), "X", {3, 4});
    AddTensorValueInfo(g->add_input(), "W", {4});
    AddTensorValueInfo(g->add_input(), "B", {4});
    AddTensorValueInfo(g->add_output(), "Y", {3, 4});
    auto* n = g->add_node();
    n->set_op_type("LayerNormalization");
    n->set_name("ln");
    for (const char* in : {"X", "W", "B"}) n->add_input(in);
    for (const char* out : {"Y", "Mean", "InvStdDev"}) n->add_output(out);
    auto* a = n->add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axis);
    const std::string b = Serialize(m);
    // Inference fails (the guard) without ending the load, as for any op; the kernel then refuses the run.
    Session s(env, b.data(), b.size(), SessionOptions());
    std::vector<float> x(12, 1.0f), w(4, 1.0f), bias(4, 0.0f);
    const int64_t xs[] = {3, 4}, ws[] = {4};
    std::vector<Value> feeds;
    feeds.push_back(Value::CreateTensor<float>(x.data(), x.size(), xs, 2));
    feeds.push_back(Value::CreateTensor<float>(w.data(), w.size(), ws, 1));
    feeds.push_back(Value::CreateTensor<float>(bias.data(), bias.size(), ws, 1));
    const Exception e = Catch([&] { s.Run({"X", "W", "B"}, feeds, {"Y"}); });
    EXPECT_NE(e.GetOrtErrorCode(), ErrorCode::OK) << axis;
    EXPECT_NE(std::string(e.what()).find("axis"), std::string::npos) << axis << ": " << e.what();
  }
}

// Quantization parameters that lie (issue 26): an axis out of range, a per-axis scale of the wrong length or rank,
// a zero point of another type than the data or of another shape than the scale. X float[2,4] -> QuantizeLinear
// (uint8) -> DequantizeLinear -> Y, each node damaged in turn; on the CPU EP and with AotCpu offered the graph, the
// session or its run is refused naming the node and the reason, never a crash or a made-up result.
TEST(HostileModel, QuantizationParametersThatLieAreRefusedNamingTheNode) {
  struct Case {
    const char* node;  // "q" or "dq": the node that gets the damaged parameters
    int64_t axis;
    std::vector<int64_t> scale_dims, zp_dims;
    int zp_type;
    const char* reason;
  };
  const int kU8 = onnx::TensorProto::UINT8, kI8 = onnx::TensorProto::INT8;
  const Case cases[] = {
      {"dq", 2, {4}, {4}, kU8, "axis"},        {"dq", -3, {4}, {4}, kU8, "axis"},
      {"q", 9, {4}, {4}, kU8, "axis"},         {"dq", 1, {3}, {3}, kU8, "scale"},
      {"q", 0, {3}, {3}, kU8, "scale"},        {"dq", 1, {2, 4}, {2, 4}, kU8, "scale"},
      {"dq", 1, {}, {}, kI8, "zero point"},    {"dq", 1, {4}, {2}, kU8, "zero point"},
  };
  Env env;
  env.RegisterExecutionProviderLibrary("aotcpu", kAotLib);
  auto add_init = [](onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims, int type) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    int64_t n = 1;
    for (int64_t d : dims) t->add_dims(d), n *= d;
    if (type == onnx::TensorProto::FLOAT) {
      std::vector<float> v(static_cast<size_t>(n), 0.5f);
      t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
    } else {
      t->set_raw_data(std::string(static_cast<size_t>(n), '\x03'));
    }
  };
  for (const Case& c : cases) {
    for (bool aot : {false, true}) {
      onnx::ModelProto m = NewModel("quant", 13);
      auto* g = m.mutable_graph();
      AddTensorValueInfo(g->add_input(), "X", {2, 4});
      AddTensorValueInfo(g->add_output(), "Y", {2, 4});
      for (const char* node : {"q", "dq"}) {
        const bool bad = std::string(node) == c.node;
        const std::string p = node;
        add_init(g, p + "_scale", bad ? c.scale_dims : std::vector<int64_t>{}, onnx::TensorProto::FLOAT);
        add_init(g, p + "_zp", bad ? c.zp_dims : std::vector<int64_t>{}, bad ? c.zp_type : kU8);
        auto* n = AddNode(g, p == "q" ? "QuantizeLinear" : "DequantizeLinear", p,
                          {p == "q" ? "X" : "Q", p + "_scale", p + "_zp"}, p == "q" ? "Q" : "Y");
        if (bad) {
          auto* a = n->add_attribute();
          a->set_name("axis");
          a->set_type(onnx::AttributeProto::INT);
          a->set_i(c.axis);
        }
      }
      const std::string b = Hostile(Serialize(m));
      const std::string what = std::string(c.node) + " axis " + std::to_string(c.axis) + " reason " + c.reason +
                               (aot ? " (AotCpu)" : " (CPU EP)");
      const Exception e = Catch([&] {
        SessionOptions o;
        if (aot) o.AppendExecutionProvider_V2(env, DevicesOf(env, kAot, false), KeyValuePairs());
        Session s(env, b.data(), b.size(), o);
        std::vector<float> x(testing::kInput);
        std::vector<Value> feeds;
        feeds.push_back(testing::InputTensor(&x));
        s.Run({"X"}, feeds, {"Y"});
      });
      EXPECT_NE(e.GetOrtErrorCode(), ErrorCode::OK) << what;
      EXPECT_TRUE(Contains(e.what(), "'" + std::string(c.node) + "'")) << what << ": " << e.what();
      EXPECT_TRUE(Contains(e.what(), c.reason)) << what << ": " << e.what();
    }
  }
}

// Regression (model_fuzz, ASan SEGV inside libonnx's convPoolShapeInference): a ConvInteger whose weight has another
// rank than its input. Convolutions and pools are guarded alike (weight rank, per-axis attribute lengths).
TEST(HostileModel, ConvolutionsAndPoolsWithMismatchedRanksAreRefusedNotACrash) {
  Env env;
  {
    onnx::ModelProto m = NewModel("conv_integer", 10);
    auto* g = m.mutable_graph();
    AddTensorValueInfo(g->add_input(), "x", {1, 1, 3}, onnx::TensorProto::UINT8);
    AddTensorValueInfo(g->add_input(), "w", {1, 1, 2, 2}, onnx::TensorProto::UINT8);
    AddTensorValueInfo(g->add_output(), "y", {1, 1, 2, 2}, onnx::TensorProto::INT32);
    AddNode(g, "ConvInteger", "conv", {"x", "w"}, "y");
    const std::string b = Hostile(Serialize(m));
    Session s(env, b.data(), b.size(), SessionOptions());
    std::vector<uint8_t> x(3, 1), w(4, 1);
    const int64_t xs[] = {1, 1, 3}, ws[] = {1, 1, 2, 2};
    std::vector<Value> feeds;
    feeds.push_back(Value::CreateTensor<uint8_t>(x.data(), x.size(), xs, 3));
    feeds.push_back(Value::CreateTensor<uint8_t>(w.data(), w.size(), ws, 4));
    ExpectError(Catch([&] { s.Run({"x", "w"}, feeds); }), ErrorCode::INVALID_ARGUMENT,
                {"ConvInteger node 'conv'", "x [1,1,3] and w [1,1,2,2]"});
  }
  {  // MaxUnpool whose indices I have another rank than X (libonnx merged their dims by X's rank)
    onnx::ModelProto m = NewModel("unpool", 11);
    auto* g = m.mutable_graph();
    AddTensorValueInfo(g->add_input(), "X", {1, 1, 2, 2});
    AddTensorValueInfo(g->add_input(), "I", {4}, onnx::TensorProto::INT64);
    AddTensorValueInfo(g->add_output(), "Y", {1, 1, 4, 4});
    auto* n = AddNode(g, "MaxUnpool", "unpool", {"X", "I"}, "Y");
    auto* k = n->add_attribute();
    k->set_name("kernel_shape");
    k->set_type(onnx::AttributeProto::INTS);
    k->add_ints(2);
    k->add_ints(2);
    const std::string b = Hostile(Serialize(m));
    Session s(env, b.data(), b.size(), SessionOptions());
    std::vector<float> x(4, 1);
    std::vector<int64_t> idx = {0, 1, 2, 3};
    const int64_t xs[] = {1, 1, 2, 2}, is[] = {4};
    std::vector<Value> feeds;
    feeds.push_back(Value::CreateTensor<float>(x.data(), x.size(), xs, 4));
    feeds.push_back(Value::CreateTensor<int64_t>(idx.data(), idx.size(), is, 1));
    ExpectError(Catch([&] { s.Run({"X", "I"}, feeds); }), ErrorCode::INVALID_ARGUMENT,
                {"MaxUnpool node 'unpool'", "I has shape [4] but X has shape [1,1,2,2]"});
  }
  {  // MaxPool over one spatial axis with a 3-axis kernel
    onnx::ModelProto m = NewModel("pool");
    auto* g = m.mutable_graph();
    AddTensorValueInfo(g->add_input(), "X", {1, 1, 8});
    AddTensorValueInfo(g->add_output(), "Y", {1, 1, 4});
    auto* n = AddNode(g, "MaxPool", "pool", {"X"}, "Y");
    auto* a = n->add_attribute();
    a->set_name("kernel_shape");
    a->set_type(onnx::AttributeProto::INTS);
    for (int k = 0; k < 3; ++k) a->add_ints(2);
    const std::string b = Hostile(Serialize(m));
    const Exception e = Catch([&] {
      Session s(env, b.data(), b.size(), SessionOptions());
      std::vector<float> x(8, 1);
      const int64_t xs[] = {1, 1, 8};
      std::vector<Value> feeds;
      feeds.push_back(Value::CreateTensor<float>(x.data(), x.size(), xs, 3));
      s.Run({"X"}, feeds);
    });
    EXPECT_TRUE(e.code() == ErrorCode::INVALID_GRAPH || e.code() == ErrorCode::INVALID_ARGUMENT) << e.what();
    EXPECT_TRUE(Contains(e.what(), "MaxPool node 'pool': kernel has 3 spatial dims but the input has 1")) << e.what();
  }
}

// Regression (model_fuzz in CI: heap overflow writing Loop's outputs; a UBSan out-of-range index in SequenceMap): a
// control-flow node declaring more outputs than its body produces. Each is refused naming the node and both counts.
TEST(HostileModel, ControlFlowNodesWithMoreOutputsThanTheirBodyAreRefused) {
  Env env;
  // Body: (iter, cond) -> (cond_out = Identity(cond), scan = Identity of a constant): one scan output, no state.
  auto loop_model = [](int node_outputs) {
    onnx::ModelProto m = NewModel("loop");
    auto* g = m.mutable_graph();
    AddTensorValueInfo(g->add_input(), "M", {}, onnx::TensorProto::INT64);
    AddTensorValueInfo(g->add_input(), "cond", {}, onnx::TensorProto::BOOL);
    auto* n = g->add_node();
    n->set_op_type("Loop");
    n->set_name("loop");
    n->add_input("M");
    n->add_input("cond");
    for (int i = 0; i < node_outputs; ++i) {
      n->add_output("out" + std::to_string(i));
      AddTensorValueInfo(g->add_output(), "out" + std::to_string(i), {-1});
    }
    auto* a = n->add_attribute();
    a->set_name("body");
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* body = a->mutable_g();
    body->set_name("body");
    AddTensorValueInfo(body->add_input(), "iter", {}, onnx::TensorProto::INT64);
    AddTensorValueInfo(body->add_input(), "c", {}, onnx::TensorProto::BOOL);
    AddTensorValueInfo(body->add_output(), "c_out", {}, onnx::TensorProto::BOOL);
    AddTensorValueInfo(body->add_output(), "scan", {});
    auto* id = body->add_node();
    id->set_op_type("Identity");
    id->add_input("c");
    id->add_output("c_out");
    auto* k = body->add_node();
    k->set_op_type("Constant");
    k->add_output("scan");
    auto* v = k->add_attribute();
    v->set_name("value_float");
    v->set_type(onnx::AttributeProto::FLOAT);
    v->set_f(2.5f);
    return m;
  };
  auto run = [&](const onnx::ModelProto& m) {
    const std::string b = Serialize(m);
    Session s(env, b.data(), b.size(), SessionOptions());
    int64_t trips = 3;
    bool cond = true;
    std::vector<Value> feeds;
    feeds.push_back(Value::CreateTensor<int64_t>(&trips, 1, nullptr, 0));
    feeds.push_back(Value::CreateTensor<bool>(&cond, 1, nullptr, 0));
    std::vector<std::string> names;
    for (const auto& o : m.graph().output()) names.push_back(o.name());
    return s.Run({"M", "cond"}, feeds, names);
  };
  // The well-formed loop stacks its scan output: three iterations of 2.5.
  const std::vector<Value> out = run(loop_model(1));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].GetTensorTypeAndShapeInfo().GetShape(), std::vector<int64_t>{3});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[0].GetTensorData<float>()[i], 2.5f);
  for (int outputs : {2, 5}) {
    const Exception e = Catch([&] { run(loop_model(outputs)); });
    EXPECT_EQ(e.code(), ErrorCode::INVALID_GRAPH) << e.what();
    EXPECT_TRUE(Contains(e.what(), "Loop node 'loop': node has " + std::to_string(outputs) +
                                       " outputs, body produces only 1 (0 loop-carried, 1 scan)"))
        << e.what();
  }
}

// A compiled (EPContext-only) model skips the ONNX checker for equivalent structural checks
// (src/model/model.cc, CheckCompiledGraph): a hostile model must not get past them by calling itself compiled.
onnx::ModelProto ContextOnlyModel() {
  onnx::ModelProto m = NewModel("ctx");
  auto* os = m.add_opset_import();
  os->set_domain("com.microsoft");
  os->set_version(1);
  auto* g = m.mutable_graph();
  *g->add_input() = FloatNx4("X");
  *g->add_output() = FloatNx4("Y");
  auto* n = AddNode(g, "EPContext", "ctx_node", {"X"}, "Y");
  n->set_domain("com.microsoft");
  auto* a = n->add_attribute();
  a->set_name("source");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("NoSuchEp");
  return m;
}

TEST(HostileModel, CompiledModelsGetTheCheckersStructuralRules) {
  Env env;
  auto load = [&](const onnx::ModelProto& m) {
    const std::string b = Hostile(Serialize(m));
    return Catch([&] { Session s(env, b.data(), b.size(), SessionOptions()); });
  };
  {  // the baseline: well formed, and nobody claims it
    ExpectError(load(ContextOnlyModel()), ErrorCode::NOT_IMPLEMENTED, {"EPContext", "ctx_node", "NoSuchEp"});
  }
  {  // two EPContext nodes feeding each other
    onnx::ModelProto m = ContextOnlyModel();
    auto* g = m.mutable_graph();
    g->mutable_node(0)->set_input(0, "Z");
    auto* second = g->add_node();
    *second = g->node(0);
    second->set_name("second");
    second->set_input(0, "Y");
    second->set_output(0, "Z");
    ExpectError(load(m), ErrorCode::INVALID_GRAPH, {"has a cycle: ", "node 'ctx_node' -> 'Y' -> ", "node 'second'"});
  }
  {
    onnx::ModelProto m = ContextOnlyModel();
    auto* second = m.mutable_graph()->add_node();
    *second = m.graph().node(0);
    second->set_name("again");
    ExpectError(load(m), ErrorCode::INVALID_GRAPH, {"value 'Y' of node 'again' is defined twice"});
  }
  {
    onnx::ModelProto m = ContextOnlyModel();
    auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
    a->set_name("notes");
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = AddReluModel().graph();
    ExpectError(load(m), ErrorCode::INVALID_GRAPH, {"attribute 'notes' has an unexpected type"});
  }
  {
    onnx::ModelProto m = ContextOnlyModel();
    m.mutable_graph()->mutable_input(0)->clear_type();
    ExpectError(load(m), ErrorCode::INVALID_GRAPH, {"graph input 'X' has no tensor element type"});
  }
  {
    onnx::ModelProto m = ContextOnlyModel();
    m.mutable_graph()->mutable_output(0)->set_name("nowhere");
    ExpectError(load(m), ErrorCode::INVALID_GRAPH, {"graph output 'nowhere' is produced by no node"});
  }
}

// External data beyond the path rules api_test.cc covers: numbers that overflow, ranges past the end, a folder, a
// symlinked folder leading outside.
TEST(HostileModel, ExternalDataOffsetsLengthsAndFoldersThatLie) {
  TempDir dir;
  Env env;
  mkdir((dir / "model").c_str(), 0755);
  mkdir((dir / "outside").c_str(), 0755);
  mkdir((dir / "model/sub").c_str(), 0755);
  std::vector<float> w = {1, -2, 3, -4};
  const std::string wbytes(reinterpret_cast<const char*>(w.data()), 16);
  WriteFile(dir / "model/w.bin", wbytes);
  WriteFile(dir / "outside/w.bin", wbytes);
  ASSERT_EQ(symlink("../outside", (dir / "model/linkdir").c_str()), 0);
  auto load = [&](const std::string& location, const std::string& offset, const std::string& length) {
    onnx::ModelProto m = AddReluModel();
    auto* t = m.mutable_graph()->mutable_initializer(0);
    t->clear_float_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"location", location}, {"offset", offset}, {"length", length}}) {
      if (v == "-") continue;
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    WriteFile(dir / "model/m.onnx", Hostile(Serialize(m)));
    return LoadFails(env, dir / "model/m.onnx");
  };
  ExpectError(load("w.bin", "18446744073709551615", "16"), ErrorCode::INVALID_GRAPH,
              {"initializer 'W'", "external data offset '18446744073709551615' is not a non-negative integer"});
  ExpectError(load("w.bin", "9223372036854775807", "16"), ErrorCode::INVALID_GRAPH,
              {"initializer 'W'", "external data range [9223372036854775807, +16) lies outside 'w.bin' (16 bytes)"});
  ExpectError(load("w.bin", "8", "16"), ErrorCode::INVALID_GRAPH, {"range [8, +16) lies outside 'w.bin'"});
  ExpectError(load("w.bin", "8", "-"), ErrorCode::INVALID_GRAPH,
              {"external data length 8 does not match the tensor's size of 16 bytes"});
  ExpectError(load("w.bin", "0", "-5"), ErrorCode::INVALID_GRAPH, {"external data length '-5' is not a non-negative"});
  ExpectError(load("w.bin", "0x10", "16"), ErrorCode::INVALID_GRAPH, {"external data offset '0x10'"});
  ExpectError(load("", "0", "16"), ErrorCode::INVALID_GRAPH, {"initializer 'W'", "empty location"});
  ExpectError(load("sub", "0", "16"), ErrorCode::INVALID_GRAPH, {"initializer 'W'", "sub"});
  ExpectError(load("sub/../../outside/w.bin", "0", "16"), ErrorCode::INVALID_GRAPH, {"containing '..'"});
  ExpectError(load("linkdir/w.bin", "0", "16"), ErrorCode::INVALID_GRAPH, {"linkdir/w.bin", "outside the model's folder"});
  // The same file through a path that stays inside loads.
  onnx::ModelProto ok = AddReluModel();
  testing::MakeWeightExternal(&ok, "./w.bin", 0);
  WriteFile(dir / "model/ok.onnx", Serialize(ok));
  EXPECT_NO_THROW(Session(env, (dir / "model/ok.onnx").c_str(), SessionOptions()));
}

// Regression (model_fuzz, UBSan): any external-data offset is legal, and one that is not a multiple of the element
// size left float kernels reading misaligned floats through the mapping. Such a tensor is copied; the result is the
// same as with the weights inline (the misaligned read itself is caught by the ASan/UBSan build of this suite).
TEST(HostileModel, ExternalDataAtAnOddOffsetComputesTheSameResult) {
  TempDir dir;
  Env env;
  std::vector<float> w = {1, -2, 3, -4};
  WriteFile(dir / "w.bin", Hostile("abc" + std::string(reinterpret_cast<const char*>(w.data()), 16) + "z"));
  onnx::ModelProto m = AddReluModel();
  testing::MakeWeightExternal(&m, "w.bin", 3);
  WriteFile(dir / "m.onnx", Serialize(m));
  Session s(env, (dir / "m.onnx").c_str(), SessionOptions());
  EXPECT_EQ(RunOne(s), testing::CpuReference(AddReluModel()));
}

// int4 external data is packed (ceil(n / 2) bytes, here at an odd offset): read into one value per byte; a length one
// byte short of the packed size is refused naming the tensor before anything is read.
TEST(HostileModel, Int4ExternalDataIsPackedAndSizeChecked) {
  TempDir dir;
  WriteFile(dir / "w.bin", Hostile(std::string("abc\xf8\x07", 5)));  // int4 [-8, -1, 7] at offset 3
  ExternalDataResolver resolver(dir.path());
  auto tensor = [&](const std::string& length) {
    onnx::TensorProto t;
    t.set_name("W");
    t.set_data_type(22);
    t.add_dims(3);
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"location", "w.bin"}, {"offset", "3"}, {"length", length}}) {
      auto* e = t.add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    return TensorFromProto(t, "initializer 'W'", &resolver);
  };
  StatusOr<Tensor> ok = tensor("2");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok.value().dtype(), DataType::kInt4);
  EXPECT_EQ(ok.value().data<Int4>()[0].value, -8);
  EXPECT_EQ(ok.value().data<Int4>()[1].value, -1);
  EXPECT_EQ(ok.value().data<Int4>()[2].value, 7);
  StatusOr<Tensor> short_len = tensor("1");
  ASSERT_FALSE(short_len.ok());
  EXPECT_EQ(short_len.status().code(), ErrorCode::INVALID_GRAPH);
  EXPECT_NE(short_len.status().message().find("initializer 'W'"), std::string::npos) << short_len.status().ToString();
}

// Test-data and initializer tensors share TensorFromProto; hostile TensorProtos are refused by it with a reason.
TEST(HostileModel, TensorProtosThatLieAboutTheirContents) {
  auto refuse = [](const onnx::TensorProto& t) {
    Hostile(t.SerializeAsString());
    StatusOr<Tensor> r = TensorFromProto(t, "'input_0.pb'", nullptr);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::INVALID_GRAPH);
    return r.ok() ? std::string() : r.status().message();
  };
  onnx::TensorProto t;
  t.set_data_type(999);
  EXPECT_TRUE(Contains(refuse(t), "'input_0.pb': unknown element type 999"));
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(2);
  t.set_raw_data(std::string(7, '\0'));
  EXPECT_TRUE(Contains(refuse(t), "raw_data holds 7 bytes but shape [2] of float needs 8"));
  t.clear_raw_data();
  t.add_float_data(1);
  EXPECT_TRUE(Contains(refuse(t), "float_data holds 1 values but the shape [2] needs 2"));
  onnx::TensorProto c;
  c.set_data_type(onnx::TensorProto::COMPLEX64);
  c.add_dims(2);
  for (int i = 0; i < 3; ++i) c.add_float_data(1);
  EXPECT_TRUE(Contains(refuse(c), "float_data holds 3 values but the shape [2] needs 2 complex values"));
  // Regression (tensor_proto_fuzz, UBSan): an empty complex tensor memcpy'd from a null pointer. It is valid.
  for (auto type : {onnx::TensorProto::COMPLEX64, onnx::TensorProto::COMPLEX128}) {
    onnx::TensorProto empty;
    empty.set_data_type(type);
    empty.add_dims(0);
    StatusOr<Tensor> r = TensorFromProto(empty, "'input_0.pb'", nullptr);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->NumElements(), 0);
  }
  onnx::TensorProto s;
  s.set_data_type(onnx::TensorProto::STRING);
  s.add_dims(1);
  s.set_raw_data("abcd");
  EXPECT_TRUE(Contains(refuse(s), "string tensors cannot use raw_data"));
  onnx::TensorProto e;
  e.set_data_type(onnx::TensorProto::FLOAT);
  e.add_dims(1);
  e.set_data_location(onnx::TensorProto::EXTERNAL);
  EXPECT_TRUE(Contains(refuse(e), "uses external data, which is not allowed here"));
  onnx::TensorProto o;
  o.set_data_type(onnx::TensorProto::INT64);
  o.add_dims(INT64_MAX);
  o.add_dims(4);
  EXPECT_TRUE(Contains(refuse(o), "shape [9223372036854775807,4] is too large"));
}

// ================================================================================================================
// AotCpu context binaries and EPContext payloads
// ================================================================================================================

// Y = Relu(MatMul(X, W) + B), X float[2,4]: one AotCpu partition with a packed weight.
onnx::ModelProto MatMulModel() {
  onnx::ModelProto m = NewModel("small");
  auto* g = m.mutable_graph();
  AddTensorValueInfo(g->add_input(), "X", {2, 4});
  AddTensorValueInfo(g->add_output(), "Y", {2, 4});
  std::vector<float> w(16);
  for (int i = 0; i < 16; ++i) w[i] = 0.125f * static_cast<float>((i * 5) % 7) - 0.25f;
  auto* t = g->add_initializer();
  t->set_name("W");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->add_dims(4);
  for (float v : w) t->add_float_data(v);
  AddWeight(g, "B", {0.5f, -0.5f, 0.25f, 0});
  AddNode(g, "MatMul", "mm", {"X", "W"}, "P");
  AddNode(g, "Add", "bias", {"P", "B"}, "Q");
  AddNode(g, "Relu", "relu", {"Q"}, "Y");
  return m;
}

uint64_t Get64(const std::string& f, size_t at) {
  uint64_t v;
  std::memcpy(&v, f.data() + at, 8);
  return v;
}
uint32_t Get32(const std::string& f, size_t at) {
  uint32_t v;
  std::memcpy(&v, f.data() + at, 4);
  return v;
}
void Set64(std::string* f, size_t at, uint64_t v) { std::memcpy(&(*f)[at], &v, 8); }
void Set16(std::string* f, size_t at, uint16_t v) { std::memcpy(&(*f)[at], &v, 2); }

struct Section {
  uint32_t type;
  uint64_t offset, length;
};
std::vector<Section> Sections(const std::string& f) {
  std::vector<Section> s;
  for (uint32_t i = 0; i < Get32(f, 20); ++i) {
    const size_t e = Get64(f, 24) + i * 32;
    s.push_back({Get32(f, e), Get64(f, e + 8), Get64(f, e + 16)});
  }
  return s;
}

// Recomputes the header checksum after an edit of the header (docs/context-binary-format.md).
void ResealHeader(std::string* f) {
  std::string header = f->substr(0, 64);
  Set64(&header, 40, 0);
  Set64(f, 40, aot::ContextBinaryHash(header.data(), header.size()));
}

// The binary's contents as writer input (tensor names are not stored, only hashes: they are renamed t0, t1, ...).
aot::ContextBinaryContents Contents(const std::string& bin) {
  aot::ContextBinaryReader r;
  EXPECT_TRUE(r.Open(bin.data(), bin.size()).ok);
  aot::ContextBinaryContents c;
  c.compat = r.compat();
  for (size_t i = 0; i < r.tensors().size(); ++i) {
    const aot::TensorView& t = r.tensors()[i];
    c.tensors.push_back({"t" + std::to_string(i), std::string(reinterpret_cast<const char*>(t.data), t.length),
                         t.dtype, t.dims, t.layout});
  }
  for (const aot::GraphView& g : r.graphs()) {
    aot::GraphInput gi{std::string(g.name), {}, std::string(g.records)};
    for (uint32_t i : g.tensor_indices) gi.tensor_names.push_back("t" + std::to_string(i));
    c.graphs.push_back(std::move(gi));
  }
  return c;
}

std::string Write(const aot::ContextBinaryContents& c) {
  std::string out;
  aot::CheckResult r = aot::WriteContextBinary(c, &out);
  EXPECT_TRUE(r.ok) << r.reason;
  return out;
}

// One compiled model (ctx model + binary) per test suite; each test copies what it damages into its own folder.
class HostileContext : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    src_ = new TempDir();
    env_ = new Env();
    env_->RegisterExecutionProviderLibrary("aotcpu", kAotLib);
    env_->RegisterExecutionProviderLibrary("example", kExampleLib);
    WriteFile(*src_ / "m.onnx", Serialize(MatMulModel()));
    {
      Session s(*env_, (*src_ / "m.onnx").c_str(), Aot({{"ep.context_enable", "1"}}));
    }
    ctx_ = new onnx::ModelProto(LoadProto(*src_ / "m_ctx.onnx"));
    bin_ = new std::string(ReadFile(*src_ / "m_ctx_aotcpu.bin"));
    // The example EP's binary for the same kind of graph, for "payload of another EP" cases.
    WriteFile(*src_ / "e.onnx", Serialize(AddReluModel()));
    {
      Session s(*env_, (*src_ / "e.onnx").c_str(),
                testing::WithExample(*env_, {}, {{"ep.context_enable", "1"}}));
    }
    example_bin_ = new std::string(ReadFile(*src_ / "e_ctx_example.bin"));
  }
  static void TearDownTestSuite() {
    delete ctx_;
    delete bin_;
    delete example_bin_;
    delete env_;
    delete src_;
  }

  static SessionOptions Aot(const std::map<std::string, std::string>& config = {}) {
    SessionOptions o;
    o.SetIntraOpNumThreads(1);
    o.AppendExecutionProvider_V2(*env_, DevicesOf(*env_, kAot, false), KeyValuePairs());
    for (const auto& [k, v] : config) o.AddConfigEntry(k.c_str(), v.c_str());
    return o;
  }

  // Writes the ctx model (edited by `edit`) and `bin` as m_ctx_aotcpu.bin into the test's folder; loads it with
  // AotCpu and returns the error.
  Exception LoadWith(const std::string& bin, const std::function<void(onnx::NodeProto*)>& edit = nullptr) {
    onnx::ModelProto m = *ctx_;
    if (edit) edit(ContextNodes(&m)[0]);
    WriteFile(dir_ / "m_ctx.onnx", Serialize(m));
    WriteFile(dir_ / "m_ctx_aotcpu.bin", Hostile(bin));
    return LoadFails(*env_, dir_ / "m_ctx.onnx", Aot());
  }
  // Loads with AotCpu and runs: the ctx model with `bin` must work.
  void ExpectLoadsAndRuns(const std::string& bin) {
    WriteFile(dir_ / "m_ctx.onnx", Serialize(*ctx_));
    WriteFile(dir_ / "m_ctx_aotcpu.bin", bin);
    Session s(*env_, (dir_ / "m_ctx.onnx").c_str(), Aot());
    EXPECT_EQ(RunOne(s), RunOne(Session(*env_, (*src_ / "m.onnx").c_str(), SessionOptions())));
  }

  static void SetAttr(onnx::NodeProto* n, const std::string& name, const std::string& s) {
    for (auto& a : *n->mutable_attribute())
      if (a.name() == name) {
        a.set_type(onnx::AttributeProto::STRING);
        a.set_s(s);
        return;
      }
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(s);
  }
  static void SetInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
    for (auto& a : *n->mutable_attribute())
      if (a.name() == name) {
        a.set_type(onnx::AttributeProto::INT);
        a.set_i(v);
        return;
      }
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }

  static TempDir* src_;
  static Env* env_;
  static onnx::ModelProto* ctx_;
  static std::string* bin_;
  static std::string* example_bin_;
  TempDir dir_;
};
TempDir* HostileContext::src_ = nullptr;
Env* HostileContext::env_ = nullptr;
onnx::ModelProto* HostileContext::ctx_ = nullptr;
std::string* HostileContext::bin_ = nullptr;
std::string* HostileContext::example_bin_ = nullptr;

TEST_F(HostileContext, TheUndamagedBinaryLoads) { ExpectLoadsAndRuns(*bin_); }

TEST_F(HostileContext, BinaryTruncatedAtEverySectionBoundaryIsInvalidGraphNamingTheFileAndTheReason) {
  const std::string& good = *bin_;
  std::set<size_t> cuts = {1, 8, 63, 64, good.size() - 4096, good.size() - 1};
  cuts.insert(Get64(good, 24));                          // section table start
  cuts.insert(Get64(good, 24) + Get32(good, 20) * 32);  // its end
  for (const Section& s : Sections(good)) {
    cuts.insert(s.offset);
    cuts.insert(s.offset + s.length / 2);
    cuts.insert(s.offset + s.length);
  }
  for (size_t cut : cuts) {
    if (cut == 0 || cut >= good.size()) continue;
    const Exception e = LoadWith(good.substr(0, cut));
    const std::string reason = cut < 64 ? "file is " + std::to_string(cut) + " bytes, smaller than the 64-byte header"
                                        : "header says the file is " + std::to_string(good.size()) + " bytes but it is " +
                                              std::to_string(cut) + " bytes (truncated or extended)";
    ExpectError(e, ErrorCode::INVALID_GRAPH, {kLoadError, "m_ctx_aotcpu.bin", reason});
  }
  ExpectError(LoadWith(""), ErrorCode::INVALID_GRAPH, {kLoadError, "m_ctx_aotcpu.bin"});
}

TEST_F(HostileContext, BitFlipsInEachSectionAreRefusedNamingWhatDoesNotMatch) {
  const std::string& good = *bin_;
  auto flipped = [&](size_t at) {
    std::string f = good;
    f[at] = static_cast<char>(f[at] ^ 0x04);
    return f;
  };
  ExpectError(LoadWith(flipped(10)), ErrorCode::INVALID_GRAPH, {kLoadError, "m_ctx_aotcpu.bin", "header checksum mismatch"});
  ExpectError(LoadWith(flipped(Get64(good, 24) + 8)), ErrorCode::INVALID_GRAPH, {"section table checksum mismatch"});
  for (const Section& s : Sections(good)) {
    if (s.length == 0) continue;
    if (s.type == static_cast<uint32_t>(aot::SectionType::kWeights)) {
      // Load mode verifies WEIGHTS through each tensor's content hash (bytes no tensor covers are padding, and the
      // first tensor starts at the section's first byte).
      ExpectError(LoadWith(flipped(s.offset)), ErrorCode::INVALID_GRAPH,
                  {kLoadError, "m_ctx_aotcpu.bin", "content hash mismatch"});
    } else {
      const Exception e = LoadWith(flipped(s.offset + s.length / 2));
      ExpectError(e, ErrorCode::INVALID_GRAPH,
                  {"m_ctx_aotcpu.bin", std::string("(") + aot::SectionTypeName(s.type) + ")", "checksum mismatch"});
    }
  }
}

TEST_F(HostileContext, AnotherMajorFormatVersionIsRefusedNamingBothNewerMinorsLoad) {
  std::string f = *bin_;
  Set16(&f, 8, 2);
  ResealHeader(&f);
  ExpectError(LoadWith(f), ErrorCode::INVALID_GRAPH,
              {kLoadError, "m_ctx_aotcpu.bin", "format major version 2.0 is not supported (this build reads 1.x)"});
  f = *bin_;
  Set16(&f, 8, 0);
  ResealHeader(&f);
  ExpectError(LoadWith(f), ErrorCode::INVALID_GRAPH, {"format major version 0.0 is not supported"});
  f = *bin_;
  Set16(&f, 10, 7);  // 1.7: a newer minor is accepted
  ResealHeader(&f);
  ExpectLoadsAndRuns(Hostile(f));
}

TEST_F(HostileContext, CompatibilityBlockOfAnotherBuildIsRefusedNamingIt) {
  aot::ContextBinaryContents c = Contents(*bin_);
  c.compat.onednn_version = "9.9.9";
  ExpectError(LoadWith(Write(c)), ErrorCode::INVALID_GRAPH,
              {kLoadError, "m_ctx_aotcpu.bin", "compiled with oneDNN 9.9.9", "recompile the model"});
  c = Contents(*bin_);
  c.compat.isa = "quantum_core";
  ExpectError(LoadWith(Write(c)), ErrorCode::INVALID_GRAPH,
              {kLoadError, "m_ctx_aotcpu.bin", "names an unknown ISA 'quantum_core'"});
}

// Above 8 MiB of weights AotCpu hashes them on a background thread while it builds the graph's primitives, and
// waits for the verdict before the session exists: a damaged weight is still refused with the same message, and
// before any problem the load finds later (here the compatibility block, and records that lie about a weight).
TEST_F(HostileContext, WeightsHashedBesideTheBuildAreVerifiedBeforeTheSessionExistsAndTheirVerdictComesFirst) {
  aot::ContextBinaryContents c = Contents(*bin_);
  const size_t big = 12u << 20;
  std::string filler(big, '\0');
  for (size_t i = 0; i < big; ++i) filler[i] = static_cast<char>(i * 131 + (i >> 12));
  c.tensors.push_back({"filler", filler, 2, {big}, 0});  // no graph uses it; it is verified all the same
  const std::string good = Write(c);
  ExpectLoadsAndRuns(good);
  auto damaged = [&](std::string f) {  // one bit flipped near the end of the filler tensor
    aot::ContextBinaryReader r;
    EXPECT_TRUE(r.Open(f.data(), f.size()).ok);
    const size_t at = static_cast<size_t>(r.tensors().back().data - reinterpret_cast<const unsigned char*>(f.data())) + big - 10;
    f[at] = static_cast<char>(f[at] ^ 0x20);
    return f;
  };
  const std::string mismatch = "tensor " + std::to_string(c.tensors.size() - 1) + " [length " + std::to_string(big) +
                               "] content hash mismatch";
  ExpectError(LoadWith(damaged(good)), ErrorCode::INVALID_GRAPH, {kLoadError, "m_ctx_aotcpu.bin", mismatch});
  aot::ContextBinaryContents other_build = c;
  other_build.compat.onednn_version = "9.9.9";
  ExpectError(LoadWith(damaged(Write(other_build))), ErrorCode::INVALID_GRAPH, {kLoadError, "m_ctx_aotcpu.bin", mismatch});
  aot::ContextBinaryContents lying = c;
  lying.graphs[0].tensor_names.pop_back();  // its program then uses more weights than the graph lists
  ExpectError(LoadWith(damaged(Write(lying))), ErrorCode::INVALID_GRAPH, {kLoadError, "m_ctx_aotcpu.bin", mismatch});
  // Without the damage these are the errors they are.
  ExpectError(LoadWith(Write(other_build)), ErrorCode::INVALID_GRAPH, {"compiled with oneDNN 9.9.9"});
  ExpectError(LoadWith(Write(lying)), ErrorCode::INVALID_GRAPH, {"weights but its graph lists"});
}

TEST_F(HostileContext, ProgramRecordsThatPassTheValidatorButLieAreRefusedNamingTheGraph) {
  const aot::ContextBinaryContents base = Contents(*bin_);
  ASSERT_EQ(base.graphs.size(), 1u);
  const std::string graph = base.graphs[0].name;
  aot::Program p;
  ASSERT_TRUE(aot::ParseProgram(base.graphs[0].records, static_cast<uint32_t>(base.graphs[0].tensor_names.size()), &p).ok);

  auto with_records = [&](const std::string& records) {
    aot::ContextBinaryContents c = base;
    c.graphs[0].records = records;
    return LoadWith(Write(c));
  };
  const std::string& rec = base.graphs[0].records;
  ExpectError(with_records(rec.substr(0, rec.size() / 2)), ErrorCode::INVALID_GRAPH,
              {kLoadError, "graph '" + graph + "'", "truncated"});
  ExpectError(with_records("garbage"), ErrorCode::INVALID_GRAPH, {"graph records do not start with the program magic"});
  std::string newer = rec;  // a program version from a later build
  newer[8] = static_cast<char>(aot::kProgramVersion + 1);
  ExpectError(with_records(newer), ErrorCode::INVALID_GRAPH,
              {"program version " + std::to_string(aot::kProgramVersion + 1) + " is not supported (this build reads 1 to " +
               std::to_string(aot::kProgramVersion) + ")"});
  {  // the arena is too small for the steps that use it
    aot::Program q = p;
    q.arena_bytes = 0;
    bool uses_arena = false;
    for (const auto& s : q.steps)
      for (const auto& o : s.ops) uses_arena |= o.buf == aot::Buf::kArena;
    if (uses_arena)
      ExpectError(with_records(aot::SerializeProgram(q)), ErrorCode::INVALID_GRAPH, {"graph '" + graph + "'", "arena"});
  }
  {  // a weight operand claims more bytes than its tensor holds
    aot::Program q = p;
    bool edited = false;
    for (auto& s : q.steps)
      for (auto& o : s.ops)
        if (!edited && o.buf == aot::Buf::kWeight && !o.dims.empty()) {
          o.dims[0] *= 1000;
          edited = true;
        }
    ASSERT_TRUE(edited);
    ExpectError(with_records(aot::SerializeProgram(q)), ErrorCode::INVALID_GRAPH, {"graph '" + graph + "'", "step"});
  }
  {  // the program's input has another shape than the node's: loads (the EP checks shapes per run), then every
     // Run is refused naming both shapes rather than reading past the fed tensor
    aot::Program q = p;
    ASSERT_FALSE(q.inputs.empty());
    q.inputs[0].dims = {int64_t{1} << 40, 4};
    aot::ContextBinaryContents c = base;
    c.graphs[0].records = aot::SerializeProgram(q);
    WriteFile(dir_ / "m_ctx.onnx", Serialize(*ctx_));
    WriteFile(dir_ / "m_ctx_aotcpu.bin", Hostile(Write(c)));
    Session s(*env_, (dir_ / "m_ctx.onnx").c_str(), Aot());
    ExpectError(Catch([&] { RunOne(s); }), ErrorCode::INVALID_ARGUMENT,
                {"input 'X' has shape [2,4] but the graph was compiled for [1099511627776,4]"});
  }
  {  // weight count against the graph's tensor list
    aot::ContextBinaryContents c = base;
    c.graphs[0].tensor_names.pop_back();
    ExpectError(LoadWith(Write(c)), ErrorCode::INVALID_GRAPH, {"graph '" + graph + "'", "weights but its graph lists"});
  }
}

TEST_F(HostileContext, PayloadOfAnotherEpIsRefusedByTheEpThatClaimsTheNode) {
  // AotCpu node naming the example EP's binary.
  ExpectError(LoadWith(*example_bin_), ErrorCode::INVALID_GRAPH, {kLoadError, "m_ctx_aotcpu.bin"});
  // Embedded: the example EP's bytes (and the empty string, and a text) as AotCpu's payload.
  for (const std::string& payload : {*example_bin_, std::string(), std::string("not a binary")}) {
    const Exception e = LoadWith(*bin_, [&](onnx::NodeProto* n) {
      SetInt(n, "embed_mode", 1);
      SetAttr(n, "ep_cache_context", Hostile(payload));
    });
    ExpectError(e, ErrorCode::INVALID_GRAPH, {kLoadError, "node '" + ContextNodes(*ctx_)[0]->name() + "'"});
  }
  // An example EP node (source example) holding AotCpu's binary, loaded with the example EP.
  onnx::ModelProto m = *ctx_;
  SetAttr(ContextNodes(&m)[0], "source", kExample);
  WriteFile(dir_ / "m_ctx.onnx", Serialize(m));
  WriteFile(dir_ / "m_ctx_aotcpu.bin", Hostile(*bin_));
  const Exception e = LoadFails(*env_, dir_ / "m_ctx.onnx", testing::WithExample(*env_));
  ExpectError(e, ErrorCode::INVALID_GRAPH, {kLoadError, "m_ctx_aotcpu.bin"});
}

TEST_F(HostileContext, AttributesOfTheWrongTypeOrOutOfRange) {
  const std::string node = ContextNodes(*ctx_)[0]->name();
  ExpectError(LoadWith(*bin_, [](onnx::NodeProto* n) { SetInt(n, "ep_cache_context", 5); }), ErrorCode::INVALID_GRAPH,
              {"ep_cache_context"});
  ExpectError(LoadWith(*bin_, [](onnx::NodeProto* n) { SetAttr(n, "embed_mode", "zero"); }), ErrorCode::INVALID_GRAPH,
              {"embed_mode"});
  ExpectError(LoadWith(*bin_, [](onnx::NodeProto* n) { SetInt(n, "main_context", 7); }), ErrorCode::INVALID_GRAPH,
              {"main_context"});
  ExpectError(LoadWith(*bin_,
                       [](onnx::NodeProto* n) {
                         SetInt(n, "embed_mode", 1);
                         for (int i = 0; i < n->attribute_size(); ++i)
                           if (n->attribute(i).name() == "ep_cache_context") n->mutable_attribute()->DeleteSubrange(i, 1);
                       }),
              ErrorCode::INVALID_GRAPH, {"node '" + node + "' (embed_mode=1) has no ep_cache_context"});
}

TEST_F(HostileContext, PathsOutsideTheModelFolderAreRefusedByAotCpuToo) {
  mkdir((dir_ / "inner").c_str(), 0755);
  WriteFile(dir_ / "outside.bin", *bin_);
  ASSERT_EQ(symlink("../outside.bin", (dir_ / "inner/escape.bin").c_str()), 0);
  // The ctx model lives in inner/; the binary is beside it, one folder up, and through an escaping symlink.
  auto load = [&](const std::string& cache) {
    onnx::ModelProto m = *ctx_;
    SetAttr(ContextNodes(&m)[0], "ep_cache_context", cache);
    WriteFile(dir_ / "inner/m_ctx.onnx", Hostile(Serialize(m)));
    return LoadFails(*env_, dir_ / "inner/m_ctx.onnx", Aot());
  };
  ExpectError(load("../outside.bin"), ErrorCode::INVALID_GRAPH, {kLoadError, "'..' component"});
  ExpectError(load(dir_ / "outside.bin"), ErrorCode::INVALID_GRAPH, {kLoadError, "is an absolute path"});
  ExpectError(load("escape.bin"), ErrorCode::INVALID_GRAPH, {kLoadError, "outside the model's folder"});
  ExpectError(load("missing.bin"), ErrorCode::INVALID_GRAPH, {kLoadError, "does not exist"});
  ExpectError(load(""), ErrorCode::INVALID_GRAPH, {kLoadError, "empty"});
}

}  // namespace
}  // namespace epctx
