#!/usr/bin/python3
"""Conformance models for the ai.onnx op versions of opsets 18-26, references from ONNX Runtime 1.30 (issue 25).

    /usr/bin/python3 tests/opset/gen.py probe --out DIR     one model per (op, version) in VERSIONS, then ORT 1.30
                                                           creates a CPU session for each: writes
                                                           tests/opset/ort_cpu_ops.json and docs/opsets.md
    /usr/bin/python3 tests/opset/gen.py cases --out DIR     the cases of every op version ORT runs on CPU
                                                           (ort_cpu_ops.json): DIR/<case>/{model.onnx,
                                                           test_data_set_0/{input_N.pb, output_N.pb}}, outputs by ORT
    /usr/bin/python3 tests/opset/gen.py doc                docs/opsets.md again from the committed table
    /usr/bin/python3 tests/opset/gen.py list               "case rtol atol run|skip" per line (what CMake registers;
                                                           skip: listed in tests/opset/skips.txt with its reason)

VERSIONS is every ai.onnx op version introduced in opsets 18..26 (ONNX's onnx/defs/operator_sets.h for 18-23, the
ONNX 1.19-1.21 release notes for 24-26). Each version has cases (a single node, or a small graph where the input or
output type cannot cross the test-data format, e.g. float8); the first case is the probe model. Inputs come from a
fixed seed per case; a model is written at opset = the version, with the IR version ONNX released with it.
Uses only Debian's onnx 1.12 (helper.make_* write any opset number; its checker is not run on these models).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
ORT_REF = os.path.join(HERE, "ort_ref.js")
TABLE = os.path.join(HERE, "ort_cpu_ops.json")
DOC = os.path.join(ROOT, "docs", "opsets.md")

# ai.onnx op versions introduced in opsets 18..26.
VERSIONS = {
    18: "Pad CenterCropPad Resize Mish OptionalGetElement OptionalHasElement Split Col2Im ScatterND ScatterElements "
        "ReduceSumSquare ReduceLogSum ReduceLogSumExp ReduceL1 ReduceL2 ReduceMax ReduceMin ReduceMean ReduceProd "
        "BitwiseAnd BitwiseOr BitwiseXor BitwiseNot GroupNormalization LpPool",
    19: "Equal AveragePool Cast CastLike Constant DeformConv DequantizeLinear Identity If Loop Pad QuantizeLinear "
        "Resize Reshape Scan Shape Size",
    20: "AffineGrid ConstantOfShape DFT Gelu GridSample ImageDecoder IsInf IsNaN ReduceMax ReduceMin RegexFullMatch "
        "StringConcat StringSplit",
    21: "Cast CastLike Constant ConstantOfShape DequantizeLinear Flatten GroupNormalization Identity If Loop Pad "
        "QLinearMatMul QuantizeLinear Reshape Scan Shape Size Squeeze Transpose Unsqueeze",
    22: "EyeLike RandomUniform RandomNormal RandomUniformLike RandomNormalLike Multinomial Bernoulli ThresholdedRelu "
        "Selu Elu Mish HardSigmoid HardSwish Softsign Softplus Sin Cos Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh "
        "Round Det NegativeLogLikelihoodLoss AveragePool MaxPool MaxUnpool LpPool MaxRoiPool Conv ConvTranspose "
        "DeformConv GlobalAveragePool GlobalMaxPool GlobalLpPool InstanceNormalization LpNormalization Dropout "
        "RoiAlign RNN GRU LSTM GridSample",
    23: "Attention Cast CastLike Constant ConstantOfShape DequantizeLinear Flatten Identity If Loop Pad QuantizeLinear "
        "RMSNormalization Reshape RotaryEmbedding Scan Shape Size Squeeze Transpose Unsqueeze",
    24: "Attention Cast CastLike Constant ConstantOfShape DequantizeLinear Flatten Identity If Loop Pad QuantizeLinear "
        "Reshape Scan Shape Size SplitToSequence Squeeze Swish TensorScatter TopK Transpose Unsqueeze",
    25: "Cast CastLike Constant ConstantOfShape DequantizeLinear Flatten Identity If Loop Pad QuantizeLinear Reshape "
        "Scan Shape Size Squeeze Transpose Unsqueeze",
    26: "BitCast CumProd",
}
OP_VERSIONS = sorted((op, v) for v, ops in VERSIONS.items() for op in ops.split())
# The IR version ONNX released with each opset (1.13: 8, 1.14-1.15: 9, 1.16-1.17: 10, 1.18: 11, 1.19: 12, ...).
IR_FOR_OPSET = {18: 8, 19: 9, 20: 9, 21: 10, 22: 10, 23: 11, 24: 12, 25: 12, 26: 13}

F, I64, I32, U8, I8, B = (TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.UINT8,
                          TensorProto.INT8, TensorProto.BOOL)
FLOAT8E4M3FN, FLOAT8E5M2 = 17, 19  # TensorProto.DataType values newer than onnx 1.12's enum
UINT4, INT4 = 21, 22
DEFAULT_TOL = (1e-4, 1e-5)


class Case:
    """One model: nodes over graph inputs (fed from test data) and initializers (constants)."""

    def __init__(self, name, nodes, inputs, outputs, inits=(), tol=DEFAULT_TOL):
        self.name, self.nodes, self.inputs, self.outputs, self.inits, self.tol = (
            name, nodes, list(inputs), list(outputs), list(inits), tol)


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def vi(name, arr_or_type, shape=None):
    if isinstance(arr_or_type, np.ndarray):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arr_or_type.dtype)
                                             if hasattr(helper, "np_dtype_to_tensor_dtype") else
                                             onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[arr_or_type.dtype],
                                             list(arr_or_type.shape))
    return helper.make_tensor_value_info(name, arr_or_type, shape)


def unary(op, x, out_type=F, **attrs):
    """Case builder for a one-input node: x is an array."""
    return dict(nodes=[helper.make_node(op, ["x"], ["y"], **attrs)], inputs=[("x", x)], outputs=[("y", out_type, None)])


def node_case(op, ins, consts=(), outs=(("y", F),), **attrs):
    """A single node: ins are (name, array) graph inputs, consts (name, array) initializers, in node input order
    given by the order names appear in `order` (ins then consts unless attrs['_order'] is set)."""
    order = attrs.pop("_order", None)
    names = order if order is not None else [n for n, _ in ins] + [n for n, _ in consts]
    return dict(nodes=[helper.make_node(op, names, [o[0] for o in outs], **attrs)], inputs=list(ins),
                inits=list(consts), outputs=[(o[0], o[1], None) for o in outs])


def float8_tensor(name, elem_type, dims, codes):
    """A float8 TensorProto from its codes (onnx 1.12's numpy_helper has no float8)."""
    t = TensorProto()
    t.name, t.data_type = name, elem_type
    t.dims.extend(dims)
    t.raw_data = bytes(codes)
    return t


def int4_tensor(name, elem_type, dims, values):
    """An int4/uint4 TensorProto: two values per raw_data byte, the first in the low nibble (onnx 1.12 has no int4)."""
    vals = [int(v) & 0xF for v in values] + ([0] if len(values) % 2 else [])
    t = TensorProto()
    t.name, t.data_type = name, elem_type
    t.dims.extend(dims)
    t.raw_data = bytes(vals[i] | (vals[i + 1] << 4) for i in range(0, len(vals), 2))
    return t


def randn(r, *shape, scale=1.0):
    return (r.standard_normal(shape) * scale).astype(np.float32)


def cases_for(op, v):
    """Returns [(case_suffix, dict(nodes, inputs, inits, outputs[, tol]))] for op at version v."""
    r = rng_for(f"{op}_{v}")
    x234 = randn(r, 2, 3, 4)
    out = []
    add = lambda name, d: out.append((name, d))  # noqa: E731

    if op.startswith("Reduce"):
        pos = np.abs(x234) + 0.5 if op in ("ReduceLogSum", "ReduceProd") else x234
        add("axes1_keep", node_case(op, [("x", pos)], [("axes", np.array([1], np.int64))]))
        add("axes_neg_nokeep", node_case(op, [("x", pos)], [("axes", np.array([-1, 0], np.int64))], keepdims=0))
        add("no_axes_all", node_case(op, [("x", pos)]))
        add("empty_axes_all", node_case(op, [("x", pos)], [("axes", np.array([], np.int64))], keepdims=0))
        add("noop_empty_axes", node_case(op, [("x", pos)], noop_with_empty_axes=1))
        add("noop_empty_axes_given", node_case(op, [("x", pos)], [("axes", np.array([], np.int64))],
                                                noop_with_empty_axes=1))
        add("axes_runtime_input", node_case(op, [("x", pos), ("axes", np.array([2, 0], np.int64))]))
        if v == 20:
            bx = r.integers(0, 2, (3, 4)).astype(bool)
            add("bool", dict(node_case(op, [("x", bx)], [("axes", np.array([1], np.int64))], outs=(("y", B),))))
        return out
    if op == "Split":
        x = randn(r, 7, 3)
        add("num_outputs_uneven", node_case(op, [("x", x)], outs=(("a", F), ("b", F), ("c", F)), num_outputs=3, axis=0))
        add("num_outputs_even", node_case(op, [("x", randn(r, 2, 6))], outs=(("a", F), ("b", F)), num_outputs=2, axis=-1))
        add("split_input", node_case(op, [("x", x)], [("split", np.array([2, 5], np.int64))],
                                     outs=(("a", F), ("b", F))))
        return out
    if op == "Pad":
        x = randn(r, 3, 4)
        add("constant_axes", node_case(op, [("x", x)], [("pads", np.array([1, 2], np.int64)),
                                                        ("value", np.array(1.5, np.float32)),
                                                        ("axes", np.array([1], np.int64))], mode="constant"))
        add("reflect_neg_axes", node_case(op, [("x", x)], [("pads", np.array([2, 1, 0, 2], np.int64)),
                                                          ("axes", np.array([-1, 0], np.int64))], mode="reflect",
                                          _order=["x", "pads", "", "axes"]))
        add("edge", node_case(op, [("x", x)], [("pads", np.array([0, 3, 1, 0], np.int64))], mode="edge"))
        if v >= 19:
            add("wrap", node_case(op, [("x", x)], [("pads", np.array([2, 3, 1, 5], np.int64))], mode="wrap"))
            add("wrap_axes", node_case(op, [("x", randn(r, 2, 3, 4))], [("pads", np.array([1, 6], np.int64)),
                                                                        ("axes", np.array([2], np.int64))],
                                       mode="wrap", _order=["x", "pads", "", "axes"]))
            add("negative_pads", node_case(op, [("x", x)], [("pads", np.array([-1, 1, 0, -2], np.int64))]))
        return out
    if op == "CenterCropPad":
        add("crop_and_pad", node_case(op, [("x", randn(r, 5, 3, 2))], [("shape", np.array([3, 6], np.int64))],
                                      axes=[0, 1]))
        add("all_axes", node_case(op, [("x", randn(r, 4, 5))], [("shape", np.array([5, 2], np.int64))]))
        return out
    if op == "Resize":
        x = randn(r, 1, 2, 8, 8)
        e = ("", )
        add("linear_antialias_down", node_case(op, [("x", x)], [("scales", np.array([1, 1, 0.5, 0.375], np.float32))],
                                               mode="linear", antialias=1, _order=["x", "", "scales"]))
        add("cubic_antialias_down", node_case(op, [("x", x)], [("scales", np.array([1, 1, 0.6, 0.5], np.float32))],
                                              mode="cubic", antialias=1, _order=["x", "", "scales"]))
        add("sizes_not_larger_axes", node_case(op, [("x", x)], [("sizes", np.array([5, 3], np.int64))],
                                               mode="linear", axes=[2, 3], keep_aspect_ratio_policy="not_larger",
                                               _order=["x", "", "", "sizes"]))
        add("sizes_not_smaller", node_case(op, [("x", randn(r, 1, 1, 4, 6))], [("sizes", np.array([1, 1, 5, 5],
                                                                                                 np.int64))],
                                           mode="nearest", keep_aspect_ratio_policy="not_smaller",
                                           _order=["x", "", "", "sizes"]))
        add("scales_axes_up", node_case(op, [("x", x)], [("scales", np.array([1.5, 2.0], np.float32))],
                                        mode="linear", axes=[3, 2], _order=["x", "", "scales"]))
        if v >= 19:
            add("half_pixel_symmetric", node_case(op, [("x", x)], [("scales", np.array([1, 1, 1.5, 0.75],
                                                                                        np.float32))],
                                                  mode="linear", coordinate_transformation_mode="half_pixel_symmetric",
                                                  _order=["x", "", "scales"]))
            add("half_pixel_symmetric_cubic", node_case(op, [("x", x)], [("sizes", np.array([1, 2, 5, 11], np.int64))],
                                                        mode="cubic",
                                                        coordinate_transformation_mode="half_pixel_symmetric",
                                                        _order=["x", "", "", "sizes"]))
        del e
        return out
    if op in ("Mish", "Softsign", "Softplus", "Sin", "Cos", "Tan", "Atan", "Sinh", "Cosh", "Asinh", "Round"):
        x = randn(r, 3, 4, 5, scale=2.0)
        if op == "Round":
            x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1.2, -2.7, 3.49, 0.0], np.float32)
        add("basic", unary(op, x))
        return out
    if op in ("Asin", "Acos", "Atanh"):
        add("basic", unary(op, (r.uniform(-0.95, 0.95, (3, 4))).astype(np.float32)))
        return out
    if op == "Acosh":
        add("basic", unary(op, (r.uniform(1.0, 5.0, (3, 4))).astype(np.float32)))
        return out
    if op in ("ThresholdedRelu", "Selu", "Elu", "HardSigmoid", "HardSwish"):
        add("basic", unary(op, randn(r, 3, 4, 5, scale=3.0)))
        attrs = {"ThresholdedRelu": dict(alpha=0.5), "Selu": dict(alpha=1.5, gamma=1.2), "Elu": dict(alpha=0.7),
                 "HardSigmoid": dict(alpha=0.3, beta=0.4), "HardSwish": {}}[op]
        if attrs:
            add("attrs", unary(op, randn(r, 3, 4, scale=3.0), **attrs))
        return out
    if op == "Swish":
        add("default", unary(op, randn(r, 3, 4, 5, scale=3.0)))
        add("alpha", unary(op, randn(r, 3, 4, scale=3.0), alpha=1.702))
        return out
    if op == "Gelu":
        add("none", unary(op, randn(r, 3, 4, 5, scale=3.0)))
        add("tanh", unary(op, randn(r, 3, 4, 5, scale=3.0), approximate="tanh"))
        return out
    if op == "OptionalHasElement":
        x = randn(r, 2, 3)
        add("optional_tensor", dict(nodes=[helper.make_node("Optional", ["x"], ["o"]),
                                           helper.make_node(op, ["o"], ["y"])],
                                    inputs=[("x", x)], outputs=[("y", B, None)]))
        add("tensor_input", dict(nodes=[helper.make_node(op, ["x"], ["y"])], inputs=[("x", x)],
                                 outputs=[("y", B, None)]))
        return out
    if op == "OptionalGetElement":
        x = randn(r, 2, 3)
        add("optional_tensor", dict(nodes=[helper.make_node("Optional", ["x"], ["o"]),
                                           helper.make_node(op, ["o"], ["y"])],
                                    inputs=[("x", x)], outputs=[("y", F, None)]))
        add("tensor_input", dict(nodes=[helper.make_node(op, ["x"], ["y"])], inputs=[("x", x)],
                                 outputs=[("y", F, None)]))
        return out
    if op == "Col2Im":
        add("basic", node_case(op, [("x", randn(r, 1, 4, 9))], [("image_shape", np.array([4, 4], np.int64)),
                                                               ("block_shape", np.array([2, 2], np.int64))]))
        # 2 channels, 2x3 blocks, stride 2x1, pads (1, 0, 0, 1): a 3 x 3 grid of blocks.
        add("strides_pads", node_case(op, [("x", randn(r, 2, 12, 9))],
                                                [("image_shape", np.array([5, 4], np.int64)),
                                                 ("block_shape", np.array([2, 3], np.int64))],
                                                strides=[2, 1], pads=[1, 0, 0, 1], dilations=[1, 1]))
        return out
    if op == "ScatterND":
        data = randn(r, 4, 4)
        idx = np.array([[1], [2], [1]], np.int64)
        upd = randn(r, 3, 4)
        for red in ("max", "min", "add", "mul"):
            add(f"reduction_{red}", node_case(op, [("data", data), ("indices", idx), ("updates", upd)],
                                              reduction=red))
        add("none", node_case(op, [("data", data), ("indices", np.array([[0, 1], [3, 2]], np.int64)),
                                   ("updates", randn(r, 2))]))
        return out
    if op == "ScatterElements":
        data = randn(r, 3, 5)
        idx = np.array([[1, 0, 4], [2, 2, 2], [0, 4, 1]], np.int64)
        upd = randn(r, 3, 3)
        for red in ("max", "min", "add", "mul"):
            add(f"reduction_{red}", node_case(op, [("data", data), ("indices", idx), ("updates", upd)],
                                              reduction=red, axis=1))
        add("reduction_none", node_case(op, [("data", data), ("indices", np.array([[1, 0, 4], [2, 3, 0], [0, 4, 1]],
                                                                                  np.int64)), ("updates", upd)],
                                        axis=1))
        add("neg_index_axis0", node_case(op, [("data", data), ("indices", np.array([[-1, 0, 2, 1, -3]], np.int64)),
                                              ("updates", randn(r, 1, 5))], axis=0))
        return out
    if op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        a = r.integers(-1000, 1000, (3, 4)).astype(np.int32)
        b = r.integers(-1000, 1000, (4,)).astype(np.int32)
        add("int32_broadcast", node_case(op, [("a", a), ("b", b)], outs=(("y", I32),)))
        add("uint8", node_case(op, [("a", r.integers(0, 255, (5,)).astype(np.uint8)),
                                    ("b", r.integers(0, 255, (5,)).astype(np.uint8))], outs=(("y", U8),)))
        add("int64", node_case(op, [("a", r.integers(-2**40, 2**40, (2, 3)).astype(np.int64)),
                                    ("b", r.integers(-2**40, 2**40, (2, 3)).astype(np.int64))], outs=(("y", I64),)))
        return out
    if op == "BitwiseNot":
        add("int32", unary(op, r.integers(-1000, 1000, (3, 4)).astype(np.int32), out_type=I32))
        add("uint8", unary(op, r.integers(0, 255, (7,)).astype(np.uint8), out_type=U8))
        return out
    if op == "GroupNormalization":
        x = randn(r, 2, 6, 3, 2)
        if v == 18:
            add("per_group_scale", node_case(op, [("x", x)], [("scale", randn(r, 3)), ("bias", randn(r, 3))],
                                             num_groups=3, epsilon=1e-3))
        else:
            add("per_channel_scale", node_case(op, [("x", x)], [("scale", randn(r, 6)), ("bias", randn(r, 6))],
                                               num_groups=3, epsilon=1e-3))
            add("one_group_3d", node_case(op, [("x", randn(r, 2, 4, 5))], [("scale", randn(r, 4)),
                                                                           ("bias", randn(r, 4))], num_groups=1))
        return out
    if op == "LpPool":
        x = randn(r, 1, 2, 7, 7)
        add("ceil_mode", node_case(op, [("x", x)], kernel_shape=[3, 3], strides=[2, 2], p=2, ceil_mode=1))
        add("dilations_p1", node_case(op, [("x", x)], kernel_shape=[2, 2], dilations=[2, 2], p=1))
        add("pads_p3", node_case(op, [("x", x)], kernel_shape=[3, 2], pads=[1, 1, 1, 0], p=3))
        return out
    if op == "AveragePool":
        x = randn(r, 1, 2, 7, 7)
        add("basic_ceil", node_case(op, [("x", x)], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1))
        add("dilations", node_case(op, [("x", x)], kernel_shape=[2, 2], dilations=[2, 2]))
        add("dilations_pads_include", node_case(op, [("x", x)], kernel_shape=[3, 3], dilations=[2, 1],
                                                pads=[1, 1, 1, 1], count_include_pad=1))
        add("dilations_ceil_strides", node_case(op, [("x", x)], kernel_shape=[2, 3], dilations=[2, 2],
                                                strides=[2, 2], ceil_mode=1))
        return out
    if op in ("MaxPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "InstanceNormalization",
              "LpNormalization"):
        x = randn(r, 1, 3, 5, 5)
        if op == "MaxPool":
            add("dilations_ceil", node_case(op, [("x", x)], kernel_shape=[2, 2], dilations=[2, 2], ceil_mode=1,
                                            strides=[2, 2]))
        elif op == "InstanceNormalization":
            add("basic", node_case(op, [("x", x)], [("scale", randn(r, 3)), ("bias", randn(r, 3))]))
        elif op == "LpNormalization":
            add("p2_axis1", unary(op, x, axis=1, p=2))
        else:
            add("basic", unary(op, x))
        return out
    if op == "MaxUnpool":
        add("basic", node_case(op, [("x", randn(r, 1, 1, 2, 2)), ("i", np.array([[[[5, 2], [8, 15]]]], np.int64))],
                               kernel_shape=[2, 2], strides=[2, 2]))
        return out
    if op == "MaxRoiPool":
        add("basic", node_case(op, [("x", randn(r, 1, 2, 6, 6)),
                                    ("rois", np.array([[0, 0, 0, 3, 3], [0, 1, 2, 5, 5]], np.float32))],
                               pooled_shape=[2, 2]))
        return out
    if op == "Conv":
        add("basic", node_case(op, [("x", randn(r, 1, 2, 5, 5))], [("w", randn(r, 3, 2, 3, 3)), ("b", randn(r, 3))],
                               pads=[1, 1, 1, 1]))
        return out
    if op == "ConvTranspose":
        add("basic", node_case(op, [("x", randn(r, 1, 2, 3, 3))], [("w", randn(r, 2, 3, 3, 3)), ("b", randn(r, 3))],
                               strides=[2, 2]))
        return out
    if op == "DeformConv":
        add("basic", node_case(op, [("x", randn(r, 1, 2, 4, 4)), ("w", randn(r, 2, 2, 2, 2)),
                                    ("offset", randn(r, 1, 8, 3, 3, scale=0.5))], ))
        return out
    if op == "Dropout":
        add("inference", node_case(op, [("x", randn(r, 3, 4))]))
        return out
    if op == "RoiAlign":
        add("basic", node_case(op, [("x", randn(r, 1, 2, 6, 6)), ("rois", np.array([[0, 0, 4, 4], [1, 1, 5, 3]],
                                                                                  np.float32)),
                                    ("bi", np.array([0, 0], np.int64))], output_height=2, output_width=3,
                               sampling_ratio=2))
        return out
    if op in ("RNN", "GRU", "LSTM"):
        g = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
        add("basic", node_case(op, [("x", randn(r, 3, 2, 4))], [("w", randn(r, 1, g * 5, 4, scale=0.3)),
                                                               ("rr", randn(r, 1, g * 5, 5, scale=0.3))],
                               hidden_size=5, outs=(("y", F),)))
        return out
    if op == "GridSample":
        x = randn(r, 1, 2, 4, 5)
        grid = r.uniform(-1.1, 1.1, (1, 3, 2, 2)).astype(np.float32)
        m = ("bilinear", "nearest", "bicubic") if v < 20 else ("linear", "nearest", "cubic")
        add(m[0], node_case(op, [("x", x), ("grid", grid)], mode=m[0]))
        if v >= 20:
            add("nearest_border", node_case(op, [("x", x), ("grid", grid)], mode="nearest", padding_mode="border"))
            add("cubic_align", node_case(op, [("x", x), ("grid", grid)], mode="cubic", align_corners=1))
            add("linear_reflection", node_case(op, [("x", x), ("grid", grid)], mode="linear",
                                               padding_mode="reflection"))
            add("volumetric_linear", node_case(op, [("x", randn(r, 1, 2, 3, 4, 5)),
                                                    ("grid", r.uniform(-1, 1, (1, 2, 3, 2, 3)).astype(np.float32))],
                                               mode="linear"))
            # Volumetric (5-D) cases beyond the first: N = 2 and C = 3 so batch and channel strides are exercised.
            x5 = randn(r, 2, 3, 3, 4, 5)
            add("volumetric_nearest_border", node_case(
                op, [("x", x5), ("grid", r.uniform(-1.4, 1.4, (2, 2, 3, 4, 3)).astype(np.float32))],
                mode="nearest", padding_mode="border"))
            add("volumetric_linear_reflection_align", node_case(
                op, [("x", x5), ("grid", r.uniform(-2.5, 2.5, (2, 3, 2, 2, 3)).astype(np.float32))],
                mode="linear", padding_mode="reflection", align_corners=1))
            add("volumetric_linear_reflection", node_case(
                op, [("x", x5), ("grid", r.uniform(-2.5, 2.5, (2, 3, 2, 2, 3)).astype(np.float32))],
                mode="linear", padding_mode="reflection"))
            # Points outside [-1, 1] on one, two or all three axes, far outside, and exact corners, with zeros
            # padding: taps outside X read 0, the rest keep their weights.
            far = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], [1.1, 0.2, -0.3],
                            [-1.15, 0.5, 0.9], [0.3, -1.3, 1.2], [1.2, 1.2, 1.2], [-1.05, -1.1, -1.2],
                            [3.0, 0.0, 0.0], [0.0, -7.5, 0.0], [40.0, 40.0, 40.0], [0.1, 0.2, 1.01]], np.float32)
            x4 = randn(r, 1, 2, 2, 3, 4)
            for m in ("linear", "nearest"):
                for ac in (0, 1):
                    add(f"volumetric_{m}_zeros_outside_align{ac}", node_case(
                        op, [("x", x4), ("grid", far.reshape(1, 2, 3, 2, 3))], mode=m, align_corners=ac))
            # Nearest ties: with D, H, W = 2, 3, 4 and align_corners = 0 these points land exactly halfway between
            # two indices on every axis (x = -1, -0.5, 0, 0.5 -> -0.5, 0.5, 1.5, 2.5; y = -1, 1 -> -0.5, 2.5;
            # z = -1, 0 -> -0.5, 0.5), which round to the even index.
            ties = np.array([[-0.5, -1.0, 0.0], [0.0, 1.0, 0.0], [0.5, 1.0, -1.0], [-1.0, -1.0, -1.0]], np.float32)
            add("volumetric_nearest_ties", node_case(op, [("x", x4), ("grid", ties.reshape(1, 1, 2, 2, 3))],
                                                     mode="nearest"))
            add("volumetric_linear_double", node_case(
                op, [("x", x5.astype(np.float64)),
                     ("grid", r.uniform(-1.2, 1.2, (2, 2, 2, 3, 3)).astype(np.float64))],
                outs=(("y", TensorProto.DOUBLE),), mode="linear"))
        return out
    if op == "Equal":
        add("float", node_case(op, [("a", np.array([1, 2, 3], np.float32)), ("b", np.array([1, 5, 3], np.float32))],
                               outs=(("y", B),)))
        add("int64_broadcast", node_case(op, [("a", np.array([[1, 2], [3, 4]], np.int64)),
                                              ("b", np.array([2, 4], np.int64))], outs=(("y", B),)))
        add("string", node_case(op, [("a", np.array(["x", "yy", ""], dtype=object)),
                                     ("b", np.array(["x", "y", ""], dtype=object))], outs=(("y", B),)))
        return out
    if op in ("Cast", "CastLike"):
        x = np.array([0.0, 1.5, -2.25, 300.0, -1000.0, 1e-3, 448.0, 500.0, -600.0, 70000.0], np.float32)
        like = lambda t: [("like", np.zeros((1,), t))]  # noqa: E731
        if op == "Cast":
            add("float_to_int32", unary(op, x, out_type=I32, to=TensorProto.INT32))
            add("float_to_float16", unary(op, x, out_type=TensorProto.FLOAT16, to=TensorProto.FLOAT16))
            add("int64_to_float", unary(op, np.array([1, -5, 2**40], np.int64), to=TensorProto.FLOAT))
        else:
            add("float_to_int32", node_case(op, [("x", x)], like(np.int32), outs=(("y", I32),)))
            add("float_to_double", node_case(op, [("x", x)], like(np.float64), outs=(("y", TensorProto.DOUBLE),)))
        if v >= 21 and op == "Cast":
            # float -> int4/uint4 rounds half away from zero and wraps to the low 4 bits (ONNX Runtime 1.30); back to
            # float exactly. Odd count.
            xc = np.array([-100, -9, -8.5, -7.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 6.5, 7.5, 8, 15.5, 3.2],
                          np.float32)
            for t, tn in ((INT4, "int4"), (UINT4, "uint4")):
                add(f"{tn}_roundtrip", dict(nodes=[helper.make_node("Cast", ["x"], ["q"], to=t),
                                                   helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)],
                                            inputs=[("x", xc)], outputs=[("y", F, None)]))
        if v >= 19 and op == "Cast":
            for t, tn in ((FLOAT8E4M3FN, "e4m3fn"), (FLOAT8E5M2, "e5m2")):
                for sat in (1, 0):
                    add(f"float8{tn}_sat{sat}_roundtrip",
                        dict(nodes=[helper.make_node("Cast", ["x"], ["f8"], to=t, saturate=sat),
                                    helper.make_node("Cast", ["f8"], ["y"], to=TensorProto.FLOAT)],
                             inputs=[("x", x)], outputs=[("y", F, None)]))
            # Around the largest finite values without saturation, where ONNX's reference conversion (and ORT)
            # depart from "round, then overflow": e4m3fn [480, 496) -> 448, e5m2 [61440, 65536) -> NaN.
            edges = np.array([460, 464, 465, 479, 480, 490, 495, 496, 511, 512, -490, 61439, 61440, 65535, 65536,
                              -62720, np.inf, -np.inf, np.nan, 2.0 ** -10, -(2.0 ** -17)], np.float32)
            add("float8_nosat_edges",
                dict(nodes=[helper.make_node("Cast", ["x"], ["a8"], to=FLOAT8E4M3FN, saturate=0),
                            helper.make_node("Cast", ["a8"], ["a"], to=TensorProto.FLOAT),
                            helper.make_node("Cast", ["x"], ["b8"], to=FLOAT8E5M2, saturate=0),
                            helper.make_node("Cast", ["b8"], ["b"], to=TensorProto.FLOAT)],
                     inputs=[("x", edges)], outputs=[("a", F, None), ("b", F, None)]))
        return out
    if op == "Constant":
        add("value_floats", dict(nodes=[helper.make_node(op, [], ["y"], value_floats=[1.0, 2.5, -3.0])], inputs=[],
                                 outputs=[("y", F, None)]))
        add("value_tensor", dict(nodes=[helper.make_node(op, [], ["y"], value=numpy_helper.from_array(
            np.arange(6, dtype=np.float32).reshape(2, 3)))], inputs=[], outputs=[("y", F, None)]))
        return out
    if op == "ConstantOfShape":
        add("float_value", node_case(op, [("s", np.array([2, 3], np.int64))],
                                     value=numpy_helper.from_array(np.array([1.25], np.float32))))
        add("int32_value_const_shape", node_case(op, [], [("s", np.array([4], np.int64))], outs=(("y", I32),),
                                                 value=numpy_helper.from_array(np.array([7], np.int32))))
        return out
    if op == "DequantizeLinear":
        xq = r.integers(-128, 127, (4, 6)).astype(np.int8)
        add("per_tensor", node_case(op, [("x", xq)], [("s", np.array(0.05, np.float32)), ("z", np.array(3, np.int8))]))
        add("per_axis", node_case(op, [("x", xq)], [("s", np.array([0.1, 0.2, 0.3, 0.4], np.float32)),
                                                   ("z", np.array([0, 1, -2, 5], np.int8))], axis=0))
        if v >= 21:
            add("blocked_axis1", node_case(op, [("x", xq)], [("s", r.uniform(0.01, 0.1, (4, 2)).astype(np.float32)),
                                                            ("z", r.integers(-5, 5, (4, 2)).astype(np.int8))],
                                           axis=1, block_size=3))
            add("blocked_axis0_uneven", node_case(op, [("x", r.integers(0, 255, (5, 3)).astype(np.uint8))],
                                                  [("s", r.uniform(0.01, 0.1, (2, 3)).astype(np.float32)),
                                                   ("z", r.integers(0, 9, (2, 3)).astype(np.uint8))],
                                                  axis=0, block_size=3))
            # int4/uint4 initializers (IR 10) with odd element counts (15 values: the last byte's high nibble unused),
            # dequantized blocked along axis 1 (block 2 over 5: 3 blocks, the last short) and per axis.
            xi = r.integers(-8, 8, (3, 5))
            add("int4_blocked_odd_count", dict(
                nodes=[helper.make_node(op, ["x", "s", "z"], ["y"], axis=1, block_size=2)], inputs=[],
                inits=[("x", int4_tensor("x", INT4, [3, 5], xi.flatten())),
                       ("s", r.uniform(0.1, 1.0, (3, 3)).astype(np.float32)),
                       ("z", int4_tensor("z", INT4, [3, 3], r.integers(-8, 8, 9)))],
                outputs=[("y", F, None)]))
            add("uint4_per_axis_odd_count", dict(
                nodes=[helper.make_node(op, ["x", "s", "z"], ["y"], axis=0)], inputs=[],
                inits=[("x", int4_tensor("x", UINT4, [3, 5], r.integers(0, 16, 15))),
                       ("s", np.array([0.5, 0.25, 2.0], np.float32)), ("z", int4_tensor("z", UINT4, [3], [0, 8, 15]))],
                outputs=[("y", F, None)]))
        return out
    if op == "QuantizeLinear":
        x = randn(r, 4, 6, scale=3.0)
        add("per_tensor_uint8", node_case(op, [("x", x)], [("s", np.array(0.05, np.float32)),
                                                          ("z", np.array(128, np.uint8))], outs=(("y", U8),)))
        add("per_axis_int8", node_case(op, [("x", x)], [("s", np.array([0.1, 0.2, 0.03, 0.04], np.float32)),
                                                       ("z", np.array([0, 1, -2, 5], np.int8))], axis=0,
                                       outs=(("y", I8),)))
        if v >= 21:
            add("blocked_axis1", node_case(op, [("x", x)], [("s", r.uniform(0.01, 0.1, (4, 2)).astype(np.float32)),
                                                           ("z", r.integers(-5, 5, (4, 2)).astype(np.int8))],
                                           axis=1, block_size=3, outs=(("y", I8),)))
        # float8 (opset 19+): quantize then dequantize (test data cannot carry float8 with onnx 1.12), |x / s| up to
        # ~2000 so saturate decides (e4m3fn max 448: clamped, or NaN). Zero points are 0: ORT 1.30 ignores a float8
        # zero point in QuantizeLinear and refuses a non-zero one in DequantizeLinear. The e5m2 case is per-axis and
        # moves the float8 values through Transpose (float8 from Transpose-21) and Reshape on the way.
        if v >= 19:
            xs = (x * 100).astype(np.float32)
            for sat in (1, 0):
                add(f"float8e4m3fn_sat{sat}_roundtrip", dict(
                    nodes=[helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], saturate=sat),
                           helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
                    inputs=[("x", xs)],
                    inits=[("s", np.array(0.5, np.float32)), ("z", float8_tensor("z", FLOAT8E4M3FN, [], [0]))],
                    outputs=[("y", F, None)]))
        if v >= 21:
            # int4/uint4: quantize then dequantize (test data cannot carry 4-bit values), |x / s| beyond the range so
            # both saturation ends show; ties (x / s = k + 0.5) round to even.
            xt = np.concatenate([x.flatten()[:21] * 8, np.array([-2.5, 2.5, 1.5], np.float32)]).astype(np.float32)
            add("int4_roundtrip_odd", dict(
                nodes=[helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                       helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])],
                inputs=[("x", xt[:23].reshape(23))],
                inits=[("s", np.array(1.0, np.float32)), ("z", int4_tensor("z", INT4, [], [1]))],
                outputs=[("y", F, None)]))
            add("uint4_output_dtype_blocked_roundtrip", dict(
                nodes=[helper.make_node("QuantizeLinear", ["x", "s"], ["q"], axis=1, block_size=3, output_dtype=UINT4),
                       helper.make_node("DequantizeLinear", ["q", "s"], ["y"], axis=1, block_size=3)],
                inputs=[("x", np.abs(x) * 6)],
                inits=[("s", r.uniform(0.2, 1.0, (4, 2)).astype(np.float32))],
                outputs=[("y", F, None)]))
            add("int4_per_axis_transpose_roundtrip", dict(
                nodes=[helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0),
                       helper.make_node("Transpose", ["q"], ["qt"], perm=[1, 0]),
                       helper.make_node("DequantizeLinear", ["qt", "s2", "z2"], ["y"])],
                inputs=[("x", x)],
                inits=[("s", np.array([0.1, 0.2, 0.3, 0.05], np.float32)),
                       ("z", int4_tensor("z", INT4, [4], [0, 1, -2, 7])), ("s2", np.array(0.25, np.float32)),
                       ("z2", int4_tensor("z2", INT4, [], [-1]))],
                outputs=[("y", F, None)]))
            add("float8e5m2_per_axis_transpose_roundtrip", dict(
                nodes=[helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0),
                       helper.make_node("Transpose", ["q"], ["qt"], perm=[1, 0]),
                       helper.make_node("Reshape", ["qt", "shape"], ["qr"]),
                       helper.make_node("DequantizeLinear", ["qr", "s2"], ["y"])],
                inputs=[("x", x)],
                inits=[("s", np.array([0.01, 0.2, 0.003, 4.0], np.float32)),
                       ("z", float8_tensor("z", FLOAT8E5M2, [4], [0, 0, 0, 0])),
                       ("shape", np.array([3, 8], np.int64)), ("s2", np.array(0.25, np.float32))],
                outputs=[("y", F, None)]))
        return out
    if op in ("Identity", "Flatten", "Transpose", "Shape", "Size"):
        x = randn(r, 2, 3, 4)
        if op == "Shape":
            add("start_end", node_case(op, [("x", x)], outs=(("y", I64),), start=1, end=-1))
            add("negative_start", node_case(op, [("x", x)], outs=(("y", I64),), start=-2))
        elif op == "Size":
            add("basic", node_case(op, [("x", x)], outs=(("y", I64),)))
        elif op == "Flatten":
            add("axis2", unary(op, x, axis=2))
        elif op == "Transpose":
            add("perm", unary(op, x, perm=[2, 0, 1]))
        else:
            add("basic", unary(op, x))
        return out
    if op == "Reshape":
        x = randn(r, 2, 3, 4)
        add("infer_dim", node_case(op, [("x", x)], [("s", np.array([4, -1], np.int64))]))
        add("allowzero", node_case(op, [("x", x)], [("s", np.array([0, 12], np.int64))], allowzero=0))
        return out
    if op in ("Squeeze", "Unsqueeze"):
        x = randn(r, 2, 1, 3, 1) if op == "Squeeze" else randn(r, 2, 3)
        add("axes", node_case(op, [("x", x)], [("axes", np.array([1, -1] if op == "Squeeze" else [0, 3], np.int64))]))
        return out
    if op == "If":
        x = randn(r, 2, 3)
        then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [vi("t", F, [2, 3])])
        else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [], [vi("e", F, [2, 3])])
        for c in (True, False):
            add(f"cond_{int(c)}", dict(nodes=[helper.make_node(op, ["c"], ["y"], then_branch=then_g,
                                                               else_branch=else_g)],
                                       inputs=[("c", np.array(c)), ("x", x)], outputs=[("y", F, None)]))
        return out
    if op == "Loop":
        body = helper.make_graph(
            [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
             helper.make_node("Mul", ["acc_out", "acc_out"], ["scan_out"])],
            "body", [vi("i", I64, []), vi("cond_in", B, []), vi("acc_in", F, [3])],
            [vi("cond_out", B, []), vi("acc_out", F, [3]), vi("scan_out", F, [3])])
        add("accumulate", dict(nodes=[helper.make_node(op, ["m", "", "a0"], ["y", "s"], body=body)],
                               inputs=[("x", randn(r, 3)), ("a0", randn(r, 3))],
                               inits=[("m", np.array(4, np.int64))], outputs=[("y", F, None), ("s", F, None)]))
        return out
    if op == "Scan":
        body = helper.make_graph(
            [helper.make_node("Add", ["s_in", "e"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["o"])],
            "body", [vi("s_in", F, [2]), vi("e", F, [2])], [vi("s_out", F, [2]), vi("o", F, [2])])
        add("cumsum", dict(nodes=[helper.make_node(op, ["s0", "xs"], ["sf", "ys"], body=body, num_scan_inputs=1)],
                           inputs=[("s0", randn(r, 2)), ("xs", randn(r, 5, 2))],
                           outputs=[("sf", F, None), ("ys", F, None)]))
        return out
    if op == "AffineGrid":
        theta2 = randn(r, 2, 2, 3, scale=0.5) + np.array([[1, 0, 0], [0, 1, 0]], np.float32)
        for ac in (0, 1):
            add(f"2d_align{ac}", node_case(op, [("theta", theta2)], [("size", np.array([2, 3, 4, 5], np.int64))],
                                           align_corners=ac))
        theta3 = randn(r, 1, 3, 4, scale=0.5)
        add("3d", node_case(op, [("theta", theta3)], [("size", np.array([1, 1, 2, 3, 4], np.int64))]))
        return out
    if op == "DFT":
        xr = randn(r, 2, 8, 1)
        xc = randn(r, 2, 8, 2)
        add("real_onesided", node_case(op, [("x", xr)], [("axis", np.array(1, np.int64))], onesided=1,
                                       _order=["x", "", "axis"]))
        add("complex", node_case(op, [("x", xc)], [("axis", np.array(-2, np.int64))], _order=["x", "", "axis"]))
        add("inverse", node_case(op, [("x", xc)], [("n", np.array(6, np.int64)), ("axis", np.array(1, np.int64))],
                                 inverse=1))
        add("default_axis_dft_length", node_case(op, [("x", xr)], [("n", np.array(10, np.int64))]))
        add("axis0_complex", node_case(op, [("x", randn(r, 5, 3, 2))], [("axis", np.array(0, np.int64))],
                                       _order=["x", "", "axis"]))
        for _, d in out:
            d["tol"] = (1e-4, 1e-4)
        return out
    if op in ("IsInf", "IsNaN"):
        x = np.array([1.0, np.inf, -np.inf, np.nan, 0.0, -3.0], np.float32)
        add("basic", unary(op, x, out_type=B))
        if op == "IsInf":
            add("negative_only", unary(op, x, out_type=B, detect_positive=0))
        return out
    if op == "ImageDecoder":
        # Encoded images: probe model only (no cases).
        add("probe_only", dict(nodes=[helper.make_node(op, ["x"], ["y"])], inputs=[], typed_inputs=[("x", U8, [100])],
                               outputs=[("y", U8, None)], probe_only=True))
        return out
    S = TensorProto.STRING
    strs = lambda *v: np.array(v, dtype=object)  # noqa: E731
    if op == "RegexFullMatch":
        x = strs("apple", "a", "banana", "", "aXa", "www.example.com")
        add("prefix", node_case(op, [("x", x)], outs=(("y", B),), pattern="a.*"))
        add("classes", node_case(op, [("x", x.reshape(2, 3))], outs=(("y", B),), pattern=r"[a-z]+\.[a-z]+\.com"))
        return out
    if op == "StringConcat":
        add("broadcast", node_case(op, [("a", strs("ab", "", "x y").reshape(3, 1)), ("b", strs("1", "22"))],
                                   outs=(("y", S),)))
        return out
    if op == "StringSplit":
        x = strs("a,b,,c", "", "one", ",lead,trail,")
        add("delimiter", node_case(op, [("x", x)], outs=(("y", S), ("n", I64)), delimiter=","))
        add("whitespace", node_case(op, [("x", strs("  hello   world ", "", "a\tb\nc", "single"))],
                                    outs=(("y", S), ("n", I64))))
        add("maxsplit", node_case(op, [("x", x)], outs=(("y", S), ("n", I64)), delimiter=",", maxsplit=1))
        return out
    if op == "QLinearMatMul":
        a = r.integers(0, 255, (3, 4)).astype(np.uint8)
        b = r.integers(0, 255, (4, 5)).astype(np.uint8)
        add("uint8", node_case(op, [("a", a)], [("as", np.array(0.02, np.float32)), ("az", np.array(100, np.uint8)),
                                                ("b", b), ("bs", np.array(0.03, np.float32)),
                                                ("bz", np.array(120, np.uint8)), ("ys", np.array(0.1, np.float32)),
                                                ("yz", np.array(128, np.uint8))], outs=(("y", U8),)))
        return out
    if op == "EyeLike":
        add("k1", unary(op, randn(r, 3, 4), k=1))
        add("int32_kneg", unary(op, np.zeros((4, 3), np.int32), out_type=I32, k=-1))
        return out
    if op in ("RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Multinomial", "Bernoulli"):
        # Random outputs: probe only (no value comparison across generators).
        if op in ("RandomUniform", "RandomNormal"):
            d = dict(nodes=[helper.make_node(op, [], ["y"], shape=[2, 3], seed=1.0)], inputs=[],
                     outputs=[("y", F, None)])
        elif op == "Multinomial":
            d = node_case(op, [("x", np.log(np.full((2, 3), 1 / 3, np.float32)))], outs=(("y", I32),),
                          sample_size=4, seed=1.0)
        else:
            d = unary(op, np.full((2, 3), 0.5, np.float32), seed=1.0)
        d["probe_only"] = True
        add("probe_only", d)
        return out
    if op == "Det":
        add("batch", unary(op, randn(r, 2, 3, 3)))
        return out
    if op == "NegativeLogLikelihoodLoss":
        x = randn(r, 3, 4, 2)
        t = np.array([[0, 3], [1, 1], [2, 0]], np.int64)
        add("mean_weight", node_case(op, [("x", x), ("t", t)], [("w", np.abs(randn(r, 4)))], reduction="mean"))
        add("none_ignore", node_case(op, [("x", x), ("t", t)], reduction="none", ignore_index=1))
        return out
    if op == "Attention":
        b, hq, hkv, sq, skv, d = 2, 4, 2, 3, 5, 8
        q, k, vv = randn(r, b, hq, sq, d), randn(r, b, hkv, skv, d), randn(r, b, hkv, skv, d)
        add("gqa_4d", node_case(op, [("q", q), ("k", k), ("v", vv)]))
        add("causal_scale", node_case(op, [("q", randn(r, b, hq, 4, d)), ("k", randn(r, b, hq, 4, d)),
                                           ("v", randn(r, b, hq, 4, d))], is_causal=1, scale=0.2))
        add("3d_heads_bool_mask", node_case(op, [("q", randn(r, b, sq, hq * d)), ("k", randn(r, b, skv, hkv * d)),
                                                 ("v", randn(r, b, skv, hkv * d)),
                                                 ("m", r.integers(0, 2, (sq, skv)).astype(bool) | np.eye(sq, skv,
                                                                                                      dtype=bool))],
                                            q_num_heads=hq, kv_num_heads=hkv))
        add("float_mask_softcap", node_case(op, [("q", q), ("k", k), ("v", vv), ("m", randn(r, sq, skv))],
                                            softcap=2.0))
        add("past_kv", node_case(op, [("q", q), ("k", randn(r, b, hkv, 2, d)), ("v", randn(r, b, hkv, 2, d)),
                                      ("m", randn(r, b, 1, sq, 2 + 4))],
                                 [("pk", randn(r, b, hkv, 4, d)), ("pv", randn(r, b, hkv, 4, d))],
                                 outs=(("y", F), ("present_key", F), ("present_value", F))))
        for _, dd in out:
            dd["tol"] = (1e-4, 1e-5)
        return out
    if op == "RMSNormalization":
        x = randn(r, 2, 3, 8)
        add("last_axis", node_case(op, [("x", x)], [("scale", randn(r, 8))]))
        add("axis1_eps", node_case(op, [("x", x)], [("scale", randn(r, 3, 8))], axis=1, epsilon=0.1))
        return out
    if op == "RotaryEmbedding":
        b, h, s, d = 2, 2, 3, 8
        cos = np.cos(np.arange(10)[:, None] * (1.0 / 10000 ** (np.arange(d // 2) / (d // 2)))).astype(np.float32)
        sin = np.sin(np.arange(10)[:, None] * (1.0 / 10000 ** (np.arange(d // 2) / (d // 2)))).astype(np.float32)
        pos = np.array([[0, 1, 2], [4, 5, 9]], np.int64)
        add("4d_position_ids", node_case(op, [("x", randn(r, b, h, s, d)), ("pos", pos)],
                                         [("cos", cos), ("sin", sin)], _order=["x", "cos", "sin", "pos"]))
        add("3d_interleaved", node_case(op, [("x", randn(r, b, s, h * d)), ("pos", pos)],
                                        [("cos", cos), ("sin", sin)], _order=["x", "cos", "sin", "pos"],
                                        interleaved=1, num_heads=h))
        add("partial_rotary_no_pos", node_case(op, [("x", randn(r, b, h, s, d))],
                                               [("cos", cos[None, :s, :2].repeat(b, 0)),
                                                ("sin", sin[None, :s, :2].repeat(b, 0))],
                                               rotary_embedding_dim=4))
        return out
    if op == "SplitToSequence":
        add("split_scalar_concat", dict(
            nodes=[helper.make_node(op, ["x", "sp"], ["seq"], axis=1),
                   helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0, new_axis=1)],
            inputs=[("x", randn(r, 2, 6))], inits=[("sp", np.array(3, np.int64))], outputs=[("y", F, None)]))
        return out
    if op == "TensorScatter":
        cache = randn(r, 2, 2, 6, 4)
        upd = randn(r, 2, 2, 3, 4)
        add("linear", node_case(op, [("c", cache), ("u", upd), ("w", np.array([1, 3], np.int64))]))
        add("circular", node_case(op, [("c", cache), ("u", upd), ("w", np.array([4, 5], np.int64))], mode="circular"))
        add("no_write_indices", node_case(op, [("c", cache), ("u", upd)]))
        return out
    if op == "TopK":
        x = randn(r, 3, 7)
        add("largest", node_case(op, [("x", x)], [("k", np.array([3], np.int64))], outs=(("v", F), ("i", I64))))
        add("smallest_axis0", node_case(op, [("x", x)], [("k", np.array([2], np.int64))],
                                        outs=(("v", F), ("i", I64)), axis=0, largest=0))
        return out
    if op == "BitCast":
        add("float_to_int32", unary(op, randn(r, 3, 4), out_type=I32, to=TensorProto.INT32))
        add("int32_to_float", unary(op, r.integers(0, 2**30, (5,)).astype(np.int32), to=TensorProto.FLOAT))
        add("uint8_to_int8", unary(op, r.integers(0, 255, (6,)).astype(np.uint8), out_type=I8, to=TensorProto.INT8))
        return out
    if op == "CumProd":
        x = (r.uniform(0.5, 1.5, (3, 4))).astype(np.float32)
        add("axis1", node_case(op, [("x", x)], [("axis", np.array(1, np.int64))]))
        add("exclusive_reverse", node_case(op, [("x", x)], [("axis", np.array(0, np.int64))], exclusive=1, reverse=1))
        add("int64", node_case(op, [("x", r.integers(-3, 4, (2, 5)).astype(np.int64))], [("axis", np.array(-1, np.int64))],
                               outs=(("y", I64),)))
        return out
    raise KeyError(f"no cases for {op}-{v}")


def multi_node_cases():
    """Small graphs that chain new op versions: [(case_id, opset, [(op, version) it needs], dict)]."""
    r = rng_for("multi")
    res = []
    # A decoder block at opset 23: RMSNormalization -> RotaryEmbedding (3-D, 2 heads) on Q and K -> causal Attention.
    b, s, h, d = 1, 5, 2, 8
    cos = np.cos(np.arange(8)[:, None] * (1.0 / 100 ** (np.arange(d // 2) / (d // 2)))).astype(np.float32)
    sin = np.sin(np.arange(8)[:, None] * (1.0 / 100 ** (np.arange(d // 2) / (d // 2)))).astype(np.float32)
    nodes = [helper.make_node("RMSNormalization", ["x", "scale"], ["n"], epsilon=1e-5),
             helper.make_node("RotaryEmbedding", ["n", "cos", "sin", "pos"], ["q"], num_heads=h),
             helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["k"], num_heads=h),
             helper.make_node("Attention", ["q", "k", "n"], ["y"], q_num_heads=h, kv_num_heads=h, is_causal=1)]
    res.append(("Block_23_rms_rope_attention", 23,
                [("RMSNormalization", 23), ("RotaryEmbedding", 23), ("Attention", 23)],
                dict(nodes=nodes, inputs=[("x", randn(r, b, s, h * d)), ("pos", np.arange(s, dtype=np.int64)[None] + 2)],
                     inits=[("scale", randn(r, h * d)), ("cos", cos), ("sin", sin)], outputs=[("y", F, None)])))
    # Opset-19 image ops in a row: Pad (axes, reflect) -> Resize (antialias, axes) -> ReduceMean (axes input).
    nodes = [helper.make_node("Pad", ["x", "pads", "", "pax"], ["p"], mode="reflect"),
             helper.make_node("Resize", ["p", "", "sc"], ["z"], mode="linear", antialias=1, axes=[2, 3]),
             helper.make_node("ReduceMean", ["z", "rax"], ["y"], keepdims=0)]
    res.append(("Image_19_pad_resize_reduce", 19, [("Pad", 19), ("Resize", 19), ("ReduceMean", 18)],
                dict(nodes=nodes, inputs=[("x", randn(r, 1, 3, 9, 7))],
                     inits=[("pads", np.array([2, 1, 2, 1], np.int64)), ("pax", np.array([2, 3], np.int64)),
                            ("sc", np.array([0.4, 0.6], np.float32)), ("rax", np.array([1], np.int64))],
                     outputs=[("y", F, None)])))
    return res


def build_model(op, v, name, d):
    ins = [vi(n, a) for n, a in d.get("inputs", [])] + [vi(n, t, s) for n, t, s in d.get("typed_inputs", [])]
    outs = [helper.make_tensor_value_info(n, t, s) for n, t, s in d["outputs"]]
    inits = [a if isinstance(a, TensorProto) else numpy_helper.from_array(a, n) for n, a in d.get("inits", [])]
    graph = helper.make_graph(d["nodes"], name, ins, outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", v)], producer_name="epctx-opset-gen")
    model.ir_version = IR_FOR_OPSET[v]
    return model


def all_cases():
    """[(case_id, op, version, dict)]; case ids are <Op>_<version>_<what>."""
    res = []
    for op, v in OP_VERSIONS:
        for suffix, d in cases_for(op, v):
            res.append((f"{op}_{v}_{suffix}", op, v, d))
    return res


def write_case(folder, op, v, cid, d, with_data=True):
    os.makedirs(folder, exist_ok=True)
    onnx.save(build_model(op, v, cid, d), os.path.join(folder, "model.onnx"))
    if with_data:
        data = os.path.join(folder, "test_data_set_0")
        os.makedirs(data, exist_ok=True)
        for i, (n, a) in enumerate(d.get("inputs", [])):
            with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(a, n).SerializeToString())


def run_node(args):
    env = dict(os.environ)
    subprocess.run(["node", ORT_REF] + args, check=True, env=env)


def cmd_probe(out):
    shutil.rmtree(out, ignore_errors=True)
    manifest, seen = [], set()
    for cid, op, v, d in all_cases():
        if (op, v) in seen:
            continue
        seen.add((op, v))
        folder = os.path.join(out, cid)
        write_case(folder, op, v, cid, d, with_data=False)
        manifest.append(dict(id=cid, op=op, version=v, model=os.path.join(folder, "model.onnx"), dir=folder))
    mf = os.path.join(out, "manifest.json")
    with open(mf, "w") as f:
        json.dump(manifest, f)
    raw = os.path.join(out, "probe.json")
    run_node(["probe", mf, raw])
    with open(raw) as f:
        results = json.load(f)
    with open(TABLE, "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(x) for x in results) + "\n]\n")
    write_doc(results)
    yes = sum(1 for x in results if x["ort_cpu"])
    print(f"gen.py probe: {len(results)} op versions, ORT 1.30 CPU runs {yes}, refuses {len(results) - yes}")


def write_doc(results):
    yes = [x for x in results if x["ort_cpu"]]
    no = [x for x in results if not x["ort_cpu"]]
    lines = [
        "# Opsets 18-26: which op versions ONNX Runtime 1.30 runs on CPU",
        "",
        "Measured, not guessed (issue 25): `tests/opset/gen.py probe` writes one model per ai.onnx op version",
        "introduced in opsets 18..26 (the model's opset is that version; float32 unless the op needs another type)",
        "and asks onnxruntime-node 1.30.0 to create a CPU-only session for it. The raw table is",
        "`tests/opset/ort_cpu_ops.json`; regenerate both files with",
        "`/usr/bin/python3 tests/opset/gen.py probe --out /tmp/opset_probe`.",
        "",
        f"{len(results)} op versions: ORT 1.30 creates a CPU session for {len(yes)}, refuses {len(no)}.",
        "A version that only widened the type list (bfloat16 at 22, int4 at 21, float4 at 23, float8e8m0 at 24,",
        "int2 at 25) is probed with float32, so \"yes\" means ORT runs the op at that opset for float32, not for every",
        "new type.",
        "",
        "The conformance suite (`tests/opset/gen.py cases`, CTest label `opset`) covers every \"yes\" version with",
        "deterministic outputs; the random generators (whose values no two runtimes share) are probed only.",
        "",
        "## ORT 1.30 runs on CPU",
        "",
        "| op | versions |",
        "|---|---|",
    ]
    byop = {}
    for x in yes:
        byop.setdefault(x["op"], []).append(str(x["version"]))
    for op in sorted(byop):
        lines.append(f"| {op} | {', '.join(byop[op])} |")
    lines += ["", "## ORT 1.30 refuses on CPU", "", "| op-version | ORT's message |", "|---|---|"]
    for x in no:
        msg = x["message"].replace("|", "\\|")
        if len(msg) > 200:
            msg = msg[:200] + "..."
        lines.append(f"| {x['op']}-{x['version']} | {msg} |")
    lines += [
        "",
        "## The conformance suite",
        "",
        "`scripts/make_test_models.sh` runs `tests/opset/gen.py cases --out build/test-models/opset`: every case of a",
        "\"yes\" version above (a few per version, aimed at what the version changed) plus small multi-node graphs,",
        "inputs from a fixed seed per case, expected outputs from onnxruntime-node 1.30 (CPU EP, graph optimizations",
        "disabled, one thread). CTest registers three tests per case (labels `conformance`, `opset`):",
        "",
        "- `opset_<case>`: `epctx test` on the CPU EP;",
        "- `opset_aotcpu_jit_<case>`: `epctx test -e aotcpu`, AotCpu compiling just in time whatever it claims (the rest",
        "  runs on the CPU EP);",
        "- `opset_aotcpu_ctx_<case>`: `tests/opset/aotcpu_ctx_case.sh` compiles the case with `epctx compile -e aotcpu`",
        "  and a new session, with compilation disabled, runs the `_ctx.onnx` against ORT's outputs.",
        "",
        "`scripts/test.sh` runs all three again with oneDNN held to AVX2.",
        "",
        "Tolerance: rtol 1e-4, atol 1e-5 by default. Both runtimes compute in float32 but not in the same order (ORT's",
        "MLAS kernels vs ours, fast tanh/erf/exp approximations of a few ulp on both sides); 1e-4 relative is about",
        "800 float32 ulp, room for a reduction of a few hundred terms, and 1e-5 absolute covers results that cancel",
        "to near zero. DFT cases use atol 1e-4: outputs are sums of up to 10 terms of magnitude ~3 whose imaginary",
        "parts cancel to ~1e-6.",
        "",
        "## epctx's CPU EP",
        "",
        "The CPU EP has a kernel for every op version in the tables above except ImageDecoder-20, which it refuses",
        "with NOT_IMPLEMENTED naming the node and `ImageDecoder-20` (`providers/cpu/kernels/op_versions.cc` keeps the",
        "list; a version registered there is refused before any older kernel could run it). One feature is refused",
        "the same way inside its kernel: Resize antialias with tf_crop_and_resize. GridSample-20/22 runs 4-D and 5-D",
        "(volumetric) X; on 5-D X it runs modes linear and nearest, and refuses cubic (tricubic; ORT 1.30 refuses it",
        "too) with NOT_IMPLEMENTED naming the node; X of another rank (1-D or 4+ spatial dims, which the spec allows",
        "from 20) is refused the same way. Versions that only added element types run for the types the",
        "runtime has; the loader refuses float4e2m1, float8e8m0 and int2/uint2 values with a message naming the",
        "value and the type.",
        "",
        "int4 / uint4 (IR 10, opset 21). Probed on ORT 1.30's CPU EP at opsets 21, 23 and 25: it runs",
        "DequantizeLinear on int4/uint4 `x` (per tensor, per axis, blocked with `block_size`), QuantizeLinear to",
        "int4/uint4 (zero point or `output_dtype`; per tensor, per axis, blocked; round half to even, saturating to",
        "[-8, 7] / [0, 15]), Cast between int4/uint4 and float, float16, double, int32, int64, int8, uint8 and bool",
        "(from a float: round half away from zero, then wrap to the low 4 bits: Cast(-8.5) = 7, Cast(7.5) = -8; ORT's",
        "int4 -> int8/uint8 gives wrong values, e.g. every int4 -> int8 is -1, so epctx's exact sign/zero extension is",
        "checked by unit tests only), Transpose, Constant and initializers (raw_data, int32_data). It has no CPU kernel",
        "for Identity, Reshape, Squeeze, Unsqueeze, Flatten, Pad, Shape, Size or If on int4, its checker refuses",
        "Concat, Slice, Gather, Expand, Tile, Split and every arithmetic op on them, and its Node.js binding aborts on",
        "an int4 graph output. epctx runs what ORT runs; it holds one value per byte in memory (`src/core/int4.h`),",
        "packing two per byte, low nibble first, only in files (an odd count's unused nibble written 0), so its",
        "data-movement kernels move int4 like any 1-byte type (a superset of ORT's Transpose). Packed sizes are",
        "checked (ceil(n / 2) bytes or int32_data entries) before anything is copied. Kernels that compute on values",
        "refuse int4 with NOT_IMPLEMENTED naming the node and the type; AotCpu claims no node with an int4 input or",
        "output; the public API refuses int4 tensors (NOT_IMPLEMENTED: no packed form there yet). Cases:",
        "`Cast_*_{int4,uint4}_roundtrip`, `QuantizeLinear_*_int4*`/`*_uint4*`, `DequantizeLinear_*_int4_blocked_odd_count`,",
        "`DequantizeLinear_*_uint4_per_axis_odd_count`; unit tests `src/core/int4_test.cc`,",
        "`providers/cpu/kernels/int4_kernels_test.cc`.",
        "",
        "The four float8 types of opset 19 (float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz) are element",
        "types of the runtime (`src/core/float8.h`: one byte, exact conversions with round-to-nearest-even and the",
        "spec's saturate table), as ORT 1.30 runs them on CPU: Cast and CastLike to and from every other type except",
        "complex, with `saturate`; QuantizeLinear (float8 `y_zero_point` or `output_dtype`, `saturate`) and",
        "DequantizeLinear (float8 `x`), whose float8 zero points must be 0 (ORT 1.30 ignores a non-zero one in",
        "QuantizeLinear and refuses it in DequantizeLinear; epctx refuses it in both with NOT_IMPLEMENTED naming the",
        "node and value); the data-movement kernels (Identity, Reshape, Squeeze, Unsqueeze, Flatten, Transpose,",
        "Concat, Slice, Gather, ...) move their bytes. Kernels that compute on values refuse float8 with",
        "NOT_IMPLEMENTED naming the node and the type. AotCpu claims no node with a float8 input or output (the CPU EP",
        "runs them). Test data cannot carry float8 with onnx 1.12, so the cases convert to and from float inside the",
        "model (`Cast_*_float8*_roundtrip`, `QuantizeLinear_*_float8*_roundtrip`).",
        "",
        "Unit tests with hand-computed values: `providers/cpu/kernels/opset18_26_test.cc`, `src/core/float8_test.cc`;",
        "`opset_kernels_vs_ort` (`tests/opset/kernel_cases_test.cc`) runs every case straight on the kernels (no loader,",
        "no session; If/Loop/Scan cases excepted) against ORT's outputs.",
        "",
        "Cases ORT runs that the CPU EP cannot run yet are listed in `tests/opset/skips.txt` with the reason and",
        "registered DISABLED (CTest reports them as not run):",
        "",
    ]
    sk = skips()
    lines += [f"- `{k}`: {v}" for k, v in sorted(sk.items())] or ["- none"]
    lines.append("")
    claims = os.path.join(HERE, "aotcpu_claims.txt")
    if os.path.exists(claims):
        with open(claims) as f:
            rows = [l.rstrip("\n") for l in f if l.strip()]
        lines += [
            "## What AotCpu compiles",
            "",
            "AotCpu compiles the op versions it knows and leaves the rest to the CPU EP, naming the reason per node",
            "(`epctx inspect` of a context model, `left_on_cpu`). `tests/opset/aotcpu_claims.sh build/bin/epctx",
            "build/test-models/opset > tests/opset/aotcpu_claims.txt` compiles every case and counts the cases whose",
            "context model holds an EPContext node; the table below is that file (cases claimed / cases, and the first",
            "reason a case was left). A lone zero-copy view (Reshape, Identity...) or a graph of constants makes no",
            "partition by design. Whatever AotCpu claims is checked against ORT by the `opset_aotcpu_*` tests.",
            "",
            "| op-version | AotCpu compiles | why a case was left |",
            "|---|---|---|",
        ]
        total = rows[-1] if rows and rows[-1].startswith("total:") else ""
        for r in rows:
            if r.startswith("total:"):
                continue
            parts = r.split(" ", 2)
            why = parts[2].replace("|", "\\|") if len(parts) > 2 else ""
            lines.append(f"| {parts[0]} | {parts[1]} | {why} |")
        if total:
            lines += ["", total[len("total: "):].capitalize() + "."]
        lines.append("")
    with open(DOC, "w") as f:
        f.write("\n".join(lines))


def ort_yes():
    with open(TABLE) as f:
        return {(x["op"], x["version"]) for x in json.load(f) if x["ort_cpu"]}


def suite():
    """The registered cases: every case of a version ORT runs on CPU, and each multi-node graph whose op versions
    ORT all runs. Multi-node cases carry op "*" (build_model only uses the version)."""
    yes = ort_yes()
    cases = [c for c in all_cases() if (c[1], c[2]) in yes and not c[3].get("probe_only")]
    for cid, v, needs, d in multi_node_cases():
        if all(n in yes for n in needs):
            cases.append((cid, "*", v, d))
    return cases


def cmd_cases(out):
    shutil.rmtree(out, ignore_errors=True)
    manifest = []
    for cid, op, v, d in suite():
        folder = os.path.join(out, cid)
        write_case(folder, op, v, cid, d)
        with open(os.path.join(folder, "tolerance.txt"), "w") as f:
            f.write("%g %g\n" % d.get("tol", DEFAULT_TOL))
        manifest.append(dict(id=cid, op=op, version=v, model=os.path.join(folder, "model.onnx"), dir=folder))
    mf = os.path.join(out, "manifest.json")
    with open(mf, "w") as f:
        json.dump(manifest, f)
    run_node(["run", mf])
    print(f"gen.py cases: {len(manifest)} cases -> {out}")


SKIPS = os.path.join(HERE, "skips.txt")


def skips():
    """{case: reason} from skips.txt: cases ORT runs that the CPU EP cannot run yet (CTest registers them
    disabled, so they show as "Not Run" rather than passing)."""
    out = {}
    if os.path.exists(SKIPS):
        with open(SKIPS) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    name, _, reason = line.partition(" ")
                    out[name] = reason.strip()
    return out


def cmd_list():
    sk = skips()
    for cid, op, v, d in suite():
        rtol, atol = d.get("tol", DEFAULT_TOL)
        print(cid, rtol, atol, "skip" if cid in sk else "run")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["probe", "cases", "list", "doc"])
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.mode == "list":
        cmd_list()
    elif a.mode == "doc":  # docs/opsets.md again from ort_cpu_ops.json and skips.txt, without ORT
        with open(TABLE) as f:
            write_doc(json.load(f))
    elif a.mode == "probe":
        cmd_probe(a.out or "/tmp/epctx_opset_probe")
    else:
        if not a.out:
            sys.exit("gen.py cases: --out DIR is required")
        cmd_cases(a.out)


if __name__ == "__main__":
    main()
