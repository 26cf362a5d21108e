// AotCpuExecutionProvider's Compile: fresh graphs compiled (JIT, or for an EPContext model; alone or in a
// weight-sharing group), serialized into one context binary and loaded back from it; EPContext nodes generated;
// nodes that are EPContext nodes handed to ep_load.cc. The test-only hook EPCTX_AOTCPU_TEST_PLANT_BUG.
#include "providers/aotcpu/plugin/ep.h"

#include <epctx/ep_api.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/context_util.h"
#include "providers/aotcpu/binary/context_binary.h"
#include "providers/aotcpu/binary/dynamic_records.h"
#include "providers/aotcpu/binary/isa.h"
#include "providers/aotcpu/binary/share.h"
#include "providers/aotcpu/ir/ir.h"
#include "providers/aotcpu/lower/ops.h"
#include "providers/aotcpu/plan/compiler.h"
#include "providers/aotcpu/runtime/program.h"

namespace epctx {
namespace aotcpu {
namespace {

// ---- 4. Compile ----

// Test hook, for tests of `epctx compare` only (docs/aotcpu.md): EPCTX_AOTCPU_TEST_PLANT_BUG set to
//   wrong-on-purpose:<node name>           compiles that node wrong on purpose: its first constant float operand is
//                                          replaced (for this node only) by a copy with 0.5 added to every element;
//   wrong-on-purpose-if-fused:<node name>  the same, only when no output of the node leaves its partition (a bug
//                                          that shows only while the node is fused with its consumers).
// Any other value is ignored. Every compile that applies it logs a warning, so a plant set by mistake cannot go
// unnoticed; the prefix keeps an accidental match impossible.
void PlantTestBug(AotCpuEp* ep, Graph* g, const std::vector<std::string>& partition_outputs) {
  static const char* env = ::getenv("EPCTX_AOTCPU_TEST_PLANT_BUG");
  if (!env) return;
  const std::string spec = env;
  static const std::string kAlways = "wrong-on-purpose:", kFused = "wrong-on-purpose-if-fused:";
  const bool only_fused = spec.compare(0, kFused.size(), kFused) == 0;
  if (!only_fused && spec.compare(0, kAlways.size(), kAlways) != 0) return;
  const std::string target = spec.substr(only_fused ? kFused.size() : kAlways.size());
  for (Node& n : g->nodes) {
    if (n.name != target) continue;
    if (only_fused)
      for (int o : n.outputs)
        if (o >= 0 && std::find(partition_outputs.begin(), partition_outputs.end(), g->v(o).name) !=
                          partition_outputs.end())
          return;
    for (int& in : n.inputs) {
      if (in < 0 || !g->v(in).is_const() || g->v(in).dtype != kF32 || g->v(in).numel() <= 0) continue;
      Value planted = g->v(in);
      planted.name += "__planted_bug";
      planted.is_initializer = false;
      planted.is_graph_input = planted.is_graph_output = false;
      planted.producer = -1;
      planted.consumers.clear();
      planted.folded = std::make_shared<std::string>(static_cast<const char*>(planted.data), planted.bytes());
      float* f = reinterpret_cast<float*>(planted.folded->data());
      for (int64_t k = 0; k < planted.numel(); ++k) f[k] += 0.5f;
      planted.data = planted.folded->data();
      const int id = static_cast<int>(g->values.size());
      const int node_index = static_cast<int>(&n - g->nodes.data());
      auto& consumers = g->v(in).consumers;
      auto it = std::find(consumers.begin(), consumers.end(), node_index);
      if (it != consumers.end()) consumers.erase(it);
      planted.consumers.push_back(node_index);
      g->by_name[planted.name] = id;
      g->values.push_back(std::move(planted));
      in = id;
      LogWarning(ep, "EPCTX_AOTCPU_TEST_PLANT_BUG: node '" + target + "' is compiled WRONG ON PURPOSE (test hook)");
      return;
    }
  }
}

std::vector<std::string> IoNames(const EpctxNode* fused, bool inputs) {
  const size_t n = inputs ? g_api->Node_GetNumInputs(fused) : g_api->Node_GetNumOutputs(fused);
  std::vector<const EpctxValueInfo*> vis(n);
  EpctxStatus* st = inputs ? g_api->Node_GetInputs(fused, vis.data(), n) : g_api->Node_GetOutputs(fused, vis.data(), n);
  std::vector<std::string> names;
  if (st) {
    g_api->ReleaseStatus(st);
    return names;
  }
  for (const EpctxValueInfo* vi : vis) names.push_back(vi ? g_api->ValueInfo_GetName(vi) : "");
  return names;
}

// The inputs a compiled graph reads at run time: the fused node's inputs minus the constant initializers the
// program bakes in (their packed copies live in the binary; the EPContext node does not list them, so the ctx model
// does not carry them either).
struct GraphIo {
  std::vector<std::string> inputs, outputs;
  std::vector<size_t> input_map;  // index of each input among the fused node's inputs
};

// The dynamic-shape options of a compile, as the binary's compatibility block records them (`epctx inspect` shows
// them; loading does not compare them): dynamic_shapes, and shape_ranges / shape_profiles in their option syntax.
// Called once `c`'s graphs are in. dynamic_shapes is on by default (issue 27): it is recorded as "1" when it was
// given or when a graph of the binary is dynamic (AOTDYN1 records), so a compile whose dims were all pinned records
// what it did before the default changed; "0" is recorded when it was turned off.
void AddDynamicCompat(const AotCpuOptions& o, ContextBinaryContents* contents) {
  CompatInfo* c = &contents->compat;
  if (!o.dynamic_shapes) {
    if (o.dynamic_shapes_set) c->options.push_back({"dynamic_shapes", "0"});
    return;
  }
  bool any_dynamic = false;
  for (const GraphInput& g : contents->graphs) any_dynamic |= g.records.compare(0, 7, "AOTDYN1") == 0;
  if (!o.dynamic_shapes_set && !any_dynamic) return;
  c->options.push_back({"dynamic_shapes", "1"});
  std::string ranges;
  for (const auto& [sym, r] : o.shape_ranges)
    ranges += (ranges.empty() ? "" : ",") + sym + ":" + std::to_string(r.lo) + ".." + std::to_string(r.hi);
  if (!ranges.empty()) c->options.push_back({"shape_ranges", ranges});
  std::string profiles;
  for (const auto& [input, shapes] : o.shape_profiles) {
    std::string list;
    for (const auto& dims : shapes) {
      std::string d;
      for (int64_t x : dims) d += (d.empty() ? "" : "x") + std::to_string(x);
      list += (list.empty() ? "" : ",") + d;
    }
    profiles += (profiles.empty() ? "" : ";") + input + ":" + list;
  }
  if (!profiles.empty()) c->options.push_back({"shape_profiles", profiles});
}

EpctxStatus* MaybeDynamic(AotCpuEp* ep, const EpctxGraph* graph, const EpctxNode* fused, std::shared_ptr<Partition>* out);

// A dynamic partition for a context binary: the shape_profiles bound first (so their weights are packed now and
// stored), then the symbolic graph, its constants and the packed weights as AOTDYN1 records (dynamic_records.h).
EpctxStatus* SerializeDynamic(AotCpuEp* ep, const std::string& graph_name, Partition* part, DynamicRecords* out) {
  DynamicGraph& d = *part->dynamic;
  const auto& profiles = ep->options.shape_profiles;
  const size_t count = profiles.empty() ? 0 : profiles.begin()->second.size();
  DynamicShapeInfo shapes;
  for (const std::string& sym : d.symbols())
    if (auto it = ep->options.shape_ranges.find(sym); it != ep->options.shape_ranges.end())
      shapes.ranges[sym] = {it->second.lo, it->second.hi};
  // In a weight-sharing group the profiles are given to every graph of it: one that does not apply to a graph (no
  // shape for one of its free inputs, or a shape it cannot take: prefill's input_ids 1x128 against decode's [1, 1])
  // is skipped for that graph. Alone, that is the caller's error.
  const bool group = ep->options.share_ep_contexts;
  for (size_t k = 0; k < count; ++k) {
    std::vector<std::vector<int64_t>> dims;
    std::string missing;
    for (const std::string& input : d.inputs()) {
      auto it = profiles.find(input);
      const int v = d.graph().Find(input);
      if (it == profiles.end()) {
        if (v >= 0 && d.graph().v(v).has_shape) {
          dims.push_back(d.graph().v(v).dims);
          continue;
        }
        missing = input;
        break;
      }
      dims.push_back(it->second[k]);
    }
    if (!missing.empty()) {
      if (group) continue;
      return Error(EPCTX_INVALID_ARGUMENT, std::string(kShapeProfilesKey) + " gives no shape for input '" + missing +
                                               "' of partition '" + graph_name + "', whose dims are free");
    }
    CheckResult r = d.CheckShape(dims);
    if (!r.ok && group) continue;
    // A shape-generic graph builds nothing per shape: the profile is only checked (and stored).
    std::shared_ptr<Executor> exec;
    bool invalid = true;
    if (r.ok && !d.generic()) r = d.Get(dims, &exec, &invalid);
    if (!r.ok)
      return Error(invalid ? EPCTX_INVALID_ARGUMENT : EPCTX_EP_FAIL,
                   std::string(kShapeProfilesKey) + " profile " + std::to_string(k + 1) + " of partition '" +
                       graph_name + "': " + r.reason);
    shapes.profiles.push_back(dims);
  }
  // No profile bound (none given, or none fits this graph of a group): a representative shape is bound so that the
  // binary holds the weights packed in the layouts a shape needs (not a profile: a loaded session does not build it).
  // Every free dim takes one size, the first of these the graph takes (clamped into its range). A later shape whose
  // lowering wants a weight in another layout or fusion makes it from the stored bytes (dynamic.h, `derived`).
  std::vector<std::vector<int64_t>> representative;
  if (shapes.profiles.empty() && !d.generic()) {
    for (int64_t size : {256, 128, 64, 96, 32, 16, 8, 1}) {
      std::vector<std::vector<int64_t>> dims;
      for (const std::string& input : d.inputs()) {
        const Value& v = d.graph().v(d.graph().Find(input));
        std::vector<int64_t> x = v.dims;
        for (size_t k = 0; k < x.size(); ++k) {
          if (x[k] >= 0) continue;
          x[k] = size;
          const std::string sym = k < v.dim_symbols.size() ? v.dim_symbols[k] : "";
          if (auto it = ep->options.shape_ranges.find(sym); !sym.empty() && it != ep->options.shape_ranges.end())
            x[k] = std::min(std::max(size, it->second.lo), it->second.hi);
        }
        dims.push_back(std::move(x));
      }
      if (!d.CheckShape(dims).ok) continue;
      std::shared_ptr<Executor> exec;
      bool invalid = false;
      if (d.Get(dims, &exec, &invalid).ok) {  // a shape that fails to compile: try the next (its error is the run's)
        representative = std::move(dims);
        break;
      }
    }
  }
  std::vector<StoredWeight> packed;
  for (const DynamicGraph::Packed& w : d.PackedWeights()) {
    // An int8 weight packed with its compensation appended (kConvInt8, kQConv, kMatMulInt8 with a zero point) is
    // larger than its layout, which is all the records describe: it is not stored packed, and a loaded session packs
    // it again from its raw constant (int8 constants are always stored raw). ppocr_v4_det_qdq's dynamic compile.
    if (w.size != w.layout.get_size()) continue;
    packed.push_back({w.name, w.layout, w.data, w.size});
  }
  // Constants read only packed are stored only packed (a later shape that needs them plain or in another layout makes
  // them from the packed bytes: dynamic.h, `derived`).
  // Convolutions whose normalizations every shape folds are stored folded (BakeFolds), so that their weights too are
  // stored once, packed; kept only if the baked graph is one a session can create.
  // Checked as a loaded session would use it: the records parsed back and the shapes bound above built from them
  // without making any derived constant's bytes. A convolution whose baked form makes them is left unbaked.
  const Graph* graph = &d.graph();
  Graph baked;
  std::vector<std::shared_ptr<std::string>> owned;
  std::shared_ptr<const LoweringMemo> memo = d.Memo();
  std::vector<std::vector<std::vector<int64_t>>> built = shapes.profiles;
  if (built.empty() && !representative.empty()) built.push_back(representative);
  std::set<std::string> skip;
  for (int attempt = 0; memo && !built.empty() && attempt < 8; ++attempt) {
    std::vector<StoredWeight> baked_packed = packed;
    size_t folds = 0;
    owned.clear();
    if (!BakeFolds(d.graph(), *memo, &baked_packed, &baked, &owned, &folds, skip).ok || folds == 0) break;
    DynamicRecords rec;
    if (!SerializeDynamicGraph(baked, d.inputs(), d.outputs(), baked_packed, &rec, "", {},
                               DerivableConstants(baked, baked_packed)).ok)
      break;
    std::vector<WeightRef> refs;
    for (const TensorInput& t : rec.tensors) refs.push_back({t.bytes.data(), t.bytes.size()});
    ParsedDynamicGraph parsed;
    if (!ParseDynamicGraph(rec.records, refs, &parsed).ok) break;
    std::map<std::string, CompileOptions::EarlierWeight> weights;
    for (const auto& [name, w] : parsed.packed) weights[name] = {w.layout, nullptr, w.data, w.size, nullptr};
    std::unique_ptr<DynamicGraph> check;
    if (!DynamicGraph::Create(std::move(parsed.graph), parsed.inputs, parsed.outputs, DynamicOptionsOf(ep), nullptr,
                              &check, weights, parsed.derived).ok)
      break;
    bool fine = true;
    for (const auto& dims : built) {
      std::shared_ptr<Executor> exec;
      bool invalid = false;
      fine = fine && check->Get(dims, &exec, &invalid).ok;
    }
    if (!fine) break;
    const std::string why = check->stats().derived_why;
    if (why.empty()) {
      graph = &baked;
      packed = std::move(baked_packed);
      break;
    }
    // The convolution whose weights were made: "<output>/<weights>:folded..." names its folded weights.
    const size_t at = why.find(":folded");
    bool found = false;
    for (const auto& [conv, fold] : memo->fold) {
      const Node* n = nullptr;
      for (const Node& x : d.graph().nodes)
        if (x.name == conv) n = &x;
      if (!n || n->inputs.size() < 2 || n->inputs[1] < 0 || at == std::string::npos) continue;
      const std::string w = d.graph().v(n->inputs[1]).name + ":folded";
      if (why.find("/" + w) != std::string::npos || why.find("'" + w) != std::string::npos) {
        found = skip.insert(conv).second;
        break;
      }
    }
    if (!found) break;
  }
  const DerivedConstants derived = DerivableConstants(*graph, packed);
  CheckResult r =
      SerializeDynamicGraph(*graph, d.inputs(), d.outputs(), packed, out, graph_name + "/", shapes, derived);
  if (!r.ok) return Error(EPCTX_EP_FAIL, "storing dynamic partition '" + graph_name + "': " + r.reason);
  return nullptr;
}

// Compiles the graphs (fused node names in *names). With `dynamic` (context binaries), a graph with free input dims
// (dynamic_shapes=1) becomes AOTDYN1 records in (*dynamic)[i] and an empty CompiledGraph.
EpctxStatus* CompileGraphs(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                           std::vector<std::string>* names, std::vector<CompiledGraph>* compiled,
                           std::vector<GraphIo>* io, std::vector<DynamicRecords>* dynamic = nullptr,
                           std::vector<std::shared_ptr<Partition>>* dynamic_parts = nullptr) {
  const auto t0 = std::chrono::steady_clock::now();
  size_t packed = 0;
  uint64_t packed_bytes = 0;
  for (size_t i = 0; i < count; ++i) {
    const std::string name = g_api->Node_GetName(fused_nodes[i]);
    if (dynamic) {
      dynamic->resize(compiled->size() + 1);
      if (dynamic_parts) dynamic_parts->resize(compiled->size() + 1);
      std::shared_ptr<Partition> part;
      AOT_RETURN_IF_ERROR(MaybeDynamic(ep, graphs[i], fused_nodes[i], &part));
      if (part) {
        GraphIo gio;
        gio.inputs = part->dynamic->inputs();
        gio.outputs = part->dynamic->outputs();
        gio.input_map = part->input_map;
        AOT_RETURN_IF_ERROR(SerializeDynamic(ep, ep->context.prefix + name, part.get(), &dynamic->back()));
        if (dynamic_parts) dynamic_parts->back() = part;
        compiled->emplace_back();
        names->push_back(ep->context.prefix + name);
        io->push_back(std::move(gio));
        continue;
      }
    }
    Graph g;
    CheckResult r = BuildGraph(g_api, graphs[i], &g);
    if (!r.ok) return Error(EPCTX_EP_FAIL, "graph '" + name + "': " + r.reason);
    PlantTestBug(ep, &g, IoNames(fused_nodes[i], false));
    CompileOptions options;
    options.isa = ep->isa;
    options.portable_layouts = ep->portable;
    if (ep->progress) {
      options.on_weight = [&, i](size_t n, uint64_t bytes) {
        if (n % 8 == 0)
          std::fprintf(stderr, "\r[aotcpu] partition %zu/%zu: %zu weights packed (%.1f MB), %.1f s   ", i + 1, count,
                       packed + n, (packed_bytes + bytes) / 1e6, MsSince(t0) / 1000);
      };
    }
    GraphIo gio;
    const std::vector<std::string> fused_inputs = IoNames(fused_nodes[i], true);
    for (size_t k = 0; k < fused_inputs.size(); ++k) {
      const int v = g.Find(fused_inputs[k]);
      if (v >= 0 && g.v(v).is_initializer) continue;
      gio.inputs.push_back(fused_inputs[k]);
      gio.input_map.push_back(k);
    }
    gio.outputs = IoNames(fused_nodes[i], false);
    CompiledGraph cg;
    r = CompileGraph(g, gio.inputs, gio.outputs, options, &cg);
    if (!r.ok) return Error(EPCTX_EP_FAIL, "compiling '" + name + "': " + r.reason);
    packed += cg.weights.size();
    for (const TensorInput& t : cg.weights) packed_bytes += t.bytes.size();
    compiled->push_back(std::move(cg));
    names->push_back(ep->context.prefix + name);  // graph name in the binary = EPContext node / partition name
    io->push_back(std::move(gio));
  }
  if (ep->progress)
    std::fprintf(stderr, "\r[aotcpu] %zu partition(s) compiled: %zu weights packed (%.1f MB), %.1f s            \n",
                 count, packed, packed_bytes / 1e6, MsSince(t0) / 1000);
  return nullptr;
}

// Serializes compiled graphs into one context binary; the weights move out of `compiled`.
EpctxStatus* BinaryOf(AotCpuEp* ep, std::vector<CompiledGraph>* compiled, const std::vector<std::string>& names,
                      std::string* binary, std::vector<DynamicRecords>* dynamic = nullptr) {
  ContextBinaryContents contents;
  contents.compat.epctx_version = kVersion;
  contents.compat.onednn_version = OneDnnVersion();
  contents.compat.isa = ep->isa;
  if (ep->portable) contents.compat.options.push_back({"layouts", "plain"});
  for (size_t i = 0; i < compiled->size(); ++i) {
    CompiledGraph& cg = (*compiled)[i];
    GraphInput gi;
    gi.name = names[i];
    if (dynamic && i < dynamic->size() && !(*dynamic)[i].records.empty()) {
      DynamicRecords& dr = (*dynamic)[i];
      gi.records = std::move(dr.records);
      for (TensorInput& t : dr.tensors) {
        gi.tensor_names.push_back(t.name);
        contents.tensors.push_back(std::move(t));
      }
      dr.tensors.clear();
      contents.graphs.push_back(std::move(gi));
      continue;
    }
    gi.records = SerializeProgram(cg.program);
    for (TensorInput& t : cg.weights) {
      t.name = names[i] + "/" + t.name;  // unique per graph; equal bytes are still stored once
      gi.tensor_names.push_back(t.name);
      contents.tensors.push_back(std::move(t));
    }
    cg.weights.clear();
    contents.graphs.push_back(std::move(gi));
  }
  AddDynamicCompat(ep->options, &contents);
  CheckResult r = WriteContextBinary(contents, binary);
  if (!r.ok) return Error(EPCTX_EP_FAIL, "writing the context binary: " + r.reason);
  return nullptr;
}

EpctxStatus* CompileToBinary(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                             std::vector<std::string>* names, std::string* binary, std::vector<GraphIo>* io) {
  std::vector<CompiledGraph> compiled;
  std::vector<DynamicRecords> dynamic;
  AOT_RETURN_IF_ERROR(CompileGraphs(ep, graphs, fused_nodes, count, names, &compiled, io, &dynamic));
  return BinaryOf(ep, &compiled, *names, binary, &dynamic);
}

// JIT: executors straight over the compiled graphs' weights (no serialization).
CheckResult PartitionsFromCompiled(std::vector<CompiledGraph>* compiled, int threads,
                                   std::vector<std::shared_ptr<Partition>>* out) {
  for (CompiledGraph& cg : *compiled) {
    auto weights = std::make_shared<std::vector<TensorInput>>(std::move(cg.weights));
    std::vector<WeightRef> refs;
    for (const TensorInput& t : *weights) refs.push_back({t.bytes.data(), t.bytes.size()});
    auto part = std::make_shared<Partition>();
    part->keep = weights;
    CheckResult r = Executor::Create(std::move(cg.program), std::move(refs), threads, &part->exec);
    if (!r.ok) return r;
    out->push_back(std::move(part));
  }
  return CheckResult::Ok();
}

// Writes the EPContext nodes for freshly compiled graphs. Embed 0: `binary` goes to "<ctx stem>_aotcpu.bin" beside
// the ctx model; the first node (main_context=1) names it, the others (main_context=0) find their graph by
// partition_name. Embed 1: each node carries its own binary (`per_graph[i]`).
EpctxStatus* GenerateContext(AotCpuEp* ep, size_t count, const std::vector<std::string>& names,
                             const std::vector<GraphIo>& io, const std::string& binary,
                             const std::vector<std::string>& per_graph, EpctxNode** ep_context_nodes,
                             const std::string& shared_reference = std::string()) {
  const ContextOptions& o = ep->context;
  std::string path;
  if (!shared_reference.empty()) {
    // A weight-sharing group: the group's binary, written by its last session.
  } else if (!o.embed) {
    if (o.file_path.empty())
      return Error(EPCTX_EP_FAIL, "ep.context_file_path is not set, so there is no folder for the context binary");
    path = plugin::ContextBinaryPath(o.file_path, "_aotcpu.bin");
    AOT_RETURN_IF_ERROR(plugin::WriteFileAtomically(g_api, kEpName, path, binary));
  }
  for (size_t i = 0; i < count; ++i) {
    plugin::EpContextNodeSpec spec;
    spec.name = names[i];  // already carries ep.context_node_name_prefix
    spec.source = kEpName;
    spec.sdk_version = kVersion;
    spec.hardware_architecture = ep->isa;
    spec.inputs = io[i].inputs;
    spec.outputs = io[i].outputs;
    if (o.embed) {
      spec.embed_mode = 1;
      spec.cache = per_graph[i];
    } else {
      spec.embed_mode = 0;
      spec.main_context = i == 0 ? 1 : 0;
      spec.has_cache = i == 0;
      if (i == 0) spec.cache = shared_reference.empty() ? plugin::FileNameOf(path) : shared_reference;
    }
    if (EpctxStatus* st = plugin::MakeEpContextNode(g_api, spec, &ep_context_nodes[i])) {
      if (!path.empty()) unlink(path.c_str());  // no ctx model will reference it
      return st;
    }
  }
  return nullptr;
}

// The path of `target` relative to `folder` when it lies inside it (after resolving symlinks of both folders);
// false otherwise (ep_cache_context may not leave the model's folder).
bool RelativeInside(const std::string& folder, const std::string& target, std::string* rel) {
  char a[PATH_MAX], b[PATH_MAX];
  const std::string tf = plugin::FolderOf(target);
  if (!realpath(folder.empty() ? "." : folder.c_str(), a) || !realpath(tf.empty() ? "." : tf.c_str(), b)) return false;
  const std::string fa(a), fb(b);
  if (fa == fb) return *rel = plugin::FileNameOf(target), true;
  const std::string prefix = fa == "/" ? "/" : fa + "/";
  if (fb.compare(0, prefix.size(), prefix) != 0) return false;
  *rel = fb.substr(prefix.size()) + "/" + plugin::FileNameOf(target);
  return true;
}

std::string StemOf(const std::string& path) {
  const std::string name = plugin::FileNameOf(path);
  const size_t dot = name.rfind('.');
  return dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
}

// Generation in a weight-sharing group (ep.share_ep_contexts=1, share.h): compile, stage the graphs in the group,
// reference the group's binary from this session's EPContext nodes; the last session writes the binary.
EpctxStatus* CompileShared(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                           std::vector<std::shared_ptr<Partition>>* parts, EpctxNode** ep_context_nodes) {
  GenerationGroup& group = GenerationGroup::Instance();
  const std::string& ctx = ep->context.file_path;
  if (ctx.empty()) return Error(EPCTX_EP_FAIL, "ep.context_file_path is not set, so there is no folder for the binary");
  const std::string model_path = g_api->Graph_GetModelPath(graphs[0]);
  const std::string stem = model_path.empty() ? StemOf(ctx) : StemOf(model_path);
  bool started = false;
  const std::string binary = group.Join(plugin::JoinPath(plugin::FolderOf(ctx), stem + "_aotcpu.bin"), &started);
  ep->group_member = true;
  std::string reference;
  if (!RelativeInside(plugin::FolderOf(ctx), binary, &reference))
    return Error(EPCTX_INVALID_ARGUMENT,
                 "ep.share_ep_contexts=1: this session's context model '" + ctx + "' cannot reference the group's "
                 "binary '" + binary + "', which is outside its folder (EPContext nodes may only reference files "
                 "inside the model's folder). Write every context model of a group into the folder of the first one, "
                 "or into a folder that contains it.");
  std::vector<std::string> names;
  std::vector<GraphIo> io;
  std::vector<CompiledGraph> compiled;
  // Dynamic partitions (dynamic_shapes=1) join the group as AOTDYN1 records; equal constants and packed weights of
  // its graphs are stored once, as for programs.
  std::vector<DynamicRecords> dynamic;
  std::vector<std::shared_ptr<Partition>> dynamic_parts;
  AOT_RETURN_IF_ERROR(CompileGraphs(ep, graphs, fused_nodes, count, &names, &compiled, &io, &dynamic, &dynamic_parts));
  // The group keeps a copy of the graphs and weights until its binary is written; this session runs its own.
  std::vector<GraphInput> group_graphs;
  std::vector<TensorInput> group_tensors;
  for (size_t i = 0; i < compiled.size(); ++i) {
    GraphInput gi;
    gi.name = names[i];
    if (i < dynamic.size() && !dynamic[i].records.empty()) {
      gi.records = dynamic[i].records;
      for (const TensorInput& t : dynamic[i].tensors) {
        gi.tensor_names.push_back(t.name);
        group_tensors.push_back(t);
      }
      group_graphs.push_back(std::move(gi));
      continue;
    }
    gi.records = SerializeProgram(compiled[i].program);
    for (const TensorInput& t : compiled[i].weights) {
      TensorInput copy = t;
      copy.name = gi.name + "/" + t.name;
      gi.tensor_names.push_back(copy.name);
      group_tensors.push_back(std::move(copy));
    }
    group_graphs.push_back(std::move(gi));
  }
  CheckResult r = group.Stage(ep->session_id, std::move(group_graphs), std::move(group_tensors));
  if (!r.ok) return Error(EPCTX_INVALID_ARGUMENT, r.reason);
  // This session's partitions, in graph order: the dynamic ones as compiled, the others from their programs.
  for (size_t i = 0; i < compiled.size(); ++i) {
    if (i < dynamic_parts.size() && dynamic_parts[i]) {
      parts->push_back(dynamic_parts[i]);
      continue;
    }
    std::vector<CompiledGraph> one;
    one.push_back(std::move(compiled[i]));
    r = PartitionsFromCompiled(&one, ep->threads, parts);
    if (!r.ok) return Error(EPCTX_EP_FAIL, r.reason);
  }
  for (size_t k = 0; k < parts->size(); ++k) (*parts)[k]->input_map = io[k].input_map;
  if (ep->options.stop_share_ep_contexts) {
    ContextBinaryContents contents = group.Contents(ep->session_id);
    contents.compat.epctx_version = kVersion;
    contents.compat.onednn_version = OneDnnVersion();
    contents.compat.isa = ep->isa;
    if (ep->portable) contents.compat.options.push_back({"layouts", "plain"});
    AddDynamicCompat(ep->options, &contents);
    std::string bytes;
    r = WriteContextBinary(contents, &bytes);
    if (!r.ok) return Error(EPCTX_EP_FAIL, "writing the group's context binary: " + r.reason);
    AOT_RETURN_IF_ERROR(plugin::WriteFileAtomically(g_api, kEpName, binary, bytes));
    ep->written_binary = binary;
  }
  return GenerateContext(ep, count, names, io, std::string(), {}, ep_context_nodes, reference);
}

// A fused graph with free input dims (only claimed with dynamic_shapes on, the default): a DynamicGraph partition that binds each
// new input shape at run time; *out stays null for a static graph.
EpctxStatus* MaybeDynamic(AotCpuEp* ep, const EpctxGraph* graph, const EpctxNode* fused, std::shared_ptr<Partition>* out) {
  if (!ep->options.dynamic_shapes) return nullptr;
  const std::string name = g_api->Node_GetName(fused);
  Graph g;
  CheckResult r = BuildGraph(g_api, graph, &g);
  if (!r.ok) return Error(EPCTX_EP_FAIL, "graph '" + name + "': " + r.reason);
  GraphIo gio;
  bool free = false;
  const std::vector<std::string> fused_inputs = IoNames(fused, true);
  for (size_t k = 0; k < fused_inputs.size(); ++k) {
    const int v = g.Find(fused_inputs[k]);
    if (v >= 0 && g.v(v).is_initializer) continue;
    if (v >= 0 && !g.v(v).has_shape) free = true;
    gio.inputs.push_back(fused_inputs[k]);
    gio.input_map.push_back(k);
  }
  // Static inputs but a value inside without a static shape (the compile API's level 0 folds nothing, so a shape the
  // probe binding computed is not the runtime's): the symbolic form computes it (difftest --dynamic, seed 20261210).
  // A fused input made outside the partition gets the shape GetCapability gave it from the whole graph's symbolic
  // shapes (its rank, when the runtime's shape inference had none).
  for (const std::string& in : gio.inputs) {
    const int v = g.Find(in);
    auto it = ep->partition_input_shapes.find(in);
    if (v >= 0 && it != ep->partition_input_shapes.end()) ApplyInputShape(it->second, &g.v(v));
  }
  const bool free_inputs = free;
  for (const Value& v : g.values)
    if (v.producer >= 0 && !v.has_shape) free = true;
  if (!free) return nullptr;
  gio.outputs = IoNames(fused, false);
  // The partition's graph has exactly the fused node's inputs and outputs as its own. The runtime's view flags the
  // model's inputs and outputs instead: a fused input made by the CPU EP was no input of the symbolic graph, and a
  // model output that only enters the partition was flagged an output (difftest --dynamic, seeds 20261209/10: sessions
  // that failed to compile as "shape unknown", binaries refused as "4 values are flagged as graph outputs").
  g.inputs.clear();
  g.outputs.clear();
  for (Value& v : g.values) v.is_graph_input = v.is_graph_output = false;
  for (const std::string& in : gio.inputs) {
    const int v = g.Find(in);
    if (v < 0) continue;
    g.v(v).is_graph_input = true;
    g.inputs.push_back(v);
  }
  for (const std::string& out : gio.outputs) {
    const int v = g.Find(out);
    if (v < 0) continue;
    g.v(v).is_graph_output = true;
    g.outputs.push_back(v);
  }
  DynamicGraph::Options o = DynamicOptionsOf(ep);
  // The runtime keeps the graph's initializers alive until the compute infos are released, and the partition lives
  // in its compute info: the owner is a token, not a reference count.
  static const char kRuntimeOwned = 0;
  std::shared_ptr<const void> keep(&kRuntimeOwned, [](const void*) {});
  auto part = std::make_shared<Partition>();
  r = DynamicGraph::Create(std::move(g), gio.inputs, gio.outputs, std::move(o), keep, &part->dynamic);
  // Static inputs: the static compile (with its own constant folding) is the way when the symbolic form is not
  // (a pooling with ceil_mode, which the shape rules do not model; difftest --dynamic seed 20261210 model 1702).
  if (!r.ok && !free_inputs) return nullptr;
  if (!r.ok) return Error(EPCTX_EP_FAIL, "compiling '" + name + "' for every input shape: " + r.reason);
  part->input_map = gio.input_map;
  *out = std::move(part);
  return nullptr;
}

EpctxStatus* CompileFresh(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                          std::vector<std::shared_ptr<Partition>>* parts, EpctxNode** ep_context_nodes) {
  const Mode mode = ep->options.mode();
  if (ep->options.share_ep_contexts && ep->context.enable)
    return CompileShared(ep, graphs, fused_nodes, count, parts, ep_context_nodes);
  std::vector<std::string> names;
  std::vector<GraphIo> io;
  // Fresh partitions read only their non-constant inputs, found among the fused node's inputs by input_map.
  auto attach_maps = [&](size_t first) {
    for (size_t k = first; k < parts->size(); ++k) (*parts)[k]->input_map = io[k].input_map;
  };
  if (mode == Mode::kJit) {
    for (size_t i = 0; i < count; ++i) {
      std::shared_ptr<Partition> dynamic;
      AOT_RETURN_IF_ERROR(MaybeDynamic(ep, graphs[i], fused_nodes[i], &dynamic));
      if (dynamic) {
        parts->push_back(std::move(dynamic));
        continue;
      }
      std::vector<CompiledGraph> compiled;
      std::vector<std::string> one_name;
      std::vector<GraphIo> one_io;
      AOT_RETURN_IF_ERROR(CompileGraphs(ep, graphs + i, fused_nodes + i, 1, &one_name, &compiled, &one_io));
      CheckResult r = PartitionsFromCompiled(&compiled, ep->threads, parts);
      if (!r.ok) return Error(EPCTX_EP_FAIL, r.reason);
      parts->back()->input_map = one_io[0].input_map;
    }
    return nullptr;
  }
  if (ep->context.enable && ep->context.embed) {
    // One binary per graph, each embedded in its own node; executors run on those same bytes.
    std::vector<std::string> per_graph(count);
    for (size_t i = 0; i < count; ++i) {
      std::vector<std::string> one;
      auto bytes = std::make_shared<std::string>();
      AOT_RETURN_IF_ERROR(CompileToBinary(ep, graphs + i, fused_nodes + i, 1, &one, bytes.get(), &io));
      if (mode != Mode::kPrepareOnly) {
        CheckResult r = LoadPartitions(bytes->data(), bytes->size(), bytes, DynamicOptionsOf(ep), one, parts);
        if (!r.ok) return Error(EPCTX_EP_FAIL, "loading the just-compiled binary: " + r.reason);
      }
      names.push_back(one[0]);
      per_graph[i] = *bytes;
    }
    if (mode != Mode::kPrepareOnly) attach_maps(0);
    return GenerateContext(ep, count, names, io, std::string(), per_graph, ep_context_nodes);
  }
  auto binary = std::make_shared<std::string>();
  AOT_RETURN_IF_ERROR(CompileToBinary(ep, graphs, fused_nodes, count, &names, binary.get(), &io));
  // Every compile-time structure is gone here; what follows sees only the binary.
  if (ep->context.enable)
    AOT_RETURN_IF_ERROR(GenerateContext(ep, count, names, io, *binary, {}, ep_context_nodes));
  if (mode == Mode::kPrepareOnly) return nullptr;
  if (mode == Mode::kPrepareAndLoadPersist) {
    // Path B: reload from the file just written, mapped like any ctx model's binary.
    const std::string path = plugin::ContextBinaryPath(ep->context.file_path, "_aotcpu.bin");
    binary.reset();
    auto map = std::make_shared<plugin::MappedFile>();
    std::string why;
    if (!plugin::MapFile(path, map.get(), &why)) return Error(EPCTX_EP_FAIL, "reloading the context binary: " + why);
    std::shared_ptr<ContextBinaryReader> reader;
    AOT_RETURN_IF_ERROR(OpenChecked(ep, path, map->data(), map->size(), &reader));
    CheckResult r = LoadPartitions(*reader, map, DynamicOptionsOf(ep), names, parts);
    if (!r.ok) return LoadError(path + ": " + r.reason);
    attach_maps(0);
    return nullptr;
  }
  // kGenerate and Path A (prepare_and_load without a file): load from the bytes as from a file.
  std::shared_ptr<ContextBinaryReader> reader;
  AOT_RETURN_IF_ERROR(OpenChecked(ep, "the compiled binary", binary->data(), binary->size(), &reader));
  CheckResult r = LoadPartitions(*reader, binary, DynamicOptionsOf(ep), names, parts);
  if (!r.ok) return Error(EPCTX_EP_FAIL, "loading the just-compiled binary: " + r.reason);
  attach_maps(0);
  return nullptr;
}

}  // namespace

EpctxStatus* CompileImpl(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                         EpctxNodeComputeInfo** infos, EpctxNode** ep_context_nodes) {
  if (count == 0) return nullptr;
  std::vector<size_t> fresh, loaded;
  std::vector<const EpctxGraph*> fresh_graphs;
  std::vector<const EpctxNode*> fresh_nodes;
  for (size_t i = 0; i < count; ++i) {
    std::vector<const EpctxNode*> nodes(g_api->Graph_GetNumNodes(graphs[i]));
    AOT_RETURN_IF_ERROR(g_api->Graph_GetNodes(graphs[i], nodes.data(), nodes.size()));
    const bool is_context = nodes.size() == 1 && plugin::IsEpContextNodeFrom(g_api, nodes[0], {kEpName});
    (is_context ? loaded : fresh).push_back(i);
    if (!is_context) fresh_graphs.push_back(graphs[i]), fresh_nodes.push_back(fused_nodes[i]);
  }
  std::vector<std::shared_ptr<Partition>> fresh_parts, loaded_parts;
  std::vector<EpctxNode*> fresh_ctx(fresh.size(), nullptr);
  if (!fresh.empty())
    AOT_RETURN_IF_ERROR(CompileFresh(ep, fresh_graphs.data(), fresh_nodes.data(), fresh.size(), &fresh_parts,
                                     fresh_ctx.data()));
  for (size_t k = 0; k < fresh.size(); ++k) ep_context_nodes[fresh[k]] = fresh_ctx[k];
  if (!loaded.empty()) AOT_RETURN_IF_ERROR(LoadContextNodes(ep, graphs, fused_nodes, loaded, &loaded_parts));
  if (ep->options.mode() == Mode::kPrepareOnly) {
    const OptionsError e = PrepareOnlyRunError(ep->context.file_path);
    for (size_t k = 0; k < fresh.size(); ++k) {
      auto part = std::make_shared<Partition>();
      part->run_error = e.message;
      fresh_parts.push_back(part);
    }
  }
  for (size_t k = 0; k < fresh.size(); ++k) infos[fresh[k]] = &MakeComputeInfo(fresh_parts[k])->base;
  for (size_t k = 0; k < loaded.size(); ++k) infos[loaded[k]] = &MakeComputeInfo(loaded_parts[k])->base;
  return nullptr;
}

}  // namespace aotcpu
}  // namespace epctx
