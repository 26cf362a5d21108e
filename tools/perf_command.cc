// `epctx perf MODEL`: session creation, first run and steady-state latency (median, p90), in
// onnxruntime_perf_test's flag vocabulary. `epctx run MODEL`: runs once and prints outputs and timings (the demo).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "tools/tool_common.h"

namespace epctx::tools {

namespace {
using Clock = std::chrono::steady_clock;
double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

double PeakRssMb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

// Current resident set (VmRSS), MB; 0 when /proc is unavailable.
double RssMb() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  double kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmRSS:", 6) == 0) kb = std::atof(line + 6);
  std::fclose(f);
  return kb / 1024.0;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double idx = p * (v.size() - 1);
  size_t lo = static_cast<size_t>(idx);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - lo);
}

// Inputs from a test_data_set folder, or random ones (free dims = their override, else 1) when `dir` is empty.
StatusOr<std::vector<IValue>> InputsFor(const InferenceSession& s, const std::string& dir) {
  std::vector<ValueInfo> inputs;
  for (const auto& in : s.inputs())
    if (!s.model().graph->initializers.count(in.name)) inputs.push_back(in);
  if (!dir.empty()) {
    ASSIGN_OR_RETURN(auto v, ReadTestData(dir, "input_", inputs));
    RETURN_ERROR_IF(v.size() != inputs.size(), INVALID_ARGUMENT, "'", dir, "' holds ", v.size(),
                    " input files but the model has ", inputs.size(), " inputs");
    return v;
  }
  // Free dims take their override (already applied to the model's input shapes) or 1.
  return RandomInputs(inputs, 1234);
}

std::vector<std::string> InputNames(const InferenceSession& s) {
  std::vector<std::string> names;
  for (const auto& in : s.inputs())
    if (!s.model().graph->initializers.count(in.name)) names.push_back(in.name);
  return names;
}
}  // namespace

int RunPerfCommand(const PerfOptions& opts) {
  if (opts.mode != "times" && opts.mode != "duration")
    return Fail(MakeStatus(ErrorCode::INVALID_ARGUMENT, "-m must be 'times' or 'duration', got '", opts.mode, "'"));
  if (opts.repeat < 1) return Fail(MakeStatus(ErrorCode::INVALID_ARGUMENT, "-r must be >= 1, got ", opts.repeat));
  CommonFlags common = opts.common;
  if (!opts.plugin_eps.empty()) {
    std::istringstream is(opts.plugin_eps);
    std::string name;
    while (std::getline(is, name, ',')) common.eps.push_back(name);
  }
  auto config = BuildConfig(common);
  if (!config.ok()) return Fail(config.status());
  if (!opts.profile.empty()) {
    config.value().profiling = true;
    config.value().profile_prefix = opts.profile;
  }

  const double rss_before = RssMb();
  auto t0 = Clock::now();
  auto session = InferenceSession::CreateFromFile(opts.model, config.value());
  auto t1 = Clock::now();
  const double rss_created = RssMb(), peak_created = PeakRssMb();
  if (!session.ok()) return Fail(session.status());
  InferenceSession& s = *session.value();
  auto feeds = InputsFor(s, opts.inputs_dir);
  if (!feeds.ok()) return Fail(feeds.status());
  auto names = InputNames(s);
  std::vector<IValue> outputs;
  auto t2 = Clock::now();
  if (Status st = s.Run(names, feeds.value(), {}, &outputs); !st.ok()) return Fail(st);
  auto t3 = Clock::now();
  std::vector<double> times;
  for (int i = 0; i < opts.repeat; ++i) {
    auto a = Clock::now();
    if (Status st = s.Run(names, feeds.value(), {}, &outputs); !st.ok()) return Fail(st);
    times.push_back(Ms(a, Clock::now()));
  }
  double create = Ms(t0, t1), first = Ms(t2, t3);
  std::string profile_path;
  if (!opts.profile.empty()) {
    auto p = s.EndProfiling();
    if (!p.ok()) return Fail(p.status());
    profile_path = p.value();
  }
  std::string eps;
  for (const auto& e : s.ep_names()) eps += (eps.empty() ? "" : ",") + e;
  double med = Percentile(times, 0.5), p90 = Percentile(times, 0.9);
  if (opts.json) {
    std::printf("{\"session_creation_ms\": %.3f, \"first_run_ms\": %.3f, \"run_ms_median\": %.3f, "
                "\"run_ms_p90\": %.3f, \"peak_rss_mb\": %.1f, \"runs\": %d, \"threads\": %d, "
                "\"rss_before_session_mb\": %.1f, \"rss_after_creation_mb\": %.1f, \"peak_rss_creation_mb\": %.1f}\n",
                create, first, med, p90, PeakRssMb(), opts.repeat, s.num_threads(), rss_before, rss_created,
                peak_created);
  } else {
    std::printf("model:               %s\n", opts.model.c_str());
    std::printf("execution providers: %s (%zu partitions on plugin EPs)\n", eps.c_str(), s.partition_eps().size());
    if (!profile_path.empty()) std::printf("profile:             %s\n", profile_path.c_str());
    std::printf("threads:             %d\n", s.num_threads());
    std::printf("session creation:    %.3f ms (load %.3f ms, plan %.3f ms)\n", create, s.timings().load_ms,
                s.timings().plan_ms);
    std::printf("first run:           %.3f ms\n", first);
    std::printf("steady state (%d runs): median %.3f ms, p90 %.3f ms\n", opts.repeat, med, p90);
    std::printf("peak RSS:            %.1f MB\n", PeakRssMb());
    std::printf("resident memory:     %.1f MB before the session, %.1f MB after creating it (peak %.1f MB)\n",
                rss_before, rss_created, peak_created);
  }
  if (opts.verbose) std::printf("session report: %s\n", s.ReportJson().c_str());
  if (opts.verbose && !opts.json) {
    PrintLeftOnCpu(stdout, s.left_on_cpu(), "");
    if (!s.left_on_cpu().empty()) PrintFreeDims(stdout, s.free_dims(), s.left_on_cpu(), "");
  }
  return 0;
}

int RunRunCommand(const RunOptions& opts) {
  auto config = BuildConfig(opts.common);
  if (!config.ok()) return Fail(config.status());
  auto t0 = Clock::now();
  auto session = InferenceSession::CreateFromFile(opts.model, config.value());
  auto t1 = Clock::now();
  if (!session.ok()) return Fail(session.status());
  const InferenceSession& s = *session.value();
  auto feeds = InputsFor(s, opts.inputs_dir);
  if (!feeds.ok()) return Fail(feeds.status());
  auto names = InputNames(s);
  std::printf("model %s: %zu inputs, %zu outputs, %zu nodes, %d threads\n", opts.model.c_str(), names.size(),
              s.outputs().size(), s.model().graph->nodes.size(), s.num_threads());
  for (size_t i = 0; i < names.size(); ++i)
    std::printf("  input  %-16s %s\n", names[i].c_str(), Summarize(feeds.value()[i]).c_str());
  std::vector<IValue> outputs;
  auto t2 = Clock::now();
  if (Status st = s.Run(names, feeds.value(), {}, &outputs); !st.ok()) return Fail(st);
  auto t3 = Clock::now();
  std::vector<double> times;
  for (int i = 0; i < opts.repeat; ++i) {
    auto a = Clock::now();
    if (Status st = s.Run(names, feeds.value(), {}, &outputs); !st.ok()) return Fail(st);
    times.push_back(Ms(a, Clock::now()));
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    std::printf("  output %-16s %s\n", s.outputs()[i].name.c_str(), Summarize(outputs[i]).c_str());
  std::printf("session creation %.2f ms, first run %.2f ms, median of %d runs %.3f ms\n", Ms(t0, t1), Ms(t2, t3),
              opts.repeat, Percentile(times, 0.5));
  return 0;
}

}  // namespace epctx::tools
