"""ONNX Runtime Python API parity (issue 15): RunOptions (terminate from another thread), string tensors, metadata
(NodeArg, get_modelmeta, get_overridable_initializers), and the type stubs naming every public symbol."""
import ast
import os
import threading
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import AOT, ROOT, make_model, vi

STR = TensorProto.STRING
F = TensorProto.FLOAT


# ---- RunOptions ----

def test_run_options_values_and_validation(ort):
    ro = ort.RunOptions()
    assert ro.log_severity_level == -1 and ro.log_verbosity_level == 0 and ro.run_tag == "" and ro.terminate is False
    ro.log_severity_level = 3
    ro.log_verbosity_level = 2
    ro.run_tag = "batch-7"
    assert (ro.log_severity_level, ro.log_verbosity_level, ro.run_tag, ro.logid) == (3, 2, "batch-7", "batch-7")
    ro.logid = "other"
    assert ro.run_tag == "other"
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    ro.add_run_config_entry("k", "1")
    ro.add_run_config_entry("k", "2")
    assert ro.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    assert ro.get_run_config_entry("k") == "2"
    with pytest.raises(RuntimeError, match="does not have configuration with key: missing"):
        ro.get_run_config_entry("missing")
    with pytest.raises(ort.InvalidArgument, match="severity level 7"):
        ro.log_severity_level = 7
    assert ro.log_severity_level == 3
    with pytest.raises(ort.InvalidArgument, match="verbosity level -2"):
        ro.log_verbosity_level = -2
    with pytest.raises(ort.InvalidArgument, match="key is empty"):
        ro.add_run_config_entry("", "x")
    with pytest.raises(AttributeError):  # not supported (docs/python.md): an error, not a silent no-op
        ro.only_execute_path_to_fetches = True


def test_run_accepts_run_options(ort):
    m = make_model([helper.make_node("Add", ["a", "b"], ["c"])], [vi("a", F, [2]), vi("b", F, [2])], [vi("c", F, [2])])
    sess = ort.InferenceSession(m.SerializeToString())
    ro = ort.RunOptions()
    ro.run_tag = "t"
    a, b = np.array([1, 2], np.float32), np.array([10, 20], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"a": a, "b": b}, ro)[0], [11, 22])
    np.testing.assert_array_equal(sess.run(["c"], {"a": a, "b": b}, run_options=ro)[0], [11, 22])
    outs = sess.run_with_ort_values(None, {"a": ort.OrtValue.ortvalue_from_numpy(a),
                                           "b": ort.OrtValue.ortvalue_from_numpy(b)}, ro)
    np.testing.assert_array_equal(outs[0].numpy(), [11, 22])
    with pytest.raises(TypeError, match="run_options must be an epctx.RunOptions or None, not 'dict'"):
        sess.run(None, {"a": a, "b": b}, {"terminate": True})
    # A run started with the flag set fails at once; unsetting it lets the next run through.
    ro.terminate = True
    with pytest.raises(ort.Fail, match="Exiting due to terminate flag being set to true"):
        sess.run(None, {"a": a, "b": b}, ro)
    ro.terminate = False
    np.testing.assert_array_equal(sess.run(None, {"a": a, "b": b}, ro)[0], [11, 22])


def long_loop_model(trips):
    """A Loop of `trips` iterations, each adding 1 to a [64] float vector: runs for many seconds unless stopped."""
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "one"], ["v_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("v_in", F, [64])],
        [vi("cond_out", TensorProto.BOOL, []), vi("v_out", F, [64])],
        [numpy_helper.from_array(np.ones(64, np.float32), "one")])
    nodes = [helper.make_node("Loop", ["trips", "cond", "v0"], ["v"], body=body)]
    inits = [numpy_helper.from_array(np.array(trips, np.int64), "trips"),
             numpy_helper.from_array(np.array(True), "cond")]
    return make_model(nodes, [vi("v0", F, [64])], [vi("v", F, [64])], inits)


def test_terminate_from_another_thread_stops_a_running_run(ort):
    # Calibrate: how long do 2000 iterations take? The long run gets enough iterations for >= ~60 s.
    small = ort.InferenceSession(long_loop_model(2000).SerializeToString())
    v0 = np.zeros(64, np.float32)
    t0 = time.perf_counter()
    np.testing.assert_array_equal(small.run(None, {"v0": v0})[0], np.full(64, 2000, np.float32))
    per_trip = max((time.perf_counter() - t0) / 2000, 1e-7)
    trips = int(min(60.0 / per_trip, 2**40))
    sess = ort.InferenceSession(long_loop_model(trips).SerializeToString())
    ro = ort.RunOptions()
    result = {}

    def run():
        t = time.perf_counter()
        try:
            sess.run(None, {"v0": v0}, ro)
            result["outcome"] = "finished"
        except Exception as e:  # noqa: BLE001 - recorded and checked below
            result["outcome"] = e
        result["seconds"] = time.perf_counter() - t

    th = threading.Thread(target=run)
    th.start()
    time.sleep(0.3)
    assert th.is_alive(), "the long run finished before terminate was set"
    ro.terminate = True
    th.join(timeout=30)
    assert not th.is_alive(), "terminate did not stop the run within 30 s"
    e = result["outcome"]
    assert isinstance(e, ort.Fail), e
    assert e.message == "Exiting due to terminate flag being set to true."  # ONNX Runtime's, no node context
    assert e.code_name == "FAIL"
    assert result["seconds"] < 30
    # The same options reset, and a fresh session run, still work.
    ro.terminate = False
    np.testing.assert_array_equal(small.run(None, {"v0": v0}, ro)[0], np.full(64, 2000, np.float32))


# ---- strings ----

def string_model():
    """s[2,2] (string) -> Identity, Concat with a constant string row, Gather, Reshape, Equal; and a Cast of
    numeric strings to float."""
    row = numpy_helper.from_array(np.array([["x", "y"]], dtype=object), "row")
    idx = numpy_helper.from_array(np.array([1, 0], np.int64), "idx")
    flat = numpy_helper.from_array(np.array([-1], np.int64), "flat")
    ref = numpy_helper.from_array(np.array(["b"], dtype=object), "ref")
    nodes = [helper.make_node("Identity", ["s"], ["ident"]),
             helper.make_node("Concat", ["s", "row"], ["cat"], axis=0),
             helper.make_node("Gather", ["s", "idx"], ["gath"], axis=0),
             helper.make_node("Reshape", ["s", "flat"], ["resh"]),
             helper.make_node("Equal", ["resh", "ref"], ["eq"]),
             helper.make_node("Cast", ["nums"], ["as_float"], to=F)]
    return make_model(nodes, [vi("s", STR, [2, 2]), vi("nums", STR, [3])],
                      [vi("ident", STR, [2, 2]), vi("cat", STR, [3, 2]), vi("gath", STR, [2, 2]),
                       vi("resh", STR, [4]), vi("eq", TensorProto.BOOL, [4]), vi("as_float", F, [3])],
                      [row, idx, flat, ref], opset=13)


@pytest.mark.parametrize("make_input", [
    lambda a: a.astype(object),  # ONNX Runtime's usual spelling
    lambda a: a.astype(str),     # numpy unicode
    lambda a: np.char.encode(a.astype(str), "utf-8"),  # bytes
])
def test_string_inputs_and_outputs(ort, make_input):
    sess = ort.InferenceSession(string_model().SerializeToString())
    s = np.array([["a", "b"], ["ç日本", ""]])
    nums = np.array(["1.5", "-2", "1e3"])
    ident, cat, gath, resh, eq, as_float = sess.run(None, {"s": make_input(s), "nums": make_input(nums)})
    for out in (ident, cat, gath, resh):
        assert out.dtype == object and all(isinstance(x, str) for x in out.ravel())
    np.testing.assert_array_equal(ident, s.astype(object))
    np.testing.assert_array_equal(cat, np.concatenate([s, [["x", "y"]]]).astype(object))
    np.testing.assert_array_equal(gath, s[[1, 0]].astype(object))
    np.testing.assert_array_equal(resh, s.reshape(-1).astype(object))
    np.testing.assert_array_equal(eq, s.reshape(-1) == "b")
    np.testing.assert_array_equal(as_float, np.array([1.5, -2, 1000], np.float32))
    assert [i.type for i in sess.get_inputs()] == ["tensor(string)", "tensor(string)"]
    assert sess.get_outputs()[4].type == "tensor(bool)"


def test_string_nodes_stay_on_the_cpu_ep_with_aotcpu(ort):
    sess = ort.InferenceSession(string_model().SerializeToString(), providers=[AOT])
    assert sess.get_partition_assignments() == {}
    left = sess.get_session_report()["left_on_cpu"]
    assert {n["op"] for n in left} == {"Identity", "Concat", "Gather", "Reshape", "Equal", "Cast"}
    reasons = {n["op"]: n["reasons"][AOT] for n in left if n["op"] != "Equal"}
    assert reasons.pop("Cast") == "Cast from element type 8 is not computed here"  # 8: string
    assert reasons == dict.fromkeys(["Identity", "Concat", "Gather", "Reshape"], "unsupported element type")
    cat, as_float = sess.run(["cat", "as_float"], {"s": np.array([["a", "b"], ["c", "d"]]),
                                                   "nums": np.array(["0.25", "8", "-1"])})
    np.testing.assert_array_equal(cat, np.array([["a", "b"], ["c", "d"], ["x", "y"]], dtype=object))
    np.testing.assert_array_equal(as_float, np.array([0.25, 8, -1], np.float32))


def test_string_ortvalues(ort):
    sess = ort.InferenceSession(string_model().SerializeToString())
    s = np.array([["p", "q"], ["r", "s"]], dtype=object)
    v = ort.OrtValue.ortvalue_from_numpy(s)
    assert v.data_type() == "tensor(string)" and v.element_type() == TensorProto.STRING and v.shape() == [2, 2]
    np.testing.assert_array_equal(v.numpy(), s)
    with pytest.raises(ort.InvalidArgument, match="undefined for string tensors"):
        v.tensor_size_in_bytes()
    nums = ort.OrtValue.ortvalue_from_numpy(np.array(["4", "5", "6"], dtype=object))
    outs = sess.run_with_ort_values(["cat", "as_float"], {"s": v, "nums": nums})
    np.testing.assert_array_equal(outs[0].numpy(), np.array([["p", "q"], ["r", "s"], ["x", "y"]], dtype=object))
    np.testing.assert_array_equal(outs[1].numpy(), [4, 5, 6])
    empty = ort.OrtValue.ortvalue_from_shape_and_type([2], np.str_)
    assert empty.data_type() == "tensor(string)"
    np.testing.assert_array_equal(empty.numpy(), np.array(["", ""], dtype=object))


def test_bad_string_inputs_raise_clear_errors(ort):
    sess = ort.InferenceSession(string_model().SerializeToString())
    nums = np.array(["1", "2", "3"], dtype=object)
    with pytest.raises(ort.InvalidArgument, match="element 1 of a numpy array of dtype object is a 'int'"):
        sess.run(None, {"s": np.array([["a", 5], ["c", "d"]], dtype=object), "nums": nums})
    with pytest.raises(ort.InvalidArgument, match="bytes element 0 is not valid UTF-8"):
        sess.run(None, {"s": np.array([[b"\xff", b"b"], [b"c", b"d"]]), "nums": nums})
    with pytest.raises(ort.InvalidArgument, match="NUL"):
        sess.run(None, {"s": np.array([["a\0b", "b"], ["c", "d"]], dtype=object), "nums": nums})
    with pytest.raises(ort.InvalidArgument, match="'s'"):  # a float tensor for a string input
        sess.run(None, {"s": np.zeros((2, 2), np.float32), "nums": nums})
    with pytest.raises(ort.InvalidArgument, match="'s'"):  # strings for a float input are refused by the session
        m = make_model([helper.make_node("Relu", ["s"], ["y"])], [vi("s", F, [2])], [vi("y", F, [2])])
        ort.InferenceSession(m.SerializeToString()).run(None, {"s": np.array(["1", "2"], dtype=object)})


# ---- metadata ----

def meta_model():
    w = numpy_helper.from_array(np.full((3,), 2, np.float32), "w")
    bias = numpy_helper.from_array(np.zeros((3,), np.float32), "bias")
    nodes = [helper.make_node("Mul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "bias"], ["y"]),
             helper.make_node("Identity", ["label"], ["label_out"])]
    x = helper.make_tensor_value_info("x", F, ["batch", 3])
    label = helper.make_tensor_value_info("label", STR, [None])
    graph = helper.make_graph(nodes, "meta_graph", [x, label, vi("bias", F, [3])],
                              [vi("y", F, ["batch", 3]), vi("label_out", STR, [None])], [w, bias],
                              doc_string="graph doc")
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="parity-test",
                          domain="ai.epctx.test", doc_string="a model with metadata", model_version=42)
    m.ir_version = 8
    helper.set_model_props(m, {"author": "epctx", "license": "MIT"})
    return m


def test_nodearg_and_model_metadata(ort):
    sess = ort.InferenceSession(meta_model().SerializeToString())
    ins = sess.get_inputs()
    assert [(i.name, i.type, i.shape) for i in ins] == [("x", "tensor(float)", ["batch", 3]),
                                                        ("label", "tensor(string)", [None])]
    outs = sess.get_outputs()
    assert [(o.name, o.type) for o in outs] == [("y", "tensor(float)"), ("label_out", "tensor(string)")]
    assert outs[0].shape == ["batch", 3]
    # Shape inference names the unnamed dim of an output ("unk__0"), as ONNX Runtime reports it.
    assert len(outs[1].shape) == 1 and isinstance(outs[1].shape[0], str) and outs[1].shape[0].startswith("unk__")
    ov = sess.get_overridable_initializers()
    assert [(o.name, o.type, o.shape) for o in ov] == [("bias", "tensor(float)", [3])]
    md = sess.get_modelmeta()
    assert md.producer_name == "parity-test"
    assert md.graph_name == "meta_graph"
    assert md.domain == "ai.epctx.test"
    assert md.description == "a model with metadata"
    assert md.graph_description == "graph doc"
    assert md.version == 42
    assert md.custom_metadata_map == {"author": "epctx", "license": "MIT"}
    # The overridable initializer is used by default and can be fed.
    x = np.array([[1, 2, 3]], np.float32)
    y, lab = sess.run(None, {"x": x, "label": np.array(["l"], dtype=object)})
    np.testing.assert_array_equal(y, x * 2)
    assert lab.tolist() == ["l"]
    y2 = sess.run(["y"], {"x": x, "label": np.array(["l"]), "bias": np.array([1, 1, 1], np.float32)})[0]
    np.testing.assert_array_equal(y2, x * 2 + 1)
    # Providers, their options and the session options.
    assert sess.get_providers() == ["CPUExecutionProvider"]
    so = ort.SessionOptions()
    so.add_session_config_entry("session.parity", "1")
    s2 = ort.InferenceSession(meta_model().SerializeToString(), so, providers=[(AOT, {"k": 5})])
    assert s2.get_providers() == [AOT, "CPUExecutionProvider"]
    assert s2.get_provider_options() == {AOT: {"k": "5"}, "CPUExecutionProvider": {}}
    assert sess.get_provider_options() == {"CPUExecutionProvider": {}}
    assert s2.get_session_options().get_session_config_entry("session.parity") == "1"


def test_metadata_of_a_model_without_any(ort):
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F, [2])], [vi("y", F, [2])])
    md = ort.InferenceSession(m.SerializeToString()).get_modelmeta()
    assert (md.producer_name, md.graph_name, md.domain, md.description, md.version, md.custom_metadata_map) == \
        ("", "g", "", "", 0, {})
    assert ort.InferenceSession(m.SerializeToString()).get_overridable_initializers() == []


# ---- stubs ----

def stub_names(path):
    """Top-level names a .pyi declares (classes, functions, annotated variables, imports)."""
    names = set()
    for node in ast.parse(open(path, encoding="utf-8").read()).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names if a.asname)  # "X as X" re-exports only
    return {n for n in names if not n.startswith("_") or n == "__version__"}


def class_members(path, cls):
    for node in ast.parse(open(path, encoding="utf-8").read()).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            out = set()
            for b in node.body:
                if isinstance(b, ast.FunctionDef):
                    out.add(b.name)
                elif isinstance(b, ast.AnnAssign):
                    out.add(b.target.id)
            return {n for n in out if not n.startswith("_")}
    raise AssertionError(f"{cls} not in {path}")


PKG_STUB = os.path.join(ROOT, "python", "epctx", "__init__.pyi")
EXT_STUB = os.path.join(ROOT, "python", "epctx", "capi", "_epctx.pyi")


def test_package_stub_names_every_public_symbol(ort):
    public = {n for n in dir(ort) if not n.startswith("_")} | {"__version__"}
    assert stub_names(PKG_STUB) == public
    for cls in ("InferenceSession", "ModelCompiler"):
        members = {n for n in dir(getattr(ort, cls)) if not n.startswith("_")}
        assert class_members(PKG_STUB, cls) == members, cls


def test_extension_stub_names_every_public_symbol(ort):
    from epctx.capi import _epctx
    public = {n for n in dir(_epctx) if not n.startswith("_")}
    assert stub_names(EXT_STUB) == public
    for cls in ("SessionOptions", "RunOptions", "OrtValue", "NodeArg", "ModelMetadata", "OrtEpDevice",
                "OrtHardwareDevice", "OrtExternalInitializerInfo", "InferenceSession", "ModelCompiler"):
        members = {n for n in dir(getattr(_epctx, cls)) if not n.startswith("_")}
        assert class_members(EXT_STUB, cls) == members, cls
