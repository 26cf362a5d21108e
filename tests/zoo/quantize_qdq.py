#!/usr/bin/python3
"""Static QDQ quantization of a float ONNX model, in ONNX Runtime's QDQ format, calibrated with ONNX Runtime.

    /usr/bin/python3 tests/zoo/quantize_qdq.py MODEL -o OUT --calib DIR [--calib DIR ...] [--check DIR ...]
                     [--op-types Conv,ConvTranspose,MatMul,Gemm,Add,Mul]

What it writes (the choices of onnxruntime.quantization.quantize_static with QuantFormat.QDQ, per_channel=True,
MinMax calibration; no onnxruntime Python package exists here, so this is our own writer of that format):
  - activations: per tensor, uint8, asymmetric. The range is the min and max of the tensor over the calibration
    inputs, widened to include 0; scale = (max - min) / 255, zero point = round(-min / scale). Each quantized tensor
    T gets one QuantizeLinear -> DequantizeLinear pair after its producer, and every reader of T reads the
    DequantizeLinear's output (a graph output keeps its name on the DequantizeLinear).
  - weights of Conv / ConvTranspose / Gemm / MatMul (initializers): int8, symmetric, per output channel
    (DequantizeLinear axis 0 for Conv, 1 for ConvTranspose and MatMul's [K, N], Gemm's by transB), scale =
    max|w| / 127, zero point 0; other initializer inputs of quantized ops (Add / Mul constants): int8 symmetric per
    tensor.
  - bias of Conv / Gemm: int32, scale = x_scale * w_scale (per channel), zero point 0, so a fused int8 kernel adds
    it to the int32 accumulator before requantizing (what ONNX Runtime's QLinearConv does).
  - the ops whose inputs and outputs are quantized: --op-types (default Conv, ConvTranspose, MatMul, Gemm).
    Everything else (Add, Mul, Resize, Sigmoid, Clip, Div, GlobalAveragePool, ...) stays float and reads the
    dequantized values. ORT's own default list is longer (Add, Mul, Resize, Sigmoid, pools, Concat, and it removes
    Relu/Clip after a quantized op); --op-types Conv,ConvTranspose,MatMul,Gemm,Add,Mul quantizes Add and Mul the
    same generic way (every float input and the output; constant inputs int8 per tensor). On PP-OCRv4's detector
    that doubles the error: its learnable-affine and HardSwish chains (Mul, Add) reach 1100 where most values are
    below 10, so a uint8 step there is 4.4 (docs/zoo.md, "A QDQ model of our own").
Before quantizing, as onnxruntime.quantization.quant_pre_process would: Constant nodes become initializers and an
inference BatchNormalization that is a Conv's only reader is folded into that Conv (ORT's ConvBNFusion). The default
domain's opset is raised to 13 when lower (per-axis DequantizeLinear needs 13; ORT's quantizer does the same).

Calibration: the float model with every float intermediate value added as a graph output runs in onnxruntime-node
(tests/ort/run_model.js, optimizations disabled, 1 thread) on each --calib folder's input_N.pb. The ranges are then
rounded outward to 12 significant bits, so the model's bytes do not change with the last bit of a float sum (ORT's
kernels differ by ISA); only a range that straddles a grid point could still move one scale.

--check DIR: runs the float and the QDQ model in ORT on DIR's inputs and prints the largest |difference| per output.
Deterministic: the same float model and calibration inputs give the same bytes.
"""
import argparse
import glob
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
RUN_MODEL = os.path.join(ROOT, "tests", "ort", "run_model.js")
DEFAULT_OPS = "Conv,ConvTranspose,MatMul,Gemm"
RANGE_BITS = 12


def fail(msg):
    raise SystemExit(f"quantize_qdq: {msg}")


# ---------------------------------------------------------------- ONNX Runtime

def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as fh:
        t.ParseFromString(fh.read())
    return t


def numbered(folder, prefix):
    files = glob.glob(os.path.join(folder, f"{prefix}_*.pb"))
    return sorted(files, key=lambda p: int(os.path.basename(p)[len(prefix) + 1:-3]))


def run_ort(model_path, data_dir, out_dir):
    """onnxruntime-node (optimizations disabled, 1 thread) -> {output name: array}."""
    os.makedirs(out_dir, exist_ok=True)
    r = subprocess.run(["node", RUN_MODEL, model_path, data_dir, "--out", out_dir], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        fail(f"onnxruntime-node failed on {model_path} with {data_dir}: {r.stderr.strip()}")
    outs = {}
    for f in numbered(out_dir, "output"):
        t = read_pb(f)
        outs[t.name] = numpy_helper.to_array(t)
    return outs


# ---------------------------------------------------------------- pre-processing

def constants_to_initializers(model):
    g = model.graph
    keep = []
    for n in g.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.attribute) == 1 and \
                n.attribute[0].name == "value":
            t = onnx.TensorProto()
            t.CopyFrom(n.attribute[0].t)
            t.name = n.output[0]
            g.initializer.append(t)
        else:
            keep.append(n)
    del g.node[:]
    g.node.extend(keep)


def readers_of(graph):
    r = {}
    for i, n in enumerate(graph.node):
        for v in n.input:
            if v:
                r.setdefault(v, []).append(i)
    return r


def fold_batch_norms(model):
    """Conv -> BatchNormalization (the Conv's only reader, constant parameters) becomes one Conv."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    outputs = {o.name for o in g.output}
    readers = readers_of(g)
    producer = {o: i for i, n in enumerate(g.node) for o in n.output}
    drop = set()
    for bi, bn in enumerate(g.node):
        if bn.op_type != "BatchNormalization" or len(bn.input) != 5 or len([o for o in bn.output if o]) != 1:
            continue
        ci = producer.get(bn.input[0])
        if ci is None:
            continue
        conv = g.node[ci]
        if conv.op_type != "Conv" or len(readers.get(conv.output[0], [])) != 1 or conv.output[0] in outputs:
            continue
        if not all(x in inits for x in bn.input[1:]) or conv.input[1] not in inits or \
                (len(conv.input) > 2 and conv.input[2] and conv.input[2] not in inits):
            continue
        eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
        sc, sh, mean, var = (numpy_helper.to_array(inits[x]).astype(np.float64) for x in bn.input[1:])
        w = numpy_helper.to_array(inits[conv.input[1]]).astype(np.float64)
        m = w.shape[0]
        b = numpy_helper.to_array(inits[conv.input[2]]).astype(np.float64) if len(conv.input) > 2 and conv.input[2] \
            else np.zeros(m)
        s = sc / np.sqrt(var + eps)
        wn, bname = conv.output[0] + "_bn_w", conv.output[0] + "_bn_b"
        g.initializer.append(numpy_helper.from_array((w * s.reshape(-1, *([1] * (w.ndim - 1)))).astype(np.float32),
                                                     wn))
        g.initializer.append(numpy_helper.from_array(((b - mean) * s + sh).astype(np.float32), bname))
        del conv.input[1:]
        conv.input.extend([wn, bname])
        conv.output[0] = bn.output[0]
        drop.add(bi)
    nodes = [n for i, n in enumerate(g.node) if i not in drop]
    del g.node[:]
    g.node.extend(nodes)
    used = {v for n in g.node for v in n.input} | outputs
    kept = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(kept)


def prepare(model):
    constants_to_initializers(model)
    fold_batch_norms(model)
    for op in model.opset_import:
        if op.domain in ("", "ai.onnx") and op.version < 13:
            op.version = 13
    return model


def float_values(model):
    """Float tensors written by nodes or read as graph inputs, in graph order."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        types[vi.name] = vi.type.tensor_type.elem_type
    inits = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    for n in model.graph.node:
        names.extend(o for o in n.output if o)
    return [v for v in names if types.get(v) == TensorProto.FLOAT]


# ---------------------------------------------------------------- calibration

def outward(v, up):
    """v rounded away from the range's inside to RANGE_BITS significant bits."""
    if v == 0 or not math.isfinite(v):
        return float(v)
    m, e = math.frexp(v)
    q = m * (1 << RANGE_BITS)
    q = math.ceil(q) if up else math.floor(q)
    return float(np.float32(math.ldexp(q, e - RANGE_BITS)))


def calibrate(model, calib_dirs, tmp):
    values = float_values(model)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    present = {o.name for o in m.graph.output}
    inputs = [i.name for i in m.graph.input]
    for v in values:
        if v not in present and v not in inputs:
            m.graph.output.append(helper.make_tensor_value_info(v, TensorProto.FLOAT, None))
    path = os.path.join(tmp, "calib.onnx")
    onnx.save(m, path)
    lo, hi = {}, {}
    for k, d in enumerate(calib_dirs):
        outs = run_ort(path, d, os.path.join(tmp, f"calib_out_{k}"))
        for f in numbered(d, "input"):
            t = read_pb(f)
            outs[t.name] = numpy_helper.to_array(t)
        for v in values:
            if v not in outs:
                fail(f"calibration run on {d} gave no value '{v}'")
            a = outs[v]
            if a.size == 0:
                continue
            if not np.all(np.isfinite(a)):
                fail(f"calibration: '{v}' has non-finite values on {d}")
            lo[v] = min(lo.get(v, math.inf), float(a.min()))
            hi[v] = max(hi.get(v, -math.inf), float(a.max()))
    return {v: (outward(lo[v], False), outward(hi[v], True)) for v in lo}


# ---------------------------------------------------------------- quantization parameters (ORT's compute_scale_zp)

def activation_params(rmin, rmax):
    rmin, rmax = min(rmin, 0.0), max(rmax, 0.0)
    scale = np.float32((rmax - rmin) / 255.0)
    if scale == 0:
        scale = np.float32(1.0)
    zp = np.uint8(np.clip(np.round(-rmin / np.float64(scale)), 0, 255))
    return scale, zp


def quantize_symmetric(w, axis):
    """int8, zero point 0, scale = max|w| / 127 per slice along `axis` (None: per tensor)."""
    w = w.astype(np.float32)
    if axis is None:
        absmax = np.float32(np.max(np.abs(w))) if w.size else np.float32(0)
        scale = np.float32(absmax / np.float32(127)) if absmax > 0 else np.float32(1)
        q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        return q, np.array(scale, np.float32)
    moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    absmax = np.max(np.abs(moved), axis=1) if moved.shape[1] else np.zeros(w.shape[axis], np.float32)
    scale = np.where(absmax > 0, absmax / np.float32(127), np.float32(1)).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


# ---------------------------------------------------------------- the QDQ model

WEIGHT_AXIS = {"Conv": 0, "ConvTranspose": 1}


def weight_axis(node, w):
    if node.op_type in WEIGHT_AXIS:
        return WEIGHT_AXIS[node.op_type] if w.ndim >= 2 else None
    if node.op_type == "Gemm":
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1
    if node.op_type == "MatMul":
        return w.ndim - 1 if w.ndim == 2 else None
    return None


def quantize_model(model, ranges, op_types):
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    graph_outputs = {o.name for o in g.output}
    act = []        # activation names to quantize, first-seen order
    weights = {}    # initializer -> ("w", axis) or ("bias", x name, w name)
    for n in g.node:
        if n.op_type not in op_types or n.domain not in ("", "ai.onnx"):
            continue
        if n.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul") and len(n.input) > 1 and n.input[1] in inits:
            x, w = n.input[0], n.input[1]
            if x in ranges:
                act.append(x)
            warr = numpy_helper.to_array(inits[w])
            weights.setdefault(w, ("w", weight_axis(n, warr)))
            if n.op_type in ("Conv", "ConvTranspose", "Gemm") and len(n.input) > 2 and n.input[2] in inits and \
                    x in ranges and numpy_helper.to_array(inits[n.input[2]]).ndim == 1:
                weights.setdefault(n.input[2], ("bias", x, w))
        else:
            for v in n.input:
                if v in inits:
                    if inits[v].data_type == TensorProto.FLOAT:
                        weights.setdefault(v, ("w", None))
                elif v in ranges:
                    act.append(v)
        act.extend(o for o in n.output if o in ranges)
    seen = set()
    act = [v for v in act if not (v in seen or seen.add(v))]

    new_inits = []
    rename = {}     # value -> name readers use now
    act_params = {}
    for v in act:
        scale, zp = activation_params(*ranges[v])
        act_params[v] = (scale, zp)
        new_inits.append(numpy_helper.from_array(np.array(scale, np.float32), v + "_scale"))
        new_inits.append(numpy_helper.from_array(np.array(zp, np.uint8), v + "_zero_point"))
        rename[v] = v + "_DequantizeLinear_Output"
    w_scales = {}
    w_nodes = {}
    float_biases = set()
    for w, spec in weights.items():
        if spec[0] == "w":
            q, scale = quantize_symmetric(numpy_helper.to_array(inits[w]), spec[1])
            w_scales[w] = scale
            zp = np.zeros(scale.shape, np.int8)
            attrs = {"axis": spec[1]} if spec[1] is not None else {}
        else:
            x_scale = act_params[spec[1]][0]
            if spec[2] not in w_scales:
                q_w, w_scales[spec[2]] = quantize_symmetric(numpy_helper.to_array(inits[spec[2]]),
                                                             weights[spec[2]][1])
            scale = (np.float32(x_scale) * w_scales[spec[2]]).astype(np.float32)
            b = numpy_helper.to_array(inits[w]).astype(np.float32)
            if scale.size not in (1, b.size):  # grouped ConvTranspose: w's axis 1 is not the bias's axis; keep float
                float_biases.add(w)
                continue
            safe = np.where(scale == 0, np.float32(1), scale).astype(np.float32)
            q = np.clip(np.round((b / safe).astype(np.float64)), -2 ** 31, 2 ** 31 - 1).astype(np.int32)
            zp = np.zeros(scale.shape, np.int32)
            attrs = {"axis": 0} if scale.ndim == 1 else {}
        new_inits.append(numpy_helper.from_array(q, w + "_quantized"))
        new_inits.append(numpy_helper.from_array(np.asarray(scale, np.float32), w + "_scale"))
        new_inits.append(numpy_helper.from_array(zp, w + "_zero_point"))
        out = w + "_DequantizeLinear_Output"
        w_nodes[w] = helper.make_node("DequantizeLinear", [w + "_quantized", w + "_scale", w + "_zero_point"], [out],
                                      name=w + "_DequantizeLinear", **attrs)
        rename[w] = out

    def qdq_pair(v):
        src = v
        dq_out = rename[v]
        if v in graph_outputs:  # the graph output keeps its name, on the DequantizeLinear
            src, dq_out = v + "_QuantizeLinear_Input", v
        return [helper.make_node("QuantizeLinear", [src, v + "_scale", v + "_zero_point"], [v + "_quantized"],
                                 name=v + "_QuantizeLinear"),
                helper.make_node("DequantizeLinear", [v + "_quantized", v + "_scale", v + "_zero_point"], [dq_out],
                                 name=v + "_DequantizeLinear")]

    for v in act:
        if v in graph_outputs:
            rename[v] = v
    nodes = []
    inputs = {i.name for i in g.input}
    for v in act:
        if v in inputs:
            nodes.extend(qdq_pair(v))
    emitted = set()
    for n in g.node:
        for v in n.input:
            if v in w_nodes and v not in emitted:
                nodes.append(w_nodes[v])
                emitted.add(v)
        new = onnx.NodeProto()
        new.CopyFrom(n)
        for i, v in enumerate(new.input):
            if v in rename:
                new.input[i] = rename[v]
        for i, v in enumerate(new.output):
            if v in act_params and v in graph_outputs:
                new.output[i] = v + "_QuantizeLinear_Input"
        nodes.append(new)
        for v in n.output:
            if v in act_params:
                nodes.extend(qdq_pair(v))
    del g.node[:]
    g.node.extend(nodes)
    kept = [t for t in g.initializer if t.name not in weights or t.name in float_biases]
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)
    n_bias = sum(1 for w, s in weights.items() if s[0] == "bias" and w not in float_biases)
    return len(act), sum(1 for s in weights.values() if s[0] == "w"), n_bias


# ---------------------------------------------------------------- driver

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--calib", action="append", required=True, help="a folder of input_N.pb (repeatable)")
    ap.add_argument("--check", action="append", default=[], help="compare float and QDQ in ORT on this folder")
    ap.add_argument("--op-types", default=DEFAULT_OPS,
                    help=f"ops whose inputs and outputs are quantized (default {DEFAULT_OPS})")
    args = ap.parse_args(argv)
    if not os.path.isfile(RUN_MODEL) or not os.path.isdir(os.path.join(ROOT, "tests", "ort", "node_modules")):
        fail("onnxruntime-node missing: run `cd tests/ort && npm ci --ignore-scripts`")
    for d in args.calib + args.check:
        if not numbered(d, "input"):
            fail(f"{d} holds no input_N.pb")
    model = onnx.load(args.model)
    prepare(model)
    with tempfile.TemporaryDirectory() as tmp:
        ranges = calibrate(model, args.calib, tmp)
        n_act, n_w, n_b = quantize_model(model, ranges, set(args.op_types.split(",")))
        model.producer_name = "epctx tests/zoo/quantize_qdq.py"
        model.producer_version = "1"
        model.graph.name = model.graph.name + "_qdq"
        onnx.checker.check_model(model, full_check=True)
        data = model.SerializeToString()
        tmp_out = args.output + ".tmp"
        with open(tmp_out, "wb") as fh:
            fh.write(data)
        os.replace(tmp_out, args.output)
        print(f"quantize_qdq: {args.output}: {n_act} activations (uint8), {n_w} weights (int8), {n_b} biases (int32), "
              f"calibrated on {len(args.calib)} input set(s)")
        for k, d in enumerate(args.check):
            f = run_ort(args.model, d, os.path.join(tmp, f"float_{k}"))
            q = run_ort(args.output, d, os.path.join(tmp, f"qdq_{k}"))
            for name, a in f.items():
                b = q[name]
                diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
                print(f"quantize_qdq: check {d}: '{name}' {list(a.shape)}: max |float - qdq| = {diff.max():.4g}, "
                      f"mean {diff.mean():.4g}")


if __name__ == "__main__":
    main()
