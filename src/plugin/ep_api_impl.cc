// The EpctxApi table: every function validates its pointers and never throws across the C boundary.
#include <cstring>
#include <set>

#include "plugin/ep_objects.h"
#include "providers/cpu/kernel.h"

#define EPCTX_VERSION_STRING_DEFAULT "0.1.0"

void EpctxKeyValuePairs::Set(const std::string& k, const std::string& v) {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == k) {
      values[i] = v;
      return;
    }
  keys.push_back(k);
  values.push_back(v);
}
const std::string* EpctxKeyValuePairs::Find(const std::string& k) const {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == k) return &values[i];
  return nullptr;
}
std::map<std::string, std::string> EpctxKeyValuePairs::ToMap() const {
  std::map<std::string, std::string> m;
  for (size_t i = 0; i < keys.size(); ++i) m[keys[i]] = values[i];
  return m;
}

namespace epctx {

namespace {

// The env config a plugin sees while its Env registers it: registration runs CreateEpFactories and
// GetSupportedDevices synchronously on the registering thread, so a per-thread pointer keeps two Envs apart.
thread_local const EpctxKeyValuePairs* g_env_config = nullptr;

EpctxStatus* Err(EpctxErrorCode code, const std::string& msg) { return new EpctxStatus{static_cast<ErrorCode>(code), msg}; }
EpctxStatus* NullArg(const char* fn) { return Err(EPCTX_INVALID_ARGUMENT, std::string(fn) + ": a required pointer is NULL"); }
EpctxStatus* Capacity(const char* fn, size_t need, size_t have) {
  return Err(EPCTX_INVALID_ARGUMENT, std::string(fn) + ": array capacity " + std::to_string(have) + " is less than " +
                                         std::to_string(need));
}

EpctxValueKind KindOf(const ValueType& t) {
  switch (t.kind) {
    case ValueType::Kind::kTensor: return EPCTX_VALUE_TENSOR;
    case ValueType::Kind::kSequence: return EPCTX_VALUE_SEQUENCE;
    case ValueType::Kind::kOptional: return EPCTX_VALUE_OPTIONAL;
    default: return EPCTX_VALUE_UNKNOWN;
  }
}

EpctxOpAttrType AttrTypeOf(Attribute::Type t) {
  switch (t) {
    case Attribute::Type::kInt: return EPCTX_ATTR_INT;
    case Attribute::Type::kInts: return EPCTX_ATTR_INTS;
    case Attribute::Type::kFloat: return EPCTX_ATTR_FLOAT;
    case Attribute::Type::kFloats: return EPCTX_ATTR_FLOATS;
    case Attribute::Type::kString: return EPCTX_ATTR_STRING;
    case Attribute::Type::kStrings: return EPCTX_ATTR_STRINGS;
    case Attribute::Type::kGraph: return EPCTX_ATTR_GRAPH;
    case Attribute::Type::kGraphs: return EPCTX_ATTR_GRAPHS;
    case Attribute::Type::kTensor: return EPCTX_ATTR_TENSOR;
    case Attribute::Type::kTensors: return EPCTX_ATTR_TENSORS;
    default: return EPCTX_ATTR_UNDEFINED;
  }
}

EpctxStatus* WrongAttr(const EpctxOpAttr* a, const char* want) {
  return Err(EPCTX_INVALID_ARGUMENT, "attribute '" + a->get().name + "' is not of type " + want);
}

template <typename T, typename Src>
EpctxStatus* CopyOut(const char* fn, const std::vector<Src>& src, T* dst, size_t capacity) {
  if (!dst && !src.empty()) return NullArg(fn);
  if (capacity < src.size()) return Capacity(fn, src.size(), capacity);
  for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
  return nullptr;
}

// ---- the table's functions ----
EpctxStatus* CreateStatusImpl(EpctxErrorCode code, const char* message) {
  return Err(code, message ? message : "");
}
EpctxErrorCode GetErrorCodeImpl(const EpctxStatus* s) { return s ? static_cast<EpctxErrorCode>(s->code) : EPCTX_OK; }
const char* GetErrorMessageImpl(const EpctxStatus* s) { return s ? s->message.c_str() : ""; }
void ReleaseStatusImpl(EpctxStatus* s) { delete s; }

void LogImpl(const EpctxLogger* logger, EpctxLoggingLevel level, const char* file, int line, const char* message) {
  static const char* kNames[] = {"VERBOSE", "INFO", "WARNING", "ERROR", "FATAL"};
  // The logger's level (the Env's for registration loggers), unless EPCTX_LOG_LEVEL overrides it.
  const char* env = std::getenv("EPCTX_LOG_LEVEL");
  int threshold = env ? std::atoi(env) : (logger ? logger->level : EPCTX_LOG_WARNING);
  if (level < threshold || level < 0 || level > 4) return;
  std::fprintf(stderr, "[epctx %s%s%s] %s:%d %s\n", kNames[level], logger && !logger->id.empty() ? " " : "",
               logger ? logger->id.c_str() : "", file ? file : "?", line, message ? message : "");
}

EpctxStatus* KvpCreate(EpctxKeyValuePairs** out) {
  if (!out) return NullArg("KeyValuePairs_Create");
  *out = new EpctxKeyValuePairs();
  return nullptr;
}
EpctxStatus* KvpAdd(EpctxKeyValuePairs* k, const char* key, const char* value) {
  if (!k || !key || !value) return NullArg("KeyValuePairs_Add");
  k->Set(key, value);
  return nullptr;
}
const char* KvpGet(const EpctxKeyValuePairs* k, const char* key) {
  if (!k || !key) return nullptr;
  const std::string* v = k->Find(key);
  return v ? v->c_str() : nullptr;
}
void KvpGetAll(const EpctxKeyValuePairs* k, const char* const** keys, const char* const** values, size_t* count) {
  if (!k || !keys || !values || !count) return;
  k->key_ptrs.clear();
  k->value_ptrs.clear();
  for (size_t i = 0; i < k->keys.size(); ++i) {
    k->key_ptrs.push_back(k->keys[i].c_str());
    k->value_ptrs.push_back(k->values[i].c_str());
  }
  *keys = k->key_ptrs.data();
  *values = k->value_ptrs.data();
  *count = k->keys.size();
}
void KvpRelease(EpctxKeyValuePairs* k) { delete k; }

EpctxStatus* GetSessionConfigEntryImpl(const EpctxSessionOptions* o, const char* key, const char** value) {
  if (!o || !key || !value) return NullArg("GetSessionConfigEntry");
  *value = nullptr;
  if (o->entries) {
    auto it = o->entries->find(key);
    if (it != o->entries->end()) *value = it->second.c_str();
  }
  return nullptr;
}
const EpctxKeyValuePairs* GetEnvConfigEntriesImpl() {
  static const EpctxKeyValuePairs kEmpty;
  return g_env_config ? g_env_config : &kEmpty;
}

EpctxHardwareDeviceType HwType(const EpctxHardwareDevice* d) { return d ? d->type : EPCTX_DEVICE_CPU; }
uint32_t HwVendorId(const EpctxHardwareDevice* d) { return d ? d->vendor_id : 0; }
const char* HwVendor(const EpctxHardwareDevice* d) { return d ? d->vendor.c_str() : ""; }
uint32_t HwDeviceId(const EpctxHardwareDevice* d) { return d ? d->device_id : 0; }
const EpctxKeyValuePairs* HwMetadata(const EpctxHardwareDevice* d) { return d ? &d->metadata : nullptr; }
EpctxStatus* CreateHardwareDeviceImpl(EpctxHardwareDeviceType type, uint32_t vendor_id, uint32_t device_id,
                                      const char* vendor_name, const EpctxKeyValuePairs* metadata,
                                      EpctxHardwareDevice** out) {
  if (!out) return NullArg("CreateHardwareDevice");
  if (type != EPCTX_DEVICE_CPU && type != EPCTX_DEVICE_GPU && type != EPCTX_DEVICE_NPU)
    return Err(EPCTX_INVALID_ARGUMENT, "CreateHardwareDevice: unknown device type " + std::to_string(type));
  auto* d = new EpctxHardwareDevice();
  d->type = type;
  d->vendor_id = vendor_id;
  d->device_id = device_id;
  d->vendor = vendor_name ? vendor_name : "";
  if (metadata) d->metadata = *metadata;
  *out = d;
  return nullptr;
}
void ReleaseHardwareDeviceImpl(EpctxHardwareDevice* d) { delete d; }
EpctxStatus* CreateEpDeviceImpl(EpctxEpFactory* factory, const EpctxHardwareDevice* device,
                                const EpctxKeyValuePairs* ep_metadata, const EpctxKeyValuePairs* ep_options,
                                EpctxEpDevice** out) {
  if (!factory || !device || !out) return NullArg("CreateEpDevice");
  auto* d = new EpctxEpDevice();
  d->factory = factory;
  d->device = device;
  if (ep_metadata) d->ep_metadata = *ep_metadata;
  if (ep_options) d->ep_options = *ep_options;
  *out = d;
  return nullptr;
}
void ReleaseEpDeviceImpl(EpctxEpDevice* d) { delete d; }

// Graph view accessors.
const char* GraphName(const EpctxGraph* g) { return g ? g->name.c_str() : ""; }
const char* GraphModelPath(const EpctxGraph* g) { return g ? g->model_path.c_str() : ""; }
int64_t GraphIr(const EpctxGraph* g) { return g ? g->ir_version : 0; }
int64_t GraphOpset(const EpctxGraph* g, const char* domain) {
  if (!g || !g->graph) return -1;
  std::string d = domain ? domain : "";
  if (d == "ai.onnx") d = "";
  auto it = g->graph->opsets.find(d);
  return it == g->graph->opsets.end() ? -1 : it->second;
}
size_t GraphNumNodes(const EpctxGraph* g) { return g ? g->nodes.size() : 0; }
EpctxStatus* GraphNodes(const EpctxGraph* g, const EpctxNode** nodes, size_t capacity) {
  if (!g) return NullArg("Graph_GetNodes");
  std::vector<const EpctxNode*> v;
  for (const auto& n : g->nodes) v.push_back(n.get());
  return CopyOut("Graph_GetNodes", v, nodes, capacity);
}
size_t GraphNumInputs(const EpctxGraph* g) { return g ? g->inputs.size() : 0; }
EpctxStatus* GraphInputs(const EpctxGraph* g, const EpctxValueInfo** out, size_t capacity) {
  if (!g) return NullArg("Graph_GetInputs");
  return CopyOut("Graph_GetInputs", g->inputs, out, capacity);
}
size_t GraphNumOutputs(const EpctxGraph* g) { return g ? g->outputs.size() : 0; }
EpctxStatus* GraphOutputs(const EpctxGraph* g, const EpctxValueInfo** out, size_t capacity) {
  if (!g) return NullArg("Graph_GetOutputs");
  return CopyOut("Graph_GetOutputs", g->outputs, out, capacity);
}
size_t GraphNumInitializers(const EpctxGraph* g) { return g ? g->initializers.size() : 0; }
EpctxStatus* GraphInitializers(const EpctxGraph* g, const EpctxValueInfo** out, size_t capacity) {
  if (!g) return NullArg("Graph_GetInitializers");
  return CopyOut("Graph_GetInitializers", g->initializers, out, capacity);
}
const EpctxNode* GraphParentNode(const EpctxGraph* g) { return g ? g->parent_node : nullptr; }

const char* NodeName(const EpctxNode* n) { return n ? n->get().name.c_str() : ""; }
const char* NodeOp(const EpctxNode* n) { return n ? n->get().op_type.c_str() : ""; }
const char* NodeDomain(const EpctxNode* n) { return n ? n->get().domain.c_str() : ""; }
int64_t NodeSince(const EpctxNode* n) { return n ? n->get().opset : 0; }
size_t NodeId(const EpctxNode* n) { return n ? n->id : 0; }
size_t NodeNumInputs(const EpctxNode* n) { return n ? n->get().inputs.size() : 0; }
EpctxStatus* NodeInputs(const EpctxNode* n, const EpctxValueInfo** out, size_t capacity) {
  if (!n) return NullArg("Node_GetInputs");
  if (n->from_editor) return Err(EPCTX_INVALID_ARGUMENT, "Node_GetInputs: an editor-created node has no value infos");
  return CopyOut("Node_GetInputs", n->inputs, out, capacity);
}
size_t NodeNumOutputs(const EpctxNode* n) { return n ? n->get().outputs.size() : 0; }
EpctxStatus* NodeOutputs(const EpctxNode* n, const EpctxValueInfo** out, size_t capacity) {
  if (!n) return NullArg("Node_GetOutputs");
  if (n->from_editor) return Err(EPCTX_INVALID_ARGUMENT, "Node_GetOutputs: an editor-created node has no value infos");
  return CopyOut("Node_GetOutputs", n->outputs, out, capacity);
}
size_t NodeNumAttrs(const EpctxNode* n) { return n ? n->attrs.size() : 0; }
EpctxStatus* NodeAttrs(const EpctxNode* n, const EpctxOpAttr** out, size_t capacity) {
  if (!n) return NullArg("Node_GetAttributes");
  std::vector<const EpctxOpAttr*> v;
  for (const auto& a : n->attrs) v.push_back(a.get());
  return CopyOut("Node_GetAttributes", v, out, capacity);
}
const EpctxOpAttr* NodeAttrByName(const EpctxNode* n, const char* name) {
  if (!n || !name) return nullptr;
  for (const auto& a : n->attrs)
    if (a->get().name == name) return a.get();
  return nullptr;
}
size_t NodeNumSubgraphs(const EpctxNode* n) { return n ? n->subgraphs.size() : 0; }
EpctxStatus* NodeSubgraphs(const EpctxNode* n, const EpctxGraph** graphs, const char** names, size_t capacity) {
  if (!n) return NullArg("Node_GetSubgraphs");
  if (capacity < n->subgraphs.size()) return Capacity("Node_GetSubgraphs", n->subgraphs.size(), capacity);
  for (size_t i = 0; i < n->subgraphs.size(); ++i) {
    if (graphs) graphs[i] = n->subgraphs[i].get();
    if (names) names[i] = n->subgraph_attr_names[i].c_str();
  }
  return nullptr;
}
const EpctxGraph* NodeGraph(const EpctxNode* n) { return n ? n->graph : nullptr; }

const char* AttrName(const EpctxOpAttr* a) { return a ? a->get().name.c_str() : ""; }
EpctxOpAttrType AttrType(const EpctxOpAttr* a) { return a ? AttrTypeOf(a->get().type) : EPCTX_ATTR_UNDEFINED; }
EpctxStatus* AttrInt(const EpctxOpAttr* a, int64_t* v) {
  if (!a || !v) return NullArg("OpAttr_GetInt");
  if (a->get().type != Attribute::Type::kInt) return WrongAttr(a, "INT");
  *v = a->get().i;
  return nullptr;
}
EpctxStatus* AttrFloat(const EpctxOpAttr* a, float* v) {
  if (!a || !v) return NullArg("OpAttr_GetFloat");
  if (a->get().type != Attribute::Type::kFloat) return WrongAttr(a, "FLOAT");
  *v = a->get().f;
  return nullptr;
}
EpctxStatus* AttrString(const EpctxOpAttr* a, const char** data, size_t* len) {
  if (!a || !data || !len) return NullArg("OpAttr_GetString");
  if (a->get().type != Attribute::Type::kString) return WrongAttr(a, "STRING");
  *data = a->get().s.data();
  *len = a->get().s.size();
  return nullptr;
}
EpctxStatus* AttrInts(const EpctxOpAttr* a, const int64_t** v, size_t* n) {
  if (!a || !v || !n) return NullArg("OpAttr_GetInts");
  if (a->get().type != Attribute::Type::kInts) return WrongAttr(a, "INTS");
  *v = a->get().ints.data();
  *n = a->get().ints.size();
  return nullptr;
}
EpctxStatus* AttrFloats(const EpctxOpAttr* a, const float** v, size_t* n) {
  if (!a || !v || !n) return NullArg("OpAttr_GetFloats");
  if (a->get().type != Attribute::Type::kFloats) return WrongAttr(a, "FLOATS");
  *v = a->get().floats.data();
  *n = a->get().floats.size();
  return nullptr;
}
EpctxStatus* AttrNumStrings(const EpctxOpAttr* a, size_t* n) {
  if (!a || !n) return NullArg("OpAttr_GetNumStrings");
  if (a->get().type != Attribute::Type::kStrings) return WrongAttr(a, "STRINGS");
  *n = a->get().strings.size();
  return nullptr;
}
EpctxStatus* AttrStringAt(const EpctxOpAttr* a, size_t i, const char** data, size_t* len) {
  if (!a || !data || !len) return NullArg("OpAttr_GetStringAt");
  if (a->get().type != Attribute::Type::kStrings) return WrongAttr(a, "STRINGS");
  if (i >= a->get().strings.size())
    return Err(EPCTX_INVALID_ARGUMENT, "OpAttr_GetStringAt: index " + std::to_string(i) + " out of range");
  *data = a->get().strings[i].data();
  *len = a->get().strings[i].size();
  return nullptr;
}
EpctxStatus* AttrTensor(const EpctxOpAttr* a, const EpctxValue** v) {
  if (!a || !v) return NullArg("OpAttr_GetTensor");
  if (a->get().type != Attribute::Type::kTensor) return WrongAttr(a, "TENSOR");
  if (!a->tensor_value) a->tensor_value.reset(new EpctxValue{a->get().t, false});
  *v = a->tensor_value.get();
  return nullptr;
}
EpctxStatus* AttrGraph(const EpctxOpAttr* a, const EpctxGraph** g) {
  if (!a || !g) return NullArg("OpAttr_GetGraph");
  if (a->get().type != Attribute::Type::kGraph || !a->get().g) return WrongAttr(a, "GRAPH");
  if (!a->graph_view) a->graph_view = BuildGraphView(*a->get().g, {}, "", 0, a->get().g->name, true);
  *g = a->graph_view.get();
  return nullptr;
}

const char* ViName(const EpctxValueInfo* v) { return v ? v->name.c_str() : ""; }
EpctxValueKind ViKind(const EpctxValueInfo* v) { return v ? KindOf(v->type) : EPCTX_VALUE_UNKNOWN; }
EpctxElementType ViElem(const EpctxValueInfo* v) {
  return v ? static_cast<EpctxElementType>(v->type.elem_type) : EPCTX_ELEMENT_UNDEFINED;
}
int64_t ViRank(const EpctxValueInfo* v) {
  if (!v) return -1;
  if (v->initializer) return static_cast<int64_t>(v->initializer->rank());
  return v->type.has_shape ? static_cast<int64_t>(v->type.dims.size()) : -1;
}
EpctxStatus* ViShape(const EpctxValueInfo* v, int64_t* dims, const char** symbols, size_t capacity) {
  if (!v) return NullArg("ValueInfo_GetShape");
  int64_t rank = ViRank(v);
  if (rank < 0) return Err(EPCTX_INVALID_ARGUMENT, "ValueInfo_GetShape: '" + v->name + "' has no known shape");
  if (capacity < static_cast<size_t>(rank)) return Capacity("ValueInfo_GetShape", rank, capacity);
  for (int64_t i = 0; i < rank; ++i) {
    if (v->initializer) {
      if (dims) dims[i] = v->initializer->dim(i);
      if (symbols) symbols[i] = "";
    } else {
      if (dims) dims[i] = v->type.dims[i].known() ? v->type.dims[i].value : -1;
      if (symbols) symbols[i] = v->type.dims[i].symbol.c_str();
    }
  }
  return nullptr;
}
EpctxStatus* ViProducer(const EpctxValueInfo* v, const EpctxNode** node, size_t* index) {
  if (!v || !node) return NullArg("ValueInfo_GetProducer");
  *node = v->producer;
  if (index) *index = v->producer_output;
  return nullptr;
}
size_t ViNumConsumers(const EpctxValueInfo* v) { return v ? v->consumers.size() : 0; }
EpctxStatus* ViConsumers(const EpctxValueInfo* v, const EpctxNode** nodes, int64_t* idx, size_t capacity) {
  if (!v) return NullArg("ValueInfo_GetConsumers");
  if (capacity < v->consumers.size()) return Capacity("ValueInfo_GetConsumers", v->consumers.size(), capacity);
  for (size_t i = 0; i < v->consumers.size(); ++i) {
    if (nodes) nodes[i] = v->consumers[i].first;
    if (idx) idx[i] = v->consumers[i].second;
  }
  return nullptr;
}
bool ViIsGraphInput(const EpctxValueInfo* v) { return v && v->is_graph_input; }
bool ViIsGraphOutput(const EpctxValueInfo* v) { return v && v->is_graph_output; }
bool ViIsInitializer(const EpctxValueInfo* v) { return v && v->is_initializer; }
bool ViIsConstant(const EpctxValueInfo* v) { return v && v->is_constant; }
bool ViIsOuter(const EpctxValueInfo* v) { return v && v->outer; }
EpctxStatus* ViInitializerValue(const EpctxValueInfo* v, const EpctxValue** out) {
  if (!v || !out) return NullArg("ValueInfo_GetInitializerValue");
  if (!v->initializer) return Err(EPCTX_INVALID_ARGUMENT, "'" + v->name + "' is not an initializer");
  if (!v->initializer_value) v->initializer_value.reset(new EpctxValue{*v->initializer, false});
  *out = v->initializer_value.get();
  return nullptr;
}
EpctxStatus* ViExternal(const EpctxValueInfo* v, const char** path, int64_t* offset, size_t* size) {
  if (!v || !path || !offset || !size) return NullArg("ValueInfo_GetExternalInitializerInfo");
  if (!v->external) {
    *path = nullptr;
    return nullptr;
  }
  *path = v->external->path.c_str();
  *offset = static_cast<int64_t>(v->external->offset);
  *size = v->external->size;
  return nullptr;
}

EpctxElementType ValElem(const EpctxValue* v) { return v ? static_cast<EpctxElementType>(v->tensor.dtype()) : EPCTX_ELEMENT_UNDEFINED; }
size_t ValRank(const EpctxValue* v) { return v ? v->tensor.rank() : 0; }
EpctxStatus* ValShape(const EpctxValue* v, int64_t* dims, size_t capacity) {
  if (!v) return NullArg("Value_GetShape");
  return CopyOut("Value_GetShape", v->tensor.shape(), dims, capacity);
}
int64_t ValCount(const EpctxValue* v) { return v ? v->tensor.NumElements() : 0; }
const void* ValData(const EpctxValue* v) { return v ? v->tensor.raw_data() : nullptr; }
void* ValMutableData(EpctxValue* v) { return v && v->writable ? v->tensor.raw_data() : nullptr; }

EpctxStatus* SupportAddNodes(EpctxEpGraphSupportInfo* info, const EpctxNode* const* nodes, size_t count) {
  if (!info || (!nodes && count)) return NullArg("EpGraphSupportInfo_AddNodesToFuse");
  if (count == 0) return Err(EPCTX_INVALID_ARGUMENT, "EpGraphSupportInfo_AddNodesToFuse: no nodes given");
  std::vector<const EpctxNode*> group;
  for (size_t i = 0; i < count; ++i) {
    const EpctxNode* n = nodes[i];
    if (!n || n->graph != info->graph)
      return Err(EPCTX_INVALID_ARGUMENT, "EpGraphSupportInfo_AddNodesToFuse: node " + std::to_string(i) +
                                             " does not belong to the graph given to GetCapability");
    if (info->claimed[n->id])
      return Err(EPCTX_INVALID_ARGUMENT, "EpGraphSupportInfo_AddNodesToFuse: node '" + n->get().name +
                                             "' is claimed twice");
    info->claimed[n->id] = true;
    group.push_back(n);
  }
  info->groups.push_back(std::move(group));
  return nullptr;
}
EpctxStatus* SupportAddSingle(EpctxEpGraphSupportInfo* info, const EpctxNode* node) {
  return SupportAddNodes(info, &node, 1);
}

EpctxStatus* SupportSetRejectionReason(EpctxEpGraphSupportInfo* info, const EpctxNode* node, const char* reason) {
  if (!info || !node || !reason) return NullArg("EpGraphSupportInfo_SetNodeRejectionReason");
  if (node->graph != info->graph)
    return Err(EPCTX_INVALID_ARGUMENT, "EpGraphSupportInfo_SetNodeRejectionReason: node '" + node->get().name +
                                           "' does not belong to the graph given to GetCapability");
  info->rejection_reasons[node->id] = reason;
  return nullptr;
}

const char* ComputeCtxName(const EpctxNodeComputeContext* c) { return c ? c->node_name.c_str() : ""; }
size_t KcInputCount(const EpctxKernelContext* c) { return c ? c->inputs.size() : 0; }
size_t KcOutputCount(const EpctxKernelContext* c) { return c ? c->outputs.size() : 0; }
EpctxStatus* KcInput(const EpctxKernelContext* c, size_t i, const EpctxValue** v) {
  if (!c || !v) return NullArg("KernelContext_GetInput");
  if (i >= c->inputs.size())
    return Err(EPCTX_INVALID_ARGUMENT, "KernelContext_GetInput: index " + std::to_string(i) + " out of range (" +
                                           std::to_string(c->inputs.size()) + " inputs)");
  *v = &c->inputs[i];
  return nullptr;
}
EpctxStatus* KcOutput(EpctxKernelContext* c, size_t i, const int64_t* dims, size_t rank, EpctxValue** v) {
  if (!c || !v || (!dims && rank)) return NullArg("KernelContext_GetOutput");
  if (i >= c->outputs.size())
    return Err(EPCTX_INVALID_ARGUMENT, "KernelContext_GetOutput: index " + std::to_string(i) + " out of range (" +
                                           std::to_string(c->outputs.size()) + " outputs)");
  if (c->outputs[i]) return Err(EPCTX_INVALID_ARGUMENT, "KernelContext_GetOutput: output " + std::to_string(i) + " was already allocated");
  // The element type is the fused node's declared output type (from the model's type inference).
  auto* kctx = c->ctx;
  DataType dtype = i < c->output_types.size() ? c->output_types[i] : DataType::kUndefined;
  if (dtype == DataType::kUndefined)
    return Err(EPCTX_FAIL, "KernelContext_GetOutput: the element type of output " + std::to_string(i) + " is unknown");
  for (size_t d = 0; d < rank; ++d)
    if (dims[d] < 0) return Err(EPCTX_INVALID_ARGUMENT, "KernelContext_GetOutput: negative dimension");
  auto r = kctx->Output(i, dtype, Shape(dims, dims + rank));
  if (!r.ok()) return ToEpctxStatus(r.status());
  c->outputs[i].reset(new EpctxValue{*r.value(), true});
  // Keep the IValue in the context and the EpctxValue pointing at the same memory (Tensor copies share it).
  *v = c->outputs[i].get();
  return nullptr;
}

EpctxStatus* CreateOpAttrImpl(const char* name, const void* data, size_t length, EpctxOpAttrType type,
                              EpctxOpAttr** out) {
  if (!name || !out || (!data && length && type != EPCTX_ATTR_INT && type != EPCTX_ATTR_FLOAT)) return NullArg("CreateOpAttr");
  auto a = std::make_unique<EpctxOpAttr>();
  Attribute& at = a->owned;
  at.name = name;
  switch (type) {
    case EPCTX_ATTR_INT:
      if (!data) return NullArg("CreateOpAttr");
      at.type = Attribute::Type::kInt;
      std::memcpy(&at.i, data, sizeof(int64_t));
      break;
    case EPCTX_ATTR_FLOAT:
      if (!data) return NullArg("CreateOpAttr");
      at.type = Attribute::Type::kFloat;
      std::memcpy(&at.f, data, sizeof(float));
      break;
    case EPCTX_ATTR_STRING:
      at.type = Attribute::Type::kString;
      at.s.assign(static_cast<const char*>(data), length);
      break;
    case EPCTX_ATTR_INTS:
      at.type = Attribute::Type::kInts;
      at.ints.assign(static_cast<const int64_t*>(data), static_cast<const int64_t*>(data) + length);
      break;
    case EPCTX_ATTR_FLOATS:
      at.type = Attribute::Type::kFloats;
      at.floats.assign(static_cast<const float*>(data), static_cast<const float*>(data) + length);
      break;
    case EPCTX_ATTR_STRINGS: {
      at.type = Attribute::Type::kStrings;
      auto* strs = static_cast<const char* const*>(data);
      for (size_t i = 0; i < length; ++i) {
        if (!strs[i]) return NullArg("CreateOpAttr");
        at.strings.push_back(strs[i]);
      }
      break;
    }
    default:
      return Err(EPCTX_INVALID_ARGUMENT, std::string("CreateOpAttr: attribute '") + name + "' has an unsupported type " +
                                             std::to_string(type));
  }
  *out = a.release();
  return nullptr;
}
void ReleaseOpAttrImpl(EpctxOpAttr* a) { delete a; }

EpctxStatus* CreateNodeImpl(const char* op_type, const char* domain, const char* node_name, const char* const* in,
                            size_t n_in, const char* const* out, size_t n_out, EpctxOpAttr** attrs, size_t n_attrs,
                            EpctxNode** node) {
  std::vector<std::unique_ptr<EpctxOpAttr>> owned;
  for (size_t i = 0; i < n_attrs; ++i)
    if (attrs && attrs[i]) owned.emplace_back(attrs[i]);
  if (!op_type || !node || (!in && n_in) || (!out && n_out) || (!attrs && n_attrs)) return NullArg("CreateNode");
  auto n = std::make_unique<EpctxNode>();
  n->from_editor = true;
  n->owned.op_type = op_type;
  n->owned.domain = domain ? domain : "";
  n->owned.name = node_name ? node_name : "";
  for (size_t i = 0; i < n_in; ++i) n->owned.inputs.push_back(in[i] ? in[i] : "");
  for (size_t i = 0; i < n_out; ++i) n->owned.outputs.push_back(out[i] ? out[i] : "");
  for (auto& a : owned) {
    n->owned.attributes[a->get().name] = a->get();
    n->attrs.push_back(std::move(a));
  }
  *node = n.release();
  return nullptr;
}
void ReleaseNodeImpl(EpctxNode* n) { delete n; }

EpctxStatus* SinkAddEvent(EpctxProfilingEventSink* sink, const char* name, const char* category, int64_t start_us,
                          int64_t duration_us, const EpctxKeyValuePairs* args) {
  if (!sink || !name) return NullArg("ProfilingEventSink_AddEvent");
  EpctxProfilingEventSink::Event e{name, category ? category : "ep", start_us, duration_us, {}};
  if (args) e.args = args->ToMap();
  sink->events.push_back(std::move(e));
  return nullptr;
}

EpctxStatus* ReportLoad(const EpctxNode* fused, const char* file, uint64_t mapped, uint64_t read, double ms) {
  if (!fused) return NullArg("ReportEpContextLoad");
  if (ms < 0) return Err(EPCTX_INVALID_ARGUMENT, "ReportEpContextLoad: negative time");
  fused->load_reported = true;
  fused->load_file = file ? file : "";
  fused->bytes_mapped = mapped;
  fused->bytes_read = read;
  fused->load_ms = ms;
  return nullptr;
}

EpctxApi MakeApi() {
  EpctxApi a{};
  a.version = EPCTX_EP_API_VERSION;
  a.CreateStatus = CreateStatusImpl;
  a.GetErrorCode = GetErrorCodeImpl;
  a.GetErrorMessage = GetErrorMessageImpl;
  a.ReleaseStatus = ReleaseStatusImpl;
  a.Log = LogImpl;
  a.KeyValuePairs_Create = KvpCreate;
  a.KeyValuePairs_Add = KvpAdd;
  a.KeyValuePairs_Get = KvpGet;
  a.KeyValuePairs_GetAll = KvpGetAll;
  a.KeyValuePairs_Release = KvpRelease;
  a.GetSessionConfigEntry = GetSessionConfigEntryImpl;
  a.GetEnvConfigEntries = GetEnvConfigEntriesImpl;
  a.HardwareDevice_Type = HwType;
  a.HardwareDevice_VendorId = HwVendorId;
  a.HardwareDevice_Vendor = HwVendor;
  a.HardwareDevice_DeviceId = HwDeviceId;
  a.HardwareDevice_Metadata = HwMetadata;
  a.CreateHardwareDevice = CreateHardwareDeviceImpl;
  a.ReleaseHardwareDevice = ReleaseHardwareDeviceImpl;
  a.CreateEpDevice = CreateEpDeviceImpl;
  a.ReleaseEpDevice = ReleaseEpDeviceImpl;
  a.Graph_GetName = GraphName;
  a.Graph_GetModelPath = GraphModelPath;
  a.Graph_GetOnnxIRVersion = GraphIr;
  a.Graph_GetOpsetVersion = GraphOpset;
  a.Graph_GetNumNodes = GraphNumNodes;
  a.Graph_GetNodes = GraphNodes;
  a.Graph_GetNumInputs = GraphNumInputs;
  a.Graph_GetInputs = GraphInputs;
  a.Graph_GetNumOutputs = GraphNumOutputs;
  a.Graph_GetOutputs = GraphOutputs;
  a.Graph_GetNumInitializers = GraphNumInitializers;
  a.Graph_GetInitializers = GraphInitializers;
  a.Graph_GetParentNode = GraphParentNode;
  a.Node_GetName = NodeName;
  a.Node_GetOperatorType = NodeOp;
  a.Node_GetDomain = NodeDomain;
  a.Node_GetSinceVersion = NodeSince;
  a.Node_GetId = NodeId;
  a.Node_GetNumInputs = NodeNumInputs;
  a.Node_GetInputs = NodeInputs;
  a.Node_GetNumOutputs = NodeNumOutputs;
  a.Node_GetOutputs = NodeOutputs;
  a.Node_GetNumAttributes = NodeNumAttrs;
  a.Node_GetAttributes = NodeAttrs;
  a.Node_GetAttributeByName = NodeAttrByName;
  a.Node_GetNumSubgraphs = NodeNumSubgraphs;
  a.Node_GetSubgraphs = NodeSubgraphs;
  a.Node_GetGraph = NodeGraph;
  a.OpAttr_GetName = AttrName;
  a.OpAttr_GetType = AttrType;
  a.OpAttr_GetInt = AttrInt;
  a.OpAttr_GetFloat = AttrFloat;
  a.OpAttr_GetString = AttrString;
  a.OpAttr_GetInts = AttrInts;
  a.OpAttr_GetFloats = AttrFloats;
  a.OpAttr_GetNumStrings = AttrNumStrings;
  a.OpAttr_GetStringAt = AttrStringAt;
  a.OpAttr_GetTensor = AttrTensor;
  a.OpAttr_GetGraph = AttrGraph;
  a.ValueInfo_GetName = ViName;
  a.ValueInfo_GetKind = ViKind;
  a.ValueInfo_GetElementType = ViElem;
  a.ValueInfo_GetRank = ViRank;
  a.ValueInfo_GetShape = ViShape;
  a.ValueInfo_GetProducer = ViProducer;
  a.ValueInfo_GetNumConsumers = ViNumConsumers;
  a.ValueInfo_GetConsumers = ViConsumers;
  a.ValueInfo_IsGraphInput = ViIsGraphInput;
  a.ValueInfo_IsGraphOutput = ViIsGraphOutput;
  a.ValueInfo_IsInitializer = ViIsInitializer;
  a.ValueInfo_IsConstantInitializer = ViIsConstant;
  a.ValueInfo_IsFromOuterScope = ViIsOuter;
  a.ValueInfo_GetInitializerValue = ViInitializerValue;
  a.ValueInfo_GetExternalInitializerInfo = ViExternal;
  a.Value_GetElementType = ValElem;
  a.Value_GetRank = ValRank;
  a.Value_GetShape = ValShape;
  a.Value_GetElementCount = ValCount;
  a.Value_GetData = ValData;
  a.Value_GetMutableData = ValMutableData;
  a.EpGraphSupportInfo_AddNodesToFuse = SupportAddNodes;
  a.EpGraphSupportInfo_AddSingleNode = SupportAddSingle;
  a.NodeComputeContext_NodeName = ComputeCtxName;
  a.KernelContext_GetInputCount = KcInputCount;
  a.KernelContext_GetOutputCount = KcOutputCount;
  a.KernelContext_GetInput = KcInput;
  a.KernelContext_GetOutput = KcOutput;
  a.CreateOpAttr = CreateOpAttrImpl;
  a.ReleaseOpAttr = ReleaseOpAttrImpl;
  a.CreateNode = CreateNodeImpl;
  a.ReleaseNode = ReleaseNodeImpl;
  a.ProfilingEventSink_AddEvent = SinkAddEvent;
  a.ReportEpContextLoad = ReportLoad;
  a.EpGraphSupportInfo_SetNodeRejectionReason = SupportSetRejectionReason;
  return a;
}

const EpctxApi* GetApiImpl(uint32_t version) {
  static const EpctxApi api = MakeApi();
  return version >= 1 && version <= EPCTX_EP_API_VERSION ? &api : nullptr;
}
const char* GetVersionStringImpl() { return EPCTX_VERSION; }

}  // namespace

const EpctxApi* GetEpctxApi() { return GetApiImpl(EPCTX_EP_API_VERSION); }
const EpctxApiBase* GetEpctxApiBase() {
  static const EpctxApiBase base{GetApiImpl, GetVersionStringImpl};
  return &base;
}

Status FromEpctxStatus(EpctxStatus* status, const std::string& context) {
  if (!status) return Status::OK();
  std::unique_ptr<EpctxStatus> owned(status);
  ErrorCode code = owned->code == ErrorCode::OK ? ErrorCode::EP_FAIL : owned->code;
  return Status(code, context.empty() ? owned->message : context + ": " + owned->message);
}

EpctxStatus* ToEpctxStatus(const Status& s) {
  if (s.ok()) return nullptr;
  return new EpctxStatus{s.code(), s.message()};
}

void SetEnvConfigForPlugins(const EpctxKeyValuePairs* config) { g_env_config = config; }

std::unique_ptr<EpctxGraph> BuildGraphView(const Graph& graph, const std::vector<size_t>& node_indices,
                                           const std::string& model_path, int64_t ir_version, const std::string& name,
                                           bool whole_graph) {
  auto view = std::make_unique<EpctxGraph>();
  view->graph = &graph;
  view->name = name;
  view->model_path = model_path;
  view->ir_version = ir_version;
  std::vector<size_t> indices = node_indices;
  if (whole_graph) {
    auto order = graph.TopologicalOrder();
    if (order.ok()) indices = order.value();
    else
      for (size_t i = 0; i < graph.nodes.size(); ++i) indices.push_back(i);
  }
  std::set<std::string> graph_inputs, graph_outputs;
  for (const auto& in : graph.inputs) graph_inputs.insert(in.name);
  for (const auto& out : graph.outputs) graph_outputs.insert(out.name);
  std::set<std::string> produced_inside;
  for (size_t idx : indices)
    for (const auto& o : graph.nodes[idx].outputs)
      if (!o.empty()) produced_inside.insert(o);
  auto value = [&](const std::string& n) -> EpctxValueInfo* {
    auto it = view->values.find(n);
    if (it != view->values.end()) return it->second.get();
    auto vi = std::make_unique<EpctxValueInfo>();
    vi->name = n;
    // Values of enclosing scopes keep the type their own graph knows.
    for (const Graph* gg = &graph; gg; gg = gg->parent)
      if (const ValueType* t = gg->FindType(n)) {
        vi->type = *t;
        break;
      }
    auto init = graph.initializers.find(n);
    if (init != graph.initializers.end()) {
      vi->is_initializer = true;
      vi->initializer = &init->second;
      vi->is_constant = !graph_inputs.count(n);
      vi->type.kind = ValueType::Kind::kTensor;
      vi->type.elem_type = init->second.dtype();
      auto ext = graph.external_initializers.find(n);
      if (ext != graph.external_initializers.end()) vi->external = &ext->second;
    }
    vi->is_graph_input = graph_inputs.count(n) > 0;
    vi->is_graph_output = graph_outputs.count(n) > 0;
    vi->outer = !vi->is_graph_input && !vi->is_initializer && !produced_inside.count(n) && graph.parent != nullptr;
    // An initializer of an enclosing graph (a subgraph's weights often live in the main graph): as in ONNX Runtime,
    // ValueInfo_IsInitializer / IsConstantInitializer / GetInitializerValue answer for it too.
    if (vi->outer && !graph.FindType(n)) {
      for (const Graph* gg = graph.parent; gg; gg = gg->parent) {
        auto oi = gg->initializers.find(n);
        if (oi == gg->initializers.end()) {
          bool defined = false;  // the name is a value of this enclosing graph: not an initializer further out
          for (const auto& in : gg->inputs) defined |= in.name == n;
          for (const auto& nd : gg->nodes)
            for (const auto& o : nd.outputs) defined |= o == n;
          if (defined) break;
          continue;
        }
        bool overridable = false;
        for (const auto& in : gg->inputs) overridable |= in.name == n;
        vi->is_initializer = true;
        vi->initializer = &oi->second;
        vi->is_constant = !overridable;
        vi->type.kind = ValueType::Kind::kTensor;
        vi->type.elem_type = oi->second.dtype();
        auto ext = gg->external_initializers.find(n);
        if (ext != gg->external_initializers.end()) vi->external = &ext->second;
        break;
      }
    }
    EpctxValueInfo* raw = vi.get();
    view->values[n] = std::move(vi);
    return raw;
  };
  std::set<std::string> inside_inputs_seen;
  for (size_t k = 0; k < indices.size(); ++k) {
    const Node& node = graph.nodes[indices[k]];
    auto nv = std::make_unique<EpctxNode>();
    nv->node = &node;
    nv->graph = view.get();
    nv->id = k;
    for (const auto& [an, a] : node.attributes) {
      auto av = std::make_unique<EpctxOpAttr>();
      av->attr = &a;
      nv->attrs.push_back(std::move(av));
      if (a.type == Attribute::Type::kGraph && a.g) {
        auto sub = BuildGraphView(*a.g, {}, model_path, ir_version, a.g->name, true);
        sub->parent_node = nv.get();
        nv->subgraphs.push_back(std::move(sub));
        nv->subgraph_attr_names.push_back(an);
      }
    }
    view->nodes.push_back(std::move(nv));
  }
  for (auto& nv : view->nodes) {
    const Node& node = *nv->node;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i].empty()) {
        nv->inputs.push_back(nullptr);
        continue;
      }
      EpctxValueInfo* vi = value(node.inputs[i]);
      vi->consumers.emplace_back(nv.get(), static_cast<int64_t>(i));
      nv->inputs.push_back(vi);
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i].empty()) {
        nv->outputs.push_back(nullptr);
        continue;
      }
      EpctxValueInfo* vi = value(node.outputs[i]);
      vi->producer = nv.get();
      vi->producer_output = i;
      nv->outputs.push_back(vi);
    }
  }
  if (whole_graph) {
    for (const auto& in : graph.inputs) view->inputs.push_back(value(in.name));
    for (const auto& out : graph.outputs) view->outputs.push_back(value(out.name));
    for (const auto& [n, t] : graph.initializers) view->initializers.push_back(value(n));
    return view;
  }
  // A partial view: boundary values become its inputs/outputs, in first-use order.
  std::set<std::string> consumed_outside;
  std::set<size_t> inside(indices.begin(), indices.end());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (inside.count(i)) continue;
    for (const auto& in : graph.nodes[i].inputs) consumed_outside.insert(in);
    // values read by subgraphs of outside nodes count too
    for (const auto& [an, a] : graph.nodes[i].attributes)
      if (a.g)
        for (const auto& sn : a.g->nodes)
          for (const auto& in : sn.inputs) consumed_outside.insert(in);
  }
  std::set<std::string> added;
  for (auto& nv : view->nodes) {
    for (const EpctxValueInfo* vi : nv->inputs) {
      if (!vi || produced_inside.count(vi->name) || added.count(vi->name)) continue;
      added.insert(vi->name);
      if (vi->is_constant) view->initializers.push_back(vi);
      else view->inputs.push_back(vi);
    }
  }
  for (auto& nv : view->nodes)
    for (const EpctxValueInfo* vi : nv->outputs)
      if (vi && (consumed_outside.count(vi->name) || graph_outputs.count(vi->name))) view->outputs.push_back(vi);
  return view;
}

}  // namespace epctx
