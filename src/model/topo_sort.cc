#include "model/topo_sort.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace epctx {

namespace {

using NameSet = std::unordered_set<std::string>;

std::string DescribeNode(const onnx::NodeProto& n, int index) {
  std::string op = n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type() : n.domain() + "." + n.op_type();
  if (!n.name().empty()) return op + " node '" + n.name() + "'";
  // Unnamed nodes are common in hand-written and converted graphs: the position and first output identify them.
  std::string s = op + " node #" + std::to_string(index);
  if (n.output_size() > 0) s += " (output '" + n.output(0) + "')";
  return s;
}

// Values a graph defines for itself and its subgraphs: inputs, initializers, node outputs.
NameSet DefinedNames(const onnx::GraphProto& g) {
  NameSet names;
  for (const auto& in : g.input()) names.insert(in.name());
  for (const auto& init : g.initializer()) names.insert(init.name());
  for (const auto& sp : g.sparse_initializer()) names.insert(sp.values().name());
  for (const auto& n : g.node())
    for (const auto& o : n.output())
      if (!o.empty()) names.insert(o);
  return names;
}

template <typename Fn>
void ForEachSubgraph(const onnx::NodeProto& n, Fn fn) {
  for (const auto& a : n.attribute()) {
    if (a.has_g()) fn(a.name(), a.g());
    for (const auto& sg : a.graphs()) fn(a.name(), sg);
  }
}

// Names a subgraph (and the subgraphs inside it) reads without defining them: its node's implicit inputs.
void FreeNames(const onnx::GraphProto& g, NameSet* out) {
  const NameSet local = DefinedNames(g);
  auto add = [&](const std::string& name) {
    if (!name.empty() && !local.count(name)) out->insert(name);
  };
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) add(in);
    ForEachSubgraph(n, [&](const std::string&, const onnx::GraphProto& sg) {
      NameSet inner;
      FreeNames(sg, &inner);
      for (const auto& name : inner) add(name);
    });
  }
  for (const auto& o : g.output()) add(o.name());
}

struct Sorter {
  const std::string& what;

  Status Fail(const std::string& message) const {
    return MakeStatus(ErrorCode::INVALID_GRAPH, "model ", what, ": ", message);
  }

  // `outer`: the names each enclosing graph defines, innermost last; `desc` names this graph for messages.
  Status Sort(onnx::GraphProto* g, std::vector<const NameSet*>* outer, const std::string& desc) {
    const int n = g->node_size();
    const NameSet defined = DefinedNames(*g);
    // Subgraphs first, so that a value nobody produces is reported at the node that reads it.
    outer->push_back(&defined);
    for (int i = 0; i < n; ++i) {
      onnx::NodeProto* node = g->mutable_node(i);
      for (auto& a : *node->mutable_attribute()) {
        const std::string sub_desc = " (attribute '" + a.name() + "' of " + DescribeNode(*node, i) + " in " + desc + ")";
        if (a.has_g()) RETURN_IF_ERROR(Sort(a.mutable_g(), outer, "graph '" + a.g().name() + "'" + sub_desc));
        for (auto& sg : *a.mutable_graphs()) RETURN_IF_ERROR(Sort(&sg, outer, "graph '" + sg.name() + "'" + sub_desc));
      }
    }
    outer->pop_back();

    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < n; ++i)
      for (const auto& o : g->node(i).output())
        if (!o.empty() && !producer.emplace(o, i).second) return Status::OK();  // not SSA: the checker says so
    NameSet sources;  // graph inputs and initializers
    for (const auto& in : g->input()) sources.insert(in.name());
    for (const auto& init : g->initializer()) sources.insert(init.name());
    for (const auto& sp : g->sparse_initializer()) sources.insert(sp.values().name());
    auto visible = [&](const std::string& name) {
      if (sources.count(name)) return true;
      for (const NameSet* s : *outer)
        if (s->count(name)) return true;
      return false;
    };
    const std::string scope = outer->empty() ? "" : " or of an enclosing graph";

    // preds[i]: (producer, value) for every value node i or its subgraphs read from another node of this graph.
    std::vector<std::vector<std::pair<int, std::string>>> preds(n);
    for (int i = 0; i < n; ++i) {
      const onnx::NodeProto& node = g->node(i);
      for (const auto& in : node.input()) {
        if (in.empty()) continue;
        auto it = producer.find(in);
        if (it != producer.end()) preds[i].emplace_back(it->second, in);
        else if (!visible(in))
          return Fail(DescribeNode(node, i) + " in " + desc + " reads '" + in +
                      "', which no node, graph input or initializer of that graph" + scope + " produces");
      }
      Status st = Status::OK();
      ForEachSubgraph(node, [&](const std::string& attr, const onnx::GraphProto& sg) {
        NameSet reads;
        FreeNames(sg, &reads);
        for (const auto& name : reads) {
          auto it = producer.find(name);
          if (it != producer.end()) preds[i].emplace_back(it->second, name);
          else if (!visible(name) && st.ok())
            st = Fail("attribute '" + attr + "' of " + DescribeNode(node, i) + " in " + desc + " reads '" + name +
                      "', which no node, graph input or initializer of that graph" + scope + " produces");
        }
      });
      RETURN_IF_ERROR(st);
    }
    for (const auto& o : g->output())
      if (!producer.count(o.name()) && !visible(o.name()))
        return Fail("graph output '" + o.name() + "' is produced by no node, graph input or initializer of " + desc +
                    scope);

    // Kahn's algorithm, taking the first node in file order among the ready ones: a sorted graph keeps its order.
    std::vector<size_t> pending(n);
    std::vector<std::vector<int>> consumers(n);
    for (int i = 0; i < n; ++i) {
      pending[i] = preds[i].size();
      for (const auto& [p, value] : preds[i]) consumers[p].push_back(i);
    }
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (int i = 0; i < n; ++i)
      if (pending[i] == 0) ready.push(i);
    std::vector<int> order;
    order.reserve(n);
    while (!ready.empty()) {
      const int i = ready.top();
      ready.pop();
      order.push_back(i);
      for (int c : consumers[i])
        if (--pending[c] == 0) ready.push(c);
    }
    if (static_cast<int>(order.size()) < n) return Fail(desc + " has a cycle: " + DescribeCycle(*g, pending, preds));

    bool sorted = true;
    for (int i = 0; i < n && sorted; ++i) sorted = order[i] == i;
    if (sorted) return Status::OK();
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    nodes.Reserve(n);
    for (int i : order) nodes.Add()->Swap(g->mutable_node(i));
    g->mutable_node()->Swap(&nodes);
    return Status::OK();
  }

  // One cycle among the nodes Kahn's algorithm could not place (each has a predecessor among them), in data-flow
  // order: "A -> 'a' -> B -> 'b' -> A" (B reads 'a', which A produces).
  static std::string DescribeCycle(const onnx::GraphProto& g, const std::vector<size_t>& pending,
                                   const std::vector<std::vector<std::pair<int, std::string>>>& preds) {
    int x = 0;
    while (pending[x] == 0) ++x;
    std::vector<int> pos(pending.size(), -1);
    std::vector<std::pair<int, const std::string*>> path;  // (node, the value it reads from the next node)
    while (pos[x] < 0) {
      pos[x] = static_cast<int>(path.size());
      for (const auto& [p, value] : preds[x])
        if (pending[p] > 0) {
          path.emplace_back(x, &value);
          x = p;
          break;
        }
    }
    const int first = pos[x], last = static_cast<int>(path.size()) - 1;
    constexpr int kMaxShown = 12;
    std::string s = DescribeNode(g.node(x), x);
    int shown = 0;
    for (int j = last; j >= first; --j) {
      if (++shown > kMaxShown) {
        s += " -> ... (" + std::to_string(last - first + 1) + " nodes on the cycle)";
        break;
      }
      s += " -> '" + *path[j].second + "' -> " + DescribeNode(g.node(path[j].first), path[j].first);
    }
    return s;
  }
};

}  // namespace

Status SortNodesTopologically(onnx::GraphProto* graph, const std::string& what) {
  Sorter sorter{what};
  std::vector<const NameSet*> outer;
  return sorter.Sort(graph, &outer, "graph '" + graph->name() + "'");
}

}  // namespace epctx
