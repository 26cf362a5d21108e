// Graph optimization level 3 (ONNX Runtime's ORT_ENABLE_LAYOUT, its NCHWc transformer) for the nodes the CPU EP
// runs: activations stay in the layout oneDNN's convolutions want (providers/cpu/layout.h: nhwc here, nChw16c or
// nChw8c on other machines) across consecutive convolutions and the nodes between them that can run laid out,
// instead of every Conv reordering plain NCHW in and out per node and per run.
//
// A value v written by a laid-out node gets a twin "v/<layout>" holding the physical tensor; the node writes the twin
// instead of v. Nodes that run laid out:
//   Conv (float, constant 1-D or 2-D weights): reads a twin when there is one, writes one when the layout fits its
//     output channels (internal attributes kSrcLayoutAttr / kDstLayoutAttr);
//   elementwise unary ops, and Add/Sub/Mul/Div/Max/Min/Pow/PRelu whose operands are twins of one channel count and
//     rank, one-element constants or per-channel constants (rewritten into the layout);
//   Concat along the channels, Resize nearest with constant scales or sizes that keep N and C, and
//   GlobalAveragePool (epctx.cpu::GlobalAveragePool).
// Where a plain reader needs v (another node, a graph output, a subgraph), one epctx.cpu::Reorder writes v from its
// twin. A Conv's twin that only plain readers read is dropped again (the Conv writes v as before).
// Nodes fused for plugin EPs are plain readers. Graphs are copied on write, as FuseCpuNodes.
#pragma once

#include <memory>

#include "graph/graph.h"
#include "providers/cpu/layout.h"
#include "providers/cpu/passes/cpu_fusion.h"

namespace epctx {

// The graph with `layout` applied (the same pointer when nothing changed or `layout` is kPlain, else a copy with
// its subgraphs copied too). Counts into stats->layout_*.
std::shared_ptr<Graph> LayOutCpuNodes(const std::shared_ptr<Graph>& graph, CpuLayout layout, CpuFusionStats* stats);

}  // namespace epctx
