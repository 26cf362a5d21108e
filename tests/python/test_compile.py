"""epctx.ModelCompiler: outputs (file, bytes, stream), initializer placement, flags and the errors ONNX Runtime's
Python raises (ValueError / TypeError from argument checks, Fail / InvalidArgument from the compile)."""
import os

import numpy as np
import onnx
import pytest

from conftest import AOT, mlp_model, mlp_reference


@pytest.fixture
def aot_options(ort):
    so = ort.SessionOptions()
    so.add_provider(AOT)
    return so


def x_input(seed=4):
    return np.random.default_rng(seed).standard_normal((8, 64)).astype(np.float32)


def test_compile_to_file_default_name_and_binary(ort, aot_options, tmp_path):
    model = mlp_model(seed=1)
    onnx.save(model, tmp_path / "net.onnx")
    ort.ModelCompiler(aot_options, tmp_path / "net.onnx").compile_to_file()  # os.PathLike accepted
    assert (tmp_path / "net_ctx.onnx").exists() and (tmp_path / "net_ctx_aotcpu.bin").exists()
    ctx = onnx.load(str(tmp_path / "net_ctx.onnx"))
    onnx.checker.check_model(ctx)
    assert [n.op_type for n in ctx.graph.node] == ["EPContext"] and not ctx.graph.initializer
    s = ort.InferenceSession(str(tmp_path / "net_ctx.onnx"), aot_options)
    x = x_input()
    np.testing.assert_allclose(s.run(None, {"x": x})[0], mlp_reference(model, x), rtol=1e-4, atol=1e-5)
    assert s.get_session_report()["partitions"]  # epctx's report: the partition loaded from the binary


def test_compile_bytes_to_bytes_embedded(ort, aot_options, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = mlp_model(seed=2)
    compiler = ort.ModelCompiler(aot_options, model.SerializeToString(), embed_compiled_data_into_model=True)
    out = compiler.compile_to_bytes()
    assert isinstance(out, bytes) and len(out) > 0
    assert os.listdir(tmp_path) == []  # everything is in the returned model
    x = x_input()
    s = ort.InferenceSession(out, aot_options)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], mlp_reference(model, x), rtol=1e-4, atol=1e-5)
    # The compiler can be reused; the stream gets the same model in chunks.
    chunks = []
    compiler.compile_to_stream(chunks.append)
    assert b"".join(chunks) == out


def test_external_initializers_file(ort, aot_options, tmp_path):
    model = mlp_model(seed=3, with_cpu_tail=True)
    onnx.save(model, tmp_path / "m.onnx")
    compiler = ort.ModelCompiler(aot_options, str(tmp_path / "m.onnx"), external_initializers_file_path="m_ext.bin",
                                 external_initializers_size_threshold=512)
    compiler.compile_to_file(str(tmp_path / "m_ctx.onnx"))
    assert os.path.getsize(tmp_path / "m_ext.bin") >= 8 * 32 * 4  # A (1 KiB) moved out, "zero" stayed
    x = x_input()
    s = ort.InferenceSession(str(tmp_path / "m_ctx.onnx"), aot_options)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], mlp_reference(model, x), rtol=1e-4, atol=1e-5)


def test_initializer_handler_externalizes_large_tensors(ort, tmp_path):
    """Compiled with no EP (the CPU EP runs everything), every initializer goes through the handler."""
    model = mlp_model(seed=6, with_cpu_tail=True)
    onnx.save(model, tmp_path / "in.onnx")
    calls = []
    with open(tmp_path / "weights.bin", "wb") as f:
        def handler(name, value, external_info):
            calls.append(name)
            assert external_info is None and value.is_tensor()
            if value.tensor_size_in_bytes() < 1024:
                return None
            offset = f.tell()
            f.write(value.numpy().tobytes())
            f.flush()  # epctx checks the returned location while compiling (see test_spec_examples.py)
            return ort.OrtExternalInitializerInfo("weights.bin", offset, value.tensor_size_in_bytes())

        ort.ModelCompiler(ort.SessionOptions(), str(tmp_path / "in.onnx"),
                          get_initializer_location_func=handler).compile_to_file(str(tmp_path / "out.onnx"))
    assert calls == sorted(calls) and set(calls) == {"A", "W1", "W2", "b1", "zero"}
    out = onnx.load(str(tmp_path / "out.onnx"), load_external_data=False)
    external = {t.name for t in out.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
    assert external == {"A", "W1", "W2"}  # b1 (512 bytes) and zero stayed inline
    x = x_input()
    s = ort.InferenceSession(str(tmp_path / "out.onnx"))
    np.testing.assert_allclose(s.run(None, {"x": x})[0], mlp_reference(model, x), rtol=1e-4, atol=1e-5)


def test_callbacks_that_raise_or_misbehave(ort, aot_options, tmp_path):
    model = mlp_model(seed=8, with_cpu_tail=True)
    onnx.save(model, tmp_path / "in.onnx")

    def write(buf):
        raise ValueError("My Python Error")

    with pytest.raises(ort.Fail, match="My Python Error") as e:
        ort.ModelCompiler(aot_options, str(tmp_path / "in.onnx")).compile_to_stream(write)
    assert e.value.code == 1

    def handler_raises(name, value, info):
        raise KeyError("no place for " + name)

    with pytest.raises(ort.Fail, match="no place for"):
        ort.ModelCompiler(aot_options, str(tmp_path / "in.onnx"),
                          get_initializer_location_func=handler_raises).compile_to_bytes()

    with pytest.raises(ort.InvalidArgument, match="OrtExternalInitializerInfo or None"):
        ort.ModelCompiler(aot_options, str(tmp_path / "in.onnx"),
                          get_initializer_location_func=lambda n, v, i: "elsewhere").compile_to_bytes()

    kept = []
    ort.ModelCompiler(aot_options, str(tmp_path / "in.onnx"),
                      get_initializer_location_func=lambda n, v, i: kept.append(v)).compile_to_bytes()
    assert kept
    with pytest.raises(ort.InvalidArgument, match="only valid during the callback"):
        kept[0].numpy()  # the value borrowed the compiler's memory


def test_flags(ort, tmp_path):
    model = mlp_model(seed=9)
    onnx.save(model, tmp_path / "in.onnx")
    out = tmp_path / "out.onnx"
    # CPU EP only: nothing compiles.
    c = ort.ModelCompiler(ort.SessionOptions(), str(tmp_path / "in.onnx"),
                          flags=ort.OrtCompileApiFlags.ERROR_IF_NO_NODES_COMPILED)
    with pytest.raises(ort.Fail, match="Unable to compile any nodes"):
        c.compile_to_file(str(out))
    assert not out.exists()
    c = ort.ModelCompiler(ort.SessionOptions(), str(tmp_path / "in.onnx"),
                          flags=ort.OrtCompileApiFlags.ERROR_IF_OUTPUT_FILE_EXISTS,
                          graph_optimization_level=ort.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    c.compile_to_file(str(out))
    with pytest.raises(ort.Fail, match="exists already"):
        c.compile_to_file(str(out))
    both = ort.OrtCompileApiFlags.ERROR_IF_NO_NODES_COMPILED | ort.OrtCompileApiFlags.ERROR_IF_OUTPUT_FILE_EXISTS
    with pytest.raises(ort.Fail):
        ort.ModelCompiler(ort.SessionOptions(), str(tmp_path / "in.onnx"), flags=both).compile_to_file(str(out))


def test_argument_errors(ort, aot_options, tmp_path):
    with pytest.raises(ValueError, match="Input model path is empty"):
        ort.ModelCompiler(aot_options, "")
    with pytest.raises(ValueError, match="Input model bytes array is empty"):
        ort.ModelCompiler(aot_options, b"")
    with pytest.raises(TypeError):
        ort.ModelCompiler(aot_options, 3.5)
    with pytest.raises(ValueError, match="both"):
        ort.ModelCompiler(aot_options, "m.onnx", external_initializers_file_path="w.bin",
                          get_initializer_location_func=lambda n, v, i: None)
    with pytest.raises(TypeError):
        ort.ModelCompiler(aot_options, "m.onnx").compile_to_file(42)
    with pytest.raises(ort.InvalidArgument, match="does not exist"):
        ort.ModelCompiler(aot_options, str(tmp_path / "missing.onnx")).compile_to_file()
    # Bytes in, no output location: the output path cannot be derived.
    with pytest.raises(ort.EpctxError):
        ort.ModelCompiler(aot_options, mlp_model().SerializeToString()).compile_to_file()


def test_compile_after_model_requires_compilation(ort, tmp_path):
    """ONNX Runtime's test_fail_load_uncompiled_model_and_then_compile with AotCpu."""
    model = mlp_model(seed=10)
    onnx.save(model, tmp_path / "in.onnx")
    so = ort.SessionOptions()
    so.add_session_config_entry("session.disable_model_compile", "1")
    so.add_provider(AOT)
    with pytest.raises(ort.ModelRequiresCompilation, match="needs to compile"):
        ort.InferenceSession(str(tmp_path / "in.onnx"), sess_options=so)
    compiled = tmp_path / "in.compiled.onnx"
    ort.ModelCompiler(so, str(tmp_path / "in.onnx"), embed_compiled_data_into_model=True).compile_to_file(str(compiled))
    assert so.get_session_config_entry("session.disable_model_compile") == "1" and so.has_providers()
    s = ort.InferenceSession(str(compiled), sess_options=so)
    x = x_input()
    np.testing.assert_allclose(s.run(None, {"x": x})[0], mlp_reference(model, x), rtol=1e-4, atol=1e-5)
