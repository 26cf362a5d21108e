// AotCpuExecutionProvider's Compute: a partition's executor run on the kernel context's tensors (a dynamic
// partition's executor bound and built for the input dims first), and the compute-info table the runtime holds.
#include "providers/aotcpu/plugin/ep.h"

#include <epctx/ep_api.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace epctx {
namespace aotcpu {
namespace {

// A dynamic partition: the executor for these input dims (bound and built on first use), then as below.
EpctxStatus* ComputeDynamic(Partition* part, EpctxKernelContext* kc) {
  const size_t given = g_api->KernelContext_GetInputCount(kc);
  const size_t n = part->input_map.size();
  std::vector<const void*> inputs(n);
  std::vector<std::vector<int64_t>> dims(n);
  std::vector<uint32_t> types(n);
  for (size_t i = 0; i < n; ++i) {
    const EpctxValue* v = nullptr;
    if (part->input_map[i] >= given) return Error(EPCTX_INVALID_ARGUMENT, "the fused node has too few inputs");
    AOT_RETURN_IF_ERROR(g_api->KernelContext_GetInput(kc, part->input_map[i], &v));
    dims[i].resize(g_api->Value_GetRank(v));
    if (!dims[i].empty()) AOT_RETURN_IF_ERROR(g_api->Value_GetShape(v, dims[i].data(), dims[i].size()));
    types[i] = static_cast<uint32_t>(g_api->Value_GetElementType(v));
    inputs[i] = g_api->Value_GetData(v);
  }
  bool invalid = false;
  const size_t outputs = g_api->KernelContext_GetOutputCount(kc);
  if (outputs != part->dynamic->outputs().size())
    return Error(EPCTX_INVALID_ARGUMENT, "the fused node's output count does not match its compiled graph");
  auto alloc = [&](size_t i, const std::vector<int64_t>& d, void** data) -> CheckResult {
    EpctxValue* v = nullptr;
    if (EpctxStatus* st = g_api->KernelContext_GetOutput(kc, i, d.data(), d.size(), &v)) {
      std::string msg = g_api->GetErrorMessage(st);
      g_api->ReleaseStatus(st);
      return CheckResult::Fail("output '" + part->dynamic->outputs()[i] + "': " + msg);
    }
    *data = g_api->Value_GetMutableData(v);
    return CheckResult::Ok();
  };
  CheckResult r = part->dynamic->Run(inputs, dims, types, alloc, &invalid);
  if (!r.ok) return Error(invalid ? EPCTX_INVALID_ARGUMENT : EPCTX_EP_FAIL, r.reason);
  return nullptr;
}

EpctxStatus* Compute(EpctxNodeComputeInfo* self, void*, EpctxKernelContext* kc) {
  Partition* part = reinterpret_cast<ComputeInfo*>(self)->part.get();
  return Guard([&]() -> EpctxStatus* {
    if (part->dynamic) return ComputeDynamic(part, kc);
    if (!part->exec) return g_api->CreateStatus(EPCTX_EP_FAIL, part->run_error.c_str());
    const Program& p = part->exec->program();
    const size_t given = g_api->KernelContext_GetInputCount(kc);
    if ((part->input_map.empty() ? given != p.inputs.size() : part->input_map.size() != p.inputs.size()) ||
        g_api->KernelContext_GetOutputCount(kc) != p.outputs.size())
      return Error(EPCTX_INVALID_ARGUMENT, "the fused node's input/output count does not match its compiled graph");
    std::vector<const void*> inputs(p.inputs.size());
    std::vector<void*> outputs(p.outputs.size());
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const EpctxValue* v = nullptr;
      const size_t index = part->input_map.empty() ? i : part->input_map[i];
      if (index >= given) return Error(EPCTX_INVALID_ARGUMENT, "the fused node has too few inputs");
      AOT_RETURN_IF_ERROR(g_api->KernelContext_GetInput(kc, index, &v));
      std::vector<int64_t> dims(g_api->Value_GetRank(v));
      if (!dims.empty()) AOT_RETURN_IF_ERROR(g_api->Value_GetShape(v, dims.data(), dims.size()));
      if (dims != p.inputs[i].dims || static_cast<uint32_t>(g_api->Value_GetElementType(v)) != p.inputs[i].dtype)
        return Error(EPCTX_INVALID_ARGUMENT, "input '" + p.inputs[i].name + "' has shape " + DimsText(dims) +
                                                 " but the graph was compiled for " + DimsText(p.inputs[i].dims) +
                                                 " (AotCpu compiles static shapes; recompile for new shapes)");
      inputs[i] = g_api->Value_GetData(v);
    }
    for (size_t i = 0; i < p.outputs.size(); ++i) {
      EpctxValue* v = nullptr;
      AOT_RETURN_IF_ERROR(g_api->KernelContext_GetOutput(kc, i, p.outputs[i].dims.data(), p.outputs[i].dims.size(), &v));
      outputs[i] = g_api->Value_GetMutableData(v);
    }
    CheckResult r = part->exec->Run(inputs, outputs);
    if (!r.ok) return Error(EPCTX_EP_FAIL, r.reason);
    return nullptr;
  });
}

EpctxStatus* CreateState(EpctxNodeComputeInfo*, EpctxNodeComputeContext*, void** state) {
  *state = nullptr;
  return nullptr;
}
void ReleaseState(EpctxNodeComputeInfo*, void*) {}

}  // namespace

ComputeInfo* MakeComputeInfo(std::shared_ptr<Partition> part) {
  auto* info = new ComputeInfo();
  std::memset(&info->base, 0, sizeof(info->base));
  info->base.version = EPCTX_EP_API_VERSION;
  info->base.CreateState = CreateState;
  info->base.Compute = Compute;
  info->base.ReleaseState = ReleaseState;
  info->part = std::move(part);
  return info;
}

}  // namespace aotcpu
}  // namespace epctx
