// `epctx test PATH...`: runs ONNX backend test folders (model.onnx + test_data_set_N) and ends with
// "N passed, N failed[, N skipped]". Exit 0 iff none failed.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tools/tool_common.h"

namespace epctx::tools {

namespace {

bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool IsFile(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
std::vector<std::string> SubDirs(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      if (IsDir(dir + "/" + n)) out.push_back(n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}
std::string BaseName(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

void CollectCases(const std::string& path, std::vector<std::string>* cases) {
  if (IsFile(path + "/model.onnx")) {
    cases->push_back(path);
    return;
  }
  for (const auto& d : SubDirs(path)) CollectCases(path + "/" + d, cases);
}

// Runs one case; returns "" on success or the failure reason.
// `only`: the outputs to compare (empty: all).
std::string RunCase(const std::string& dir, const SessionConfig& config, double rtol, double atol,
                    const std::vector<std::string>& only) {
  auto session = InferenceSession::CreateFromFile(dir + "/model.onnx", config);
  if (!session.ok()) return "session creation failed: " + session.status().ToString();
  const auto& s = *session.value();
  std::set<std::string> compared(only.begin(), only.end());
  for (const auto& name : only) {
    bool found = false;
    std::string all;
    for (const auto& o : s.outputs()) {
      found = found || o.name == name;
      all += (all.empty() ? "" : ", ") + o.name;
    }
    if (!found) return "--outputs names '" + name + "', which is no output of the model (outputs: " + all + ")";
  }
  // Inputs that are also initializers are not part of the test data.
  std::vector<ValueInfo> inputs;
  for (const auto& in : s.inputs())
    if (!s.model().graph->initializers.count(in.name)) inputs.push_back(in);
  int sets = 0;
  for (const auto& sub : SubDirs(dir)) {
    if (sub.rfind("test_data_set_", 0) != 0) continue;
    ++sets;
    std::string ds = dir + "/" + sub;
    auto feeds = ReadTestData(ds, "input_", inputs);
    if (!feeds.ok()) return sub + ": " + feeds.status().ToString();
    auto expected = ReadTestData(ds, "output_", s.outputs());
    if (!expected.ok()) return sub + ": " + expected.status().ToString();
    std::vector<std::string> names;
    for (size_t i = 0; i < feeds->size() && i < inputs.size(); ++i) names.push_back(inputs[i].name);
    if (names.size() != feeds->size()) return sub + ": more input files than model inputs";
    std::vector<IValue> outputs;
    Status st = s.Run(names, feeds.value(), {}, &outputs);
    if (!st.ok()) return sub + ": run failed: " + st.ToString();
    if (expected->size() > outputs.size()) return sub + ": fewer outputs than expected";
    for (size_t i = 0; i < expected->size(); ++i) {
      if (!compared.empty() && !compared.count(s.outputs()[i].name)) continue;
      std::string why;
      if (!ValuesClose(outputs[i], expected.value()[i], rtol, atol, &why))
        return sub + ": output '" + s.outputs()[i].name + "': " + why;
    }
  }
  if (sets == 0) return "no test_data_set_* folder";
  return "";
}

}  // namespace

int RunTestCommand(const TestOptions& opts) {
  auto config = BuildConfig(opts.common);
  if (!config.ok()) return Fail(config.status());
  std::map<std::string, std::string> skips;
  if (!opts.skip_list.empty()) {
    std::ifstream f(opts.skip_list);
    if (!f) return Fail(MakeStatus(ErrorCode::NO_SUCHFILE, "cannot open skip list '", opts.skip_list, "'"));
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream is(line);
      std::string name, reason;
      is >> name;
      std::getline(is, reason);
      skips[name] = reason;
    }
  }
  std::vector<std::string> cases;
  for (const auto& p : opts.paths) {
    if (!IsDir(p)) return Fail(MakeStatus(ErrorCode::NO_SUCHFILE, "test path '", p, "' is not a folder"));
    CollectCases(p, &cases);
  }
  int passed = 0, failed = 0, skipped = 0;
  for (const auto& c : cases) {
    std::string name = BaseName(c);
    if (skips.count(name)) {
      ++skipped;
      if (opts.verbose) std::printf("SKIP %s:%s\n", name.c_str(), skips[name].c_str());
      continue;
    }
    std::string why = RunCase(c, config.value(), opts.rtol, opts.atol, opts.outputs);
    if (why.empty()) {
      ++passed;
      if (opts.verbose) std::printf("PASS %s\n", name.c_str());
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), why.c_str());
    }
    std::fflush(stdout);
  }
  if (skipped) std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  else std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace epctx::tools
