// Whether a group of claimable nodes is worth a partition (issue 14, "partitioning that pays").
//
// Every partition has a price when it runs: the runtime switches to the plugin (a fused node called through the C
// ABI: inputs looked up and checked, an arena taken, at least one oneDNN primitive per step) and back, and the values
// crossing its boundary are handed over in plain layout. A model with control flow leaves its If nodes on the CPU EP
// and is cut into islands; a lone elementwise node between nodes of the CPU EP costs more as a partition than AotCpu
// saves on it. Such a group stays on the CPU EP.
//
// The rule (GroupPays), in microseconds of one core, for one run:
//   saving    = kNodeSavedUs x nodes run (every node not folded to a constant, views included: the CPU EP dispatches
//               a kernel per node, a partition runs fused steps and no step for a view)
//               + kSavedFraction x work, work = multiply-adds / kMacsPerUs (Conv, ConvTranspose, MatMul, Gemm, LSTM:
//               AotCpu's packed-weight kernels; elementwise and data movement are memory-bound and run at the same
//               speed on both EPs, so their bytes save nothing);
//   boundary  = switch_us + bytes crossing / kCrossBytesPerUs (non-constant inputs made outside the group, outputs
//               read outside it, read by no node of the graph (an If body's outer-scope read) or graph outputs);
//   the group is claimed when  saving >= boundary,  or when it is the whole graph (every node that is not a folded
//   constant is in it: there is no runtime to switch from), or when the rule is off.
// Constants measured on the project's 2-vCPU AVX-512 VM, one thread (docs/aotcpu.md, "Partitions that pay"): models
// of 20 islands between Sin nodes (which AotCpu leaves on the CPU EP), each island one Relu or Relu + Mul + Add, on
// 128 and 4096 floats, AotCpu with every island claimed against the CPU EP alone: a one-node island costs 0.6 us more
// than the CPU EP's node on 128 floats and 2.5 us more on 4096; a three-node island saves 0.55 us on 128 floats and
// costs 1.3 us more on 4096. Fitted: a partition costs 1.2 us plus its crossing bytes at ~16 GB/s and saves 0.6 us
// per node. kSavedFraction: AotCpu runs the zoo's models about 1.9x faster than the CPU EP (geometric mean of steady
// state), so it saves about half of the heavy ops' time. The provider option partition_switch_us overrides switch_us.
//
// Thread safety: pure functions over borrowed graphs.
#ifndef EPCTX_PROVIDERS_AOTCPU_CAPABILITY_PARTITION_COST_H_
#define EPCTX_PROVIDERS_AOTCPU_CAPABILITY_PARTITION_COST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "providers/aotcpu/ir/ir.h"

namespace epctx {
namespace aotcpu {

inline constexpr double kMacsPerUs = 1e4;        // ~10 GMAC/s on one core (the executor's small-step estimate too)
inline constexpr double kSavedFraction = 0.5;    // of the heavy ops' estimated time
inline constexpr double kNodeSavedUs = 0.6;      // per node run inside a partition instead of on the CPU EP
inline constexpr double kCrossBytesPerUs = 1.6e4;  // ~16 GB/s: what crossing a partition's boundary costs per byte
inline constexpr double kDefaultSwitchUs = 1.2;  // per partition and run

struct PartitionCostRule {
  bool enabled = true;                // false: every group that computes is claimed (partition_switch_us=0)
  double switch_us = kDefaultSwitchUs;
};

struct GroupCost {
  int nodes_run = 0;            // nodes of the group not folded to constants
  double macs = 0;              // multiply-adds in them
  double work_us = 0;           // macs / kMacsPerUs: the heavy ops' estimated single-core time
  double saving_us = 0;         // kNodeSavedUs * nodes_run + kSavedFraction * work_us
  uint64_t boundary_bytes = 0;  // bytes of the values crossing the group's boundary (in + out)
  double boundary_us = 0;       // switch_us + boundary_bytes / kCrossBytesPerUs
  bool whole_graph = false;     // no node of the graph outside the group except folded constants
};

// A node that only renames bytes in AotCpu (Reshape, Squeeze, Unsqueeze, Flatten, Identity, a Cast to the same
// type; a Cast to another type computes): no step runs for it inside a partition.
bool IsZeroCopyView(const Graph& g, const Node& n);

// Multiply-adds of Conv, ConvTranspose, MatMul, Gemm and LSTM from their static shapes; 0 for other ops and for
// nodes whose shapes are not static.
double NodeMacs(const Graph& g, const Node& n);

// `group`: node indices of `g`; `folded[i]`: node i computes a constant (costs nothing at run time).
GroupCost EstimateGroupCost(const Graph& g, const std::vector<int>& group, const std::vector<bool>& folded,
                            const PartitionCostRule& rule);

// True when the group is worth a partition under `rule` (above).
bool GroupPays(const GroupCost& cost, const PartitionCostRule& rule);

// The reason recorded for each node of a group that does not pay, e.g. "island too small to pay for its boundary:
// est. saving 0.6 us (1 node, work 0 us) vs boundary 1.3 us (switch 1.2 us + 1.0 KB crossing); provider option
// partition_switch_us=0 claims it anyway".
std::string NotPayingReason(const GroupCost& cost, const PartitionCostRule& rule);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_CAPABILITY_PARTITION_COST_H_
