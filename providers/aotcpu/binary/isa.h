// CPU instruction-set levels of the AotCpu EP, the host's level (real or emulated), and the compatibility string
// stored with a compiled model.
//
// A context binary is compiled for one ISA level: oneDNN picks kernels and blocked weight layouts for the ISA it
// runs on, so a binary compiled for a higher level cannot run on a lower one, and one compiled for a lower level
// runs correctly but slower on a higher one. The levels are oneDNN's x64 cpu_isa values that form a strict chain:
//
//   sse41 < avx < avx2 < avx512_core < avx512_core_vnni < avx512_core_bf16 < avx512_core_amx
//
// oneDNN 2.6 also has avx512_mic, avx512_mic_4ops (Xeon Phi, deprecated) and avx2_vnni (Alder Lake: avx2 plus VNNI,
// not a superset of avx512_core); a host whose effective oneDNN ISA is one of them counts as avx2, the highest
// chain level it includes.
//
// Thread safety: everything is reentrant except HostIsa, which may change oneDNN's process-wide maximum ISA (see
// there); call it from one thread, at factory creation.
#ifndef EPCTX_PROVIDERS_AOTCPU_BINARY_ISA_H_
#define EPCTX_PROVIDERS_AOTCPU_BINARY_ISA_H_

#include <epctx/ep_api.h>

#include <functional>
#include <string>
#include <vector>

namespace epctx {
namespace aotcpu {

// In increasing order; the enumerator's value is its rank.
enum class Isa { kSse41 = 0, kAvx, kAvx2, kAvx512Core, kAvx512CoreVnni, kAvx512CoreBf16, kAvx512CoreAmx };

// Environment variable naming an emulated host ISA (EPCTX_AOTCPU_HOST_ISA=avx2), for testing what a smaller
// machine would do on a bigger one.
inline constexpr const char* kHostIsaEnv = "EPCTX_AOTCPU_HOST_ISA";

// "sse41", "avx", "avx2", "avx512_core", "avx512_core_vnni", "avx512_core_bf16", "avx512_core_amx".
const char* IsaName(Isa isa);
// Exact, case-sensitive name -> level; false for anything else.
bool ParseIsa(const std::string& name, Isa* isa);
// 0 for sse41 ... 6 for avx512_core_amx.
int IsaRank(Isa isa);
// Every level in order.
const std::vector<Isa>& AllIsas();
// "sse41, avx, avx2, avx512_core, avx512_core_vnni, avx512_core_bf16, avx512_core_amx" (for messages).
std::string IsaNameList();

// The levels a virtual (cross-compilation) device is offered for on a host of level `host`: avx2 and avx512_core,
// those of them strictly below `host`, in increasing order. Why these two: for the f32 graphs this EP compiles,
// oneDNN's kernels and weight layouts change at avx2 (8-wide FMA, 8-channel blocking) and at avx512_core (16-wide,
// 16-channel blocking); vnni, bf16 and amx only add int8/bf16 instructions, so a binary compiled for them holds
// the same f32 code as avx512_core's and would only refuse to load on more machines. sse41 and avx are CPUs from
// before 2013 (no FMA) that nobody deploys inference to. E.g. an avx512_core_vnni host offers {avx2, avx512_core};
// an avx2 host offers none.
std::vector<Isa> IsasBelow(Isa host);

// ---- oneDNN ----

// "<major>.<minor>.<patch>" of the oneDNN library loaded at run time (dnnl::version()).
std::string OneDnnVersion();

// Maps a dnnl_cpu_isa_t value (as returned by dnnl::get_effective_cpu_isa) to a level; false for values below
// sse41 (dnnl_cpu_isa_all) and unknown values. avx512_mic, avx512_mic_4ops and avx2_vnni map to avx2.
bool IsaFromOneDnn(unsigned dnnl_cpu_isa, Isa* isa);
// The dnnl_cpu_isa_t value of a level (for dnnl::set_max_cpu_isa).
unsigned OneDnnIsaOf(Isa isa);

// How HostIsa reaches oneDNN; replaced in tests. set_max returns true when oneDNN accepted the limit (it refuses
// once anything in the process has used oneDNN, including get_effective_cpu_isa). effective returns false when
// oneDNN's effective ISA is below sse41.
struct IsaProbe {
  std::function<bool(Isa)> set_max;
  std::function<bool(Isa*)> effective;
};
// The real oneDNN: dnnl::set_max_cpu_isa / dnnl::get_effective_cpu_isa.
IsaProbe OneDnnProbe();

struct HostIsaInfo {
  Isa isa = Isa::kSse41;  // what this process compiles for and judges binaries against
  bool emulated = false;  // isa came from EPCTX_AOTCPU_HOST_ISA
};

// The host's level. `requested` is the value of EPCTX_AOTCPU_HOST_ISA (NULL or "" = not set):
//  - not set: oneDNN's effective ISA (which honours oneDNN's own DNNL_MAX_CPU_ISA).
//  - set: the name must be a level (else error listing the levels); oneDNN's maximum ISA is lowered to it with
//    set_max_cpu_isa BEFORE oneDNN is queried, so oneDNN really behaves as that machine for the whole process (the
//    runtime's CPU EP shares the library). Errors: the name is above the real effective ISA ("... is higher than
//    this CPU supports (at most avx2)"); oneDNN was already used in this process with a higher ISA, so the limit
//    cannot take effect. Calling again with the same name succeeds (the limit is already in place).
// On failure returns false with *error a full sentence naming EPCTX_AOTCPU_HOST_ISA and what to change; *out is
// untouched. Meant for EpFactory creation (CreateEpFactories), before any session ran.
bool ResolveHostIsa(const char* requested, const IsaProbe& probe, HostIsaInfo* out, std::string* error);
// ResolveHostIsa(getenv(kHostIsaEnv), OneDnnProbe(), ...).
bool HostIsa(HostIsaInfo* out, std::string* error);

// ---- compatibility string (GetCompiledModelCompatibilityInfo / ValidateCompiledModelCompatibilityInfo) ----

inline constexpr const char* kCompatibilityTag = "epctx-aotcpu";

struct CompatibilityInfo {
  int format_major = 0, format_minor = 0;  // context binary format
  std::string onednn;                      // "<major>.<minor>.<patch>"
  Isa isa = Isa::kSse41;
};

// "epctx-aotcpu;format=<major>.<minor>;onednn=<version>;isa=<name>".
std::string FormatCompatibility(const CompatibilityInfo& info);
// This build's string for a binary compiled for `isa`: the context binary format it writes (context_binary.h) and
// the oneDNN it runs.
std::string CompatibilityFor(Isa isa);
// Parses a string made by FormatCompatibility: the tag first, then ';'-separated key=value fields in any order;
// format, onednn and isa are required, once each; unknown keys are ignored (a later minor may add some). false on
// anything else, with *why saying what is wrong.
bool ParseCompatibility(const std::string& text, CompatibilityInfo* info, std::string* why);

// Judges a binary described by `text` on a host of level `host` run with oneDNN `onednn_version` and reading
// format major `format_major`:
//   unparseable, another format major, another oneDNN version (exact major.minor.patch: oneDNN's kernels and
//   layouts may change in any release), or an ISA above `host` -> EPCTX_EP_UNSUPPORTED;
//   ISA below `host` -> EPCTX_EP_SUPPORTED_PREFER_RECOMPILATION (it runs, slower than a native compile);
//   same ISA -> EPCTX_EP_SUPPORTED_OPTIMAL.
EpctxCompiledModelCompatibility JudgeCompatibility(const std::string& text, Isa host,
                                                   const std::string& onednn_version, int format_major);
// The same against this process: OneDnnVersion() and the format major this build reads.
EpctxCompiledModelCompatibility JudgeCompatibility(const std::string& text, Isa host);

// Load-time error texts (the EP wraps them as "Failed to load from EpContext model. ...").
// "the context binary was compiled for avx512_core but this CPU supports at most avx2; recompile the model on this
// machine (or for target_isa avx2 or lower)". `emulated` adds that the limit comes from EPCTX_AOTCPU_HOST_ISA.
std::string IsaTooHighMessage(Isa binary, Isa host, bool emulated = false);
// "the context binary was compiled with oneDNN 2.7.0 and context format 1.0, but this build runs oneDNN 2.6.3 and
// reads context format 1.x; recompile the model with this build".
std::string BuildMismatchMessage(const CompatibilityInfo& binary, const std::string& onednn_version,
                                 int format_major);

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_BINARY_ISA_H_
