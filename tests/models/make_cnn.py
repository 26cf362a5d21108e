#!/usr/bin/python3
"""A small CNN for correctness tests (--size 64) and benchmarks (--size 224).

    /usr/bin/python3 tests/models/make_cnn.py --out DIR [--size 64|224] [--width C] [--seed N]

Writes DIR/cnn.onnx (weights inline): input `input` float [1,3,S,S] -> `logits` float [1,10].

    stem      Conv 3x3/2 (bias) + BatchNormalization + Relu            -> [C,   S/2]
              MaxPool 3x3/2 pad 1                                       -> [C,   S/4]
    residual  Conv3x3 + BN + Relu + Conv3x3 + BN, Add(skip), Relu      -> [C,   S/4]
    dw block  depthwise Conv 3x3 (group=C, bias) + BN + HardSwish,
              pointwise Conv 1x1 -> 2C + BN + Clip(0, 6)                -> [2C,  S/4]
    upsample  Resize x2 (nearest), Conv 3x3/2 + BN + Relu               -> [2C,  S/4]
    head      Conv 1x1 -> 4C + Relu, GlobalAveragePool, Flatten, Gemm (transB) -> [1, 10]
Default domain, opset 17, IR version 8; passes onnx.checker with full_check semantics.
"""
import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from modelutil import check_model_full, const, make_model, save_model  # noqa: E402


def build(size, width, seed):
    rng = np.random.default_rng(seed)
    inits = []
    nodes = []

    def param(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr, dtype=np.float32), name))
        return name

    def conv(name, x, cin, cout, k, stride=1, group=1, bias=True):
        fan_in = cin // group * k * k
        w = param(name + ".weight", rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in))
        ins = [x, w]
        if bias:
            ins.append(param(name + ".bias", rng.standard_normal(cout) * 0.1))
        p = k // 2
        nodes.append(helper.make_node("Conv", ins, [name], name=name, kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[p, p, p, p], group=group, dilations=[1, 1]))
        return name

    def bn(name, x, c):
        ins = [x,
               param(name + ".scale", 1.0 + rng.standard_normal(c) * 0.1),
               param(name + ".bias", rng.standard_normal(c) * 0.1),
               param(name + ".mean", rng.standard_normal(c) * 0.1),
               param(name + ".var", 0.5 + rng.random(c))]
        nodes.append(helper.make_node("BatchNormalization", ins, [name], name=name, epsilon=1e-5, momentum=0.9))
        return name

    def op(op_type, name, ins, **attrs):
        nodes.append(helper.make_node(op_type, ins, [name], name=name, **attrs))
        return name

    C = width
    x = "input"
    x = conv("stem.conv", x, 3, C, 3, stride=2)
    x = bn("stem.bn", x, C)
    x = op("Relu", "stem.relu", [x])
    x = op("MaxPool", "stem.pool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])

    skip = x
    y = conv("res.conv1", x, C, C, 3, bias=False)
    y = bn("res.bn1", y, C)
    y = op("Relu", "res.relu1", [y])
    y = conv("res.conv2", y, C, C, 3, bias=False)
    y = bn("res.bn2", y, C)
    x = op("Add", "res.add", [y, skip])
    x = op("Relu", "res.relu2", [x])

    x = conv("dw.conv", x, C, C, 3, group=C)
    x = bn("dw.bn", x, C)
    x = op("HardSwish", "dw.hardswish", [x])
    x = conv("pw.conv", x, C, 2 * C, 1, bias=False)
    x = bn("pw.bn", x, 2 * C)
    inits.extend([const("clip_min", 0.0, np.float32), const("clip_max", 6.0, np.float32)])
    x = op("Clip", "pw.relu6", [x, "clip_min", "clip_max"])

    inits.append(const("resize_scales", [1.0, 1.0, 2.0, 2.0], np.float32))
    x = op("Resize", "up.resize", [x, "", "resize_scales"], mode="nearest")
    x = conv("up.conv", x, 2 * C, 2 * C, 3, stride=2)
    x = bn("up.bn", x, 2 * C)
    x = op("Relu", "up.relu", [x])

    x = conv("head.conv", x, 2 * C, 4 * C, 1)
    x = op("Relu", "head.relu", [x])
    x = op("GlobalAveragePool", "head.gap", [x])
    x = op("Flatten", "head.flatten", [x], axis=1)
    w = param("fc.weight", rng.standard_normal((10, 4 * C)) * (4 * C) ** -0.5)
    b = param("fc.bias", rng.standard_normal(10) * 0.1)
    nodes.append(helper.make_node("Gemm", [x, w, b], ["logits"], name="fc", transB=1))

    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        initializer=inits)
    return make_model(graph)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--width", type=int, default=32, help="channels after the stem (C)")
    ap.add_argument("--seed", type=int, default=4321)
    args = ap.parse_args(argv)
    if args.size % 4:
        sys.exit("make_cnn: --size must be a multiple of 4")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "cnn.onnx")
    save_model(build(args.size, args.width, args.seed), path)
    check_model_full(path)
    print(f"make_cnn: size={args.size} width={args.width} -> {path} ({os.path.getsize(path)} bytes)")
    return path


if __name__ == "__main__":
    main()
