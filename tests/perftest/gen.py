"""Realistic ONNX subgraphs for the performance differential tester (perftest.py).

Model `index` of seed `seed` is always the same: its class is CLASSES[index % len(CLASSES)] and every random choice
comes from numpy's Generator seeded with [seed, index] (nothing else: no clock, no unseeded dict order).

The graphs are written the way exporters write them: PyTorch's node and value names ("/blocks.3/conv1/Conv",
"/blocks.3/conv1/Conv_output_0"), weights as initializers, small shape and scalar constants as Constant nodes or
initializers, activations and LayerNorm spelled out in primitive ops, tf2onnx's NHWC <-> NCHW Transposes, channel pads
written as a Concat with a zero constant. Sizes are those of real models (CNN inputs 1x3x(128..320)^2, feature maps of
16-256 channels at 20-80 px, transformer layers of seq 32-256, hidden 256-768, 4-12 heads), within a FLOP budget that
keeps a graph at roughly 0.2-30 ms on ONNX Runtime with 2 threads.

Every model is float32 with static shapes, IR version 8, opset 13-17, and passes onnx.checker (full) and strict shape
inference, whose output shapes must equal the ones the generator computed.

Each node's name starts with its block ("/b<k>_<kind>/..."): the shrinker cuts whole blocks first.
"""
import contextlib
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64
CLASSES = ["conv", "nhwc", "act", "attention", "mlp", "tensor"]
# FLOP budget per graph (multiply-adds count 2): ORT at 2 threads runs a convolution or matmul at tens of GFLOP/s here.
FLOP_BUDGET = 1.2e9
FLOP_BUDGET_SMALL = 4e7
# A floor on the work (FLOPs + 8 per element written by any node), so that a graph is not all per-run overhead.
WORK_FLOOR = 1.5e7


class Builder:
    def __init__(self, rng, opset, small):
        self.rng = rng
        self.opset = opset
        self.small = small
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.shape = {}    # value name -> tuple
        self.dtype = {}
        self.bounds = {}   # int64 graph input -> exclusive upper bound of its values
        self.flops = 0.0
        self.elems = 0.0   # elements written by all nodes
        self.scope = ""
        self.nblock = 0
        self.used = set()
        self.blocks = []   # block kinds in order (for the description)

    # ---- random helpers ------------------------------------------------------------------------------------------

    def choice(self, seq, p=None):
        return seq[int(self.rng.choice(len(seq), p=p))]

    def coin(self, p=0.5):
        return bool(self.rng.random() < p)

    def randint(self, lo, hi):  # inclusive
        return int(self.rng.integers(lo, hi + 1))

    # ---- naming --------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def block(self, kind):
        old = self.scope
        self.scope = "/b%d_%s" % (self.nblock, kind)
        self.nblock += 1
        self.blocks.append(kind)
        try:
            yield
        finally:
            self.scope = old

    @contextlib.contextmanager
    def sub(self, name):
        old = self.scope
        self.scope = old + "/" + name
        try:
            yield
        finally:
            self.scope = old

    def uniq(self, base):
        name, k = base, 1
        while name in self.used:
            name = "%s_%d" % (base, k)
            k += 1
        self.used.add(name)
        return name

    # ---- values --------------------------------------------------------------------------------------------------

    def input(self, name, shape, dtype=F32, bound=None):
        name = self.uniq(name)
        self.inputs.append(helper.make_tensor_value_info(name, dtype, list(shape)))
        self.shape[name] = tuple(shape)
        self.dtype[name] = dtype
        if bound is not None:
            self.bounds[name] = bound
        return name

    def output(self, v):
        if v not in [o.name for o in self.outputs]:
            self.outputs.append(helper.make_tensor_value_info(v, self.dtype[v], list(self.shape[v])))

    def weight(self, arr, what="weight"):
        """An initializer named like PyTorch's parameters ("b3.conv1.weight")."""
        arr = np.ascontiguousarray(arr)
        name = self.uniq((self.scope.strip("/").replace("/", ".") + "." + what).lstrip("."))
        self.inits.append(numpy_helper.from_array(arr, name))
        self.shape[name] = tuple(arr.shape)
        self.dtype[name] = F32 if arr.dtype == np.float32 else I64
        return name

    def const(self, arr, how=None):
        """A small constant (shape, axes, scalar): a Constant node, as torch.onnx writes them, or an initializer."""
        arr = np.asarray(arr)
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        if arr.dtype == np.int32 or arr.dtype == np.int_:
            arr = arr.astype(np.int64)
        if how is None:
            how = "node" if self.coin(0.6) else "init"
        if how == "init":
            name = self.uniq("onnx::Const_%d" % len(self.used))
            self.inits.append(numpy_helper.from_array(arr, name))
        else:
            nname = self.uniq(self.scope + "/Constant")
            name = self.uniq(nname + "_output_0")
            self.nodes.append(helper.make_node("Constant", [], [name], name=nname,
                                               value=numpy_helper.from_array(arr, "")))
        self.shape[name] = tuple(arr.shape)
        self.dtype[name] = F32 if arr.dtype == np.float32 else I64
        return name

    def fconst(self, x):
        return self.const(np.array(x, np.float32))

    def node(self, op, ins, shapes, dtype=F32, **attrs):
        """Appends a node; `shapes` is one shape or a list of shapes (one per output). Returns the output name(s)."""
        multi = isinstance(shapes, list)
        shapes = shapes if multi else [shapes]
        nname = self.uniq(self.scope + "/" + op)
        outs = []
        for k, s in enumerate(shapes):
            self.elems += float(np.prod(s))
            o = self.uniq("%s_output_%d" % (nname, k))
            self.shape[o] = tuple(int(d) for d in s)
            self.dtype[o] = dtype
            outs.append(o)
        self.nodes.append(helper.make_node(op, list(ins), outs, name=nname, **attrs))
        return outs if multi else outs[0]

    # ---- elementwise ---------------------------------------------------------------------------------------------

    def bshape(self, a, b):
        return tuple(np.broadcast_shapes(self.shape[a], self.shape[b]))

    def binary(self, op, a, b):
        return self.node(op, [a, b], self.bshape(a, b))

    def add(self, a, b):
        return self.binary("Add", a, b)

    def mul(self, a, b):
        return self.binary("Mul", a, b)

    def unary(self, op, x, **attrs):
        return self.node(op, [x], self.shape[x], **attrs)

    def act(self, x, kind):
        """An activation the way exporters write it (SiLU, HardSwish and GELU spelled out in primitive ops)."""
        if kind == "relu":
            return self.unary("Relu", x)
        if kind == "relu6":
            return self.node("Clip", [x, self.fconst(0.0), self.fconst(6.0)], self.shape[x])
        if kind == "leaky":
            return self.unary("LeakyRelu", x, alpha=0.1)
        if kind == "sigmoid":
            return self.unary("Sigmoid", x)
        if kind == "tanh":
            return self.unary("Tanh", x)
        if kind == "silu":  # torch: x * sigmoid(x)
            return self.mul(x, self.unary("Sigmoid", x))
        if kind == "hardswish":  # x * relu6(x + 3) / 6 (Keras, tf2onnx, older torch)
            t = self.add(x, self.fconst(3.0))
            t = self.node("Clip", [t, self.fconst(0.0), self.fconst(6.0)], self.shape[x])
            if self.coin():
                return self.binary("Div", self.mul(x, t), self.fconst(6.0))
            return self.mul(x, self.binary("Div", t, self.fconst(6.0)))
        if kind == "hardswish_hs":  # HardSigmoid(x) * x (torch's hardswish at opset < 14, paddle)
            return self.mul(self.unary("HardSigmoid", x, alpha=1.0 / 6, beta=0.5), x)
        if kind == "gelu":  # 0.5 * x * (1 + erf(x / sqrt 2)), torch's spelling
            t = self.binary("Div", x, self.fconst(math.sqrt(2.0)))
            t = self.unary("Erf", t)
            t = self.add(t, self.fconst(1.0))
            if self.coin():
                return self.mul(self.mul(x, t), self.fconst(0.5))
            return self.mul(self.mul(self.fconst(0.5), x), t)
        if kind == "gelu_tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            if self.coin():
                c = self.binary("Pow", x, self.fconst(3.0))
            else:
                c = self.mul(self.mul(x, x), x)
            t = self.add(x, self.mul(c, self.fconst(0.044715)))
            t = self.unary("Tanh", self.mul(t, self.fconst(math.sqrt(2.0 / math.pi))))
            t = self.add(t, self.fconst(1.0))
            return self.mul(self.mul(x, self.fconst(0.5)), t)
        raise ValueError(kind)

    # ---- convolution family (NCHW) -------------------------------------------------------------------------------

    def he(self, shape, fan_in, gain=1.0):
        return (self.rng.standard_normal(shape) * (gain * math.sqrt(2.0 / max(1, fan_in)))).astype(np.float32)

    def conv(self, x, cout, k=3, s=1, g=1, d=1, pads=None, bias=True, name="conv"):
        n, cin, h, w = self.shape[x]
        kh, kw = (k, k) if isinstance(k, int) else k
        if pads is None:
            ph, pw = d * (kh - 1) // 2, d * (kw - 1) // 2
            pads = [ph, pw, ph, pw]
        with self.sub(name):
            wt = self.weight(self.he((cout, cin // g, kh, kw), cin // g * kh * kw), "weight")
            ins = [x, wt]
            if bias:
                ins.append(self.weight((self.rng.standard_normal(cout) * 0.1).astype(np.float32), "bias"))
            ho = (h + pads[0] + pads[2] - d * (kh - 1) - 1) // s + 1
            wo = (w + pads[1] + pads[3] - d * (kw - 1) - 1) // s + 1
            attrs = dict(kernel_shape=[kh, kw], strides=[s, s], pads=list(pads), group=g)
            if d != 1:
                attrs["dilations"] = [d, d]
            if self.coin(0.3):
                attrs["dilations"] = [d, d]
            out = self.node("Conv", ins, (n, cout, ho, wo), **attrs)
        self.flops += 2.0 * cout * (cin // g) * kh * kw * ho * wo
        return out

    def bn(self, x):
        c = self.shape[x][1]
        with self.sub("bn"):
            sc = self.weight((1 + 0.1 * self.rng.standard_normal(c)).astype(np.float32), "weight")
            bi = self.weight((0.1 * self.rng.standard_normal(c)).astype(np.float32), "bias")
            mu = self.weight((0.1 * self.rng.standard_normal(c)).astype(np.float32), "running_mean")
            var = self.weight((1 + 0.2 * self.rng.random(c)).astype(np.float32), "running_var")
            return self.node("BatchNormalization", [x, sc, bi, mu, var], self.shape[x], epsilon=1e-5)

    def conv_act(self, x, cout, act, k=3, s=1, g=1, name="conv", bn=False, pads=None):
        y = self.conv(x, cout, k, s, g, pads=pads, name=name, bias=not bn)
        if bn:
            y = self.bn(y)
        return self.act(y, act) if act else y

    def pool(self, x, op, k, s, p=0, ceil=False):
        n, c, h, w = self.shape[x]
        rnd = math.ceil if ceil else math.floor
        ho = int(rnd((h + 2 * p - k) / s)) + 1
        wo = int(rnd((w + 2 * p - k) / s)) + 1
        attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p])
        if ceil:
            attrs["ceil_mode"] = 1
        if op == "AveragePool" and p:
            attrs["count_include_pad"] = int(self.coin())
        return self.node(op, [x], (n, c, ho, wo), **attrs)

    def gap(self, x):
        n, c, _, _ = self.shape[x]
        if self.coin(0.7):
            return self.node("GlobalAveragePool", [x], (n, c, 1, 1))
        return self.node("ReduceMean", [x], (n, c, 1, 1), axes=[2, 3], keepdims=1)

    def resize(self, x, mode, factor=2):
        n, c, h, w = self.shape[x]
        scales = self.const(np.array([1, 1, factor, factor], np.float32))
        attrs = dict(mode=mode)
        if mode == "nearest":
            attrs["coordinate_transformation_mode"] = self.choice(["asymmetric", "half_pixel"])
            attrs["nearest_mode"] = "floor"
        else:
            attrs["coordinate_transformation_mode"] = self.choice(["half_pixel", "pytorch_half_pixel",
                                                                   "align_corners"])
        roi = "" if self.coin() else self.const(np.zeros(0, np.float32))
        return self.node("Resize", [x, roi, scales], (n, c, h * factor, w * factor), **attrs)

    def conv_transpose(self, x, cout, k=2, s=2, p=0):
        n, cin, h, w = self.shape[x]
        with self.sub("up"):
            wt = self.weight(self.he((cin, cout, k, k), cin * k * k / (s * s)), "weight")
            b = self.weight((0.1 * self.rng.standard_normal(cout)).astype(np.float32), "bias")
            ho, wo = (h - 1) * s - 2 * p + k, (w - 1) * s - 2 * p + k
            y = self.node("ConvTranspose", [x, wt, b], (n, cout, ho, wo), kernel_shape=[k, k], strides=[s, s],
                          pads=[p, p, p, p])
        self.flops += 2.0 * cin * cout * k * k * h * w
        return y

    def concat(self, vals, axis):
        shp = list(self.shape[vals[0]])
        ax = axis % len(shp)
        shp[ax] = sum(self.shape[v][ax] for v in vals)
        return self.node("Concat", vals, tuple(shp), axis=axis)

    def pad_channels(self, x, extra):
        """x with `extra` zero channels appended: a Pad, or a Concat with a zero constant (as exporters write a
        channel pad: BlazeFace, ResNet's option-A shortcut in TF)."""
        n, c, h, w = self.shape[x]
        if self.coin():
            z = self.const(np.zeros((n, extra, h, w), np.float32), how="init" if self.coin(0.7) else "node")
            return self.concat([x, z], 1)
        pads = self.const(np.array([0, 0, 0, 0, 0, extra, 0, 0], np.int64))
        ins = [x, pads]
        if self.coin():
            ins.append(self.fconst(0.0))
        return self.node("Pad", ins, (n, c + extra, h, w), mode="constant")

    def transpose(self, x, perm):
        return self.node("Transpose", [x], tuple(self.shape[x][p] for p in perm), perm=list(perm))

    def reshape(self, x, shape, spelled=None):
        """Reshape to `shape`; `spelled` is what the exporter wrote (0 = copy, -1 = infer) when different."""
        s = self.const(np.array(spelled if spelled is not None else shape, np.int64))
        return self.node("Reshape", [x, s], tuple(shape))

    # ---- matmul family -------------------------------------------------------------------------------------------

    def linear(self, x, dout, bias=True, name="dense", gemm=False):
        shp = self.shape[x]
        din = shp[-1]
        with self.sub(name):
            w = self.weight((self.rng.standard_normal((din, dout)) / math.sqrt(din)).astype(np.float32), "weight")
            b = self.weight((0.02 * self.rng.standard_normal(dout)).astype(np.float32), "bias") if bias else None
            self.flops += 2.0 * int(np.prod(shp[:-1])) * din * dout
            if gemm and len(shp) == 2:
                return self.node("Gemm", [x, w] + ([b] if b else []), (shp[0], dout))
            y = self.node("MatMul", [x, w], shp[:-1] + (dout,))
            if b:
                y = self.add(y, b) if self.coin(0.8) else self.add(b, y)
            return y

    def matmul(self, a, b):
        sa, sb = self.shape[a], self.shape[b]
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
        self.flops += 2.0 * int(np.prod(batch)) * sa[-2] * sa[-1] * sb[-1]
        return self.node("MatMul", [a, b], batch + (sa[-2], sb[-1]))

    def layernorm(self, x, spelled=True, eps=1e-5):
        d = self.shape[x][-1]
        with self.sub("LayerNorm"):
            g = self.weight((1 + 0.1 * self.rng.standard_normal(d)).astype(np.float32), "weight")
            b = self.weight((0.1 * self.rng.standard_normal(d)).astype(np.float32), "bias")
            if not spelled and self.opset >= 17:
                return self.node("LayerNormalization", [x, g, b], self.shape[x], axis=-1, epsilon=eps)
            red = self.shape[x][:-1] + (1,)
            mean = self.node("ReduceMean", [x], red, axes=[-1], keepdims=1)
            dev = self.binary("Sub", x, mean)
            if self.coin(0.8):
                sq = self.binary("Pow", dev, self.fconst(2.0))
            else:
                sq = self.mul(dev, dev)
            var = self.node("ReduceMean", [sq], red, axes=[-1], keepdims=1)
            std = self.unary("Sqrt", self.add(var, self.fconst(eps)))
            y = self.binary("Div", dev, std)
            return self.add(self.mul(y, g), b)

    def softmax(self, x, axis=-1):
        return self.node("Softmax", [x], self.shape[x], axis=axis)

    def reduce(self, op, x, axes, keepdims):
        shp = list(self.shape[x])
        r = len(shp)
        axes = sorted(a % r for a in axes)
        out = [1 if i in axes else d for i, d in enumerate(shp)] if keepdims else \
            [d for i, d in enumerate(shp) if i not in axes]
        if op == "ReduceSum":  # axes is an input from opset 13
            return self.node(op, [x, self.const(np.array(axes, np.int64))], tuple(out), keepdims=keepdims)
        return self.node(op, [x], tuple(out), axes=axes, keepdims=keepdims)

    def split(self, x, sizes, axis):
        shp = list(self.shape[x])
        outs = []
        for s in sizes:
            o = list(shp)
            o[axis % len(shp)] = s
            outs.append(tuple(o))
        if len(set(sizes)) == 1 and self.coin(0.4):
            return self.node("Split", [x], outs, axis=axis)
        return self.node("Split", [x, self.const(np.array(sizes, np.int64))], outs, axis=axis)

    def slice(self, x, starts, ends, axes, steps=None):
        shp = list(self.shape[x])
        for st, en, ax, sp in zip(starts, ends, axes, steps or [1] * len(axes)):
            d = shp[ax]
            s0 = min(max(st + d if st < 0 else st, 0), d)
            e0 = min(max(en + d if en < 0 else en, 0), d)
            shp[ax] = max(0, (e0 - s0 + sp - 1) // sp)
        ins = [x, self.const(np.array(starts, np.int64)), self.const(np.array(ends, np.int64)),
               self.const(np.array(axes, np.int64))]
        if steps:
            ins.append(self.const(np.array(steps, np.int64)))
        return self.node("Slice", ins, tuple(shp))

    def gather(self, x, idx, axis):
        shp = list(self.shape[x])
        ishp = list(self.shape[idx])
        ax = axis % len(shp)
        return self.node("Gather", [x, idx], tuple(shp[:ax] + ishp + shp[ax + 1:]), axis=axis)

    # ---- the model -----------------------------------------------------------------------------------------------

    def model(self, graph_name):
        g = helper.make_graph(self.nodes, graph_name, self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="perftest")
        m.ir_version = 8
        return m


# ---- the classes -------------------------------------------------------------------------------------------------

def _spatial(b, lo, hi, mult=1):
    return int(b.randint(lo // mult, hi // mult) * mult)


def _cnn_input(b, scale, image_p=0.5):
    """A CNN's input: an image 1x3xHxW with a stride-2 stem, or a feature map 1xCxHxW."""
    act = b.choice(["relu", "relu6", "silu", "leaky", "hardswish", "hardswish_hs"], p=[.3, .2, .2, .1, .1, .1])
    if b.coin(image_p):
        if b.small:
            h = _spatial(b, 48, 80, 16)
            w = h if b.coin(0.6) else _spatial(b, 48, 80, 16)
        else:
            h = int(_spatial(b, 128, 320, 32) * scale) // 16 * 16 or 32
            w = h if b.coin(0.6) else int(_spatial(b, 128, 320, 32) * scale) // 16 * 16 or 32
        x = b.input("input", (1, 3, h, w))
        c0 = b.choice([16, 24, 32]) if not b.small else 16
        with b.block("stem"):
            y = b.conv_act(x, c0, act, k=3, s=2, name="conv", bn=b.coin(0.15))
        return x, y, act
    if b.small:
        c = b.choice([16, 24, 32, 48])
        h = b.randint(16, 28)
    else:
        c = b.choice([16, 24, 32, 48, 64, 96, 128, 160, 192, 256])
        h = max(12, int(b.randint(20, 80) * scale))
    w = h if b.coin(0.6) else max(12, int(h * b.choice([0.75, 1.25, 1.5])))
    x = b.input("input", (1, c, h, w))
    return x, x, act


def _conv_block(b, y, act, kind, skips, nhwc=False):
    n, c, h, w = b.shape[y]
    widths = [16, 24, 32, 48, 64, 96, 128, 160, 192, 256] if not b.small else [16, 24, 32, 48]
    bn = b.coin(0.1)
    if kind == "basic":  # ResNet basic block
        s = 2 if (b.coin(0.3) and h >= 16) else 1
        cout = c if s == 1 and b.coin(0.6) else min(widths[-1], b.choice([c, 2 * c]))
        t = b.conv_act(y, cout, act, 3, s, name="conv1", bn=bn)
        t = b.conv_act(t, cout, None, 3, 1, name="conv2", bn=bn)
        if s == 1 and cout == c:
            sc = y
        else:
            sc = b.conv_act(y, cout, None, 1, s, name="downsample", bn=bn)
        return b.act(b.add(t, sc), act)
    if kind == "bottleneck":
        mid = max(8, c // b.choice([2, 4]))
        t = b.conv_act(y, mid, act, 1, name="cv1", bn=bn)
        t = b.conv_act(t, mid, act, 3, name="cv2", bn=bn)
        t = b.conv_act(t, c, None, 1, name="cv3", bn=bn)
        return b.act(b.add(y, t), act) if b.coin(0.7) else b.add(t, y)
    if kind == "inverted":  # MobileNetV2 / EfficientNet inverted residual, depthwise in the middle
        e = b.choice([2, 4, 6]) if not b.small else 2
        mid = c * e
        s = 2 if (b.coin(0.3) and h >= 16) else 1
        k = b.choice([3, 5])
        t = b.conv_act(y, mid, act, 1, name="expand", bn=bn)
        t = b.conv_act(t, mid, act, k, s, g=mid, name="dw", bn=bn)
        if b.coin(0.3):  # squeeze-excitation
            with b.sub("se"):
                sq = b.gap(t)
                sq = b.conv_act(sq, max(8, mid // 4), "relu", 1, name="fc1")
                sq = b.conv_act(sq, mid, b.choice(["sigmoid", "hardswish_hs"]), 1, name="fc2")
                t = b.mul(t, sq)
        cout = c if s == 1 and b.coin(0.7) else b.choice(widths)
        t = b.conv_act(t, cout, None, 1, name="project", bn=bn)
        return b.add(y, t) if (s == 1 and cout == c) else t
    if kind == "dwsep":  # MobileNetV1 depthwise separable
        s = 2 if (b.coin(0.3) and h >= 16) else 1
        t = b.conv_act(y, c, act, 3, s, g=c, name="dw", bn=bn)
        return b.conv_act(t, b.choice([c, min(widths[-1], 2 * c)]), act, 1, name="pw", bn=bn)
    if kind == "concat":  # Inception / DenseNet-like: parallel branches concatenated on channels
        parts = []
        nb = b.randint(2, 4)
        for i in range(nb):
            k = b.choice([1, 3, 5]) if i else 1
            cb = max(8, b.choice([c // 4, c // 2, c]))
            if k == 5 and b.coin():
                t = b.conv_act(y, cb, act, 3, name="branch%d_a" % i)
                t = b.conv_act(t, cb, act, 3, name="branch%d_b" % i)
            elif i == nb - 1 and b.coin(0.4):
                t = b.pool(y, "MaxPool", 3, 1, 1)
                t = b.conv_act(t, cb, act, 1, name="branch%d_pool" % i)
            else:
                t = b.conv_act(y, cb, act, k, name="branch%d" % i)
            parts.append(t)
        if b.coin(0.3):
            parts.insert(0, y)  # DenseNet keeps the input
        return b.concat(parts, 1)
    if kind == "c2f":  # YOLOv8's C2f: 1x1, Split in two, bottlenecks, Concat, 1x1
        c2 = max(8, (c // 2) // 8 * 8)
        t = b.conv_act(y, 2 * c2, act, 1, name="cv1")
        a, z = b.split(t, [c2, c2], 1)
        outs = [a, z]
        for i in range(b.randint(1, 2)):
            with b.sub("m.%d" % i):
                u = b.conv_act(outs[-1], c2, act, 3, name="cv1")
                u = b.conv_act(u, c2, act, 3, name="cv2")
                outs.append(b.add(outs[-1], u))
        return b.conv_act(b.concat(outs, 1), b.choice([c, min(widths[-1], 2 * c)]), act, 1, name="cv2")
    if kind == "blaze":  # BlazeFace's block: depthwise 5x5 stride 2 + 1x1, shortcut MaxPool + channel pad, Add
        cout = min(widths[-1], b.choice([c, c + c // 2, 2 * c]))
        s = 2 if h >= 8 else 1
        if s == 2 and h % 2 == 0 and w % 2 == 0 and b.coin(0.5):
            # tf2onnx's "SAME" padding for a stride-2 5x5: an explicit Pad, one row/column more at the bottom/right
            pads = b.const(np.array([0, 0, 1, 1, 0, 0, 2, 2], np.int64))
            t = b.node("Pad", [y, pads], (n, c, h + 3, w + 3), mode="constant")
            t = b.conv_act(t, c, None, 5, s, g=c, name="dw", pads=[0, 0, 0, 0])
        else:
            t = b.conv_act(y, c, None, 5, s, g=c, name="dw")
        t = b.conv_act(t, cout, None, 1, name="pw")
        sc = b.pool(y, "MaxPool", 2, 2, ceil=(h % 2 == 1 or w % 2 == 1)) if s == 2 else y
        if cout > c:
            sc = b.pad_channels(sc, cout - c)
        return b.act(b.add(t, sc), act)
    if kind == "pool":
        op = b.choice(["MaxPool", "AveragePool"])
        if b.coin():
            return b.pool(y, op, 3, 2, 1)
        return b.pool(y, op, 2, 2)
    if kind == "up":  # FPN / U-Net: Resize or ConvTranspose, optional skip Concat
        how = b.choice(["nearest", "linear", "convT"])
        if how == "convT":
            k, p = (2, 0) if b.coin() else (4, 1)
            t = b.conv_transpose(y, max(8, c // b.choice([1, 2])), k, 2, p)
        else:
            t = b.resize(y, how)
            if b.coin(0.5):
                t = b.conv_act(t, max(8, c // 2), act, b.choice([1, 3]), name="conv")
        for sk in reversed(skips):
            if b.shape[sk][2:] == b.shape[t][2:]:
                if b.coin(0.5):
                    return b.concat([t, sk], 1)
                if b.shape[sk][1] == b.shape[t][1]:
                    return b.add(t, sk)
                break
        return t
    if kind == "head":
        t = b.gap(y)
        t = b.reshape(t, (1, b.shape[t][1]), spelled=[1, -1]) if b.coin() else \
            b.node("Flatten", [t], (1, b.shape[t][1]), axis=1)
        with b.sub("classifier"):
            return b.linear(t, b.choice([10, 100, 1000]), gemm=b.coin(0.7), name="fc")
    raise ValueError(kind)


def gen_conv(b, scale):
    x, y, act = _cnn_input(b, scale)
    skips = []
    nblocks = b.randint(2, 6)
    kinds = ["basic", "bottleneck", "inverted", "dwsep", "concat", "c2f", "blaze", "pool", "up"]
    p = np.array([.14, .1, .16, .1, .12, .1, .1, .08, .1])
    for i in range(nblocks):
        n, c, h, w = b.shape[y]
        ok = np.ones(len(kinds), bool)
        if h < 12 or w < 12:
            ok[kinds.index("pool")] = ok[kinds.index("blaze")] = False
        if h * w * c > 80 * 80 * 96 or h > 100:
            ok[kinds.index("up")] = False
        q = p * ok
        kind = b.choice(kinds, p=q / q.sum())
        with b.block(kind):
            skips.append(y)
            y = _conv_block(b, y, act, kind, skips)
    if b.coin(0.2) and b.shape[y][1] <= 512:
        with b.block("head"):
            y = _conv_block(b, y, act, "head", skips)
    b.output(y)


def gen_nhwc(b, scale):
    """tf2onnx: an NHWC input, Transpose to NCHW, convolution blocks, Transpose back; detector heads as
    Transpose(NHWC) + Reshape + Concat; sometimes an NHWC-side op between Transposes (a channel-last Mul/Add that
    tf2onnx left, a Concat on axis 3)."""
    act = b.choice(["relu", "relu6", "leaky", "hardswish"])
    if b.small:
        h = _spatial(b, 32, 64, 16)
        c = 3 if b.coin() else b.choice([16, 24])
    elif b.coin():
        h = int(_spatial(b, 128, 256, 32) * scale) // 16 * 16 or 32
        c = 3
    else:
        h = max(12, int(b.randint(20, 80) * scale))
        c = b.choice([16, 24, 32, 64, 96, 128])
    w = h if b.coin(0.7) else max(12, int(h * 1.25))
    x = b.input("input", (1, h, w, c))
    with b.block("to_nchw"):
        y = b.transpose(x, [0, 3, 1, 2])
    if c == 3:
        with b.block("stem"):
            y = b.conv_act(y, b.choice([16, 24, 32]), act, 3, 2, name="conv")
    heads = []
    nblocks = b.randint(2, 5)
    skips = []
    for i in range(nblocks):
        kind = b.choice(["blaze", "dwsep", "inverted", "basic", "nhwc_op", "head"], p=[.25, .2, .15, .15, .15, .1])
        if kind == "blaze" and min(b.shape[y][2:]) < 12:
            kind = "dwsep"
        with b.block(kind):
            if kind == "nhwc_op":
                t = b.transpose(y, [0, 2, 3, 1])
                cc = b.shape[t][3]
                if b.coin():  # a BatchNorm tf2onnx wrote as Mul + Add on the channel-last value
                    t = b.mul(t, b.weight((1 + 0.1 * b.rng.standard_normal(cc)).astype(np.float32), "scale"))
                    t = b.add(t, b.weight((0.1 * b.rng.standard_normal(cc)).astype(np.float32), "offset"))
                    t = b.act(t, act)
                else:
                    t2 = b.act(t, act)
                    t = b.concat([t, t2], 3)
                y = b.transpose(t, [0, 3, 1, 2])
            elif kind == "head":
                t = b.conv(y, b.choice([2, 4, 6, 16]) * b.choice([1, 2]), 3, name="head")
                t = b.transpose(t, [0, 2, 3, 1])
                nn_, hh, ww, cc = b.shape[t]
                k = b.choice([2, 4]) if cc % 4 == 0 else 1
                heads.append(b.reshape(t, (1, hh * ww * cc // k, k), spelled=[1, -1, k]))
            else:
                skips.append(y)
                y = _conv_block(b, y, act, kind, skips)
    with b.block("to_nhwc"):
        out = b.transpose(y, [0, 2, 3, 1])
    same = {}
    for hd in heads:
        same.setdefault(b.shape[hd][2], []).append(hd)
    for k, hs in same.items():
        if len(hs) > 1:
            with b.block("concat_heads"):
                b.output(b.concat(hs, 1))
        else:
            b.output(hs[0])
    b.output(out)


def _seq_sizes(b, scale):
    if b.small:
        s = b.choice([16, 32, 48])
        d = b.choice([64, 128])
        h = b.choice([2, 4])
    else:
        s = max(16, int(b.choice([32, 64, 128, 196, 256]) * scale))
        d = b.choice([256, 384, 512, 768])
        h = b.choice([hh for hh in [4, 6, 8, 12] if d % hh == 0 and 32 <= d // hh <= 128])
    return s, d, h


def gen_act(b, scale):
    """Activations and LayerNorm spelled out, on feature maps (after 1x1 / 3x3 convolutions) or on token sequences
    (after dense layers)."""
    kinds = ["silu", "hardswish", "hardswish_hs", "gelu", "gelu_tanh"]
    if b.coin():
        if b.small:
            c, h = b.choice([16, 32]), b.randint(16, 24)
        else:
            c, h = b.choice([16, 32, 64, 96, 128, 192]), max(12, int(b.randint(20, 80) * scale))
        y = b.input("input", (1, c, h, h))
        for i in range(b.randint(2, 5)):
            k = b.choice(kinds)
            with b.block(k):
                if b.coin(0.7):
                    y = b.conv(y, b.choice([c, b.shape[y][1]]), b.choice([1, 3]), name="conv")
                y = b.act(y, k)
    else:
        s, d, _ = _seq_sizes(b, scale)
        y = b.input("hidden_states", (1, s, d))
        for i in range(b.randint(2, 5)):
            k = b.choice(kinds + ["layernorm"])
            with b.block(k):
                if k == "layernorm":
                    y = b.layernorm(y)
                    continue
                if b.coin(0.7):
                    y = b.linear(y, b.choice([d, 2 * d]) if b.shape[y][-1] == d else d)
                y = b.act(y, k)
    b.output(y)


def _attention(b, x, heads, mask, fused_qkv):
    _, s, d = b.shape[x]
    dh = d // heads
    with b.sub("attention"):
        if fused_qkv:
            qkv = b.linear(x, 3 * d, name="qkv")
            if b.coin():
                q, k, v = b.split(qkv, [d, d, d], -1)
            else:
                q, k, v = (b.slice(qkv, [i * d], [(i + 1) * d], [-1]) for i in range(3))
        else:
            q, k, v = b.linear(x, d, name="query"), b.linear(x, d, name="key"), b.linear(x, d, name="value")
        spelled = [1, s, heads, dh] if b.coin() else [0, 0, heads, dh]
        scale_q = b.coin(0.3)
        if scale_q:
            q = b.mul(q, b.fconst(1.0 / math.sqrt(dh)))
        q = b.transpose(b.reshape(q, (1, s, heads, dh), spelled), [0, 2, 1, 3])
        kr = b.reshape(k, (1, s, heads, dh), spelled)
        if b.coin():
            kt = b.transpose(kr, [0, 2, 3, 1])
        else:
            kt = b.transpose(b.transpose(kr, [0, 2, 1, 3]), [0, 1, 3, 2])
        v = b.transpose(b.reshape(v, (1, s, heads, dh), spelled), [0, 2, 1, 3])
        sc = b.matmul(q, kt)
        if not scale_q:
            sc = b.binary("Div", sc, b.fconst(math.sqrt(dh))) if b.coin() else \
                b.mul(sc, b.fconst(1.0 / math.sqrt(dh)))
        if mask is not None:
            sc = b.add(sc, mask)
        p = b.softmax(sc, -1)
        ctx = b.matmul(p, v)
        ctx = b.transpose(ctx, [0, 2, 1, 3])
        ctx = b.reshape(ctx, (1, s, d), [1, s, d] if b.coin() else [0, 0, d])
        return b.linear(ctx, d, name="output")


def _mlp(b, x, act, ffn, swiglu=False):
    d = b.shape[x][-1]
    with b.sub("mlp"):
        if swiglu:
            g = b.act(b.linear(x, ffn, bias=False, name="gate_proj"), "silu")
            u = b.linear(x, ffn, bias=False, name="up_proj")
            return b.linear(b.mul(g, u), d, bias=False, name="down_proj")
        t = b.linear(x, ffn, name="fc1")
        t = b.act(t, act)
        return b.linear(t, d, name="fc2")


def gen_attention(b, scale):
    s, d, heads = _seq_sizes(b, scale)
    x = b.input("hidden_states", (1, s, d))
    mask = None
    mk = b.choice(["none", "input", "causal"])
    if mk == "input":  # HF BERT: (1 - mask) * -10000 from an int64 attention_mask
        m = b.input("attention_mask", (1, s), I64, bound=2)
        with b.block("mask"):
            m = b.node("Unsqueeze", [m, b.const(np.array([1, 2], np.int64))], (1, 1, 1, s), dtype=I64)
            m = b.node("Cast", [m], (1, 1, 1, s), to=F32)
            m = b.binary("Sub", b.fconst(1.0), m)
            mask = b.mul(m, b.fconst(-10000.0))
    elif mk == "causal":
        mask = b.weight(np.triu(np.full((s, s), -1e4, np.float32), 1).reshape(1, 1, s, s), "causal_mask")
    pre = b.coin()
    act = b.choice(["gelu", "gelu_tanh", "relu"], p=[.6, .3, .1])
    spelled = b.coin(0.7)
    fused = b.coin(0.3)
    mlp = b.coin(0.7)
    for layer in range(b.randint(1, 2)):
        with b.block("layer"):
            if pre:
                h = b.add(x, _attention(b, b.layernorm(x, spelled), heads, mask, fused))
                if mlp:
                    h = b.add(h, _mlp(b, b.layernorm(h, spelled), act, 4 * d if b.flops < 3e8 else 2 * d))
            else:
                h = b.layernorm(b.add(_attention(b, x, heads, mask, fused), x), spelled)
                if mlp:
                    h = b.layernorm(b.add(_mlp(b, h, act, 4 * d if b.flops < 3e8 else 2 * d), h), spelled)
            x = h
    b.output(x)


def gen_mlp(b, scale):
    s, d, _ = _seq_sizes(b, scale)
    flat = b.coin(0.25)
    x = b.input("hidden_states", (s, d) if flat else (1, s, d))
    act = b.choice(["gelu", "gelu_tanh", "relu", "silu", "swiglu"], p=[.35, .2, .15, .1, .2])
    pre = b.coin()
    for layer in range(b.randint(1, 3)):
        with b.block("mlp"):
            ffn = b.choice([2 * d, 4 * d]) if act != "swiglu" else (8 * d // 3) // 64 * 64
            if pre:
                x = b.add(x, _mlp(b, b.layernorm(x, b.coin(0.7)), act, ffn, act == "swiglu"))
            else:
                x = b.layernorm(b.add(_mlp(b, x, act, ffn, act == "swiglu"), x), b.coin(0.7))
    b.output(x)


def gen_tensor(b, scale):
    """Split, Slice, Gather and reductions as real models use them."""
    if b.coin(0.55):  # feature maps
        if b.small:
            c, h = b.choice([16, 32]), b.choice([16, 24, 32])
        else:
            c, h = b.choice([16, 32, 64, 96, 128, 256]), max(12, int(b.randint(20, 80) * scale)) // 2 * 2
        focus = b.coin(0.25)
        x = b.input("input", (1, 3 if focus else c, 2 * h if focus else h, 2 * h if focus else h))
        y = x
        if focus:  # YOLOv5's Focus: four strided Slices, Concat, conv
            with b.block("focus"):
                parts = [b.slice(x, [i, j], [10 ** 9, 10 ** 9], [2, 3], [2, 2]) for i, j in
                         [(0, 0), (1, 0), (0, 1), (1, 1)]]
                y = b.conv_act(b.concat(parts, 1), c, "silu", 3, name="conv")
        outs = []
        for i in range(b.randint(2, 4)):
            n, c, h, w = b.shape[y]
            kind = b.choice(["se", "cbam", "split", "shuffle", "gather_ch", "reduce", "slice_sp"])
            if kind == "shuffle" and c % 4:
                kind = "split"
            with b.block(kind):
                if kind == "se":
                    t = b.reduce("ReduceMean", y, [2, 3], 1) if b.coin() else b.gap(y)
                    t = b.conv_act(t, max(8, c // 4), "relu", 1, name="fc1")
                    t = b.conv_act(t, c, b.choice(["sigmoid", "hardswish_hs"]), 1, name="fc2")
                    y = b.mul(y, t)
                elif kind == "cbam":  # spatial attention: channel mean and max, 7x7 conv, sigmoid
                    a = b.reduce("ReduceMean", y, [1], 1)
                    m = b.reduce("ReduceMax", y, [1], 1)
                    t = b.conv_act(b.concat([a, m], 1), 1, "sigmoid", 7, name="conv")
                    y = b.mul(y, t)
                elif kind == "split":
                    k = b.choice([2, 3, 4])
                    base = c // k
                    sizes = [base] * (k - 1) + [c - base * (k - 1)]
                    parts = b.split(y, sizes, 1)
                    parts = [b.conv_act(p_, b.shape[p_][1], "relu", 3, name="branch%d" % j) if j % 2 == 0 else
                             b.act(p_, "silu") for j, p_ in enumerate(parts)]
                    y = b.concat(parts, 1)
                elif kind == "shuffle":  # ShuffleNet v2: split, branch, concat, channel shuffle
                    l_, r_ = b.split(y, [c // 2, c // 2], 1)
                    r_ = b.conv_act(r_, c // 2, "relu", 1, name="pw1")
                    r_ = b.conv_act(r_, c // 2, None, 3, g=c // 2, name="dw")
                    r_ = b.conv_act(r_, c // 2, "relu", 1, name="pw2")
                    t = b.concat([l_, r_], 1)
                    t = b.reshape(t, (1, 2, c // 2, h, w))
                    t = b.transpose(t, [0, 2, 1, 3, 4])
                    y = b.reshape(t, (1, c, h, w))
                elif kind == "gather_ch":  # a channel selection / permutation
                    idx = b.const(b.rng.permutation(c)[:max(4, c // b.choice([1, 2]))].astype(np.int64), how="init")
                    y = b.conv_act(b.gather(y, idx, 1), c, "relu", 1, name="conv")
                elif kind == "reduce":
                    op = b.choice(["ReduceMean", "ReduceSum", "ReduceMax"])
                    axes = b.choice([[1], [2], [3], [2, 3], [1, 2, 3]])
                    outs.append(b.reduce(op, y, axes, int(b.coin())))
                    y = b.act(y, "relu")
                else:  # slice_sp: crop the borders, or keep every other row
                    if b.coin() and h > 8:
                        y = b.slice(y, [1, 1], [-1, -1], [2, 3])
                    else:
                        y = b.slice(y, [0], [10 ** 9], [2], [2])
                    y = b.conv_act(y, c, "relu", 3, name="conv")
        b.output(y)
        for o in outs:
            b.output(o)
        return
    # token sequences
    s, d, _ = _seq_sizes(b, scale)
    if b.coin(0.35):  # an embedding table read by Gather
        v = b.choice([1000, 5000, 8192]) if not b.small else 500
        ids = b.input("input_ids", (1, s), I64, bound=v)
        with b.block("embeddings"):
            table = b.weight((0.02 * b.rng.standard_normal((v, d))).astype(np.float32), "word_embeddings.weight")
            y = b.gather(table, ids, 0)
            pos = b.weight((0.02 * b.rng.standard_normal((1, s, d))).astype(np.float32), "position_embeddings")
            y = b.layernorm(b.add(y, pos))
    else:
        y = b.input("hidden_states", (1, s, d))
    outs = []
    for i in range(b.randint(2, 4)):
        s_, d_ = b.shape[y][1], b.shape[y][2]
        kind = b.choice(["glu", "cls_pool", "mean_pool", "l2norm", "drop_cls", "split_heads", "reduce"])
        with b.block(kind):
            if kind == "glu":
                t = b.linear(y, 2 * d_, name="proj")
                if b.coin():
                    a, g = b.split(t, [d_, d_], -1)
                else:
                    a, g = b.slice(t, [0], [d_], [-1]), b.slice(t, [d_], [2 * d_], [-1])
                y = b.mul(a, b.act(g, "sigmoid"))
            elif kind == "cls_pool":  # BERT pooler: token 0, dense, tanh
                t = b.gather(y, b.const(np.array(0, np.int64)), 1)
                outs.append(b.act(b.linear(t, d_, name="pooler"), "tanh"))
                y = b.act(y, "gelu")
            elif kind == "mean_pool":
                outs.append(b.reduce("ReduceMean", y, [1], 0))
                y = b.linear(y, d_, name="dense")
            elif kind == "l2norm":  # sentence-embedding normalization
                sq = b.binary("Pow", y, b.fconst(2.0))
                n_ = b.unary("Sqrt", b.add(b.reduce("ReduceSum", sq, [-1], 1), b.fconst(1e-12)))
                y = b.binary("Div", y, n_)
            elif kind == "drop_cls":
                if s_ > 2:
                    y = b.slice(y, [1], [10 ** 9], [1])
                y = b.linear(y, d_, name="dense")
            elif kind == "split_heads":  # Split the hidden axis into heads, softmax over each, Concat
                k = b.choice([2, 4])
                parts = b.split(y, [d_ // k] * k, -1)
                y = b.concat([b.softmax(p_, -1) for p_ in parts], -1)
            else:
                op = b.choice(["ReduceMean", "ReduceSum", "ReduceMax"])
                axes = b.choice([[1], [2], [1, 2]])
                outs.append(b.reduce(op, y, axes, int(b.coin())))
                y = b.add(y, b.linear(y, d_, name="dense"))
    b.output(y)
    for o in outs:
        b.output(o)


GENERATORS = {"conv": gen_conv, "nhwc": gen_nhwc, "act": gen_act, "attention": gen_attention, "mlp": gen_mlp,
              "tensor": gen_tensor}


def class_of(index):
    return CLASSES[index % len(CLASSES)]


def generate(seed, index, small=False):
    """Model `index` of `seed`: (onnx.ModelProto, info dict)."""
    cls = class_of(index)
    rng = np.random.default_rng([seed, index])
    opset = int(rng.integers(13, 18))
    budget = FLOP_BUDGET_SMALL if small else FLOP_BUDGET
    scale = 1.0
    for attempt in range(16):
        b = Builder(rng, opset, small)
        GENERATORS[cls](b, scale)
        if attempt == 15:
            break
        if b.flops > budget:
            scale *= 0.8          # too big: the next draw at smaller sizes
        elif not small and b.flops + 8 * b.elems < WORK_FLOOR:
            continue              # too small: draw again
        else:
            break
    m = b.model("perftest_%s_%d_%d" % (cls, seed, index))
    m.doc_string = "perftest seed %d index %d class %s%s" % (seed, index, cls, " small" if small else "")
    for k, v in [("perftest.seed", seed), ("perftest.index", index), ("perftest.class", cls),
                 ("perftest.small", int(small)), ("perftest.flops", int(b.flops)), ("perftest.elems", int(b.elems)),
                 ("perftest.blocks", ",".join(b.blocks))] + \
            [("perftest.int_bound." + k, v) for k, v in b.bounds.items()]:
        e = m.metadata_props.add()
        e.key, e.value = k, str(v)
    check(m, {o.name: b.shape[o.name] for o in m.graph.output})
    return m


def meta(model, key, default=None):
    for e in model.metadata_props:
        if e.key == key:
            return e.value
    return default


def check(model, expect=None):
    """onnx.checker (full) and strict shape inference; the outputs' inferred shapes must equal `expect`."""
    onnx.checker.check_model(model, full_check=True)
    inf = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    if expect:
        got = {}
        for vi in list(inf.graph.output) + list(inf.graph.value_info):
            got[vi.name] = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
        for k, v in expect.items():
            if got.get(k) != tuple(v):
                raise ValueError("output %s: generator says %s, shape inference %s" % (k, v, got.get(k)))
    return inf


def value_shapes(model):
    """{value: (elem_type, dims)} for every value of the model (shape inference)."""
    inf = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    out = {}
    for vi in list(inf.graph.input) + list(inf.graph.output) + list(inf.graph.value_info):
        t = vi.type.tensor_type
        out[vi.name] = (t.elem_type, tuple(d.dim_value for d in t.shape.dim))
    for t in model.graph.initializer:
        out[t.name] = (t.data_type, tuple(t.dims))
    return out


def make_inputs(model, seed):
    """Inputs for the model's graph inputs: standard normal floats; int64 ids below their recorded bound."""
    rng = np.random.default_rng([seed, 7])
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        if t.elem_type == F32:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
        elif t.elem_type == I64:
            bound = int(meta(model, "perftest.int_bound." + vi.name, "2"))
            feeds[vi.name] = rng.integers(0, bound, size=shape).astype(np.int64)
        else:
            raise ValueError("input %s: element type %d" % (vi.name, t.elem_type))
    return feeds


def describe(model, limit=80):
    """One line per node (ops and the shapes of their outputs), for the logs and the saved folders."""
    shapes = value_shapes(model)
    lines = []
    for vi in model.graph.input:
        lines.append("input  %s %s" % (vi.name, list(shapes.get(vi.name, (0, ()))[1])))
    for k, n in enumerate(model.graph.node):
        if k >= limit:
            lines.append("... %d more nodes" % (len(model.graph.node) - limit))
            break
        if n.op_type == "Constant":
            continue
        lines.append("%-40s %-18s -> %s" % (n.name, n.op_type, [list(shapes.get(o, (0, ()))[1]) for o in n.output]))
    for vi in model.graph.output:
        lines.append("output %s %s" % (vi.name, list(shapes.get(vi.name, (0, ()))[1])))
    return "\n".join(lines)


if __name__ == "__main__":  # python3 gen.py SEED COUNT [--small]: generate and summarize (a generator check)
    import sys
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    small = "--small" in sys.argv
    for i in range(count):
        m = generate(seed, i, small)
        print("%3d %-9s opset %d nodes %3d weights %6.1f MB flops %7.1f M  %s" % (
            i, class_of(i), m.opset_import[0].version, len(m.graph.node),
            sum(np.prod(t.dims) * 4 for t in m.graph.initializer) / 1e6, int(meta(m, "perftest.flops")) / 1e6,
            meta(m, "perftest.blocks")))
