#!/usr/bin/python3
"""Performance differential tester (issue 24): realistic subgraphs (gen.py) timed on ONNX Runtime 1.30, on AotCpu
loaded from a compiled _ctx.onnx and on the epctx CPU EP, the three sides taking turns within every round, so that
the machine's drift hits them alike. A graph slower than 0.9x ORT on the ctx side (or 0.8x on the CPU EP) is measured
again and, when still slow, shrunk to the smallest subgraph that stays slow and saved with its per-step profile.
Outputs are compared with ORT's too: a wrong answer is a finding before any timing.

  perftest.py [--seed S] [--count N | --minutes M] [--classes a,b] [--out DIR] [--no-shrink] [--smoke] [--save]
  perftest.py --model FILE.onnx|DIR [--shrink]     one model (a saved perf_regress folder works too)

Sessions live in two persistent workers: ORT in `node tests/ort/perf_worker.js`, epctx in this file run with
--worker (the `epctx` Python module, Debian's /usr/bin/python3). Each side runs with 2 threads. Per graph and round,
each side does a warm-up run and M timed runs (M chosen so that a side's round takes about --round-ms); a side's time
is the median over the rounds of the per-round medians; ratio = ORT time / epctx time (> 1: epctx faster).
"""
import argparse
import datetime
import json
import math
import os
import platform
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

AOT = "AotCpuExecutionProvider"
SIDES = ["ort", "ctx", "cpu"]
EP_SIDES = ["ctx", "cpu"]
THRESHOLD = {"ctx": 0.9, "cpu": 0.8}   # slower than this (ORT / side) is shrunk and saved
RTOL, ATOL = 1e-4, 1e-4
TIMEOUT_S = 600
SMOKE_SEED = 7
MAX_SAVED_MODEL = 128 * 1024  # larger ones are regenerated from regen.json (the repository keeps small files only)
MAX_SAVED_INPUTS = 128 * 1024
BUSY = 0.10   # other processes took this share of the machine's CPU during a graph's timing: marked, counted


# ---- the epctx worker --------------------------------------------------------------------------------------------

def worker_main():
    import epctx as ort
    sessions = {}

    def options(threads):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        return so

    def handle(req):
        cmd = req["cmd"]
        if cmd == "load":
            threads = req.get("threads", 2)
            res = {"ok": True}
            if req["side"] == "ctx":
                so = options(threads)
                so.add_provider(AOT, {})
                t0 = time.perf_counter()
                level = [ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                         ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED][min(2, req.get("opt_level", 1))]
                if req.get("opt_level", 1) == 99:
                    level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                ort.ModelCompiler(so, req["model"], graph_optimization_level=level).compile_to_file(req["ctx_path"])
                res["compile_ms"] = (time.perf_counter() - t0) * 1e3
                so = options(threads)
                so.add_provider(AOT, {})
                so.add_session_config_entry("session.disable_model_compile", "1")
                t0 = time.perf_counter()
                s = ort.InferenceSession(req["ctx_path"], so)
            else:
                t0 = time.perf_counter()
                s = ort.InferenceSession(req["model"], options(threads), providers=["CPUExecutionProvider"])
            res["create_ms"] = (time.perf_counter() - t0) * 1e3
            try:
                rep = s.get_session_report()
                parts = rep.get("partitions", [])
                res["aot_nodes"] = sum(p.get("nodes", 0) for p in parts if p.get("ep") == AOT)
                res["cpu_nodes"] = rep.get("cpu_nodes", 0)
                res["partitions"] = sum(1 for p in parts if p.get("ep") == AOT)
            except Exception:  # noqa: BLE001 (the report is informative only)
                pass
            sessions[req["id"]] = {"s": s, "feeds": None, "names": [o.name for o in s.get_outputs()]}
            return res
        if cmd == "inputs":
            sessions[req["id"]]["feeds"] = dict(np.load(req["npz"]))
            return {"ok": True}
        if cmd == "run":
            st = sessions[req["id"]]
            s, feeds = st["s"], st["feeds"]
            if req.get("outputs"):
                outs = s.run(None, feeds)
                np.savez(req["outputs"], **{n: np.asarray(o) for n, o in zip(st["names"], outs)})
            for _ in range(req.get("warmup", 0)):
                s.run(None, feeds)
            if req.get("warmup_ms"):  # untimed runs until this much time has passed
                until = time.perf_counter() + req["warmup_ms"] / 1e3
                while time.perf_counter() < until:
                    s.run(None, feeds)
            times = []
            for _ in range(req.get("runs", 0)):
                t0 = time.perf_counter()
                s.run(None, feeds)
                times.append((time.perf_counter() - t0) * 1e3)
            return {"ok": True, "times_ms": times}
        if cmd == "release":
            sessions.pop(req["id"], None)
            return {"ok": True}
        raise ValueError("unknown command %s" % cmd)

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            res = handle(json.loads(line))
        except Exception as e:  # noqa: BLE001 (every session error is an answer)
            res = {"ok": False, "error": "%s: %s" % (type(e).__name__, str(e)[:2000])}
        sys.stdout.write(json.dumps(res) + "\n")
        sys.stdout.flush()


class WorkerDied(Exception):
    pass


class Worker:
    """A persistent JSON-lines worker process; restarted after a crash or a timeout."""

    def __init__(self, name, argv, env=None, cwd=None):
        self.name, self.argv, self.env, self.cwd = name, argv, env, cwd
        self.proc = None

    def start(self):
        self.generation = getattr(self, "generation", 0) + 1
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, bufsize=1, env=self.env, cwd=self.cwd)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def call(self, req, timeout=TIMEOUT_S):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        timed_out = not ready
        code = self.proc.poll()
        self.stop()
        self.stderr.seek(0)
        tail = self.stderr.read().decode(errors="replace")[-1500:]
        raise WorkerDied("%s worker %s: %s" % (self.name, "timed out after %d s" % timeout if timed_out else
                                                "died (exit %s)" % code, tail.strip()))


# ---- environment -------------------------------------------------------------------------------------------------

def isa_info():
    flags = ""
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags") and not flags:
                    flags = line
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    avx512 = " avx512f" in flags
    limit = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    label = "avx512" if avx512 else "avx2"
    if limit and not limit.upper().startswith("AVX512") and limit.upper() != "ALL":
        label = limit.lower()
    return {"cpu": model, "nproc": os.cpu_count(), "avx512f": avx512, "avx2": " avx2" in flags,
            "ONEDNN_MAX_CPU_ISA": limit, "label": label}


def loadavg():
    try:
        return [float(x) for x in open("/proc/loadavg").read().split()[:3]]
    except OSError:
        return None


def cpu_snapshot(pids):
    """(wall seconds, busy jiffies of the whole machine, jiffies of `pids`) for other_cpu()."""
    busy = 0
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)  # user nice system irq softirq steal
    except (OSError, ValueError, IndexError):
        return None
    ours = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ours += int(fields[11]) + int(fields[12])  # utime stime (all threads)
        except (OSError, ValueError, IndexError):
            pass
    return time.time(), busy, ours


def other_cpu(a, b):
    """The share of the machine's CPU time that processes other than ours used between two snapshots (0..1): a
    timing taken while it is high says more about the neighbours than about the runtimes."""
    if not a or not b or b[0] <= a[0]:
        return None
    tck = os.sysconf("SC_CLK_TCK")
    other = (b[1] - a[1]) - (b[2] - a[2])
    return max(0.0, other / (tck * (b[0] - a[0]) * (os.cpu_count() or 1)))


ALLOW_BUSY = []   # --allow-busy: busy measurements decide too (a machine that is never quiet)


def busy(r):
    return (r.get("other_cpu") or 0) >= BUSY


def deciding_ratios(r):
    """The ratios that decide slow / not slow: the medians; with --allow-busy, a busy timing's best rounds."""
    if busy(r) and ALLOW_BUSY and r.get("best_ratios"):
        return r["best_ratios"]
    return r.get("ratios", {})


def wait_quiet(max_s, pids=()):
    """Waits (up to max_s seconds) until other processes use less than BUSY of the machine over half a second.
    Returns the last share seen."""
    t0 = time.time()
    while True:
        a = cpu_snapshot(pids)
        time.sleep(0.5)
        oc = other_cpu(a, cpu_snapshot(pids))
        if oc is None or oc < BUSY or time.time() - t0 >= max_s:
            return oc


def commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        return "?"


# ---- one graph: load, check, time --------------------------------------------------------------------------------

def write_inputs(feeds, folder):
    """The feeds as input_N.pb (for ORT and the CLI) and inputs.npz (for the epctx worker)."""
    from onnx import numpy_helper
    os.makedirs(folder, exist_ok=True)
    for k, (name, v) in enumerate(feeds.items()):
        with open(os.path.join(folder, "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(v, name).SerializeToString())
    np.savez(os.path.join(folder, "inputs.npz"), **feeds)


def read_pb_outputs(folder):
    import onnx
    from onnx import numpy_helper
    out = {}
    k = 0
    while os.path.exists(os.path.join(folder, "output_%d.pb" % k)):
        t = onnx.TensorProto()
        with open(os.path.join(folder, "output_%d.pb" % k), "rb") as f:
            t.ParseFromString(f.read())
        out[t.name] = numpy_helper.to_array(t)
        k += 1
    return out


def compare(ref, got):
    """None when every output of `got` is within rtol/atol of ORT's, else a description of the worst element."""
    bad = []
    for name, r in ref.items():
        if name not in got:
            bad.append("%s missing" % name)
            continue
        g = got[name]
        if r.shape != g.shape:
            bad.append("%s: shape %s vs ORT %s" % (name, g.shape, r.shape))
            continue
        if r.dtype.kind != "f":
            n = int((r != g).sum())
            if n:
                bad.append("%s: %d of %d values differ" % (name, n, r.size))
            continue
        nr, ng = np.isnan(r), np.isnan(g)
        if (nr != ng).any():
            bad.append("%s: NaN at %d elements where ORT has none (or the reverse)" % (name, int((nr != ng).sum())))
            continue
        r64 = np.where(nr, 0, r).astype(np.float64)
        g64 = np.where(ng, 0, g).astype(np.float64)
        err = np.abs(r64 - g64) - (ATOL + RTOL * np.abs(r64))
        if (err > 0).any():
            i = np.unravel_index(int(np.argmax(err)), err.shape)
            bad.append("%s: %d of %d elements differ; worst at %s: ORT %.7g, epctx %.7g (|diff| %.3g; ORT range "
                       "%.3g..%.3g)" % (name, int((err > 0).sum()), r.size, tuple(int(x) for x in i), r64[i], g64[i],
                                         abs(r64[i] - g64[i]), float(r64.min()), float(r64.max())))
    return "; ".join(bad) if bad else None


def left_on_cpu(ctx_path):
    """{op type: count} of the nodes a _ctx.onnx leaves to the CPU EP (every node but the EPContext ones)."""
    import onnx
    try:
        m = onnx.load(ctx_path, load_external_data=False)
    except Exception:  # noqa: BLE001
        return None
    ops = {}
    for n in m.graph.node:
        if n.op_type != "EPContext":
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
    return ops


def median(xs):
    return float(np.median(np.asarray(xs, np.float64))) if xs else float("nan")


class Runner:
    def __init__(self, args, build):
        self.args = args
        self.build = build
        env = dict(os.environ)
        env.pop("EPCTX_AOTCPU_PROFILE", None)
        env["PYTHONPATH"] = os.path.join(build, "python") + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        self.ort = Worker("ORT", ["node", os.path.join(ROOT, "tests", "ort", "perf_worker.js")],
                          cwd=os.path.join(ROOT, "tests", "ort"), env=env)
        self.ep = Worker("epctx", ["/usr/bin/python3", os.path.abspath(__file__), "--worker"], env=env)
        self.seq = 0
        self.warmed = {}   # worker name -> the process generation that had its long first warm-up

    def stop(self):
        for w in (self.ort, self.ep):
            if w.proc and w.proc.poll() is None:
                try:
                    w.proc.stdin.close()  # both workers end at the end of their input
                    w.proc.wait(timeout=10)
                except Exception:  # noqa: BLE001
                    pass
            w.stop()

    def worker(self, side):
        return self.ort if side == "ort" else self.ep

    def pids(self):
        return [os.getpid()] + [w.proc.pid for w in (self.ort, self.ep) if w.proc]

    def quiet(self):
        """Before a measurement whose result decides something: waits for the neighbours (--idle-wait)."""
        if self.args.idle_wait > 0:
            return wait_quiet(self.args.idle_wait, self.pids())
        return None

    def measure_quiet(self, measure, log=None, what=""):
        """`measure()` again after waiting for quiet when the first result was taken while other processes were
        busy; the result carries "busy" when the last one still was."""
        r = measure()
        if busy(r) and self.args.idle_wait > 0 and r["status"] in ("ok", "mismatch"):
            if log:
                log("    %s: other processes used %.0f%% CPU; waiting up to %d s and measuring again" % (
                    what, 100 * r["other_cpu"], self.args.idle_wait))
            self.quiet()
            r = measure()
        r["busy"] = busy(r)
        return r

    def measure(self, model, seed, work, rounds, runs=None, check=True):
        """Loads `model` on the three sides, compares the outputs with ORT's, times the sides in turns.
        Returns a dict: status (ok | mismatch | error | invalid), times (ms per side), ratios, details."""
        import onnx
        import gen
        os.makedirs(work, exist_ok=True)
        path = os.path.join(work, "model.onnx")
        onnx.save(model, path)
        feeds = gen.make_inputs(model, seed)
        inputs = os.path.join(work, "inputs")
        shutil.rmtree(inputs, ignore_errors=True)
        write_inputs(feeds, inputs)
        return self.measure_path(path, inputs, work, rounds, runs, check)

    def measure_path(self, path, inputs, work, rounds, runs=None, check=True):
        self.seq += 1
        ids = {s: "%s%d" % (s, self.seq) for s in SIDES}
        res = {"status": "ok", "times": {}, "ratios": {}, "round_medians": {s: [] for s in SIDES}, "errors": {},
               "mismatch": {}}
        loaded = []
        try:
            # ORT: the reference outputs (first run), session creation
            r = self.ort.call({"cmd": "load", "id": ids["ort"], "model": path, "threads": self.args.threads})
            if not r["ok"]:
                res["status"], res["errors"]["ort"] = "invalid", r["error"]
                return res
            loaded.append("ort")
            res["ort_create_ms"] = r["create_ms"]
            r = self.ort.call({"cmd": "inputs", "id": ids["ort"], "dir": inputs})
            if not r["ok"]:
                res["status"], res["errors"]["ort"] = "invalid", r["error"]
                return res
            ref_dir = os.path.join(work, "ort_out")
            shutil.rmtree(ref_dir, ignore_errors=True)
            r = self.ort.call({"cmd": "run", "id": ids["ort"], "outputs_dir": ref_dir, "warmup": 0, "runs": 2})
            if not r["ok"]:
                res["status"], res["errors"]["ort"] = "invalid", r["error"]
                return res
            est = {"ort": min(r["times_ms"])}
            ref = read_pb_outputs(ref_dir)
            for v in ref.values():
                if v.dtype.kind == "f" and not np.isfinite(v).all():
                    res["note"] = "ORT output has non-finite values"
            # epctx: ctx (compile once, load with session.disable_model_compile=1) and the CPU EP
            for side in EP_SIDES:
                req = {"cmd": "load", "id": ids[side], "side": side, "model": path, "threads": self.args.threads,
                       "ctx_path": os.path.join(work, "ctx", "model_ctx.onnx"), "opt_level": self.args.compile_opt_level}
                os.makedirs(os.path.join(work, "ctx"), exist_ok=True)
                try:
                    r = self.ep.call(req)
                except WorkerDied as e:
                    res["status"], res["errors"][side] = "error", "crash: " + str(e)
                    return res
                if not r["ok"]:
                    res["status"], res["errors"][side] = "error", r["error"]
                    continue
                loaded.append(side)
                res[side + "_load"] = {k: v for k, v in r.items() if k != "ok"}
                if side == "ctx":
                    res["ctx_left_on_cpu"] = left_on_cpu(req["ctx_path"])
                r = self.ep.call({"cmd": "inputs", "id": ids[side], "npz": os.path.join(inputs, "inputs.npz")})
                out = os.path.join(work, side + "_out.npz")
                try:
                    r = self.ep.call({"cmd": "run", "id": ids[side], "outputs": out, "warmup": 0, "runs": 2})
                except WorkerDied as e:
                    res["status"], res["errors"][side] = "error", "crash: " + str(e)
                    return res
                if not r["ok"]:
                    res["status"], res["errors"][side] = "error", r["error"]
                    loaded.remove(side)
                    continue
                est[side] = min(r["times_ms"])
                if check:
                    d = compare(ref, dict(np.load(out)))
                    if d:
                        res["mismatch"][side] = d
                        if res["status"] == "ok":
                            res["status"] = "mismatch"
            if res["errors"]:
                res["status"] = "error"
            sides = [s for s in SIDES if s in loaded]
            # timed rounds, the sides in turn (the first side rotates from round to round)
            slowest = max(est[s] for s in sides)
            m = runs or int(min(self.args.max_runs, max(self.args.min_runs, round(self.args.round_ms / max(slowest,
                                                                                                       1e-3)))))
            res["runs_per_round"] = m
            # warm-up before the rounds: --warmup-ms per side; the first graph a worker process runs gets
            # --first-warmup-ms (onnxruntime-node ran a fresh process's first graph 2-3x slower for its first few
            # hundred runs, then settled; the sides would not start even)
            for side in sides:
                w = self.worker(side)
                ms = self.args.warmup_ms
                if w.proc and self.warmed.get(w.name) != w.generation:
                    ms = max(ms, self.args.first_warmup_ms)
                    self.warmed[w.name] = w.generation
                if ms > 0:
                    r = w.call({"cmd": "run", "id": ids[side], "warmup": 0, "warmup_ms": ms, "runs": 0})
                    if not r["ok"]:
                        res["status"] = "invalid" if side == "ort" else "error"
                        res["errors"][side] = "warm-up run: " + r["error"]
                        return res
            pids = [os.getpid()] + [w.proc.pid for w in (self.ort, self.ep) if w.proc]
            snap0 = cpu_snapshot(pids)
            for rnd in range(rounds):
                order = sides[rnd % len(sides):] + sides[:rnd % len(sides)]
                for side in order:
                    r = self.worker(side).call({"cmd": "run", "id": ids[side], "warmup": self.args.warmup,
                                                "runs": m})
                    if not r["ok"]:
                        res["status"] = "invalid" if side == "ort" else "error"
                        res["errors"][side] = "timed run: " + r["error"]
                        return res
                    res["round_medians"][side].append(median(r["times_ms"]))
                    if self.args.gap_ms:
                        time.sleep(self.args.gap_ms / 1e3)
            res["other_cpu"] = other_cpu(snap0, cpu_snapshot(pids))
            for side in sides:
                res["times"][side] = median(res["round_medians"][side])
            for side in EP_SIDES:
                if side in res["times"] and res["times"][side] > 0:
                    res["ratios"][side] = res["times"]["ort"] / res["times"][side]
            # each side's best round: what decides under --allow-busy (a neighbour's burst slows some rounds of a
            # side a lot, not its best one)
            res["best"] = {s: min(res["round_medians"][s]) for s in sides}
            res["best_ratios"] = {s: res["best"]["ort"] / res["best"][s] for s in EP_SIDES
                                  if s in res["best"] and res["best"][s] > 0}
            return res
        except WorkerDied as e:
            res["status"] = "error"
            res["errors"]["worker"] = "crash: " + str(e)
            return res
        finally:
            for side in loaded:
                try:
                    self.worker(side).call({"cmd": "release", "id": ids[side]}, timeout=60)
                except WorkerDied:
                    pass

    def intermediate_values(self, model, names, feeds_dir, work):
        """ORT's values of `names` (intermediates of `model`, run on the model's inputs): {name: array}."""
        import copy
        import onnx
        import gen
        from onnx import helper
        shapes = gen.value_shapes(model)
        m = copy.deepcopy(model)
        have = {o.name for o in m.graph.output}
        for n in names:
            if n not in have:
                et, dims = shapes[n]
                m.graph.output.append(helper.make_tensor_value_info(n, et, list(dims)))
        os.makedirs(work, exist_ok=True)
        path = os.path.join(work, "values.onnx")
        onnx.save(m, path)
        self.seq += 1
        sid = "v%d" % self.seq
        try:
            r = self.ort.call({"cmd": "load", "id": sid, "model": path, "threads": self.args.threads})
            if not r["ok"]:
                raise RuntimeError(r["error"])
            r = self.ort.call({"cmd": "inputs", "id": sid, "dir": feeds_dir})
            if not r["ok"]:
                raise RuntimeError(r["error"])
            out = os.path.join(work, "values_out")
            shutil.rmtree(out, ignore_errors=True)
            r = self.ort.call({"cmd": "run", "id": sid, "outputs_dir": out, "runs": 0})
            if not r["ok"]:
                raise RuntimeError(r["error"])
            vals = read_pb_outputs(out)
        finally:
            self.ort.call({"cmd": "release", "id": sid})
        return {n: vals[n] for n in names}

    def profile(self, path, inputs, work):
        """stderr of the AotCpu ctx session run by the CLI with EPCTX_AOTCPU_PROFILE=1 (the per-step profile)."""
        ctx = os.path.join(work, "prof", "model_ctx.onnx")
        os.makedirs(os.path.dirname(ctx), exist_ok=True)
        epctx = os.path.join(self.build, "bin", "epctx")
        c = subprocess.run([epctx, "compile", path, "-e", "aotcpu", "-x", str(self.args.threads), "-o", ctx,
                            "--opt-level", str(self.args.compile_opt_level)],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        if c.returncode != 0:
            return "epctx compile failed (%d):\n%s" % (c.returncode, c.stderr)
        env = dict(os.environ, EPCTX_AOTCPU_PROFILE="1")
        cmd = [epctx, "perf", ctx, "-e", "aotcpu", "-x", str(self.args.threads), "-r", "30", "--inputs", inputs,
               "-C", "session.disable_model_compile|1"]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
        return "$ EPCTX_AOTCPU_PROFILE=1 %s\n%s\n(exit %d; stdout:)\n%s" % (
            " ".join(cmd), p.stderr, p.returncode, p.stdout)


# ---- subgraphs (shrinking) ---------------------------------------------------------------------------------------

def block_of(node):
    parts = node.name.split("/")
    return parts[1] if len(parts) > 2 else ""


def subgraph(model, keep_names, shapes):
    """The model restricted to the compute nodes named in `keep_names` (Constant nodes they read come along): values
    they read that no kept node produces become graph inputs; values they produce that a dropped node reads, or
    that were graph outputs, become graph outputs. Returns (model, cut input names)."""
    import copy
    from onnx import helper
    g = model.graph
    keep = set(keep_names)
    inits = {t.name for t in g.initializer}
    const_of = {n.output[0]: n for n in g.node if n.op_type == "Constant"}
    kept = [n for n in g.node if n.op_type != "Constant" and n.name in keep]
    produced = {o for n in kept for o in n.output if o}
    read = [i for n in kept for i in n.input if i]
    consts = [const_of[i] for i in dict.fromkeys(read) if i in const_of]
    graph_inputs = {vi.name: vi for vi in g.input}
    outs_orig = [o.name for o in g.output]
    readers_outside = {i for n in g.node if n.op_type != "Constant" and n.name not in keep for i in n.input}
    new_inputs, cut = [], []
    for i in dict.fromkeys(read):
        if i in produced or i in inits or i in const_of:
            continue
        if i in graph_inputs:
            new_inputs.append(copy.deepcopy(graph_inputs[i]))
        else:
            et, dims = shapes[i]
            new_inputs.append(helper.make_tensor_value_info(i, et, list(dims)))
            cut.append(i)
    new_outputs = []
    for n in kept:
        for o in n.output:
            if o and (o in readers_outside or o in outs_orig):
                et, dims = shapes[o]
                new_outputs.append(helper.make_tensor_value_info(o, et, list(dims)))
    used = set(read)
    new_inits = [t for t in g.initializer if t.name in used]
    order = {id(n): k for k, n in enumerate(g.node)}
    nodes = sorted(consts + kept, key=lambda n: order[id(n)])
    ng = helper.make_graph(nodes, g.name + "_sub", new_inputs, new_outputs, new_inits)
    m = helper.make_model(ng, opset_imports=list(model.opset_import), producer_name="perftest")
    m.ir_version = model.ir_version
    for e in model.metadata_props:
        if not e.key.startswith("perftest.int_bound.") or e.key[len("perftest.int_bound."):] in \
                {vi.name for vi in new_inputs}:
            m.metadata_props.add(key=e.key, value=e.value)
    m.metadata_props.add(key="perftest.nodes", value=json.dumps([n.name for n in kept]))
    return m, cut


class Shrinker:
    """Greedy: contiguous ranges of blocks, then of nodes, kept while the subgraph stays slow (measured twice)."""

    def __init__(self, runner, model, seed, work, sides, log, budget, feeds=None):
        import gen
        self.runner, self.model, self.seed, self.work, self.sides, self.log = runner, model, seed, work, sides, log
        self.budget = budget            # measurements
        self.used = 0
        self.shapes = gen.value_shapes(model)
        self.compute = [n for n in model.graph.node if n.op_type != "Constant"]
        self.full_feeds = os.path.join(work, "full_inputs")
        self.feeds = feeds if feeds is not None else gen.make_inputs(model, seed)
        shutil.rmtree(self.full_feeds, ignore_errors=True)
        write_inputs(self.feeds, self.full_feeds)
        self.values = {}
        self.best = None                # (names, model, result)

    def slow(self, res):
        if res["status"] not in ("ok", "mismatch") or (busy(res) and not ALLOW_BUSY):
            return False
        if res["times"].get("ort", 0) < self.runner.args.min_ort_ms:
            return False
        q = deciding_ratios(res)
        return any(s in q and q[s] < THRESHOLD[s] for s in self.sides)

    def try_names(self, names, what):
        import gen
        if self.used >= self.budget or not names:
            return False
        if self.best and set(names) == set(self.best[0]):
            return False
        try:
            sub, cut = subgraph(self.model, names, self.shapes)
            gen.check(sub)
        except Exception as e:  # noqa: BLE001 (an invalid cut is skipped)
            self.log("    shrink: %s: invalid (%s)" % (what, str(e).splitlines()[0][:120]))
            return False
        if not sub.graph.output:
            return False
        try:
            missing = [c for c in cut if c not in self.values]
            if missing:
                self.values.update(self.runner.intermediate_values(self.model, missing, self.full_feeds,
                                                                   os.path.join(self.work, "values")))
        except Exception as e:  # noqa: BLE001
            self.log("    shrink: %s: no intermediate values (%s)" % (what, str(e)[:200]))
            return False
        feeds = {vi.name: self.values[vi.name] if vi.name in cut else self.feeds[vi.name] for vi in sub.graph.input}
        cand = os.path.join(self.work, "cand")
        shutil.rmtree(cand, ignore_errors=True)
        os.makedirs(cand)
        import onnx
        path = os.path.join(cand, "model.onnx")
        onnx.save(sub, path)
        write_inputs(feeds, os.path.join(cand, "inputs"))
        rounds = self.runner.args.shrink_rounds
        results = []
        for attempt in range(2):  # a cut is kept only when it is slow twice, both times on a quiet machine
            if self.used >= self.budget:
                return False
            self.used += 1
            r = self.runner.measure_path(path, os.path.join(cand, "inputs"), cand, rounds)
            if busy(r) and self.runner.args.idle_wait > 0 and self.used < self.budget:
                self.runner.quiet()
                self.used += 1
                r = self.runner.measure_path(path, os.path.join(cand, "inputs"), cand, rounds)
            results.append(r)
            ok = self.slow(r)
            self.log("    shrink: %-34s %3d nodes  %s%s" % (what, len(names), fmt_times(r), "" if ok else (
                "  (measured while busy: rejected)" if busy(r) and not ALLOW_BUSY else "  (not slow: rejected)")))
            if not ok:
                return False
        self.best = (list(names), sub, results[-1], feeds)
        self.best_path = (path, os.path.join(cand, "inputs"), cand)
        return True

    def final(self):
        """The kept subgraph measured once more with the full number of rounds (the numbers saved)."""
        names, sub, best, feeds = self.best
        if getattr(self, "best_path", None) is None:
            return self.best
        import onnx
        fin = os.path.join(self.work, "final")
        shutil.rmtree(fin, ignore_errors=True)
        os.makedirs(fin)
        onnx.save(sub, os.path.join(fin, "model.onnx"))
        write_inputs(feeds, os.path.join(fin, "inputs"))
        self.runner.quiet()
        r = self.runner.measure_path(os.path.join(fin, "model.onnx"), os.path.join(fin, "inputs"), fin,
                                     self.runner.args.rounds)
        self.used += 1
        if r["status"] in ("ok", "mismatch") and r["times"]:
            self.best = (names, sub, r, feeds)
        return self.best

    def run(self, full_result):
        names = [n.name for n in self.compute]
        self.best = (names, self.model, full_result, None)
        # blocks: contiguous ranges
        blocks = list(dict.fromkeys(block_of(n) for n in self.compute))
        lo, hi = 0, len(blocks)

        def names_of(bl):
            return [n.name for n in self.compute if block_of(n) in bl]

        progress = True
        while progress and hi - lo > 1 and self.used < self.budget:
            progress = False
            mid = (lo + hi) // 2
            for a, b_, what in [(lo, mid, "first half of blocks"), (mid, hi, "second half of blocks"),
                                (lo + 1, hi, "drop first block"), (lo, hi - 1, "drop last block")]:
                if b_ - a >= 1 and (a, b_) != (lo, hi) and \
                        self.try_names(names_of(blocks[a:b_]), "%s [%s]" % (what, ",".join(blocks[a:b_]))):
                    lo, hi = a, b_
                    progress = True
                    break
        # nodes: contiguous ranges of the remaining compute nodes
        cur = list(self.best[0])
        progress = True
        while progress and len(cur) > 1 and self.used < self.budget:
            progress = False
            n = len(cur)
            cands = [(0, n // 2, "first half of nodes"), (n // 2, n, "second half of nodes"),
                     (n // 4, n, "drop first quarter"), (0, n - n // 4, "drop last quarter"),
                     (1, n, "drop first node"), (0, n - 1, "drop last node")]
            seen = set()
            for a, b_, what in cands:
                if b_ - a < 1 or (a, b_) == (0, n) or (a, b_) in seen:
                    continue
                seen.add((a, b_))
                if self.try_names(cur[a:b_], what):
                    cur = cur[a:b_]
                    progress = True
                    break
        return self.best


# ---- reporting ---------------------------------------------------------------------------------------------------

def fmt_ms(x):
    return "%8.3f" % x if x is not None and not math.isnan(x) else "     n/a"


def fmt_times(r):
    t, q = r.get("times", {}), r.get("ratios", {})
    oc = r.get("other_cpu")
    return "ORT %s ms  ctx %s ms (%s)  cpu %s ms (%s)%s" % (
        fmt_ms(t.get("ort")), fmt_ms(t.get("ctx")), "%5.2fx" % q["ctx"] if "ctx" in q else "  n/a",
        fmt_ms(t.get("cpu")), "%5.2fx" % q["cpu"] if "cpu" in q else "  n/a",
        "  [other processes %2.0f%% CPU%s]" % (100 * oc, "; best rounds: ctx %s, cpu %s" % (
            "%.2fx" % r["best_ratios"]["ctx"] if "ctx" in r.get("best_ratios", {}) else "n/a",
            "%.2fx" % r["best_ratios"]["cpu"] if "cpu" in r.get("best_ratios", {}) else "n/a")
            if r.get("best_ratios") else "") if oc is not None and oc >= BUSY else "")


def correctness(r):
    if r["status"] == "ok":
        return "ok"
    if r["status"] == "invalid":
        return "INVALID (ORT: %s)" % r["errors"].get("ort", "")[:200]
    parts = []
    for side, d in r["mismatch"].items():
        parts.append("MISMATCH %s: %s" % (side, d[:300]))
    for side, d in r["errors"].items():
        parts.append("ERROR %s: %s" % (side, d[:300]))
    return "; ".join(parts)


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def summarize(results, classes):
    rows = []
    for cls in classes:
        rs = [r for r in results if r["class"] == cls]
        row = {"class": cls, "graphs": len(rs)}
        for side in EP_SIDES:
            qs = [(r["ratios"][side], r["index"]) for r in rs if side in r.get("ratios", {})]
            row[side + "_geomean"] = geomean([q for q, _ in qs])
            row[side + "_min"] = min(qs)[0] if qs else float("nan")
            row[side + "_min_index"] = min(qs)[1] if qs else None
            row[side + "_slow"] = sum(1 for q, _ in qs if q < THRESHOLD[side])
        row["ort_ms_median"] = median([r["times"]["ort"] for r in rs if "ort" in r.get("times", {})])
        row["findings"] = sum(1 for r in rs if r["status"] in ("mismatch", "error"))
        row["busy"] = sum(1 for r in rs if (r.get("other_cpu") or 0) >= BUSY)
        rows.append(row)
    allrow = {"class": "all", "graphs": len(results)}
    for side in EP_SIDES:
        qs = [(r["ratios"][side], r["index"]) for r in results if side in r.get("ratios", {})]
        allrow[side + "_geomean"] = geomean([q for q, _ in qs])
        allrow[side + "_min"] = min(qs)[0] if qs else float("nan")
        allrow[side + "_min_index"] = min(qs)[1] if qs else None
        allrow[side + "_slow"] = sum(1 for q, _ in qs if q < THRESHOLD[side])
    allrow["ort_ms_median"] = median([r["times"]["ort"] for r in results if "ort" in r.get("times", {})])
    allrow["findings"] = sum(1 for r in results if r["status"] in ("mismatch", "error"))
    allrow["busy"] = sum(1 for r in results if (r.get("other_cpu") or 0) >= BUSY)
    return rows + [allrow]


def summary_table(rows):
    def q(x):
        return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else "%.2fx" % x
    lines = ["| class | graphs | ORT ms (median) | ctx geomean | ctx min (index) | ctx < %.1fx | cpu geomean | "
             "cpu min (index) | cpu < %.1fx | correctness findings | timed while busy |" % (THRESHOLD["ctx"],
                                                                                           THRESHOLD["cpu"]),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %d | %s | %s | %s (%s) | %d | %s | %s (%s) | %d | %d | %d |" % (
            r["class"], r["graphs"], "%.3f" % r["ort_ms_median"] if not math.isnan(r["ort_ms_median"]) else "n/a",
            q(r["ctx_geomean"]), q(r["ctx_min"]), "-" if r["ctx_min_index"] is None else r["ctx_min_index"],
            r["ctx_slow"], q(r["cpu_geomean"]), q(r["cpu_min"]), "-" if r["cpu_min_index"] is None else
            r["cpu_min_index"], r["cpu_slow"], r["findings"], r["busy"]))
    return "\n".join(lines)


def print_summary(rows):
    print("\nper class: ORT / epctx (> 1: epctx faster); geometric mean and minimum over the graphs")
    print("%-10s %6s %9s | %8s %8s %5s | %8s %8s %5s | %8s %4s" % (
        "class", "graphs", "ORT ms", "ctx geo", "ctx min", "<%.1f" % THRESHOLD["ctx"], "cpu geo", "cpu min",
        "<%.1f" % THRESHOLD["cpu"], "findings", "busy"))
    for r in rows:
        print("%-10s %6d %9.3f | %7.2fx %7.2fx %5d | %7.2fx %7.2fx %5d | %8d %4d" % (
            r["class"], r["graphs"], r["ort_ms_median"], r["ctx_geomean"], r["ctx_min"], r["ctx_slow"],
            r["cpu_geomean"], r["cpu_min"], r["cpu_slow"], r["findings"], r["busy"]))


# ---- saving findings ---------------------------------------------------------------------------------------------

def save_case(folder, model, info, regen, feeds=None, graph_inputs=()):
    """model.onnx when under 128 KB, else regen.json is enough to rebuild it; info as ratios.json."""
    import onnx
    os.makedirs(folder, exist_ok=True)
    data = model.SerializeToString()
    if len(data) < MAX_SAVED_MODEL:
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(data)
        info["model"] = "model.onnx (%d bytes)" % len(data)
    else:
        info["model"] = "not saved (%.1f MB): regenerate with tests/perftest/perftest.py --model %s" % (
            len(data) / 1e6, folder)
    with open(os.path.join(folder, "regen.json"), "w") as f:
        json.dump(regen, f, indent=1)
    cut = {k: v for k, v in (feeds or {}).items() if k not in graph_inputs}
    if cut and sum(v.nbytes for v in cut.values()) < MAX_SAVED_INPUTS:
        # the values of the cut inputs it was measured with (ORT's intermediate values in the full graph; the
        # generated graph's own inputs come from the generator again, and --model recomputes missing cut values)
        np.savez_compressed(os.path.join(folder, "inputs.npz"), **cut)
    with open(os.path.join(folder, "ratios.json"), "w") as f:
        json.dump(info, f, indent=1, default=float)


def load_case(src, runner, work):
    """A model and its feeds: an .onnx file (generated inputs), or a perf_regress folder (model.onnx or the model
    rebuilt from regen.json; inputs.npz, else the generator's inputs and, for a cut subgraph's cut inputs, ORT's
    values of them in the full graph)."""
    import onnx
    import gen
    if not os.path.isdir(src):
        m = onnx.load(src)
        return m, gen.make_inputs(m, int(gen.meta(m, "perftest.seed", "0")))
    with open(os.path.join(src, "regen.json")) as f:
        rg = json.load(f)
    full = gen.generate(rg["seed"], rg["index"], rg.get("small", False))
    if os.path.exists(os.path.join(src, "model.onnx")):
        m = onnx.load(os.path.join(src, "model.onnx"))
    elif rg.get("nodes"):
        m, _ = subgraph(full, rg["nodes"], gen.value_shapes(full))
    else:
        m = full
    base = gen.make_inputs(full, rg["seed"])
    if os.path.exists(os.path.join(src, "inputs.npz")):
        base.update(dict(np.load(os.path.join(src, "inputs.npz"))))
    missing = [vi.name for vi in m.graph.input if vi.name not in base]
    if missing:
        fd = os.path.join(work, "full_inputs")
        write_inputs(gen.make_inputs(full, rg["seed"]), fd)
        base.update(runner.intermediate_values(full, missing, fd, os.path.join(work, "values")))
    return m, {vi.name: base[vi.name] for vi in m.graph.input}


# ---- driver ------------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="first model index")
    ap.add_argument("--count", type=int, default=None, help="graphs to run (default 12 without --minutes)")
    ap.add_argument("--minutes", type=float, default=None, help="run until this many minutes have passed")
    ap.add_argument("--classes", default=None, help="comma-separated subset of: conv,nhwc,act,attention,mlp,tensor")
    ap.add_argument("--out", default=os.path.join(ROOT, "perftest-out"), help="summary folder")
    ap.add_argument("--regress-dir", default=os.path.join(ROOT, "bench", "perf_regress"),
                    help="where slow graphs and findings are saved")
    ap.add_argument("--no-shrink", action="store_true", help="report slow graphs without confirming or shrinking")
    ap.add_argument("--smoke", action="store_true",
                    help="CI pass: fixed seed, one small graph per class, few runs, no shrinking; fails only on a "
                         "correctness mismatch or an error, never on a timing")
    ap.add_argument("--save", action="store_true", help="also save the summary as bench/results/perftest_<date>_<isa>.md")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--round-ms", type=float, default=60.0, help="target time of one side's timed runs per round")
    ap.add_argument("--min-runs", type=int, default=3)
    ap.add_argument("--max-runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs before each side's timed runs in a round")
    ap.add_argument("--warmup-ms", type=float, default=200.0,
                    help="untimed runs for this long per side before a graph's first round")
    ap.add_argument("--first-warmup-ms", type=float, default=2000.0,
                    help="the same for the first graph of a worker process")
    ap.add_argument("--gap-ms", type=float, default=20.0, help="pause between sides (spinning threads settle)")
    ap.add_argument("--shrink-rounds", type=int, default=3)
    ap.add_argument("--shrink-budget", type=int, default=16, help="measurements per shrink")
    ap.add_argument("--ctx-threshold", type=float, default=THRESHOLD["ctx"],
                    help="a graph whose ctx ratio is below this is shrunk and saved")
    ap.add_argument("--cpu-threshold", type=float, default=THRESHOLD["cpu"],
                    help="a graph whose CPU EP ratio is below this is shrunk and saved")
    ap.add_argument("--idle-wait", type=float, default=10.0,
                    help="seconds to wait for other processes to go quiet (< 10%% CPU) before a graph and before "
                         "a measurement that decides a shrink; 0: never wait")
    ap.add_argument("--compile-opt-level", type=int, default=1, choices=[0, 1, 2, 99],
                    help="graph optimization level of the _ctx.onnx compile (default 1, as `epctx compile`: constant "
                         "folding; the Python ModelCompiler's own default is 0)")
    ap.add_argument("--allow-busy", action="store_true",
                    help="let timings taken while other processes were busy confirm and shrink slow graphs (a "
                         "machine that is never quiet; the saved ratios.json records the other processes' share)")
    ap.add_argument("--min-ort-ms", type=float, default=0.05, help="a shrunk subgraph must take this long on ORT")
    ap.add_argument("--model", default=None, help="one model (.onnx or a perf_regress folder) instead of generated")
    ap.add_argument("--shrink", action="store_true", help="with --model: shrink it when slow")
    args = ap.parse_args()
    if args.worker:
        worker_main()
        return 0
    THRESHOLD["ctx"], THRESHOLD["cpu"] = args.ctx_threshold, args.cpu_threshold
    if args.allow_busy:
        ALLOW_BUSY.append(1)

    import onnx
    import gen

    build = os.environ.get("EPCTX_BUILD_DIR", "build")
    if not os.path.isabs(build):
        build = os.path.join(ROOT, build)
    if not os.path.isdir(os.path.join(build, "python", "epctx")):
        print("perftest: no Python package in %s/python (build first)" % build, file=sys.stderr)
        return 2
    if not os.path.isdir(os.path.join(ROOT, "tests", "ort", "node_modules", "onnxruntime-node")):
        print("perftest: onnxruntime-node missing in tests/ort (bash scripts/install_ort.sh)", file=sys.stderr)
        return 2

    classes = gen.CLASSES if not args.classes else [c.strip() for c in args.classes.split(",") if c.strip()]
    for c in classes:
        if c not in gen.CLASSES:
            print("perftest: unknown class %s (classes: %s)" % (c, ",".join(gen.CLASSES)), file=sys.stderr)
            return 2
    small = False
    if args.smoke:
        args.seed = SMOKE_SEED
        args.start = 0
        args.count = 2 * len(gen.CLASSES)
        args.minutes = None
        args.rounds = 2
        args.round_ms = 15.0
        args.min_runs = 2
        args.max_runs = 20
        args.no_shrink = True
        args.gap_ms = 5.0
        args.idle_wait = 0
        args.warmup_ms = 20.0
        args.first_warmup_ms = 300.0
        small = True
        args.regress_dir = os.path.join(args.out, "findings")
    isa = isa_info()
    cmdline = " ".join([os.path.relpath(sys.argv[0], ROOT) if sys.argv[0].startswith(ROOT) else sys.argv[0]] +
                       sys.argv[1:])
    started = datetime.datetime.now()
    load0 = loadavg()
    print("perftest: seed %d, classes %s, %d threads, %d rounds; ISA %s (avx512f %s, ONEDNN_MAX_CPU_ISA=%s); "
          "%s, %d cores; load %s; commit %s" % (args.seed, ",".join(classes), args.threads, args.rounds, isa["label"],
                                               "yes" if isa["avx512f"] else "no", isa["ONEDNN_MAX_CPU_ISA"] or "unset",
                                               isa["cpu"], isa["nproc"], load0, commit()))
    sys.stdout.flush()
    work = tempfile.mkdtemp(prefix="perftest_")
    runner = Runner(args, build)
    info = runner.ort.call({"cmd": "info"})
    isa["ort"] = info.get("ort_isa", "?") if info.get("ok") else "? (%s)" % info.get("error")
    print("perftest: ORT %s, kernels (MLAS) %s" % (info.get("version", "?"), isa["ort"]))
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    results, saved = [], []
    rc = 0
    t0 = time.time()

    def log(s):
        print(s)
        sys.stdout.flush()

    try:
        if args.model:
            src = args.model
            cur = os.path.join(work, "model")
            os.makedirs(cur, exist_ok=True)
            m, feeds = load_case(src, runner, cur)
            onnx.save(m, os.path.join(cur, "model.onnx"))
            write_inputs(feeds, os.path.join(cur, "inputs"))
            r = runner.measure_path(os.path.join(cur, "model.onnx"), os.path.join(cur, "inputs"), cur, args.rounds)
            log("%s  %s  %s" % (src, fmt_times(r), correctness(r)))
            if r["status"] in ("mismatch", "error"):
                rc = 1
            q1 = deciding_ratios(r)
            slow_sides = [s for s in EP_SIDES if s in q1 and q1[s] < THRESHOLD[s]]
            if args.shrink and slow_sides:
                sh = Shrinker(runner, m, 0, os.path.join(work, "shrink"), slow_sides, log, args.shrink_budget, feeds)
                sh.run(r)
                names, sub, best, _ = sh.final()
                os.makedirs(args.out, exist_ok=True)
                dst = os.path.join(args.out, "shrunk_" + os.path.basename(os.path.normpath(src)).replace(".onnx", "")
                                   + ".onnx")
                onnx.save(sub, dst)
                log("shrunk to %d of %d nodes: %s -> %s\n%s" % (len(names), len(sh.compute), fmt_times(best), dst,
                                                               gen.describe(sub)))
            return rc

        i = args.start
        while not stop:
            if args.count is not None and len(results) >= args.count:
                break
            if args.count is None and args.minutes is None and len(results) >= 12:
                break
            if args.minutes is not None and time.time() - t0 > args.minutes * 60:
                break
            cls = gen.class_of(i)
            if cls not in classes:
                i += 1
                continue
            try:
                m = gen.generate(args.seed, i, small)
            except Exception as e:  # noqa: BLE001 (a generator bug: reported, the run goes on)
                log("[%4d] %-9s generator error: %s" % (i, cls, e))
                rc = 1
                i += 1
                continue
            cur = os.path.join(work, "cur")
            shutil.rmtree(cur, ignore_errors=True)
            if not results or results[-1].get("busy"):
                runner.quiet()
            r = runner.measure(m, args.seed, cur, args.rounds)
            r["busy"] = busy(r)
            entry = {"seed": args.seed, "index": i, "class": cls, "opset": m.opset_import[0].version,
                     "nodes": len(m.graph.node), "flops": int(gen.meta(m, "perftest.flops", "0")),
                     "blocks": gen.meta(m, "perftest.blocks"), "status": r["status"], "times": r["times"],
                     "ratios": r["ratios"], "round_medians": r["round_medians"], "errors": r["errors"],
                     "best": r.get("best"), "best_ratios": r.get("best_ratios"),
                     "mismatch": r["mismatch"], "runs_per_round": r.get("runs_per_round"),
                     "other_cpu": r.get("other_cpu"), "busy": r["busy"], "load": loadavg(), "isa": isa["label"],
                     "ctx_load": r.get("ctx_load"), "cpu_load": r.get("cpu_load"),
                     "ctx_left_on_cpu": r.get("ctx_left_on_cpu")}
            left = {k: v for k, v in (r.get("ctx_left_on_cpu") or {}).items() if k != "Constant"}
            log("[%4d] %-9s op%d %3d nodes  %s  %s%s" % (
                i, cls, entry["opset"], entry["nodes"], fmt_times(r), correctness(r),
                "  (ctx leaves %d on the CPU EP: %s)" % (sum(left.values()), ", ".join(
                    "%s %d" % kv for kv in sorted(left.items()))) if left else ""))
            name = "%d_%d_%s" % (args.seed, i, cls)
            regen = {"seed": args.seed, "index": i, "class": cls, "small": small, "nodes": None,
                     "generator": "tests/perftest/gen.py generate(%d, %d%s)" % (args.seed, i,
                                                                                ", small=True" if small else "")}
            if r["status"] in ("mismatch", "error"):
                rc = 1
                folder = os.path.join(args.regress_dir, name)
                info = dict(entry, finding="correctness" if r["status"] == "mismatch" else "error", isa=isa,
                            command=cmdline, commit=commit())
                save_case(folder, m, info, regen)
                saved.append(folder)
                log("       CORRECTNESS FINDING saved in %s" % os.path.relpath(folder, ROOT))
            q1 = deciding_ratios(r)
            slow_sides = [s for s in EP_SIDES if s in q1 and q1[s] < THRESHOLD[s]]
            if slow_sides and not args.no_shrink and r["status"] in ("ok", "mismatch"):
                runner.quiet()
                r2 = runner.measure_quiet(lambda: runner.measure(m, args.seed, cur, args.rounds), log,
                                          "confirming")
                q2 = deciding_ratios(r2)
                confirmed = [s for s in slow_sides if s in q2 and q2[s] < THRESHOLD[s]]
                if r2["busy"] and confirmed and not ALLOW_BUSY:
                    entry["slow_while_busy"] = confirmed
                    log("       again:                %s  slow only while other processes were busy: not shrunk" %
                        fmt_times(r2))
                    confirmed = []
                else:
                    log("       again:                %s  %s" % (fmt_times(r2), "slow: " + ",".join(confirmed)
                                                                if confirmed else "not slow this time"))
                entry["confirm"] = {"times": r2["times"], "ratios": r2["ratios"], "other_cpu": r2.get("other_cpu")}
                if confirmed:
                    sh = Shrinker(runner, m, args.seed, os.path.join(work, "shrink"), confirmed, log,
                                  args.shrink_budget)
                    sh.run(r2)
                    names, sub, best, feeds = sh.final()
                    entry["shrunk_nodes"] = len(names)
                    entry["shrunk"] = {"times": best["times"], "ratios": best["ratios"]}
                    folder = os.path.join(args.regress_dir, name)
                    regen["nodes"] = names if len(names) < len(sh.compute) else None
                    prof_dir = os.path.join(work, "profile")
                    shutil.rmtree(prof_dir, ignore_errors=True)
                    os.makedirs(prof_dir)
                    onnx.save(sub, os.path.join(prof_dir, "model.onnx"))
                    pf = gen.make_inputs(sub, args.seed)
                    if feeds:
                        pf.update(feeds)
                    write_inputs({vi.name: pf[vi.name] for vi in sub.graph.input}, os.path.join(prof_dir, "inputs"))
                    try:
                        prof = runner.profile(os.path.join(prof_dir, "model.onnx"), os.path.join(prof_dir, "inputs"),
                                              prof_dir)
                    except Exception as e:  # noqa: BLE001
                        prof = "profile failed: %s" % e
                    info = {"seed": args.seed, "index": i, "class": cls, "slow_sides": confirmed,
                            "thresholds": THRESHOLD,
                            "full": {"nodes": len(sh.compute), "times": r["times"], "ratios": r["ratios"],
                                     "other_cpu": r.get("other_cpu"), "confirm": entry["confirm"],
                                     "ctx_left_on_cpu": r.get("ctx_left_on_cpu")},
                            "shrunk": {"nodes": len(names), "node_names": names, "times": best["times"],
                                       "ratios": best["ratios"], "round_medians": best.get("round_medians"),
                                       "other_cpu": best.get("other_cpu"),
                                       "ctx_left_on_cpu": best.get("ctx_left_on_cpu"), "measurements": sh.used},
                            "allow_busy": bool(ALLOW_BUSY), "compile_opt_level": args.compile_opt_level,
                            "isa": isa, "threads": args.threads, "command": cmdline, "commit": commit(),
                            "date": started.isoformat(timespec="seconds"), "load": loadavg(),
                            "description": gen.describe(sub)}
                    if r["status"] == "mismatch":
                        info["finding"] = "correctness (see the full graph's mismatch)"
                        info["mismatch"] = r["mismatch"]
                    save_case(folder, sub, info, regen, feeds, {vi.name for vi in m.graph.input})
                    with open(os.path.join(folder, "profile.txt"), "w") as f:
                        f.write(prof)
                    saved.append(folder)
                    log("       shrunk to %d of %d nodes (%d measurements): %s -> %s" % (
                        len(names), len(sh.compute), sh.used, fmt_times(best), os.path.relpath(folder, ROOT)))
            results.append(entry)
            i += 1
    finally:
        runner.stop()
        shutil.rmtree(work, ignore_errors=True)

    if not results:
        print("perftest: no graphs run")
        return rc or 1
    rows = summarize(results, classes)
    print_summary(rows)
    load1 = loadavg()
    dt = time.time() - t0
    print("perftest: %d graphs in %.1f s; %d correctness findings or errors; %d saved%s" % (
        len(results), dt, sum(1 for r in results if r["status"] in ("mismatch", "error")), len(saved),
        (": " + ", ".join(os.path.relpath(s, ROOT) for s in saved)) if saved else ""))
    # the markdown + json summary
    head = ["# perftest %s (%s)" % (started.strftime("%Y-%m-%d %H:%M"), isa["label"]), "",
            "- command: `%s`" % cmdline,
            "- commit %s; %s, %d cores; avx512f %s; ONEDNN_MAX_CPU_ISA=%s; ORT's kernels (MLAS) %s "
            "(`tests/ort/load_ort.js`); %d threads per side" % (
                commit(), isa["cpu"], isa["nproc"] or 0, "yes" if isa["avx512f"] else "no",
                isa["ONEDNN_MAX_CPU_ISA"] or "unset", isa.get("ort", "?"), args.threads),
            "- seed %d, %d graphs (indices %d..%d), %d rounds, %.0f s; load average at start %s, at end %s" % (
                args.seed, len(results), results[0]["index"], results[-1]["index"], args.rounds, dt, load0, load1),
            "- `_ctx.onnx` compiled at graph optimization level %d" % args.compile_opt_level,
            "- ratio = ORT 1.30 time / epctx time (> 1: epctx faster); ctx = AotCpu from `_ctx.onnx`, cpu = the "
            "CPU EP; a side's time is the median over rounds of each round's median", ""]
    warn = []
    if load0 and load0[0] > 0.25 * (isa["nproc"] or 1):
        warn.append("the 1-minute load average at the start (%.2f) exceeded a quarter of the cores: the numbers "
                    "are not worth much" % load0[0])
    envs = {k: v for k, v in os.environ.items() if k.split("_")[0] in ("OMP", "GOMP", "KMP", "DNNL", "ONEDNN", "EPCTX")
            and k != "EPCTX_BUILD_DIR"}
    if envs:
        head.insert(len(head) - 1, "- environment: " + ", ".join("%s=%s" % kv for kv in sorted(envs.items())))
    busy_n = sum(1 for e in results if e.get("busy"))
    if busy_n:
        head.insert(len(head) - 1, "- %d of %d graphs were timed while other processes used >= %.0f%% of the "
                    "machine's CPU (marked; such numbers say more about the neighbours than about the runtimes)" % (
                        busy_n, len(results), 100 * BUSY))
    quiet_results = [e for e in results if not e.get("busy")]
    rows_quiet = summarize(quiet_results, classes)
    body = ["## Per class", "", summary_table(rows), ""]
    if len(quiet_results) < len(results):
        body += ["## Per class, graphs timed while other processes used < %.0f%% of the CPU only (%d of %d)" % (
            100 * BUSY, len(quiet_results), len(results)), "", summary_table(rows_quiet), ""]
    slow_busy = [e for e in results if e.get("slow_while_busy")]
    if slow_busy:
        body += ["Slow only while other processes were busy (not shrunk): " + ", ".join(
            "%d %s (%s)" % (e["index"], e["class"], ",".join(e["slow_while_busy"])) for e in slow_busy), ""]
    if warn:
        body += ["**Warning:** " + w for w in warn] + [""]
    body += ["## Graphs", "", "ctx left on CPU EP: the nodes the `_ctx.onnx` leaves to the CPU EP (Constant nodes not "
             "counted); other CPU: the share of the machine's CPU other processes used while the graph was timed.", "",
             "| index | class | opset | nodes | MFLOP | ORT ms | ctx ms | ctx ratio | cpu ms | "
             "cpu ratio | correctness | other CPU | ctx left on CPU EP | shrunk |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in results:
        t, q = e["times"], e["ratios"]
        left = {k: v for k, v in (e.get("ctx_left_on_cpu") or {}).items() if k != "Constant"}
        body.append("| %d | %s | %d | %d | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            e["index"], e["class"], e["opset"], e["nodes"], e["flops"] / 1e6,
            "%.3f" % t["ort"] if "ort" in t else "n/a", "%.3f" % t["ctx"] if "ctx" in t else "n/a",
            "%.2fx" % q["ctx"] if "ctx" in q else "n/a", "%.3f" % t["cpu"] if "cpu" in t else "n/a",
            "%.2fx" % q["cpu"] if "cpu" in q else "n/a", correctness(e if "status" in e else {}).replace("|", "/")[:200],
            "%.0f%%" % (100 * e["other_cpu"]) if e.get("other_cpu") is not None else "?",
            ", ".join("%s %d" % kv for kv in sorted(left.items())),
            "%d nodes: ctx %s, cpu %s" % (e["shrunk_nodes"], "%.2fx" % e["shrunk"]["ratios"].get("ctx", float("nan")),
                                          "%.2fx" % e["shrunk"]["ratios"].get("cpu", float("nan")))
            if "shrunk" in e else ""))
    if saved:
        body += ["", "## Saved", ""] + ["- `%s`" % os.path.relpath(s, ROOT) for s in saved]
    md = "\n".join(head + body) + "\n"
    js = {"command": cmdline, "commit": commit(), "isa": isa, "threads": args.threads, "seed": args.seed,
          "rounds": args.rounds, "load_start": load0, "load_end": load1, "seconds": dt, "summary": rows,
          "summary_quiet": rows_quiet,
          "graphs": results, "saved": [os.path.relpath(s, ROOT) for s in saved]}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(md)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(js, f, indent=1, default=float)
    print("perftest: summary in %s" % os.path.join(args.out, "summary.md"))
    if args.save:
        base = os.path.join(ROOT, "bench", "results", "perftest_%s_%s" % (started.strftime("%Y-%m-%d"), isa["label"]))
        k = 1
        final = base
        while os.path.exists(final + ".md"):
            k += 1
            final = "%s-%d" % (base, k)
        with open(final + ".md", "w") as f:
            f.write(md)
        with open(final + ".json", "w") as f:
            json.dump(js, f, indent=1, default=float)
        print("perftest: saved %s.md and .json" % os.path.relpath(final, ROOT))
    return rc


if __name__ == "__main__":
    sys.exit(main())
