#!/usr/bin/python3
"""The analysis, report and chart of bench/run_aotcpu_bench.sh (see bench/README.md).

  chart.py analyze --case C --model M --inputs DIR --ort-dir tests/ort --out FILE.json [--matmuls FILE.txt]
      weight bytes (total, and read per run: tables read by Gather/Slice count only what they read), every MatMul's
      shape at the case's input shapes (found by running ORT on a copy of the model whose MatMul inputs are outputs)
      and their FLOPs; --matmuls writes them as epctx_floors --matmuls lines.
  chart.py report --work DIR --md OUT.md --json OUT.json
      turns the run's files in DIR (meta.json, raw.jsonl, gen.jsonl, analysis_*.json, floors_*.json) into the markdown
      table and one JSON of every raw number.
  chart.py plot --json OUT.json --png OUT.png
      grouped bars per model (ORT / JIT / ctx embed 0 / ctx embed 1): session creation (log) and steady state (log,
      the floor as a dashed line).
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

LABELS = {
    "decoder_prefill": "decoder prefill (seq 128)",
    "decoder_decode": "decoder decode (past 127)",
    "cnn": "CNN 224x224",
}
SIDES = [("ort", "ORT 1.30"), ("jit", "AotCpu JIT"), ("ctx0", "ctx embed 0"), ("ctx1", "ctx embed 1")]
EPCTX_SIDES = [s for s, _ in SIDES if s != "ort"]
ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}


# ----------------------------------------------------------------------------------------------------------- analyze
def analyze(a):
    import numpy as np
    import onnx
    from onnx import helper, shape_inference

    model = onnx.load(a.model, load_external_data=False)
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    consumers = {}
    for n in g.node:
        for i, x in enumerate(n.input):
            consumers.setdefault(x, []).append((n, i))

    def nbytes(t):
        return int(np.prod(t.dims, dtype=np.int64)) * ITEMSIZE.get(t.data_type, 4)

    # Values whose run-time shapes we need: MatMul/Gemm operands, and outputs of Gather/Slice reading a table.
    elem = {}
    try:
        inferred = shape_inference.infer_shapes(model)
        for v in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
            if v.type.tensor_type.elem_type:
                elem[v.name] = v.type.tensor_type.elem_type
    except Exception:  # noqa: BLE001 - types fall back below
        pass
    graph_inputs = {v.name for v in g.input}
    graph_outputs = {v.name for v in g.output}
    wanted = []
    for n in g.node:
        if n.op_type in ("MatMul", "Gemm"):
            wanted += [x for x in n.input[:2] if x and x not in inits and x not in graph_inputs]
        if n.op_type in ("Gather", "Slice") and n.input[0] in inits:
            wanted.append(n.output[0])
    wanted = [x for x in dict.fromkeys(wanted) if x not in graph_outputs]
    for x in wanted:
        g.output.append(helper.make_tensor_value_info(x, elem.get(x, 1), None))

    shapes = {}
    # The copy sits beside the model so its external data paths stay valid; removed right after.
    probe = os.path.join(os.path.dirname(os.path.abspath(a.model)), ".aotcpu_bench_shapes.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            onnx.save(model, probe)
            r = subprocess.run(["node", "run_model.js", probe, os.path.abspath(a.inputs), "--out", tmp],
                               cwd=a.ort_dir, capture_output=True, text=True, check=False)
        finally:
            if os.path.exists(probe):
                os.remove(probe)
        if r.returncode != 0:
            sys.exit(f"chart.py analyze: ORT shape probe failed: {r.stderr.strip()[:500]}")
        for o in json.loads(r.stdout.strip().splitlines()[-1])["outputs"]:
            shapes[o["name"]] = [int(d) for d in o["dims"]]
    # Graph inputs' shapes: the test data's headers.
    input_files = [f for f in os.listdir(a.inputs) if f.startswith("input_") and f.endswith(".pb")]
    real_inputs = [vi.name for vi in g.input if vi.name not in inits]
    for name, f in zip(real_inputs, sorted(input_files, key=lambda s: int(s[6:-3]))):
        t = onnx.TensorProto()
        with open(os.path.join(a.inputs, f), "rb") as fh:
            t.ParseFromString(fh.read())
        shapes[name] = list(t.dims)

    def dims_of(x):
        return list(inits[x].dims) if x in inits else shapes.get(x)

    matmuls = []
    for n in g.node:
        if n.op_type not in ("MatMul", "Gemm"):
            continue
        A, B = dims_of(n.input[0]), dims_of(n.input[1])
        if A is None or B is None:
            sys.exit(f"chart.py analyze: no shape for an input of {n.op_type} '{n.name}'")
        const_b = n.input[1] in inits
        if n.op_type == "Gemm":
            at = next((x.i for x in n.attribute if x.name == "transA"), 0)
            bt = next((x.i for x in n.attribute if x.name == "transB"), 0)
            m, k = (A[1], A[0]) if at else (A[0], A[1])
            nn = B[0] if bt else B[1]
            matmuls.append({"name": n.name, "b": 1, "m": m, "k": k, "n": nn, "w": const_b})
            continue
        if len(A) == 1:
            A = [1] + A
        if len(B) == 1:
            B = B + [1]
        if const_b and len(B) == 2:  # activations folded into rows: one 2-D matmul against packed weights
            m = int(np.prod(A[:-1], dtype=np.int64))
            matmuls.append({"name": n.name, "b": 1, "m": m, "k": A[-1], "n": B[-1], "w": True})
            continue
        ba, bb = A[:-2], B[:-2]
        width = max(len(ba), len(bb))
        ba, bb = [1] * (width - len(ba)) + ba, [1] * (width - len(bb)) + bb
        batch = int(np.prod([max(x, y) for x, y in zip(ba, bb)], dtype=np.int64))
        matmuls.append({"name": n.name, "b": batch, "m": A[-2], "k": A[-1], "n": B[-1], "w": const_b})
    for mm in matmuls:
        mm["flops"] = 2 * mm["b"] * mm["m"] * mm["k"] * mm["n"]

    total = sum(nbytes(t) for t in g.initializer)
    read = 0
    partial = []
    for t in g.initializer:
        uses = consumers.get(t.name, [])
        if uses and all(n.op_type in ("Gather", "Slice") and i == 0 for n, i in uses):
            got = 0
            for n, _ in uses:
                d = shapes.get(n.output[0])
                got += nbytes(t) if d is None else int(np.prod(d, dtype=np.int64)) * ITEMSIZE.get(t.data_type, 4)
            got = min(got, nbytes(t))
            partial.append({"name": t.name, "bytes": nbytes(t), "bytes_read": got})
            read += got
        elif uses:
            read += nbytes(t)
    out = {
        "case": a.case,
        "model": os.path.abspath(a.model),
        "nodes": len(g.node),
        "initializers": len(g.initializer),
        "weight_bytes_total": total,
        "weight_bytes_read_per_run": read,
        "tables_read_in_part": partial,
        "matmuls": matmuls,
        "matmul_flops": sum(m["flops"] for m in matmuls),
        "input_shapes": {k: shapes[k] for k in real_inputs},
    }
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    if a.matmuls:
        with open(a.matmuls, "w") as f:
            for mm in matmuls:
                f.write(f"{mm['b']} {mm['m']} {mm['k']} {mm['n']} {'w' if mm['w'] else 'a'} {mm['name']}\n")


# ------------------------------------------------------------------------------------------------------------ report
def load_jsonl(path):
    if not os.path.exists(path):
        return []
    return [json.loads(line) for line in open(path) if line.strip()]


def load_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def fmt(x, unit=""):
    if x is None:
        return "n/a"
    s = f"{x:.0f}" if x >= 1000 else f"{x:.1f}" if x >= 100 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"
    return s + unit


def mb(n):
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} KB" if n >= 100 else f"{n} B"


def ratio(x, y, suffix="x"):
    return f"{x / y:.2f}{suffix}" if (x is not None and y) else "n/a"


def summarize_report(rep):
    """The session report of an epctx run: what AotCpu took, and how the context was loaded."""
    if not rep:
        return None
    parts = rep.get("partitions", [])
    loads = [p["load"] for p in parts if isinstance(p.get("load"), dict)]
    return {
        "partitions": len(parts),
        "partition_nodes": sum(p.get("nodes", 0) for p in parts),
        "partition_eps": sorted({p.get("ep", "") for p in parts}),
        "cpu_nodes": rep.get("cpu_nodes"),
        "from_ep_context": sum(1 for p in parts if p.get("from_ep_context")),
        "bytes_mapped": sum(x.get("bytes_mapped", 0) for x in loads),
        "bytes_read": sum(x.get("bytes_read", 0) for x in loads),
        "context_load_ms": sum(x.get("ms", 0) for x in loads),
        "timings_ms": rep.get("timings_ms"),
        "eps": rep.get("eps"),
    }


def report(a):
    work = a.work
    meta = load_json(os.path.join(work, "meta.json")) or {}
    rows = load_jsonl(os.path.join(work, "raw.jsonl"))
    gens = load_jsonl(os.path.join(work, "gen.jsonl"))
    cases = meta.get("cases") or sorted({r["case"] for r in rows})
    analysis = {c: load_json(os.path.join(work, f"analysis_{c}.json")) for c in cases}
    floors_bw = load_json(os.path.join(work, "floors_bandwidth.json"))
    floors_mm = {c: load_json(os.path.join(work, f"floors_{c}.json")) for c in cases}
    maps = {c: load_json(os.path.join(work, f"map_{c}.json")) for c in cases}

    def vals(c, side, key):
        out = []
        for r in rows:
            if r["case"] == c and r["side"] == side and "result" in r:
                res = r["result"]
                if key == "create_plus_first_ms":
                    if "session_creation_ms" in res and "first_run_ms" in res:
                        out.append(res["session_creation_ms"] + res["first_run_ms"])
                elif key in res:
                    out.append(res[key])
        return out

    def med(c, side, key):
        v = vals(c, side, key)
        return statistics.median(v) if v else None

    metrics = ["session_creation_ms", "first_run_ms", "create_plus_first_ms", "run_ms_median", "run_ms_p90",
               "peak_rss_mb"]
    summary = {}
    for c in cases:
        summary[c] = {}
        for s, _ in SIDES:
            summary[c][s] = {k: med(c, s, k) for k in metrics}
            summary[c][s]["processes"] = len(vals(c, s, "session_creation_ms"))
            last = [r for r in rows if r["case"] == c and r["side"] == s and r.get("report")]
            summary[c][s]["session"] = summarize_report(last[-1]["report"]) if last else None

    # Floors
    bw = (floors_bw or {}).get("bandwidth", {}).get("gbps_median")
    bw_ws = (floors_bw or {}).get("bandwidth_ws", {}).get("gbps_median")
    floor = {}
    for c in cases:
        an = analysis.get(c) or {}
        f = {"kind": None, "ms": None}
        if c == "decoder_decode" and bw and an.get("weight_bytes_read_per_run"):
            f = {"kind": "bandwidth", "ms": an["weight_bytes_read_per_run"] / (bw * 1e9) * 1e3,
                 "bytes": an["weight_bytes_read_per_run"], "gbps": bw}
            if bw_ws:
                f["ms_llc_working_set"] = an["weight_bytes_read_per_run"] / (bw_ws * 1e9) * 1e3
        elif c == "decoder_prefill" and floors_mm.get(c) and "matmul" in floors_mm[c]:
            mm = floors_mm[c]["matmul"]
            f = {"kind": "compute", "ms": mm["seq_ms_median"], "flops": mm["flops"], "gflops": mm["gflops"]}
        if floors_mm.get(c) and "matmul" in floors_mm[c]:
            f["matmul_only_ms"] = floors_mm[c]["matmul"]["seq_ms_median"]
        if maps.get(c) and "map" in maps[c]:
            f["map_ms"] = maps[c]["map"]["map_ms_median"]
            f["map_and_read_ms"] = maps[c]["map"]["map_and_read_ms_median"]
            f["binary_bytes"] = maps[c]["map"]["bytes"]
        floor[c] = f

    load_end = " ".join(open("/proc/loadavg").read().split()[:3])
    now = datetime.datetime.now()
    out = []
    title = "AotCpu benchmark: epctx vs ONNX Runtime 1.30"
    if meta.get("quick"):
        title += " (--quick smoke test: 1 process, few runs; not a measurement)"
    out.append(f"# {title} ({now:%Y-%m-%d %H:%M})")
    out.append("")
    out.append(f"- command: `{meta.get('cmdline', '')}`")
    out.append(f"- machine: {meta.get('machine', '?')}")
    fb = floors_bw or {}
    if fb:
        out.append(f"- oneDNN {fb.get('onednn_version')} (ISA {fb.get('onednn_isa')}), LLC {fb.get('llc_bytes', 0) / 2**20:.0f} MiB"
                   " as reported by the OS")
    out.append(f"- load average (1/5/15 min) at start: {meta.get('load_start', '?')}, at end: {load_end} "
               f"(nproc {os.cpu_count()}; anything else running skews every number)")
    if meta.get("load_warning"):
        out.append(f"- **warning: {meta['load_warning']}**")
    out.append(f"- epctx commit: {meta.get('commit', '?')}; EP under test: `-e {meta.get('ep', 'aotcpu')}`")
    out.append(f"- threads: {meta.get('threads')} on both sides (ORT: intraOpNumThreads, interOpNumThreads=1, "
               "graphOptimizationLevel all, sequential, on the source model without free-dimension overrides, "
               "which onnxruntime-node does not offer; epctx: `-x N` and `-f` free dims)")
    out.append(f"- each number: median over {meta.get('reps')} fresh processes per side; steady state = each "
               "process's median (p90) over its timed runs")
    for note in meta.get("notes", []):
        out.append(f"- {note}")
    out.append("")

    # Headline
    out.append("## Headline (speed-up = ORT time / epctx time; > 1 means epctx is faster)")
    out.append("")
    out.append("| model | creation: ORT / ctx e0 (target >= 20x) | ORT / ctx e1 | creation + first run: ORT / ctx e0 "
               "(target >= 3x) | ORT / ctx e1 | steady: ORT / JIT (target >= 1x, CNN 1.2x) | ORT / ctx e0 "
               "| epctx steady / floor | ORT steady / floor |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in cases:
        S = summary[c]
        o = S["ort"]
        fl = floor[c]["ms"]
        target = {"decoder_prefill": " (target <= 1.15)", "decoder_decode": " (target <= 1.3)"}.get(c, "")
        best = [S[s]["run_ms_median"] for s in ("jit", "ctx0") if S[s]["run_ms_median"] is not None]
        out.append(
            f"| {LABELS.get(c, c)} | {ratio(o['session_creation_ms'], S['ctx0']['session_creation_ms'])} "
            f"| {ratio(o['session_creation_ms'], S['ctx1']['session_creation_ms'])} "
            f"| {ratio(o['create_plus_first_ms'], S['ctx0']['create_plus_first_ms'])} "
            f"| {ratio(o['create_plus_first_ms'], S['ctx1']['create_plus_first_ms'])} "
            f"| {ratio(o['run_ms_median'], S['jit']['run_ms_median'])} "
            f"| {ratio(o['run_ms_median'], S['ctx0']['run_ms_median'])} "
            f"| {ratio(min(best), fl) if best and fl else 'n/a'}{target if fl else ''} "
            f"| {ratio(o['run_ms_median'], fl)} |")
    out.append("")

    # Per-model tables
    out.append("## Per model (medians; ratio columns = epctx / ORT, < 1 means epctx is faster or smaller)")
    for c in cases:
        S = summary[c]
        an = analysis.get(c) or {}
        wb = an.get("weight_bytes_total")
        out.append("")
        out.append(f"### {LABELS.get(c, c)}")
        out.append("")
        out.append("| metric | " + " | ".join(l for _, l in SIDES) + " | JIT / ORT | e0 / ORT | e1 / ORT |")
        out.append("|---|" + "---:|" * (len(SIDES) + 3))
        names = [("session_creation_ms", "session creation (ms)"), ("first_run_ms", "first run (ms)"),
                 ("create_plus_first_ms", "creation + first run (ms)"), ("run_ms_median", "steady median (ms)"),
                 ("run_ms_p90", "steady p90 (ms)"), ("peak_rss_mb", "peak RSS (MB)")]
        for k, label in names:
            v = [S[s][k] for s, _ in SIDES]
            out.append(f"| {label} | " + " | ".join(fmt(x) for x in v) + " | "
                       + " | ".join(ratio(x, v[0]) for x in v[1:]) + " |")
        if wb:
            v = [S[s]["peak_rss_mb"] for s, _ in SIDES]
            out.append(f"| peak RSS / weight bytes ({wb / 1e6:.1f} MB) | "
                       + " | ".join(ratio(x * 1e6 if x is not None else None, wb) for x in v) + " | | | |")
        fl = floor[c]["ms"]
        if fl:
            v = [S[s]["run_ms_median"] for s, _ in SIDES]
            out.append(f"| steady median / {floor[c]['kind']} floor ({fmt(fl)} ms) | "
                       + " | ".join(ratio(x, fl) for x in v) + " | | | |")
        if floor[c].get("map_ms") is not None:
            out.append(f"| creation floor: map the {mb(floor[c]['binary_bytes'])} binary / map + read "
                       f"all of it (ms) | | | {fmt(floor[c]['map_ms'])} / {fmt(floor[c]['map_and_read_ms'])} | | | | |")
        # what AotCpu took
        notes = []
        for s, label in SIDES[1:]:
            ss = S[s]["session"]
            if ss:
                eps = ",".join(e for e in ss["partition_eps"] if e) or "none"
                line = (f"{label}: {ss['partitions']} partitions ({eps}) holding {ss['partition_nodes']} nodes, "
                        f"{ss['cpu_nodes']} nodes on the CPU EP")
                if ss["from_ep_context"]:
                    line += (f"; {ss['from_ep_context']} from EPContext nodes, context bytes mapped "
                             f"{mb(ss['bytes_mapped'])} / read {mb(ss['bytes_read'])} in "
                             f"{ss['context_load_ms']:.2f} ms")
                notes.append(line)
        for gnr in gens:
            if gnr["case"] == c:
                if gnr.get("written"):
                    notes.append(f"ctx embed {gnr['embed']}: generated in {fmt(gnr.get('session_creation_ms'))} ms "
                                 f"(session creation with ep.context_enable); ctx model "
                                 f"{mb(gnr.get('ctx_bytes', 0))}, binary "
                                 f"{mb(gnr['bin_bytes']) if gnr.get('bin_bytes') else 'none (inside the model)'}")
                else:
                    notes.append(f"ctx embed {gnr['embed']}: no context model: {gnr.get('why', '?')}")
        errs = [r for r in rows if r["case"] == c and "error" in r]
        for r in errs[:6]:
            notes.append(f"error, {r['side']} rep {r['rep']}: `{r['error']}`")
        if notes:
            out.append("")
            out += [f"- {n}" for n in notes]

    # Floors
    out.append("")
    out.append("## Floors measured on this machine (`build/bin/epctx_floors`, bench/floors.cc)")
    out.append("")
    if fb.get("bandwidth"):
        b = fb["bandwidth"]
        out.append(f"- read bandwidth: **{b['gbps_median']:.1f} GB/s** ({fb.get('threads')} threads, streaming sum over "
                   f"{b['buffer_bytes'] / 2**30:.2f} GiB, median of {b['passes']} passes; "
                   f"all: {', '.join(f'{x:.1f}' for x in b['gbps_all'])})")
    if fb.get("bandwidth_ws"):
        b = fb["bandwidth_ws"]
        out.append(f"- read bandwidth over a buffer the size of the decode weights ({b['buffer_bytes'] / 1e6:.1f} MB; "
                   f"may sit in the LLC): {b['gbps_median']:.1f} GB/s (informational; the floor uses the first)")
    for c in cases:
        f = floor[c]
        if f["kind"] == "bandwidth":
            out.append(f"- {LABELS.get(c, c)}: bandwidth floor = {f['bytes'] / 1e6:.2f} MB weight bytes read per token "
                       f"/ {f['gbps']:.1f} GB/s = **{f['ms']:.3f} ms**"
                       + (f" (at the working-set bandwidth: {f['ms_llc_working_set']:.3f} ms)"
                          if f.get("ms_llc_working_set") else "")
                       + (f"; its MatMuls alone with packed weights take {f['matmul_only_ms']:.3f} ms"
                          if f.get("matmul_only_ms") else ""))
        elif f["kind"] == "compute":
            out.append(f"- {LABELS.get(c, c)}: compute floor = {f['flops'] / 1e9:.2f} GFLOP in its MatMuls / "
                       f"{f['gflops']:.1f} GFLOP/s = **{f['ms']:.3f} ms** (every MatMul of the model in order, own "
                       "packed weights, median pass)")
        elif c == "cnn":
            out.append(f"- {LABELS.get(c, c)}: no floor (the CNN target is relative to ORT)")
    for c in cases:
        mm = (floors_mm.get(c) or {}).get("matmul")
        if not mm:
            continue
        out.append("")
        out.append(f"oneDNN matmul at the shapes of {LABELS.get(c, c)} (each shape alone, its weights in cache):")
        out.append("")
        out.append("| B x M x K x N | B operand | count | GFLOP/s | ms each | implementation |")
        out.append("|---|---|---:|---:|---:|---|")
        for s in mm["shapes"]:
            out.append(f"| {s['b']} x {s['m']} x {s['k']} x {s['n']} | {s['weights']} | {s['count']} | "
                       f"{s['gflops']:.1f} | {s['ms']:.3f} | {s['impl']} |")
    out.append("")
    out.append("## Columns")
    out.append("")
    ep = meta.get("ep", "aotcpu")
    out.append(f"- ORT 1.30: `node tests/ort/perf.js` on the source model. AotCpu JIT: `epctx perf -e {ep}` on the "
               f"source model (session creation compiles). ctx embed 0 / 1: `epctx perf -e {ep}` on the `_ctx.onnx` "
               "generated once beforehand with `ep.context_embed_mode` 0 (binary beside it, mapped) or 1 (binary "
               "inside the model).")
    out.append("- session creation: constructing the session (read, partition, compile or load the context). "
               "first run: the first Run after it. creation + first run: both, per process. steady median / p90: over "
               "the timed runs after one warm-up (ORT) or after the first run (epctx). peak RSS: the process's "
               "maximum resident set (ru_maxrss) at the end, loading included; ORT's includes Node.js"
               + (f" ({meta['node_baseline_rss_mb']:.0f} MB for node + onnxruntime-node with no session)"
                  if meta.get("node_baseline_rss_mb") else "") + ".")
    out.append("- floors: decode = weight bytes read per token / read bandwidth; prefill = time of the model's "
               "MatMuls alone in oneDNN with pre-packed weights (total FLOPs / that throughput). A ratio steady / floor "
               "of 1.0 would mean nothing but the floor's work is done.")
    text = "\n".join(out) + "\n"

    full = {"meta": meta, "load_end": load_end, "date": now.isoformat(timespec="seconds"), "summary": summary,
            "floors": {"bandwidth": floors_bw, "matmul": floors_mm, "map": maps, "per_case": floor},
            "analysis": analysis, "generation": gens, "raw": rows}
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(full, f, indent=1)
    print(text, end="")


# -------------------------------------------------------------------------------------------------------------- plot
def save_figure(fig, legend_ax, png, bottom, who):
    """One legend for the figure (from `legend_ax`) along its bottom, then the PNG."""
    handles, labels = legend_ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(png, dpi=110)
    print(f"{who}: wrote {png}")


def bar_groups(ax, cases, summary, sides, colors, key, width, fontsize):
    """One group of bars per case, one bar per side (summary[case][side][key]; missing values leave a gap), each
    annotated with its value."""
    for j, (s, label) in enumerate(sides):
        xs, ys = [], []
        for i, c in enumerate(cases):
            v = summary[c][s].get(key)
            if v:
                xs.append(i + (j - (len(sides) - 1) / 2) * width)
                ys.append(v)
        bars = ax.bar(xs, ys, width, label=label, color=colors[s])
        for b, y in zip(bars, ys):
            ax.annotate(fmt(y), (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom", fontsize=fontsize,
                        rotation=90, xytext=(0, 2), textcoords="offset points")


def plot(a):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(a.json) as f:
        d = json.load(f)
    summary = d["summary"]
    cases = list(summary.keys())
    colors = {"ort": "#7f7f7f", "jit": "#1f77b4", "ctx0": "#2ca02c", "ctx1": "#98df8a"}
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    width = 0.2
    for ax, key, title in ((axes[0], "session_creation_ms", "session creation (ms, log)"),
                           (axes[1], "run_ms_median", "steady-state median (ms, log)")):
        bar_groups(ax, cases, summary, SIDES, colors, key, width, fontsize=7)
        if key == "run_ms_median":
            first = True
            for i, c in enumerate(cases):
                fl = d["floors"]["per_case"].get(c, {}).get("ms")
                if fl:
                    ax.hlines(fl, i - 2.2 * width, i + 2.2 * width, colors="red", linestyles="dashed",
                              label="floor" if first else None)
                    first = False
        ax.set_yscale("log")
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels([LABELS.get(c, c) for c in cases], fontsize=8)
        ax.set_title(title)
        ax.margins(y=0.25)
    meta = d.get("meta", {})
    fig.suptitle(f"epctx AotCpu vs ONNX Runtime 1.30, {meta.get('threads')} threads, median of {meta.get('reps')} "
                 f"processes ({d.get('date', '')[:16]}){' [--quick]' if meta.get('quick') else ''}", fontsize=10)
    save_figure(fig, axes[1], a.png, 0.06, "chart.py")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("analyze")
    p.add_argument("--case", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--inputs", required=True)
    p.add_argument("--ort-dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--matmuls")
    p = sub.add_parser("report")
    p.add_argument("--work", required=True)
    p.add_argument("--md")
    p.add_argument("--json")
    p = sub.add_parser("plot")
    p.add_argument("--json", required=True)
    p.add_argument("--png", required=True)
    a = ap.parse_args()
    {"analyze": analyze, "report": report, "plot": plot}[a.cmd](a)


if __name__ == "__main__":
    main()
