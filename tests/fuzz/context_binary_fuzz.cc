// libFuzzer target for the AotCpu context binary: the validator, the reader, and what the EP does next with each
// graph (the program records parser, the executor's operand checks and primitive creation, one bounded run).
// Any input must be refused with a reason or, once validated, be readable end to end without touching memory
// outside the input; a program that parses must build or be refused with a reason, and one that builds must run
// on zero-valued inputs without a sanitizer report.
//
// The fuzz build defines FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, so checksums and content hashes are not compared
// and mutations reach the structural checks and the records (docs/context-binary-format.md).
// Build and run: scripts/fuzz.sh (docs/reliability.md).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "providers/aotcpu/binary/context_binary.h"
#include "providers/aotcpu/runtime/executor.h"
#include "providers/aotcpu/runtime/program.h"

namespace {

using namespace epctx::aotcpu;

// Runs are attempted only for small programs: the executor allocates the arena and the harness the I/O buffers,
// and a hostile size there is refused by the allocator at run time, which the sanitizer reports as a crash.
constexpr uint64_t kMaxRunBytes = uint64_t{64} << 20;

[[noreturn]] void Die(const char* why) {
  std::fprintf(stderr, "fuzz target contract broken: %s\n", why);
  std::abort();
}

// Bytes of an I/O tensor, or UINT64_MAX when too big to run.
uint64_t IoBytes(const IoInfo& io) {
  uint64_t n = DtypeSize(io.dtype);
  if (io.dtype == 9) n = 1;  // bool is one byte in the executor
  if (n == 0) return UINT64_MAX;
  for (int64_t d : io.dims) {
    if (d < 0 || static_cast<uint64_t>(d) > kMaxRunBytes) return UINT64_MAX;
    n *= static_cast<uint64_t>(d);
    if (n > kMaxRunBytes) return UINT64_MAX;
  }
  return n;
}

void LoadAndRun(const ContextBinaryReader& r, const GraphView& g) {
  Program p;
  CheckResult c = ParseProgram(g.records, static_cast<uint32_t>(g.tensor_indices.size()), &p);
  if (!c.ok) {
    if (c.reason.empty()) Die("ParseProgram refused without a reason");
    return;
  }
  std::vector<WeightRef> weights;
  for (uint32_t t : g.tensor_indices) weights.push_back({r.tensors()[t].data, r.tensors()[t].length});
  uint64_t total = p.arena_bytes;
  std::vector<std::vector<unsigned char>> ins, outs;
  bool runnable = true;
  for (const auto* io : {&p.inputs, &p.outputs})
    for (const IoInfo& x : *io) {
      const uint64_t b = IoBytes(x);
      if (b == UINT64_MAX || (total += b) > kMaxRunBytes) runnable = false;
    }
  std::unique_ptr<Executor> exec;
  c = Executor::Create(std::move(p), std::move(weights), 1, &exec);
  if (!c.ok) {
    if (c.reason.empty()) Die("Executor::Create refused without a reason");
    return;
  }
  if (!runnable || total > kMaxRunBytes) return;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  for (const IoInfo& x : exec->program().inputs) {
    ins.emplace_back(IoBytes(x) + 1, 0);
    in_ptrs.push_back(ins.back().data());
  }
  for (const IoInfo& x : exec->program().outputs) {
    outs.emplace_back(IoBytes(x) + 1, 0);
    out_ptrs.push_back(outs.back().data());
  }
  c = exec->Run(in_ptrs, out_ptrs);
  if (!c.ok && c.reason.empty()) Die("Executor::Run failed without a reason");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckResult v = ValidateContextBinary(data, size);
  if (!v.ok) {
    if (v.reason.empty()) Die("ValidateContextBinary refused without a reason");
    return 0;
  }
  ContextBinaryReader r;
  if (!r.Open(data, size).ok) Die("ValidateContextBinary and ContextBinaryReader::Open disagree");
  volatile uint64_t sink = 0;
  for (const TensorView& t : r.tensors())
    for (uint64_t i = 0; i < t.length; ++i) sink = sink + t.data[i];
  for (const GraphView& g : r.graphs()) {
    for (char c : g.name) sink = sink + static_cast<unsigned char>(c);
    for (char c : g.records) sink = sink + static_cast<unsigned char>(c);
    for (uint32_t i : g.tensor_indices) sink = sink + r.tensors().at(i).length;
  }
  sink = sink + r.compat().options.size() + r.compat().isa.size();
  // The load path the EP takes (ContextBinaryReader::Open in load mode) must agree with full validation.
  ContextBinaryReader load;
  if (!load.Open(data, size, /*full_validation=*/false).ok) Die("load-mode Open refused a valid binary");
  for (const GraphView& g : r.graphs()) LoadAndRun(r, g);
  return 0;
}
