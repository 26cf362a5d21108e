// The compile-time graph of the AotCpu EP: a plain copy of what the runtime's graph view (ep_api.h) shows, with
// static shapes and constant data, so that capability checks, constant folding, fusion and lowering work on
// ordinary C++ structures instead of ABI calls. Built once per GetCapability/Compile call; borrowed data pointers
// (initializers) stay valid for that call (Compile: until the compute infos are released).
#ifndef EPCTX_PROVIDERS_AOTCPU_IR_IR_H_
#define EPCTX_PROVIDERS_AOTCPU_IR_IR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "epctx/ep_api.h"
#include "providers/aotcpu/check_result.h"

namespace epctx {
namespace aotcpu {

// ONNX TensorProto element type codes used here.
inline constexpr uint32_t kF32 = 1, kU8 = 2, kI8 = 3, kI32 = 6, kI64 = 7, kBool = 9;

struct Value {
  std::string name;
  uint32_t dtype = 0;            // ONNX code; 0 when unknown (or not a tensor)
  bool has_shape = false;        // rank known and every dim a known size >= 0
  std::vector<int64_t> dims;     // valid when has_shape
  // dim_param name of each free dim (dims[i] < 0) as the runtime gives it ("" for a known or unnamed dim); empty
  // when the rank is unknown or no dim is named. Read by symbolic shape inference (symbolic.h).
  std::vector<std::string> dim_symbols;
  // Constant data: an initializer (borrowed from the runtime) or a value folded at compile time (owned in `folded`).
  const void* data = nullptr;
  std::shared_ptr<std::string> folded;
  bool is_initializer = false;   // a constant initializer of the graph (not a graph input)
  bool is_graph_input = false;
  bool is_graph_output = false;
  // A float16 value computed in float32 (ir/float16.h): its dtype says kF32; as a fused input or output its bytes are
  // float16 and the compiler converts at the partition's edge.
  bool float16_storage = false;
  int producer = -1;             // node index, -1 for graph inputs / initializers
  std::vector<int> consumers;    // node indices (one entry per consuming input slot)

  bool is_const() const { return data != nullptr; }
  int64_t numel() const;         // product of dims (1 for a scalar); -1 without a static shape
  size_t bytes() const;          // numel * element size; 0 without a static shape or known dtype
};

struct Attr {
  EpctxOpAttrType type = EPCTX_ATTR_UNDEFINED;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

struct Node {
  std::string name, op, domain;  // domain "" = ONNX
  int64_t opset = 0;             // since-version of the node's schema
  std::vector<int> inputs;       // value indices, -1 for an absent optional input
  std::vector<int> outputs;      // value indices, -1 for an absent optional output
  std::map<std::string, Attr> attrs;
  bool has_subgraphs = false;
  const EpctxNode* handle = nullptr;  // the runtime's node (for AddNodesToFuse)

  bool Has(const std::string& key) const { return attrs.count(key) != 0; }
  int64_t Int(const std::string& key, int64_t def) const;
  float Float(const std::string& key, float def) const;
  std::string Str(const std::string& key, const std::string& def) const;
  std::vector<int64_t> Ints(const std::string& key) const;  // empty when absent
  int num_inputs() const;   // count of present inputs up to the last present one
};

struct Graph {
  std::string name;
  std::string model_path;
  std::vector<Value> values;
  std::vector<Node> nodes;        // topological order
  std::vector<int> inputs;        // graph inputs (non-initializer), in order
  std::vector<int> outputs;       // graph outputs, in order
  std::unordered_map<std::string, int> by_name;

  int Find(const std::string& name) const {
    auto it = by_name.find(name);
    return it == by_name.end() ? -1 : it->second;
  }
  const Value& v(int index) const { return values[static_cast<size_t>(index)]; }
  Value& v(int index) { return values[static_cast<size_t>(index)]; }
  // A value with constant data, read as int64s (dtype int64 or int32); false otherwise.
  bool ConstInts(int value, std::vector<int64_t>* out) const;
  // A constant float scalar (or 1-element tensor); false otherwise.
  bool ConstScalar(int value, float* out) const;
};

// "[1,3,224,224]": dims for messages.
std::string DimsText(const std::vector<int64_t>& dims);

// Copies `graph` (borrowed) into `*out`. Fails on ABI errors only; unknown shapes and types are recorded, not refused.
CheckResult BuildGraph(const EpctxApi* api, const EpctxGraph* graph, Graph* out);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_IR_IR_H_
