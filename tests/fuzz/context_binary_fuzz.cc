// libFuzzer target for the AotCpu context-binary validator: any input must be refused with a reason or, once
// validated, be readable end to end without touching memory outside the input.
// Build: clang only (tests/CMakeLists.txt). Run: build/bin/context_binary_fuzz tests/fuzz/corpus/context_binary
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "context_binary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace epctx::aotcpu;
  CheckResult v = ValidateContextBinary(data, size);
  if (!v.ok) {
    if (v.reason.empty()) std::abort();
    return 0;
  }
  ContextBinaryReader r;
  if (!r.Open(data, size).ok) std::abort();  // Validate and Open must agree
  volatile uint64_t sink = 0;
  for (const TensorView& t : r.tensors())
    for (uint64_t i = 0; i < t.length; ++i) sink = sink + t.data[i];
  for (const GraphView& g : r.graphs()) {
    for (char c : g.name) sink = sink + static_cast<unsigned char>(c);
    for (char c : g.records) sink = sink + static_cast<unsigned char>(c);
    for (uint32_t i : g.tensor_indices) sink = sink + r.tensors().at(i).length;
  }
  sink = sink + r.compat().options.size() + r.compat().isa.size();
  return 0;
}
