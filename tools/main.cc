// The epctx command line: test, perf, run, inspect, share-compile, compile, compare.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>

#include "tools/tool_common.h"

using namespace epctx::tools;

namespace epctx::tools {
// share_compile_command.cc: `epctx share-compile` (models comma-separated).
int RunShareCompileCommand(const CommonFlags& flags, const std::string& models, bool verbose);
// compile_command.cc: `epctx compile` (the compile API); its own options live there.
CLI::App* AddCompileSubcommand(CLI::App* app);
int RunCompileCommand(const CommonFlags& flags);
}  // namespace epctx::tools

namespace {
void AddCommon(CLI::App* cmd, CommonFlags* f) {
  // Repeatable options take one value per occurrence, so `-e example DIR` leaves DIR to the positionals.
  cmd->add_option("-e", f->eps, "execution provider (cpu, example, aotcpu, or a --plugin_ep_libs name)")
      ->allow_extra_args(false);
  cmd->add_option("-C", f->configs, "session config entries \"key|value key|value\"")->allow_extra_args(false);
  cmd->add_option("-i", f->provider_options, "provider options \"key|value key|value\"");
  cmd->add_option("-f", f->free_dims, "free dimension override name:value")->allow_extra_args(false);
  cmd->add_option("--input-shape", f->input_shapes,
                  "whole shape of an input, name:D1xD2x... (for free dims without a name to pin with -f)")
      ->allow_extra_args(false);
  cmd->add_option("-x", f->threads, "intra-op threads (0 = one per core)");
  cmd->add_option("--plugin_ep_libs", f->plugin_ep_libs, "plugin EP libraries \"Name|path\" (built ones load by themselves)")
      ->allow_extra_args(false);
}
}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) or a closed pipe must give an error status, not kill the process by a signal.
  std::signal(SIGXFSZ, SIG_IGN);
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"epctx: an ONNX runtime for ahead-of-time compiled execution-provider contexts"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("epctx ") + EPCTX_VERSION);

  TestOptions test;
  auto* t = app.add_subcommand("test", "run ONNX backend test folders; ends with 'N passed, N failed'");
  AddCommon(t, &test.common);
  t->add_option("paths", test.paths, "test folders (model.onnx + test_data_set_N) or parents of many")->required();
  t->add_option("--skip-list", test.skip_list, "file of 'test_name reason' lines to skip");
  t->add_option("--rtol", test.rtol, "relative tolerance for floating-point outputs");
  t->add_option("--atol", test.atol, "absolute tolerance for floating-point outputs");
  t->add_option("--outputs", test.outputs, "compare only these outputs (names, comma-separated); the others still run")
      ->delimiter(',');
  t->add_flag("-v,--verbose", test.verbose, "print passing and skipped tests too");

  PerfOptions perf;
  auto* p = app.add_subcommand("perf", "session creation, first run and steady-state latency");
  AddCommon(p, &perf.common);
  p->add_option("model", perf.model, "model path")->required();
  p->add_option("-m", perf.mode, "test mode: times (default) or duration");
  p->add_option("-r", perf.repeat, "number of timed runs");
  p->add_flag("-I", perf.random_inputs, "random inputs (default when --inputs is not given)");
  p->add_option("--inputs", perf.inputs_dir, "a test_data_set_N folder with input_N.pb files");
  p->add_flag("--json", perf.json, "print one JSON line");
  p->add_option("--plugin_eps", perf.plugin_eps, "plugin EPs to use, comma-separated (as -e)");
  p->add_option("-p", perf.profile, "write a Chrome-trace profile with this file prefix");
  p->add_flag("-v,--verbose", perf.verbose, "print the session report (partitions, EPContext loads, compile times)");

  RunOptions run;
  auto* r = app.add_subcommand("run", "run a model once and print its outputs and timings");
  AddCommon(r, &run.common);
  r->add_option("model", run.model, "model path")->required();
  r->add_option("--inputs", run.inputs_dir, "a test_data_set_N folder with input_N.pb files (default: random)");
  r->add_option("-r", run.repeat, "timed runs after the first");

  InspectOptions inspect;
  auto* in = app.add_subcommand(
      "inspect", "EPContext nodes, binaries, compatibility info, inputs/outputs of a model; or an AotCpu binary");
  in->add_option("model", inspect.model, "model path")->required();
  in->add_flag("--json", inspect.json, "print one JSON object");
  in->add_flag("--steps", inspect.steps, "list every step of each AotCpu graph");

  CommonFlags share;
  std::string share_models;
  bool share_verbose = false;
  auto* sc = app.add_subcommand(
      "share-compile", "compile models as one weight-sharing group (ONNX Runtime's ep_weight_sharing_ctx_gen): "
                       "<model>_ctx.onnx beside each model plus one context binary");
  AddCommon(sc, &share);
  sc->add_option("models", share_models, "model1.onnx,model2.onnx[,...] (comma-separated, no spaces)")->required();
  sc->add_flag("-v,--verbose", share_verbose, "print each session's report");

  CompareOptions compare;
  auto* cmp = app.add_subcommand(
      "compare", "run a model on an EP and on the CPU EP; when an output differs, name the first node whose output "
                 "differs (exit 0 same, 1 different, 2 error)");
  AddCommon(cmp, &compare.common);
  cmp->add_option("model", compare.model, "model path (a source model, not a _ctx.onnx)")->required();
  cmp->add_option("--inputs", compare.inputs_dir, "a test_data_set_N folder with input_N.pb files (default: random)");
  cmp->add_flag("-I", compare.random_inputs, "random inputs (the default without --inputs)");
  cmp->add_option("--seed", compare.seed, "seed of the random inputs (default 1234)");
  cmp->add_option("--rtol", compare.rtol, "relative tolerance (default 1e-3)");
  cmp->add_option("--atol", compare.atol, "absolute tolerance (default 1e-4)");
  cmp->add_flag("-v,--verbose", compare.verbose, "print every graph cut compiled while bisecting");

  CommonFlags compile;
  auto* cc = AddCompileSubcommand(&app);
  AddCommon(cc, &compile);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "epctx: INVALID_ARGUMENT: %s\n", e.what());
    return 2;
  }
  if (t->parsed()) return RunTestCommand(test);
  if (p->parsed()) return RunPerfCommand(perf);
  if (r->parsed()) return RunRunCommand(run);
  if (in->parsed()) return RunInspectCommand(inspect);
  if (sc->parsed()) return RunShareCompileCommand(share, share_models, share_verbose);
  if (cc->parsed()) return RunCompileCommand(compile);
  if (cmp->parsed()) return RunCompareCommand(compare);
  return 2;
}
