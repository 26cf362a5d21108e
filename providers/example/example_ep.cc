// ExampleExecutionProvider: the template plugin EP. Copy this folder to start a new EP.
//
// This file is the ABI glue; example_program.h is the "backend" (a Program per fused graph and its interpreter),
// the part a real EP replaces with its compiler. The glue includes only <epctx/ep_api.h>, reaches the runtime only
// through the EpctxApi table given to CreateEpFactories, and links nothing from epctx; exports.map leaves exactly the
// two entry points visible. Every plugin object derives from the C table the runtime calls through, so `this_ptr`
// casts back to it. Every function reached through a table is noexcept in effect: Guard() turns a C++ exception
// into a status, because no exception may cross the ABI.
//
// Sections: 1 helpers, 2 state shared by an EP and its compute infos/profilers, 3 GetCapability, 4 Compile,
// 4b EPContext generation and loading, 5 the EP, 6 the factory, 7 the two exported entry points.
#include <epctx/ep_api.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/context_util.h"
#include "example_program.h"

namespace {

using namespace example;  // Program, Shape, Op, Run, Serialize
namespace plugin = epctx::plugin;  // EPContext helpers shared with the other plugin EPs (providers/common)

// ---- 1. helpers ----

constexpr const char* kEpName = "ExampleExecutionProvider";
constexpr const char* kVendor = "epctx";
constexpr uint32_t kVendorId = 0xE9C7;
constexpr const char* kVersion = "0.1.0";
constexpr const char* kCompatibilityInfo = "example:0.1.0";
constexpr const char* kOptionPrefix = "ep.exampleexecutionprovider.";  // provider options: ep.<lowercase name>.<key>

#define RETURN_IF_ERROR(expr)                            \
  do {                                                   \
    if (EpctxStatus* status_ = (expr)) return status_;   \
  } while (0)
#define EXAMPLE_LOG(api, logger, level, msg) (api)->Log((logger), (level), __FILE__, __LINE__, (msg))

EpctxStatus* Error(const EpctxApi* api, EpctxErrorCode code, const std::string& message) {
  return plugin::EpError(api, kEpName, code, message);
}

// Runs `body` (returning EpctxStatus*) and converts what it throws (std::bad_alloc from a container, mostly).
template <typename Body>
EpctxStatus* Guard(const EpctxApi* api, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return Error(api, EPCTX_RUNTIME_EXCEPTION, e.what());
  } catch (...) {
    return Error(api, EPCTX_RUNTIME_EXCEPTION, "unknown exception");
  }
}

// Static shape of a value info; false when the rank is unknown.
bool ValueInfoShape(const EpctxApi* api, const EpctxValueInfo* vi, Shape* shape) {
  const int64_t rank = api->ValueInfo_GetRank(vi);
  if (rank < 0) return false;
  shape->resize(static_cast<size_t>(rank));
  std::vector<const char*> symbols(shape->size());  // dim_param names, unused
  EpctxStatus* st = api->ValueInfo_GetShape(vi, shape->data(), symbols.data(), shape->size());
  if (st) api->ReleaseStatus(st);
  return st == nullptr;
}

int64_t NowUs() {  // CLOCK_MONOTONIC: the clock of EpctxEpProfiler::StartProfiling's epoch
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// ---- 2. state shared by an EP, its compute infos and its profilers (either may be released first) ----

struct Profiler;
struct Shared {
  const EpctxApi* api;
  std::atomic<float> relu_clip{0.f};  // dynamic option; 0 = off
  std::mutex mu;
  std::vector<Profiler*> profiling;  // profilers between StartProfiling and EndProfiling, guarded by mu
  std::atomic<size_t> num_profiling{0};
  explicit Shared(const EpctxApi* a) : api(a) {}
};

struct ProfileEvent {
  int64_t start_us, duration_us;
  std::string node;
};

// Collects one "example_compute" event per Compute call between StartProfiling and EndProfiling.
struct Profiler : EpctxEpProfiler {
  std::shared_ptr<Shared> shared;
  int64_t epoch_us = 0;
  std::vector<ProfileEvent> events;  // guarded by shared->mu

  void Stop() {  // caller holds shared->mu
    auto it = std::find(shared->profiling.begin(), shared->profiling.end(), this);
    if (it != shared->profiling.end()) shared->profiling.erase(it), --shared->num_profiling;
  }

  explicit Profiler(std::shared_ptr<Shared> s) : EpctxEpProfiler{}, shared(std::move(s)) {
    version = EPCTX_EP_API_VERSION;
    StartProfiling = [](EpctxEpProfiler* self, int64_t epoch_us) -> EpctxStatus* {
      auto* p = static_cast<Profiler*>(self);
      return Guard(p->shared->api, [&]() -> EpctxStatus* {
        std::lock_guard<std::mutex> lock(p->shared->mu);
        p->Stop();
        p->epoch_us = epoch_us, p->events.clear();
        p->shared->profiling.push_back(p), ++p->shared->num_profiling;
        return nullptr;
      });
    };
    EndProfiling = [](EpctxEpProfiler* self, EpctxProfilingEventSink* sink) -> EpctxStatus* {
      auto* p = static_cast<Profiler*>(self);
      const EpctxApi* api = p->shared->api;
      return Guard(api, [&]() -> EpctxStatus* {
        std::vector<ProfileEvent> events;
        {
          std::lock_guard<std::mutex> lock(p->shared->mu);
          p->Stop();
          events.swap(p->events);
        }
        for (const ProfileEvent& e : events) {
          EpctxKeyValuePairs* args = nullptr;
          RETURN_IF_ERROR(api->KeyValuePairs_Create(&args));
          EpctxStatus* st = api->KeyValuePairs_Add(args, "node", e.node.c_str());
          if (!st)  // event times are relative to the profile's epoch
            st = api->ProfilingEventSink_AddEvent(sink, "example_compute", "ep", e.start_us - p->epoch_us,
                                                  e.duration_us, args);
          api->KeyValuePairs_Release(args);
          RETURN_IF_ERROR(st);
        }
        return nullptr;
      });
    };
    Release = [](EpctxEpProfiler* self) {
      auto* p = static_cast<Profiler*>(self);
      {
        std::lock_guard<std::mutex> lock(p->shared->mu);
        p->Stop();
      }
      delete p;
    };
  }
};

// Runs a compiled program for one Compute call: inputs by position, outputs allocated by the runtime.
EpctxStatus* RunProgram(const EpctxApi* api, const Program& p, float relu_clip, EpctxKernelContext* ctx) {
  if (api->KernelContext_GetInputCount(ctx) != p.num_inputs ||
      api->KernelContext_GetOutputCount(ctx) != p.outputs.size())
    return Error(api, EPCTX_INVALID_ARGUMENT, "fused node called with an unexpected number of inputs/outputs");
  std::vector<Buffer> inputs(p.num_inputs);
  for (size_t i = 0; i < p.num_inputs; ++i) {
    const EpctxValue* v = nullptr;
    RETURN_IF_ERROR(api->KernelContext_GetInput(ctx, i, &v));
    if (api->Value_GetElementType(v) != EPCTX_ELEMENT_FLOAT)
      return Error(api, EPCTX_INVALID_ARGUMENT, "input '" + p.slot_names[i] + "' is not a float tensor");
    inputs[i].shape.resize(api->Value_GetRank(v));
    RETURN_IF_ERROR(api->Value_GetShape(v, inputs[i].shape.data(), inputs[i].shape.size()));
    inputs[i].data = static_cast<const float*>(api->Value_GetData(v));
  }
  EpctxStatus* allocation_error = nullptr;
  const std::string error = Run(p, std::move(inputs), relu_clip, [&](size_t i, const Shape& shape) -> float* {
    EpctxValue* v = nullptr;
    allocation_error = api->KernelContext_GetOutput(ctx, i, shape.data(), shape.size(), &v);
    return allocation_error ? nullptr : static_cast<float*>(api->Value_GetMutableData(v));
  });
  RETURN_IF_ERROR(allocation_error);
  return error.empty() ? nullptr : Error(api, EPCTX_INVALID_ARGUMENT, error);
}

// The computation of one fused graph, made by Compile. Its program is immutable, so every session's state is the
// info itself (an EP with per-session buffers would allocate them in CreateState), and concurrent Compute calls are
// safe: scratch memory lives in each call.
struct ComputeInfo : EpctxNodeComputeInfo {
  std::shared_ptr<Shared> shared;
  std::string node_name;  // the fused node's
  Program program;

  ComputeInfo(std::shared_ptr<Shared> s, std::string name)
      : EpctxNodeComputeInfo{}, shared(std::move(s)), node_name(std::move(name)) {
    version = EPCTX_EP_API_VERSION;
    CreateState = [](EpctxNodeComputeInfo* self, EpctxNodeComputeContext*, void** state) -> EpctxStatus* {
      *state = self;
      return nullptr;
    };
    ReleaseState = [](EpctxNodeComputeInfo*, void*) {};
    Compute = [](EpctxNodeComputeInfo* self, void*, EpctxKernelContext* ctx) -> EpctxStatus* {
      auto* info = static_cast<ComputeInfo*>(self);
      Shared& sh = *info->shared;
      return Guard(sh.api, [&]() -> EpctxStatus* {
        const bool profiling = sh.num_profiling.load() > 0;
        const int64_t start = profiling ? NowUs() : 0;
        RETURN_IF_ERROR(RunProgram(sh.api, info->program, sh.relu_clip.load(), ctx));
        if (profiling) {
          const int64_t duration = NowUs() - start;
          std::lock_guard<std::mutex> lock(sh.mu);
          for (Profiler* p : sh.profiling) p->events.push_back({start, duration, info->node_name});
        }
        return nullptr;
      });
    };
  }
};

// ---- 3. GetCapability ----

bool IsSupportedNode(const EpctxApi* api, const EpctxNode* node) {
  const std::string domain = api->Node_GetDomain(node);
  Op op;
  if ((!domain.empty() && domain != "ai.onnx") || !ParseOp(api->Node_GetOperatorType(node), &op)) return false;
  const size_t arity = op == Op::kRelu ? 1 : 2;
  // Add/Mul before opset 7 broadcast by their `broadcast`/`axis` attributes, not by NumPy's rules.
  if (op != Op::kRelu && api->Node_GetSinceVersion(node) < 7) return false;
  if (api->Node_GetNumInputs(node) != arity || api->Node_GetNumOutputs(node) != 1) return false;
  const EpctxValueInfo* inputs[2] = {};
  if (EpctxStatus* st = api->Node_GetInputs(node, inputs, arity)) return api->ReleaseStatus(st), false;
  Shape shapes[2];
  bool known = true;
  for (size_t i = 0; i < arity; ++i) {
    if (!inputs[i] || api->ValueInfo_GetKind(inputs[i]) != EPCTX_VALUE_TENSOR ||
        api->ValueInfo_GetElementType(inputs[i]) != EPCTX_ELEMENT_FLOAT)
      return false;
    known = ValueInfoShape(api, inputs[i], &shapes[i]) && known;
  }
  Shape out;
  return arity == 1 || !known || BroadcastShape(shapes[0], shapes[1], &out);  // unknown ranks: checked when run
}

// Names of the values that `node`'s subgraphs (If/Loop/Scan bodies, nested ones too) read from enclosing graphs:
// the node depends on their producers although they are not among its inputs.
EpctxStatus* OuterScopeReads(const EpctxApi* api, const EpctxNode* node, std::vector<std::string>* names) {
  std::vector<const EpctxGraph*> bodies(api->Node_GetNumSubgraphs(node));
  std::vector<const char*> attribute_names(bodies.size());
  RETURN_IF_ERROR(api->Node_GetSubgraphs(node, bodies.data(), attribute_names.data(), bodies.size()));
  for (const EpctxGraph* body : bodies) {
    std::vector<const EpctxNode*> nodes(api->Graph_GetNumNodes(body));
    RETURN_IF_ERROR(api->Graph_GetNodes(body, nodes.data(), nodes.size()));
    for (const EpctxNode* n : nodes) {
      std::vector<const EpctxValueInfo*> inputs(api->Node_GetNumInputs(n));
      RETURN_IF_ERROR(api->Node_GetInputs(n, inputs.data(), inputs.size()));
      for (const EpctxValueInfo* vi : inputs)
        if (vi && api->ValueInfo_IsFromOuterScope(vi)) names->push_back(api->ValueInfo_GetName(vi));
      RETURN_IF_ERROR(OuterScopeReads(api, n, names));
    }
  }
  return nullptr;
}

// Claims connected groups of supported nodes, one AddNodesToFuse each. A fused group must not create a cycle
// (A -> unsupported X -> B with A and B fused would need X both before and after the fused node), so groups are cut
// from a topological order that takes a ready supported node whenever there is one: each run of supported nodes in
// that order is cycle-free, and so is every connected piece of it.
EpctxStatus* ClaimNodes(const EpctxApi* api, const EpctxGraph* graph, EpctxEpGraphSupportInfo* support) {
  std::vector<const EpctxNode*> nodes(api->Graph_GetNumNodes(graph));
  RETURN_IF_ERROR(api->Graph_GetNodes(graph, nodes.data(), nodes.size()));
  const size_t n = nodes.size();
  std::unordered_map<const EpctxNode*, size_t> index;
  for (size_t i = 0; i < n; ++i) index[nodes[i]] = i;
  std::vector<char> supported(n);
  std::vector<std::vector<size_t>> successors(n);
  std::unordered_map<std::string, size_t> producer;  // value name -> node
  for (size_t i = 0; i < n; ++i) {
    supported[i] = IsSupportedNode(api, nodes[i]);
    if (!supported[i]) {  // why, for the session report (optional; a reason is information only)
      const std::string why = std::string("op ") + api->Node_GetOperatorType(nodes[i]) +
                              ": this EP takes only Add and Mul (opset >= 7) and Relu on float tensors";
      if (EpctxStatus* st = api->EpGraphSupportInfo_SetNodeRejectionReason(support, nodes[i], why.c_str()))
        api->ReleaseStatus(st);
    }
    std::vector<const EpctxValueInfo*> outputs(api->Node_GetNumOutputs(nodes[i]));
    RETURN_IF_ERROR(api->Node_GetOutputs(nodes[i], outputs.data(), outputs.size()));
    for (const EpctxValueInfo* vi : outputs) {
      if (!vi) continue;
      producer[api->ValueInfo_GetName(vi)] = i;
      std::vector<const EpctxNode*> consumers(api->ValueInfo_GetNumConsumers(vi));
      std::vector<int64_t> input_indices(consumers.size());
      RETURN_IF_ERROR(api->ValueInfo_GetConsumers(vi, consumers.data(), input_indices.data(), consumers.size()));
      for (const EpctxNode* c : consumers)
        if (index.count(c)) successors[i].push_back(index[c]);  // consumers in nested subgraphs are elsewhere
    }
  }
  for (size_t i = 0; i < n; ++i) {  // edges the node inputs do not show: subgraphs reading this graph's values
    std::vector<std::string> reads;
    RETURN_IF_ERROR(OuterScopeReads(api, nodes[i], &reads));
    for (const std::string& name : reads)
      if (producer.count(name)) successors[producer[name]].push_back(i);
  }
  std::vector<size_t> pending(n, 0);  // predecessors not yet ordered
  for (size_t i = 0; i < n; ++i) {
    std::sort(successors[i].begin(), successors[i].end());
    successors[i].erase(std::unique(successors[i].begin(), successors[i].end()), successors[i].end());
    for (size_t s : successors[i]) ++pending[s];
  }
  std::deque<size_t> ready_supported, ready_other;
  auto make_ready = [&](size_t i) { (supported[i] ? ready_supported : ready_other).push_back(i); };
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) make_ready(i);
  std::vector<size_t> run(n, 0);  // run number of each supported node; 0 = not claimed
  size_t current = 1;
  bool in_run = false;
  while (!ready_supported.empty() || !ready_other.empty()) {
    std::deque<size_t>& queue = ready_supported.empty() ? ready_other : ready_supported;
    const size_t i = queue.front();
    queue.pop_front();
    if (supported[i]) run[i] = current, in_run = true;
    else if (in_run) ++current, in_run = false;
    for (size_t s : successors[i])
      if (--pending[s] == 0) make_ready(s);
  }
  std::vector<size_t> parent(n);  // union-find: connected pieces of each run
  for (size_t i = 0; i < n; ++i) parent[i] = i;
  auto find = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  for (size_t i = 0; i < n; ++i)
    for (size_t s : successors[i])
      if (run[i] != 0 && run[i] == run[s]) parent[find(s)] = find(i);
  std::unordered_map<size_t, size_t> group_of_root;
  std::vector<std::vector<const EpctxNode*>> groups;  // nodes in graph (topological) order
  for (size_t i = 0; i < n; ++i) {
    if (run[i] == 0) continue;
    auto inserted = group_of_root.emplace(find(i), groups.size());
    if (inserted.second) groups.emplace_back();
    groups[inserted.first->second].push_back(nodes[i]);
  }
  for (const auto& g : groups) RETURN_IF_ERROR(api->EpGraphSupportInfo_AddNodesToFuse(support, g.data(), g.size()));
  return nullptr;
}

using plugin::IsEpContextNode;

// An EPContext node this EP made: `source` is ExampleExecutionProvider, example or EXAMPLE, in any case.
bool IsOwnEpContextNode(const EpctxApi* api, const EpctxNode* node) {
  return plugin::IsEpContextNodeFrom(api, node, {kEpName, "example"});
}

// Claims each of this EP's EPContext nodes on its own (other EPs' EPContext nodes are left alone), then fuses
// the Add/Mul/Relu nodes.
EpctxStatus* GetCapabilityImpl(const EpctxApi* api, const EpctxGraph* graph, EpctxEpGraphSupportInfo* support) {
  std::vector<const EpctxNode*> nodes(api->Graph_GetNumNodes(graph));
  RETURN_IF_ERROR(api->Graph_GetNodes(graph, nodes.data(), nodes.size()));
  for (const EpctxNode* node : nodes)
    if (IsOwnEpContextNode(api, node)) RETURN_IF_ERROR(api->EpGraphSupportInfo_AddSingleNode(support, node));
  return ClaimNodes(api, graph, support);
}

// ---- 4. Compile ----

// "Compiles" one claimed graph: every value gets a slot, every node becomes a step, constants are copied.
EpctxStatus* BuildProgram(const EpctxApi* api, const EpctxGraph* graph, const EpctxNode* fused, Program* p) {
  std::unordered_map<std::string, size_t> slot_of;
  auto new_slot = [&](const char* name) {
    p->slot_names.emplace_back(name);
    return slot_of[name] = p->slot_names.size() - 1;
  };
  std::vector<const EpctxValueInfo*> values(api->Node_GetNumInputs(fused));
  RETURN_IF_ERROR(api->Node_GetInputs(fused, values.data(), values.size()));
  for (const EpctxValueInfo* vi : values) new_slot(api->ValueInfo_GetName(vi));
  p->num_inputs = values.size();

  std::vector<const EpctxNode*> nodes(api->Graph_GetNumNodes(graph));
  RETURN_IF_ERROR(api->Graph_GetNodes(graph, nodes.data(), nodes.size()));
  for (const EpctxNode* node : nodes) {
    Step step{Op::kRelu, {}, 0, api->Node_GetName(node)};
    if (!ParseOp(api->Node_GetOperatorType(node), &step.op))
      return Error(api, EPCTX_INVALID_GRAPH, "Compile got node '" + step.node_name + "', which it did not claim");
    values.assign(api->Node_GetNumInputs(node), nullptr);
    RETURN_IF_ERROR(api->Node_GetInputs(node, values.data(), values.size()));
    for (const EpctxValueInfo* vi : values) {
      const std::string name = api->ValueInfo_GetName(vi);
      if (slot_of.count(name)) {
        step.inputs.push_back(slot_of[name]);
        continue;
      }
      const EpctxValue* value = nullptr;
      if (!api->ValueInfo_IsConstantInitializer(vi))
        return Error(api, EPCTX_INVALID_GRAPH, "input '" + name + "' of node '" + step.node_name +
                                                   "' is neither a fused-node input nor a constant initializer");
      RETURN_IF_ERROR(api->ValueInfo_GetInitializerValue(vi, &value));
      if (api->Value_GetElementType(value) != EPCTX_ELEMENT_FLOAT)
        return Error(api, EPCTX_INVALID_GRAPH, "constant '" + name + "' is not float");
      step.inputs.push_back(new_slot(name.c_str()));
      Constant c{step.inputs.back(), Shape(api->Value_GetRank(value)), {}};
      RETURN_IF_ERROR(api->Value_GetShape(value, c.shape.data(), c.shape.size()));
      const auto* data = static_cast<const float*>(api->Value_GetData(value));
      c.data.assign(data, data + api->Value_GetElementCount(value));
      p->constants.push_back(std::move(c));
    }
    const EpctxValueInfo* out = nullptr;
    RETURN_IF_ERROR(api->Node_GetOutputs(node, &out, 1));
    step.output = new_slot(api->ValueInfo_GetName(out));
    p->steps.push_back(std::move(step));
  }
  values.assign(api->Node_GetNumOutputs(fused), nullptr);
  RETURN_IF_ERROR(api->Node_GetOutputs(fused, values.data(), values.size()));
  for (const EpctxValueInfo* vi : values) {
    const std::string name = api->ValueInfo_GetName(vi);
    if (!slot_of.count(name))
      return Error(api, EPCTX_INVALID_GRAPH, "fused-node output '" + name + "' is produced by no node of the graph");
    p->outputs.push_back(slot_of[name]);
  }
  return nullptr;
}

// ---- 4b. EPContext generation and loading ----
//
// Generation (session config ep.context_enable=1): each graph compiled from ordinary nodes becomes an EPContext
// node named ep.context_node_name_prefix + the fused node's name (also its partition_name). Embed mode 1: every
// node holds its program text. Embed mode 0: one context binary per Compile call, "<ctx model stem>_example.bin"
// beside the ctx model (ep.context_file_path, set by the runtime), holding every graph by partition name; the
// first node (main_context=1) names the file, the others (main_context=0) find their graph in it by name.
// Loading: each claimed EPContext node arrives as a graph of its own; main_context=1 nodes are loaded first
// (their payload or binary), then main_context=0 nodes take their graph from those binaries by partition_name.

constexpr const char* kBinarySuffix = "_example.bin";

struct ContextOptions {
  bool enable = false;     // ep.context_enable == "1"
  bool embed = false;      // ep.context_embed_mode == "1" (anything else: 0, the default)
  std::string file_path;   // ep.context_file_path: the ctx model's path (generation) or where to look (loading)
  std::string prefix;      // ep.context_node_name_prefix
};

EpctxStatus* LoadError(const EpctxApi* api, const std::string& message) {
  return plugin::LoadError(api, kEpName, message);
}
using plugin::ErrnoText;
using plugin::FileNameOf;

// An EPContext node with the fused node's inputs and outputs (names unchanged), named `name` (also its
// partition_name); the caller sets main_context/embed_mode/ep_cache_context.
plugin::EpContextNodeSpec ContextNodeSpec(const Program& p, std::string name) {
  plugin::EpContextNodeSpec spec;
  spec.name = std::move(name);
  spec.source = kEpName, spec.sdk_version = kVersion;
  for (size_t i = 0; i < p.num_inputs; ++i) spec.inputs.push_back(p.slot_names[i]);
  for (size_t o : p.outputs) spec.outputs.push_back(p.slot_names[o]);
  return spec;
}

// Makes the EPContext nodes of the graphs compiled from ordinary nodes (`fresh`: indices into the Compile call)
// and, in embed mode 0, first writes the context binary. Slots of other graphs stay NULL.
EpctxStatus* GenerateContext(const EpctxApi* api, const ContextOptions& options, const EpctxNode** fused_nodes,
                             const std::vector<size_t>& fresh, const std::vector<const Program*>& programs,
                             EpctxNode** ep_context_nodes) {
  if (fresh.empty()) return nullptr;
  std::vector<plugin::EpContextNodeSpec> specs;
  std::vector<std::pair<std::string, std::string>> graphs;  // for the binary
  for (size_t i : fresh) {
    plugin::EpContextNodeSpec spec = ContextNodeSpec(*programs[i], options.prefix + api->Node_GetName(fused_nodes[i]));
    if (spec.name.find_first_of("\n\r") != std::string::npos)
      return Error(api, EPCTX_INVALID_ARGUMENT, "EPContext node name '" + spec.name + "' holds a line break");
    std::string text = Serialize(*programs[i]);
    Program check;  // the text must load again (value names with line breaks would not)
    const std::string error = Deserialize(text, &check);
    if (!error.empty())
      return Error(api, EPCTX_EP_FAIL, "graph '" + spec.name + "' cannot be stored in a context: " + error);
    if (options.embed) {
      spec.cache = std::move(text);
    } else {
      graphs.emplace_back(spec.name, std::move(text));
      spec.embed_mode = 0;
      spec.main_context = specs.empty() ? 1 : 0;
      spec.has_cache = specs.empty();
    }
    specs.push_back(std::move(spec));
  }
  std::string binary;
  if (!options.embed) {
    if (options.file_path.empty())
      return Error(api, EPCTX_EP_FAIL, "ep.context_file_path is not set, so there is no folder for the context binary");
    binary = plugin::ContextBinaryPath(options.file_path, kBinarySuffix);
    specs[0].cache = FileNameOf(binary);  // relative to the ctx model's folder
    RETURN_IF_ERROR(plugin::WriteFileAtomically(api, kEpName, binary, SerializeContext(graphs)));
  }
  for (size_t k = 0; k < fresh.size(); ++k) {
    const size_t i = fresh[k];
    if (EpctxStatus* st = plugin::MakeEpContextNode(api, specs[k], &ep_context_nodes[i])) {
      if (!binary.empty()) unlink(binary.c_str());  // no ctx model will reference it
      return st;
    }
  }
  return nullptr;
}

// Attribute readers for EPContext nodes: schema defaults when absent, INVALID_GRAPH when of another type.
EpctxStatus* IntAttr(const EpctxApi* api, const EpctxNode* node, const char* name, int64_t default_value,
                     int64_t* value) {
  return plugin::IntAttr(api, kEpName, node, name, default_value, value);
}
EpctxStatus* StringAttr(const EpctxApi* api, const EpctxNode* node, const char* name, bool* present,
                        std::string* value) {
  return plugin::StringAttr(api, kEpName, node, name, present, value);
}

// Reads and parses the context binary a main_context=1, embed_mode=0 node names, checking every path rule.
EpctxStatus* LoadContextBinary(const EpctxApi* api, const EpctxGraph* graph, const std::string& node_name,
                               const std::string& relative, const ContextOptions& options,
                               std::vector<std::pair<std::string, std::string>>* graphs, std::string* shown_path) {
  const std::string who = "node '" + node_name + "': ";
  std::string real_path;
  RETURN_IF_ERROR(plugin::ResolveContextBinary(api, kEpName, graph, node_name, relative, options.file_path,
                                               shown_path, &real_path));
  const std::string& path = *shown_path;
  const int fd = open(real_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return LoadError(api, who + "the context binary '" + path + "' cannot be read: " + ErrnoText(errno));
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return LoadError(api, who + "the context binary '" + path + "' cannot be read: " + ErrnoText(err));
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  if (bytes.empty()) return LoadError(api, who + "the context binary '" + path + "' is empty");
  std::string reason;
  switch (ParseContext(bytes, graphs, &reason)) {
    case ContextError::kNone:
      return nullptr;
    case ContextError::kTruncated:
      return LoadError(api, who + "the context binary '" + path + "' is truncated: " + reason);
    case ContextError::kBadHeader:
      return LoadError(api, who + "the context binary '" + path + "' is corrupted (" + reason + ")");
    case ContextError::kCorrupted:
      break;
  }
  return LoadError(api, who + "the context binary '" + path + "' is corrupted: " + reason);
}

// Loads the program of every EPContext graph (`loaded`: indices into the Compile call): main_context=1 nodes
// first (embedded payload or context binary), then main_context=0 nodes by partition_name among the graphs of
// the binaries those loaded.
EpctxStatus* LoadContexts(const EpctxApi* api, const ContextOptions& options, const EpctxGraph** graphs,
                          const EpctxNode** fused_nodes, const std::vector<size_t>& loaded,
                          const std::vector<Program*>& programs) {
  struct Entry {
    std::string text, from;  // program text; where it came from (for messages)
  };
  std::unordered_map<std::string, Entry> table;  // partition name -> graph, from every binary loaded
  auto add = [&](const std::string& name, const std::string& text, const std::string& from) -> EpctxStatus* {
    auto inserted = table.emplace(name, Entry{text, from});
    if (!inserted.second && inserted.first->second.text != text)
      return LoadError(api, "partition '" + name + "' is held by both '" + inserted.first->second.from + "' and '" +
                                from + "' with different contents");
    return nullptr;
  };
  struct Pending {
    size_t index;
    const EpctxNode* node;
    std::string name, partition;
  };
  std::vector<Pending> secondary;
  for (size_t i : loaded) {
    const EpctxNode* node = nullptr;
    RETURN_IF_ERROR(api->Graph_GetNodes(graphs[i], &node, 1));
    const std::string name = api->Node_GetName(node);
    int64_t main_context = 1, embed_mode = 1;
    RETURN_IF_ERROR(IntAttr(api, node, "main_context", 1, &main_context));
    RETURN_IF_ERROR(IntAttr(api, node, "embed_mode", 1, &embed_mode));
    bool has_partition = false, has_cache = false;
    std::string partition, cache;
    RETURN_IF_ERROR(StringAttr(api, node, "partition_name", &has_partition, &partition));
    RETURN_IF_ERROR(StringAttr(api, node, "ep_cache_context", &has_cache, &cache));
    if (!has_partition || partition.empty()) partition = name;
    if (main_context == 0) {
      secondary.push_back({i, node, name, partition});
      continue;
    }
    std::string text, path_of_binary;
    uint64_t bytes_of_binary = 0;
    const auto load_start = std::chrono::steady_clock::now();
    if (embed_mode == 1) {
      if (!has_cache) return LoadError(api, "node '" + name + "' (embed_mode=1) has no ep_cache_context");
      text = cache;
      Program check;
      const std::string error = Deserialize(text, &check);
      if (!error.empty())
        return LoadError(api, "node '" + name + "': the program embedded in ep_cache_context is corrupted: " + error);
      RETURN_IF_ERROR(add(partition, text, "node '" + name + "'"));
    } else {
      std::vector<std::pair<std::string, std::string>> binary;
      std::string path;
      RETURN_IF_ERROR(LoadContextBinary(api, graphs[i], name, cache, options, &binary, &path));
      path_of_binary = path;
      struct stat st;
      bytes_of_binary = ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;  // read whole
      for (const auto& g : binary) RETURN_IF_ERROR(add(g.first, g.second, path));
      auto own = std::find_if(binary.begin(), binary.end(), [&](const auto& g) { return g.first == partition; });
      if (own == binary.end() && binary.size() == 1) own = binary.begin();  // a lone graph, whatever its name
      if (own == binary.end())
        return LoadError(api, "node '" + name + "': the context binary '" + path + "' holds no graph named '" +
                                  partition + "'");
      text = own->second;
    }
    RETURN_IF_ERROR(Deserialize(text, programs[i]).empty()
                        ? nullptr
                        : LoadError(api, "node '" + name + "': its program does not parse"));
    // Observability: this EP reads (copies) its contexts; it maps nothing.
    if (api->ReportEpContextLoad) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
      const std::string file = embed_mode == 1 ? std::string() : path_of_binary;
      RETURN_IF_ERROR(api->ReportEpContextLoad(fused_nodes[i], file.c_str(), 0, embed_mode == 1 ? cache.size() : bytes_of_binary, ms));
    }
  }
  for (const Pending& s : secondary) {
    auto it = table.find(s.partition);
    if (it == table.end())
      return LoadError(api, "node '" + s.name + "' (main_context=0) refers to partition '" + s.partition +
                                "', which no context loaded by a main_context=1 node holds");
    const std::string error = Deserialize(it->second.text, programs[s.index]);
    if (!error.empty()) return LoadError(api, "node '" + s.name + "': partition '" + s.partition + "': " + error);
  }
  // The program must fit the node it stands for.
  for (size_t i : loaded) {
    const Program& p = *programs[i];
    const size_t inputs = api->Node_GetNumInputs(fused_nodes[i]), outputs = api->Node_GetNumOutputs(fused_nodes[i]);
    if (p.num_inputs != inputs || p.outputs.size() != outputs) {
      const EpctxNode* node = nullptr;
      RETURN_IF_ERROR(api->Graph_GetNodes(graphs[i], &node, 1));
      return LoadError(api, std::string("node '") + api->Node_GetName(node) + "' has " + std::to_string(inputs) +
                                " input(s) and " + std::to_string(outputs) + " output(s) but its context graph has " +
                                std::to_string(p.num_inputs) + " and " + std::to_string(p.outputs.size()));
    }
  }
  return nullptr;
}

// ---- 5. the EP (one per session) ----

struct ExampleEp : EpctxEp {
  const EpctxApi* api;
  const EpctxLogger* logger;       // the session's, valid until ReleaseEp
  ContextOptions context;          // ep.context_*: EPContext generation (enable=1) and binary lookup
  bool serialize_runs = false;     // provider option serialize_runs=1: no concurrent runs
  std::string optimize;            // provider option optimize (default from the EpDevice's ep_options), reported
  std::atomic<uint64_t> runs_started{0}, runs_ended{0};
  size_t graphs_compiled = 0;  // Compile is never called concurrently on one EP
  std::shared_ptr<Shared> shared;

  ExampleEp(const EpctxApi* a, const EpctxLogger* l);
};
ExampleEp* Self(EpctxEp* ep) { return static_cast<ExampleEp*>(ep); }

ExampleEp::ExampleEp(const EpctxApi* a, const EpctxLogger* l)
    : EpctxEp{}, api(a), logger(l), shared(std::make_shared<Shared>(a)) {
  version = EPCTX_EP_API_VERSION;
  GetName = [](const EpctxEp*) { return kEpName; };
  GetCapability = [](EpctxEp* self, const EpctxGraph* graph, EpctxEpGraphSupportInfo* support) -> EpctxStatus* {
    return Guard(Self(self)->api, [&] { return GetCapabilityImpl(Self(self)->api, graph, support); });
  };
  Compile = [](EpctxEp* self, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
               EpctxNodeComputeInfo** infos, EpctxNode** ep_context_nodes) -> EpctxStatus* {
    ExampleEp* ep = Self(self);
    const EpctxApi* api = ep->api;
    return Guard(api, [&]() -> EpctxStatus* {
      // Everything is compiled or loaded before any file is written or any node made.
      std::vector<std::unique_ptr<ComputeInfo>> made;  // handed out only when every graph compiled
      std::vector<size_t> fresh, loaded;               // graphs of ordinary nodes; EPContext graphs
      for (size_t i = 0; i < count; ++i) {
        made.push_back(std::make_unique<ComputeInfo>(ep->shared, api->Node_GetName(fused_nodes[i])));
        std::vector<const EpctxNode*> nodes(api->Graph_GetNumNodes(graphs[i]));
        RETURN_IF_ERROR(api->Graph_GetNodes(graphs[i], nodes.data(), nodes.size()));
        const bool has_context = std::any_of(nodes.begin(), nodes.end(),
                                             [&](const EpctxNode* n) { return IsEpContextNode(api, n); });
        if (has_context && nodes.size() != 1)
          return LoadError(api, "graph '" + std::string(api->Graph_GetName(graphs[i])) + "' holds " +
                                    std::to_string(nodes.size()) + " nodes; an EPContext node must be alone");
        if (has_context) {
          loaded.push_back(i);
        } else {
          RETURN_IF_ERROR(BuildProgram(api, graphs[i], fused_nodes[i], &made.back()->program));
          fresh.push_back(i);
        }
      }
      std::vector<Program*> programs;
      for (auto& m : made) programs.push_back(&m->program);
      RETURN_IF_ERROR(LoadContexts(api, ep->context, graphs, fused_nodes, loaded, programs));
      // Generation: nodes for freshly compiled graphs only (a loaded EPContext node is not compiled again).
      if (ep->context.enable)  // the runtime owns these nodes, also if a later step fails
        RETURN_IF_ERROR(GenerateContext(api, ep->context, fused_nodes, fresh,
                                        std::vector<const Program*>(programs.begin(), programs.end()),
                                        ep_context_nodes));
      for (size_t i = 0; i < count; ++i) infos[i] = made[i].release();
      ep->graphs_compiled += count;
      return nullptr;
    });
  };
  ReleaseNodeComputeInfos = [](EpctxEp*, EpctxNodeComputeInfo** infos, size_t count) {
    for (size_t i = 0; i < count; ++i) delete static_cast<ComputeInfo*>(infos[i]);
  };
  // GetPreferredDataLayout and ShouldConvertDataLayoutForOp stay NULL: NCHW, the runtime's default.
  SetDynamicOptions = [](EpctxEp* self, const char* const* keys, const char* const* values,
                         size_t count) -> EpctxStatus* {
    ExampleEp* ep = Self(self);
    return Guard(ep->api, [&]() -> EpctxStatus* {
      float clip = ep->shared->relu_clip.load();
      for (size_t i = 0; i < count; ++i) {  // validate everything before applying anything
        if (std::strcmp(keys[i], "relu_clip") != 0)
          return Error(ep->api, EPCTX_INVALID_ARGUMENT,
                       std::string("unknown dynamic option '") + keys[i] + "' (supported: relu_clip)");
        char* end = nullptr;
        errno = 0;
        clip = std::strtof(values[i], &end);
        if (end == values[i] || *end != '\0' || errno != 0 || !(clip >= 0))
          return Error(ep->api, EPCTX_INVALID_ARGUMENT,
                       std::string("relu_clip must be a float >= 0 (0 = off), got '") + values[i] + "'");
      }
      ep->shared->relu_clip.store(clip);
      return nullptr;
    });
  };
  OnRunStart = [](EpctxEp* self, const EpctxRunOptions*) -> EpctxStatus* {
    ++Self(self)->runs_started;
    return nullptr;
  };
  OnRunEnd = [](EpctxEp* self, const EpctxRunOptions*, bool) -> EpctxStatus* {
    ++Self(self)->runs_ended;
    return nullptr;
  };
  IsConcurrentRunSupported = [](EpctxEp* self, bool* is_supported) -> EpctxStatus* {
    *is_supported = !Self(self)->serialize_runs;
    return nullptr;
  };
  CreateProfiler = [](EpctxEp* self, EpctxEpProfiler** profiler) -> EpctxStatus* {
    return Guard(Self(self)->api, [&]() -> EpctxStatus* {
      *profiler = new Profiler(Self(self)->shared);
      return nullptr;
    });
  };
  OnSessionInitializationEnd = [](EpctxEp* self) -> EpctxStatus* {
    ExampleEp* ep = Self(self);
    return Guard(ep->api, [&]() -> EpctxStatus* {
      const std::string msg = std::string(kEpName) + ": session initialized, " +
                              std::to_string(ep->graphs_compiled) + " fused graph(s), optimize=" + ep->optimize +
                              ", concurrent runs " + (ep->serialize_runs ? "off" : "on");
      EXAMPLE_LOG(ep->api, ep->logger, EPCTX_LOG_INFO, msg.c_str());
      return nullptr;
    });
  };
  GetCompiledModelCompatibilityInfo = [](EpctxEp*, const EpctxGraph*) { return kCompatibilityInfo; };
}

// ---- 6. the factory ----

struct ExampleFactory : EpctxEpFactory {
  const EpctxApi* api;
  bool virtual_npu;  // also offer a virtual NPU (registration name *.virtual or env allow_virtual_devices=1)
  ExampleFactory(const EpctxApi* a, bool virt);
};
ExampleFactory* Self(EpctxEpFactory* f) { return static_cast<ExampleFactory*>(f); }

// Pairs the factory with `device`, with this EP's metadata and default options; *ep_device is owned by the caller.
EpctxStatus* PairDevice(ExampleFactory* f, const EpctxHardwareDevice* device, EpctxEpDevice** ep_device) {
  const EpctxApi* api = f->api;
  EpctxKeyValuePairs *metadata = nullptr, *options = nullptr;
  EpctxStatus* st = api->KeyValuePairs_Create(&metadata);
  if (!st) st = api->KeyValuePairs_Create(&options);
  if (!st) st = api->KeyValuePairs_Add(metadata, "version", kVersion);
  if (!st) st = api->KeyValuePairs_Add(options, "optimize", "1");  // reaches CreateEp as ep.<name>.optimize
  if (!st) st = api->CreateEpDevice(f, device, metadata, options, ep_device);  // copies both
  if (metadata) api->KeyValuePairs_Release(metadata);
  if (options) api->KeyValuePairs_Release(options);
  return st;
}

ExampleFactory::ExampleFactory(const EpctxApi* a, bool virt) : EpctxEpFactory{}, api(a), virtual_npu(virt) {
  version = EPCTX_EP_API_VERSION;
  GetName = [](const EpctxEpFactory*) { return kEpName; };
  GetVendor = [](const EpctxEpFactory*) { return kVendor; };
  GetVendorId = [](const EpctxEpFactory*) { return kVendorId; };
  GetVersion = [](const EpctxEpFactory*) { return kVersion; };

  GetSupportedDevices = [](EpctxEpFactory* self, const EpctxHardwareDevice* const* devices, size_t num_devices,
                           EpctxEpDevice** ep_devices, size_t max_ep_devices, size_t* num_ep_devices) -> EpctxStatus* {
    ExampleFactory* f = Self(self);
    const EpctxApi* api = f->api;
    std::vector<EpctxEpDevice*> made;  // released again on failure: out-parameters stay untouched
    EpctxHardwareDevice* virtual_device = nullptr;
    EpctxStatus* st = Guard(api, [&]() -> EpctxStatus* {
      for (size_t i = 0; i < num_devices && made.size() < max_ep_devices; ++i) {
        if (api->HardwareDevice_Type(devices[i]) != EPCTX_DEVICE_CPU) continue;
        made.push_back(nullptr);
        RETURN_IF_ERROR(PairDevice(f, devices[i], &made.back()));
      }
      if (f->virtual_npu && made.size() < max_ep_devices) {
        EpctxKeyValuePairs* metadata = nullptr;
        RETURN_IF_ERROR(api->KeyValuePairs_Create(&metadata));
        EpctxStatus* s = api->KeyValuePairs_Add(metadata, "is_virtual", "1");
        if (!s) s = api->CreateHardwareDevice(EPCTX_DEVICE_NPU, kVendorId, 0, kVendor, metadata, &virtual_device);
        api->KeyValuePairs_Release(metadata);
        RETURN_IF_ERROR(s);
        made.push_back(nullptr);
        RETURN_IF_ERROR(PairDevice(f, virtual_device, &made.back()));
      }
      return nullptr;
    });
    if (st) {
      for (EpctxEpDevice* d : made)
        if (d) api->ReleaseEpDevice(d);
      if (virtual_device) api->ReleaseHardwareDevice(virtual_device);
      return st;
    }
    std::copy(made.begin(), made.end(), ep_devices);  // the runtime now owns these and the virtual device
    *num_ep_devices = made.size();
    return nullptr;
  };

  CreateEp = [](EpctxEpFactory* self, const EpctxHardwareDevice* const*, const EpctxKeyValuePairs* const*,
                size_t num_devices, const EpctxSessionOptions* options, const EpctxLogger* logger,
                EpctxEp** out) -> EpctxStatus* {
    const EpctxApi* api = Self(self)->api;
    return Guard(api, [&]() -> EpctxStatus* {
      auto config = [&](const std::string& key) -> std::string {  // "" when absent
        const char* value = nullptr;
        EpctxStatus* st = api->GetSessionConfigEntry(options, key.c_str(), &value);
        if (st) api->ReleaseStatus(st);
        return value ? value : "";
      };
      auto ep = std::make_unique<ExampleEp>(api, logger);
      ep->context.enable = config("ep.context_enable") == "1";
      ep->context.embed = config("ep.context_embed_mode") == "1";
      ep->context.file_path = config("ep.context_file_path");
      ep->context.prefix = config("ep.context_node_name_prefix");
      ep->serialize_runs = config(std::string(kOptionPrefix) + "serialize_runs") == "1";
      ep->optimize = config(std::string(kOptionPrefix) + "optimize");
      const std::string msg = std::string(kEpName) + ": EP created for " + std::to_string(num_devices) + " device(s)";
      EXAMPLE_LOG(api, logger, EPCTX_LOG_VERBOSE, msg.c_str());
      *out = ep.release();
      return nullptr;
    });
  };
  ReleaseEp = [](EpctxEpFactory*, EpctxEp* ep) {
    auto* e = static_cast<ExampleEp*>(ep);
    if (!e) return;
    const std::string msg = std::string(kEpName) + ": EP released after " + std::to_string(e->runs_started.load()) +
                            " run(s) started, " + std::to_string(e->runs_ended.load()) + " ended";
    EXAMPLE_LOG(e->api, e->logger, EPCTX_LOG_VERBOSE, msg.c_str());
    delete e;
  };

  ValidateCompiledModelCompatibilityInfo = [](EpctxEpFactory*, const EpctxHardwareDevice* const*, size_t,
                                              const char* info, EpctxCompiledModelCompatibility* out) -> EpctxStatus* {
    const std::string s = info ? info : "";
    if (s == kCompatibilityInfo) *out = EPCTX_EP_SUPPORTED_OPTIMAL;
    else if (s.rfind("example:", 0) == 0) *out = EPCTX_EP_SUPPORTED_PREFER_RECOMPILATION;  // another version
    else *out = EPCTX_EP_UNSUPPORTED;
    return nullptr;
  };
}

}  // namespace

// ---- 7. the two exported entry points (the only symbols exports.map leaves visible) ----

extern "C" EPCTX_EP_EXPORT EpctxStatus* CreateEpFactories(const char* registration_name, const EpctxApiBase* api_base,
                                                          const EpctxLogger* default_logger,
                                                          EpctxEpFactory** factories, size_t max_factories,
                                                          size_t* num_factories) {
  const EpctxApi* api = api_base ? api_base->GetApi(EPCTX_EP_API_VERSION) : nullptr;
  if (!api) {  // a runtime older than this plugin: no table, so no status can be made; offer nothing
    *num_factories = 0;
    return nullptr;
  }
  return Guard(api, [&]() -> EpctxStatus* {
    const std::string name = registration_name ? registration_name : "";
    // Failure injection for the runtime's error-path tests.
    if (name.find("fail_factory") != std::string::npos)
      return api->CreateStatus(EPCTX_EP_FAIL, ("example factory refused: " + name).c_str());
    if (max_factories < 1) return Error(api, EPCTX_INVALID_ARGUMENT, "no room for a factory");
    const EpctxKeyValuePairs* env = api->GetEnvConfigEntries();  // valid during this call
    const char* allow = env ? api->KeyValuePairs_Get(env, "allow_virtual_devices") : nullptr;
    const bool virt = (name.size() >= 8 && name.compare(name.size() - 8, 8, ".virtual") == 0) ||
                      (allow && std::strcmp(allow, "1") == 0);
    auto* factory = new ExampleFactory(api, virt);
    if (name.find("bad_version") != std::string::npos) factory->version = 9999;  // newer than any runtime
    EXAMPLE_LOG(api, default_logger, EPCTX_LOG_VERBOSE, (std::string(kEpName) + ": factory created").c_str());
    factories[0] = factory;
    *num_factories = 1;
    return nullptr;
  });
}

extern "C" EPCTX_EP_EXPORT EpctxStatus* ReleaseEpFactory(EpctxEpFactory* factory) {
  delete static_cast<ExampleFactory*>(factory);
  return nullptr;
}
