# Type stubs for the epctx package (`import epctx as ort`). tests/python/test_api_parity.py checks that every public name
# of the package is declared here and vice versa.
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from epctx import capi as capi
from epctx.capi._epctx import (
    EngineError as EngineError,
    EPFail as EPFail,
    EpctxError as EpctxError,
    Fail as Fail,
    GraphOptimizationLevel as GraphOptimizationLevel,
    InvalidArgument as InvalidArgument,
    InvalidGraph as InvalidGraph,
    InvalidProtobuf as InvalidProtobuf,
    ModelLoadCanceled as ModelLoadCanceled,
    ModelLoaded as ModelLoaded,
    ModelMetadata as ModelMetadata,
    ModelRequiresCompilation as ModelRequiresCompilation,
    NodeArg as NodeArg,
    NoModel as NoModel,
    NoSuchFile as NoSuchFile,
    NotFound as NotFound,
    NotImplemented as NotImplemented,
    OrtCompileApiFlags as OrtCompileApiFlags,
    OrtCompiledModelCompatibility as OrtCompiledModelCompatibility,
    OrtEpDevice as OrtEpDevice,
    OrtExecutionProviderDevicePolicy as OrtExecutionProviderDevicePolicy,
    OrtExternalInitializerInfo as OrtExternalInitializerInfo,
    OrtHardwareDevice as OrtHardwareDevice,
    OrtHardwareDeviceType as OrtHardwareDeviceType,
    OrtValue as OrtValue,
    RunOptions as RunOptions,
    RuntimeException as RuntimeException,
    SessionOptions as SessionOptions,
    get_all_providers as get_all_providers,
    get_available_providers as get_available_providers,
    get_compatibility_info_from_model as get_compatibility_info_from_model,
    get_device as get_device,
    get_ep_devices as get_ep_devices,
    get_model_compatibility_for_ep_devices as get_model_compatibility_for_ep_devices,
    get_version_string as get_version_string,
    register_execution_provider_library as register_execution_provider_library,
    unregister_execution_provider_library as unregister_execution_provider_library,
)

__version__: str

_Provider = Union[str, Tuple[str, Dict[str, Any]]]

class InferenceSession:
    def __init__(self, path_or_bytes: Union[str, bytes, os.PathLike], sess_options: Optional[SessionOptions] = ...,
                 providers: Optional[Sequence[_Provider]] = ...,
                 provider_options: Optional[Sequence[Dict[str, Any]]] = ..., **kwargs: Any) -> None: ...
    def get_session_options(self) -> SessionOptions: ...
    def get_inputs(self) -> List[NodeArg]: ...
    def get_outputs(self) -> List[NodeArg]: ...
    def get_overridable_initializers(self) -> List[NodeArg]: ...
    def get_modelmeta(self) -> ModelMetadata: ...
    def get_providers(self) -> List[str]: ...
    def get_provider_options(self) -> Dict[str, Dict[str, str]]: ...
    def set_providers(self, providers: Optional[Sequence[_Provider]] = ...,
                      provider_options: Optional[Sequence[Dict[str, Any]]] = ...) -> None: ...
    def run(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any],
            run_options: Optional[RunOptions] = ...) -> List[Any]: ...
    def run_with_ort_values(self, output_names: Optional[Sequence[str]], input_dict_ort_values: Dict[str, OrtValue],
                            run_options: Optional[RunOptions] = ...) -> List[OrtValue]: ...
    def end_profiling(self) -> str: ...
    def set_ep_dynamic_options(self, options: Dict[str, str]) -> None: ...
    def get_partition_assignments(self) -> Dict[str, str]: ...
    def get_session_report(self) -> Dict[str, Any]: ...

class ModelCompiler:
    def __init__(self, sess_options: SessionOptions, input_model_path_or_bytes: Union[str, bytes, os.PathLike],
                 embed_compiled_data_into_model: bool = ...,
                 external_initializers_file_path: Optional[Union[str, os.PathLike]] = ...,
                 external_initializers_size_threshold: int = ..., flags: OrtCompileApiFlags = ...,
                 graph_optimization_level: GraphOptimizationLevel = ...,
                 get_initializer_location_func: Optional[
                     Callable[[str, OrtValue, Optional[OrtExternalInitializerInfo]],
                              Optional[OrtExternalInitializerInfo]]] = ...) -> None: ...
    def compile_to_file(self, output_model_path: Optional[Union[str, os.PathLike]] = ...) -> None: ...
    def compile_to_bytes(self) -> bytes: ...
    def compile_to_stream(self, write_function: Callable[[bytes], None]) -> None: ...

def get_library_path(name: str = ...) -> str: ...
def get_ep_names(name: str = ...) -> List[str]: ...
