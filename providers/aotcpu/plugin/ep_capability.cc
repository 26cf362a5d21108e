// AotCpuExecutionProvider's GetCapability: the graph copied out of the ABI, folded, each node supported or not with
// a reason (capability/), free dims pinned or kept symbolic (dynamic_shapes), the groups that pay (partition_cost.h).
#include "providers/aotcpu/plugin/ep.h"

#include <epctx/ep_api.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "common/context_util.h"
#include "providers/aotcpu/capability/capability.h"
#include "providers/aotcpu/capability/partition_cost.h"
#include "providers/aotcpu/ir/float16.h"
#include "providers/aotcpu/ir/ir.h"
#include "providers/aotcpu/ir/symbolic.h"
#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {
namespace {

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

// In an If/Loop/Scan body, the values read from enclosing graphs arrive as inputs of the body's view that are not graph
// inputs. With dynamic shapes they are the body's free-dim sources: marked as graph inputs here, their dims become
// the symbols the runtime names (the enclosing graph's dim_params, so a body is shape-generic in the same free dims),
// and the body is probed and judged like a main graph. Returns how many were marked.
size_t MarkOuterScopeInputs(const EpctxGraph* graph, Graph* g) {
  std::vector<const EpctxValueInfo*> inputs(g_api->Graph_GetNumInputs(graph));
  if (EpctxStatus* st = g_api->Graph_GetInputs(graph, inputs.data(), inputs.size())) {
    g_api->ReleaseStatus(st);
    return 0;
  }
  size_t marked = 0;
  for (const EpctxValueInfo* vi : inputs) {
    if (!vi || !g_api->ValueInfo_IsFromOuterScope(vi)) continue;
    const int v = g->Find(g_api->ValueInfo_GetName(vi));
    if (v < 0 || g->v(v).is_const() || g->v(v).is_graph_input || g->v(v).producer >= 0) continue;
    g->v(v).is_graph_input = true;
    ++marked;
  }
  return marked;
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
                  Graph* unbound, SymbolicShapes* whole) {
  bool free = false;
  for (int v : g->inputs) free |= !g->v(v).has_shape;
  if (!free) return;
  SymbolicShapes& sym = *whole;
  InferSymbolic(*g, &sym, RangesOf(options));
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
  // A size at which some value comes out empty (a 64-sample probe under a 256-tap STFT window in an If body) binds
  // but judges every node after it unsupported: the next size is tried, and the first binding kept if none is whole.
  auto any_empty = [](const Graph& b) {
    for (const Value& v : b.values)
      if (v.has_shape && v.numel() == 0 && !v.is_const()) return true;
    return false;
  };
  Graph bound, second, first_bound;
  std::string err;
  bool binds = false;
  for (int64_t size : {64, 256, 1024, 4096}) {
    if (Bind(*g, sym, probe(size), &bound, &err) && Bind(*g, sym, probe(size + size / 2), &second, &err)) {
      if (!binds) first_bound = bound;
      binds = true;
      if (!any_empty(bound) && !any_empty(second)) {
        first_bound = std::move(bound);
        break;
      }
    }
  }
  bound = std::move(first_bound);
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

}  // namespace

SymbolRanges RangesOf(const AotCpuOptions& o) {
  SymbolRanges r;
  for (const auto& [sym, range] : o.shape_ranges) r[sym] = {range.lo, range.hi};
  return r;
}

bool GiveSymbolicShape(const SymbolicShapes& s, int v, Value* val) {
  if (v < 0 || static_cast<size_t>(v) >= s.values.size() || val->has_shape) return false;
  const SymValue& sv = s.values[static_cast<size_t>(v)];
  if (!sv.known) return false;
  const bool rank_known = !val->dims.empty();
  if (rank_known && val->dims.size() != sv.dims.size()) return false;
  std::vector<int64_t> dims(sv.dims.size(), -1);
  std::vector<std::string> symbols(sv.dims.size());
  bool all = true;
  for (size_t k = 0; k < sv.dims.size(); ++k) {
    int64_t c;
    if (rank_known && val->dims[k] >= 0) {
      dims[k] = val->dims[k];
    } else if (s.table.IsConst(sv.dims[k], &c) && c >= 0) {
      dims[k] = c;  // checked against the run's dims like any fixed dim
    } else if (s.table.node(sv.dims[k]).op == DimOp::kSym) {
      symbols[k] = s.table.SymbolName(sv.dims[k]);
    } else if (rank_known && k < val->dim_symbols.size()) {
      symbols[k] = val->dim_symbols[k];  // the runtime's name, or "" (a fresh symbol named after the value)
    }
    all &= dims[k] >= 0;
  }
  val->dims = std::move(dims);
  val->dim_symbols = std::move(symbols);
  val->has_shape = all;
  return true;
}

void ApplyInputShape(const AotCpuEp::InputShape& shape, Value* val) {
  if (val->has_shape || (!val->dims.empty() && val->dims.size() != shape.dims.size())) return;
  val->dims = shape.dims;
  val->dim_symbols = shape.dim_symbols;
  val->has_shape = true;
  for (int64_t d : shape.dims) val->has_shape &= d >= 0;
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
  SymbolicShapes whole;  // ... and its symbolic shapes
  ep->partition_input_shapes.clear();
  if (ep->options.dynamic_shapes) MarkOuterScopeInputs(graph, &g);
  if (ep->options.dynamic_shapes) ProbeDynamic(ep->options, &g, &symbolic_why, &probe_error, &unbound, &whole);
  const Graph original = g;
  std::vector<bool> folded;
  r = FoldConstants(&g, &folded);
  if (!r.ok) {  // a malformed constant subgraph: claim nothing, the CPU EP reports the problem
    for (const Node& n : original.nodes) SetReason(support, n, "constant folding failed: " + r.reason);
    return nullptr;
  }
  PromoteFloat16(&g);  // float16 computed in float32, as Compile will (ir/float16.h)
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
    // With dynamic shapes a node without a static shape after binding at the probe sizes has none because its
    // symbolic shape is unknown: that is the reason, not a free dim to pin.
    if (!supported[i] && i < symbolic_why.size() && !symbolic_why[i].empty() &&
        why.find("static") != std::string::npos)
      reasons[i] = "its shapes are not known for every size of the free dims: " + symbolic_why[i];
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
      if (ok) PromoteFloat16(&sub);
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
            // It arrives with the runtime's shape, which shape inference may not know (no rank after an op whose
            // output size it cannot compute): the whole graph's symbolic shape gives the rank and the dims it can
            // name; Compile gives the fused graph the same (partition_input_shapes).
            if (GiveSymbolicShape(whole, in, &usub.v(in)))
              ep->partition_input_shapes[usub.v(in).name] = {usub.v(in).dims, usub.v(in).dim_symbols};
          }
      for (int in : unbound.inputs) usub.inputs.push_back(in);
      SymbolicShapes us;
      InferSymbolic(usub, &us, RangesOf(ep->options));
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
      computes |= !folded[static_cast<size_t>(n)] && !IsZeroCopyView(g, g.nodes[static_cast<size_t>(n)]);
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

}  // namespace aotcpu
}  // namespace epctx
