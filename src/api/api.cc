// The public C++ API over the runtime: translates Status into epctx::Exception, once, here.
#include <cstring>
#include <map>
#include <mutex>

#include <onnx/onnx_pb.h>

#include "api/api_internal.h"
#include "api/run_options_impl.h"
#include "epctx/epctx.h"
#include "epcontext/compatibility.h"
#include "plugin/ep_library.h"
#include "session/session.h"

namespace epctx {

namespace {
[[noreturn]] void Throw(const Status& s) { throw Exception(s.code(), s.message()); }
void ThrowIfError(const Status& s) {
  if (!s.ok()) Throw(s);
}
template <typename T>
T ValueOrThrow(StatusOr<T> v) {
  if (!v.ok()) Throw(v.status());
  return std::move(v).value();
}
}  // namespace

// ---- Env ----
struct Env::Impl {
  LoggingLevel level;
  std::string log_id;
  std::shared_ptr<EpRegistry> registry;
};
// Both constructors register the installed plugin EPs (<libdir>/epctx/libepctx_<name>.so as <name>); in the build
// tree that folder does not exist and the Env starts with the CPU EP only.
Env::Env(LoggingLevel level, const char* log_id)
    : impl_(new Impl{level, log_id ? log_id : "",
                     std::make_shared<EpRegistry>(std::map<std::string, std::string>(), static_cast<int>(level))}) {
  impl_->registry->RegisterFolder(InstalledPluginFolder());
}
Env::Env(LoggingLevel level, const char* log_id, const KeyValuePairs& config)
    : impl_(new Impl{level, log_id ? log_id : "",
                     std::make_shared<EpRegistry>(config.GetKeyValuePairs(), static_cast<int>(level))}) {
  impl_->registry->RegisterFolder(InstalledPluginFolder());
}
void Env::RegisterExecutionProviderLibrary(const char* name, const char* path) {
  if (!name || !path) Throw(Status(ErrorCode::INVALID_ARGUMENT, "registration name and path must not be NULL"));
  ThrowIfError(impl_->registry->Register(name, path));
}
void Env::UnregisterExecutionProviderLibrary(const char* name) {
  if (!name) Throw(Status(ErrorCode::INVALID_ARGUMENT, "registration name must not be NULL"));
  ThrowIfError(impl_->registry->Unregister(name));
}
std::vector<ConstEpDevice> Env::GetEpDevices() const {
  std::vector<ConstEpDevice> out;
  for (const EpctxEpDevice* d : impl_->registry->Devices()) out.emplace_back(static_cast<const void*>(d));
  return out;
}

// ---- devices ----
namespace {
const EpctxEpDevice* Dev(const void* p) {
  if (!p) Throw(Status(ErrorCode::INVALID_ARGUMENT, "empty EP device handle"));
  return static_cast<const EpctxEpDevice*>(p);
}
KeyValuePairs ToKvp(const EpctxKeyValuePairs& k) {
  KeyValuePairs out;
  for (size_t i = 0; i < k.keys.size(); ++i) out.Add(k.keys[i].c_str(), k.values[i].c_str());
  return out;
}
}  // namespace
const char* ConstEpDevice::EpName() const { return Dev(impl_)->ep_name.c_str(); }
const char* ConstEpDevice::EpVendor() const { return Dev(impl_)->ep_vendor.c_str(); }
KeyValuePairs ConstEpDevice::EpMetadata() const { return ToKvp(Dev(impl_)->ep_metadata); }
KeyValuePairs ConstEpDevice::EpOptions() const { return ToKvp(Dev(impl_)->ep_options); }
ConstHardwareDevice ConstEpDevice::Device() const { return ConstHardwareDevice(Dev(impl_)->device); }
HardwareDeviceType ConstHardwareDevice::Type() const {
  return static_cast<HardwareDeviceType>(static_cast<const EpctxHardwareDevice*>(impl_)->type);
}
uint32_t ConstHardwareDevice::VendorId() const { return static_cast<const EpctxHardwareDevice*>(impl_)->vendor_id; }
const char* ConstHardwareDevice::Vendor() const { return static_cast<const EpctxHardwareDevice*>(impl_)->vendor.c_str(); }
uint32_t ConstHardwareDevice::DeviceId() const { return static_cast<const EpctxHardwareDevice*>(impl_)->device_id; }
KeyValuePairs ConstHardwareDevice::Metadata() const {
  return ToKvp(static_cast<const EpctxHardwareDevice*>(impl_)->metadata);
}
Env::~Env() = default;
Env::Env(Env&&) noexcept = default;
Env& Env::operator=(Env&&) noexcept = default;
LoggingLevel Env::logging_level() const { return impl_->level; }

// ---- SessionOptions ----
struct SessionOptions::Impl {
  SessionConfig config;
};
SessionOptions::SessionOptions() : impl_(new Impl()) {}
SessionOptions::~SessionOptions() = default;
SessionOptions::SessionOptions(const SessionOptions& o) : impl_(new Impl(*o.impl_)) {}
SessionOptions& SessionOptions::operator=(const SessionOptions& o) {
  if (this != &o) impl_.reset(new Impl(*o.impl_));
  return *this;
}
SessionOptions& SessionOptions::AddConfigEntry(const char* key, const char* value) {
  // Limits and messages as ONNX Runtime's ConfigOptions.
  if (!key || !*key || std::strlen(key) > 1024)
    Throw(Status(ErrorCode::INVALID_ARGUMENT, "Config key is empty or longer than maximum length 1024"));
  if (!value) Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "config entry '", key, "' has a null value"));
  if (std::strlen(value) > 4096)
    Throw(Status(ErrorCode::INVALID_ARGUMENT, "Config value is longer than maximum length: 4096"));
  impl_->config.entries[key] = value;
  return *this;
}
std::string SessionOptions::GetConfigEntryOrDefault(const char* key, const std::string& def) const {
  return impl_->config.Get(key ? key : "", def);
}
bool SessionOptions::HasConfigEntry(const char* key) const { return key && impl_->config.entries.count(key); }
SessionOptions& SessionOptions::SetIntraOpNumThreads(int threads) {
  if (threads < 0) Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "intra-op thread count must be >= 0, got ", threads));
  impl_->config.intra_op_num_threads = threads;
  return *this;
}
SessionOptions& SessionOptions::AddFreeDimensionOverrideByName(const char* dim_name, int64_t value) {
  if (!dim_name || !*dim_name) Throw(Status(ErrorCode::INVALID_ARGUMENT, "free dimension name must not be empty"));
  if (value < 0)
    Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "free dimension '", dim_name, "' override must be >= 0, got ", value));
  impl_->config.free_dimension_overrides[dim_name] = value;
  return *this;
}
SessionOptions& SessionOptions::SetGraphOptimizationLevel(GraphOptimizationLevel level) {
  impl_->config.graph_optimization_level = static_cast<int>(level);
  return *this;
}
SessionOptions& SessionOptions::AppendExecutionProvider_V2(const Env& env, const std::vector<ConstEpDevice>& devices,
                                                           const KeyValuePairs& ep_options) {
  if (devices.empty()) Throw(Status(ErrorCode::INVALID_ARGUMENT, "AppendExecutionProvider_V2 needs at least one EP device"));
  EpRequest req;
  for (const auto& d : devices) {
    const EpctxEpDevice* dev = Dev(d.impl());
    if (!req.devices.empty() && dev->factory != req.devices[0]->factory)
      Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "all devices given to AppendExecutionProvider_V2 must belong to "
                                                    "the same EP; got '", req.devices[0]->ep_name, "' and '",
                       dev->ep_name, "'"));
    req.devices.push_back(dev);
  }
  req.ep_name = req.devices[0]->ep_name;
  if (req.ep_name == "CPUExecutionProvider") req.devices.clear();
  req.options = ep_options.GetKeyValuePairs();
  if (impl_->config.registry && impl_->config.registry != env.impl()->registry)
    Throw(Status(ErrorCode::INVALID_ARGUMENT, "EP devices from two different Envs in one SessionOptions"));
  impl_->config.registry = env.impl()->registry;
  impl_->config.eps.push_back(std::move(req));
  return *this;
}
SessionOptions& SessionOptions::AppendExecutionProvider_V2(
    const Env& env, const std::vector<ConstEpDevice>& devices,
    const std::unordered_map<std::string, std::string>& ep_options) {
  KeyValuePairs k;
  for (const auto& [a, b] : ep_options) k.Add(a.c_str(), b.c_str());
  return AppendExecutionProvider_V2(env, devices, k);
}
SessionOptions& SessionOptions::AppendExecutionProvider(const std::string& name,
                                                        const std::unordered_map<std::string, std::string>& options) {
  if (name != "CPUExecutionProvider" && name != "CPU")
    Throw(MakeStatus(ErrorCode::NOT_IMPLEMENTED, "execution provider '", name,
                     "' is not built into epctx (built in: CPUExecutionProvider); plugin EPs are added with "
                     "AppendExecutionProvider_V2"));
  EpRequest req;
  req.ep_name = "CPUExecutionProvider";
  req.options.insert(options.begin(), options.end());
  impl_->config.eps.push_back(std::move(req));
  return *this;
}
SessionOptions& SessionOptions::SetEpSelectionPolicy(ExecutionProviderDevicePolicy policy) {
  int v = static_cast<int>(policy);
  if (v < 0 || v > static_cast<int>(ExecutionProviderDevicePolicy::MIN_OVERALL_POWER))
    Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "unknown EP selection policy ", v));
  impl_->config.policy = static_cast<DevicePolicy>(v);
  return *this;
}
SessionOptions& SessionOptions::SetEpSelectionPolicyDelegate(EpSelectionDelegate delegate) {
  if (!delegate) Throw(Status(ErrorCode::INVALID_ARGUMENT, "the EP selection delegate is empty"));
  impl_->config.delegate = [delegate](const std::vector<const EpctxEpDevice*>& all) {
    std::vector<ConstEpDevice> in;
    for (const EpctxEpDevice* d : all) in.emplace_back(static_cast<const void*>(d));
    std::vector<const EpctxEpDevice*> out;
    for (const auto& d : delegate(in)) out.push_back(static_cast<const EpctxEpDevice*>(d.impl()));
    return out;
  };
  return *this;
}
SessionOptions& SessionOptions::EnableProfiling(const char* prefix) {
  impl_->config.profiling = true;
  if (prefix && *prefix) impl_->config.profile_prefix = prefix;
  return *this;
}
SessionOptions& SessionOptions::DisableProfiling() {
  impl_->config.profiling = false;
  return *this;
}

// ---- TensorTypeAndShapeInfo ----
int64_t TensorTypeAndShapeInfo::GetElementCount() const {
  int64_t n = 1;
  for (int64_t d : shape_) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

// ---- Value ----
Value::Value() : impl_(new Impl()) {}
Value::Value(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Value::~Value() = default;
Value::Value(Value&&) noexcept = default;
Value& Value::operator=(Value&&) noexcept = default;

namespace {
Shape ShapeFrom(const int64_t* shape, size_t len) {
  if (len > 0 && !shape) Throw(Status(ErrorCode::INVALID_ARGUMENT, "shape pointer is null"));
  Shape s(shape, shape + len);
  for (int64_t d : s)
    if (d < 0) Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "tensor shape ", ShapeToString(s), " has a negative dimension"));
  return s;
}
DataType ToDataType(ElementType t) {
  if (!IsValidDataType(static_cast<int32_t>(t)) || t == ElementType::UNDEFINED)
    Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "unknown element type ", static_cast<int>(t)));
  if (IsInt4(static_cast<DataType>(t)))  // in memory one value per byte, unlike ONNX's packed layout: not exposed
    Throw(MakeStatus(ErrorCode::NOT_IMPLEMENTED, "element type ", DataTypeName(static_cast<DataType>(t)),
                     " cannot cross the API (no packed 4-bit tensors yet)"));
  return static_cast<DataType>(t);
}
Value Wrap(IValue v) {
  auto impl = std::make_unique<Value::Impl>();
  impl->value = std::move(v);
  return Value(std::move(impl));
}
const Tensor& TensorOf(const Value& v) {
  if (!v.impl()->value.is_tensor()) Throw(Status(ErrorCode::FAIL, "the value is not a tensor"));
  return v.impl()->value.tensor();
}
TensorTypeAndShapeInfo InfoOf(const ValueType& t) {
  std::vector<int64_t> shape;
  std::vector<std::string> sym;
  for (const auto& d : t.dims) {
    shape.push_back(d.known() ? d.value : -1);
    sym.push_back(d.symbol);
  }
  return TensorTypeAndShapeInfo(static_cast<ElementType>(t.elem_type), shape, sym);
}
TypeInfo TypeInfoOf(const ValueType& t) {
  OnnxType k = t.kind == ValueType::Kind::kTensor     ? OnnxType::TENSOR
               : t.kind == ValueType::Kind::kSequence ? OnnxType::SEQUENCE
               : t.kind == ValueType::Kind::kOptional ? OnnxType::OPTIONAL
                                                      : OnnxType::UNKNOWN;
  return TypeInfo(k, InfoOf(t));
}
}  // namespace

Value Value::CreateTensor(ElementType type, void* data, size_t byte_count, const int64_t* shape, size_t shape_len) {
  DataType dt = ToDataType(type);
  if (dt == DataType::kString)
    Throw(Status(ErrorCode::INVALID_ARGUMENT, "string tensors cannot wrap caller memory; create an owned tensor"));
  Shape s = ShapeFrom(shape, shape_len);
  int64_t n = ShapeSize(s);
  if (n < 0 || static_cast<uint64_t>(n) * DataTypeSize(dt) != byte_count)
    Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "tensor of shape ", ShapeToString(s), " and type ", DataTypeName(dt),
                     " needs ", n * static_cast<int64_t>(DataTypeSize(dt)), " bytes but ", byte_count, " were given"));
  if (!data && byte_count) Throw(Status(ErrorCode::INVALID_ARGUMENT, "tensor data pointer is null"));
  return Wrap(IValue(Tensor::View(dt, std::move(s), data, nullptr)));
}

Value Value::CreateTensor(ElementType type, const int64_t* shape, size_t shape_len) {
  return Wrap(IValue(ValueOrThrow(Tensor::Allocate(ToDataType(type), ShapeFrom(shape, shape_len)))));
}

bool Value::IsTensor() const { return impl_->value.is_tensor(); }
bool Value::IsSequence() const { return impl_->value.is_sequence(); }
bool Value::HasValue() const { return !impl_->value.is_none(); }
TensorTypeAndShapeInfo Value::GetTensorTypeAndShapeInfo() const {
  const Tensor& t = TensorOf(*this);
  return TensorTypeAndShapeInfo(static_cast<ElementType>(t.dtype()), t.shape(), std::vector<std::string>(t.rank()));
}
namespace {
// int4/uint4 tensors hold one value per byte in memory, not ONNX's packed layout: their bytes are not handed out.
const Tensor& TensorWithBytes(const Value& v) {
  const Tensor& t = TensorOf(v);
  if (IsInt4(t.dtype()))
    Throw(MakeStatus(ErrorCode::NOT_IMPLEMENTED, "the data of a ", DataTypeName(t.dtype()),
                     " tensor cannot cross the API (no packed 4-bit tensors yet)"));
  return t;
}
}  // namespace
void* Value::GetTensorMutableRawData() { return const_cast<void*>(TensorWithBytes(*this).raw_data()); }
const void* Value::GetTensorRawData() const { return TensorWithBytes(*this).raw_data(); }
std::string Value::GetStringTensorElement(size_t i) const {
  const Tensor& t = TensorOf(*this);
  if (t.dtype() != DataType::kString) Throw(Status(ErrorCode::FAIL, "the tensor is not a string tensor"));
  if (i >= static_cast<size_t>(t.NumElements()))
    Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "index ", i, " out of range for ", t.NumElements(), " strings"));
  return t.data<std::string>()[i];
}
void Value::FillStringTensorElement(const char* s, size_t index) {
  Tensor& t = const_cast<Tensor&>(TensorOf(*this));
  if (t.dtype() != DataType::kString) Throw(Status(ErrorCode::FAIL, "the tensor is not a string tensor"));
  if (!s) Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "string ", index, " is null"));
  if (index >= static_cast<size_t>(t.NumElements()))
    Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "index ", index, " out of range for ", t.NumElements(), " strings"));
  t.data<std::string>()[index] = s;
}
void Value::FillStringTensor(const char* const* s, size_t count) {
  const Tensor& t = TensorOf(*this);
  if (t.dtype() != DataType::kString) Throw(Status(ErrorCode::FAIL, "the tensor is not a string tensor"));
  if (count != static_cast<size_t>(t.NumElements()))
    Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, count, " strings given for a string tensor of ", t.NumElements(),
                     " elements"));
  if (count && !s) Throw(Status(ErrorCode::INVALID_ARGUMENT, "the string array is null"));
  for (size_t i = 0; i < count; ++i) FillStringTensorElement(s[i], i);
}
size_t Value::GetCount() const {
  if (!impl_->value.is_sequence()) Throw(Status(ErrorCode::FAIL, "the value is not a sequence"));
  return impl_->value.sequence().size();
}
Value Value::GetValue(size_t index) const {
  if (index >= GetCount())
    Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "index ", index, " out of range for a sequence of ", GetCount()));
  return Wrap(IValue(impl_->value.sequence()[index]));
}

// ---- compatibility ----
CompiledModelCompatibility GetModelCompatibilityForEpDevices(const std::vector<ConstEpDevice>& devices,
                                                             const char* info) {
  if (devices.empty() || !info)
    Throw(Status(ErrorCode::INVALID_ARGUMENT, "Invalid argument provided to GetModelCompatibilityForEpDevices."));
  std::vector<const EpctxHardwareDevice*> hw;
  EpctxEpFactory* factory = nullptr;
  for (const auto& d : devices) {
    if (!d.impl()) Throw(Status(ErrorCode::INVALID_ARGUMENT, "ep_devices contains a null entry."));
    const EpctxEpDevice* dev = static_cast<const EpctxEpDevice*>(d.impl());
    if (factory && dev->factory != factory)
      Throw(Status(ErrorCode::INVALID_ARGUMENT, "All ep_devices must be from the same execution provider."));
    factory = dev->factory;
    hw.push_back(dev->device);
  }
  if (!factory || !factory->ValidateCompiledModelCompatibilityInfo) return CompiledModelCompatibility::EP_NOT_APPLICABLE;
  EpctxCompiledModelCompatibility c = EPCTX_EP_NOT_APPLICABLE;
  ThrowIfError(FromEpctxStatus(factory->ValidateCompiledModelCompatibilityInfo(factory, hw.data(), hw.size(), info, &c), ""));
  return static_cast<CompiledModelCompatibility>(c);
}
std::optional<std::string> GetCompatibilityInfoFromModel(const char* path, const char* ep_type) {
  if (!path || !ep_type) Throw(Status(ErrorCode::INVALID_ARGUMENT, "Invalid argument provided to GetCompatibilityInfoFromModel."));
  return ValueOrThrow(CompatibilityInfoFromModelFile(path, ep_type));
}
std::optional<std::string> GetCompatibilityInfoFromModelBytes(const void* data, size_t size, const char* ep_type) {
  if (!ep_type) Throw(Status(ErrorCode::INVALID_ARGUMENT, "Invalid argument provided to GetCompatibilityInfoFromModelBytes."));
  return ValueOrThrow(CompatibilityInfoFromModelBytes(data, size, ep_type));
}

// ---- Session ----
struct Session::Impl {
  std::unique_ptr<InferenceSession> session;
};

SessionConfig ConfigFor(const Env& env, const SessionOptions& options) {
  SessionConfig c = options.impl()->config;
  if (!c.registry) c.registry = env.impl()->registry;
  return c;
}

Session::Session(const Env& env, const char* model_path, const SessionOptions& options) : impl_(new Impl()) {
  if (!model_path) Throw(Status(ErrorCode::INVALID_ARGUMENT, "model path is null"));
  impl_->session = ValueOrThrow(InferenceSession::CreateFromFile(model_path, ConfigFor(env, options)));
}
Session::Session(const Env& env, const void* data, size_t length, const SessionOptions& options) : impl_(new Impl()) {
  if (!data && length) Throw(Status(ErrorCode::INVALID_ARGUMENT, "model data pointer is null"));
  impl_->session = ValueOrThrow(InferenceSession::CreateFromBytes(data, length, ConfigFor(env, options)));
}
std::string Session::EndProfiling() { return ValueOrThrow(impl_->session->EndProfiling()); }
void Session::SetEpDynamicOptions(const std::vector<std::string>& keys, const std::vector<std::string>& values) {
  if (keys.size() != values.size())
    Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, keys.size(), " keys but ", values.size(), " values"));
  std::map<std::string, std::string> m;
  for (size_t i = 0; i < keys.size(); ++i) m[keys[i]] = values[i];
  ThrowIfError(impl_->session->SetEpDynamicOptions(m));
}
std::vector<std::string> Session::GetExecutionProviders() const { return impl_->session->ep_names(); }
std::string Session::GetSessionReport() const { return impl_->session->ReportJson(); }
std::map<std::string, std::string> Session::GetPartitionAssignments() const { return impl_->session->partition_eps(); }
Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

std::vector<Value> Session::Run(const RunOptions& run_options, const char* const* input_names, const Value* input_values,
                                size_t input_count, const char* const* output_names, size_t output_count) const {
  std::vector<std::string> in_names, out_names;
  std::vector<IValue> ins;
  for (size_t i = 0; i < input_count; ++i) {
    if (!input_names || !input_names[i]) Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "input name ", i, " is null"));
    in_names.push_back(input_names[i]);
    ins.push_back(input_values[i].impl()->value);
  }
  for (size_t i = 0; i < output_count; ++i) {
    if (!output_names || !output_names[i]) Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "output name ", i, " is null"));
    out_names.push_back(output_names[i]);
  }
  std::vector<IValue> outs;
  RunTerminateScope terminate(run_options.impl() ? &run_options.impl()->terminate : nullptr);
  ThrowIfError(impl_->session->Run(in_names, ins, out_names, &outs));
  std::vector<Value> result;
  for (auto& v : outs) result.push_back(Wrap(std::move(v)));
  return result;
}

std::vector<Value> Session::Run(const std::vector<std::string>& input_names, const std::vector<Value>& inputs,
                                const std::vector<std::string>& output_names) const {
  if (input_names.size() != inputs.size())
    Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, input_names.size(), " input names but ", inputs.size(), " inputs"));
  std::vector<const char*> in, out;
  for (const auto& n : input_names) in.push_back(n.c_str());
  for (const auto& n : output_names) out.push_back(n.c_str());
  std::vector<std::string> all_out;
  if (output_names.empty()) {
    all_out = GetOutputNames();
    for (const auto& n : all_out) out.push_back(n.c_str());
  }
  return Run(RunOptions(), in.data(), inputs.data(), in.size(), out.data(), out.size());
}

size_t Session::GetInputCount() const { return impl_->session->inputs().size(); }
size_t Session::GetOutputCount() const { return impl_->session->outputs().size(); }
std::vector<std::string> Session::GetInputNames() const {
  std::vector<std::string> v;
  for (const auto& i : impl_->session->inputs()) v.push_back(i.name);
  return v;
}
std::vector<std::string> Session::GetOutputNames() const {
  std::vector<std::string> v;
  for (const auto& i : impl_->session->outputs()) v.push_back(i.name);
  return v;
}
TypeInfo Session::GetInputTypeInfo(size_t index) const {
  const auto& ins = impl_->session->inputs();
  if (index >= ins.size()) Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "input index ", index, " out of range (", ins.size(), " inputs)"));
  return TypeInfoOf(ins[index].type);
}
TypeInfo Session::GetOutputTypeInfo(size_t index) const {
  const auto& outs = impl_->session->outputs();
  if (index >= outs.size()) Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "output index ", index, " out of range (", outs.size(), " outputs)"));
  return TypeInfoOf(outs[index].type);
}

// Overridable initializers and model metadata (ONNX Runtime's GetOverridableInitializer*, GetModelMetadata).
namespace {
std::vector<const ValueInfo*> OverridableInitializers(const InferenceSession& s) {
  std::vector<const ValueInfo*> v;
  const Graph& g = *s.model().graph;
  for (const ValueInfo& in : g.inputs)
    if (g.initializers.count(in.name)) v.push_back(&in);
  return v;
}
}  // namespace
size_t Session::GetOverridableInitializerCount() const { return OverridableInitializers(*impl_->session).size(); }
std::vector<std::string> Session::GetOverridableInitializerNames() const {
  std::vector<std::string> v;
  for (const ValueInfo* i : OverridableInitializers(*impl_->session)) v.push_back(i->name);
  return v;
}
TypeInfo Session::GetOverridableInitializerTypeInfo(size_t index) const {
  const auto all = OverridableInitializers(*impl_->session);
  if (index >= all.size())
    Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "overridable initializer index ", index, " out of range (",
                     all.size(), " overridable initializers)"));
  return TypeInfoOf(all[index]->type);
}
ModelMetadata Session::GetModelMetadata() const {
  const Model& m = impl_->session->model();
  ModelMetadata md;
  md.producer_name = m.producer_name;
  md.graph_name = m.graph->name;
  md.custom_metadata_map = m.metadata;
  if (m.proto) {
    md.domain = m.proto->domain();
    md.description = m.proto->doc_string();
    md.graph_description = m.proto->graph().doc_string();
    md.version = m.proto->model_version();
  }
  return md;
}

}  // namespace epctx
