// The compile API's options and CompileModel (ONNX Runtime's ModelCompilationOptions and OrtCompileApi::
// CompileModel). Compiling is session-based generation: Compile creates an InferenceSession whose config has
// ep.context_enable=1 and a GenerationOptions (epcontext/generation.h) saying where the context model goes, and the
// session's own generation writes it. There is no second writer.
//
// Not thread-safe; an options object may be used for several compiles (each creates and destroys a session).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "epcontext/generation.h"
#include "session/session.h"

namespace epctx {

// OrtCompileApiFlags bits.
constexpr uint32_t kCompileFlagErrorIfNoNodesCompiled = 1u << 0;
constexpr uint32_t kCompileFlagErrorIfOutputFileExists = 1u << 1;

class CompileOptions {
 public:
  // Copies `session` (EPs, policy, config entries) and sets ep.context_enable=1, session.disable_model_compile=0 and
  // optimization level 0 (ORT_DISABLE_ALL). The session's ep.context_file_path becomes the output path, its
  // ep.context_model_external_initializers_file_name the external initializers file (threshold 0).
  explicit CompileOptions(SessionConfig session);

  // Setters: INVALID_ARGUMENT with ONNX Runtime's messages for bad arguments; the options are unchanged then.
  Status SetInputModelPath(const std::string& path);
  // Borrowed: `data` must stay valid until Compile returns.
  Status SetInputModelFromBuffer(const void* data, size_t size);
  // Also sets ep.context_file_path (when at most 4096 characters; else a warning, as ONNX Runtime).
  Status SetOutputModelPath(const std::string& path);
  Status SetOutputModelExternalInitializersFile(const std::string& path, size_t size_threshold);
  // On success: *buffer = allocate(size) holding the model, *size = its size. allocate returns null on failure.
  using Allocate = std::function<void*(size_t)>;
  Status SetOutputModelBuffer(Allocate allocate, void** buffer, size_t* size);
  // Receives the model in chunks of at most kModelWriteChunkBytes; its first error is returned by Compile.
  Status SetOutputModelWriteFunc(std::function<Status(const void* data, size_t size)> write_func);
  Status SetOutputModelGetInitializerLocationFunc(InitializerLocationFn func);
  Status SetEpContextEmbedMode(bool embed);
  // ep.context_file_path = output_directory/model_name (EPs name and place their binaries by it).
  Status SetEpContextBinaryInformation(const std::string& output_directory, const std::string& model_name);
  Status SetFlags(uint32_t flags);
  // ORT's values 0, 1, 2, 3, 99.
  Status SetGraphOptimizationLevel(int level);

  // ONNX Runtime's ModelCompilationOptions::Check(): the combination is usable (INVALID_ARGUMENT otherwise).
  Status Check() const;
  // What the compiling session saw, for tools that explain a compile (epctx compile's warnings).
  struct Report {
    std::vector<LeftOnCpuNode> left_on_cpu;               // nodes no EP took, with the EPs' reasons
    std::vector<InferenceSession::FreeDim> free_dims;     // input dims still free after the overrides
    std::vector<PartitionReport> partitions;              // what each EP took
    size_t graph_nodes = 0;                               // nodes of the main graph after partitioning
    double seconds = 0;                                   // the whole compile (load, partition, EP compile, write)
  };
  // Check(), then the session that writes the output. On failure nothing it wrote remains (see session.cc).
  // `report` (may be null) is filled when the compile succeeds.
  Status Compile(Report* report = nullptr) const;

  const SessionConfig& session_config() const { return session_; }

 private:
  SessionConfig session_;
  std::string input_path_;
  const void* input_data_ = nullptr;
  size_t input_size_ = 0;
  bool input_from_buffer_ = false;
  GenerationOptions::Output output_ = GenerationOptions::Output::kFile;
  std::string output_path_;
  Allocate allocate_;
  void** buffer_ = nullptr;
  size_t* buffer_size_ = nullptr;
  std::function<Status(const void*, size_t)> write_func_;
  std::string external_file_;
  size_t external_threshold_ = 0;
  InitializerLocationFn initializer_location_;
  uint32_t flags_ = 0;
};

}  // namespace epctx
