// A partition whose inputs have free dims (issue 16, docs/aotcpu.md "Dynamic shapes"): one compiled partition that
// serves every input shape. It keeps the fused graph with symbolic shapes (symbolic.h); the first run with a new
// input shape binds the symbols from the input dims, lowers that static graph (compiler.h) and creates its
// primitives, and keeps the result in a bounded cache (least recently used evicted). Weights are packed once: a later
// shape's lowering reads the bytes an earlier shape made for the same weight in the same layout, and MatMul offers
// oneDNN that layout first (CompileOptions::earlier_weight); constant initializers are read in place.
//
// Shape-generic form (the default where it applies): when the nodes whose dims depend on the free dims hold no
// weights (MatMul/Gemm/Conv with a constant operand) and have shape-generic kernels (generic_ops.h) -- a decoder's
// K/V concat, QK^T, mask and softmax -- the graph is cut into stages. Each stage is a static segment (nodes whose
// dims are the same for every shape), lowered and built once when the graph is created, then the dynamic nodes that
// follow it, run by those kernels with dims evaluated per run. Small integer "shape values" (Shape and the arithmetic
// on it) are evaluated from their expressions. A new shape then costs nothing but those evaluations: nothing is
// lowered, built or cached per shape. Otherwise every new shape is bound and compiled (Get).
//
// Data-dependent sizes (issue 27 item 3): the symbolic shapes come from InferSymbolicRuntime, so a size known only
// while running is a run-time symbol (SymbolicShapes::runtime): bound by the step that makes it (a NonZero's count, a
// Range/Slice/Reshape length from data, by the kernel's sizer before it runs) or read from an integer value's data
// after the step that computes it (a shape tensor computed from data). Slots and checks that use one are placed and
// evaluated at the first step where their symbols are bound. In such a graph a node whose dims change and that has no
// shape-generic kernel (a Conv over a length summed from durations) joins a per-shape segment: bound with every symbol
// bound so far (data read as sizes folded as constants), lowered and built when a run first needs those sizes, and
// kept in a per-stage LRU keyed by them. A graph with run-time symbols only runs in the shape-generic form: Create
// fails when that form does not apply.
//
// Thread safety: Run and Get may be called from concurrent runs; binding a new shape happens under a lock, and an executor
// stays alive while a run uses it even if the cache evicts it.
#ifndef EPCTX_PROVIDERS_AOTCPU_RUNTIME_DYNAMIC_H_
#define EPCTX_PROVIDERS_AOTCPU_RUNTIME_DYNAMIC_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "providers/aotcpu/binary/dynamic_records.h"  // DerivedConstants
#include "providers/aotcpu/ir/ir.h"
#include "providers/aotcpu/ir/symbolic.h"
#include "providers/aotcpu/plan/compiler.h"
#include "providers/aotcpu/runtime/executor.h"

namespace epctx {
namespace aotcpu {

// Per-symbol bounds (ep.aotcpuexecutionprovider.shape_ranges): a bound shape outside them is INVALID_ARGUMENT.
struct SymbolRange {
  int64_t lo = 0, hi = INT64_MAX;
};

class DynamicGraph {
 public:
  struct Options {
    CompileOptions compile;     // the EP's (ISA, layouts); earlier_weight and initializer_owner are set here
    int threads = 0;
    size_t cache_size = 8;      // bound shapes kept (>= 1)
    std::map<std::string, SymbolRange> ranges;
    bool generic = true;        // use the shape-generic form where it applies (false: bind every shape)
    bool memo = true;           // later shapes try the first shape's lowering decisions first (LoweringMemo)
  };
  // `g` is the fused graph as BuildGraph read it (initializer data borrowed from the runtime, alive as long as
  // `keep`); `inputs`/`outputs` name the fused node's non-constant inputs and its outputs, in order. Fails when the
  // graph's shapes cannot be inferred symbolically or an input dim is an expression rather than a symbol or constant.
  // `packed`: weights an earlier compile packed (name -> layout and bytes, e.g. mapped from a context binary and
  // alive as long as `keep`), reused by every shape instead of packing from the graph's initializers.
  // `derived` (constant value name -> name in `packed`; ParsedDynamicGraph::derived): constants a context binary stores
  // only packed, whose Value::data is a placeholder (IsDerivedPlaceholder). A shape is lowered against the placeholders
  // and taken only if no step reads them (every weight it needs is a stored one); otherwise their bytes are made once
  // from the packed weights (an exact reorder back to plain) and the shape lowered again.
  static CheckResult Create(Graph g, std::vector<std::string> inputs, std::vector<std::string> outputs,
                            Options options, std::shared_ptr<const void> keep, std::unique_ptr<DynamicGraph>* out,
                            const std::map<std::string, CompileOptions::EarlierWeight>& packed = {},
                            const DerivedConstants& derived = {});

  ~DynamicGraph();
  const Graph& graph() const { return graph_; }
  const std::vector<std::string>& inputs() const { return inputs_; }
  const std::vector<std::string>& outputs() const { return outputs_; }
  // The weights the shapes bound so far packed (name, layout, bytes), to store beside the graph in a binary.
  struct Packed {
    std::string name;
    dnnl::memory::desc layout;
    const void* data = nullptr;
    size_t size = 0;
  };
  std::vector<Packed> PackedWeights() const;
  // A copy of the lowering decisions the shapes bound so far made (null when the memo is off).
  std::shared_ptr<const LoweringMemo> Memo() const;

  // The executor for inputs of these dims (fused-input order): cached, or bound, lowered and built now. Errors:
  // `*invalid_argument` true for shapes the graph cannot take (wrong rank, a dim fixed to another size, a symbol
  // bound twice to different sizes, outside its range); false for a failure to compile the shape.
  CheckResult Get(const std::vector<std::vector<int64_t>>& input_dims, std::shared_ptr<Executor>* exec,
                  bool* invalid_argument);

  // Runs the graph on inputs of these dims and element types (fused-input order): `alloc(i, dims)` gives the buffer
  // of output i. Shape-generic graphs run their stages; others run the executor Get returns. Errors as Get's.
  using OutputAlloc = std::function<CheckResult(size_t index, const std::vector<int64_t>& dims, void** data)>;
  CheckResult Run(const std::vector<const void*>& inputs, const std::vector<std::vector<int64_t>>& input_dims,
                  const std::vector<uint32_t>& input_types, const OutputAlloc& alloc, bool* invalid_argument);
  // Whether inputs of these dims are a shape the graph takes (ranks, fixed dims, ranges, one size per symbol, the
  // graph's own checks), without building anything.
  CheckResult CheckShape(const std::vector<std::vector<int64_t>>& input_dims);
  // True when the graph runs in the shape-generic form; `why_not_generic` says why not otherwise.
  bool generic() const { return generic_ != nullptr; }
  const std::string& why_not_generic() const { return why_not_generic_; }
  // "3 static segments (41 nodes), 6 shape-generic nodes" for inspect and messages; "" when not generic.
  std::string GenericSummary() const;

  const std::vector<std::string>& symbols() const { return sym_.symbols; }
  struct Stats {
    size_t binds = 0, hits = 0, evictions = 0;
    double last_bind_ms = 0;         // bind + lower + primitive creation of the last new shape
    uint64_t weight_bytes_made = 0;  // weight bytes packed or copied by binds (0 after the first shape when reused)
    size_t generic_runs = 0;         // runs of the shape-generic form
    size_t generic_fallbacks = 0;    // runs it handed to Get: a dim its static segments assume differed
    size_t memo_hits = 0, memo_misses = 0;  // lowering decisions taken from the first shape / searched again
    size_t derived_pending = 0;      // constants stored only packed whose bytes are not made yet
    uint64_t derived_bytes_made = 0; // bytes of such constants made from their packed weights
    std::string derived_why;         // the weight whose making made them ("" while none were made)
  };
  Stats stats() const;

 private:
  DynamicGraph();
  CheckResult Bind(const std::map<std::string, int64_t>& binding, std::shared_ptr<Executor>* exec);
  // The symbols' sizes from the input dims (checks ranks, fixed dims, ranges, one size per symbol).
  CheckResult Binding(const std::vector<std::vector<int64_t>>& input_dims, std::map<std::string, int64_t>* binding);
  // Lowers a static graph (its values' dims known) and builds its executor, reusing and recording packed weights.
  CheckResult Build(const Graph& bound, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                    bool warm_up, std::shared_ptr<Executor>* exec);
  // Derived constants (Create's `derived`): whether a lowering read a placeholder; making their bytes; a bound graph
  // with the placeholders replaced by the bytes made.
  bool ReadsDerived(const CompiledGraph& cg, std::string* which) const;
  CheckResult MakeDerived(const std::string& why);  // `why` for the profile line
  bool WithDerivedBytes(const Graph& in, Graph* out) const;
  struct Generic;
  CheckResult MakeGeneric(std::unique_ptr<Generic>* out);  // fails (with why) when the form does not apply
  CheckResult PlanRuntimeSymbols(Generic* gen) const;       // where run-time symbols are bound (issue 27 item 3)
  struct BoundSegment {  // a per-shape segment built for one binding: its executor and the slots it reads and makes
    std::shared_ptr<Executor> exec;
    std::vector<int> in, out;
  };
  CheckResult GetBoundSegment(size_t stage, const std::vector<int64_t>& symbols, std::shared_ptr<BoundSegment>* out);
  CheckResult RunGeneric(const std::map<std::string, int64_t>& binding, const std::vector<const void*>& inputs,
                         const std::vector<std::vector<int64_t>>& input_dims, const OutputAlloc& alloc,
                         bool* fallback);

  Graph graph_;
  SymbolicShapes sym_;
  std::vector<std::string> inputs_, outputs_;
  std::vector<int> input_values_;
  Options options_;
  std::shared_ptr<const void> keep_;

  mutable std::mutex mu_;
  std::map<std::string, CompileOptions::EarlierWeight> weights_;  // by weight name: the first shape's choice
  std::vector<std::pair<int, DerivedConstant>> derived_;  // value index, its packed weight: bytes not made yet
  bool derived_made_ = false;                         // some derived constants' bytes were made (graph_ points to them)
  std::shared_ptr<LoweringMemo> memo_;  // the first shape's lowering decisions, tried first by later shapes
  std::list<std::pair<std::string, std::shared_ptr<Executor>>> lru_;  // most recent first
  Stats stats_;
  std::unique_ptr<Generic> generic_;
  std::string why_not_generic_;
};

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_RUNTIME_DYNAMIC_H_
