#include "epcontext/context_model.h"

#include <fcntl.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <climits>
#include <cstring>
#include <algorithm>
#include <optional>
#include <set>

#include "epcontext/paths.h"
#include "epcontext/stale_temporaries.h"
#include "model/external_data.h"
#include "model/ep_context_schema.h"
#include "model/model.h"
#include "model/tensor_proto.h"

namespace epctx {

Status WriteFileAtomically(const std::string& path, const std::string& bytes, bool no_replace) {
  RemoveStaleTemporaries(path);  // what a killed writer of this file left behind
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  RETURN_ERROR_IF(fd < 0, FAIL, "cannot write '", path, "': ", std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return MakeStatus(ErrorCode::FAIL, "cannot write '", path, "': ", std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return MakeStatus(ErrorCode::FAIL, "cannot write '", path, "': ", std::strerror(e));
  }
  int rc = no_replace ? ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE)
                      : ::rename(tmp.c_str(), path.c_str());
  if (rc != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    if (e == EEXIST)
      return MakeStatus(ErrorCode::FAIL, "Failed to generate EP context model since the file '", path,
                        "' exists already. Please remove the EP context model if you want to re-generate it.");
    return MakeStatus(ErrorCode::FAIL, "cannot write '", path, "': ", std::strerror(e));
  }
  return Status::OK();
}

namespace {

// Domain of fused nodes in a partitioned graph (plugin/plugin_ep.h's kFusedDomain; epcontext does not include plugin).
constexpr const char* kFusedNodeDomain = "epctx.fused";

void AttrToProto(const Attribute& a, onnx::AttributeProto* p) {
  p->set_name(a.name);
  switch (a.type) {
    case Attribute::Type::kInt: p->set_type(onnx::AttributeProto::INT); p->set_i(a.i); break;
    case Attribute::Type::kFloat: p->set_type(onnx::AttributeProto::FLOAT); p->set_f(a.f); break;
    case Attribute::Type::kString: p->set_type(onnx::AttributeProto::STRING); p->set_s(a.s); break;
    case Attribute::Type::kInts:
      p->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : a.ints) p->add_ints(v);
      break;
    case Attribute::Type::kFloats:
      p->set_type(onnx::AttributeProto::FLOATS);
      for (float v : a.floats) p->add_floats(v);
      break;
    case Attribute::Type::kStrings:
      p->set_type(onnx::AttributeProto::STRINGS);
      for (const auto& v : a.strings) p->add_strings(v);
      break;
    default: break;
  }
}

void CollectUsedNames(const onnx::GraphProto& g, std::set<std::string>* used) {
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) used->insert(in);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectUsedNames(a.g(), used);
      for (const auto& sg : a.graphs()) CollectUsedNames(sg, used);
    }
  }
}


// Where a source initializer's bytes are, when it is stored in an external file.
std::optional<ExternalDataLocation> ExternalLocationOf(const onnx::TensorProto& tp) {
  if (tp.data_location() != onnx::TensorProto::EXTERNAL) return std::nullopt;
  ExternalDataLocation loc;
  int64_t length = -1;
  for (const auto& e : tp.external_data()) {
    if (e.key() == "location") loc.path = e.value();
    if (e.key() == "offset") loc.offset = std::strtoll(e.value().c_str(), nullptr, 10);
    if (e.key() == "length") length = std::strtoll(e.value().c_str(), nullptr, 10);
  }
  if (loc.path.empty()) return std::nullopt;
  if (length < 0) {  // up to the end of the file: the tensor's byte size
    int64_t n = 1;
    for (int64_t d : tp.dims()) n *= d;
    length = static_cast<int64_t>(FileByteSize(static_cast<DataType>(tp.data_type()), n));  // int4: packed
  }
  loc.size = static_cast<size_t>(length);
  return loc;
}

void SetExternal(onnx::TensorProto* tp, const std::string& location, int64_t offset, size_t size) {
  tp->clear_raw_data();
  tp->clear_external_data();
  tp->set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = tp->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", location);
  kv("offset", std::to_string(offset));
  kv("length", std::to_string(size));
}

// One initializer of the output model: its proto (in the output graph), its data (main graph: the loaded tensor;
// subgraphs: decoded when needed) and its location in the source model if that was an external file.
struct InitializerSlot {
  onnx::TensorProto* proto;
  Tensor tensor;
  std::optional<ExternalDataLocation> source;
};

// Subgraph initializers under `node`, innermost graphs first, each graph's in ascending name order.
void CollectSubgraphInitializers(onnx::NodeProto* node, std::vector<InitializerSlot>* slots) {
  auto visit = [&](onnx::GraphProto* g) {
    for (auto& n : *g->mutable_node()) CollectSubgraphInitializers(&n, slots);
    std::vector<onnx::TensorProto*> inits;
    for (auto& tp : *g->mutable_initializer()) inits.push_back(&tp);
    std::sort(inits.begin(), inits.end(),
              [](const onnx::TensorProto* a, const onnx::TensorProto* b) { return a->name() < b->name(); });
    for (onnx::TensorProto* tp : inits) slots->push_back(InitializerSlot{tp, Tensor(), ExternalLocationOf(*tp)});
  };
  for (auto& a : *node->mutable_attribute()) {
    if (a.has_g()) visit(a.mutable_g());
    for (auto& sub : *a.mutable_graphs()) visit(&sub);
  }
}

// A location returned by an initializer-location function must have the tensor's byte size and obey the rules every
// model load applies (relative, no '..', inside the output model's folder, an existing file). The file's length is
// not checked: a caller may still hold the bytes in a write buffer, as ONNX Runtime's own Python example does.
Status CheckReturnedLocation(const ExternalDataLocation& loc, const Tensor& tensor, const std::string& folder,
                             const std::string& what) {
  const uint64_t file_bytes = FileByteSize(tensor.dtype(), tensor.NumElements());  // int4 is packed in files
  RETURN_ERROR_IF(loc.size != file_bytes || loc.offset < 0, FAIL, "the initializer location function returned '",
                  loc.path, "' offset ", loc.offset, " size ", loc.size, " for ", what, ", which has ",
                  file_bytes, " bytes");
  StatusOr<std::string> path = ResolveExternalPath(folder, loc.path, what);
  if (!path.ok())
    return MakeStatus(ErrorCode::FAIL, "the initializer location function returned an unusable location for ", what,
                      ": ", path.status().message());
  return Status::OK();
}

// True when `g` or a graph nested in it holds a fused node (a partition some EP compiled).
bool HoldsFusedNodes(const Graph& g) {
  for (const Node& n : g.nodes) {
    if (n.domain == kFusedNodeDomain) return true;
    for (const auto& [an, a] : n.attributes)
      if (a.g && HoldsFusedNodes(*a.g)) return true;
  }
  return false;
}

void AppendEpContextNode(const Node& c, onnx::GraphProto* g) {
  auto* np = g->add_node();
  np->set_name(c.name);
  np->set_op_type(c.op_type);
  np->set_domain(c.domain);
  for (const auto& i : c.inputs) np->add_input(i);
  for (const auto& o : c.outputs) np->add_output(o);
  np->set_doc_string("EPContext node for " + c.name);
  for (const auto& [an, a] : c.attributes) AttrToProto(a, np->add_attribute());
}

Status WriteSubgraph(const Graph& part, const onnx::GraphProto& src, const ContextModelSpec& spec, size_t* written,
                     onnx::GraphProto* out);

// Appends the nodes of `part` (a partitioned graph) to `out` in topological order: each fused node becomes the
// EPContext node its EP returned; every other node is copied from `src` (the same graph in the source model),
// and its subgraph attributes that hold partitions are rewritten the same way (the others stay as the source
// wrote them). `written` counts the EPContext nodes.
Status WriteNodes(const Graph& part, const onnx::GraphProto& src, const ContextModelSpec& spec, size_t* written,
                  onnx::GraphProto* out) {
  // Source nodes by their first output (outputs are unique in SSA form).
  std::map<std::string, const onnx::NodeProto*> by_output;
  for (const auto& n : src.node())
    for (const auto& o : n.output())
      if (!o.empty()) {
        by_output[o] = &n;
        break;
      }
  ASSIGN_OR_RETURN(std::vector<size_t> order, part.TopologicalOrder());
  for (size_t idx : order) {
    const Node& n = part.nodes[idx];
    if (n.domain == kFusedNodeDomain) {
      auto it = spec.ep_context_nodes.find(n.name);
      RETURN_ERROR_IF(it == spec.ep_context_nodes.end(), INVALID_GRAPH,
                      "Encountered an invalid node while compiling a model. Please ensure the input model is not "
                      "already compiled.");
      AppendEpContextNode(it->second, out);
      ++*written;
      continue;
    }
    const onnx::NodeProto* p = nullptr;
    for (const auto& o : n.outputs)
      if (!o.empty()) {
        auto it = by_output.find(o);
        if (it != by_output.end()) p = it->second;
        break;
      }
    RETURN_ERROR_IF(!p, FAIL, "internal: no source node for ", n.Describe(), " in graph '", part.name, "'");
    onnx::NodeProto* np = out->add_node();
    *np = *p;
    for (auto& a : *np->mutable_attribute()) {
      if (!a.has_g()) continue;
      auto it = n.attributes.find(a.name());
      if (it == n.attributes.end() || !it->second.g || !HoldsFusedNodes(*it->second.g)) continue;
      onnx::GraphProto rewritten;
      RETURN_IF_ERROR_CTX(WriteSubgraph(*it->second.g, a.g(), spec, written, &rewritten), "subgraph '",
                          a.name(), "' of ", n.Describe());
      *a.mutable_g() = std::move(rewritten);
    }
  }
  return Status::OK();
}

// A control-flow body holding partitions: its inputs and outputs as the source declares them, its nodes as
// WriteNodes writes them, the source's initializers and value_info that are still referenced (a partition's weights
// may now live only in its EP's context). Initializer locations are decided later, for every graph alike.
Status WriteSubgraph(const Graph& part, const onnx::GraphProto& src, const ContextModelSpec& spec, size_t* written,
                     onnx::GraphProto* out) {
  out->set_name(src.name());
  out->set_doc_string(src.doc_string());
  for (const auto& in : src.input()) *out->add_input() = in;
  for (const auto& o : src.output()) *out->add_output() = o;
  RETURN_IF_ERROR(WriteNodes(part, src, spec, written, out));
  std::set<std::string> used;
  CollectUsedNames(*out, &used);
  for (const auto& o : src.output()) used.insert(o.name());
  for (const auto& tp : src.initializer())
    if (used.count(tp.name())) *out->add_initializer() = tp;
  for (const auto& vi : src.value_info())
    if (used.count(vi.name())) *out->add_value_info() = vi;
  return Status::OK();
}

}  // namespace

bool HoldsEpContextNodes(const Graph& g) {
  for (const Node& n : g.nodes) {
    if (n.op_type == kEpContextOp) return true;
    for (const auto& [an, a] : n.attributes)
      if (a.g && HoldsEpContextNodes(*a.g)) return true;
  }
  return false;
}

Status WriteContextModel(const ContextModelSpec& spec) {
  RegisterEpContextSchema();
  const onnx::ModelProto& src = *spec.source->proto;
  const onnx::GraphProto& sg = src.graph();
  onnx::ModelProto out;
  out.set_ir_version(8);
  out.set_producer_name("epctx");
  out.set_producer_version(EPCTX_VERSION);
  bool has_ms = false;
  for (const auto& os : src.opset_import()) {
    *out.add_opset_import() = os;
    has_ms |= os.domain() == kMsDomain;
  }
  if (!has_ms) {
    auto* os = out.add_opset_import();
    os->set_domain(kMsDomain);
    os->set_version(1);
  }
  std::map<std::string, std::string> metadata;
  for (const auto& p : src.metadata_props()) metadata[p.key()] = p.value();
  for (const auto& [ep, info] : spec.compatibility)
    if (!info.empty()) metadata["ep_compatibility_info." + ep] = info;
  for (const auto& [k, v] : spec.metadata) {
    if (v.empty()) metadata.erase(k);
    else metadata[k] = v;
  }
  for (const auto& [k, v] : metadata) {
    auto* p = out.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  }
  onnx::GraphProto* g = out.mutable_graph();
  g->set_name(sg.name());
  g->set_doc_string(sg.doc_string());
  std::set<std::string> init_names;
  for (const auto& i : sg.initializer()) init_names.insert(i.name());
  for (const auto& in : sg.input())
    if (!init_names.count(in.name())) *g->add_input() = in;
  for (const auto& o : sg.output()) *g->add_output() = o;

  size_t written = 0;
  RETURN_IF_ERROR(WriteNodes(*spec.partitioned, sg, spec, &written, g));
  // Every partition lives in a graph attribute WriteNodes rewrites; were one ever left out, its EP's other nodes
  // might name a binary no written node loads: refuse rather than write a model that fails or runs slower silently.
  RETURN_ERROR_IF(written != spec.ep_context_nodes.size(), FAIL, spec.ep_context_nodes.size() - written, " of the ",
                  spec.ep_context_nodes.size(), " compiled partitions could not be written to the context model '",
                  spec.output_path, "' (they lie inside control-flow bodies it cannot rewrite)");
  std::set<std::string> used;
  CollectUsedNames(*g, &used);
  for (const auto& o : sg.output()) used.insert(o.name());
  for (const auto& vi : sg.value_info())
    if (used.count(vi.name())) *g->add_value_info() = vi;

  // Initializers: embedded from the loaded tensors (mapped external data is read here), in one external file, or
  // where the caller's function says. Visited in ONNX Runtime's order: subgraphs (innermost first), then the main
  // graph, each in ascending name order.
  const GenerationOptions kLegacy;
  const GenerationOptions& gen = spec.options ? *spec.options : kLegacy;
  std::string ext_bytes;
  const std::string folder = FolderOfPath(spec.output_path);
  std::map<std::string, ExternalDataLocation> source_external;
  for (const auto& tp : sg.initializer())
    if (auto loc = ExternalLocationOf(tp)) source_external[tp.name()] = *loc;
  std::vector<InitializerSlot> slots;
  for (auto& n : *g->mutable_node()) CollectSubgraphInitializers(&n, &slots);
  for (const auto& [name, tensor] : spec.partitioned->initializers) {
    if (!used.count(name)) continue;
    auto* tp = g->add_initializer();
    TensorToProto(tensor, name, tp);
    auto it = source_external.find(name);
    InitializerSlot slot{tp, tensor, std::nullopt};
    if (it != source_external.end() && it->second.size == FileByteSize(tensor.dtype(), tensor.NumElements())) slot.source = it->second;
    slots.push_back(std::move(slot));
  }
  for (InitializerSlot& slot : slots) {
    onnx::TensorProto* tp = slot.proto;
    const std::string what = "initializer '" + tp->name() + "'";
    const bool needs_tensor = !slot.tensor.defined() &&
                              (gen.initializer_location || !spec.external_initializers_file.empty() || slot.source);
    if (needs_tensor) {  // a subgraph initializer, still as the source wrote it
      ASSIGN_OR_RETURN(slot.tensor, TensorFromProto(*tp, what, spec.source->external_data.get()));
      const std::string name = tp->name();
      tp->Clear();
      TensorToProto(slot.tensor, name, tp);  // embedded; the source's external file is never referenced
    }
    if (!slot.tensor.defined() || slot.tensor.dtype() == DataType::kString) continue;  // strings stay inline
    if (gen.initializer_location) {
      StatusOr<std::optional<ExternalDataLocation>> where =
          gen.initializer_location(tp->name(), slot.tensor, slot.source ? &*slot.source : nullptr);
      if (!where.ok()) return where.status();
      if (!where.value()) continue;
      const ExternalDataLocation& loc = *where.value();
      RETURN_IF_ERROR(CheckReturnedLocation(loc, slot.tensor, folder, what));
      SetExternal(tp, loc.path, loc.offset, loc.size);
    } else if (!spec.external_initializers_file.empty() && slot.tensor.SizeInBytes() >= gen.external_threshold) {
      size_t offset = (ext_bytes.size() + 63) / 64 * 64;
      ext_bytes.resize(offset);
      ext_bytes.append(tp->raw_data());
      SetExternal(tp, spec.external_initializers_file, static_cast<int64_t>(offset), tp->raw_data().size());
    }
  }
  std::string ext_path;
  if (!spec.external_initializers_file.empty()) {
    RETURN_ERROR_IF(spec.external_initializers_file[0] == '/', INVALID_ARGUMENT,
                    "ep.context_model_external_initializers_file_name must be a relative path, got '",
                    spec.external_initializers_file, "'");
    if (!ext_bytes.empty()) {  // an empty file is not written (nor is an older file of that name touched)
      ext_path = spec.stage_external_path.empty() ? folder + "/" + spec.external_initializers_file
                                                  : spec.stage_external_path;
      RETURN_IF_ERROR(WriteFileAtomically(ext_path, ext_bytes));
    }
  }
  // From here on a failure removes the external file written above: no partial output remains.
  struct RemoveOnFailure {
    const std::string& path;
    bool keep = false;
    ~RemoveOnFailure() {
      if (!keep && !path.empty()) ::unlink(path.c_str());
    }
  } ext_guard{ext_path};
  // A pending external file is checked under its pending name (the checker opens it beside the model).
  auto set_location = [&](const std::string& from, const std::string& to) {
    for (InitializerSlot& slot : slots)
      for (auto& e : *slot.proto->mutable_external_data())
        if (e.key() == "location" && e.value() == from) e.set_value(to);
  };
  std::string checked_location;
  if (!spec.stage_external_path.empty() && !ext_bytes.empty()) {
    const std::string& rel = spec.external_initializers_file;
    const size_t slash = rel.find_last_of('/');
    const size_t stage_slash = spec.stage_external_path.find_last_of('/');
    checked_location = (slash == std::string::npos ? std::string() : rel.substr(0, slash + 1)) +
                       spec.stage_external_path.substr(stage_slash == std::string::npos ? 0 : stage_slash + 1);
    set_location(rel, checked_location);
  }
  try {
    onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(8);
    std::unordered_map<std::string, int> opsets;
    for (const auto& os : out.opset_import()) opsets[os.domain()] = static_cast<int>(os.version());
    ctx.set_opset_imports(opsets);
    ctx.set_schema_registry(onnx::OpSchemaRegistry::Instance());
    ctx.set_model_dir(folder);  // the external initializers file, if any, is already in place
    CheckGraphAllowingShapelessTypes(g, ctx);  // as the loader checks it: a shapeless output type is valid ONNX
    if (!checked_location.empty()) set_location(checked_location, spec.external_initializers_file);
  } catch (const std::exception& e) {
    return MakeStatus(ErrorCode::FAIL, "the generated context model '", spec.output_path,
                      "' fails the ONNX checker: ", e.what());
  }
  std::string bytes;
  RETURN_ERROR_IF(out.ByteSizeLong() > static_cast<size_t>(INT_MAX), FAIL,
                  "Cannot serialize ONNX ModelProto larger than 2GB");
  RETURN_ERROR_IF(!out.SerializeToString(&bytes), INVALID_PROTOBUF,
                  "Protobuf serialization failed when generating EPContext model ", spec.output_path);
  Status st;
  switch (gen.output) {
    case GenerationOptions::Output::kFile:
      // A staged (weight-sharing) model goes to its unique pending name; the group applies the rule at publishing.
      st = WriteFileAtomically(spec.stage_model_path.empty() ? spec.output_path : spec.stage_model_path, bytes,
                               /*no_replace=*/gen.error_if_output_file_exists || !spec.stage_model_path.empty());
      break;
    case GenerationOptions::Output::kBuffer:
      st = gen.to_buffer(bytes);
      break;
    case GenerationOptions::Output::kWriteFunc:
      for (size_t done = 0; done < bytes.size() && st.ok(); done += kModelWriteChunkBytes)
        st = gen.write_func(bytes.data() + done, std::min(kModelWriteChunkBytes, bytes.size() - done));
      break;
  }
  ext_guard.keep = st.ok();
  return st;
}

}  // namespace epctx
