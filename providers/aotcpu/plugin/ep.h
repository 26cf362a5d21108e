// What the files of AotCpuExecutionProvider share (private to plugin/; nothing outside it includes this): the API
// table, the EP's state (AotCpuEp, Partition, the compute info the runtime holds), the helpers that make statuses and
// keep exceptions inside the plugin, and each file's entry points:
//
//   aotcpu_ep.cc      the EP table, the factory (devices, incl. virtual ISA levels), the exported entry points
//   ep_capability.cc  GetCapabilityImpl
//   ep_compile.cc     CompileImpl: fresh graphs (JIT, EPContext generation, weight-sharing groups); EPContext nodes
//                     are loaded through ep_load.cc
//   ep_load.cc        the binaries behind EPContext nodes: opened, checked, their partitions built
//   ep_compute.cc     Compute, MakeComputeInfo
//
// Every entry point the runtime calls runs under Guard: no exception crosses the ABI. Functions returning EpctxStatus*
// return null on success. Thread safety is the EP ABI's (include/epctx/ep_api.h): nothing here adds locking.
#ifndef EPCTX_PROVIDERS_AOTCPU_PLUGIN_EP_H_
#define EPCTX_PROVIDERS_AOTCPU_PLUGIN_EP_H_

#include <epctx/ep_api.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "providers/aotcpu/binary/context_binary.h"
#include "providers/aotcpu/plugin/options.h"
#include "providers/aotcpu/runtime/dynamic.h"
#include "providers/aotcpu/runtime/executor.h"

namespace epctx {
namespace aotcpu {

// The runtime's API table, set once by CreateEpFactories before any other entry point runs.
extern const EpctxApi* g_api;
constexpr const char* kEpName = "AotCpuExecutionProvider";
constexpr const char* kVendor = "epctx";
constexpr const char* kVersion = "0.2.0";

// A status of `code` whose message is prefixed with the EP's name.
EpctxStatus* Error(EpctxErrorCode code, const std::string& message);

// Runs `body` (returning EpctxStatus*), turning an escaping exception into EPCTX_RUNTIME_EXCEPTION.
template <typename Body>
EpctxStatus* Guard(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return Error(EPCTX_RUNTIME_EXCEPTION, e.what());
  } catch (...) {
    return Error(EPCTX_RUNTIME_EXCEPTION, "unknown exception");
  }
}

#define AOT_RETURN_IF_ERROR(expr)       \
  do {                                  \
    if (EpctxStatus* _st = (expr)) return _st; \
  } while (0)

// Milliseconds since `t0`.
double MsSince(std::chrono::steady_clock::time_point t0);

// ---- the EP's state ----

// The runnable form of one fused node: an executor over weights that live in `bytes` (an in-memory binary) or in
// a mapping owned by `keep`.
struct Partition {
  std::vector<size_t> input_map;   // kernel-context input index of each program input (empty: identity)
  std::shared_ptr<const void> keep;
  std::unique_ptr<Executor> exec;  // null for a prepare-only session or a dynamic partition
  std::unique_ptr<DynamicGraph> dynamic;  // a partition compiled per input shape (dynamic.h)
  std::string run_error;           // why Compute refuses when exec and dynamic are null
};

struct ComputeInfo {
  EpctxNodeComputeInfo base;
  std::shared_ptr<Partition> part;
};

// Session options that shape compilation and EPContext handling (after the prepare-and-load checks).
struct ContextOptions {
  bool enable = false;    // ep.context_enable
  bool embed = false;     // ep.context_embed_mode == 1
  std::string file_path;  // ep.context_file_path (the runtime sets it when generating)
  std::string prefix;     // ep.context_node_name_prefix
};

struct AotCpuEp {
  EpctxEp base;  // first member: the runtime sees &base
  ContextOptions context;
  AotCpuOptions options;  // effective options
  const EpctxLogger* logger = nullptr;
  int threads = 0;
  std::string isa;         // the target ISA (host's, or a virtual device's / target_isa below it)
  std::string host_isa;    // what this process runs (maybe emulated)
  bool host_emulated = false;
  bool portable = false;   // compiling for an ISA below the host's: plain layouts
  bool progress = false;   // stderr is a terminal
  std::string compat;      // GetCompiledModelCompatibilityInfo's string
  // Weight sharing (share.h): this session's id in the generation group, whether it joined one, whether its session
  // was created (OnSessionInitializationEnd), and the group binary it wrote as the last session.
  uint64_t session_id = 0;
  bool group_member = false;
  bool initialized = false;
  std::string written_binary;
  // dynamic_shapes: the shapes GetCapability gave the partition inputs made outside their partition (by the CPU EP or
  // another partition) from the whole graph's symbolic shapes, by value name; Compile gives them to the fused graphs.
  struct InputShape {
    std::vector<int64_t> dims;             // -1: free
    std::vector<std::string> dim_symbols;  // a free dim's symbol ("" for a fresh one)
  };
  std::map<std::string, InputShape> partition_input_shapes;
};

void LogWarning(const AotCpuEp* ep, const std::string& message);

AotCpuEp* Self(EpctxEp* ep);

// ---- ep_capability.cc ----

// GetCapability: claims the groups of supported nodes that pay, and gives the runtime a reason for every other node.
EpctxStatus* GetCapabilityImpl(AotCpuEp* ep, const EpctxGraph* graph, EpctxEpGraphSupportInfo* support);

// ---- ep_compile.cc ----

// Compile: fresh graphs compiled (and EPContext nodes generated when enabled), EPContext nodes loaded; one compute
// info per fused node into infos[i].
EpctxStatus* CompileImpl(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes, size_t count,
                         EpctxNodeComputeInfo** infos, EpctxNode** ep_context_nodes);

// ---- ep_load.cc ----

// What a dynamic partition needs from the EP: its compile options, threads, cache size and ranges.
DynamicGraph::Options DynamicOptionsOf(const AotCpuEp* ep);

// ---- ep_capability.cc, for ep_compile.cc ----

// The shape a value made outside its partition gets there from the whole graph's symbolic shapes `s` (v: its index):
// the rank, constant dims, each dim that is one symbol by that symbol's name and any other free dim by a fresh
// symbol; dims the runtime knows stay. False (val unchanged) when `s` does not know it or disagrees on the rank.
bool GiveSymbolicShape(const SymbolicShapes& s, int v, Value* val);
// Applies a recorded AotCpuEp::InputShape to a fused graph's input without a static shape.
void ApplyInputShape(const AotCpuEp::InputShape& shape, Value* val);
// shape_ranges as symbolic.h takes them.
SymbolRanges RangesOf(const AotCpuOptions& o);

// Builds executors for the named graphs of an opened binary. `keep` owns the bytes the reader views; `run`: threads
// for every partition, and the options of dynamic ones (DynamicOptionsOf).
CheckResult LoadPartitions(const ContextBinaryReader& reader, std::shared_ptr<const void> keep,
                           const DynamicGraph::Options& run,
                           const std::vector<std::string>& names, std::vector<std::shared_ptr<Partition>>* out);
// The same from `size` bytes at `data` (validated first).
CheckResult LoadPartitions(const void* data, size_t size, std::shared_ptr<const void> keep,
                           const DynamicGraph::Options& run,
                           const std::vector<std::string>& names, std::vector<std::shared_ptr<Partition>>* out);

// Validates the binary once and checks its compatibility block: INVALID_GRAPH naming `from` on any problem.
// With `deferred` (and verify_weights on), the weights' content hashes are only started here, on background
// threads; the caller finishes *deferred before it returns a session, and reports its failure first.
EpctxStatus* OpenChecked(AotCpuEp* ep, const std::string& from, const void* data, size_t size,
                         std::shared_ptr<ContextBinaryReader>* reader, WeightVerification* deferred = nullptr);

// INVALID_GRAPH "Failed to load from EpContext model. <message>" (context_util.h).
EpctxStatus* LoadError(const std::string& message);

// Loads the EPContext nodes `loaded` into *parts, weights verified before it returns.
EpctxStatus* LoadContextNodes(AotCpuEp* ep, const EpctxGraph** graphs, const EpctxNode** fused_nodes,
                              const std::vector<size_t>& loaded, std::vector<std::shared_ptr<Partition>>* parts);

// ---- ep_compute.cc ----

// The compute info the runtime holds for one fused node (owns a reference to `part`; EpReleaseNodeComputeInfos
// deletes it).
ComputeInfo* MakeComputeInfo(std::shared_ptr<Partition> part);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_PLUGIN_EP_H_
