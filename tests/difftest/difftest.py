#!/usr/bin/python3
"""Differential tester for AotCpu (the NNSmith practice): random valid models (gen.py) run on the CPU EP, AotCpu
compiled just in time, and AotCpu loaded from a compiled _ctx.onnx with embed mode 0 and 1; any output beyond float
tolerance, or any AotCpu session that errors or crashes where the CPU EP ran, is a failure, shrunk by deleting nodes
to the smallest model that still fails and saved as .onnx.

  difftest.py [--seed S] [--count N | --minutes M] [--out DIR] [--threads T] [--no-shrink] [--dynamic]
  difftest.py --regress DIR_OR_FILES...     every model must pass (the committed regression models)
  difftest.py --model FILE.onnx [--shrink]  one model

Sessions run in a worker process (this file with --worker), so a crash of the runtime is a finding, not the end of
the run: the worker is restarted and the mode it died in is reported.

Tolerance: an element passes when |aot - cpu| <= atol + rtol * |cpu| with rtol = 1e-4 * f and
atol = 1e-5 * f * max(1, M), where M is the largest magnitude of any value the output depends on (its ancestors,
graph inputs included: rounding errors scale with the operands, not the result; a difference of two large values
may be small) and f = max(1, sqrt(K / 64)) for the longest reduction K in the model (dot product, convolution
window x input channels, pooling window, softmax row, normalized extent): float32 sums of K terms in a different
order (oneDNN's blocking vs the CPU EP's loops) differ by about sqrt(K) ulps of the partial sums. NaN must match NaN.
"""
import argparse
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

AOT = "AotCpuExecutionProvider"
# The partition cost rule off: every node AotCpu supports is claimed, however small its island, so that the random
# graphs exercise AotCpu's lowering (with the rule on, 95.4% of generated nodes were claimed instead of 98.6%). The
# rule's decisions have their own tests (partition_cost_test.cc, AotCpuIslands).
AOT_OPTIONS = {"partition_switch_us": "0"}
MODES = ["jit", "ctx0", "ctx1"]
# --dynamic adds these: the model with some input dims free, AotCpu with dynamic_shapes=1 (just in time and from a
# _ctx.onnx), run at the generated sizes and again at other sizes when the CPU EP takes them (free_dims).
DYN_MODES = ["dyn_jit", "dyn_ctx"]
ACTIVE_MODES = list(MODES)
TIMEOUT_S = 300


# ---- worker (runs the sessions) ----------------------------------------------------------------------------------

def worker_main():
    import epctx as ort

    def options(threads):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        return so

    for line in sys.stdin:
        req = json.loads(line)
        path, mode, threads = req["model"], req["mode"], req.get("threads", 1)
        feeds = dict(np.load(req["inputs"]))
        os.makedirs(req["dir"], exist_ok=True)
        res = {"mode": mode, "status": "ok"}
        try:
            if mode == "cpu":
                s = ort.InferenceSession(path, options(threads), providers=["CPUExecutionProvider"])
            elif mode.startswith("dyn"):
                # dynamic_shapes=1 on the model with free input dims; a second run at other sizes on the same session.
                so = options(threads)
                so.add_provider(AOT, dict(AOT_OPTIONS, dynamic_shapes="1"))
                if mode == "dyn_ctx":
                    ctx = os.path.join(req["dir"], mode, "model_ctx.onnx")
                    os.makedirs(os.path.dirname(ctx), exist_ok=True)
                    ort.ModelCompiler(so, path).compile_to_file(ctx)
                    path = ctx
                s = ort.InferenceSession(path, so)
            elif mode == "jit":
                so = options(threads)
                so.add_provider(AOT, AOT_OPTIONS)
                s = ort.InferenceSession(path, so)
                rep = s.get_session_report()
                res["claimed"] = sum(p["nodes"] for p in rep["partitions"] if p["ep"] == AOT)
                res["nodes"] = sum(p["nodes"] for p in rep["partitions"]) + rep.get("cpu_nodes", 0)
            else:
                so = options(threads)
                so.add_provider(AOT, AOT_OPTIONS)
                ctx = os.path.join(req["dir"], mode, "model_ctx.onnx")
                os.makedirs(os.path.dirname(ctx), exist_ok=True)
                ort.ModelCompiler(so, path, embed_compiled_data_into_model=(mode == "ctx1")).compile_to_file(ctx)
                s = ort.InferenceSession(ctx, so)
            names = [o.name for o in s.get_outputs()]
            outs = s.run(None, feeds)
            out_path = os.path.join(req["dir"], mode + "_out.npz")
            np.savez(out_path, **{n: np.asarray(o) for n, o in zip(names, outs)})
            res["outputs"] = out_path
            if req.get("inputs2"):
                try:
                    outs2 = s.run(None, dict(np.load(req["inputs2"])))
                    out_path = os.path.join(req["dir"], mode + "_out2.npz")
                    np.savez(out_path, **{n: np.asarray(o) for n, o in zip(names, outs2)})
                    res["outputs2"] = out_path
                except Exception as e:  # noqa: BLE001
                    res["error2"] = "%s: %s" % (type(e).__name__, str(e)[:2000])
        except Exception as e:  # noqa: BLE001 (every session error is a result)
            res["status"] = "error"
            res["error"] = "%s: %s" % (type(e).__name__, str(e)[:2000])
        sys.stdout.write(json.dumps(res) + "\n")
        sys.stdout.flush()


class Worker:
    """A persistent worker process; restarted after a crash or a timeout."""

    def __init__(self, threads):
        self.threads = threads
        self.proc = None
        self.stderr_path = None

    def start(self):
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, text=True, bufsize=1)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def run(self, model_path, inputs_path, mode, workdir, inputs2=None):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        req = {"model": model_path, "inputs": inputs_path, "mode": mode, "dir": workdir, "threads": self.threads,
               "inputs2": inputs2}
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT_S)
        line = self.proc.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        timed_out = not ready
        self.stop()
        self.stderr.seek(0)
        tail = self.stderr.read().decode(errors="replace")[-1500:]
        return {"mode": mode, "status": "crash",
                "error": ("timeout after %d s" % TIMEOUT_S) if timed_out else "worker died: " + tail}


# ---- evaluation --------------------------------------------------------------------------------------------------

def all_values_model(model):
    """The model with every float value as an extra output (CPU EP only: the magnitudes for the tolerance)."""
    import copy
    import gen
    from onnx import helper
    m = copy.deepcopy(model)
    outs = {o.name for o in m.graph.output} | {i.name for i in m.graph.input}
    present = {o for n in m.graph.node for o in n.output}
    for name, (dtype, dims) in sorted(gen.shapes(model).items()):
        if dtype == 1 and name in present and name not in outs:
            m.graph.output.append(helper.make_tensor_value_info(name, dtype, list(dims)))
            outs.add(name)
    return m


def ancestors(model, name):
    prod = {}
    for n in model.graph.node:
        for o in n.output:
            prod[o] = n
    seen, stack = set(), [name]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in prod:
            stack.extend(i for i in prod[v].input if i)
    return seen


def amplification(model, values, data):
    """How much the nodes producing `values` magnify their inputs' rounding errors beyond the operands' size: a
    LayerNormalization divides by its rows' standard deviation (a row of nearly equal values turns their last-bit
    differences into visible ones). The product over such nodes, from the CPU EP's values, at least 1."""
    import onnx
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    amp = 1.0
    for n in model.graph.node:
        if n.op_type != "LayerNormalization" or not n.output or n.output[0] not in values:
            continue
        x = data.get(n.input[0])
        if x is None:
            continue
        axis = 1
        eps = 1e-5
        for a in n.attribute:
            if a.name == "axis":
                axis = a.i
            if a.name == "epsilon":
                eps = a.f
        axis = axis % x.ndim
        rows = x.reshape(int(np.prod(x.shape[:axis])), -1).astype(np.float64)
        std = np.sqrt(rows.var(axis=1) + eps)
        scale = inits.get(n.input[1], data.get(n.input[1]))
        smax = float(np.max(np.abs(scale))) if scale is not None and scale.size else 1.0
        amp *= max(1.0, smax / float(np.min(std)))  # input error (within M) times scale / std
    return amp


def compare(ref, got, atol, rtol):
    """Index and values of the worst element beyond tolerance, or None."""
    if ref.shape != got.shape:
        return "shape %s vs %s" % (ref.shape, got.shape)
    if ref.dtype.kind != "f":
        bad = ref != got
        return None if not bad.any() else "int values differ at %d elements" % int(bad.sum())
    nan_r, nan_g = np.isnan(ref), np.isnan(got)
    if (nan_r != nan_g).any():
        return "NaN at %d elements where the CPU EP has none (or the reverse)" % int((nan_r != nan_g).sum())
    r = np.where(nan_r, 0, ref).astype(np.float64)
    g = np.where(nan_g, 0, got).astype(np.float64)
    err = np.abs(r - g) - (atol + rtol * np.abs(r))
    if (err > 0).any():
        i = np.unravel_index(int(np.argmax(err)), err.shape)
        nbad = int((err > 0).sum())
        rng = float(np.max(r) - np.min(r)) if r.size else 0.0
        return ("%d of %d elements differ; worst at %s: cpu %.7g aot %.7g (|diff| %.3g, atol %.3g, rtol %.3g, "
                "cpu range %.3g)" % (nbad, r.size, tuple(int(x) for x in i), r[i], g[i], abs(r[i] - g[i]), atol,
                                     rtol, rng))
    return None


class Result:
    def __init__(self):
        self.kind = "pass"      # pass | invalid | fail
        self.failures = []      # (category, mode, detail); category: error | crash | mismatch
        self.claimed = 0
        self.nodes = 0
        self.note = ""

    def category(self):
        return sorted({(c, m) for c, m, _ in self.failures})


def free_dims(model, seed):
    """The model with some input dims free (dynamic_shapes): a random nonempty subset of the sizes the inputs' dims
    take becomes symbols ("s<size>", shared by every input dim of that size, so broadcasting partners stay equal);
    graph outputs' dims become names of their own and value_info is dropped. Also {symbol: other size} for a second run
    (sometimes 0 or a quarter of the size: empty tensors)."""
    import copy
    rng = np.random.default_rng([seed, 11])
    m = copy.deepcopy(model)
    inits = {i.name for i in m.graph.initializer}
    sizes = sorted({d.dim_value for vi in m.graph.input if vi.name not in inits
                    for d in vi.type.tensor_type.shape.dim})
    if not sizes:
        return None, {}
    chosen = [x for x in sizes if rng.random() < 0.5] or [sizes[int(rng.integers(len(sizes)))]]
    other = {}
    # Zero-sized dims (issue 27): some second sizes are 0 or a quarter (a Slice counted from the end then selects
    # nothing), drawn from a generator of their own so the other draws of a seed stay what they were.
    small = np.random.default_rng([seed, 17])
    for x in chosen:
        other[x] = int(rng.choice([x + 1, 2 * x, max(1, x - 1), x + 7]))
        u = small.random()
        if u < 0.12:
            other[x] = 0
        elif u < 0.24:
            other[x] = max(1, x // 4)
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_value in chosen:
                size = d.dim_value
                d.Clear()
                d.dim_param = "s%d" % size
    for k, vi in enumerate(m.graph.output):
        for a, d in enumerate(vi.type.tensor_type.shape.dim):
            d.Clear()
            d.dim_param = "out%d_%d" % (k, a)
    del m.graph.value_info[:]
    return m, other


def inputs_at(model, feeds, other, seed):
    """`feeds` regenerated at the sizes `other` gives the free dims (ids below the same bound)."""
    import gen
    rng = np.random.default_rng([seed, 13])
    out = {}
    for vi in model.graph.input:
        if vi.name not in feeds:
            continue
        shape = [other.get(int(d.dim_param[1:]), 0) if d.dim_param else d.dim_value for d in vi.type.tensor_type.shape.dim]
        f = feeds[vi.name]
        if f.dtype == np.float32:
            out[vi.name] = rng.standard_normal(shape).astype(np.float32)
        else:
            bound = int(gen.meta(model, "difftest.int_bound." + vi.name, "1"))
            out[vi.name] = rng.integers(0, bound, size=shape).astype(f.dtype)
    return out


def evaluate(worker, model, seed, workdir, modes=None):
    import onnx
    import onnx.numpy_helper  # noqa: F401
    import gen
    modes = modes or ACTIVE_MODES
    res = Result()
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "model.onnx")
    onnx.save(model, path)
    feeds = gen.make_inputs(model, seed)
    inputs = os.path.join(workdir, "inputs.npz")
    np.savez(inputs, **feeds)
    try:
        allm = all_values_model(model)
    except Exception as e:  # noqa: BLE001
        res.kind, res.note = "invalid", "shape inference: %s" % e
        return res
    all_path = os.path.join(workdir, "model_all.onnx")
    onnx.save(allm, all_path)
    cpu = worker.run(path, inputs, "cpu", workdir)
    if cpu["status"] != "ok":
        res.kind, res.note = "invalid", "CPU EP: " + cpu.get("error", "")
        return res
    ref = dict(np.load(cpu["outputs"]))
    cpu_all = worker.run(all_path, inputs, "cpu", os.path.join(workdir, "all"))
    if cpu_all["status"] != "ok":
        os.makedirs(os.path.join(workdir, "all"), exist_ok=True)
        res.kind, res.note = "invalid", "CPU EP (all values): " + cpu_all.get("error", "")
        return res
    everything = dict(np.load(cpu_all["outputs"]))
    everything.update({k: v for k, v in feeds.items() if v.dtype == np.float32})
    for k, v in ref.items():
        if v.dtype.kind == "f" and not np.isfinite(v).all():
            res.kind, res.note = "invalid", "non-finite reference output " + k
            return res
    import gen as _g
    max_k = int(_g.meta(model, "difftest.max_k", "1"))
    f = max(1.0, np.sqrt(max_k / 64.0))
    tols = {}
    for name in ref:
        anc = ancestors(model, name)
        mags = [float(np.max(np.abs(everything[a]))) for a in anc
                if a in everything and everything[a].size and np.isfinite(everything[a]).all()]
        m = max([1.0] + mags)
        amp = amplification(model, anc, everything)
        tols[name] = (1e-5 * f * m * amp, 1e-4 * f * amp)
    dyn_path = inputs2 = ref2 = None
    if any(m.startswith("dyn") for m in modes):
        dm, other = free_dims(model, seed)
        if dm is not None:
            dyn_path = os.path.join(workdir, "model_dyn.onnx")
            onnx.save(dm, dyn_path)
            feeds2 = inputs_at(dm, feeds, other, seed)
            inputs2 = os.path.join(workdir, "inputs2.npz")
            np.savez(inputs2, **feeds2)
            # The CPU EP at the other sizes: the reference, or nothing to compare when the model cannot take them.
            c2 = worker.run(dyn_path, inputs2, "cpu", os.path.join(workdir, "cpu2"))
            if c2["status"] == "ok":
                ref2 = dict(np.load(c2["outputs"]))
                if any(v.dtype.kind == "f" and not np.isfinite(v).all() for v in ref2.values()):
                    ref2 = None
    for mode in modes:
        if mode.startswith("dyn"):
            if dyn_path is None:
                continue
            r = worker.run(dyn_path, inputs, mode, workdir, inputs2=inputs2 if ref2 is not None else None)
            if r["status"] == "ok" and ref2 is not None:
                if "outputs2" not in r:
                    res.failures.append(("error", mode, "second shape: " + r.get("error2", "no outputs")))
                else:
                    got2 = dict(np.load(r["outputs2"]))
                    for name, v in ref2.items():
                        # Tolerances from the first shape's magnitudes, doubled: the second inputs have the same
                        # distribution, the reductions may be longer.
                        atol, rtol = tols[name]
                        d = compare(v, got2.get(name, np.zeros(0)), 2 * atol, 2 * rtol)
                        if d:
                            res.failures.append(("mismatch", mode, "second shape, %s: %s" % (name, d)))
        else:
            r = worker.run(path, inputs, mode, workdir)
        if mode == "jit" and r["status"] == "ok":
            res.claimed, res.nodes = r.get("claimed", 0), r.get("nodes", 0)
        if r["status"] != "ok":
            res.failures.append((r["status"], mode, r.get("error", "")))
            continue
        got = dict(np.load(r["outputs"]))
        for name, v in ref.items():
            if name not in got:
                res.failures.append(("mismatch", mode, "output %s missing" % name))
                continue
            atol, rtol = tols[name]
            d = compare(v, got[name], atol, rtol)
            if d:
                res.failures.append(("mismatch", mode, "%s: %s" % (name, d)))
    if res.failures:
        res.kind = "fail"
    return res


# ---- shrinking ---------------------------------------------------------------------------------------------------

def _clean(model):
    """Drops nodes whose outputs nobody reads, then unused initializers and inputs."""
    g = model.graph
    while True:
        used = {i for n in g.node for i in n.input} | {o.name for o in g.output}
        keep = [n for n in g.node if any(o in used for o in n.output)]
        if len(keep) == len(g.node):
            break
        del g.node[:]
        g.node.extend(keep)
    used = {i for n in g.node for i in n.input} | {o.name for o in g.output}
    inits = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(inits)
    ins = [i for i in g.input if i.name in used]
    del g.input[:]
    g.input.extend(ins)
    return model


def _types(model):
    """{value: ValueInfoProto} from the generator's record (every value, static shapes)."""
    import gen
    from onnx import helper
    t = {k: helper.make_tensor_value_info(k, d, list(s)) for k, (d, s) in gen.shapes(model).items()}
    for vi in list(model.graph.input):
        t[vi.name] = vi
    return t


def _constant_value(node):
    """The tensor a Constant node produces (value, value_float(s), value_int(s)); None for other forms."""
    from onnx import helper, numpy_helper
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if a.name == "value":
            return numpy_helper.to_array(v)
        if a.name == "value_float":
            return np.asarray(v, np.float32)
        if a.name == "value_floats":
            return np.asarray(list(v), np.float32)
        if a.name == "value_int":
            return np.asarray(v, np.int64)
        if a.name == "value_ints":
            return np.asarray(list(v), np.int64)
    return None


def _candidates(model):
    """Smaller variants of `model`: one graph output fewer, one node bypassed, one node cut into a graph input,
    one Constant node turned into an initializer."""
    import copy
    from onnx import numpy_helper
    g = model.graph
    types = _types(model)
    for i in range(len(g.output)):
        if len(g.output) > 1:
            m = copy.deepcopy(model)
            del m.graph.output[i]
            yield "drop output %s" % g.output[i].name, m
    for idx in reversed(range(len(g.node))):
        n = g.node[idx]
        outs = [o for o in n.output if o]
        # Bypass: the output is replaced by an input of the same type and shape.
        for src in n.input:
            if src and src in types and all(o in types and types[o].type == types[src].type for o in outs):
                m = copy.deepcopy(model)
                mn = m.graph.node
                del mn[idx]
                for other in mn:
                    for k, x in enumerate(other.input):
                        if x in outs:
                            other.input[k] = src
                gouts = []
                for o in m.graph.output:
                    if o.name in outs:
                        if src not in [x.name for x in gouts] and src not in [x.name for x in m.graph.input]:
                            vi = copy.deepcopy(types[src])
                            gouts.append(vi)
                    else:
                        gouts.append(o)
                if not gouts:
                    continue
                del m.graph.output[:]
                m.graph.output.extend(gouts)
                yield "bypass %s (%s)" % (n.name, n.op_type), m
                break
        # Cut: a float output becomes a graph input.
        if n.op_type != "Constant" and outs and all(o in types and types[o].type.tensor_type.elem_type == 1
                                                    for o in outs):
            m = copy.deepcopy(model)
            del m.graph.node[idx]
            if any(o.name in outs for o in m.graph.output):
                continue
            for o in outs:
                m.graph.input.append(copy.deepcopy(types[o]))
            yield "cut %s (%s) into an input" % (n.name, n.op_type), m
        if n.op_type == "Constant" and outs:
            val = _constant_value(n)
            if val is None:
                continue
            m = copy.deepcopy(model)
            del m.graph.node[idx]
            m.graph.initializer.append(numpy_helper.from_array(np.asarray(val), outs[0]))
            yield "Constant %s -> initializer" % n.name, m


def shrink(worker, model, seed, workdir, want, log=print, budget_s=900):
    """Deletes nodes (and outputs) while the failure category set still intersects `want`."""
    import gen
    start = time.time()
    best = _clean(model)
    progress = True
    tries = 0
    while progress and time.time() - start < budget_s:
        progress = False
        for what, cand in _candidates(best):
            try:
                cand = _clean(cand)
                gen.check(cand)
            except Exception:  # noqa: BLE001
                continue
            tries += 1
            r = evaluate(worker, cand, seed, os.path.join(workdir, "shrink"))
            if r.kind == "fail" and set(r.category()) & set(want):
                log("  shrink: %s -> %d nodes" % (what, len(cand.graph.node)))
                best = cand
                progress = True
                break
    return best, tries


def bisect(worker, model, workdir):
    """Each float value made the only graph output (nodes it does not need dropped), run in JIT mode."""
    import copy
    import gen
    from onnx import helper
    known = gen.shapes(model)
    for n in model.graph.node:
        for o in n.output:
            if o not in known or known[o][0] != 1:
                continue
            m = copy.deepcopy(model)
            del m.graph.output[:]
            m.graph.output.append(helper.make_tensor_value_info(o, 1, list(known[o][1])))
            _clean(m)
            r = evaluate(worker, m, 0, workdir, modes=["jit"])
            print("%-8s %-20s %s %s" % (o, n.op_type, r.kind, r.failures[0][2][:200] if r.failures else r.note[:200]))


def describe(model):
    import onnx
    import onnx.numpy_helper  # noqa: F401 (onnx.numpy_helper below)
    lines = []
    inits = {t.name: t for t in model.graph.initializer}
    for vi in model.graph.input:
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        lines.append("  input  %s %s" % (vi.name, dims))
    for t in model.graph.initializer:
        lines.append("  init   %s %s %s" % (t.name, list(t.dims),
                                            np.array2string(onnx.numpy_helper.to_array(t).ravel()[:6], precision=4)))
    for n in model.graph.node:
        attrs = []
        for a in n.attribute:
            v = onnx.helper.get_attribute_value(a)
            if isinstance(v, onnx.TensorProto):
                arr = onnx.numpy_helper.to_array(v)
                v = "tensor%s %s" % (list(arr.shape), np.array2string(arr.ravel()[:6], precision=4))
            elif isinstance(v, bytes):
                v = v.decode()
            attrs.append("%s=%s" % (a.name, v))
        lines.append("  %s = %s(%s)%s" % (", ".join(n.output), n.op_type, ", ".join(n.input),
                                         (" " + " ".join(attrs)) if attrs else ""))
    for o in model.graph.output:
        lines.append("  output %s %s" % (o.name, [d.dim_value for d in o.type.tensor_type.shape.dim]))
    del inits
    return "\n".join(lines)


# ---- driver ------------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="first model index")
    ap.add_argument("--count", type=int, default=None)
    ap.add_argument("--minutes", type=float, default=None)
    ap.add_argument("--out", default=None, help="folder for shrunk failures (default: a temp folder)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--min-claim", type=float, default=0.0,
                    help="fail the run when AotCpu claimed less than this fraction of all nodes")
    ap.add_argument("--regress", nargs="+", default=None, help="models (or folders of .onnx) that must pass")
    ap.add_argument("--model", default=None)
    ap.add_argument("--shrink", action="store_true", help="with --model: shrink a failure")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--bisect", action="store_true",
                    help="with --model: make each value in turn the only output and report which ones differ")
    ap.add_argument("--dynamic", action="store_true",
                    help="also run the models with some input dims free under dynamic_shapes=1 (%s)" % ", ".join(DYN_MODES))
    args = ap.parse_args()
    if args.dynamic:
        ACTIVE_MODES.extend(DYN_MODES)
    if args.worker:
        worker_main()
        return 0
    import onnx
    import gen
    work = tempfile.mkdtemp(prefix="difftest_")
    out = args.out or os.path.join(work, "failures")
    os.makedirs(out, exist_ok=True)
    worker = Worker(args.threads)
    t0 = time.time()
    rc = 0
    try:
        if args.regress or args.model:
            paths = []
            for p in (args.regress or [args.model]):
                if os.path.isdir(p):
                    paths += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".onnx"))
                else:
                    paths.append(p)
            if not paths:
                print("difftest: no models given")
                return 1
            for p in paths:
                m = onnx.load(p)
                if args.bisect:
                    bisect(worker, m, os.path.join(work, "m"))
                    continue
                r = evaluate(worker, m, 0, os.path.join(work, "m"))
                ratio = "%d/%d claimed" % (r.claimed, r.nodes)
                if r.kind == "fail":
                    rc = 1
                    print("FAIL %s (%s)" % (p, ratio))
                    for c, mode, d in r.failures:
                        print("  %s %s: %s" % (c, mode, d))
                    if args.shrink:
                        small, _ = shrink(worker, m, 0, os.path.join(work, "m"), r.category())
                        dst = os.path.join(out, "shrunk_" + os.path.basename(p))
                        onnx.save(small, dst)
                        print("smallest model (%s):\n%s" % (dst, describe(small)))
                elif r.kind == "invalid":
                    rc = 1
                    print("INVALID %s: %s" % (p, r.note))
                else:
                    print("pass %s (%s)" % (p, ratio))
            return rc
        stats = {"models": 0, "pass": 0, "invalid": 0, "fail": 0, "claimed": 0, "nodes": 0, "compute_nodes": 0}
        failures = []
        i = args.start
        stop = []  # SIGTERM / SIGINT end the run after the current model, with the summary
        import signal
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.append(1))
        while not stop:
            if args.count is not None and i >= args.start + args.count:
                break
            if args.minutes is not None and time.time() - t0 > args.minutes * 60:
                break
            if args.count is None and args.minutes is None and i >= args.start + 50:
                break
            m = gen.generate(args.seed, i)
            r = evaluate(worker, m, args.seed * 100003 + i, os.path.join(work, "cur"))
            stats["models"] += 1
            stats[r.kind] += 1
            stats["claimed"] += r.claimed
            stats["nodes"] += r.nodes
            if r.kind == "invalid":
                print("model %d: invalid (%s)" % (i, r.note[:200]))
            if r.kind == "fail":
                print("model %d: FAIL (%d nodes, %d claimed): %s" % (i, len(m.graph.node), r.claimed, gen.meta(
                    m, "difftest.templates")))
                for c, mode, d in r.failures:
                    print("  %s %s: %s" % (c, mode, d[:600]))
                name = "seed%d_model%d" % (args.seed, i)
                onnx.save(m, os.path.join(out, name + ".onnx"))
                small = m
                if not args.no_shrink:
                    small, tries = shrink(worker, m, args.seed * 100003 + i, os.path.join(work, "cur"), r.category())
                    onnx.save(small, os.path.join(out, name + "_shrunk.onnx"))
                    print("  smallest model (%d nodes, %d tries), saved as %s:\n%s" % (
                        len(small.graph.node), tries, os.path.join(out, name + "_shrunk.onnx"), describe(small)))
                failures.append((i, r.category()))
            i += 1
            if stats["models"] % 250 == 0:
                print("... %d models, %d failed, %d invalid, %.0f s" % (stats["models"], stats["fail"],
                                                                     stats["invalid"], time.time() - t0))
            sys.stdout.flush()
        dt = time.time() - t0
        ratio = stats["claimed"] / max(1, stats["nodes"])
        print("difftest: seed %d, models %d..%d: %d run, %d passed, %d failed, %d invalid (skipped); AotCpu claimed "
              "%d of %d nodes (%.1f%%); %.1f s" % (args.seed, args.start, i - 1, stats["models"], stats["pass"],
                                                   stats["fail"], stats["invalid"], stats["claimed"], stats["nodes"],
                                                   100 * ratio, dt))
        if failures:
            print("failures (saved in %s): %s" % (out, ", ".join("model %d %s" % (k, c) for k, c in failures)))
            rc = 1
        if ratio < args.min_claim:
            print("difftest: claim ratio %.2f below --min-claim %.2f: the generator does not exercise AotCpu" % (
                ratio, args.min_claim))
            rc = 1
        return rc
    finally:
        worker.stop()
        if not args.keep:
            shutil.rmtree(os.path.join(work, "cur"), ignore_errors=True)
            shutil.rmtree(os.path.join(work, "m"), ignore_errors=True)
            if not os.listdir(out):
                shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
