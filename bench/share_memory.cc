// epctx_share_memory: resident memory of several sessions alive in one process, for bench/run_share_bench.sh
// (weight sharing, issue 6). Measures, never asserts. Prints one JSON object on stdout.
//
//   epctx_share_memory [--ep-lib PATH] [--ep NAME] [--share] [--threads N] [--no-run] [--dump DIR]
//                      [-C key=value]... model1.onnx [model2.onnx ...]
//
// Creates one session per model, in order, all kept alive (ep.share_ep_contexts=1 with --share), then runs each
// once with zero-filled inputs (token id 0) unless --no-run. VmRSS/RssAnon/RssFile are read from /proc/self/status
// at process start ("start"), after the EP library is registered ("env"), after each session and after the runs.
// --dump DIR writes every output of those runs as raw bytes to DIR/<session index>_<output name>.raw (to compare
// two compilations bit for bit). --ep-lib defaults to <this binary's folder>/../lib/libepctx_aotcpu.so, --ep to AotCpuExecutionProvider.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "epctx/epctx.h"

namespace {

struct Rss {
  double vm = 0, anon = 0, file = 0;  // MB
};

Rss ReadRss() {
  Rss r;
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return r;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) r.vm = std::atof(line + 6) / 1024.0;
    if (std::strncmp(line, "RssAnon:", 8) == 0) r.anon = std::atof(line + 8) / 1024.0;
    if (std::strncmp(line, "RssFile:", 8) == 0) r.file = std::atof(line + 8) / 1024.0;
  }
  std::fclose(f);
  return r;
}

std::string Json(const char* name, const Rss& r) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "{\"at\": \"%s\", \"vm_rss_mb\": %.2f, \"rss_anon_mb\": %.2f, \"rss_file_mb\": %.2f}",
                name, r.vm, r.anon, r.file);
  return buf;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string DefaultLib() {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "libepctx_aotcpu.so";
  exe[n] = '\0';
  std::string dir(exe);
  return dir.substr(0, dir.find_last_of('/')) + "/../lib/libepctx_aotcpu.so";
}

std::vector<epctx::Value> RunZeros(const epctx::Session& s) {
  std::vector<std::string> names = s.GetInputNames();
  std::vector<epctx::Value> values;
  std::vector<std::vector<char>> storage;
  storage.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const auto info = s.GetInputTypeInfo(i).GetTensorTypeAndShapeInfo();
    std::vector<int64_t> shape = info.GetShape();
    size_t count = 1;
    for (int64_t d : shape) count *= static_cast<size_t>(d < 0 ? 1 : d);
    for (int64_t& d : shape) d = d < 0 ? 1 : d;
    const size_t elem = info.GetElementType() == epctx::ElementType::INT64 ? 8 : 4;
    storage.emplace_back(count * elem, 0);
    values.push_back(epctx::Value::CreateTensor(info.GetElementType(), storage.back().data(), storage.back().size(),
                                                shape.data(), shape.size()));
  }
  return s.Run(names, values);
}

}  // namespace

int main(int argc, char** argv) {
  const Rss start = ReadRss();
  std::string lib = DefaultLib(), ep = "AotCpuExecutionProvider", dump;
  bool share = false, run = true;
  int threads = 0;
  std::vector<std::pair<std::string, std::string>> configs;
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "epctx_share_memory: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--ep-lib") lib = next();
    else if (a == "--ep") ep = next();
    else if (a == "--share") share = true;
    else if (a == "--no-run") run = false;
    else if (a == "--dump") dump = next();
    else if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "-C") {
      std::string kv = next();
      size_t eq = kv.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "epctx_share_memory: -C needs key=value, got '%s'\n", kv.c_str());
        return 2;
      }
      configs.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: epctx_share_memory [--ep-lib PATH] [--ep NAME] [--share] [--threads N] [--no-run] "
                  "[--dump DIR] [-C key=value]... model.onnx...\n");
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "epctx_share_memory: unknown option %s\n", a.c_str());
      return 2;
    } else {
      models.push_back(a);
    }
  }
  if (models.empty()) {
    std::fprintf(stderr, "epctx_share_memory: no model given\n");
    return 2;
  }
  try {
    epctx::Env env;
    env.RegisterExecutionProviderLibrary("aotcpu", lib.c_str());
    std::vector<epctx::ConstEpDevice> devices;
    for (const epctx::ConstEpDevice& d : env.GetEpDevices()) {
      const epctx::KeyValuePairs metadata = d.Device().Metadata();  // a copy: GetValue points into it
      const char* virt = metadata.GetValue("is_virtual");
      if (d.EpName() == ep && !(virt && std::string(virt) == "1")) devices.push_back(d);
    }
    if (devices.empty()) {
      std::fprintf(stderr, "epctx_share_memory: no device of EP '%s' in '%s'\n", ep.c_str(), lib.c_str());
      return 1;
    }
    const Rss after_env = ReadRss();
    std::string points = Json("start", start) + ", " + Json("env", after_env);
    std::string create_ms;
    std::vector<epctx::Session> sessions;
    for (const auto& m : models) {
      epctx::SessionOptions o;
      if (threads > 0) o.SetIntraOpNumThreads(threads);
      o.AppendExecutionProvider_V2(env, devices, epctx::KeyValuePairs());
      if (share) o.AddConfigEntry("ep.share_ep_contexts", "1");
      for (const auto& [k, v] : configs) o.AddConfigEntry(k.c_str(), v.c_str());
      const auto t0 = std::chrono::steady_clock::now();
      sessions.emplace_back(env, m.c_str(), o);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f", ms);
      create_ms += (create_ms.empty() ? "" : ", ") + std::string(buf);
      points += ", " + Json(("session " + std::to_string(sessions.size())).c_str(), ReadRss());
    }
    const Rss after_sessions = ReadRss();
    Rss after_run = after_sessions;
    if (run) {
      std::vector<std::vector<epctx::Value>> outputs;
      for (const auto& s : sessions) outputs.push_back(RunZeros(s));
      after_run = ReadRss();
      for (size_t i = 0; i < outputs.size() && !dump.empty(); ++i) {
        const std::vector<std::string> names = sessions[i].GetOutputNames();
        for (size_t k = 0; k < outputs[i].size(); ++k) {
          const auto info = outputs[i][k].GetTensorTypeAndShapeInfo();
          const size_t bytes = static_cast<size_t>(info.GetElementCount()) *
                               (info.GetElementType() == epctx::ElementType::INT64 ? 8 : 4);
          const std::string path = dump + "/" + std::to_string(i) + "_" + names[k] + ".raw";
          FILE* f = std::fopen(path.c_str(), "wb");
          if (!f || std::fwrite(outputs[i][k].GetTensorRawData(), 1, bytes, f) != bytes) {
            std::fprintf(stderr, "epctx_share_memory: cannot write '%s'\n", path.c_str());
            if (f) std::fclose(f);
            return 1;
          }
          std::fclose(f);
        }
      }
      points += ", " + Json("runs", after_run);
    }
    std::string list;
    for (const auto& m : models) list += (list.empty() ? "" : ", ") + JsonString(m);
    std::printf("{\"models\": [%s], \"share\": %s, \"session_creation_ms\": [%s], \"points\": [%s], "
                "\"sessions_minus_start_mb\": %.2f, \"sessions_minus_env_mb\": %.2f, \"runs_minus_start_mb\": %.2f}\n",
                list.c_str(), share ? "true" : "false", create_ms.c_str(), points.c_str(),
                after_sessions.vm - start.vm, after_sessions.vm - after_env.vm, after_run.vm - start.vm);
    // Sessions are destroyed in reverse order (the order the weight-sharing guide recommends).
    while (!sessions.empty()) sessions.pop_back();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epctx_share_memory: %s\n", e.what());
    return 1;
  }
  return 0;
}
