// A consumer built with pkg-config alone (tests/install/install_test.sh):
//   g++ pc_app.cc $(pkg-config --cflags --libs epctx) -o pc_app && ./pc_app MODEL.onnx
// Runs tests/install/make_model.py's model on the installed AotCpuExecutionProvider, which the Env registered by
// itself, and checks Y. Prints "pc app: OK" and exits 0, else prints the failure and exits 1.
#include <epctx/epctx.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.onnx\n", argv[0]);
    return 2;
  }
  try {
    epctx::Env env;
    std::vector<epctx::ConstEpDevice> aot;
    for (const auto& d : env.GetEpDevices())
      if (std::string(d.EpName()) == "AotCpuExecutionProvider") aot.push_back(d);
    if (aot.size() != 1) {
      std::fprintf(stderr, "pc app: FAILED: %zu AotCpuExecutionProvider devices, expected 1\n", aot.size());
      return 1;
    }
    epctx::SessionOptions so;
    so.AppendExecutionProvider_V2(env, aot, epctx::KeyValuePairs());
    epctx::Session session(env, argv[1], so);
    std::vector<float> x = {1.0f, 2.0f, 0.5f, -3.0f, 0.25f, 1.5f};
    const int64_t shape[] = {2, 3};
    std::vector<epctx::Value> inputs;
    inputs.push_back(epctx::Value::CreateTensor<float>(x.data(), x.size(), shape, 2));
    std::vector<epctx::Value> y = session.Run({"X"}, inputs, {"Y"});
    const float* got = y.at(0).GetTensorData<float>();
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < 4; ++j) {
        float s = j / 2.0f - 1.0f;
        for (int i = 0; i < 3; ++i) s += x[r * 3 + i] * ((4 * i + j - 5) / 4.0f);
        float want = s > 0 ? s : 0;
        if (std::fabs(got[r * 4 + j] - want) > 1e-5f + 1e-5f * std::fabs(want)) {
          std::fprintf(stderr, "pc app: FAILED: Y[%d] = %g, expected %g\n", r * 4 + j, got[r * 4 + j], want);
          return 1;
        }
      }
  } catch (const epctx::Exception& e) {
    std::fprintf(stderr, "pc app: FAILED: %s\n", e.what());
    return 1;
  }
  std::printf("pc app: OK\n");
  return 0;
}
