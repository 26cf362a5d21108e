#include "model/model.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <google/protobuf/io/coded_stream.h>

#include <climits>
#include <set>
#include <vector>

#include "core/mapped_file.h"
#include "model/ep_context_schema.h"
#include "model/inference_guards.h"
#include "model/external_data.h"
#include "model/functions.h"
#include "model/schemas_18_26.h"
#include "model/tensor_proto.h"
#include "model/topo_sort.h"

namespace epctx {

namespace {

std::string FolderOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status ParseModel(const void* data, size_t size, const std::string& what, onnx::ModelProto* proto) {
  RETURN_ERROR_IF(size == 0, INVALID_PROTOBUF, "failed to load model ", what, ": the file is empty");
  RETURN_ERROR_IF(size > static_cast<size_t>(INT_MAX), INVALID_PROTOBUF, "failed to load model ", what,
                  ": ", size, " bytes is above protobuf's 2 GiB limit; store large weights as external data");
  google::protobuf::io::CodedInputStream in(static_cast<const uint8_t*>(data), static_cast<int>(size));
  in.SetTotalBytesLimit(INT_MAX);
  in.SetRecursionLimit(128);  // subgraph nesting; deeper is hostile
  RETURN_ERROR_IF(!proto->ParseFromCodedStream(&in) || !in.ConsumedEntireMessage(), INVALID_PROTOBUF,
                  "failed to load model ", what, ": not a valid ONNX protobuf (truncated or corrupted)");
  return Status::OK();
}

void ApplyFreeDimOverrides(onnx::GraphProto* g, const std::map<std::string, int64_t>& overrides) {
  if (overrides.empty()) return;
  for (auto& in : *g->mutable_input()) {
    if (!in.type().has_tensor_type() || !in.type().tensor_type().has_shape()) continue;
    for (auto& d : *in.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
      auto it = d.has_dim_param() ? overrides.find(d.dim_param()) : overrides.end();
      if (it == overrides.end() && !d.denotation().empty()) it = overrides.find(d.denotation());
      if (it != overrides.end()) d.set_dim_value(it->second);
    }
  }
}

Status ApplyInputShapes(onnx::GraphProto* g, const std::map<std::string, std::vector<int64_t>>& shapes) {
  std::set<std::string> used;
  for (auto& in : *g->mutable_input()) {
    auto it = shapes.find(in.name());
    if (it == shapes.end()) continue;
    used.insert(in.name());
    const std::vector<int64_t>& want = it->second;
    RETURN_ERROR_IF(!in.type().has_tensor_type(), INVALID_ARGUMENT, "input shape override for '", in.name(),
                    "': the input is not a tensor");
    auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    const bool had_shape = in.type().tensor_type().has_shape();
    RETURN_ERROR_IF(had_shape && shape->dim_size() != static_cast<int>(want.size()), INVALID_ARGUMENT,
                    "input shape override for '", in.name(), "' has rank ", want.size(), " but the input has rank ",
                    shape->dim_size());
    if (!had_shape || shape->dim_size() == 0)
      for (size_t d = 0; d < want.size(); ++d) shape->add_dim();
    for (size_t d = 0; d < want.size(); ++d) {
      auto* dim = shape->mutable_dim(static_cast<int>(d));
      RETURN_ERROR_IF(dim->has_dim_value() && dim->dim_value() != want[d], INVALID_ARGUMENT,
                      "input shape override for '", in.name(), "' sets dim ", d, " to ", want[d],
                      " but the model fixes it to ", dim->dim_value());
      dim->set_dim_value(want[d]);
    }
  }
  for (const auto& [name, dims] : shapes) {
    if (used.count(name)) continue;
    std::string inputs;
    for (const auto& in : g->input()) inputs += (inputs.empty() ? "" : ", ") + in.name();
    return MakeStatus(ErrorCode::INVALID_ARGUMENT, "input shape override for '", name,
                      "': the model has no input of that name (inputs: ", inputs, ")");
  }
  return Status::OK();
}

Status CheckExternalPaths(const onnx::GraphProto& g, const std::string& folder) {
  for (const auto& init : g.initializer()) {
    if (init.data_location() != onnx::TensorProto::EXTERNAL) continue;
    std::string location;
    for (const auto& kv : init.external_data())
      if (kv.key() == "location") location = kv.value();
    RETURN_IF_ERROR(ResolveExternalPath(folder, location, "initializer '" + init.name() + "'").status());
  }
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g()) RETURN_IF_ERROR(CheckExternalPaths(a.g(), folder));
      for (const auto& sg : a.graphs()) RETURN_IF_ERROR(CheckExternalPaths(sg, folder));
    }
  return Status::OK();
}

struct Converter {
  const ExternalDataResolver* resolver;
  std::map<std::string, int> opsets;

  Status ConvertAttribute(const onnx::AttributeProto& a, const Graph* owner, const std::string& node_desc,
                          Attribute* out) {
    out->name = a.name();
    std::string what = node_desc + " attribute '" + a.name() + "'";
    switch (a.type()) {
      case onnx::AttributeProto::FLOAT: out->type = Attribute::Type::kFloat; out->f = a.f(); break;
      case onnx::AttributeProto::INT: out->type = Attribute::Type::kInt; out->i = a.i(); break;
      case onnx::AttributeProto::STRING: out->type = Attribute::Type::kString; out->s = a.s(); break;
      case onnx::AttributeProto::TENSOR: {
        out->type = Attribute::Type::kTensor;
        ASSIGN_OR_RETURN(out->t, TensorFromProto(a.t(), what, resolver));
        break;
      }
      case onnx::AttributeProto::GRAPH: {
        out->type = Attribute::Type::kGraph;
        out->g = std::make_shared<Graph>();
        RETURN_IF_ERROR(ConvertGraph(a.g(), owner, out->g.get()));
        break;
      }
      case onnx::AttributeProto::FLOATS:
        out->type = Attribute::Type::kFloats;
        out->floats.assign(a.floats().begin(), a.floats().end());
        break;
      case onnx::AttributeProto::INTS:
        out->type = Attribute::Type::kInts;
        out->ints.assign(a.ints().begin(), a.ints().end());
        break;
      case onnx::AttributeProto::STRINGS:
        out->type = Attribute::Type::kStrings;
        out->strings.assign(a.strings().begin(), a.strings().end());
        break;
      case onnx::AttributeProto::TENSORS:
        out->type = Attribute::Type::kTensors;
        for (const auto& t : a.tensors()) {
          ASSIGN_OR_RETURN(Tensor tensor, TensorFromProto(t, what, resolver));
          out->tensors.push_back(std::move(tensor));
        }
        break;
      case onnx::AttributeProto::GRAPHS:
        out->type = Attribute::Type::kGraphs;
        for (const auto& g : a.graphs()) {
          auto sub = std::make_shared<Graph>();
          RETURN_IF_ERROR(ConvertGraph(g, owner, sub.get()));
          out->graphs.push_back(sub);
        }
        break;
      case onnx::AttributeProto::SPARSE_TENSOR: out->type = Attribute::Type::kSparseTensor; break;
      case onnx::AttributeProto::TYPE_PROTO: out->type = Attribute::Type::kTypeProto; break;
      case onnx::AttributeProto::TYPE_PROTOS: out->type = Attribute::Type::kTypeProtos; break;
      default:
        return MakeStatus(ErrorCode::INVALID_GRAPH, what, " has unknown type ", static_cast<int>(a.type()));
    }
    return Status::OK();
  }

  Status ConvertGraph(const onnx::GraphProto& gp, const Graph* parent, Graph* g) {
    g->name = gp.name();
    g->parent = parent;
    g->opsets = opsets;
    for (const auto& init : gp.initializer()) {
      RETURN_ERROR_IF(init.name().empty(), INVALID_GRAPH, "graph '", gp.name(), "' has an initializer without a name");
      ASSIGN_OR_RETURN(Tensor t, TensorFromProto(init, "initializer '" + init.name() + "'", resolver));
      if (init.data_location() == onnx::TensorProto::EXTERNAL) {
        std::string location;
        uint64_t offset = 0;
        for (const auto& kv : init.external_data()) {
          if (kv.key() == "location") location = kv.value();
          if (kv.key() == "offset") offset = std::strtoull(kv.value().c_str(), nullptr, 10);  // validated above
        }
        ASSIGN_OR_RETURN(std::string path, ResolveExternalPath(resolver->base_dir(), location, init.name()));
        g->external_initializers[init.name()] = Graph::ExternalLocation{path, offset, FileByteSize(t.dtype(), t.NumElements())};
      }
      g->initializers[init.name()] = std::move(t);
    }
    RETURN_ERROR_IF(gp.sparse_initializer_size() > 0, NOT_IMPLEMENTED, "graph '", gp.name(),
                    "' has sparse initializers, which epctx does not support");
    for (const auto& in : gp.input()) g->inputs.push_back(ValueInfo{in.name(), ValueTypeFromProto(in.type())});
    for (const auto& out : gp.output()) g->outputs.push_back(ValueInfo{out.name(), ValueTypeFromProto(out.type())});
    for (const auto& vi : gp.value_info()) g->value_types[vi.name()] = ValueTypeFromProto(vi.type());
    g->nodes.reserve(gp.node_size());
    for (const auto& np : gp.node()) {
      Node n;
      n.name = np.name();
      n.op_type = np.op_type();
      n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
      auto it = opsets.find(n.domain);
      n.opset = it == opsets.end() ? 0 : it->second;
      n.inputs.assign(np.input().begin(), np.input().end());
      n.outputs.assign(np.output().begin(), np.output().end());
      n.doc_string = np.doc_string();
      for (const auto& a : np.attribute()) {
        Attribute attr;
        RETURN_IF_ERROR(ConvertAttribute(a, g, n.Describe(), &attr));
        n.attributes[a.name()] = std::move(attr);
      }
      g->nodes.push_back(std::move(n));
    }
    return Status::OK();
  }
};

}  // namespace

// True for a compiled model: every node of the top-level graph is an EPContext node. Such a model does not need
// the ONNX checker or shape inference (the first use of either costs ~10 ms to build ONNX's schema registry, more
// than everything else a session from a _ctx.onnx does); CheckCompiledGraph checks what they would.
bool IsCompiledModel(const onnx::GraphProto& g) {
  if (g.node_size() == 0) return false;
  for (const auto& n : g.node())
    if (n.op_type() != kEpContextOp || n.domain() != kMsDomain) return false;
  return true;
}

// The structural rules the checker enforces, for an EPContext-only graph: typed graph inputs/outputs, unique
// value names (SSA), every node input defined earlier (by a graph input, an initializer or a previous node), every
// graph output produced, string/int/float attributes only.
Status CheckCompiledGraph(const onnx::GraphProto& g, const std::string& what) {
  std::set<std::string> defined;
  auto typed = [&](const onnx::ValueInfoProto& vi, const char* kind) -> Status {
    RETURN_ERROR_IF(vi.name().empty(), INVALID_GRAPH, "model ", what, ": a graph ", kind, " has no name");
    RETURN_ERROR_IF(!vi.type().has_tensor_type() || vi.type().tensor_type().elem_type() == 0, INVALID_GRAPH,
                    "model ", what, ": graph ", kind, " '", vi.name(), "' has no tensor element type");
    return Status::OK();
  };
  for (const auto& i : g.initializer()) {
    RETURN_ERROR_IF(i.name().empty() || !defined.insert(i.name()).second, INVALID_GRAPH, "model ", what,
                    ": initializer name '", i.name(), "' is empty or duplicated");
  }
  for (const auto& in : g.input()) {
    RETURN_IF_ERROR(typed(in, "input"));
    defined.insert(in.name());
  }
  for (const auto& n : g.node()) {
    for (const auto& i : n.input())
      RETURN_ERROR_IF(!i.empty() && !defined.count(i), INVALID_GRAPH, "model ", what, ": node '", n.name(),
                      "' reads '", i, "', which no graph input, initializer or earlier node defines");
    for (const auto& a : n.attribute()) {
      const auto t = a.type();
      RETURN_ERROR_IF(t != onnx::AttributeProto::INT && t != onnx::AttributeProto::STRING &&
                          t != onnx::AttributeProto::FLOAT,
                      INVALID_GRAPH, "model ", what, ": EPContext node '", n.name(), "' attribute '", a.name(),
                      "' has an unexpected type");
    }
    for (const auto& o : n.output())
      RETURN_ERROR_IF(!o.empty() && !defined.insert(o).second, INVALID_GRAPH, "model ", what, ": value '", o,
                      "' of node '", n.name(), "' is defined twice");
  }
  for (const auto& out : g.output()) {
    RETURN_IF_ERROR(typed(out, "output"));
    RETURN_ERROR_IF(!defined.count(out.name()), INVALID_GRAPH, "model ", what, ": graph output '", out.name(),
                    "' is produced by no node");
  }
  return Status::OK();
}

StatusOr<std::shared_ptr<Model>> LoadModelFromProto(std::shared_ptr<onnx::ModelProto> proto, const std::string& path,
                                                    const ModelLoadOptions& options) {
  const std::string what = path.empty() ? std::string("(from memory)") : "'" + path + "'";
  RETURN_ERROR_IF(!proto->has_graph(), INVALID_GRAPH, "model ", what, " has no graph");
  RETURN_ERROR_IF(proto->ir_version() < kMinIrVersion || proto->ir_version() > kMaxIrVersion, INVALID_GRAPH,
                  "model ", what, " has IR version ", proto->ir_version(), "; epctx reads IR versions ",
                  kMinIrVersion, " to ", kMaxIrVersion, ", as ONNX Runtime 1.30");
  auto model = std::make_shared<Model>();
  model->path = path;
  model->folder = path.empty() ? options.external_data_folder : FolderOf(path);
  model->ir_version = proto->ir_version();
  model->producer_name = proto->producer_name();
  for (const auto& os : proto->opset_import()) {
    std::string domain = os.domain() == "ai.onnx" ? "" : os.domain();
    RETURN_ERROR_IF(model->opsets.count(domain), INVALID_GRAPH, "model ", what, " imports domain '", domain,
                    "' twice");
    model->opsets[domain] = static_cast<int>(os.version());
  }
  // A model may use only other domains (e.g. ai.onnx.preview.training); the default domain's opset is checked
  // when it is imported.
  if (model->opsets.count("")) {
    int default_opset = model->opsets[""];
    RETURN_ERROR_IF(default_opset < 1 || default_opset > kMaxDefaultOpset, INVALID_GRAPH, "model ", what,
                    " uses ONNX opset ", default_opset, "; epctx reads opsets 1 to ", kMaxDefaultOpset,
                    ", as ONNX Runtime 1.30");
  }
  if (model->opsets.count("ai.onnx.ml")) {
    int ml_opset = model->opsets["ai.onnx.ml"];
    RETURN_ERROR_IF(ml_opset < 1 || ml_opset > kMaxMlOpset, INVALID_GRAPH, "model ", what,
                    " uses ai.onnx.ml opset ", ml_opset, "; epctx reads ai.onnx.ml opsets 1 to ", kMaxMlOpset,
                    ", as ONNX Runtime 1.30");
  }
  for (const auto& p : proto->metadata_props()) model->metadata[p.key()] = p.value();

  if (!IsCompiledModel(proto->graph()))
    RETURN_IF_ERROR_CTX(ApplyInputShapes(proto->mutable_graph(), options.input_shapes), "model ", what);
  ApplyFreeDimOverrides(proto->mutable_graph(), options.free_dimension_overrides);

  // Our path rules for external data come before the ONNX checker, which only stats the files.
  RETURN_IF_ERROR(CheckExternalPaths(proto->graph(), model->folder));

  // Producers before consumers, as ONNX Runtime orders a graph whose file order is not topological (the checker,
  // shape inference and the writers of context models need it); a cycle or a value nobody produces is refused here.
  RETURN_IF_ERROR(SortNodesTopologically(proto->mutable_graph(), what));
  const bool compiled = IsCompiledModel(proto->graph());
  if (compiled && (options.run_checker || options.run_shape_inference))
    RETURN_IF_ERROR(CheckCompiledGraph(proto->graph(), what));
  // Model-local functions become their bodies before anything reads the graph (checker, inference, kernels).
  if (proto->functions_size() > 0) {
    RETURN_IF_ERROR(InlineModelFunctions(proto.get(), what));
    RETURN_IF_ERROR(SortNodesTopologically(proto->mutable_graph(), what));  // a body need not be sorted either
    for (const auto& os : proto->opset_import())  // the domains the functions' bodies brought in
      model->opsets.emplace(os.domain() == "ai.onnx" ? "" : os.domain(), static_cast<int>(os.version()));
  }
  RETURN_IF_ERROR(CheckElementTypes(proto->graph(), what));
  RETURN_IF_ERROR(MoveFloat8Int32DataToRaw(proto->mutable_graph(), what));
  if (!compiled) {
    RegisterEpContextSchema();  // context models are ordinary models to the checker
    RegisterNewerOpsetSchemas();  // opsets 18-26, which libonnx 1.12 does not know
  }
  if (options.run_checker && !compiled) {
    try {
      onnx::checker::CheckerContext ctx;
      ctx.set_ir_version(static_cast<int>(proto->ir_version()));
      std::unordered_map<std::string, int> opset_map(model->opsets.begin(), model->opsets.end());
      ctx.set_opset_imports(opset_map);
      ctx.set_schema_registry(onnx::OpSchemaRegistry::Instance());
      if (!model->folder.empty()) ctx.set_model_dir(model->folder);
      CheckGraphAllowingShapelessTypes(proto->mutable_graph(), ctx);
    } catch (const std::exception& e) {
      return MakeStatus(ErrorCode::INVALID_GRAPH, "model ", what, " failed the ONNX checker: ", e.what());
    }
  }
  if (options.run_shape_inference && !compiled) {
    InstallInferenceGuards();  // libonnx inference functions that crash on hostile ranks refuse them first
    try {
      // Not check_type: libonnx then refuses the whole model for one type-constraint break, and real exported models
      // have them (pytorch-operator's test_operator_repeat: a Constant typed int64 at an opset that allows floats).
      onnx::ShapeInferenceOptions sio{/*check_type=*/false, /*error_mode=*/0, /*enable_data_propagation=*/false};
      onnx::shape_inference::InferShapes(*proto, onnx::OpSchemaRegistry::Instance(), sio);
    } catch (const std::exception& e) {
      return MakeStatus(ErrorCode::INVALID_GRAPH, "model ", what, " failed ONNX shape inference: ", e.what());
    }
  }
  model->external_data = std::make_shared<ExternalDataResolver>(model->folder);
  Converter conv{model->external_data.get(), model->opsets};
  model->graph = std::make_shared<Graph>();
  RETURN_IF_ERROR_CTX(conv.ConvertGraph(proto->graph(), nullptr, model->graph.get()), "model ", what);
  model->proto = std::move(proto);
  return model;
}

namespace {

// Copies the value types of `gp` into `g`, whose nodes correspond one to one (same order) to the proto's; recurses
// into subgraphs the same way.
void RefreshValueTypes(const onnx::GraphProto& gp, Graph* g) {
  g->value_types.clear();
  for (const auto& vi : gp.value_info()) g->value_types[vi.name()] = ValueTypeFromProto(vi.type());
  for (size_t i = 0; i < g->inputs.size() && i < static_cast<size_t>(gp.input_size()); ++i)
    if (g->inputs[i].name == gp.input(static_cast<int>(i)).name())
      g->inputs[i].type = ValueTypeFromProto(gp.input(static_cast<int>(i)).type());
  for (size_t i = 0; i < g->outputs.size() && i < static_cast<size_t>(gp.output_size()); ++i)
    if (g->outputs[i].name == gp.output(static_cast<int>(i)).name())
      g->outputs[i].type = ValueTypeFromProto(gp.output(static_cast<int>(i)).type());
  if (static_cast<size_t>(gp.node_size()) != g->nodes.size()) return;
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    for (const auto& a : gp.node(static_cast<int>(i)).attribute()) {
      auto it = g->nodes[i].attributes.find(a.name());
      if (it == g->nodes[i].attributes.end()) continue;
      Attribute& attr = it->second;
      if (a.has_g() && attr.g) RefreshValueTypes(a.g(), attr.g.get());
      if (static_cast<size_t>(a.graphs_size()) == attr.graphs.size())
        for (size_t k = 0; k < attr.graphs.size(); ++k) RefreshValueTypes(a.graphs(static_cast<int>(k)), attr.graphs[k].get());
    }
  }
}

// Keeps the elements of `field` for which keep(index) is true, in order.
template <typename Field, typename Keep>
void KeepIf(Field* field, Keep keep) {
  int w = 0;
  for (int r = 0; r < field->size(); ++r) {
    if (!keep(r)) continue;
    if (w != r) field->SwapElements(w, r);
    ++w;
  }
  field->DeleteSubrange(w, field->size() - w);
}

}  // namespace

namespace {

// How many times each value name is defined in a graph and its subgraphs (inputs, initializers, node outputs).
void CountDefinitions(const Graph& g, std::map<std::string, int>* defs) {
  for (const auto& v : g.inputs) ++(*defs)[v.name];
  for (const auto& [name, t] : g.initializers) ++(*defs)[name];
  for (const Node& n : g.nodes) {
    for (const auto& o : n.outputs)
      if (!o.empty()) ++(*defs)[o];
    for (const auto& [name, a] : n.attributes) {
      if (a.g) CountDefinitions(*a.g, defs);
      for (const auto& sg : a.graphs) CountDefinitions(*sg, defs);
    }
  }
}

bool HasInlines(const InitializerRewrite& r) {
  if (!r.inline_ifs.empty()) return true;
  for (const auto& sub : r.subgraphs)
    if (HasInlines(sub)) return true;
  return false;
}

// Applies `ren` to the values the nodes of `g` read (and, when `own_values`, the values they write), in the Graph
// and its proto alike; nested subgraphs get their reads and their outputs renamed (they may name an enclosing value).
Status RenameValues(Graph* g, onnx::GraphProto* gp, const std::map<std::string, std::string>& ren, bool own_values) {
  RETURN_ERROR_IF(static_cast<size_t>(gp->node_size()) != g->nodes.size(), FAIL, "internal: graph '", g->name,
                  "' has ", g->nodes.size(), " nodes but its proto ", gp->node_size());
  auto renamed = [&ren](const std::string& v) {
    auto it = ren.find(v);
    return it == ren.end() ? v : it->second;
  };
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    Node& n = g->nodes[i];
    onnx::NodeProto* np = gp->mutable_node(static_cast<int>(i));
    RETURN_ERROR_IF(static_cast<size_t>(np->input_size()) != n.inputs.size() ||
                        static_cast<size_t>(np->output_size()) != n.outputs.size(),
                    FAIL, "internal: ", n.Describe(), " differs from its proto");
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      n.inputs[k] = renamed(n.inputs[k]);
      np->set_input(static_cast<int>(k), n.inputs[k]);
    }
    if (own_values)
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        n.outputs[k] = renamed(n.outputs[k]);
        np->set_output(static_cast<int>(k), n.outputs[k]);
      }
    for (auto& ap : *np->mutable_attribute()) {
      auto it = n.attributes.find(ap.name());
      if (it == n.attributes.end()) continue;
      if (ap.has_g() && it->second.g) RETURN_IF_ERROR(RenameValues(it->second.g.get(), ap.mutable_g(), ren, false));
      if (static_cast<size_t>(ap.graphs_size()) == it->second.graphs.size())
        for (size_t k = 0; k < it->second.graphs.size(); ++k)
          RETURN_IF_ERROR(RenameValues(it->second.graphs[k].get(), ap.mutable_graphs(static_cast<int>(k)), ren, false));
    }
  }
  if (!own_values) {
    for (auto& v : g->outputs) v.name = renamed(v.name);
    for (auto& v : *gp->mutable_output()) v.set_name(renamed(v.name()));
  }
  return Status::OK();
}

// A name not defined anywhere yet, made from `base`; records it.
std::string FreshName(const std::string& base, std::map<std::string, int>* defs) {
  std::string name = base + "_inlined";
  for (int k = 2; defs->count(name); ++k) name = base + "_inlined" + std::to_string(k);
  ++(*defs)[name];
  return name;
}

// Prepares the chosen branch of g.nodes[idx] (an If) for taking the If's place (InitializerRewrite::inline_ifs): renames
// its values, appends the Identity nodes its outputs need, and moves its initializers and value infos into `g`. The
// branch's nodes (Graph and proto) are then moved into `g` by the caller.
Status PrepareBranchInline(Graph* g, onnx::GraphProto* gp, size_t idx, const std::string& branch,
                           std::map<std::string, int>* defs, std::set<std::string>* node_names, Graph** out_branch,
                           onnx::GraphProto** out_proto) {
  Node& node = g->nodes[idx];
  onnx::NodeProto* np = gp->mutable_node(static_cast<int>(idx));
  auto it = node.attributes.find(branch);
  onnx::AttributeProto* ap = nullptr;
  for (auto& a : *np->mutable_attribute())
    if (a.name() == branch) ap = &a;
  RETURN_ERROR_IF(node.op_type != "If" || it == node.attributes.end() || !it->second.g || !ap || !ap->has_g(), FAIL,
                  "internal: ", node.Describe(), " has no branch '", branch, "' to inline");
  Graph& b = *it->second.g;
  onnx::GraphProto& bp = *ap->mutable_g();
  RETURN_ERROR_IF(!b.inputs.empty() || bp.sparse_initializer_size() > 0 || b.outputs.size() != node.outputs.size() ||
                      static_cast<size_t>(bp.node_size()) != b.nodes.size(),
                  FAIL, "internal: branch '", branch, "' of ", node.Describe(), " cannot be inlined");
  std::set<std::string> produced;
  for (const Node& n : b.nodes)
    for (const auto& o : n.outputs)
      if (!o.empty()) produced.insert(o);
  // Branch outputs computed here take the If's output names; the others (an initializer, an enclosing value, a value
  // output twice) are copied by an Identity.
  std::map<std::string, std::string> ren;
  std::vector<std::pair<std::string, std::string>> copies;  // (branch value, If output)
  std::set<std::string> to_if_output;
  for (size_t k = 0; k < b.outputs.size(); ++k) {
    const std::string& o = b.outputs[k].name;
    const std::string& y = node.outputs[k];
    if (y.empty()) continue;
    if (produced.count(o) && !ren.count(o)) {
      ren[o] = y;
      to_if_output.insert(y);
    } else {
      copies.emplace_back(o, y);
    }
  }
  // The branch's other values move to the enclosing scope: one defined elsewhere in the model too gets a fresh name.
  auto local = [&](const std::string& v) {
    if (ren.count(v)) return;
    if ((*defs)[v] > 1) ren[v] = FreshName(v, defs);
  };
  for (const auto& v : produced) local(v);
  for (const auto& [name, t] : b.initializers) local(name);
  RETURN_IF_ERROR(RenameValues(&b, &bp, ren, true));
  auto renamed = [&ren](const std::string& v) {
    auto r = ren.find(v);
    return r == ren.end() ? v : r->second;
  };
  const int opset = g->opsets.count("") ? g->opsets.at("") : node.opset;
  for (const auto& [o, y] : copies) {
    Node id;
    id.op_type = "Identity";
    id.opset = opset;
    id.name = node.name + "/" + y;
    id.inputs = {renamed(o)};
    id.outputs = {y};
    b.nodes.push_back(id);
    onnx::NodeProto* ip = bp.add_node();
    ip->set_op_type("Identity");
    ip->add_input(id.inputs[0]);
    ip->add_output(y);
    to_if_output.insert(y);
  }
  // Node names stay unique in the enclosing graph (names are how reports and EPs tell nodes apart).
  for (size_t i = 0; i < b.nodes.size(); ++i) {
    Node& n = b.nodes[i];
    std::string name = n.name.empty() ? node.name + "/" + n.op_type : n.name;
    if (node_names->count(name)) {
      std::string base = node.name + "/" + name;
      name = base;
      for (int k = 2; node_names->count(name); ++k) name = base + "#" + std::to_string(k);
    }
    node_names->insert(name);
    n.name = name;
    bp.mutable_node(static_cast<int>(i))->set_name(name);
    for (auto& [an, a] : n.attributes) {
      if (a.g) a.g->parent = g;
      for (auto& sg : a.graphs) sg->parent = g;
    }
  }
  // Initializers, external locations, value types and value infos join the enclosing graph.
  for (auto& [name, t] : b.initializers) g->initializers[renamed(name)] = t;
  for (auto& [name, loc] : b.external_initializers) g->external_initializers[renamed(name)] = loc;
  for (auto& [name, vt] : b.value_types)
    if (!to_if_output.count(renamed(name))) g->value_types[renamed(name)] = vt;
  for (auto& t : *bp.mutable_initializer()) {
    t.set_name(renamed(t.name()));
    gp->add_initializer()->Swap(&t);
  }
  for (auto& vi : *bp.mutable_value_info()) {
    vi.set_name(renamed(vi.name()));
    if (!to_if_output.count(vi.name())) gp->add_value_info()->Swap(&vi);
  }
  b.initializers.clear();
  b.external_initializers.clear();
  bp.clear_initializer();
  bp.clear_value_info();
  *out_branch = &b;
  *out_proto = &bp;
  return Status::OK();
}

// One graph of a rewrite, the Graph and its proto alike (subgraph rewrites first: nodes with subgraphs are kept).
Status RewriteGraph(Graph* graph, onnx::GraphProto* gp, const InitializerRewrite& rewrite,
                    std::map<std::string, int>* defs) {
  Graph& g = *graph;
  RETURN_ERROR_IF(static_cast<size_t>(gp->node_size()) != g.nodes.size(), FAIL, "internal: graph '", g.name, "' has ",
                  g.nodes.size(), " nodes but its proto ", gp->node_size());
  std::vector<bool> removed(g.nodes.size(), false);
  for (size_t i : rewrite.remove_nodes) {
    RETURN_ERROR_IF(i >= g.nodes.size(), FAIL, "internal: node index ", i, " out of range");
    removed[i] = true;
  }
  for (const InitializerRewrite& sub : rewrite.subgraphs) {
    RETURN_ERROR_IF(sub.node >= g.nodes.size() || removed[sub.node], FAIL, "internal: subgraph rewrite of node ",
                    sub.node, " which is out of range or removed");
    auto it = g.nodes[sub.node].attributes.find(sub.attribute);
    onnx::AttributeProto* ap = nullptr;
    for (auto& a : *gp->mutable_node(static_cast<int>(sub.node))->mutable_attribute())
      if (a.name() == sub.attribute) ap = &a;
    RETURN_ERROR_IF(it == g.nodes[sub.node].attributes.end() || !it->second.g || !ap || !ap->has_g(), FAIL,
                    "internal: node ", sub.node, " has no graph attribute '", sub.attribute, "'");
    RETURN_IF_ERROR(RewriteGraph(it->second.g.get(), ap->mutable_g(), sub, defs));
  }
  // If nodes replaced by a branch: the branch is prepared here and its nodes take the If's place below.
  std::map<size_t, std::pair<Graph*, onnx::GraphProto*>> inlined;
  if (!rewrite.inline_ifs.empty()) {
    std::set<std::string> node_names;
    for (const Node& n : g.nodes) node_names.insert(n.name);
    for (const auto& inl : rewrite.inline_ifs) {
      RETURN_ERROR_IF(inl.node >= g.nodes.size() || removed[inl.node] || inlined.count(inl.node), FAIL,
                      "internal: If inline of node ", inl.node, " which is out of range, removed or inlined twice");
      Graph* b = nullptr;
      onnx::GraphProto* bp = nullptr;
      RETURN_IF_ERROR(PrepareBranchInline(&g, gp, inl.node, inl.branch, defs, &node_names, &b, &bp));
      inlined[inl.node] = {b, bp};
    }
  }
  std::set<std::string> graph_io;
  for (const auto& v : g.inputs) graph_io.insert(v.name);
  for (const auto& v : g.outputs) graph_io.insert(v.name);
  for (const auto& [name, t] : rewrite.initializers)
    RETURN_ERROR_IF(g.initializers.count(name) || graph_io.count(name), FAIL, "internal: '", name,
                    "' cannot become an initializer (it is one already, or a graph input or output)");
  for (const std::string& name : rewrite.drop_initializers)
    RETURN_ERROR_IF(graph_io.count(name), FAIL, "internal: initializer '", name, "' is a graph input or output");

  // The proto: a Constant node's tensor moves into its initializer (no copy); other values are serialized.
  std::set<std::string> added;
  for (size_t i = 0; i < removed.size(); ++i) {
    if (!removed[i]) continue;
    onnx::NodeProto* np = gp->mutable_node(static_cast<int>(i));
    if (np->op_type() != "Constant" || np->output_size() != 1 || !rewrite.initializers.count(np->output(0))) continue;
    for (auto& a : *np->mutable_attribute())
      if (a.name() == "value" && a.has_t()) {
        onnx::TensorProto* tp = gp->add_initializer();
        tp->Swap(a.mutable_t());
        tp->set_name(np->output(0));
        added.insert(np->output(0));
      }
  }
  for (const auto& [name, t] : rewrite.initializers)
    if (!added.count(name)) TensorToProto(t, name, gp->add_initializer());
  if (inlined.empty()) {
    KeepIf(gp->mutable_node(), [&](int r) { return !removed[static_cast<size_t>(r)]; });
  } else {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (size_t i = 0; i < removed.size(); ++i) {
      if (removed[i]) continue;
      auto in = inlined.find(i);
      if (in == inlined.end()) {
        nodes.Add()->Swap(gp->mutable_node(static_cast<int>(i)));
        continue;
      }
      for (auto& bn : *in->second.second->mutable_node()) nodes.Add()->Swap(&bn);
    }
    gp->mutable_node()->Swap(&nodes);
  }
  const std::set<std::string> drop(rewrite.drop_initializers.begin(), rewrite.drop_initializers.end());
  KeepIf(gp->mutable_initializer(), [&](int r) { return !drop.count(gp->initializer(r).name()); });
  KeepIf(gp->mutable_value_info(), [&](int r) {
    const std::string& n = gp->value_info(r).name();
    return !rewrite.initializers.count(n) && !drop.count(n);
  });

  // The Graph, the same way.
  std::vector<Node> kept;
  kept.reserve(g.nodes.size() - rewrite.remove_nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (removed[i]) continue;
    auto in = inlined.find(i);
    if (in == inlined.end()) {
      kept.push_back(std::move(g.nodes[i]));
      continue;
    }
    for (Node& bn : in->second.first->nodes) kept.push_back(std::move(bn));
  }
  // (The If nodes, and with them their branches, are released here.)
  g.nodes = std::move(kept);
  for (const auto& [name, t] : rewrite.initializers) {
    g.initializers[name] = t;
    g.value_types.erase(name);
  }
  for (const std::string& name : drop) {
    g.initializers.erase(name);
    g.external_initializers.erase(name);
  }
  return Status::OK();
}

}  // namespace

void CheckGraphAllowingShapelessTypes(onnx::GraphProto* graph, const onnx::checker::CheckerContext& ctx) {
  std::vector<onnx::TypeProto_Tensor*> shapeless;
  auto mark = [&](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* vis) {
    for (auto& vi : *vis)
      if (vi.type().has_tensor_type() && !vi.type().tensor_type().has_shape())
        shapeless.push_back(vi.mutable_type()->mutable_tensor_type());
  };
  mark(graph->mutable_input());
  mark(graph->mutable_output());
  mark(graph->mutable_value_info());
  for (auto* tt : shapeless) tt->mutable_shape();
  struct Restore {
    std::vector<onnx::TypeProto_Tensor*>& types;
    ~Restore() {
      for (auto* tt : types) tt->clear_shape();
    }
  } restore{shapeless};
  onnx::checker::LexicalScopeContext lex;
  onnx::checker::check_graph(*graph, ctx, lex);
}

Status ApplyInitializerRewrite(Model* model, const InitializerRewrite& rewrite, std::string* inference_error) {
  inference_error->clear();
  // Name counts only matter to If inlining (fresh names): a walk of the whole model, done only when a pass inlines.
  std::map<std::string, int> defs;
  if (HasInlines(rewrite)) CountDefinitions(*model->graph, &defs);
  RETURN_IF_ERROR(RewriteGraph(model->graph.get(), model->proto->mutable_graph(), rewrite, &defs));
  try {
    onnx::ShapeInferenceOptions sio{/*check_type=*/false, /*error_mode=*/0, /*enable_data_propagation=*/false};
    onnx::shape_inference::InferShapes(*model->proto, onnx::OpSchemaRegistry::Instance(), sio);
  } catch (const std::exception& e) {
    *inference_error = e.what();
    return Status::OK();
  }
  RefreshValueTypes(model->proto->graph(), model->graph.get());
  return Status::OK();
}

Status ParseInputShapes(const std::string& text, std::map<std::string, std::vector<int64_t>>* out) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of(";,", start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const size_t colon = item.rfind(':');
    RETURN_ERROR_IF(colon == std::string::npos || colon == 0, INVALID_ARGUMENT, "input shape '", item,
                    "' is not of the form name:D1xD2x... (e.g. input:1x512)");
    std::vector<int64_t> dims;
    const std::string body = item.substr(colon + 1);
    size_t p = 0;
    while (p < body.size()) {
      size_t q = body.find('x', p);
      if (q == std::string::npos) q = body.size();
      const std::string d = body.substr(p, q - p);
      char* e = nullptr;
      const long long v = std::strtoll(d.c_str(), &e, 10);
      RETURN_ERROR_IF(d.empty() || *e != '\0' || v < 0 || d[0] == '-' || d[0] == '+', INVALID_ARGUMENT,
                      "input shape '", item, "': '", d, "' is not a non-negative integer dim");
      dims.push_back(v);
      p = q + 1;
      RETURN_ERROR_IF(q + 1 == body.size(), INVALID_ARGUMENT, "input shape '", item, "' ends with 'x'");
    }
    (*out)[item.substr(0, colon)] = std::move(dims);
    if (end == text.size()) break;
  }
  return Status::OK();
}

StatusOr<std::shared_ptr<Model>> LoadModelFromBytes(const void* data, size_t size, const ModelLoadOptions& options) {
  auto proto = std::make_shared<onnx::ModelProto>();
  RETURN_IF_ERROR(ParseModel(data, size, "(from memory)", proto.get()));
  return LoadModelFromProto(std::move(proto), "", options);
}

StatusOr<std::shared_ptr<Model>> LoadModelFromFile(const std::string& path, const ModelLoadOptions& options) {
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  auto proto = std::make_shared<onnx::ModelProto>();
  RETURN_IF_ERROR(ParseModel(file->data(), file->size(), "'" + path + "'", proto.get()));
  return LoadModelFromProto(std::move(proto), path, options);
}

}  // namespace epctx
