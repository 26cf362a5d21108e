"""Fixtures for the epctx Python tests (run by CTest: /usr/bin/python3 -m pytest tests/python, with PYTHONPATH set
to the build's python/ folder; by hand: PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/python).

The package keeps one Env per process, as ONNX Runtime's does: a library registered by one test stays registered for
the next. Tests that register libraries use their own registration names and unregister them."""
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AOT = "AotCpuExecutionProvider"


def make_model(nodes, inputs, outputs, initializers=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def mlp_model(seed=0, with_cpu_tail=False):
    """x[8,64] -> MatMul W1 -> Add b1 -> Relu -> MatMul W2 -> y[8,32]: one AotCpu partition. With with_cpu_tail, a
    PRelu(Mod(y, A, fmod=1), zero) with a 1 KiB initializer A and a 4-byte one, zero, follows: AotCpu compiles neither
    op, so A and zero stay initializers of the compiled model (what initializer handlers and external initializer
    files see). (It was Where(Greater(y, zero), A, zero) until AotCpu compiled Where, issue 27.)"""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((64, 128)).astype(np.float32) * 0.1
    b1 = rng.standard_normal((128,)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((128, 32)).astype(np.float32) * 0.1
    inits = [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(w2, "W2")]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]), helper.make_node("MatMul", ["h2", "W2"], ["y"])]
    out = "y"
    if with_cpu_tail:
        a = rng.standard_normal((8, 32)).astype(np.float32)
        zero = np.zeros((1,), np.float32)
        inits += [numpy_helper.from_array(a, "A"), numpy_helper.from_array(zero, "zero")]
        nodes += [helper.make_node("Mod", ["y", "A"], ["m"], fmod=1),
                  helper.make_node("PRelu", ["m", "zero"], ["z"])]
        out = "z"
    return make_model(nodes, [vi("x", TensorProto.FLOAT, [8, 64])], [vi(out, TensorProto.FLOAT, [8, 32])], inits)


def mlp_reference(model, x):
    """numpy evaluation of mlp_model."""
    w = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    y = np.maximum(x @ w["W1"] + w["b1"], 0) @ w["W2"]
    if "A" in w:
        m = np.fmod(y, w["A"])
        y = np.where(m > 0, m, m * w["zero"])
    return y


@pytest.fixture(scope="session")
def ort():
    import epctx
    return epctx


@pytest.fixture(scope="session")
def decoder_dir(tmp_path_factory):
    """The project's small decoder (prefill.onnx, decode.onnx, decoder.weights as external data)."""
    out = tmp_path_factory.mktemp("decoder")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "models", "make_decoder.py"), "--out", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    return out


def decoder_feeds(seq=16, past=16, seed=3):
    """Inputs for prefill (seq tokens) and decode (past KV of `past` positions) of the small decoder."""
    rng = np.random.default_rng(seed)
    prefill = {"input_ids": rng.integers(0, 1000, (1, seq), dtype=np.int64)}
    decode = {"input_ids": rng.integers(0, 1000, (1, 1), dtype=np.int64)}
    for i in range(2):
        decode[f"past_key_{i}"] = rng.standard_normal((1, 4, past, 32)).astype(np.float32)
        decode[f"past_value_{i}"] = rng.standard_normal((1, 4, past, 32)).astype(np.float32)
    return prefill, decode


def assert_outputs_close(got, want, rtol=1e-4, atol=1e-4):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
