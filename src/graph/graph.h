// The runtime's graph IR: nodes with typed attributes, initializers as Tensors (possibly mapped from external
// data), value types, nested subgraphs. Built from ONNX protobuf by src/model; no protobuf type appears here.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace epctx {

class Graph;

struct Attribute {
  enum class Type { kUndefined, kFloat, kInt, kString, kTensor, kGraph, kFloats, kInts, kStrings, kTensors, kGraphs,
                    kSparseTensor, kTypeProto, kTypeProtos };
  std::string name;
  Type type = Type::kUndefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
};

// One dimension of a value's shape: a number, a symbol ("batch"), or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // dim_param, when named
  bool known() const { return value >= 0; }
};

// Type of a value on an edge: tensor / sequence-of-tensor / optional-of-(tensor|sequence), element type, shape.
struct ValueType {
  enum class Kind { kUnknown, kTensor, kSequence, kOptional };
  Kind kind = Kind::kUnknown;
  Kind optional_inner = Kind::kUnknown;  // for kOptional
  DataType elem_type = DataType::kUndefined;
  bool has_shape = false;
  std::vector<Dim> dims;
  std::string ToString() const;  // "tensor(float)[1,3,'N']"
};

struct ValueInfo {
  std::string name;
  ValueType type;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  int opset = 0;       // opset of `domain` imported by the model
  std::vector<std::string> inputs;   // "" marks an absent optional input
  std::vector<std::string> outputs;  // "" marks an unused optional output
  std::map<std::string, Attribute> attributes;
  std::string doc_string;

  const Attribute* attr(const std::string& name) const {
    auto it = attributes.find(name);
    return it == attributes.end() ? nullptr : &it->second;
  }
  // "Conv 'conv1'" for messages.
  std::string Describe() const;
};

// Streams Describe(): kernels pass the node itself to messages built only on an error (MakeStatus, DispatchType),
// so a run of small nodes does not format a description per node.
std::ostream& operator<<(std::ostream& os, const Node& node);

class Graph {
 public:
  std::string name;
  std::vector<Node> nodes;  // as stored; see TopologicalOrder()
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::map<std::string, Tensor> initializers;
  std::map<std::string, ValueType> value_types;  // inferred or declared types of intermediate values
  std::map<std::string, int> opsets;             // domain -> version (shared with subgraphs)
  // Initializers stored as external data: resolved file path, byte offset and size (for EPs that map weights).
  struct ExternalLocation {
    std::string path;
    uint64_t offset = 0;
    uint64_t size = 0;
  };
  std::map<std::string, ExternalLocation> external_initializers;
  const Graph* parent = nullptr;                 // enclosing graph for subgraphs

  // Node indices in an order where producers come before consumers. INVALID_GRAPH naming a node when the
  // graph has a cycle or a node reads a value nobody produces (outer-scope names count as produced when
  // `outer_scope_names` contains them).
  StatusOr<std::vector<size_t>> TopologicalOrder(const std::vector<std::string>& outer_scope_names = {}) const;

  // Type of a value if known (inputs, outputs, value_types, initializers).
  const ValueType* FindType(const std::string& value_name) const;
};

}  // namespace epctx
