#include "providers/aotcpu/capability/capability.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "providers/aotcpu/lower/ops.h"

namespace epctx {
namespace aotcpu {

bool IsNodeSupported(const Graph& g, const Node& n, std::string* why) {
  if (n.has_subgraphs) return *why = "has subgraphs", false;
  const OpEntry* e = FindOp(n.domain, n.op);
  if (!e) return *why = "op " + n.op + " is not compiled by this EP", false;
  if (n.inputs.size() > kMaxStepOperands - 8 || n.outputs.size() > 8) return *why = "too many inputs", false;
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
