// Shared pieces of the epctx Python module (`epctx.capi._epctx`): the process-wide Env, error translation,
// numpy <-> Value conversion and the classes more than one binding file uses.
//
// Contract with the rest of the module:
// - Every call into the C++ API that may run for long (session creation, Run, CompileModel) releases the GIL;
//   C++ callbacks into Python (write functions, initializer handlers, selection delegates) take it again and
//   turn a Python exception into epctx::Exception(FAIL, <Python message>) before it can cross a C++ frame.
// - epctx::Exception becomes the Python class for its code (Fail, InvalidArgument, ..., all subclasses of
//   EpctxError, itself a RuntimeError) with .code, .code_name and .message; str() is ONNX Runtime's
//   "[ONNXRuntimeError] : <code> : <NAME> : <message>".
#pragma once

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "epctx/epctx.h"

namespace epctx_py {

namespace py = pybind11;

// The one Env of the process, created on first use (as ONNX Runtime's Python module does). Never destroyed:
// sessions and registered libraries live until exit.
epctx::Env& ProcessEnv();

// Raises (sets the Python error indicator for) the exception class of `code`. Used by the translator.
void SetPythonError(epctx::ErrorCode code, const std::string& message);
// Creates the exception classes as attributes of `m` and registers the epctx::Exception translator.
void RegisterErrors(py::module_& m);

// Runs `fn` (which calls into Python) from a C++ callback: acquires the GIL and converts any Python exception
// into epctx::Exception(FAIL, "<prefix><Python error text>").
template <typename Fn>
auto CallPython(const char* prefix, Fn&& fn) -> decltype(fn()) {
  py::gil_scoped_acquire gil;
  try {
    return fn();
  } catch (py::error_already_set& e) {
    std::string what = e.what();  // "ValueError: message" (pybind11 already fetched and cleared the error)
    throw epctx::Exception(epctx::ErrorCode::FAIL, std::string(prefix) + what);
  } catch (const epctx::Exception&) {
    throw;
  } catch (const std::exception& e) {
    throw epctx::Exception(epctx::ErrorCode::FAIL, std::string(prefix) + e.what());
  }
}

// "tensor(float)", "seq(tensor(int64))", ... as ONNX Runtime's NodeArg.type.
std::string ElementTypeName(epctx::ElementType t);
std::string TypeString(const epctx::TypeInfo& info);
// Bytes per element (0 for strings and unknown types).
size_t ElementSize(epctx::ElementType t);

// A tensor or other value handed to or returned from Python. `keepalive` holds the numpy array whose memory a
// tensor created by ortvalue_from_numpy points into. `expired` is set when the value only borrowed memory for
// the duration of a callback (initializer handler); every accessor then raises.
class PyOrtValue {
 public:
  PyOrtValue() = default;
  explicit PyOrtValue(epctx::Value v, py::object keepalive = py::none())
      : value_(std::move(v)), keepalive_(std::move(keepalive)) {}

  const epctx::Value& value() const;
  epctx::Value& mutable_value();
  void Expire() { expired_ = true; }

 private:
  epctx::Value value_;
  py::object keepalive_;
  bool expired_ = false;
};

// numpy -> Value over the array's memory (`holder` receives the contiguous array that must outlive the Value).
// Raises InvalidArgument (as epctx::Exception) for unsupported dtypes.
epctx::Value ValueFromNumpy(const py::handle& obj, py::object* holder);
// Value -> a new numpy array (copied), a list (sequence) or None (empty optional).
py::object ValueToPython(const epctx::Value& v);

// Snapshot of an EP device as get_ep_devices() returned it. The handle is checked against the Env's current
// devices before use, so a device whose library was unregistered raises instead of dangling.
struct PyHardwareDevice {
  epctx::HardwareDeviceType type;
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  std::string vendor;
  std::map<std::string, std::string> metadata;
};
struct PyEpDevice {
  const void* handle = nullptr;
  std::string ep_name;
  std::string ep_vendor;
  std::map<std::string, std::string> ep_metadata;
  std::map<std::string, std::string> ep_options;
  PyHardwareDevice device;
};
PyEpDevice Snapshot(const epctx::ConstEpDevice& d);
// The live handle for a snapshot; INVALID_ARGUMENT when its library is gone.
epctx::ConstEpDevice Resolve(const PyEpDevice& d);

// SessionOptions as Python sees it: the C++ options plus the values ONNX Runtime's properties read back.
struct PySessionOptions {
  epctx::SessionOptions options;
  int intra_op_num_threads = 0;
  epctx::GraphOptimizationLevel graph_optimization_level = epctx::GraphOptimizationLevel::ORT_ENABLE_ALL;
  bool enable_profiling = false;
  std::string profile_file_prefix = "epctx_profile";
  bool has_providers = false;

  // Appends the EP `name` ("CPUExecutionProvider", or a plugin EP's name: its real devices; a plugin bundled
  // with the package is registered on first use). NOT_FOUND when no registered or bundled library offers it.
  void AddProvider(const std::string& name, const std::map<std::string, std::string>& options);
};

// EP names a session may request: registered plugin EPs, bundled plugin EPs, then CPUExecutionProvider.
std::vector<std::string> AvailableProviders();

void BindCompile(py::module_& m);

}  // namespace epctx_py
