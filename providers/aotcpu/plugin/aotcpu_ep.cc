// AotCpuExecutionProvider: the compiling CPU EP. GetCapability claims static-shaped groups of the ops the compiler
// handles (compiler.h); Compile turns each group into a Program with pre-packed weights, serializes every group of
// the call into one context binary (context_binary.h) and then — JIT or not — builds the executors from that
// binary, exactly as a session loading a _ctx.onnx does. Written only against ep_api.h; no exception crosses it.
//
// Sections: 1 helpers, 2 EP state, 3 GetCapability, 4 Compile (JIT + EPContext generation), 5 EPContext loading,
// 6 Compute, 7 the EP, 8 the factory, 9 the exported entry points.
#include <epctx/ep_api.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "common/context_util.h"
#include "providers/aotcpu/binary/context_binary.h"
#include "providers/aotcpu/binary/dynamic_records.h"
#include "providers/aotcpu/binary/isa.h"
#include "providers/aotcpu/binary/share.h"
#include "providers/aotcpu/capability/capability.h"
#include "providers/aotcpu/capability/partition_cost.h"
#include "providers/aotcpu/ir/ir.h"
#include "providers/aotcpu/lower/ops.h"
#include "providers/aotcpu/plan/compiler.h"
#include "providers/aotcpu/plugin/options.h"
#include "providers/aotcpu/runtime/dynamic.h"
#include "providers/aotcpu/runtime/executor.h"
#include "providers/aotcpu/runtime/program.h"

namespace epctx {
namespace aotcpu {
namespace {

const EpctxApi* g_api = nullptr;
constexpr const char* kEpName = "AotCpuExecutionProvider";
constexpr const char* kVendor = "epctx";
constexpr const char* kVersion = "0.2.0";

// ---- 1. helpers ----

EpctxStatus* Error(EpctxErrorCode code, const std::string& message) {
  return g_api->CreateStatus(code, (std::string(kEpName) + ": " + message).c_str());
}

template <typename Body>
EpctxStatus* Guard(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return Error(EPCTX_RUNTIME_EXCEPTION, e.what());
  } catch (...) {
    return Error(EPCTX_RUNTIME_EXCEPTION, "unknown exception");
  }
}

#define AOT_RETURN_IF_ERROR(expr)       \
  do {                                  \
    if (EpctxStatus* _st = (expr)) return _st; \
  } while (0)

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}


// ---- 2. EP state ----

// The runnable form of one fused node: an executor over weights that live in `bytes` (an in-memory binary) or in
// a mapping owned by `keep`.
struct Partition {
  std::vector<size_t> input_map;   // kernel-context input index of each program input (empty: identity)
  std::shared_ptr<const void> keep;
  std::unique_ptr<Executor> exec;  // null for a prepare-only session or a dynamic partition
  std::unique_ptr<DynamicGraph> dynamic;  // a partition compiled per input shape (dynamic.h)
  std::string run_error;           // why Compute refuses when exec and dynamic are null
};

struct ComputeInfo {
  EpctxNodeComputeInfo base;
  std::shared_ptr<Partition> part;
};

// Session options that shape compilation and EPContext handling (after the prepare-and-load checks).
struct ContextOptions {
  bool enable = false;    // ep.context_enable
  bool embed = false;     // ep.context_embed_mode == 1
  std::string file_path;  // ep.context_file_path (the runtime sets it when generating)
  std::string prefix;     // ep.context_node_name_prefix
};

struct AotCpuEp {
  EpctxEp base;  // first member: the runtime sees &base
  ContextOptions context;
  AotCpuOptions options;  // effective options
  const EpctxLogger* logger = nullptr;
  int threads = 0;
  std::string isa;         // the target ISA (host's, or a virtual device's / target_isa below it)
  std::string host_isa;    // what this process runs (maybe emulated)
  bool host_emulated = false;
  bool portable = false;   // compiling for an ISA below the host's: plain layouts
  bool progress = false;   // stderr is a terminal
  std::string compat;      // GetCompiledModelCompatibilityInfo's string
  // Weight sharing (share.h): this session's id in the generation group, whether it joined one, whether its session
  // was created (OnSessionInitializationEnd), and the group binary it wrote as the last session.
  uint64_t session_id = 0;
  bool group_member = false;
  bool initialized = false;
  std::string written_binary;
};

void LogWarning(const AotCpuEp* ep, const std::string& message) {
  g_api->Log(ep->logger, EPCTX_LOG_WARNING, __FILE__, __LINE__, (std::string(kEpName) + ": " + message).c_str());
}

AotCpuEp* Self(EpctxEp* ep) { return reinterpret_cast<AotCpuEp*>(ep); }

// ---- 3. GetCapability ----

// `g` (before folding) cut down to `nodes` (ascending), as the fused graph of that partition shows it: values made by
// other nodes become plain inputs (no constant data, the runtime's shape), consumers are the kept nodes only.
Graph Restrict(const Graph& g, const std::vector<int>& nodes) {
  Graph sub = g;
  sub.nodes.clear();
  for (Value& v : sub.values) {
    v.producer = -1;
    v.consumers.clear();
  }
  for (int i : nodes) {
    const int k = static_cast<int>(sub.nodes.size());
    const Node& n = g.nodes[static_cast<size_t>(i)];
    sub.nodes.push_back(n);
    for (int v : n.inputs)
      if (v >= 0) sub.v(v).consumers.push_back(k);
    for (int v : n.outputs)
      if (v >= 0) sub.v(v).producer = k;
  }
  return sub;
}

// dim_params of the graph's inputs: the symbols a free-dimension override (-f) can pin. Symbols elsewhere were
// made up by shape inference (unk__N) or name outputs only, and pinning them changes nothing upstream.
std::set<std::string> InputSymbols(const EpctxGraph* graph) {
  std::set<std::string> out;
  std::vector<const EpctxValueInfo*> inputs(g_api->Graph_GetNumInputs(graph));
  if (EpctxStatus* st = g_api->Graph_GetInputs(graph, inputs.data(), inputs.size())) {
    g_api->ReleaseStatus(st);
    return out;
  }
  for (const EpctxValueInfo* vi : inputs) {
    const int64_t rank = vi ? g_api->ValueInfo_GetRank(vi) : -1;
    if (rank <= 0) continue;
    std::vector<const char*> symbols(static_cast<size_t>(rank), nullptr);
    if (EpctxStatus* st = g_api->ValueInfo_GetShape(vi, nullptr, symbols.data(), symbols.size())) {
      g_api->ReleaseStatus(st);
      continue;
    }
    for (const char* sym : symbols)
      if (sym && *sym) out.insert(sym);
  }
  return out;
}

// A "no static shape" refusal made specific from the runtime's view of the node's values: which dim is free and
// the free-dimension override that pins it, or that shape inference could not compute it. `why` when neither applies.
std::string ShapeReason(const Graph& g, const Node& n, const std::string& why, const std::set<std::string>& pinnable) {
  if (why.find("static") == std::string::npos || !n.handle) return why;  // "no static shape", "shapes must be static
  for (const bool inputs : {true, false}) {
    const size_t count = inputs ? g_api->Node_GetNumInputs(n.handle) : g_api->Node_GetNumOutputs(n.handle);
    std::vector<const EpctxValueInfo*> vis(count);
    EpctxStatus* st = inputs ? g_api->Node_GetInputs(n.handle, vis.data(), count)
                             : g_api->Node_GetOutputs(n.handle, vis.data(), count);
    if (st) {
      g_api->ReleaseStatus(st);
      return why;
    }
    for (const EpctxValueInfo* vi : vis) {
      if (!vi) continue;
      const std::string name = g_api->ValueInfo_GetName(vi);
      const int v = g.Find(name);
      if (v >= 0 && g.v(v).has_shape) continue;  // folding gave it a shape
      const std::string what = std::string(inputs ? "input '" : "output '") + name + "'";
      const int64_t rank = g_api->ValueInfo_GetRank(vi);
      if (rank < 0) return what + " has no known rank (shape inference could not compute it)";
      std::vector<int64_t> dims(static_cast<size_t>(rank));
      std::vector<const char*> symbols(static_cast<size_t>(rank), nullptr);
      st = g_api->ValueInfo_GetShape(vi, dims.data(), symbols.data(), dims.size());
      if (st) {
        g_api->ReleaseStatus(st);
        continue;
      }
      for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d] >= 0) continue;
        const std::string sym = symbols[d] ? symbols[d] : "";
        if (pinnable.count(sym))
          return what + " dim " + std::to_string(d) + " is free ('" + sym + "'); pin it with -f " + sym + ":N";
        return what + " dim " + std::to_string(d) +
               " is unknown before run time (shape inference could not compute it)";
      }
    }
  }
  return why;
}

void SetReason(EpctxEpGraphSupportInfo* support, const Node& n, const std::string& reason) {
  if (!n.handle || reason.empty()) return;
  EpctxStatus* st = g_api->EpGraphSupportInfo_SetNodeRejectionReason(support, n.handle, reason.c_str());
  if (st) g_api->ReleaseStatus(st);  // a reason is information only
}

// dynamic_shapes: when `g` has free input dims, replaces it by the graph bound at probe sizes (each free dim 64, else
// 256, 1024 or 4096, clamped into its shape_ranges entry) after checking that it also binds at 1.5 times that, and fills `why` (one entry per node)
// with the reason a node's shapes are not known symbolically ("" for known ones; a node not fully known must stay on
// the CPU EP, since its partition is compiled per shape from the symbolic shapes). Leaves `g` alone (and `why`
// empty) when it has no free input dim or does not bind (`probe_error` says why): the nodes then stay on the CPU EP
// as without the option.
void ProbeDynamic(const AotCpuOptions& options, Graph* g, std::vector<std::string>* why, std::string* probe_error,
                  Graph* unbound) {
  bool free = false;
  for (int v : g->inputs) free |= !g->v(v).has_shape;
  if (!free) return;
  SymbolicShapes sym;
  InferSymbolic(*g, &sym);
  auto probe = [&](int64_t size) {
    std::map<std::string, int64_t> b;
    for (const std::string& name : sym.symbols) {
      auto r = options.shape_ranges.find(name);
      b[name] = r == options.shape_ranges.end() ? size : std::min(std::max(size, r->second.lo), r->second.hi);
    }
    return b;
  };
  // Two probe sizes per candidate pair (the second catches a shape that binds only by coincidence); larger pairs for
  // graphs whose windows need more (an audio front end's 512-sample STFT window).
  Graph bound, second;
  std::string err;
  bool binds = false;
  for (int64_t size : {64, 256, 1024, 4096}) {
    if (Bind(*g, sym, probe(size), &bound, &err) && Bind(*g, sym, probe(size + size / 2), &second, &err)) {
      binds = true;
      break;
    }
  }
  if (!binds) {
    *probe_error = "dynamic_shapes: the graph binds at none of the probe sizes (64 to 6144 per free dim): " + err;
    return;
  }
  why->assign(g->nodes.size(), std::string());
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    (*why)[i] = i < sym.why.size() ? sym.why[i] : std::string();
    const Node& n = g->nodes[i];
    for (const std::vector<int>* list : {&n.inputs, &n.outputs})
      for (int v : *list)
        if (v >= 0 && (*why)[i].empty() && !sym.values[static_cast<size_t>(v)].known)
          (*why)[i] = "value '" + g->v(v).name + "' has no shape known as an expression of the free dims";
  }
  *unbound = std::move(*g);
  *g = std::move(bound);
}

EpctxStatus* GetCapabilityImpl(AotCpuEp* ep, const EpctxGraph* graph, EpctxEpGraphSupportInfo* support) {
  {
    std::vector<const EpctxNode*> nodes(g_api->Graph_GetNumNodes(graph));
    AOT_RETURN_IF_ERROR(g_api->Graph_GetNodes(graph, nodes.data(), nodes.size()));
    bool any = false;
    for (const EpctxNode* node : nodes)
      if (plugin::IsEpContextNodeFrom(g_api, node, {kEpName})) {
        AOT_RETURN_IF_ERROR(g_api->EpGraphSupportInfo_AddSingleNode(support, node));
        any = true;
      }
    if (any) {  // a compiled model: its remaining nodes stay where the runtime puts them
      std::string warning;
      ep->options = IgnorePrepareAndLoadForContextModel(ep->options, &warning);
      if (!warning.empty()) LogWarning(ep, warning);
      return nullptr;
    }
  }
  Graph g;
  CheckResult r = BuildGraph(g_api, graph, &g);
  if (!r.ok) return Error(EPCTX_EP_FAIL, "reading the graph: " + r.reason);
  DistrustContradictedShapes(&g);  // static shapes libonnx sized unlike the kernels (ops.h)
  // Dynamic shapes (dynamic.h): with free input dims, the graph is judged bound at probe sizes; the fused graphs keep
  // their symbolic shapes and are compiled per input shape at run time. Nodes whose shapes are not known as
  // expressions of the free dims stay on the CPU EP.
  std::vector<std::string> symbolic_why;
  std::string probe_error;
  Graph unbound;  // with dynamic shapes: the graph before binding, to judge each partition's symbolic shapes alone
  if (ep->options.dynamic_shapes) ProbeDynamic(ep->options, &g, &symbolic_why, &probe_error, &unbound);
  const Graph original = g;
  std::vector<bool> folded;
  r = FoldConstants(&g, &folded);
  if (!r.ok) {  // a malformed constant subgraph: claim nothing, the CPU EP reports the problem
    for (const Node& n : original.nodes) SetReason(support, n, "constant folding failed: " + r.reason);
    return nullptr;
  }
  // Again with the shapes folding made static: without the runtime's folding (the compile API's level 0) a pooling
  // fed by a Reshape to a computed shape had no input shape the first time (difftest seed 20261130 model 1223).
  DistrustContradictedShapes(&g);
  folded.resize(g.nodes.size(), false);
  std::vector<bool> supported(g.nodes.size(), false);
  std::vector<std::string> reasons(g.nodes.size());  // why each node is not taken (handed to the runtime)
  const std::set<std::string> pinnable = InputSymbols(graph);
  size_t compute_nodes = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.has_subgraphs) {
      reasons[i] = "has subgraphs (If/Loop/Scan run on the CPU EP)";
      continue;
    }
    std::string why;
    supported[i] = folded[i] || IsNodeSupported(g, n, &why);
    if (!supported[i]) reasons[i] = ShapeReason(g, n, why, pinnable);
    if (!supported[i] && !probe_error.empty()) reasons[i] += " (" + probe_error + ")";
    if (supported[i] && i < symbolic_why.size() && !symbolic_why[i].empty()) {
      supported[i] = false;
      reasons[i] = "its shapes are not known for every size of the free dims: " + symbolic_why[i];
    }
    if (supported[i] && !folded[i]) ++compute_nodes;
  }
  if (compute_nodes == 0) {  // only constants: nothing worth a partition
    for (size_t i = 0; i < g.nodes.size(); ++i)
      SetReason(support, g.nodes[i],
                reasons[i].empty() ? "only constants are left to compute in this graph (no partition made)" : reasons[i]);
    return nullptr;
  }
  // Each partition's Compile sees only its own nodes: a value made by another partition (or the CPU EP) arrives
  // without the data folding gave it and with the runtime's shape. Re-check every group that way and drop the
  // nodes that would fail there (Reshape to a shape folded elsewhere, a mask shaped only by folding), until stable.
  // The runtime folds constants before GetCapability at graph optimization level >= 1, so then this rarely drops a
  // node (a result over the runtime's size cap); it is still needed at level 0 (the compile API's default) and
  // keeps every partition compilable whatever the runtime did.
  for (bool changed = true; changed;) {
    changed = false;
    for (const std::vector<int>& group : GroupNodes(g, supported)) {
      Graph sub = Restrict(original, group);
      // A value a node outside the group makes arrives as a runtime input. With dynamic shapes `original` is the
      // graph bound at probe sizes, where shape values (a Constant's int64, Shape arithmetic) carry the data binding
      // wrote: dropped here, as the partition will not have it (difftest --dynamic seed 20261211: a Pow whose
      // exponent came from a Constant node left outside failed to lower at run time).
      for (size_t v = 0; v < sub.values.size(); ++v)
        if (original.values[v].producer >= 0 && sub.values[v].producer < 0 && !sub.values[v].is_initializer &&
            sub.values[v].is_const()) {
          sub.values[v].data = nullptr;
          sub.values[v].folded.reset();
        }
      std::vector<bool> sub_folded;
      const bool ok = FoldConstants(&sub, &sub_folded).ok;
      if (ok) DistrustContradictedShapes(&sub);
      sub_folded.resize(sub.nodes.size(), false);
      for (size_t k = 0; k < group.size(); ++k) {
        std::string why;
        if (ok && (sub_folded[k] || IsNodeSupported(sub, sub.nodes[k], &why))) continue;
        supported[static_cast<size_t>(group[k])] = false;
        reasons[static_cast<size_t>(group[k])] =
            "in its partition, without the values folding computed outside it: " +
            (ok ? ShapeReason(sub, sub.nodes[k], why, pinnable) : std::string("constant folding failed"));
        changed = true;
      }
      if (unbound.nodes.empty()) continue;
      // With dynamic shapes the partition is compiled from its own symbolic shapes: a value made outside it arrives
      // with only the rank and dims the runtime knows (difftest --dynamic, seed 20261209: a BatchNormalization on
      // the CPU EP whose output had no rank for the runtime failed the session's compile).
      Graph usub = Restrict(unbound, group);
      std::set<int> inside_outputs;
      for (const Node& n : usub.nodes)
        for (int o : n.outputs)
          if (o >= 0) inside_outputs.insert(o);
      usub.inputs.clear();
      for (const Node& n : usub.nodes)
        for (int in : n.inputs)
          if (in >= 0 && !inside_outputs.count(in) && !usub.v(in).is_const() && !usub.v(in).is_graph_input) {
            usub.v(in).is_graph_input = true;
            usub.inputs.push_back(in);
          }
      for (int in : unbound.inputs) usub.inputs.push_back(in);
      SymbolicShapes us;
      InferSymbolic(usub, &us);
      for (size_t k = 0; k < group.size(); ++k) {
        const size_t node = static_cast<size_t>(group[k]);
        if (!supported[node]) continue;
        std::string why = k < us.why.size() ? us.why[k] : std::string();
        for (const std::vector<int>* list : {&usub.nodes[k].inputs, &usub.nodes[k].outputs})
          for (int v : *list)
            if (v >= 0 && why.empty() && !us.values[static_cast<size_t>(v)].known)
              why = "value '" + usub.v(v).name + "' has no shape known as an expression of the free dims";
        if (why.empty()) continue;
        supported[node] = false;
        reasons[node] = "in its partition, its shapes are not known for every size of the free dims: " + why;
        changed = true;
      }
    }
  }
  bool any_subgraphs = false;
  for (const Node& n : g.nodes) any_subgraphs |= n.has_subgraphs;
  // Leaving a whole group on the CPU EP never makes another group's fusion cyclic (every path between two nodes of
  // a group stays inside it, GroupNodes), so each group is judged on its own.
  for (const std::vector<int>& group : GroupNodes(g, supported)) {
    // A group of only constants and zero-copy views (a lone Reshape or same-type Cast between nodes left on the
    // CPU EP) would cost a partition and its boundary copies and compute nothing: it stays on the CPU EP.
    bool computes = false;
    for (int n : group)
      computes |= !folded[static_cast<size_t>(n)] && !IsZeroCopyView(g.nodes[static_cast<size_t>(n)]);
    // A group none of whose results is read (dead nodes the runtime did not remove, at the compile API's level 0)
    // would become a fused node with no outputs, which no context model may hold (difftest --dynamic, seed 20261210
    // model 9216): it stays on the CPU EP.
    // (A value read only inside an If/Loop body has no consumer entry: with such nodes the check is skipped.)
    if (!any_subgraphs) {
      const std::set<int> in_group(group.begin(), group.end());
      bool read = false;
      for (int n : group)
        for (int o : g.nodes[static_cast<size_t>(n)].outputs) {
          if (o < 0) continue;
          read |= g.v(o).is_graph_output;
          for (int c : g.v(o).consumers) read |= !in_group.count(c);
        }
      if (!read) {
        for (int n : group) reasons[static_cast<size_t>(n)] = "nothing reads the results of its group (no partition made)";
        continue;
      }
    }
    if (!computes) {
      for (int n : group)
        reasons[static_cast<size_t>(n)] =
            folded[static_cast<size_t>(n)]
                ? "folds to a constant in a group with nothing to compute (no partition made)"
                : "a zero-copy view in a group with nothing to compute (a partition would only add copies)";
      continue;
    }
    // An island whose work saves less than its partition costs stays on the CPU EP (partition_cost.h).
    const GroupCost cost = EstimateGroupCost(g, group, folded, ep->options.partition_cost);
    if (!GroupPays(cost, ep->options.partition_cost)) {
      const std::string why = NotPayingReason(cost, ep->options.partition_cost);
      for (int n : group) reasons[static_cast<size_t>(n)] = why;
      continue;
    }
    std::vector<const EpctxNode*> nodes;
    for (int n : group) nodes.push_back(g.nodes[static_cast<size_t>(n)].handle);
    AOT_RETURN_IF_ERROR(g_api->EpGraphSupportInfo_AddNodesToFuse(support, nodes.data(), nodes.size()));
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) SetReason(support, g.nodes[i], reasons[i]);
  return nullptr;
}

// ---- 4. Compile ----

// Test hook, for tests of `epctx compare` only (docs/aotcpu.md): EPCTX_AOTCPU_TEST_PLANT_BUG set to
//   wrong-on-purpose:<node name>           compiles that node wrong on purpose: its first constant float operand is
//                                          replaced (for this node only) by a copy with 0.5 added to every element;
//   wrong-on-purpose-if-fused:<node name>  the same, only when no output of the node leaves its partition (a bug
//                                          that shows only while the node is fused with its consumers).
// Any other value is ignored. Every compile that applies it logs a warning, so a plant set by mistake cannot go
// unnoticed; the prefix keeps an accidental match impossible.
void PlantTestBug(AotCpuEp* ep, Graph* g, const std::vector<std::string>& partition_outputs) {
  static const char* env = ::getenv("EPCTX_AOTCPU_TEST_PLANT_BUG");
  if (!env) return;
  const std::string spec = env;
  static const std::string kAlways = "wrong-on-purpose:", kFused = "wrong-on-purpose-if-fused:";
  const bool only_fused = spec.compare(0, kFused.size(), kFused) == 0;
  if (!only_fused && spec.compare(0, kAlways.size(), kAlways) != 0) return;
  const std::string target = spec.substr(only_fused ? kFused.size() : kAlways.size());
  for (Node& n : g->nodes) {
    if (n.name != target) continue;
    if (only_fused)
      for (int o : n.outputs)
        if (o >= 0 && std::find(partition_outputs.begin(), partition_outputs.end(), g->v(o).name) !=
                          partition_outputs.end())
          return;
    for (int& in : n.inputs) {
      if (in < 0 || !g->v(in).is_const() || g->v(in).dtype != kF32 || g->v(in).numel() <= 0) continue;
      Value planted = g->v(in);
      planted.name += "__planted_bug";
      planted.is_initializer = false;
      planted.is_graph_input = planted.is_graph_output = false;
      planted.producer = -1;
      planted.consumers.clear();
      planted.folded = std::make_shared<std::string>(static_cast<const char*>(planted.data), planted.bytes());
      float* f = reinterpret_cast<float*>(planted.folded->data());
      for (int64_t k = 0; k < planted.numel(); ++k) f[k] += 0.5f;
      planted.data = planted.folded->data();
      const int id = static_cast<int>(g->values.size());
      const int node_index = static_cast<int>(&n - g->nodes.data());
      auto& consumers = g->v(in).consumers;
      auto it = std::find(consumers.begin(), consumers.end(), node_index);
      if (it != consumers.end()) consumers.erase(it);
      planted.consumers.push_back(node_index);
      g->by_name[planted.name] = id;
      g->values.push_back(std::move(planted));
      in = id;
      LogWarning(ep, "EPCTX_AOTCPU_TEST_PLANT_BUG: node '" + target + "' is compiled WRONG ON PURPOSE (test hook)");
      return;
    }
  }
}

std::vector<std::string> IoNames(const EpctxNode* fused, bool inputs) {
  const size_t n = inputs ? g_api->Node_GetNumInputs(fused) : g_api->Node_GetNumOutputs(fused);
  std::vector<const EpctxValueInfo*> vis(n);
  EpctxStatus* st = inputs ? g_api->Node_GetInputs(fused, vis.data(), n) : g_api->Node_GetOutputs(fused, vis.data(), n);
  std::vector<std::string> names;
  if (st) {
    g_api->ReleaseStatus(st);
    return names;
  }
  for (const EpctxValueInfo* vi : vis) names.push_back(vi ? g_api->ValueInfo_GetName(vi) : "");
  return names;
}

// Validates a binary once (every section checksum; tensors are not re-hashed one by one) and indexes it.
CheckResult OpenBinary(const void* data, size_t size, std::shared_ptr<ContextBinaryReader>* out,
                       bool verify_weights = true) {
  auto reader = std::make_shared<ContextBinaryReader>();
  CheckResult r = reader->Open(data, size, /*full_validation=*/false, verify_weights);
  if (!r.ok) return r;
  *out = std::move(reader);
  return CheckResult::Ok();
}

// Builds executors for the named graphs of an opened binary. `keep` owns the bytes the reader views.
// What a dynamic partition needs from the EP: its compile options, threads, cache size and ranges.
DynamicGraph::Options DynamicOptionsOf(const AotCpuEp* ep) {
  DynamicGraph::Options o;
  o.compile.isa = ep->isa;
  o.compile.portable_layouts = ep->portable;
  o.threads = ep->threads;
  o.cache_size = ep->options.shape_cache_size;
  for (const auto& [sym, range] : ep->options.shape_ranges) o.ranges[sym] = {range.lo, range.hi};
  return o;
}

// `run`: threads for every partition, and the options of dynamic ones (DynamicOptionsOf).
CheckResult LoadPartitions(const ContextBinaryReader& reader, std::shared_ptr<const void> keep,
                           const DynamicGraph::Options& run,
                           const std::vector<std::string>& names, std::vector<std::shared_ptr<Partition>>* out) {
  for (const std::string& name : names) {
    const GraphView* gv = nullptr;
    for (const GraphView& v : reader.graphs())
      if (v.name == name) gv = &v;
    if (!gv) return CheckResult::Fail("the context binary holds no graph named '" + name + "'");
    if (gv->records.size() >= 8 && gv->records.substr(0, 7) == "AOTDYN1") {  // a dynamic partition
      std::vector<WeightRef> tensors;
      for (uint32_t t : gv->tensor_indices) tensors.push_back({reader.tensors()[t].data, reader.tensors()[t].length});
      ParsedDynamicGraph parsed;
      CheckResult r = ParseDynamicGraph(gv->records, tensors, &parsed);
      if (!r.ok) return CheckResult::Fail("graph '" + name + "': " + r.reason);
      std::map<std::string, CompileOptions::EarlierWeight> packed;
      for (const auto& [wname, w] : parsed.packed) packed[wname] = {w.layout, nullptr, w.data, w.size, keep};
      auto part = std::make_shared<Partition>();
      part->keep = keep;
      const size_t n = parsed.inputs.size();
      // The ranges the compile was given hold unless this session names its own for a symbol.
      DynamicGraph::Options o = run;
      for (const auto& [sym, range] : parsed.shapes.ranges) o.ranges.emplace(sym, SymbolRange{range.first, range.second});
      r = DynamicGraph::Create(std::move(parsed.graph), std::move(parsed.inputs), std::move(parsed.outputs), o, keep,
                               &part->dynamic, packed);
      if (!r.ok) return CheckResult::Fail("graph '" + name + "': " + r.reason);
      // The shape profiles are built now (their weights are in the binary), so their first run builds nothing. A
      // shape-generic graph needs none: no shape is built.
      if (!part->dynamic->generic())
        for (size_t k = 0; k < parsed.shapes.profiles.size(); ++k) {
          std::shared_ptr<Executor> exec;
          bool invalid = false;
          r = part->dynamic->Get(parsed.shapes.profiles[k], &exec, &invalid);
          if (!r.ok)
            return CheckResult::Fail("graph '" + name + "': shape profile " + std::to_string(k + 1) + ": " + r.reason);
        }
      for (size_t k = 0; k < n; ++k) part->input_map.push_back(k);
      out->push_back(std::move(part));
      continue;
    }
    Program p;
    CheckResult r = ParseProgram(gv->records, static_cast<uint32_t>(gv->tensor_indices.size()), &p);
    if (!r.ok) return CheckResult::Fail("graph '" + name + "': " + r.reason);
    std::vector<WeightRef> weights;
    for (uint32_t t : gv->tensor_indices) weights.push_back({reader.tensors()[t].data, reader.tensors()[t].length});
    auto part = std::make_shared<Partition>();
    part->keep = keep;
    r = Executor::Create(std::move(p), std::move(weights), run.threads, &part->exec);
    if (!r.ok) return CheckResult::Fail("graph '" + name + "': " + r.reason);
    out->push_back(std::move(part));
  }
  return CheckResult::Ok();
}

CheckResult LoadPartitions(const void* data, size_t size, std::shared_ptr<const void> keep,
                           const DynamicGraph::Options& run,
                           const std::vector<std::string>& names, std::vector<std::shared_ptr<Partition>>* out) {
  std::shared_ptr<ContextBinaryReader> reader;
  CheckResult r = OpenBinary(data, size, &reader);
  if (!r.ok) return r;
  return LoadPartitions(*reader, std::move(keep), run, names, out);
}

// The inputs a compiled graph reads at run time: the fused node's inputs minus the constant initializers the
// program bakes in (their packed copies live in the binary; the EPContext node does not list them, so the ctx model
// does not carry them either).
struct GraphIo {
  std::vector<std::string> inputs, outputs;
  std::vector<size_t> input_map;  // index of each input among the fused node's inputs
};

// The dynamic-shape options of a compile, as the binary's compatibility block records them (`epctx inspect` shows
// them; loading does not compare them): dynamic_shapes, and shape_ranges / shape_profiles in their option syntax.
void AddDynamicCompat(const AotCpuOptions& o, CompatInfo* c) {
  if (!o.dynamic_shapes) return;
  c->options.push_back({"dynamic_shapes", "1"});
  std::string ranges;
  for (const auto& [sym, r] : o.shape_ranges)
    ranges += (ranges.empty() ? "" : ",") + sym + ":" + std::to_string(r.lo) + ".." + std::to_string(r.hi);
  if (!ranges.empty()) c->options.push_back({"shape_ranges", ranges});
  std::string profiles;
  for (const auto& [input, shapes] : o.shape_profiles) {
    std::string list;
    for (const auto& dims : shapes) {
      std::string d;
      for (int64_t x : dims) d += (d.empty() ? "" : "x") + std::to_string(x);
      list += (list.empty() ? "" : ",") + d;
    }
    profiles += (profiles.empty() ? "" : ";") + input + ":" + list;
  }
  if (!profiles.empty()) c->options.push_back({"shape_profiles", profiles});
}

EpctxStatus* MaybeDynamic(AotCpuEp* ep, const EpctxGraph* graph, const EpctxNode* fused, std::shared_ptr<Partition>* out);

// A dynamic partition for a context binary: the shape_profiles bound first (so their weights are packed now and
// stored), then the symbolic graph, its constants and the packed weights as AOTDYN1 records (dynamic_records.h).
EpctxStatus* SerializeDynamic(AotCpuEp* ep, const std::string& graph_name, Partition* part, DynamicRecords* out) {
  DynamicGraph& d = *part->dynamic;
  const auto& profiles = ep->options.shape_profiles;
  const size_t count = profiles.empty() ? 0 : profiles.begin()->second.size();
  DynamicShapeInfo shapes;
  for (const std::string& sym : d.symbols())
    if (auto it = ep->options.shape_ranges.find(sym); it != ep->options.shape_ranges.end())
      shapes.ranges[sym] = {it->second.lo, it->second.hi};
  // In a weight-sharing group the profiles are given to every graph of it: one that does not apply to a graph (no
  // shape for one of its free inputs, or a shape it cannot take: prefill's input_ids 1x128 against decode's [1, 1])
  // is skipped for that graph. Alone, that is the caller's error.
  const bool group = ep->options.share_ep_contexts;
  for (size_t k = 0; k < count; ++k) {
    std::vector<std::vector<int64_t>> dims;
    std::string missing;
    for (const std::string& input : d.inputs()) {
      auto it = profiles.find(input);
      const int v = d.graph().Find(input);
      if (it == profiles.end()) {
        if (v >= 0 && d.graph().v(v).has_shape) {
          dims.push_back(d.graph().v(v).dims);
          continue;
        }
        missing = input;
        break;
      }
      dims.push_back(it->second[k]);
    }
    if (!missing.empty()) {
      if (group) continue;
      return Error(EPCTX_INVALID_ARGUMENT, std::string(kShapeProfilesKey) + " gives no shape for input '" + missing +
                                               "' of partition '" + graph_name + "', whose dims are free");
    }
    CheckResult r = d.CheckShape(dims);
    if (!r.ok && group) continue;
    // A shape-generic graph builds nothing per shape: the profile is only checked (and stored).
    std::shared_ptr<Executor> exec;
    bool invalid = true;
    if (r.ok && !d.generic()) r = d.Get(dims, &exec, &invalid);
    if (!r.ok)
      return Error(invalid ? EPCTX_INVALID_ARGUMENT : EPCTX_EP_FAIL,
                   std::string(kShapeProfilesKey) + " profile " + std::to_string(k + 1) + " of partition '" +
                       graph_name + "': " + r.reason);
    shapes.profiles.push_back(dims);
  }
  std::vector<StoredWeight> packed;
  for (const DynamicGraph::Packed& w : d.PackedWeights()) packed.push_back({w.name, w.layout, w.data, w.size});
  CheckResult r = SerializeDynamicGraph(d.graph(), d.inputs(), d.outputs(), packed, out, graph_name + "/", shapes);
  if (!r.ok) return Error(EPCTX_EP_FAIL, "storing dynamic partition '" + graph_name + "': " + r.reason);
  return nullptr;
}

// Compiles the graphs (fused node names in *names). With `dynamic` (context binaries), a graph with free input dims
// (dynamic_shapes=1) becomes AOTDYN1 records in (*dynamic)[i] and an empty CompiledGraph.
EpctxStatus* CompileGraphs(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                           std::vector<std::string>* names, std::vector<CompiledGraph>* compiled,
                           std::vector<GraphIo>* io, std::vector<DynamicRecords>* dynamic = nullptr,
                           std::vector<std::shared_ptr<Partition>>* dynamic_parts = nullptr) {
  const auto t0 = std::chrono::steady_clock::now();
  size_t packed = 0;
  uint64_t packed_bytes = 0;
  for (size_t i = 0; i < count; ++i) {
    const std::string name = g_api->Node_GetName(fused_nodes[i]);
    if (dynamic) {
      dynamic->resize(compiled->size() + 1);
      if (dynamic_parts) dynamic_parts->resize(compiled->size() + 1);
      std::shared_ptr<Partition> part;
      AOT_RETURN_IF_ERROR(MaybeDynamic(ep, graphs[i], fused_nodes[i], &part));
      if (part) {
        GraphIo gio;
        gio.inputs = part->dynamic->inputs();
        gio.outputs = part->dynamic->outputs();
        gio.input_map = part->input_map;
        AOT_RETURN_IF_ERROR(SerializeDynamic(ep, ep->context.prefix + name, part.get(), &dynamic->back()));
        if (dynamic_parts) dynamic_parts->back() = part;
        compiled->emplace_back();
        names->push_back(ep->context.prefix + name);
        io->push_back(std::move(gio));
        continue;
      }
    }
    Graph g;
    CheckResult r = BuildGraph(g_api, graphs[i], &g);
    if (!r.ok) return Error(EPCTX_EP_FAIL, "graph '" + name + "': " + r.reason);
    PlantTestBug(ep, &g, IoNames(fused_nodes[i], false));
    CompileOptions options;
    options.isa = ep->isa;
    options.portable_layouts = ep->portable;
    if (ep->progress) {
      options.on_weight = [&, i](size_t n, uint64_t bytes) {
        if (n % 8 == 0)
          std::fprintf(stderr, "\r[aotcpu] partition %zu/%zu: %zu weights packed (%.1f MB), %.1f s   ", i + 1, count,
                       packed + n, (packed_bytes + bytes) / 1e6, MsSince(t0) / 1000);
      };
    }
    GraphIo gio;
    const std::vector<std::string> fused_inputs = IoNames(fused_nodes[i], true);
    for (size_t k = 0; k < fused_inputs.size(); ++k) {
      const int v = g.Find(fused_inputs[k]);
      if (v >= 0 && g.v(v).is_initializer) continue;
      gio.inputs.push_back(fused_inputs[k]);
      gio.input_map.push_back(k);
    }
    gio.outputs = IoNames(fused_nodes[i], false);
    CompiledGraph cg;
    r = CompileGraph(g, gio.inputs, gio.outputs, options, &cg);
    if (!r.ok) return Error(EPCTX_EP_FAIL, "compiling '" + name + "': " + r.reason);
    packed += cg.weights.size();
    for (const TensorInput& t : cg.weights) packed_bytes += t.bytes.size();
    compiled->push_back(std::move(cg));
    names->push_back(ep->context.prefix + name);  // graph name in the binary = EPContext node / partition name
    io->push_back(std::move(gio));
  }
  if (ep->progress)
    std::fprintf(stderr, "\r[aotcpu] %zu partition(s) compiled: %zu weights packed (%.1f MB), %.1f s            \n",
                 count, packed, packed_bytes / 1e6, MsSince(t0) / 1000);
  return nullptr;
}

// Serializes compiled graphs into one context binary; the weights move out of `compiled`.
EpctxStatus* BinaryOf(AotCpuEp* ep, std::vector<CompiledGraph>* compiled, const std::vector<std::string>& names,
                      std::string* binary, std::vector<DynamicRecords>* dynamic = nullptr) {
  ContextBinaryContents contents;
  contents.compat.epctx_version = kVersion;
  contents.compat.onednn_version = OneDnnVersion();
  contents.compat.isa = ep->isa;
  if (ep->portable) contents.compat.options.push_back({"layouts", "plain"});
  AddDynamicCompat(ep->options, &contents.compat);
  for (size_t i = 0; i < compiled->size(); ++i) {
    CompiledGraph& cg = (*compiled)[i];
    GraphInput gi;
    gi.name = names[i];
    if (dynamic && i < dynamic->size() && !(*dynamic)[i].records.empty()) {
      DynamicRecords& dr = (*dynamic)[i];
      gi.records = std::move(dr.records);
      for (TensorInput& t : dr.tensors) {
        gi.tensor_names.push_back(t.name);
        contents.tensors.push_back(std::move(t));
      }
      dr.tensors.clear();
      contents.graphs.push_back(std::move(gi));
      continue;
    }
    gi.records = SerializeProgram(cg.program);
    for (TensorInput& t : cg.weights) {
      t.name = names[i] + "/" + t.name;  // unique per graph; equal bytes are still stored once
      gi.tensor_names.push_back(t.name);
      contents.tensors.push_back(std::move(t));
    }
    cg.weights.clear();
    contents.graphs.push_back(std::move(gi));
  }
  CheckResult r = WriteContextBinary(contents, binary);
  if (!r.ok) return Error(EPCTX_EP_FAIL, "writing the context binary: " + r.reason);
  return nullptr;
}

EpctxStatus* CompileToBinary(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                             std::vector<std::string>* names, std::string* binary, std::vector<GraphIo>* io) {
  std::vector<CompiledGraph> compiled;
  std::vector<DynamicRecords> dynamic;
  AOT_RETURN_IF_ERROR(CompileGraphs(ep, graphs, fused_nodes, count, names, &compiled, io, &dynamic));
  return BinaryOf(ep, &compiled, *names, binary, &dynamic);
}

// JIT: executors straight over the compiled graphs' weights (no serialization).
CheckResult PartitionsFromCompiled(std::vector<CompiledGraph>* compiled, int threads,
                                   std::vector<std::shared_ptr<Partition>>* out) {
  for (CompiledGraph& cg : *compiled) {
    auto weights = std::make_shared<std::vector<TensorInput>>(std::move(cg.weights));
    std::vector<WeightRef> refs;
    for (const TensorInput& t : *weights) refs.push_back({t.bytes.data(), t.bytes.size()});
    auto part = std::make_shared<Partition>();
    part->keep = weights;
    CheckResult r = Executor::Create(std::move(cg.program), std::move(refs), threads, &part->exec);
    if (!r.ok) return r;
    out->push_back(std::move(part));
  }
  return CheckResult::Ok();
}

// ---- 6. Compute ----

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

// Writes the EPContext nodes for freshly compiled graphs. Embed 0: `binary` goes to "<ctx stem>_aotcpu.bin" beside
// the ctx model; the first node (main_context=1) names it, the others (main_context=0) find their graph by
// partition_name. Embed 1: each node carries its own binary (`per_graph[i]`).
EpctxStatus* GenerateContext(AotCpuEp* ep, size_t count, const std::vector<std::string>& names,
                             const std::vector<GraphIo>& io, const std::string& binary,
                             const std::vector<std::string>& per_graph, EpctxNode** ep_context_nodes,
                             const std::string& shared_reference = std::string()) {
  const ContextOptions& o = ep->context;
  std::string path;
  if (!shared_reference.empty()) {
    // A weight-sharing group: the group's binary, written by its last session.
  } else if (!o.embed) {
    if (o.file_path.empty())
      return Error(EPCTX_EP_FAIL, "ep.context_file_path is not set, so there is no folder for the context binary");
    path = plugin::ContextBinaryPath(o.file_path, "_aotcpu.bin");
    AOT_RETURN_IF_ERROR(plugin::WriteFileAtomically(g_api, kEpName, path, binary));
  }
  for (size_t i = 0; i < count; ++i) {
    plugin::EpContextNodeSpec spec;
    spec.name = names[i];  // already carries ep.context_node_name_prefix
    spec.source = kEpName;
    spec.sdk_version = kVersion;
    spec.hardware_architecture = ep->isa;
    spec.inputs = io[i].inputs;
    spec.outputs = io[i].outputs;
    if (o.embed) {
      spec.embed_mode = 1;
      spec.cache = per_graph[i];
    } else {
      spec.embed_mode = 0;
      spec.main_context = i == 0 ? 1 : 0;
      spec.has_cache = i == 0;
      if (i == 0) spec.cache = shared_reference.empty() ? plugin::FileNameOf(path) : shared_reference;
    }
    if (EpctxStatus* st = plugin::MakeEpContextNode(g_api, spec, &ep_context_nodes[i])) {
      if (!path.empty()) unlink(path.c_str());  // no ctx model will reference it
      return st;
    }
  }
  return nullptr;
}

EpctxStatus* CheckCompat(AotCpuEp* ep, const std::string& from, const ContextBinaryReader& reader);
EpctxStatus* OpenChecked(AotCpuEp* ep, const std::string& from, const void* data, size_t size,
                         std::shared_ptr<ContextBinaryReader>* reader, WeightVerification* deferred = nullptr);
EpctxStatus* LoadError(const std::string& message);

// The path of `target` relative to `folder` when it lies inside it (after resolving symlinks of both folders);
// false otherwise (ep_cache_context may not leave the model's folder).
bool RelativeInside(const std::string& folder, const std::string& target, std::string* rel) {
  char a[PATH_MAX], b[PATH_MAX];
  const std::string tf = plugin::FolderOf(target);
  if (!realpath(folder.empty() ? "." : folder.c_str(), a) || !realpath(tf.empty() ? "." : tf.c_str(), b)) return false;
  const std::string fa(a), fb(b);
  if (fa == fb) return *rel = plugin::FileNameOf(target), true;
  const std::string prefix = fa == "/" ? "/" : fa + "/";
  if (fb.compare(0, prefix.size(), prefix) != 0) return false;
  *rel = fb.substr(prefix.size()) + "/" + plugin::FileNameOf(target);
  return true;
}

std::string StemOf(const std::string& path) {
  const std::string name = plugin::FileNameOf(path);
  const size_t dot = name.rfind('.');
  return dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
}

// Generation in a weight-sharing group (ep.share_ep_contexts=1, share.h): compile, stage the graphs in the group,
// reference the group's binary from this session's EPContext nodes; the last session writes the binary.
EpctxStatus* CompileShared(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                           std::vector<std::shared_ptr<Partition>>* parts, EpctxNode** ep_context_nodes) {
  GenerationGroup& group = GenerationGroup::Instance();
  const std::string& ctx = ep->context.file_path;
  if (ctx.empty()) return Error(EPCTX_EP_FAIL, "ep.context_file_path is not set, so there is no folder for the binary");
  const std::string model_path = g_api->Graph_GetModelPath(graphs[0]);
  const std::string stem = model_path.empty() ? StemOf(ctx) : StemOf(model_path);
  bool started = false;
  const std::string binary = group.Join(plugin::JoinPath(plugin::FolderOf(ctx), stem + "_aotcpu.bin"), &started);
  ep->group_member = true;
  std::string reference;
  if (!RelativeInside(plugin::FolderOf(ctx), binary, &reference))
    return Error(EPCTX_INVALID_ARGUMENT,
                 "ep.share_ep_contexts=1: this session's context model '" + ctx + "' cannot reference the group's "
                 "binary '" + binary + "', which is outside its folder (EPContext nodes may only reference files "
                 "inside the model's folder). Write every context model of a group into the folder of the first one, "
                 "or into a folder that contains it.");
  std::vector<std::string> names;
  std::vector<GraphIo> io;
  std::vector<CompiledGraph> compiled;
  // Dynamic partitions (dynamic_shapes=1) join the group as AOTDYN1 records; equal constants and packed weights of
  // its graphs are stored once, as for programs.
  std::vector<DynamicRecords> dynamic;
  std::vector<std::shared_ptr<Partition>> dynamic_parts;
  AOT_RETURN_IF_ERROR(CompileGraphs(ep, graphs, fused_nodes, count, &names, &compiled, &io, &dynamic, &dynamic_parts));
  // The group keeps a copy of the graphs and weights until its binary is written; this session runs its own.
  std::vector<GraphInput> group_graphs;
  std::vector<TensorInput> group_tensors;
  for (size_t i = 0; i < compiled.size(); ++i) {
    GraphInput gi;
    gi.name = names[i];
    if (i < dynamic.size() && !dynamic[i].records.empty()) {
      gi.records = dynamic[i].records;
      for (const TensorInput& t : dynamic[i].tensors) {
        gi.tensor_names.push_back(t.name);
        group_tensors.push_back(t);
      }
      group_graphs.push_back(std::move(gi));
      continue;
    }
    gi.records = SerializeProgram(compiled[i].program);
    for (const TensorInput& t : compiled[i].weights) {
      TensorInput copy = t;
      copy.name = gi.name + "/" + t.name;
      gi.tensor_names.push_back(copy.name);
      group_tensors.push_back(std::move(copy));
    }
    group_graphs.push_back(std::move(gi));
  }
  CheckResult r = group.Stage(ep->session_id, std::move(group_graphs), std::move(group_tensors));
  if (!r.ok) return Error(EPCTX_INVALID_ARGUMENT, r.reason);
  // This session's partitions, in graph order: the dynamic ones as compiled, the others from their programs.
  for (size_t i = 0; i < compiled.size(); ++i) {
    if (i < dynamic_parts.size() && dynamic_parts[i]) {
      parts->push_back(dynamic_parts[i]);
      continue;
    }
    std::vector<CompiledGraph> one;
    one.push_back(std::move(compiled[i]));
    r = PartitionsFromCompiled(&one, ep->threads, parts);
    if (!r.ok) return Error(EPCTX_EP_FAIL, r.reason);
  }
  for (size_t k = 0; k < parts->size(); ++k) (*parts)[k]->input_map = io[k].input_map;
  if (ep->options.stop_share_ep_contexts) {
    ContextBinaryContents contents = group.Contents(ep->session_id);
    contents.compat.epctx_version = kVersion;
    contents.compat.onednn_version = OneDnnVersion();
    contents.compat.isa = ep->isa;
    if (ep->portable) contents.compat.options.push_back({"layouts", "plain"});
    AddDynamicCompat(ep->options, &contents.compat);
    std::string bytes;
    r = WriteContextBinary(contents, &bytes);
    if (!r.ok) return Error(EPCTX_EP_FAIL, "writing the group's context binary: " + r.reason);
    AOT_RETURN_IF_ERROR(plugin::WriteFileAtomically(g_api, kEpName, binary, bytes));
    ep->written_binary = binary;
  }
  return GenerateContext(ep, count, names, io, std::string(), {}, ep_context_nodes, reference);
}

// A fused graph with free input dims (only claimed with dynamic_shapes=1): a DynamicGraph partition that binds each
// new input shape at run time; *out stays null for a static graph.
EpctxStatus* MaybeDynamic(AotCpuEp* ep, const EpctxGraph* graph, const EpctxNode* fused, std::shared_ptr<Partition>* out) {
  if (!ep->options.dynamic_shapes) return nullptr;
  const std::string name = g_api->Node_GetName(fused);
  Graph g;
  CheckResult r = BuildGraph(g_api, graph, &g);
  if (!r.ok) return Error(EPCTX_EP_FAIL, "graph '" + name + "': " + r.reason);
  GraphIo gio;
  bool free = false;
  const std::vector<std::string> fused_inputs = IoNames(fused, true);
  for (size_t k = 0; k < fused_inputs.size(); ++k) {
    const int v = g.Find(fused_inputs[k]);
    if (v >= 0 && g.v(v).is_initializer) continue;
    if (v >= 0 && !g.v(v).has_shape) free = true;
    gio.inputs.push_back(fused_inputs[k]);
    gio.input_map.push_back(k);
  }
  // Static inputs but a value inside without a static shape (the compile API's level 0 folds nothing, so a shape the
  // probe binding computed is not the runtime's): the symbolic form computes it (difftest --dynamic, seed 20261210).
  const bool free_inputs = free;
  for (const Value& v : g.values)
    if (v.producer >= 0 && !v.has_shape) free = true;
  if (!free) return nullptr;
  gio.outputs = IoNames(fused, false);
  // The partition's graph has exactly the fused node's inputs and outputs as its own. The runtime's view flags the
  // model's inputs and outputs instead: a fused input made by the CPU EP was no input of the symbolic graph, and a
  // model output that only enters the partition was flagged an output (difftest --dynamic, seeds 20261209/10: sessions
  // that failed to compile as "shape unknown", binaries refused as "4 values are flagged as graph outputs").
  g.inputs.clear();
  g.outputs.clear();
  for (Value& v : g.values) v.is_graph_input = v.is_graph_output = false;
  for (const std::string& in : gio.inputs) {
    const int v = g.Find(in);
    if (v < 0) continue;
    g.v(v).is_graph_input = true;
    g.inputs.push_back(v);
  }
  for (const std::string& out : gio.outputs) {
    const int v = g.Find(out);
    if (v < 0) continue;
    g.v(v).is_graph_output = true;
    g.outputs.push_back(v);
  }
  DynamicGraph::Options o = DynamicOptionsOf(ep);
  // The runtime keeps the graph's initializers alive until the compute infos are released, and the partition lives
  // in its compute info: the owner is a token, not a reference count.
  static const char kRuntimeOwned = 0;
  std::shared_ptr<const void> keep(&kRuntimeOwned, [](const void*) {});
  auto part = std::make_shared<Partition>();
  r = DynamicGraph::Create(std::move(g), gio.inputs, gio.outputs, std::move(o), keep, &part->dynamic);
  // Static inputs: the static compile (with its own constant folding) is the way when the symbolic form is not
  // (a pooling with ceil_mode, which the shape rules do not model; difftest --dynamic seed 20261210 model 1702).
  if (!r.ok && !free_inputs) return nullptr;
  if (!r.ok) return Error(EPCTX_EP_FAIL, "compiling '" + name + "' for every input shape: " + r.reason);
  part->input_map = gio.input_map;
  *out = std::move(part);
  return nullptr;
}

EpctxStatus* CompileFresh(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                          std::vector<std::shared_ptr<Partition>>* parts, EpctxNode** ep_context_nodes) {
  const Mode mode = ep->options.mode();
  if (ep->options.share_ep_contexts && ep->context.enable)
    return CompileShared(ep, graphs, fused_nodes, count, parts, ep_context_nodes);
  std::vector<std::string> names;
  std::vector<GraphIo> io;
  // Fresh partitions read only their non-constant inputs, found among the fused node's inputs by input_map.
  auto attach_maps = [&](size_t first) {
    for (size_t k = first; k < parts->size(); ++k) (*parts)[k]->input_map = io[k].input_map;
  };
  if (mode == Mode::kJit) {
    for (size_t i = 0; i < count; ++i) {
      std::shared_ptr<Partition> dynamic;
      AOT_RETURN_IF_ERROR(MaybeDynamic(ep, graphs[i], fused_nodes[i], &dynamic));
      if (dynamic) {
        parts->push_back(std::move(dynamic));
        continue;
      }
      std::vector<CompiledGraph> compiled;
      std::vector<std::string> one_name;
      std::vector<GraphIo> one_io;
      AOT_RETURN_IF_ERROR(CompileGraphs(ep, graphs + i, fused_nodes + i, 1, &one_name, &compiled, &one_io));
      CheckResult r = PartitionsFromCompiled(&compiled, ep->threads, parts);
      if (!r.ok) return Error(EPCTX_EP_FAIL, r.reason);
      parts->back()->input_map = one_io[0].input_map;
    }
    return nullptr;
  }
  if (ep->context.enable && ep->context.embed) {
    // One binary per graph, each embedded in its own node; executors run on those same bytes.
    std::vector<std::string> per_graph(count);
    for (size_t i = 0; i < count; ++i) {
      std::vector<std::string> one;
      auto bytes = std::make_shared<std::string>();
      AOT_RETURN_IF_ERROR(CompileToBinary(ep, graphs + i, fused_nodes + i, 1, &one, bytes.get(), &io));
      if (mode != Mode::kPrepareOnly) {
        CheckResult r = LoadPartitions(bytes->data(), bytes->size(), bytes, DynamicOptionsOf(ep), one, parts);
        if (!r.ok) return Error(EPCTX_EP_FAIL, "loading the just-compiled binary: " + r.reason);
      }
      names.push_back(one[0]);
      per_graph[i] = *bytes;
    }
    if (mode != Mode::kPrepareOnly) attach_maps(0);
    return GenerateContext(ep, count, names, io, std::string(), per_graph, ep_context_nodes);
  }
  auto binary = std::make_shared<std::string>();
  AOT_RETURN_IF_ERROR(CompileToBinary(ep, graphs, fused_nodes, count, &names, binary.get(), &io));
  // Every compile-time structure is gone here; what follows sees only the binary.
  if (ep->context.enable)
    AOT_RETURN_IF_ERROR(GenerateContext(ep, count, names, io, *binary, {}, ep_context_nodes));
  if (mode == Mode::kPrepareOnly) return nullptr;
  if (mode == Mode::kPrepareAndLoadPersist) {
    // Path B: reload from the file just written, mapped like any ctx model's binary.
    const std::string path = plugin::ContextBinaryPath(ep->context.file_path, "_aotcpu.bin");
    binary.reset();
    auto map = std::make_shared<plugin::MappedFile>();
    std::string why;
    if (!plugin::MapFile(path, map.get(), &why)) return Error(EPCTX_EP_FAIL, "reloading the context binary: " + why);
    std::shared_ptr<ContextBinaryReader> reader;
    AOT_RETURN_IF_ERROR(OpenChecked(ep, path, map->data(), map->size(), &reader));
    CheckResult r = LoadPartitions(*reader, map, DynamicOptionsOf(ep), names, parts);
    if (!r.ok) return LoadError(path + ": " + r.reason);
    attach_maps(0);
    return nullptr;
  }
  // kGenerate and Path A (prepare_and_load without a file): load from the bytes as from a file.
  std::shared_ptr<ContextBinaryReader> reader;
  AOT_RETURN_IF_ERROR(OpenChecked(ep, "the compiled binary", binary->data(), binary->size(), &reader));
  CheckResult r = LoadPartitions(*reader, binary, DynamicOptionsOf(ep), names, parts);
  if (!r.ok) return Error(EPCTX_EP_FAIL, "loading the just-compiled binary: " + r.reason);
  attach_maps(0);
  return nullptr;
}

// ---- 5. EPContext loading ----

// Validates the binary once and checks its compatibility block: INVALID_GRAPH naming `from` on any problem.
// With `deferred` (and verify_weights on), the weights' content hashes are only started here, on background
// threads; the caller finishes *deferred before it returns a session, and reports its failure first.
EpctxStatus* OpenChecked(AotCpuEp* ep, const std::string& from, const void* data, size_t size,
                         std::shared_ptr<ContextBinaryReader>* reader, WeightVerification* deferred) {
  const bool defer = deferred && ep->options.verify_weights;
  CheckResult r = OpenBinary(data, size, reader, ep->options.verify_weights && !defer);
  if (!r.ok) return LoadError(from + ": " + r.reason);
  if (defer) deferred->Start((*reader)->tensors(), WeightVerification::DefaultBackgroundThreads((*reader)->tensors()));
  return CheckCompat(ep, from, **reader);
}

struct LoadedBinary {
  bool embedded = false;  // bytes borrowed from the model (valid for this session only)
  std::shared_ptr<ContextBinaryReader> reader;
  std::shared_ptr<const void> keep;
  const void* data = nullptr;
  size_t size = 0;
  std::string from;  // file path, or "node '<name>'" for an embedded payload
  // The weights' content hashes, running while the graphs are built (OpenChecked); finished before the session is.
  std::unique_ptr<WeightVerification> verify = std::make_unique<WeightVerification>();
  // For ReportEpContextLoad once verified.
  const EpctxNode* fused_node = nullptr;
  bool embedded_report = false;
  uint64_t mapped = 0, read = 0;
  std::chrono::steady_clock::time_point t0;
};

EpctxStatus* LoadError(const std::string& message) { return plugin::LoadError(g_api, kEpName, message); }

// Refuses a binary made for another ISA (above the host's), oneDNN or format before anything else is used.
EpctxStatus* CheckCompat(AotCpuEp* ep, const std::string& from, const ContextBinaryReader& reader) {
  const CompatInfo& c = reader.compat();
  CompatibilityInfo info;
  info.format_major = reader.major();
  info.format_minor = reader.minor();
  info.onednn = c.onednn_version;
  if (!ParseIsa(c.isa, &info.isa))
    return LoadError(from + ": the context binary names an unknown ISA '" + c.isa + "' (known: " + IsaNameList() + ")");
  if (c.onednn_version != OneDnnVersion() || reader.major() != kContextBinaryMajor)
    return LoadError(from + ": " + BuildMismatchMessage(info, OneDnnVersion(), kContextBinaryMajor));
  Isa host;
  ParseIsa(ep->host_isa, &host);
  if (IsaRank(info.isa) > IsaRank(host)) return LoadError(from + ": " + IsaTooHighMessage(info.isa, host, ep->host_emulated));
  return nullptr;
}

struct PendingNode {
  size_t index;
  std::string name, partition;
};

// Maps and validates the binaries of the main_context nodes (their weights' hashes started, not finished) and builds
// every node's graph from them, into *binaries and *parts. LoadContextNodes finishes the hashing.
EpctxStatus* LoadContextNodesUnverified(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes,
                                        const std::vector<size_t>& loaded, std::vector<LoadedBinary>& binaries,
                                        std::vector<PendingNode>& nodes, std::vector<std::shared_ptr<Partition>>* parts) {
  using Pending = PendingNode;
  if (ep->options.share_ep_contexts) {
    // Weight sharing: when every graph this session needs waits in the workspace, take them; the file is not opened.
    std::vector<std::string> wanted;
    for (size_t i : loaded) {
      const EpctxNode* node = nullptr;
      AOT_RETURN_IF_ERROR(g_api->Graph_GetNodes(graphs[i], &node, 1));
      bool has_partition = false;
      std::string partition;
      AOT_RETURN_IF_ERROR(plugin::StringAttr(g_api, kEpName, node, "partition_name", &has_partition, &partition));
      wanted.push_back(has_partition && !partition.empty() ? partition : g_api->Node_GetName(node));
    }
    std::vector<std::shared_ptr<SharedBinary>> shared;
    if (InferenceWorkspace::Instance().TakeAll(wanted, &shared)) {
      for (size_t k = 0; k < loaded.size(); ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        CheckResult r = LoadPartitions(*shared[k]->reader, shared[k]->keep, DynamicOptionsOf(ep), {wanted[k]}, parts);
        if (!r.ok) return LoadError(shared[k]->from + ": " + r.reason);
        if (g_api->ReportEpContextLoad)  // nothing mapped or read: the graph came from the shared workspace
          AOT_RETURN_IF_ERROR(g_api->ReportEpContextLoad(fused_nodes[loaded[k]], shared[k]->from.c_str(), 0, 0,
                                                         MsSince(t0)));
      }
      return nullptr;
    }
  }
  for (size_t i : loaded) {
    const EpctxNode* node = nullptr;
    AOT_RETURN_IF_ERROR(g_api->Graph_GetNodes(graphs[i], &node, 1));
    const std::string name = g_api->Node_GetName(node);
    int64_t main_context = 1, embed_mode = 1;
    AOT_RETURN_IF_ERROR(plugin::IntAttr(g_api, kEpName, node, "main_context", 1, &main_context));
    AOT_RETURN_IF_ERROR(plugin::IntAttr(g_api, kEpName, node, "embed_mode", 1, &embed_mode));
    bool has_partition = false, has_cache = false;
    std::string partition, cache;
    AOT_RETURN_IF_ERROR(plugin::StringAttr(g_api, kEpName, node, "partition_name", &has_partition, &partition));
    if (!has_partition || partition.empty()) partition = name;
    nodes.push_back({i, name, partition});
    if (main_context == 0) continue;
    const auto t0 = std::chrono::steady_clock::now();
    LoadedBinary b;
    uint64_t mapped = 0, read = 0;
    if (embed_mode == 1) {
      const EpctxOpAttr* attr = g_api->Node_GetAttributeByName(node, "ep_cache_context");
      if (!attr) return LoadError("node '" + name + "' (embed_mode=1) has no ep_cache_context");
      const char* data = nullptr;
      size_t length = 0;
      if (EpctxStatus* st = g_api->OpAttr_GetString(attr, &data, &length)) {
        g_api->ReleaseStatus(st);
        return LoadError("node '" + name + "': attribute ep_cache_context is not a string");
      }
      b.from = "node '" + name + "'";
      b.embedded = true;
      if (reinterpret_cast<uintptr_t>(data) % 16 == 0) {  // the model's bytes stay valid until release: no copy
        b.data = data;
      } else {  // oneDNN wants aligned weights (64-byte aligned relative to the binary's start): copy once
        auto copy = std::shared_ptr<unsigned char>(static_cast<unsigned char*>(std::aligned_alloc(64, (length + 63) / 64 * 64 + 64)), std::free);
        if (!copy) return Error(EPCTX_FAIL, "out of memory copying the payload of node '" + name + "'");
        std::memcpy(copy.get(), data, length);
        b.keep = copy;
        b.data = copy.get();
      }
      b.size = length;
      read = length;
    } else {
      AOT_RETURN_IF_ERROR(plugin::StringAttr(g_api, kEpName, node, "ep_cache_context", &has_cache, &cache));
      if (!has_cache) return LoadError("node '" + name + "' (main_context=1, embed_mode=0) has no ep_cache_context");
      std::string path, real_path;
      AOT_RETURN_IF_ERROR(plugin::ResolveContextBinary(g_api, kEpName, graphs[i], name, cache, ep->context.file_path,
                                                      &path, &real_path));
      auto map = std::make_shared<plugin::MappedFile>();
      std::string why;
      if (!plugin::MapFile(real_path, map.get(), &why)) return LoadError("node '" + name + "': " + why);
      b.keep = map;
      b.data = map->data();
      b.size = map->size();
      b.from = path;
      mapped = map->size();
    }
    b.fused_node = fused_nodes[i];
    b.embedded_report = embed_mode == 1;
    b.mapped = mapped;
    b.read = read;
    b.t0 = t0;
    binaries.push_back(std::move(b));  // before OpenChecked: a failure still finishes the hashing it started
    LoadedBinary& last = binaries.back();
    AOT_RETURN_IF_ERROR(OpenChecked(ep, last.from, last.data, last.size, &last.reader, last.verify.get()));
  }
  // Every node takes its graph by partition name from the binaries loaded above.
  for (const Pending& n : nodes) {
    const LoadedBinary* found = nullptr;
    for (const LoadedBinary& b : binaries) {
      for (const GraphView& gv : b.reader->graphs())
        if (gv.name == n.partition) found = &b;
      if (found) break;
    }
    std::string graph_name = n.partition;
    if (!found && binaries.size() == 1 && binaries[0].reader->graphs().size() == 1) {
      found = &binaries[0];  // a lone graph, whatever its name
      graph_name = std::string(found->reader->graphs()[0].name);
    }
    if (!found)
      return LoadError("node '" + n.name + "' refers to partition '" + n.partition +
                       "', which no context binary loaded by a main_context=1 node holds");
    std::vector<std::shared_ptr<Partition>> one;
    CheckResult r = LoadPartitions(*found->reader, found->keep, DynamicOptionsOf(ep), {graph_name}, &one);
    if (!r.ok) return LoadError(found->from + ": " + r.reason);
    parts->push_back(std::move(one[0]));
  }
  return nullptr;
}

// Loads the EPContext nodes `loaded` into *parts. The weights are hashed while the graphs are built (building a
// oneDNN primitive reads no weight byte) and the verdict is awaited before anything is returned or shared, so a
// session never exists over unverified weights. A hash mismatch is reported before any error found later in the load,
// as when the hashing came first.
EpctxStatus* LoadContextNodes(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes,
                              const std::vector<size_t>& loaded, std::vector<std::shared_ptr<Partition>>* parts) {
  std::vector<LoadedBinary> binaries;
  std::vector<PendingNode> nodes;
  EpctxStatus* status = LoadContextNodesUnverified(ep, graphs, fused_nodes, loaded, binaries, nodes, parts);
  for (LoadedBinary& b : binaries) {
    CheckResult r = b.verify->Finish();
    if (r.ok) continue;
    if (status) g_api->ReleaseStatus(status);
    parts->clear();
    return LoadError(b.from + ": " + r.reason);
  }
  if (status) return status;
  for (const LoadedBinary& b : binaries)
    if (g_api->ReportEpContextLoad)
      AOT_RETURN_IF_ERROR(g_api->ReportEpContextLoad(b.fused_node, b.embedded_report ? "" : b.from.c_str(), b.mapped,
                                                     b.read, MsSince(b.t0)));
  if (ep->options.share_ep_contexts) {
    // The graphs of the mapped binaries that this session does not run wait for later sessions.
    std::vector<std::string> used;
    for (const PendingNode& n : nodes) used.push_back(n.partition);
    for (const LoadedBinary& b : binaries) {
      if (b.embedded) continue;
      auto shared = std::make_shared<SharedBinary>();
      shared->keep = b.keep;
      shared->reader = b.reader;
      shared->from = b.from;
      InferenceWorkspace::Instance().Offer(shared, used);
    }
  }
  return nullptr;
}

EpctxStatus* CompileImpl(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                         EpctxNodeComputeInfo** infos, EpctxNode** ep_context_nodes) {
  if (count == 0) return nullptr;
  std::vector<size_t> fresh, loaded;
  std::vector<const EpctxGraph*> fresh_graphs;
  std::vector<const EpctxNode*> fresh_nodes;
  for (size_t i = 0; i < count; ++i) {
    std::vector<const EpctxNode*> nodes(g_api->Graph_GetNumNodes(graphs[i]));
    AOT_RETURN_IF_ERROR(g_api->Graph_GetNodes(graphs[i], nodes.data(), nodes.size()));
    const bool is_context = nodes.size() == 1 && plugin::IsEpContextNodeFrom(g_api, nodes[0], {kEpName});
    (is_context ? loaded : fresh).push_back(i);
    if (!is_context) fresh_graphs.push_back(graphs[i]), fresh_nodes.push_back(fused_nodes[i]);
  }
  std::vector<std::shared_ptr<Partition>> fresh_parts, loaded_parts;
  std::vector<EpctxNode*> fresh_ctx(fresh.size(), nullptr);
  if (!fresh.empty())
    AOT_RETURN_IF_ERROR(CompileFresh(ep, fresh_graphs.data(), fresh_nodes.data(), fresh.size(), &fresh_parts,
                                     fresh_ctx.data()));
  for (size_t k = 0; k < fresh.size(); ++k) ep_context_nodes[fresh[k]] = fresh_ctx[k];
  if (!loaded.empty()) AOT_RETURN_IF_ERROR(LoadContextNodes(ep, graphs, fused_nodes, loaded, &loaded_parts));
  if (ep->options.mode() == Mode::kPrepareOnly) {
    const OptionsError e = PrepareOnlyRunError(ep->context.file_path);
    for (size_t k = 0; k < fresh.size(); ++k) {
      auto part = std::make_shared<Partition>();
      part->run_error = e.message;
      fresh_parts.push_back(part);
    }
  }
  for (size_t k = 0; k < fresh.size(); ++k) infos[fresh[k]] = &MakeComputeInfo(fresh_parts[k])->base;
  for (size_t k = 0; k < loaded.size(); ++k) infos[loaded[k]] = &MakeComputeInfo(loaded_parts[k])->base;
  return nullptr;
}

// ---- 7. the EP ----

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

// ---- 8. the factory ----

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
