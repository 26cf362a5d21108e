// The CPU EP's kernel interface. A kernel is created once per node when a session is built (KernelInfo gives
// it the node's attributes and constant inputs) and computed on every run (KernelContext gives it inputs and
// allocates outputs). Kernels are stateless across runs, so one kernel may run on several threads at once.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "core/status.h"
#include "core/tensor.h"
#include "graph/graph.h"

namespace epctx {

// Runs a subgraph attribute of the current node (If/Loop/Scan/SequenceMap). Implemented by the session.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  // Feeds bind to the subgraph's inputs in order; fetches receive its outputs in order. Values of enclosing
  // scopes that the subgraph reads are resolved by the session.
  virtual Status Run(const std::vector<IValue>& feeds, std::vector<IValue>* fetches) = 0;
  virtual const Graph& graph() const = 0;
};

class KernelInfo {
 public:
  KernelInfo(const Node& node, const Graph& graph, int num_threads) : node_(node), graph_(graph), num_threads_(num_threads) {}

  const Node& node() const { return node_; }
  // The graph that holds the node (a subgraph's parent chain is reachable through Graph::parent).
  const Graph& graph() const { return graph_; }
  const std::string& op_type() const { return node_.op_type; }
  // The opset version of the node's domain imported by the model (e.g. 13 means opset-13 semantics).
  int opset() const { return node_.opset; }
  size_t num_inputs() const { return node_.inputs.size(); }
  size_t num_outputs() const { return node_.outputs.size(); }
  bool HasInput(size_t i) const { return i < node_.inputs.size() && !node_.inputs[i].empty(); }
  int num_threads() const { return num_threads_; }

  bool HasAttr(const std::string& name) const { return node_.attr(name) != nullptr; }
  int64_t GetInt(const std::string& name, int64_t def) const;
  float GetFloat(const std::string& name, float def) const;
  std::string GetString(const std::string& name, const std::string& def) const;
  std::vector<int64_t> GetInts(const std::string& name, std::vector<int64_t> def = {}) const;
  std::vector<float> GetFloats(const std::string& name, std::vector<float> def = {}) const;
  std::vector<std::string> GetStrings(const std::string& name, std::vector<std::string> def = {}) const;
  // Required attributes: INVALID_GRAPH naming the node and attribute when missing.
  StatusOr<int64_t> RequireInt(const std::string& name) const;
  StatusOr<Tensor> RequireTensor(const std::string& name) const;
  const Graph* GetSubgraph(const std::string& name) const;

  // The value of input i when it is an initializer (constant for the life of the session); nullptr otherwise.
  // Kernels use it to pre-pack weights at creation.
  const Tensor* ConstantInput(size_t i) const;
  // Declared or inferred type of input/output i (nullptr when unknown).
  const ValueType* InputType(size_t i) const;
  const ValueType* OutputType(size_t i) const;

  // Error helper: "<Op> node '<name>': <message>" with the given code.
  template <typename... Args>
  Status Error(ErrorCode code, const Args&... args) const {
    return MakeStatus(code, node_.Describe(), ": ", args...);
  }

 private:
  StatusOr<Tensor*> AllocateOutput(size_t i, DataType dtype, const Shape& shape, bool zero);
  const Node& node_;
  const Graph& graph_;
  int num_threads_;
};

class KernelContext {
 public:
  KernelContext(const Node& node, std::vector<const IValue*> inputs, int num_threads,
                std::function<SubgraphRunner*(const std::string&)> subgraphs = nullptr)
      : node_(node), inputs_(std::move(inputs)), outputs_(node.outputs.size()), num_threads_(num_threads),
        subgraphs_(std::move(subgraphs)) {}

  size_t num_inputs() const { return inputs_.size(); }
  // nullptr when the input is absent (optional and not given).
  const IValue* InputValue(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  // nullptr when absent or when the value is not a tensor (an empty optional).
  const Tensor* Input(size_t i) const {
    const IValue* v = InputValue(i);
    return v && v->is_tensor() ? &v->tensor() : nullptr;
  }

  size_t num_outputs() const { return outputs_.size(); }
  // Whether output i is consumed (a kernel may skip computing unused optional outputs).
  bool OutputRequested(size_t i) const { return i < node_.outputs.size() && !node_.outputs[i].empty(); }
  // Allocates output i (zero-filled). Errors for negative dims or sizes too large.
  StatusOr<Tensor*> Output(size_t i, DataType dtype, const Shape& shape);
  // Allocates output i uninitialised (strings still default-constructed): only for kernels that write every element.
  StatusOr<Tensor*> OutputForOverwrite(size_t i, DataType dtype, const Shape& shape);
  // Sets output i directly (may alias an input's memory, e.g. Reshape/Identity, or be a sequence/none). A value
  // for an output the node does not declare (a trailing optional output left out) is dropped.
  void SetOutput(size_t i, IValue v) {
    if (i < outputs_.size()) outputs_[i] = std::move(v);
  }
  std::vector<IValue>& outputs() { return outputs_; }

  int num_threads() const { return num_threads_; }
  const Node& node() const { return node_; }
  // The runner for a subgraph attribute (nullptr if the node has no such attribute).
  SubgraphRunner* Subgraph(const std::string& attr_name) const { return subgraphs_ ? subgraphs_(attr_name) : nullptr; }

  template <typename... Args>
  Status Error(ErrorCode code, const Args&... args) const {
    return MakeStatus(code, node_.Describe(), ": ", args...);
  }

 private:
  StatusOr<Tensor*> AllocateOutput(size_t i, DataType dtype, const Shape& shape, bool zero);
  const Node& node_;
  std::vector<const IValue*> inputs_;
  std::vector<IValue> outputs_;
  int num_threads_;
  std::function<SubgraphRunner*(const std::string&)> subgraphs_;
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual Status Compute(KernelContext& ctx) const = 0;
};

using KernelFactory = std::function<StatusOr<std::unique_ptr<OpKernel>>(const KernelInfo&)>;

// Maps (domain, op_type) to a factory. Opset-dependent behaviour is handled inside the kernel via opset().
class KernelRegistry {
 public:
  // min_opset/max_opset: the opset range of the domain this kernel handles (inclusive).
  void Register(const std::string& domain, const std::string& op_type, KernelFactory factory, int min_opset = 1,
                int max_opset = 1 << 30);
  // nullptr if no kernel handles this op at this opset.
  const KernelFactory* Find(const std::string& domain, const std::string& op_type, int opset) const;
  std::vector<std::string> RegisteredOps() const;

 private:
  struct Entry {
    int min_opset, max_opset;
    KernelFactory factory;
  };
  std::map<std::pair<std::string, std::string>, std::vector<Entry>> entries_;
};

// Factory for a kernel class K constructible as K(const KernelInfo&) that cannot fail at creation.
// Kernels whose creation can fail (bad attributes) register a lambda returning a Status instead.
template <typename K>
KernelFactory MakeFactory() {
  return [](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    return std::unique_ptr<OpKernel>(new K(info));
  };
}

// A kernel from a lambda: Status(KernelContext&, const Node&) — for ops with no per-node state.
KernelFactory LambdaKernel(std::function<Status(KernelContext&)> fn);

// The registration function of each family of kernels (providers/cpu/kernels/*.cc).
// Refusing factories for the ai.onnx op versions of opsets 18-26 the CPU EP does not implement (NOT_IMPLEMENTED
// naming the node and the op version); registered before the kernels so that they win (kernels/op_versions.cc).
void RegisterVersionGates(KernelRegistry& r);
// The versions of an ai.onnx op introduced in opsets 18..26, ascending (empty for an op without one).
std::vector<int> OnnxOpVersionsSince18(const std::string& op);
void RegisterElementwiseKernels(KernelRegistry& r);
void RegisterReductionKernels(KernelRegistry& r);
void RegisterNnKernels(KernelRegistry& r);
void RegisterTensorKernels(KernelRegistry& r);
void RegisterMiscKernels(KernelRegistry& r);
void RegisterControlFlowKernels(KernelRegistry& r);
void RegisterRecurrentKernels(KernelRegistry& r);
void RegisterExtraKernels(KernelRegistry& r);
void RegisterGradientKernels(KernelRegistry& r);

// All of the above.
const KernelRegistry& CpuKernelRegistry();

}  // namespace epctx
