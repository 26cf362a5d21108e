// The compile API for Python: OrtCompileApiFlags, OrtExternalInitializerInfo and the C++ half of ModelCompiler
// (epctx.ModelCompiler in python/epctx/_compile.py validates the arguments as ONNX Runtime's Python does).
#include <cstring>

#include "bind.h"

namespace epctx_py {

namespace {

using epctx::ErrorCode;

// One compile per call: the options are rebuilt from the constructor's arguments each time, so an output set by
// one call (a buffer on the stack of compile_to_bytes, a write function) never leaks into the next.
class PyModelCompiler {
 public:
  PyModelCompiler(const PySessionOptions& so, const py::object& input, bool embed, std::string external_file,
                  size_t external_threshold, uint32_t flags, epctx::GraphOptimizationLevel level,
                  py::object initializer_func)
      : session_options_(so.options),
        embed_(embed),
        external_file_(std::move(external_file)),
        external_threshold_(external_threshold),
        flags_(flags),
        level_(level) {
    if (py::isinstance<py::bytes>(input)) {
      input_bytes_ = input.cast<std::string>();
      input_is_path_ = false;
    } else {
      input_path_ = input.cast<std::string>();
    }
    if (!initializer_func.is_none()) initializer_func_ = std::make_shared<py::object>(std::move(initializer_func));
    Build();  // surface argument errors (INVALID_ARGUMENT) at construction, as ONNX Runtime does
  }

  void CompileToFile(const std::optional<std::string>& path) {
    epctx::ModelCompilationOptions o = Build();
    if (path && !path->empty()) o.SetOutputModelPath(*path);
    Compile(o);
  }

  py::bytes CompileToBytes() {
    epctx::ModelCompilationOptions o = Build();
    epctx::AllocatorWithDefaultOptions allocator;
    void* data = nullptr;
    size_t size = 0;
    o.SetOutputModelBuffer(allocator, &data, &size);
    Compile(o);
    py::bytes out(static_cast<const char*>(data), size);
    allocator.Free(data);
    return out;
  }

  void CompileToStream(py::function write) {
    epctx::ModelCompilationOptions o = Build();
    auto fn = std::make_shared<py::function>(std::move(write));
    o.SetOutputModelWriteFunc([fn](const void* data, size_t n) {
      CallPython("write_function raised ", [&] { (*fn)(py::bytes(static_cast<const char*>(data), n)); });
    });
    Compile(o);
  }

 private:
  epctx::ModelCompilationOptions Build() const {
    epctx::ModelCompilationOptions o(ProcessEnv(), session_options_);
    if (input_is_path_)
      o.SetInputModelPath(input_path_);
    else
      o.SetInputModelFromBuffer(input_bytes_.data(), input_bytes_.size());
    o.SetEpContextEmbedMode(embed_);
    if (!external_file_.empty()) o.SetOutputModelExternalInitializersFile(external_file_, external_threshold_);
    if (flags_ != 0) o.SetFlags(flags_);
    o.SetGraphOptimizationLevel(level_);
    if (initializer_func_) {
      std::shared_ptr<py::object> fn = initializer_func_;
      o.SetOutputModelGetInitializerLocationFunc(
          [fn](const std::string& name, const epctx::Value& value,
               const epctx::ExternalInitializerInfo* external) -> std::optional<epctx::ExternalInitializerInfo> {
            const epctx::TensorTypeAndShapeInfo info = value.GetTensorTypeAndShapeInfo();
            // A string tensor cannot be viewed without copying its strings; it stays in the model.
            if (info.GetElementType() == epctx::ElementType::STRING) return std::nullopt;
            const size_t bytes = static_cast<size_t>(info.GetElementCount()) * ElementSize(info.GetElementType());
            epctx::Value view =
                epctx::Value::CreateTensor(info.GetElementType(), const_cast<void*>(value.GetTensorRawData()), bytes,
                                           info.GetShape().data(), info.GetShape().size());
            return CallPython("get_initializer_location_func raised ", [&]() {
              py::object py_value = py::cast(PyOrtValue(std::move(view)));
              // The view borrows the compiler's memory: it expires when the callback returns, however it returns.
              struct Expirer {
                py::object v;
                ~Expirer() { v.cast<PyOrtValue&>().Expire(); }
              } expirer{py_value};
              py::object py_external = external ? py::cast(*external) : py::object(py::none());
              py::object r = (*fn)(name, py_value, py_external);
              if (r.is_none()) return std::optional<epctx::ExternalInitializerInfo>();
              if (!py::isinstance<epctx::ExternalInitializerInfo>(r))
                throw epctx::Exception(ErrorCode::INVALID_ARGUMENT,
                                       std::string("get_initializer_location_func must return an "
                                                   "OrtExternalInitializerInfo or None, not '") +
                                           Py_TYPE(r.ptr())->tp_name + "'");
              return std::optional<epctx::ExternalInitializerInfo>(r.cast<epctx::ExternalInitializerInfo>());
            });
          });
    }
    return o;
  }

  static void Compile(const epctx::ModelCompilationOptions& o) {
    epctx::Status status;
    {
      py::gil_scoped_release release;
      status = epctx::CompileModel(ProcessEnv(), o);
    }
    if (!status.IsOK()) throw epctx::Exception(status.GetErrorCode(), status.GetErrorMessage());
  }

  epctx::SessionOptions session_options_;  // a snapshot: later changes to the caller's options do not apply
  bool input_is_path_ = true;
  std::string input_path_;
  std::string input_bytes_;
  bool embed_;
  std::string external_file_;
  size_t external_threshold_;
  uint32_t flags_;
  epctx::GraphOptimizationLevel level_;
  std::shared_ptr<py::object> initializer_func_;
};

}  // namespace

void BindCompile(py::module_& m) {
  py::enum_<epctx::OrtCompileApiFlags>(m, "OrtCompileApiFlags", py::arithmetic())
      .value("NONE", epctx::OrtCompileApiFlags_NONE)
      .value("ERROR_IF_NO_NODES_COMPILED", epctx::OrtCompileApiFlags_ERROR_IF_NO_NODES_COMPILED)
      .value("ERROR_IF_OUTPUT_FILE_EXISTS", epctx::OrtCompileApiFlags_ERROR_IF_OUTPUT_FILE_EXISTS);

  py::class_<epctx::ExternalInitializerInfo>(m, "OrtExternalInitializerInfo",
                                             "Where an initializer's bytes are stored in an external file.")
      .def(py::init<std::string, int64_t, size_t>(), py::arg("filepath"), py::arg("file_offset"),
           py::arg("byte_size"))
      .def_property_readonly("filepath", &epctx::ExternalInitializerInfo::GetFilePath)
      .def_property_readonly("file_offset", &epctx::ExternalInitializerInfo::GetFileOffset)
      .def_property_readonly("byte_size", &epctx::ExternalInitializerInfo::GetByteSize)
      .def("__eq__", [](const epctx::ExternalInitializerInfo& a, const epctx::ExternalInitializerInfo& b) {
        return a == b;
      })
      .def("__repr__", [](const epctx::ExternalInitializerInfo& i) {
        return "OrtExternalInitializerInfo(filepath='" + i.GetFilePath() + "', file_offset=" +
               std::to_string(i.GetFileOffset()) + ", byte_size=" + std::to_string(i.GetByteSize()) + ")";
      });

  py::class_<PyModelCompiler>(m, "ModelCompiler")
      .def(py::init<const PySessionOptions&, const py::object&, bool, std::string, size_t, uint32_t,
                    epctx::GraphOptimizationLevel, py::object>(),
           py::arg("sess_options"), py::arg("input_model_path_or_bytes"), py::arg("embed_compiled_data_into_model"),
           py::arg("external_initializers_file_path"), py::arg("external_initializers_size_threshold"),
           py::arg("flags"), py::arg("graph_optimization_level"), py::arg("get_initializer_location_func"))
      .def("compile_to_file", &PyModelCompiler::CompileToFile, py::arg("output_model_path") = py::none())
      .def("compile_to_bytes", &PyModelCompiler::CompileToBytes)
      .def("compile_to_stream", &PyModelCompiler::CompileToStream, py::arg("write_function"));
}

}  // namespace epctx_py
