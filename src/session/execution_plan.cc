#include "session/execution_plan.h"

#include <set>

#include "session/profiler.h"

namespace epctx {

namespace {

class PlanRunner final : public SubgraphRunner {
 public:
  PlanRunner(const GraphPlan* plan, const Frame* frame) : plan_(plan), frame_(frame) {}
  Status Run(const std::vector<IValue>& feeds, std::vector<IValue>* fetches) override {
    return plan_->Run(feeds, frame_, fetches);
  }
  const Graph& graph() const override { return plan_->graph(); }

 private:
  const GraphPlan* plan_;
  const Frame* frame_;
};

}  // namespace

int GraphPlan::FindSlot(const std::string& name) const {
  auto it = slots_.find(name);
  return it == slots_.end() ? -1 : it->second;
}

StatusOr<int> GraphPlan::ResolveName(const std::string& name, bool create_outer) {
  int local = FindSlot(name);
  if (local >= 0) return local;
  int levels = 1;
  for (const GraphPlan* p = parent_; p; p = p->parent_, ++levels) {
    int s = p->FindSlot(name);
    if (s >= 0) {
      for (size_t i = 0; i < outer_refs_.size(); ++i)
        if (outer_refs_[i].levels_up == levels && outer_refs_[i].slot == s) return kOuterBase + static_cast<int>(i);
      if (!create_outer) break;
      outer_refs_.push_back(OuterRef{levels, s});
      return kOuterBase + static_cast<int>(outer_refs_.size() - 1);
    }
  }
  return MakeStatus(ErrorCode::INVALID_GRAPH, "value '", name, "' is used in graph '", graph_.name,
                    "' but is not defined in it or in any enclosing graph");
}

StatusOr<std::unique_ptr<GraphPlan>> GraphPlan::Create(const Graph& graph, const GraphPlan* parent,
                                                       const PlanOptions& options) {
  std::unique_ptr<GraphPlan> plan(new GraphPlan(graph));
  plan->parent_ = parent;
  plan->options_ = options;
  auto add_slot = [&](const std::string& name) {
    auto it = plan->slots_.find(name);
    if (it != plan->slots_.end()) return it->second;
    int s = plan->num_slots_++;
    plan->slots_[name] = s;
    return s;
  };
  for (const auto& in : graph.inputs) {
    RETURN_ERROR_IF(plan->slots_.count(in.name), INVALID_GRAPH, "graph '", graph.name, "' declares input '", in.name,
                    "' twice");
    plan->input_slots_.push_back(add_slot(in.name));
  }
  for (const auto& [name, t] : graph.initializers) plan->constants_.emplace_back(add_slot(name), t);

  std::vector<std::string> outer_names;
  for (const GraphPlan* p = parent; p; p = p->parent_)
    for (const auto& [n, s] : p->slots_) outer_names.push_back(n);
  ASSIGN_OR_RETURN(std::vector<size_t> order, graph.TopologicalOrder(outer_names));

  for (size_t idx : order)
    for (const auto& o : graph.nodes[idx].outputs)
      if (!o.empty()) {
        RETURN_ERROR_IF(plan->slots_.count(o) && !graph.initializers.count(o), INVALID_GRAPH, "value '", o,
                        "' in graph '", graph.name, "' is both a graph input and a node output");
        add_slot(o);
      }

  for (size_t idx : order) {
    const Node& node = graph.nodes[idx];
    Step step;
    step.node = &node;
    for (const auto& in : node.inputs) {
      if (in.empty()) {
        step.inputs.push_back(-1);
        continue;
      }
      ASSIGN_OR_RETURN(int s, plan->ResolveName(in, true));
      step.inputs.push_back(s);
    }
    for (const auto& o : node.outputs) step.outputs.push_back(o.empty() ? -1 : plan->FindSlot(o));
    for (const auto& [an, a] : node.attributes) {
      if (a.type == Attribute::Type::kGraph && a.g) {
        ASSIGN_OR_RETURN(auto sub, Create(*a.g, plan.get(), options));
        step.subgraphs[an] = std::move(sub);
      }
    }
    const KernelFactory* factory = nullptr;
    if (node.domain == "epctx.fused") {
      if (options.fused_kernels) {
        auto fk = options.fused_kernels->find(node.name);
        if (fk != options.fused_kernels->end()) factory = &fk->second;
      }
    } else {
      factory = options.registry->Find(node.domain, node.op_type, node.opset);
    }
    if (!factory && node.op_type == "EPContext" && node.domain == "com.microsoft") {
      const Attribute* src = node.attr("source");
      return MakeStatus(ErrorCode::NOT_IMPLEMENTED, "Could not find an implementation for EPContext(1) node with name '",
                        node.name, "' (source '", src ? src->s : std::string(),
                        "'): no registered execution provider accepts it; register the EP that generated it");
    }
    if (!factory)
      return MakeStatus(ErrorCode::NOT_IMPLEMENTED, "CPUExecutionProvider has no kernel for ", node.op_type,
                        node.domain.empty() ? "" : " (domain '" + node.domain + "')", " at opset ", node.opset,
                        " (", node.Describe(), ")");
    KernelInfo info(node, graph, options.num_threads);
    ASSIGN_OR_RETURN(step.kernel, (*factory)(info));
    plan->steps_.push_back(std::move(step));
  }

  for (const auto& out : graph.outputs) {
    ASSIGN_OR_RETURN(int s, plan->ResolveName(out.name, true));
    plan->output_slots_.push_back(s);
  }

  // Release each node output after its last reader (subgraph reads count for the node that owns the subgraph).
  std::vector<int> last_use(plan->num_slots_, -1);
  std::function<void(const GraphPlan&, int, int)> mark_outer = [&](const GraphPlan& sub, int depth, int step_idx) {
    for (const auto& r : sub.outer_refs_)
      if (r.levels_up == depth) last_use[r.slot] = step_idx;
    for (const auto& st : sub.steps_)
      for (const auto& [n, p] : st.subgraphs) mark_outer(*p, depth + 1, step_idx);
  };
  for (size_t i = 0; i < plan->steps_.size(); ++i) {
    for (int s : plan->steps_[i].inputs)
      if (s >= 0 && s < kOuterBase) last_use[s] = static_cast<int>(i);
    for (const auto& [n, p] : plan->steps_[i].subgraphs) mark_outer(*p, 1, static_cast<int>(i));
  }
  std::set<int> keep(plan->output_slots_.begin(), plan->output_slots_.end());
  keep.insert(plan->input_slots_.begin(), plan->input_slots_.end());
  for (const auto& c : plan->constants_) keep.insert(c.first);
  for (int s = 0; s < plan->num_slots_; ++s)
    if (last_use[s] >= 0 && !keep.count(s)) plan->steps_[last_use[s]].release.push_back(s);
  return plan;
}

const IValue* GraphPlan::Lookup(const Frame& frame, int slot) const {
  if (slot < kOuterBase) return &frame.values[slot];
  const OuterRef& r = outer_refs_[slot - kOuterBase];
  const Frame* f = &frame;
  for (int i = 0; i < r.levels_up && f; ++i) f = f->parent;
  return f ? &f->values[r.slot] : nullptr;
}

namespace {
thread_local const std::atomic<bool>* t_terminate = nullptr;

Status CheckTerminate() {
  if (t_terminate && t_terminate->load(std::memory_order_relaxed))
    return Status(ErrorCode::FAIL, "Exiting due to terminate flag being set to true.");
  return Status::OK();
}
}  // namespace

RunTerminateScope::RunTerminateScope(const std::atomic<bool>* flag) : previous_(t_terminate) { t_terminate = flag; }
RunTerminateScope::~RunTerminateScope() { t_terminate = previous_; }

Status GraphPlan::Run(const std::vector<IValue>& feeds, const Frame* parent_frame, std::vector<IValue>* outputs) const {
  RETURN_IF_ERROR(CheckTerminate());
  Frame frame;
  frame.parent = parent_frame;
  frame.values.resize(num_slots_);
  for (const auto& [slot, t] : constants_) frame.values[slot] = IValue(t);
  RETURN_ERROR_IF(feeds.size() > input_slots_.size(), INVALID_ARGUMENT, "graph '", graph_.name, "' takes ",
                  input_slots_.size(), " inputs but ", feeds.size(), " were given");
  for (size_t i = 0; i < feeds.size(); ++i)
    if (!feeds[i].is_none() || !graph_.initializers.count(graph_.inputs[i].name))
      frame.values[input_slots_[i]] = feeds[i];

  std::vector<const IValue*> in_ptrs;
  for (const Step& step : steps_) {
    RETURN_IF_ERROR(CheckTerminate());
    in_ptrs.clear();
    for (int s : step.inputs) in_ptrs.push_back(s < 0 ? nullptr : Lookup(frame, s));
    std::vector<std::unique_ptr<PlanRunner>> runners;
    std::function<SubgraphRunner*(const std::string&)> get_sub;
    if (!step.subgraphs.empty()) {
      get_sub = [&](const std::string& attr) -> SubgraphRunner* {
        auto it = step.subgraphs.find(attr);
        if (it == step.subgraphs.end()) return nullptr;
        runners.push_back(std::make_unique<PlanRunner>(it->second.get(), &frame));
        return runners.back().get();
      };
    }
    KernelContext ctx(*step.node, in_ptrs, options_.num_threads, get_sub);
    int64_t t0 = options_.profiler ? options_.profiler->NowUs() : 0;
    Status st = step.kernel->Compute(ctx);
    if (options_.profiler) {
      std::string ep = "CPUExecutionProvider";
      if (options_.node_ep) {
        auto it = options_.node_ep->find(step.node->name);
        if (it != options_.node_ep->end()) ep = it->second;
      }
      options_.profiler->Add(SessionProfiler::Event{
          step.node->name.empty() ? step.node->op_type : step.node->name, "Node", t0,
          options_.profiler->NowUs() - t0,
          {{"op_name", step.node->domain == "epctx.fused" ? "fused" : step.node->op_type}, {"provider", ep}}});
    }
    if (!st.ok()) {
      // A subgraph stopped by the terminate flag: ONNX Runtime's message as is, without the node context.
      if (Status t = CheckTerminate(); !t.ok()) return t;
      if (st.message().find(step.node->Describe()) == std::string::npos)
        return st.WithContext(step.node->Describe());
      return st;
    }
    auto& outs = ctx.outputs();
    for (size_t i = 0; i < step.outputs.size(); ++i)
      if (step.outputs[i] >= 0) frame.values[step.outputs[i]] = std::move(outs[i]);
    for (int s : step.release) frame.values[s] = IValue();
  }
  outputs->clear();
  for (int s : output_slots_) {
    const IValue* v = Lookup(frame, s);
    outputs->push_back(v ? *v : IValue());
  }
  return Status::OK();
}

}  // namespace epctx
