"""The native half of epctx: `_epctx` (the pybind11 module) and `onnxruntime_pybind11_state`, the name ONNX
Runtime's Python code imports its exception classes from (``from onnxruntime.capi.onnxruntime_pybind11_state
import Fail`` ports as ``from epctx.capi.onnxruntime_pybind11_state import Fail``)."""
