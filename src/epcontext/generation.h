// How a generating session writes its context model: where the bytes go (file, caller's buffer, caller's write
// function), what happens to an existing file or when no node was compiled, and where initializers go. The legacy
// path (session config ep.context_enable=1) uses GenerationOptions::FromConfig; the compile API (src/compile) fills
// one and passes it in SessionConfig::generation, so both run the same generation code (session.cc,
// context_model.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace epctx {

// An initializer's bytes in a file: path relative to a model's folder, byte offset, byte size.
struct ExternalDataLocation {
  std::string path;
  int64_t offset = 0;
  size_t size = 0;
  bool operator==(const ExternalDataLocation& o) const {
    return path == o.path && offset == o.offset && size == o.size;
  }
};

// Decides where one initializer of the output model goes (ONNX Runtime's OrtGetInitializerLocationFunc): called
// with its name, its data and, if it was external in the source model, that location (relative to the source
// model's folder; else null). nullopt = embed; a location = reference those bytes (relative to the output model's
// folder). A non-OK status fails the generation with that status.
using InitializerLocationFn = std::function<StatusOr<std::optional<ExternalDataLocation>>(
    const std::string& name, const Tensor& value, const ExternalDataLocation* source_location)>;

// Largest chunk handed to a write function (ONNX Runtime's 64 KiB stream buffer).
constexpr size_t kModelWriteChunkBytes = 64 * 1024;

struct GenerationOptions {
  enum class Output { kFile, kBuffer, kWriteFunc };
  enum class IfNoCompiledNodes {
    kDontGenerateModel,  // legacy: a warning, nothing written
    kReturnError,        // FAIL "Unable to compile any nodes. ..."
    kGenerateModel,      // compile API default: the model is written without EPContext nodes
  };
  Output output = Output::kFile;
  // kFile: the output model ("" = <model stem>_ctx.onnx beside the model). Ignored for the other outputs.
  std::string output_path;
  // kBuffer: receives the whole serialized model once. kWriteFunc: receives it in order, in chunks of at most
  // kModelWriteChunkBytes; the first non-OK status stops the write and is returned as is.
  std::function<Status(const std::string& model_bytes)> to_buffer;
  std::function<Status(const void* data, size_t size)> write_func;
  bool error_if_output_file_exists = true;  // false: an existing output file is replaced (atomically)
  IfNoCompiledNodes if_no_compiled_nodes = IfNoCompiledNodes::kDontGenerateModel;
  // Initializers of at least `external_threshold` bytes go to this file (relative to the output model's folder;
  // "" = embed all). Ignored when initializer_location is set.
  std::string external_initializers_file;
  size_t external_threshold = 0;
  InitializerLocationFn initializer_location;
  // Compile API: a model that already holds EPContext nodes is INVALID_GRAPH (the legacy path loads it as is).
  bool compile_api = false;
  // For outputs other than a file, when the model has no path (loaded from bytes) and ep.context_file_path is not
  // set: the path EPs see as ep.context_file_path and that relative external files are placed beside.
  std::string fallback_context_path;
  bool writes_file() const { return output == Output::kFile; }

  // The legacy options from session config entries: ep.context_file_path, all initializers in
  // ep.context_model_external_initializers_file_name (threshold 0) when set, an existing file is an error, no
  // compiled nodes → no model.
  static GenerationOptions FromConfig(const std::map<std::string, std::string>& entries);
};

}  // namespace epctx
