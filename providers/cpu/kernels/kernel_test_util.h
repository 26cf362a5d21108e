// The harness the CPU kernel unit tests (providers/cpu/kernels/*_test.cc) share: tensors from a shape and values,
// attribute builders, and a one-node runner that builds the Node and its Graph, finds the kernel in
// CpuKernelRegistry(), creates it and runs Compute with a KernelContext (2 threads). Absent optional inputs are
// none IValues or undefined Tensors; the node is named "n0", its inputs "in<i>" and outputs "out<i>".
//   OpResult r = RunOp("Gather", 13, {MakeTensor<float>({3}, {1, 2, 3}), MakeTensor<int64_t>({1}, {0})});
//   OpRunner runner(op, opset, inputs, attrs, num_outputs, constant);  // create once, Run() many times
//   StatusOr<std::vector<IValue>> out = RunNode(MakeNode(op, opset, num_inputs, num_outputs, attrs, domain), inputs);
// Header-only, for tests: include it, then `using namespace ::epctx::testing;`.
#ifndef EPCTX_PROVIDERS_CPU_KERNELS_KERNEL_TEST_UTIL_H_
#define EPCTX_PROVIDERS_CPU_KERNELS_KERNEL_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "providers/cpu/kernel.h"

namespace epctx {
namespace testing {

// A tensor of `shape` holding `values` (their count must match the shape's size).
template <typename T>
Tensor MakeTensor(const Shape& shape, const std::vector<T>& values) {
  auto t = Tensor::Allocate(DataTypeFor<T>(), shape);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  Tensor tensor = std::move(t).value();
  EXPECT_EQ(tensor.NumElements(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) tensor.data<T>()[i] = values[i];
  return tensor;
}

// The elements of a tensor (or of a tensor IValue), in row-major order.
template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.NumElements());
}
template <typename T>
std::vector<T> Values(const IValue& v) {
  return Values<T>(v.tensor());
}

// Attribute builders: IntAttr("axis", 1), IntsAttr("pads", {1, 1}), FloatsAttr(...), StringAttr(...), ...
inline Attribute NamedAttr(const std::string& name, Attribute::Type type) {
  Attribute a;
  a.name = name;
  a.type = type;
  return a;
}
inline Attribute IntAttr(const std::string& name, int64_t v) {
  Attribute a = NamedAttr(name, Attribute::Type::kInt);
  a.i = v;
  return a;
}
inline Attribute IntsAttr(const std::string& name, std::vector<int64_t> v) {
  Attribute a = NamedAttr(name, Attribute::Type::kInts);
  a.ints = std::move(v);
  return a;
}
inline Attribute FloatAttr(const std::string& name, float v) {
  Attribute a = NamedAttr(name, Attribute::Type::kFloat);
  a.f = v;
  return a;
}
inline Attribute FloatsAttr(const std::string& name, std::vector<float> v) {
  Attribute a = NamedAttr(name, Attribute::Type::kFloats);
  a.floats = std::move(v);
  return a;
}
inline Attribute StringAttr(const std::string& name, const std::string& v) {
  Attribute a = NamedAttr(name, Attribute::Type::kString);
  a.s = v;
  return a;
}
inline Attribute StringsAttr(const std::string& name, std::vector<std::string> v) {
  Attribute a = NamedAttr(name, Attribute::Type::kStrings);
  a.strings = std::move(v);
  return a;
}

// Whether an input slot holds a value (a none IValue or an undefined Tensor marks an absent optional input).
inline bool IsPresent(const IValue& v) { return !v.is_none() && !(v.is_tensor() && !v.tensor().defined()); }
inline std::vector<bool> Present(const std::vector<IValue>& inputs) {
  std::vector<bool> p;
  for (const IValue& v : inputs) p.push_back(IsPresent(v));
  return p;
}

// A node with `num_inputs` inputs (slot i left empty where `present` says false) and `num_outputs` outputs.
inline Node MakeNode(const std::string& op, int opset, size_t num_inputs, size_t num_outputs,
                     const std::vector<Attribute>& attrs = {}, const std::string& domain = "",
                     const std::vector<bool>& present = {}) {
  Node n;
  n.name = "n0";
  n.op_type = op;
  n.domain = domain;
  n.opset = opset;
  for (size_t i = 0; i < num_inputs; ++i)
    n.inputs.push_back(present.empty() || present[i] ? "in" + std::to_string(i) : "");
  for (size_t i = 0; i < num_outputs; ++i) n.outputs.push_back("out" + std::to_string(i));
  for (const Attribute& a : attrs) n.attributes[a.name] = a;
  return n;
}

// The node's kernel from the CPU registry (NOT_IMPLEMENTED when there is none).
inline StatusOr<std::unique_ptr<OpKernel>> CreateKernel(const Node& node, const Graph& graph = Graph()) {
  KernelInfo info(node, graph, 2);
  const KernelFactory* factory = CpuKernelRegistry().Find(node.domain, node.op_type, node.opset);
  if (factory == nullptr) return MakeStatus(ErrorCode::NOT_IMPLEMENTED, "no kernel for ", node.op_type);
  return (*factory)(info);
}

// Runs Compute once on `inputs` (absent slots passed as null).
inline Status Compute(const OpKernel& kernel, const Node& node, const std::vector<IValue>& inputs,
                      std::vector<IValue>* outputs) {
  std::vector<const IValue*> ptrs;
  for (const IValue& v : inputs) ptrs.push_back(IsPresent(v) ? &v : nullptr);
  KernelContext ctx(node, ptrs, 2);
  Status st = kernel.Compute(ctx);
  *outputs = ctx.outputs();
  return st;
}

// Creates the node's kernel and runs it once: the outputs, or the first error.
inline StatusOr<std::vector<IValue>> RunNode(const Node& node, const std::vector<IValue>& inputs) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, CreateKernel(node));
  std::vector<IValue> outputs;
  RETURN_IF_ERROR(Compute(*kernel, node, inputs, &outputs));
  return outputs;
}

// One node, its graph (inputs listed in `constant` become initializers) and its kernel, created once.
class OpRunner {
 public:
  OpRunner(const std::string& op, int opset, const std::vector<IValue>& inputs,
           const std::vector<Attribute>& attrs = {}, size_t num_outputs = 1, const std::vector<size_t>& constant = {},
           const std::string& domain = "")
      : node_(MakeNode(op, opset, inputs.size(), num_outputs, attrs, domain, Present(inputs))) {
    graph_.opsets[domain] = opset;
    for (size_t i : constant) graph_.initializers[node_.inputs[i]] = inputs[i].tensor();
    auto kernel = CreateKernel(node_, graph_);
    create_status_ = kernel.status();
    if (kernel.ok()) kernel_ = std::move(kernel).value();
  }

  const Status& create_status() const { return create_status_; }
  const Node& node() const { return node_; }

  // Runs the kernel (safe to call concurrently); outputs land in *outputs. The creation error if it has none.
  Status Run(const std::vector<IValue>& inputs, std::vector<IValue>* outputs) const {
    if (!kernel_) return create_status_;
    return Compute(*kernel_, node_, inputs, outputs);
  }

 private:
  Node node_;
  Graph graph_;
  Status create_status_;
  std::unique_ptr<OpKernel> kernel_;
};

// What one RunOp gave: `status` is the creation error if creating the kernel failed, else Compute's status.
struct OpResult {
  Status create_status;
  Status status;
  std::vector<IValue> outputs;
  const Tensor& out(size_t i = 0) const { return outputs[i].tensor(); }
  template <typename T>
  std::vector<T> values(size_t i = 0) const {
    return Values<T>(out(i));
  }
};

// Builds the node, creates its kernel through the registry and runs it once on `inputs`.
inline OpResult RunOp(const std::string& op, int opset, const std::vector<IValue>& inputs,
                      const std::vector<Attribute>& attrs = {}, size_t num_outputs = 1,
                      const std::vector<size_t>& constant = {}, const std::string& domain = "") {
  OpRunner runner(op, opset, inputs, attrs, num_outputs, constant, domain);
  OpResult r;
  r.create_status = runner.create_status();
  if (!r.create_status.ok()) {
    r.status = r.create_status;
    return r;
  }
  r.status = runner.Run(inputs, &r.outputs);
  return r;
}

}  // namespace testing
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_CPU_KERNELS_KERNEL_TEST_UTIL_H_
