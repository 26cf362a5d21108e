#include "plugin/plugin_ep.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <set>

namespace epctx {

namespace {

// Runs one compiled partition through the EP's compute info.
class FusedKernel final : public OpKernel {
 public:
  FusedKernel(PluginEp* ep, EpctxNodeComputeInfo* info, void* state, std::vector<DataType> out_types)
      : ep_(ep), info_(info), state_(state), out_types_(std::move(out_types)) {}
  ~FusedKernel() override {
    if (info_->ReleaseState) info_->ReleaseState(info_, state_);
  }
  Status Compute(KernelContext& ctx) const override {
    EpctxKernelContext kc;
    kc.ctx = &ctx;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor* t = ctx.Input(i);
      if (!t) return ctx.Error(ErrorCode::EP_FAIL, "input ", i, " of a fused node is not a tensor");
      kc.inputs.push_back(EpctxValue{*t, false});
    }
    kc.outputs.resize(ctx.num_outputs());
    kc.output_types = out_types_;
    std::unique_lock<std::mutex> lock(ep_->run_mutex(), std::defer_lock);
    if (!ep_->concurrent_runs()) lock.lock();
    RETURN_IF_ERROR(FromEpctxStatus(info_->Compute(info_, state_, &kc), ep_->name() + " failed to run " +
                                                                              ctx.node().name));
    for (size_t i = 0; i < kc.outputs.size(); ++i)
      if (!kc.outputs[i] && ctx.OutputRequested(i))
        return ctx.Error(ErrorCode::EP_FAIL, ep_->name(), " did not produce output ", i, " ('",
                         ctx.node().outputs[i], "')");
    return Status::OK();
  }

 private:
  PluginEp* ep_;
  EpctxNodeComputeInfo* info_;
  void* state_;
  std::vector<DataType> out_types_;
};

}  // namespace

StatusOr<std::unique_ptr<PluginEp>> PluginEp::Create(const EpSelection& selection,
                                                     const std::map<std::string, std::string>* config,
                                                     int64_t profile_epoch_us) {
  std::unique_ptr<PluginEp> p(new PluginEp());
  p->selection_ = selection;
  p->session_options_.entries = config;
  p->name_ = selection.ep_name;
  p->logger_.id = selection.ep_name;
  std::vector<const EpctxHardwareDevice*> hw;
  std::vector<const EpctxKeyValuePairs*> meta;
  for (const EpctxEpDevice* d : selection.devices) {
    hw.push_back(d->device);
    meta.push_back(&d->ep_metadata);
  }
  EpctxEpFactory* f = selection.factory;
  EpctxEp* ep = nullptr;
  RETURN_IF_ERROR(FromEpctxStatus(f->CreateEp(f, hw.data(), meta.data(), hw.size(), &p->session_options_,
                                              &p->logger_, &ep),
                                  "CreateEp of " + p->name_ + " failed"));
  RETURN_ERROR_IF(!ep, EP_FAIL, "CreateEp of ", p->name_, " returned no EP");
  p->ep_ = ep;
  RETURN_ERROR_IF(ep->version == 0 || ep->version > EPCTX_EP_API_VERSION, FAIL, "EP ", p->name_,
                  " was built for EP API version ", ep->version, " but this runtime supports 1 to ",
                  EPCTX_EP_API_VERSION);
  RETURN_ERROR_IF(!ep->GetName || !ep->GetCapability, FAIL, "OrtEp for ", p->name_,
                  " did not provide GetName() and GetCapability()");
  RETURN_ERROR_IF(!ep->Compile, FAIL, "OrtEp for ", p->name_, " did not provide a valid Compile() function");
  RETURN_ERROR_IF(!ep->ReleaseNodeComputeInfos, FAIL, "OrtEp for ", p->name_,
                  " did not provide a valid ReleaseNodeComputeInfos() function");
  if (ep->IsConcurrentRunSupported) {
    bool ok = true;
    RETURN_IF_ERROR(FromEpctxStatus(ep->IsConcurrentRunSupported(ep, &ok), p->name_ + ": IsConcurrentRunSupported"));
    p->concurrent_ = ok;
  }
  if (ep->GetPreferredDataLayout) {
    EpctxEpDataLayout layout = EPCTX_LAYOUT_NCHW;
    RETURN_IF_ERROR(FromEpctxStatus(ep->GetPreferredDataLayout(ep, &layout), p->name_ + ": GetPreferredDataLayout"));
    if (layout != EPCTX_LAYOUT_NCHW)  // no layout transformation yet: the EP receives the model's (NCHW) layout
      std::fprintf(stderr, "[epctx WARNING] %s prefers NHWC; epctx hands it nodes in the model's layout\n",
                   p->name_.c_str());
  }
  if (ep->CreateProfiler && profile_epoch_us >= 0) {
    EpctxEpProfiler* prof = nullptr;
    RETURN_IF_ERROR(FromEpctxStatus(ep->CreateProfiler(ep, &prof), p->name_ + ": CreateProfiler"));
    p->profiler_ = prof;
    if (prof && prof->StartProfiling)
      RETURN_IF_ERROR(FromEpctxStatus(prof->StartProfiling(prof, profile_epoch_us), p->name_ + ": StartProfiling"));
  }
  return p;
}

PluginEp::~PluginEp() {
  if (!ep_) return;
  if (profiler_ && profiler_->Release) profiler_->Release(profiler_);
  if (!compute_infos_.empty()) ep_->ReleaseNodeComputeInfos(ep_, compute_infos_.data(), compute_infos_.size());
  compiled_views_.clear();
  selection_.factory->ReleaseEp(selection_.factory, ep_);
}

Status PluginEp::OnRunStart() {
  if (!ep_->OnRunStart) return Status::OK();
  EpctxRunOptions ro;
  return FromEpctxStatus(ep_->OnRunStart(ep_, &ro), name_ + ": OnRunStart");
}
Status PluginEp::OnRunEnd() {
  if (!ep_->OnRunEnd) return Status::OK();
  EpctxRunOptions ro;
  return FromEpctxStatus(ep_->OnRunEnd(ep_, &ro, true), name_ + ": OnRunEnd");
}
Status PluginEp::SetDynamicOptions(const std::map<std::string, std::string>& options) {
  RETURN_ERROR_IF(!ep_->SetDynamicOptions, INVALID_ARGUMENT, name_, " does not accept dynamic options");
  std::vector<const char*> k, v;
  for (const auto& [a, b] : options) {
    k.push_back(a.c_str());
    v.push_back(b.c_str());
  }
  return FromEpctxStatus(ep_->SetDynamicOptions(ep_, k.data(), v.data(), k.size()), name_ + ": SetDynamicOptions");
}
Status PluginEp::OnSessionInitializationEnd() {
  if (!ep_->OnSessionInitializationEnd) return Status::OK();
  return FromEpctxStatus(ep_->OnSessionInitializationEnd(ep_), name_ + ": OnSessionInitializationEnd");
}
Status PluginEp::CollectProfile(std::vector<EpctxProfilingEventSink::Event>* events) {
  if (!profiler_) return Status::OK();
  EpctxProfilingEventSink sink;
  RETURN_IF_ERROR(FromEpctxStatus(profiler_->EndProfiling(profiler_, &sink), name_ + ": EndProfiling"));
  for (auto& e : sink.events) events->push_back(std::move(e));
  return Status::OK();
}

Status PluginEp::GetCapability(const Graph& graph, const std::vector<size_t>& available_topo,
                               const std::string& model_path, int64_t ir_version,
                               std::vector<std::vector<size_t>>* groups, std::map<size_t, std::string>* reasons) {
  auto view = BuildGraphView(graph, available_topo, model_path, ir_version, graph.name, false);
  // GetCapability sees the whole graph's inputs/outputs for orientation.
  EpctxEpGraphSupportInfo info;
  info.graph = view.get();
  info.claimed.assign(view->nodes.size(), false);
  RETURN_IF_ERROR(FromEpctxStatus(ep_->GetCapability(ep_, view.get(), &info), name_ + ": GetCapability failed"));
  for (const auto& g : info.groups) {
    std::vector<size_t> idx;
    for (const EpctxNode* n : g) idx.push_back(available_topo[n->id]);
    groups->push_back(std::move(idx));
  }
  if (reasons)
    for (const auto& [id, why] : info.rejection_reasons)
      if (!info.claimed[id]) (*reasons)[available_topo[id]] = why;
  return Status::OK();
}

std::string PluginEp::CompatibilityInfo(const Graph& graph, const std::string& model_path, int64_t ir_version) {
  if (!ep_->GetCompiledModelCompatibilityInfo) return "";
  auto view = BuildGraphView(graph, {}, model_path, ir_version, graph.name, true);
  const char* info = ep_->GetCompiledModelCompatibilityInfo(ep_, view.get());
  return info ? info : "";
}

Status PluginEp::Compile(const std::vector<FusedGroup>& groups, const std::string& model_path,
                         int64_t ir_version, bool generating, std::map<std::string, KernelFactory>* kernels,
                         std::map<std::string, Node>* ep_context_nodes,
                         std::map<std::string, PartitionReport>* load_reports) {
  if (groups.empty()) return Status::OK();
  std::vector<std::unique_ptr<EpctxGraph>> views;
  std::vector<std::unique_ptr<EpctxNode>> fused;
  std::vector<const EpctxGraph*> view_ptrs;
  std::vector<const EpctxNode*> fused_ptrs;
  for (const auto& g : groups) {
    views.push_back(BuildGraphView(*g.graph, g.nodes, model_path, ir_version, g.fused_name, false));
    auto fn = std::make_unique<EpctxNode>();
    // The fused node: a node of its own (not in the view's node list) whose inputs/outputs are the view's values.
    fn->graph = views.back().get();
    for (const auto& n : g.inputs) fn->inputs.push_back(views.back()->values.at(n).get());
    for (const auto& n : g.outputs) fn->outputs.push_back(views.back()->values.at(n).get());
    fn->owned.name = g.fused_name;
    fn->owned.op_type = g.fused_name;
    fn->owned.domain = name_;
    fn->owned.inputs = g.inputs;
    fn->owned.outputs = g.outputs;
    view_ptrs.push_back(views.back().get());
    fused_ptrs.push_back(fn.get());
    fused.push_back(std::move(fn));
  }
  std::vector<EpctxNodeComputeInfo*> infos(groups.size(), nullptr);
  std::vector<EpctxNode*> ctx_nodes(groups.size(), nullptr);
  Status st = FromEpctxStatus(ep_->Compile(ep_, view_ptrs.data(), fused_ptrs.data(), groups.size(), infos.data(),
                                           ctx_nodes.data()),
                              name_ + ": Compile failed");
  // The runtime owns EPContext nodes even when Compile fails (messages as ONNX Runtime's).
  Status ctx_status;
  for (size_t i = 0; i < ctx_nodes.size(); ++i) {
    std::unique_ptr<EpctxNode> n(ctx_nodes[i]);
    if (!generating || !st.ok()) continue;
    if (!n) {
      if (ctx_status.ok())
        ctx_status = MakeStatus(ErrorCode::FAIL, name_, ": OrtEp::Compile() returned a NULL EPContext node.");
      continue;
    }
    if (!n->from_editor) {
      if (ctx_status.ok())
        ctx_status = MakeStatus(ErrorCode::FAIL, name_,
                                ": OrtEp::Compile() returned OrtNode objects that were not created with OrtModelEditorApi.");
      n.release();  // not ours to free
      continue;
    }
    (*ep_context_nodes)[groups[i].fused_name] = n->owned;
  }
  for (EpctxNodeComputeInfo* i : infos)
    if (i) compute_infos_.push_back(i);
  for (auto& v : views) compiled_views_.push_back(std::move(v));
  RETURN_IF_ERROR(st);
  RETURN_IF_ERROR(ctx_status);
  for (size_t i = 0; i < fused.size(); ++i)
    if (fused[i]->load_reported) {
      PartitionReport& r = (*load_reports)[groups[i].fused_name];
      r.load_reported = true;
      r.load_file = fused[i]->load_file;
      r.bytes_mapped = fused[i]->bytes_mapped;
      r.bytes_read = fused[i]->bytes_read;
      r.load_ms = fused[i]->load_ms;
    }
  for (size_t i = 0; i < infos.size(); ++i) {
    RETURN_ERROR_IF(!infos[i], FAIL, "OrtEp::Compile() did not set a valid OrtNodeComputeInfo instance for graph at index ", i);
    RETURN_ERROR_IF(!infos[i]->Compute || !infos[i]->CreateState, FAIL, name_,
                    ": a compute info lacks CreateState or Compute (graph at index ", i, ")");
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    std::vector<DataType> out_types;
    for (const auto& o : groups[i].outputs) {
      const ValueType* t = groups[i].graph->FindType(o);
      out_types.push_back(t ? t->elem_type : DataType::kUndefined);
    }
    EpctxNodeComputeInfo* info = infos[i];
    std::string fused_name = groups[i].fused_name;
    PluginEp* self = this;
    (*kernels)[fused_name] = [self, info, fused_name, out_types](const KernelInfo&) -> StatusOr<std::unique_ptr<OpKernel>> {
      EpctxNodeComputeContext cc{fused_name};
      void* state = nullptr;
      RETURN_IF_ERROR(FromEpctxStatus(info->CreateState(info, &cc, &state), self->name() + ": CreateState for " + fused_name));
      return std::unique_ptr<OpKernel>(new FusedKernel(self, info, state, out_types));
    };
  }
  return Status::OK();
}

namespace {

// True when no path leaves the group and comes back (fusing would create a cycle).
bool IsConvex(const Graph& g, const std::set<size_t>& group) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& o : g.nodes[i].outputs) producer[o] = i;
  std::vector<std::vector<size_t>> consumers(g.nodes.size());
  // Values a node's subgraphs read from this scope are inputs of that node too (If/Loop/Scan bodies).
  std::function<void(const Graph&, std::set<std::string>*)> implicit = [&](const Graph& sub, std::set<std::string>* out) {
    for (const auto& sn : sub.nodes) {
      for (const auto& in : sn.inputs) out->insert(in);
      for (const auto& [an, a] : sn.attributes)
        if (a.g) implicit(*a.g, out);
    }
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::set<std::string> reads(g.nodes[i].inputs.begin(), g.nodes[i].inputs.end());
    for (const auto& [an, a] : g.nodes[i].attributes)
      if (a.g) implicit(*a.g, &reads);
    for (const auto& in : reads) {
      auto it = producer.find(in);
      if (it != producer.end() && it->second != i) consumers[it->second].push_back(i);
    }
  }
  // From every outside node reachable from the group, the group must not be reachable again.
  std::vector<int> state(g.nodes.size(), 0);  // 1 = reached outside
  std::vector<size_t> stack;
  for (size_t n : group)
    for (size_t c : consumers[n])
      if (!group.count(c) && !state[c]) {
        state[c] = 1;
        stack.push_back(c);
      }
  while (!stack.empty()) {
    size_t n = stack.back();
    stack.pop_back();
    for (size_t c : consumers[n]) {
      if (group.count(c)) return false;
      if (!state[c]) {
        state[c] = 1;
        stack.push_back(c);
      }
    }
  }
  return true;
}

std::string HashHex(const Graph& g) {
  size_t h = std::hash<std::string>()(g.name);
  for (const auto& n : g.nodes) h = h * 1000003u ^ std::hash<std::string>()(n.op_type + "/" + n.name);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%016zx", h);
  return buf;
}

}  // namespace

namespace {

// Partitions one graph; nested subgraphs first (bottom-up, as ONNX Runtime), each offered to the EPs on its own.
// *out is `graph` itself when nothing changed, else a new graph whose changed subgraphs point back to it.
Status PartitionOne(const std::shared_ptr<Graph>& graph, const std::vector<PluginEp*>& eps,
                    const std::string& model_path, int64_t ir_version,
                    const std::map<std::string, std::string>& config, int& fused_id, PartitionResult& result,
                    std::vector<std::vector<PluginEp::FusedGroup>>& pending, std::shared_ptr<Graph>* out_graph) {
  const Graph& g = *graph;
  std::map<std::pair<size_t, std::string>, std::shared_ptr<Graph>> new_subs;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& [an, a] : g.nodes[i].attributes)
      if (a.type == Attribute::Type::kGraph && a.g) {
        std::shared_ptr<Graph> sub;
        RETURN_IF_ERROR(PartitionOne(a.g, eps, model_path, ir_version, config, fused_id, result, pending, &sub));
        if (sub != a.g) new_subs[{i, an}] = sub;
      }
  // A Gradient node differentiates the graph's own nodes by name; fusing them away would hide its path.
  for (const auto& n : g.nodes)
    if (n.domain == "ai.onnx.preview.training" && n.op_type == "Gradient" && new_subs.empty()) {
      *out_graph = graph;
      return Status::OK();
    }
  ASSIGN_OR_RETURN(std::vector<size_t> order, g.TopologicalOrder());
  std::vector<int> owner(g.nodes.size(), -1);
  std::vector<std::vector<PluginEp::FusedGroup>> per_ep(eps.size());
  const std::string hash = HashHex(g);
  std::set<std::string> graph_outputs;
  for (const auto& o : g.outputs) graph_outputs.insert(o.name);
  std::map<size_t, std::vector<std::pair<std::string, std::string>>> rejected;  // node -> (EP, reason)
  for (size_t e = 0; e < eps.size(); ++e) {
    std::vector<size_t> available;
    for (size_t i : order)
      if (owner[i] < 0) available.push_back(i);
    if (available.empty()) break;
    std::vector<std::vector<size_t>> groups;
    auto t0 = std::chrono::steady_clock::now();
    std::map<size_t, std::string> reasons;
    RETURN_IF_ERROR(eps[e]->GetCapability(g, available, model_path, ir_version, &groups, &reasons));
    for (auto& [n, why] : reasons) rejected[n].emplace_back(eps[e]->name(), std::move(why));
    double cap_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    bool seen = false;
    for (auto& t : result.ep_timings)
      if (t.ep == eps[e]->name()) t.get_capability_ms += cap_ms, seen = true;
    if (!seen) result.ep_timings.push_back(EpTiming{eps[e]->name(), cap_ms, 0});
    for (auto& grp : groups) {
      std::set<size_t> members(grp.begin(), grp.end());
      if (!IsConvex(g, members)) {
        std::fprintf(stderr, "[epctx WARNING] %s claimed %zu nodes that cannot be fused without a cycle; they stay "
                             "on the next EP\n", eps[e]->name().c_str(), grp.size());
        for (size_t n : grp)
          rejected[n].emplace_back(eps[e]->name(), "claimed in a group of " + std::to_string(grp.size()) +
                                                       " nodes that cannot be fused without a cycle");
        continue;
      }
      bool all_ctx = true;
      for (size_t n : grp) all_ctx &= g.nodes[n].op_type == "EPContext";
      if (config.count("session.disable_model_compile") && config.at("session.disable_model_compile") == "1" && !all_ctx)
        return MakeStatus(ErrorCode::MODEL_REQUIRES_COMPILATION, "User disabled EP compilation but EP '",
                          eps[e]->name(), "' needs to compile one or more nodes.");
      for (size_t n : grp) owner[n] = static_cast<int>(e);
      PluginEp::FusedGroup fg;
      fg.graph = &g;
      // Keep the group in topological order.
      for (size_t i : order)
        if (members.count(i)) fg.nodes.push_back(i);
      std::string metadef = eps[e]->name() + "_" + hash + "_" + std::to_string(fused_id);
      fg.fused_name = eps[e]->name() + "_" + metadef + "_" + std::to_string(fused_id);
      ++fused_id;
      std::set<std::string> produced, seen_in;
      for (size_t n : fg.nodes)
        for (const auto& o : g.nodes[n].outputs) produced.insert(o);
      for (size_t n : fg.nodes)
        for (const auto& in : g.nodes[n].inputs)
          if (!in.empty() && !produced.count(in) && seen_in.insert(in).second) fg.inputs.push_back(in);
      std::set<std::string> used_outside;
      // Subgraphs at any depth may read a value of this scope.
      std::function<void(const Graph&)> reads_of = [&](const Graph& sub) {
        for (const auto& sn : sub.nodes) {
          for (const auto& in : sn.inputs) used_outside.insert(in);
          for (const auto& [an, a] : sn.attributes)
            if (a.g) reads_of(*a.g);
        }
      };
      for (size_t i = 0; i < g.nodes.size(); ++i) {
        if (members.count(i)) continue;
        for (const auto& in : g.nodes[i].inputs) used_outside.insert(in);
        for (const auto& [an, a] : g.nodes[i].attributes)
          if (a.g) reads_of(*a.g);
      }
      for (size_t n : fg.nodes)
        for (const auto& o : g.nodes[n].outputs)
          if (!o.empty() && (used_outside.count(o) || graph_outputs.count(o))) fg.outputs.push_back(o);
      per_ep[e].push_back(std::move(fg));
    }
  }
  // Nodes left on the CPU EP with what the EPs said, in topological order; a subgraph's after its parent graph's.
  {
    std::vector<LeftOnCpuNode> left;
    for (size_t i : order) {
      if (owner[i] >= 0) continue;
      const Node& n = g.nodes[i];
      LeftOnCpuNode l{g.parent ? g.name : std::string(), n.name, n.op_type, n.domain, {}};
      auto it = rejected.find(i);
      if (it != rejected.end()) l.reasons = it->second;
      left.push_back(std::move(l));
    }
    result.left_on_cpu.insert(g.parent ? result.left_on_cpu.end() : result.left_on_cpu.begin(), left.begin(),
                              left.end());
  }
  bool any = false;
  for (size_t e = 0; e < eps.size(); ++e) {
    any |= !per_ep[e].empty();
    for (const auto& fg : per_ep[e]) pending[e].push_back(fg);
  }
  if (!any && new_subs.empty()) {
    *out_graph = graph;
    return Status::OK();
  }
  auto out = std::make_shared<Graph>();
  out->name = g.name;
  out->inputs = g.inputs;
  out->outputs = g.outputs;
  out->initializers = g.initializers;
  out->value_types = g.value_types;
  out->opsets = g.opsets;
  out->external_initializers = g.external_initializers;
  out->parent = g.parent;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (owner[i] >= 0) continue;
    out->nodes.push_back(g.nodes[i]);
    for (auto& [an, a] : out->nodes.back().attributes) {
      auto it = new_subs.find({i, an});
      if (it != new_subs.end()) {
        a.g = it->second;
        a.g->parent = out.get();
      }
    }
  }
  for (size_t e = 0; e < eps.size(); ++e)
    for (const auto& fg : per_ep[e]) {
      Node n;
      n.name = fg.fused_name;
      n.op_type = fg.fused_name;
      n.domain = kFusedDomain;
      n.inputs = fg.inputs;
      n.outputs = fg.outputs;
      out->nodes.push_back(std::move(n));
      result.node_ep[fg.fused_name] = eps[e]->name();
    }
  *out_graph = out;
  return Status::OK();
}

}  // namespace

StatusOr<PartitionResult> PartitionGraph(const std::shared_ptr<Graph>& graph, const std::vector<PluginEp*>& eps,
                                         const std::string& model_path, int64_t ir_version,
                                         const std::map<std::string, std::string>& config) {
  PartitionResult result;
  result.graph = graph;
  if (eps.empty()) return result;
  int fused_id = 0;
  // Every graph (subgraphs first) is partitioned before anything is compiled: each EP then compiles all of its
  // groups in one Compile call, as one session of that EP, so the EPContext nodes it returns for partitions inside
  // control-flow bodies and in the main graph share one context binary (an EP writes one per call). The source
  // graphs the groups point into stay alive: `graph` owns them.
  std::vector<std::vector<PluginEp::FusedGroup>> pending(eps.size());
  RETURN_IF_ERROR(PartitionOne(graph, eps, model_path, ir_version, config, fused_id, result, pending, &result.graph));
  const bool generating = config.count("ep.context_enable") && config.at("ep.context_enable") == "1";
  for (size_t e = 0; e < eps.size(); ++e) {
    if (pending[e].empty()) continue;
    auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(eps[e]->Compile(pending[e], model_path, ir_version, generating, &result.fused_kernels,
                                    &result.ep_context_nodes, &result.load_reports));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (auto& t : result.ep_timings)
      if (t.ep == eps[e]->name()) t.compile_ms += ms;
    for (const auto& fg : pending[e]) {
      const Graph& g = *fg.graph;
      PartitionReport r;
      r.fused_name = fg.fused_name;
      r.ep = eps[e]->name();
      r.num_nodes = fg.nodes.size();
      for (size_t n : fg.nodes) r.op_types.push_back(g.nodes[n].op_type);
      if (fg.nodes.size() == 1 && g.nodes[fg.nodes[0]].op_type == "EPContext") {
        const Node& n = g.nodes[fg.nodes[0]];
        r.from_ep_context = true;
        if (const Attribute* a = n.attr("source")) r.source = a->s;
        if (const Attribute* a = n.attr("embed_mode")) r.embed_mode = a->i;
        if (const Attribute* a = n.attr("main_context")) r.main_context = a->i;
        const Attribute* cache = n.attr("ep_cache_context");
        if (cache && r.embed_mode == 1) r.payload_bytes = cache->s.size();
        if (cache && r.embed_mode == 0 && r.main_context == 1 && !cache->s.empty()) {
          size_t slash = model_path.find_last_of('/');
          r.binary_path = (slash == std::string::npos ? std::string() : model_path.substr(0, slash + 1)) + cache->s;
          struct stat st;
          if (::stat(r.binary_path.c_str(), &st) == 0) r.payload_bytes = static_cast<uint64_t>(st.st_size);
        }
      }
      auto lr = result.load_reports.find(fg.fused_name);
      if (lr != result.load_reports.end()) {
        r.load_reported = true;
        r.load_file = lr->second.load_file;
        r.bytes_mapped = lr->second.bytes_mapped;
        r.bytes_read = lr->second.bytes_read;
        r.load_ms = lr->second.load_ms;
      }
      result.partitions.push_back(std::move(r));
    }
  }
  return result;
}

}  // namespace epctx
