// An execution plan for one graph (the main graph or a subgraph): value slots, kernels in topological order,
// which slots each step reads and writes, and when each intermediate can be released. Plans are immutable after
// creation; each Run owns a Frame of values, so one plan serves concurrent runs.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "graph/graph.h"
#include "providers/cpu/kernel.h"

namespace epctx {

class GraphPlan;

// Values of one execution of a plan. `parent` is the frame of the enclosing graph (for subgraphs).
struct Frame {
  std::vector<IValue> values;
  const Frame* parent = nullptr;
};

class SessionProfiler;

// The terminate flag (RunOptions::SetTerminate) of the run in progress on this thread, for as long as the scope
// lives: GraphPlan::Run checks it before every step (subgraph plans run on the same thread, so Loop/If bodies
// too) and returns FAIL "Exiting due to terminate flag being set to true." once it is set. Scopes nest.
class RunTerminateScope {
 public:
  explicit RunTerminateScope(const std::atomic<bool>* flag);
  ~RunTerminateScope();
  RunTerminateScope(const RunTerminateScope&) = delete;
  RunTerminateScope& operator=(const RunTerminateScope&) = delete;

 private:
  const std::atomic<bool>* previous_;
};

struct PlanOptions {
  int num_threads = 1;
  const KernelRegistry* registry = nullptr;
  // Kernels of fused nodes (domain "epctx.fused") by node name, from the EPs that compiled them.
  const std::map<std::string, KernelFactory>* fused_kernels = nullptr;
  // When set, every node run is recorded; `node_ep` names the EP of fused nodes (others: CPUExecutionProvider).
  SessionProfiler* profiler = nullptr;
  const std::map<std::string, std::string>* node_ep = nullptr;
};

class GraphPlan {
 public:
  // Builds kernels for every node. `parent` is the plan of the enclosing graph for subgraphs (nullptr for the
  // main graph); outer-scope names are looked up through it.
  static StatusOr<std::unique_ptr<GraphPlan>> Create(const Graph& graph, const GraphPlan* parent,
                                                     const PlanOptions& options);

  // Runs the plan. `feeds` bind to graph inputs in order (missing trailing optional inputs with initializer
  // defaults may be none). Outputs are the graph outputs in order.
  Status Run(const std::vector<IValue>& feeds, const Frame* parent_frame, std::vector<IValue>* outputs) const;

  const Graph& graph() const { return graph_; }
  // Slot of a value name in this plan or -1.
  int FindSlot(const std::string& name) const;

 private:
  struct OuterRef {
    int levels_up;  // 1 = parent frame
    int slot;
  };
  struct Step {
    const Node* node = nullptr;
    std::unique_ptr<OpKernel> kernel;
    std::vector<int> inputs;   // slot or -1 when absent; slots >= num_slots_ refer to outer_refs_
    std::vector<int> outputs;  // slot or -1
    std::vector<int> release;  // slots whose last reader is this step
    std::map<std::string, std::unique_ptr<GraphPlan>> subgraphs;
  };
  explicit GraphPlan(const Graph& graph) : graph_(graph) {}
  // Slot for a name: local, or a new outer reference (returns an index >= kOuterBase).
  StatusOr<int> ResolveName(const std::string& name, bool create_outer);
  const IValue* Lookup(const Frame& frame, int slot) const;

  static constexpr int kOuterBase = 1 << 28;
  const Graph& graph_;
  const GraphPlan* parent_ = nullptr;
  PlanOptions options_;
  std::unordered_map<std::string, int> slots_;
  int num_slots_ = 0;
  std::vector<OuterRef> outer_refs_;
  std::vector<std::pair<int, Tensor>> constants_;  // initializer slots and their values
  std::vector<int> input_slots_;
  std::vector<int> output_slots_;
  std::vector<Step> steps_;
};

}  // namespace epctx
