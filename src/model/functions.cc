#include "model/functions.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <google/protobuf/unknown_field_set.h>

#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "model/schemas_18_26.h"

namespace epctx {

namespace {

// Fields of IR 9/10 that libonnx 1.12's onnx.proto lacks.
constexpr int kNodeOverloadField = 8;
constexpr int kFunctionAttributeProtoField = 11;
constexpr int kFunctionOverloadField = 13;
constexpr int kMaxDepth = 32;
constexpr size_t kMaxNodes = 1000000;

std::vector<std::string> UnknownStrings(const google::protobuf::Message& m, int field) {
  std::vector<std::string> values;
  const google::protobuf::UnknownFieldSet& u = m.GetReflection()->GetUnknownFields(m);
  for (int i = 0; i < u.field_count(); ++i)
    if (u.field(i).number() == field && u.field(i).type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      values.push_back(u.field(i).length_delimited());
  return values;
}

std::string Overload(const google::protobuf::Message& m, int field) {
  std::vector<std::string> v = UnknownStrings(m, field);
  return v.empty() ? std::string() : v.back();  // protobuf: the last occurrence of a singular field wins
}

std::string Domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

void CollectNames(const onnx::GraphProto& g, std::set<std::string>* names) {
  for (const auto& v : g.input()) names->insert(v.name());
  for (const auto& v : g.output()) names->insert(v.name());
  for (const auto& v : g.value_info()) names->insert(v.name());
  for (const auto& t : g.initializer()) names->insert(t.name());
  for (const auto& n : g.node()) {
    names->insert(n.input().begin(), n.input().end());
    names->insert(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectNames(a.g(), names);
      for (const auto& sg : a.graphs()) CollectNames(sg, names);
    }
  }
}

// How a body node's attribute that references a function attribute (ref_attr_name) resolves: the call's value, else
// the function's default, else null (the attribute is then absent).
using AttributeResolver = std::function<const onnx::AttributeProto*(const std::string& ref)>;

// Resolves the attribute references of `attrs` in place (dropping those that resolve to nothing); graph attributes
// are walked by `walk_graph`.
void ResolveAttributes(google::protobuf::RepeatedPtrField<onnx::AttributeProto>* attrs,
                       const AttributeResolver& resolve, const std::function<void(onnx::GraphProto*)>& walk_graph) {
  google::protobuf::RepeatedPtrField<onnx::AttributeProto> out;
  for (auto& a : *attrs) {
    if (a.ref_attr_name().empty()) {
      if (a.has_g()) walk_graph(a.mutable_g());
      for (auto& sg : *a.mutable_graphs()) walk_graph(&sg);
      out.Add()->Swap(&a);
      continue;
    }
    const onnx::AttributeProto* value = resolve(a.ref_attr_name());
    if (!value) continue;
    onnx::AttributeProto* c = out.Add();
    *c = *value;
    c->set_name(a.name());
    c->clear_ref_attr_name();
  }
  attrs->Swap(&out);
}

// A subgraph of a body node: the values it reads from the function's scope take their new names (the names the
// subgraph defines itself shadow the function's and stay), and its nodes' attribute references resolve like the body's.
void ResolveSubgraph(onnx::GraphProto* g, std::map<std::string, std::string> ren, const AttributeResolver& resolve) {
  for (const auto& v : g->input()) ren.erase(v.name());
  for (const auto& t : g->initializer()) ren.erase(t.name());
  for (const auto& n : g->node())
    for (const auto& o : n.output()) ren.erase(o);
  for (auto& n : *g->mutable_node()) {
    for (auto& in : *n.mutable_input()) {
      auto it = ren.find(in);
      if (it != ren.end()) in = it->second;
    }
    ResolveAttributes(n.mutable_attribute(), resolve,
                      [&](onnx::GraphProto* sub) { ResolveSubgraph(sub, ren, resolve); });
  }
  for (auto& o : *g->mutable_output()) {
    auto it = ren.find(o.name());
    if (it != ren.end()) o.set_name(it->second);
  }
}

struct Function {
  const onnx::FunctionProto* proto;
  std::map<std::string, onnx::AttributeProto> defaults;
  std::map<std::string, int64_t> opsets;  // the function's own imports, domain -> version
};

struct Inliner {
  Inliner(onnx::ModelProto* m, const std::string& w) : model(m), what(w) {}

  onnx::ModelProto* model;
  const std::string& what;
  std::map<std::tuple<std::string, std::string, std::string>, Function> functions;  // (domain, name, overload)
  std::map<std::string, int64_t> opsets;
  std::set<std::string> names;
  size_t nodes = 0;
  int calls = 0;

  std::string Fresh(const std::string& base) {
    std::string n = base;
    for (int k = 2; names.count(n); ++k) n = base + "_" + std::to_string(k);
    names.insert(n);
    return n;
  }

  const Function* Find(const onnx::NodeProto& n) {
    auto it = functions.find({n.domain(), n.op_type(), Overload(n, kNodeOverloadField)});
    return it == functions.end() ? nullptr : &it->second;
  }

  Status Add(onnx::NodeProto* node, google::protobuf::RepeatedPtrField<onnx::NodeProto>* out, int depth) {
    for (auto& a : *node->mutable_attribute()) {
      if (a.has_g()) RETURN_IF_ERROR(InlineGraph(a.mutable_g(), depth + 1));
      for (auto& sg : *a.mutable_graphs()) RETURN_IF_ERROR(InlineGraph(&sg, depth + 1));
    }
    RETURN_ERROR_IF(++nodes > kMaxNodes, INVALID_GRAPH, "model ", what,
                    ": inlining its functions would make more than ", kMaxNodes, " nodes");
    out->Add()->Swap(node);
    return Status::OK();
  }

  Status InlineGraph(onnx::GraphProto* g, int depth) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> out;
    for (auto& n : *g->mutable_node()) {
      if (const Function* f = Find(n)) {
        RETURN_IF_ERROR(Expand(n, *f, depth, &out));
      } else {
        RETURN_IF_ERROR(Add(&n, &out, depth));
      }
    }
    g->mutable_node()->Swap(&out);
    return Status::OK();
  }

  // A body node (and the nodes of its subgraphs) runs at the model's opsets once inlined. Where the function imports
  // the node's domain at another version than the model, that is exact only when both versions resolve the op to
  // the same schema (the op did not change in between), as for a Relu at 13 in a function and 17 in the model;
  // otherwise the model is refused, naming the op and both versions, rather than run with other semantics.
  Status SameSchemaInModel(const onnx::NodeProto& n, const Function& fn, const std::string& fname) {
    for (const auto& a : n.attribute()) {
      if (a.has_g())
        for (const auto& sub : a.g().node()) RETURN_IF_ERROR(SameSchemaInModel(sub, fn, fname));
      for (const auto& g : a.graphs())
        for (const auto& sub : g.node()) RETURN_IF_ERROR(SameSchemaInModel(sub, fn, fname));
    }
    if (Find(n)) return Status::OK();  // a call of another function: checked against that function's imports
    const std::string d = Domain(n.domain());
    auto fv = fn.opsets.find(d);
    auto mv = opsets.find(d);
    if (fv == fn.opsets.end() || mv == opsets.end() || fv->second == mv->second) return Status::OK();
    const onnx::OpSchema* in_fn = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(fv->second), d);
    const onnx::OpSchema* in_model = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(mv->second), d);
    RETURN_ERROR_IF(!in_fn || !in_model || in_fn->since_version() != in_model->since_version(), INVALID_GRAPH,
                    "model ", what, ": function '", fname, "' imports domain '", d.empty() ? "ai.onnx" : d, "' at version ", fv->second,
                    " and the model at version ", mv->second, "; its node '", n.name(), "' (", n.op_type(),
                    ") is ", in_fn ? n.op_type() + "-" + std::to_string(in_fn->since_version()) : std::string("unknown"),
                    " there and ",
                    in_model ? n.op_type() + "-" + std::to_string(in_model->since_version()) : std::string("unknown"),
                    " in the model, so inlining it would change what it computes");
    return Status::OK();
  }

  Status Expand(const onnx::NodeProto& call, const Function& fn, int depth,
                google::protobuf::RepeatedPtrField<onnx::NodeProto>* out) {
    const onnx::FunctionProto& f = *fn.proto;
    const std::string fname = f.domain() + "." + f.name();
    RETURN_ERROR_IF(depth >= kMaxDepth, INVALID_GRAPH, "model ", what, ": calls of function '", fname,
                    "' nest deeper than ", kMaxDepth, " (a function that calls itself?)");
    RETURN_ERROR_IF(call.input_size() > f.input_size() || call.output_size() > f.output_size(), INVALID_GRAPH,
                    "model ", what, ": node '", call.name(), "' calls function '", fname, "' with ",
                    call.input_size(), " inputs and ", call.output_size(), " outputs; it has ", f.input_size(),
                    " and ", f.output_size());
    const std::string prefix = (call.name().empty() ? f.name() + "_" + std::to_string(++calls) : call.name()) + "/";
    std::map<std::string, std::string> ren;
    for (int i = 0; i < f.input_size(); ++i) ren[f.input(i)] = i < call.input_size() ? call.input(i) : std::string();
    for (int i = 0; i < f.output_size(); ++i) {
      const bool named = i < call.output_size() && !call.output(i).empty();
      ren[f.output(i)] = named ? call.output(i) : Fresh(prefix + f.output(i));
    }
    std::map<std::string, const onnx::AttributeProto*> given;
    for (const auto& a : call.attribute()) given[a.name()] = &a;
    const AttributeResolver resolve = [&](const std::string& ref) -> const onnx::AttributeProto* {
      auto g = given.find(ref);
      if (g != given.end()) return g->second;
      auto d = fn.defaults.find(ref);
      return d == fn.defaults.end() ? nullptr : &d->second;
    };
    for (const auto& body : f.node()) {
      onnx::NodeProto n = body;
      for (auto& in : *n.mutable_input()) {
        if (in.empty()) continue;
        auto it = ren.find(in);
        // A name the function neither receives nor computes is left as is; the checker names it.
        if (it != ren.end()) in = it->second;
      }
      for (auto& o : *n.mutable_output()) {
        if (o.empty()) continue;
        auto it = ren.find(o);
        if (it != ren.end() && !it->second.empty()) {
          o = it->second;
        } else {
          const std::string fresh = Fresh(prefix + o);
          ren[o] = fresh;
          o = fresh;
        }
      }
      ResolveAttributes(n.mutable_attribute(), resolve,
                        [&](onnx::GraphProto* sub) { ResolveSubgraph(sub, ren, resolve); });
      n.set_name(Fresh(prefix + (body.name().empty() ? body.op_type() : body.name())));
      RETURN_IF_ERROR(SameSchemaInModel(body, fn, fname));
      if (const Function* inner = Find(n)) {
        RETURN_IF_ERROR(Expand(n, *inner, depth + 1, out));
      } else {
        RETURN_IF_ERROR(Add(&n, out, depth));
      }
    }
    return Status::OK();
  }
};

}  // namespace

Status InlineModelFunctions(onnx::ModelProto* model, const std::string& what) {
  if (model->functions_size() == 0) return Status::OK();
  RegisterNewerOpsetSchemas();  // body nodes are compared by schema (SameSchemaInModel), opsets 18-26 included
  Inliner in(model, what);
  for (const auto& os : model->opset_import()) in.opsets[Domain(os.domain())] = os.version();
  for (const auto& f : model->functions()) {
    const std::string fname = f.domain() + "." + f.name();
    for (const auto& os : f.opset_import()) {
      const std::string d = Domain(os.domain());
      if (in.opsets.count(d)) continue;  // a differing version is judged per body node (SameSchemaInModel)
      in.opsets[d] = os.version();
      auto* added = model->add_opset_import();
      added->set_domain(os.domain());
      added->set_version(os.version());
    }
    Function fn{&f, {}, {}};
    for (const auto& os : f.opset_import()) fn.opsets[Domain(os.domain())] = os.version();
    for (const std::string& bytes : UnknownStrings(f, kFunctionAttributeProtoField)) {
      onnx::AttributeProto a;
      RETURN_ERROR_IF(!a.ParseFromString(bytes), INVALID_GRAPH, "model ", what, ": function '", fname,
                      "' has an attribute default that is not a valid AttributeProto");
      fn.defaults[a.name()] = a;
    }
    const auto key = std::make_tuple(f.domain(), f.name(), Overload(f, kFunctionOverloadField));
    RETURN_ERROR_IF(in.functions.count(key), INVALID_GRAPH, "model ", what, ": function '", fname,
                    "' is defined twice");
    in.functions[key] = std::move(fn);
  }
  CollectNames(model->graph(), &in.names);
  RETURN_IF_ERROR(in.InlineGraph(model->mutable_graph(), 0));
  // The bodies now live in the graph; the definitions are not needed (and libonnx 1.12 cannot check IR 10 ones).
  google::protobuf::RepeatedPtrField<onnx::FunctionProto> none;
  model->mutable_functions()->Swap(&none);
  return Status::OK();
}

}  // namespace epctx
