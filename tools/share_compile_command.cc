// `epctx share-compile model1.onnx,model2.onnx[,...]`: ONNX Runtime's ep_weight_sharing_ctx_gen for epctx's EPs.
// One session per model, in order, with ep.context_enable=1, ep.context_embed_mode=0, ep.share_ep_contexts=1 and
// ep.stop_share_ep_contexts=1 on the last, so the EP compiles the models as one generation group: N
// `<model>_ctx.onnx` beside the models plus the group's binary (AotCpu: `<first model stem>_aotcpu.bin`).
// Differences from the ORT tool: -f free-dimension overrides (AotCpu compiles static shapes), a model the EP compiles
// nothing of is an error (ORT's session succeeds and writes nothing, trap S13), and a failed group is checked for
// files left visible.
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "epcontext/paths.h"
#include "tools/tool_common.h"

namespace epctx::tools {

namespace {
namespace fs = std::filesystem;

constexpr const char* kTool = "epctx share-compile";

// The configs the tool sets itself; a -C entry with another value is ignored with ORT's message where it has one.
struct Forced {
  const char* key;
  const char* value;  // nullptr: set by the tool per session, never taken from -C
  const char* message;
};
constexpr Forced kForced[] = {
    {"ep.context_enable", "1", "Need to enable ep context cache."},
    {"ep.context_embed_mode", "0", "Only support non-embed model for weight sharing."},
    {"ep.context_file_path", nullptr, "Not support to specify the generated Onnx context cache file name."},
    {"ep.share_ep_contexts", "1", "Weight sharing needs ep.share_ep_contexts=1 in every session of the group."},
    {"ep.stop_share_ep_contexts", nullptr, "The tool sets ep.stop_share_ep_contexts=1 on the last model only."},
};

std::vector<std::string> SplitModels(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream is(text);
  while (std::getline(is, item, ',')) out.push_back(item);
  if (!text.empty() && text.back() == ',') out.push_back("");
  return out;
}

// -C entries, a duplicate key being an error (ORT's parser fails on one), with the forced keys filtered out.
Status ParseConfigs(const std::vector<std::string>& texts, std::map<std::string, std::string>* out) {
  std::set<std::string> seen;
  for (const auto& text : texts) {
    std::istringstream is(text);
    std::string pair;
    while (is >> pair) {
      const size_t bar = pair.find('|');
      RETURN_ERROR_IF(bar == std::string::npos || bar == 0, INVALID_ARGUMENT, "-C entry '", pair,
                      "' is not of the form key|value");
      const std::string key = pair.substr(0, bar), value = pair.substr(bar + 1);
      RETURN_ERROR_IF(!seen.insert(key).second, INVALID_ARGUMENT, "-C gives session config '", key,
                      "' more than once");
      bool forced = false;
      for (const Forced& f : kForced) {
        if (key != f.key) continue;
        forced = true;
        if (!f.value || value != f.value)
          std::fprintf(stderr, "%s: -C %s|%s ignored: %s\n", kTool, key.c_str(), value.c_str(), f.message);
      }
      if (!forced) (*out)[key] = value;
    }
  }
  return Status::OK();
}

// Visible (not dot) regular files of a folder with size and modification time, to find what a failed group left.
using Listing = std::map<std::string, std::pair<uintmax_t, int64_t>>;
Listing ListFolder(const std::string& folder) {
  Listing out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    struct stat st;
    if (name.empty() || name[0] == '.' || ::stat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out[name] = {static_cast<uintmax_t>(st.st_size),
                 static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  }
  return out;
}

bool IsFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

uintmax_t SizeOf(const std::string& path) {
  std::error_code ec;
  const uintmax_t n = fs::file_size(path, ec);
  return ec ? 0 : n;
}

std::string JoinFolder(const std::string& folder, const std::string& name) {
  return folder == "." ? name : folder == "/" ? "/" + name : folder + "/" + name;
}

// The context binaries a context model's main EPContext nodes (embed mode 0) reference, as paths beside it; the
// counts of its EPContext nodes and of the nodes left to other EPs.
Status ReferencedBinaries(const std::string& ctx_path, std::vector<std::string>* out, size_t* ep_context_nodes = nullptr,
                          size_t* other_nodes = nullptr) {
  std::ifstream in(ctx_path, std::ios::binary);
  RETURN_ERROR_IF(!in, NO_SUCHFILE, "cannot open '", ctx_path, "'");
  onnx::ModelProto model;
  RETURN_ERROR_IF(!model.ParseFromIstream(&in), INVALID_PROTOBUF, "'", ctx_path, "' is not an ONNX model");
  for (const auto& n : model.graph().node()) {
    if (n.op_type() != "EPContext") {
      if (other_nodes) ++*other_nodes;
      continue;
    }
    if (ep_context_nodes) ++*ep_context_nodes;
    int64_t embed = 1, main = 1;
    std::string cache;
    for (const auto& a : n.attribute()) {
      if (a.name() == "embed_mode") embed = a.i();
      if (a.name() == "main_context") main = a.i();
      if (a.name() == "ep_cache_context") cache = a.s();
    }
    if (embed != 0 || main != 1 || cache.empty()) continue;
    const std::string path = cache[0] == '/' ? cache : JoinFolder(FolderOfPath(ctx_path), cache);
    if (std::find(out->begin(), out->end(), path) == out->end()) out->push_back(path);
  }
  return Status::OK();
}

// After a failure: the files of the group that are visible now and were not before. The context models and the
// binaries they reference are removed (they form no complete group); anything else new in the folders is named only.
void CheckNothingLeft(const std::vector<std::string>& ctx_paths, const std::map<std::string, Listing>& before) {
  std::set<std::string> ours;
  for (const auto& p : ctx_paths)
    if (IsFile(p) && !before.at(FolderOfPath(p)).count(fs::path(p).filename().string())) {
      std::vector<std::string> bins;
      (void)ReferencedBinaries(p, &bins);
      ours.insert(p);
      for (const auto& b : bins)
        if (IsFile(b)) ours.insert(b);
    }
  std::vector<std::string> left;
  for (const auto& [folder, old] : before)
    for (const auto& [name, stamp] : ListFolder(folder)) {
      auto it = old.find(name);
      if (it == old.end() || it->second != stamp) left.push_back(JoinFolder(folder, name));
    }
  for (const auto& p : ours)
    if (std::find(left.begin(), left.end(), p) == left.end()) left.push_back(p);
  if (left.empty()) {
    std::fprintf(stderr, "%s: no file of the failed group is left visible\n", kTool);
    return;
  }
  for (const auto& p : left) {
    if (ours.count(p)) {
      std::error_code ec;
      fs::remove(p, ec);
      std::fprintf(stderr, "%s: the failed group left '%s' visible; %s\n", kTool, p.c_str(),
                   ec ? ("it could not be removed: " + ec.message()).c_str() : "removed");
    } else {
      std::fprintf(stderr, "%s: '%s' appeared or changed during the failed run (not removed)\n", kTool, p.c_str());
    }
  }
}

double MsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

int RunShareCompileCommand(const CommonFlags& flags, const std::string& models_arg, bool verbose) {
  // Models: comma-separated, each once, each an existing file (checked before any session starts).
  const std::vector<std::string> models = SplitModels(models_arg);
  if (models.empty())
    return Fail(MakeStatus(ErrorCode::INVALID_ARGUMENT, "no model given (model1.onnx,model2.onnx[,...])"));
  std::set<std::string> canonical;
  for (const auto& m : models) {
    if (m.empty())
      return Fail(MakeStatus(ErrorCode::INVALID_ARGUMENT, "empty model path in '", models_arg,
                             "' (comma-separated, no spaces)"));
    if (!IsFile(m)) return Fail(MakeStatus(ErrorCode::NO_SUCHFILE, "model '", m, "' does not exist"));
    std::error_code ec;
    if (!canonical.insert(fs::canonical(m, ec).string()).second)
      return Fail(MakeStatus(ErrorCode::INVALID_ARGUMENT, "model '", m,
                             "' is listed twice; each model of a group gets its own context model"));
  }

  CommonFlags common = flags;
  common.configs.clear();
  if (common.eps.empty()) common.eps.push_back("aotcpu");
  for (const auto& e : common.eps)
    if (e == "cpu" || e == "CPUExecutionProvider")
      return Fail(MakeStatus(ErrorCode::INVALID_ARGUMENT,
                             "-e ", e, ": the CPU EP compiles nothing, so it has no context to share (try -e aotcpu)"));
  std::map<std::string, std::string> user;
  if (Status st = ParseConfigs(flags.configs, &user); !st.ok()) return Fail(st);
  auto base = BuildConfig(common);
  if (!base.ok()) return Fail(base.status());
  for (const auto& [k, v] : user) base.value().entries[k] = v;
  base.value().entries["ep.context_enable"] = "1";
  base.value().entries["ep.context_embed_mode"] = "0";
  base.value().entries["ep.share_ep_contexts"] = "1";
  base.value().entries.erase("ep.context_file_path");
  base.value().entries.erase("ep.stop_share_ep_contexts");

  // Where the runtime will write each context model; an existing one would fail that session half-way through the
  // group, so it is refused before anything is compiled.
  std::vector<std::string> ctx_paths;
  std::map<std::string, Listing> before;
  for (const auto& m : models) {
    auto p = ValidatedEpContextPath("", m, false);
    if (!p.ok()) return Fail(p.status());
    if (fs::exists(p.value()))
      return Fail(MakeStatus(ErrorCode::FAIL, "'", p.value(), "' exists already; remove it to regenerate the group ",
                             "(nothing was compiled)"));
    if (std::find(ctx_paths.begin(), ctx_paths.end(), p.value()) != ctx_paths.end())
      return Fail(MakeStatus(ErrorCode::INVALID_ARGUMENT, "two models would both write '", p.value(), "'"));
    ctx_paths.push_back(p.value());
    const std::string folder = FolderOfPath(p.value());
    if (!before.count(folder)) before[folder] = ListFolder(folder);
  }

  // One session per model, created and destroyed in order (as ORT's tool): the group lives in the EP.
  std::set<std::string> ep_names;
  for (size_t i = 0; i < models.size(); ++i) {
    SessionConfig config = base.value();
    const bool last = i + 1 == models.size();
    if (last) config.entries["ep.stop_share_ep_contexts"] = "1";
    std::printf("[%zu/%zu] %s%s\n", i + 1, models.size(), models[i].c_str(), last ? " (last: writes the binary)" : "");
    std::fflush(stdout);
    const auto t0 = std::chrono::steady_clock::now();
    auto session = InferenceSession::CreateFromFile(models[i], config);
    const double ms = MsSince(t0);
    if (!session.ok()) {
      Fail(MakeStatus(session.status().code(), "model ", i + 1, "/", models.size(), " '", models[i],
                      "': ", session.status().message()));
      CheckNothingLeft(ctx_paths, before);
      return 1;
    }
    const InferenceSession& s = *session.value();
    size_t compiled = 0;
    std::map<std::string, size_t> by_ep;
    for (const auto& [fused, ep] : s.partition_eps()) {
      ++by_ep[ep];
      ++compiled;
      ep_names.insert(ep);
    }
    if (verbose) std::printf("session report: %s\n", s.ReportJson().c_str());
    if (compiled == 0) {
      std::string eps;
      for (const auto& e : common.eps) eps += (eps.empty() ? "" : ", ") + e;
      Fail(MakeStatus(ErrorCode::FAIL, "model ", i + 1, "/", models.size(), " '", models[i], "': ", eps,
                      " compiled no node of it, so it has no context in the group (static shapes: see -f)"));
      session.value().reset();
      CheckNothingLeft(ctx_paths, before);
      return 1;
    }
    std::string parts;
    for (const auto& [ep, n] : by_ep) parts += (parts.empty() ? "" : ", ") + std::to_string(n) + " on " + ep;
    std::printf("      %s partition%s (%s), session created in %.0f ms\n", std::to_string(compiled).c_str(),
                compiled == 1 ? "" : "s", parts.c_str(), ms);
  }

  // What the group wrote: every context model and the binaries they reference, all of which must exist.
  std::vector<std::string> binaries;
  std::map<std::string, size_t> users;
  std::vector<std::string> notes;
  size_t width = 0;
  for (const auto& p : ctx_paths) {
    if (!IsFile(p)) {
      Fail(MakeStatus(ErrorCode::FAIL, "the group finished but '", p, "' was not written"));
      CheckNothingLeft(ctx_paths, before);
      return 1;
    }
    std::vector<std::string> bins;
    size_t ctx_nodes = 0, other = 0;
    if (Status st = ReferencedBinaries(p, &bins, &ctx_nodes, &other); !st.ok()) return Fail(st);
    notes.push_back(std::to_string(ctx_nodes) + " EPContext node" + (ctx_nodes == 1 ? "" : "s") +
                    (other ? ", " + std::to_string(other) + " nodes left to other EPs" : std::string()));
    width = std::max(width, p.size());
    for (const auto& b : bins) {
      if (!IsFile(b)) {
        Fail(MakeStatus(ErrorCode::FAIL, "'", p, "' references '", b, "', which was not written"));
        CheckNothingLeft(ctx_paths, before);
        return 1;
      }
      if (users[b]++ == 0) binaries.push_back(b);
      width = std::max(width, b.size());
    }
  }
  std::printf("files written (%zu context models, %zu binar%s):\n", ctx_paths.size(), binaries.size(),
              binaries.size() == 1 ? "y" : "ies");
  const int w = static_cast<int>(width);
  for (size_t i = 0; i < ctx_paths.size(); ++i)
    std::printf("  %-*s  %12ju bytes  (%s)\n", w, ctx_paths[i].c_str(), SizeOf(ctx_paths[i]), notes[i].c_str());
  for (const auto& b : binaries)
    std::printf("  %-*s  %12ju bytes  (referenced by %zu of the %zu context models)\n", w, b.c_str(), SizeOf(b),
                users[b], ctx_paths.size());
  if (binaries.size() > ep_names.size())
    std::fprintf(stderr, "%s: warning: %zu binaries for %zu EP(s): the EP did not share one binary across the group\n",
                 kTool, binaries.size(), ep_names.size());
  return 0;
}

}  // namespace epctx::tools
