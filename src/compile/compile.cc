#include "compile/compile.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace epctx {

namespace {
constexpr size_t kMaxConfigValue = 4096;  // ConfigOptions' value limit: longer paths are not passed to EPs

// A name for the EP binaries of a model compiled from bytes to a buffer or function with no path anywhere: in the
// working directory (as ONNX Runtime), named after the model's content, so compiles of different models in one
// folder never replace each other's binaries.
std::string FallbackContextPath(const void* data, size_t size) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 1099511628211ull;
  char name[64];
  std::snprintf(name, sizeof(name), "./epctx_model_%016" PRIx64 "_ctx.onnx", h);
  return name;
}
}  // namespace

CompileOptions::CompileOptions(SessionConfig session) : session_(std::move(session)) {
  session_.entries["ep.context_enable"] = "1";
  session_.entries["session.disable_model_compile"] = "0";
  session_.graph_optimization_level = 0;  // ORT_DISABLE_ALL, whatever the session had (as ONNX Runtime)
  output_path_ = session_.Get("ep.context_file_path");
  external_file_ = session_.Get("ep.context_model_external_initializers_file_name");
}

Status CompileOptions::SetInputModelPath(const std::string& path) {
  RETURN_ERROR_IF(path.empty(), INVALID_ARGUMENT, "Invalid input model: path string is empty");
  input_path_ = path;
  input_data_ = nullptr;
  input_size_ = 0;
  input_from_buffer_ = false;
  return Status::OK();
}

Status CompileOptions::SetInputModelFromBuffer(const void* data, size_t size) {
  RETURN_ERROR_IF(!data, INVALID_ARGUMENT, "Invalid input model: data pointer is null");
  RETURN_ERROR_IF(size == 0, INVALID_ARGUMENT, "Invalid input model: data size is 0");
  input_path_.clear();
  input_data_ = data;
  input_size_ = size;
  input_from_buffer_ = true;
  return Status::OK();
}

Status CompileOptions::SetOutputModelPath(const std::string& path) {
  RETURN_ERROR_IF(path.empty(), INVALID_ARGUMENT, "Invalid output model path: path is empty");
  output_ = GenerationOptions::Output::kFile;
  output_path_ = path;
  if (path.size() <= kMaxConfigValue) {
    session_.entries["ep.context_file_path"] = path;
  } else {
    std::fprintf(stderr, "[epctx WARNING] Output model path length (%zu) exceeds limit of %zu characters. epctx will "
                         "still generate the expected output file, but EPs will see an empty output model path in "
                         "SessionOption's ConfigOptions.\n", path.size(), kMaxConfigValue);
  }
  return Status::OK();
}

Status CompileOptions::SetOutputModelExternalInitializersFile(const std::string& path, size_t size_threshold) {
  RETURN_ERROR_IF(path.empty(), INVALID_ARGUMENT, "Invalid external initializer file: path is empty");
  external_file_ = path;
  external_threshold_ = size_threshold;
  initializer_location_ = nullptr;
  return Status::OK();
}

Status CompileOptions::SetOutputModelBuffer(Allocate allocate, void** buffer, size_t* size) {
  RETURN_ERROR_IF(!buffer, INVALID_ARGUMENT, "Invalid output model buffer: data pointer is null");
  RETURN_ERROR_IF(!size, INVALID_ARGUMENT, "Invalid output model buffer: size pointer is null");
  RETURN_ERROR_IF(!allocate, INVALID_ARGUMENT, "Invalid allocator for output model buffer: allocator pointer is null");
  output_ = GenerationOptions::Output::kBuffer;
  allocate_ = std::move(allocate);
  buffer_ = buffer;
  buffer_size_ = size;
  return Status::OK();
}

Status CompileOptions::SetOutputModelWriteFunc(std::function<Status(const void*, size_t)> write_func) {
  RETURN_ERROR_IF(!write_func, INVALID_ARGUMENT, "OrtWriteBufferFunc function for output model is null");
  output_ = GenerationOptions::Output::kWriteFunc;
  write_func_ = std::move(write_func);
  return Status::OK();
}

Status CompileOptions::SetOutputModelGetInitializerLocationFunc(InitializerLocationFn func) {
  RETURN_ERROR_IF(!func, INVALID_ARGUMENT, "OrtGetInitializerLocationFunc function for output model is null");
  initializer_location_ = std::move(func);
  external_file_.clear();
  external_threshold_ = 0;
  return Status::OK();
}

Status CompileOptions::SetEpContextEmbedMode(bool embed) {
  session_.entries["ep.context_embed_mode"] = embed ? "1" : "0";
  return Status::OK();
}

Status CompileOptions::SetEpContextBinaryInformation(const std::string& output_directory,
                                                     const std::string& model_name) {
  RETURN_ERROR_IF(output_directory.empty(), INVALID_ARGUMENT, "Invalid output directory: path is empty");
  RETURN_ERROR_IF(model_name.empty(), INVALID_ARGUMENT, "Invalid model name: string is empty");
  // ONNX Runtime takes a path without a trailing '/' for a directory only if its last component has an extension
  // ("./out" is refused, "./out.d" accepted: trap S3). epctx also accepts an existing directory, and refuses a path
  // that exists but is not a directory.
  struct stat st;
  const bool exists = ::stat(output_directory.c_str(), &st) == 0;
  const size_t slash = output_directory.find_last_of('/');
  const std::string last = slash == std::string::npos ? output_directory : output_directory.substr(slash + 1);
  const size_t dot = last.find_last_of('.');
  const bool has_extension = dot != std::string::npos && dot != 0 && last != "..";
  const bool valid = exists ? S_ISDIR(st.st_mode) : (last.empty() || has_extension);
  RETURN_ERROR_IF(!valid, INVALID_ARGUMENT, "output_dir is not a valid directory.");
  const std::string path =
      output_directory.back() == '/' ? output_directory + model_name : output_directory + "/" + model_name;
  if (path.size() <= kMaxConfigValue) {
    session_.entries["ep.context_file_path"] = path;
  } else {
    std::fprintf(stderr, "[epctx WARNING] EP context binary path length (%zu) exceeds limit of %zu characters; EPs "
                         "will not see it.\n", path.size(), kMaxConfigValue);
  }
  return Status::OK();
}

Status CompileOptions::SetFlags(uint32_t flags) {
  flags_ = flags;  // unknown bits are ignored
  return Status::OK();
}

Status CompileOptions::SetGraphOptimizationLevel(int level) {
  RETURN_ERROR_IF(level != 0 && level != 1 && level != 2 && level != 3 && level != 99, INVALID_ARGUMENT,
                  "graph_optimization_level with value ", level,
                  " is invalid. Valid values are: ORT_DISABLE_ALL (0), ORT_ENABLE_BASIC (1), ORT_ENABLE_EXTENDED (2), "
                  "ORT_ENABLE_LAYOUT (3), and ORT_ENABLE_ALL (99).");
  session_.graph_optimization_level = level;
  return Status::OK();
}

Status CompileOptions::Check() const {
  const bool from_path = !input_path_.empty();
  RETURN_ERROR_IF(!from_path && !input_from_buffer_, INVALID_ARGUMENT,
                  "Input model to compile must be loaded from either a file or a memory buffer");
  RETURN_ERROR_IF(from_path && input_from_buffer_, INVALID_ARGUMENT,
                  "Input model to compile must be loaded from either a file or a memory buffer, but not both.");
  struct stat st;
  RETURN_ERROR_IF(from_path && ::stat(input_path_.c_str(), &st) != 0, INVALID_ARGUMENT,
                  "Input model path does not exist: ", input_path_);
  RETURN_ERROR_IF(input_from_buffer_ && input_size_ == 0, INVALID_ARGUMENT, "Buffer for input model data has size 0");
  // Reachable here (ONNX Runtime's is dead code, so a model from bytes with no output failed later: trap S9).
  RETURN_ERROR_IF(output_ == GenerationOptions::Output::kFile && output_path_.empty() && !from_path,
                  INVALID_ARGUMENT,
                  "Unable to generate an output model path: require an input model path if the location of the "
                  "output model (e.g., file, buffer, or stream) is not specified.");
  if (output_ == GenerationOptions::Output::kBuffer) {
    RETURN_ERROR_IF(!buffer_, INVALID_ARGUMENT, "Invalid buffer configuration for output model: buffer pointer is null");
    RETURN_ERROR_IF(!buffer_size_, INVALID_ARGUMENT,
                    "Invalid buffer configuration for output model: size pointer is null");
    RETURN_ERROR_IF(!allocate_, INVALID_ARGUMENT, "Invalid buffer configuration for output model: allocator is null");
  }
  RETURN_ERROR_IF(output_ == GenerationOptions::Output::kWriteFunc && !write_func_, INVALID_ARGUMENT,
                  "Invalid buffer writing function for output model: function pointer is null");
  // Refused here rather than failing late (ONNX Runtime: an ORT_ENFORCE exception at initialization, trap S17).
  RETURN_ERROR_IF(!initializer_location_ && !external_file_.empty() && external_file_[0] == '/', INVALID_ARGUMENT,
                  "Invalid external initializer file: '", external_file_,
                  "' is an absolute path; it must be relative to the output model's folder");
  return Status::OK();
}

Status CompileOptions::Compile(Report* report) const {
  RETURN_IF_ERROR(Check());
  auto gen = std::make_shared<GenerationOptions>();
  gen->compile_api = true;
  gen->output = output_;
  gen->output_path = output_path_;
  if (output_ == GenerationOptions::Output::kBuffer) {
    Allocate allocate = allocate_;
    void** buffer = buffer_;
    size_t* buffer_size = buffer_size_;
    gen->to_buffer = [allocate, buffer, buffer_size](const std::string& bytes) -> Status {
      void* p = allocate(bytes.size());
      RETURN_ERROR_IF(!p, FAIL, "the output model buffer allocator returned no memory for ", bytes.size(), " bytes");
      std::memcpy(p, bytes.data(), bytes.size());
      *buffer = p;
      *buffer_size = bytes.size();
      return Status::OK();
    };
  }
  gen->write_func = write_func_;
  gen->error_if_output_file_exists = (flags_ & kCompileFlagErrorIfOutputFileExists) != 0;
  gen->if_no_compiled_nodes = (flags_ & kCompileFlagErrorIfNoNodesCompiled)
                                  ? GenerationOptions::IfNoCompiledNodes::kReturnError
                                  : GenerationOptions::IfNoCompiledNodes::kGenerateModel;
  gen->external_initializers_file = external_file_;
  gen->external_threshold = external_threshold_;
  gen->initializer_location = initializer_location_;
  if (input_from_buffer_ && output_ != GenerationOptions::Output::kFile)
    gen->fallback_context_path = FallbackContextPath(input_data_, input_size_);
  SessionConfig config = session_;
  config.generation = std::move(gen);
  const auto start = std::chrono::steady_clock::now();
  StatusOr<std::unique_ptr<InferenceSession>> session =
      input_from_buffer_ ? InferenceSession::CreateFromBytes(input_data_, input_size_, config)
                         : InferenceSession::CreateFromFile(input_path_, config);
  if (session.ok() && report) {
    report->left_on_cpu = session.value()->left_on_cpu();
    report->free_dims = session.value()->free_dims();
    report->partitions = session.value()->partitions();
    report->graph_nodes = session.value()->planned_graph().nodes.size();
    report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return session.status();  // the session is released here: compiling is done
}

}  // namespace epctx
