#include "providers/aotcpu/capability/capability.h"

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {

bool IsNodeSupported(const Graph& g, const Node& n, std::string* why) {
  if (n.has_subgraphs) return *why = "has subgraphs", false;
  const OpEntry* e = FindOp(n.domain, n.op);
  if (!e) return *why = "op " + n.op + " is not compiled by this EP", false;
  if (n.inputs.size() > kMaxStepOperands - 8 || n.outputs.size() > 8) return *why = "too many inputs", false;
  // ONNX's float8 types (codes 17-20) and uint4/int4 (21, 22) run on the CPU EP only: no kernel here reads or writes
  // them, and a node that only moves them (Reshape, Transpose) is not claimed either, so they never cross a partition
  // boundary (where int4's in-memory layout would have to be agreed).
  auto float8 = [](int64_t code) { return code >= 17 && code <= 22; };
  for (const std::vector<int>* values : {&n.inputs, &n.outputs})
    for (int v : *values)
      if (v >= 0 && float8(g.v(v).dtype))
        return *why = std::string("element type ") + (g.v(v).dtype >= 21 ? "int4/uint4" : "float8") + " (" +
                      std::to_string(g.v(v).dtype) + ") is not compiled by this EP", false;
  if ((n.op == "Cast" || n.op == "QuantizeLinear") && n.domain.empty() &&
      float8(n.Int(n.op == "Cast" ? "to" : "output_dtype", 0)))
    return *why = "a float8 or 4-bit integer output is not compiled by this EP", false;
  return e->support(g, n, why);
}

std::vector<std::vector<int>> GroupNodes(const Graph& g, const std::vector<bool>& supported) {
  const size_t n = g.nodes.size();
  // u[i]: the largest number of unsupported nodes on a path from a graph input to node i (inclusive).
  std::vector<int> u(n, 0);
  for (size_t i = 0; i < n; ++i) {
    int best = 0;
    for (int v : g.nodes[i].inputs)
      if (v >= 0 && g.v(v).producer >= 0) best = std::max(best, u[static_cast<size_t>(g.v(v).producer)]);
    u[i] = best + (supported[i] ? 0 : 1);
  }
  // Union-find over supported nodes linked by an edge and equal u.
  std::vector<int> parent(n);
  for (size_t i = 0; i < n; ++i) parent[i] = static_cast<int>(i);
  std::function<int(int)> find = [&](int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); };
  for (size_t i = 0; i < n; ++i) {
    if (!supported[i]) continue;
    for (int v : g.nodes[i].inputs) {
      if (v < 0) continue;
      const int p = g.v(v).producer;
      if (p >= 0 && supported[static_cast<size_t>(p)] && u[static_cast<size_t>(p)] == u[i])
        parent[find(static_cast<int>(i))] = find(p);
    }
  }
  std::map<int, std::vector<int>> groups;
  for (size_t i = 0; i < n; ++i)
    if (supported[i]) groups[find(static_cast<int>(i))].push_back(static_cast<int>(i));
  std::vector<std::vector<int>> out;
  for (auto& kv : groups) out.push_back(std::move(kv.second));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace aotcpu
}  // namespace epctx
