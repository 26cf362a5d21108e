/* MinimalExecutionProvider: a plugin EP in one C99 file, built outside the epctx tree against nothing but
 * <epctx/ep_api.h> (tests/plugin_out_of_tree/run.sh proves it). It claims every float Relu node on its own
 * (EpGraphSupportInfo_AddSingleNode: a fused node of one node) and computes it. Every struct the runtime calls
 * into starts with the base table as its first member, so a pointer to the table is a pointer to the object
 * (C99 6.7.2.1p13). */
#include <epctx/ep_api.h>

#include <stdlib.h>
#include <string.h>

#define EP_NAME "MinimalExecutionProvider"

typedef struct MinimalFactory {
  EpctxEpFactory base;
  const EpctxApi* api;
} MinimalFactory;

typedef struct MinimalEp {
  EpctxEp base;
  const EpctxApi* api;
} MinimalEp;

typedef struct MinimalCompute {
  EpctxNodeComputeInfo base;
  const EpctxApi* api;
} MinimalCompute;

/* ---- compute: y = x > 0 ? x : 0 over one float tensor ---- */

static EpctxStatus* ComputeCreateState(EpctxNodeComputeInfo* self, EpctxNodeComputeContext* context, void** state) {
  (void)context;
  *state = self; /* stateless: nothing per session */
  return NULL;
}

static void ComputeReleaseState(EpctxNodeComputeInfo* self, void* state) {
  (void)self;
  (void)state;
}

static EpctxStatus* ComputeRelu(EpctxNodeComputeInfo* self, void* state, EpctxKernelContext* context) {
  const EpctxApi* api = ((MinimalCompute*)self)->api;
  const EpctxValue* x = NULL;
  EpctxValue* y = NULL;
  EpctxStatus* status;
  int64_t dims[16];
  size_t rank, i;
  int64_t n;
  const float* src;
  float* dst;
  (void)state;
  status = api->KernelContext_GetInput(context, 0, &x);
  if (status) return status;
  if (api->Value_GetElementType(x) != EPCTX_ELEMENT_FLOAT)
    return api->CreateStatus(EPCTX_INVALID_ARGUMENT, EP_NAME ": Relu input is not a float tensor");
  rank = api->Value_GetRank(x);
  if (rank > 16) return api->CreateStatus(EPCTX_INVALID_ARGUMENT, EP_NAME ": Relu input rank above 16");
  status = api->Value_GetShape(x, dims, rank);
  if (status) return status;
  status = api->KernelContext_GetOutput(context, 0, dims, rank, &y);
  if (status) return status;
  n = api->Value_GetElementCount(x);
  src = (const float*)api->Value_GetData(x);
  dst = (float*)api->Value_GetMutableData(y);
  for (i = 0; i < (size_t)n; ++i) dst[i] = src[i] > 0.0f ? src[i] : 0.0f;
  return NULL;
}

/* ---- the EP ---- */

static const char* EpGetName(const EpctxEp* self) {
  (void)self;
  return EP_NAME;
}

static int IsFloatRelu(const EpctxApi* api, const EpctxNode* node) {
  const EpctxValueInfo* input = NULL;
  EpctxStatus* status;
  if (strcmp(api->Node_GetOperatorType(node), "Relu") != 0 || api->Node_GetDomain(node)[0] != '\0') return 0;
  if (api->Node_GetNumInputs(node) != 1 || api->Node_GetNumOutputs(node) != 1) return 0;
  status = api->Node_GetInputs(node, &input, 1);
  if (status) {
    api->ReleaseStatus(status);
    return 0;
  }
  return input && api->ValueInfo_GetElementType(input) == EPCTX_ELEMENT_FLOAT;
}

static EpctxStatus* EpGetCapability(EpctxEp* self, const EpctxGraph* graph, EpctxEpGraphSupportInfo* support) {
  const EpctxApi* api = ((MinimalEp*)self)->api;
  size_t count = api->Graph_GetNumNodes(graph), i;
  const EpctxNode** nodes;
  EpctxStatus* status;
  if (count == 0) return NULL;
  nodes = (const EpctxNode**)malloc(count * sizeof *nodes);
  if (!nodes) return api->CreateStatus(EPCTX_FAIL, EP_NAME ": out of memory");
  status = api->Graph_GetNodes(graph, nodes, count);
  for (i = 0; !status && i < count; ++i)
    if (IsFloatRelu(api, nodes[i])) status = api->EpGraphSupportInfo_AddSingleNode(support, nodes[i]);
  free((void*)nodes);
  return status;
}

static EpctxStatus* EpCompile(EpctxEp* self, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                              EpctxNodeComputeInfo** infos, EpctxNode** ep_context_nodes) {
  const EpctxApi* api = ((MinimalEp*)self)->api;
  size_t i;
  (void)fused_nodes;
  (void)ep_context_nodes; /* no EPContext support: sessions with ep.context_enable=1 fail in the runtime */
  for (i = 0; i < count; ++i)
    if (api->Graph_GetNumNodes(graphs[i]) != 1)
      return api->CreateStatus(EPCTX_EP_FAIL, EP_NAME ": expected one Relu node per graph");
  for (i = 0; i < count; ++i) {
    MinimalCompute* c = (MinimalCompute*)calloc(1, sizeof *c);
    if (!c) {
      while (i-- > 0) free(infos[i]);
      return api->CreateStatus(EPCTX_FAIL, EP_NAME ": out of memory");
    }
    c->base.version = EPCTX_EP_API_VERSION;
    c->base.CreateState = ComputeCreateState;
    c->base.Compute = ComputeRelu;
    c->base.ReleaseState = ComputeReleaseState;
    c->api = api;
    infos[i] = &c->base;
  }
  return NULL;
}

static void EpReleaseNodeComputeInfos(EpctxEp* self, EpctxNodeComputeInfo** infos, size_t count) {
  size_t i;
  (void)self;
  for (i = 0; i < count; ++i) free(infos[i]);
}

/* ---- the factory ---- */

static const char* FactoryGetName(const EpctxEpFactory* self) {
  (void)self;
  return EP_NAME;
}
static const char* FactoryGetVendor(const EpctxEpFactory* self) {
  (void)self;
  return "minimal";
}
static uint32_t FactoryGetVendorId(const EpctxEpFactory* self) {
  (void)self;
  return 0;
}
static const char* FactoryGetVersion(const EpctxEpFactory* self) {
  (void)self;
  return "1.0.0";
}

static EpctxStatus* FactoryGetSupportedDevices(EpctxEpFactory* self, const EpctxHardwareDevice* const* devices,
                                               size_t num_devices, EpctxEpDevice** ep_devices, size_t max_ep_devices,
                                               size_t* num_ep_devices) {
  const EpctxApi* api = ((MinimalFactory*)self)->api;
  size_t i, n = 0;
  for (i = 0; i < num_devices && n < max_ep_devices; ++i) {
    EpctxStatus* status;
    if (api->HardwareDevice_Type(devices[i]) != EPCTX_DEVICE_CPU) continue;
    status = api->CreateEpDevice(self, devices[i], NULL, NULL, &ep_devices[n]);
    if (status) {
      while (n-- > 0) api->ReleaseEpDevice(ep_devices[n]);
      return status;
    }
    ++n;
  }
  *num_ep_devices = n;
  return NULL;
}

static EpctxStatus* FactoryCreateEp(EpctxEpFactory* self, const EpctxHardwareDevice* const* devices,
                                    const EpctxKeyValuePairs* const* ep_metadata, size_t num_devices,
                                    const EpctxSessionOptions* session_options, const EpctxLogger* logger,
                                    EpctxEp** ep) {
  const EpctxApi* api = ((MinimalFactory*)self)->api;
  MinimalEp* e = (MinimalEp*)calloc(1, sizeof *e);
  (void)devices;
  (void)ep_metadata;
  (void)num_devices;
  (void)session_options;
  (void)logger;
  if (!e) return api->CreateStatus(EPCTX_FAIL, EP_NAME ": out of memory");
  e->base.version = EPCTX_EP_API_VERSION;
  e->base.GetName = EpGetName;
  e->base.GetCapability = EpGetCapability;
  e->base.Compile = EpCompile;
  e->base.ReleaseNodeComputeInfos = EpReleaseNodeComputeInfos;
  /* every optional member stays NULL (calloc): the runtime's defaults */
  e->api = api;
  *ep = &e->base;
  return NULL;
}

static void FactoryReleaseEp(EpctxEpFactory* self, EpctxEp* ep) {
  (void)self;
  free(ep);
}

/* ---- the two exported entry points ---- */

EPCTX_EP_EXPORT EpctxStatus* CreateEpFactories(const char* registration_name, const EpctxApiBase* api_base,
                                               const EpctxLogger* default_logger, EpctxEpFactory** factories,
                                               size_t max_factories, size_t* num_factories) {
  const EpctxApi* api = api_base ? api_base->GetApi(EPCTX_EP_API_VERSION) : NULL;
  MinimalFactory* f;
  (void)registration_name;
  (void)default_logger;
  if (!api) { /* runtime older than this header: offer nothing */
    *num_factories = 0;
    return NULL;
  }
  if (max_factories < 1) return api->CreateStatus(EPCTX_INVALID_ARGUMENT, EP_NAME ": no room for a factory");
  f = (MinimalFactory*)calloc(1, sizeof *f);
  if (!f) return api->CreateStatus(EPCTX_FAIL, EP_NAME ": out of memory");
  f->base.version = EPCTX_EP_API_VERSION;
  f->base.GetName = FactoryGetName;
  f->base.GetVendor = FactoryGetVendor;
  f->base.GetVendorId = FactoryGetVendorId;
  f->base.GetVersion = FactoryGetVersion;
  f->base.GetSupportedDevices = FactoryGetSupportedDevices;
  f->base.CreateEp = FactoryCreateEp;
  f->base.ReleaseEp = FactoryReleaseEp;
  f->api = api;
  factories[0] = &f->base;
  *num_factories = 1;
  return NULL;
}

EPCTX_EP_EXPORT EpctxStatus* ReleaseEpFactory(EpctxEpFactory* factory) {
  free(factory);
  return NULL;
}
