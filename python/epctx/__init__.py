"""epctx for Python: ONNX Runtime's Python API over epctx, so that ``import epctx as ort`` runs ONNX Runtime code
for the covered features (sessions, EP libraries and devices, the compile API) with epctx's EP names.

    import epctx as ort
    sess = ort.InferenceSession("model.onnx", providers=["AotCpuExecutionProvider"])
    outputs = sess.run(None, {"input": x})

The plugin EPs built with epctx (AotCpuExecutionProvider, ExampleExecutionProvider) are found with
``get_library_path("aotcpu")`` / ``get_library_path("example")``; naming one in ``providers=`` or
``SessionOptions.add_provider`` registers it under "aotcpu" / "example" when no registered library offers it.
docs/python.md has the details and what differs from ONNX Runtime.
"""
import os as _os

from epctx import _build_config
from epctx.capi import _epctx as _C
from epctx.capi._epctx import (  # noqa: F401
    EngineError,
    EPFail,
    EpctxError,
    Fail,
    GraphOptimizationLevel,
    InvalidArgument,
    InvalidGraph,
    InvalidProtobuf,
    ModelLoadCanceled,
    ModelMetadata,
    ModelLoaded,
    ModelRequiresCompilation,
    NodeArg,
    NoModel,
    NoSuchFile,
    NotFound,
    NotImplemented,
    OrtCompileApiFlags,
    OrtCompiledModelCompatibility,
    OrtEpDevice,
    OrtExecutionProviderDevicePolicy,
    OrtExternalInitializerInfo,
    OrtHardwareDevice,
    OrtHardwareDeviceType,
    OrtValue,
    RunOptions,
    RuntimeException,
    SessionOptions,
    get_all_providers,
    get_available_providers,
    get_compatibility_info_from_model,
    get_device,
    get_ep_devices,
    get_model_compatibility_for_ep_devices,
    get_version_string,
    register_execution_provider_library,
    unregister_execution_provider_library,
)
from epctx._compile import ModelCompiler  # noqa: F401
from epctx._session import InferenceSession  # noqa: F401

__version__ = _build_config.VERSION

# Accepted spellings of the bundled plugin EPs (the BRIEF's source keys for AotCpu included).
_LIBRARY_ALIASES = {
    "aotcpu": "aotcpu", "AOTCPU": "aotcpu", "AotCpuExecutionProvider": "aotcpu",
    "example": "example", "ExampleExecutionProvider": "example",
}


def get_library_path(name: str = "aotcpu") -> str:
    """Absolute path of a plugin EP library built with epctx: "aotcpu" (AotCpuExecutionProvider, the default) or
    "example" (ExampleExecutionProvider); EP names are accepted too. KeyError for any other name."""
    key = _LIBRARY_ALIASES.get(name)
    if key is None:
        raise KeyError(f"no bundled EP library named '{name}' (known: aotcpu, example)")
    return _build_config.LIBRARIES[key][1]


def get_ep_names(name: str = "aotcpu") -> list:
    """The EP names a bundled library provides, e.g. get_ep_names("aotcpu") == ["AotCpuExecutionProvider"]."""
    key = _LIBRARY_ALIASES.get(name)
    if key is None:
        raise KeyError(f"no bundled EP library named '{name}' (known: aotcpu, example)")
    return [_build_config.LIBRARIES[key][0]]


for _short, (_ep, _path) in _build_config.LIBRARIES.items():
    if _os.path.exists(_path):
        _C._set_bundled_ep_library(_ep, _short, _path)
