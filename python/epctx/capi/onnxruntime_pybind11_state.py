"""ONNX Runtime's module name for its native classes and exceptions, as an alias of epctx.capi._epctx."""
from epctx.capi._epctx import *  # noqa: F401,F403
from epctx.capi._epctx import (  # noqa: F401  (names starting with an underscore or shadowing builtins)
    EngineError,
    EPFail,
    EpctxError,
    Fail,
    InvalidArgument,
    InvalidGraph,
    InvalidProtobuf,
    ModelLoadCanceled,
    ModelLoaded,
    ModelRequiresCompilation,
    NoModel,
    NoSuchFile,
    NotFound,
    NotImplemented,
    RuntimeException,
)
