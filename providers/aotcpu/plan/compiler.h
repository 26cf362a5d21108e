// The AotCpu compiler: ONNX graph (ir.h) -> Program (program.h) + packed weights.
//
//   1. constant folding (fold.h): nodes whose inputs are all constant are evaluated here, once;
//   2. lowering in topological order: each node's lowering function (ops_registry.cc) emits steps and may absorb
//      the nodes after it (fusion: BatchNormalization/activations/residual Add into Conv, bias/activation into
//      MatMul, the Erf-form GELU into one eltwise step);
//   3. layouts: oneDNN chooses (format_tag::any) for Conv/MatMul weights and Conv activations; a value that a
//      consumer needs plain gets one reorder, made once and shared;
//   4. memory plan: every intermediate gets an offset in one arena (lifetimes from first definition to last use,
//      aliases included), outputs are written in place where the layout allows.
#ifndef EPCTX_PROVIDERS_AOTCPU_PLAN_COMPILER_H_
#define EPCTX_PROVIDERS_AOTCPU_PLAN_COMPILER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "providers/aotcpu/binary/context_binary.h"
#include "providers/aotcpu/ir/ir.h"
#include "providers/aotcpu/runtime/program.h"

namespace epctx {
namespace aotcpu {

// Decisions an earlier shape's lowering of the same graph made, by node name (dynamic.h: a graph lowered once per
// input shape). A later shape tries them first and searches again only when they no longer hold. Not thread-safe:
// one lowering at a time uses it.
struct LoweringMemo {
  struct Conv {
    size_t fused = 0;        // post-ops fused
    bool plain_src = false;  // the source taken plain (else in src_tag)
    uint32_t src_tag = 0, weights_tag = 0, dst_tag = 0;  // dnnl_format_tag_t
  };
  std::map<std::string, Conv> conv;
  // A convolution's folding (BatchNormalizations and affine maps into its weights and bias), the same at every shape:
  // the nodes absorbed, in order, and the resulting bias and weights (null: the initializer as it is).
  struct Fold {
    std::vector<std::string> absorbed;
    std::shared_ptr<const std::vector<float>> weights;
    std::vector<float> bias;
    bool has_bias = false;
  };
  std::map<std::string, Fold> fold;
  size_t hits = 0, misses = 0;
};

struct CompileOptions {
  // Plain (row-major) layouts everywhere instead of oneDNN's choice: used when compiling for an ISA below the
  // host's (a virtual device), because the blocked layouts oneDNN picks depend on the ISA it runs on.
  bool portable_layouts = false;
  // Convolutions take channels-last (nhwc) sources and destinations where oneDNN has a direct kernel for them, instead
  // of the layout it prefers (blocked nChw8c/16c at AVX2, often nhwc at AVX-512). Set by the layout plan in
  // CompileGraph for its second candidate (compiler.cc, "Layout plan"), not by users.
  bool channels_last = false;
  std::string isa;  // the target ISA name, recorded in the binary
  // Called after each weight is packed (count so far, bytes so far); may be empty.
  std::function<void(size_t weights, uint64_t bytes)> on_weight;
  // Weight layouts shared across the graphs of a weight-sharing group (may be empty): before packing a constant
  // weight, lowering asks which layout an earlier graph packed the same source bytes into and tries it first, so that
  // equal weights pack into equal bytes and the binary stores them once; it records its own choice after packing.
  std::function<bool(uint64_t source_hash, dnnl::memory::desc* layout)> find_layout;
  std::function<void(uint64_t source_hash, const dnnl::memory::desc& layout)> record_layout;
  // Lowering one shape of a graph whose inputs have free dims (dynamic.h), where weights must not be packed again:
  // `earlier_weight(name)` returns what an earlier shape's lowering made for the weight of that name (its layout and
  // bytes), or null. A weight wanted in that same layout is not packed or copied: its step reads those bytes
  // (CompiledGraph::borrowed), and a MatMul offers oneDNN that layout first, as for a weight-sharing group.
  struct EarlierWeight {
    dnnl::memory::desc layout;
    std::shared_ptr<const std::string> bytes;  // owned bytes; or, when null, `data`/`size` kept alive by `keep`
    const void* data = nullptr;                //   (weights mapped from a context binary)
    size_t size = 0;
    std::shared_ptr<const void> keep;
  };
  std::function<const EarlierWeight*(const std::string& name)> earlier_weight;
  // Constant initializers of the graph (data owned by the runtime, alive as long as `initializer_owner`) are read in
  // place instead of copied when they are operands as they are (dynamic.h: the graph is lowered once per shape).
  std::shared_ptr<const void> initializer_owner;
  // A dynamic graph's memo of lowering decisions (null: search every time).
  std::shared_ptr<LoweringMemo> memo;
};

struct CompiledGraph {
  Program program;
  std::vector<TensorInput> weights;  // index i = Buf::kWeight index i
  // Weights this lowering did not copy (CompileOptions::earlier_weight, initializer_owner): empty, or one entry per
  // weight; where `data` is set, weights[i].bytes is empty and the bytes are there, kept alive by `keep`.
  struct Borrowed {
    const void* data = nullptr;
    size_t size = 0;
    std::shared_ptr<const void> keep;
  };
  std::vector<Borrowed> borrowed;
};

// ---- compile ---------------------------------------------------------------------------------------------------

// Compiles all nodes of `g` (a fused graph); `inputs`/`outputs` name the fused node's inputs/outputs in order.
CheckResult CompileGraph(const Graph& g, const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const CompileOptions& options, CompiledGraph* out);

// ---- what lowering functions use -------------------------------------------------------------------------------

class LowerContext {
 public:
  LowerContext(const Graph& g, const CompileOptions& options);
  ~LowerContext();

  const Graph& graph() const { return g_; }
  const Node& node(int n) const { return g_.nodes[static_cast<size_t>(n)]; }
  const CompileOptions& options() const { return options_; }
  dnnl::engine& engine() { return engine_; }

  // Reading a value as a step input (records the use for the memory plan):
  //   Use: in whatever layout it currently has; UsePlain: row-major (adds one shared reorder if needed).
  //   Constants become weight operands (plain) the first time they are used.
  Operand Use(int value);
  Operand UsePlain(int value);
  // In layout `desc` (a primitive's preferred source layout): one shared reorder step per value and layout when the
  // current layout differs. A kNone operand when the value is not available or `desc` names no layout a program can
  // describe.
  Operand UseAs(int value, const dnnl::memory::desc& desc);
  // The current operand of a value without recording a use (to inspect its layout); null for a value not
  // available yet and for a deferred view (below) not materialized yet.
  const Operand* Peek(int value) const;

  // Deferred views (a Transpose, an Identity of one): `value` is `view`, a plain strided operand over bytes another
  // step produced, and no step has copied it yet. A consumer that reads strided operands in place (MatMul) takes it
  // from PeekView and emits no copy. The first Use/UsePlain/Alias materializes it: one reorder step named `name`
  // into plain storage. A fused output is materialized at once (into its output buffer, while the viewed bytes are
  // hot) and is then no deferred view. A view's bytes stay alive while a step reads them: lifetimes come from the
  // steps' operands.
  void DefineView(int value, const Operand& view, const std::string& name);
  const Operand* PeekView(int value) const;  // null when `value` is not a deferred view

  // A weight of this graph: `bytes` in layout `desc` (tag found with FormatTagOf, else strides). Identical bytes
  // are shared by the context binary writer. `name` should say where it came from ("conv1.weight:packed").
  CheckResult AddWeight(const std::string& name, std::string bytes, const dnnl::memory::desc& desc, Operand* out);
  // Reorders plain row-major f32 `data` (dims of `plain`) into `target` (e.g. the weights desc a primitive chose
  // with format_tag::any) and adds the result as a weight.
  CheckResult PackWeight(const std::string& name, const void* data, const dnnl::memory::desc& plain,
                         const dnnl::memory::desc& target, Operand* out);
  // The layout an earlier shape packed the weight `name` into (CompileOptions::earlier_weight), else the one a
  // group's earlier graph packed these source bytes into (CompileOptions::find_layout); false if none.
  bool PreferredLayout(const std::string& name, const void* data, const dnnl::memory::desc& plain,
                       dnnl::memory::desc* out) const;

  // Defines `value` as produced by the step being built, in layout `desc`. Returns the dst operand. Graph outputs
  // in plain layout are written straight into the output buffer.
  Operand Define(int value, const dnnl::memory::desc& desc);
  // Defines `value` in plain row-major layout with its own dtype and dims (any dtype, incl. int64/bool).
  Operand DefinePlain(int value);
  // Defines `value` as a view of `source`'s bytes with new dims (plain row-major only; Reshape/Squeeze/Flatten/
  // Identity). Fails when `source` is not plain.
  CheckResult Alias(int value, int source, const std::vector<int64_t>& dims);
  // Defines `value` as `view`, an operand over bytes an earlier step produced (a blocked sub-block: Split, Slice); no
  // step. False (nothing defined) when `value` is a fused output, which must be written to its output buffer.
  bool DefineSubView(int value, const Operand& view);
  // `value` (read plain) broadcast to `dims` (numpy rules; its dims right-aligned) into new arena storage by one
  // kStridedCopy step: for a step that needs an operand at its output's shape (oneDNN's binary first operand). A
  // kNone operand when the value is not available or does not broadcast to `dims`.
  Operand BroadcastCopy(int value, const std::vector<int64_t>& dims);

  // New plain arena storage for an intermediate no graph value names (a transposed copy a step reads): its lifetime
  // comes from the steps that write and read it.
  Operand NewPlain(uint32_t dtype, const std::vector<int64_t>& dims);

  void Emit(Step step);

  // Operands derived from a value once and read by several steps (an int32 copy of an 8-bit zero point), by a key
  // the lowering chooses: null when none was recorded yet.
  const Operand* FindDerived(const std::string& key) const;
  void SetDerived(const std::string& key, const Operand& op);

  // Fusion helpers.
  // The single node consuming `value`, or -1 (also -1 when the value is a graph output or read twice).
  int SoleConsumer(int value) const;
  // Marks node `n` as handled by the step being built (it will not be lowered on its own).
  void Absorb(int n);
  bool IsAbsorbed(int n) const;
  // True when `value` already has an operand (its producer was lowered, or it is a graph input or constant).
  bool IsAvailable(int value) const;

  CheckResult Fail(int n, const std::string& why) const;  // "node '<name>' (<op>): <why>"

  // Used by the compiler driver.
  CheckResult Finish(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                     CompiledGraph* out);
  void BindInput(int value, uint32_t index);
  void BindOutput(int value, uint32_t index);
  void SetCurrentNode(int n) { current_node_ = n; }

 private:
  // Weights this lowering does not own (CompileOptions::earlier_weight, initializer_owner).
  void AddBorrowed(const CompiledGraph::Borrowed& b);
  bool AddEarlierWeight(const std::string& name, const dnnl::memory::desc& desc, Operand* out);
  CheckResult AddWeight(const std::string& name, std::string bytes, const dnnl::memory::desc& desc, Operand* out,
                        size_t borrowed_size);
  // A reorder step copying `src` (the current operand of `value`) into `dst` (layout set; placed in new arena storage
  // of `bytes`), named after the value with `suffix`. Returns `dst` as placed.
  Operand ReorderCopy(int value, const Operand& src, Operand dst, uint64_t bytes, const char* suffix);
  struct Storage;
  struct Impl;
  const Graph& g_;
  CompileOptions options_;
  dnnl::engine engine_;
  int current_node_ = -1;
  std::unique_ptr<Impl> impl_;
};

// Lowering and support functions per op type, registered in ops_registry.cc.
using SupportFn = bool (*)(const Graph& g, const Node& n, std::string* why);
using LowerFn = CheckResult (*)(LowerContext& ctx, int node);
struct OpEntry {
  const char* op_type;
  SupportFn support;
  LowerFn lower;
};
const OpEntry* FindOp(const std::string& domain, const std::string& op_type);

// ---- shared helpers for lowering functions ---------------------------------------------------------------------

// oneDNN data type for an ONNX code (f32, s32, s8, u8); undef otherwise.
dnnl::memory::data_type DnnlType(uint32_t onnx_dtype);
// Plain row-major descriptor.
dnnl::memory::desc PlainDesc(const std::vector<int64_t>& dims, uint32_t onnx_dtype);
// The oneDNN format tag equal to `d` (searching every tag for d's rank), or 0 when none matches exactly.
uint32_t FormatTagOf(const dnnl::memory::desc& d);
// Operand <-> descriptor (the executor uses the same rule). int64 operands are described by an f32 stand-in with
// a trailing dimension of 2 (oneDNN has no 64-bit integer type); only byte extents matter for them.
CheckResult OperandDesc(const Operand& op, dnnl::memory::desc* out);
// The layout part of an operand from a descriptor: plain or strided -> tag 0 + strides, blocked -> its format tag.
// False when the blocked layout matches no format tag.
bool LayoutFromDesc(const dnnl::memory::desc& d, Operand* op);
// True for a dense row-major operand (tag 0, strides empty or dense).
bool IsPlain(const Operand& op);
// oneDNN's equality plus equal strides on every dim. oneDNN's own equality ignores the strides of size-1 dims, but
// its kernels do not: a batch-1 source [1, 1, 1760] in abc "equals" the acb source brgconv asked for, and a
// primitive recreated from abc ran the reference kernel (32 ms instead of 0.05 ms on an AVX-512 machine, issue 14).
bool SameLayout(const dnnl::memory::desc& a, const dnnl::memory::desc& b);
// True when every input/output of the node is a float tensor with a static shape.
bool StaticFloatTensors(const Graph& g, const Node& n, std::string* why);
// ONNX elementwise activation -> oneDNN eltwise (Relu, LeakyRelu, Clip (constant bounds), Sigmoid, HardSigmoid,
// HardSwish, Tanh, Exp, Sqrt, Abs, Log, Elu, Softplus, Neg via linear, Gelu...). False when not expressible.
bool EltwiseFor(const Graph& g, const Node& n, uint32_t* alg, float* alpha, float* beta);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_PLAN_COMPILER_H_
