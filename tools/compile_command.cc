// `epctx compile MODEL`: the compile API (src/compile, docs/compile-api.md) on the command line. Every option maps to
// one ModelCompilationOptions setter; the output goes to a file (-o, default <MODEL stem>_ctx.onnx beside MODEL) or
// to stdout through the write function (--stdout). --externalize-over demonstrates the initializer-location function.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "compile/compile.h"
#include "core/mapped_file.h"
#include "epcontext/paths.h"
#include "tools/tool_common.h"

namespace epctx::tools {

namespace {
namespace fs = std::filesystem;

struct CompileFlags {
  std::string model;
  std::string output;              // -o
  bool embed = false;              // --embed
  std::string ext_file;            // --ext-initializers
  size_t ext_threshold = 1024;     // --ext-threshold (ONNX Runtime's Python ModelCompiler default)
  std::string bin_dir, bin_name;   // --bin-dir / --bin-name
  std::string flags;               // --flags error-if-no-nodes,error-if-exists
  int opt_level = 1;               // --opt-level (1: constant folding; the compile API itself defaults to 0)
  bool to_stdout = false;          // --stdout
  bool from_bytes = false;         // --from-bytes
  int64_t externalize_over = -1;   // --externalize-over BYTES
};
CompileFlags g_flags;

std::string Stem(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  const size_t dot = name.find_last_of('.');
  return dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
}

StatusOr<uint32_t> ParseFlags(const std::string& text) {
  uint32_t flags = 0;
  std::istringstream is(text);
  std::string item;
  while (std::getline(is, item, ',')) {
    if (item == "error-if-no-nodes") {
      flags |= kCompileFlagErrorIfNoNodesCompiled;
    } else if (item == "error-if-exists") {
      flags |= kCompileFlagErrorIfOutputFileExists;
    } else if (!item.empty() && item != "none") {
      return MakeStatus(ErrorCode::INVALID_ARGUMENT, "--flags: unknown flag '", item,
                        "' (known: error-if-no-nodes, error-if-exists, none)");
    }
  }
  return flags;
}

// Regular files of a folder with size and modification time, to report what a compile wrote.
using Listing = std::map<std::string, std::pair<uintmax_t, int64_t>>;
Listing List(const std::string& dir) {
  Listing out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir.empty() ? "." : dir, ec)) {
    struct stat st;
    if (::stat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out[e.path().string()] = {static_cast<uintmax_t>(st.st_size),
                              static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  }
  return out;
}

// --externalize-over: initializers of at least `threshold` bytes go to `data_name` in `folder` (the output model's
// folder), except those the source already holds in an external file in that same folder, which are reused.
class Externalizer {
 public:
  Externalizer(std::string folder, std::string data_name, size_t threshold, bool reuse)
      : folder_(std::move(folder)), data_name_(std::move(data_name)), threshold_(threshold), reuse_(reuse) {}
  ~Externalizer() {
    if (file_) std::fclose(file_);
  }
  StatusOr<std::optional<ExternalDataLocation>> operator()(const std::string& name, const Tensor& value,
                                                           const ExternalDataLocation* source) {
    if (value.SizeInBytes() < threshold_) return std::optional<ExternalDataLocation>();
    if (source && reuse_) {
      ++reused_;
      return std::optional<ExternalDataLocation>(*source);
    }
    if (!file_) {
      file_ = std::fopen(path().c_str(), "wb");
      RETURN_ERROR_IF(!file_, FAIL, "cannot write '", path(), "': ", std::strerror(errno));
    }
    const int64_t offset = (size_ + 63) / 64 * 64;  // 64-byte aligned, as the runtime's own external file
    static const char kZeros[64] = {};
    bool ok = std::fwrite(kZeros, 1, offset - size_, file_) == static_cast<size_t>(offset - size_) &&
              std::fwrite(value.raw_data(), 1, value.SizeInBytes(), file_) == value.SizeInBytes() &&
              std::fflush(file_) == 0;
    RETURN_ERROR_IF(!ok, FAIL, "cannot write initializer '", name, "' to '", path(), "': ", std::strerror(errno));
    size_ = offset + static_cast<int64_t>(value.SizeInBytes());
    ++written_;
    return std::optional<ExternalDataLocation>(ExternalDataLocation{data_name_, offset, value.SizeInBytes()});
  }
  std::string path() const { return folder_ + "/" + data_name_; }
  bool created() const { return file_ != nullptr; }
  int written() const { return written_; }
  int reused() const { return reused_; }

 private:
  std::string folder_, data_name_;
  size_t threshold_;
  bool reuse_;
  FILE* file_ = nullptr;
  int64_t size_ = 0;
  int written_ = 0, reused_ = 0;
};

bool SameFolder(const std::string& a, const std::string& b) {
  std::error_code ec1, ec2;
  return fs::equivalent(a.empty() ? "." : a, b.empty() ? "." : b, ec1) && !ec1 && !ec2;
}
}  // namespace

CLI::App* AddCompileSubcommand(CLI::App* app) {
  CompileFlags& f = g_flags;
  auto* c = app->add_subcommand(
      "compile", "compile a model with the compile API (ONNX Runtime's ModelCompilationOptions): <model>_ctx.onnx "
                 "and the EPs' context binaries");
  c->add_option("model", f.model, "model path")->required();
  c->add_option("-o,--output", f.output, "output model path (default: <model stem>_ctx.onnx beside the model)");
  c->add_flag("--embed", f.embed, "embed the EP context in the model (ep.context_embed_mode=1)");
  c->add_option("--ext-initializers", f.ext_file,
                "external initializers file, relative to the output model's folder");
  c->add_option("--ext-threshold", f.ext_threshold, "initializers of at least this many bytes go to --ext-initializers "
                                                     "(default 1024)");
  c->add_option("--bin-dir", f.bin_dir, "folder for the EPs' context binaries (SetEpContextBinaryInformation)");
  c->add_option("--bin-name", f.bin_name, "model name the binaries are named after (with --bin-dir)");
  c->add_option("--flags", f.flags, "comma-separated: error-if-no-nodes, error-if-exists");
  c->add_option("--opt-level", f.opt_level, "graph optimization level 0, 1, 2, 3 or 99 (default 1: constant folding, so "
                                            "shape subgraphs fold before the EPs see the graph; 0 disables it)");
  c->add_flag("--stdout", f.to_stdout, "write the model to stdout through the write function");
  c->add_flag("--from-bytes", f.from_bytes, "read the model into memory and compile it from the buffer");
  c->add_option("--externalize-over", f.externalize_over,
                "initializer-location function: initializers of at least BYTES go to <output stem>.data beside the "
                "output (reusing the source's external file when it is in the same folder)");
  return c;
}

int RunCompileCommand(const CommonFlags& common) {
  const CompileFlags& f = g_flags;
  CommonFlags with_default = common;
  if (with_default.eps.empty()) with_default.eps.push_back("aotcpu");
  StatusOr<SessionConfig> config = BuildConfig(with_default);
  if (!config.ok()) return Fail(config.status());
  if (!f.ext_file.empty() && f.externalize_over >= 0)
    return Fail(Status(ErrorCode::INVALID_ARGUMENT, "--ext-initializers and --externalize-over exclude each other"));
  if (f.bin_dir.empty() != f.bin_name.empty())
    return Fail(Status(ErrorCode::INVALID_ARGUMENT, "--bin-dir and --bin-name go together"));
  if (f.to_stdout && !f.output.empty()) return Fail(Status(ErrorCode::INVALID_ARGUMENT, "-o and --stdout exclude each other"));
  if (f.to_stdout && ::isatty(STDOUT_FILENO))
    return Fail(Status(ErrorCode::INVALID_ARGUMENT, "--stdout writes a binary model; redirect stdout to a file or pipe"));
  StatusOr<uint32_t> flags = ParseFlags(f.flags);
  if (!flags.ok()) return Fail(flags.status());

  const std::string model_folder = FolderOfPath(f.model);
  // A model from bytes has no folder of its own: its external data is found beside the model file.
  if (f.from_bytes && !config.value().entries.count("session.model_external_initializers_file_folder_path"))
    config.value().entries["session.model_external_initializers_file_folder_path"] = model_folder;
  CompileOptions options(config.value());
  std::string bytes;
  Status st;
  auto step = [&](Status s) {
    if (st.ok()) st = std::move(s);
  };
  if (f.from_bytes) {
    StatusOr<std::string> read = ReadFileToString(f.model);
    if (!read.ok()) return Fail(read.status());
    bytes = std::move(read).value();
    step(options.SetInputModelFromBuffer(bytes.data(), bytes.size()));
  } else {
    step(options.SetInputModelPath(f.model));
  }
  // The output file: -o, else (for --from-bytes, where the runtime cannot derive it) <model stem>_ctx.onnx.
  std::string output = f.output;
  if (output.empty() && f.from_bytes && !f.to_stdout)
    output = (model_folder == "." && f.model.find('/') == std::string::npos ? std::string() : model_folder + "/") +
             Stem(f.model) + "_ctx.onnx";
  if (!output.empty()) step(options.SetOutputModelPath(output));
  if (f.to_stdout) {
    step(options.SetOutputModelWriteFunc([](const void* data, size_t size) -> Status {
      RETURN_ERROR_IF(std::fwrite(data, 1, size, stdout) != size, FAIL, "cannot write the model to stdout: ",
                      std::strerror(errno));
      return Status::OK();
    }));
  }
  if (!f.ext_file.empty()) step(options.SetOutputModelExternalInitializersFile(f.ext_file, f.ext_threshold));
  step(options.SetEpContextEmbedMode(f.embed));
  if (!f.bin_dir.empty()) {
    step(options.SetEpContextBinaryInformation(f.bin_dir, f.bin_name));
  } else if (f.from_bytes && f.to_stdout) {
    // No path anywhere: the binaries (and --externalize-over's file) go beside the model file, named after it.
    step(options.SetEpContextBinaryInformation(model_folder + "/", Stem(f.model) + "_ctx.onnx"));
  }
  step(options.SetFlags(flags.value()));
  step(options.SetGraphOptimizationLevel(f.opt_level));

  // Where the model (or, for --stdout, the runtime's base path beside the source) goes, and the data file there.
  std::string out_path = output;
  if (out_path.empty()) {
    StatusOr<std::string> derived = ValidatedEpContextPath("", f.model, false);
    if (!derived.ok()) return Fail(derived.status());
    out_path = derived.value();
  }
  const std::string out_folder = FolderOfPath(out_path);
  std::unique_ptr<Externalizer> externalizer;
  if (f.externalize_over >= 0) {
    externalizer = std::make_unique<Externalizer>(out_folder, Stem(out_path) + ".data",
                                                  static_cast<size_t>(f.externalize_over),
                                                  SameFolder(out_folder, model_folder));
    Externalizer* e = externalizer.get();
    step(options.SetOutputModelGetInitializerLocationFunc(
        [e](const std::string& name, const Tensor& value, const ExternalDataLocation* source) {
          return (*e)(name, value, source);
        }));
  }
  if (!st.ok()) return Fail(st);

  const std::string bin_folder = f.bin_dir.empty() ? out_folder : f.bin_dir;
  const Listing before_out = List(out_folder), before_bin = List(bin_folder);
  CompileOptions::Report compile_report;
  // The progress line, on stderr (stdout may carry the model): what is being compiled with which EPs, finished with
  // what the EPs took and how long it took once the compile returns.
  std::string ep_list;
  for (const std::string& e : with_default.eps) ep_list += (ep_list.empty() ? "" : ",") + e;
  std::fprintf(stderr, "epctx compile: compiling %s for %s ... ", f.model.c_str(), ep_list.c_str());
  std::fflush(stderr);
  st = options.Compile(&compile_report);
  if (st.ok()) {
    std::map<std::string, std::pair<int, size_t>> per_ep;  // EP -> (partitions, nodes)
    for (const PartitionReport& p : compile_report.partitions) {
      per_ep[p.ep].first++;
      per_ep[p.ep].second += p.num_nodes;
    }
    std::string took;
    for (const auto& [ep, n] : per_ep)
      took += fmt::format("{}{} partition{} ({} nodes) on {}", took.empty() ? "" : ", ", n.first,
                          n.first == 1 ? "" : "s", n.second, ep);
    if (took.empty()) took = "no partition compiled";
    std::fprintf(stderr, "done in %.2f s: %s, %zu node%s left on the CPU EP\n", compile_report.seconds, took.c_str(),
                 compile_report.left_on_cpu.size(), compile_report.left_on_cpu.size() == 1 ? "" : "s");
  } else {
    std::fprintf(stderr, "failed\n");
  }
  if (f.to_stdout) std::fflush(stdout);
  if (!st.ok()) {
    if (externalizer && externalizer->created()) std::remove(externalizer->path().c_str());  // no partial output
    return Fail(st);
  }
  // What was written, on stderr when the model went to stdout.
  FILE* report = f.to_stdout ? stderr : stdout;
  if (f.to_stdout) std::fprintf(report, "epctx compile: wrote the model to stdout\n");
  std::map<std::string, uintmax_t> written;
  for (const auto& [listing, folder] : {std::make_pair(&before_out, out_folder), std::make_pair(&before_bin, bin_folder)})
    for (const auto& [path, info] : List(folder)) {
      auto it = listing->find(path);
      if (it == listing->end() || it->second != info) written[path] = info.first;
    }
  for (const auto& [path, size] : written) std::fprintf(report, "epctx compile: wrote %s (%ju bytes)\n", path.c_str(), size);
  if (externalizer)
    std::fprintf(report, "epctx compile: initializer-location function: %d initializer(s) written to %s, %d reused "
                         "from the source's external data\n",
                 externalizer->written(), externalizer->path().c_str(), externalizer->reused());
  // Why nodes stay on the CPU EP (and which -f flags would pin free dims), on stderr: warnings, not results.
  if (!compile_report.left_on_cpu.empty()) {
    std::fflush(report);
    PrintLeftOnCpu(stderr, compile_report.left_on_cpu, "epctx compile: warning: ");
    PrintFreeDims(stderr, compile_report.free_dims, compile_report.left_on_cpu, "epctx compile: warning: ");
  }
  return 0;
}

}  // namespace epctx::tools
