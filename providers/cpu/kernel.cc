#include "providers/cpu/kernel.h"

namespace epctx {

int64_t KernelInfo::GetInt(const std::string& name, int64_t def) const {
  const Attribute* a = node_.attr(name);
  return a && a->type == Attribute::Type::kInt ? a->i : def;
}
float KernelInfo::GetFloat(const std::string& name, float def) const {
  const Attribute* a = node_.attr(name);
  return a && a->type == Attribute::Type::kFloat ? a->f : def;
}
std::string KernelInfo::GetString(const std::string& name, const std::string& def) const {
  const Attribute* a = node_.attr(name);
  return a && a->type == Attribute::Type::kString ? a->s : def;
}
std::vector<int64_t> KernelInfo::GetInts(const std::string& name, std::vector<int64_t> def) const {
  const Attribute* a = node_.attr(name);
  return a && a->type == Attribute::Type::kInts ? a->ints : def;
}
std::vector<float> KernelInfo::GetFloats(const std::string& name, std::vector<float> def) const {
  const Attribute* a = node_.attr(name);
  return a && a->type == Attribute::Type::kFloats ? a->floats : def;
}
std::vector<std::string> KernelInfo::GetStrings(const std::string& name, std::vector<std::string> def) const {
  const Attribute* a = node_.attr(name);
  return a && a->type == Attribute::Type::kStrings ? a->strings : def;
}
StatusOr<int64_t> KernelInfo::RequireInt(const std::string& name) const {
  const Attribute* a = node_.attr(name);
  if (!a || a->type != Attribute::Type::kInt)
    return Error(ErrorCode::INVALID_GRAPH, "required int attribute '", name, "' is missing");
  return a->i;
}
StatusOr<Tensor> KernelInfo::RequireTensor(const std::string& name) const {
  const Attribute* a = node_.attr(name);
  if (!a || a->type != Attribute::Type::kTensor)
    return Error(ErrorCode::INVALID_GRAPH, "required tensor attribute '", name, "' is missing");
  return a->t;
}
const Graph* KernelInfo::GetSubgraph(const std::string& name) const {
  const Attribute* a = node_.attr(name);
  return a && a->type == Attribute::Type::kGraph ? a->g.get() : nullptr;
}

const Tensor* KernelInfo::ConstantInput(size_t i) const {
  if (!HasInput(i)) return nullptr;
  const std::string& n = node_.inputs[i];
  // A subgraph's own initializers, then those of enclosing graphs (unless shadowed by a graph input).
  for (const Graph* g = &graph_; g; g = g->parent) {
    auto it = g->initializers.find(n);
    if (it != g->initializers.end()) {
      for (const auto& in : g->inputs)
        if (in.name == n) return nullptr;  // an initializer that is also an input may be overridden at run
      return &it->second;
    }
    for (const auto& in : g->inputs)
      if (in.name == n) return nullptr;
  }
  return nullptr;
}

const ValueType* KernelInfo::InputType(size_t i) const {
  if (!HasInput(i)) return nullptr;
  for (const Graph* g = &graph_; g; g = g->parent)
    if (const ValueType* t = g->FindType(node_.inputs[i])) return t;
  return nullptr;
}
const ValueType* KernelInfo::OutputType(size_t i) const {
  if (i >= node_.outputs.size() || node_.outputs[i].empty()) return nullptr;
  return graph_.FindType(node_.outputs[i]);
}

StatusOr<Tensor*> KernelContext::Output(size_t i, DataType dtype, const Shape& shape) {
  return AllocateOutput(i, dtype, shape, true);
}

StatusOr<Tensor*> KernelContext::OutputForOverwrite(size_t i, DataType dtype, const Shape& shape) {
  return AllocateOutput(i, dtype, shape, false);
}

StatusOr<Tensor*> KernelContext::AllocateOutput(size_t i, DataType dtype, const Shape& shape, bool zero) {
  if (i >= outputs_.size()) return Error(ErrorCode::FAIL, "output index ", i, " out of range");
  auto t = zero ? Tensor::Allocate(dtype, shape) : Tensor::AllocateForOverwrite(dtype, shape);
  if (!t.ok()) return t.status().WithContext(node_.Describe() + ": output " + std::to_string(i));
  outputs_[i] = IValue(std::move(t).value());
  return &outputs_[i].tensor();
}

void KernelRegistry::Register(const std::string& domain, const std::string& op_type, KernelFactory factory,
                              int min_opset, int max_opset) {
  entries_[{domain, op_type}].push_back(Entry{min_opset, max_opset, std::move(factory)});
}

const KernelFactory* KernelRegistry::Find(const std::string& domain, const std::string& op_type, int opset) const {
  auto it = entries_.find({domain == "ai.onnx" ? "" : domain, op_type});
  if (it == entries_.end()) return nullptr;
  for (const auto& e : it->second)
    if (opset >= e.min_opset && opset <= e.max_opset) return &e.factory;
  return nullptr;
}

std::vector<std::string> KernelRegistry::RegisteredOps() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : entries_) out.push_back(k.first.empty() ? k.second : k.first + "." + k.second);
  return out;
}

namespace {
class LambdaOpKernel final : public OpKernel {
 public:
  explicit LambdaOpKernel(std::function<Status(KernelContext&)> fn) : fn_(std::move(fn)) {}
  Status Compute(KernelContext& ctx) const override { return fn_(ctx); }

 private:
  std::function<Status(KernelContext&)> fn_;
};
}  // namespace

KernelFactory LambdaKernel(std::function<Status(KernelContext&)> fn) {
  return [fn](const KernelInfo&) -> StatusOr<std::unique_ptr<OpKernel>> {
    return std::unique_ptr<OpKernel>(new LambdaOpKernel(fn));
  };
}

const KernelRegistry& CpuKernelRegistry() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    RegisterVersionGates(*r);  // first: Find returns the first entry whose opset range matches
    RegisterElementwiseKernels(*r);
    RegisterReductionKernels(*r);
    RegisterNnKernels(*r);
    RegisterTensorKernels(*r);
    RegisterMiscKernels(*r);
    RegisterControlFlowKernels(*r);
    RegisterRecurrentKernels(*r);
    RegisterExtraKernels(*r);
    RegisterGradientKernels(*r);
    return r;
  }();
  return *registry;
}

}  // namespace epctx
