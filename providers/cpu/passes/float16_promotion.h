// Float16 regions computed in float32 on the CPU EP (issue 26), as ONNX Runtime 1.30 does on x86 at every
// optimization level: its InsertCastTransformer runs the float16 ops it has no float16 kernel for in float32 and
// removes the float16 round trips it inserted between them, so the feature maps of a float16 model are float32
// values and only the model's own Casts to float16 round. Computing each op in float16 instead (one rounding per op)
// is both slower and further from ORT (ISNet-fp16 masks: 1.3e-3 from ORT per op in float16, 7.6e-4 in float32).
//
// Which values are promoted follows the rule AotCpu follows (providers/common/float16_rules.h). A node of the CPU EP
// is *promoted* when it is an ONNX op, has a float16 tensor input or output, every input and output has a known
// tensor type, it holds no subgraph, it is not listed by Float16OutputFromAttribute and it is not a Cast to float16.
// Then, in each graph of the tree:
//   - a promoted node reads and writes float32: each float16 value v it touches gets a float32 twin
//     "v/epctx_f32" (unique in the tree), its value type float;
//   - a float16 constant initializer read by a promoted node is converted once, here (exact): the twin is a float32
//     initializer, and the float16 one is dropped when nothing else reads it;
//   - a float16 value that comes from outside the region (a graph input, an overridable initializer, a value of an
//     enclosing graph, the output of a node left in float16) reaches promoted readers through one Cast to float
//     (exact);
//   - a promoted value that is read as float16 (a graph output, a node left in float16, a subgraph, a Cast to
//     float16 of the model) is written back by one Cast to float16 under its original name: graph outputs keep their
//     declared float16 type and values rounded once;
//   - a Cast to float16 inside a region stays and rounds: it reads the float16 version of its input and its readers
//     convert its output back to float32.
// Nodes fused for plugin EPs are never promoted: their float16 inputs and outputs are boundaries like graph inputs.
//
// Runs before the level-2 passes, so the fusions see float Convs with float weights. Graphs are copied on write (see
// cpu_pass_util.h RewriteCopy).
#pragma once

#include <memory>

#include "graph/graph.h"
#include "providers/cpu/passes/cpu_fusion.h"

namespace epctx {

// The graph with its float16 regions promoted (the same pointer when no node is promoted, else a copy). Counts go to
// stats->float16_nodes (promoted nodes) and stats->float16_casts (Casts inserted at region edges).
std::shared_ptr<Graph> PromoteFloat16Nodes(const std::shared_ptr<Graph>& graph, CpuFusionStats* stats);

}  // namespace epctx
