// AotCpuExecutionProvider: the compiling CPU EP. GetCapability claims static-shaped groups of the ops the compiler
// handles (compiler.h); Compile turns each group into a Program with pre-packed weights, serializes every group of
// the call into one context binary (context_binary.h) and then — JIT or not — builds the executors from that
// binary, exactly as a session loading a _ctx.onnx does. Written only against ep_api.h; no exception crosses it.
//
// This file: the helpers ep.h declares, the EP's table, the factory (devices, incl. virtual ISA levels) and the
// exported entry points. GetCapability is in ep_capability.cc, Compile in ep_compile.cc (JIT + EPContext
// generation), EPContext loading in ep_load.cc, Compute in ep_compute.cc.
#include "providers/aotcpu/plugin/ep.h"

#include <epctx/ep_api.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "common/context_util.h"
#include "providers/aotcpu/binary/isa.h"
#include "providers/aotcpu/binary/share.h"
#include "providers/aotcpu/plugin/options.h"

namespace epctx {
namespace aotcpu {

const EpctxApi* g_api = nullptr;

// ---- helpers (ep.h) ----

EpctxStatus* Error(EpctxErrorCode code, const std::string& message) {
  return g_api->CreateStatus(code, (std::string(kEpName) + ": " + message).c_str());
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}


void LogWarning(const AotCpuEp* ep, const std::string& message) {
  g_api->Log(ep->logger, EPCTX_LOG_WARNING, __FILE__, __LINE__, (std::string(kEpName) + ": " + message).c_str());
}

AotCpuEp* Self(EpctxEp* ep) { return reinterpret_cast<AotCpuEp*>(ep); }

namespace {

// ---- the EP ----

const char* EpGetName(const EpctxEp*) { return kEpName; }

EpctxStatus* EpGetCapability(EpctxEp* self, const EpctxGraph* graph, EpctxEpGraphSupportInfo* support) {
  return Guard([&] { return GetCapabilityImpl(Self(self), graph, support); });
}

EpctxStatus* EpCompile(EpctxEp* self, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                       EpctxNodeComputeInfo** infos, EpctxNode** ep_context_nodes) {
  return Guard([&] { return CompileImpl(Self(self), graphs, fused_nodes, count, infos, ep_context_nodes); });
}

void EpReleaseNodeComputeInfos(EpctxEp*, EpctxNodeComputeInfo** infos, size_t count) {
  for (size_t i = 0; i < count; ++i) delete reinterpret_cast<ComputeInfo*>(infos[i]);
}

// ---- the factory ----

const char* FactoryGetName(const EpctxEpFactory*) { return kEpName; }
const char* FactoryGetVendor(const EpctxEpFactory*) { return kVendor; }
uint32_t FactoryGetVendorId(const EpctxEpFactory*) { return 0xE9C7; }
const char* FactoryGetVersion(const EpctxEpFactory*) { return kVersion; }

struct AotCpuFactory {
  EpctxEpFactory base;
  HostIsaInfo host;
  bool allow_virtual = false;  // registration name *.virtual or env allow_virtual_devices=1
};
AotCpuFactory* FactoryOf(EpctxEpFactory* f) { return reinterpret_cast<AotCpuFactory*>(f); }

// Pairs the factory with `device`; metadata: version, isa (and is_virtual for virtual devices).
EpctxStatus* PairDevice(EpctxEpFactory* f, const EpctxHardwareDevice* device, Isa isa, EpctxEpDevice** out) {
  EpctxKeyValuePairs* meta = nullptr;
  AOT_RETURN_IF_ERROR(g_api->KeyValuePairs_Create(&meta));
  g_api->KeyValuePairs_Add(meta, "version", kVersion);
  g_api->KeyValuePairs_Add(meta, "isa", IsaName(isa));
  g_api->KeyValuePairs_Add(meta, "compatibility", CompatibilityFor(isa).c_str());
  EpctxStatus* st = g_api->CreateEpDevice(f, device, meta, nullptr, out);
  g_api->KeyValuePairs_Release(meta);
  return st;
}

EpctxStatus* FactoryGetSupportedDevices(EpctxEpFactory* self, const EpctxHardwareDevice* const* devices, size_t n,
                                        EpctxEpDevice** out, size_t max, size_t* count) {
  AotCpuFactory* f = FactoryOf(self);
  std::vector<EpctxEpDevice*> made;
  std::vector<EpctxHardwareDevice*> virtuals;
  EpctxStatus* st = Guard([&]() -> EpctxStatus* {
    for (size_t i = 0; i < n && made.size() < max; ++i) {
      if (g_api->HardwareDevice_Type(devices[i]) != EPCTX_DEVICE_CPU) continue;
      made.push_back(nullptr);
      AOT_RETURN_IF_ERROR(PairDevice(self, devices[i], f->host.isa, &made.back()));
      if (!f->allow_virtual) continue;
      // One virtual CPU per ISA level below the host's, to compile for smaller machines.
      for (Isa isa : IsasBelow(f->host.isa)) {
        if (made.size() >= max) break;
        EpctxKeyValuePairs* meta = nullptr;
        AOT_RETURN_IF_ERROR(g_api->KeyValuePairs_Create(&meta));
        g_api->KeyValuePairs_Add(meta, "is_virtual", "1");
        g_api->KeyValuePairs_Add(meta, "isa", IsaName(isa));
        EpctxHardwareDevice* hw = nullptr;
        EpctxStatus* s2 = g_api->CreateHardwareDevice(EPCTX_DEVICE_CPU, g_api->HardwareDevice_VendorId(devices[i]),
                                                      0, g_api->HardwareDevice_Vendor(devices[i]), meta, &hw);
        g_api->KeyValuePairs_Release(meta);
        AOT_RETURN_IF_ERROR(s2);
        virtuals.push_back(hw);
        made.push_back(nullptr);
        AOT_RETURN_IF_ERROR(PairDevice(self, hw, isa, &made.back()));
      }
    }
    return nullptr;
  });
  if (st) {
    for (EpctxEpDevice* d : made)
      if (d) g_api->ReleaseEpDevice(d);
    for (EpctxHardwareDevice* hw : virtuals) g_api->ReleaseHardwareDevice(hw);
    return st;
  }
  std::copy(made.begin(), made.end(), out);  // the runtime now owns these and the virtual devices
  *count = made.size();
  return nullptr;
}

EpctxStatus* FactoryCreateEp(EpctxEpFactory* self, const EpctxHardwareDevice* const* devices,
                             const EpctxKeyValuePairs* const*, size_t num_devices, const EpctxSessionOptions* options,
                             const EpctxLogger* logger, EpctxEp** out) {
  AotCpuFactory* f = FactoryOf(self);
  return Guard([&]() -> EpctxStatus* {
    AotCpuOptions requested;
    OptionsError err;
    if (!ReadOptions(SessionConfigGetter(g_api, options), &requested, &err)) return Error(err.code, err.message);
    PrepareAndLoadResult checked = CheckPrepareAndLoad(requested);
    if (!checked.ok) return Error(checked.error.code, checked.error.message);
    if (checked.effective.share_ep_contexts && checked.effective.context_enable && checked.effective.embed_mode == 1)
      return Error(EPCTX_INVALID_ARGUMENT,
                   "ep.share_ep_contexts=1 cannot work with ep.context_embed_mode=1: the sessions of a group share one "
                   "context binary file, which an embedded payload cannot be. Set ep.context_embed_mode=0.");
    // Target ISA: a virtual device's, else ep.aotcpuexecutionprovider.target_isa, else the host's.
    Isa target = f->host.isa;
    for (size_t i = 0; i < num_devices; ++i) {
      const char* virt = g_api->KeyValuePairs_Get(g_api->HardwareDevice_Metadata(devices[i]), "is_virtual");
      const char* isa = g_api->KeyValuePairs_Get(g_api->HardwareDevice_Metadata(devices[i]), "isa");
      if (virt && std::strcmp(virt, "1") == 0 && isa) ParseIsa(isa, &target);
    }
    if (!checked.effective.target_isa.empty() && !ResolveTargetIsa(checked.effective, f->host.isa, &target, &err))
      return Error(err.code, err.message);
    auto e = std::make_unique<AotCpuEp>();
    std::memset(&e->base, 0, sizeof(e->base));
    e->base.version = EPCTX_EP_API_VERSION;
    e->base.GetName = EpGetName;
    e->base.GetCapability = EpGetCapability;
    e->base.Compile = EpCompile;
    e->base.ReleaseNodeComputeInfos = EpReleaseNodeComputeInfos;
    e->base.GetCompiledModelCompatibilityInfo = [](EpctxEp* ep, const EpctxGraph*) -> const char* {
      return Self(ep)->compat.c_str();
    };
    e->base.OnSessionInitializationEnd = [](EpctxEp* ep) -> EpctxStatus* {
      AotCpuEp* self = Self(ep);
      self->initialized = true;
      if (self->group_member) {
        if (self->options.stop_share_ep_contexts) GenerationGroup::Instance().Clear();  // the binary is written
        else GenerationGroup::Instance().Commit(self->session_id);
      }
      return nullptr;
    };
    static std::atomic<uint64_t> next_session{1};
    e->session_id = next_session.fetch_add(1);
    e->logger = logger;
    for (const std::string& w : checked.warnings) LogWarning(e.get(), w);
    e->options = checked.effective;
    e->context.enable = e->options.context_enable;
    e->context.embed = e->options.embed_mode == 1;
    e->context.file_path = e->options.context_file_path;
    e->context.prefix = e->options.node_name_prefix;
    e->threads = e->options.intra_op_num_threads;
    e->host_isa = IsaName(f->host.isa);
    e->host_emulated = f->host.emulated;
    e->isa = IsaName(target);
    e->portable = IsaRank(target) < IsaRank(f->host.isa);
    e->compat = CompatibilityFor(target);
    e->progress = isatty(2) != 0;
    *out = &e.release()->base;
    return nullptr;
  });
}

void FactoryReleaseEp(EpctxEpFactory*, EpctxEp* ep) {
  AotCpuEp* e = Self(ep);
  if (e->group_member && !e->initialized) {
    // This session failed after joining a weight-sharing group: the group is aborted, so that no context model
    // references a binary that will never hold its graphs; the next sharing session starts a new group.
    GenerationGroup::Instance().Clear();
    if (!e->written_binary.empty()) unlink(e->written_binary.c_str());
  }
  delete e;
}

EpctxStatus* FactoryValidateCompatibility(EpctxEpFactory* self, const EpctxHardwareDevice* const*, size_t,
                                          const char* info, EpctxCompiledModelCompatibility* out) {
  *out = JudgeCompatibility(info ? info : "", FactoryOf(self)->host.isa);
  return nullptr;
}

}  // namespace
}  // namespace aotcpu
}  // namespace epctx

using epctx::aotcpu::AotCpuFactory;

extern "C" {

EPCTX_EP_EXPORT EpctxStatus* CreateEpFactories(const char* registration_name, const EpctxApiBase* api_base,
                                               const EpctxLogger*, EpctxEpFactory** factories, size_t max_factories,
                                               size_t* num_factories) {
  namespace a = epctx::aotcpu;
  const EpctxApi* api = api_base ? api_base->GetApi(EPCTX_EP_API_VERSION) : nullptr;
  if (!api) {  // a runtime older than this plugin: no table to create a status with, so offer no factory
    *num_factories = 0;
    return nullptr;
  }
  a::g_api = api;
  if (max_factories < 1) return api->CreateStatus(EPCTX_INVALID_ARGUMENT, "no room for a factory");
  // The host ISA first: EPCTX_AOTCPU_HOST_ISA (an emulated smaller machine) must reach oneDNN before its first use.
  a::HostIsaInfo host;
  std::string why;
  if (!a::HostIsa(&host, &why))
    return api->CreateStatus(EPCTX_INVALID_ARGUMENT, ("AotCpuExecutionProvider: " + why).c_str());
  auto* f = new (std::nothrow) AotCpuFactory();
  if (!f) return api->CreateStatus(EPCTX_FAIL, "AotCpuExecutionProvider: out of memory");
  std::memset(&f->base, 0, sizeof(f->base));
  f->host = host;
  const std::string name = registration_name ? registration_name : "";
  const EpctxKeyValuePairs* env = api->GetEnvConfigEntries();
  const char* allow = env ? api->KeyValuePairs_Get(env, "allow_virtual_devices") : nullptr;
  f->allow_virtual = (name.size() >= 8 && name.compare(name.size() - 8, 8, ".virtual") == 0) ||
                     (allow && std::strcmp(allow, "1") == 0);
  f->base.version = EPCTX_EP_API_VERSION;
  f->base.GetName = a::FactoryGetName;
  f->base.GetVendor = a::FactoryGetVendor;
  f->base.GetVendorId = a::FactoryGetVendorId;
  f->base.GetVersion = a::FactoryGetVersion;
  f->base.GetSupportedDevices = a::FactoryGetSupportedDevices;
  f->base.CreateEp = a::FactoryCreateEp;
  f->base.ReleaseEp = a::FactoryReleaseEp;
  f->base.ValidateCompiledModelCompatibilityInfo = a::FactoryValidateCompatibility;
  factories[0] = &f->base;
  *num_factories = 1;
  return nullptr;
}

EPCTX_EP_EXPORT EpctxStatus* ReleaseEpFactory(EpctxEpFactory* factory) {
  delete reinterpret_cast<AotCpuFactory*>(factory);
  return nullptr;
}

}  // extern "C"
