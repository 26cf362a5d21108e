#include "providers/aotcpu/runtime/dynamic.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <unordered_map>

#include "providers/aotcpu/binary/dynamic_records.h"  // derived constants
#include "providers/aotcpu/runtime/generic_ops.h"

namespace epctx {
namespace aotcpu {

CheckResult DynamicGraph::Create(Graph g, std::vector<std::string> inputs, std::vector<std::string> outputs,
                                 Options options, std::shared_ptr<const void> keep, std::unique_ptr<DynamicGraph>* out,
                                 const std::map<std::string, CompileOptions::EarlierWeight>& packed,
                                 const DerivedConstants& derived) {
  std::unique_ptr<DynamicGraph> d(new DynamicGraph());
  d->graph_ = std::move(g);
  // Derived constants: each a float constant with a placeholder, its packed weight given; no other placeholder.
  for (const auto& [value, dc] : derived) {
    const std::string& weight = dc.weight;
    const int v = d->graph_.Find(value);
    if (v < 0 || !IsDerivedPlaceholder(d->graph_.v(v).data) || d->graph_.v(v).dtype != kF32)
      return CheckResult::Fail("derived constant '" + value + "' is not a float constant awaiting its bytes");
    if (!packed.count(weight))
      return CheckResult::Fail("derived constant '" + value + "': packed weight '" + weight + "' is not given");
    d->derived_.emplace_back(v, dc);
  }
  for (const Value& v : d->graph_.values)
    if (v.is_const() && v.bytes() > 0 && IsDerivedPlaceholder(v.data) && !derived.count(v.name))
      return CheckResult::Fail("constant '" + v.name + "' has no bytes and no packed weight to make them from");
  SymbolRanges ranges;
  for (const auto& [sym, r] : options.ranges) ranges[sym] = {r.lo, r.hi};
  if (!InferSymbolicRuntime(d->graph_, &d->sym_, ranges)) {
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
  if (d->options_.memo) d->memo_ = std::make_shared<LoweringMemo>();
  if (d->options_.generic) {
    CheckResult g = d->MakeGeneric(&d->generic_);
    if (!g.ok) {
      d->generic_.reset();
      d->why_not_generic_ = g.reason;
    }
  } else {
    d->why_not_generic_ = "turned off";
  }
  // Sizes known only while running (NonZero's count, a Range from data, a shape read from data) are bound by the
  // shape-generic form's steps; binding per shape cannot evaluate them.
  if (!d->generic_ && !d->sym_.runtime.empty())
    return CheckResult::Fail("its sizes depend on data ('" + d->sym_.runtime[0].name +
                             "'), which only the shape-generic form binds, and that form does not apply: " +
                             d->why_not_generic_);
  if (const char* profile = std::getenv("EPCTX_AOTCPU_PROFILE"); profile && *profile && *profile != '0')
    std::fprintf(stderr, "[aotcpu profile] dynamic graph '%s': %s\n", d->graph_.name.c_str(),
                 d->generic_ ? ("shape-generic: " + d->GenericSummary()).c_str()
                             : ("bound per shape: " + d->why_not_generic_).c_str());
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

std::shared_ptr<const LoweringMemo> DynamicGraph::Memo() const {
  std::lock_guard<std::mutex> lock(mu_);
  return memo_ ? std::make_shared<const LoweringMemo>(*memo_) : nullptr;
}

DynamicGraph::Stats DynamicGraph::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.derived_pending = derived_.size();
  if (memo_) s.memo_hits = memo_->hits, s.memo_misses = memo_->misses;
  return s;
}

CheckResult DynamicGraph::Binding(const std::vector<std::vector<int64_t>>& input_dims,
                                  std::map<std::string, int64_t>* out) {
  std::map<std::string, int64_t>& binding = *out;
  if (input_dims.size() != input_values_.size())
    return CheckResult::Fail(std::to_string(input_dims.size()) + " inputs given, the graph has " +
                             std::to_string(input_values_.size()));
  // The binding: each symbol from the first input dim that names it; sizes fixed by the graph must match.
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
  return CheckResult::Ok();
}

CheckResult DynamicGraph::CheckShape(const std::vector<std::vector<int64_t>>& input_dims) {
  std::map<std::string, int64_t> binding;
  CheckResult r = Binding(input_dims, &binding);
  if (!r.ok) return r;
  Graph bound;
  std::string why;
  if (!aotcpu::Bind(graph_, sym_, binding, &bound, &why)) return CheckResult::Fail(why);
  return CheckResult::Ok();
}

CheckResult DynamicGraph::Get(const std::vector<std::vector<int64_t>>& input_dims, std::shared_ptr<Executor>* exec,
                              bool* invalid_argument) {
  *invalid_argument = true;
  std::map<std::string, int64_t> binding;
  CheckResult r = Binding(input_dims, &binding);
  if (!r.ok) return r;
  std::string key;
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
  r = Bind(binding, &made);
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
  const auto t1 = std::chrono::steady_clock::now();
  const uint64_t made_before = stats_.weight_bytes_made;
  // After the first shape the weights are resident (the same bytes): no helper thread to fault them in again.
  CheckResult r = Build(bound, inputs_, outputs_, /*warm_up=*/stats_.binds == 0, exec);
  if (!r.ok) return r;
  ++stats_.binds;
  const auto t3 = std::chrono::steady_clock::now();
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  stats_.last_bind_ms = ms(t0, t3);
  if (const char* profile = std::getenv("EPCTX_AOTCPU_PROFILE"); profile && *profile && *profile != '0') {
    std::string shape;
    for (const auto& [name, value] : binding) shape += (shape.empty() ? "" : ", ") + name + "=" + std::to_string(value);
    std::fprintf(stderr, "[aotcpu profile] new shape (%s): bind %.2f ms, lower + build %.2f ms; %.1f MB of "
                 "weights made (%zu shapes cached)\n", shape.c_str(), ms(t0, t1), ms(t1, t3),
                 (stats_.weight_bytes_made - made_before) / 1e6, lru_.size() + 1);
  }
  return CheckResult::Ok();
}

bool DynamicGraph::ReadsDerived(const CompiledGraph& cg, std::string* which) const {
  for (size_t i = 0; i < cg.weights.size(); ++i) {
    *which = cg.weights[i].name;
    if (i < cg.borrowed.size() && cg.borrowed[i].data) {
      if (IsDerivedPlaceholder(cg.borrowed[i].data)) return true;  // read in place
      continue;                                                    // a stored weight, or an initializer read in place
    }
    // Made now (a weight packed in a layout not stored, a folding, a constant a pass made): the lowering names a weight
    // after the values it is made from ("<value>:packed", "<output>/<value>:fused", "<mean>:minus:<bias>"), so one
    // whose name holds a derived constant's name may come from its placeholder.
    const std::string& name = cg.weights[i].name;
    const int v = graph_.Find(name);
    if (v >= 0 && graph_.v(v).is_const() && !IsDerivedPlaceholder(graph_.v(v).data)) continue;  // a constant as it is
    for (const auto& [dv, dc] : derived_)
      if (name.find(graph_.v(dv).name) != std::string::npos) return true;
  }
  return false;
}

CheckResult DynamicGraph::MakeDerived(const std::string& why) {
  stats_.derived_why = why;
  auto bytes = std::make_shared<std::vector<std::shared_ptr<std::string>>>();
  for (const auto& [v, dc] : derived_) {
    const std::string& weight = dc.weight;
    Value& val = graph_.values[static_cast<size_t>(v)];
    auto w = weights_.find(weight);
    if (w == weights_.end()) return CheckResult::Fail("derived constant '" + val.name + "': packed weight '" + weight + "' is gone");
    auto b = std::make_shared<std::string>(val.bytes(), '\0');
    const void* data = w->second.bytes ? static_cast<const void*>(w->second.bytes->data()) : w->second.data;
    CheckResult r = DeriveConstant(w->second.layout, dc.strides, data, b->data(), b->size());
    if (!r.ok) return CheckResult::Fail("making constant '" + val.name + "' from packed weight '" + weight + "': " + r.reason);
    stats_.derived_bytes_made += b->size();
    bytes->push_back(b);
  }
  for (size_t i = 0; i < derived_.size(); ++i) graph_.values[static_cast<size_t>(derived_[i].first)].data = (*bytes)[i]->data();
  // The bytes live as long as the initializers: executors keep `keep_` (CompileOptions::initializer_owner).
  keep_ = std::make_shared<std::pair<std::shared_ptr<const void>, decltype(bytes)>>(keep_, bytes);
  if (const char* profile = std::getenv("EPCTX_AOTCPU_PROFILE"); profile && *profile && *profile != '0')
    std::fprintf(stderr, "[aotcpu profile] derived constants of '%s': %zu made from their packed weights (%.1f MB): "
                 "%s\n", graph_.name.c_str(), derived_.size(), stats_.derived_bytes_made / 1e6, why.c_str());
  derived_.clear();
  derived_made_ = true;
  return CheckResult::Ok();
}

bool DynamicGraph::WithDerivedBytes(const Graph& in, Graph* out) const {
  bool any = false;
  for (const Value& v : in.values)
    if (v.is_const() && v.bytes() > 0 && IsDerivedPlaceholder(v.data)) any = true;
  if (!any) return false;
  *out = in;
  for (Value& v : out->values)
    if (v.is_const() && v.bytes() > 0 && IsDerivedPlaceholder(v.data)) {
      const int g = graph_.Find(v.name);
      if (g >= 0) v.data = graph_.v(g).data;
    }
  return true;
}

CheckResult DynamicGraph::Build(const Graph& bound, const std::vector<std::string>& inputs,
                                const std::vector<std::string>& outputs, bool warm_up,
                                std::shared_ptr<Executor>* exec) {
  if (derived_made_) {  // a graph bound before the derived constants' bytes were made
    Graph fixed;
    if (WithDerivedBytes(bound, &fixed)) return Build(fixed, inputs, outputs, warm_up, exec);
  }
  // With derived constants pending, the memo as it was: a lowering against placeholders that is not taken leaves
  // no decision (a folding) made from them.
  std::unique_ptr<LoweringMemo> memo_before;
  if (!derived_.empty() && memo_) memo_before = std::make_unique<LoweringMemo>(*memo_);
  CompileOptions options = options_.compile;
  options.initializer_owner = keep_;
  options.memo = memo_;
  options.earlier_weight = [this](const std::string& name) -> const CompileOptions::EarlierWeight* {
    auto it = weights_.find(name);
    return it == weights_.end() ? nullptr : &it->second;
  };
  CompiledGraph cg;
  CheckResult r = CompileGraph(bound, inputs, outputs, options, &cg);
  std::string which;
  if (!derived_.empty() && (!r.ok || ReadsDerived(cg, &which))) {
    if (memo_before) *memo_ = *memo_before;
    CheckResult m = MakeDerived(r.ok ? "a shape needs weight '" + which + "', which is not stored" : r.reason);
    if (!m.ok) return m;
    Graph fixed;
    return Build(WithDerivedBytes(bound, &fixed) ? fixed : bound, inputs, outputs, warm_up, exec);
  }
  if (!r.ok) return r;
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
      weights_.emplace(cg.weights[i].name, CompileOptions::EarlierWeight{layouts[i], bytes, nullptr, 0, nullptr});
  }
  std::unique_ptr<Executor> e;
  r = Executor::Create(std::move(cg.program), std::move(refs), options_.threads, &e, 0, warm_up);
  if (!r.ok && options.memo) {
    // A step built from the first shape's choices (LoweringMemo) that has no kernel at this shape: lowered again
    // with a full search.
    std::shared_ptr<LoweringMemo> memo = std::move(memo_);
    r = Build(bound, inputs, outputs, warm_up, exec);
    memo_ = std::move(memo);
    return r;
  }
  if (!r.ok) return r;
  *exec = std::shared_ptr<Executor>(e.release(), [holders](Executor* p) { delete p; });
  return CheckResult::Ok();
}


// ---- the shape-generic form -----------------------------------------------------------------------------------------

namespace {

// `g` with every value whose dims evaluate under `binding` given those dims (and shape values their elements), for
// graphs with run-time symbols, which aotcpu::Bind refuses as unbound: values sized by data keep no shape, and the
// checks are left to each run.
bool BindKnown(const Graph& g, const SymbolicShapes& s, const std::map<std::string, int64_t>& binding, Graph* out,
               std::string* why) {
  std::vector<int64_t> val;
  std::vector<bool> ok;
  std::vector<std::string> err;
  s.table.EvalAll(binding, &val, &ok, &err);
  Graph r = g;
  for (size_t vi = 0; vi < g.values.size(); ++vi) {
    const SymValue& sv = s.values[vi];
    if (!sv.known) continue;
    bool all = true;
    std::vector<int64_t> dims;
    for (DimId id : sv.dims) {
      all = all && ok[static_cast<size_t>(id)] && val[static_cast<size_t>(id)] >= 0;
      if (all) dims.push_back(val[static_cast<size_t>(id)]);
    }
    if (!all) continue;
    Value& v = r.values[vi];
    if (v.is_const()) {
      if (v.dims != dims) return *why = "constant '" + v.name + "' bound to " + DimsText(dims), false;
      continue;
    }
    v.dims = dims;
    v.has_shape = true;
    v.dim_symbols.clear();
    if (!sv.has_elems) continue;
    std::vector<int64_t> e;
    for (DimId id : sv.elems) {
      all = all && ok[static_cast<size_t>(id)];
      if (all) e.push_back(val[static_cast<size_t>(id)]);
    }
    if (!all) continue;
    const bool i64 = v.dtype != kI32;
    auto bytes = std::make_shared<std::string>(e.size() * (i64 ? 8 : 4), '\0');
    for (size_t k = 0; k < e.size(); ++k) {
      if (i64) {
        std::memcpy(&(*bytes)[8 * k], &e[k], 8);
      } else {
        if (e[k] < INT32_MIN || e[k] > INT32_MAX) return *why = "value '" + v.name + "' does not fit int32", false;
        const int32_t x = static_cast<int32_t>(e[k]);
        std::memcpy(&(*bytes)[4 * k], &x, 4);
      }
    }
    v.dtype = i64 ? kI64 : kI32;
    v.folded = bytes;
    v.data = v.folded->data();
  }
  // Values read as sizes (run-time symbols from data): their data, when every element is bound, as constants, so that
  // a per-shape segment lowers a Pad or Reshape that reads them as it would a constant.
  std::map<int, std::vector<std::pair<size_t, int64_t>>> data;
  for (const RuntimeSymbol& rs : s.runtime) {
    if (rs.value < 0) continue;
    auto it = binding.find(rs.name);
    data[rs.value].push_back({rs.elem, it == binding.end() ? INT64_MIN : it->second});
  }
  for (const auto& [vi, elems] : data) {
    Value& v = r.values[static_cast<size_t>(vi)];
    if (v.is_const() || !v.has_shape || (v.dtype != kI64 && v.dtype != kI32)) continue;
    int64_t count = 1;
    for (int64_t x : v.dims) count *= x;
    if (count != static_cast<int64_t>(elems.size())) continue;
    std::vector<int64_t> e(static_cast<size_t>(count), INT64_MIN);
    for (const auto& [k, x] : elems)
      if (k < e.size()) e[k] = x;
    if (std::find(e.begin(), e.end(), INT64_MIN) != e.end()) continue;
    const bool i64 = v.dtype == kI64;
    auto bytes = std::make_shared<std::string>(e.size() * (i64 ? 8 : 4), '\0');
    for (size_t k = 0; k < e.size(); ++k) {
      if (i64) {
        std::memcpy(&(*bytes)[8 * k], &e[k], 8);
      } else {
        const int32_t x = static_cast<int32_t>(e[k]);
        std::memcpy(&(*bytes)[4 * k], &x, 4);
      }
    }
    v.folded = bytes;
    v.data = v.folded->data();
  }
  *out = std::move(r);
  return true;
}

// Nodes `seg` of `g` as a graph of their own, with the dims (and shape values) of `bound`: values read from outside
// are its inputs (constants stay constants; symbol-dependent shape values are inputs unless `fold_elems`, where the
// bound graph's folded elements are read as constants), values read after it or fused outputs are its outputs.
// `in_values`/`out_values`: their indices in `g`.
bool SegmentGraph(const Graph& g, const Graph& bound, const std::vector<size_t>& seg, const std::vector<char>& sym_elems,
                  bool fold_elems, const std::map<std::string, size_t>& fused_outputs, const std::string& name,
                  Graph* out, std::vector<std::string>* sin, std::vector<std::string>* sout,
                  std::vector<int>* in_values, std::vector<int>* out_values) {
  std::set<size_t> in_seg(seg.begin(), seg.end());
  Graph& sub = *out;
  sub = Graph();
  sub.name = name;
  sub.model_path = g.model_path;
  std::unordered_map<int, int> map;
  auto add = [&](int v) -> int {
    if (v < 0) return -1;
    if (auto it = map.find(v); it != map.end()) return it->second;
    Value val = bound.v(v);
    val.consumers.clear();
    val.producer = -1;
    val.is_graph_input = val.is_graph_output = false;
    const bool produced_here = g.v(v).producer >= 0 && in_seg.count(static_cast<size_t>(g.v(v).producer));
    const bool elems = sym_elems[static_cast<size_t>(v)];
    if (!produced_here && ((!val.is_const() && !(fold_elems && elems)) || (!fold_elems && elems))) {
      val.data = nullptr;
      val.folded.reset();
      val.is_initializer = false;
      val.is_graph_input = true;
      sub.inputs.push_back(static_cast<int>(sub.values.size()));
      sin->push_back(val.name);
      in_values->push_back(v);
    }
    sub.by_name[val.name] = static_cast<int>(sub.values.size());
    sub.values.push_back(std::move(val));
    map[v] = static_cast<int>(sub.values.size()) - 1;
    return map[v];
  };
  for (size_t i : seg) {
    Node n = bound.nodes[i];
    for (int& in : n.inputs) in = add(in);
    for (int& o : n.outputs) o = add(o);
    const int ni = static_cast<int>(sub.nodes.size());
    for (int in : n.inputs)
      if (in >= 0) sub.v(in).consumers.push_back(ni);
    for (int o : n.outputs)
      if (o >= 0) sub.v(o).producer = ni;
    sub.nodes.push_back(std::move(n));
  }
  for (size_t i : seg)
    for (int o : g.nodes[i].outputs) {
      if (o < 0) continue;
      bool outside = fused_outputs.count(g.v(o).name) != 0;
      for (int c : g.v(o).consumers) outside |= !in_seg.count(static_cast<size_t>(c));
      if (!outside) continue;
      const int so = map.at(o);
      sub.v(so).is_graph_output = true;
      sub.outputs.push_back(so);
      sout->push_back(g.v(o).name);
      out_values->push_back(o);
    }
  return !sout->empty();
}

struct AlignedBuffer {
  unsigned char* data = nullptr;
  size_t size = 0;
  ~AlignedBuffer() { std::free(data); }
  bool Reserve(size_t bytes) {
    if (bytes <= size) return true;
    std::free(data);
    size = (bytes + 63) / 64 * 64;
    data = static_cast<unsigned char*>(std::aligned_alloc(64, size));
    if (!data) size = 0;
    return data != nullptr;
  }
};

}  // namespace

struct DynamicGraph::Generic {
  enum class Where { kInput, kOutput, kTemp, kConst };
  struct Slot {
    int value = -1;
    uint32_t dtype = 0;
    size_t esize = 0;
    std::vector<DimId> dims;
    Where where = Where::kTemp;
    size_t index = 0;               // input/output index, or temp buffer index
    const void* data = nullptr;     // kConst
    std::vector<DimId> elems;       // computed from expressions at the start of every run (shape values)
  };
  struct Op {
    int node = -1;
    GenericKernel kernel = nullptr;
    GenericSizer sizer = nullptr;   // binds run-time symbols before the kernel runs (NonZero, Range from data)
    int step = 0;
    std::vector<int> in, out;       // slots (-1: absent)
  };
  struct Stage {
    std::shared_ptr<Executor> exec;  // null: no static segment in this stage
    std::vector<int> seg_in, seg_out;
    size_t seg_nodes = 0;
    // Per-shape segment (graphs with run-time symbols): built for each binding of every symbol, kept in `cache`.
    std::vector<size_t> bound_nodes;
    std::vector<int> bound_in, bound_out;
    std::list<std::pair<std::string, std::shared_ptr<BoundSegment>>> cache;  // most recent first; under mu_
    std::vector<Op> ops;
  };
  std::vector<Slot> slots;
  std::vector<Stage> stages;
  std::vector<char> placed_early;  // per slot: placed at the start of every run (its dims use no run-time symbol)
  std::vector<char> check_early;   // per graph check: evaluated at the start
  std::vector<int> elem_slots;
  std::vector<int> output_slots;          // fused output i
  std::vector<DimId> plan;                // DimTable ids evaluated per run
  std::vector<std::pair<DimId, int64_t>> verify;  // dims the static segments were built for (not provably constant)
  size_t temps = 0;
  // Run-time symbols (SymbolicShapes::runtime; issue 27 item 3). Steps are numbered in run order (each stage's
  // segment, then its ops, from 1). A slot or check whose dims use a run-time symbol is "late": placed or evaluated at
  // the first step where its symbols are bound (`need`), from its own plan.
  struct Late {
    int need = 0;
    int slot = -1;      // or:
    int check = -1;     // index into the graph's checks
    std::vector<DimId> plan;
  };
  std::vector<Late> late;                                   // by need
  std::vector<int> op_step;                                 // per stage, the step of its segment (0: none)
  std::vector<int> bound_step;                              // per stage, the step of its per-shape segment (0: none)
  std::vector<char> sym_elems;                              // per value: a shape value that depends on the symbols
  std::map<std::string, size_t> output_index;
  std::map<int, int> slot_of_value;
  std::vector<std::vector<std::pair<size_t, size_t>>> sized;  // step -> (symbol, sizer elem) bound before it runs
  struct DataSym {
    size_t symbol = 0;
    int slot = -1;
    size_t elem = 0;
  };
  std::vector<std::vector<DataSym>> read_after;             // step -> symbols read from data after it (0: inputs)
  int steps = 0;
  std::vector<char> runtime_symbol;                         // by symbol index
  struct RunState {
    std::vector<int64_t> vals;
    std::vector<AlignedBuffer> temps;
    std::vector<void*> ptr;
    std::vector<std::vector<int64_t>> dims;
    std::vector<GTensor> ins, outs;  // the running kernel's operands (their dims keep their capacity from run to run)
  };
  std::mutex pool_mu;
  std::vector<std::unique_ptr<RunState>> pool;
  // EPCTX_AOTCPU_PROFILE=1: wall time per op type of the generic nodes and of the segments, printed at the end.
  bool profile = false;
  std::mutex profile_mu;
  std::map<std::string, std::pair<double, size_t>> profile_us;
  size_t profile_runs = 0;
};

DynamicGraph::DynamicGraph() = default;
DynamicGraph::~DynamicGraph() {
  if (!generic_ || !generic_->profile || generic_->profile_runs == 0) return;
  std::fprintf(stderr, "[aotcpu profile] shape-generic graph '%s': %zu runs, mean us per run:\n", graph_.name.c_str(),
               generic_->profile_runs);
  for (const auto& [what, v] : generic_->profile_us)
    std::fprintf(stderr, "[aotcpu profile]   %-24s x%-4zu %9.1f us\n", what.c_str(), v.second / generic_->profile_runs,
                 v.first / static_cast<double>(generic_->profile_runs));
}

CheckResult DynamicGraph::MakeGeneric(std::unique_ptr<Generic>* out) {
  const Graph& g = graph_;
  const DimTable& t = sym_.table;
  auto all_const = [&](const std::vector<DimId>& ids) {
    for (DimId id : ids)
      if (!t.IsConst(id)) return false;
    return true;
  };
  // Dims that are the same at every probe size count as static: a decoder's attention rows, min(past + 1, S) -
  // min(past, S), are 1 for every past the model takes, which no rule can prove. Every run checks them (`verify`)
  // and binds the shape instead when one differs, so the assumption is never trusted blindly.
  std::vector<std::map<std::string, int64_t>> probes;
  for (int j = 0; j < 5; ++j) {
    static const int64_t base[5] = {64, 17, 100, 5, 33}, step[5] = {7, 3, 11, 2, 5};
    std::map<std::string, int64_t> b;
    for (size_t i = 0; i < sym_.symbols.size(); ++i) {
      int64_t v = base[j] + step[j] * static_cast<int64_t>(i);
      if (auto r = options_.ranges.find(sym_.symbols[i]); r != options_.ranges.end())
        v = std::clamp(v, r->second.lo, r->second.hi);
      b[sym_.symbols[i]] = v;
    }
    probes.push_back(std::move(b));
  }
  std::vector<std::vector<int64_t>> pv(probes.size());
  std::vector<std::vector<bool>> pok(probes.size());
  for (size_t j = 0; j < probes.size(); ++j) {
    std::vector<std::string> err;
    t.EvalAll(probes[j], &pv[j], &pok[j], &err);
  }
  auto stable = [&](DimId id, int64_t* value) {
    int n = 0;
    for (size_t j = 0; j < probes.size(); ++j) {
      if (!pok[j][static_cast<size_t>(id)]) continue;
      if (n++ && pv[j][static_cast<size_t>(id)] != *value) return false;
      *value = pv[j][static_cast<size_t>(id)];
    }
    return n >= 2;
  };
  auto all_stable = [&](const std::vector<DimId>& ids) {
    int64_t v = 0;
    for (DimId id : ids)
      if (!t.IsConst(id) && !stable(id, &v)) return false;
    return true;
  };
  const size_t nv = g.values.size();
  std::vector<char> sym_elems(nv, 0), static_dims(nv, 0), elems_value(nv, 0);
  for (size_t v = 0; v < nv; ++v) {
    const SymValue& sv = sym_.values[v];
    if (!sv.known) continue;
    static_dims[v] = all_stable(sv.dims);
    elems_value[v] = sv.has_elems && !g.values[v].is_const();
    sym_elems[v] = elems_value[v] && !all_const(sv.elems);
  }
  // Classify the nodes: shape-value nodes (every output a shape value), static (every dim constant, reading no
  // symbol-dependent shape value) and dynamic (run by a generic kernel).
  // With run-time symbols, a node whose dims change and that has no shape-generic kernel (or reads a weight) is bound
  // per shape instead: a per-shape segment built for the sizes of every symbol, cached (issue 27 item 3).
  enum Kind { kElems, kStatic, kDynamic, kBound };
  const bool per_shape_segments = !sym_.runtime.empty();
  std::vector<Kind> kind(g.nodes.size());
  std::vector<GenericKernel> kernels(g.nodes.size(), nullptr);
  size_t n_static = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    bool elems = !n.outputs.empty(), stat = true;
    for (int o : n.outputs) {
      if (o < 0) continue;
      if (!elems_value[static_cast<size_t>(o)]) elems = false;
      if (!static_dims[static_cast<size_t>(o)]) stat = false;
    }
    for (int in : n.inputs) {
      if (in < 0) continue;
      if (!static_dims[static_cast<size_t>(in)] || sym_elems[static_cast<size_t>(in)]) stat = false;
    }
    if (elems) { kind[i] = kElems; continue; }
    if (stat) { kind[i] = kStatic; ++n_static; continue; }
    kind[i] = kDynamic;
    std::string why;
    kernels[i] = FindGenericKernel(g, n, &why);
    bool weighted = false;
    for (int in : n.inputs) weighted |= in >= 0 && g.v(in).is_const() && g.v(in).bytes() > 4096;
    if (per_shape_segments && (!kernels[i] || (n.op == "MatMul" && weighted))) {
      kind[i] = kBound;
      continue;
    }
    if (!kernels[i]) return CheckResult::Fail("node '" + n.name + "' changes shape with the free dims and " + why);
    if (n.op == "MatMul")
      for (int in : n.inputs)
        if (in >= 0 && g.v(in).is_const() && g.v(in).bytes() > 4096)
          return CheckResult::Fail("node '" + n.name + "' (MatMul) changes shape with the free dims and reads a "
                                   "weight, which is packed per shape");
  }
  if (n_static == 0 && !per_shape_segments) return CheckResult::Fail("no node has the same dims for every shape");
  // Stages: a static node joins the segment after the latest dynamic node it reads; a dynamic node runs after the
  // latest segment it reads.
  std::vector<int> level(g.nodes.size(), 0);
  int last = 0;
  // With run-time symbols a shape value can depend on dims a dynamic node makes: it counts as made by a dynamic node.
  auto kind_of = [&](size_t i) { return kind[i] == kElems ? kDynamic : kind[i]; };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (kind[i] == kElems && !per_shape_segments) continue;
    int lv = 0;
    for (int in : g.nodes[i].inputs) {
      if (in < 0 || g.v(in).producer < 0) continue;
      const size_t p = static_cast<size_t>(g.v(in).producer);
      if (kind[p] == kElems && !per_shape_segments) continue;
      // A stage runs its static segment, then its per-shape segment, then its dynamic nodes.
      const Kind ki = kind_of(i), kp = kind_of(p);
      const bool later = (ki == kStatic && kp != kStatic) || (ki == kBound && kp == kDynamic);
      lv = std::max(lv, level[p] + (later ? 1 : 0));
    }
    level[i] = lv;
    last = std::max(last, lv);
  }
  // The graph bound at some size, for the static segments' dims and constant shape values (the same at any size).
  Graph bound;
  {
    std::string why = "no symbols";
    bool ok = false;
    for (const auto& binding : probes)
      if ((ok = sym_.runtime.empty() ? aotcpu::Bind(g, sym_, binding, &bound, &why)
                                     : BindKnown(g, sym_, binding, &bound, &why)))
        break;
    if (!ok) return CheckResult::Fail("the graph binds at none of the probe sizes: " + why);
  }
  auto gen = std::make_unique<Generic>();
  std::unordered_map<int, int> slot_of;
  std::map<std::string, size_t> input_index, output_index;
  for (size_t i = 0; i < inputs_.size(); ++i) input_index[inputs_[i]] = i;
  for (size_t i = 0; i < outputs_.size(); ++i) output_index[outputs_[i]] = i;
  auto slot = [&](int v) -> int {
    if (v < 0) return -1;
    if (auto it = slot_of.find(v); it != slot_of.end()) return it->second;
    const Value& val = g.v(v);
    Generic::Slot s;
    s.value = v;
    s.dtype = val.dtype;
    s.esize = GenericElementSize(val.dtype);
    s.dims = sym_.values[static_cast<size_t>(v)].dims;
    if (auto it = output_index.find(val.name); it != output_index.end()) {
      s.where = Generic::Where::kOutput;
      s.index = it->second;
    } else if (auto in = input_index.find(val.name); in != input_index.end()) {
      s.where = Generic::Where::kInput;
      s.index = in->second;
    } else if (val.is_const()) {
      s.where = Generic::Where::kConst;
      s.data = val.data;
    } else {
      s.where = Generic::Where::kTemp;
      s.index = gen->temps++;
    }
    if (elems_value[static_cast<size_t>(v)] && s.where != Generic::Where::kInput) {
      s.elems = sym_.values[static_cast<size_t>(v)].elems;
      gen->elem_slots.push_back(static_cast<int>(gen->slots.size()));
    }
    gen->slots.push_back(std::move(s));
    slot_of[v] = static_cast<int>(gen->slots.size()) - 1;
    return slot_of[v];
  };
  for (const std::string& name : outputs_) {
    const int v = g.Find(name);
    if (v < 0) return CheckResult::Fail("fused output '" + name + "' is not in the graph");
    if (!sym_.values[static_cast<size_t>(v)].known) return CheckResult::Fail("output '" + name + "' has no known shape");
    if (g.v(v).is_const() || input_index.count(name) || g.v(v).producer < 0)
      return CheckResult::Fail("output '" + name + "' is not computed by the graph");
    if (GenericElementSize(g.v(v).dtype) == 0) return CheckResult::Fail("output '" + name + "' has an element type the shape-generic form does not handle");
    gen->output_slots.push_back(slot(v));
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (kind[i] == kElems)
      for (int o : g.nodes[i].outputs) slot(o);
  gen->stages.resize(static_cast<size_t>(last) + 1);
  for (int k = 0; k <= last; ++k) {
    Generic::Stage& st = gen->stages[static_cast<size_t>(k)];
    std::vector<size_t> seg;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (kind[i] == kStatic && level[i] == k) seg.push_back(i);
    if (!seg.empty()) {
      Graph sub;
      std::vector<std::string> sin, sout;
      std::vector<int> vin, vout;
      if (!SegmentGraph(g, bound, seg, sym_elems, false, output_index, g.name + "/segment" + std::to_string(k), &sub,
                        &sin, &sout, &vin, &vout))
        return CheckResult::Fail("static segment " + std::to_string(k) + " has no outputs");
      for (int v : vin) st.seg_in.push_back(slot(v));
      for (int v : vout) st.seg_out.push_back(slot(v));
      st.seg_nodes = seg.size();
      CheckResult r = Build(sub, sin, sout, /*warm_up=*/k == 0, &st.exec);
      if (!r.ok) return CheckResult::Fail("static segment " + std::to_string(k) + ": " + r.reason);
    }
    // The per-shape segment: its nodes, and the slots it reads and makes (built per binding by RunGeneric).
    std::vector<size_t> bseg;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (kind[i] == kBound && level[i] == k) bseg.push_back(i);
    if (!bseg.empty()) {
      Graph sub;
      std::vector<std::string> sin, sout;
      std::vector<int> vin, vout;
      if (!SegmentGraph(g, bound, bseg, sym_elems, true, output_index, g.name + "/bound" + std::to_string(k), &sub,
                        &sin, &sout, &vin, &vout))
        return CheckResult::Fail("per-shape segment " + std::to_string(k) + " has no outputs");
      st.bound_nodes = bseg;
      for (int v : vin) st.bound_in.push_back(slot(v));
      for (int v : vout) st.bound_out.push_back(slot(v));
    }
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (kind[i] != kDynamic || level[i] != k) continue;
      Generic::Op op;
      op.node = static_cast<int>(i);
      op.kernel = kernels[i];
      for (int in : g.nodes[i].inputs) op.in.push_back(slot(in));
      for (int o : g.nodes[i].outputs) op.out.push_back(slot(o));
      st.ops.push_back(std::move(op));
    }
  }
  // A Transpose read only by a MatMul, as its second input, swapping the last two dims (a decoder's K^T): the MatMul
  // reads the untransposed bytes (MatMulTransposedB) and the transpose is not run.
  std::map<int, Generic::Op*> op_of;
  for (Generic::Stage& st : gen->stages)
    for (Generic::Op& op : st.ops) op_of[op.node] = &op;
  for (auto& [node, op] : op_of) {
    const Node& n = g.nodes[static_cast<size_t>(node)];
    if (n.op != "Transpose" || n.outputs.empty() || n.outputs[0] < 0) continue;
    const int v = n.outputs[0];
    const Value& val = g.v(v);
    if (output_index.count(val.name) || val.consumers.size() != 1) continue;
    auto c = op_of.find(val.consumers[0]);
    if (c == op_of.end()) continue;
    const Node& mm = g.nodes[static_cast<size_t>(c->first)];
    if (mm.op != "MatMul" || mm.inputs.size() != 2 || mm.inputs[1] != v || mm.inputs[0] == v) continue;
    const size_t rank = sym_.values[static_cast<size_t>(v)].dims.size();
    std::vector<int64_t> perm = n.Ints("perm");
    if (perm.empty())
      for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    bool swap = rank >= 2 && perm.size() == rank;
    for (size_t i = 0; swap && i < rank; ++i)
      swap = perm[i] == static_cast<int64_t>(i < rank - 2 ? i : (i == rank - 2 ? rank - 1 : rank - 2));
    if (!swap) continue;
    c->second->kernel = MatMulTransposedB;
    c->second->in[1] = op->in[0];
    op->kernel = nullptr;  // dropped below
  }
  for (Generic::Stage& st : gen->stages)
    st.ops.erase(std::remove_if(st.ops.begin(), st.ops.end(), [](const Generic::Op& o) { return !o.kernel; }),
                 st.ops.end());
  gen->sym_elems = sym_elems;
  gen->output_index = output_index;
  for (const auto& [v, sl] : slot_of) gen->slot_of_value[v] = sl;
  CheckResult rt = PlanRuntimeSymbols(gen.get());
  if (!rt.ok) return rt;
  // What every run evaluates at its start: each early slot's dims and shape-value elements, and the early checks.
  std::vector<DimId> ids;
  for (size_t i = 0; i < gen->slots.size(); ++i) {
    if (!gen->placed_early[i]) continue;
    const Generic::Slot& s = gen->slots[i];
    ids.insert(ids.end(), s.dims.begin(), s.dims.end());
    ids.insert(ids.end(), s.elems.begin(), s.elems.end());
  }
  for (size_t i = 0; i < sym_.checks.size(); ++i)
    if (gen->check_early[i]) ids.push_back(sym_.checks[i].a), ids.push_back(sym_.checks[i].b);
  std::set<DimId> verified;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (kind[i] != kStatic) continue;
    for (const std::vector<int>* vs : {&g.nodes[i].inputs, &g.nodes[i].outputs})
      for (int v : *vs) {
        if (v < 0) continue;
        for (DimId id : sym_.values[static_cast<size_t>(v)].dims) {
          int64_t value = 0;
          if (t.IsConst(id) || !verified.insert(id).second) continue;
          stable(id, &value);
          gen->verify.push_back({id, value});
          ids.push_back(id);
        }
      }
  }
  gen->plan = t.Plan(ids);
  if (const char* profile = std::getenv("EPCTX_AOTCPU_PROFILE"); profile && *profile && *profile != '0')
    gen->profile = true;
  *out = std::move(gen);
  return CheckResult::Ok();
}

// Where each run-time symbol is bound: before the step of the node whose sizer computes it, or after the step that
// produces the value whose data it is read from (0: a graph input, read at the start). Slots and checks that use one
// are placed or evaluated at the first step where all of theirs are bound.
CheckResult DynamicGraph::PlanRuntimeSymbols(Generic* gen) const {
  const Graph& g = graph_;
  const DimTable& t = sym_.table;
  const std::vector<std::string>& names = t.symbol_names();
  gen->runtime_symbol.assign(names.size(), 0);
  gen->placed_early.assign(gen->slots.size(), 1);
  gen->check_early.assign(sym_.checks.size(), 1);
  std::map<int, Generic::Op*> op_of;
  std::map<int, int> segment_step;  // node -> step of the segment that runs it
  int step = 0;
  gen->op_step.clear();
  gen->bound_step.clear();
  for (Generic::Stage& st : gen->stages) {
    gen->op_step.push_back(st.exec ? ++step : 0);
    gen->bound_step.push_back(st.bound_nodes.empty() ? 0 : ++step);
    for (Generic::Op& op : st.ops) {
      op.step = ++step;
      op_of[op.node] = &op;
    }
  }
  gen->steps = step;
  if (sym_.runtime.empty()) return CheckResult::Ok();
  for (size_t k = 0; k < gen->stages.size(); ++k) {
    for (int so : gen->stages[k].seg_out) {
      const int p = g.v(gen->slots[static_cast<size_t>(so)].value).producer;
      if (p >= 0) segment_step[p] = gen->op_step[k];
    }
    for (int so : gen->stages[k].bound_out) {
      const int p = g.v(gen->slots[static_cast<size_t>(so)].value).producer;
      if (p >= 0) segment_step[p] = gen->bound_step[k];
    }
  }
  gen->sized.assign(static_cast<size_t>(step) + 1, {});
  gen->read_after.assign(static_cast<size_t>(step) + 1, {});
  std::vector<int> avail(names.size(), 0);  // the step from which each symbol is bound
  std::map<int, int> slot_of_value;
  for (size_t i = 0; i < gen->slots.size(); ++i) slot_of_value[gen->slots[i].value] = static_cast<int>(i);
  for (const RuntimeSymbol& r : sym_.runtime) {
    const size_t k = static_cast<size_t>(std::find(names.begin(), names.end(), r.name) - names.begin());
    if (k >= names.size()) continue;  // never used in an expression
    gen->runtime_symbol[k] = 1;
    if (r.node >= 0) {
      auto op = op_of.find(r.node);
      const Node& n = g.nodes[static_cast<size_t>(r.node)];
      if (op == op_of.end() || !(op->second->sizer = FindGenericSizer(n)))
        return CheckResult::Fail("node '" + n.name + "' (" + n.op + ") sizes its output from data but is not a "
                                 "shape-generic step that can bind '" + r.name + "'");
      gen->sized[static_cast<size_t>(op->second->step)].push_back({k, r.elem});
      avail[k] = op->second->step;
      continue;
    }
    const Value& v = g.v(r.value);
    auto slot = slot_of_value.find(r.value);
    if (slot == slot_of_value.end())
      return CheckResult::Fail("value '" + v.name + "' is read as sizes ('" + r.name + "') but not kept by any step");
    int after = 0;
    if (v.producer >= 0) {
      if (auto op = op_of.find(v.producer); op != op_of.end()) after = op->second->step;
      else if (auto sg = segment_step.find(v.producer); sg != segment_step.end()) after = sg->second;
      else return CheckResult::Fail("value '" + v.name + "' is read as sizes ('" + r.name + "') but no step makes it");
    }
    gen->read_after[static_cast<size_t>(after)].push_back({k, slot->second, r.elem});
    avail[k] = after + 1;
  }
  // need[id]: the step from which expression id can be evaluated.
  std::vector<int> need(t.size(), 0);
  for (size_t id = 0; id < t.size(); ++id) {
    const DimNode& n = t.node(static_cast<DimId>(id));
    if (n.op == DimOp::kSym) need[id] = avail[static_cast<size_t>(n.c)];
    else if (n.op != DimOp::kConst) need[id] = std::max(need[static_cast<size_t>(n.a)], need[static_cast<size_t>(n.b)]);
  }
  auto need_of = [&](std::initializer_list<const std::vector<DimId>*> lists) {
    int m = 0;
    for (const auto* l : lists)
      for (DimId id : *l) m = std::max(m, need[static_cast<size_t>(id)]);
    return m;
  };
  for (size_t i = 0; i < gen->slots.size(); ++i) {
    const Generic::Slot& s = gen->slots[i];
    const int m = need_of({&s.dims, &s.elems});
    if (m == 0) continue;
    if (s.where == Generic::Where::kInput || s.where == Generic::Where::kConst)
      return CheckResult::Fail("value '" + g.v(s.value).name + "' is given but its dims depend on data");
    gen->placed_early[i] = 0;
    Generic::Late l;
    l.need = m;
    l.slot = static_cast<int>(i);
    std::vector<DimId> ids = s.dims;
    ids.insert(ids.end(), s.elems.begin(), s.elems.end());
    l.plan = t.Plan(ids);
    gen->late.push_back(std::move(l));
  }
  for (size_t i = 0; i < sym_.checks.size(); ++i) {
    const SymCheck& c = sym_.checks[i];
    const int m = std::max(need[static_cast<size_t>(c.a)], need[static_cast<size_t>(c.b)]);
    if (m == 0) continue;
    gen->check_early[i] = 0;
    Generic::Late l;
    l.need = m;
    l.check = static_cast<int>(i);
    l.plan = t.Plan({c.a, c.b});
    gen->late.push_back(std::move(l));
  }
  std::stable_sort(gen->late.begin(), gen->late.end(),
                   [](const Generic::Late& a, const Generic::Late& b) { return a.need < b.need; });
  // Every step's operands must be placed by the time it runs.
  std::vector<int> slot_need(gen->slots.size(), 0);
  for (const Generic::Late& l : gen->late)
    if (l.slot >= 0) slot_need[static_cast<size_t>(l.slot)] = l.need;
  for (size_t k = 0; k < gen->stages.size(); ++k) {
    for (const std::vector<int>* ss : {&gen->stages[k].seg_in, &gen->stages[k].seg_out})
      for (int so : *ss)
        if (slot_need[static_cast<size_t>(so)] > 0)
          return CheckResult::Fail("static segment " + std::to_string(k) + " reads or makes a value sized by data");
    for (const std::vector<int>* ss : {&gen->stages[k].bound_in, &gen->stages[k].bound_out})
      for (int so : *ss)
        if (slot_need[static_cast<size_t>(so)] > gen->bound_step[k])
          return CheckResult::Fail("per-shape segment " + std::to_string(k) + " runs before the sizes of value '" +
                                   g.v(gen->slots[static_cast<size_t>(so)].value).name + "' are known");
    for (const Generic::Op& op : gen->stages[k].ops)
      for (const std::vector<int>* ss : {&op.in, &op.out})
        for (int so : *ss)
          if (so >= 0 && slot_need[static_cast<size_t>(so)] > op.step)
            return CheckResult::Fail("node '" + g.nodes[static_cast<size_t>(op.node)].name + "' runs before the sizes "
                                     "of value '" + g.v(gen->slots[static_cast<size_t>(so)].value).name +
                                     "' are known");
  }
  return CheckResult::Ok();
}

// The per-shape segment of stage k for the symbols' current sizes: cached, or bound (every symbol, the run-time ones
// included), lowered and built now, reusing the packed weights and the lowering memo of earlier shapes.
CheckResult DynamicGraph::GetBoundSegment(size_t k, const std::vector<int64_t>& symbols,
                                          std::shared_ptr<BoundSegment>* out) {
  Generic& gen = *generic_;
  Generic::Stage& st = gen.stages[k];
  const std::vector<std::string>& names = sym_.table.symbol_names();
  std::string key;
  std::map<std::string, int64_t> binding;
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (symbols[i] < 0) continue;
    binding[names[i]] = symbols[i];
    key += names[i] + "=" + std::to_string(symbols[i]) + ";";
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = st.cache.begin(); it != st.cache.end(); ++it)
    if (it->first == key) {
      st.cache.splice(st.cache.begin(), st.cache, it);
      ++stats_.hits;
      *out = st.cache.front().second;
      return CheckResult::Ok();
    }
  const auto t0 = std::chrono::steady_clock::now();
  Graph bound, sub;
  std::string why;
  if (!BindKnown(graph_, sym_, binding, &bound, &why)) return CheckResult::Fail("shape:" + why);
  std::vector<std::string> sin, sout;
  std::vector<int> vin, vout;
  if (!SegmentGraph(graph_, bound, st.bound_nodes, gen.sym_elems, true, gen.output_index,
                    graph_.name + "/bound" + std::to_string(k), &sub, &sin, &sout, &vin, &vout))
    return CheckResult::Fail("per-shape segment " + std::to_string(k) + " has no outputs");
  auto b = std::make_shared<BoundSegment>();
  for (int v : vin) {
    auto it = gen.slot_of_value.find(v);
    if (it == gen.slot_of_value.end())
      return CheckResult::Fail("per-shape segment " + std::to_string(k) + " reads value '" + graph_.v(v).name +
                               "', which no step keeps");
    b->in.push_back(it->second);
  }
  for (int v : vout) b->out.push_back(gen.slot_of_value.at(v));
  CheckResult r = Build(sub, sin, sout, /*warm_up=*/stats_.binds == 0, &b->exec);
  if (!r.ok)
    return CheckResult::Fail("per-shape segment " + std::to_string(k) + " (" + std::to_string(st.bound_nodes.size()) +
                             " nodes, from '" + graph_.nodes[st.bound_nodes[0]].name + "'): " + r.reason);
  ++stats_.binds;
  stats_.last_bind_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (gen.profile)
    std::fprintf(stderr, "[aotcpu profile] per-shape segment %zu (%zu nodes) at %s: bind + lower + build %.2f ms\n", k,
                 st.bound_nodes.size(), key.c_str(), stats_.last_bind_ms);
  st.cache.emplace_front(key, b);
  while (st.cache.size() > options_.cache_size) {
    st.cache.pop_back();
    ++stats_.evictions;
  }
  *out = std::move(b);
  return CheckResult::Ok();
}

std::string DynamicGraph::GenericSummary() const {
  if (!generic_) return "";
  size_t segs = 0, seg_nodes = 0, ops = 0, bsegs = 0, bnodes = 0;
  for (const Generic::Stage& st : generic_->stages) {
    if (st.exec) ++segs, seg_nodes += st.seg_nodes;
    if (!st.bound_nodes.empty()) ++bsegs, bnodes += st.bound_nodes.size();
    ops += st.ops.size();
  }
  return std::to_string(segs) + " static segment(s) (" + std::to_string(seg_nodes) + " nodes), " +
         std::to_string(ops) + " shape-generic node(s)" +
         (bsegs ? ", " + std::to_string(bsegs) + " per-shape segment(s) (" + std::to_string(bnodes) + " nodes)" : "");
}

CheckResult DynamicGraph::Run(const std::vector<const void*>& inputs, const std::vector<std::vector<int64_t>>& input_dims,
                              const std::vector<uint32_t>& input_types, const OutputAlloc& alloc,
                              bool* invalid_argument) {
  *invalid_argument = true;
  if (input_types.size() != input_values_.size() || inputs.size() != input_values_.size())
    return CheckResult::Fail(std::to_string(inputs.size()) + " inputs given, the graph has " +
                             std::to_string(input_values_.size()));
  for (size_t i = 0; i < input_types.size(); ++i)
    if (input_types[i] != graph_.v(input_values_[i]).dtype)
      return CheckResult::Fail("input '" + inputs_[i] + "' has element type " + std::to_string(input_types[i]) +
                               ", the graph " + std::to_string(graph_.v(input_values_[i]).dtype));
  if (generic_) {
    std::map<std::string, int64_t> binding;
    CheckResult r = Binding(input_dims, &binding);
    if (!r.ok) return r;
    *invalid_argument = false;
    bool fallback = false;
    r = RunGeneric(binding, inputs, input_dims, alloc, &fallback);
    if (!r.ok && r.reason.rfind("shape:", 0) == 0) {
      *invalid_argument = true;
      r.reason = r.reason.substr(6);
    }
    if (!r.ok) return r;
    std::lock_guard<std::mutex> lock(mu_);
    if (!fallback) {
      ++stats_.generic_runs;
      return r;
    }
    ++stats_.generic_fallbacks;
  }
  std::shared_ptr<Executor> exec;
  CheckResult r = Get(input_dims, &exec, invalid_argument);
  if (!r.ok) return r;
  *invalid_argument = false;
  const Program& p = exec->program();
  if (p.outputs.size() != outputs_.size()) return CheckResult::Fail("the compiled graph's outputs do not match");
  std::vector<void*> outs(p.outputs.size());
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    r = alloc(i, p.outputs[i].dims, &outs[i]);
    if (!r.ok) return r;
  }
  return exec->Run(inputs, outs);
}

CheckResult DynamicGraph::RunGeneric(const std::map<std::string, int64_t>& binding,
                                     const std::vector<const void*>& inputs,
                                     const std::vector<std::vector<int64_t>>& input_dims, const OutputAlloc& alloc,
                                     bool* fallback) {
  Generic& gen = *generic_;
  const DimTable& t = sym_.table;
  std::unique_ptr<Generic::RunState> rs;
  {
    std::lock_guard<std::mutex> lock(gen.pool_mu);
    if (!gen.pool.empty()) {
      rs = std::move(gen.pool.back());
      gen.pool.pop_back();
    }
  }
  if (!rs) {
    rs = std::make_unique<Generic::RunState>();
    rs->vals.assign(t.size(), 0);
    rs->temps = std::vector<AlignedBuffer>(gen.temps);
    rs->ptr.assign(gen.slots.size(), nullptr);
    rs->dims.assign(gen.slots.size(), {});
  }
  struct Return {
    Generic& gen;
    std::unique_ptr<Generic::RunState>& rs;
    ~Return() {
      std::lock_guard<std::mutex> lock(gen.pool_mu);
      gen.pool.push_back(std::move(rs));
    }
  } give_back{gen, rs};
  // Evaluate the dims.
  std::vector<int64_t> symbols(t.symbol_names().size(), -1);
  for (size_t k = 0; k < symbols.size(); ++k)
    if (auto it = binding.find(t.symbol_names()[k]); it != binding.end()) symbols[k] = it->second;
  std::string why;
  if (!t.EvalPlan(gen.plan, symbols, rs->vals.data(), &why)) return CheckResult::Fail("shape:" + why);
  for (const auto& [id, value] : gen.verify)
    if (rs->vals[static_cast<size_t>(id)] != value) {
      *fallback = true;
      return CheckResult::Ok();
    }
  auto check = [&](const SymCheck& c) -> CheckResult {
    if (rs->vals[static_cast<size_t>(c.a)] == rs->vals[static_cast<size_t>(c.b)]) return CheckResult::Ok();
    return CheckResult::Fail("shape:" + (c.node >= 0 ? "node '" + graph_.nodes[static_cast<size_t>(c.node)].name + "'" :
                                                       std::string("graph input")) + ": " + c.what + " fails: " +
                             t.Str(c.a) + " = " + std::to_string(rs->vals[static_cast<size_t>(c.a)]) + " but " +
                             t.Str(c.b) + " = " + std::to_string(rs->vals[static_cast<size_t>(c.b)]));
  };
  for (size_t i = 0; i < sym_.checks.size(); ++i)
    if (gen.check_early[i]) {
      CheckResult r = check(sym_.checks[i]);
      if (!r.ok) return r;
    }
  // Place a slot (its dims evaluated in rs->vals) and write its shape-value elements.
  auto place = [&](size_t i) -> CheckResult {
    const Generic::Slot& s = gen.slots[i];
    std::vector<int64_t>& d = rs->dims[i];
    d.resize(s.dims.size());
    uint64_t bytes = s.esize;
    for (size_t k = 0; k < d.size(); ++k) {
      d[k] = rs->vals[static_cast<size_t>(s.dims[k])];
      if (d[k] < 0) return CheckResult::Fail("shape:value '" + graph_.v(s.value).name + "' dim " + std::to_string(k) +
                                             " (" + t.Str(s.dims[k]) + ") = " + std::to_string(d[k]) + " is negative");
      if (d[k] != 0 && bytes > (uint64_t{1} << 46) / static_cast<uint64_t>(d[k]))
        return CheckResult::Fail("shape:value '" + graph_.v(s.value).name + "' would take more than 64 TiB");
      bytes *= static_cast<uint64_t>(d[k]);
    }
    switch (s.where) {
      case Generic::Where::kInput:
        if (s.index >= inputs.size() || input_dims[s.index] != d)
          return CheckResult::Fail("input '" + inputs_[s.index] + "' does not have the dims the graph infers");
        rs->ptr[i] = const_cast<void*>(inputs[s.index]);
        break;
      case Generic::Where::kOutput: {
        void* p = nullptr;
        CheckResult r = alloc(s.index, d, &p);
        if (!r.ok) return r;
        if (!p && bytes) return CheckResult::Fail("no buffer for output '" + outputs_[s.index] + "'");
        rs->ptr[i] = p;
        break;
      }
      case Generic::Where::kConst:
        rs->ptr[i] = const_cast<void*>(s.data);
        break;
      case Generic::Where::kTemp:
        if (!rs->temps[s.index].Reserve(std::max<uint64_t>(bytes, 64)))
          return CheckResult::Fail("out of memory for value '" + graph_.v(s.value).name + "'");
        rs->ptr[i] = rs->temps[s.index].data;
        break;
    }
    if (s.where == Generic::Where::kInput) return CheckResult::Ok();
    for (size_t k = 0; k < s.elems.size(); ++k) {
      const int64_t v = rs->vals[static_cast<size_t>(s.elems[k])];
      if (s.dtype == kI64) {
        static_cast<int64_t*>(rs->ptr[i])[k] = v;
      } else {
        if (v < INT32_MIN || v > INT32_MAX)
          return CheckResult::Fail("shape:value '" + graph_.v(s.value).name + "' element " + std::to_string(k) +
                                   " = " + std::to_string(v) + " does not fit int32");
        static_cast<int32_t*>(rs->ptr[i])[k] = static_cast<int32_t>(v);
      }
    }
    return CheckResult::Ok();
  };
  for (size_t i = 0; i < gen.slots.size(); ++i)
    if (gen.placed_early[i]) {
      CheckResult r = place(i);
      if (!r.ok) return r;
    }
  // Run-time symbols: late slots and checks once their symbols are bound; sizes read from data after a step.
  size_t late_at = 0;
  auto advance = [&](int step) -> CheckResult {
    for (; late_at < gen.late.size() && gen.late[late_at].need <= step; ++late_at) {
      const Generic::Late& l = gen.late[late_at];
      if (!t.EvalPlan(l.plan, symbols, rs->vals.data(), &why)) return CheckResult::Fail("shape:" + why);
      CheckResult r = l.slot >= 0 ? place(static_cast<size_t>(l.slot)) : check(sym_.checks[static_cast<size_t>(l.check)]);
      if (!r.ok) return r;
    }
    return CheckResult::Ok();
  };
  auto read_data = [&](int step) -> CheckResult {
    if (gen.read_after.empty()) return CheckResult::Ok();
    for (const Generic::DataSym& d : gen.read_after[static_cast<size_t>(step)]) {
      const Generic::Slot& s = gen.slots[static_cast<size_t>(d.slot)];
      const std::vector<int64_t>& dims = rs->dims[static_cast<size_t>(d.slot)];
      int64_t count = 1;
      for (int64_t x : dims) count *= x;
      if (static_cast<int64_t>(d.elem) >= count)
        return CheckResult::Fail("shape:value '" + graph_.v(s.value).name + "' has " + std::to_string(count) +
                                 " elements, read as sizes");
      const void* p = rs->ptr[static_cast<size_t>(d.slot)];
      const int64_t v = s.dtype == kI64 ? static_cast<const int64_t*>(p)[d.elem]
                                        : static_cast<const int32_t*>(p)[d.elem];
      if (v < 0)
        return CheckResult::Fail("shape:value '" + graph_.v(s.value).name + "' element " + std::to_string(d.elem) +
                                 " = " + std::to_string(v) + " is read as a size ('" + t.symbol_names()[d.symbol] +
                                 "') and must not be negative");
      symbols[d.symbol] = v;
    }
    return CheckResult::Ok();
  };
  if (CheckResult r = read_data(0); !r.ok) return r;
  // EPCTX_AOTCPU_PROFILE: time per op type; nothing is built or read from the clock otherwise.
  std::map<std::string, std::pair<double, size_t>> prof;
  auto clock = gen.profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  auto lap = [&](const char* what) {
    if (!gen.profile) return;
    const auto t2 = std::chrono::steady_clock::now();
    auto& e = prof[what];
    e.first += std::chrono::duration<double, std::micro>(t2 - clock).count();
    ++e.second;
    clock = t2;
  };
  lap("(dims and buffers)");
  std::vector<const void*> seg_in;
  std::vector<void*> seg_out;
  std::vector<int64_t> sizes;
  auto tensors = [&](const std::vector<int>& slots, std::vector<GTensor>* out) {
    out->resize(slots.size());
    for (size_t k = 0; k < slots.size(); ++k) {
      GTensor& x = (*out)[k];
      const int s = slots[k];
      x.data = s < 0 ? nullptr : rs->ptr[static_cast<size_t>(s)];
      x.dtype = s < 0 ? 0 : gen.slots[static_cast<size_t>(s)].dtype;
      if (s < 0) x.dims.clear();
      else x.dims = rs->dims[static_cast<size_t>(s)];
    }
  };
  for (size_t k = 0; k < gen.stages.size(); ++k) {
    const Generic::Stage& st = gen.stages[k];
    if (st.exec) {
      const int step = gen.op_step[k];
      if (CheckResult r = advance(step); !r.ok) return r;
      seg_in.clear();
      seg_out.clear();
      for (int s : st.seg_in) seg_in.push_back(rs->ptr[static_cast<size_t>(s)]);
      for (int s : st.seg_out) seg_out.push_back(rs->ptr[static_cast<size_t>(s)]);
      CheckResult r = st.exec->Run(seg_in, seg_out);
      if (!r.ok) return r;
      if (r = read_data(step); !r.ok) return r;
      lap("(static segments)");
    }
    if (!st.bound_nodes.empty()) {
      const int step = gen.bound_step[k];
      if (CheckResult r = advance(step); !r.ok) return r;
      std::shared_ptr<BoundSegment> b;
      CheckResult r = GetBoundSegment(k, symbols, &b);
      if (!r.ok) return r;
      seg_in.clear();
      seg_out.clear();
      for (int s : b->in) seg_in.push_back(rs->ptr[static_cast<size_t>(s)]);
      for (int s : b->out) seg_out.push_back(rs->ptr[static_cast<size_t>(s)]);
      if (r = b->exec->Run(seg_in, seg_out); !r.ok) return r;
      if (r = read_data(step); !r.ok) return r;
      lap("(per-shape segments)");
    }
    for (const Generic::Op& op : st.ops) {
      const Node& n = graph_.nodes[static_cast<size_t>(op.node)];
      tensors(op.in, &rs->ins);
      if (op.sizer) {
        const std::string err = op.sizer(graph_, n, rs->ins, &sizes);
        if (!err.empty()) return CheckResult::Fail("node '" + n.name + "' (" + n.op + "): " + err);
        for (const auto& [symbol, elem] : gen.sized[static_cast<size_t>(op.step)]) {
          if (elem >= sizes.size()) return CheckResult::Fail("node '" + n.name + "': no size " + std::to_string(elem));
          symbols[symbol] = sizes[elem];
        }
      }
      if (CheckResult r = advance(op.step); !r.ok) return r;
      tensors(op.out, &rs->outs);
      const std::string err = op.kernel(graph_, n, rs->ins, rs->outs, options_.threads);
      if (!err.empty()) return CheckResult::Fail("node '" + n.name + "' (" + n.op + "): " + err);
      if (CheckResult r = read_data(op.step); !r.ok) return r;
      lap(n.op.c_str());
    }
  }
  if (CheckResult r = advance(gen.steps + 1); !r.ok) return r;
  if (gen.profile) {
    std::lock_guard<std::mutex> lock(gen.profile_mu);
    ++gen.profile_runs;
    for (const auto& [what, v] : prof) {
      gen.profile_us[what].first += v.first;
      gen.profile_us[what].second += v.second;
    }
  }
  return CheckResult::Ok();
}

}  // namespace aotcpu
}  // namespace epctx
