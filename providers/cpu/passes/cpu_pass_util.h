// Helpers shared by the session's graph passes on the CPU EP's nodes (cpu_fusion.h, cpu_layout.h): which nodes
// are the CPU EP's, constant initializers, reads from subgraphs, and the deep copy a pass writes into.
// Private to src/session. Pure functions of their arguments (thread-compatible).
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "graph/graph.h"

namespace epctx {
namespace cpu_pass {

// Not a node fused for a plugin EP (domain "epctx.fused").
bool IsCpuNode(const Node& n);
// ONNX's default domain.
bool IsOnnx(const Node& n);
// One output, written (no further optional output used).
bool SingleOutput(const Node& n);
// The value's type is known to be a float tensor.
bool IsFloat(const Graph& g, const std::string& v);
// An initializer of `g`, or of an enclosing graph when no graph in between defines the name, that no graph input
// overrides; nullptr otherwise.
const Tensor* ConstTensor(const Graph& g, const std::string& name);
// ConstTensor when its element type is float; nullptr otherwise.
const Tensor* ConstFloat(const Graph& g, const std::string& name);
// Every value name read by a node of `g`'s subgraphs, at any depth (outer-scope reads), and their outputs.
void CollectSubgraphReads(const Graph& g, std::set<std::string>* names);
// A copy of `g` and of every graph nested in it, each subgraph's parent pointing at its copied parent (GraphPlan and
// TopologicalOrder follow parent pointers; the originals may be released once the session holds the copy).
std::shared_ptr<Graph> DeepCopy(const Graph& g, const Graph* parent);
// A pass over a graph tree: when `wanted` holds for some node of `graph` or of a graph nested in it, `rewrite` runs
// on every graph of a deep copy (nested graphs first, each rewrite returning whether it changed its graph). Returns
// the copy when any rewrite changed something, else `graph` itself.
std::shared_ptr<Graph> RewriteCopy(const std::shared_ptr<Graph>& graph,
                                   const std::function<bool(const Graph&, const Node&)>& wanted,
                                   const std::function<bool(Graph*)>& rewrite);

}  // namespace cpu_pass
}  // namespace epctx
