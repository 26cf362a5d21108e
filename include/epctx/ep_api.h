/* epctx plugin execution-provider ABI (pure C).
 *
 * A plugin EP library is a shared object that exports exactly two symbols:
 *
 *   EpctxStatus* CreateEpFactories(const char* registration_name, const EpctxApiBase* api_base,
 *                                  const EpctxLogger* default_logger, EpctxEpFactory** factories,
 *                                  size_t max_factories, size_t* num_factories);
 *   EpctxStatus* ReleaseEpFactory(EpctxEpFactory* factory);
 *
 * The runtime dlopen()s the library (RTLD_NOW | RTLD_LOCAL), calls CreateEpFactories once at registration and
 * ReleaseEpFactory for each factory at unregistration. Everything else crosses the boundary through the structs
 * below: tables of function pointers the plugin implements (EpctxEpFactory, EpctxEp, EpctxNodeComputeInfo,
 * EpctxEpProfiler) and the table the runtime implements (EpctxApi).
 *
 * Rules that hold for every function here:
 *  - No C++ type and no exception crosses the boundary. A plugin must catch everything it throws.
 *  - Functions that can fail return EpctxStatus*: NULL means OK. A non-NULL status is created with
 *    EpctxApi::CreateStatus and ownership passes to the caller, who releases it with EpctxApi::ReleaseStatus.
 *    On failure, out-parameters are left untouched. Release functions return void.
 *  - Versioning: every struct a plugin implements starts with `uint32_t version`, set to the
 *    EPCTX_EP_API_VERSION the plugin was compiled with. The runtime never calls a member added after that version
 *    and refuses a version newer than its own. Tables only grow at the end (append-only); the layout of every
 *    member that exists is pinned by static_asserts in the runtime's tests (tests/ep_api_layout_test.c).
 *  - Ownership is written on every pointer parameter: "borrowed" means valid only for the duration of the call
 *    unless the comment names a longer lifetime; "owned by X" names who frees it.
 *  - Strings are NUL-terminated UTF-8. Returned `const char*` are borrowed from the object they came from.
 *  - Thread safety: the runtime calls GetCapability/Compile from one thread at a time per EP. Compute may be
 *    called concurrently on different states unless the EP reports IsConcurrentRunSupported = false, in which
 *    case the runtime serializes runs of sessions using that EP. EpctxApi functions are thread-safe.
 *
 * Not part of this ABI, because epctx runs on CPUs only (documented per ONNX Runtime OrtEp/OrtEpFactory member):
 *  - CreateAllocator / ReleaseAllocator (OrtEp, OrtEpFactory): all memory is host memory from the runtime's
 *    allocator; outputs are allocated with EpctxApi::KernelContext_GetOutput.
 *  - CreateSyncStreamForDevice, IsStreamAware, Sync, CreateDataTransfer: no device queues and no device memory,
 *    so nothing to synchronise or copy.
 *  - GetKernelRegistry: plugin EPs here are compiling EPs (GetCapability + Compile); per-op kernels live in the
 *    built-in CPU EP.
 *  - IsGraphCaptureEnabled / IsGraphCaptured / ReplayGraph / ReleaseCapturedGraph /
 *    GetGraphCaptureNodeAssignmentPolicy: graph capture replays device command buffers (CUDA graphs); a CPU has none.
 *  - GetAvailableResource: partitioning budgets are for device memory.
 * Should a later version need one of them, it is appended to the end of its table.
 */
#ifndef EPCTX_EP_API_H_
#define EPCTX_EP_API_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EPCTX_EP_API_VERSION 1u

#if defined(_WIN32)
#define EPCTX_EP_EXPORT __declspec(dllexport)
#else
#define EPCTX_EP_EXPORT __attribute__((visibility("default")))
#endif

/* ---- opaque handles (owned by the runtime unless a function says otherwise) ---- */
typedef struct EpctxStatus EpctxStatus;
typedef struct EpctxLogger EpctxLogger;
typedef struct EpctxKeyValuePairs EpctxKeyValuePairs;
typedef struct EpctxHardwareDevice EpctxHardwareDevice;
typedef struct EpctxEpDevice EpctxEpDevice;
typedef struct EpctxSessionOptions EpctxSessionOptions;
typedef struct EpctxRunOptions EpctxRunOptions;
typedef struct EpctxGraph EpctxGraph;
typedef struct EpctxNode EpctxNode;
typedef struct EpctxValueInfo EpctxValueInfo;
typedef struct EpctxOpAttr EpctxOpAttr;
typedef struct EpctxValue EpctxValue;
typedef struct EpctxEpGraphSupportInfo EpctxEpGraphSupportInfo;
typedef struct EpctxNodeComputeContext EpctxNodeComputeContext;
typedef struct EpctxKernelContext EpctxKernelContext;
typedef struct EpctxProfilingEventSink EpctxProfilingEventSink;

/* Status codes; values equal ONNX Runtime's OrtErrorCode. */
typedef enum EpctxErrorCode {
  EPCTX_OK = 0,
  EPCTX_FAIL = 1,
  EPCTX_INVALID_ARGUMENT = 2,
  EPCTX_NO_SUCHFILE = 3,
  EPCTX_NO_MODEL = 4,
  EPCTX_ENGINE_ERROR = 5,
  EPCTX_RUNTIME_EXCEPTION = 6,
  EPCTX_INVALID_PROTOBUF = 7,
  EPCTX_MODEL_LOADED = 8,
  EPCTX_NOT_IMPLEMENTED = 9,
  EPCTX_INVALID_GRAPH = 10,
  EPCTX_EP_FAIL = 11,
  EPCTX_MODEL_LOAD_CANCELED = 12,
  EPCTX_MODEL_REQUIRES_COMPILATION = 13,
  EPCTX_NOT_FOUND = 14
} EpctxErrorCode;

/* Element types; values equal onnx.TensorProto.DataType. */
typedef enum EpctxElementType {
  EPCTX_ELEMENT_UNDEFINED = 0,
  EPCTX_ELEMENT_FLOAT = 1,
  EPCTX_ELEMENT_UINT8 = 2,
  EPCTX_ELEMENT_INT8 = 3,
  EPCTX_ELEMENT_UINT16 = 4,
  EPCTX_ELEMENT_INT16 = 5,
  EPCTX_ELEMENT_INT32 = 6,
  EPCTX_ELEMENT_INT64 = 7,
  EPCTX_ELEMENT_STRING = 8,
  EPCTX_ELEMENT_BOOL = 9,
  EPCTX_ELEMENT_FLOAT16 = 10,
  EPCTX_ELEMENT_DOUBLE = 11,
  EPCTX_ELEMENT_UINT32 = 12,
  EPCTX_ELEMENT_UINT64 = 13,
  EPCTX_ELEMENT_COMPLEX64 = 14,
  EPCTX_ELEMENT_COMPLEX128 = 15,
  EPCTX_ELEMENT_BFLOAT16 = 16
} EpctxElementType;

typedef enum EpctxValueKind {
  EPCTX_VALUE_UNKNOWN = 0,
  EPCTX_VALUE_TENSOR = 1,
  EPCTX_VALUE_SEQUENCE = 2,
  EPCTX_VALUE_OPTIONAL = 3
} EpctxValueKind;

typedef enum EpctxOpAttrType {
  EPCTX_ATTR_UNDEFINED = 0,
  EPCTX_ATTR_INT = 1,
  EPCTX_ATTR_INTS = 2,
  EPCTX_ATTR_FLOAT = 3,
  EPCTX_ATTR_FLOATS = 4,
  EPCTX_ATTR_STRING = 5,
  EPCTX_ATTR_STRINGS = 6,
  EPCTX_ATTR_GRAPH = 7,
  EPCTX_ATTR_GRAPHS = 8,
  EPCTX_ATTR_TENSOR = 9,
  EPCTX_ATTR_TENSORS = 10
} EpctxOpAttrType;

typedef enum EpctxHardwareDeviceType {
  EPCTX_DEVICE_CPU = 0,
  EPCTX_DEVICE_GPU = 1,
  EPCTX_DEVICE_NPU = 2
} EpctxHardwareDeviceType;

typedef enum EpctxLoggingLevel {
  EPCTX_LOG_VERBOSE = 0,
  EPCTX_LOG_INFO = 1,
  EPCTX_LOG_WARNING = 2,
  EPCTX_LOG_ERROR = 3,
  EPCTX_LOG_FATAL = 4
} EpctxLoggingLevel;

typedef enum EpctxEpDataLayout {
  EPCTX_LAYOUT_NCHW = 0,
  EPCTX_LAYOUT_NHWC = 1
} EpctxEpDataLayout;

/* ONNX Runtime's OrtCompiledModelCompatibility. */
typedef enum EpctxCompiledModelCompatibility {
  EPCTX_EP_NOT_APPLICABLE = 0,
  EPCTX_EP_SUPPORTED_OPTIMAL = 1,
  EPCTX_EP_SUPPORTED_PREFER_RECOMPILATION = 2,
  EPCTX_EP_UNSUPPORTED = 3
} EpctxCompiledModelCompatibility;

/* ---- structs the plugin implements ---- */

/* The computation of one compiled (fused) graph. Allocated by the EP in Compile, released through
 * EpctxEp::ReleaseNodeComputeInfos. */
typedef struct EpctxNodeComputeInfo EpctxNodeComputeInfo;
struct EpctxNodeComputeInfo {
  uint32_t version; /* EPCTX_EP_API_VERSION the plugin was built with */
  /* Creates per-session state for the fused node. `context` is borrowed; *state is owned by the EP and released
   * with ReleaseState. */
  EpctxStatus*(*CreateState)(EpctxNodeComputeInfo* this_ptr, EpctxNodeComputeContext* context, void** state);
  /* Runs the fused node. `kernel_context` (borrowed, valid for this call) gives inputs and allocates outputs; every
   * output must be allocated (KernelContext_GetOutput) before returning OK, or the run fails with EP_FAIL naming it.
   * May run concurrently on the same state unless the EP reports IsConcurrentRunSupported = false. */
  EpctxStatus*(*Compute)(EpctxNodeComputeInfo* this_ptr, void* state, EpctxKernelContext* kernel_context);
  void (*ReleaseState)(EpctxNodeComputeInfo* this_ptr, void* state);
};

/* An EP profiler: created through EpctxEp::CreateProfiler only for sessions with profiling enabled, right after
 * CreateEp; the runtime then calls StartProfiling, later EndProfiling when the profile is written (the EP adds its
 * own events to the sink with EpctxApi::ProfilingEventSink_AddEvent), and Release before ReleaseEp.
 * Release order at session end: compute states (ReleaseState), profiler (Release), compute infos
 * (ReleaseNodeComputeInfos), the EP (ReleaseEp). */
typedef struct EpctxEpProfiler EpctxEpProfiler;
struct EpctxEpProfiler {
  uint32_t version;
  /* epoch_us: the profile's time origin in microseconds of CLOCK_MONOTONIC. */
  EpctxStatus*(*StartProfiling)(EpctxEpProfiler* this_ptr, int64_t epoch_us);
  /* `sink` is borrowed for the call. */
  EpctxStatus*(*EndProfiling)(EpctxEpProfiler* this_ptr, EpctxProfilingEventSink* sink);
  void (*Release)(EpctxEpProfiler* this_ptr);
};

/* An execution provider instance (one per session). Created by EpctxEpFactory::CreateEp. */
typedef struct EpctxEp EpctxEp;
struct EpctxEp {
  uint32_t version;
  /* Required. The EP's name; must equal its factory's GetName(). Borrowed from the EP. */
  const char* (*GetName)(const EpctxEp* this_ptr);
  /* Required. Marks the nodes of `graph` (borrowed; a nested subgraph is offered separately) that the EP takes,
   * through EpctxApi::EpGraphSupportInfo_AddNodesToFuse / AddSingleNode on `support_info` (borrowed). */
  EpctxStatus*(*GetCapability)(EpctxEp* this_ptr, const EpctxGraph* graph, EpctxEpGraphSupportInfo* support_info);
  /* Required. Compiles `count` graphs, each holding only nodes the EP claimed; fused_nodes[i] is the node that
   * replaces graphs[i] (its name, inputs and outputs). All arrays are borrowed. The EP fills node_compute_infos[i]
   * (owned by the EP). When the session generates an EPContext model (session config ep.context_enable=1), the EP
   * also fills ep_context_nodes[i] with a node made by EpctxApi::CreateNode (ownership passes to the runtime, also
   * when Compile fails); the slots start NULL. */
  EpctxStatus*(*Compile)(EpctxEp* this_ptr, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                         EpctxNodeComputeInfo** node_compute_infos, EpctxNode** ep_context_nodes);
  /* Required. Releases compute infos returned by Compile. */
  void (*ReleaseNodeComputeInfos)(EpctxEp* this_ptr, EpctxNodeComputeInfo** node_compute_infos, size_t count);

  /* Optional members below: NULL selects the runtime's default. */
  /* Default NCHW. epctx does not transform layouts yet: a preference other than NCHW is recorded and reported but
   * nodes are handed over in the model's layout. */
  EpctxStatus*(*GetPreferredDataLayout)(EpctxEp* this_ptr, EpctxEpDataLayout* layout);
  /* *should_convert > 0 convert, 0 keep, < 0 let the runtime decide. Consulted with the preferred layout. */
  EpctxStatus*(*ShouldConvertDataLayoutForOp)(EpctxEp* this_ptr, const char* domain, const char* op_type,
                                               EpctxEpDataLayout target_layout, int* should_convert);
  /* Options set after session creation (Session::SetEpDynamicOptions). Arrays borrowed. */
  EpctxStatus*(*SetDynamicOptions)(EpctxEp* this_ptr, const char* const* keys, const char* const* values,
                                   size_t count);
  /* Around every Session::Run of a session using this EP. `run_options` borrowed. Runs of one session may be
   * concurrent, so these may be called concurrently unless IsConcurrentRunSupported reports false. */
  EpctxStatus*(*OnRunStart)(EpctxEp* this_ptr, const EpctxRunOptions* run_options);
  EpctxStatus*(*OnRunEnd)(EpctxEp* this_ptr, const EpctxRunOptions* run_options, bool sync_stream);
  /* Default true. False makes the runtime serialize runs of sessions that use this EP. */
  EpctxStatus*(*IsConcurrentRunSupported)(EpctxEp* this_ptr, bool* is_supported);
  /* Optional profiler (may set *profiler = NULL). Ownership of a non-NULL profiler passes to the runtime. */
  EpctxStatus*(*CreateProfiler)(EpctxEp* this_ptr, EpctxEpProfiler** profiler);
  /* Called once when session creation has finished (after Compile). */
  EpctxStatus*(*OnSessionInitializationEnd)(EpctxEp* this_ptr);
  /* Compatibility string stored in a generated model's metadata ep_compatibility_info.<EP name>; the runtime
   * copies it. NULL or "" means none. `graph` borrowed. */
  const char* (*GetCompiledModelCompatibilityInfo)(EpctxEp* this_ptr, const EpctxGraph* graph);
};

/* A factory: reports devices and creates EP instances. Created by CreateEpFactories, released by ReleaseEpFactory. */
typedef struct EpctxEpFactory EpctxEpFactory;
struct EpctxEpFactory {
  uint32_t version;
  /* Required. EP name (e.g. "ExampleExecutionProvider"), vendor, PCI-style vendor id, semantic version. */
  const char* (*GetName)(const EpctxEpFactory* this_ptr);
  const char* (*GetVendor)(const EpctxEpFactory* this_ptr);
  uint32_t (*GetVendorId)(const EpctxEpFactory* this_ptr);
  const char* (*GetVersion)(const EpctxEpFactory* this_ptr);
  /* Required. From the `num_devices` hardware devices the runtime discovered (borrowed; valid until the factory is
   * released), create EpctxEpDevice pairs with EpctxApi::CreateEpDevice for those the EP supports and store at most
   * `max_ep_devices` of them in `ep_devices` (ownership passes to the runtime). A factory may also create and pair
   * a hardware device of its own (EpctxApi::CreateHardwareDevice), e.g. a virtual device for cross-compilation. */
  EpctxStatus*(*GetSupportedDevices)(EpctxEpFactory* this_ptr, const EpctxHardwareDevice* const* devices,
                                     size_t num_devices, EpctxEpDevice** ep_devices, size_t max_ep_devices,
                                     size_t* num_ep_devices);
  /* Required. Creates an EP for a session on the selected devices (arrays borrowed, parallel). Session options
   * (borrowed, valid until ReleaseEp) are read with EpctxApi::GetSessionConfigEntry; provider options arrive as
   * config entries "ep.<lowercase ep name>.<key>". *ep is owned by the factory and released with ReleaseEp. */
  EpctxStatus*(*CreateEp)(EpctxEpFactory* this_ptr, const EpctxHardwareDevice* const* devices,
                          const EpctxKeyValuePairs* const* ep_metadata, size_t num_devices,
                          const EpctxSessionOptions* session_options, const EpctxLogger* logger, EpctxEp** ep);
  void (*ReleaseEp)(EpctxEpFactory* this_ptr, EpctxEp* ep);
  /* Optional. Judges a compatibility string produced by GetCompiledModelCompatibilityInfo against the devices.
   * NULL means EPCTX_EP_NOT_APPLICABLE. */
  EpctxStatus*(*ValidateCompiledModelCompatibilityInfo)(EpctxEpFactory* this_ptr,
                                                        const EpctxHardwareDevice* const* devices, size_t num_devices,
                                                        const char* compatibility_info,
                                                        EpctxCompiledModelCompatibility* compatibility);
};

/* ---- the table the runtime implements ---- */
typedef struct EpctxApi EpctxApi;
struct EpctxApi {
  uint32_t version; /* EPCTX_EP_API_VERSION of the runtime */

  /* Status. CreateStatus copies `message`; the status is owned by whoever receives it. */
  EpctxStatus* (*CreateStatus)(EpctxErrorCode code, const char* message);
  EpctxErrorCode (*GetErrorCode)(const EpctxStatus* status);
  const char* (*GetErrorMessage)(const EpctxStatus* status);
  void (*ReleaseStatus)(EpctxStatus* status);

  /* Logging through the runtime's logger (`logger` borrowed; may be the default logger given to
   * CreateEpFactories or the session logger given to CreateEp). */
  void (*Log)(const EpctxLogger* logger, EpctxLoggingLevel level, const char* file, int line, const char* message);

  /* Key-value pairs. Create returns an empty set owned by the caller (release with KeyValuePairs_Release unless
   * ownership passes to the runtime, as for CreateHardwareDevice/CreateEpDevice, which copy it). Add copies. Get
   * returns NULL when absent (borrowed from the set). GetAll fills borrowed arrays valid until the set changes. */
  EpctxStatus* (*KeyValuePairs_Create)(EpctxKeyValuePairs** out);
  EpctxStatus* (*KeyValuePairs_Add)(EpctxKeyValuePairs* kvps, const char* key, const char* value);
  const char* (*KeyValuePairs_Get)(const EpctxKeyValuePairs* kvps, const char* key);
  void (*KeyValuePairs_GetAll)(const EpctxKeyValuePairs* kvps, const char* const** keys, const char* const** values,
                               size_t* count);
  void (*KeyValuePairs_Release)(EpctxKeyValuePairs* kvps);

  /* Configuration. GetSessionConfigEntry sets *value to the entry (borrowed from the session options) or NULL.
   * GetEnvConfigEntries returns the environment's config (e.g. allow_virtual_devices), borrowed, valid during
   * CreateEpFactories and GetSupportedDevices. */
  EpctxStatus* (*GetSessionConfigEntry)(const EpctxSessionOptions* options, const char* key, const char** value);
  const EpctxKeyValuePairs* (*GetEnvConfigEntries)(void);

  /* Hardware devices (borrowed from the runtime, valid while the library is registered). Metadata keys for the
   * CPU: "vendor", "model", "isa" (space-separated features, e.g. "avx2 avx512f ..."), "cores". */
  EpctxHardwareDeviceType (*HardwareDevice_Type)(const EpctxHardwareDevice* device);
  uint32_t (*HardwareDevice_VendorId)(const EpctxHardwareDevice* device);
  const char* (*HardwareDevice_Vendor)(const EpctxHardwareDevice* device);
  uint32_t (*HardwareDevice_DeviceId)(const EpctxHardwareDevice* device);
  const EpctxKeyValuePairs* (*HardwareDevice_Metadata)(const EpctxHardwareDevice* device);
  /* A device made by a factory (e.g. a virtual one: metadata is_virtual=1). `metadata` (may be NULL) is copied.
   * The device is owned by the runtime once paired through CreateEpDevice and returned from GetSupportedDevices;
   * otherwise release it with ReleaseHardwareDevice. */
  EpctxStatus* (*CreateHardwareDevice)(EpctxHardwareDeviceType type, uint32_t vendor_id, uint32_t device_id,
                                       const char* vendor_name, const EpctxKeyValuePairs* metadata,
                                       EpctxHardwareDevice** device);
  void (*ReleaseHardwareDevice)(EpctxHardwareDevice* device);
  /* Pairs the factory with a device. ep_metadata and ep_options (may be NULL) are copied. */
  EpctxStatus* (*CreateEpDevice)(EpctxEpFactory* factory, const EpctxHardwareDevice* device,
                                 const EpctxKeyValuePairs* ep_metadata, const EpctxKeyValuePairs* ep_options,
                                 EpctxEpDevice** ep_device);
  void (*ReleaseEpDevice)(EpctxEpDevice* ep_device);

  /* Graph view. All handles are borrowed and valid for the call that handed out the graph (GetCapability,
   * Compile), or, for graphs given to Compile, until ReleaseNodeComputeInfos. Arrays are filled by the caller:
   * pass the capacity; the functions fail with INVALID_ARGUMENT when it is too small. */
  const char* (*Graph_GetName)(const EpctxGraph* graph);
  /* Path of the model file, "" when the model was loaded from bytes (or <folder>/virtual_model.onnx when
   * session.model_external_initializers_file_folder_path is set). */
  const char* (*Graph_GetModelPath)(const EpctxGraph* graph);
  int64_t (*Graph_GetOnnxIRVersion)(const EpctxGraph* graph);
  /* Opset imported for `domain` ("" = ONNX), -1 when not imported. */
  int64_t (*Graph_GetOpsetVersion)(const EpctxGraph* graph, const char* domain);
  /* Nodes in topological order. */
  size_t (*Graph_GetNumNodes)(const EpctxGraph* graph);
  EpctxStatus* (*Graph_GetNodes)(const EpctxGraph* graph, const EpctxNode** nodes, size_t capacity);
  size_t (*Graph_GetNumInputs)(const EpctxGraph* graph);
  EpctxStatus* (*Graph_GetInputs)(const EpctxGraph* graph, const EpctxValueInfo** inputs, size_t capacity);
  size_t (*Graph_GetNumOutputs)(const EpctxGraph* graph);
  EpctxStatus* (*Graph_GetOutputs)(const EpctxGraph* graph, const EpctxValueInfo** outputs, size_t capacity);
  size_t (*Graph_GetNumInitializers)(const EpctxGraph* graph);
  EpctxStatus* (*Graph_GetInitializers)(const EpctxGraph* graph, const EpctxValueInfo** initializers,
                                        size_t capacity);
  /* The node that owns this graph as a subgraph attribute, or NULL for a top-level graph. */
  const EpctxNode* (*Graph_GetParentNode)(const EpctxGraph* graph);

  const char* (*Node_GetName)(const EpctxNode* node);
  const char* (*Node_GetOperatorType)(const EpctxNode* node);
  const char* (*Node_GetDomain)(const EpctxNode* node);
  int64_t (*Node_GetSinceVersion)(const EpctxNode* node); /* the opset that applies to the node */
  size_t (*Node_GetId)(const EpctxNode* node);           /* unique within its graph */
  size_t (*Node_GetNumInputs)(const EpctxNode* node);
  /* inputs[i] is NULL for an absent optional input. */
  EpctxStatus* (*Node_GetInputs)(const EpctxNode* node, const EpctxValueInfo** inputs, size_t capacity);
  size_t (*Node_GetNumOutputs)(const EpctxNode* node);
  EpctxStatus* (*Node_GetOutputs)(const EpctxNode* node, const EpctxValueInfo** outputs, size_t capacity);
  size_t (*Node_GetNumAttributes)(const EpctxNode* node);
  EpctxStatus* (*Node_GetAttributes)(const EpctxNode* node, const EpctxOpAttr** attrs, size_t capacity);
  /* NULL when the node has no attribute of that name. */
  const EpctxOpAttr* (*Node_GetAttributeByName)(const EpctxNode* node, const char* name);
  /* Subgraphs (If/Loop/Scan bodies), with the attribute name each came from (borrowed). */
  size_t (*Node_GetNumSubgraphs)(const EpctxNode* node);
  EpctxStatus* (*Node_GetSubgraphs)(const EpctxNode* node, const EpctxGraph** graphs, const char** attribute_names,
                                    size_t capacity);
  /* The graph holding the node. */
  const EpctxGraph* (*Node_GetGraph)(const EpctxNode* node);

  /* Attributes. The typed readers fail with INVALID_ARGUMENT when the attribute has another type. Arrays and
   * strings are borrowed from the attribute. */
  const char* (*OpAttr_GetName)(const EpctxOpAttr* attr);
  EpctxOpAttrType (*OpAttr_GetType)(const EpctxOpAttr* attr);
  EpctxStatus* (*OpAttr_GetInt)(const EpctxOpAttr* attr, int64_t* value);
  EpctxStatus* (*OpAttr_GetFloat)(const EpctxOpAttr* attr, float* value);
  /* The string's bytes and length (attributes may hold binary data, e.g. ep_cache_context). */
  EpctxStatus* (*OpAttr_GetString)(const EpctxOpAttr* attr, const char** data, size_t* length);
  EpctxStatus* (*OpAttr_GetInts)(const EpctxOpAttr* attr, const int64_t** values, size_t* count);
  EpctxStatus* (*OpAttr_GetFloats)(const EpctxOpAttr* attr, const float** values, size_t* count);
  EpctxStatus* (*OpAttr_GetNumStrings)(const EpctxOpAttr* attr, size_t* count);
  EpctxStatus* (*OpAttr_GetStringAt)(const EpctxOpAttr* attr, size_t index, const char** data, size_t* length);
  /* A tensor attribute as a read-only value (borrowed from the attribute). */
  EpctxStatus* (*OpAttr_GetTensor)(const EpctxOpAttr* attr, const EpctxValue** tensor);
  EpctxStatus* (*OpAttr_GetGraph)(const EpctxOpAttr* attr, const EpctxGraph** graph);

  /* Value infos: graph inputs/outputs, initializers, node inputs/outputs. */
  const char* (*ValueInfo_GetName)(const EpctxValueInfo* value_info);
  EpctxValueKind (*ValueInfo_GetKind)(const EpctxValueInfo* value_info);
  EpctxElementType (*ValueInfo_GetElementType)(const EpctxValueInfo* value_info);
  /* Rank, or -1 when the shape is unknown. */
  int64_t (*ValueInfo_GetRank)(const EpctxValueInfo* value_info);
  /* dims[i] = size or -1 when unknown; symbols[i] = dim_param name or "" (borrowed). Either array may be NULL. */
  EpctxStatus* (*ValueInfo_GetShape)(const EpctxValueInfo* value_info, int64_t* dims, const char** symbols,
                                     size_t capacity);
  /* Producer node and its output index; *node = NULL for graph inputs and initializers.
   * Note: values that an If/Loop/Scan body reads from an enclosing graph are not listed among that node's inputs or
   * the value's consumers; an EP that fuses around such nodes must walk their subgraphs (Node_GetSubgraphs). The
   * runtime refuses a fusion that would create a cycle through them. */
  EpctxStatus* (*ValueInfo_GetProducer)(const EpctxValueInfo* value_info, const EpctxNode** node, size_t* output_index);
  size_t (*ValueInfo_GetNumConsumers)(const EpctxValueInfo* value_info);
  EpctxStatus* (*ValueInfo_GetConsumers)(const EpctxValueInfo* value_info, const EpctxNode** nodes,
                                         int64_t* input_indices, size_t capacity);
  bool (*ValueInfo_IsGraphInput)(const EpctxValueInfo* value_info);
  bool (*ValueInfo_IsGraphOutput)(const EpctxValueInfo* value_info);
  /* An initializer; constant unless it is also a graph input (then it is only a default). */
  bool (*ValueInfo_IsInitializer)(const EpctxValueInfo* value_info);
  bool (*ValueInfo_IsConstantInitializer)(const EpctxValueInfo* value_info);
  /* True for values defined in an enclosing graph and read by this subgraph. */
  bool (*ValueInfo_IsFromOuterScope)(const EpctxValueInfo* value_info);
  /* The initializer's data as a read-only value (borrowed; stays valid while the session lives). */
  EpctxStatus* (*ValueInfo_GetInitializerValue)(const EpctxValueInfo* value_info, const EpctxValue** value);
  /* For an initializer stored as external data: the resolved file path (borrowed), byte offset and size, so an EP
   * can map the weights itself. Sets *path = NULL when the initializer is not external. */
  EpctxStatus* (*ValueInfo_GetExternalInitializerInfo)(const EpctxValueInfo* value_info, const char** path,
                                                       int64_t* offset, size_t* size);

  /* Values (tensors). Data pointers are borrowed from the value. */
  EpctxElementType (*Value_GetElementType)(const EpctxValue* value);
  size_t (*Value_GetRank)(const EpctxValue* value);
  EpctxStatus* (*Value_GetShape)(const EpctxValue* value, int64_t* dims, size_t capacity);
  int64_t (*Value_GetElementCount)(const EpctxValue* value);
  const void* (*Value_GetData)(const EpctxValue* value);
  void* (*Value_GetMutableData)(EpctxValue* value); /* NULL for read-only values (initializers, inputs) */

  /* GetCapability support info. The nodes (borrowed, from the graph given to GetCapability) become one fused
   * node run by this EP. A node may be claimed once. */
  EpctxStatus* (*EpGraphSupportInfo_AddNodesToFuse)(EpctxEpGraphSupportInfo* support_info,
                                                    const EpctxNode* const* nodes, size_t count);
  /* One node as its own fused group (same as AddNodesToFuse with count 1). */
  EpctxStatus* (*EpGraphSupportInfo_AddSingleNode)(EpctxEpGraphSupportInfo* support_info, const EpctxNode* node);

  /* Compute: the fused node's name (borrowed), then inputs/outputs of one run. Inputs are read-only and
   * borrowed for the call; GetOutput allocates output i with the given shape (once per run; host memory owned
   * by the runtime) and returns it for writing. */
  const char* (*NodeComputeContext_NodeName)(const EpctxNodeComputeContext* context);
  size_t (*KernelContext_GetInputCount)(const EpctxKernelContext* context);
  size_t (*KernelContext_GetOutputCount)(const EpctxKernelContext* context);
  EpctxStatus* (*KernelContext_GetInput)(const EpctxKernelContext* context, size_t index, const EpctxValue** value);
  EpctxStatus* (*KernelContext_GetOutput)(EpctxKernelContext* context, size_t index, const int64_t* dims,
                                          size_t rank, EpctxValue** value);

  /* Model editing, for EPContext nodes returned from Compile. CreateOpAttr copies `data`: for INT `data` points
   * to an int64_t and FLOAT to a float (`length` is ignored), STRING `length` bytes, INTS/FLOATS `length` elements, STRINGS an array of
   * `length` NUL-terminated strings. CreateNode copies names and takes ownership of the attributes (also on
   * failure); the node is owned by the caller until handed to the runtime through Compile. */
  EpctxStatus* (*CreateOpAttr)(const char* name, const void* data, size_t length, EpctxOpAttrType type,
                               EpctxOpAttr** attr);
  void (*ReleaseOpAttr)(EpctxOpAttr* attr);
  EpctxStatus* (*CreateNode)(const char* op_type, const char* domain, const char* node_name,
                             const char* const* input_names, size_t num_inputs, const char* const* output_names,
                             size_t num_outputs, EpctxOpAttr** attributes, size_t num_attributes, EpctxNode** node);
  void (*ReleaseNode)(EpctxNode* node);

  /* Profiling: adds one complete event (Chrome trace "X") to the sink. start_us is measured from the epoch given
   * to EpctxEpProfiler::StartProfiling (the profile's origin). name, category and args (may be NULL; still owned by
   * the caller) are copied. */
  EpctxStatus* (*ProfilingEventSink_AddEvent)(EpctxProfilingEventSink* sink, const char* name, const char* category,
                                              int64_t start_us, int64_t duration_us, const EpctxKeyValuePairs* args);

  /* Observability (optional for EPs): during Compile, tells the runtime how the EPContext node behind
   * `fused_node` (one of the fused nodes given to Compile) was loaded: the file it came from (NULL or "" for a
   * payload embedded in the model; copied), how many bytes were mapped and how many read (copied), and the time it
   * took. Session::GetSessionReport shows it per partition. */
  EpctxStatus* (*ReportEpContextLoad)(const EpctxNode* fused_node, const char* file, uint64_t bytes_mapped,
                                     uint64_t bytes_read, double milliseconds);

  /* Observability (optional for EPs): during GetCapability, says why the EP does not take `node` (borrowed, from
   * the graph given to GetCapability), e.g. "op Loop is not compiled by this EP" or "input 'x' dim 0 is free
   * ('batch')". `reason` is copied; a second call for the same node replaces the first. A reason for a node the EP
   * (or an EP before it) claims is ignored. The runtime keeps, for every node left on the CPU EP, the EP asked and
   * its reason, and shows them in Session::GetSessionReport ("left_on_cpu"), `epctx perf -v`, `epctx compile` and
   * in the metadata of a generated context model (key "epctx.left_on_cpu", read by `epctx inspect`).
   * INVALID_ARGUMENT for a NULL argument or a node of another graph. */
  EpctxStatus* (*EpGraphSupportInfo_SetNodeRejectionReason)(EpctxEpGraphSupportInfo* support_info,
                                                            const EpctxNode* node, const char* reason);
};

/* Handed to CreateEpFactories: GetApi(version) returns the table for that version, or NULL when the runtime does
 * not know it (a plugin built against a newer epctx). */
typedef struct EpctxApiBase EpctxApiBase;
struct EpctxApiBase {
  const EpctxApi* (*GetApi)(uint32_t version);
  const char* (*GetVersionString)(void);
};

/* The two exported entry points, as types for dlsym. */
typedef EpctxStatus* (*EpctxCreateEpFactoriesFn)(const char* registration_name, const EpctxApiBase* api_base,
                                                 const EpctxLogger* default_logger, EpctxEpFactory** factories,
                                                 size_t max_factories, size_t* num_factories);
typedef EpctxStatus* (*EpctxReleaseEpFactoryFn)(EpctxEpFactory* factory);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EPCTX_EP_API_H_ */
