// Capability: which nodes of a graph the AotCpu EP takes, and how they group into partitions the runtime can fuse.
// The EP's GetCapability (plugin/ep_capability.cc) asks IsNodeSupported per node, groups the supported ones with
// GroupNodes, then keeps the groups that pay (partition_cost.h). Reentrant: both only read the graph.
#ifndef EPCTX_PROVIDERS_AOTCPU_CAPABILITY_CAPABILITY_H_
#define EPCTX_PROVIDERS_AOTCPU_CAPABILITY_CAPABILITY_H_

#include <string>
#include <vector>

#include "providers/aotcpu/ir/ir.h"

namespace epctx {
namespace aotcpu {

// Whether the EP can run node `n` of `g`: op registered, every input and output a static-shaped tensor of a
// supported type, attributes within what the lowering handles. `why` gets a reason when not.
bool IsNodeSupported(const Graph& g, const Node& n, std::string* why);

// Splits the supported nodes into groups the runtime can fuse without creating a cycle: two supported nodes share
// a group only if connected through supported nodes and no path between them passes an unsupported node.
std::vector<std::vector<int>> GroupNodes(const Graph& g, const std::vector<bool>& supported);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_CAPABILITY_CAPABILITY_H_
