// Helpers for end-to-end tests: building small ONNX models in C++, temporary folders, exceptions, the example plugin
// EP (providers/example) and inspecting EPContext models.
#pragma once

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "epctx/epctx.h"

namespace epctx::testing {

// ---- files ----

// A fresh folder under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& bytes);
std::string ReadFile(const std::string& path);
bool Exists(const std::string& path);
// The names of the entries of `dir`.
std::set<std::string> FilesIn(const std::string& dir);

// ---- strings and exceptions ----

bool Contains(const std::string& s, const std::string& part);
bool StartsWith(const std::string& s, const std::string& prefix);

// Runs fn and returns the Exception it throws (fails the test if it throws nothing).
template <typename Fn>
Exception Catch(Fn fn) {
  try {
    fn();
  } catch (const Exception& e) {
    return e;
  }
  ADD_FAILURE() << "expected an epctx::Exception";
  return Exception(ErrorCode::OK, "");
}

// ---- models ----

// An empty model (IR 8, producer "epctx-tests", default domain at `opset`) whose graph is named `graph_name`.
onnx::ModelProto NewModel(const std::string& graph_name, int opset = 17);
// A model Y = Relu(X + W) with X float[N,4] (N a free dim "N"), W float[4] initializer = {1,-2,3,-4}.
onnx::ModelProto AddReluModel(int opset = 17);
// Sets W's data to live in external file `location` at `offset`.
void MakeWeightExternal(onnx::ModelProto* model, const std::string& location, int64_t offset);
std::string Serialize(const onnx::ModelProto& m);
onnx::ModelProto LoadProto(const std::string& path);

// A tensor value `name` of element type `elem` and fixed `dims` ({} = a scalar).
void AddTensorValueInfo(onnx::ValueInfoProto* vi, const std::string& name, const std::vector<int64_t>& dims,
                        int elem = onnx::TensorProto::FLOAT);
// A float[N,4] value (N a free dim "N").
onnx::ValueInfoProto FloatNx4(const std::string& name);
onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, const std::string& name,
                         const std::vector<std::string>& inputs, const std::string& output);
// A float[values.size()] initializer.
void AddWeight(onnx::GraphProto* g, const std::string& name, const std::vector<float>& values);

// ---- running float[2,4] models ----

// The float[2,4] input fed by InputTensor / RunOne.
extern const std::vector<float> kInput;
// A float[2,4] tensor of kInput, borrowing `storage`.
Value InputTensor(std::vector<float>* storage);
// The data of a float[2,4] tensor (its shape is checked).
std::vector<float> ToVector(const Value& v);
// Runs `s` on kInput as `input` and returns `output`.
std::vector<float> RunOne(const Session& s, const std::string& input = "X", const std::string& output = "Y");
// The model's (first) output on its first input on the CPU EP alone.
std::vector<float> CpuReference(const onnx::ModelProto& m);

// ---- the example plugin EP ----

inline constexpr const char* kExampleLib = EPCTX_BINARY_DIR "/lib/libepctx_example.so";
inline constexpr const char* kExample = "ExampleExecutionProvider";

// The devices of one EP, in the Env's order.
std::vector<ConstEpDevice> DevicesOf(const Env& env, const std::string& ep, bool include_virtual = true);
// Session options with the example EP appended on its (real) devices with `ep_options`, one intra-op thread, and
// `config` as session config entries.
SessionOptions WithExample(const Env& env, const KeyValuePairs& ep_options = {},
                           const std::map<std::string, std::string>& config = {});

inline constexpr const char* kAotCpuLib = EPCTX_BINARY_DIR "/lib/libepctx_aotcpu.so";
inline constexpr const char* kAotCpu = "AotCpuExecutionProvider";

// A test suite whose tests make sessions with AotCpu: one Env per suite with the plugin registered.
class AotCpuSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  // `threads` intra-op threads, AotCpu appended on its real devices when `aot`, and `config` as config entries.
  static SessionOptions Options(int threads, bool aot = true, const std::map<std::string, std::string>& config = {});
  // The model at `path` on AotCpu with `threads` threads: a JIT session that must put every node in one partition,
  // then its _ctx.onnx written beside it (in `dir`) with embed mode 0 and 1 and loaded with model compilation
  // disabled; `check(session, what)` runs on each of the three sessions.
  static void CheckJitAndFromContext(const std::string& path, const TempDir& dir, int threads,
                                     const std::function<void(Session&, const std::string&)>& check);
  static Env* env_;
};

// ---- EPContext models ----

std::vector<const onnx::NodeProto*> ContextNodes(const onnx::ModelProto& m);
std::vector<onnx::NodeProto*> ContextNodes(onnx::ModelProto* m);
const onnx::AttributeProto* FindAttr(const onnx::NodeProto& n, const std::string& name);
// The string attribute `name` of `n` (fails the test if `n` lacks it).
std::string StrAttr(const onnx::NodeProto& n, const std::string& name);

// ---- If models ----

// Runs a model with inputs cond (bool scalar) and X (float [4] = {0.5, 1, -5, 2}) and returns its output Y ([4]):
// the If models of the subgraph tests.
std::vector<float> RunIf(const Session& s, bool cond_value);

}  // namespace epctx::testing
