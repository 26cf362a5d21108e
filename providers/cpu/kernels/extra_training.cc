// ai.onnx.preview.training optimizers (opset 1): Adagrad, Adam, Momentum. Each node updates n tensors; its inputs
// are R, T and then k groups of n tensors (X..., G..., state...), its outputs the matching groups of new values.
#include <cmath>
#include <string>
#include <vector>

#include "providers/cpu/kernel.h"

namespace epctx {
namespace {

constexpr const char* kTrainingDomain = "ai.onnx.preview.training";

enum class Optimizer { kAdagrad, kAdam, kMomentum };

// Number of tensor groups in the inputs (after R and T) and outputs.
int InputGroups(Optimizer o) { return o == Optimizer::kAdam ? 4 : 3; }
int OutputGroups(Optimizer o) { return o == Optimizer::kAdam ? 3 : 2; }

struct OptimizerParams {
  Optimizer kind;
  float alpha = 0.f, beta = 0.f, epsilon = 0.f, norm_coefficient = 0.f, norm_coefficient_post = 0.f;
  float decay_factor = 0.f;
  bool nesterov = false;
};

Status ReadScalar(const KernelContext& ctx, size_t index, const char* name, double* out) {
  const Tensor* t = ctx.Input(index);
  if (!t) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input ", name, " is missing");
  if (t->NumElements() != 1)
    return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input ", name, " must be a scalar, got shape ",
                     ShapeToString(t->shape()));
  switch (t->dtype()) {
    case DataType::kFloat: *out = t->data<float>()[0]; return Status::OK();
    case DataType::kDouble: *out = t->data<double>()[0]; return Status::OK();
    case DataType::kInt64: *out = static_cast<double>(t->data<int64_t>()[0]); return Status::OK();
    default:
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input ", name, " has unsupported type ",
                       DataTypeName(t->dtype()));
  }
}

class OptimizerKernel final : public OpKernel {
 public:
  explicit OptimizerKernel(OptimizerParams p) : p_(p) {}

  Status Compute(KernelContext& ctx) const override {
    const size_t k = static_cast<size_t>(InputGroups(p_.kind));
    if (ctx.num_inputs() < 2 + k || (ctx.num_inputs() - 2) % k != 0)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "expects R, T and ", k, " groups of tensors, got ",
                       ctx.num_inputs(), " inputs");
    const size_t n = (ctx.num_inputs() - 2) / k;
    double r, t;
    RETURN_IF_ERROR(ReadScalar(ctx, 0, "R", &r));
    RETURN_IF_ERROR(ReadScalar(ctx, 1, "T", &t));
    if (ctx.Input(1)->dtype() != DataType::kInt64)
      return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input T must be int64, got ", DataTypeName(ctx.Input(1)->dtype()));
    for (size_t i = 0; i < n; ++i) {
      const Tensor* x = ctx.Input(2 + i);
      if (!x) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "optimized tensor ", i, " is missing");
      for (size_t g = 1; g < k; ++g) {
        const Tensor* other = ctx.Input(2 + g * n + i);
        if (!other) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input ", 2 + g * n + i, " is missing");
        if (other->dtype() != x->dtype() || other->shape() != x->shape())
          return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input ", 2 + g * n + i, " is ",
                           DataTypeName(other->dtype()), ShapeToString(other->shape()), " but tensor ", i, " is ",
                           DataTypeName(x->dtype()), ShapeToString(x->shape()));
      }
      Status st = DispatchType<float, double>(x->dtype(), "optimizer", [&](auto tag) {
        using T = decltype(tag);
        return Update<T>(ctx, n, i, r, static_cast<int64_t>(t));
      });
      if (!st.ok()) return st;
    }
    return Status::OK();
  }

 private:
  template <typename T>
  Status Update(KernelContext& ctx, size_t n, size_t i, double r, int64_t t) const {
    const Tensor& xt = *ctx.Input(2 + i);
    const int64_t count = xt.NumElements();
    const T* x = xt.data<T>();
    const T* g = ctx.Input(2 + n + i)->data<T>();
    const T* s1 = ctx.Input(2 + 2 * n + i)->data<T>();
    const T* s2 = p_.kind == Optimizer::kAdam ? ctx.Input(2 + 3 * n + i)->data<T>() : nullptr;
    const int out_groups = OutputGroups(p_.kind);
    // Unused outputs still get a scratch buffer so the loops stay branch-free.
    std::vector<T*> outs(static_cast<size_t>(out_groups));
    std::vector<std::vector<T>> scratch(static_cast<size_t>(out_groups));
    for (int o = 0; o < out_groups; ++o) {
      const size_t index = static_cast<size_t>(o) * n + i;
      if (index < ctx.num_outputs() && ctx.OutputRequested(index)) {
        ASSIGN_OR_RETURN(Tensor * out, ctx.Output(index, xt.dtype(), xt.shape()));
        outs[o] = out->data<T>();
      } else {
        scratch[o].resize(static_cast<size_t>(count));
        outs[o] = scratch[o].data();
      }
    }
    const T norm = static_cast<T>(p_.norm_coefficient);
    switch (p_.kind) {
      case Optimizer::kAdagrad: {
        const T rate = static_cast<T>(r / (1.0 + static_cast<double>(t) * p_.decay_factor));
        const T eps = static_cast<T>(p_.epsilon);
        T* x_new = outs[0];
        T* h_new = outs[1];
        for (int64_t j = 0; j < count; ++j) {
          const T gr = norm * x[j] + g[j];
          const T h = s1[j] + gr * gr;
          h_new[j] = h;
          x_new[j] = x[j] - rate * gr / (std::sqrt(h) + eps);
        }
        break;
      }
      case Optimizer::kAdam: {
        const double a = p_.alpha, b = p_.beta;
        const T rate = static_cast<T>(
            t > 0 ? r * std::sqrt(1.0 - std::pow(b, static_cast<double>(t))) / (1.0 - std::pow(a, static_cast<double>(t)))
                  : r);
        const T alpha = static_cast<T>(a), beta = static_cast<T>(b), eps = static_cast<T>(p_.epsilon);
        const T post = static_cast<T>(1.0 - p_.norm_coefficient_post);
        T* x_new = outs[0];
        T* v_new = outs[1];
        T* h_new = outs[2];
        for (int64_t j = 0; j < count; ++j) {
          const T gr = norm * x[j] + g[j];
          const T v = alpha * s1[j] + (T(1) - alpha) * gr;
          const T h = beta * s2[j] + (T(1) - beta) * gr * gr;
          v_new[j] = v;
          h_new[j] = h;
          x_new[j] = post * (x[j] - rate * v / (std::sqrt(h) + eps));
        }
        break;
      }
      case Optimizer::kMomentum: {
        const T rate = static_cast<T>(r);
        const T alpha = static_cast<T>(p_.alpha);
        const T beta = static_cast<T>(t > 0 ? p_.beta : 1.0f);
        T* x_new = outs[0];
        T* v_new = outs[1];
        for (int64_t j = 0; j < count; ++j) {
          const T gr = norm * x[j] + g[j];
          const T v = alpha * s1[j] + beta * gr;
          v_new[j] = v;
          x_new[j] = p_.nesterov ? x[j] - rate * (gr + alpha * v) : x[j] - rate * v;
        }
        break;
      }
    }
    return Status::OK();
  }

  OptimizerParams p_;
};

StatusOr<float> RequireFloat(const KernelInfo& info, const char* name) {
  const Attribute* a = info.node().attr(name);
  if (!a || a->type != Attribute::Type::kFloat)
    return info.Error(ErrorCode::INVALID_GRAPH, "required float attribute '", name, "' is missing");
  return a->f;
}

KernelFactory OptimizerFactory(Optimizer kind) {
  return [kind](const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    OptimizerParams p;
    p.kind = kind;
    switch (kind) {
      case Optimizer::kAdagrad:
        p.decay_factor = info.GetFloat("decay_factor", 0.f);
        p.epsilon = info.GetFloat("epsilon", 1e-6f);
        p.norm_coefficient = info.GetFloat("norm_coefficient", 0.f);
        break;
      case Optimizer::kAdam:
        p.alpha = info.GetFloat("alpha", 0.9f);
        p.beta = info.GetFloat("beta", 0.999f);
        p.epsilon = info.GetFloat("epsilon", 1e-6f);
        p.norm_coefficient = info.GetFloat("norm_coefficient", 0.f);
        p.norm_coefficient_post = info.GetFloat("norm_coefficient_post", 0.f);
        break;
      case Optimizer::kMomentum: {
        ASSIGN_OR_RETURN(p.alpha, RequireFloat(info, "alpha"));
        ASSIGN_OR_RETURN(p.beta, RequireFloat(info, "beta"));
        ASSIGN_OR_RETURN(p.norm_coefficient, RequireFloat(info, "norm_coefficient"));
        const std::string mode = info.GetString("mode", "");
        if (mode == "nesterov") p.nesterov = true;
        else if (mode != "standard")
          return info.Error(ErrorCode::INVALID_GRAPH, "mode must be 'standard' or 'nesterov', got '", mode, "'");
        break;
      }
    }
    const size_t k = static_cast<size_t>(InputGroups(kind));
    if (info.num_inputs() < 2 + k || (info.num_inputs() - 2) % k != 0)
      return info.Error(ErrorCode::INVALID_GRAPH, "expects R, T and ", k, " groups of tensors, got ",
                        info.num_inputs(), " inputs");
    const size_t n = (info.num_inputs() - 2) / k;
    if (info.num_outputs() > n * static_cast<size_t>(OutputGroups(kind)))
      return info.Error(ErrorCode::INVALID_GRAPH, "has ", info.num_outputs(), " outputs, at most ",
                        n * OutputGroups(kind), " for ", n, " optimized tensors");
    return std::unique_ptr<OpKernel>(new OptimizerKernel(p));
  };
}

}  // namespace

void RegisterExtraTrainingKernels(KernelRegistry& r) {
  r.Register(kTrainingDomain, "Adagrad", OptimizerFactory(Optimizer::kAdagrad));
  r.Register(kTrainingDomain, "Adam", OptimizerFactory(Optimizer::kAdam));
  r.Register(kTrainingDomain, "Momentum", OptimizerFactory(Optimizer::kMomentum));
}

}  // namespace epctx
