// Compile a model for AotCpu once, then every later start loads the _ctx.onnx (README "Install": built against an
// installed epctx with find_package(epctx) or pkg-config; tests/install runs it). Usage: compile_and_load MODEL.onnx
#include <epctx/epctx.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) try {
  if (argc != 2) return std::cerr << "usage: compile_and_load MODEL.onnx\n", 2;
  const std::string model = argv[1], ctx = model.substr(0, model.rfind('.')) + "_ctx.onnx";
  epctx::Env env;  // lists the installed plugin EPs (lib/epctx/) by itself
  epctx::SessionOptions so;
  for (const auto& d : env.GetEpDevices())
    if (std::string(d.EpName()) == "AotCpuExecutionProvider")
      so.AppendExecutionProvider_V2(env, {d}, epctx::KeyValuePairs{});
  if (!std::filesystem::exists(ctx)) {  // once: MODEL_ctx.onnx + MODEL_ctx_aotcpu.bin
    epctx::ModelCompilationOptions options(env, so);
    epctx::Status st = epctx::CompileModel(env, options.SetInputModelPath(model).SetOutputModelPath(ctx));
    if (!st.IsOK()) return std::cerr << st.GetErrorMessage() << "\n", 1;
  }
  epctx::Session session(env, ctx.c_str(), so);  // later starts: milliseconds, no compile
  std::vector<int64_t> shape = session.GetInputTypeInfo(0).GetTensorTypeAndShapeInfo().GetShape();
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // a float input of static shape, filled with ones
  std::vector<float> x(n, 1.0f);
  std::vector<epctx::Value> in;
  in.push_back(epctx::Value::CreateTensor<float>(x.data(), x.size(), shape.data(), shape.size()));
  std::vector<epctx::Value> out = session.Run({session.GetInputNames()[0]}, in);
  const float* y = out[0].GetTensorData<float>();
  double sum = 0;
  for (int64_t i = 0; i < out[0].GetTensorTypeAndShapeInfo().GetElementCount(); ++i) sum += y[i];
  std::cout << ctx << ": " << session.GetOutputNames()[0] << " sums to " << sum << "\n";
  return 0;
} catch (const epctx::Exception& e) {
  std::cerr << "compile_and_load: " << e.what() << "\n";
  return 1;
}
