// Symbolic shapes of the AotCpu IR (issue 16, item 1): every value's dims as integer expressions over the graph's free
// dims (dim_param names), inferred once per graph by a rule per op, and `Bind`, which turns the graph into the static
// graph the runtime would give with those dims pinned (-f), so that the existing pipeline (FoldConstants, capability,
// lowering) runs unchanged on it.
//
//   DimTable       interned expressions: constants, symbols, + - * floor-div ceil-div min max, and Bcast(a, b) (numpy
//                  broadcast of two dims: a when equal or b == 1, b when a == 1, an evaluation error otherwise);
//                  constant folding and light canonicalisation at construction, so equal ids mean equal expressions
//                  (a+b and b+a are one id), but different ids do not prove different values.
//   InferSymbolic  per value: dims (DimIds) or unknown; for small integer "shape values" (Shape's output and the
//                  arithmetic on it, int64 constants) also their elements as DimIds. A node without a rule, or whose
//                  result cannot be expressed, leaves its outputs unknown with a reason in `why[node]`; never a wrong
//                  shape. Conditions the rules cannot prove symbolically (broadcast partners equal, MatMul K equal,
//                  Reshape element counts, the runtime's static dims) become `checks`, evaluated by Bind.
//   Bind           evaluates everything under a binding of the symbols; known values get concrete dims and shape
//                  values owned constant data; any failed evaluation or check is an error naming the node and dim.
//
// Nothing in the plugin calls this yet; the compiler's behaviour is unchanged.
#ifndef EPCTX_PROVIDERS_AOTCPU_IR_SYMBOLIC_H_
#define EPCTX_PROVIDERS_AOTCPU_IR_SYMBOLIC_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "providers/aotcpu/ir/ir.h"

namespace epctx {
namespace aotcpu {

using DimId = int32_t;
inline constexpr DimId kNoDim = -1;

enum class DimOp : uint8_t { kConst, kSym, kAdd, kSub, kMul, kFloorDiv, kCeilDiv, kMin, kMax, kBcast };

struct DimNode {
  DimOp op = DimOp::kConst;
  int64_t c = 0;       // kConst: the value; kSym: index into DimTable::symbol names
  DimId a = kNoDim;    // operands (binary ops); a child's id is always smaller than its parent's
  DimId b = kNoDim;
};

class DimTable {
 public:
  DimTable();
  DimId Const(int64_t c);
  DimId Sym(const std::string& name);
  DimId Add(DimId a, DimId b);
  DimId Sub(DimId a, DimId b);
  DimId Mul(DimId a, DimId b);
  DimId FloorDiv(DimId a, DimId b);
  DimId CeilDiv(DimId a, DimId b);
  DimId Min(DimId a, DimId b);
  DimId Max(DimId a, DimId b);
  DimId Bcast(DimId a, DimId b);

  size_t size() const { return nodes_.size(); }
  const DimNode& node(DimId id) const { return nodes_[static_cast<size_t>(id)]; }
  bool IsConst(DimId id, int64_t* c = nullptr) const;
  // True when the expression is >= 0 for every binding of its symbols to dims (>= 0) that evaluates without error.
  bool NonNegative(DimId id) const;
  const std::string& SymbolName(DimId id) const;  // for a kSym node
  // Readable form ("max(seq + -1, 0)"), cut at a few hundred characters.
  std::string Str(DimId id) const;

  // Evaluates `id` with symbols bound by `binding`. False with `why` on an unbound symbol, division by zero, int64
  // overflow or a Bcast of incompatible dims. EvalDim additionally refuses a negative result.
  bool Eval(DimId id, const std::map<std::string, int64_t>& binding, int64_t* out, std::string* why) const;
  bool EvalDim(DimId id, const std::map<std::string, int64_t>& binding, int64_t* out, std::string* why) const;
  // Evaluates every id at once (ids in increasing order; O(size)); ok[i] false with err[i] where it fails.
  void EvalAll(const std::map<std::string, int64_t>& binding, std::vector<int64_t>* values, std::vector<bool>* ok,
               std::vector<std::string>* err) const;
  // For evaluating the same few ids at every run (dynamic.h's shape-generic graphs): Plan lists `ids` and everything
  // below them in increasing order, once; EvalPlan fills values[id] for those ids (values has size() entries) with the
  // symbols given by index (symbol_names() order). False with `why` as Eval.
  std::vector<DimId> Plan(const std::vector<DimId>& ids) const;
  bool EvalPlan(const std::vector<DimId>& plan, const std::vector<int64_t>& symbol_values, int64_t* values,
                std::string* why) const;
  const std::vector<std::string>& symbol_names() const { return symbols_; }

  // Bounds (issue 27): what real graphs need proved about their shape arithmetic. Every dim is assumed at least 1
  // (a symbol, and every expression marked as a tensor's dim), and a symbol stays within its `shape_ranges` entry.
  // These are assumptions, not facts (a zero-sized dim exists): a rule that relies on one adds a check of exactly the
  // condition it needs (SymCheck), so a binding where it does not hold is refused by Bind, never computed wrongly.
  void SetRange(const std::string& symbol, int64_t lo, int64_t hi);
  void MarkDim(DimId id);  // `id` is a dim of a tensor
  // [lo, hi] of `id` (interval arithmetic, saturating at +-2^62) under those assumptions.
  void Bounds(DimId id, int64_t* lo, int64_t* hi) const;
  // num // den when den's factors (a product of terms and a constant) divide num's exactly: the remaining product.
  // Exact for every binding where den != 0; kNoDim when it cannot be shown (the caller checks den != 0).
  DimId ExactDiv(DimId num, DimId den);

 private:
  DimId Make(DimOp op, int64_t c, DimId a, DimId b);
  DimId Comm(DimOp op, DimId a, DimId b);  // commutative: operands ordered, constant second
  DimId Div(DimOp op, DimId a, DimId b);   // kFloorDiv or kCeilDiv
  std::vector<DimNode> nodes_;
  std::vector<std::string> symbols_;
  std::map<std::tuple<int, int64_t, DimId, DimId>, DimId> interned_;
  std::map<std::string, std::pair<int64_t, int64_t>> ranges_;
  std::vector<bool> marked_;
  mutable std::vector<std::pair<int64_t, int64_t>> bounds_;  // cache: valid for ids below its size
};

struct SymValue {
  bool known = false;         // rank and every dim known as an expression
  std::vector<DimId> dims;
  // A small integer (int64/int32) tensor of constant rank <= 1 whose elements are known expressions (Shape outputs,
  // arithmetic on them, integer constants): elems.size() == number of elements.
  bool has_elems = false;
  std::vector<DimId> elems;
};

// A condition Bind checks: a and b must evaluate equal (both without error).
struct SymCheck {
  int node = -1;     // -1: a graph input
  DimId a = kNoDim, b = kNoDim;
  std::string what;  // "output 'x' dim 2 (the runtime says 16)", "MatMul K", ...
};

// A symbol whose size is known only while the graph runs (issue 27 item 3): bound by `node` before it runs (NonZero's
// count, Range's length from run-time bounds; `elem` indexes the node's sizes), or, when `value` >= 0, element `elem`
// of that integer value's data, read once its producer has run (a Reshape/Expand/ConstantOfShape target computed
// from data). Only InferSymbolicRuntime makes them.
struct RuntimeSymbol {
  std::string name;
  int node = -1;
  int value = -1;
  size_t elem = 0;
};

struct SymbolicShapes {
  DimTable table;
  std::vector<SymValue> values;    // index = Graph value index
  std::vector<std::string> why;    // per node: empty when every present output is known
  std::vector<SymCheck> checks;
  std::vector<std::string> symbols;  // the free symbols graph inputs introduced, sorted
  std::vector<RuntimeSymbol> runtime;  // symbols bound while running (InferSymbolicRuntime only), in node order
};

// Per-symbol bounds (shape_ranges): symbol -> [lo, hi].
using SymbolRanges = std::map<std::string, std::pair<int64_t, int64_t>>;

// Infers dims (and shape-value elements) for every value of `g`. Graph inputs: static dims as constants, free dims as
// the symbol their dim_param names (Value::dim_symbols), or "<input>:<axis>" when unnamed. `ranges` bound the symbols
// (DimTable::Bounds; the facts proved from them are checked by Bind). Returns true when every value that nodes produce
// or read is known.
bool InferSymbolic(const Graph& g, SymbolicShapes* out, const SymbolRanges& ranges = {});

// As InferSymbolic, and where a size depends on data, a fresh run-time symbol (SymbolicShapes::runtime) instead of an
// unknown: NonZero's count, Range's length when its bounds are computed from data, and the elements of an integer
// tensor of at most 64 elements read as a shape (Reshape, Expand, ConstantOfShape, Tile, Slice operands) that no rule
// computes. Only a runtime that binds those symbols while running (dynamic.h's shape-generic form) may use the result;
// Bind fails on them as unbound.
bool InferSymbolicRuntime(const Graph& g, SymbolicShapes* out, const SymbolRanges& ranges = {});

// A copy of `g` with every known value's dims evaluated under `symbols` (has_shape true) and every shape value's
// elements written as owned constant data (Value::folded/data, the value's int64/int32 dtype); unknown values are
// copied as they are. False with a reason naming the node and dim when a symbol is unbound, a dim is negative, a
// check fails (Reshape element count, Concat/Slice/broadcast/MatMul consistency, the runtime's static dims).
bool Bind(const Graph& g, const SymbolicShapes& s, const std::map<std::string, int64_t>& symbols, Graph* out,
          std::string* why);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_IR_SYMBOLIC_H_
