// A dynamic partition (dynamic.h) in a context binary (issue 16): the fused graph with its symbolic shapes, the fused
// node's input/output names and the weights the first shapes packed, as the "records" of one GRAPHS entry plus the
// TENSORS it references, so that one compiled context serves every input shape. SerializeDynamicGraph writes them;
// ParseDynamicGraph reads them back as HOSTILE input (every count, length, index, enum, rank and tensor size checked,
// topological order and single producers verified, producer/consumers rebuilt, never trusted) into a Graph whose
// constants point into the mapped tensor bytes (no copy).
//
// Records encoding (little-endian; docs/context-binary-format.md, "Dynamic partition records"):
//   "AOTDYN1\0", u32 version (3), graph name, values, nodes, graph inputs/outputs, fused inputs/outputs, packed
//   weights, shape profiles and ranges (2), derived constants (3); see dynamic_records.cc. Constants and packed weights name a tensor by its index in the graph's own tensor
//   list (GraphInput::tensor_names order = DynamicRecords::tensors order = the WeightRef list given to the parser).
#ifndef EPCTX_PROVIDERS_AOTCPU_BINARY_DYNAMIC_RECORDS_H_
#define EPCTX_PROVIDERS_AOTCPU_BINARY_DYNAMIC_RECORDS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "providers/aotcpu/binary/context_binary.h"  // CheckResult, TensorInput
#include "providers/aotcpu/ir/ir.h"
#include "providers/aotcpu/runtime/executor.h"        // WeightRef

namespace epctx {
namespace aotcpu {

struct LoweringMemo;  // plan/compiler.h

// Version 2 appends the shape profiles and ranges (ShapeInfo); version 3 the derived constants (a float constant
// stored only as a packed weight it reorders back from exactly). Readers take 1, 2 and 3.
inline constexpr uint32_t kDynamicRecordsVersion = 3;

// What the compile was told about the shapes: profiles (each the dims of every fused input, in order) that a loaded
// session builds before its first run, and per-symbol ranges (lo <= hi) every run is checked against.
struct DynamicShapeInfo {
  std::vector<std::vector<std::vector<int64_t>>> profiles;
  std::map<std::string, std::pair<int64_t, int64_t>> ranges;
};
inline constexpr uint32_t kMaxDynProfiles = 256;

// A weight an earlier shape's lowering packed (DynamicGraph's table, CompileOptions::EarlierWeight): the lowering's
// weight name ("h0_q.weight:packed"), its layout and its bytes (layout.get_size() bytes, borrowed for the call).
struct StoredWeight {
  std::string name;
  dnnl::memory::desc layout;
  const void* data = nullptr;
  size_t size = 0;
};

// A constant stored only as a packed weight (version 3): the weight's name and the strides, over the weight layout's
// dims, of the plain layout it was packed from (empty: row-major); reordering the weight into that layout gives the
// constant's bytes.
struct DerivedConstant {
  std::string weight;
  std::vector<int64_t> strides;
  bool operator==(const DerivedConstant& o) const { return weight == o.weight && strides == o.strides; }
};
using DerivedConstants = std::map<std::string, DerivedConstant>;  // by constant value name

struct DynamicRecords {
  std::string records;
  // The graph's tensors, in the order the records index them: first every constant value's bytes (one tensor per
  // constant value, named "<prefix>const:<value name>"), then every packed weight's ("<prefix>packed:<weight name>").
  // The binary writer stores identical bytes once.
  std::vector<TensorInput> tensors;
};

// Encodes a dynamic partition. `inputs`/`outputs` name the fused node's non-constant inputs and its outputs (as given to
// DynamicGraph::Create); `packed` is the packed-weight table. `tensor_name_prefix` keeps tensor names unique across the
// graphs of one binary (WriteContextBinary resolves GraphInput::tensor_names to the first tensor of that name), e.g.
// "<graph name>/". Fails (naming the value/node) for what the format cannot hold: a subgraph attribute, a node with a
// subgraph, a constant without a static shape or with a dtype the binary does not carry, a weight layout no operand
// can describe, a count beyond the parser's limits.
// `derived` (constant value name -> packed weight name, from DerivableConstants): constants stored only as that packed
// weight (no raw tensor); the records name the weight and a reader reorders it back (DeriveConstant).
CheckResult SerializeDynamicGraph(const Graph& g, const std::vector<std::string>& inputs,
                                  const std::vector<std::string>& outputs, const std::vector<StoredWeight>& packed,
                                  DynamicRecords* out, const std::string& tensor_name_prefix = "",
                                  const DynamicShapeInfo& shapes = {},
                                  const DerivedConstants& derived = {});

// Convolutions whose BatchNormalizations / affine maps every shape folds into their weights (the memo's folds, made by
// the shapes bound so far), baked into the graph: the convolution reads the folded weights and bias as constants of
// their own ("<weights>:folded", "<conv>:folded_bias") and writes the last absorbed node's output, the absorbed nodes
// and the constants no node reads any more are gone, and the stored weights made from the fold are renamed as a
// lowering of the baked graph names them (the folded weights then derive exactly from their packed weight, and the
// source weights and normalization constants are not stored). A convolution is baked only when its chain is still in
// the graph as the fold names it and its folded weight is stored. `owned` keeps the new constants' bytes.
// `skip`: convolutions (node names) not to bake.
CheckResult BakeFolds(const Graph& g, const LoweringMemo& memo, std::vector<StoredWeight>* packed, Graph* out,
                      std::vector<std::shared_ptr<std::string>>* owned, size_t* baked,
                      const std::set<std::string>& skip = {});

// The float constants of `g` that need not be stored raw: each is read only as the weight operand (input 1) of
// MatMul, Gemm or Conv nodes, and a packed weight made from it as it is ("<value>:packed", "<node output>/<value>:packed",
// float, no extra data) reorders back to exactly its bytes (checked here, byte for byte). Value name -> weight name.
// The plain layouts tried: row-major over the weight's dims, and the first two dims swapped (a MatMul's [K, N] weight
// packed as a 1x1 convolution's [N, K, 1, 1]).
DerivedConstants DerivableConstants(const Graph& g, const std::vector<StoredWeight>& packed);

// Reorders a packed float weight (`layout`, `data`) into a plain layout over the layout's dims: the bytes of the
// constant it was packed from (`bytes` = numel x 4, at most the layout's size). Fails with oneDNN's reason.
// `strides`: DerivedConstant::strides (empty: row-major), a permutation of row-major strides over the layout's dims.
CheckResult DeriveConstant(const dnnl::memory::desc& layout, const std::vector<int64_t>& strides, const void* data,
                           void* out, size_t bytes);

// A derived constant's Value::data in a parsed graph until its bytes are made: read-only zero pages (never the
// constant's bytes). DynamicGraph lowers a shape against them and takes the result only when no step read them.
bool IsDerivedPlaceholder(const void* p);

// A packed weight read back: its layout and bytes pointing into the mapped tensor (borrowed: valid while the binary
// stays mapped).
struct BorrowedWeight {
  dnnl::memory::desc layout;
  const void* data = nullptr;
  size_t size = 0;
};

struct ParsedDynamicGraph {
  Graph graph;  // constants: Value::data into the mapped tensors (folded is null); producer/consumers/by_name rebuilt
  std::vector<std::string> inputs, outputs;  // the fused node's
  std::map<std::string, BorrowedWeight> packed;  // by weight name
  DynamicShapeInfo shapes;                       // empty for version 1 records
  // Version 3: constants stored only packed: value name -> packed weight name (in `packed`). Their Value::data is a
  // placeholder (IsDerivedPlaceholder) of the constant's size: DynamicGraph::Create takes this map and makes the bytes
  // from the weight when a shape needs them.
  DerivedConstants derived;
};

// Limits the parser enforces.
inline constexpr uint32_t kMaxDynValues = 1u << 20;
inline constexpr uint32_t kMaxDynNodes = 1u << 20;
inline constexpr uint32_t kMaxDynNodeIo = 4096;     // inputs or outputs of one node
inline constexpr uint32_t kMaxDynAttrs = 256;       // attributes of one node
inline constexpr uint32_t kMaxDynAttrElems = 1u << 20;  // ints/floats of one attribute
inline constexpr uint32_t kMaxDynName = 1u << 16;   // any name or string attribute
inline constexpr uint32_t kMaxDynIo = 4096;         // graph/fused inputs or outputs
inline constexpr uint32_t kMaxDynWeights = 1u << 20;

// Decodes records (hostile) against the graph's tensors (`tensors[i]` = the mapped bytes of the graph's i-th tensor).
// On failure *out is unspecified and the reason names the value/node/weight and field.
CheckResult ParseDynamicGraph(std::string_view records, const std::vector<WeightRef>& tensors,
                              ParsedDynamicGraph* out);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_BINARY_DYNAMIC_RECORDS_H_
