#include "session/session.h"

#include <fcntl.h>
#include <omp.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <sstream>

#include "core/parallel.h"
#include "epcontext/context_model.h"
#include "epcontext/paths.h"
#include "epcontext/shared_group.h"
#include "providers/cpu/passes/cpu_fusion.h"
#include "providers/cpu/passes/cpu_layout.h"
#include "providers/cpu/passes/float16_promotion.h"
#include "providers/cpu/passes/qdq_fusion.h"

namespace epctx {

namespace {
double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Session config entry through which a weight-sharing group's sessions learn their group (shared_group.h): the
// runtime's group id, so an EP can tell a new group from the one it has open (a session may fail before any EP
// sees it, and the runtime then ends the group).
constexpr const char* kShareGroupKey = "ep.share_ep_contexts_group";

bool GeneratesInGroup(const SessionConfig& config) {
  return config.Get("ep.context_enable") == "1" && config.Get("ep.share_ep_contexts") == "1";
}

// A session meant for a weight-sharing group that fails before it joins (model load, options) ends the group too,
// so the next sharing session starts clean.
Status AbortGroupOnError(Status st, const SessionConfig& config) {
  if (!st.ok() && GeneratesInGroup(config)) {
    SharedContextGroup& group = SharedContextGroup::Instance();
    group.Abort(group.current());
  }
  return st;
}

// Aborts the open weight-sharing group when the session creation that holds it fails (destroyed without Keep()).
class GroupFailureGuard {
 public:
  GroupFailureGuard() = default;
  GroupFailureGuard(const GroupFailureGuard&) = delete;
  GroupFailureGuard& operator=(const GroupFailureGuard&) = delete;
  ~GroupFailureGuard() {
    if (id_) SharedContextGroup::Instance().Abort(id_);
  }
  void Arm(uint64_t id) { id_ = id; }
  void Keep() { id_ = 0; }

 private:
  uint64_t id_ = 0;
};

StatusOr<ModelLoadOptions> LoadOptionsFor(const SessionConfig& config) {
  ModelLoadOptions o;
  o.external_data_folder = config.Get("session.model_external_initializers_file_folder_path");
  o.free_dimension_overrides = config.free_dimension_overrides;
  RETURN_IF_ERROR_CTX(ParseInputShapes(config.Get("epctx.input_shapes"), &o.input_shapes), "session config entry ",
                      "epctx.input_shapes");
  return o;
}
}  // namespace

StatusOr<std::unique_ptr<InferenceSession>> InferenceSession::CreateFromFile(const std::string& path,
                                                                             const SessionConfig& config) {
  auto t0 = std::chrono::steady_clock::now();
  StatusOr<ModelLoadOptions> lo = LoadOptionsFor(config);
  if (!lo.ok()) return AbortGroupOnError(lo.status(), config);
  StatusOr<std::shared_ptr<Model>> model = LoadModelFromFile(path, lo.value());
  if (!model.ok()) return AbortGroupOnError(model.status(), config);
  return Finish(std::move(model).value(), config, MsSince(t0));
}

StatusOr<std::unique_ptr<InferenceSession>> InferenceSession::CreateFromBytes(const void* data, size_t size,
                                                                              const SessionConfig& config) {
  // Checked before loading, as ONNX Runtime does (the compile API checked its output location itself).
  if (config.Get("ep.context_enable") == "1" && config.Get("ep.context_file_path").empty() && !config.generation)
    return AbortGroupOnError(
        MakeStatus(ErrorCode::FAIL,
                   "Inference session with a model loaded from bytes was configured with EPContext model generation "
                   "enabled but without a valid location (e.g., file or buffer) for the output model. Please specify "
                   "a valid ep.context_file_path via SessionOption configs or use the OrtCompileApi to compile a "
                   "model to a file or buffer."),
        config);
  auto t0 = std::chrono::steady_clock::now();
  StatusOr<ModelLoadOptions> lo = LoadOptionsFor(config);
  if (!lo.ok()) return AbortGroupOnError(lo.status(), config);
  StatusOr<std::shared_ptr<Model>> model = LoadModelFromBytes(data, size, lo.value());
  if (!model.ok()) return AbortGroupOnError(model.status(), config);
  return Finish(std::move(model).value(), config, MsSince(t0));
}

StatusOr<std::unique_ptr<InferenceSession>> InferenceSession::Finish(std::shared_ptr<Model> model,
                                                                     const SessionConfig& config, double load_ms) {
  // Declared before the session, so a failed member of a weight-sharing group ends the group after its EPs were
  // released (an EP released without OnSessionInitializationEnd ends its own side of the group).
  GroupFailureGuard group_guard;
  std::unique_ptr<InferenceSession> s(new InferenceSession());
  s->config_ = config;
  s->config_.entries.erase(kShareGroupKey);  // set by the runtime only
  s->model_ = std::move(model);
  s->timings_.load_ms = load_ms;
  RETURN_ERROR_IF(config.intra_op_num_threads < 0, INVALID_ARGUMENT, "intra_op_num_threads must be >= 0, got ",
                  config.intra_op_num_threads);
  s->num_threads_ = config.intra_op_num_threads > 0 ? config.intra_op_num_threads : DefaultNumThreads();
  // Plugin EPs see session options only as config entries: the thread count they should honour travels as one.
  s->config_.entries["session.intra_op_num_threads"] = std::to_string(s->num_threads_);
  if (config.profiling) s->profiler_ = std::make_unique<SessionProfiler>();
  const bool generating = config.Get("ep.context_enable") == "1";
  s->generation_ = config.generation ? *config.generation : GenerationOptions::FromConfig(config.entries);
  const GenerationOptions& gen = s->generation_;
  const bool already_compiled = HoldsEpContextNodes(*s->model_->graph);  // control-flow bodies included
  // The compile API refuses a compiled model before any EP sees it (ONNX Runtime finds out after partitioning).
  RETURN_ERROR_IF(generating && already_compiled && gen.compile_api, INVALID_GRAPH,
                  "Encountered an invalid node while compiling a model. Please ensure the input model is not already "
                  "compiled.");
  if (generating && already_compiled) s->config_.entries.erase("ep.context_enable");  // load as is; EPs see no request
  // Weight sharing (shared_group.h): a generating session with ep.share_ep_contexts=1 joins the open group (or starts
  // one); everything it writes stays pending until the group's last session (ep.stop_share_ep_contexts=1) succeeds.
  const bool in_group = generating && !already_compiled && GeneratesInGroup(config);
  const bool last_of_group = in_group && config.Get("ep.stop_share_ep_contexts") == "1";
  uint64_t group_id = 0;
  if (in_group) {
    group_id = SharedContextGroup::Instance().Join();
    group_guard.Arm(group_id);
    s->config_.entries[kShareGroupKey] = std::to_string(group_id);
  }
  if (generating && !already_compiled) {
    // An absolute external initializers file is refused before any EP compiles (ONNX Runtime: a late exception).
    RETURN_ERROR_IF(!gen.initializer_location && !gen.external_initializers_file.empty() &&
                        gen.external_initializers_file[0] == '/',
                    INVALID_ARGUMENT, "ep.context_model_external_initializers_file_name must be a relative path, got '",
                    gen.external_initializers_file, "'");
    if (gen.writes_file()) {
      // Validated before any EP compiles; EPs read the final path from ep.context_file_path.
      ASSIGN_OR_RETURN(std::string ctx_path, ValidatedEpContextPath(gen.output_path, s->model_->path, false));
      // Generations into one folder are serialized across processes (an flock on the folder, held until the context
      // model is written), so a model and the binary it names always come from the same session. The "exists
      // already" check is repeated under the lock.
      const std::string folder = FolderOfPath(ctx_path);
      s->generation_lock_ = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      RETURN_ERROR_IF(s->generation_lock_ < 0, FAIL, "cannot generate '", ctx_path, "': folder '", folder,
                      "' cannot be opened: ", std::strerror(errno));
      while (::flock(s->generation_lock_, LOCK_EX) != 0 && errno == EINTR) {
      }
      ASSIGN_OR_RETURN(ctx_path, ValidatedEpContextPath(ctx_path, s->model_->path, gen.error_if_output_file_exists));
      if (in_group) RETURN_IF_ERROR(SharedContextGroup::Instance().CheckFree(ctx_path));
      s->output_path_ = ctx_path;
      // The compile API keeps an ep.context_file_path of its own (SetEpContextBinaryInformation): EPs place their
      // binaries by it, as in ONNX Runtime.
      if (!gen.compile_api || config.Get("ep.context_file_path").empty())
        s->config_.entries["ep.context_file_path"] = ctx_path;
    } else {
      // A buffer or write-function output: no file is written under a model path, so none is checked for existence
      // (ONNX Runtime checks <model>_ctx.onnx even then: trap S7). The path still places the external initializers
      // file and, when ep.context_file_path is unset, the EPs' binaries: <model stem>_ctx.onnx beside the source
      // model, else ep.context_file_path, else the compile API's fallback in the working directory.
      std::string base;
      if (!s->model_->path.empty()) {
        ASSIGN_OR_RETURN(base, ValidatedEpContextPath("", s->model_->path, false));
      } else if (!config.Get("ep.context_file_path").empty()) {
        base = config.Get("ep.context_file_path");
      } else {
        base = gen.fallback_context_path;
      }
      RETURN_ERROR_IF(base.empty(), INVALID_ARGUMENT, "Both ep_context_path and model_path are empty.");
      s->output_path_ = base;
      if (config.Get("ep.context_file_path").empty()) s->config_.entries["ep.context_file_path"] = base;
    }
  }
  // Graph optimization (ONNX Runtime's level 1 and above): constant folding, before any EP sees the graph, so
  // GetCapability, Compile and the context model all see the folded graph with its static shapes.
  if (config.graph_optimization_level > 0 && !already_compiled) {
    auto tf = std::chrono::steady_clock::now();
    ConstantFoldingOptions fo;
    fo.num_threads = s->num_threads_;
    ASSIGN_OR_RETURN(s->folding_, FoldConstants(s->model_.get(), fo));
    if (!s->folding_.inference_error.empty())
      std::fprintf(stderr, "[epctx WARNING] constant folding stopped: ONNX shape inference failed on the folded graph "
                           "(%s); shapes stay as inferred before\n", s->folding_.inference_error.c_str());
    s->timings_.fold_ms = MsSince(tf);
  }
  auto tp = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(s->SetUpExecutionProviders());
  s->timings_.partition_ms = MsSince(tp);
  // Every level (ONNX Runtime's InsertCastTransformer): the CPU EP computes float16 regions in float32. A context
  // model is still written from the graph as partitioned (context_source_), as ONNX Runtime writes it before its
  // transformers run.
  CpuFusionStats fs;
  if (generating) s->context_source_ = s->partition_.graph;
  s->partition_.graph = PromoteFloat16Nodes(s->partition_.graph, &fs);
  s->cpu_fusions_ = fs;
  // Level 2 (ONNX Runtime's extended optimizations) on the nodes the CPU EP runs: QDQ groups as one int8 op, then
  // Conv + BatchNormalization + activation. Not when writing a context model (this session runs the graph it writes).
  if (config.graph_optimization_level >= 2 && !generating) {
    s->partition_.graph = FuseQdqNodes(s->partition_.graph, &fs);
    s->partition_.graph = FuseCpuNodes(s->partition_.graph, &fs);
    s->cpu_fusions_ = fs;
  }
  // Level 3 (ORT_ENABLE_LAYOUT): activations stay in oneDNN's layout between the CPU EP's convolutions.
  // "epctx.cpu_layout" overrides the layout oneDNN prefers (plain turns the pass off; tests force the others).
  if (config.graph_optimization_level >= 3 && !generating) {
    const std::string name = config.Get("epctx.cpu_layout");
    CpuLayout layout = PreferredCpuLayout();
    RETURN_ERROR_IF(!name.empty() && name != "auto" && !ParseCpuLayout(name, &layout), INVALID_ARGUMENT,
                    "session config entry epctx.cpu_layout is '", name,
                    "'; expected auto, plain, nhwc, nChw8c or nChw16c");
    s->partition_.graph = LayOutCpuNodes(s->partition_.graph, layout, &s->cpu_fusions_);
  }
  const Graph& g = *s->partition_.graph;
  for (const auto& in : g.inputs)
    if (!g.initializers.count(in.name)) s->inputs_.push_back(in);  // overridable initializers are not listed
  auto t0 = std::chrono::steady_clock::now();
  PlanOptions po;
  po.num_threads = s->num_threads_;
  po.registry = &CpuKernelRegistry();
  po.fused_kernels = &s->partition_.fused_kernels;
  po.profiler = s->profiler_.get();
  po.node_ep = &s->partition_.node_ep;
  ASSIGN_OR_RETURN(s->plan_, GraphPlan::Create(g, nullptr, po));
  s->timings_.plan_ms = MsSince(t0);
  // The context model is written before OnSessionInitializationEnd (as in ONNX Runtime), so an EP learns that its
  // session failed (it is released without that call) when writing the model fails too.
  if (generating) {
    auto tg = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(s->GenerateContextModel(already_compiled));
    s->timings_.generate_ms = MsSince(tg);
  }
  for (auto& ep : s->plugin_eps_) RETURN_IF_ERROR(ep->OnSessionInitializationEnd());
  if (last_of_group) {
    auto tg = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(SharedContextGroup::Instance().Publish(group_id));  // aborts the group itself on failure
    s->timings_.generate_ms += MsSince(tg);
  }
  group_guard.Keep();
  s->ReleaseGenerationLock();
  return s;
}

namespace {
std::string Esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o;
}

// [{"node":..,"op":..,["domain":..,]["graph":..,]"reasons":{EP:reason,...}},...]: the session report's
// "left_on_cpu" and a context model's "epctx.left_on_cpu" metadata (read by `epctx inspect`).
std::string LeftOnCpuJson(const std::vector<LeftOnCpuNode>& left) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < left.size(); ++i) {
    const LeftOnCpuNode& n = left[i];
    o << (i ? "," : "") << "{\"node\":\"" << Esc(n.name) << "\",\"op\":\"" << Esc(n.op_type) << "\"";
    if (!n.domain.empty()) o << ",\"domain\":\"" << Esc(n.domain) << "\"";
    if (!n.graph.empty()) o << ",\"graph\":\"" << Esc(n.graph) << "\"";
    o << ",\"reasons\":{";
    for (size_t k = 0; k < n.reasons.size(); ++k)
      o << (k ? "," : "") << "\"" << Esc(n.reasons[k].first) << "\":\"" << Esc(n.reasons[k].second) << "\"";
    o << "}}";
  }
  o << "]";
  return o.str();
}
}  // namespace

Status InferenceSession::GenerateContextModel(bool already_compiled) {
  if (already_compiled) {
    std::fprintf(stderr, "[epctx WARNING] ep.context_enable=1 but the model already holds EPContext nodes; it was "
                         "loaded as is and no context model was written.\n");
    return Status::OK();
  }
  const GenerationOptions& gen = generation_;
  if (partition_.ep_context_nodes.empty()) {
    switch (gen.if_no_compiled_nodes) {
      case GenerationOptions::IfNoCompiledNodes::kDontGenerateModel:
        std::fprintf(stderr, "[epctx WARNING] Unable to compile any nodes. epctx will not generate a compiled model. "
                             "Either the session EPs do not support compilation or the model is already compiled.\n");
        return Status::OK();
      case GenerationOptions::IfNoCompiledNodes::kReturnError:
        return Status(ErrorCode::FAIL, "Unable to compile any nodes. Check that the session EPs support compilation "
                                       "and can execute at least one subgraph in the model.");
      case GenerationOptions::IfNoCompiledNodes::kGenerateModel:
        break;  // the model is written without EPContext nodes
    }
  }
  ContextModelSpec spec;
  spec.source = model_.get();
  spec.partitioned = context_source_.get();
  spec.ep_context_nodes = partition_.ep_context_nodes;
  spec.output_path = output_path_;
  spec.external_initializers_file = gen.initializer_location ? std::string() : gen.external_initializers_file;
  spec.options = &gen;
  for (auto& ep : plugin_eps_)
    spec.compatibility[ep->name()] = ep->CompatibilityInfo(*model_->graph, model_->path, model_->ir_version);
  // Written only when some node is left (an old value copied from the source is dropped otherwise).
  spec.metadata["epctx.left_on_cpu"] =
      partition_.left_on_cpu.empty() ? std::string() : LeftOnCpuJson(partition_.left_on_cpu);
  const std::string folder = FolderOfPath(spec.output_path);
  // The context binaries this model names as its own (embed_mode=0, main_context=1, a plain relative name), where
  // the EPs wrote them: beside ep.context_file_path.
  const std::string binary_folder = FolderOfPath(config_.Get("ep.context_file_path"));
  std::vector<std::string> binaries;
  for (const auto& [fused, node] : spec.ep_context_nodes) {
    const Attribute* embed = node.attr("embed_mode");
    const Attribute* main = node.attr("main_context");
    const Attribute* cache = node.attr("ep_cache_context");
    if (embed && embed->i == 0 && (!main || main->i == 1) && cache && !cache->s.empty() && cache->s[0] != '/' &&
        cache->s.find("..") == std::string::npos)
      binaries.push_back(binary_folder + "/" + cache->s);
  }
  const std::string group_key = config_.Get(kShareGroupKey);
  if (!group_key.empty()) {
    // A weight-sharing group member: write under pending names; the group's last session publishes them. (A buffer
    // or write-function output is handed over at once; only files are staged.)
    SharedContextGroup& group = SharedContextGroup::Instance();
    const uint64_t id = std::stoull(group_key);
    for (const std::string& b : binaries) group.Own(id, b);  // removed if the group fails
    if (gen.writes_file()) {
      ASSIGN_OR_RETURN(spec.stage_model_path,
                       group.Stage(id, spec.output_path, /*no_replace=*/gen.error_if_output_file_exists));
    }
    if (!spec.external_initializers_file.empty() && spec.external_initializers_file[0] != '/') {
      ASSIGN_OR_RETURN(spec.stage_external_path,
                       group.Stage(id, folder + "/" + spec.external_initializers_file, /*no_replace=*/false));
    }
  }
  Status st = WriteContextModel(spec);
  if (st.ok())
    generated_model_ = gen.output == GenerationOptions::Output::kFile     ? spec.output_path
                       : gen.output == GenerationOptions::Output::kBuffer ? std::string("(buffer)")
                                                                          : std::string("(write function)");
  if (!st.ok() && group_key.empty()) {
    // No context binary may outlive a failed generation: remove those the EPs wrote for this model. (A group's
    // sessions own theirs through the group, which removes them only if this session wrote them.)
    for (const std::string& b : binaries) std::remove(b.c_str());
  }
  return st;
}

void InferenceSession::ReleaseGenerationLock() {
  if (generation_lock_ >= 0) ::close(generation_lock_);  // closing drops the flock
  generation_lock_ = -1;
}

InferenceSession::~InferenceSession() {
  ReleaseGenerationLock();
  plan_.reset();
  partition_ = PartitionResult();
  plugin_eps_.clear();
  libraries_.clear();
}

namespace {
std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s;
}

// Device ranking for automatic selection; lower is preferred, -1 = never.
int Rank(DevicePolicy p, const EpctxEpDevice* d, bool builtin) {
  if (d->device->IsVirtual()) return -1;  // never picked automatically
  EpctxHardwareDeviceType t = d->device->type;
  switch (p) {
    case DevicePolicy::kDefault:
    case DevicePolicy::kPreferCpu: return builtin ? 1 : (t == EPCTX_DEVICE_CPU ? 0 : -1);
    case DevicePolicy::kPreferNpu: return builtin ? 9 : t == EPCTX_DEVICE_NPU ? 0 : t == EPCTX_DEVICE_GPU ? 1 : 2;
    case DevicePolicy::kPreferGpu: return builtin ? 9 : t == EPCTX_DEVICE_GPU ? 0 : t == EPCTX_DEVICE_NPU ? 1 : 2;
    case DevicePolicy::kMaxPerformance: return builtin ? 9 : t == EPCTX_DEVICE_GPU ? 0 : t == EPCTX_DEVICE_NPU ? 1 : 2;
    case DevicePolicy::kMaxEfficiency:
    case DevicePolicy::kMinOverallPower: return builtin ? 9 : t == EPCTX_DEVICE_NPU ? 0 : t == EPCTX_DEVICE_CPU ? 1 : 2;
    default: return -1;
  }
}
}  // namespace

Status InferenceSession::SetUpExecutionProviders() {
  std::vector<EpRequest> requests = config_.eps;
  if (requests.empty() && config_.registry && (config_.policy != DevicePolicy::kNone || config_.delegate)) {
    std::vector<const EpctxEpDevice*> all = config_.registry->Devices();
    std::vector<const EpctxEpDevice*> chosen;
    if (config_.delegate) {
      chosen = config_.delegate(all);
      for (const EpctxEpDevice* d : chosen) {
        bool known = false;
        for (const EpctxEpDevice* a : all) known |= a == d;
        RETURN_ERROR_IF(!known, INVALID_ARGUMENT, "the EP selection delegate returned a device that is not one of "
                                                  "the devices it was given");
      }
    } else {
      std::vector<std::pair<int, const EpctxEpDevice*>> ranked;
      for (size_t i = 0; i < all.size(); ++i) {
        int r = Rank(config_.policy, all[i], all[i] == config_.registry->cpu_device());
        if (r >= 0) ranked.emplace_back(r * 1000 + static_cast<int>(i), all[i]);
      }
      std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (auto& r : ranked) chosen.push_back(r.second);
    }
    // One request per factory, in the order first chosen.
    for (const EpctxEpDevice* d : chosen) {
      if (d == config_.registry->cpu_device()) continue;
      bool merged = false;
      for (auto& req : requests)
        if (!req.devices.empty() && req.devices[0]->factory == d->factory) {
          req.devices.push_back(d);
          merged = true;
        }
      if (!merged) requests.push_back(EpRequest{d->ep_name, {d}, {}});
    }
  }
  std::vector<PluginEp*> eps;
  for (const auto& req : requests) {
    if (req.ep_name == "CPUExecutionProvider" || req.devices.empty()) {
      RETURN_ERROR_IF(req.ep_name != "CPUExecutionProvider", INVALID_ARGUMENT, "execution provider '", req.ep_name,
                      "' has no devices; register its library and pass its devices");
      continue;  // the CPU EP always runs what nobody else takes
    }
    RETURN_ERROR_IF(!config_.registry, INVALID_ARGUMENT, "plugin EP '", req.ep_name, "' requested without an Env");
    std::shared_ptr<EpLibrary> lib = config_.registry->LibraryOf(req.devices[0]);
    RETURN_ERROR_IF(!lib, INVALID_ARGUMENT, "the devices given for '", req.ep_name,
                    "' belong to no registered library (was it unregistered?)");
    for (const EpctxEpDevice* d : req.devices)
      RETURN_ERROR_IF(d->factory != req.devices[0]->factory, INVALID_ARGUMENT,
                      "all devices given to AppendExecutionProvider_V2 must belong to the same EP; got '",
                      req.devices[0]->ep_name, "' and '", d->ep_name, "'");
    // Provider options become session config ep.<lowercase ep name>.<key>: device defaults, then the user's.
    const std::string prefix = "ep." + Lower(req.ep_name) + ".";
    for (const EpctxEpDevice* d : req.devices)
      for (size_t i = 0; i < d->ep_options.keys.size(); ++i)
        if (!config_.entries.count(prefix + d->ep_options.keys[i]))
          config_.entries[prefix + d->ep_options.keys[i]] = d->ep_options.values[i];
    for (const auto& [k, v] : req.options) config_.entries[prefix + k] = v;
    libraries_.push_back(lib);
    RETURN_IF_ERROR(ValidateCompatibility(req));
    EpSelection sel{lib, req.devices[0]->factory, req.devices, req.ep_name};
    ASSIGN_OR_RETURN(auto ep, PluginEp::Create(sel, &config_.entries, profiler_ ? profiler_->EpochUs() : -1));
    plugin_eps_.push_back(std::move(ep));
    eps.push_back(plugin_eps_.back().get());
  }
  std::string model_path = model_->path;
  if (model_path.empty() && !config_.Get("session.model_external_initializers_file_folder_path").empty())
    model_path = config_.Get("session.model_external_initializers_file_folder_path") + "/virtual_model.onnx";
  ASSIGN_OR_RETURN(partition_, PartitionGraph(model_->graph, eps, model_path, model_->ir_version, config_.entries));
  return Status::OK();
}

Status InferenceSession::ValidateCompatibility(const EpRequest& req) {
  // Before the EP sees the graph: the factory judges the compatibility string stored when the model was compiled.
  auto it = model_->metadata.find("ep_compatibility_info." + req.ep_name);
  if (it == model_->metadata.end()) return Status::OK();
  EpctxEpFactory* f = req.devices[0]->factory;
  if (!f->ValidateCompiledModelCompatibilityInfo) return Status::OK();
  std::vector<const EpctxHardwareDevice*> hw;
  for (const EpctxEpDevice* d : req.devices) hw.push_back(d->device);
  EpctxCompiledModelCompatibility c = EPCTX_EP_NOT_APPLICABLE;
  Status st = FromEpctxStatus(f->ValidateCompiledModelCompatibilityInfo(f, hw.data(), hw.size(), it->second.c_str(), &c), "");
  RETURN_ERROR_IF(!st.ok(), FAIL, "Failed to validate compiled model compatibility for EP ", req.ep_name, ": ",
                  st.message());
  compatibility_[req.ep_name] = static_cast<int>(c);
  switch (c) {
    case EPCTX_EP_UNSUPPORTED:
      return MakeStatus(ErrorCode::FAIL, "Compiled model is not supported by execution provider: ", req.ep_name);
    case EPCTX_EP_SUPPORTED_PREFER_RECOMPILATION:
      RETURN_ERROR_IF(config_.Get("session.fail_on_suboptimal_compiled_model") == "1", FAIL,
                      "Compiled model is suboptimal for execution provider: ", req.ep_name,
                      ". Recompilation recommended for better performance.");
      std::fprintf(stderr, "[epctx WARNING] Compiled model is supported by execution provider %s but suboptimal. "
                           "Consider recompiling the model.\n", req.ep_name.c_str());
      return Status::OK();
    default:
      return Status::OK();
  }
}


std::string InferenceSession::ReportJson() const {
  std::ostringstream o;
  o.precision(4);
  o << std::fixed;
  o << "{\"model\":\"" << Esc(model_->path) << "\",\"timings_ms\":{\"load\":" << timings_.load_ms
    << ",\"constant_folding\":" << timings_.fold_ms << ",\"partition_and_compile\":" << timings_.partition_ms << ",\"plan\":" << timings_.plan_ms
    << ",\"generate_context_model\":" << timings_.generate_ms << "},\"eps\":[";
  for (size_t i = 0; i < partition_.ep_timings.size(); ++i) {
    const auto& t = partition_.ep_timings[i];
    o << (i ? "," : "") << "{\"name\":\"" << Esc(t.ep) << "\",\"get_capability_ms\":" << t.get_capability_ms
      << ",\"compile_ms\":" << t.compile_ms;
    auto c = compatibility_.find(t.ep);
    if (c != compatibility_.end()) {
      static const char* kNames[] = {"EP_NOT_APPLICABLE", "EP_SUPPORTED_OPTIMAL", "EP_SUPPORTED_PREFER_RECOMPILATION",
                                     "EP_UNSUPPORTED"};
      o << ",\"compatibility\":\"" << (c->second >= 0 && c->second < 4 ? kNames[c->second] : "unknown") << "\"";
    }
    o << "}";
  }
  o << "],\"partitions\":[";
  for (size_t i = 0; i < partition_.partitions.size(); ++i) {
    const auto& p = partition_.partitions[i];
    o << (i ? "," : "") << "{\"name\":\"" << Esc(p.fused_name) << "\",\"ep\":\"" << Esc(p.ep)
      << "\",\"nodes\":" << p.num_nodes << ",\"from_ep_context\":" << (p.from_ep_context ? "true" : "false");
    if (p.from_ep_context)
      o << ",\"source\":\"" << Esc(p.source) << "\",\"embed_mode\":" << p.embed_mode
        << ",\"main_context\":" << p.main_context << ",\"binary\":\"" << Esc(p.binary_path)
        << "\",\"bytes\":" << p.payload_bytes;
    if (p.load_reported)
      o << ",\"load\":{\"file\":\"" << Esc(p.load_file) << "\",\"bytes_mapped\":" << p.bytes_mapped
        << ",\"bytes_read\":" << p.bytes_read << ",\"ms\":" << p.load_ms << "}";
    o << "}";
  }
  size_t cpu_nodes = 0;
  for (const auto& n : partition_.graph->nodes) cpu_nodes += n.domain != kFusedDomain;
  o << "],\"constant_folding\":{\"nodes_folded\":" << folding_.nodes_folded << ",\"passes\":" << folding_.passes
    << "},\"cpu_fusions\":{\"batch_norms\":" << cpu_fusions_.batch_norms << ",\"affines\":" << cpu_fusions_.affines
    << ",\"activations\":" << cpu_fusions_.activations << ",\"linears\":" << cpu_fusions_.linears
    << ",\"matmul_biases\":" << cpu_fusions_.matmul_biases << ",\"output_scales\":" << cpu_fusions_.output_scales
    << ",\"output_biases\":" << cpu_fusions_.output_biases << ",\"gathered_rows\":" << cpu_fusions_.gathered_rows
    << ",\"float16_nodes\":" << cpu_fusions_.float16_nodes << ",\"float16_casts\":" << cpu_fusions_.float16_casts
    << ",\"qdq_convs\":" << cpu_fusions_.qdq_convs
    << ",\"qdq_matmuls\":" << cpu_fusions_.qdq_matmuls << ",\"qdq_lookups\":" << cpu_fusions_.qdq_lookups << ",\"layout_convs\":" << cpu_fusions_.layout_convs
    << ",\"layout_nodes\":" << cpu_fusions_.layout_nodes << ",\"layout_reorders\":" << cpu_fusions_.layout_reorders
    << "},\"cpu_nodes\":" << cpu_nodes
    << ",\"generated_context_model\":\"" << Esc(generated_model_) << "\"";
  o << ",\"free_dims\":[";
  const std::vector<FreeDim> free = free_dims();
  for (size_t i = 0; i < free.size(); ++i)
    o << (i ? "," : "") << "{\"input\":\"" << Esc(free[i].input) << "\",\"dim\":" << free[i].dim << ",\"symbol\":\""
      << Esc(free[i].symbol) << "\"}";
  o << "],\"left_on_cpu\":" << LeftOnCpuJson(partition_.left_on_cpu) << "}";
  return o.str();
}

std::vector<InferenceSession::FreeDim> InferenceSession::free_dims() const {
  std::vector<FreeDim> out;
  for (const ValueInfo& in : inputs_) {
    if (in.type.kind != ValueType::Kind::kTensor || !in.type.has_shape) continue;
    for (size_t d = 0; d < in.type.dims.size(); ++d)
      if (!in.type.dims[d].known()) out.push_back(FreeDim{in.name, d, in.type.dims[d].symbol});
  }
  return out;
}

std::vector<std::string> InferenceSession::ep_names() const {
  std::vector<std::string> v;
  for (const auto& ep : plugin_eps_) v.push_back(ep->name());
  v.push_back("CPUExecutionProvider");
  return v;
}

StatusOr<std::string> InferenceSession::EndProfiling() {
  RETURN_ERROR_IF(!profiler_, FAIL, "profiling is not enabled for this session (SessionOptions::EnableProfiling)");
  for (auto& ep : plugin_eps_) {
    std::vector<EpctxProfilingEventSink::Event> events;
    RETURN_IF_ERROR(ep->CollectProfile(&events));
    for (auto& e : events) {
      auto args = e.args;
      args["provider"] = ep->name();
      profiler_->Add(SessionProfiler::Event{e.name, e.category, e.start_us, e.duration_us, args});
    }
  }
  char stamp[64];
  std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d_%H-%M-%S", std::localtime(&now));
  std::string path = config_.profile_prefix + "_" + stamp + ".json";
  RETURN_IF_ERROR(profiler_->Write(path));
  return path;
}

Status InferenceSession::SetEpDynamicOptions(const std::map<std::string, std::string>& options) {
  RETURN_ERROR_IF(plugin_eps_.empty(), INVALID_ARGUMENT, "the session uses no plugin EP that takes dynamic options");
  for (auto& ep : plugin_eps_) RETURN_IF_ERROR(ep->SetDynamicOptions(options));
  return Status::OK();
}

Status InferenceSession::CheckInput(const ValueInfo& info, const IValue& v) const {
  const ValueType& t = info.type;
  if (t.kind == ValueType::Kind::kTensor) {
    RETURN_ERROR_IF(!v.is_tensor(), INVALID_ARGUMENT, "input '", info.name, "' expects a tensor");
    const Tensor& x = v.tensor();
    RETURN_ERROR_IF(t.elem_type != DataType::kUndefined && x.dtype() != t.elem_type, INVALID_ARGUMENT, "input '",
                    info.name, "' expects element type ", DataTypeName(t.elem_type), " but got ",
                    DataTypeName(x.dtype()));
    if (t.has_shape) {
      bool ok = x.rank() == t.dims.size();
      for (size_t i = 0; ok && i < t.dims.size(); ++i)
        if (t.dims[i].known() && t.dims[i].value != x.dim(i)) ok = false;
      RETURN_ERROR_IF(!ok, INVALID_ARGUMENT, "input '", info.name, "' expects shape ", t.ToString(), " but got ",
                      ShapeToString(x.shape()));
    }
  } else if (t.kind == ValueType::Kind::kSequence) {
    RETURN_ERROR_IF(!v.is_sequence(), INVALID_ARGUMENT, "input '", info.name, "' expects a sequence");
  }
  return Status::OK();
}

Status InferenceSession::Run(const std::vector<std::string>& input_names, const std::vector<IValue>& inputs,
                             const std::vector<std::string>& output_names, std::vector<IValue>* outputs) const {
  RETURN_ERROR_IF(input_names.size() != inputs.size(), INVALID_ARGUMENT, input_names.size(), " input names but ",
                  inputs.size(), " input values");
  const Graph& g = *partition_.graph;
  std::vector<IValue> feeds(g.inputs.size());
  std::vector<bool> given(g.inputs.size(), false);
  for (size_t i = 0; i < input_names.size(); ++i) {
    size_t k = 0;
    while (k < g.inputs.size() && g.inputs[k].name != input_names[i]) ++k;
    RETURN_ERROR_IF(k == g.inputs.size(), INVALID_ARGUMENT, "'", input_names[i], "' is not an input of the model");
    RETURN_ERROR_IF(given[k], INVALID_ARGUMENT, "input '", input_names[i], "' is given twice");
    RETURN_IF_ERROR(CheckInput(g.inputs[k], inputs[i]));
    feeds[k] = inputs[i];
    given[k] = true;
  }
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    bool optional = g.initializers.count(g.inputs[k].name) || g.inputs[k].type.kind == ValueType::Kind::kOptional;
    RETURN_ERROR_IF(!given[k] && !optional, INVALID_ARGUMENT, "input '", g.inputs[k].name, "' is missing");
  }
  std::vector<size_t> out_index;
  if (output_names.empty()) {
    for (size_t i = 0; i < g.outputs.size(); ++i) out_index.push_back(i);
  } else {
    for (const auto& n : output_names) {
      size_t k = 0;
      while (k < g.outputs.size() && g.outputs[k].name != n) ++k;
      RETURN_ERROR_IF(k == g.outputs.size(), INVALID_ARGUMENT, "'", n, "' is not an output of the model");
      out_index.push_back(k);
    }
  }
  omp_set_num_threads(num_threads_);  // this thread's OpenMP pool size, used by oneDNN and ParallelFor
  for (const auto& ep : plugin_eps_) RETURN_IF_ERROR(ep->OnRunStart());
  std::vector<IValue> all;
  Status run = plan_->Run(feeds, nullptr, &all);
  for (const auto& ep : plugin_eps_) {
    Status end = ep->OnRunEnd();
    if (run.ok() && !end.ok()) run = end;
  }
  RETURN_IF_ERROR(run);
  outputs->clear();
  for (size_t k : out_index) outputs->push_back(all[k]);
  return Status::OK();
}

}  // namespace epctx
