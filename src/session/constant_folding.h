// Constant folding, the runtime's one graph optimization (ONNX Runtime's level-1 "basic" ConstantFolding): after
// free-dimension overrides and shape inference, every main-graph node whose inputs are all constant (initializers
// that are not graph inputs, outputs of folded nodes) is evaluated once with the CPU EP's own kernel, so it folds
// exactly as it would run, and replaced by initializers; Shape and Size of a value whose shape is static fold too.
// ONNX shape inference then runs again, so shapes computed at run time before (a Reshape's target made by
// Shape -> Gather -> Concat) become static downstream, and the passes repeat until nothing more folds. Execution
// providers' GetCapability and Compile, and a written context model, see the folded graph.
//
// If branches fold the same way (they run with the enclosing graph's values, whose shapes are fixed; constants of
// enclosing graphs count), nested Ifs too. An If whose condition is constant (often a shape test, `x.dim() == 2`) is
// replaced by the branch it picks, as ONNX Runtime's constant folding does: the branch's nodes take its place, its
// outputs take the If's output names (an Identity copies a branch output that no node of the branch computes), and its
// values keep their names unless the name is defined elsewhere in the model (then a fresh one; model.h
// InitializerRewrite::inline_ifs); its shapes are then static and fold in the next pass. What never folds: other
// nodes with subgraphs, and Loop and Scan
// bodies (a loop-carried value may change shape between iterations); nodes that produce a graph's (or branch's)
// output (graph input and output names and order never change); ops outside the default ONNX domain;
// random ops, Dropout, DequantizeLinear (kept for quantized groups, as ONNX Runtime does); a node whose output shape
// ONNX shape inference does not know statically, or whose kernel gives another shape than inference says, or
// whose outputs would be larger than ConstantFoldingOptions::max_output_bytes and than its constant inputs
// together (a ConstantOfShape of a large shape stays a node). A node whose kernel fails stays too: the error
// then surfaces at run time, as without folding. Compiled models (holding EPContext nodes) are not folded.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "model/model.h"

namespace epctx {

struct ConstantFoldingOptions {
  int num_threads = 1;  // the session's intra-op threads (kernels fold with the split they run with)
  // A node folds only if its outputs together take at most max(max_output_bytes, bytes of its constant inputs):
  // folding never materialises a tensor larger than this or than the data it is computed from.
  uint64_t max_output_bytes = uint64_t{1} << 20;
  int max_passes = 32;  // shape inference runs once per pass that folded something
};

struct ConstantFoldingStats {
  size_t nodes_folded = 0;  // nodes replaced by initializers (Constant nodes included) or by their If branch
  int passes = 0;           // passes that folded something
  // When ONNX shape inference failed on a folded graph: its message (folding then stopped; types stay as before).
  std::string inference_error;
};

// Folds `model`'s main graph in place (model->graph and model->proto alike). Returns INTERNAL-style FAIL only for
// an inconsistency between the two; a model the pass cannot analyse (a cycle, a dangling input) is left as it is
// for the session's planner to report.
StatusOr<ConstantFoldingStats> FoldConstants(Model* model, const ConstantFoldingOptions& options);

}  // namespace epctx
