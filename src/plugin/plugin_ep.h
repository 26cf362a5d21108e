// A plugin EP inside one session: created from its factory, asked for capabilities, compiled, and run through
// fused-node kernels. Also the partitioner that applies the session's EPs to a graph in order.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"
#include "plugin/ep_library.h"
#include "providers/cpu/kernel.h"

namespace epctx {

// Domain of fused nodes in a partitioned graph (their kernels come from the EP that compiled them).
constexpr const char* kFusedDomain = "epctx.fused";

struct EpSelection {
  std::shared_ptr<EpLibrary> library;
  EpctxEpFactory* factory = nullptr;
  std::vector<const EpctxEpDevice*> devices;
  std::string ep_name;
};

// What partitioning did, for observability (Session::GetSessionReport).
struct PartitionReport {
  std::string fused_name, ep;
  size_t num_nodes = 0;
  std::vector<std::string> op_types;
  // When the partition is EPContext nodes loaded from a compiled model:
  bool from_ep_context = false;
  std::string source, binary_path;  // binary_path: embed_mode=0 file resolved beside the model
  int64_t embed_mode = 1, main_context = 1;
  uint64_t payload_bytes = 0;       // embedded payload, or the binary's size on disk
  // As the EP reported it (ReportEpContextLoad), when it did:
  bool load_reported = false;
  std::string load_file;
  uint64_t bytes_mapped = 0, bytes_read = 0;
  double load_ms = 0;
};
// A node no EP took (it runs on the CPU EP), with what each EP that was offered it said
// (EpGraphSupportInfo_SetNodeRejectionReason); `reasons` is empty when no EP said anything.
struct LeftOnCpuNode {
  std::string graph;             // "" for the main graph, else the subgraph's name
  std::string name, op_type, domain;
  std::vector<std::pair<std::string, std::string>> reasons;  // (EP name, reason), in EP order
};
struct EpTiming {
  std::string ep;
  double get_capability_ms = 0, compile_ms = 0;
};

class PluginEp {
 public:
  // Calls the factory's CreateEp with the session's config (provider options already copied in as
  // ep.<lowercase name>.<key>). `config` must outlive the PluginEp.
  // `profile_epoch_us` >= 0: the session profiles; the EP's profiler (if any) is created and started then.
  static StatusOr<std::unique_ptr<PluginEp>> Create(const EpSelection& selection,
                                                    const std::map<std::string, std::string>* config,
                                                    int64_t profile_epoch_us = -1);
  ~PluginEp();

  const std::string& name() const { return name_; }
  bool concurrent_runs() const { return concurrent_; }
  std::mutex& run_mutex() { return run_mu_; }
  EpctxEp* ep() { return ep_; }
  Status OnRunStart();
  Status OnRunEnd();
  Status SetDynamicOptions(const std::map<std::string, std::string>& options);
  Status OnSessionInitializationEnd();
  // Events of the EP's profiler (if it has one), collected at the end of profiling.
  Status CollectProfile(std::vector<EpctxProfilingEventSink::Event>* events);

  struct FusedGroup {
    const Graph* graph = nullptr;  // the graph the nodes belong to (the main graph or a nested subgraph)
    std::vector<size_t> nodes;     // indices into *graph
    std::string fused_name;
    std::vector<std::string> inputs, outputs;
  };
  // GetCapability on the nodes still available; returns groups (indices into graph.nodes).
  // `reasons` (may be null) receives the EP's rejection reasons by node index into graph.nodes.
  Status GetCapability(const Graph& graph, const std::vector<size_t>& available_topo, const std::string& model_path,
                       int64_t ir_version, std::vector<std::vector<size_t>>* groups,
                       std::map<size_t, std::string>* reasons = nullptr);
  // Compiles the groups (of any graphs: the partitioner passes all of an EP's groups, main graph and subgraphs, in
  // one call, so an EP writes one context binary per session) and returns a kernel factory per fused node name.
  // When `generating`, every group must come back with an EPContext node (made by CreateNode), returned in
  // `ep_context_nodes` by fused node name.
  Status Compile(const std::vector<FusedGroup>& groups, const std::string& model_path,
                 int64_t ir_version, bool generating, std::map<std::string, KernelFactory>* kernels,
                 std::map<std::string, Node>* ep_context_nodes,
                 std::map<std::string, PartitionReport>* load_reports);
  // The EP's compatibility string for a generated model ("" when it has none).
  std::string CompatibilityInfo(const Graph& graph, const std::string& model_path, int64_t ir_version);

 private:
  PluginEp() = default;
  EpSelection selection_;
  EpctxEp* ep_ = nullptr;
  std::string name_;
  bool concurrent_ = true;
  std::mutex run_mu_;
  EpctxSessionOptions session_options_;
  EpctxLogger logger_;
  std::vector<EpctxNodeComputeInfo*> compute_infos_;
  std::vector<std::unique_ptr<EpctxGraph>> compiled_views_;  // valid until ReleaseNodeComputeInfos
  EpctxEpProfiler* profiler_ = nullptr;
};

struct PartitionResult {
  std::shared_ptr<Graph> graph;  // the graph with fused nodes (or the original when nothing was claimed)
  std::map<std::string, KernelFactory> fused_kernels;
  std::map<std::string, std::string> node_ep;  // fused node name -> EP name
  std::map<std::string, Node> ep_context_nodes;  // fused node name -> EPContext node (generation only)
  std::vector<PartitionReport> partitions;
  std::map<std::string, PartitionReport> load_reports;  // fused node name -> load facts from the EP
  std::vector<EpTiming> ep_timings;
  std::vector<LeftOnCpuNode> left_on_cpu;  // nodes no EP took, main graph first (empty when no plugin EP ran)
};

// Applies `eps` in order to the main graph. Nodes nobody claims stay for the CPU EP.
// session.disable_model_compile=1 and a claim of non-EPContext nodes -> MODEL_REQUIRES_COMPILATION.
StatusOr<PartitionResult> PartitionGraph(const std::shared_ptr<Graph>& graph,
                                         const std::vector<PluginEp*>& eps, const std::string& model_path,
                                         int64_t ir_version, const std::map<std::string, std::string>& config);

}  // namespace epctx
