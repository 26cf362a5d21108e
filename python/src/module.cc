// epctx.capi._epctx: the pybind11 module over include/epctx/epctx.h. The Python package (python/epctx/) adds
// ONNX Runtime's pure-Python layer (InferenceSession, ModelCompiler argument handling) on top.
#include <cstring>
#include <mutex>
#include <utility>

#include "bind.h"

namespace epctx_py {

using epctx::ElementType;
using epctx::ErrorCode;

// ---- Env ----

epctx::Env& ProcessEnv() {
  static epctx::Env* env = new epctx::Env(epctx::LoggingLevel::WARNING, "epctx-python");
  return *env;
}

// ---- errors ----

namespace {
struct ErrorClass {
  ErrorCode code;
  const char* name;  // ONNX Runtime's Python class name
};
constexpr ErrorClass kErrorClasses[] = {
    {ErrorCode::FAIL, "Fail"},
    {ErrorCode::INVALID_ARGUMENT, "InvalidArgument"},
    {ErrorCode::NO_SUCHFILE, "NoSuchFile"},
    {ErrorCode::NO_MODEL, "NoModel"},
    {ErrorCode::ENGINE_ERROR, "EngineError"},
    {ErrorCode::RUNTIME_EXCEPTION, "RuntimeException"},
    {ErrorCode::INVALID_PROTOBUF, "InvalidProtobuf"},
    {ErrorCode::MODEL_LOADED, "ModelLoaded"},
    {ErrorCode::NOT_IMPLEMENTED, "NotImplemented"},
    {ErrorCode::INVALID_GRAPH, "InvalidGraph"},
    {ErrorCode::EP_FAIL, "EPFail"},
    {ErrorCode::MODEL_LOAD_CANCELED, "ModelLoadCanceled"},
    {ErrorCode::MODEL_REQUIRES_COMPILATION, "ModelRequiresCompilation"},
    {ErrorCode::NOT_FOUND, "NotFound"},
};
// Borrowed from the module, which is never unloaded.
PyObject* g_error_base = nullptr;
std::map<int, PyObject*> g_error_by_code;

PyObject* MakeError(ErrorCode code, const std::string& message) {
  auto it = g_error_by_code.find(static_cast<int>(code));
  PyObject* cls = it == g_error_by_code.end() ? g_error_base : it->second;
  const std::string text = "[ONNXRuntimeError] : " + std::to_string(static_cast<int>(code)) + " : " +
                           epctx::ErrorCodeName(code) + " : " + message;
  py::object exc = py::reinterpret_steal<py::object>(PyObject_CallFunction(cls, "s", text.c_str()));
  if (!exc) throw py::error_already_set();
  exc.attr("code") = static_cast<int>(code);
  exc.attr("code_name") = epctx::ErrorCodeName(code);
  exc.attr("message") = message;
  return exc.release().ptr();
}
}  // namespace

void SetPythonError(ErrorCode code, const std::string& message) {
  PyObject* exc = MakeError(code, message);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc)), exc);
  Py_DECREF(exc);
}

void RegisterErrors(py::module_& m) {
  g_error_base = PyErr_NewExceptionWithDoc(
      "epctx.capi._epctx.EpctxError",
      "Base of every error epctx raises; .code is the status code (ONNX Runtime's OrtErrorCode), .code_name its "
      "name, .message the message without the '[ONNXRuntimeError] : N : NAME : ' prefix.",
      PyExc_RuntimeError, nullptr);
  m.attr("EpctxError") = py::handle(g_error_base);
  for (const ErrorClass& c : kErrorClasses) {
    const std::string qualified = std::string("epctx.capi._epctx.") + c.name;
    PyObject* cls = PyErr_NewException(qualified.c_str(), g_error_base, nullptr);
    g_error_by_code[static_cast<int>(c.code)] = cls;
    m.attr(c.name) = py::handle(cls);
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const epctx::Exception& e) {
      SetPythonError(e.code(), e.what());
    }
  });
  m.def("_make_error", [](int code, const std::string& message) {
    return py::reinterpret_steal<py::object>(MakeError(static_cast<ErrorCode>(code), message));
  }, "The exception object epctx raises for a status code and message (for the Python layer).");
}

// ---- types ----

namespace {
struct TypeName {
  ElementType type;
  const char* name;  // ONNX's spelling in "tensor(<name>)"
};
constexpr TypeName kTypeNames[] = {
    {ElementType::FLOAT, "float"},       {ElementType::UINT8, "uint8"},       {ElementType::INT8, "int8"},
    {ElementType::UINT16, "uint16"},     {ElementType::INT16, "int16"},       {ElementType::INT32, "int32"},
    {ElementType::INT64, "int64"},       {ElementType::STRING, "string"},     {ElementType::BOOL, "bool"},
    {ElementType::FLOAT16, "float16"},   {ElementType::DOUBLE, "double"},     {ElementType::UINT32, "uint32"},
    {ElementType::UINT64, "uint64"},     {ElementType::COMPLEX64, "complex64"},
    {ElementType::COMPLEX128, "complex128"}, {ElementType::BFLOAT16, "bfloat16"},
    {ElementType::FLOAT8E4M3FN, "float8e4m3fn"}, {ElementType::FLOAT8E4M3FNUZ, "float8e4m3fnuz"},
    {ElementType::FLOAT8E5M2, "float8e5m2"}, {ElementType::FLOAT8E5M2FNUZ, "float8e5m2fnuz"},
    {ElementType::UINT4, "uint4"}, {ElementType::INT4, "int4"},
};

// numpy dtype char (kind + itemsize) <-> element type; strings and bfloat16 are handled apart.
struct NumpyType {
  ElementType type;
  char kind;
  size_t itemsize;
  const char* dtype;  // numpy's name, for py::dtype(...)
};
constexpr NumpyType kNumpyTypes[] = {
    {ElementType::FLOAT, 'f', 4, "float32"},   {ElementType::DOUBLE, 'f', 8, "float64"},
    {ElementType::FLOAT16, 'f', 2, "float16"}, {ElementType::INT8, 'i', 1, "int8"},
    {ElementType::INT16, 'i', 2, "int16"},     {ElementType::INT32, 'i', 4, "int32"},
    {ElementType::INT64, 'i', 8, "int64"},     {ElementType::UINT8, 'u', 1, "uint8"},
    {ElementType::UINT16, 'u', 2, "uint16"},   {ElementType::UINT32, 'u', 4, "uint32"},
    {ElementType::UINT64, 'u', 8, "uint64"},   {ElementType::BOOL, 'b', 1, "bool"},
    {ElementType::COMPLEX64, 'c', 8, "complex64"}, {ElementType::COMPLEX128, 'c', 16, "complex128"},
};

}  // namespace

size_t ElementSize(ElementType t) {
  for (const NumpyType& n : kNumpyTypes)
    if (n.type == t) return n.itemsize;
  if (t == ElementType::BFLOAT16) return 2;
  if (t == ElementType::FLOAT8E4M3FN || t == ElementType::FLOAT8E4M3FNUZ || t == ElementType::FLOAT8E5M2 ||
      t == ElementType::FLOAT8E5M2FNUZ)
    return 1;  // no numpy type: values cannot cross to numpy, but sizes (initializer bytes) are known
  return 0;
}

std::string ElementTypeName(ElementType t) {
  for (const TypeName& n : kTypeNames)
    if (n.type == t) return n.name;
  return "undefined";
}

std::string TypeString(const epctx::TypeInfo& info) {
  const std::string tensor = "tensor(" + ElementTypeName(info.GetTensorTypeAndShapeInfo().GetElementType()) + ")";
  switch (info.GetONNXType()) {
    case epctx::OnnxType::TENSOR: return tensor;
    case epctx::OnnxType::SEQUENCE: return "seq(" + tensor + ")";
    case epctx::OnnxType::OPTIONAL: return "optional(" + tensor + ")";
    default: return "unknown";
  }
}

// ---- values ----

const epctx::Value& PyOrtValue::value() const {
  if (expired_)
    throw epctx::Exception(ErrorCode::INVALID_ARGUMENT,
                           "this OrtValue was only valid during the callback that received it; copy it with "
                           ".numpy() inside the callback");
  return value_;
}
epctx::Value& PyOrtValue::mutable_value() { return const_cast<epctx::Value&>(value()); }

namespace {
// A numpy array of str ('U'), bytes ('S', UTF-8) or objects that are all str/bytes -> an owned tensor(string)
// (ONNX Runtime's rule for dtype object: every element must be a string). INVALID_ARGUMENT naming the first element
// that is neither, or bytes that are not UTF-8.
epctx::Value StringTensorFromNumpy(const py::array& arr) {
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  epctx::Value v = epctx::Value::CreateTensor(ElementType::STRING, shape.data(), shape.size());
  py::object flat = arr.attr("ravel")();
  const py::ssize_t n = arr.size();
  std::vector<std::string> texts(static_cast<size_t>(n));
  for (py::ssize_t i = 0; i < n; ++i) {
    py::object e = flat[py::int_(i)];
    std::string text;
    if (py::isinstance<py::str>(e)) {
      Py_ssize_t size = 0;
      const char* utf8 = PyUnicode_AsUTF8AndSize(e.ptr(), &size);
      if (!utf8) {
        PyErr_Clear();
        throw epctx::Exception(ErrorCode::INVALID_ARGUMENT,
                               "string element " + std::to_string(i) + " cannot be encoded as UTF-8");
      }
      text.assign(utf8, static_cast<size_t>(size));
    } else if (py::isinstance<py::bytes>(e)) {
      text = e.cast<std::string>();
      py::object decoded = py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "strict"));
      if (!decoded) {
        PyErr_Clear();
        throw epctx::Exception(ErrorCode::INVALID_ARGUMENT,
                               "bytes element " + std::to_string(i) + " is not valid UTF-8 (tensor(string) holds text)");
      }
    } else {
      throw epctx::Exception(ErrorCode::INVALID_ARGUMENT,
                             "element " + std::to_string(i) + " of a numpy array of dtype object is a '" +
                                 Py_TYPE(e.ptr())->tp_name + "', not a str (tensor(string) inputs hold str only)");
    }
    if (text.find('\0') != std::string::npos)
      throw epctx::Exception(ErrorCode::INVALID_ARGUMENT,
                             "string element " + std::to_string(i) + " contains a NUL character");
    texts[static_cast<size_t>(i)] = std::move(text);
  }
  std::vector<const char*> ptrs;
  for (const std::string& t : texts) ptrs.push_back(t.c_str());
  v.FillStringTensor(ptrs.data(), ptrs.size());
  return v;
}
}  // namespace

epctx::Value ValueFromNumpy(const py::handle& obj, py::object* holder) {
  py::array arr = py::array::ensure(obj, py::array::c_style);
  if (!arr) {
    PyErr_Clear();
    throw epctx::Exception(ErrorCode::INVALID_ARGUMENT,
                           std::string("cannot convert a '") + Py_TYPE(obj.ptr())->tp_name + "' to a numpy array");
  }
  const py::dtype dt = arr.dtype();
  const char kind = dt.kind();
  if (kind == 'U' || kind == 'S' || kind == 'O') return StringTensorFromNumpy(arr);
  const NumpyType* match = nullptr;
  for (const NumpyType& n : kNumpyTypes)
    if (n.kind == kind && n.itemsize == static_cast<size_t>(dt.itemsize())) match = &n;
  if (!match)
    throw epctx::Exception(ErrorCode::INVALID_ARGUMENT,
                           "numpy dtype '" + std::string(py::str(py::object(dt))) + "' has no ONNX tensor element type");
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  void* data = const_cast<void*>(arr.data());
  *holder = arr;
  return epctx::Value::CreateTensor(match->type, data, static_cast<size_t>(arr.nbytes()), shape.data(), shape.size());
}

namespace {
py::object TensorToNumpy(const epctx::Value& v) {
  const epctx::TensorTypeAndShapeInfo info = v.GetTensorTypeAndShapeInfo();
  const ElementType t = info.GetElementType();
  const std::vector<int64_t>& shape = info.GetShape();
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  const int64_t count = info.GetElementCount();
  if (t == ElementType::STRING) {
    py::array out(py::dtype("O"), dims);
    py::object* slots = static_cast<py::object*>(out.mutable_data());
    for (int64_t i = 0; i < count; ++i) {
      // Object arrays start as None references; replace each one.
      PyObject** slot = reinterpret_cast<PyObject**>(slots) + i;
      const std::string text = v.GetStringTensorElement(static_cast<size_t>(i));
      PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
      if (!s) throw py::error_already_set();
      Py_XDECREF(*slot);
      *slot = s;
    }
    return std::move(out);
  }
  const NumpyType* match = nullptr;
  for (const NumpyType& n : kNumpyTypes)
    if (n.type == t) match = &n;
  if (!match)
    throw epctx::Exception(ErrorCode::NOT_IMPLEMENTED,
                           "tensor(" + ElementTypeName(t) + ") has no numpy equivalent in epctx's Python module");
  py::array out(py::dtype(match->dtype), dims);
  if (count > 0) std::memcpy(out.mutable_data(), v.GetTensorRawData(), static_cast<size_t>(count) * match->itemsize);
  return std::move(out);
}
}  // namespace

py::object ValueToPython(const epctx::Value& v) {
  if (v.IsTensor()) return TensorToNumpy(v);
  if (v.IsSequence()) {
    py::list out;
    for (size_t i = 0; i < v.GetCount(); ++i) out.append(ValueToPython(v.GetValue(i)));
    return std::move(out);
  }
  return py::none();  // an empty optional
}

// ---- devices ----

namespace {
std::map<std::string, std::string> ToMap(const epctx::KeyValuePairs& k) { return k.GetKeyValuePairs(); }
}  // namespace

PyEpDevice Snapshot(const epctx::ConstEpDevice& d) {
  PyEpDevice s;
  s.handle = d.impl();
  s.ep_name = d.EpName();
  s.ep_vendor = d.EpVendor();
  s.ep_metadata = ToMap(d.EpMetadata());
  s.ep_options = ToMap(d.EpOptions());
  const epctx::ConstHardwareDevice hw = d.Device();
  s.device.type = hw.Type();
  s.device.vendor_id = hw.VendorId();
  s.device.device_id = hw.DeviceId();
  s.device.vendor = hw.Vendor();
  s.device.metadata = ToMap(hw.Metadata());
  // Real devices say so explicitly, so ONNX Runtime's `device.metadata["is_virtual"] == "1"` filter runs.
  s.device.metadata.emplace("is_virtual", "0");
  return s;
}

epctx::ConstEpDevice Resolve(const PyEpDevice& d) {
  for (const epctx::ConstEpDevice& live : ProcessEnv().GetEpDevices())
    if (live.impl() == d.handle && d.ep_name == live.EpName()) return live;
  throw epctx::Exception(ErrorCode::INVALID_ARGUMENT,
                         "the OrtEpDevice of '" + d.ep_name +
                             "' is no longer valid (its EP library was unregistered); call get_ep_devices() again");
}

// ---- bundled plugin libraries ----

namespace {
struct Bundled {
  std::string registration_name;
  std::string path;
};
std::mutex g_bundled_mutex;
std::map<std::string, Bundled> g_bundled;  // EP name -> library shipped with the package

bool IsVirtual(const epctx::ConstEpDevice& d) {
  const epctx::KeyValuePairs metadata = d.Device().Metadata();  // a copy: GetValue points into it
  const char* v = metadata.GetValue("is_virtual");
  return v && std::strcmp(v, "1") == 0;
}

// The first real device offered for `ep_name` (the same library may be registered under several names, and
// devices of two factories cannot share a session; add_provider_for_devices chooses among several).
std::vector<epctx::ConstEpDevice> RealDevicesOf(const std::string& ep_name) {
  for (const epctx::ConstEpDevice& d : ProcessEnv().GetEpDevices())
    if (ep_name == d.EpName() && !IsVirtual(d)) return {d};
  return {};
}
}  // namespace

void PySessionOptions::AddProvider(const std::string& name, const std::map<std::string, std::string>& opts) {
  std::unordered_map<std::string, std::string> o(opts.begin(), opts.end());
  if (name == "CPUExecutionProvider" || name == "CPU") {
    options.AppendExecutionProvider("CPUExecutionProvider", o);
    has_providers = true;
    return;
  }
  std::vector<epctx::ConstEpDevice> devices = RealDevicesOf(name);
  if (devices.empty()) {
    Bundled b;
    {
      std::lock_guard<std::mutex> lock(g_bundled_mutex);
      auto it = g_bundled.find(name);
      if (it != g_bundled.end()) b = it->second;
    }
    if (!b.path.empty()) {
      ProcessEnv().RegisterExecutionProviderLibrary(b.registration_name.c_str(), b.path.c_str());
      devices = RealDevicesOf(name);
    }
  }
  if (devices.empty())
    throw epctx::Exception(ErrorCode::NOT_FOUND,
                           "no registered EP library offers '" + name +
                               "'; register it with register_execution_provider_library(name, path) first");
  options.AppendExecutionProvider_V2(ProcessEnv(), devices, o);
  has_providers = true;
}

std::vector<std::string> AvailableProviders() {
  std::vector<std::string> out;
  auto add = [&](const std::string& n) {
    for (const std::string& e : out)
      if (e == n) return;
    out.push_back(n);
  };
  for (const epctx::ConstEpDevice& d : ProcessEnv().GetEpDevices())
    if (std::strcmp(d.EpName(), "CPUExecutionProvider") != 0 && !IsVirtual(d)) add(d.EpName());
  {
    std::lock_guard<std::mutex> lock(g_bundled_mutex);
    for (const auto& [ep, b] : g_bundled) add(ep);
  }
  add("CPUExecutionProvider");
  return out;
}

// ---- sessions ----

namespace {
struct PyNodeArg {
  std::string name;
  std::string type;
  py::list shape;  // ints; a symbolic dim's name; None for an unnamed unknown dim
};

PyNodeArg MakeNodeArg(const std::string& name, const epctx::TypeInfo& info) {
  PyNodeArg a;
  a.name = name;
  a.type = TypeString(info);
  const epctx::TensorTypeAndShapeInfo& t = info.GetTensorTypeAndShapeInfo();
  const std::vector<int64_t>& dims = t.GetShape();
  const std::vector<std::string>& sym = t.GetSymbolicDimensions();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= 0)
      a.shape.append(dims[i]);
    else if (i < sym.size() && !sym[i].empty())
      a.shape.append(sym[i]);
    else
      a.shape.append(py::none());
  }
  return a;
}

class PySession {
 public:
  PySession(const PySessionOptions* so, const py::object& model, const std::vector<std::string>& providers,
            const std::vector<std::map<std::string, std::string>>& provider_options) {
    options_ = so ? *so : PySessionOptions();
    for (size_t i = 0; i < providers.size(); ++i)
      options_.AddProvider(providers[i], i < provider_options.size() ? provider_options[i]
                                                                      : std::map<std::string, std::string>());
    if (py::isinstance<py::bytes>(model)) {
      // The C++ API copies the bytes during the call; the bytes object stays alive (and immutable) meanwhile.
      char* data = nullptr;
      py::ssize_t size = 0;
      if (PyBytes_AsStringAndSize(model.ptr(), &data, &size) != 0) throw py::error_already_set();
      py::gil_scoped_release release;
      session_ = std::make_unique<epctx::Session>(ProcessEnv(), data, static_cast<size_t>(size), options_.options);
    } else {
      const std::string path = py::str(model);
      py::gil_scoped_release release;
      session_ = std::make_unique<epctx::Session>(ProcessEnv(), path.c_str(), options_.options);
    }
    const std::vector<std::string> in = session_->GetInputNames(), out = session_->GetOutputNames();
    for (size_t i = 0; i < in.size(); ++i) inputs_.push_back(MakeNodeArg(in[i], session_->GetInputTypeInfo(i)));
    for (size_t i = 0; i < out.size(); ++i) outputs_.push_back(MakeNodeArg(out[i], session_->GetOutputTypeInfo(i)));
    const std::vector<std::string> ov = session_->GetOverridableInitializerNames();
    for (size_t i = 0; i < ov.size(); ++i)
      overridable_.push_back(MakeNodeArg(ov[i], session_->GetOverridableInitializerTypeInfo(i)));
  }

  // Runs with {name: array-like or OrtValue}; outputs as epctx::Values in output_names order (all when empty).
  std::vector<epctx::Value> RunValues(const std::vector<std::string>& output_names, const py::dict& feed,
                                      const epctx::RunOptions* run_options) {
    std::vector<std::string> names;
    std::vector<epctx::Value> values;
    std::vector<py::object> holders;  // keep the arrays the input Values point into alive during Run
    for (const auto& [k, v] : feed) {
      names.push_back(py::str(k));
      if (py::isinstance<PyOrtValue>(v)) {
        const epctx::Value& src = v.cast<PyOrtValue&>().value();
        if (!src.IsTensor())
          throw epctx::Exception(ErrorCode::INVALID_ARGUMENT, "input '" + names.back() + "' is not a tensor");
        // A second handle over the same memory (the OrtValue stays referenced by `feed`).
        const epctx::TensorTypeAndShapeInfo info = src.GetTensorTypeAndShapeInfo();
        if (info.GetElementType() == ElementType::STRING) {  // strings are objects, not bytes: copy them
          epctx::Value copy = epctx::Value::CreateTensor(ElementType::STRING, info.GetShape().data(),
                                                         info.GetShape().size());
          for (int64_t i = 0; i < info.GetElementCount(); ++i)
            copy.FillStringTensorElement(src.GetStringTensorElement(static_cast<size_t>(i)).c_str(),
                                         static_cast<size_t>(i));
          values.push_back(std::move(copy));
          continue;
        }
        const size_t bytes = static_cast<size_t>(info.GetElementCount()) * ElementSize(info.GetElementType());
        values.push_back(epctx::Value::CreateTensor(info.GetElementType(), const_cast<void*>(src.GetTensorRawData()),
                                                    bytes, info.GetShape().data(), info.GetShape().size()));
      } else {
        py::object holder;
        values.push_back(ValueFromNumpy(v, &holder));
        holders.push_back(std::move(holder));
      }
    }
    std::vector<std::string> outs = output_names.empty() ? session_->GetOutputNames() : output_names;
    std::vector<const char*> in_ptrs, out_ptrs;
    for (const std::string& n : names) in_ptrs.push_back(n.c_str());
    for (const std::string& n : outs) out_ptrs.push_back(n.c_str());
    static const epctx::RunOptions kDefaultRunOptions;
    const epctx::RunOptions& ro = run_options ? *run_options : kDefaultRunOptions;
    // The RunOptions object stays referenced by the caller's frame; SetTerminate from another thread (which takes
    // the GIL only to reach the object) stops this run, since the GIL is released meanwhile.
    py::gil_scoped_release release;
    return session_->Run(ro, in_ptrs.data(), values.data(), values.size(), out_ptrs.data(), out_ptrs.size());
  }

  py::list Run(const py::object& output_names, const py::dict& feed, const epctx::RunOptions* run_options) {
    std::vector<std::string> outs;
    if (!output_names.is_none()) outs = output_names.cast<std::vector<std::string>>();
    std::vector<epctx::Value> results = RunValues(outs, feed, run_options);
    py::list out;
    for (const epctx::Value& v : results) out.append(ValueToPython(v));
    return out;
  }

  py::list RunWithOrtValues(const py::object& output_names, const py::dict& feed,
                            const epctx::RunOptions* run_options) {
    std::vector<std::string> outs;
    if (!output_names.is_none()) outs = output_names.cast<std::vector<std::string>>();
    std::vector<epctx::Value> results = RunValues(outs, feed, run_options);
    py::list out;
    for (epctx::Value& v : results) out.append(py::cast(PyOrtValue(std::move(v))));
    return out;
  }

  const std::vector<PyNodeArg>& inputs() const { return inputs_; }
  const std::vector<PyNodeArg>& outputs() const { return outputs_; }
  const std::vector<PyNodeArg>& overridable_initializers() const { return overridable_; }
  epctx::Session& session() { return *session_; }
  const PySessionOptions& options() const { return options_; }

 private:
  PySessionOptions options_;
  std::unique_ptr<epctx::Session> session_;
  std::vector<PyNodeArg> inputs_, outputs_, overridable_;
};

std::map<std::string, std::string> StrMap(const py::handle& obj) {
  std::map<std::string, std::string> out;
  if (obj.is_none()) return out;
  for (const auto& [k, v] : obj.cast<py::dict>()) out[py::str(k)] = py::str(v);
  return out;
}
}  // namespace

}  // namespace epctx_py

using namespace epctx_py;  // NOLINT: the module definition below only

PYBIND11_MODULE(_epctx, m) {
  m.doc() = "epctx's C++ API for Python (use the epctx package, not this module, directly)";
  RegisterErrors(m);

  // ---- enumerations (ONNX Runtime's Python names and values) ----
  py::enum_<epctx::GraphOptimizationLevel>(m, "GraphOptimizationLevel")
      .value("ORT_DISABLE_ALL", epctx::GraphOptimizationLevel::ORT_DISABLE_ALL)
      .value("ORT_ENABLE_BASIC", epctx::GraphOptimizationLevel::ORT_ENABLE_BASIC)
      .value("ORT_ENABLE_EXTENDED", epctx::GraphOptimizationLevel::ORT_ENABLE_EXTENDED)
      .value("ORT_ENABLE_LAYOUT", epctx::GraphOptimizationLevel::ORT_ENABLE_LAYOUT)
      .value("ORT_ENABLE_ALL", epctx::GraphOptimizationLevel::ORT_ENABLE_ALL);
  py::enum_<epctx::HardwareDeviceType>(m, "OrtHardwareDeviceType")
      .value("CPU", epctx::HardwareDeviceType::CPU)
      .value("GPU", epctx::HardwareDeviceType::GPU)
      .value("NPU", epctx::HardwareDeviceType::NPU);
  py::enum_<epctx::ExecutionProviderDevicePolicy>(m, "OrtExecutionProviderDevicePolicy")
      .value("DEFAULT", epctx::ExecutionProviderDevicePolicy::DEFAULT)
      .value("PREFER_CPU", epctx::ExecutionProviderDevicePolicy::PREFER_CPU)
      .value("PREFER_NPU", epctx::ExecutionProviderDevicePolicy::PREFER_NPU)
      .value("PREFER_GPU", epctx::ExecutionProviderDevicePolicy::PREFER_GPU)
      .value("MAX_PERFORMANCE", epctx::ExecutionProviderDevicePolicy::MAX_PERFORMANCE)
      .value("MAX_EFFICIENCY", epctx::ExecutionProviderDevicePolicy::MAX_EFFICIENCY)
      .value("MIN_OVERALL_POWER", epctx::ExecutionProviderDevicePolicy::MIN_OVERALL_POWER);
  py::enum_<epctx::CompiledModelCompatibility>(m, "OrtCompiledModelCompatibility")
      .value("EP_NOT_APPLICABLE", epctx::CompiledModelCompatibility::EP_NOT_APPLICABLE)
      .value("EP_SUPPORTED_OPTIMAL", epctx::CompiledModelCompatibility::EP_SUPPORTED_OPTIMAL)
      .value("EP_SUPPORTED_PREFER_RECOMPILATION", epctx::CompiledModelCompatibility::EP_SUPPORTED_PREFER_RECOMPILATION)
      .value("EP_UNSUPPORTED", epctx::CompiledModelCompatibility::EP_UNSUPPORTED);

  // ---- devices and EP libraries ----
  py::class_<PyHardwareDevice>(m, "OrtHardwareDevice", "A hardware device (snapshot taken by get_ep_devices()).")
      .def_readonly("type", &PyHardwareDevice::type)
      .def_readonly("vendor_id", &PyHardwareDevice::vendor_id)
      .def_readonly("device_id", &PyHardwareDevice::device_id)
      .def_readonly("vendor", &PyHardwareDevice::vendor)
      .def_readonly("metadata", &PyHardwareDevice::metadata)
      .def("__repr__", [](const PyHardwareDevice& d) {
        return "<OrtHardwareDevice " + std::string(py::str(py::cast(d.type))) + " vendor='" + d.vendor + "'>";
      });
  py::class_<PyEpDevice>(m, "OrtEpDevice", "An (execution provider, hardware device) pair.")
      .def_readonly("ep_name", &PyEpDevice::ep_name)
      .def_readonly("ep_vendor", &PyEpDevice::ep_vendor)
      .def_readonly("ep_metadata", &PyEpDevice::ep_metadata)
      .def_readonly("ep_options", &PyEpDevice::ep_options)
      .def_readonly("device", &PyEpDevice::device)
      .def("__repr__", [](const PyEpDevice& d) {
        return "<OrtEpDevice ep_name='" + d.ep_name + "' device=" + std::string(py::str(py::cast(d.device.type))) +
               ">";
      });
  m.def("register_execution_provider_library", [](const std::string& name, const std::string& path) {
    py::gil_scoped_release release;
    ProcessEnv().RegisterExecutionProviderLibrary(name.c_str(), path.c_str());
  }, py::arg("registration_name"), py::arg("library_path"),
        "Loads a plugin EP library (a name ending in '.virtual' allows its virtual devices).");
  m.def("unregister_execution_provider_library", [](const std::string& name) {
    py::gil_scoped_release release;
    ProcessEnv().UnregisterExecutionProviderLibrary(name.c_str());
  }, py::arg("registration_name"));
  m.def("get_ep_devices", [] {
    std::vector<PyEpDevice> out;
    for (const epctx::ConstEpDevice& d : ProcessEnv().GetEpDevices()) out.push_back(Snapshot(d));
    return out;
  }, "Every (EP, device) pair: the built-in CPU EP's first, then each registered library's.");
  m.def("get_available_providers", &AvailableProviders);
  m.def("get_all_providers", &AvailableProviders);
  m.def("get_device", [] { return std::string("CPU"); });
  m.def("get_version_string", [] { return std::string(EPCTX_VERSION); });
  m.def("_set_bundled_ep_library", [](const std::string& ep_name, const std::string& registration_name,
                                      const std::string& path) {
    std::lock_guard<std::mutex> lock(g_bundled_mutex);
    g_bundled[ep_name] = Bundled{registration_name, path};
  });
  m.def("get_model_compatibility_for_ep_devices", [](const std::vector<PyEpDevice>& devices, const std::string& info) {
    std::vector<epctx::ConstEpDevice> live;
    for (const PyEpDevice& d : devices) live.push_back(Resolve(d));
    return epctx::GetModelCompatibilityForEpDevices(live, info.c_str());
  });
  m.def("get_compatibility_info_from_model", [](const std::string& path, const std::string& ep_type) {
    return epctx::GetCompatibilityInfoFromModel(path.c_str(), ep_type.c_str());
  }, "The compatibility string a compiled model stores for ep_type, or None.");

  // ---- SessionOptions ----
  py::class_<PySessionOptions>(m, "SessionOptions", "Configuration of a session (ONNX Runtime's SessionOptions).")
      .def(py::init<>())
      .def_property("intra_op_num_threads", [](const PySessionOptions& s) { return s.intra_op_num_threads; },
                    [](PySessionOptions& s, int n) {
                      s.options.SetIntraOpNumThreads(n);
                      s.intra_op_num_threads = n;
                    })
      .def_property("graph_optimization_level",
                    [](const PySessionOptions& s) { return s.graph_optimization_level; },
                    [](PySessionOptions& s, epctx::GraphOptimizationLevel l) {
                      s.options.SetGraphOptimizationLevel(l);
                      s.graph_optimization_level = l;
                    })
      .def_property("enable_profiling", [](const PySessionOptions& s) { return s.enable_profiling; },
                    [](PySessionOptions& s, bool on) {
                      if (on)
                        s.options.EnableProfiling(s.profile_file_prefix.c_str());
                      else
                        s.options.DisableProfiling();
                      s.enable_profiling = on;
                    })
      .def_property("profile_file_prefix", [](const PySessionOptions& s) { return s.profile_file_prefix; },
                    [](PySessionOptions& s, const std::string& p) {
                      s.profile_file_prefix = p;
                      if (s.enable_profiling) s.options.EnableProfiling(p.c_str());
                    })
      .def("add_session_config_entry", [](PySessionOptions& s, const std::string& k, const std::string& v) {
        s.options.AddConfigEntry(k.c_str(), v.c_str());
      }, py::arg("key"), py::arg("value"))
      .def("get_session_config_entry", [](const PySessionOptions& s, const std::string& k) {
        if (!s.options.HasConfigEntry(k.c_str()))
          throw std::runtime_error("SessionOptions does not have configuration with key: " + k);
        return s.options.GetConfigEntryOrDefault(k.c_str(), "");
      }, py::arg("key"))
      .def("add_free_dimension_override_by_name", [](PySessionOptions& s, const std::string& name, int64_t v) {
        s.options.AddFreeDimensionOverrideByName(name.c_str(), v);
      }, py::arg("dim_name"), py::arg("dim_value"))
      .def("add_provider", [](PySessionOptions& s, const std::string& name, const py::object& opts) {
        s.AddProvider(name, StrMap(opts));
      }, py::arg("provider_name"), py::arg("provider_options") = py::dict(),
         "Adds an EP by name: CPUExecutionProvider, or a plugin EP (its real devices; bundled plugins register "
         "themselves on first use).")
      .def("add_provider_for_devices", [](PySessionOptions& s, const std::vector<PyEpDevice>& devices,
                                          const py::object& opts) {
        std::vector<epctx::ConstEpDevice> live;
        for (const PyEpDevice& d : devices) live.push_back(Resolve(d));
        const std::map<std::string, std::string> o = StrMap(opts);
        s.options.AppendExecutionProvider_V2(ProcessEnv(), live,
                                             std::unordered_map<std::string, std::string>(o.begin(), o.end()));
        s.has_providers = true;
      }, py::arg("ep_devices"), py::arg("provider_options") = py::dict())
      .def("set_provider_selection_policy", [](PySessionOptions& s, epctx::ExecutionProviderDevicePolicy p) {
        s.options.SetEpSelectionPolicy(p);
        s.has_providers = true;
      }, py::arg("policy"))
      .def("set_provider_selection_policy_delegate", [](PySessionOptions& s, py::function fn) {
        // ONNX Runtime's signature: fn(ep_devices, model_metadata, runtime_metadata, max_selections).
        // epctx passes empty metadata dicts (its runtime does not hand the model's metadata to the delegate).
        auto shared = std::make_shared<py::function>(std::move(fn));
        s.options.SetEpSelectionPolicyDelegate([shared](const std::vector<epctx::ConstEpDevice>& all) {
          return CallPython("EP selection delegate failed: ", [&] {
            std::vector<PyEpDevice> snaps;
            for (const epctx::ConstEpDevice& d : all) snaps.push_back(Snapshot(d));
            py::object r = (*shared)(snaps, py::dict(), py::dict(), snaps.size());
            std::vector<epctx::ConstEpDevice> chosen;
            for (const PyEpDevice& d : r.cast<std::vector<PyEpDevice>>()) chosen.push_back(Resolve(d));
            return chosen;
          });
        });
        s.has_providers = true;
      }, py::arg("delegate"))
      .def("has_providers", [](const PySessionOptions& s) { return s.has_providers; })
      .def("__copy__", [](const PySessionOptions& s) { return PySessionOptions(s); })
      .def("__deepcopy__", [](const PySessionOptions& s, py::dict) { return PySessionOptions(s); });

  // ---- values ----
  py::class_<PyNodeArg>(m, "NodeArg", "A model input or output: name, type ('tensor(float)') and shape.")
      .def_readonly("name", &PyNodeArg::name)
      .def_readonly("type", &PyNodeArg::type)
      .def_readonly("shape", &PyNodeArg::shape)
      .def("__repr__", [](const PyNodeArg& a) {
        return "NodeArg(name='" + a.name + "', type='" + a.type + "', shape=" + std::string(py::repr(a.shape)) + ")";
      });

  py::class_<PyOrtValue>(m, "OrtValue", "A tensor (or sequence / optional) on the CPU.")
      .def_static("ortvalue_from_numpy", [](const py::object& arr, const std::string& device_type, int device_id) {
        if (device_type != "cpu" && device_type != "CPU")
          throw epctx::Exception(ErrorCode::INVALID_ARGUMENT, "epctx only has CPU memory, not '" + device_type + "'");
        py::object holder;
        epctx::Value v = ValueFromNumpy(arr, &holder);
        return PyOrtValue(std::move(v), std::move(holder));  // over the array's memory, as ONNX Runtime on CPU
      }, py::arg("numpy_obj"), py::arg("device_type") = "cpu", py::arg("device_id") = 0)
      .def_static("ortvalue_from_shape_and_type", [](const std::vector<int64_t>& shape, const py::object& et,
                                                     const std::string& device_type, int) {
        ElementType t;
        if (py::isinstance<py::int_>(et)) {
          t = static_cast<ElementType>(et.cast<int>());
        } else {
          py::object holder;
          py::array probe(py::dtype::from_args(et), std::vector<py::ssize_t>{0});
          t = ValueFromNumpy(probe, &holder).GetTensorTypeAndShapeInfo().GetElementType();
        }
        return PyOrtValue(epctx::Value::CreateTensor(t, shape.data(), shape.size()));
      }, py::arg("shape"), py::arg("element_type"), py::arg("device_type") = "cpu", py::arg("device_id") = 0)
      .def("numpy", [](const PyOrtValue& v) { return ValueToPython(v.value()); })
      .def("shape", [](const PyOrtValue& v) { return v.value().GetTensorTypeAndShapeInfo().GetShape(); })
      .def("data_type", [](const PyOrtValue& v) {
        const epctx::Value& x = v.value();
        if (x.IsTensor()) return "tensor(" + ElementTypeName(x.GetTensorTypeAndShapeInfo().GetElementType()) + ")";
        if (x.IsSequence())
          return x.GetCount() ? "seq(tensor(" +
                                    ElementTypeName(x.GetValue(0).GetTensorTypeAndShapeInfo().GetElementType()) + "))"
                              : std::string("seq(tensor(undefined))");
        return std::string("optional");
      })
      .def("element_type", [](const PyOrtValue& v) {
        return static_cast<int>(v.value().GetTensorTypeAndShapeInfo().GetElementType());
      })
      .def("tensor_size_in_bytes", [](const PyOrtValue& v) {
        const epctx::TensorTypeAndShapeInfo i = v.value().GetTensorTypeAndShapeInfo();
        if (i.GetElementType() == ElementType::STRING)
          throw epctx::Exception(ErrorCode::INVALID_ARGUMENT, "tensor_size_in_bytes is undefined for string tensors");
        return static_cast<size_t>(i.GetElementCount()) * ElementSize(i.GetElementType());
      })
      .def("data_ptr", [](const PyOrtValue& v) {
        return reinterpret_cast<uintptr_t>(v.value().GetTensorRawData());
      })
      .def("device_name", [](const PyOrtValue& v) {
        v.value();
        return std::string("cpu");
      })
      .def("is_tensor", [](const PyOrtValue& v) { return v.value().IsTensor(); })
      .def("is_tensor_sequence", [](const PyOrtValue& v) { return v.value().IsSequence(); })
      .def("has_value", [](const PyOrtValue& v) { return v.value().HasValue(); })
      .def("is_sparse_tensor", [](const PyOrtValue& v) {
        v.value();
        return false;
      });

  // ---- RunOptions, ModelMetadata ----
  py::class_<epctx::RunOptions>(m, "RunOptions",
                                "Options of one run (ONNX Runtime's RunOptions). Setting terminate=True from another "
                                "thread stops the runs using this object with Fail('Exiting due to terminate flag "
                                "being set to true.').")
      .def(py::init<>())
      .def_property("log_severity_level", &epctx::RunOptions::GetRunLogSeverityLevel,
                    [](epctx::RunOptions& r, int level) { r.SetRunLogSeverityLevel(level); },
                    "-1 (default: the session's), 0 verbose, 1 info, 2 warning, 3 error, 4 fatal.")
      .def_property("log_verbosity_level", &epctx::RunOptions::GetRunLogVerbosityLevel,
                    [](epctx::RunOptions& r, int level) { r.SetRunLogVerbosityLevel(level); })
      .def_property("run_tag", [](const epctx::RunOptions& r) { return std::string(r.GetRunTag()); },
                    [](epctx::RunOptions& r, const std::string& t) { r.SetRunTag(t.c_str()); },
                    "A tag for the runs using these options (ONNX Runtime's logid).")
      .def_property("logid", [](const epctx::RunOptions& r) { return std::string(r.GetRunTag()); },
                    [](epctx::RunOptions& r, const std::string& t) { r.SetRunTag(t.c_str()); },
                    "ONNX Runtime's Python name of run_tag.")
      .def_property("terminate", &epctx::RunOptions::GetTerminate,
                    [](epctx::RunOptions& r, bool on) {
                      if (on)
                        r.SetTerminate();
                      else
                        r.UnsetTerminate();
                    },
                    "True stops the runs using these options before their next node; False lets new runs start.")
      .def("add_run_config_entry", [](epctx::RunOptions& r, const std::string& k, const std::string& v) {
        r.AddConfigEntry(k.c_str(), v.c_str());
      }, py::arg("key"), py::arg("value"))
      .def("get_run_config_entry", [](const epctx::RunOptions& r, const std::string& k) {
        const char* v = r.GetConfigEntry(k.c_str());
        if (!v) throw std::runtime_error("RunOptions does not have configuration with key: " + k);
        return std::string(v);
      }, py::arg("key"));
  py::class_<epctx::ModelMetadata>(m, "ModelMetadata", "The model's metadata (InferenceSession.get_modelmeta()).")
      .def_readonly("producer_name", &epctx::ModelMetadata::producer_name)
      .def_readonly("graph_name", &epctx::ModelMetadata::graph_name)
      .def_readonly("domain", &epctx::ModelMetadata::domain)
      .def_readonly("description", &epctx::ModelMetadata::description)
      .def_readonly("graph_description", &epctx::ModelMetadata::graph_description)
      .def_readonly("version", &epctx::ModelMetadata::version)
      .def_readonly("custom_metadata_map", &epctx::ModelMetadata::custom_metadata_map)
      .def("__repr__", [](const epctx::ModelMetadata& md) {
        return "ModelMetadata(producer_name='" + md.producer_name + "', graph_name='" + md.graph_name +
               "', version=" + std::to_string(md.version) + ")";
      });

  // ---- InferenceSession (the C++ half; epctx.InferenceSession wraps it) ----
  py::class_<PySession>(m, "InferenceSession")
      .def(py::init<const PySessionOptions*, const py::object&, const std::vector<std::string>&,
                    const std::vector<std::map<std::string, std::string>>&>(),
           py::arg("sess_options"), py::arg("path_or_bytes"), py::arg("providers"), py::arg("provider_options"))
      .def("run", &PySession::Run, py::arg("output_names"), py::arg("input_feed"), py::arg("run_options") = nullptr)
      .def("run_with_ort_values", &PySession::RunWithOrtValues, py::arg("output_names"), py::arg("input_feed"),
           py::arg("run_options") = nullptr)
      .def_property_readonly("inputs_meta", &PySession::inputs)
      .def_property_readonly("outputs_meta", &PySession::outputs)
      .def_property_readonly("overridable_initializers", &PySession::overridable_initializers)
      .def_property_readonly("model_meta", [](PySession& s) { return s.session().GetModelMetadata(); })
      .def_property_readonly("session_options", &PySession::options)
      .def("get_providers", [](PySession& s) { return s.session().GetExecutionProviders(); })
      .def("get_partition_assignments", [](PySession& s) { return s.session().GetPartitionAssignments(); })
      .def("get_session_report", [](PySession& s) { return s.session().GetSessionReport(); })
      .def("end_profiling", [](PySession& s) { return s.session().EndProfiling(); })
      .def("set_ep_dynamic_options", [](PySession& s, const py::dict& opts) {
        std::vector<std::string> keys, values;
        for (const auto& [k, v] : StrMap(opts)) {
          keys.push_back(k);
          values.push_back(v);
        }
        s.session().SetEpDynamicOptions(keys, values);
      });

  BindCompile(m);
}
