#include "providers/cpu/passes/cpu_layout.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "providers/cpu/passes/cpu_pass_util.h"

namespace epctx {
namespace cpu_pass {
namespace {

// Elementwise ops of one tensor operand (Clip's bounds are scalars): they run on the physical tensor unchanged.
const std::set<std::string>& UnaryOps() {
  static const std::set<std::string> ops{"Relu",     "LeakyRelu", "Sigmoid", "Tanh",  "HardSigmoid", "HardSwish",
                                         "Clip",     "Elu",       "Selu",    "Celu",  "Softplus",    "Softsign",
                                         "Neg",      "Abs",       "Exp",     "Log",   "Sqrt",        "Reciprocal",
                                         "Floor",    "Ceil",      "Round",   "Erf",   "Identity",    "ThresholdedRelu",
                                         "Sin",      "Cos",       "Gelu",    "Mish",  "Sign"};
  return ops;
}
// Elementwise ops of two operands with NumPy broadcasting (PRelu's slope broadcasts to X the same way).
const std::set<std::string>& BinaryOps() {
  static const std::set<std::string> ops{"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu"};
  return ops;
}

// A logical value's laid-out twin: its name and the logical channel count and rank.
struct Twin {
  std::string name;
  int64_t channels = 0;
  size_t rank = 0;
};

// An initializer of `g` of type `dtype` that no graph input overrides.
const Tensor* ConstOf(const Graph& g, const std::string& name, DataType dtype) {
  if (dtype == DataType::kFloat) return ConstFloat(g, name);
  auto it = g.initializers.find(name);
  if (name.empty() || it == g.initializers.end() || it->second.dtype() != dtype) return nullptr;
  for (const ValueInfo& in : g.inputs)
    if (in.name == name) return nullptr;
  return &it->second;
}

class LayoutRewriter {
 public:
  LayoutRewriter(Graph* g, CpuLayout layout) : g_(g), layout_(layout), suffix_(std::string("/") + CpuLayoutName(layout)) {
    for (const ValueInfo& v : g->inputs) used_.insert(v.name);
    for (const ValueInfo& v : g->outputs) used_.insert(v.name);
    for (const auto& [name, t] : g->initializers) used_.insert(name);
    for (const auto& [name, t] : g->value_types) used_.insert(name);
    for (const Node& n : g->nodes) {
      used_.insert(n.inputs.begin(), n.inputs.end());
      used_.insert(n.outputs.begin(), n.outputs.end());
    }
    CollectSubgraphReads(*g, &subgraph_reads_);
    used_.insert(subgraph_reads_.begin(), subgraph_reads_.end());
  }

  // Rewrites the graph; false when nothing changed (the graph is then as it was).
  bool Run(CpuFusionStats* stats) {
    auto order = g_->TopologicalOrder();
    if (!order.ok()) return false;  // the plan reports the broken graph
    std::vector<bool> laid(g_->nodes.size(), false);
    for (size_t i : order.value()) {
      Node& n = g_->nodes[i];
      if (!IsCpuNode(n)) continue;
      if (IsOnnx(n) && n.op_type == "Conv") {
        laid[i] = LayOutConv(&n, i);
      } else if (IsOnnx(n) && SingleOutput(n) && HasTwinInput(n)) {
        laid[i] = LayOutElementwise(&n) || LayOutConcat(&n) || LayOutResize(&n) || LayOutGlobalAveragePool(&n) ||
                  LayOutPool(&n);
      }
    }
    for (size_t i : DropUnreadConvTwins()) laid[i] = false;
    // Plain readers of a value that now has a twin (laid-out readers read the twin's name instead): nodes, graph
    // outputs, subgraphs.
    std::set<std::string> plain;
    for (const Node& n : g_->nodes)
      for (const std::string& in : n.inputs)
        if (twins_.count(in)) plain.insert(in);
    for (const ValueInfo& o : g_->outputs)
      if (twins_.count(o.name)) plain.insert(o.name);
    for (const std::string& s : subgraph_reads_)
      if (twins_.count(s)) plain.insert(s);
    std::map<size_t, std::vector<Node>> reorders;  // by the index of the twin's producer
    for (const std::string& v : plain) {
      const Twin& t = twins_.at(v);
      Node r;
      r.name = UniqueName(v + "/reorder");
      r.op_type = kReorderOp;
      r.domain = kCpuInternalDomain;
      r.opset = 1;
      r.inputs = {t.name};
      r.outputs = {v};
      SetString(&r, "from", CpuLayoutName(layout_));
      SetString(&r, "to", CpuLayoutName(CpuLayout::kPlain));
      SetInt(&r, "channels", t.channels);
      reorders[producer_.at(t.name)].push_back(std::move(r));
      ++stats->layout_reorders;
    }
    bool changed = false;
    for (size_t i = 0; i < g_->nodes.size(); ++i) {
      if (!laid[i]) continue;
      changed = true;
      const Node& n = g_->nodes[i];
      if (n.op_type == "Conv" && n.domain.empty()) ++stats->layout_convs;
      else ++stats->layout_nodes;
    }
    if (!changed) return false;
    for (const auto& [v, t] : twins_) g_->value_types[t.name] = TwinType(g_->FindType(v), t);
    std::vector<Node> nodes;
    nodes.reserve(g_->nodes.size() + plain.size());
    for (size_t i = 0; i < g_->nodes.size(); ++i) {
      nodes.push_back(std::move(g_->nodes[i]));
      auto it = reorders.find(i);
      if (it != reorders.end())
        for (Node& r : it->second) nodes.push_back(std::move(r));
    }
    g_->nodes = std::move(nodes);
    return true;
  }

 private:
  static void SetString(Node* n, const char* name, const std::string& v) {
    Attribute a;
    a.name = name;
    a.type = Attribute::Type::kString;
    a.s = v;
    n->attributes[name] = a;
  }
  static void SetInt(Node* n, const char* name, int64_t v) {
    Attribute a;
    a.name = name;
    a.type = Attribute::Type::kInt;
    a.i = v;
    n->attributes[name] = a;
  }

  std::string UniqueName(const std::string& base) {
    std::string name = base;
    for (int k = 2; used_.count(name); ++k) name = base + "_" + std::to_string(k);
    used_.insert(name);
    return name;
  }

  bool HasTwinInput(const Node& n) const {
    for (const std::string& in : n.inputs)
      if (twins_.count(in)) return true;
    return false;
  }

  // Reads `value`'s twin in input slot `slot` of `n`.
  void ReadTwin(Node* n, size_t slot) {
    const std::string& twin = twins_.at(n->inputs[slot]).name;
    ++laid_readers_[twin];
    n->inputs[slot] = twin;
  }

  // `n` writes a twin of its only output (channels, rank) instead of the output.
  void WriteTwin(Node* n, size_t index, int64_t channels, size_t rank) {
    Twin t{UniqueName(n->outputs[0] + suffix_), channels, rank};
    producer_[t.name] = index;
    twins_[n->outputs[0]] = t;
    n->outputs[0] = t.name;
  }

  bool LayOutConv(Node* n, size_t index) {
    if (n->inputs.size() < 2 || !SingleOutput(*n) || !IsFloat(*g_, n->outputs[0])) return false;
    const Tensor* w = ConstFloat(*g_, n->inputs[1]);
    if (!w || (w->rank() != 3 && w->rank() != 4) || w->shape()[0] <= 0) return false;
    const Attribute* ga = n->attr("group");
    const int64_t group = ga && ga->type == Attribute::Type::kInt ? ga->i : 1;
    const int64_t m = w->shape()[0], c = w->shape()[1] * group;
    bool changed = false;
    auto it = twins_.find(n->inputs[0]);
    if (it != twins_.end() && it->second.rank == w->rank() && it->second.channels == c) {
      ReadTwin(n, 0);
      SetString(n, kSrcLayoutAttr, CpuLayoutName(layout_));
      changed = true;
    }
    if (CpuLayoutFits(layout_, m)) {
      conv_twins_.emplace_back(index, n->outputs[0]);
      WriteTwin(n, index, m, w->rank());
      SetString(n, kDstLayoutAttr, CpuLayoutName(layout_));
      changed = true;
    }
    return changed;
  }

  // The (channels, rank) all twin inputs of `n` share; false when they differ.
  bool SharedTwinShape(const Node& n, int64_t* channels, size_t* rank) const {
    *channels = 0;
    for (const std::string& in : n.inputs) {
      auto it = twins_.find(in);
      if (it == twins_.end()) continue;
      if (*channels && (it->second.channels != *channels || it->second.rank != *rank)) return false;
      *channels = it->second.channels;
      *rank = it->second.rank;
    }
    return *channels > 0;
  }

  // A constant operand of a laid-out elementwise op: one element (kept), or one value per channel (rewritten into a
  // new initializer of the layout's shape). False for anything else.
  // With `apply` false only checks.
  bool LayOutConstantOperand(Node* n, size_t slot, int64_t channels, size_t rank, bool apply) {
    const std::string& name = n->inputs[slot];
    const Tensor* c = ConstFloat(*g_, name);
    if (!c || c->rank() > rank) return false;
    if (c->NumElements() == 1) return true;
    const size_t cr = c->rank();
    if (cr + 1 < rank || c->NumElements() != channels || c->shape()[cr - (rank - 1)] != channels) return false;
    if (!apply) return true;
    Shape logical(rank, 1), physical;
    logical[1] = channels;
    if (!PhysicalShape(logical, layout_, &physical).ok()) return false;
    const std::string key = name + suffix_ + "_r" + std::to_string(rank);
    auto done = rewritten_.find(key);
    if (done == rewritten_.end()) {
      auto t = Tensor::Allocate(DataType::kFloat, physical);
      if (!t.ok()) return false;
      // Channel c sits at block c / B, lane c % B (or at the last axis): the values keep their order.
      for (int64_t i = 0; i < channels; ++i) t.value().data<float>()[i] = c->data<float>()[i];
      const std::string fresh = UniqueName(key);
      g_->initializers[fresh] = std::move(t).value();
      done = rewritten_.emplace(key, fresh).first;
    }
    n->inputs[slot] = done->second;
    return true;
  }

  bool LayOutElementwise(Node* n) {
    const bool unary = UnaryOps().count(n->op_type) > 0;
    if (!unary && (!BinaryOps().count(n->op_type) || n->inputs.size() != 2)) return false;
    int64_t channels = 0;
    size_t rank = 0;
    if (!SharedTwinShape(*n, &channels, &rank)) return false;
    if (unary) {
      if (!twins_.count(n->inputs[0])) return false;
      for (size_t i = 1; i < n->inputs.size(); ++i)
        if (twins_.count(n->inputs[i])) return false;
      ReadTwin(n, 0);
    } else {
      for (bool apply : {false, true})  // both operands are checked before either is rewritten
        for (size_t i = 0; i < 2; ++i)
          if (!twins_.count(n->inputs[i]) && !LayOutConstantOperand(n, i, channels, rank, apply)) return false;
      for (size_t i = 0; i < 2; ++i)
        if (twins_.count(n->inputs[i])) ReadTwin(n, i);
    }
    WriteTwin(n, IndexOf(*n), channels, rank);
    return true;
  }

  bool LayOutConcat(Node* n) {
    if (n->op_type != "Concat" || n->inputs.empty()) return false;
    const Attribute* a = n->attr("axis");
    int64_t channels = 0;
    size_t rank = 0;
    for (const std::string& in : n->inputs) {
      auto it = twins_.find(in);
      if (it == twins_.end() || (rank && it->second.rank != rank)) return false;
      rank = it->second.rank;
      channels += it->second.channels;
    }
    if (!a || a->type != Attribute::Type::kInt || (a->i < 0 ? a->i + static_cast<int64_t>(rank) : a->i) != 1)
      return false;
    for (size_t i = 0; i < n->inputs.size(); ++i) ReadTwin(n, i);
    SetInt(n, "axis", static_cast<int64_t>(PhysicalAxis(rank, 1, layout_)));
    WriteTwin(n, IndexOf(*n), channels, rank);
    return true;
  }

  // Resize nearest with constant scales (1 on N and C) or sizes (C kept): the same resize on the physical axes.
  // The coordinate transformations allowed map an axis of scale 1 onto itself.
  bool LayOutResize(Node* n) {
    if (n->op_type != "Resize" || n->opset < 10 || n->inputs.empty() || !twins_.count(n->inputs[0])) return false;
    auto str = [&](const char* k, const char* def) {
      const Attribute* a = n->attr(k);
      return a && a->type == Attribute::Type::kString ? a->s : std::string(def);
    };
    const std::string ctm = str("coordinate_transformation_mode", n->opset < 11 ? "asymmetric" : "half_pixel");
    if (str("mode", "nearest") != "nearest" || n->attr("axes") || str("keep_aspect_ratio_policy", "stretch") != "stretch" ||
        (ctm != "half_pixel" && ctm != "asymmetric" && ctm != "align_corners" && ctm != "pytorch_half_pixel"))
      return false;
    if (const Attribute* aa = n->attr("antialias"); aa && aa->i != 0) return false;
    const Twin& t = twins_.at(n->inputs[0]);
    const size_t r = t.rank;
    const size_t scales_slot = n->opset < 11 ? 1 : 2, sizes_slot = 3;
    const Tensor* scales = scales_slot < n->inputs.size() ? ConstFloat(*g_, n->inputs[scales_slot]) : nullptr;
    const Tensor* sizes =
        sizes_slot < n->inputs.size() ? ConstOf(*g_, n->inputs[sizes_slot], DataType::kInt64) : nullptr;
    Shape logical(r, 1), physical;
    logical[1] = t.channels;
    if (!PhysicalShape(logical, layout_, &physical).ok()) return false;
    const size_t pr = physical.size();
    const int64_t block = CpuLayoutBlock(layout_);
    Tensor fresh;
    if (scales && scales->NumElements() > 0) {
      const float* s = scales->data<float>();
      if (scales->NumElements() != static_cast<int64_t>(r) || s[0] != 1.f || s[1] != 1.f) return false;
      fresh = Tensor::Allocate(DataType::kFloat, {static_cast<int64_t>(pr)}).value();
      for (size_t i = 0; i < pr; ++i) fresh.data<float>()[i] = 1.f;
      for (size_t i = 0; i < r; ++i) fresh.data<float>()[PhysicalAxis(r, i, layout_)] = s[i];
      n->inputs[scales_slot] = UniqueName(n->inputs[scales_slot] + suffix_);
      g_->initializers[n->inputs[scales_slot]] = std::move(fresh);
    } else if (sizes && (!scales || scales->NumElements() == 0)) {
      const int64_t* s = sizes->data<int64_t>();
      if (sizes->NumElements() != static_cast<int64_t>(r) || s[1] != t.channels) return false;
      fresh = Tensor::Allocate(DataType::kInt64, {static_cast<int64_t>(pr)}).value();
      for (size_t i = 0; i < r; ++i) fresh.data<int64_t>()[PhysicalAxis(r, i, layout_)] = s[i];
      if (block) {
        fresh.data<int64_t>()[1] = t.channels / block;
        fresh.data<int64_t>()[pr - 1] = block;
      }
      n->inputs[sizes_slot] = UniqueName(n->inputs[sizes_slot] + suffix_);
      g_->initializers[n->inputs[sizes_slot]] = std::move(fresh);
    } else {
      return false;
    }
    const int64_t channels = t.channels;
    ReadTwin(n, 0);
    WriteTwin(n, IndexOf(*n), channels, r);
    return true;
  }

  bool LayOutGlobalAveragePool(Node* n) {
    if (n->op_type != "GlobalAveragePool" || n->inputs.size() != 1 || !twins_.count(n->inputs[0])) return false;
    const Twin t = twins_.at(n->inputs[0]);
    ReadTwin(n, 0);
    n->domain = kCpuInternalDomain;
    n->op_type = kLaidOutGlobalAveragePoolOp;
    n->opset = 1;
    n->attributes.clear();
    SetString(n, "layout", CpuLayoutName(layout_));
    WriteTwin(n, IndexOf(*n), t.channels, t.rank);
    return true;
  }

  // MaxPool (without indices) and AveragePool: the pooling kernel pools the layout (kSrcLayoutAttr).
  bool LayOutPool(Node* n) {
    if ((n->op_type != "MaxPool" && n->op_type != "AveragePool") || n->inputs.size() != 1 ||
        !twins_.count(n->inputs[0]))
      return false;
    const Twin t = twins_.at(n->inputs[0]);
    ReadTwin(n, 0);
    SetString(n, kSrcLayoutAttr, CpuLayoutName(layout_));
    WriteTwin(n, IndexOf(*n), t.channels, t.rank);
    return true;
  }

  size_t IndexOf(const Node& n) const { return static_cast<size_t>(&n - g_->nodes.data()); }

  // A Conv whose twin no laid-out node reads writes its plain output again (one node fewer than a Reorder).
  // Returns the Convs left with neither layout.
  std::vector<size_t> DropUnreadConvTwins() {
    std::vector<size_t> plain;
    for (const auto& [index, value] : conv_twins_) {
      const std::string twin = twins_.at(value).name;
      if (laid_readers_[twin] > 0) continue;
      Node& n = g_->nodes[index];
      n.outputs[0] = value;
      n.attributes.erase(kDstLayoutAttr);
      twins_.erase(value);
      producer_.erase(twin);
      if (!n.attr(kSrcLayoutAttr)) plain.push_back(index);
    }
    return plain;
  }

  // The physical type of a twin: the logical type's dims moved to their physical axes.
  ValueType TwinType(const ValueType* logical, const Twin& t) const {
    ValueType vt;
    vt.kind = ValueType::Kind::kTensor;
    vt.elem_type = DataType::kFloat;
    if (!logical || !logical->has_shape || logical->dims.size() != t.rank) return vt;
    const int64_t block = CpuLayoutBlock(layout_);
    vt.has_shape = true;
    vt.dims.resize(t.rank + (block ? 1 : 0));
    for (size_t i = 0; i < t.rank; ++i) vt.dims[PhysicalAxis(t.rank, i, layout_)] = logical->dims[i];
    if (block) {
      vt.dims[1] = Dim{t.channels / block, ""};
      vt.dims.back() = Dim{block, ""};
    } else {
      vt.dims[t.rank - 1] = Dim{t.channels, ""};
    }
    return vt;
  }

  Graph* g_;
  CpuLayout layout_;
  std::string suffix_;
  std::set<std::string> used_, subgraph_reads_;
  std::map<std::string, Twin> twins_;            // logical value -> twin
  std::map<std::string, size_t> producer_;       // twin -> node index
  std::map<std::string, int> laid_readers_;      // twin -> laid-out nodes reading it
  std::map<std::string, std::string> rewritten_;  // constant + layout + rank -> its laid-out initializer
  std::vector<std::pair<size_t, std::string>> conv_twins_;  // (node index, logical output) of Convs writing twins
};

}  // namespace
}  // namespace cpu_pass

std::shared_ptr<Graph> LayOutCpuNodes(const std::shared_ptr<Graph>& graph, CpuLayout layout, CpuFusionStats* stats) {
  if (layout == CpuLayout::kPlain) return graph;
  CpuFusionStats local;
  std::shared_ptr<Graph> out = cpu_pass::RewriteCopy(
      graph,
      [](const Graph& g, const Node& n) {
        return cpu_pass::IsCpuNode(n) && cpu_pass::IsOnnx(n) && n.op_type == "Conv" && n.inputs.size() >= 2 &&
               cpu_pass::ConstFloat(g, n.inputs[1]);
      },
      [&](Graph* g) { return cpu_pass::LayoutRewriter(g, layout).Run(&local); });
  if (out == graph) return graph;
  stats->layout_convs += local.layout_convs;
  stats->layout_nodes += local.layout_nodes;
  stats->layout_reorders += local.layout_reorders;
  return out;
}

}  // namespace epctx
