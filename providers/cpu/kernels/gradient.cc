// ai.onnx.preview.training.Gradient: reverse-mode differentiation of the part of the enclosing graph that
// computes `y` from `xs` (and the constant inputs `zs`). The forward part is re-evaluated inside the kernel in
// double precision, then gradients flow back with broadcasting undone by summation. Supports the elementwise ops
// listed in kSupported; any other op on the path is NOT_IMPLEMENTED naming it.
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "providers/cpu/kernel.h"
#include "providers/cpu/kernels/broadcast.h"

namespace epctx {

namespace {

const std::set<std::string> kSupported = {"Add", "Sub", "Mul", "Div", "Neg", "Identity", "Relu",
                                          "Tanh", "Sigmoid", "Exp", "Log", "Sqrt"};

struct Arr {
  Shape shape;
  std::vector<double> v;
};

StatusOr<Arr> ToArr(const Tensor& t) {
  Arr a{t.shape(), std::vector<double>(t.NumElements())};
  if (t.dtype() == DataType::kFloat) {
    for (int64_t i = 0; i < t.NumElements(); ++i) a.v[i] = t.data<float>()[i];
  } else if (t.dtype() == DataType::kDouble) {
    for (int64_t i = 0; i < t.NumElements(); ++i) a.v[i] = t.data<double>()[i];
  } else {
    return MakeStatus(ErrorCode::NOT_IMPLEMENTED, "Gradient supports float and double values, got ",
                      DataTypeName(t.dtype()));
  }
  return a;
}

// Elementwise f(a, b) with NumPy broadcasting.
StatusOr<Arr> Binary(const Arr& a, const Arr& b, const std::function<double(double, double)>& f) {
  ASSIGN_OR_RETURN(Shape out, BroadcastShapes(a.shape, b.shape));
  auto sa = BroadcastStrides(a.shape, out), sb = BroadcastStrides(b.shape, out);
  Arr r{out, std::vector<double>(ShapeSize(out))};
  std::vector<int64_t> idx(out.size(), 0);
  for (size_t i = 0; i < r.v.size(); ++i) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < out.size(); ++d) {
      oa += idx[d] * sa[d];
      ob += idx[d] * sb[d];
    }
    r.v[i] = f(a.v[oa], b.v[ob]);
    for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
  return r;
}

// Sums `g` (shaped like a broadcast output) back down to `shape`.
Arr ReduceTo(const Arr& g, const Shape& shape) {
  if (g.shape == shape) return g;
  auto s = BroadcastStrides(shape, g.shape);
  Arr r{shape, std::vector<double>(ShapeSize(shape), 0.0)};
  std::vector<int64_t> idx(g.shape.size(), 0);
  for (size_t i = 0; i < g.v.size(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < g.shape.size(); ++d) o += idx[d] * s[d];
    r.v[o] += g.v[i];
    for (int64_t d = static_cast<int64_t>(g.shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < g.shape[d]) break;
      idx[d] = 0;
    }
  }
  return r;
}

Arr Map(const Arr& a, const std::function<double(double)>& f) {
  Arr r = a;
  for (auto& x : r.v) x = f(x);
  return r;
}

class GradientKernel final : public OpKernel {
 public:
  static StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInfo& info) {
    std::unique_ptr<GradientKernel> k(new GradientKernel());
    k->xs_ = info.GetStrings("xs");
    k->zs_ = info.GetStrings("zs");
    k->y_ = info.GetString("y", "");
    if (k->xs_.empty() || k->y_.empty()) return info.Error(ErrorCode::INVALID_GRAPH, "needs attributes xs and y");
    if (info.num_inputs() != k->xs_.size() + k->zs_.size())
      return info.Error(ErrorCode::INVALID_GRAPH, "has ", info.num_inputs(), " inputs but xs and zs name ",
                        k->xs_.size() + k->zs_.size());
    const Graph& g = info.graph();
    std::map<std::string, const Node*> producer;
    for (const auto& n : g.nodes)
      for (const auto& o : n.outputs) producer[o] = &n;
    std::set<std::string> leaves(k->xs_.begin(), k->xs_.end());
    leaves.insert(k->zs_.begin(), k->zs_.end());
    std::set<const Node*> seen;
    std::function<Status(const std::string&)> visit = [&](const std::string& v) -> Status {
      if (leaves.count(v)) return Status::OK();
      auto it = g.initializers.find(v);
      if (it != g.initializers.end()) {
        k->constants_[v] = it->second;
        return Status::OK();
      }
      auto p = producer.find(v);
      if (p == producer.end())
        return info.Error(ErrorCode::INVALID_GRAPH, "value '", v, "' on the path to '", k->y_,
                          "' is neither in xs/zs nor computed by a node");
      const Node* n = p->second;
      if (seen.count(n)) return Status::OK();
      if (n->domain != "" || !kSupported.count(n->op_type))
        return info.Error(ErrorCode::NOT_IMPLEMENTED, "cannot differentiate ", n->Describe());
      seen.insert(n);
      for (const auto& in : n->inputs) RETURN_IF_ERROR(visit(in));
      k->tape_.push_back(n);  // post-order = a valid evaluation order
      return Status::OK();
    };
    RETURN_IF_ERROR(visit(k->y_));
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  Status Compute(KernelContext& ctx) const override {
    std::map<std::string, Arr> val;
    std::vector<DataType> x_types;
    for (size_t i = 0; i < xs_.size() + zs_.size(); ++i) {
      const Tensor* t = ctx.Input(i);
      if (!t) return ctx.Error(ErrorCode::INVALID_ARGUMENT, "input ", i, " is missing");
      ASSIGN_OR_RETURN(Arr a, ToArr(*t));
      val[i < xs_.size() ? xs_[i] : zs_[i - xs_.size()]] = std::move(a);
      if (i < xs_.size()) x_types.push_back(t->dtype());
    }
    for (const auto& [n, t] : constants_) {
      ASSIGN_OR_RETURN(Arr a, ToArr(t));
      val[n] = std::move(a);
    }
    for (const Node* n : tape_) {
      const Arr& a = val.at(n->inputs[0]);
      const std::string& op = n->op_type;
      Arr r;
      if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
        const Arr& b = val.at(n->inputs[1]);
        std::function<double(double, double)> f = op == "Add"   ? [](double x, double y) { return x + y; }
                                                  : op == "Sub" ? [](double x, double y) { return x - y; }
                                                  : op == "Mul" ? [](double x, double y) { return x * y; }
                                                                : [](double x, double y) { return x / y; };
        ASSIGN_OR_RETURN(r, Binary(a, b, f));
      } else if (op == "Neg") {
        r = Map(a, [](double x) { return -x; });
      } else if (op == "Identity") {
        r = a;
      } else if (op == "Relu") {
        r = Map(a, [](double x) { return x > 0 ? x : 0; });
      } else if (op == "Tanh") {
        r = Map(a, [](double x) { return std::tanh(x); });
      } else if (op == "Sigmoid") {
        r = Map(a, [](double x) { return 1 / (1 + std::exp(-x)); });
      } else if (op == "Exp") {
        r = Map(a, [](double x) { return std::exp(x); });
      } else if (op == "Log") {
        r = Map(a, [](double x) { return std::log(x); });
      } else {  // Sqrt
        r = Map(a, [](double x) { return std::sqrt(x); });
      }
      val[n->outputs[0]] = std::move(r);
    }
    std::map<std::string, Arr> grad;
    const Arr& yv = val.at(y_);
    grad[y_] = Map(yv, [](double) { return 1.0; });
    auto accumulate = [&](const std::string& name, Arr g) {
      g = ReduceTo(g, val.at(name).shape);
      auto it = grad.find(name);
      if (it == grad.end()) grad[name] = std::move(g);
      else
        for (size_t i = 0; i < g.v.size(); ++i) it->second.v[i] += g.v[i];
    };
    for (auto it = tape_.rbegin(); it != tape_.rend(); ++it) {
      const Node* n = *it;
      auto gi = grad.find(n->outputs[0]);
      if (gi == grad.end()) continue;
      const Arr g = gi->second;
      const Arr& a = val.at(n->inputs[0]);
      const Arr& out = val.at(n->outputs[0]);
      const std::string& op = n->op_type;
      if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
        const Arr& b = val.at(n->inputs[1]);
        Arr ga, gb;
        if (op == "Add") {
          ga = g;
          gb = g;
        } else if (op == "Sub") {
          ga = g;
          gb = Map(g, [](double x) { return -x; });
        } else if (op == "Mul") {
          ASSIGN_OR_RETURN(ga, Binary(g, b, [](double x, double y) { return x * y; }));
          ASSIGN_OR_RETURN(gb, Binary(g, a, [](double x, double y) { return x * y; }));
        } else {
          ASSIGN_OR_RETURN(ga, Binary(g, b, [](double x, double y) { return x / y; }));
          ASSIGN_OR_RETURN(Arr q, Binary(out, b, [](double x, double y) { return -x / y; }));
          ASSIGN_OR_RETURN(gb, Binary(g, q, [](double x, double y) { return x * y; }));
        }
        accumulate(n->inputs[0], std::move(ga));
        accumulate(n->inputs[1], std::move(gb));
        continue;
      }
      Arr ga = g;
      for (size_t i = 0; i < ga.v.size(); ++i) {
        double x = a.v[i], y = out.v[i];
        double d = op == "Neg" ? -1 : op == "Identity" ? 1 : op == "Relu" ? (x > 0 ? 1 : 0)
                 : op == "Tanh" ? 1 - y * y : op == "Sigmoid" ? y * (1 - y) : op == "Exp" ? y
                 : op == "Log" ? 1 / x : 0.5 / y;
        ga.v[i] *= d;
      }
      accumulate(n->inputs[0], std::move(ga));
    }
    for (size_t i = 0; i < xs_.size(); ++i) {
      const Arr& x = val.at(xs_[i]);
      auto gi = grad.find(xs_[i]);
      ASSIGN_OR_RETURN(Tensor* t, ctx.Output(i, x_types[i], x.shape));
      for (size_t e = 0; e < x.v.size(); ++e) {
        double g = gi == grad.end() ? 0.0 : gi->second.v[e];
        if (x_types[i] == DataType::kFloat) t->data<float>()[e] = static_cast<float>(g);
        else t->data<double>()[e] = g;
      }
    }
    return Status::OK();
  }

 private:
  std::vector<std::string> xs_, zs_;
  std::string y_;
  std::vector<const Node*> tape_;
  std::map<std::string, Tensor> constants_;
};

}  // namespace

void RegisterGradientKernels(KernelRegistry& r) {
  r.Register("ai.onnx.preview.training", "Gradient", GradientKernel::Create);
}

}  // namespace epctx
