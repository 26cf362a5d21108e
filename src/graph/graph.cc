#include "graph/graph.h"

#include <functional>
#include <queue>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace epctx {

std::string ValueType::ToString() const {
  std::ostringstream os;
  auto kind_name = [](Kind k) {
    switch (k) {
      case Kind::kTensor: return "tensor";
      case Kind::kSequence: return "seq";
      case Kind::kOptional: return "optional";
      default: return "unknown";
    }
  };
  if (kind == Kind::kOptional) os << "optional(" << kind_name(optional_inner) << "(" << DataTypeName(elem_type) << "))";
  else os << kind_name(kind) << "(" << DataTypeName(elem_type) << ")";
  if (has_shape) {
    os << "[";
    for (size_t i = 0; i < dims.size(); ++i) {
      if (i) os << ",";
      if (dims[i].known()) os << dims[i].value;
      else if (!dims[i].symbol.empty()) os << "'" << dims[i].symbol << "'";
      else os << "?";
    }
    os << "]";
  }
  return os.str();
}

std::string Node::Describe() const {
  std::string s = domain.empty() ? op_type : domain + "." + op_type;
  return s + " node '" + name + "'";
}

std::ostream& operator<<(std::ostream& os, const Node& node) { return os << node.Describe(); }

StatusOr<std::vector<size_t>> Graph::TopologicalOrder(const std::vector<std::string>& outer_scope_names) const {
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& o : nodes[i].outputs) {
      if (o.empty()) continue;
      if (!producer.emplace(o, i).second)
        return MakeStatus(ErrorCode::INVALID_GRAPH, "value '", o, "' is produced by two nodes: ",
                          nodes[producer[o]].Describe(), " and ", nodes[i].Describe());
    }
  }
  std::unordered_set<std::string> available(outer_scope_names.begin(), outer_scope_names.end());
  for (const auto& in : inputs) available.insert(in.name);
  for (const auto& [n, t] : initializers) available.insert(n);
  // Names visible from enclosing graphs (subgraphs may read any value of their ancestors).
  for (const Graph* p = parent; p; p = p->parent) {
    for (const auto& in : p->inputs) available.insert(in.name);
    for (const auto& [n, t] : p->initializers) available.insert(n);
    for (const auto& nd : p->nodes)
      for (const auto& o : nd.outputs) available.insert(o);
  }
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<size_t>> consumers(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::set<size_t> deps;
    auto add_dep = [&](const std::string& in) -> Status {
      if (in.empty()) return Status::OK();
      auto it = producer.find(in);
      if (it != producer.end()) {
        deps.insert(it->second);
        return Status::OK();
      }
      if (!available.count(in))
        return MakeStatus(ErrorCode::INVALID_GRAPH, nodes[i].Describe(), " reads '", in,
                          "', which is not a graph input, an initializer or the output of any node");
      return Status::OK();
    };
    for (const auto& in : nodes[i].inputs) RETURN_IF_ERROR(add_dep(in));
    // Values a subgraph reads from this graph's scope are dependencies of the node that owns the subgraph.
    std::function<void(const Graph&)> scan_sub = [&](const Graph& g) {
      std::unordered_set<std::string> local;
      for (const auto& in : g.inputs) local.insert(in.name);
      for (const auto& [n, t] : g.initializers) local.insert(n);
      for (const auto& nd : g.nodes)
        for (const auto& o : nd.outputs) local.insert(o);
      for (const auto& nd : g.nodes) {
        for (const auto& in : nd.inputs) {
          if (in.empty() || local.count(in)) continue;
          auto it = producer.find(in);
          if (it != producer.end() && it->second != i) deps.insert(it->second);
        }
        for (const auto& [an, a] : nd.attributes) {
          if (a.g) scan_sub(*a.g);
          for (const auto& sg : a.graphs) scan_sub(*sg);
        }
      }
    };
    for (const auto& [an, a] : nodes[i].attributes) {
      if (a.g) scan_sub(*a.g);
      for (const auto& sg : a.graphs) scan_sub(*sg);
    }
    deps.erase(i);
    pending[i] = static_cast<int>(deps.size());
    for (size_t d : deps) consumers[d].push_back(i);
  }
  std::vector<size_t> order;
  order.reserve(nodes.size());
  std::queue<size_t> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (pending[i] == 0) ready.push(i);
  while (!ready.empty()) {
    size_t i = ready.front();
    ready.pop();
    order.push_back(i);
    for (size_t c : consumers[i])
      if (--pending[c] == 0) ready.push(c);
  }
  if (order.size() != nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i)
      if (pending[i] > 0)
        return MakeStatus(ErrorCode::INVALID_GRAPH, "graph '", name, "' has a cycle through ", nodes[i].Describe());
  }
  return order;
}

const ValueType* Graph::FindType(const std::string& value_name) const {
  for (const auto& in : inputs)
    if (in.name == value_name) return &in.type;
  for (const auto& out : outputs)
    if (out.name == value_name) return &out.type;
  auto it = value_types.find(value_name);
  if (it != value_types.end()) return &it->second;
  return nullptr;
}

}  // namespace epctx
