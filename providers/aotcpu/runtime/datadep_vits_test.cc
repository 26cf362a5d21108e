// The Piper VITS voice (docs/zoo.md) as one dynamic graph (issue 27 item 3): every node, the duration predictor's
// NonZero/GatherND/ScatterND splines, the durations' CumSum and alignment path and the HiFi-GAN decoder over a length
// known only at run time, run by DynamicGraph directly from the model (the plugin's capability does not yet hand such a
// graph over), against the zoo's reference outputs (ORT 1.30, scales [0, 1, 0]). Skipped without the zoo's files.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include "model/model.h"
#include "model/tensor_proto.h"
#include "plugin/ep_objects.h"
#include "providers/aotcpu/capability/capability.h"
#include "providers/aotcpu/runtime/dynamic.h"

namespace epctx {
namespace aotcpu {
namespace {

bool ReadPb(const std::string& path, Tensor* t) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  onnx::TensorProto p;
  if (!p.ParseFromIstream(&f)) return false;
  auto r = TensorFromProto(p, path, nullptr);
  if (!r.ok()) return false;
  *t = std::move(r.value());
  return true;
}

TEST(AotCpuGeneric, PiperVitsRunsAsOneDynamicGraph) {
  const std::string dir = EPCTX_BINARY_DIR "/zoo/cases/piper_vits";
  if (!std::ifstream(dir + "/model.onnx").good()) GTEST_SKIP() << "no " << dir << "/model.onnx";
  auto m = LoadModelFromFile(dir + "/model.onnx", ModelLoadOptions());
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::shared_ptr<Model> model = m.value();
  auto view = BuildGraphView(*model->graph, {}, dir + "/model.onnx", model->ir_version, model->graph->name, true);
  Graph g;
  CheckResult r = BuildGraph(GetEpctxApi(), view.get(), &g);
  ASSERT_TRUE(r.ok) << r.reason;
  std::vector<std::string> ins, outs;
  for (int v : g.inputs)
    if (!g.v(v).is_const()) ins.push_back(g.v(v).name);
  for (int v : g.outputs) outs.push_back(g.v(v).name);
  DynamicGraph::Options o;
  o.threads = 2;
  std::unique_ptr<DynamicGraph> d;
  r = DynamicGraph::Create(g, ins, outs, o, model, &d);
  ASSERT_TRUE(r.ok) << r.reason;
  ASSERT_TRUE(d->generic()) << d->why_not_generic();
  std::fprintf(stderr, "[vits] %s\n", d->GenericSummary().c_str());
  for (const char* set : {"test_data_set_0", "test_data_set_1", "test_data_set_0"}) {
    SCOPED_TRACE(set);
    std::vector<Tensor> in(ins.size());
    std::vector<const void*> ptrs;
    std::vector<std::vector<int64_t>> dims;
    std::vector<uint32_t> types;
    for (size_t i = 0; i < ins.size(); ++i) {
      ASSERT_TRUE(ReadPb(dir + "/" + set + "/input_" + std::to_string(i) + ".pb", &in[i]));
      ptrs.push_back(in[i].raw_data());
      dims.push_back(in[i].shape());
      types.push_back(g.v(g.Find(ins[i])).dtype);
    }
    Tensor want;
    ASSERT_TRUE(ReadPb(dir + "/" + set + "/output_0.pb", &want));
    std::vector<float> y;
    std::vector<int64_t> yd;
    bool invalid = false;
    const auto t0 = std::chrono::steady_clock::now();
    r = d->Run(ptrs, dims, types,
               [&](size_t, const std::vector<int64_t>& od, void** data) {
                 yd = od;
                 int64_t n = 1;
                 for (int64_t x : od) n *= x;
                 y.assign(static_cast<size_t>(n), NAN);
                 *data = y.data();
                 return CheckResult::Ok();
               },
               &invalid);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(r.ok) << r.reason;
    ASSERT_EQ(yd, want.shape());
    const float* w = static_cast<const float*>(want.raw_data());
    double worst = 0;
    for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(double(y[i]) - w[i]));
    std::fprintf(stderr, "[vits] %s: %zu samples, max |diff| %.3g, %.1f ms (%zu binds)\n", set, y.size(), worst, ms,
                 d->stats().binds);
    EXPECT_LE(worst, 1e-4);
  }
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx
