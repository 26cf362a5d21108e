#include "session/constant_folding.h"

#include <algorithm>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "providers/cpu/kernel.h"

namespace epctx {

namespace {

// Ops whose result is not a function of their inputs, or that ONNX Runtime keeps for other optimizations.
bool NeverFolds(const std::string& op) {
  static const std::set<std::string> kOps = {
      "RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Multinomial", "Bernoulli",
      "Dropout",           // random in training mode
      "DequantizeLinear",  // a QDQ group's boundary (ONNX Runtime's default: kept)
  };
  return kOps.count(op) > 0;
}

bool HasSubgraph(const Node& n) {
  for (const auto& [name, a] : n.attributes)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

// Every name a node of `g` or of its subgraphs reads (subgraph reads include outer-scope values of `g`).
void CollectReads(const Graph& g, std::unordered_set<std::string>* reads) {
  for (const Node& n : g.nodes) {
    for (const auto& in : n.inputs)
      if (!in.empty()) reads->insert(in);
    for (const auto& [name, a] : n.attributes) {
      if (a.g) CollectReads(*a.g, reads);
      for (const auto& sg : a.graphs) CollectReads(*sg, reads);
    }
  }
}

// The static shape of a tensor value as inferred (or declared), if every dim is known.
bool StaticShape(const ValueType* t, Shape* shape) {
  if (!t || t->kind != ValueType::Kind::kTensor || !t->has_shape || t->elem_type == DataType::kUndefined) return false;
  shape->clear();
  for (const Dim& d : t->dims) {
    if (!d.known()) return false;
    shape->push_back(d.value);
  }
  return true;
}

StatusOr<Tensor> Int64Vector(const std::vector<int64_t>& v, bool scalar) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(DataType::kInt64, scalar ? Shape{} : Shape{static_cast<int64_t>(v.size())}));
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

// Shape / Size of a value with a static shape (the CPU kernels' rules: Shape's start/end clamped to [0, rank]).
bool FoldShapeOrSize(const Node& n, const Shape& in, Tensor* out) {
  StatusOr<Tensor> t = Status::OK();
  if (n.op_type == "Size") {
    const int64_t size = ShapeSize(in);
    if (size < 0) return false;
    t = Int64Vector({size}, /*scalar=*/true);
  } else {
    const int64_t r = static_cast<int64_t>(in.size());
    auto clamp = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
    const Attribute* start = n.attr("start");
    const Attribute* end = n.attr("end");
    const int64_t b = clamp(start && start->type == Attribute::Type::kInt ? start->i : 0);
    const int64_t e = end && end->type == Attribute::Type::kInt ? clamp(end->i) : r;
    t = Int64Vector(std::vector<int64_t>(in.begin() + b, in.begin() + std::max(b, e)), /*scalar=*/false);
  }
  if (!t.ok()) return false;
  *out = std::move(t).value();
  return true;
}

class Folder {
 public:
  // `parent` is the folder of the graph that holds `g` as an If branch (nullptr for the main graph).
  Folder(Graph& g, const Folder* parent, const ConstantFoldingOptions& options)
      : g_(g), parent_(parent), options_(options) {
    for (const auto& v : g_.inputs) graph_inputs_.insert(v.name);
    for (const auto& v : g_.outputs) graph_outputs_.insert(v.name);
    local_ = graph_inputs_;
    for (const auto& [name, t] : g_.initializers) local_.insert(name);
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      for (const auto& o : g_.nodes[i].outputs) {
        local_.insert(o);
        if (!o.empty()) producer_[o] = i;
      }
  }

  // Nodes removed by `rewrite` and its subgraph rewrites.
  static size_t Count(const InitializerRewrite& rewrite) {
    size_t n = rewrite.remove_nodes.size() + rewrite.inline_ifs.size();
    for (const auto& sub : rewrite.subgraphs) n += Count(sub);
    return n;
  }

  // One pass in topological order; fills `rewrite` with what folded. False when the graph cannot be ordered.
  bool Pass(InitializerRewrite* rewrite) {
    StatusOr<std::vector<size_t>> order = g_.TopologicalOrder();
    if (!order.ok()) return false;
    folded_.clear();
    for (size_t idx : order.value()) {
      const Node& n = g_.nodes[idx];
      // An If branch runs with the enclosing graph's values, whose shapes are fixed: its constant work and the
      // shapes it takes are what they would be at run time. (Loop and Scan bodies are left alone: a loop-carried
      // value may change shape from one iteration to the next.)
      if (n.op_type == "If" && n.domain.empty()) {
        // A constant condition: the If becomes the branch it picks (ONNX Runtime's constant folding does the same),
        // whose values then take static shapes and fold in the next pass.
        if (const char* branch = ChosenBranch(n)) {
          rewrite->inline_ifs.push_back({idx, branch});
          continue;
        }
        for (const auto& [name, a] : n.attributes) {
          if (!a.g) continue;
          Folder branch(*a.g, this, options_);
          InitializerRewrite sub;
          if (!branch.Pass(&sub) || Count(sub) == 0) continue;
          sub.node = idx;
          sub.attribute = name;
          rewrite->subgraphs.push_back(std::move(sub));
        }
      }
      std::vector<Tensor> outs;
      if (!Foldable(n) || !Evaluate(n, &outs)) continue;
      rewrite->remove_nodes.push_back(idx);
      for (size_t i = 0; i < n.outputs.size(); ++i)
        if (!n.outputs[i].empty()) folded_[n.outputs[i]] = outs[i];
    }
    if (rewrite->remove_nodes.empty() && rewrite->inline_ifs.empty()) return true;
    // What the remaining nodes (and their subgraphs) read decides which folded values become initializers and
    // which initializers only folded nodes read. An inlined If reads what its chosen branch reads.
    std::vector<bool> removed(g_.nodes.size(), false);
    for (size_t i : rewrite->remove_nodes) removed[i] = true;
    std::unordered_set<std::string> reads;
    std::vector<size_t> gone = rewrite->remove_nodes;  // nodes whose inputs may now be unread
    for (const auto& inl : rewrite->inline_ifs) {
      CollectReads(*g_.nodes[inl.node].attr(inl.branch)->g, &reads);
      for (const auto& o : g_.nodes[inl.node].attr(inl.branch)->g->outputs) reads.insert(o.name);
      removed[inl.node] = true;
      gone.push_back(inl.node);
    }
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (removed[i]) continue;
      for (const auto& in : g_.nodes[i].inputs)
        if (!in.empty()) reads.insert(in);
      for (const auto& [name, a] : g_.nodes[i].attributes) {
        if (a.g) CollectReads(*a.g, &reads);
        for (const auto& sg : a.graphs) CollectReads(*sg, &reads);
      }
    }
    // A Shape (or Size) read only by what folded, say a Gather of its static dims, goes too.
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (removed[i] || !n.domain.empty() || (n.op_type != "Shape" && n.op_type != "Size")) continue;
      bool read = false;
      for (const auto& o : n.outputs) read |= !o.empty() && (reads.count(o) || graph_outputs_.count(o));
      if (read) continue;
      removed[i] = true;
      rewrite->remove_nodes.push_back(i);
    }
    for (auto& [name, t] : folded_)
      if (reads.count(name)) rewrite->initializers[name] = t;
    std::set<std::string> dropped;
    for (size_t i : gone)
      for (const auto& in : g_.nodes[i].inputs)
        if (!in.empty() && g_.initializers.count(in) && !graph_inputs_.count(in) && !graph_outputs_.count(in) &&
            !reads.count(in) && dropped.insert(in).second)
          rewrite->drop_initializers.push_back(in);
    return true;
  }

 private:
  // The branch attribute an If's constant condition picks, when that branch can take the If's place (no inputs, as
  // many outputs as the If); nullptr otherwise.
  const char* ChosenBranch(const Node& n) const {
    if (n.inputs.size() != 1 || n.inputs[0].empty()) return nullptr;
    const Tensor* cond = Constant(n.inputs[0]);
    if (!cond || cond->dtype() != DataType::kBool || cond->NumElements() != 1) return nullptr;
    const char* name = cond->data<bool>()[0] ? "then_branch" : "else_branch";
    const Attribute* a = n.attr(name);
    if (!a || !a->g || !a->g->inputs.empty() || a->g->outputs.size() != n.outputs.size()) return nullptr;
    return name;
  }

  bool Foldable(const Node& n) const {
    if (!n.domain.empty() || NeverFolds(n.op_type) || HasSubgraph(n)) return false;
    bool any_output = false;
    for (const auto& o : n.outputs) {
      if (o.empty()) continue;
      if (graph_outputs_.count(o)) return false;  // graph outputs keep their producers
      any_output = true;
    }
    return any_output;
  }

  // A constant value: an initializer that no feed can override, or a value folded earlier in this pass, of this
  // graph or (not shadowed here) of an enclosing one.
  const Tensor* Constant(const std::string& name) const {
    auto f = folded_.find(name);
    if (f != folded_.end()) return &f->second;
    if (!local_.count(name)) return parent_ ? parent_->Constant(name) : nullptr;
    if (graph_inputs_.count(name)) return nullptr;
    auto it = g_.initializers.find(name);
    return it == g_.initializers.end() ? nullptr : &it->second;
  }

  // The declared or inferred type of a value of this graph or an enclosing one.
  const ValueType* FindType(const std::string& name) const {
    if (local_.count(name) || !parent_) return g_.FindType(name);
    return parent_->FindType(name);
  }

  bool Evaluate(const Node& n, std::vector<Tensor>* outs) {
    outs->assign(n.outputs.size(), Tensor());
    std::vector<const Tensor*> in(n.inputs.size(), nullptr);
    bool all_constant = true;
    uint64_t input_bytes = 0;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i].empty()) continue;
      in[i] = Constant(n.inputs[i]);
      if (!in[i]) all_constant = false;
      else input_bytes += in[i]->SizeInBytes();
    }
    if (!all_constant) {
      if (n.op_type == "Gather" && n.inputs.size() == 2 && n.outputs.size() == 1 && in[1])
        return FoldGatherOfShape(n, *in[1], &(*outs)[0]);
      if ((n.op_type != "Shape" && n.op_type != "Size") || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
      Shape shape;
      if (!StaticShape(FindType(n.inputs[0]), &shape)) return false;
      return FoldShapeOrSize(n, shape, &(*outs)[0]);
    }
    // The outputs' shapes must be known before the kernel allocates them: no folding may materialise a huge tensor.
    std::vector<Shape> expected(n.outputs.size());
    uint64_t output_bytes = 0;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i].empty()) continue;
      const ValueType* t = g_.FindType(n.outputs[i]);
      if (!StaticShape(t, &expected[i])) return false;
      const int64_t numel = ShapeSize(expected[i]);
      if (numel < 0) return false;
      output_bytes += static_cast<uint64_t>(numel) * std::max<size_t>(DataTypeSize(t->elem_type), 1);
    }
    if (n.op_type != "Constant" && output_bytes > std::max(options_.max_output_bytes, input_bytes)) return false;
    const KernelFactory* factory = CpuKernelRegistry().Find(n.domain, n.op_type, n.opset);
    if (!factory) return false;
    KernelInfo info(n, g_, options_.num_threads);
    StatusOr<std::unique_ptr<OpKernel>> kernel = (*factory)(info);
    if (!kernel.ok()) return false;
    std::vector<IValue> values(n.inputs.size());
    std::vector<const IValue*> ptrs(n.inputs.size(), nullptr);
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (in[i]) {
        values[i] = IValue(*in[i]);
        ptrs[i] = &values[i];
      }
    KernelContext ctx(n, ptrs, options_.num_threads);
    if (!kernel.value()->Compute(ctx).ok()) return false;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i].empty()) continue;
      const IValue& v = ctx.outputs()[i];
      // The kernel and shape inference must agree: a disagreement leaves the node to run.
      if (!v.is_tensor() || v.tensor().shape() != expected[i] ||
          v.tensor().dtype() != g_.FindType(n.outputs[i])->elem_type)
        return false;
      (*outs)[i] = v.tensor();
    }
    return true;
  }

  // The dims Shape(x) gives for a value `name` made by a Shape node of this graph or an enclosing one, from x's
  // inferred type: -1 for a dim not known before run time. False when `name` is not a Shape's output or x's rank is
  // unknown.
  bool PartialShape(const std::string& name, std::vector<int64_t>* dims) const {
    if (!local_.count(name)) return parent_ && parent_->PartialShape(name, dims);
    auto p = producer_.find(name);
    if (p == producer_.end()) return false;
    const Node& n = g_.nodes[p->second];
    if (n.op_type != "Shape" || !n.domain.empty() || n.inputs.size() != 1 || n.inputs[0].empty()) return false;
    const ValueType* t = FindType(n.inputs[0]);
    if (!t || t->kind != ValueType::Kind::kTensor || !t->has_shape) return false;
    const int64_t r = static_cast<int64_t>(t->dims.size());
    auto clamp = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
    const Attribute* start = n.attr("start");
    const Attribute* end = n.attr("end");
    const int64_t b = clamp(start && start->type == Attribute::Type::kInt ? start->i : 0);
    const int64_t e = end && end->type == Attribute::Type::kInt ? clamp(end->i) : r;
    dims->clear();
    for (int64_t i = b; i < e; ++i) dims->push_back(t->dims[static_cast<size_t>(i)].known() ? t->dims[static_cast<size_t>(i)].value : -1);
    return true;
  }

  // Gather(Shape(x), constant indices) where every gathered dim of x is static, though others are free: the
  // conditions exporters compute from static dims and ranks (`if x.shape[1] == 1: squeeze`) fold, and an If on them
  // becomes its branch while the free dims stay free (Silero VAD's bodies).
  bool FoldGatherOfShape(const Node& n, const Tensor& indices, Tensor* out) const {
    std::vector<int64_t> dims;
    if (!PartialShape(n.inputs[0], &dims)) return false;
    const Attribute* axis = n.attr("axis");
    if (axis && axis->type == Attribute::Type::kInt && axis->i != 0 && axis->i != -1) return false;
    if (indices.dtype() != DataType::kInt64 && indices.dtype() != DataType::kInt32) return false;
    const int64_t r = static_cast<int64_t>(dims.size());
    StatusOr<Tensor> t = Tensor::Allocate(DataType::kInt64, indices.shape());
    if (!t.ok()) return false;
    for (int64_t i = 0; i < indices.NumElements(); ++i) {
      int64_t k = indices.dtype() == DataType::kInt64 ? indices.data<int64_t>()[i] : indices.data<int32_t>()[i];
      if (k < 0) k += r;
      if (k < 0 || k >= r || dims[static_cast<size_t>(k)] < 0) return false;
      t.value().data<int64_t>()[i] = dims[static_cast<size_t>(k)];
    }
    Shape expected;  // shape inference and the folded value must agree, as for every folded node
    const ValueType* ot = g_.FindType(n.outputs[0]);
    if (ot && ot->has_shape && StaticShape(ot, &expected) && expected != indices.shape()) return false;
    if (ot && ot->elem_type != DataType::kUndefined && ot->elem_type != DataType::kInt64) return false;
    *out = std::move(t).value();
    return true;
  }

  Graph& g_;
  const Folder* parent_;
  ConstantFoldingOptions options_;
  std::unordered_set<std::string> graph_inputs_, graph_outputs_, local_;
  std::unordered_map<std::string, Tensor> folded_;
  std::unordered_map<std::string, size_t> producer_;  // value -> the node of this graph that makes it
};

}  // namespace

StatusOr<ConstantFoldingStats> FoldConstants(Model* model, const ConstantFoldingOptions& options) {
  ConstantFoldingStats stats;
  for (const Node& n : model->graph->nodes)
    if (n.op_type == "EPContext") return stats;  // a compiled model stays as it was compiled
  for (int pass = 0; pass < options.max_passes; ++pass) {
    Folder folder(*model->graph, nullptr, options);
    InitializerRewrite rewrite;
    if (!folder.Pass(&rewrite) || Folder::Count(rewrite) == 0) break;
    std::string inference_error;
    RETURN_IF_ERROR(ApplyInitializerRewrite(model, rewrite, &inference_error));
    stats.nodes_folded += Folder::Count(rewrite);
    ++stats.passes;
    if (!inference_error.empty()) {
      stats.inference_error = inference_error;
      break;
    }
  }
  return stats;
}

}  // namespace epctx
