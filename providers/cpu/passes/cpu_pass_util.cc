#include "providers/cpu/passes/cpu_pass_util.h"

#include <vector>

namespace epctx {
namespace cpu_pass {

bool IsCpuNode(const Node& n) { return n.domain != "epctx.fused"; }
bool IsOnnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

bool SingleOutput(const Node& n) {
  if (n.outputs.empty() || n.outputs[0].empty()) return false;
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (!n.outputs[i].empty()) return false;
  return true;
}

bool IsFloat(const Graph& g, const std::string& v) {
  const ValueType* t = g.FindType(v);
  return t && t->kind == ValueType::Kind::kTensor && t->elem_type == DataType::kFloat;
}

const Tensor* ConstFloat(const Graph& g, const std::string& name) {
  const Tensor* t = ConstTensor(g, name);
  return t && t->dtype() == DataType::kFloat ? t : nullptr;
}

const Tensor* ConstTensor(const Graph& g, const std::string& name) {
  if (name.empty()) return nullptr;
  // Up the scopes (If branches read the enclosing graph's weights) until a graph defines the name.
  for (const Graph* s = &g; s; s = s->parent) {
    for (const ValueInfo& in : s->inputs)
      if (in.name == name) return nullptr;
    auto it = s->initializers.find(name);
    if (it != s->initializers.end()) return &it->second;
    for (const Node& n : s->nodes)
      for (const std::string& o : n.outputs)
        if (o == name) return nullptr;
  }
  return nullptr;
}

void CollectSubgraphReads(const Graph& g, std::set<std::string>* names) {
  for (const Node& n : g.nodes)
    for (const auto& [key, a] : n.attributes) {
      std::vector<const Graph*> subs;
      if (a.g) subs.push_back(a.g.get());
      for (const auto& s : a.graphs)
        if (s) subs.push_back(s.get());
      for (const Graph* s : subs) {
        for (const Node& sn : s->nodes)
          for (const std::string& in : sn.inputs) names->insert(in);
        for (const ValueInfo& o : s->outputs) names->insert(o.name);
        CollectSubgraphReads(*s, names);
      }
    }
}

std::shared_ptr<Graph> DeepCopy(const Graph& g, const Graph* parent) {
  auto c = std::make_shared<Graph>(g);
  c->parent = parent;
  for (Node& n : c->nodes)
    for (auto& [key, a] : n.attributes) {
      if (a.g) a.g = DeepCopy(*a.g, c.get());
      for (auto& sub : a.graphs)
        if (sub) sub = DeepCopy(*sub, c.get());
    }
  return c;
}

namespace {

bool AnyNode(const Graph& g, const std::function<bool(const Graph&, const Node&)>& wanted) {
  for (const Node& n : g.nodes) {
    if (wanted(g, n)) return true;
    for (const auto& [key, a] : n.attributes) {
      if (a.g && AnyNode(*a.g, wanted)) return true;
      for (const auto& sub : a.graphs)
        if (sub && AnyNode(*sub, wanted)) return true;
    }
  }
  return false;
}

bool RewriteTree(Graph* g, const std::function<bool(Graph*)>& rewrite) {
  bool changed = false;
  for (Node& n : g->nodes)
    for (auto& [key, a] : n.attributes) {
      if (a.g) changed |= RewriteTree(a.g.get(), rewrite);  // If branches hold whole models (Silero VAD)
      for (auto& sub : a.graphs)
        if (sub) changed |= RewriteTree(sub.get(), rewrite);
    }
  return rewrite(g) || changed;
}

}  // namespace

std::shared_ptr<Graph> RewriteCopy(const std::shared_ptr<Graph>& graph,
                                   const std::function<bool(const Graph&, const Node&)>& wanted,
                                   const std::function<bool(Graph*)>& rewrite) {
  if (!graph || !AnyNode(*graph, wanted)) return graph;
  std::shared_ptr<Graph> copy = DeepCopy(*graph, graph->parent);
  return RewriteTree(copy.get(), rewrite) ? copy : graph;
}

}  // namespace cpu_pass
}  // namespace epctx
