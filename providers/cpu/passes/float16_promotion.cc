#include "providers/cpu/passes/float16_promotion.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "core/float16.h"
#include "providers/common/float16_rules.h"
#include "providers/cpu/passes/cpu_pass_util.h"

namespace epctx {
namespace {

using cpu_pass::ConstTensor;
using cpu_pass::IsCpuNode;

// The type of `name` seen from `g`: its own declarations first, then the enclosing graphs'. nullptr when unknown.
// Initializers without a declared type get one from their tensor (`scratch` holds it).
const ValueType* Lookup(const Graph& g, const std::string& name, ValueType* scratch) {
  for (const Graph* s = &g; s; s = s->parent) {
    if (const ValueType* t = s->FindType(name)) return t;
    auto it = s->initializers.find(name);
    if (it != s->initializers.end()) {
      scratch->kind = ValueType::Kind::kTensor;
      scratch->elem_type = it->second.dtype();
      scratch->has_shape = true;
      scratch->dims.clear();
      for (int64_t d : it->second.shape()) scratch->dims.push_back(Dim{d, {}});
      return scratch;
    }
  }
  return nullptr;
}

bool IsFloat16Tensor(const ValueType* t) {
  return t && t->kind == ValueType::Kind::kTensor && t->elem_type == DataType::kFloat16;
}

bool HasSubgraph(const Node& n) {
  for (const auto& [key, a] : n.attributes)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

// Whether `n` runs in float32 (float16_promotion.h: the promoted nodes).
bool Promotable(const Graph& g, const Node& n) {
  if (!IsCpuNode(n) || HasSubgraph(n) || Float16OutputFromAttribute(n.domain.c_str(), n.op_type.c_str()))
    return false;
  if (n.op_type == "Cast") {
    const Attribute* to = n.attr("to");
    if (!to || to->i == static_cast<int64_t>(DataType::kFloat16)) return false;
  }
  bool any = false;
  ValueType scratch;
  for (const auto* names : {&n.inputs, &n.outputs})
    for (const std::string& v : *names) {
      if (v.empty()) continue;
      const ValueType* t = Lookup(g, v, &scratch);
      if (!t || t->kind != ValueType::Kind::kTensor || t->elem_type == DataType::kUndefined) return false;
      any |= t->elem_type == DataType::kFloat16;
    }
  return any;
}

// Exact float16 -> float32 of a constant (F16C 8 at a time where the build has it: ISNet-fp16's 44 M weights).
void HalfToFloat(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = HalfBitsToFloat(src[i]);
}

int Depth(const Graph& g) {
  int d = 0;
  for (const Graph* s = g.parent; s; s = s->parent) ++d;
  return d;
}

// Every name declared or used in `g` and in the graphs enclosing it.
std::set<std::string> ScopeNames(const Graph& g) {
  std::set<std::string> names;
  for (const Graph* s = &g; s; s = s->parent) {
    for (const ValueInfo& v : s->inputs) names.insert(v.name);
    for (const ValueInfo& v : s->outputs) names.insert(v.name);
    for (const auto& [name, t] : s->initializers) names.insert(name);
    for (const auto& [name, t] : s->value_types) names.insert(name);
    for (const Node& n : s->nodes) {
      names.insert(n.inputs.begin(), n.inputs.end());
      names.insert(n.outputs.begin(), n.outputs.end());
    }
  }
  return names;
}

Node MakeCast(const Graph& g, const std::string& name, const std::string& from, const std::string& to_value,
              DataType to) {
  Node c;
  c.name = name;
  c.op_type = "Cast";
  auto it = g.opsets.find("");
  c.opset = it != g.opsets.end() ? it->second : 13;
  c.inputs = {from};
  c.outputs = {to_value};
  Attribute a;
  a.name = "to";
  a.type = Attribute::Type::kInt;
  a.i = static_cast<int64_t>(to);
  c.attributes["to"] = a;
  return c;
}

class Promotion {
 public:
  Promotion(Graph* g, CpuFusionStats* stats) : g_(g), stats_(stats) {}

  bool Run() {
    std::vector<bool> promoted(g_->nodes.size(), false);
    bool any = false;
    for (size_t i = 0; i < g_->nodes.size(); ++i) any |= promoted[i] = Promotable(*g_, g_->nodes[i]);
    if (!any) return false;

    // How each float16 value is used: read by promoted nodes (needs float32), read as float16 (other nodes, graph
    // outputs, subgraphs), written by a promoted node.
    struct Use {
      bool read32 = false, read16 = false, written32 = false;
      int producer = -1;  // index of the node that writes it, -1 for inputs and initializers
    };
    std::map<std::string, Use> uses;
    ValueType scratch;
    auto f16 = [&](const std::string& v) { return !v.empty() && IsFloat16Tensor(Lookup(*g_, v, &scratch)); };
    for (size_t i = 0; i < g_->nodes.size(); ++i) {
      const Node& n = g_->nodes[i];
      for (const std::string& v : n.inputs)
        if (f16(v)) (promoted[i] ? uses[v].read32 : uses[v].read16) = true;
      for (const std::string& v : n.outputs)
        if (f16(v)) {
          uses[v].producer = static_cast<int>(i);
          if (promoted[i]) uses[v].written32 = true;
        }
    }
    std::set<std::string> read16;
    cpu_pass::CollectSubgraphReads(*g_, &read16);
    for (const ValueInfo& o : g_->outputs) read16.insert(o.name);
    for (const std::string& v : read16) {
      auto it = uses.find(v);
      if (it != uses.end()) it->second.read16 = true;
    }

    // The float16 constants promoted nodes read, converted once here (exactly) before anything is changed: out of
    // memory leaves the graph as it was (its float16 kernels still run it).
    std::map<std::string, Tensor> converted;
    for (const auto& [v, u] : uses) {
      const Tensor* c = u.read32 && u.producer < 0 ? ConstTensor(*g_, v) : nullptr;
      if (!c) continue;
      StatusOr<Tensor> f = Tensor::AllocateForOverwrite(DataType::kFloat, c->shape());
      if (!f.ok()) return false;
      HalfToFloat(static_cast<const uint16_t*>(c->raw_data()), f->data<float>(), c->NumElements());
      converted[v] = std::move(*f);
    }

    names_ = ScopeNames(*g_);
    const int depth = Depth(*g_);
    const std::string suffix = depth == 0 ? "/epctx_f32" : "/epctx_f32_" + std::to_string(depth);
    std::map<std::string, std::string> twin;
    std::vector<Node> front;                    // Casts of graph inputs and outside values
    std::map<int, std::vector<Node>> after;     // Casts after the node that writes their input
    for (const auto& [v, u] : uses) {
      if (!u.read32 && !u.written32) continue;  // float16 only: untouched
      const std::string t = Unique(v + suffix);
      twin[v] = t;
      ValueType type = *Lookup(*g_, v, &scratch);
      type.elem_type = DataType::kFloat;
      if (u.written32) {
        g_->value_types[t] = type;
        if (u.read16) {
          after[u.producer].push_back(MakeCast(*g_, Unique(t + "/to_float16"), t, v, DataType::kFloat16));
          ++stats_->float16_casts;
        } else {
          g_->value_types.erase(v);
        }
      } else if (converted.count(v)) {
        // The float16 initializer stays only while something reads it as float16.
        g_->initializers[t] = std::move(converted[v]);
        g_->value_types[t] = type;
        if (!u.read16 && g_->initializers.count(v)) {
          g_->initializers.erase(v);
          g_->external_initializers.erase(v);
          g_->value_types.erase(v);
        }
      } else {
        g_->value_types[t] = type;
        Node cast = MakeCast(*g_, Unique(v + "/to_float"), v, t, DataType::kFloat);
        if (u.producer >= 0) after[u.producer].push_back(std::move(cast));
        else front.push_back(std::move(cast));
        ++stats_->float16_casts;
      }
    }
    for (size_t i = 0; i < g_->nodes.size(); ++i) {
      if (!promoted[i]) continue;
      ++stats_->float16_nodes;
      Node& n = g_->nodes[i];
      for (auto* names : {&n.inputs, &n.outputs})
        for (std::string& v : *names) {
          auto it = twin.find(v);
          if (it != twin.end()) v = it->second;
        }
    }
    std::vector<Node> nodes = std::move(front);
    nodes.reserve(nodes.size() + g_->nodes.size() + after.size());
    for (size_t i = 0; i < g_->nodes.size(); ++i) {
      nodes.push_back(std::move(g_->nodes[i]));
      auto it = after.find(static_cast<int>(i));
      if (it != after.end())
        for (Node& c : it->second) nodes.push_back(std::move(c));
    }
    g_->nodes = std::move(nodes);
    return true;
  }

 private:
  std::string Unique(const std::string& base) {
    std::string name = base;
    for (int k = 1; names_.count(name); ++k) name = base + "_" + std::to_string(k);
    names_.insert(name);
    return name;
  }

  Graph* g_;
  CpuFusionStats* stats_;
  std::set<std::string> names_;
};

}  // namespace

std::shared_ptr<Graph> PromoteFloat16Nodes(const std::shared_ptr<Graph>& graph, CpuFusionStats* stats) {
  return cpu_pass::RewriteCopy(
      graph, [](const Graph& g, const Node& n) { return Promotable(g, n); },
      [stats](Graph* g) { return Promotion(g, stats).Run(); });
}

}  // namespace epctx
