#!/usr/bin/python3
"""Writes the hand-made regression models of tests/difftest/regress/ (each the smallest form of a bug the
differential tester found; the tester's own shrunk models sit beside them). Run: make_regress.py [DIR].

Every model carries the generator's metadata (value shapes, longest reduction) so difftest.py --regress treats it
like a generated one."""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def model(name, nodes, inputs, outputs, inits, shapes, max_k, opset=11):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, F, s) for n, s in outputs],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="epctx-difftest")
    m.ir_version = 8
    for k, v in (("difftest.max_k", str(max_k)),
                 ("difftest.shapes", json.dumps({n: [F, list(s)] for n, s in shapes.items()}))):
        p = m.metadata_props.add()
        p.key, p.value = k, v
    onnx.checker.check_model(m, full_check=True)
    return m


def const_node(name, arr):
    return helper.make_node("Constant", [], [name], name=name + "_node", value=numpy_helper.from_array(arr, name))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "regress")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(13)
    models = {}

    # Issue 13's PaddlePaddle affine pair after a MatMul: y = Mul(w, x), z = Add(y, b), w and b [1]-shaped
    # Constant nodes, w first. Both became eltwise linear post-ops of the matmul and oneDNN 2.6 ran the second
    # with the first's parameters (z = x * w * w).
    w = (rng.standard_normal((16, 8)) / 4).astype(np.float32)
    models["paddle_affine_matmul"] = model(
        "paddle_affine_matmul",
        [const_node("w1", np.asarray([1.7], np.float32)), const_node("b1", np.asarray([-0.6], np.float32)),
         helper.make_node("MatMul", ["x", "W"], ["x1"], name="matmul"),
         helper.make_node("Mul", ["w1", "x1"], ["y"], name="affine_mul"),
         helper.make_node("Add", ["y", "b1"], ["z"], name="affine_add")],
        [("x", [1, 10, 16])], [("z", [1, 10, 8])], {"W": w},
        {"x": [1, 10, 16], "x1": [1, 10, 8], "y": [1, 10, 8], "z": [1, 10, 8], "w1": [1], "b1": [1]}, 16)

    # The same pair after a Mul of two computed tensors (a oneDNN binary step with post-ops), then a LeakyRelu
    # pair (two relu post-ops with different alphas).
    models["binary_post_op_pairs"] = model(
        "binary_post_op_pairs",
        [const_node("w1", np.asarray([1.7], np.float32)), const_node("b1", np.asarray([-0.6], np.float32)),
         helper.make_node("Mul", ["x", "x2"], ["x1"], name="product"),
         helper.make_node("Mul", ["w1", "x1"], ["y"], name="affine_mul"),
         helper.make_node("Add", ["y", "b1"], ["z"], name="affine_add"),
         helper.make_node("LeakyRelu", ["z"], ["r1"], name="leaky1", alpha=0.1),
         helper.make_node("LeakyRelu", ["r1"], ["r2"], name="leaky2", alpha=0.5)],
        [("x", [2, 3, 5, 7]), ("x2", [2, 3, 5, 7])], [("r2", [2, 3, 5, 7])], {},
        {k: [2, 3, 5, 7] for k in ("x", "x2", "x1", "y", "z", "r1", "r2")} | {"w1": [1], "b1": [1]}, 1)

    # Two Clips after a convolution whose kernel is one of oneDNN's JIT ones (the same shared-parameter bug), the
    # second with only a max: before the fix its missing min was -inf, which the context binary's parser refuses
    # ("step N has a non-finite float parameter") and which differs from the CPU EP for -inf inputs.
    cw = (rng.standard_normal((16, 16, 3, 3)) / 12).astype(np.float32)
    models["conv_clip_pair"] = model(
        "conv_clip_pair",
        [helper.make_node("Conv", ["x", "cw"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Clip", ["c", "lo", "hi"], ["k1"], name="clip1"),
         helper.make_node("Clip", ["k1", "", "hi2"], ["k2"], name="clip2_max_only")],
        [("x", [1, 16, 9, 9])], [("k2", [1, 16, 9, 9])],
        {"cw": cw, "lo": np.asarray(-0.5, np.float32), "hi": np.asarray(0.8, np.float32),
         "hi2": np.asarray(0.3, np.float32)},
        {"x": [1, 16, 9, 9], "c": [1, 16, 9, 9], "k1": [1, 16, 9, 9], "k2": [1, 16, 9, 9]}, 144)

    # Issue 27 item 5: difftest seed 20261127 model 5985 (committed beside this as its shrunk form) ran a Slice whose
    # result is empty at the second shape, and AotCpu failed the run ("not supported: empty result"). Here the rows a
    # Slice counted from the end selects are empty at a larger second size (16 -> 32 under --regress's seed 0), and
    # every op family after it meets the empty tensor: MatMul and Softmax (empty results), ReduceSum / ReduceMax over
    # the empty axis (0 and -inf, clipped), Concat with an empty operand, MatMul and Gemm with K = 0 (zeros; beta * C).
    ew = (rng.standard_normal((6, 8)) / 4).astype(np.float32)
    ec = rng.standard_normal(6).astype(np.float32)
    models["empty_slice_families"] = model(
        "empty_slice_families",
        [helper.make_node("Slice", ["x", "st", "en", "ax"], ["s"], name="rows_from_end"),
         helper.make_node("MatMul", ["s", "ew"], ["m"], name="matmul_m"),
         helper.make_node("Relu", ["m"], ["r"], name="relu"),
         helper.make_node("Softmax", ["r"], ["sm"], name="softmax", axis=1),
         helper.make_node("ReduceSum", ["s"], ["red"], name="reduce_sum", axes=[0], keepdims=1),
         helper.make_node("ReduceMax", ["s"], ["mx"], name="reduce_max", axes=[0], keepdims=1),
         helper.make_node("Clip", ["mx", "lo", "hi"], ["mc"], name="clip"),
         helper.make_node("Concat", ["s", "red", "mc"], ["c"], name="concat", axis=0),
         helper.make_node("Transpose", ["s"], ["t"], name="transpose", perm=[1, 0]),
         helper.make_node("MatMul", ["t", "s"], ["g"], name="matmul_k"),
         helper.make_node("Gemm", ["s", "s", "ec"], ["gm"], name="gemm_k", transA=1, beta=0.5)],
        [("x", [16, 6])], [("sm", [1, 8]), ("c", [3, 6]), ("g", [6, 6]), ("gm", [6, 6])],
        {"st": np.asarray([-5], np.int64), "en": np.asarray([12], np.int64), "ax": np.asarray([0], np.int64),
         "ew": ew, "ec": ec, "lo": np.asarray(-1, np.float32), "hi": np.asarray(1, np.float32)},
        {"x": [16, 6], "s": [1, 6], "m": [1, 8], "r": [1, 8], "sm": [1, 8], "red": [1, 6], "mx": [1, 6],
         "mc": [1, 6], "c": [3, 6], "t": [6, 1], "g": [6, 6], "gm": [6, 6]}, 16)

    for name, m in models.items():
        onnx.save(m, os.path.join(out, name + ".onnx"))
        print("wrote", os.path.join(out, name + ".onnx"))


if __name__ == "__main__":
    main()
