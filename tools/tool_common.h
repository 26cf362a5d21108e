// Helpers shared by the epctx subcommands: option parsing in onnxruntime_perf_test's formats, test-data I/O,
// value comparison, printing.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "graph/graph.h"
#include "session/session.h"

namespace epctx::tools {

// "k|v k|v" -> map (INVALID_ARGUMENT naming the bad pair).
Status ParseKeyValuePairs(const std::string& text, std::map<std::string, std::string>* out);
// "name:value" free dimension override.
Status ParseFreeDimOverride(const std::string& text, std::map<std::string, int64_t>* out);

// Session configuration from the common flags (-e, -C, -i, -f, -x).
struct CommonFlags {
  std::vector<std::string> eps;              // -e (cpu)
  std::vector<std::string> configs;          // -C "k|v"
  std::string provider_options;              // -i "k|v k|v"
  std::vector<std::string> free_dims;        // -f name:value
  std::vector<std::string> input_shapes;     // --input-shape name:1x512 (session config epctx.input_shapes)
  int threads = 0;                           // -x
  std::vector<std::string> plugin_ep_libs;   // --plugin_ep_libs "Name|path"
};
StatusOr<SessionConfig> BuildConfig(const CommonFlags& flags);
// The CLI's EP libraries: those built with epctx (registered as example, aotcpu, ...) plus --plugin_ep_libs.
std::shared_ptr<EpRegistry> ToolRegistry(const std::vector<std::string>& plugin_ep_libs, Status* status);

// Reads input_N.pb / output_N.pb files of a test_data_set folder, in index order, as the kinds `types` expects
// (tensor, sequence or optional protos).
StatusOr<std::vector<IValue>> ReadTestData(const std::string& dir, const std::string& prefix,
                                           const std::vector<ValueInfo>& types);

// Compares `actual` with `expected`; on mismatch returns a message naming the first differing element.
bool ValuesClose(const IValue& actual, const IValue& expected, double rtol, double atol, std::string* why);

// Element i of a numeric tensor as a double (0 for strings and other non-numeric types).
double ElementAsDouble(const Tensor& t, int64_t i);

// Random tensors for the graph's inputs (free dims = 1 unless overridden by the session's config).
StatusOr<std::vector<IValue>> RandomInputs(const std::vector<ValueInfo>& inputs, uint32_t seed);

// Prints a value compactly: shape, dtype and the first elements.
std::string Summarize(const IValue& v, size_t max_elems = 8);

// Prints the nodes left on the CPU EP grouped by identical reason, the largest group first: "N nodes (ops): EP:
// reason" and the first few node names. Each line starts with `prefix`. Nothing when `left` is empty.
void PrintLeftOnCpu(FILE* out, const std::vector<LeftOnCpuNode>& left, const std::string& prefix);
// The warning for free input dims: which dims, and the -f flags that pin the named ones (N: the size to use).
// AotCpu keeps free dims free by default (issue 27), so this is printed only when a node of `left` stayed on the CPU
// EP because of a free dim: "pin it with -f" (dynamic_shapes=0), "not known for every size of the free dims" or a
// graph that binds at no probe size. Nothing when `free` is empty or no such node is left.
void PrintFreeDims(FILE* out, const std::vector<InferenceSession::FreeDim>& free, const std::vector<LeftOnCpuNode>& left,
                   const std::string& prefix);

// Prints "epctx: <CODE>: <message>" to stderr and returns the exit code 1.
int Fail(const Status& status);

struct TestOptions {
  CommonFlags common;
  std::vector<std::string> paths;
  std::string skip_list;  // file of "test_name  reason" lines
  double rtol = 1e-3, atol = 1e-5;
  // Names of the outputs to compare (--outputs a,b); empty: all. The others still run but are not compared; a name
  // the model does not output fails the case.
  std::vector<std::string> outputs;
  bool verbose = false;
};
int RunTestCommand(const TestOptions& opts);

struct PerfOptions {
  CommonFlags common;
  std::string model;
  std::string mode = "times";  // -m
  int repeat = 100;            // -r
  bool random_inputs = false;  // -I
  std::string inputs_dir;      // --inputs
  bool json = false;
  std::string plugin_eps;      // --plugin_eps (names, as -e)
  std::string profile;         // -p: profile file prefix
  bool verbose = false;        // -v: print the session report (partitions, EPContext loads, compile times)
};
int RunPerfCommand(const PerfOptions& opts);

struct RunOptions {
  CommonFlags common;
  std::string model;
  std::string inputs_dir;
  int repeat = 10;
};
int RunRunCommand(const RunOptions& opts);

// `epctx inspect MODEL [--json] [--steps]` (inspect_command.cc): IR version, opsets, metadata, inputs/outputs,
// EPContext nodes (source, main/embed mode, partition, binary path and size or payload size) and the other nodes by op
// type; AotCpu context binaries (a .bin file or one an AotCpu node references/embeds) validated and described.
struct InspectOptions {
  std::string model;
  bool json = false;
  bool steps = false;  // also list every step of each AotCpu graph
};
int RunInspectCommand(const InspectOptions& opts);

// `epctx compare MODEL -e EP` (compare_command.cc): the model on the EP and on the CPU EP with the same inputs;
// when an output differs, the first node whose output differs. Exit 0 same, 1 different, 2 error.
struct CompareOptions {
  CommonFlags common;
  std::string model;
  std::string inputs_dir;      // --inputs (a test_data_set_N folder)
  bool random_inputs = false;  // -I (the default without --inputs)
  uint32_t seed = 1234;        // --seed for -I
  double rtol = 1e-3, atol = 1e-4;
  bool verbose = false;        // -v: print every cut compiled
};
int RunCompareCommand(const CompareOptions& opts);

}  // namespace epctx::tools
