"""Random, valid ONNX models built from what AotCpu claims (providers/aotcpu/lower/ops_*.cc Support* functions,
ir/fold.cc, docs/aotcpu.md "What it claims"), for the differential tester (difftest.py).

Model `index` of seed `seed` is always the same: every random choice comes from numpy's Generator seeded with
[seed, index], and nothing else (no clock, no dict order of unseeded data) decides anything.

A model is grown one template at a time from a pool of float values with static shapes. Templates are the ops and
attributes AotCpu lowers and the patterns its lowering fuses: Conv/ConvTranspose (+ BatchNormalization folding,
activation and residual post-ops), NHWC convolutions between Transposes, MatMul/Gemm (+ bias, scalar and binary
post-ops), attention (strided Q/K/V views through Transpose, scale, mask Add + Softmax), the Erf-form GELU (four
spellings), elementwise unary/binary ops with constants as initializers or Constant nodes in either operand position
and in every broadcast form, pooling, Resize, Softmax, LayerNormalization, ReduceMean, Reshape (also to a shape
computed from Shape/Gather/Concat), Squeeze/Unsqueeze/Flatten/Identity, Transpose, Slice, Concat, Gather. The
newest value is the preferred input (chains that fusion can absorb), older values are read too (values with several
consumers), and some intermediates become graph outputs while other nodes still read them.

Every shape is computed by ONNX shape inference of the single node, and the finished model passes
onnx.checker (full) and strict shape inference before it is used.
"""
import json
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64
SQRT2 = math.sqrt(2.0)


class GenError(Exception):
    """A template could not be applied (shape inference refused it): the generator rolls it back."""


class Val:
    def __init__(self, name, shape, dtype=F32, pos=False):
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.pos = pos  # every element >= 0.25 (safe for Log, Sqrt, a divisor, a fractional Pow)


class Gen:
    def __init__(self, seed, index, max_templates=None):
        self.rng = np.random.default_rng([seed, index])
        r = self.rng
        self.seed, self.index = seed, index
        self.opset = int(r.choice([11, 13, 17], p=[0.2, 0.3, 0.5]))
        self.nodes, self.inits, self.inputs = [], [], []
        self.vals = {}       # name -> Val (every value, float or not)
        self.data = {}       # name -> numpy array: values known at generation time (constants, shape arithmetic)
        self.pool = []       # float value names usable as template inputs, in creation order
        self.int_bounds = {}  # int64 graph input -> exclusive upper bound of its values
        self.max_k = 1       # the longest reduction (dot product, window, softmax row): scales the tolerance
        self.counter = 0
        self.templates_used = []
        self.max_templates = max_templates or int(r.integers(3, 13))

    # ---- naming and bookkeeping ------------------------------------------------------------------------------

    def name(self, prefix):
        self.counter += 1
        return "%s%d" % (prefix, self.counter)

    def choice(self, seq, p=None):
        return seq[int(self.rng.choice(len(seq), p=p))]

    def coin(self, p):
        return bool(self.rng.random() < p)

    def snapshot(self):
        return (len(self.nodes), len(self.inits), len(self.inputs), dict(self.vals), dict(self.data), list(self.pool),
                dict(self.int_bounds), self.max_k, self.counter)

    def restore(self, s):
        n, i, gi, self.vals, self.data, self.pool, self.int_bounds, self.max_k, self.counter = s
        del self.nodes[n:]
        del self.inits[i:]
        del self.inputs[gi:]

    # ---- values ----------------------------------------------------------------------------------------------

    def graph_input(self, shape, dtype=F32, bound=None):
        nm = self.name("in")
        self.inputs.append(helper.make_tensor_value_info(nm, dtype, list(shape)))
        self.vals[nm] = Val(nm, shape, dtype)
        if dtype == F32:
            self.pool.append(nm)
        if bound is not None:
            self.int_bounds[nm] = int(bound)
        return nm

    def const(self, arr, how=None):
        """A constant as an initializer or a Constant node (value tensor; value_float / value_floats / value_ints
        for scalars and 1-D when the opset has them). Returns its name."""
        arr = np.asarray(arr)
        if how is None:
            how = self.choice(["init", "node", "node_attr"], p=[0.5, 0.3, 0.2])
        nm = self.name("c")
        if how == "init":
            self.inits.append(numpy_helper.from_array(arr, nm))
        else:
            attr = None
            if how == "node_attr" and self.opset >= 12:
                if arr.dtype == np.float32 and arr.ndim == 0:
                    attr = {"value_float": float(arr)}
                elif arr.dtype == np.float32 and arr.ndim == 1:
                    attr = {"value_floats": [float(x) for x in arr]}
                elif arr.dtype == np.int64 and arr.ndim == 1:
                    attr = {"value_ints": [int(x) for x in arr]}
            if attr is None:
                attr = {"value": numpy_helper.from_array(arr, nm + "_t")}
            self.nodes.append(helper.make_node("Constant", [], [nm], name=self.name("n") + "_Constant", **attr))
        self.vals[nm] = Val(nm, arr.shape, F32 if arr.dtype == np.float32 else I64)
        self.data[nm] = arr
        return nm

    def fconst(self, shape, kind="normal", how=None):
        r = self.rng
        shape = tuple(shape)
        if kind == "normal":
            a = r.standard_normal(shape)
        elif kind == "divisor":  # bounded away from 0
            a = r.choice([-1.0, 1.0], size=shape) * r.uniform(0.5, 2.0, size=shape)
        elif kind == "pos":
            a = r.uniform(0.5, 2.0, size=shape)
        elif kind == "small":
            a = r.standard_normal(shape) * 0.1
        else:
            raise ValueError(kind)
        return self.const(np.asarray(a, dtype=np.float32), how)

    def iconst(self, values, how=None):
        return self.const(np.asarray(values, dtype=np.int64), how)

    def emit(self, op, inputs, attrs=None, pos=False, n_out=1, domain=""):
        """Adds node `op`; the output shapes come from ONNX shape inference of the node alone."""
        attrs = attrs or {}
        outs = [self.name("v") for _ in range(n_out)]
        node = helper.make_node(op, list(inputs), outs, name=self.name("n") + "_" + op, domain=domain, **attrs)
        shapes = self.infer(node)
        self.nodes.append(node)
        suspect = self.size_differs(node, shapes[0][1])
        for nm, (dtype, shape) in zip(outs, shapes):
            self.vals[nm] = Val(nm, shape, dtype, pos)
            if dtype == F32 and not suspect:
                self.pool.append(nm)
        if suspect:  # at most one elementwise reader, then a graph output (see size_differs)
            if self.coin(0.5):
                nm = self.name("v")
                self.nodes.append(helper.make_node("Relu", [outs[0]], [nm], name=self.name("n") + "_Relu"))
                self.vals[nm] = Val(nm, shapes[0][1])
        return outs[0] if n_out == 1 else outs

    def size_differs(self, node, inferred):
        """True when ONNX's shape inference (1.12, as libonnx) sizes the node's output unlike ONNX Runtime and the
        kernels: a ceil_mode pooling whose last window starts in the padding, a SAME ConvTranspose with
        output_padding or a kernel shorter than the stride. Such an output is kept out of the pool (a later MatMul or
        broadcast would get operands the CPU EP refuses); it gets at most one Relu reader, which still exercises
        AotCpu's handling of the contradicted shape (DistrustContradictedShapes)."""
        a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
        ap = a.get("auto_pad", b"NOTSET")
        ap = ap.decode() if isinstance(ap, bytes) else ap
        x = self.vals[node.input[0]].shape
        r = len(x) - 2
        if r < 1 or len(inferred) != len(x):
            return False
        strides = list(a.get("strides", [1] * r))
        if node.op_type in ("MaxPool", "AveragePool") and a.get("ceil_mode", 0) and ap in ("NOTSET", "VALID"):
            pads = list(a.get("pads", [0] * 2 * r)) if ap == "NOTSET" else [0] * 2 * r
            return any((inferred[2 + i] - 1) * strides[i] >= x[2 + i] + pads[i] for i in range(r))
        if node.op_type == "ConvTranspose" and ap in ("SAME_UPPER", "SAME_LOWER"):
            w = self.vals[node.input[1]].shape
            dil = list(a.get("dilations", [1] * r))
            opad = list(a.get("output_padding", [0] * r))
            for i in range(r):
                natural = strides[i] * (x[2 + i] - 1) + opad[i] + (w[2 + i] - 1) * dil[i] + 1
                if inferred[2 + i] != min(x[2 + i] * strides[i], natural):
                    return True
        return False

    def infer(self, node):
        gin, inits = [], []
        for nm in node.input:
            if not nm or nm in [i.name for i in inits] or nm in [i.name for i in gin]:
                continue
            if nm in self.data:
                inits.append(numpy_helper.from_array(self.data[nm], nm))
            else:
                v = self.vals[nm]
                gin.append(helper.make_tensor_value_info(nm, v.dtype, list(v.shape)))
        outs = [helper.make_empty_tensor_value_info(o) for o in node.output]
        g = helper.make_graph([node], "t", gin, outs, inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = 8
        try:
            m = shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
        except Exception as e:  # noqa: BLE001 (onnx raises several types)
            raise GenError("%s: %s" % (node.op_type, e))
        res = []
        for o in m.graph.output:
            tt = o.type.tensor_type
            if not tt.HasField("shape") or any(not d.HasField("dim_value") for d in tt.shape.dim):
                raise GenError("%s: no static output shape" % node.op_type)
            shape = tuple(d.dim_value for d in tt.shape.dim)
            if any(d <= 0 for d in shape):
                raise GenError("%s: empty output" % node.op_type)
            if int(np.prod(shape)) > 200000:
                raise GenError("%s: output too large" % node.op_type)
            res.append((tt.elem_type, shape))
        return res

    def shape(self, nm):
        return self.vals[nm].shape

    def pick(self, pred=lambda v: True, recent=0.7):
        """A float value satisfying `pred`: the newest such value with probability `recent`, else any."""
        cands = [n for n in self.pool if pred(self.vals[n])]
        if not cands:
            return None
        if self.coin(recent):
            return cands[-1]
        return self.choice(cands)

    # ---- helpers ---------------------------------------------------------------------------------------------

    def positive(self, x):
        """A value >= 0.25 derived from x: Sigmoid/Abs/Exp-based, plus a constant."""
        v = self.vals[x]
        if v.pos:
            return x
        how = self.choice(["sigmoid", "abs", "softplus"])
        if how == "sigmoid":
            y = self.emit("Sigmoid", [x])
        elif how == "abs":
            y = self.emit("Abs", [x])
        else:
            y = self.emit("Softplus", [x])
        c = self.fconst((), "pos") if self.coin(0.5) else self.fconst((1,), "pos")
        ins = [y, c] if self.coin(0.5) else [c, y]
        return self.emit("Add", ins, pos=True)

    def broadcast_forms(self, shape):
        """Constant shapes that broadcast to `shape` (and do not widen it)."""
        r = len(shape)
        forms = [(), (1,), (shape[-1],) if r else (), tuple(shape)]
        if r >= 2:
            forms += [(1,) * (r - 1) + (shape[-1],), (shape[-2], 1), tuple(shape[-2:])]
        if r == 4:
            n, c, h, w = shape
            forms += [(c, 1, 1), (1, c, 1, 1), (1, 1, 1, w), (1, 1, h, 1), (h, w), (n, 1, 1, 1), (1, c, h, w)]
        if r == 3:
            forms += [(shape[0], 1, 1), (1, shape[1], 1)]
        return forms

    def act(self, x):
        """An activation node after x (random op and attributes); returns its output."""
        r = self.rng
        op = self.choice(["Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu",
                          "Softplus", "Abs", "Neg", "Erf", "Exp", "Log", "Sqrt"])
        if op == "LeakyRelu":
            return self.emit(op, [x], {"alpha": float(r.uniform(0.01, 0.5))})
        if op == "Elu":
            return self.emit(op, [x], {"alpha": float(r.uniform(0.5, 1.5))})
        if op == "HardSigmoid":
            return self.emit(op, [x], {"alpha": float(r.uniform(0.1, 0.5)), "beta": float(r.uniform(0.2, 0.7))})
        if op == "Clip":
            lo, hi = sorted(r.uniform(-2, 2, size=2).tolist())
            ins = [x]
            which = self.choice(["both", "min", "max", "none"])
            how = self.choice(["init", "node", "node_attr"])
            ins.append(self.const(np.float32(lo), how) if which in ("both", "min") else "")
            if which in ("both", "max"):
                ins.append(self.const(np.float32(hi), how))
            while ins and ins[-1] == "":
                ins.pop()
            return self.emit(op, ins)
        if op in ("Log", "Sqrt"):
            return self.emit(op, [self.positive(x)])
        if op == "Exp":
            return self.emit(op, [self.emit("Tanh", [x]) if self.coin(0.5) else x])
        return self.emit(op, [x])

    def maybe_acts(self, x, p=0.6, most=3):
        k = 0
        while k < most and self.coin(p):
            x = self.act(x) if self.coin(0.7) else self.binary_const(x)
            k += 1
        return x

    def binary_const(self, x, op=None, form=None):
        """x (op) constant or constant (op) x, the constant in a random broadcast form and source."""
        shape = self.shape(x)
        op = op or self.choice(["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"], p=[.25, .15, .25, .1, .1, .1, .05])
        if op == "Pow":
            e = self.choice([2.0, 3.0, 0.5, 2, -1.0])
            base = self.positive(x) if e in (0.5, -1.0) else x
            if isinstance(e, int):
                c = self.const(np.asarray(e, dtype=np.int64) if self.coin(0.5) else np.asarray([e], dtype=np.int64))
            else:
                c = self.const(np.asarray(e, dtype=np.float32) if self.coin(0.5) else np.asarray([e], np.float32))
            return self.emit("Pow", [base, c])
        if form is None:
            form = self.choice(self.broadcast_forms(shape))
        const_first = self.coin(0.5)
        if op == "Div":
            if const_first:
                x = self.positive(x)
                c = self.fconst(form, "normal")
            else:
                c = self.fconst(form, "divisor")
        else:
            c = self.fconst(form, "normal")
        # Sometimes reuse an existing constant of this shape (a Constant read by several nodes).
        if op != "Div" and self.coin(0.15):
            same = [n for n in self.data if self.vals[n].dtype == F32 and self.vals[n].shape == tuple(form)]
            if same:
                c = self.choice(same)
        ins = [c, x] if const_first else [x, c]
        return self.emit(op, ins)

    # ---- templates -------------------------------------------------------------------------------------------

    def t_conv(self, nhwc=False, transpose=False):
        r = self.rng
        if nhwc:
            x = self.pick(lambda v: len(v.shape) == 4 and v.shape[1] >= 3 and v.shape[2] >= 3)
            if x is None:
                return False
            x = self.emit("Transpose", [x], {"perm": [0, 3, 1, 2]})
        else:
            x = self.pick(lambda v: len(v.shape) in (3, 4, 5) and min(v.shape[2:]) >= 2 and v.shape[1] <= 64 and
                          (len(v.shape) < 5 or np.prod(v.shape) <= 20000))
            if x is None:
                return False
        shape = self.shape(x)
        c = shape[1]
        spatial = shape[2:]
        nsp = len(spatial)
        group = 1
        choices = [1, 1]
        if c > 1:
            choices.append(c)
        for d in (2, 4):
            if c % d == 0 and c > d:
                choices.append(d)
        group = int(self.choice(choices))
        mult = int(self.choice([1, 1, 2]))
        oc = int(self.choice([c, 2 * c, 4, 8, 16])) if group == 1 else group * mult * int(self.choice([1, c // group]))
        oc = max(1, min(oc, 48))
        if oc % group:
            oc = group * max(1, oc // group)
        k = [int(r.integers(1, min(3, s) + 1)) for s in spatial]
        attrs = {}
        if self.coin(0.5):
            attrs["kernel_shape"] = k
        strides = [int(self.choice([1, 1, 2])) for _ in spatial]
        if any(s != 1 for s in strides) or self.coin(0.2):
            attrs["strides"] = strides
        if self.coin(0.15):
            attrs["dilations"] = [int(self.choice([1, 2])) for _ in spatial]
        mode = self.choice(["pads", "pads", "none", "SAME_UPPER", "SAME_LOWER", "VALID"])
        if mode == "pads":
            attrs["pads"] = [int(r.integers(0, kk)) if kk > 1 else 0 for kk in k] * 2
            if self.coin(0.3):
                attrs["pads"] = [int(r.integers(0, kk)) for kk in k + k]
        elif mode != "none":
            attrs["auto_pad"] = mode
        if group > 1 or self.coin(0.1):
            attrs["group"] = group
        fan_in = (c // group) * int(np.prod(k))
        if transpose:
            wshape = (c, oc // group) + tuple(k)
            if self.coin(0.3) and any(s > 1 for s in strides):
                attrs["output_padding"] = [int(r.integers(0, s)) for s in strides]
            if attrs.get("auto_pad") == "VALID" and self.coin(0.5):
                attrs.pop("auto_pad")
        else:
            wshape = (oc, c // group) + tuple(k)
        w = self.const((r.standard_normal(wshape) / math.sqrt(fan_in)).astype(np.float32),
                       self.choice(["init", "init", "node"]))
        ins = [x, w]
        if self.coin(0.6):
            ins.append(self.fconst((oc,), "small", self.choice(["init", "node"])))
        y = self.emit("ConvTranspose" if transpose else "Conv", ins, attrs)
        self.max_k = max(self.max_k, fan_in * (4 if transpose else 1))
        if y not in self.pool:  # a size ONNX's inference gets wrong (size_differs): nothing more reads it
            return True
        if self.coin(0.35):
            y = self.batchnorm(y)
        y = self.maybe_acts(y, 0.5, 2)
        if self.coin(0.25):  # residual Add with an earlier value of the same shape
            same = [n for n in self.pool if self.vals[n].shape == self.shape(y) and n != y]
            if same:
                o = self.choice(same)
                y = self.emit("Add", [y, o] if self.coin(0.5) else [o, y])
                y = self.maybe_acts(y, 0.4, 1)
        if nhwc:
            y = self.emit("Transpose", [y], {"perm": [0, 2, 3, 1]})
        return True

    def batchnorm(self, x):
        c = self.shape(x)[1]
        r = self.rng
        scale = self.fconst((c,), "normal")
        bias = self.fconst((c,), "small")
        mean = self.fconst((c,), "small")
        var = self.const(r.uniform(0.5, 2.0, size=(c,)).astype(np.float32))
        attrs = {}
        if self.coin(0.5):
            attrs["epsilon"] = float(self.choice([1e-5, 1e-3, 0.1]))
        return self.emit("BatchNormalization", [x, scale, bias, mean, var], attrs)

    def t_batchnorm(self):
        x = self.pick(lambda v: 2 <= len(v.shape) <= 5)
        if x is None:
            return False
        self.batchnorm(x)
        return True

    def t_unary(self):
        x = self.pick()
        self.act(x)
        return True

    def t_binary_const(self):
        x = self.pick()
        self.binary_const(x)
        return True

    def t_binary_values(self):
        """Two computed values: the same shape, or one broadcast ([N,C,1,1] from a pooling, a row from a
        reduction)."""
        x = self.pick()
        shape = self.shape(x)
        op = self.choice(["Add", "Sub", "Mul", "Div", "Max", "Min"], p=[.3, .2, .25, .05, .1, .1])
        same = [n for n in self.pool if self.vals[n].shape == shape and n != x]
        if same and self.coin(0.5):
            o = self.choice(same)
        elif len(shape) == 4 and self.coin(0.5):  # squeeze-and-excitation: x * sigmoid(gap(x))
            o = self.emit(self.choice(["GlobalAveragePool", "GlobalMaxPool"]), [x])
            if self.coin(0.5):
                o = self.emit("Sigmoid", [o], pos=False)
        elif shape:
            axes = [len(shape) - 1]
            o = self.reduce_mean(x, axes, keepdims=1)
        else:  # a scalar has no axis to reduce
            return False
        if op == "Div":
            o = self.positive(o)
            ins = [x, o]
        else:
            ins = [x, o] if self.coin(0.5) else [o, x]
        self.emit(op, ins)
        return True

    def reduce_mean(self, x, axes, keepdims):
        self.max_k = max(self.max_k, int(np.prod([self.shape(x)[a] for a in axes])))
        if self.opset >= 18:
            return self.emit("ReduceMean", [x, self.iconst(axes)], {"keepdims": keepdims})
        return self.emit("ReduceMean", [x], {"axes": axes, "keepdims": keepdims})

    def t_reduce(self):
        x = self.pick(lambda v: len(v.shape) >= 2)
        if x is None:
            return False
        r = len(self.shape(x))
        axes = sorted(self.rng.choice(r, size=int(self.rng.integers(1, r)), replace=False).tolist())
        if self.coin(0.3):
            axes = [a - r for a in axes]
        self.reduce_mean(x, axes, int(self.coin(0.6)))
        return True

    def matmul_in(self):
        """A value of rank 2..4 to multiply (a 4-D NCHW value is flattened first sometimes)."""
        x = self.pick(lambda v: 1 <= len(v.shape) <= 4 and v.shape[-1] <= 256)
        if x is None:
            return None
        if len(self.shape(x)) == 4 and self.coin(0.4):
            x = self.emit("Flatten", [x], {"axis": int(self.choice([1, 2, 3]))})
        return x

    def t_matmul(self):
        r = self.rng
        x = self.matmul_in()
        if x is None:
            return False
        k = self.shape(x)[-1]
        n = int(self.choice([1, 3, 8, 16, 32]))
        if self.coin(0.1):
            wshape = (k,)
        elif self.coin(0.15) and len(self.shape(x)) >= 3:
            wshape = (self.shape(x)[-3], k, n) if self.coin(0.5) else (1, k, n)
        else:
            wshape = (k, n)
        w = self.const((r.standard_normal(wshape) / math.sqrt(k)).astype(np.float32),
                       self.choice(["init", "init", "node"]))
        self.max_k = max(self.max_k, k)
        if len(self.shape(x)) == 2 and len(wshape) == 2 and self.coin(0.15):  # constant first: W[n, M] x X[M, K]
            w = self.const((r.standard_normal((n, self.shape(x)[0])) / math.sqrt(self.shape(x)[0])).astype(np.float32))
            self.max_k = max(self.max_k, self.shape(x)[0])
            y = self.emit("MatMul", [w, x])
        else:
            y = self.emit("MatMul", [x, w])
        if self.coin(0.6) and len(self.shape(y)) >= 1:
            b = self.fconst((self.shape(y)[-1],), "small")
            y = self.emit("Add", [y, b] if self.coin(0.6) else [b, y])
        self.maybe_acts(y, 0.5, 3)
        return True

    def t_gemm(self):
        r = self.rng
        x = self.pick(lambda v: len(v.shape) == 2 and v.shape[1] <= 256)
        if x is None:
            x = self.pick(lambda v: len(v.shape) >= 2 and np.prod(v.shape[1:]) <= 512)
            if x is None:
                return False
            x = self.emit("Flatten", [x])
        m, k = self.shape(x)
        attrs = {}
        trans_a = self.coin(0.2)
        if trans_a:
            attrs["transA"] = 1
            m, k = k, m
        n = int(self.choice([1, 4, 16, 24]))
        trans_b = self.coin(0.5)
        if trans_b:
            attrs["transB"] = 1
        w = self.const((r.standard_normal((n, k) if trans_b else (k, n)) / math.sqrt(k)).astype(np.float32),
                       self.choice(["init", "init", "node"]))
        if self.coin(0.3):
            attrs["alpha"] = float(r.uniform(0.5, 2))
        ins = [x, w]
        if self.coin(0.7):
            cshape = self.choice([(n,), (1, n), (m, n), (1,), (), (m, 1)])
            ins.append(self.fconst(cshape, "small"))
            if self.coin(0.3):
                attrs["beta"] = float(r.uniform(0.5, 2))
        self.max_k = max(self.max_k, k)
        y = self.emit("Gemm", ins, attrs)
        self.maybe_acts(y, 0.5, 2)
        return True

    def t_attention(self):
        """Single-input self-attention: projections, head split (Reshape + Transpose), Q x K^T through a Transpose
        view, a scale, an optional constant mask, Softmax, x V, heads merged back."""
        r = self.rng
        x = self.pick(lambda v: len(v.shape) == 3 and v.shape[-1] in (4, 8, 16, 32) and v.shape[1] <= 32)
        if x is None:
            return False
        b, s, d = self.shape(x)
        heads = int(self.choice([h for h in (1, 2, 4) if d % h == 0]))
        hd = d // heads

        def proj():
            w = self.const((r.standard_normal((d, d)) / math.sqrt(d)).astype(np.float32))
            p = self.emit("MatMul", [x, w])
            if self.coin(0.5):
                p = self.emit("Add", [p, self.fconst((d,), "small")])
            return self.emit("Reshape", [p, self.iconst([b, s, heads, hd])])

        q = self.emit("Transpose", [proj()], {"perm": [0, 2, 1, 3]})
        kk = proj()
        if self.coin(0.5):
            kt = self.emit("Transpose", [kk], {"perm": [0, 2, 3, 1]})
        else:
            kt = self.emit("Transpose", [self.emit("Transpose", [kk], {"perm": [0, 2, 1, 3]})], {"perm": [0, 1, 3, 2]})
        v = self.emit("Transpose", [proj()], {"perm": [0, 2, 1, 3]})
        self.max_k = max(self.max_k, hd, s)
        sc = self.emit("MatMul", [q, kt])
        scale = np.float32(1.0 / math.sqrt(hd))
        if self.coin(0.5):
            c = self.const(scale if self.coin(0.5) else np.asarray([scale], np.float32))
            sc = self.emit("Mul", [sc, c] if self.coin(0.5) else [c, sc])
        else:
            c = self.const(np.float32(math.sqrt(hd)))
            sc = self.emit("Div", [sc, c])
        if self.coin(0.7):
            form = self.choice([(s, s), (1, 1, s, s), (s,), (1, s), (b, 1, 1, s), (1, heads, s, s)])
            causal = np.triu(np.full((s, s), -1e4, np.float32), 1)
            mask = np.broadcast_to(causal if len(form) >= 2 and form[-2] == s else causal[-1:], (1, 1, s, s))
            full = np.broadcast_to(mask, (b, heads, s, s))
            idx = tuple(slice(0, f) for f in ((1,) * (4 - len(form)) + tuple(form)))
            m = self.const(np.ascontiguousarray(full[idx]).reshape(form))
            sc = self.emit("Add", [sc, m] if self.coin(0.7) else [m, sc])
        p = self.emit("Softmax", [sc], {"axis": -1 if self.coin(0.5) else 3} if self.opset >= 13 or True else {})
        o = self.emit("MatMul", [p, v])
        o = self.emit("Transpose", [o], {"perm": [0, 2, 1, 3]})
        o = self.emit("Reshape", [o, self.iconst([b, s, d])])
        if self.coin(0.5):
            w = self.const((r.standard_normal((d, d)) / math.sqrt(d)).astype(np.float32))
            o = self.emit("MatMul", [o, w])
            o = self.emit("Add", [o, x])  # residual
        return True

    def t_gelu(self):
        x = self.pick()
        if self.coin(0.5):
            x2 = self.matmul_in()
            if x2 is not None:
                k = self.shape(x2)[-1]
                w = self.const((self.rng.standard_normal((k, 16)) / math.sqrt(k)).astype(np.float32))
                x = self.emit("MatMul", [x2, w])
                self.max_k = max(self.max_k, k)
        form = int(self.rng.integers(0, 4))
        h = self.emit("Div", [x, self.const(np.float32(SQRT2))]) if form != 1 else \
            self.emit("Mul", [x, self.const(np.float32(1 / SQRT2))] if self.coin(0.5) else
                      [self.const(np.float32(1 / SQRT2)), x])
        e = self.emit("Erf", [h])
        one = self.const(np.float32(1.0))
        a = self.emit("Add", [e, one] if self.coin(0.5) else [one, e])
        half = self.const(np.float32(0.5))
        if form == 0:    # (x * (1 + erf)) * 0.5
            self.emit("Mul", [self.emit("Mul", [x, a]), half])
        elif form == 1:  # x * ((1 + erf) * 0.5)
            self.emit("Mul", [x, self.emit("Mul", [a, half])])
        elif form == 2:  # (x * 0.5) * (1 + erf)
            self.emit("Mul", [self.emit("Mul", [x, half]), a])
        else:            # 0.5 * (x * (1 + erf))
            self.emit("Mul", [half, self.emit("Mul", [a, x])])
        return True

    def t_pool(self):
        r = self.rng
        x = self.pick(lambda v: len(v.shape) in (3, 4, 5) and min(v.shape[2:]) >= 2 and
                      (len(v.shape) < 5 or np.prod(v.shape) <= 20000))
        if x is None:
            return False
        op = self.choice(["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"], p=[.35, .35, .15, .15])
        sp = self.shape(x)[2:]
        if op.startswith("Global"):
            self.max_k = max(self.max_k, int(np.prod(sp)))
            self.emit(op, [x])
            return True
        k = [int(r.integers(1, min(3, s) + 1)) for s in sp]
        attrs = {"kernel_shape": k}
        if self.coin(0.7):
            attrs["strides"] = [int(self.choice([1, 2, 2])) for _ in sp]
        mode = self.choice(["pads", "none", "SAME_UPPER", "SAME_LOWER", "VALID"])
        if mode == "pads":
            attrs["pads"] = [int(r.integers(0, kk)) if kk > 1 else 0 for kk in k + k]
        elif mode != "none":
            attrs["auto_pad"] = mode
        if self.opset >= 10 and self.coin(0.3):
            attrs["ceil_mode"] = 1
        if op == "AveragePool" and self.coin(0.4):
            attrs["count_include_pad"] = 1
        if op == "MaxPool" and self.coin(0.15) and self.opset >= 10:
            attrs["dilations"] = [int(self.choice([1, 2])) for _ in sp]
        self.max_k = max(self.max_k, int(np.prod(k)))
        self.emit(op, [x], attrs)
        return True

    def t_resize(self):
        r = self.rng
        x = self.pick(lambda v: len(v.shape) in (3, 4) and max(v.shape[2:]) <= 16)
        if x is None:
            return False
        shape = self.shape(x)
        mode = self.choice(["linear", "nearest"])
        attrs = {"mode": mode}
        ctm = self.choice(["half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners"], p=[.4, .2, .3, .1])
        attrs["coordinate_transformation_mode"] = ctm
        if mode == "nearest":
            attrs["nearest_mode"] = self.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
        roi = self.const(np.zeros((0,), np.float32), "init") if self.opset < 13 else ""
        factors = [float(self.choice([0.5, 2.0, 3.0, 1.0, 1.5])) for _ in shape[2:]]
        if self.coin(0.5):
            scales = self.const(np.asarray([1.0, 1.0] + factors, np.float32))
            self.emit("Resize", [x, roi, scales], attrs)
        else:
            sizes = [shape[0], shape[1]] + [max(1, int(s * f)) for s, f in zip(shape[2:], factors)]
            empty = self.const(np.zeros((0,), np.float32), "init") if self.opset < 13 else ""
            self.emit("Resize", [x, roi, empty, self.iconst(sizes)], attrs)
        return True

    def t_softmax(self):
        x = self.pick(lambda v: len(v.shape) >= 1)
        r = len(self.shape(x))
        if self.opset >= 13:
            axis = int(self.rng.integers(-r, r))
        else:
            axis = self.choice([r - 1, -1])
        self.max_k = max(self.max_k, self.shape(x)[axis])
        if self.coin(0.5) and r >= 1:  # a constant mask Add first (MaskedSoftmax when the axis is the last)
            form = self.choice(self.broadcast_forms(self.shape(x)))
            if form and form[-1] == self.shape(x)[-1]:
                m = np.where(self.rng.random(form) < 0.3, -1e4, 0).astype(np.float32)
                c = self.const(m)
                x = self.emit("Add", [x, c] if self.coin(0.6) else [c, x])
        self.emit("Softmax", [x], {"axis": axis})
        return True

    def t_layernorm(self):
        if self.opset < 17:
            return False
        x = self.pick(lambda v: len(v.shape) >= 1)
        r = len(self.shape(x))
        axis = -1 if self.coin(0.8) else int(self.rng.integers(-r, r))
        norm = self.shape(x)[axis:] if axis < 0 else self.shape(x)[axis:]
        self.max_k = max(self.max_k, int(np.prod(norm)))
        ins = [x, self.fconst(norm, "normal")]
        if self.coin(0.7):
            ins.append(self.fconst(norm, "small"))
        attrs = {"axis": axis}
        if self.coin(0.4):
            attrs["epsilon"] = float(self.choice([1e-5, 1e-6, 1e-3]))
        self.emit("LayerNormalization", ins, attrs)
        return True

    def t_reshape(self):
        x = self.pick()
        shape = list(self.shape(x))
        r = len(shape)
        kind = self.choice(["reshape", "flatten", "squeeze", "unsqueeze", "identity", "shape_calc"])
        if kind == "flatten":
            self.emit("Flatten", [x], {"axis": int(self.rng.integers(-r, r + 1))} if r else {})
        elif kind == "identity":
            self.emit("Identity", [x])
        elif kind == "unsqueeze":
            if r >= 5:
                return False
            ax = int(self.rng.integers(-(r + 1), r + 1))
            if self.opset >= 13:
                self.emit("Unsqueeze", [x, self.iconst([ax])])
            else:
                self.emit("Unsqueeze", [x], {"axes": [ax]})
        elif kind == "squeeze":
            ones = [i for i, d in enumerate(shape) if d == 1]
            if not ones:
                return False
            axes = ones if self.coin(0.5) else [self.choice(ones)]
            if self.opset >= 13:
                self.emit("Squeeze", [x, self.iconst(axes)] if self.coin(0.8) else [x])
            else:
                self.emit("Squeeze", [x], {"axes": axes} if self.coin(0.8) else {})
        elif kind == "reshape":
            total = int(np.prod(shape))
            # A random factorisation of the element count, with a -1 or a 0 (copy) sometimes.
            dims = []
            rest = total
            for _ in range(int(self.rng.integers(1, 4))):
                divs = [d for d in range(1, min(rest, 64) + 1) if rest % d == 0]
                d = int(self.choice(divs))
                dims.append(d)
                rest //= d
            dims.append(rest)
            self.rng.shuffle(dims)
            if self.coin(0.4):
                dims[int(self.rng.integers(0, len(dims)))] = -1
            if r and self.coin(0.2) and len(dims) >= 1 and dims[0] == shape[0]:
                dims[0] = 0
            self.emit("Reshape", [x, self.iconst(dims)])
        else:  # Reshape to a shape computed from Shape(x): Shape -> Gather/Slice -> Concat -> Reshape (folded)
            if r < 2:
                return False
            sh = self.emit_int("Shape", [x], np.asarray(shape, np.int64))
            if self.coin(0.5):
                idx = self.iconst([0])
                head = self.emit_int("Gather", [sh, idx], np.asarray(shape[:1], np.int64), {"axis": 0})
            else:
                head = self.emit_int("Slice", [sh, self.iconst([0]), self.iconst([1])], np.asarray(shape[:1]))
            tail = self.iconst([-1])
            tgt = self.emit_int("Concat", [head, tail], np.asarray([shape[0], -1], np.int64), {"axis": 0})
            self.emit("Reshape", [x, tgt])
        return True

    def emit_int(self, op, inputs, value, attrs=None):
        nm = self.emit(op, inputs, attrs)
        self.data[nm] = np.asarray(value, np.int64)
        return nm

    def t_transpose(self):
        x = self.pick(lambda v: len(v.shape) >= 2)
        if x is None:
            return False
        r = len(self.shape(x))
        perm = self.rng.permutation(r).tolist()
        self.emit("Transpose", [x], {"perm": perm} if self.coin(0.9) else {})
        return True

    def t_slice(self):
        x = self.pick(lambda v: len(v.shape) >= 1 and max(v.shape) >= 2)
        if x is None:
            return False
        shape = self.shape(x)
        r = len(shape)
        axes = [a for a in range(r) if shape[a] >= 2]
        axes = sorted(self.rng.choice(axes, size=int(self.rng.integers(1, len(axes) + 1)), replace=False).tolist())
        starts, ends, steps = [], [], []
        for a in axes:
            n = shape[a]
            step = int(self.choice([1, 1, 2, -1]))
            if step > 0:
                s = int(self.rng.integers(0, n - 1))
                e = int(self.rng.integers(s + 1, n + 1))
                if self.coin(0.2):
                    e = 2 ** 31  # past the end
                if self.coin(0.2):
                    s -= n       # negative start
            else:
                s = int(self.rng.integers(1, n))
                e = int(self.rng.integers(-n - 1, s)) if self.coin(0.7) else -(2 ** 31)
            starts.append(s)
            ends.append(e)
            steps.append(step)
        if self.opset < 10:
            return False
        ins = [x, self.iconst(starts), self.iconst(ends)]
        if self.coin(0.8) or any(s != 1 for s in steps):
            ins.append(self.iconst([a - r if self.coin(0.3) else a for a in axes]))
            if any(s != 1 for s in steps) or self.coin(0.3):
                ins.append(self.iconst(steps))
        elif axes != list(range(len(axes))):
            return False
        self.emit("Slice", ins)
        return True

    def t_concat(self):
        x = self.pick(lambda v: len(v.shape) >= 1)
        shape = self.shape(x)
        r = len(shape)
        axis = int(self.rng.integers(0, r))
        others = [n for n in self.pool if len(self.vals[n].shape) == r and
                  all(self.vals[n].shape[i] == shape[i] for i in range(r) if i != axis)]
        k = int(self.rng.integers(1, 4))
        ins = [x] + [self.choice(others) for _ in range(k)]
        if self.coin(0.3):
            cs = list(shape)
            cs[axis] = int(self.rng.integers(1, 4))
            ins.insert(int(self.rng.integers(0, len(ins) + 1)), self.fconst(cs))
        self.rng.shuffle(ins)
        self.emit("Concat", ins, {"axis": axis - r if self.coin(0.3) else axis})
        return True

    def t_gather(self):
        x = self.pick(lambda v: len(v.shape) >= 1)
        shape = self.shape(x)
        r = len(shape)
        axis = int(self.rng.integers(-r, r))
        n = shape[axis]
        ishape = self.choice([(), (1,), (3,), (2, 2)])
        idx = self.rng.integers(-n, n, size=ishape).astype(np.int64)
        if self.coin(0.15) and ishape:
            ind = self.graph_input(ishape, I64, bound=n)
        else:
            ind = self.const(idx)
        self.emit("Gather", [x, ind], {"axis": axis})
        return True

    def t_embedding(self):
        """Gather rows of a constant table by int64 ids given as input (an embedding lookup)."""
        vocab, d = int(self.rng.integers(4, 30)), int(self.choice([4, 8, 16]))
        table = self.const(self.rng.standard_normal((vocab, d)).astype(np.float32), "init")
        ids = self.graph_input((1, int(self.rng.integers(2, 9))), I64, bound=vocab)
        self.emit("Gather", [table, ids], {"axis": 0})
        return True

    TEMPLATES = [
        ("conv", 14), ("conv_nhwc", 4), ("convtranspose", 3), ("batchnorm", 2), ("unary", 8), ("binary_const", 14),
        ("binary_values", 6), ("reduce", 3), ("matmul", 8), ("gemm", 4), ("attention", 4), ("gelu", 4),
        ("pool", 6), ("resize", 3), ("softmax", 4), ("layernorm", 3), ("reshape", 6), ("transpose", 3),
        ("slice", 4), ("concat", 4), ("gather", 3), ("embedding", 1),
    ]

    def run_template(self, name):
        if name == "conv":
            return self.t_conv()
        if name == "conv_nhwc":
            return self.t_conv(nhwc=True)
        if name == "convtranspose":
            return self.t_conv(transpose=True)
        return getattr(self, "t_" + name)()

    # ---- the model -------------------------------------------------------------------------------------------

    def build(self):
        r = self.rng
        n = int(self.choice([1, 2]))
        kind = self.choice(["image", "image", "seq", "flat", "mixed"])
        if kind in ("image", "mixed"):
            c = int(self.choice([1, 2, 3, 4, 8, 16]))
            h, w = int(r.integers(3, 13)), int(r.integers(3, 13))
            if self.coin(0.2):
                self.graph_input((n, h, w, c))  # NHWC data
            else:
                self.graph_input((n, c, h, w))
        if kind in ("seq", "mixed"):
            self.graph_input((n, int(r.integers(2, 17)), int(self.choice([4, 8, 16, 32]))))
        if kind == "flat":
            self.graph_input((int(r.integers(1, 9)), int(self.choice([3, 8, 16, 64]))))
        if self.coin(0.1):
            self.graph_input((1, int(r.integers(2, 5)), int(r.integers(3, 9))))  # 3-D: Conv1d/pool1d
        names = [t for t, _ in self.TEMPLATES]
        weights = np.asarray([w for _, w in self.TEMPLATES], float)
        weights /= weights.sum()
        done, tries = 0, 0
        while done < self.max_templates and tries < self.max_templates * 6:
            tries += 1
            t = self.choice(names, p=weights)
            snap = self.snapshot()
            try:
                ok = self.run_template(t)
            except GenError:
                ok = False
            if ok:
                done += 1
                self.templates_used.append(t)
            else:
                self.restore(snap)
        return self.finish()

    def finish(self):
        consumed = {i for nd in self.nodes for i in nd.input}
        floats = [n for n in self.pool if n not in [i.name for i in self.inputs]]
        outs = [n for n in floats if n not in consumed]
        # Some intermediates become graph outputs too (still read by other nodes).
        for n in floats:
            if n not in outs and self.coin(0.12):
                outs.append(n)
        if not outs:
            outs = floats[-1:] or [self.inputs[0].name]
        outs = sorted(set(outs), key=lambda n: int(n[1:]) if n[1:].isdigit() else 0)
        outputs = [helper.make_tensor_value_info(n, F32, list(self.shape(n))) for n in outs]
        used = consumed | set(outs)
        inputs = [i for i in self.inputs if i.name in used]
        g = helper.make_graph(self.nodes, "difftest_%d_%d" % (self.seed, self.index), inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)],
                              producer_name="epctx-difftest")
        m.ir_version = 8
        for k, v in sorted(self.int_bounds.items()):
            p = m.metadata_props.add()
            p.key, p.value = "difftest.int_bound." + k, str(v)
        p = m.metadata_props.add()
        p.key, p.value = "difftest.max_k", str(self.max_k)
        # Every value's type and shape as the generator computed them (node by node): the shrinker and the
        # tolerance need them, and value_info in the graph would show the runtime shapes it must infer itself.
        names = {i for nd in self.nodes for i in list(nd.input) + list(nd.output) if i}
        shapes = {n: [self.vals[n].dtype, list(self.vals[n].shape)] for n in sorted(names | set(outs))}
        p = m.metadata_props.add()
        p.key, p.value = "difftest.shapes", json.dumps(shapes, separators=(",", ":"))
        p = m.metadata_props.add()
        p.key, p.value = "difftest.templates", ",".join(self.templates_used)
        return m


def shapes(model):
    """{value name: (dtype, dims)} recorded by the generator."""
    return {k: (v[0], tuple(v[1])) for k, v in json.loads(meta(model, "difftest.shapes", "{}")).items()}


def check(model):
    """onnx.checker (full, with shape inference) and strict shape inference; raises on an invalid model, and on
    an inferred static shape that disagrees with the generator's record."""
    onnx.checker.check_model(model, full_check=True)
    inferred = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    known = shapes(model)
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        if vi.name in known and tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            if (tt.elem_type, tuple(d.dim_value for d in tt.shape.dim)) != known[vi.name]:
                raise ValueError("value %s: inferred %s, generated %s" % (vi.name, tt, known[vi.name]))
    return inferred


def generate(seed, index):
    """Model `index` of seed `seed` (always the same). Regenerates with a sub-index when a draw was invalid."""
    for attempt in range(20):
        g = Gen(seed, index * 1000 + attempt if attempt else index)
        m = g.build()
        if not m.graph.node:
            continue
        try:
            check(m)
        except Exception:  # noqa: BLE001
            continue
        return m
    raise RuntimeError("no valid model for seed %d index %d" % (seed, index))


def meta(model, key, default=None):
    for p in model.metadata_props:
        if p.key == key:
            return p.value
    return default


def make_inputs(model, seed):
    """Inputs for `model`, seeded: floats ~ N(0, 1), int64 ids uniform below their recorded bound."""
    rng = np.random.default_rng([seed, 7])
    feeds = {}
    inits = {i.name for i in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        if tt.elem_type == F32:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
        elif tt.elem_type == I64:
            bound = int(meta(model, "difftest.int_bound." + vi.name, "1"))
            feeds[vi.name] = rng.integers(0, bound, size=shape).astype(np.int64)
        else:
            raise ValueError("input %s has an unsupported type" % vi.name)
    return feeds
