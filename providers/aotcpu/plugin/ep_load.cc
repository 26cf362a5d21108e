// AotCpuExecutionProvider's EPContext loading: the binaries of EPContext nodes mapped (or borrowed, embedded),
// validated and checked for compatibility before anything else is used, their graphs built while the weights'
// content hashes run, and the verdict awaited before a session exists.
#include "providers/aotcpu/plugin/ep.h"

#include <epctx/ep_api.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/context_util.h"
#include "providers/aotcpu/binary/context_binary.h"
#include "providers/aotcpu/binary/dynamic_records.h"
#include "providers/aotcpu/binary/isa.h"
#include "providers/aotcpu/binary/share.h"
#include "providers/aotcpu/runtime/program.h"

namespace epctx {
namespace aotcpu {
namespace {

// Validates a binary once (every section checksum; tensors are not re-hashed one by one) and indexes it.
CheckResult OpenBinary(const void* data, size_t size, std::shared_ptr<ContextBinaryReader>* out,
                       bool verify_weights = true) {
  auto reader = std::make_shared<ContextBinaryReader>();
  CheckResult r = reader->Open(data, size, /*full_validation=*/false, verify_weights);
  if (!r.ok) return r;
  *out = std::move(reader);
  return CheckResult::Ok();
}

}  // namespace

// Builds executors for the named graphs of an opened binary. `keep` owns the bytes the reader views.
// What a dynamic partition needs from the EP: its compile options, threads, cache size and ranges.
DynamicGraph::Options DynamicOptionsOf(const AotCpuEp* ep) {
  DynamicGraph::Options o;
  o.compile.isa = ep->isa;
  o.compile.portable_layouts = ep->portable;
  o.threads = ep->threads;
  o.cache_size = ep->options.shape_cache_size;
  for (const auto& [sym, range] : ep->options.shape_ranges) o.ranges[sym] = {range.lo, range.hi};
  return o;
}

// `run`: threads for every partition, and the options of dynamic ones (DynamicOptionsOf).
CheckResult LoadPartitions(const ContextBinaryReader& reader, std::shared_ptr<const void> keep,
                           const DynamicGraph::Options& run,
                           const std::vector<std::string>& names, std::vector<std::shared_ptr<Partition>>* out) {
  for (const std::string& name : names) {
    const GraphView* gv = nullptr;
    for (const GraphView& v : reader.graphs())
      if (v.name == name) gv = &v;
    if (!gv) return CheckResult::Fail("the context binary holds no graph named '" + name + "'");
    if (gv->records.size() >= 8 && gv->records.substr(0, 7) == "AOTDYN1") {  // a dynamic partition
      std::vector<WeightRef> tensors;
      for (uint32_t t : gv->tensor_indices) tensors.push_back({reader.tensors()[t].data, reader.tensors()[t].length});
      ParsedDynamicGraph parsed;
      CheckResult r = ParseDynamicGraph(gv->records, tensors, &parsed);
      if (!r.ok) return CheckResult::Fail("graph '" + name + "': " + r.reason);
      std::map<std::string, CompileOptions::EarlierWeight> packed;
      for (const auto& [wname, w] : parsed.packed) packed[wname] = {w.layout, nullptr, w.data, w.size, keep};
      auto part = std::make_shared<Partition>();
      part->keep = keep;
      const size_t n = parsed.inputs.size();
      // The ranges the compile was given hold unless this session names its own for a symbol.
      DynamicGraph::Options o = run;
      for (const auto& [sym, range] : parsed.shapes.ranges) o.ranges.emplace(sym, SymbolRange{range.first, range.second});
      r = DynamicGraph::Create(std::move(parsed.graph), std::move(parsed.inputs), std::move(parsed.outputs), o, keep,
                               &part->dynamic, packed, parsed.derived);
      if (!r.ok) return CheckResult::Fail("graph '" + name + "': " + r.reason);
      // The shape profiles are built now (their weights are in the binary), so their first run builds nothing. A
      // shape-generic graph needs none: no shape is built.
      if (!part->dynamic->generic())
        for (size_t k = 0; k < parsed.shapes.profiles.size(); ++k) {
          std::shared_ptr<Executor> exec;
          bool invalid = false;
          r = part->dynamic->Get(parsed.shapes.profiles[k], &exec, &invalid);
          if (!r.ok)
            return CheckResult::Fail("graph '" + name + "': shape profile " + std::to_string(k + 1) + ": " + r.reason);
        }
      for (size_t k = 0; k < n; ++k) part->input_map.push_back(k);
      out->push_back(std::move(part));
      continue;
    }
    Program p;
    CheckResult r = ParseProgram(gv->records, static_cast<uint32_t>(gv->tensor_indices.size()), &p);
    if (!r.ok) return CheckResult::Fail("graph '" + name + "': " + r.reason);
    std::vector<WeightRef> weights;
    for (uint32_t t : gv->tensor_indices) weights.push_back({reader.tensors()[t].data, reader.tensors()[t].length});
    auto part = std::make_shared<Partition>();
    part->keep = keep;
    r = Executor::Create(std::move(p), std::move(weights), run.threads, &part->exec);
    if (!r.ok) return CheckResult::Fail("graph '" + name + "': " + r.reason);
    out->push_back(std::move(part));
  }
  return CheckResult::Ok();
}

CheckResult LoadPartitions(const void* data, size_t size, std::shared_ptr<const void> keep,
                           const DynamicGraph::Options& run,
                           const std::vector<std::string>& names, std::vector<std::shared_ptr<Partition>>* out) {
  std::shared_ptr<ContextBinaryReader> reader;
  CheckResult r = OpenBinary(data, size, &reader);
  if (!r.ok) return r;
  return LoadPartitions(*reader, std::move(keep), run, names, out);
}

namespace {

// Refuses a binary made for another ISA (above the host's), oneDNN or format before anything else is used.
EpctxStatus* CheckCompat(AotCpuEp* ep, const std::string& from, const ContextBinaryReader& reader) {
  const CompatInfo& c = reader.compat();
  CompatibilityInfo info;
  info.format_major = reader.major();
  info.format_minor = reader.minor();
  info.onednn = c.onednn_version;
  if (!ParseIsa(c.isa, &info.isa))
    return LoadError(from + ": the context binary names an unknown ISA '" + c.isa + "' (known: " + IsaNameList() + ")");
  if (c.onednn_version != OneDnnVersion() || reader.major() != kContextBinaryMajor)
    return LoadError(from + ": " + BuildMismatchMessage(info, OneDnnVersion(), kContextBinaryMajor));
  Isa host;
  ParseIsa(ep->host_isa, &host);
  if (IsaRank(info.isa) > IsaRank(host)) return LoadError(from + ": " + IsaTooHighMessage(info.isa, host, ep->host_emulated));
  return nullptr;
}

}  // namespace

// Validates the binary once and checks its compatibility block: INVALID_GRAPH naming `from` on any problem.
// With `deferred` (and verify_weights on), the weights' content hashes are only started here, on background
// threads; the caller finishes *deferred before it returns a session, and reports its failure first.
EpctxStatus* OpenChecked(AotCpuEp* ep, const std::string& from, const void* data, size_t size,
                         std::shared_ptr<ContextBinaryReader>* reader, WeightVerification* deferred) {
  const bool defer = deferred && ep->options.verify_weights;
  CheckResult r = OpenBinary(data, size, reader, ep->options.verify_weights && !defer);
  if (!r.ok) return LoadError(from + ": " + r.reason);
  if (defer) deferred->Start((*reader)->tensors(), WeightVerification::DefaultBackgroundThreads((*reader)->tensors()));
  return CheckCompat(ep, from, **reader);
}

namespace {

struct LoadedBinary {
  bool embedded = false;  // bytes borrowed from the model (valid for this session only)
  std::shared_ptr<ContextBinaryReader> reader;
  std::shared_ptr<const void> keep;
  const void* data = nullptr;
  size_t size = 0;
  std::string from;  // file path, or "node '<name>'" for an embedded payload
  // The weights' content hashes, running while the graphs are built (OpenChecked); finished before the session is.
  std::unique_ptr<WeightVerification> verify = std::make_unique<WeightVerification>();
  // For ReportEpContextLoad once verified.
  const EpctxNode* fused_node = nullptr;
  bool embedded_report = false;
  uint64_t mapped = 0, read = 0;
  std::chrono::steady_clock::time_point t0;
};

}  // namespace

EpctxStatus* LoadError(const std::string& message) { return plugin::LoadError(g_api, kEpName, message); }

namespace {

struct PendingNode {
  size_t index;
  std::string name, partition;
};

// Maps and validates the binaries of the main_context nodes (their weights' hashes started, not finished) and builds
// every node's graph from them, into *binaries and *parts. LoadContextNodes finishes the hashing.
EpctxStatus* LoadContextNodesUnverified(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes,
                                        const std::vector<size_t>& loaded, std::vector<LoadedBinary>& binaries,
                                        std::vector<PendingNode>& nodes, std::vector<std::shared_ptr<Partition>>* parts) {
  using Pending = PendingNode;
  if (ep->options.share_ep_contexts) {
    // Weight sharing: when every graph this session needs waits in the workspace, take them; the file is not opened.
    std::vector<std::string> wanted;
    for (size_t i : loaded) {
      const EpctxNode* node = nullptr;
      AOT_RETURN_IF_ERROR(g_api->Graph_GetNodes(graphs[i], &node, 1));
      bool has_partition = false;
      std::string partition;
      AOT_RETURN_IF_ERROR(plugin::StringAttr(g_api, kEpName, node, "partition_name", &has_partition, &partition));
      wanted.push_back(has_partition && !partition.empty() ? partition : g_api->Node_GetName(node));
    }
    std::vector<std::shared_ptr<SharedBinary>> shared;
    if (InferenceWorkspace::Instance().TakeAll(wanted, &shared)) {
      for (size_t k = 0; k < loaded.size(); ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        CheckResult r = LoadPartitions(*shared[k]->reader, shared[k]->keep, DynamicOptionsOf(ep), {wanted[k]}, parts);
        if (!r.ok) return LoadError(shared[k]->from + ": " + r.reason);
        if (g_api->ReportEpContextLoad)  // nothing mapped or read: the graph came from the shared workspace
          AOT_RETURN_IF_ERROR(g_api->ReportEpContextLoad(fused_nodes[loaded[k]], shared[k]->from.c_str(), 0, 0,
                                                         MsSince(t0)));
      }
      return nullptr;
    }
  }
  for (size_t i : loaded) {
    const EpctxNode* node = nullptr;
    AOT_RETURN_IF_ERROR(g_api->Graph_GetNodes(graphs[i], &node, 1));
    const std::string name = g_api->Node_GetName(node);
    int64_t main_context = 1, embed_mode = 1;
    AOT_RETURN_IF_ERROR(plugin::IntAttr(g_api, kEpName, node, "main_context", 1, &main_context));
    AOT_RETURN_IF_ERROR(plugin::IntAttr(g_api, kEpName, node, "embed_mode", 1, &embed_mode));
    bool has_partition = false, has_cache = false;
    std::string partition, cache;
    AOT_RETURN_IF_ERROR(plugin::StringAttr(g_api, kEpName, node, "partition_name", &has_partition, &partition));
    if (!has_partition || partition.empty()) partition = name;
    nodes.push_back({i, name, partition});
    if (main_context == 0) continue;
    const auto t0 = std::chrono::steady_clock::now();
    LoadedBinary b;
    uint64_t mapped = 0, read = 0;
    if (embed_mode == 1) {
      const EpctxOpAttr* attr = g_api->Node_GetAttributeByName(node, "ep_cache_context");
      if (!attr) return LoadError("node '" + name + "' (embed_mode=1) has no ep_cache_context");
      const char* data = nullptr;
      size_t length = 0;
      if (EpctxStatus* st = g_api->OpAttr_GetString(attr, &data, &length)) {
        g_api->ReleaseStatus(st);
        return LoadError("node '" + name + "': attribute ep_cache_context is not a string");
      }
      b.from = "node '" + name + "'";
      b.embedded = true;
      if (reinterpret_cast<uintptr_t>(data) % 16 == 0) {  // the model's bytes stay valid until release: no copy
        b.data = data;
      } else {  // oneDNN wants aligned weights (64-byte aligned relative to the binary's start): copy once
        auto copy = std::shared_ptr<unsigned char>(static_cast<unsigned char*>(std::aligned_alloc(64, (length + 63) / 64 * 64 + 64)), std::free);
        if (!copy) return Error(EPCTX_FAIL, "out of memory copying the payload of node '" + name + "'");
        std::memcpy(copy.get(), data, length);
        b.keep = copy;
        b.data = copy.get();
      }
      b.size = length;
      read = length;
    } else {
      AOT_RETURN_IF_ERROR(plugin::StringAttr(g_api, kEpName, node, "ep_cache_context", &has_cache, &cache));
      if (!has_cache) return LoadError("node '" + name + "' (main_context=1, embed_mode=0) has no ep_cache_context");
      std::string path, real_path;
      AOT_RETURN_IF_ERROR(plugin::ResolveContextBinary(g_api, kEpName, graphs[i], name, cache, ep->context.file_path,
                                                      &path, &real_path));
      auto map = std::make_shared<plugin::MappedFile>();
      std::string why;
      if (!plugin::MapFile(real_path, map.get(), &why)) return LoadError("node '" + name + "': " + why);
      b.keep = map;
      b.data = map->data();
      b.size = map->size();
      b.from = path;
      mapped = map->size();
    }
    b.fused_node = fused_nodes[i];
    b.embedded_report = embed_mode == 1;
    b.mapped = mapped;
    b.read = read;
    b.t0 = t0;
    binaries.push_back(std::move(b));  // before OpenChecked: a failure still finishes the hashing it started
    LoadedBinary& last = binaries.back();
    AOT_RETURN_IF_ERROR(OpenChecked(ep, last.from, last.data, last.size, &last.reader, last.verify.get()));
  }
  // Every node takes its graph by partition name from the binaries loaded above.
  for (const Pending& n : nodes) {
    const LoadedBinary* found = nullptr;
    for (const LoadedBinary& b : binaries) {
      for (const GraphView& gv : b.reader->graphs())
        if (gv.name == n.partition) found = &b;
      if (found) break;
    }
    std::string graph_name = n.partition;
    if (!found && binaries.size() == 1 && binaries[0].reader->graphs().size() == 1) {
      found = &binaries[0];  // a lone graph, whatever its name
      graph_name = std::string(found->reader->graphs()[0].name);
    }
    if (!found)
      return LoadError("node '" + n.name + "' refers to partition '" + n.partition +
                       "', which no context binary loaded by a main_context=1 node holds");
    std::vector<std::shared_ptr<Partition>> one;
    CheckResult r = LoadPartitions(*found->reader, found->keep, DynamicOptionsOf(ep), {graph_name}, &one);
    if (!r.ok) return LoadError(found->from + ": " + r.reason);
    parts->push_back(std::move(one[0]));
  }
  return nullptr;
}

}  // namespace

// Loads the EPContext nodes `loaded` into *parts. The weights are hashed while the graphs are built (building a
// oneDNN primitive reads no weight byte) and the verdict is awaited before anything is returned or shared, so a
// session never exists over unverified weights. A hash mismatch is reported before any error found later in the load,
// as when the hashing came first.
EpctxStatus* LoadContextNodes(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes,
                              const std::vector<size_t>& loaded, std::vector<std::shared_ptr<Partition>>* parts) {
  std::vector<LoadedBinary> binaries;
  std::vector<PendingNode> nodes;
  EpctxStatus* status = LoadContextNodesUnverified(ep, graphs, fused_nodes, loaded, binaries, nodes, parts);
  for (LoadedBinary& b : binaries) {
    CheckResult r = b.verify->Finish();
    if (r.ok) continue;
    if (status) g_api->ReleaseStatus(status);
    parts->clear();
    return LoadError(b.from + ": " + r.reason);
  }
  if (status) return status;
  for (const LoadedBinary& b : binaries)
    if (g_api->ReportEpContextLoad)
      AOT_RETURN_IF_ERROR(g_api->ReportEpContextLoad(b.fused_node, b.embedded_report ? "" : b.from.c_str(), b.mapped,
                                                     b.read, MsSince(b.t0)));
  if (ep->options.share_ep_contexts) {
    // The graphs of the mapped binaries that this session does not run wait for later sessions.
    std::vector<std::string> used;
    for (const PendingNode& n : nodes) used.push_back(n.partition);
    for (const LoadedBinary& b : binaries) {
      if (b.embedded) continue;
      auto shared = std::make_shared<SharedBinary>();
      shared->keep = b.keep;
      shared->reader = b.reader;
      shared->from = b.from;
      InferenceWorkspace::Instance().Offer(shared, used);
    }
  }
  return nullptr;
}

}  // namespace aotcpu
}  // namespace epctx
