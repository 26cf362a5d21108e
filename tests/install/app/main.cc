// An application built against an installed epctx (find_package(epctx), epctx::epctx), run by
// tests/install/install_test.sh:
//   epctx_install_app MODEL.onnx OUT_DIR MINIMAL_EP.so
// MODEL is tests/install/make_model.py's Y = Relu(X @ W + B). The app checks that the Env registered the installed
// plugin EPs by itself, compiles MODEL with AotCpuExecutionProvider into OUT_DIR/model_ctx.onnx, runs the context
// model and compares Y with the values computed here, then loads MINIMAL_EP.so (a plugin built against
// epctx::ep_api) and runs MODEL with it. Prints "install app: OK" and exits 0 when everything holds; otherwise
// prints what failed and exits 1.
#include <epctx/epctx.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

int failures = 0;

void Check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "install app: FAILED: %s\n", what.c_str());
    ++failures;
  }
}

bool FileExists(const std::string& path) { return std::ifstream(path).good(); }

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::vector<epctx::ConstEpDevice> DevicesOf(const epctx::Env& env, const std::string& ep_name) {
  std::vector<epctx::ConstEpDevice> out;
  for (const auto& d : env.GetEpDevices())
    if (ep_name == d.EpName()) out.push_back(d);
  return out;
}

// make_model.py's constants and X.
const std::vector<float> kX = {1.0f, 2.0f, 0.5f, -3.0f, 0.25f, 1.5f};
std::vector<float> Expected() {
  std::vector<float> y(8);
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 4; ++j) {
      float s = j / 2.0f - 1.0f;
      for (int i = 0; i < 3; ++i) s += kX[r * 3 + i] * ((4 * i + j - 5) / 4.0f);
      y[r * 4 + j] = s > 0 ? s : 0;
    }
  return y;
}

// Runs `session` on kX and compares Y with Expected().
void RunAndCompare(const epctx::Session& session, const std::string& label) {
  std::vector<float> x = kX;
  const int64_t shape[] = {2, 3};
  std::vector<epctx::Value> inputs;
  inputs.push_back(epctx::Value::CreateTensor<float>(x.data(), x.size(), shape, 2));
  std::vector<epctx::Value> outputs = session.Run({"X"}, inputs, {"Y"});
  Check(outputs.size() == 1, label + ": one output");
  if (outputs.size() != 1) return;
  auto info = outputs[0].GetTensorTypeAndShapeInfo();
  Check(info.GetShape() == std::vector<int64_t>({2, 4}), label + ": Y has shape [2, 4]");
  if (info.GetElementCount() != 8) return;
  const float* y = outputs[0].GetTensorData<float>();
  std::vector<float> want = Expected();
  for (int i = 0; i < 8; ++i)
    Check(std::fabs(y[i] - want[i]) <= 1e-5f + 1e-5f * std::fabs(want[i]),
          label + ": Y[" + std::to_string(i) + "] = " + std::to_string(y[i]) + ", expected " +
              std::to_string(want[i]));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL.onnx OUT_DIR MINIMAL_EP.so\n", argv[0]);
    return 2;
  }
  const std::string model = argv[1], out_dir = argv[2], minimal = argv[3];
  const std::string plugin_dir = EPCTX_PLUGIN_DIR;
  try {
    epctx::Env env;

    // 1. The installed plugins are registered with no path given.
    std::vector<epctx::ConstEpDevice> aot = DevicesOf(env, "AotCpuExecutionProvider");
    Check(aot.size() == 1, "GetEpDevices lists AotCpuExecutionProvider once (found " + std::to_string(aot.size()) + ")");
    Check(DevicesOf(env, "ExampleExecutionProvider").size() == 1, "GetEpDevices lists ExampleExecutionProvider");
    if (aot.empty()) return 1;

    // Registering the discovered library again (same name, same file) is a no-op; another file under that name
    // keeps ONNX Runtime's duplicate-name error.
    const std::string aot_lib = plugin_dir + "/libepctx_aotcpu.so";
    Check(FileExists(aot_lib), aot_lib + " exists");
    env.RegisterExecutionProviderLibrary("aotcpu", aot_lib.c_str());
    Check(DevicesOf(env, "AotCpuExecutionProvider").size() == 1, "re-registering aotcpu adds no device");
    try {
      env.RegisterExecutionProviderLibrary("aotcpu", (plugin_dir + "/libepctx_example.so").c_str());
      Check(false, "registering another file under 'aotcpu' must fail");
    } catch (const epctx::Exception& e) {
      Check(e.code() == epctx::ErrorCode::FAIL && std::string(e.what()) == "library is already registered under aotcpu",
            std::string("duplicate name error, got: ") + e.what());
    }

    // 2. Compile with AotCpu (compile API) into a _ctx.onnx with its context binary beside it.
    const std::string ctx = out_dir + "/model_ctx.onnx";
    {
      epctx::SessionOptions so;
      so.AppendExecutionProvider_V2(env, aot, epctx::KeyValuePairs());
      epctx::ModelCompilationOptions options(env, so);
      options.SetInputModelPath(model.c_str()).SetOutputModelPath(ctx.c_str());
      options.SetFlags(epctx::OrtCompileApiFlags_ERROR_IF_NO_NODES_COMPILED);
      epctx::Status status = epctx::CompileModel(env, options);
      Check(status.IsOK(), "CompileModel: " + status.GetErrorMessage());
      if (!status.IsOK()) return 1;
    }
    Check(FileExists(out_dir + "/model_ctx_aotcpu.bin"), "model_ctx_aotcpu.bin written beside the ctx model");
    Check(ReadFile(ctx).find("EPContext") != std::string::npos, "model_ctx.onnx holds an EPContext node");

    // 3. Load the context model on AotCpu and run it.
    {
      epctx::SessionOptions so;
      so.AppendExecutionProvider_V2(env, aot, epctx::KeyValuePairs());
      epctx::Session session(env, ctx.c_str(), so);
      bool on_aotcpu = false;
      for (const auto& [node, ep] : session.GetPartitionAssignments()) on_aotcpu |= ep == "AotCpuExecutionProvider";
      Check(on_aotcpu, "the ctx model runs a partition on AotCpuExecutionProvider");
      RunAndCompare(session, "AotCpu ctx model");
    }

    // 4. A plugin built against the installed epctx::ep_api, registered by path.
    env.RegisterExecutionProviderLibrary("minimal", minimal.c_str());
    std::vector<epctx::ConstEpDevice> min = DevicesOf(env, "MinimalExecutionProvider");
    Check(min.size() == 1, "GetEpDevices lists MinimalExecutionProvider after registration");
    if (!min.empty()) {
      epctx::SessionOptions so;
      so.AppendExecutionProvider_V2(env, min, epctx::KeyValuePairs());
      epctx::Session session(env, model.c_str(), so);
      bool on_minimal = false;
      for (const auto& [node, ep] : session.GetPartitionAssignments()) on_minimal |= ep == "MinimalExecutionProvider";
      Check(on_minimal, "the Relu runs on MinimalExecutionProvider");
      RunAndCompare(session, "MinimalExecutionProvider");
    }
  } catch (const epctx::Exception& e) {
    std::fprintf(stderr, "install app: FAILED: epctx::Exception %d: %s\n", static_cast<int>(e.code()), e.what());
    return 1;
  }
  if (failures) return 1;
  std::printf("install app: OK\n");
  return 0;
}
