// The public C++ API over the runtime: translates Status into epctx::Exception, once, here.
#include <cstring>
#include <map>
#include <mutex>

#include "epctx/epctx.h"
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
};
Env::Env(LoggingLevel level, const char* log_id) : impl_(new Impl{level, log_id ? log_id : ""}) {}
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
struct Value::Impl {
  IValue value;
};
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
void* Value::GetTensorMutableRawData() { return const_cast<void*>(TensorOf(*this).raw_data()); }
const void* Value::GetTensorRawData() const { return TensorOf(*this).raw_data(); }
std::string Value::GetStringTensorElement(size_t i) const {
  const Tensor& t = TensorOf(*this);
  if (t.dtype() != DataType::kString) Throw(Status(ErrorCode::FAIL, "the tensor is not a string tensor"));
  if (i >= static_cast<size_t>(t.NumElements()))
    Throw(MakeStatus(ErrorCode::INVALID_ARGUMENT, "index ", i, " out of range for ", t.NumElements(), " strings"));
  return t.data<std::string>()[i];
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

// ---- Session ----
struct Session::Impl {
  std::unique_ptr<InferenceSession> session;
};

Session::Session(const Env& env, const char* model_path, const SessionOptions& options) : impl_(new Impl()) {
  (void)env;
  if (!model_path) Throw(Status(ErrorCode::INVALID_ARGUMENT, "model path is null"));
  impl_->session = ValueOrThrow(InferenceSession::CreateFromFile(model_path, options.impl()->config));
}
Session::Session(const Env& env, const void* data, size_t length, const SessionOptions& options) : impl_(new Impl()) {
  (void)env;
  if (!data && length) Throw(Status(ErrorCode::INVALID_ARGUMENT, "model data pointer is null"));
  impl_->session = ValueOrThrow(InferenceSession::CreateFromBytes(data, length, options.impl()->config));
}
Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

std::vector<Value> Session::Run(const RunOptions&, const char* const* input_names, const Value* input_values,
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

}  // namespace epctx
