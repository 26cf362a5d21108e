"""epctx.ModelCompiler: ONNX Runtime's Python ModelCompiler (argument checks, defaults) over the native one."""
import os

from epctx.capi import _epctx as C


class ModelCompiler:
    """Compiles an ONNX model into an EPContext model for the EPs in sess_options (add_provider_for_devices,
    add_provider or set_provider_selection_policy). The session options are copied when the compiler is created.

        compiler = epctx.ModelCompiler(so, "model.onnx")
        compiler.compile_to_file("model_ctx.onnx")

    Defaults as ONNX Runtime's: embed_compiled_data_into_model=False, external_initializers_size_threshold=1024,
    flags=OrtCompileApiFlags.NONE, graph_optimization_level=ORT_DISABLE_ALL. get_initializer_location_func(name,
    OrtValue, OrtExternalInitializerInfo | None) -> OrtExternalInitializerInfo | None decides where each
    initializer of the output model goes (the OrtValue is valid only during the call).
    """

    def __init__(self, sess_options, input_model_path_or_bytes, embed_compiled_data_into_model=False,
                 external_initializers_file_path=None, external_initializers_size_threshold=1024,
                 flags=C.OrtCompileApiFlags.NONE,
                 graph_optimization_level=C.GraphOptimizationLevel.ORT_DISABLE_ALL,
                 get_initializer_location_func=None):
        if isinstance(input_model_path_or_bytes, (str, os.PathLike)):
            if not input_model_path_or_bytes:
                raise ValueError("Input model path is empty")
            model = os.fspath(input_model_path_or_bytes)
        elif isinstance(input_model_path_or_bytes, bytes):
            if len(input_model_path_or_bytes) == 0:
                raise ValueError("Input model bytes array is empty")
            model = input_model_path_or_bytes
        else:
            raise TypeError(f"Unable to load from type '{type(input_model_path_or_bytes)}'")

        if external_initializers_file_path:
            if not isinstance(external_initializers_file_path, (str, os.PathLike)):
                raise TypeError("Output external initializer filepath is of unexpected type "
                                f"'{type(external_initializers_file_path)}'")
            external_initializers_file_path = os.fspath(external_initializers_file_path)
            if get_initializer_location_func is not None:
                raise ValueError("Cannot set both 'external_initializers_file_path' and "
                                 "'get_initializer_location_func': both decide where initializers are stored")
        else:
            external_initializers_file_path = ""
        if get_initializer_location_func is not None and not callable(get_initializer_location_func):
            raise TypeError("get_initializer_location_func must be callable")

        self._model_compiler = C.ModelCompiler(
            sess_options if sess_options is not None else C.SessionOptions(), model,
            bool(embed_compiled_data_into_model), external_initializers_file_path,
            int(external_initializers_size_threshold), int(flags), graph_optimization_level,
            get_initializer_location_func)

    def compile_to_file(self, output_model_path=None):
        """Compiles into a file; without a path, `<input stem>_ctx.onnx` beside the input model (or the session
        options' ep.context_file_path)."""
        if output_model_path:
            if not isinstance(output_model_path, (str, os.PathLike)):
                raise TypeError(f"Output model's filepath is of unexpected type '{type(output_model_path)}'")
            output_model_path = os.fspath(output_model_path)
        else:
            output_model_path = None
        self._model_compiler.compile_to_file(output_model_path)

    def compile_to_bytes(self) -> bytes:
        "Compiles and returns the serialized model."
        return self._model_compiler.compile_to_bytes()

    def compile_to_stream(self, write_function):
        """Compiles and hands the serialized model to write_function(bytes) in consecutive chunks. An exception it
        raises fails the compile with epctx.Fail carrying its message."""
        if not callable(write_function):
            raise TypeError("write_function must be callable")
        self._model_compiler.compile_to_stream(write_function)
