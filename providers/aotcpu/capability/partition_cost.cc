#include "providers/aotcpu/capability/partition_cost.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace epctx {
namespace aotcpu {
namespace {

// The static shape of input/output slot `slot` of `n`, or null when absent or not static.
const Value* Slot(const Graph& g, const std::vector<int>& slots, size_t slot) {
  if (slot >= slots.size() || slots[slot] < 0) return nullptr;
  const Value& v = g.v(slots[slot]);
  return v.has_shape ? &v : nullptr;
}

double Count(const Value* v) { return v ? static_cast<double>(std::max<int64_t>(v->numel(), 0)) : 0; }

// Elements per leading index: numel / dims[0] (the weights' share of one output channel, ...).
double PerFirst(const Value* v) {
  if (!v || v->dims.empty() || v->dims[0] <= 0) return 0;
  return Count(v) / static_cast<double>(v->dims[0]);
}

std::string Kilobytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f KB", static_cast<double>(bytes) / 1024.0);
  return text;
}

std::string Us(double us) {
  char text[32];
  std::snprintf(text, sizeof(text), us < 10 ? "%.2g us" : "%.0f us", us);
  return text;
}

}  // namespace

bool IsZeroCopyView(const Graph& g, const Node& n) {
  if (n.op == "Cast")  // a cast to another type computes (lower/math_int.cc, issue 27)
    return n.inputs.size() == 1 && n.outputs.size() == 1 && n.inputs[0] >= 0 && n.outputs[0] >= 0 &&
           g.v(n.inputs[0]).dtype == g.v(n.outputs[0]).dtype;
  static const char* const kViews[] = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"};
  for (const char* op : kViews)
    if (n.op == op) return true;
  return false;
}

double NodeMacs(const Graph& g, const Node& n) {
  const Value* x = Slot(g, n.inputs, 0);
  const Value* w = Slot(g, n.inputs, 1);
  const Value* y = Slot(g, n.outputs, 0);
  if (n.op == "Conv" || n.op == "ConvInteger") return Count(y) * PerFirst(w);          // W [Cout, Cin/group, k...]
  if (n.op == "ConvTranspose") return Count(x) * PerFirst(w);  // W [Cin, Cout/group, k...]
  if (n.op == "MatMul" || n.op == "MatMulInteger" || n.op == "Gemm") {
    if (!x || x->dims.empty()) return 0;
    const bool trans_a = n.op == "Gemm" && n.Int("transA", 0) != 0 && x->dims.size() == 2;
    return Count(y) * static_cast<double>(trans_a ? x->dims[0] : x->dims.back());
  }
  if (n.op == "LSTM") {  // X [T, N, I], W [D, 4H, I], R [D, 4H, H]: every (t, n) multiplies by W and R
    const Value* r = Slot(g, n.inputs, 2);
    if (!x || x->dims.size() != 3 || x->dims[2] <= 0) return 0;
    return Count(x) / static_cast<double>(x->dims[2]) * (Count(w) + Count(r));
  }
  return 0;
}

GroupCost EstimateGroupCost(const Graph& g, const std::vector<int>& group, const std::vector<bool>& folded,
                            const PartitionCostRule& rule) {
  GroupCost c;
  const std::set<int> members(group.begin(), group.end());
  auto is_folded = [&](int i) { return static_cast<size_t>(i) < folded.size() && folded[static_cast<size_t>(i)]; };
  std::set<int> crossing;
  for (int i : group) {
    const Node& n = g.nodes[static_cast<size_t>(i)];
    for (int v : n.inputs)
      if (v >= 0 && !g.v(v).is_const() && !members.count(g.v(v).producer)) crossing.insert(v);
    for (int v : n.outputs) {
      if (v < 0 || g.v(v).is_const()) continue;
      const Value& val = g.v(v);
      bool leaves = val.is_graph_output || val.consumers.empty();
      for (int k : val.consumers) leaves |= !members.count(k);
      if (leaves) crossing.insert(v);
    }
    if (is_folded(i)) continue;
    ++c.nodes_run;
    c.macs += NodeMacs(g, n);
  }
  for (int v : crossing) c.boundary_bytes += g.v(v).bytes();
  c.work_us = c.macs / kMacsPerUs;
  c.saving_us = kNodeSavedUs * c.nodes_run + kSavedFraction * c.work_us;
  c.boundary_us = rule.switch_us + static_cast<double>(c.boundary_bytes) / kCrossBytesPerUs;
  c.whole_graph = true;
  for (size_t i = 0; i < g.nodes.size() && c.whole_graph; ++i)
    c.whole_graph = is_folded(static_cast<int>(i)) || members.count(static_cast<int>(i));
  return c;
}

bool GroupPays(const GroupCost& cost, const PartitionCostRule& rule) {
  return !rule.enabled || cost.whole_graph || cost.saving_us >= cost.boundary_us;
}

std::string NotPayingReason(const GroupCost& cost, const PartitionCostRule& rule) {
  return "island too small to pay for its boundary: est. saving " + Us(cost.saving_us) + " (" +
         std::to_string(cost.nodes_run) + (cost.nodes_run == 1 ? " node" : " nodes") + ", work " + Us(cost.work_us) +
         ") vs boundary " + Us(cost.boundary_us) + " (switch " + Us(rule.switch_us) + " + " +
         Kilobytes(cost.boundary_bytes) + " crossing); provider option partition_switch_us=0 claims it anyway";
}

}  // namespace aotcpu
}  // namespace epctx
