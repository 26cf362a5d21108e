// The AotCpu EP's session options: reading them (through a callback, so tests need no runtime), and the
// prepare-and-load rules (docs: /work/shared/spec/prepare-and-load.md, QNN EP's enable_htp_prepare_and_load).
//
// Keys read (the runtime hands plugins every session config entry; provider options arrive as
// "ep.aotcpuexecutionprovider.<key>"):
//   ep.context_enable            0/1  write an EPContext model (the runtime sets ep.context_file_path to its path)
//   ep.context_embed_mode        0/1  1: programs inside the model; 0 (default): one external context binary
//   ep.context_file_path         the context model's path (generation) or where its binary is (loading from bytes)
//   ep.context_node_name_prefix  prefix of EPContext node names and partition names
//   ep.share_ep_contexts         0/1  share compiled weights across sessions
//   ep.stop_share_ep_contexts    0/1  the last session sharing them
//   ep.aotcpuexecutionprovider.enable_prepare_and_load  0/1  compile, then run from the compiled context (one session)
//   ep.aotcpuexecutionprovider.enable_prepare_only      0/1  compile and write the context model; never run
//   ep.aotcpuexecutionprovider.target_isa               an ISA name (isa.h); default: the host's
//   ep.aotcpuexecutionprovider.partition_switch_us      a number >= 0: what a partition costs per run, in microseconds
//                                                        (partition_cost.h); default kDefaultSwitchUs; 0 turns the
//                                                        rule off (every group that computes is claimed)
//   ep.aotcpuexecutionprovider.dynamic_shapes           0/1  (default 1) keep free input dims free: compile nodes whose
//                                                        shapes depend on them shape-generic; 0: leave them on the CPU EP
//   ep.aotcpuexecutionprovider.shape_cache_size         1..4096 (default 8): shapes a dynamic partition keeps
//   ep.aotcpuexecutionprovider.shape_ranges             "sym:lo..hi,..." bounds of free dims (checked per run)
//   ep.aotcpuexecutionprovider.shape_profiles           "x:1x3x48x320,1x3x48x640;..." shapes compiled ahead
//   session.intra_op_num_threads                         integer >= 0 (0 = oneDNN's default)
// Flags accept exactly "0" or "1"; an absent or empty entry means the default (0, except dynamic_shapes and
// verify_weights: 1). Anything else is an error naming
// the key, so a typo ("true", "yes") never silently changes nothing.
//
// The behavior matrix (ep.context_enable x enable_prepare_and_load):
//   0 0  kJit:             compile in memory, run (nothing written)
//   1 0  kGenerate:        compile, write the context model (+ binary when embed mode 0), run
//   0 1  kPrepareAndLoad:  Path A: compile, serialize to a binary in memory, reload it from there, run; no files
//   1 1  kPrepareAndLoadPersist: Path B: compile, write the context model and its external binary, reload the
//                          binary from disk, run; embed mode is forced to 0 (check 8)
//   enable_prepare_only=1 (needs ep.context_enable=1): kPrepareOnly: compile, write the context model, never run.
//
// Messages are plain sentences without the EP name; the EP prefixes "AotCpuExecutionProvider: ".
// Thread safety: all functions are reentrant.
#ifndef EPCTX_PROVIDERS_AOTCPU_PLUGIN_OPTIONS_H_
#define EPCTX_PROVIDERS_AOTCPU_PLUGIN_OPTIONS_H_

#include <epctx/ep_api.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "providers/aotcpu/binary/isa.h"
#include "providers/aotcpu/capability/partition_cost.h"

namespace epctx {
namespace aotcpu {

inline constexpr const char* kContextEnableKey = "ep.context_enable";
inline constexpr const char* kEmbedModeKey = "ep.context_embed_mode";
inline constexpr const char* kContextFilePathKey = "ep.context_file_path";
inline constexpr const char* kNodeNamePrefixKey = "ep.context_node_name_prefix";
inline constexpr const char* kShareContextsKey = "ep.share_ep_contexts";
inline constexpr const char* kStopShareContextsKey = "ep.stop_share_ep_contexts";
inline constexpr const char* kPrepareAndLoadKey = "ep.aotcpuexecutionprovider.enable_prepare_and_load";
inline constexpr const char* kPrepareOnlyKey = "ep.aotcpuexecutionprovider.enable_prepare_only";
inline constexpr const char* kTargetIsaKey = "ep.aotcpuexecutionprovider.target_isa";
// "1" (default): a context binary's weights are hashed and compared before the session is created. "0": only the
// structure and the other sections are checked; the weights are trusted (for binaries on verified storage, e.g.
// fs-verity or a read-only image). Reading 100 MB of weights once is most of a load's cost (docs/aotcpu.md).
inline constexpr const char* kVerifyWeightsKey = "ep.aotcpuexecutionprovider.verify_weights";
// The partition cost rule's per-partition switch cost (partition_cost.h); "0" turns the rule off.
inline constexpr const char* kPartitionSwitchUsKey = "ep.aotcpuexecutionprovider.partition_switch_us";
// Dynamic shapes (dynamic.h, docs/aotcpu.md "Dynamic shapes"): "1" (default, issue 27) claims nodes whose shapes
// depend on free input dims and compiles them shape-generic (a graph whose dims are all pinned compiles statically
// either way); "0" leaves them on the CPU EP with a reason naming the dim and the -f flag that pins it.
inline constexpr const char* kDynamicShapesKey = "ep.aotcpuexecutionprovider.dynamic_shapes";
// How many input shapes a dynamic partition keeps compiled (least recently used evicted); default 8, 1..4096.
inline constexpr const char* kShapeCacheSizeKey = "ep.aotcpuexecutionprovider.shape_cache_size";
// Per-symbol bounds, "seq:1..1024,past:0..4096": a run with a dim outside them is INVALID_ARGUMENT naming the dim.
inline constexpr const char* kShapeRangesKey = "ep.aotcpuexecutionprovider.shape_ranges";
// Input shapes compiled ahead with dynamic_shapes (their weights packed into the context binary, so a loaded session
// packs nothing): "x:1x3x48x320,1x3x48x640;mask:1x320,1x640" - profile i takes the i-th shape of every input named.
inline constexpr const char* kShapeProfilesKey = "ep.aotcpuexecutionprovider.shape_profiles";
// Not set by the runtime today (SessionConfig::intra_op_num_threads is not a config entry); read when present.
inline constexpr const char* kIntraOpThreadsKey = "session.intra_op_num_threads";

// Returns the config entry for `key`, or NULL when absent. The returned string must stay valid until the next call.
using ConfigGetter = std::function<const char*(const char* key)>;

// A getter over EpctxApi::GetSessionConfigEntry (statuses are released and read as "absent").
ConfigGetter SessionConfigGetter(const EpctxApi* api, const EpctxSessionOptions* options);

enum class Mode {
  kJit,                    // ep.context_enable=0, prepare_and_load=0
  kGenerate,               // ep.context_enable=1, prepare_and_load=0
  kPrepareAndLoad,         // ep.context_enable=0, prepare_and_load=1 (Path A, in memory)
  kPrepareAndLoadPersist,  // ep.context_enable=1, prepare_and_load=1 (Path B, files kept)
  kPrepareOnly,            // ep.context_enable=1, prepare_only=1
};
const char* ModeName(Mode mode);  // "jit", "generate", "prepare_and_load", "prepare_and_load_persist", "prepare_only"

struct AotCpuOptions {
  bool context_enable = false;
  int embed_mode = 0;  // 0 or 1
  std::string context_file_path;
  std::string node_name_prefix;
  bool share_ep_contexts = false;
  bool stop_share_ep_contexts = false;
  bool prepare_and_load = false;
  bool prepare_only = false;
  std::string target_isa;       // "" = the host's; a name checked by ResolveTargetIsa
  bool verify_weights = true;   // kVerifyWeightsKey
  int intra_op_num_threads = 0;  // 0 = default
  PartitionCostRule partition_cost;  // kPartitionSwitchUsKey
  bool dynamic_shapes = true;         // kDynamicShapesKey
  bool dynamic_shapes_set = false;    // the key was given (either value): the compatibility block records it
  size_t shape_cache_size = 8;        // kShapeCacheSizeKey
  struct Range {
    int64_t lo = 0, hi = 0;
  };
  std::map<std::string, Range> shape_ranges;  // kShapeRangesKey
  std::map<std::string, std::vector<std::vector<int64_t>>> shape_profiles;  // kShapeProfilesKey: input -> shapes

  // Mode of these options (meaningful once CheckPrepareAndLoad accepted them).
  Mode mode() const;
  // True when the session runs from a context binary reloaded after compiling (Path A or B).
  bool reloads() const { return prepare_and_load; }
  // True when a context model is written (kGenerate, kPrepareAndLoadPersist, kPrepareOnly).
  bool writes_context_model() const { return context_enable; }
};

struct OptionsError {
  EpctxErrorCode code = EPCTX_OK;
  std::string message;  // one sentence naming the key(s), the value and what to change
};

// Reads every key above. Errors (INVALID_ARGUMENT): a flag other than 0/1 ("ep.context_embed_mode must be 0 or 1,
// got '2'"), intra_op_num_threads not an integer in [0, 4096], partition_switch_us not a decimal number in
// [0, 1e6]. target_isa is stored as given (ResolveTargetIsa
// checks it against the host). Returns false with *error set; *out is then unspecified.
bool ReadOptions(const ConfigGetter& get, AotCpuOptions* out, OptionsError* error);

// The prepare-and-load checks, run when the EP is created (before any graph is seen):
//   6. prepare_and_load=1 and prepare_only=1: INVALID_ARGUMENT "... are mutually exclusive ...".
//   7. prepare_and_load=1, ep.context_enable=0 and ep.context_file_path set: INVALID_ARGUMENT "Contradictory
//      options: ..." (Path A persists nothing, so a file path means the user expected files).
//   prepare_only=1 with ep.context_enable=0: INVALID_ARGUMENT "Contradictory options: ..." (nothing would be
//      written and nothing run).
//   8. prepare_and_load=1, ep.context_enable=1, ep.context_embed_mode=1: accepted, embed_mode forced to 0, warning
//      "Overriding ep.context_embed_mode to 0 ..." (the reload reads the external binary).
// Everything else is accepted unchanged (the matrix above).
struct PrepareAndLoadResult {
  bool ok = true;
  OptionsError error;                 // when !ok
  AotCpuOptions effective;            // when ok
  std::vector<std::string> warnings;  // when ok; log each at WARNING
};
PrepareAndLoadResult CheckPrepareAndLoad(const AotCpuOptions& requested);

// Check 9, once the EP sees that the input model is already a compiled context model (it holds this EP's EPContext
// nodes): prepare_and_load is switched off and, if it was on, *warning is set to "prepare_and_load=1 is ignored
// because the input model is already a pre-compiled context model; ..." (else cleared). The EP then loads the
// nodes as usual. Returns the options to use.
AotCpuOptions IgnorePrepareAndLoadForContextModel(const AotCpuOptions& effective, std::string* warning);

// Checks target_isa against the host: "" -> host; a name that is not a level, or a level above the host, fails
// with INVALID_ARGUMENT naming the key, the value and the levels allowed ("... target_isa=avx512_core is higher
// than this CPU supports (at most avx2) ...": oneDNN can only produce code for ISAs the machine has).
bool ResolveTargetIsa(const AotCpuOptions& options, Isa host, Isa* target, OptionsError* error);

// The error a prepare_only session gives when asked to run (the EP returns it from Compute): EP_FAIL
// "the session was created with ep.aotcpuexecutionprovider.enable_prepare_only=1: it compiled the model and wrote
// '<ctx path>' but does not run it; create a session from '<ctx path>' to run the compiled model".
OptionsError PrepareOnlyRunError(const std::string& context_model_path);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_PLUGIN_OPTIONS_H_
