#include "dynamic.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace epctx {
namespace aotcpu {

CheckResult DynamicGraph::Create(Graph g, std::vector<std::string> inputs, std::vector<std::string> outputs,
                                 Options options, std::shared_ptr<const void> keep, std::unique_ptr<DynamicGraph>* out,
                                 const std::map<std::string, CompileOptions::EarlierWeight>& packed) {
  std::unique_ptr<DynamicGraph> d(new DynamicGraph());
  d->graph_ = std::move(g);
  if (!InferSymbolic(d->graph_, &d->sym_)) {
    for (size_t i = 0; i < d->sym_.why.size(); ++i)
      if (!d->sym_.why[i].empty())
        return CheckResult::Fail("node '" + d->graph_.nodes[i].name + "' (" + d->graph_.nodes[i].op +
                                 "): its shapes cannot be inferred for every input shape: " + d->sym_.why[i]);
    return CheckResult::Fail("the graph's shapes cannot be inferred for every input shape");
  }
  for (const std::string& name : inputs) {
    const int v = d->graph_.Find(name);
    if (v < 0) return CheckResult::Fail("fused input '" + name + "' is not in the graph");
    const SymValue& s = d->sym_.values[static_cast<size_t>(v)];
    if (!s.known) return CheckResult::Fail("input '" + name + "' has no known rank");
    for (size_t k = 0; k < s.dims.size(); ++k) {
      const DimOp op = d->sym_.table.node(s.dims[k]).op;
      if (op != DimOp::kSym && op != DimOp::kConst)
        return CheckResult::Fail("input '" + name + "' dim " + std::to_string(k) + " is an expression (" +
                                 d->sym_.table.Str(s.dims[k]) + "), not a symbol or a size");
    }
    d->input_values_.push_back(v);
  }
  if (options.cache_size == 0) options.cache_size = 1;
  d->inputs_ = std::move(inputs);
  d->outputs_ = std::move(outputs);
  d->options_ = std::move(options);
  d->keep_ = std::move(keep);
  d->weights_ = packed;
  *out = std::move(d);
  return CheckResult::Ok();
}

std::vector<DynamicGraph::Packed> DynamicGraph::PackedWeights() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Packed> out;
  for (const auto& [name, w] : weights_)
    out.push_back({name, w.layout, w.bytes ? static_cast<const void*>(w.bytes->data()) : w.data,
                   w.bytes ? w.bytes->size() : w.size});
  return out;
}

DynamicGraph::Stats DynamicGraph::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

CheckResult DynamicGraph::Get(const std::vector<std::vector<int64_t>>& input_dims, std::shared_ptr<Executor>* exec,
                              bool* invalid_argument) {
  *invalid_argument = true;
  if (input_dims.size() != input_values_.size())
    return CheckResult::Fail(std::to_string(input_dims.size()) + " inputs given, the graph has " +
                             std::to_string(input_values_.size()));
  // The binding: each symbol from the first input dim that names it; sizes fixed by the graph must match.
  std::map<std::string, int64_t> binding;
  std::string key;
  for (size_t i = 0; i < input_values_.size(); ++i) {
    const SymValue& s = sym_.values[static_cast<size_t>(input_values_[i])];
    const std::vector<int64_t>& dims = input_dims[i];
    if (dims.size() != s.dims.size())
      return CheckResult::Fail("input '" + inputs_[i] + "' has rank " + std::to_string(dims.size()) + ", the graph " +
                               std::to_string(s.dims.size()));
    for (size_t k = 0; k < dims.size(); ++k) {
      const DimNode& n = sym_.table.node(s.dims[k]);
      if (n.op == DimOp::kConst) {
        if (dims[k] != n.c)
          return CheckResult::Fail("input '" + inputs_[i] + "' has shape " + DimsText(dims) + ": dim " +
                                   std::to_string(k) + " must be " + std::to_string(n.c));
        continue;
      }
      const std::string& name = sym_.table.SymbolName(s.dims[k]);
      auto range = options_.ranges.find(name);
      if (range != options_.ranges.end() && (dims[k] < range->second.lo || dims[k] > range->second.hi))
        return CheckResult::Fail("input '" + inputs_[i] + "' dim " + std::to_string(k) + " ('" + name + "') is " +
                                 std::to_string(dims[k]) + ", outside its range " + std::to_string(range->second.lo) +
                                 ".." + std::to_string(range->second.hi));
      auto [it, added] = binding.emplace(name, dims[k]);
      if (!added && it->second != dims[k])
        return CheckResult::Fail("input '" + inputs_[i] + "' dim " + std::to_string(k) + " ('" + name + "') is " +
                                 std::to_string(dims[k]) + " but another input has '" + name + "' = " +
                                 std::to_string(it->second));
    }
  }
  for (const auto& [name, value] : binding) key += name + "=" + std::to_string(value) + ";";
  *invalid_argument = false;

  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = lru_.begin(); it != lru_.end(); ++it)
    if (it->first == key) {
      lru_.splice(lru_.begin(), lru_, it);
      ++stats_.hits;
      *exec = lru_.front().second;
      return CheckResult::Ok();
    }
  std::shared_ptr<Executor> made;
  CheckResult r = Bind(binding, &made);
  if (!r.ok) {
    // A shape the graph cannot take (a failed check: Reshape element count, broadcast, ...) is the caller's input.
    *invalid_argument = r.reason.rfind("shape:", 0) == 0;
    if (*invalid_argument) r.reason = r.reason.substr(6);
    return r;
  }
  lru_.emplace_front(key, made);
  while (lru_.size() > options_.cache_size) {
    lru_.pop_back();
    ++stats_.evictions;
  }
  *exec = std::move(made);
  return CheckResult::Ok();
}

CheckResult DynamicGraph::Bind(const std::map<std::string, int64_t>& binding, std::shared_ptr<Executor>* exec) {
  const auto t0 = std::chrono::steady_clock::now();
  Graph bound;
  std::string why;
  if (!aotcpu::Bind(graph_, sym_, binding, &bound, &why)) return CheckResult::Fail("shape:" + why);
  CompileOptions options = options_.compile;
  options.initializer_owner = keep_;
  options.earlier_weight = [this](const std::string& name) -> const CompileOptions::EarlierWeight* {
    auto it = weights_.find(name);
    return it == weights_.end() ? nullptr : &it->second;
  };
  const auto t1 = std::chrono::steady_clock::now();
  CompiledGraph cg;
  CheckResult r = CompileGraph(bound, inputs_, outputs_, options, &cg);
  if (!r.ok) return r;
  const auto t2 = std::chrono::steady_clock::now();
  const uint64_t made_before = stats_.weight_bytes_made;
  // Weight bytes: borrowed (an earlier shape's, or an initializer read in place) or made now; the ones made now
  // become shared so later shapes reuse them, and the executor keeps all of them alive.
  auto holders = std::make_shared<std::vector<std::shared_ptr<const void>>>();
  std::vector<WeightRef> refs(cg.weights.size());
  std::vector<dnnl::memory::desc> layouts(cg.weights.size());
  for (const Step& s : cg.program.steps)
    for (const Operand& op : s.ops)
      if (op.buf == Buf::kWeight && op.index < layouts.size() && layouts[op.index].data.ndims == 0) {
        dnnl::memory::desc d;
        if (OperandDesc(op, &d).ok) layouts[op.index] = d;
      }
  for (size_t i = 0; i < cg.weights.size(); ++i) {
    if (i < cg.borrowed.size() && cg.borrowed[i].data) {
      refs[i] = {cg.borrowed[i].data, cg.borrowed[i].size};
      holders->push_back(cg.borrowed[i].keep);
      continue;
    }
    auto bytes = std::make_shared<const std::string>(std::move(cg.weights[i].bytes));
    stats_.weight_bytes_made += bytes->size();
    refs[i] = {bytes->data(), bytes->size()};
    holders->push_back(bytes);
    if (layouts[i].data.ndims != 0 && !weights_.count(cg.weights[i].name))
      weights_.emplace(cg.weights[i].name, CompileOptions::EarlierWeight{layouts[i], bytes});
  }
  std::unique_ptr<Executor> e;
  // After the first shape the weights are resident (the same bytes): no helper thread to fault them in again.
  r = Executor::Create(std::move(cg.program), std::move(refs), options_.threads, &e, 0, /*warm_up=*/stats_.binds == 0);
  if (!r.ok) return r;
  *exec = std::shared_ptr<Executor>(e.release(), [holders](Executor* p) { delete p; });
  ++stats_.binds;
  const auto t3 = std::chrono::steady_clock::now();
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  stats_.last_bind_ms = ms(t0, t3);
  if (const char* profile = std::getenv("EPCTX_AOTCPU_PROFILE"); profile && *profile && *profile != '0') {
    std::string shape;
    for (const auto& [name, value] : binding) shape += (shape.empty() ? "" : ", ") + name + "=" + std::to_string(value);
    std::fprintf(stderr, "[aotcpu profile] new shape (%s): bind %.2f ms, lower %.2f ms, build %.2f ms; %.1f MB of "
                 "weights made (%zu shapes cached)\n", shape.c_str(), ms(t0, t1), ms(t1, t2), ms(t2, t3),
                 (stats_.weight_bytes_made - made_before) / 1e6, lru_.size() + 1);
  }
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
