// The runtime's side of the plugin EP ABI: the concrete types behind ep_api.h's opaque handles, the EpctxApi
// table, and the graph views handed to GetCapability and Compile. Plugins only ever see the C handles.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "epctx/ep_api.h"
#include "graph/graph.h"

struct EpctxStatus {
  epctx::ErrorCode code;
  std::string message;
};

struct EpctxKeyValuePairs {
  std::vector<std::string> keys, values;
  mutable std::vector<const char*> key_ptrs, value_ptrs;  // rebuilt by GetAll
  void Set(const std::string& k, const std::string& v);
  const std::string* Find(const std::string& k) const;
  std::map<std::string, std::string> ToMap() const;
};

struct EpctxHardwareDevice {
  EpctxHardwareDeviceType type = EPCTX_DEVICE_CPU;
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  std::string vendor;
  EpctxKeyValuePairs metadata;
  bool IsVirtual() const {
    const std::string* v = metadata.Find("is_virtual");
    return v && *v == "1";
  }
};

struct EpctxEpDevice {
  EpctxEpFactory* factory = nullptr;
  const EpctxHardwareDevice* device = nullptr;
  std::unique_ptr<EpctxHardwareDevice> owned_device;  // a device the factory created
  EpctxKeyValuePairs ep_metadata, ep_options;
  std::string ep_name, ep_vendor;
  std::string library_name;  // registration name
};

struct EpctxSessionOptions {
  const std::map<std::string, std::string>* entries = nullptr;
};

struct EpctxRunOptions {
  int unused = 0;
};

struct EpctxLogger {
  std::string id;
  int level = EPCTX_LOG_WARNING;  // messages below it are dropped
};

struct EpctxValue {
  epctx::Tensor tensor;
  bool writable = false;
};

struct EpctxOpAttr {
  // Either a view of a graph attribute or an attribute created by CreateOpAttr (owned).
  const epctx::Attribute* attr = nullptr;
  epctx::Attribute owned;
  mutable std::unique_ptr<EpctxValue> tensor_value;
  mutable std::unique_ptr<struct EpctxGraph> graph_view;
  const epctx::Attribute& get() const { return attr ? *attr : owned; }
};

// A node made by CreateNode (an EPContext node returned from Compile).
struct EpctxNode;
struct EpctxValueInfo;

// A read-only view of a graph (or of the part of it given to one EP) with stable handles.
struct EpctxGraph {
  const epctx::Graph* graph = nullptr;
  std::string name;
  std::string model_path;
  int64_t ir_version = 0;
  const EpctxNode* parent_node = nullptr;
  std::vector<std::unique_ptr<EpctxNode>> nodes;  // topological order
  std::map<std::string, std::unique_ptr<EpctxValueInfo>> values;
  std::vector<const EpctxValueInfo*> inputs, outputs, initializers;
};

struct EpctxNode {
  // A view node (graph != null) or an editor-created node (owned fields only).
  const epctx::Node* node = nullptr;
  const EpctxGraph* graph = nullptr;
  size_t id = 0;
  std::vector<const EpctxValueInfo*> inputs, outputs;
  std::vector<std::unique_ptr<EpctxOpAttr>> attrs;
  std::vector<std::unique_ptr<EpctxGraph>> subgraphs;
  std::vector<std::string> subgraph_attr_names;
  std::vector<const char*> subgraph_attr_name_ptrs;
  // Load facts an EP reported for the fused node it compiled (ReportEpContextLoad).
  mutable bool load_reported = false;
  mutable std::string load_file;
  mutable uint64_t bytes_mapped = 0, bytes_read = 0;
  mutable double load_ms = 0;
  // Editor-created nodes:
  bool from_editor = false;
  epctx::Node owned;
  const epctx::Node& get() const { return node ? *node : owned; }
};

struct EpctxValueInfo {
  std::string name;
  epctx::ValueType type;
  const EpctxNode* producer = nullptr;
  size_t producer_output = 0;
  std::vector<std::pair<const EpctxNode*, int64_t>> consumers;
  bool is_graph_input = false, is_graph_output = false, is_initializer = false, is_constant = false, outer = false;
  const epctx::Tensor* initializer = nullptr;
  mutable std::unique_ptr<EpctxValue> initializer_value;
  const epctx::Graph::ExternalLocation* external = nullptr;
  mutable std::vector<const char*> symbol_ptrs;
};

struct EpctxEpGraphSupportInfo {
  const EpctxGraph* graph = nullptr;
  std::vector<std::vector<const EpctxNode*>> groups;
  std::vector<bool> claimed;  // by node id
  std::map<size_t, std::string> rejection_reasons;  // by node id (EpGraphSupportInfo_SetNodeRejectionReason)
};

struct EpctxNodeComputeContext {
  std::string node_name;
};

namespace epctx {
class KernelContext;
}
struct EpctxKernelContext {
  epctx::KernelContext* ctx = nullptr;
  std::vector<EpctxValue> inputs;
  std::vector<std::unique_ptr<EpctxValue>> outputs;
  std::vector<epctx::DataType> output_types;
};

struct EpctxProfilingEventSink {
  struct Event {
    std::string name, category;
    int64_t start_us, duration_us;
    std::map<std::string, std::string> args;
  };
  std::vector<Event> events;
};

namespace epctx {

// The table handed to plugins, and its base.
const EpctxApi* GetEpctxApi();
const EpctxApiBase* GetEpctxApiBase();

// Converts a plugin status (taking ownership; NULL = OK) into a Status; `context` prefixes the message.
Status FromEpctxStatus(EpctxStatus* status, const std::string& context);
EpctxStatus* ToEpctxStatus(const Status& status);

// Environment config visible to plugins through GetEnvConfigEntries (set by the Env while a call is in progress).
void SetEnvConfigForPlugins(const EpctxKeyValuePairs* config);

// Builds a view of `graph` holding only the nodes at `node_indices` (all nodes when empty and `all` is true).
// Values read by these nodes but produced elsewhere become the view's inputs; values they produce that are
// read elsewhere (or are graph outputs) become its outputs; constant initializers they read are its initializers.
std::unique_ptr<EpctxGraph> BuildGraphView(const Graph& graph, const std::vector<size_t>& node_indices,
                                           const std::string& model_path, int64_t ir_version,
                                           const std::string& name, bool whole_graph);

}  // namespace epctx
