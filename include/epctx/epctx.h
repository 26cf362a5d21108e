// epctx's public C++ API. Names follow ONNX Runtime's C++ API (Ort::Env, Ort::SessionOptions, Ort::Session,
// Ort::Value) so code written for ONNX Runtime ports by changing the namespace. Every failure throws
// epctx::Exception carrying an ErrorCode (ONNX Runtime's codes); nothing else is thrown.
//
// Thread safety: Env and Session are safe to use from several threads (Session::Run concurrently);
// SessionOptions and Value are not synchronised.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <stdexcept>
#include <string>
#include <vector>

#include "epctx/status.h"
#include "epctx/status_codes.h"

namespace epctx {

// Thrown by every API call that fails. code() is the status code, what() the message.
class Exception : public std::runtime_error {
 public:
  Exception(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }
  ErrorCode GetOrtErrorCode() const noexcept { return code_; }  // ONNX Runtime's spelling

 private:
  ErrorCode code_;
};

// Element types; values equal ONNX's TensorProto.DataType (and ONNX Runtime's ONNXTensorElementDataType).
enum class ElementType : int32_t {
  UNDEFINED = 0, FLOAT = 1, UINT8 = 2, INT8 = 3, UINT16 = 4, INT16 = 5, INT32 = 6, INT64 = 7, STRING = 8, BOOL = 9,
  FLOAT16 = 10, DOUBLE = 11, UINT32 = 12, UINT64 = 13, COMPLEX64 = 14, COMPLEX128 = 15, BFLOAT16 = 16,
  FLOAT8E4M3FN = 17, FLOAT8E4M3FNUZ = 18, FLOAT8E5M2 = 19, FLOAT8E5M2FNUZ = 20,  // 1-byte codes (ONNX float8)
  UINT4 = 21, INT4 = 22,  // ONNX's 4-bit integers: named in type info; their tensors cannot cross the API yet
};

enum class GraphOptimizationLevel : int {
  ORT_DISABLE_ALL = 0, ORT_ENABLE_BASIC = 1, ORT_ENABLE_EXTENDED = 2, ORT_ENABLE_LAYOUT = 3, ORT_ENABLE_ALL = 99
};
enum class LoggingLevel : int { VERBOSE = 0, INFO = 1, WARNING = 2, ERROR = 3, FATAL = 4 };

// Key-value pairs (EP metadata, EP options, device metadata). Copies are independent.
class KeyValuePairs {
 public:
  KeyValuePairs() = default;
  KeyValuePairs(std::initializer_list<std::pair<const std::string, std::string>> init) : map_(init) {}
  void Add(const char* key, const char* value) { map_[key] = value; }
  // NULL when absent (pointer into this object).
  const char* GetValue(const char* key) const {
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second.c_str();
  }
  const std::map<std::string, std::string>& GetKeyValuePairs() const { return map_; }
  size_t size() const { return map_.size(); }

 private:
  std::map<std::string, std::string> map_;
};
using ConstKeyValuePairs = const KeyValuePairs&;

enum class HardwareDeviceType : int { CPU = 0, GPU = 1, NPU = 2 };

// A hardware device discovered by the runtime (or created by an EP factory, e.g. a virtual device).
// Valid while the Env (and, for plugin devices, the library) is alive.
class ConstHardwareDevice {
 public:
  HardwareDeviceType Type() const;
  uint32_t VendorId() const;
  const char* Vendor() const;
  uint32_t DeviceId() const;
  KeyValuePairs Metadata() const;  // e.g. "vendor", "model", "isa", "cores"; "is_virtual"="1" for virtual devices
  explicit ConstHardwareDevice(const void* impl) : impl_(impl) {}

 private:
  const void* impl_;
};

// An (execution provider, hardware device) pair an EP factory reported. Valid while its library is registered.
class ConstEpDevice {
 public:
  ConstEpDevice(std::nullptr_t = nullptr) {}  // NOLINT: an empty handle, like Ort::ConstEpDevice{nullptr}
  explicit ConstEpDevice(const void* impl) : impl_(impl) {}
  const char* EpName() const;
  const char* EpVendor() const;
  KeyValuePairs EpMetadata() const;
  KeyValuePairs EpOptions() const;
  ConstHardwareDevice Device() const;
  const void* impl() const { return impl_; }
  explicit operator bool() const { return impl_ != nullptr; }
  bool operator==(std::nullptr_t) const { return impl_ == nullptr; }
  bool operator!=(std::nullptr_t) const { return impl_ != nullptr; }

 private:
  const void* impl_ = nullptr;
};

// ONNX Runtime's OrtExecutionProviderDevicePolicy.
enum class ExecutionProviderDevicePolicy : int {
  DEFAULT = 0, PREFER_CPU, PREFER_NPU, PREFER_GPU, MAX_PERFORMANCE, MAX_EFFICIENCY, MIN_OVERALL_POWER,
};

// The process-wide runtime environment: hardware devices (discovered at creation) and registered plugin EP
// libraries. Sessions created with an Env keep the libraries they use loaded.
class Env {
 public:
  // Registers the installed plugin EPs: every <folder of the loaded libepctx.so>/epctx/libepctx_<name>.so under
  // <name> (an installed epctx has "aotcpu" and "example", so GetEpDevices lists AotCpuExecutionProvider without a
  // path). A library there that fails to load is a warning through the logger, never an error. In the build tree
  // there is no such folder and the Env starts with the CPU EP only. docs/install.md.
  explicit Env(LoggingLevel level = LoggingLevel::WARNING, const char* log_id = "epctx");
  // With environment config entries, e.g. {"allow_virtual_devices", "1"}.
  Env(LoggingLevel level, const char* log_id, const KeyValuePairs& config);
  // Loads a plugin EP library (dlopen, CreateEpFactories, GetSupportedDevices) under `registration_name`.
  // A name ending in ".virtual" allows the library's virtual devices. FAIL with ONNX Runtime's messages for a
  // duplicate name, a library that does not load, a missing symbol, an unknown ABI version or a failing factory;
  // nothing stays loaded then. Registering an installed plugin again under its discovered name with the same file
  // (same realpath) does nothing and succeeds; the same name with another file is the duplicate-name FAIL.
  void RegisterExecutionProviderLibrary(const char* registration_name, const char* path);
  // ReleaseEpFactory + unload. FAIL when the name is unknown or a session still uses the library.
  void UnregisterExecutionProviderLibrary(const char* registration_name);
  // The built-in CPU EP's device first, then every registered library's devices.
  std::vector<ConstEpDevice> GetEpDevices() const;
  ~Env();
  Env(Env&&) noexcept;
  Env& operator=(Env&&) noexcept;
  LoggingLevel logging_level() const;

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

class SessionOptions {
 public:
  SessionOptions();
  ~SessionOptions();
  SessionOptions(const SessionOptions&);
  SessionOptions& operator=(const SessionOptions&);

  // Session configuration entries (ep.context_enable, session.model_external_initializers_file_folder_path, ...).
  // Setting a key again replaces its value.
  SessionOptions& AddConfigEntry(const char* key, const char* value);
  // The value of a config entry, or `default_value` when unset.
  std::string GetConfigEntryOrDefault(const char* key, const std::string& default_value) const;
  bool HasConfigEntry(const char* key) const;
  // Threads for operators (0 = one per core). INVALID_ARGUMENT when negative.
  SessionOptions& SetIntraOpNumThreads(int threads);
  // Fixes a free (named) input dimension, e.g. ("batch", 1), before shapes are inferred.
  // INVALID_ARGUMENT for an empty name or a negative value.
  SessionOptions& AddFreeDimensionOverrideByName(const char* dim_name, int64_t value);
  // ORT_ENABLE_BASIC and above (the default is ORT_ENABLE_ALL) fold constants before any EP sees the graph: nodes
  // whose inputs are constant, and Shape/Size of values with a static shape, are computed once by the CPU EP's
  // kernels and become initializers, so shapes computed at run time become static (src/session/constant_folding.h).
  // ORT_DISABLE_ALL keeps the graph as loaded. epctx has no other graph optimization yet.
  SessionOptions& SetGraphOptimizationLevel(GraphOptimizationLevel level);
  // Adds a plugin EP on the given devices (all from one EP). Provider options become session config entries
  // "ep.<lowercase ep name>.<key>" (device defaults first, then these). EPs are used in the order appended.
  SessionOptions& AppendExecutionProvider_V2(const Env& env, const std::vector<ConstEpDevice>& devices,
                                             const KeyValuePairs& ep_options = {});
  SessionOptions& AppendExecutionProvider_V2(const Env& env, const std::vector<ConstEpDevice>& devices,
                                             const std::unordered_map<std::string, std::string>& ep_options);
  // A built-in EP by name ("CPUExecutionProvider" / "CPU"). NOT_IMPLEMENTED for names this build lacks.
  SessionOptions& AppendExecutionProvider(const std::string& name,
                                          const std::unordered_map<std::string, std::string>& options = {});
  // Automatic EP selection when no EP was appended. Virtual devices are never selected.
  SessionOptions& SetEpSelectionPolicy(ExecutionProviderDevicePolicy policy);
  // Custom selection: receives every EP device (built-in CPU first) and returns those to use, in priority order.
  using EpSelectionDelegate = std::function<std::vector<ConstEpDevice>(const std::vector<ConstEpDevice>& devices)>;
  SessionOptions& SetEpSelectionPolicyDelegate(EpSelectionDelegate delegate);
  // Records a Chrome-trace profile (one event per node with its EP); Session::EndProfiling writes
  // "<prefix>_<timestamp>.json".
  SessionOptions& EnableProfiling(const char* profile_file_prefix);
  SessionOptions& DisableProfiling();

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

// Shape and element type of a tensor (a model input/output or a Value). Unknown dims are -1 with their
// symbolic name (if any) in GetSymbolicDimensions().
class TensorTypeAndShapeInfo {
 public:
  ElementType GetElementType() const { return element_type_; }
  const std::vector<int64_t>& GetShape() const { return shape_; }
  size_t GetDimensionsCount() const { return shape_.size(); }
  const std::vector<std::string>& GetSymbolicDimensions() const { return symbolic_; }
  // Product of dims; -1 if any is unknown.
  int64_t GetElementCount() const;

  TensorTypeAndShapeInfo(ElementType t, std::vector<int64_t> shape, std::vector<std::string> symbolic)
      : element_type_(t), shape_(std::move(shape)), symbolic_(std::move(symbolic)) {}

 private:
  ElementType element_type_;
  std::vector<int64_t> shape_;
  std::vector<std::string> symbolic_;
};

enum class OnnxType : int { UNKNOWN = 0, TENSOR = 1, SEQUENCE = 2, MAP = 3, OPAQUE = 4, SPARSETENSOR = 5, OPTIONAL = 6 };

class TypeInfo {
 public:
  OnnxType GetONNXType() const { return type_; }
  // For tensors (and the element of sequences/optionals).
  const TensorTypeAndShapeInfo& GetTensorTypeAndShapeInfo() const { return tensor_; }
  TypeInfo(OnnxType type, TensorTypeAndShapeInfo tensor) : type_(type), tensor_(std::move(tensor)) {}

 private:
  OnnxType type_;
  TensorTypeAndShapeInfo tensor_;
};

// Where a tensor's memory lives. epctx runs on the CPU only; kept for ONNX Runtime source compatibility.
enum OrtAllocatorType { OrtInvalidAllocator = -1, OrtDeviceAllocator = 0, OrtArenaAllocator = 1 };
enum OrtMemType { OrtMemTypeCPUInput = -2, OrtMemTypeCPUOutput = -1, OrtMemTypeDefault = 0 };
class MemoryInfo {
 public:
  static MemoryInfo CreateCpu(OrtAllocatorType, OrtMemType) { return MemoryInfo(); }
};

// A value: a tensor (owned or over caller memory), a sequence of tensors, or an empty optional.
class Value {
 public:
  Value();  // an empty value (IsTensor() false)
  ~Value();
  Value(Value&&) noexcept;
  Value& operator=(Value&&) noexcept;
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;

  // A tensor over caller memory (not copied): `data` must stay valid and unchanged while the Value or any session
  // run using it is alive. count must equal the shape's element count (INVALID_ARGUMENT otherwise).
  template <typename T>
  static Value CreateTensor(const MemoryInfo&, T* data, size_t count, const int64_t* shape, size_t shape_len) {
    return CreateTensor(ElementTypeOf<T>(), data, count * sizeof(T), shape, shape_len);
  }
  template <typename T>
  static Value CreateTensor(T* data, size_t count, const int64_t* shape, size_t shape_len) {
    return CreateTensor(ElementTypeOf<T>(), data, count * sizeof(T), shape, shape_len);
  }
  // Over caller memory with an explicit element type and byte size.
  static Value CreateTensor(ElementType type, void* data, size_t byte_count, const int64_t* shape, size_t shape_len);
  // An owned, zero-initialised tensor.
  static Value CreateTensor(ElementType type, const int64_t* shape, size_t shape_len);
  template <typename T>
  static Value CreateTensor(const int64_t* shape, size_t shape_len) {
    return CreateTensor(ElementTypeOf<T>(), shape, shape_len);
  }

  bool IsTensor() const;
  bool IsSequence() const;
  bool HasValue() const;  // false for an empty optional / default-constructed Value
  TensorTypeAndShapeInfo GetTensorTypeAndShapeInfo() const;  // FAIL if not a tensor
  void* GetTensorMutableRawData();
  const void* GetTensorRawData() const;
  template <typename T>
  T* GetTensorMutableData() { return static_cast<T*>(GetTensorMutableRawData()); }
  template <typename T>
  const T* GetTensorData() const { return static_cast<const T*>(GetTensorRawData()); }
  // Element i of a string tensor.
  std::string GetStringTensorElement(size_t i) const;
  // Sets element `index` of an owned string tensor (CreateTensor(ElementType::STRING, shape, ...)), or all of them
  // from `count` strings (count must equal the element count). FAIL for a non-string tensor, INVALID_ARGUMENT for an
  // index out of range, a count mismatch or a null string. ONNX Runtime's Ort::Value::FillStringTensor[Element].
  void FillStringTensorElement(const char* s, size_t index);
  void FillStringTensor(const char* const* s, size_t count);
  // Number of tensors in a sequence; and one of them (copy of the handle, shares memory).
  size_t GetCount() const;
  Value GetValue(size_t index) const;

  template <typename T>
  static constexpr ElementType ElementTypeOf();

  struct Impl;
  Impl* impl() const { return impl_.get(); }
  explicit Value(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

template <> constexpr ElementType Value::ElementTypeOf<float>() { return ElementType::FLOAT; }
template <> constexpr ElementType Value::ElementTypeOf<double>() { return ElementType::DOUBLE; }
template <> constexpr ElementType Value::ElementTypeOf<int8_t>() { return ElementType::INT8; }
template <> constexpr ElementType Value::ElementTypeOf<int16_t>() { return ElementType::INT16; }
template <> constexpr ElementType Value::ElementTypeOf<int32_t>() { return ElementType::INT32; }
template <> constexpr ElementType Value::ElementTypeOf<int64_t>() { return ElementType::INT64; }
template <> constexpr ElementType Value::ElementTypeOf<uint8_t>() { return ElementType::UINT8; }
template <> constexpr ElementType Value::ElementTypeOf<uint16_t>() { return ElementType::UINT16; }
template <> constexpr ElementType Value::ElementTypeOf<uint32_t>() { return ElementType::UINT32; }
template <> constexpr ElementType Value::ElementTypeOf<uint64_t>() { return ElementType::UINT64; }
template <> constexpr ElementType Value::ElementTypeOf<bool>() { return ElementType::BOOL; }

// ONNX Runtime's OrtCompiledModelCompatibility.
enum class CompiledModelCompatibility : int {
  EP_NOT_APPLICABLE = 0, EP_SUPPORTED_OPTIMAL = 1, EP_SUPPORTED_PREFER_RECOMPILATION = 2, EP_UNSUPPORTED = 3,
};
// Asks the EP factory of `devices` (all from one EP) whether a model compiled with `compatibility_info` suits them.
// INVALID_ARGUMENT with ONNX Runtime's messages for empty/null arguments or devices of several EPs.
CompiledModelCompatibility GetModelCompatibilityForEpDevices(const std::vector<ConstEpDevice>& devices,
                                                             const char* compatibility_info);
// The compatibility string stored for `ep_type` in a compiled model's metadata, read without parsing the graph;
// an empty optional when absent.
std::optional<std::string> GetCompatibilityInfoFromModel(const char* model_path, const char* ep_type);
std::optional<std::string> GetCompatibilityInfoFromModelBytes(const void* data, size_t size, const char* ep_type);

// Options of one Session::Run (ONNX Runtime's Ort::RunOptions). SetTerminate may be called from another thread
// while a Run using these options is in progress: the run stops before its next node (subgraph nodes included) and
// throws FAIL "Exiting due to terminate flag being set to true."; a Run started while the flag is set fails at once.
// The tag, log levels and config entries are stored and read back (epctx logs no per-run messages).
class RunOptions {
 public:
  RunOptions();
  ~RunOptions();
  RunOptions(RunOptions&&) noexcept;
  RunOptions& operator=(RunOptions&&) noexcept;
  RunOptions(const RunOptions&) = delete;
  RunOptions& operator=(const RunOptions&) = delete;

  RunOptions& SetRunLogVerbosityLevel(int level);
  int GetRunLogVerbosityLevel() const;
  // 0 verbose .. 4 fatal (ONNX Runtime's OrtLoggingLevel), -1 (the default) the session's level; INVALID_ARGUMENT
  // outside that range.
  RunOptions& SetRunLogSeverityLevel(int level);
  int GetRunLogSeverityLevel() const;
  RunOptions& SetRunTag(const char* run_tag);
  const char* GetRunTag() const;
  // Run config entries; setting a key again replaces its value. INVALID_ARGUMENT for an empty key.
  RunOptions& AddConfigEntry(const char* config_key, const char* config_value);
  // The value of an entry, or nullptr when unset.
  const char* GetConfigEntry(const char* config_key) const;
  RunOptions& SetTerminate();
  RunOptions& UnsetTerminate();
  bool GetTerminate() const;

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

// The model's metadata (ONNX Runtime's Ort::ModelMetadata): ModelProto.producer_name, graph.name, domain,
// doc_string (description), graph.doc_string (graph description), model_version and metadata_props.
struct ModelMetadata {
  std::string producer_name;
  std::string graph_name;
  std::string domain;
  std::string description;
  std::string graph_description;
  int64_t version = 0;
  std::map<std::string, std::string> custom_metadata_map;
};

class Session {
 public:
  // Loads and prepares a model from a file. NO_SUCHFILE, INVALID_PROTOBUF, INVALID_GRAPH, NOT_IMPLEMENTED (an op
  // without a kernel) as Exception.
  Session(const Env& env, const char* model_path, const SessionOptions& options);
  // From bytes in memory (copied during the call; external data is found through the config entry
  // session.model_external_initializers_file_folder_path).
  Session(const Env& env, const void* model_data, size_t model_data_length, const SessionOptions& options);
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // Runs the model. Inputs are matched by name (any order); outputs come back in output_names order.
  // INVALID_ARGUMENT naming the input for a missing or unknown input, a wrong element type or shape.
  std::vector<Value> Run(const RunOptions& run_options, const char* const* input_names, const Value* input_values,
                         size_t input_count, const char* const* output_names, size_t output_count) const;
  std::vector<Value> Run(const std::vector<std::string>& input_names, const std::vector<Value>& inputs,
                         const std::vector<std::string>& output_names = {}) const;

  size_t GetInputCount() const;
  size_t GetOutputCount() const;
  std::vector<std::string> GetInputNames() const;
  std::vector<std::string> GetOutputNames() const;
  TypeInfo GetInputTypeInfo(size_t index) const;   // INVALID_ARGUMENT when out of range
  TypeInfo GetOutputTypeInfo(size_t index) const;
  // Graph inputs that have an initializer (a default value a run may override), in model order.
  size_t GetOverridableInitializerCount() const;
  std::vector<std::string> GetOverridableInitializerNames() const;
  TypeInfo GetOverridableInitializerTypeInfo(size_t index) const;  // INVALID_ARGUMENT when out of range
  ModelMetadata GetModelMetadata() const;
  // Writes the profile and returns its file name (FAIL when profiling is not enabled).
  std::string EndProfiling();
  // Options for the session's plugin EPs after creation (OrtEp::SetDynamicOptions).
  void SetEpDynamicOptions(const std::vector<std::string>& keys, const std::vector<std::string>& values);
  // EP names in priority order, and the EP of each partition (fused node name -> EP name).
  std::vector<std::string> GetExecutionProviders() const;
  std::map<std::string, std::string> GetPartitionAssignments() const;
  // What session creation did, as one JSON object (cache observability): phase times (load, constant folding,
  // partition and compile, plan, context-model generation), each EP's GetCapability/Compile time and compatibility
  // verdict, every partition (EP, node count; for EPContext partitions: source, embed mode, binary path and size /
  // payload size), the nodes constant folding replaced by initializers, the number of nodes left on the CPU EP, and
  // the context model written, if any; "free_dims" (input dims still free after the overrides) and "left_on_cpu"
  // (every node no EP took, with each EP's reason for not taking it).
  std::string GetSessionReport() const;

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};


// ---- Compile API (ONNX Runtime's OrtCompileApi / Ort::ModelCompilationOptions / Ort::CompileModel) ----
// Compiling = creating a session with EPContext generation on and writing its context model to the chosen output;
// docs/compile-api.md has the rules and where epctx differs from ONNX Runtime.

// ONNX Runtime's OrtCompileApiFlags. Unknown bits are ignored.
enum OrtCompileApiFlags : uint32_t {
  OrtCompileApiFlags_NONE = 0,
  OrtCompileApiFlags_ERROR_IF_NO_NODES_COMPILED = 1 << 0,   // FAIL "Unable to compile any nodes..." and no output
  OrtCompileApiFlags_ERROR_IF_OUTPUT_FILE_EXISTS = 1 << 1,  // FAIL "...exists already..." instead of overwriting
};

// OrtExternalInitializerInfo: where an initializer's bytes are: a file path relative to the model's folder, the
// byte offset in it and the byte size.
class ExternalInitializerInfo {
 public:
  ExternalInitializerInfo(std::string file_path, int64_t file_offset, size_t byte_size)
      : file_path_(std::move(file_path)), file_offset_(file_offset), byte_size_(byte_size) {}
  const std::string& GetFilePath() const { return file_path_; }
  int64_t GetFileOffset() const { return file_offset_; }
  size_t GetByteSize() const { return byte_size_; }
  bool operator==(const ExternalInitializerInfo& o) const {
    return file_path_ == o.file_path_ && file_offset_ == o.file_offset_ && byte_size_ == o.byte_size_;
  }

 private:
  std::string file_path_;
  int64_t file_offset_;
  size_t byte_size_;
};

// Receives consecutive chunks (each at most 64 KiB) of the serialized output model, in order. Throwing
// epctx::Exception fails the compile with that code and message; any other std::exception fails it with FAIL
// "Caught exception while calling user's OrtOutStreamWriteFunc callback: <what>". Nothing the compile wrote
// (external initializer file, context binaries) remains after a failure.
using WriteBufferFunc = std::function<void(const void* data, size_t num_bytes)>;

// Called once per initializer of the output model (ONNX Runtime's order: subgraphs' initializers first, then the
// main graph's, each in ascending name order) with its data as a tensor Value (valid during the call only) and,
// when it lived in an external file of the source model, that location (file path relative to the source model's
// folder; else nullptr; valid during the call only). Return std::nullopt to embed the initializer, or where its bytes
// are, relative to the output model's folder: a file the callback wrote, or a copy of *external_info to reuse the
// source's data (returning by value cannot alias ONNX Runtime's external_info object, so reuse is always allowed).
// The location must hold GetByteSize() == the tensor's byte size (FAIL otherwise). Throwing fails the compile like
// WriteBufferFunc; files the callback wrote are the caller's and are not removed.
using GetInitializerLocationFunc = std::function<std::optional<ExternalInitializerInfo>(
    const std::string& initializer_name, const Value& initializer_value, const ExternalInitializerInfo* external_info)>;

// Ort::AllocatorWithDefaultOptions: malloc/free. The output buffer of SetOutputModelBuffer is allocated with it and
// belongs to the caller (release it with Free).
class AllocatorWithDefaultOptions {
 public:
  void* Alloc(size_t size);
  void Free(void* p);
};

// Options of one compile. Setters validate their arguments and throw epctx::Exception(INVALID_ARGUMENT, <ONNX
// Runtime's message>); CompileModel checks the combination. Not thread-safe; may be reused for several compiles.
// Defaults (ONNX Runtime's): input none; output `<input stem>_ctx.onnx` beside the input model (or the session's
// ep.context_file_path), an existing output overwritten; initializers embedded (or the session's
// ep.context_model_external_initializers_file_name, threshold 0); embed mode from ep.context_embed_mode ("0");
// flags NONE (a model is written even when no node was compiled); optimization level ORT_DISABLE_ALL.
class ModelCompilationOptions {
 public:
  // Copies the options (EPs, selection policy, config entries); the caller's object is untouched. The copy gets
  // ep.context_enable=1 and session.disable_model_compile=0.
  ModelCompilationOptions(const Env& env, const SessionOptions& session_options);
  ~ModelCompilationOptions();
  ModelCompilationOptions(ModelCompilationOptions&&) noexcept;
  ModelCompilationOptions& operator=(ModelCompilationOptions&&) noexcept;

  // The model to compile; the last of SetInputModelPath / SetInputModelFromBuffer wins.
  ModelCompilationOptions& SetInputModelPath(const std::string& path);
  // `data` is borrowed, not copied: it must stay valid until CompileModel returns.
  ModelCompilationOptions& SetInputModelFromBuffer(const void* data, size_t size);
  // Output destinations; the last of SetOutputModelPath / SetOutputModelBuffer / SetOutputModelWriteFunc wins.
  // SetOutputModelPath also sets ep.context_file_path (EPs put their binaries beside it).
  ModelCompilationOptions& SetOutputModelPath(const std::string& path);
  // Initializers of at least `size_threshold` bytes go to `path` (relative to the output model's folder; an
  // absolute path is INVALID_ARGUMENT at CompileModel), smaller ones stay in the model. Replaces an initializer
  // location function.
  ModelCompilationOptions& SetOutputModelExternalInitializersFile(const std::string& path, size_t size_threshold);
  // On success *output_model_buffer_ptr = the model (allocated with `allocator`), *output_model_buffer_size_ptr =
  // its size. The pointers must stay valid until CompileModel returns.
  ModelCompilationOptions& SetOutputModelBuffer(AllocatorWithDefaultOptions& allocator, void** output_model_buffer_ptr,
                                                size_t* output_model_buffer_size_ptr);
  ModelCompilationOptions& SetOutputModelWriteFunc(WriteBufferFunc write_func);
  // Replaces an external initializers file setting.
  ModelCompilationOptions& SetOutputModelGetInitializerLocationFunc(GetInitializerLocationFunc func);
  // Sets ep.context_embed_mode ("1"/"0").
  ModelCompilationOptions& SetEpContextEmbedMode(bool embed);
  // Sets ep.context_file_path = output_directory/model_name, which EPs use to name and place their context
  // binaries ([model_name stem]_[ep].bin in output_directory); the output model's location is unchanged.
  // output_directory must end with '/' or name an existing directory ("output_dir is not a valid directory.").
  ModelCompilationOptions& SetEpContextBinaryInformation(const std::string& output_directory,
                                                         const std::string& model_name);
  // OrtCompileApiFlags bits; replaces both flags.
  ModelCompilationOptions& SetFlags(uint32_t flags);
  // INVALID_ARGUMENT for a value that is not one of the enumerators. The default is ORT_DISABLE_ALL (as in ONNX
  // Runtime), which compiles the graph as loaded; ORT_ENABLE_BASIC and above fold constants first, as for a session.
  ModelCompilationOptions& SetGraphOptimizationLevel(GraphOptimizationLevel level);

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

// Compiles the model: creates a session with the options and writes its context model (and the EPs' binaries) to
// the output. Returns the failure as a Status (never throws): INVALID_ARGUMENT for a bad combination of options
// (ONNX Runtime's Check() messages), else the session's or the output's error. On failure no output remains.
Status CompileModel(const Env& env, const ModelCompilationOptions& options);

}  // namespace epctx
