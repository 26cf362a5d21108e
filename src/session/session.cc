#include "session/session.h"

#include <omp.h>

#include <chrono>

#include "core/parallel.h"

namespace epctx {

namespace {
double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

ModelLoadOptions LoadOptionsFor(const SessionConfig& config) {
  ModelLoadOptions o;
  o.external_data_folder = config.Get("session.model_external_initializers_file_folder_path");
  o.free_dimension_overrides = config.free_dimension_overrides;
  return o;
}
}  // namespace

StatusOr<std::unique_ptr<InferenceSession>> InferenceSession::CreateFromFile(const std::string& path,
                                                                             const SessionConfig& config) {
  auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::shared_ptr<Model> model, LoadModelFromFile(path, LoadOptionsFor(config)));
  return Finish(std::move(model), config, MsSince(t0));
}

StatusOr<std::unique_ptr<InferenceSession>> InferenceSession::CreateFromBytes(const void* data, size_t size,
                                                                              const SessionConfig& config) {
  auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::shared_ptr<Model> model, LoadModelFromBytes(data, size, LoadOptionsFor(config)));
  return Finish(std::move(model), config, MsSince(t0));
}

StatusOr<std::unique_ptr<InferenceSession>> InferenceSession::Finish(std::shared_ptr<Model> model,
                                                                     const SessionConfig& config, double load_ms) {
  std::unique_ptr<InferenceSession> s(new InferenceSession());
  s->config_ = config;
  s->model_ = std::move(model);
  s->timings_.load_ms = load_ms;
  RETURN_ERROR_IF(config.intra_op_num_threads < 0, INVALID_ARGUMENT, "intra_op_num_threads must be >= 0, got ",
                  config.intra_op_num_threads);
  s->num_threads_ = config.intra_op_num_threads > 0 ? config.intra_op_num_threads : DefaultNumThreads();
  const Graph& g = *s->model_->graph;
  for (const auto& in : g.inputs)
    if (!g.initializers.count(in.name)) s->inputs_.push_back(in);  // overridable initializers are not listed
  auto t0 = std::chrono::steady_clock::now();
  PlanOptions po;
  po.num_threads = s->num_threads_;
  po.registry = &CpuKernelRegistry();
  ASSIGN_OR_RETURN(s->plan_, GraphPlan::Create(g, nullptr, po));
  s->timings_.plan_ms = MsSince(t0);
  return s;
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
  const Graph& g = *model_->graph;
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
  std::vector<IValue> all;
  RETURN_IF_ERROR(plan_->Run(feeds, nullptr, &all));
  outputs->clear();
  for (size_t k : out_index) outputs->push_back(all[k]);
  return Status::OK();
}

}  // namespace epctx
