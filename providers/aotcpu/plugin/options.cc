#include "providers/aotcpu/plugin/options.h"

#include <cstdlib>

namespace epctx {
namespace aotcpu {

namespace {

constexpr int kMaxThreads = 4096;
constexpr double kMaxSwitchUs = 1e6;

OptionsError Invalid(std::string message) { return OptionsError{EPCTX_INVALID_ARGUMENT, std::move(message)}; }

// Absent or "" -> default; "0"/"1" -> the flag; anything else -> error naming the key.
bool ReadFlag(const ConfigGetter& get, const char* key, bool* flag, OptionsError* error) {
  const char* v = get(key);
  const std::string value = v ? v : "";
  if (value.empty()) return true;
  if (value == "0" || value == "1") return *flag = value == "1", true;
  *error = Invalid(std::string(key) + " must be 0 or 1, got '" + value + "'");
  return false;
}

std::string ReadString(const ConfigGetter& get, const char* key) {
  const char* v = get(key);
  return v ? v : "";
}

}  // namespace

ConfigGetter SessionConfigGetter(const EpctxApi* api, const EpctxSessionOptions* options) {
  return [api, options](const char* key) -> const char* {
    const char* value = nullptr;
    if (EpctxStatus* st = api->GetSessionConfigEntry(options, key, &value)) {
      api->ReleaseStatus(st);
      return nullptr;
    }
    return value;
  };
}

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kJit:
      return "jit";
    case Mode::kGenerate:
      return "generate";
    case Mode::kPrepareAndLoad:
      return "prepare_and_load";
    case Mode::kPrepareAndLoadPersist:
      return "prepare_and_load_persist";
    case Mode::kPrepareOnly:
      return "prepare_only";
  }
  return "?";
}

Mode AotCpuOptions::mode() const {
  if (prepare_only) return Mode::kPrepareOnly;
  if (prepare_and_load) return context_enable ? Mode::kPrepareAndLoadPersist : Mode::kPrepareAndLoad;
  return context_enable ? Mode::kGenerate : Mode::kJit;
}

bool ReadOptions(const ConfigGetter& get, AotCpuOptions* out, OptionsError* error) {
  AotCpuOptions o;
  bool embed = false;
  if (!ReadFlag(get, kContextEnableKey, &o.context_enable, error) || !ReadFlag(get, kEmbedModeKey, &embed, error) ||
      !ReadFlag(get, kShareContextsKey, &o.share_ep_contexts, error) ||
      !ReadFlag(get, kStopShareContextsKey, &o.stop_share_ep_contexts, error) ||
      !ReadFlag(get, kPrepareAndLoadKey, &o.prepare_and_load, error) ||
      !ReadFlag(get, kPrepareOnlyKey, &o.prepare_only, error) ||
      !ReadFlag(get, kVerifyWeightsKey, &o.verify_weights, error) ||
      !ReadFlag(get, kDynamicShapesKey, &o.dynamic_shapes, error))
    return false;
  o.embed_mode = embed ? 1 : 0;
  if (const char* v = get(kDynamicShapesKey)) o.dynamic_shapes_set = *v != '\0';
  o.context_file_path = ReadString(get, kContextFilePathKey);
  o.node_name_prefix = ReadString(get, kNodeNamePrefixKey);
  o.target_isa = ReadString(get, kTargetIsaKey);
  const std::string threads = ReadString(get, kIntraOpThreadsKey);
  if (!threads.empty()) {
    long long n = 0;
    bool digits = threads.size() <= 9;
    for (char c : threads) digits = digits && c >= '0' && c <= '9', n = n * 10 + (c - '0');
    if (!digits || n > kMaxThreads) {
      *error = Invalid(std::string(kIntraOpThreadsKey) + " must be an integer from 0 (default) to " +
                       std::to_string(kMaxThreads) + ", got '" + threads + "'");
      return false;
    }
    o.intra_op_num_threads = static_cast<int>(n);
  }
  const std::string switch_us = ReadString(get, kPartitionSwitchUsKey);
  if (!switch_us.empty()) {
    char* end = nullptr;
    const double us = std::strtod(switch_us.c_str(), &end);
    // Digits and one '.' only: no sign, exponent, "inf" or "nan" (strtod takes them all).
    const bool plain = switch_us.find_first_not_of("0123456789.") == std::string::npos;
    if (!plain || !end || *end != '\0' || !(us >= 0 && us <= kMaxSwitchUs)) {
      *error = Invalid(std::string(kPartitionSwitchUsKey) + " must be a number of microseconds from 0 (the partition " +
                       "cost rule off) to 1000000, got '" + switch_us + "'");
      return false;
    }
    o.partition_cost.enabled = us > 0;
    o.partition_cost.switch_us = us;
  }
  const std::string cache = ReadString(get, kShapeCacheSizeKey);
  if (!cache.empty()) {
    long long n = 0;
    bool digits = cache.size() <= 4;
    for (char c : cache) digits = digits && c >= '0' && c <= '9', n = n * 10 + (c - '0');
    if (!digits || n < 1 || n > 4096) {
      *error = Invalid(std::string(kShapeCacheSizeKey) + " must be an integer from 1 to 4096, got '" + cache + "'");
      return false;
    }
    o.shape_cache_size = static_cast<size_t>(n);
  }
  const std::string ranges = ReadString(get, kShapeRangesKey);
  for (size_t start = 0; start < ranges.size();) {
    size_t end = ranges.find(',', start);
    if (end == std::string::npos) end = ranges.size();
    const std::string item = ranges.substr(start, end - start);
    start = end + 1;
    const size_t colon = item.rfind(':'), dots = item.find("..", colon == std::string::npos ? 0 : colon);
    auto number = [](const std::string& t, int64_t* v) {
      if (t.empty() || t.size() > 18 || t.find_first_not_of("0123456789") != std::string::npos) return false;
      *v = std::stoll(t);
      return true;
    };
    AotCpuOptions::Range r;
    if (colon == std::string::npos || colon == 0 || dots == std::string::npos ||
        !number(item.substr(colon + 1, dots - colon - 1), &r.lo) || !number(item.substr(dots + 2), &r.hi) ||
        r.lo > r.hi || o.shape_ranges.count(item.substr(0, colon))) {
      *error = Invalid(std::string(kShapeRangesKey) + " entries are 'name:lo..hi' with 0 <= lo <= hi, each name " +
                       "once, separated by ','; got '" + item + "' in '" + ranges + "'");
      return false;
    }
    o.shape_ranges[item.substr(0, colon)] = r;
  }
  const std::string profiles = ReadString(get, kShapeProfilesKey);
  size_t count = 0;
  for (size_t start = 0; start < profiles.size();) {
    size_t end = profiles.find(';', start);
    if (end == std::string::npos) end = profiles.size();
    const std::string item = profiles.substr(start, end - start);
    start = end + 1;
    const size_t colon = item.rfind(':');
    auto bad = [&](const std::string& why) {
      *error = Invalid(std::string(kShapeProfilesKey) + " entries are 'input:AxBxC[,AxBxC...]' separated by ';', the "
                       "same number of shapes for every input; " + why + " in '" + profiles + "'");
      return false;
    };
    if (colon == std::string::npos || colon == 0) return bad("'" + item + "' names no input");
    const std::string name = item.substr(0, colon);
    if (o.shape_profiles.count(name)) return bad("input '" + name + "' appears twice");
    std::vector<std::vector<int64_t>> shapes;
    const std::string list = item.substr(colon + 1);
    for (size_t s0 = 0; s0 <= list.size();) {
      size_t e0 = list.find(',', s0);
      if (e0 == std::string::npos) e0 = list.size();
      const std::string shape = list.substr(s0, e0 - s0);
      s0 = e0 + 1;
      std::vector<int64_t> dims;
      for (size_t d0 = 0; d0 <= shape.size();) {
        size_t d1 = shape.find('x', d0);
        if (d1 == std::string::npos) d1 = shape.size();
        const std::string dim = shape.substr(d0, d1 - d0);
        d0 = d1 + 1;
        if (dim.empty() || dim.size() > 12 || dim.find_first_not_of("0123456789") != std::string::npos)
          return bad("shape '" + shape + "' of input '" + name + "' is not AxBxC with sizes >= 0");
        dims.push_back(std::stoll(dim));
        if (dims.size() > 12) return bad("shape '" + shape + "' has more than 12 dims");
      }
      shapes.push_back(std::move(dims));
      if (e0 == list.size()) break;
    }
    if (count && shapes.size() != count) return bad("input '" + name + "' has " + std::to_string(shapes.size()) +
                                                    " shapes, another " + std::to_string(count));
    count = shapes.size();
    o.shape_profiles[name] = std::move(shapes);
  }
  *out = std::move(o);
  return true;
}

PrepareAndLoadResult CheckPrepareAndLoad(const AotCpuOptions& requested) {
  PrepareAndLoadResult r;
  auto fail = [&](std::string message) {
    r.ok = false;
    r.error = Invalid(std::move(message));
    return r;
  };
  const std::string pal = std::string(kPrepareAndLoadKey) + "=1";
  const std::string only = std::string(kPrepareOnlyKey) + "=1";
  if (requested.prepare_and_load && requested.prepare_only)
    return fail(pal + " and " + only +
                " are mutually exclusive: prepare_only compiles the model and writes the context model without "
                "running it, prepare_and_load compiles it and then runs it from the compiled context. Set only one "
                "of them to 1.");
  if (requested.prepare_and_load && !requested.context_enable && !requested.context_file_path.empty())
    return fail("Contradictory options: " + pal + " with " + kContextEnableKey + "=0 compiles and reloads in memory "
                "and writes no file, but " + kContextFilePathKey + " is set to '" + requested.context_file_path +
                "'. To also keep the compiled model at that path, set " + kContextEnableKey + "=1; to compile in "
                "memory only, remove " + kContextFilePathKey + ". (If the input is already a context model loaded "
                "from bytes, " + kContextFilePathKey + " locates its binary: remove " + kPrepareAndLoadKey +
                " instead.)");
  if (requested.prepare_only && !requested.context_enable)
    return fail("Contradictory options: " + only + " compiles the model and writes the context model without "
                "running it, but " + kContextEnableKey + " is not 1, so nothing would be written. Set " +
                kContextEnableKey + "=1 (and optionally " + kContextFilePathKey + "), or remove " + kPrepareOnlyKey +
                ".");
  r.effective = requested;
  if (requested.prepare_and_load && requested.context_enable && requested.embed_mode == 1) {
    r.effective.embed_mode = 0;
    r.warnings.push_back(std::string("Overriding ") + kEmbedModeKey + " to 0: " + pal + " reloads the compiled model "
                         "from its external context binary, so the binary is written beside the context model "
                         "instead of being embedded in it. Set " + kEmbedModeKey + "=0 to silence this warning.");
  }
  return r;
}

AotCpuOptions IgnorePrepareAndLoadForContextModel(const AotCpuOptions& effective, std::string* warning) {
  warning->clear();
  AotCpuOptions o = effective;
  if (!o.prepare_and_load) return o;
  o.prepare_and_load = false;
  *warning = std::string("prepare_and_load=1 is ignored because the input model is already a pre-compiled context "
                         "model; it is loaded as is. Remove ") +
             kPrepareAndLoadKey + " when loading context models.";
  return o;
}

bool ResolveTargetIsa(const AotCpuOptions& options, Isa host, Isa* target, OptionsError* error) {
  if (options.target_isa.empty()) return *target = host, true;
  const std::string key = std::string(kTargetIsaKey) + "=" + options.target_isa;
  std::string allowed;
  for (Isa isa : AllIsas())
    if (IsaRank(isa) <= IsaRank(host)) allowed += (allowed.empty() ? "" : ", ") + std::string(IsaName(isa));
  Isa isa;
  if (!ParseIsa(options.target_isa, &isa)) {
    *error = Invalid(key + " is not an ISA level; this CPU can compile for: " + allowed);
    return false;
  }
  if (IsaRank(isa) > IsaRank(host)) {
    *error = Invalid(key + " is higher than this CPU supports (at most " + IsaName(host) +
                     "): oneDNN only generates code for ISAs the machine has. Use one of: " + allowed +
                     ", or compile on a machine that has " + options.target_isa + ".");
    return false;
  }
  *target = isa;
  return true;
}

OptionsError PrepareOnlyRunError(const std::string& context_model_path) {
  return OptionsError{EPCTX_EP_FAIL, std::string("the session was created with ") + kPrepareOnlyKey +
                                         "=1: it compiled the model and wrote '" + context_model_path +
                                         "' but does not run it; create a session from '" + context_model_path +
                                         "' to run the compiled model"};
}

}  // namespace aotcpu
}  // namespace epctx
