"""InferenceSession, SessionOptions, OrtValue, devices and errors (ONNX Runtime's Python API over epctx)."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import AOT, make_model, mlp_model, mlp_reference, vi


def add_relu_model():
    return make_model([helper.make_node("Add", ["x", "y"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
                       helper.make_node("Cast", ["r"], ["i"], to=TensorProto.INT64)],
                      [vi("x", TensorProto.FLOAT, ["N", 4]), vi("y", TensorProto.FLOAT, [None, 4])],
                      [vi("r", TensorProto.FLOAT, ["N", 4]), vi("i", TensorProto.INT64, ["N", 4])])


def test_run_from_path_and_bytes_matches_numpy(ort, tmp_path):
    m = add_relu_model()
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    y = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    for model in (str(path), path, m.SerializeToString()):
        s = ort.InferenceSession(model)
        assert s.get_providers() == ["CPUExecutionProvider"]
        r, i = s.run(None, {"x": x, "y": y})
        np.testing.assert_array_equal(r, np.maximum(x + y, 0))
        assert r.dtype == np.float32 and i.dtype == np.int64
        np.testing.assert_array_equal(i, np.maximum(x + y, 0).astype(np.int64))
        (only_i,) = s.run(["i"], {"x": x, "y": y})
        np.testing.assert_array_equal(only_i, i)
    # Inputs and outputs as ONNX Runtime's NodeArg: symbolic dims by name, unnamed unknown dims as None.
    ins = s.get_inputs()
    assert [a.name for a in ins] == ["x", "y"]
    assert ins[0].type == "tensor(float)" and ins[0].shape == ["N", 4]
    assert ins[1].shape == [None, 4]
    assert [(a.name, a.type) for a in s.get_outputs()] == [("r", "tensor(float)"), ("i", "tensor(int64)")]
    with pytest.raises(TypeError):
        ort.InferenceSession(12)


def test_inputs_are_converted_like_onnxruntime(ort):
    s = ort.InferenceSession(add_relu_model().SerializeToString())
    x = np.arange(24, dtype=np.float32).reshape(6, 4)[::2]  # not contiguous
    (r, _) = s.run(None, {"x": x, "y": np.zeros((3, 4), np.float32)})
    np.testing.assert_array_equal(r, x)
    # A float64 array where float is expected: ONNX Runtime's INVALID_ARGUMENT.
    with pytest.raises(ort.InvalidArgument) as e:
        s.run(None, {"x": x.astype(np.float64), "y": np.zeros((3, 4), np.float32)})
    assert e.value.code == 2 and "x" in e.value.message
    # Strings for a float input (string inputs are supported since issue 15): the session's type check.
    with pytest.raises(ort.InvalidArgument, match="input 'x' expects element type float but got string"):
        s.run(None, {"x": np.array([["a"] * 4] * 3), "y": np.zeros((3, 4), np.float32)})


def test_ortvalue(ort):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = ort.OrtValue.ortvalue_from_numpy(a)
    assert v.is_tensor() and v.has_value() and not v.is_tensor_sequence()
    assert v.shape() == [3, 4] and v.data_type() == "tensor(float)" and v.element_type() == TensorProto.FLOAT
    assert v.tensor_size_in_bytes() == 48 and v.device_name() == "cpu"
    assert v.data_ptr() == a.ctypes.data  # over the array's memory, as ONNX Runtime on the CPU
    np.testing.assert_array_equal(v.numpy(), a)
    z = ort.OrtValue.ortvalue_from_shape_and_type([2, 5], np.int64)
    assert z.data_type() == "tensor(int64)" and z.numpy().sum() == 0
    s = ort.InferenceSession(add_relu_model().SerializeToString())
    outs = s.run_with_ort_values(["r"], {"x": v, "y": ort.OrtValue.ortvalue_from_numpy(-a)})
    assert isinstance(outs[0], ort.OrtValue)
    np.testing.assert_array_equal(outs[0].numpy(), np.zeros((3, 4), np.float32))


def test_session_options(ort, tmp_path):
    so = ort.SessionOptions()
    assert so.intra_op_num_threads == 0 and not so.has_providers()
    so.intra_op_num_threads = 1
    assert so.intra_op_num_threads == 1
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.add_session_config_entry("ep.context_embed_mode", "1")
    assert so.get_session_config_entry("ep.context_embed_mode") == "1"
    with pytest.raises(RuntimeError, match="does not have configuration with key: nope"):
        so.get_session_config_entry("nope")
    with pytest.raises(ort.InvalidArgument):
        so.add_session_config_entry("", "1")
    with pytest.raises(AttributeError):  # options epctx does not have are not silently accepted
        so.enable_mem_pattern = False
    so.add_free_dimension_override_by_name("N", 3)
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "prof")
    s = ort.InferenceSession(add_relu_model().SerializeToString(), sess_options=so)
    assert s.get_inputs()[0].shape == [3, 4]  # the override fixed N
    s.run(None, {"x": np.ones((3, 4), np.float32), "y": np.ones((3, 4), np.float32)})
    profile = s.end_profiling()
    assert os.path.basename(profile).startswith("prof") and os.path.getsize(profile) > 0
    # The session keeps a copy: later changes to `so` do not reach it.
    so.add_session_config_entry("ep.context_embed_mode", "0")
    assert s.get_session_options().get_session_config_entry("ep.context_embed_mode") == "1"
    for name in ("DEFAULT", "PREFER_CPU", "PREFER_NPU", "PREFER_GPU", "MAX_PERFORMANCE", "MAX_EFFICIENCY",
                 "MIN_OVERALL_POWER"):
        p = ort.SessionOptions()
        p.set_provider_selection_policy(getattr(ort.OrtExecutionProviderDevicePolicy, name))
        assert p.has_providers()
        assert ort.InferenceSession(add_relu_model().SerializeToString(), p).get_providers()[-1] == \
            "CPUExecutionProvider"


def test_providers_argument_registers_bundled_aotcpu(ort):
    assert AOT in ort.get_available_providers()
    assert ort.get_available_providers()[-1] == "CPUExecutionProvider"
    m = mlp_model()
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    s = ort.InferenceSession(m.SerializeToString(), providers=[AOT, "CPUExecutionProvider"])
    assert s.get_providers() == [AOT, "CPUExecutionProvider"]
    assert set(s.get_partition_assignments().values()) == {AOT}
    np.testing.assert_allclose(s.run(None, {"x": x})[0], mlp_reference(m, x), rtol=1e-4, atol=1e-5)
    assert any(d.ep_name == AOT for d in ort.get_ep_devices())  # registered as "aotcpu" on first use
    # (name, options) tuples and provider_options, as ONNX Runtime normalizes them.
    s2 = ort.InferenceSession(m.SerializeToString(), providers=[(AOT, {"enable_prepare_and_load": 0})])
    assert s2.get_provider_options() == {AOT: {"enable_prepare_and_load": "0"}, "CPUExecutionProvider": {}}
    with pytest.raises(ValueError):
        ort.InferenceSession(m.SerializeToString(), providers=[AOT], provider_options=[{}, {}])
    # An unavailable provider is dropped with ONNX Runtime's warning.
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s3 = ort.InferenceSession(m.SerializeToString(), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert s3.get_providers() == ["CPUExecutionProvider"]
    assert any("CUDAExecutionProvider" in str(x.message) for x in w)


def test_session_report_says_why_nodes_stay_on_the_cpu_ep(ort):
    # add_relu_model has a free dim N. By default (issue 27) AotCpu keeps it free and takes every node; with
    # dynamic_shapes=0 it takes nothing and says why, per node.
    m = add_relu_model().SerializeToString()
    r = ort.InferenceSession(m, providers=[AOT]).get_session_report()
    assert r["left_on_cpu"] == [] and {p["ep"] for p in r["partitions"]} == {AOT}, r
    r = ort.InferenceSession(m, providers=[(AOT, {"dynamic_shapes": "0"})]).get_session_report()
    assert r["free_dims"] == [{"input": "x", "dim": 0, "symbol": "N"}, {"input": "y", "dim": 0, "symbol": ""}]
    left = {n["node"] if n["node"] else n["op"]: n["reasons"][AOT] for n in r["left_on_cpu"]}
    assert set(left) == {"Add", "Relu", "Cast"}, r["left_on_cpu"]
    assert "dim 0 is free ('N'); pin it with -f N:N" in left["Add"] or "dim 0 is unknown" in left["Add"], left
    so = ort.SessionOptions()
    so.add_free_dimension_override_by_name("N", 3)
    r = ort.InferenceSession(m, so, providers=[AOT]).get_session_report()
    assert [d["symbol"] for d in r["free_dims"]] == [""]  # y's unnamed dim stays free


def test_devices_and_library_registration(ort):
    devices = ort.get_ep_devices()
    cpu = devices[0]
    assert cpu.ep_name == "CPUExecutionProvider" and cpu.device.type == ort.OrtHardwareDeviceType.CPU
    assert isinstance(cpu.device.vendor_id, int) and isinstance(cpu.device.device_id, int)
    assert cpu.device.metadata["is_virtual"] == "0" and isinstance(cpu.ep_metadata, dict)
    ort.register_execution_provider_library("example_t", ort.get_library_path("example"))
    try:
        ex = [d for d in ort.get_ep_devices() if d.ep_name == "ExampleExecutionProvider"]
        assert len(ex) == 1 and ex[0].ep_vendor
        with pytest.raises(ort.Fail) as e:  # duplicate registration name
            ort.register_execution_provider_library("example_t", ort.get_library_path("example"))
        assert e.value.code == 1
        so = ort.SessionOptions()
        so.add_provider_for_devices(ex, {})
        assert so.has_providers()
        m = make_model([helper.make_node("Add", ["x", "x"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
                       [vi("x", TensorProto.FLOAT, [2, 2])], [vi("z", TensorProto.FLOAT, [2, 2])])
        s = ort.InferenceSession(m.SerializeToString(), so)
        assert s.get_providers() == ["ExampleExecutionProvider", "CPUExecutionProvider"]
        x = np.array([[1, -2], [3, -4]], np.float32)
        np.testing.assert_array_equal(s.run(None, {"x": x})[0], np.maximum(2 * x, 0))
        del s
    finally:
        ort.unregister_execution_provider_library("example_t")
    # A device whose library is gone raises instead of dangling.
    with pytest.raises(ort.InvalidArgument, match="no longer valid"):
        ort.SessionOptions().add_provider_for_devices(ex, {})
    with pytest.raises(ort.Fail):
        ort.unregister_execution_provider_library("example_t")
    with pytest.raises(ort.Fail):
        ort.register_execution_provider_library("missing", "/nonexistent/libnothing.so")


def test_error_classes(ort, tmp_path):
    from epctx.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, ModelRequiresCompilation
    assert Fail is ort.Fail and InvalidArgument is ort.InvalidArgument
    assert ModelRequiresCompilation is ort.ModelRequiresCompilation
    names = ["Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError", "RuntimeException",
             "InvalidProtobuf", "ModelLoaded", "NotImplemented", "InvalidGraph", "EPFail", "ModelLoadCanceled",
             "ModelRequiresCompilation", "NotFound"]
    for n in names:
        cls = getattr(ort, n)
        assert issubclass(cls, ort.EpctxError) and issubclass(cls, RuntimeError), n
    with pytest.raises(ort.NoSuchFile) as e:
        ort.InferenceSession(str(tmp_path / "missing.onnx"))
    assert e.value.code == 3 and e.value.code_name == "NO_SUCHFILE"
    assert str(e.value).startswith("[ONNXRuntimeError] : 3 : NO_SUCHFILE : ")
    with pytest.raises(ort.InvalidProtobuf) as e:
        ort.InferenceSession(b"this is not a model")
    assert e.value.code == 7
    bad = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", TensorProto.FLOAT, [2])],
                     [vi("y", TensorProto.FLOAT, [2])])
    bad.graph.node[0].input[0] = "undefined_value"
    with pytest.raises(ort.InvalidGraph) as e:
        ort.InferenceSession(bad.SerializeToString())
    assert e.value.code == 10
    # JIT compilation disabled and AotCpu asked to compile: ONNX Runtime's MODEL_REQUIRES_COMPILATION.
    so = ort.SessionOptions()
    so.add_session_config_entry("session.disable_model_compile", "1")
    so.add_provider(AOT)
    with pytest.raises(ort.ModelRequiresCompilation, match="needs to compile") as e:
        ort.InferenceSession(mlp_model().SerializeToString(), sess_options=so, enable_fallback=False)
    assert e.value.code == 13


def test_import_from_another_folder(tmp_path):
    """The package works from any working directory (CTest sets PYTHONPATH; the README's build installs a .pth)."""
    r = subprocess.run([sys.executable, "-c", "import epctx, os; print(epctx.__version__, "
                        "os.path.exists(epctx.get_library_path()))"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[1] == "True"


def test_install_script_writes_a_pth_file(ort, tmp_path):
    """scripts/install_python.sh (run by scripts/build.sh for build/) points a .pth file at the build's python/."""
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(ort.__file__))))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run(["bash", os.path.join(root, "scripts", "install_python.sh"), build, "--site", str(tmp_path)],
                   check=True)
    assert (tmp_path / "epctx.pth").read_text().strip() == os.path.join(build, "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-S", "-c", f"import site; site.addsitedir({str(tmp_path)!r}); "
                        "import epctx; print(epctx.__file__)"], cwd="/", env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == os.path.join(build, "python", "epctx", "__init__.py")
