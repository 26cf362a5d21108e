// Helpers shared by the libFuzzer targets in tests/fuzz (header only; each target is one .cc file).
//
// The targets hold the runtime to the rule "a library never aborts on bad input": every refusal must be a Status
// with a non-empty message, and anything else (a crash, a sanitizer report, an uncaught exception, a leak, a hang
// past libFuzzer's -timeout) is a finding. Feeds are bounded so that a fuzzed model's declared input shapes cannot
// make the harness itself allocate without limit.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "graph/graph.h"

namespace epctx::fuzz {

// Largest total element count of the zero-valued feeds a target builds for one Run (free dims count as 1).
inline constexpr int64_t kMaxFeedElements = int64_t{1} << 16;

// Stops the fuzzer with a message: the input broke a contract the target checks.
[[noreturn]] inline void Die(const std::string& why) {
  std::fprintf(stderr, "fuzz target contract broken: %s\n", why.c_str());
  std::abort();
}

// A refusal must say why. With EPCTX_FUZZ_VERBOSE set, refusals are printed (to see what seeds reach).
inline void CheckRefusal(const Status& s, const char* what) {
  if (s.ok()) Die(std::string(what) + ": expected a refusal, got OK");
  if (s.message().empty()) Die(std::string(what) + ": refused with an empty message");
  static const bool verbose = std::getenv("EPCTX_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "%s refused: %s\n", what, s.ToString().c_str());
}

// With EPCTX_FUZZ_VERBOSE set, says that an input got through `what`.
inline void NoteSuccess(const char* what) {
  static const bool verbose = std::getenv("EPCTX_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "%s: OK\n", what);
}

// Zero-valued feeds for `inputs`: tensors of the declared element type and shape (free or unknown dims = 1),
// empty sequences, absent optionals. False (and nothing to run) when an input's kind or element type is unknown or
// the feeds would exceed kMaxFeedElements in total.
inline bool ZeroFeeds(const std::vector<ValueInfo>& inputs, std::vector<std::string>* names,
                      std::vector<IValue>* values) {
  int64_t total = 0;
  for (const ValueInfo& in : inputs) {
    names->push_back(in.name);
    if (in.type.kind == ValueType::Kind::kOptional) {
      values->push_back(IValue());
      continue;
    }
    if (in.type.elem_type == DataType::kUndefined) return false;
    if (in.type.kind == ValueType::Kind::kSequence) {
      values->push_back(IValue::Sequence({}, in.type.elem_type));
      continue;
    }
    if (in.type.kind != ValueType::Kind::kTensor) return false;
    Shape shape;
    int64_t n = 1;
    for (const Dim& d : in.type.dims) {
      const int64_t v = d.known() ? d.value : 1;
      if (v > kMaxFeedElements) return false;
      n *= v;
      if (n > kMaxFeedElements) return false;
      shape.push_back(v);
    }
    total += n;
    if (total > kMaxFeedElements) return false;
    StatusOr<Tensor> t = Tensor::Allocate(in.type.elem_type, shape);
    if (!t.ok()) return false;
    values->push_back(IValue(std::move(t).value()));
  }
  return true;
}

// A folder under $TMPDIR (or /tmp) for the life of the process, removed when it exits normally.
inline std::string MakeTempDir(const char* tag) {
  static std::vector<std::string>* made = nullptr;
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/epctx_fuzz_" + tag + "_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) Die("mkdtemp failed for " + tmpl);
  if (!made) {
    made = new std::vector<std::string>();
    std::atexit([] {
      std::error_code ec;
      for (const std::string& d : *made) std::filesystem::remove_all(d, ec);
    });
  }
  made->push_back(buf.data());
  return buf.data();
}

// True when a file whose path contains `needle` is mapped into this process (/proc/self/maps names mapped files by
// their real path, so a symlink that was followed shows its target).
inline bool FileMapped(const std::string& needle) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(needle) != std::string::npos) return true;
  return false;
}

inline void WriteBytes(const std::string& path, const void* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!f) Die("cannot write " + path);
}

}  // namespace epctx::fuzz
