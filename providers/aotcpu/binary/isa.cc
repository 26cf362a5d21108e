#include "providers/aotcpu/binary/isa.h"

#include <cctype>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>

#include "providers/aotcpu/binary/context_binary.h"

namespace epctx {
namespace aotcpu {

namespace {

struct IsaEntry {
  Isa isa;
  const char* name;
  dnnl_cpu_isa_t dnnl;
};

// The one table of levels, in rank order.
constexpr IsaEntry kIsas[] = {
    {Isa::kSse41, "sse41", dnnl_cpu_isa_sse41},
    {Isa::kAvx, "avx", dnnl_cpu_isa_avx},
    {Isa::kAvx2, "avx2", dnnl_cpu_isa_avx2},
    {Isa::kAvx512Core, "avx512_core", dnnl_cpu_isa_avx512_core},
    {Isa::kAvx512CoreVnni, "avx512_core_vnni", dnnl_cpu_isa_avx512_core_vnni},
    {Isa::kAvx512CoreBf16, "avx512_core_bf16", dnnl_cpu_isa_avx512_core_bf16},
    {Isa::kAvx512CoreAmx, "avx512_core_amx", dnnl_cpu_isa_avx512_core_amx},
};

const IsaEntry& EntryOf(Isa isa) { return kIsas[static_cast<int>(isa)]; }

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// "<digits>" -> value; false for anything else (no sign, no spaces, at most 9 digits).
bool ParseSmallInt(const std::string& s, int* value) {
  if (s.empty() || s.size() > 9) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *value = v;
  return true;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

}  // namespace

const char* IsaName(Isa isa) { return EntryOf(isa).name; }

bool ParseIsa(const std::string& name, Isa* isa) {
  for (const IsaEntry& e : kIsas)
    if (name == e.name) return *isa = e.isa, true;
  return false;
}

int IsaRank(Isa isa) { return static_cast<int>(isa); }

const std::vector<Isa>& AllIsas() {
  static const std::vector<Isa> all = [] {
    std::vector<Isa> v;
    for (const IsaEntry& e : kIsas) v.push_back(e.isa);
    return v;
  }();
  return all;
}

std::string IsaNameList() {
  std::string list;
  for (const IsaEntry& e : kIsas) list += (list.empty() ? "" : ", ") + std::string(e.name);
  return list;
}

std::vector<Isa> IsasBelow(Isa host) {
  std::vector<Isa> below;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512Core})
    if (IsaRank(isa) < IsaRank(host)) below.push_back(isa);
  return below;
}

std::string OneDnnVersion() {
  const dnnl_version_t* v = dnnl::version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

bool IsaFromOneDnn(unsigned dnnl_cpu_isa, Isa* isa) {
  for (const IsaEntry& e : kIsas)
    if (dnnl_cpu_isa == static_cast<unsigned>(e.dnnl)) return *isa = e.isa, true;
  switch (dnnl_cpu_isa) {  // off the chain: the highest chain level each includes
    case dnnl_cpu_isa_avx512_mic:
    case dnnl_cpu_isa_avx512_mic_4ops:
    case dnnl_cpu_isa_avx2_vnni:
      *isa = Isa::kAvx2;
      return true;
    default:
      return false;
  }
}

unsigned OneDnnIsaOf(Isa isa) { return static_cast<unsigned>(EntryOf(isa).dnnl); }

IsaProbe OneDnnProbe() {
  IsaProbe probe;
  probe.set_max = [](Isa isa) {
    try {
      return dnnl::set_max_cpu_isa(static_cast<dnnl::cpu_isa>(OneDnnIsaOf(isa))) == dnnl::status::success;
    } catch (const dnnl::error&) {
      return false;
    }
  };
  probe.effective = [](Isa* isa) {
    return IsaFromOneDnn(static_cast<unsigned>(dnnl::get_effective_cpu_isa()), isa);
  };
  return probe;
}

bool ResolveHostIsa(const char* requested, const IsaProbe& probe, HostIsaInfo* out, std::string* error) {
  const std::string no_sse41 = "this CPU lacks SSE4.1 (as oneDNN sees it), the least the AotCpu EP compiles for";
  if (!requested || !*requested) {
    Isa effective;
    if (!probe.effective(&effective)) return *error = no_sse41, false;
    *out = HostIsaInfo{effective, false};
    return true;
  }
  const std::string env = std::string(kHostIsaEnv) + "=" + requested;
  Isa want;
  if (!ParseIsa(requested, &want))
    return *error = env + " is not an ISA level; use one of: " + IsaNameList() + " (or unset it)", false;
  // Limit first: querying oneDNN (get_effective_cpu_isa included) freezes its maximum ISA for the process.
  const bool limited = probe.set_max(want);
  Isa effective;
  if (!probe.effective(&effective)) return *error = no_sse41, false;
  if (effective == want) {
    *out = HostIsaInfo{want, true};
    return true;
  }
  if (IsaRank(effective) < IsaRank(want))
    return *error = env + " is higher than this CPU supports (at most " + IsaName(effective) +
                    "); an emulated host can only be smaller than the real one: use " + IsaName(effective) +
                    " or a level below it, or unset " + kHostIsaEnv,
           false;
  if (limited)  // oneDNN accepted the limit and still reports a higher ISA: it was built without DNNL_ENABLE_MAX_CPU_ISA
    return *error = "cannot emulate " + env + ": this oneDNN build ignores set_max_cpu_isa and runs " +
                    IsaName(effective) + " code; unset " + kHostIsaEnv,
           false;
  return *error = "cannot emulate " + env + ": oneDNN was already used in this process and runs " +
                  IsaName(effective) + " code (its ISA can only be limited before its first use); set " +
                  kHostIsaEnv + " before anything in the process uses oneDNN, or also set DNNL_MAX_CPU_ISA=" +
                  Upper(requested),
         false;
}

bool HostIsa(HostIsaInfo* out, std::string* error) {
  return ResolveHostIsa(std::getenv(kHostIsaEnv), OneDnnProbe(), out, error);
}

std::string FormatCompatibility(const CompatibilityInfo& info) {
  return std::string(kCompatibilityTag) + ";format=" + std::to_string(info.format_major) + "." +
         std::to_string(info.format_minor) + ";onednn=" + info.onednn + ";isa=" + IsaName(info.isa);
}

std::string CompatibilityFor(Isa isa) {
  return FormatCompatibility(CompatibilityInfo{kContextBinaryMajor, kContextBinaryMinor, OneDnnVersion(), isa});
}

bool ParseCompatibility(const std::string& text, CompatibilityInfo* info, std::string* why) {
  const std::vector<std::string> fields = Split(text, ';');
  if (fields[0] != kCompatibilityTag)
    return *why = "it does not start with '" + std::string(kCompatibilityTag) + ";'", false;
  CompatibilityInfo parsed;
  bool has_format = false, has_onednn = false, has_isa = false;
  for (size_t i = 1; i < fields.size(); ++i) {
    const std::string& f = fields[i];
    const size_t eq = f.find('=');
    if (eq == std::string::npos || eq == 0) return *why = "field '" + f + "' is not key=value", false;
    const std::string key = f.substr(0, eq), value = f.substr(eq + 1);
    auto once = [&](bool* seen) {
      if (*seen) *why = "field '" + key + "' appears twice";
      return !*seen && (*seen = true);
    };
    if (key == "format") {
      if (!once(&has_format)) return false;
      const std::vector<std::string> v = Split(value, '.');
      if (v.size() != 2 || !ParseSmallInt(v[0], &parsed.format_major) || !ParseSmallInt(v[1], &parsed.format_minor))
        return *why = "format '" + value + "' is not <major>.<minor>", false;
    } else if (key == "onednn") {
      if (!once(&has_onednn)) return false;
      const std::vector<std::string> v = Split(value, '.');
      int unused;
      if (v.size() != 3 || !ParseSmallInt(v[0], &unused) || !ParseSmallInt(v[1], &unused) ||
          !ParseSmallInt(v[2], &unused))
        return *why = "onednn '" + value + "' is not <major>.<minor>.<patch>", false;
      parsed.onednn = value;
    } else if (key == "isa") {
      if (!once(&has_isa)) return false;
      if (!ParseIsa(value, &parsed.isa)) return *why = "isa '" + value + "' is not one of " + IsaNameList(), false;
    }  // other keys: a later minor version's, ignored
  }
  if (!has_format || !has_onednn || !has_isa)
    return *why = std::string("field '") + (!has_format ? "format" : !has_onednn ? "onednn" : "isa") + "' is missing",
           false;
  *info = parsed;
  return true;
}

EpctxCompiledModelCompatibility JudgeCompatibility(const std::string& text, Isa host,
                                                   const std::string& onednn_version, int format_major) {
  CompatibilityInfo info;
  std::string why;
  if (!ParseCompatibility(text, &info, &why)) return EPCTX_EP_UNSUPPORTED;
  if (info.format_major != format_major || info.onednn != onednn_version) return EPCTX_EP_UNSUPPORTED;
  if (IsaRank(info.isa) > IsaRank(host)) return EPCTX_EP_UNSUPPORTED;
  if (IsaRank(info.isa) < IsaRank(host)) return EPCTX_EP_SUPPORTED_PREFER_RECOMPILATION;
  return EPCTX_EP_SUPPORTED_OPTIMAL;
}

EpctxCompiledModelCompatibility JudgeCompatibility(const std::string& text, Isa host) {
  return JudgeCompatibility(text, host, OneDnnVersion(), kContextBinaryMajor);
}

std::string IsaTooHighMessage(Isa binary, Isa host, bool emulated) {
  return std::string("the context binary was compiled for ") + IsaName(binary) + " but this CPU supports at most " +
         IsaName(host) + (emulated ? std::string(" (emulated: ") + kHostIsaEnv + "=" + IsaName(host) + ")" : "") +
         "; recompile the model on this machine (or for target_isa " + IsaName(host) + " or lower)";
}

std::string BuildMismatchMessage(const CompatibilityInfo& binary, const std::string& onednn_version,
                                 int format_major) {
  return "the context binary was compiled with oneDNN " + binary.onednn + " and context format " +
         std::to_string(binary.format_major) + "." + std::to_string(binary.format_minor) +
         ", but this build runs oneDNN " + onednn_version + " and reads context format " +
         std::to_string(format_major) + ".x; recompile the model with this build";
}

}  // namespace aotcpu
}  // namespace epctx
