// Graph optimization level 2 for the nodes the CPU EP runs (ONNX Runtime's ConvBNFusion and ConvActivationFusion):
// a float Conv with constant weights absorbs the inference BatchNormalizations and constant per-channel Mul / Add
// that follow it (weights and bias rescaled into new initializers) and then one activation (Relu, LeakyRelu,
// Sigmoid, Tanh, HardSwish, Clip with constant bounds, or the HardSwish that exporters spell
// x * Clip(x + 3, 0, 6) / 6), which the CPU EP's Conv kernel runs as a oneDNN post-op, and after it the Mul / Add /
// Sub / Div by one-element constants that follow (PP-OCR's learnable affine blocks), one eltwise_linear post-op. The Conv keeps its op type and gains the internal attributes below. A float MatMul by a constant 2-D B
// followed by an Add of a constant [N] (or [1, ..., N]) bias becomes one MatMul with the bias as a third input and
// the internal attribute kMatMulBiasAttr (providers/cpu/layout.h; ONNX Runtime's MatMulAddFusion makes a Gemm).
// A ConvInteger / MatMulInteger followed by Cast(to float) and a Mul by a one-element float (ONNX Runtime's dynamic
// quantizer) becomes one node with the scale as fifth input and kFusedOutputScaleAttr (fused_activation.h), then
// also takes a constant per-channel (ConvInteger) or per-column (MatMulInteger) Add and a Relu after it.
//
// Only values with one reader in their graph, not a graph output and not read from a subgraph are folded away.
// Nodes fused for plugin EPs (domain "epctx.fused") are left alone. Graphs are copied on write: the model's graph,
// which a context model is written from, is never changed (sessions generating a context model skip this pass).
#pragma once

#include <memory>

#include "graph/graph.h"
#include "providers/cpu/fused_activation.h"
#include "providers/cpu/layout.h"

namespace epctx {

struct CpuFusionStats {
  int batch_norms = 0;    // BatchNormalizations folded into a Conv
  int affines = 0;        // constant per-channel Mul / Add folded into a Conv
  int activations = 0;    // activations (or HardSwish patterns) fused into a Conv
  int linears = 0;        // Mul / Add / Sub / Div by one-element constants after a fused activation
  int matmul_biases = 0;  // constant Adds along the last axis fused into a MatMul by a constant B
  int output_scales = 0;  // Cast-to-float + Mul by a one-element scale fused into a ConvInteger / MatMulInteger
  int output_biases = 0;  // then the Add of a constant per-channel (per-column) bias (a Relu after it: activations)
  int gathered_rows = 0;  // fused MatMulIntegers read by a Gather of rows: the Gather moved before the product
  // The float16 pass (float16_promotion.h, every level):
  int float16_nodes = 0;  // float16 nodes computed in float32
  int float16_casts = 0;  // Casts inserted where a float16 region meets float16 readers or writers
  // The QDQ pass (qdq_fusion.h, level 2):
  int qdq_convs = 0;    // DequantizeLinear -> Conv -> QuantizeLinear groups run as QLinearConv
  int qdq_matmuls = 0;  // DequantizeLinear -> MatMul -> QuantizeLinear groups run as QLinearMatMul
  int qdq_lookups = 0;  // DequantizeLinear -> elementwise float ops -> QuantizeLinear groups run as a 256-byte table
  // The layout pass (cpu_layout.h, level 3):
  int layout_convs = 0;     // Convs reading or writing a laid-out value
  int layout_nodes = 0;     // other nodes running on laid-out values
  int layout_reorders = 0;  // Reorder nodes inserted where a plain reader needs a laid-out value
};

// The graph with the fusions applied (the same pointer when nothing applied, else a copy; subgraphs likewise).
std::shared_ptr<Graph> FuseCpuNodes(const std::shared_ptr<Graph>& graph, CpuFusionStats* stats);

}  // namespace epctx
