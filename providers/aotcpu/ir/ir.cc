#include "providers/aotcpu/ir/ir.h"

#include <cstring>

namespace epctx {
namespace aotcpu {
namespace {

size_t ElementSize(uint32_t dtype) {
  switch (dtype) {
    case 1: case 6: case 12: return 4;
    case 2: case 3: case 9: return 1;
    case 4: case 5: case 10: case 16: return 2;
    case 7: case 11: case 13: return 8;
    default: return 0;
  }
}

// Turns a non-null status into a CheckResult, releasing it.
CheckResult FromStatus(const EpctxApi* api, EpctxStatus* st, const std::string& what) {
  if (!st) return CheckResult::Ok();
  std::string msg = what + ": " + api->GetErrorMessage(st);
  api->ReleaseStatus(st);
  return CheckResult::Fail(msg);
}

class Builder {
 public:
  Builder(const EpctxApi* api, Graph* g) : api_(api), g_(g) {}

  // Index of the value behind `vi`, creating it on first sight.
  CheckResult Intern(const EpctxValueInfo* vi, int* index) {
    const std::string name = api_->ValueInfo_GetName(vi);
    auto it = g_->by_name.find(name);
    if (it != g_->by_name.end()) {
      *index = it->second;
      return CheckResult::Ok();
    }
    Value v;
    v.name = name;
    if (api_->ValueInfo_GetKind(vi) == EPCTX_VALUE_TENSOR) {
      v.dtype = static_cast<uint32_t>(api_->ValueInfo_GetElementType(vi));
      const int64_t rank = api_->ValueInfo_GetRank(vi);
      if (rank >= 0 && rank <= 64) {
        v.dims.assign(static_cast<size_t>(rank), -1);
        if (rank > 0) {
          std::vector<const char*> symbols(v.dims.size(), nullptr);
          CheckResult r = FromStatus(api_, api_->ValueInfo_GetShape(vi, v.dims.data(), symbols.data(), v.dims.size()),
                                     "shape of '" + name + "'");
          if (!r.ok) return r;
          for (size_t i = 0; i < symbols.size(); ++i) {
            if (v.dims[i] >= 0 || !symbols[i] || !symbols[i][0]) continue;
            v.dim_symbols.resize(v.dims.size());
            v.dim_symbols[i] = symbols[i];
          }
        }
        v.has_shape = true;
        for (int64_t d : v.dims)
          if (d < 0) v.has_shape = false;
      }
    }
    v.is_graph_input = api_->ValueInfo_IsGraphInput(vi);
    v.is_graph_output = api_->ValueInfo_IsGraphOutput(vi);
    if (api_->ValueInfo_IsConstantInitializer(vi)) {
      const EpctxValue* value = nullptr;
      CheckResult r = FromStatus(api_, api_->ValueInfo_GetInitializerValue(vi, &value), "initializer '" + name + "'");
      if (!r.ok) return r;
      if (value) {
        v.is_initializer = true;
        v.is_graph_input = false;
        v.data = api_->Value_GetData(value);
        v.dtype = static_cast<uint32_t>(api_->Value_GetElementType(value));
        const size_t rank = api_->Value_GetRank(value);
        v.dims.assign(rank, 0);
        if (rank > 0) {
          r = FromStatus(api_, api_->Value_GetShape(value, v.dims.data(), rank), "initializer '" + name + "'");
          if (!r.ok) return r;
        }
        v.has_shape = true;
        if (!v.data && v.numel() != 0) v.data = "";  // empty tensors still count as constant
        if (!v.data) v.data = "";
      }
    }
    *index = static_cast<int>(g_->values.size());
    g_->by_name.emplace(name, *index);
    g_->values.push_back(std::move(v));
    return CheckResult::Ok();
  }

  CheckResult Attrs(const EpctxNode* node, Node* n) {
    const size_t count = api_->Node_GetNumAttributes(node);
    std::vector<const EpctxOpAttr*> attrs(count);
    if (count) {
      CheckResult r = FromStatus(api_, api_->Node_GetAttributes(node, attrs.data(), count), "attributes");
      if (!r.ok) return r;
    }
    for (const EpctxOpAttr* a : attrs) {
      Attr at;
      at.type = api_->OpAttr_GetType(a);
      EpctxStatus* st = nullptr;
      switch (at.type) {
        case EPCTX_ATTR_INT: st = api_->OpAttr_GetInt(a, &at.i); break;
        case EPCTX_ATTR_FLOAT: st = api_->OpAttr_GetFloat(a, &at.f); break;
        case EPCTX_ATTR_STRING: {
          const char* data = nullptr;
          size_t length = 0;
          st = api_->OpAttr_GetString(a, &data, &length);
          if (!st) at.s.assign(data, length);
          break;
        }
        case EPCTX_ATTR_INTS: {
          const int64_t* data = nullptr;
          size_t length = 0;
          st = api_->OpAttr_GetInts(a, &data, &length);
          if (!st) at.ints.assign(data, data + length);
          break;
        }
        case EPCTX_ATTR_FLOATS: {
          const float* data = nullptr;
          size_t length = 0;
          st = api_->OpAttr_GetFloats(a, &data, &length);
          if (!st) at.floats.assign(data, data + length);
          break;
        }
        case EPCTX_ATTR_TENSOR: {
          // Kept as bytes in `s` with dims in `ints` and the dtype in `i` (Constant nodes).
          const EpctxValue* t = nullptr;
          st = api_->OpAttr_GetTensor(a, &t);
          if (!st && t) {
            at.i = api_->Value_GetElementType(t);
            const size_t rank = api_->Value_GetRank(t);
            at.ints.assign(rank, 0);
            if (rank) st = api_->Value_GetShape(t, at.ints.data(), rank);
            const int64_t numel = api_->Value_GetElementCount(t);
            const size_t size = numel > 0 ? static_cast<size_t>(numel) * ElementSize(static_cast<uint32_t>(at.i)) : 0;
            const void* data = api_->Value_GetData(t);
            if (!st && data && size) at.s.assign(static_cast<const char*>(data), size);
          }
          break;
        }
        default:
          break;  // graphs and lists of strings/tensors are not read here
      }
      CheckResult r = FromStatus(api_, st, std::string("attribute ") + api_->OpAttr_GetName(a));
      if (!r.ok) return r;
      n->attrs.emplace(api_->OpAttr_GetName(a), std::move(at));
    }
    return CheckResult::Ok();
  }

  CheckResult Run(const EpctxGraph* graph) {
    g_->name = api_->Graph_GetName(graph) ? api_->Graph_GetName(graph) : "";
    g_->model_path = api_->Graph_GetModelPath(graph) ? api_->Graph_GetModelPath(graph) : "";
    std::vector<const EpctxValueInfo*> vis(api_->Graph_GetNumInputs(graph));
    CheckResult r = FromStatus(api_, api_->Graph_GetInputs(graph, vis.data(), vis.size()), "graph inputs");
    if (!r.ok) return r;
    for (const EpctxValueInfo* vi : vis) {
      int index = -1;
      if (!(r = Intern(vi, &index)).ok) return r;
      if (!g_->v(index).is_initializer) g_->inputs.push_back(index);
    }
    vis.assign(api_->Graph_GetNumInitializers(graph), nullptr);
    if (!(r = FromStatus(api_, api_->Graph_GetInitializers(graph, vis.data(), vis.size()), "initializers")).ok)
      return r;
    for (const EpctxValueInfo* vi : vis) {
      int index = -1;
      if (!(r = Intern(vi, &index)).ok) return r;
    }
    std::vector<const EpctxNode*> nodes(api_->Graph_GetNumNodes(graph));
    if (!(r = FromStatus(api_, api_->Graph_GetNodes(graph, nodes.data(), nodes.size()), "nodes")).ok) return r;
    for (const EpctxNode* node : nodes) {
      Node n;
      n.handle = node;
      n.name = api_->Node_GetName(node);
      n.op = api_->Node_GetOperatorType(node);
      n.domain = api_->Node_GetDomain(node);
      n.opset = api_->Node_GetSinceVersion(node);
      n.has_subgraphs = api_->Node_GetNumSubgraphs(node) > 0;
      const int node_index = static_cast<int>(g_->nodes.size());
      std::vector<const EpctxValueInfo*> ins(api_->Node_GetNumInputs(node)), outs(api_->Node_GetNumOutputs(node));
      if (!(r = FromStatus(api_, api_->Node_GetInputs(node, ins.data(), ins.size()), "inputs of " + n.name)).ok)
        return r;
      if (!(r = FromStatus(api_, api_->Node_GetOutputs(node, outs.data(), outs.size()), "outputs of " + n.name)).ok)
        return r;
      for (const EpctxValueInfo* vi : ins) {
        int index = -1;
        if (vi && !(r = Intern(vi, &index)).ok) return r;
        n.inputs.push_back(index);
        if (index >= 0) g_->v(index).consumers.push_back(node_index);
      }
      for (const EpctxValueInfo* vi : outs) {
        int index = -1;
        if (vi && !(r = Intern(vi, &index)).ok) return r;
        if (index >= 0 && std::strlen(api_->ValueInfo_GetName(vi)) == 0) index = -1;
        n.outputs.push_back(index);
        if (index >= 0) g_->v(index).producer = node_index;
      }
      if (!(r = Attrs(node, &n)).ok) return r;
      g_->nodes.push_back(std::move(n));
    }
    vis.assign(api_->Graph_GetNumOutputs(graph), nullptr);
    if (!(r = FromStatus(api_, api_->Graph_GetOutputs(graph, vis.data(), vis.size()), "graph outputs")).ok) return r;
    for (const EpctxValueInfo* vi : vis) {
      int index = -1;
      if (!(r = Intern(vi, &index)).ok) return r;
      g_->v(index).is_graph_output = true;
      g_->outputs.push_back(index);
    }
    return CheckResult::Ok();
  }

 private:
  const EpctxApi* api_;
  Graph* g_;
};

}  // namespace

int64_t Value::numel() const {
  if (!has_shape) return -1;
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

size_t Value::bytes() const {
  const int64_t n = numel();
  return n < 0 ? 0 : static_cast<size_t>(n) * ElementSize(dtype);
}

int64_t Node::Int(const std::string& key, int64_t def) const {
  auto it = attrs.find(key);
  return it != attrs.end() && it->second.type == EPCTX_ATTR_INT ? it->second.i : def;
}
float Node::Float(const std::string& key, float def) const {
  auto it = attrs.find(key);
  return it != attrs.end() && it->second.type == EPCTX_ATTR_FLOAT ? it->second.f : def;
}
std::string Node::Str(const std::string& key, const std::string& def) const {
  auto it = attrs.find(key);
  return it != attrs.end() && it->second.type == EPCTX_ATTR_STRING ? it->second.s : def;
}
std::vector<int64_t> Node::Ints(const std::string& key) const {
  auto it = attrs.find(key);
  return it != attrs.end() && it->second.type == EPCTX_ATTR_INTS ? it->second.ints : std::vector<int64_t>{};
}
int Node::num_inputs() const {
  int n = static_cast<int>(inputs.size());
  while (n > 0 && inputs[static_cast<size_t>(n - 1)] < 0) --n;
  return n;
}

bool Graph::ConstInts(int value, std::vector<int64_t>* out) const {
  if (value < 0) return false;
  const Value& val = v(value);
  if (!val.is_const() || !val.has_shape) return false;
  const int64_t n = val.numel();
  out->resize(static_cast<size_t>(n));
  if (val.dtype == kI64) {
    if (n) std::memcpy(out->data(), val.data, static_cast<size_t>(n) * 8);
  } else if (val.dtype == kI32) {
    for (int64_t i = 0; i < n; ++i) {
      int32_t x;
      std::memcpy(&x, static_cast<const char*>(val.data) + 4 * i, 4);
      (*out)[static_cast<size_t>(i)] = x;
    }
  } else {
    return false;
  }
  return true;
}

bool Graph::ConstScalar(int value, float* out) const {
  if (value < 0) return false;
  const Value& val = v(value);
  if (!val.is_const() || !val.has_shape || val.numel() != 1 || val.dtype != kF32) return false;
  std::memcpy(out, val.data, 4);
  return true;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

CheckResult BuildGraph(const EpctxApi* api, const EpctxGraph* graph, Graph* out) {
  *out = Graph();
  Builder b(api, out);
  return b.Run(graph);
}

}  // namespace aotcpu
}  // namespace epctx
