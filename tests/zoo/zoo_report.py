#!/usr/bin/python3
"""What AotCpu does with each zoo model, and how close every mode comes to ONNX Runtime 1.30.

    PYTHONPATH=build/python /usr/bin/python3 tests/zoo/zoo_report.py [--build build] [--zoo build/zoo] [--only a,b]

Needs the cases (`ctest -R zoo_cases`, or scripts/fetch_zoo.sh + tests/zoo/make_zoo_cases.py) and the epctx
Python package of that build. For every model of tests/zoo/zoo.json it prints

- nodes: the model's nodes, those inside If/Loop bodies counted too (top-level count in parentheses);
- claimed / left: nodes AotCpu took vs nodes left on the CPU EP in the _ctx.onnx that `epctx compile -e aotcpu`
  writes with the manifest's pins (counted recursively, so nodes of an If body count), the left ones by op type;
  partitions: the EPContext nodes of that ctx model; the JIT session's report (partitions on AotCpu, nodes in
  them, top-level nodes left on the CPU EP) is printed beside it as a cross-check;
- per mode (cpu, aotcpu jit, ctx embed 0, ctx embed 1): PASS/FAIL with the manifest's tolerance (the criterion of
  `epctx test`: |got - want| <= atol + rtol * |want| for every element), the largest absolute difference, the
  largest relative difference among elements with |want| >= 1e-3, and `tol×` = max |got - want| / (atol + rtol
  |want|) (<= 1 passes), over every output of every data set.

The ctx models are compiled into ZOO/report/ (the ctest ones are left alone). Exit status 0 even when a mode
fails: this is a report; the tests are `ctest -L zoo`.
"""
import argparse
import collections
import glob
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def walk_nodes(graph):
    """Every node of a graph and of the graphs in its nodes' attributes (If branches, Loop bodies)."""
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from walk_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from walk_nodes(g)


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as fh:
        t.ParseFromString(fh.read())
    return t.name, numpy_helper.to_array(t)


def data_sets(case):
    out = []
    for d in sorted(glob.glob(os.path.join(case, "test_data_set_*"))):
        key = lambda p: int(os.path.basename(p).split("_")[1].split(".")[0])  # noqa: E731
        ins = [read_pb(p) for p in sorted(glob.glob(os.path.join(d, "input_*.pb")), key=key)]
        outs = [read_pb(p) for p in sorted(glob.glob(os.path.join(d, "output_*.pb")), key=key)]
        out.append((os.path.basename(d), dict(ins), outs))
    return out


class Diff:
    def __init__(self, rtol, atol):
        self.rtol, self.atol = rtol, atol
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.ratio = 0.0
        self.error = None
        self.where = ""

    def add(self, label, got, want):
        if got.shape != want.shape or got.dtype != want.dtype:
            self.error = f"{label}: {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
            return
        if want.dtype.kind != "f":
            if not np.array_equal(got, want):
                self.error = f"{label}: integer values differ"
            return
        g, w = got.astype(np.float64), want.astype(np.float64)
        d = np.abs(g - w)
        d[np.isnan(g) != np.isnan(w)] = np.inf
        d[np.isnan(g) & np.isnan(w)] = 0
        if d.size == 0:
            return
        i = int(np.argmax(d))
        if d.flat[i] > self.max_abs:
            self.max_abs = float(d.flat[i])
            self.where = f"{label}[{i}]: {g.flat[i]:.6g} vs {w.flat[i]:.6g}"
        big = np.abs(w) >= 1e-3
        if big.any():
            self.max_rel = max(self.max_rel, float(np.max(d[big] / np.abs(w[big]))))
        self.ratio = max(self.ratio, float(np.max(d / (self.atol + self.rtol * np.abs(w)))))

    def verdict(self):
        if self.error:
            return "ERROR"
        return "PASS" if self.ratio <= 1.0 else "FAIL"

    def cell(self):
        if self.error:
            return f"ERROR {self.error}"
        return f"{self.verdict()} abs {self.max_abs:.2e} rel {self.max_rel:.2e} tol× {self.ratio:.3g}"


def run_mode(ort, model_path, providers, pins, sets, rtol, atol, shapes=()):
    """Runs every data set in one session; returns (Diff, session report dict or None)."""
    diff = Diff(rtol, atol)
    so = ort.SessionOptions()
    for name, value in pins:
        so.add_free_dimension_override_by_name(name, value)
    if shapes:
        so.add_session_config_entry("epctx.input_shapes", ";".join(shapes))
    try:
        sess = ort.InferenceSession(model_path, so, providers=providers)
    except Exception as e:  # noqa: BLE001 - the report shows every failure
        diff.error = f"session: {type(e).__name__}: {str(e)[:300]}"
        return diff, None
    report = sess.get_session_report()
    out_names = [o.name for o in sess.get_outputs()]
    for set_name, feeds, expected in sets:
        try:
            got = sess.run(None, feeds)
        except Exception as e:  # noqa: BLE001
            diff.error = f"{set_name}: run: {type(e).__name__}: {str(e)[:300]}"
            return diff, report
        for k, (name, want) in enumerate(expected):
            diff.add(f"{set_name}/{out_names[k]}", np.asarray(got[k]), want)
    return diff, report


def compile_ctx(epctx, case, out_dir, pins, embed, shapes=()):
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "model.onnx")
    for f in glob.glob(os.path.join(out_dir, "*")):
        os.remove(f)
    cmd = [epctx, "compile", "-e", "aotcpu"] + sum((["-f", f"{n}:{v}"] for n, v in pins), [])
    cmd += sum((["--input-shape", s] for s in shapes), [])
    cmd += (["--embed"] if embed else []) + [os.path.join(case, "model.onnx"), "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip() or r.stdout.strip())[:300]
    return out, None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--zoo", default=None, help="default: BUILD/zoo")
    ap.add_argument("--only", default=None, help="comma-separated model names")
    ap.add_argument("--json", action="store_true", help="one JSON object per model instead of text")
    args = ap.parse_args(argv)
    zoo = args.zoo or os.path.join(args.build, "zoo")
    epctx = os.path.join(args.build, "bin", "epctx")
    sys.path.insert(0, os.path.join(args.build, "python"))
    import epctx as ort  # noqa: E402 - the build's package

    with open(os.path.join(HERE, "zoo.json")) as fh:
        manifest = json.load(fh)
    only = set(args.only.split(",")) if args.only else None
    default = manifest["default_tolerance"]
    summary = []
    for m in manifest["models"]:
        name = m["name"]
        if only and name not in only:
            continue
        case = os.path.join(zoo, "cases", name)
        if not os.path.isfile(os.path.join(case, "model.onnx")):
            print(f"{name}: no case in {case} (run `ctest -R zoo_cases` first)")
            continue
        rtol, atol = m.get("rtol", default["rtol"]), m.get("atol", default["atol"])
        pins = [(p.rsplit(":", 1)[0], int(p.rsplit(":", 1)[1])) for p in m["pins"]]
        shapes = m.get("input_shapes", [])
        model = onnx.load(os.path.join(case, "model.onnx"))
        total = sum(1 for _ in walk_nodes(model.graph))
        top = len(model.graph.node)
        sets = data_sets(case)
        row = {"model": name, "package": m["package"], "nodes": total, "top_level_nodes": top,
               "rtol": rtol, "atol": atol, "modes": {}}

        diff, _ = run_mode(ort, os.path.join(case, "model.onnx"), [], pins, sets, rtol, atol, shapes)
        row["modes"]["cpu"] = diff
        diff, rep = run_mode(ort, os.path.join(case, "model.onnx"), ["AotCpuExecutionProvider"], pins, sets, rtol,
                             atol, shapes)
        row["modes"]["aotcpu_jit"] = diff
        if rep:
            parts = [p for p in rep["partitions"] if p["ep"] == "AotCpuExecutionProvider"]
            row["jit"] = {"partitions": len(parts), "nodes_in_partitions": sum(p["nodes"] for p in parts),
                          "top_level_cpu_nodes": rep["cpu_nodes"]}
        for embed in (0, 1):
            out_dir = os.path.join(zoo, "report", f"{name}_embed{embed}")
            ctx, err = compile_ctx(epctx, case, out_dir, pins, embed, shapes)
            if ctx is None:
                d = Diff(rtol, atol)
                d.error = f"compile: {err}"
                row["modes"][f"ctx_embed{embed}"] = d
                continue
            if embed == 0:
                cm = onnx.load(ctx, load_external_data=False)
                nodes = list(walk_nodes(cm.graph))
                ctx_nodes = [n for n in nodes if n.op_type == "EPContext" and n.domain == "com.microsoft"]
                left = [n for n in nodes if not (n.op_type == "EPContext" and n.domain == "com.microsoft")]
                # If/Loop nodes whose bodies hold EPContext nodes stay too; they are counted as left.
                row["ctx"] = {"partitions": len(ctx_nodes), "left": len(left), "claimed": total - len(left),
                              "left_by_op": dict(collections.Counter(n.op_type for n in left).most_common())}
            diff, _ = run_mode(ort, ctx, ["AotCpuExecutionProvider"], pins, sets, rtol, atol, shapes)
            row["modes"][f"ctx_embed{embed}"] = diff
        summary.append(row)

        if args.json:
            out = dict(row)
            out["modes"] = {k: {"verdict": v.verdict(), "max_abs": v.max_abs, "max_rel": v.max_rel,
                                "tol_ratio": v.ratio, "worst": v.where, "error": v.error}
                            for k, v in row["modes"].items()}
            print(json.dumps(out))
            continue
        pin_text = " ".join([f"-f {n}:{v}" for n, v in pins] + [f"--input-shape {s}" for s in shapes]) or "(no pins)"
        print(f"== {name} ({m['package']}, {m['framework']}) {pin_text}, rtol {rtol:g} atol {atol:g}")
        print(f"   nodes {total} ({top} top level)")
        if "ctx" in row:
            c = row["ctx"]
            left_ops = ", ".join(f"{k} {v}" for k, v in c["left_by_op"].items()) or "-"
            print(f"   ctx model: AotCpu claimed {c['claimed']}, left on the CPU EP {c['left']} ({left_ops}); "
                  f"{c['partitions']} AotCpu partitions (EPContext nodes)")
        if "jit" in row:
            j = row["jit"]
            print(f"   JIT session report: {j['partitions']} AotCpu partitions holding {j['nodes_in_partitions']} "
                  f"nodes, {j['top_level_cpu_nodes']} top-level nodes on the CPU EP")
        for k, v in row["modes"].items():
            worst = f"  worst {v.where}" if v.where and v.verdict() != "PASS" else ""
            print(f"   {k:12s} {v.cell()}{worst}")

    if not args.json and summary:
        print()
        print("Mode cells: verdict, max |got - want|, (tol×). ctx: the _ctx.onnx of `epctx compile -e aotcpu` with the "
              "pins (nodes in If bodies counted); jit: the JIT session's report (partitions inside If bodies included).")
        print()
        print("| model | nodes | ctx: AotCpu claimed / left on CPU EP | ctx partitions | jit: AotCpu partitions (nodes) "
              "| cpu | aotcpu jit | ctx embed 0 | ctx embed 1 |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in summary:
            c, j = r.get("ctx"), r.get("jit")
            cells = []
            for k in ("cpu", "aotcpu_jit", "ctx_embed0", "ctx_embed1"):
                v = r["modes"].get(k)
                cells.append("-" if v is None else "ERROR" if v.error else
                             f"{v.verdict()} {v.max_abs:.1e} ({v.ratio:.2g})")
            ctx_cells = [f"{c['claimed']} / {c['left']}", str(c["partitions"])] if c else ["(no ctx model)", "-"]
            jit_cell = f"{j['partitions']} ({j['nodes_in_partitions']})" if j else "-"
            print(f"| {r['model']} | {r['nodes']} | " + " | ".join(ctx_cells + [jit_cell] + cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
