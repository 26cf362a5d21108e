// AotCpuExecutionProvider: the compiling CPU EP (oneDNN, mmap-able context binaries). This first version is the
// plugin's shell: it registers, reports the CPU device with its ISA, and claims no node yet, so every model runs
// on the CPU EP unchanged. Compilation arrives with the AotCpu issue. Written only against ep_api.h.
#include <cstring>
#include <new>
#include <string>

#include "epctx/ep_api.h"

namespace {

const EpctxApi* g_api = nullptr;
constexpr const char* kEpName = "AotCpuExecutionProvider";
constexpr const char* kVendor = "epctx";
constexpr const char* kVersion = "0.1.0";

struct AotCpuEp {
  EpctxEp base;  // first member: the runtime sees &base
};

struct AotCpuFactory {
  EpctxEpFactory base;
};

const char* EpGetName(const EpctxEp*) { return kEpName; }

EpctxStatus* EpGetCapability(EpctxEp*, const EpctxGraph*, EpctxEpGraphSupportInfo*) {
  return nullptr;  // claims nothing yet
}

EpctxStatus* EpCompile(EpctxEp*, const EpctxGraph**, const EpctxNode**, size_t count, EpctxNodeComputeInfo**,
                       EpctxNode**) {
  if (count == 0) return nullptr;
  return g_api->CreateStatus(EPCTX_EP_FAIL, "AotCpuExecutionProvider: asked to compile a graph it did not claim");
}

void EpReleaseNodeComputeInfos(EpctxEp*, EpctxNodeComputeInfo**, size_t) {}

const char* FactoryGetName(const EpctxEpFactory*) { return kEpName; }
const char* FactoryGetVendor(const EpctxEpFactory*) { return kVendor; }
uint32_t FactoryGetVendorId(const EpctxEpFactory*) { return 0xE9C7; }
const char* FactoryGetVersion(const EpctxEpFactory*) { return kVersion; }

EpctxStatus* FactoryGetSupportedDevices(EpctxEpFactory* f, const EpctxHardwareDevice* const* devices, size_t n,
                                        EpctxEpDevice** out, size_t max, size_t* count) {
  *count = 0;
  for (size_t i = 0; i < n && *count < max; ++i) {
    if (g_api->HardwareDevice_Type(devices[i]) != EPCTX_DEVICE_CPU) continue;
    EpctxKeyValuePairs* meta = nullptr;
    if (EpctxStatus* st = g_api->KeyValuePairs_Create(&meta)) return st;
    g_api->KeyValuePairs_Add(meta, "version", kVersion);
    const char* isa = g_api->KeyValuePairs_Get(g_api->HardwareDevice_Metadata(devices[i]), "isa");
    g_api->KeyValuePairs_Add(meta, "isa", isa ? isa : "");
    EpctxEpDevice* d = nullptr;
    EpctxStatus* st = g_api->CreateEpDevice(f, devices[i], meta, nullptr, &d);
    g_api->KeyValuePairs_Release(meta);
    if (st) return st;
    out[(*count)++] = d;
  }
  return nullptr;
}

EpctxStatus* FactoryCreateEp(EpctxEpFactory*, const EpctxHardwareDevice* const*, const EpctxKeyValuePairs* const*,
                             size_t, const EpctxSessionOptions*, const EpctxLogger*, EpctxEp** ep) {
  auto* e = new (std::nothrow) AotCpuEp();
  if (!e) return g_api->CreateStatus(EPCTX_FAIL, "AotCpuExecutionProvider: out of memory");
  std::memset(&e->base, 0, sizeof(e->base));
  e->base.version = EPCTX_EP_API_VERSION;
  e->base.GetName = EpGetName;
  e->base.GetCapability = EpGetCapability;
  e->base.Compile = EpCompile;
  e->base.ReleaseNodeComputeInfos = EpReleaseNodeComputeInfos;
  *ep = &e->base;
  return nullptr;
}

void FactoryReleaseEp(EpctxEpFactory*, EpctxEp* ep) { delete reinterpret_cast<AotCpuEp*>(ep); }

}  // namespace

extern "C" {

EPCTX_EP_EXPORT EpctxStatus* CreateEpFactories(const char*, const EpctxApiBase* api_base, const EpctxLogger*,
                                               EpctxEpFactory** factories, size_t max_factories,
                                               size_t* num_factories) {
  const EpctxApi* api = api_base ? api_base->GetApi(EPCTX_EP_API_VERSION) : nullptr;
  if (!api) {  // a runtime older than this plugin: no table to create a status with, so offer no factory
    *num_factories = 0;
    return nullptr;
  }
  g_api = api;
  if (max_factories < 1) return api->CreateStatus(EPCTX_INVALID_ARGUMENT, "no room for a factory");
  auto* f = new (std::nothrow) AotCpuFactory();
  if (!f) return api->CreateStatus(EPCTX_FAIL, "AotCpuExecutionProvider: out of memory");
  std::memset(&f->base, 0, sizeof(f->base));
  f->base.version = EPCTX_EP_API_VERSION;
  f->base.GetName = FactoryGetName;
  f->base.GetVendor = FactoryGetVendor;
  f->base.GetVendorId = FactoryGetVendorId;
  f->base.GetVersion = FactoryGetVersion;
  f->base.GetSupportedDevices = FactoryGetSupportedDevices;
  f->base.CreateEp = FactoryCreateEp;
  f->base.ReleaseEp = FactoryReleaseEp;
  factories[0] = &f->base;
  *num_factories = 1;
  return nullptr;
}

EPCTX_EP_EXPORT EpctxStatus* ReleaseEpFactory(EpctxEpFactory* factory) {
  delete reinterpret_cast<AotCpuFactory*>(factory);
  return nullptr;
}

}  // extern "C"
