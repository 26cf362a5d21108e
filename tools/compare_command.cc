// `epctx compare MODEL -e EP`: runs MODEL on the EP and on the CPU EP with the same inputs and, when an output
// differs beyond tolerance, names the first node (topological order) whose output differs: the bisection users do
// by hand, as a tool. Three steps, each only when the previous one needs it:
//  1. the model as it is, both EPs: do the graph outputs differ? (no: exit 0)
//  2. every intermediate value made a graph output, both EPs: the first node with a differing output. Exposing a
//     value can stop the EP from fusing across it, which can also hide the bug;
//  3. so when step 2 finds nothing, the graph is cut at one value at a time (that value the only output, the nodes
//     it does not need removed), EP only, against the CPU EP's values of step 2: a binary search over the values in
//     topological order, then a walk upstream until a value differs while every input of its node matches.
// Exit 0: no difference; 1: a difference (the node named when found); 2: an error ("epctx: CODE: message").
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "epcontext/paths.h"
#include "tools/tool_common.h"

namespace epctx::tools {

namespace {

struct Diff {
  bool close = true;
  std::string why;           // ValuesClose's message, for values that are not float tensors of one shape
  double max_abs = 0;        // largest |EP - CPU EP|
  double scale = 0;          // largest |CPU EP|
  int64_t at = -1;           // flat index of max_abs
  double ep_value = 0, cpu_value = 0;
};

bool IsFloat(DataType t) {
  return t == DataType::kFloat || t == DataType::kDouble || t == DataType::kFloat16 || t == DataType::kBFloat16 ||
         IsFloat8(t);
}

// Float tensors: equal when every |EP - CPU EP| <= atol + rtol * max|CPU EP| over the tensor (NaN where the CPU EP
// has NaN, the same infinities). The tensor's scale, not each element's: reordered accumulation errs in proportion
// to the operands, so a small result of large terms (349.98 - 349.77) legitimately differs far beyond rtol of itself.
// Other values: ValuesClose (exact for integers).
Diff Compare(const IValue& ep, const IValue& cpu, double rtol, double atol) {
  Diff d;
  if (!(ep.is_tensor() && cpu.is_tensor() && ep.tensor().dtype() == cpu.tensor().dtype() &&
        IsFloat(ep.tensor().dtype()) && ep.tensor().shape() == cpu.tensor().shape())) {
    d.close = ValuesClose(ep, cpu, rtol, atol, &d.why);
    return d;
  }
  const Tensor& a = ep.tensor();
  const Tensor& e = cpu.tensor();
  const int64_t n = a.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    const double y = ElementAsDouble(e, i);
    if (std::isfinite(y)) d.scale = std::max(d.scale, std::fabs(y));
  }
  const double tol = atol + rtol * d.scale;
  for (int64_t i = 0; i < n; ++i) {
    const double x = ElementAsDouble(a, i), y = ElementAsDouble(e, i);
    double abs;
    if (std::isnan(y) || std::isinf(y)) abs = (std::isnan(y) ? std::isnan(x) : x == y) ? 0 : INFINITY;
    else abs = std::isnan(x) ? INFINITY : std::fabs(x - y);
    if (abs > d.max_abs || d.at < 0) d.max_abs = abs, d.at = i, d.ep_value = x, d.cpu_value = y;
    if (abs > tol) d.close = false;
  }
  return d;
}

std::string DiffText(const Diff& d) {
  if (d.at < 0) return d.why.empty() ? "empty" : d.why;
  char buf[256];
  std::snprintf(buf, sizeof buf, "max abs diff %.6g at flat index %lld (EP %.6g, CPU EP %.6g), %.3g%% of max |CPU EP| %.6g",
                d.max_abs, static_cast<long long>(d.at), d.ep_value, d.cpu_value,
                d.scale > 0 ? 100 * d.max_abs / d.scale : 0.0, d.scale);
  return buf;
}

// "'name' (Op)", or "an unnamed Op".
std::string NodeText(const onnx::NodeProto& n) {
  return n.name().empty() ? "an unnamed " + n.op_type() : "'" + n.name() + "' (" + n.op_type() + ")";
}

std::string TypeText(const IValue& v) {
  if (!v.is_tensor()) return v.is_none() ? "none" : "sequence";
  return std::string(DataTypeName(v.tensor().dtype())) + ShapeToString(v.tensor().shape());
}

struct Runner {
  const CompareOptions& opts;
  SessionConfig ep_config, cpu_config;
  std::vector<std::string> input_names;
  std::vector<IValue> inputs;
  int sessions = 0;

  // Runs `proto` (serialized) on one config and returns the named outputs (all when `names` is empty).
  Status Run(const onnx::ModelProto& proto, const SessionConfig& config, const std::vector<std::string>& names,
             std::vector<IValue>* out) {
    std::string bytes;
    RETURN_ERROR_IF(!proto.SerializeToString(&bytes), FAIL, "cannot serialize a variant of '", opts.model, "'");
    ++sessions;
    ASSIGN_OR_RETURN(auto s, InferenceSession::CreateFromBytes(bytes.data(), bytes.size(), config));
    return s->Run(input_names, inputs, names, out);
  }
};

// `proto` with `outputs` as its only graph outputs (typed as shape inference typed them) and, when `prune`,
// without the nodes none of them needs.
onnx::ModelProto WithOutputs(const onnx::ModelProto& proto, const std::vector<std::string>& outputs,
                             const std::map<std::string, onnx::TypeProto>& types, bool prune) {
  onnx::ModelProto m = proto;
  onnx::GraphProto* g = m.mutable_graph();
  g->clear_output();
  for (const std::string& name : outputs) {
    onnx::ValueInfoProto* o = g->add_output();
    o->set_name(name);
    *o->mutable_type() = types.at(name);
  }
  if (!prune) return m;
  std::set<std::string> needed(outputs.begin(), outputs.end());
  std::vector<bool> keep(static_cast<size_t>(g->node_size()), false);
  // Subgraph bodies may read outer values without listing them: a node with subgraphs keeps everything before it.
  for (int i = g->node_size() - 1; i >= 0; --i) {
    const onnx::NodeProto& n = g->node(i);
    bool used = false;
    for (const auto& o : n.output()) used |= needed.count(o) > 0;
    if (!used) continue;
    keep[static_cast<size_t>(i)] = true;
    for (const auto& in : n.input()) needed.insert(in);
    bool has_graph = false;
    for (const auto& a : n.attribute()) has_graph |= a.has_g() || a.graphs_size() > 0;
    if (has_graph) {
      for (int k = 0; k < i; ++k) keep[static_cast<size_t>(k)] = true;
      break;
    }
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = 0; i < g->node_size(); ++i)
    if (keep[static_cast<size_t>(i)]) *kept.Add() = g->node(i);
  g->mutable_node()->Swap(&kept);
  return m;
}

}  // namespace

int RunCompareCommand(const CompareOptions& opts) {
  auto fail = [](const Status& st) {
    Fail(st);
    return 2;
  };
  if (opts.common.eps.empty())
    return fail(Status(ErrorCode::INVALID_ARGUMENT, "compare needs the EP to check against the CPU EP (-e EP)"));
  if (!opts.inputs_dir.empty() && opts.random_inputs)
    return fail(Status(ErrorCode::INVALID_ARGUMENT, "--inputs and -I exclude each other"));
  struct stat st;
  if (!opts.inputs_dir.empty() && (::stat(opts.inputs_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)))
    return fail(MakeStatus(ErrorCode::NO_SUCHFILE, "--inputs '", opts.inputs_dir, "' is not a folder"));
  if (!(opts.rtol >= 0) || !(opts.atol >= 0))
    return fail(Status(ErrorCode::INVALID_ARGUMENT, "--rtol and --atol must be >= 0"));
  CommonFlags cpu_flags = opts.common;
  cpu_flags.eps.clear();
  auto ep_config = BuildConfig(opts.common);
  if (!ep_config.ok()) return fail(ep_config.status());
  auto cpu_config = BuildConfig(cpu_flags);
  if (!cpu_config.ok()) return fail(cpu_config.status());
  if (ep_config.value().eps.empty())
    return fail(Status(ErrorCode::INVALID_ARGUMENT, "compare needs an EP other than the CPU EP (-e aotcpu, ...)"));
  // Variants are built from bytes: their external data stays beside the model file.
  const std::string folder = FolderOfPath(opts.model);
  for (SessionConfig* c : {&ep_config.value(), &cpu_config.value()})
    if (!c->entries.count("session.model_external_initializers_file_folder_path"))
      c->entries["session.model_external_initializers_file_folder_path"] = folder;
  Runner run{opts, ep_config.value(), cpu_config.value(), {}, {}, 0};

  // 1. The model as it is.
  auto cpu_session = InferenceSession::CreateFromFile(opts.model, cpu_config.value());
  if (!cpu_session.ok()) return fail(cpu_session.status());
  const InferenceSession& ref = *cpu_session.value();
  {
    std::vector<ValueInfo> fed;
    for (const auto& in : ref.inputs())
      if (!ref.model().graph->initializers.count(in.name)) fed.push_back(in), run.input_names.push_back(in.name);
    StatusOr<std::vector<IValue>> feeds = opts.inputs_dir.empty() ? RandomInputs(fed, opts.seed)
                                                                  : ReadTestData(opts.inputs_dir, "input_", fed);
    if (!feeds.ok()) return fail(feeds.status());
    if (feeds.value().size() != fed.size())
      return fail(MakeStatus(ErrorCode::INVALID_ARGUMENT, "'", opts.inputs_dir, "' holds ", feeds.value().size(),
                             " input files but the model has ", fed.size(), " inputs"));
    run.inputs = std::move(feeds).value();
  }
  std::vector<IValue> cpu_out, ep_out;
  if (Status st = ref.Run(run.input_names, run.inputs, {}, &cpu_out); !st.ok()) return fail(st);
  {
    auto ep_session = InferenceSession::CreateFromFile(opts.model, ep_config.value());
    if (!ep_session.ok()) return fail(ep_session.status());
    if (Status st = ep_session.value()->Run(run.input_names, run.inputs, {}, &ep_out); !st.ok()) return fail(st);
    std::printf("EP: %s; partitions: %zu; nodes left on the CPU EP: %zu\n",
                ep_session.value()->ep_names().front().c_str(), ep_session.value()->partition_eps().size(),
                ep_session.value()->left_on_cpu().size());
  }
  std::printf("tolerance: |EP - CPU EP| <= %g + %g * max |CPU EP| of each value\n", opts.atol, opts.rtol);
  size_t differing = 0;
  std::string first_output;
  for (size_t i = 0; i < cpu_out.size(); ++i) {
    const Diff d = Compare(ep_out[i], cpu_out[i], opts.rtol, opts.atol);
    std::printf("output '%s' %s: %s%s\n", ref.outputs()[i].name.c_str(), TypeText(cpu_out[i]).c_str(),
                d.close ? "matches" : "DIFFERS: ", d.close ? "" : DiffText(d).c_str());
    if (!d.close && differing++ == 0) first_output = ref.outputs()[i].name;
  }
  if (differing == 0) {
    std::printf("no difference: the %zu output(s) match\n", cpu_out.size());
    return 0;
  }

  // 2. Every intermediate value exposed. Values, producers and element types from the model after overrides and
  // shape inference (its proto is kept by the session).
  const onnx::ModelProto& proto = *ref.model().proto;
  const onnx::GraphProto& g = proto.graph();
  // The checker wants a graph output's element type and shape (its dims may be unknown): values shape inference
  // could not type are not exposed (nor cut at).
  std::map<std::string, onnx::TypeProto> elem_types;
  for (const auto* list : {&g.value_info(), &g.output()})
    for (const auto& vi : *list)
      if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0 &&
          vi.type().tensor_type().has_shape())
        elem_types[vi.name()] = vi.type();
  std::vector<std::string> values;               // node outputs with a known tensor type, topological order
  std::map<std::string, int> producer;           // value -> node index in g
  // Constant nodes' values are not candidates (and an EP may refuse to output an empty constant).
  auto empty = [&](const std::string& v) {
    for (const auto& d : elem_types.at(v).tensor_type().shape().dim())
      if (d.has_dim_value() && d.dim_value() == 0) return true;
    return false;
  };
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto& o : g.node(i).output())
      if (!o.empty() && elem_types.count(o) && g.node(i).op_type() != "Constant" && !empty(o))
        values.push_back(o), producer[o] = i;
  for (int i = 0; i < g.node_size(); ++i)  // producers of every node output, for the upstream walk
    for (const auto& o : g.node(i).output())
      if (!o.empty()) producer.emplace(o, i);
  std::vector<IValue> cpu_all, ep_all;
  if (Status st = run.Run(WithOutputs(proto, values, elem_types, false), run.cpu_config, {}, &cpu_all); !st.ok())
    return fail(st);
  std::map<std::string, const IValue*> reference;
  for (size_t i = 0; i < values.size(); ++i) reference[values[i]] = &cpu_all[i];
  std::string found, method;
  Diff found_diff;
  if (Status st = run.Run(WithOutputs(proto, values, elem_types, false), run.ep_config, {}, &ep_all); !st.ok()) {
    std::printf("with every intermediate value exposed the EP fails (%s: %s)\n", ErrorCodeName(st.code()),
                st.message().c_str());
    ep_all.clear();
  }
  for (size_t i = 0; i < ep_all.size() && found.empty(); ++i) {
    const Diff d = Compare(ep_all[i], cpu_all[i], opts.rtol, opts.atol);
    if (!d.close) found = values[i], found_diff = d, method = "every intermediate value made a graph output";
  }

  // 3. Cuts: `probe(v)` compiles the graph cut at v and compares v with the CPU EP's value.
  std::map<std::string, Diff> probed;
  auto probe = [&](const std::string& v, Diff* out) -> Status {
    auto it = probed.find(v);
    if (it == probed.end()) {
      std::vector<IValue> got;
      RETURN_IF_ERROR(run.Run(WithOutputs(proto, {v}, elem_types, true), run.ep_config, {}, &got));
      it = probed.emplace(v, Compare(got[0], *reference.at(v), opts.rtol, opts.atol)).first;
      if (opts.verbose)
        std::printf("  cut at '%s': %s\n", v.c_str(), it->second.close ? "matches" : DiffText(it->second).c_str());
    }
    *out = it->second;
    return Status::OK();
  };
  if (found.empty()) {
    if (!ep_all.empty())
      std::printf("with every intermediate value exposed nothing differs (exposing values changes what the EP "
                  "fuses)\n");
    std::printf("cutting the graph at one value at a time\n");
    size_t hi = values.size();
    for (size_t i = 0; i < values.size(); ++i)
      if (values[i] == first_output) hi = i;
    if (hi == values.size())
      return fail(MakeStatus(ErrorCode::FAIL, "output '", first_output, "' has no known element type to cut at"));
    Diff d;
    if (Status st = probe(values[hi], &d); !st.ok()) return fail(st);
    if (d.close) {
      std::printf("the graph cut at output '%s' matches too: the difference needs the whole graph; not localised\n",
                  first_output.c_str());
      return 1;
    }
    size_t lo = 0;  // binary search for the first differing value, assuming values after it differ too
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (Status st = probe(values[mid], &d); !st.ok()) return fail(st);
      if (d.close) lo = mid + 1;
      else hi = mid;
    }
    // The search's answer is only a candidate: walk upstream while an input of its node differs.
    std::string v = values[hi];
    for (bool moved = true; moved;) {
      moved = false;
      for (const auto& in : g.node(producer.at(v)).input()) {
        if (!producer.count(in) || !reference.count(in)) continue;  // graph input, initializer, or untyped
        if (Status st = probe(in, &d); !st.ok()) return fail(st);
        if (!d.close) {
          v = in;
          moved = true;
          break;
        }
      }
    }
    found = v;
    if (Status st = probe(v, &found_diff); !st.ok()) return fail(st);
    method = "graph cut at each value in turn (" + std::to_string(probed.size()) + " cuts compiled)";
  }

  const onnx::NodeProto& n = g.node(producer.at(found));
  std::printf("first differing node (topological order; found with %s):\n", method.c_str());
  std::printf("  node:   %s%s\n", NodeText(n).c_str(), n.domain().empty() ? "" : (" domain " + n.domain()).c_str());
  std::set<std::string> initializers;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  for (const auto& in : n.input()) {
    if (in.empty()) continue;
    std::string what;
    if (initializers.count(in)) what = "initializer";
    else if (!producer.count(in)) what = "graph input";
    else
      what = (reference.count(in) ? TypeText(*reference.at(in)) : std::string("not compared")) + ", from " +
             NodeText(g.node(producer.at(in)));
    std::printf("  input:  '%s' (%s)\n", in.c_str(), what.c_str());
  }
  std::printf("  output: '%s' %s: %s\n", found.c_str(), TypeText(*reference.at(found)).c_str(),
              DiffText(found_diff).c_str());
  if (probed.empty()) {
    std::printf("hint: the inputs of this node match on both EPs, so the EP computes it (or a fusion that ends in "
                "it) wrongly; `epctx perf -v -e EP` shows its partition. Report it with this output and the model.\n");
  } else {
    std::string producers;
    for (const auto& in : n.input())
      if (producer.count(in))
        producers += (producers.empty() ? "" : ", ") + NodeText(g.node(producer.at(in)));
    std::printf("hint: its inputs match when the graph is cut at them, but a cut also stops the EP from fusing across "
                "them: the wrong code is likely a fusion of this node with %s. Report it with this output and the "
                "model.\n", producers.empty() ? "its neighbours" : producers.c_str());
  }
  return 1;
}

}  // namespace epctx::tools
