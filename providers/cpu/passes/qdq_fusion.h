// Graph optimization level 2 for quantized (QDQ) graphs on the CPU EP (ONNX Runtime's QDQSelectorActionTransformer
// for Conv and MatMul): an op between DequantizeLinear inputs and one QuantizeLinear runs as one int8 op.
//
//   DequantizeLinear(x_q) ─┐
//   DequantizeLinear(w_q) ─┼─ Conv ── QuantizeLinear ── y_q
//   DequantizeLinear(b_q) ─┘ (optional, int32)
//     ==> QLinearConv(x_q, x_scale, x_zp, w_q, w_scale, w_zp, y_scale, y_zp, b_q) ── y_q
//
//   DequantizeLinear(a_q) ─┬─ MatMul ── QuantizeLinear ── y_q
//   DequantizeLinear(b_q) ─┘
//     ==> QLinearMatMul(a_q, a_scale, a_zp, b_q, b_scale, b_zp, y_scale, y_zp) ── y_q
//
// Rewritten only when the int8 op computes what the graph does, up to the rounding of the final requantization:
//   - every scale and zero point is a constant initializer (not an overridable graph input), scales float;
//   - x (a) and y are per-tensor, 8-bit, of one element type (as ONNX Runtime's selectors require);
//   - Conv's w is a constant int8/uint8 initializer, per tensor or per output channel (axis 0, one scale per
//     channel); MatMul's b is 8-bit, per tensor or per column (2-D b, axis 1);
//   - Conv's bias, when present, is DequantizeLinear of a constant int32 [M] with zero point 0 and scale exactly
//     x_scale * w_scale[m] in float (so adding it to the int32 accumulator, as QLinearConv does, is the same sum);
//     a float bias leaves the Conv alone;
//   - the op's output is read only by that QuantizeLinear (not a graph output, not read from a subgraph);
//   - no blocked quantization (block_size), no float8/int4.
// A DequantizeLinear left without readers is removed; one that other nodes read stays. Missing zero points become
// zero initializers (QLinearConv/QLinearMatMul require them).
//
// Results differ from the unfused graph by at most one quantization step of y: the graph sums the dequantized
// products in float and rounds once in QuantizeLinear, the int8 op sums exactly in int32 and rounds
// acc * (x_scale * w_scale / y_scale); the two real values differ by float rounding only, so only a value within
// that rounding of a half-way point can round the other way.
//
// Then, for the QuantizeLinear nodes left: a DAG of elementwise float ops between one per-tensor 8-bit
// DequantizeLinear and a per-tensor 8-bit QuantizeLinear (Mul, Add, Sub, Div with one-element constants or with each
// other, Clip with constant bounds, Relu; e.g. PP-OCRv4's scale, bias and HardSwish after every QDQ convolution) is a
// function of one byte, so it becomes epctx.cpu::Lookup8(x_q) with attributes `table` (256 ints, indexed by the
// byte) and `to` (the output's DataType): 8 passes over float tensors become one over bytes. The table is
// evaluated with the kernels' formulas (DequantizeRow, one IEEE operation per op, QuantizeRow), so the result is the
// graph's bit for bit; refused when any value is not finite, when an intermediate value has another reader (graph
// output, subgraph, a node outside the group) or when an op has attributes (Clip-6). Counted as `qdq_lookups`.
//
// Graphs are copied on write (see cpu_fusion.h); nodes fused for plugin EPs are left alone.
#pragma once

#include <memory>

#include "graph/graph.h"
#include "providers/cpu/passes/cpu_fusion.h"

namespace epctx {

// The graph with the QDQ groups fused (the same pointer when none matched, else a copy; subgraphs likewise).
// Counts go to stats->qdq_convs, stats->qdq_matmuls and stats->qdq_lookups.
std::shared_ptr<Graph> FuseQdqNodes(const std::shared_ptr<Graph>& graph, CpuFusionStats* stats);

}  // namespace epctx
