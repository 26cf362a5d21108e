// An inference session: a loaded model, its execution plan on the CPU EP, and Run with input validation.
// Create is the expensive part; Run is thread-safe (each call has its own frame of values).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "epcontext/generation.h"
#include "model/model.h"
#include "plugin/plugin_ep.h"
#include "providers/cpu/passes/cpu_fusion.h"
#include "session/constant_folding.h"
#include "session/execution_plan.h"
#include "session/profiler.h"

namespace epctx {

// ONNX Runtime's OrtExecutionProviderDevicePolicy.
enum class DevicePolicy { kNone = -1, kDefault = 0, kPreferCpu, kPreferNpu, kPreferGpu, kMaxPerformance,
                          kMaxEfficiency, kMinOverallPower };

// One execution provider the session should use, in priority order.
struct EpRequest {
  std::string ep_name;                        // "CPUExecutionProvider" or a plugin EP's name
  std::vector<const EpctxEpDevice*> devices;  // plugin EPs: devices of one factory
  std::map<std::string, std::string> options; // provider options
};

// Chooses devices for automatic selection: given all EP devices (built-in CPU first), returns the chosen ones.
using EpSelectionDelegate = std::function<std::vector<const EpctxEpDevice*>(const std::vector<const EpctxEpDevice*>&)>;

// Everything SessionOptions carries into the runtime.
struct SessionConfig {
  std::map<std::string, std::string> entries;  // AddConfigEntry keys (ep.context_enable, ...)
  int intra_op_num_threads = 0;                // 0 = one per core
  int graph_optimization_level = 99;           // ORT's levels: 0 disable, 1 basic, 2 extended, 99 all
  std::map<std::string, int64_t> free_dimension_overrides;
  std::vector<EpRequest> eps;  // explicit EPs (AppendExecutionProvider[_V2])
  DevicePolicy policy = DevicePolicy::kNone;
  EpSelectionDelegate delegate;
  bool profiling = false;
  std::string profile_prefix = "epctx_profile";
  std::shared_ptr<EpRegistry> registry;  // the Env's EP libraries and devices (may be null: CPU EP only)
  // How a generating session (ep.context_enable=1) writes its context model; null = from the config entries
  // (GenerationOptions::FromConfig). The compile API (src/compile) sets it.
  std::shared_ptr<const GenerationOptions> generation;
  // Returns the entry or `def`.
  std::string Get(const std::string& key, const std::string& def = "") const {
    auto it = entries.find(key);
    return it == entries.end() ? def : it->second;
  }
};

// Time spent in each phase of Create, for `epctx perf` and cache observability.
struct SessionTimings {
  double load_ms = 0;       // parse, check, infer, convert
  double fold_ms = 0;       // constant folding (graph optimization level >= 1)
  double partition_ms = 0;  // EP creation, GetCapability, Compile
  double plan_ms = 0;       // kernels created, weights packed
  double generate_ms = 0;   // context model written
};

class InferenceSession {
 public:
  static StatusOr<std::unique_ptr<InferenceSession>> CreateFromFile(const std::string& path, const SessionConfig& config);
  static StatusOr<std::unique_ptr<InferenceSession>> CreateFromBytes(const void* data, size_t size,
                                                                     const SessionConfig& config);

  // Runs with inputs given by name (in any order; inputs with initializer defaults may be omitted) and returns
  // the requested outputs in the requested order (all outputs when output_names is empty).
  // INVALID_ARGUMENT naming the input for a missing/unknown input or a type/shape mismatch.
  Status Run(const std::vector<std::string>& input_names, const std::vector<IValue>& inputs,
             const std::vector<std::string>& output_names, std::vector<IValue>* outputs) const;

  // Graph inputs without an initializer default, in model order (overridable initializers may still be fed).
  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  const std::vector<ValueInfo>& outputs() const { return model_->graph->outputs; }
  const Model& model() const { return *model_; }
  const SessionConfig& config() const { return config_; }
  const SessionTimings& timings() const { return timings_; }
  // What constant folding did (nothing at graph optimization level 0 or for a compiled model).
  const ConstantFoldingStats& folding() const { return folding_; }
  int num_threads() const { return num_threads_; }
  // The EPs the session uses, in priority order (plugins, then CPUExecutionProvider).
  std::vector<std::string> ep_names() const;
  // Fused node name -> EP name for every partition an EP took.
  const std::map<std::string, std::string>& partition_eps() const { return partition_.node_ep; }
  // Every partition an EP took (which EP, how many nodes), in partitioning order.
  const std::vector<PartitionReport>& partitions() const { return partition_.partitions; }
  // Writes the profile (when profiling is enabled) and returns its path.
  StatusOr<std::string> EndProfiling();
  Status SetEpDynamicOptions(const std::map<std::string, std::string>& options);
  // Nodes no plugin EP took (they run on the CPU EP) with each EP's reason; empty when the session has no plugin EP.
  const std::vector<LeftOnCpuNode>& left_on_cpu() const { return partition_.left_on_cpu; }
  // The level-2 fusions applied to the CPU EP's nodes (providers/cpu/passes/cpu_fusion.h), and the graph the plan runs.
  const CpuFusionStats& cpu_fusions() const { return cpu_fusions_; }
  const Graph& planned_graph() const { return *partition_.graph; }
  // Dimensions of the graph inputs still free after the free-dimension overrides (input, dim index, dim_param or ""
  // for an unnamed unknown dim), in input order.
  struct FreeDim {
    std::string input;
    size_t dim = 0;
    std::string symbol;
  };
  std::vector<FreeDim> free_dims() const;
  // What session creation did, as one JSON object: phase times, EPs with GetCapability/Compile times, partitions
  // (which EP, which ops; for EPContext partitions the source, embed mode and binary with its size), the
  // compatibility verdicts, the context model written (if any), the free input dims ("free_dims") and the nodes
  // left on the CPU EP with the EPs' reasons ("left_on_cpu": [{"node","op","graph"?,"reasons":{EP: reason}}]).
  std::string ReportJson() const;
  ~InferenceSession();

 private:
  InferenceSession() = default;
  static StatusOr<std::unique_ptr<InferenceSession>> Finish(std::shared_ptr<Model> model, const SessionConfig& config,
                                                            double load_ms);
  Status CheckInput(const ValueInfo& info, const IValue& value) const;

  Status SetUpExecutionProviders();
  Status ValidateCompatibility(const EpRequest& req);
  // Writes the context model after partitioning and compiling (session config ep.context_enable=1).
  Status GenerateContextModel(bool already_compiled);
  void ReleaseGenerationLock();

  SessionConfig config_;
  std::shared_ptr<Model> model_;
  // Destruction order matters: plan (compute states) before EPs (compute infos, ReleaseEp) before libraries.
  std::vector<std::shared_ptr<EpLibrary>> libraries_;
  std::vector<std::unique_ptr<PluginEp>> plugin_eps_;
  PartitionResult partition_;
  std::shared_ptr<Graph> context_source_;  // when generating: the partitioned graph before the CPU EP's passes
  CpuFusionStats cpu_fusions_;  // level-2 fusions applied to the CPU EP's nodes
  std::unique_ptr<SessionProfiler> profiler_;
  std::map<std::string, int> compatibility_;
  std::string generated_model_;  // context model written by this session
  int generation_lock_ = -1;     // folder fd holding an flock while this session generates
  GenerationOptions generation_;  // config.generation or the legacy options from the config entries
  // The context model's path: a file output's validated path; for buffer/write-function outputs the path whose
  // folder external initializer files go to.
  std::string output_path_;
  std::unique_ptr<GraphPlan> plan_;
  std::vector<ValueInfo> inputs_;
  int num_threads_ = 1;
  SessionTimings timings_;
  ConstantFoldingStats folding_;
};

}  // namespace epctx
