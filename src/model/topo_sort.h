// Node order of a loaded ONNX graph: producers before consumers, as the ONNX checker requires and ONNX Runtime
// establishes for itself (it sorts and runs graphs whose file order is not topological, e.g. onnxconverter-common's
// float16 converter appends the graph input's Cast as the last node).
#pragma once

#include <string>

#include "core/status.h"

namespace onnx {
class GraphProto;
}

namespace epctx {

// Reorders the nodes of `graph` and, recursively, of every subgraph (If branches, Loop and Scan bodies, any GRAPH or
// GRAPHS attribute) so that every node comes after the nodes that produce its inputs and the values its subgraphs
// read from an enclosing scope (a subgraph may read a value that a later node of the file order produces: the node
// owning the subgraph moves after that producer).
//
// The order is stable: among the nodes whose inputs are available, the one first in the file comes first, so a graph
// already sorted keeps its order exactly and an unsorted one moves only what it must.
//
// Errors (INVALID_GRAPH; `what` names the model and starts the message):
// - a cycle (a node that, directly or through other nodes or a subgraph, reads its own output): the message names
//   the nodes on one cycle and the values between them, in order;
// - a node input, or a value a subgraph reads, that no node, graph input or initializer of the graph or of an
//   enclosing graph produces: names the node, the value and the graph;
// - a graph output produced by nothing (in a subgraph, an enclosing graph's value counts).
// A value that two nodes produce (not SSA) leaves that graph's order unchanged: the ONNX checker refuses it with its
// own message. No other check is made here.
Status SortNodesTopologically(onnx::GraphProto* graph, const std::string& what);

}  // namespace epctx
