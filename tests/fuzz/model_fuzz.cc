// libFuzzer target: ONNX model loading. The input is a serialized ModelProto; it becomes a session on the CPU EP
// (parse, version checks, checker, shape inference, conversion, external data, execution plan) and, when creation
// succeeds and the inputs are small, one Run on zero-valued inputs.
//
// Contract checked: creation and Run either succeed or return a Status with a message; never a crash, a sanitizer
// report or an exception. External data locations resolve against a folder made for the process holding
// `weights.bin` (4 KiB), a subfolder, and `escape.bin`, a symlink to `outside_secret.bin` beside that folder: a
// session that loads must not have that file mapped (the resolver refuses it; see src/model/external_data.h).
//
// Seeds: tests/fuzz/corpus/model (tiny models written by make_fuzz_seeds) plus ONNX's node test models, which
// scripts/fuzz.sh copies from libonnx-testdata.
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "session/session.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

std::string* g_data_folder = nullptr;

// Largest known element count of any value the model declares after shape inference for which Run is attempted.
// A fuzzed shape constant can ask a kernel for gigabytes; that is a legitimate (if silly) model, not a parser
// bug, so such models are only loaded.
constexpr int64_t kMaxValueElements = int64_t{1} << 22;

bool ShapesSmall(const onnx::GraphProto& g) {
  auto small = [](const onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return true;
    int64_t n = 1;
    for (const auto& d : vi.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value()) continue;
      if (d.dim_value() < 0 || d.dim_value() > kMaxValueElements) return false;
      n *= std::max<int64_t>(d.dim_value(), 1);
      if (n > kMaxValueElements) return false;
    }
    return true;
  };
  for (const auto& vi : g.value_info())
    if (!small(vi)) return false;
  for (const auto& vi : g.output())
    if (!small(vi)) return false;
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g() && !ShapesSmall(a.g())) return false;
      for (const auto& sub : a.graphs())
        if (!ShapesSmall(sub)) return false;
    }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace epctx::fuzz;
  const std::string root = MakeTempDir("model");
  g_data_folder = new std::string(root + "/model");
  mkdir(g_data_folder->c_str(), 0755);
  mkdir((*g_data_folder + "/sub").c_str(), 0755);
  std::vector<float> weights(1024);
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<float>(i % 17) - 8.f;
  WriteBytes(*g_data_folder + "/weights.bin", weights.data(), weights.size() * sizeof(float));
  WriteBytes(*g_data_folder + "/sub/weights.bin", weights.data(), weights.size() * sizeof(float));
  WriteBytes(root + "/outside_secret.bin", weights.data(), weights.size() * sizeof(float));
  if (symlink("../outside_secret.bin", (*g_data_folder + "/escape.bin").c_str()) != 0) Die("symlink failed");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace epctx;
  SessionConfig config;
  config.intra_op_num_threads = 1;
  config.entries["session.model_external_initializers_file_folder_path"] = *g_data_folder;
  auto session = InferenceSession::CreateFromBytes(data, size, config);
  if (!session.ok()) {
    fuzz::CheckRefusal(session.status(), "session creation");
    return 0;
  }
  InferenceSession& s = **session;
  if (fuzz::FileMapped("outside_secret.bin")) fuzz::Die("a session mapped a file outside the model's folder");
  if (!ShapesSmall(s.model().proto->graph())) return 0;
  std::vector<std::string> names;
  std::vector<IValue> feeds;
  if (!fuzz::ZeroFeeds(s.inputs(), &names, &feeds)) return 0;
  std::vector<IValue> outputs;
  Status st = s.Run(names, feeds, {}, &outputs);
  if (!st.ok()) fuzz::CheckRefusal(st, "Run");
  else fuzz::NoteSuccess("Run");
  return 0;
}
