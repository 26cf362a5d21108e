// The public compile API (epctx.h: ModelCompilationOptions, CompileModel) over src/compile. Setters throw
// epctx::Exception; CompileModel returns the Status. User callbacks run here, so their exceptions become statuses
// here too.
#include <cstdlib>

#include "api/api_internal.h"
#include "compile/compile.h"
#include "epctx/epctx.h"

namespace epctx {

namespace {
[[noreturn]] void Throw(const Status& s) { throw Exception(s.code(), s.message()); }
void ThrowIfError(const Status& s) {
  if (!s.ok()) Throw(s);
}

// Runs a user callback: epctx::Exception keeps its code and message, any other exception is FAIL "Caught exception
// while calling user's <callback>: <what>".
template <typename F>
Status CallUser(const char* callback, F&& f) {
  try {
    f();
    return Status::OK();
  } catch (const Exception& e) {
    return Status(e.code() == ErrorCode::OK ? ErrorCode::FAIL : e.code(), e.what());
  } catch (const std::exception& e) {
    return MakeStatus(ErrorCode::FAIL, "Caught exception while calling user's ", callback, " callback: ", e.what());
  } catch (...) {
    return MakeStatus(ErrorCode::FAIL, "Caught exception while calling user's ", callback, " callback: unknown");
  }
}
}  // namespace

void* AllocatorWithDefaultOptions::Alloc(size_t size) { return std::malloc(size == 0 ? 1 : size); }
void AllocatorWithDefaultOptions::Free(void* p) { std::free(p); }

struct ModelCompilationOptions::Impl {
  explicit Impl(SessionConfig config) : options(std::move(config)) {}
  CompileOptions options;
};

ModelCompilationOptions::ModelCompilationOptions(const Env& env, const SessionOptions& session_options) {
  impl_ = std::make_unique<Impl>(ConfigFor(env, session_options));
}
ModelCompilationOptions::~ModelCompilationOptions() = default;
ModelCompilationOptions::ModelCompilationOptions(ModelCompilationOptions&&) noexcept = default;
ModelCompilationOptions& ModelCompilationOptions::operator=(ModelCompilationOptions&&) noexcept = default;

ModelCompilationOptions& ModelCompilationOptions::SetInputModelPath(const std::string& path) {
  ThrowIfError(impl_->options.SetInputModelPath(path));
  return *this;
}
ModelCompilationOptions& ModelCompilationOptions::SetInputModelFromBuffer(const void* data, size_t size) {
  ThrowIfError(impl_->options.SetInputModelFromBuffer(data, size));
  return *this;
}
ModelCompilationOptions& ModelCompilationOptions::SetOutputModelPath(const std::string& path) {
  ThrowIfError(impl_->options.SetOutputModelPath(path));
  return *this;
}
ModelCompilationOptions& ModelCompilationOptions::SetOutputModelExternalInitializersFile(const std::string& path,
                                                                                         size_t size_threshold) {
  ThrowIfError(impl_->options.SetOutputModelExternalInitializersFile(path, size_threshold));
  return *this;
}
ModelCompilationOptions& ModelCompilationOptions::SetOutputModelBuffer(AllocatorWithDefaultOptions& allocator,
                                                                       void** output_model_buffer_ptr,
                                                                       size_t* output_model_buffer_size_ptr) {
  AllocatorWithDefaultOptions* a = &allocator;
  ThrowIfError(impl_->options.SetOutputModelBuffer([a](size_t n) { return a->Alloc(n); }, output_model_buffer_ptr,
                                                   output_model_buffer_size_ptr));
  return *this;
}
ModelCompilationOptions& ModelCompilationOptions::SetOutputModelWriteFunc(WriteBufferFunc write_func) {
  std::function<Status(const void*, size_t)> f;
  if (write_func) {
    f = [write_func](const void* data, size_t size) {
      return CallUser("OrtOutStreamWriteFunc", [&] { write_func(data, size); });
    };
  }
  ThrowIfError(impl_->options.SetOutputModelWriteFunc(std::move(f)));
  return *this;
}
ModelCompilationOptions& ModelCompilationOptions::SetOutputModelGetInitializerLocationFunc(
    GetInitializerLocationFunc func) {
  InitializerLocationFn f;
  if (func) {
    f = [func](const std::string& name, const Tensor& tensor,
               const ExternalDataLocation* source) -> StatusOr<std::optional<ExternalDataLocation>> {
      auto value_impl = std::make_unique<Value::Impl>();
      value_impl->value = IValue(tensor);  // shares the bytes; no copy
      const Value value(std::move(value_impl));
      std::optional<ExternalInitializerInfo> source_info;
      if (source) source_info.emplace(source->path, source->offset, source->size);
      std::optional<ExternalInitializerInfo> result;
      Status st = CallUser("OrtGetInitializerLocationFunc",
                           [&] { result = func(name, value, source_info ? &*source_info : nullptr); });
      if (!st.ok()) return st;
      if (!result) return std::optional<ExternalDataLocation>();
      return std::optional<ExternalDataLocation>(
          ExternalDataLocation{result->GetFilePath(), result->GetFileOffset(), result->GetByteSize()});
    };
  }
  ThrowIfError(impl_->options.SetOutputModelGetInitializerLocationFunc(std::move(f)));
  return *this;
}
ModelCompilationOptions& ModelCompilationOptions::SetEpContextEmbedMode(bool embed) {
  ThrowIfError(impl_->options.SetEpContextEmbedMode(embed));
  return *this;
}
ModelCompilationOptions& ModelCompilationOptions::SetEpContextBinaryInformation(const std::string& output_directory,
                                                                               const std::string& model_name) {
  ThrowIfError(impl_->options.SetEpContextBinaryInformation(output_directory, model_name));
  return *this;
}
ModelCompilationOptions& ModelCompilationOptions::SetFlags(uint32_t flags) {
  ThrowIfError(impl_->options.SetFlags(flags));
  return *this;
}
ModelCompilationOptions& ModelCompilationOptions::SetGraphOptimizationLevel(GraphOptimizationLevel level) {
  ThrowIfError(impl_->options.SetGraphOptimizationLevel(static_cast<int>(level)));
  return *this;
}

Status CompileModel(const Env& env, const ModelCompilationOptions& options) {
  // The options already hold the Env's EP registry (constructor); `env` must be that Env (as in ONNX Runtime).
  return options.impl()->options.Compile();
}

}  // namespace epctx
