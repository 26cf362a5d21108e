#!/usr/bin/python3
"""The report and chart of bench/run_zoo_bench.sh (see bench/README.md, "Zoo models vs ONNX Runtime 1.30").

  zoo_chart.py report --work DIR [--md OUT.md] [--json OUT.json]
      turns the run's files in DIR (meta.json, models.tsv, raw.jsonl, gen.jsonl) into the markdown report (stdout,
      and OUT.md) and one JSON of every raw number and summary (OUT.json).
  zoo_chart.py plot --json OUT.json --png OUT.png
      per model, bars for ORT / CPU EP / AotCpu JIT / ctx embed 0: session creation, first run, steady-state median
      (log scales) and the steady-state speed-up ORT / epctx with its geometric mean.

Numbers are medians over the processes of a side; speed-ups are ORT / epctx (> 1: epctx is faster or smaller).
"""
import argparse
import collections
import datetime
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chart import bar_groups, fmt, load_json, mb, save_figure, summarize_report  # noqa: E402  (bench/chart.py, run_aotcpu_bench.sh's report)

SIDES = [("ort", "ORT 1.30"), ("cpu", "CPU EP"), ("jit", "AotCpu JIT"), ("ctx0", "AotCpu ctx embed 0")]
EPCTX_SIDES = [s for s, _ in SIDES if s != "ort"]
LABEL = dict(SIDES)
METRICS = [("session_creation_ms", "session creation (ms)"), ("first_run_ms", "first run (ms)"),
           ("create_plus_first_ms", "creation + first run (ms)"), ("run_ms_median", "steady median (ms)"),
           ("run_ms_p90", "steady p90 (ms)"), ("peak_rss_mb", "peak RSS (MB)")]
ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}


def load_rows(path):
    """raw.jsonl; a line that is not valid JSON (a process printed something odd) becomes an error row."""
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                rows.append({"case": "?", "side": "?", "rep": -1, "error": f"unparsable result line ({e}): {line[:200]}"})
    return rows


def read_models(path):
    """models.tsv: name, skip reason ('-' for none), epctx flags ('-' for none)."""
    out = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3:
                out.append({"name": parts[0], "skip": None if parts[1] == "-" else parts[1],
                            "flags": "" if parts[2] == "-" else parts[2]})
    return out


def weight_bytes(model_path):
    """Bytes of the model's initializers and Constant tensors, subgraphs included (None if onnx cannot read it)."""
    try:
        import onnx
        m = onnx.load(model_path, load_external_data=False)
    except Exception:  # noqa: BLE001 - informational
        return None

    def tensor_bytes(t):
        n = 1
        for d in t.dims:
            n *= d
        return n * ITEMSIZE.get(t.data_type, 4)

    def graph_bytes(g):
        total = sum(tensor_bytes(t) for t in g.initializer)
        for n in g.node:
            for a in n.attribute:
                if n.op_type == "Constant" and a.HasField("t"):
                    total += tensor_bytes(a.t)
                if a.HasField("g"):
                    total += graph_bytes(a.g)
                for sg in a.graphs:
                    total += graph_bytes(sg)
        return total

    return graph_bytes(m.graph)


def cpu_facts():
    model, cores, threads = "unknown", set(), 0
    try:
        with open("/proc/cpuinfo") as f:
            phys = core = None
            for line in f:
                k, _, v = line.partition(":")
                k, v = k.strip(), v.strip()
                if k == "model name":
                    model = v
                    threads += 1
                elif k == "physical id":
                    phys = v
                elif k == "core id":
                    core = v
                elif not k and phys is not None and core is not None:
                    cores.add((phys, core))
                    phys = core = None
            if phys is not None and core is not None:
                cores.add((phys, core))
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(next(x for x in f if x.startswith("MemTotal")).split()[1])
            mem = f", {kb / 2**20:.1f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    return (f"{model}, {len(cores) or '?'} cores / {threads or os.cpu_count()} hardware threads "
            f"(nproc {os.cpu_count()}){mem}; ISA: {isa_facts()}")


def isa_facts():
    """The ISA level the run was at (issue 24: benchmarks record it): the CPU's widest vector level and oneDNN's
    limit (ONEDNN_MAX_CPU_ISA, which holds AotCpu's kernels to AVX2 on an AVX-512 machine)."""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    cpu = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "below avx2"
    limit = os.environ.get("ONEDNN_MAX_CPU_ISA")
    return f"CPU {cpu}, oneDNN " + (f"held to {limit} (ONEDNN_MAX_CPU_ISA)" if limit else "unrestricted")


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def speedup(o, e):
    return o / e if (o is not None and e) else None


def sx(x):
    if x is None:
        return "n/a"
    return f"{x:.2f}x" if x >= 0.1 else f"{x:.2g}x"


def side_session(rows, c, s):
    last = [r for r in rows if r.get("case") == c and r.get("side") == s and r.get("report")]
    if not last:
        return None
    rep = last[-1]["report"]
    ss = summarize_report(rep)
    left = rep.get("left_on_cpu")
    ss["left_on_cpu_all_graphs"] = len(left) if isinstance(left, list) else None
    ss["left_on_cpu_ops"] = dict(collections.Counter(x.get("op", "?") for x in left).most_common()) if left else {}
    return ss


def summarize(rows, cases):
    def vals(c, s, key):
        out = []
        for r in rows:
            if r.get("case") == c and r.get("side") == s and isinstance(r.get("result"), dict):
                res = r["result"]
                if key == "create_plus_first_ms":
                    if "session_creation_ms" in res and "first_run_ms" in res:
                        out.append(res["session_creation_ms"] + res["first_run_ms"])
                elif key in res:
                    out.append(res[key])
        return out

    summary = {}
    for c in cases:
        summary[c] = {}
        for s, _ in SIDES:
            d = {}
            for k, _ in METRICS:
                v = vals(c, s, k)
                d[k] = statistics.median(v) if v else None
                d[k + "_all"] = v
            errs = [r["error"] for r in rows if r.get("case") == c and r.get("side") == s and "error" in r]
            d["processes"] = len(vals(c, s, "session_creation_ms"))
            d["errors"] = len(errs)
            d["first_error"] = errs[0] if errs else None
            d["session"] = side_session(rows, c, s)
            summary[c][s] = d
    return summary


def report(a):
    work = a.work
    meta = load_json(os.path.join(work, "meta.json")) or {}
    models = read_models(os.path.join(work, "models.tsv"))
    rows = load_rows(os.path.join(work, "raw.jsonl"))
    gens = load_rows(os.path.join(work, "gen.jsonl"))
    cases = [m["name"] for m in models if not m["skip"]]
    skipped = [m for m in models if m["skip"]]
    zoo = meta.get("zoo", "")
    kinds = {}
    try:
        with open(meta.get("manifest", "")) as f:
            kinds = {m["name"]: m.get("kind", "") for m in json.load(f)["models"]}
    except (OSError, ValueError, KeyError):
        pass
    weights = {c: weight_bytes(os.path.join(zoo, "cases", c, "model.onnx")) for c in cases}
    summary = summarize(rows, cases)

    # Speed-ups ORT / side per model, and their geometric means.
    ratios = {c: {s: {k: speedup(summary[c]["ort"][k], summary[c][s][k]) for k, _ in METRICS}
                  for s in EPCTX_SIDES} for c in cases}
    geo = {s: {k: {"value": geomean([ratios[c][s][k] for c in cases]),
                   "models": sum(1 for c in cases if ratios[c][s][k])} for k, _ in METRICS} for s in EPCTX_SIDES}

    nproc = meta.get("nproc") or os.cpu_count()
    load_warn = []
    for when, key in (("start", "load_start"), ("end", "load_end")):
        try:
            l1 = float(str(meta.get(key, "")).split()[0])
        except (ValueError, IndexError):
            continue
        if l1 > 0.25 * nproc:
            load_warn.append(f"1-minute load average {l1} at the {when} on {nproc} cores")
    now = datetime.datetime.now()
    out = []
    title = "Zoo benchmark: epctx vs ONNX Runtime 1.30"
    if meta.get("quick"):
        title += " (--quick smoke test: 1 process, few runs; not a measurement)"
    out.append(f"# {title} ({now:%Y-%m-%d %H:%M})")
    out.append("")
    out.append(f"- command: `{meta.get('cmdline', '')}`")
    out.append(f"- machine: {cpu_facts()}")
    ort_isas = sorted({r["result"].get("ort_isa") for r in rows
                       if r.get("side") == "ort" and isinstance(r.get("result"), dict) and r["result"].get("ort_isa")})
    out.append("- ORT's kernels (MLAS): " + (", ".join(ort_isas) if ort_isas else "not recorded") +
               " (`tests/ort/load_ort.js`: at ONEDNN_MAX_CPU_ISA=AVX2 ORT is held to AVX2 as well)")
    out.append(f"- load average (1/5/15 min) at start: {meta.get('load_start', '?')}, at end: "
               f"{meta.get('load_end', '?')} (anything else running skews every number)")
    if load_warn:
        out.append(f"- **warning: the machine was not idle ({'; '.join(load_warn)}): these numbers are not "
                   "trustworthy**")
    out.append(f"- epctx commit: {meta.get('commit', '?')}; binary `{meta.get('epctx', '?')}`; "
               f"cases `{zoo}/cases/NAME/test_data_set_0`; Node.js {meta.get('node', '?')}")
    out.append(f"- threads: {meta.get('threads')} on every side (ORT: `tests/ort/perf.js`, intraOpNumThreads, "
               "interOpNumThreads=1, graphOptimizationLevel all, sequential, on the source model without "
               "free-dimension overrides, which onnxruntime-node does not offer; epctx: `epctx perf -x N` with the "
               "zoo.json pins `-f` / `--input-shape`)")
    if meta.get("thread_env"):
        out.append("- threading / epctx environment: "
                   + ", ".join(f"`{k}={v}`" for k, v in sorted(meta["thread_env"].items())))
    out.append(f"- each number: median over {meta.get('reps')} fresh processes per side (the sides alternating "
               f"within each repetition); steady = each process's median / p90 over {meta.get('runs')} timed runs")
    out.append("")

    # Headline
    out.append("## Speed-ups (ORT time / epctx time: > 1 means epctx is faster)")
    out.append("")
    out.append("| model | weights | steady: CPU EP (target >= 0.8x) | AotCpu JIT | ctx e0 (target >= 1.0x, CNN 1.2x) "
               "| creation: ctx e0 (target >= 10x above 1 MB) | creation + first run: ctx e0 (target >= 3x) "
               "| ctx e0 first run / steady (target <= 1.5) | AotCpu partitions: JIT / ctx | nodes on the CPU EP "
               "(JIT): main graph / all graphs |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in cases:
        S, R = summary[c], ratios[c]
        j, x = S["jit"]["session"], S["ctx0"]["session"]
        fr = (S["ctx0"]["first_run_ms"] / S["ctx0"]["run_ms_median"]
              if S["ctx0"]["first_run_ms"] is not None and S["ctx0"]["run_ms_median"] else None)
        out.append(
            f"| {c} | {mb(weights[c]) if weights[c] is not None else '?'} "
            f"| {cell(S, R, 'cpu', 'run_ms_median')} | {cell(S, R, 'jit', 'run_ms_median')} "
            f"| {cell(S, R, 'ctx0', 'run_ms_median')} | {cell(S, R, 'ctx0', 'session_creation_ms')} "
            f"| {cell(S, R, 'ctx0', 'create_plus_first_ms')} | {fmt(fr) if fr is not None else 'n/a'} "
            f"| {j['partitions'] if j else '?'} / {x['partitions'] if x else '?'} "
            f"| {j['cpu_nodes'] if j else '?'} / {j['left_on_cpu_all_graphs'] if j else '?'} |")
    g = geo
    out.append(f"| **geometric mean** | | **{sx(g['cpu']['run_ms_median']['value'])}** "
               f"({g['cpu']['run_ms_median']['models']}) | **{sx(g['jit']['run_ms_median']['value'])}** "
               f"({g['jit']['run_ms_median']['models']}) | **{sx(g['ctx0']['run_ms_median']['value'])}** "
               f"({g['ctx0']['run_ms_median']['models']}; target >= 1.3x) "
               f"| {sx(g['ctx0']['session_creation_ms']['value'])} | {sx(g['ctx0']['create_plus_first_ms']['value'])} "
               "| | | |")
    out.append("")
    out.append("(n) after a geometric mean: how many models it covers (those with a number on both sides). "
               "`error` / `n/a`: see the per-model table.")
    out.append("")

    # Geometric means, every metric
    out.append("## Geometric means of ORT / epctx over the models")
    out.append("")
    out.append("| metric | " + " | ".join(LABEL[s] for s in EPCTX_SIDES) + " |")
    out.append("|---|" + "---:|" * len(EPCTX_SIDES))
    for k, label in METRICS:
        out.append(f"| {label.replace(' (ms)', '').replace(' (MB)', '')} | "
                   + " | ".join(f"{sx(geo[s][k]['value'])} ({geo[s][k]['models']})" for s in EPCTX_SIDES) + " |")
    out.append("")
    out.append("Peak RSS on the ORT side includes Node.js"
               + (f" ({meta['node_baseline_rss_mb']:.0f} MB for node + onnxruntime-node with no session)"
                  if meta.get("node_baseline_rss_mb") else "") + ", so its ratio flatters epctx.")
    out.append("")

    # Targets missed
    misses = []
    for c in cases:
        R = ratios[c]
        cnn = "CNN" in kinds.get(c, "")
        need = 1.2 if cnn else 1.0
        v = R["ctx0"]["run_ms_median"]
        if v is not None and v < need:
            misses.append(f"{c}: ctx e0 steady {v:.2f}x < {need}x{' (CNN)' if cnn else ''}")
        v = R["cpu"]["run_ms_median"]
        if v is not None and v < 0.8:
            misses.append(f"{c}: CPU EP steady {v:.2f}x < 0.8x")
        v = R["ctx0"]["session_creation_ms"]
        if v is not None and (weights[c] or 0) > 1e6 and v < 10:
            misses.append(f"{c}: ctx e0 session creation {v:.2f}x < 10x ({mb(weights[c])} of weights)")
        v = R["ctx0"]["create_plus_first_ms"]
        if v is not None and v < 3:
            misses.append(f"{c}: ctx e0 creation + first run {v:.2f}x < 3x")
        S = summary[c]["ctx0"]
        if S["first_run_ms"] is not None and S["run_ms_median"] and S["first_run_ms"] / S["run_ms_median"] > 1.5:
            misses.append(f"{c}: ctx e0 first run {S['first_run_ms'] / S['run_ms_median']:.1f}x its steady state "
                          "(> 1.5; medians over processes, the target asks for the p90 over 11)")
    gv = geo["ctx0"]["run_ms_median"]["value"]
    if gv is not None and gv < 1.3:
        misses.append(f"geometric mean of ctx e0 steady {gv:.2f}x < 1.3x")
    for c in cases:
        for s in EPCTX_SIDES + ["ort"]:
            if summary[c][s]["processes"] == 0:
                misses.append(f"{c}: {LABEL[s]} has no number (error)")
    out.append("## Against the issue-14 targets")
    out.append("")
    out += [f"- {m}" for m in misses] if misses else ["- every target met in this run"]
    out.append("")

    # Per model
    out.append("## Per model (medians over processes; speed-up = ORT / this side)")
    out.append("")
    out.append("| model | side | processes | session creation (ms) | first run (ms) | creation + first run (ms) "
               "| steady median (ms) | steady p90 (ms) | peak RSS (MB) | steady speed-up | creation speed-up "
               "| AotCpu partitions (nodes) | nodes on the CPU EP: main graph / all graphs | notes |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for c in cases:
        for s, label in SIDES:
            d = summary[c][s]
            reps = meta.get("reps")
            notes = []
            if d["errors"]:
                err = d["first_error"].replace("|", "\\|").replace("`", "'")
                notes.append(f"**error** ({d['errors']} of {d['errors'] + d['processes']} processes): `{err}`")
            ss = d["session"]
            part = cpu = ""
            if ss and s != "cpu":
                part = f"{ss['partitions']} ({ss['partition_nodes']})"
            if ss:
                cpu = f"{ss['cpu_nodes']} / {ss['left_on_cpu_all_graphs'] if s != 'cpu' else '-'}"
            if ss and s == "ctx0" and ss["from_ep_context"]:
                notes.append(f"partitions from EPContext nodes: {ss['from_ep_context']}; binary mapped "
                             f"{mb(ss['bytes_mapped'])} / read {mb(ss['bytes_read'])} in {ss['context_load_ms']:.2f} ms")
            if d["processes"] == 0:
                out.append(f"| {c} | {label} | 0 of {reps} | error | | | | | | | | {part} | {cpu} | "
                           f"{'; '.join(notes)} |")
                continue
            R = ratios[c].get(s, {})
            out.append(f"| {c} | {label} | {d['processes']} | {fmt(d['session_creation_ms'])} "
                       f"| {fmt(d['first_run_ms'])} | {fmt(d['create_plus_first_ms'])} | {fmt(d['run_ms_median'])} "
                       f"| {fmt(d['run_ms_p90'])} | {fmt(d['peak_rss_mb'])} "
                       f"| {sx(R.get('run_ms_median')) if s != 'ort' else ''} "
                       f"| {sx(R.get('session_creation_ms')) if s != 'ort' else ''} | {part} | {cpu} "
                       f"| {'; '.join(notes)} |")
    out.append("")

    # Skipped models, context models, nodes left on the CPU EP
    if skipped:
        out.append("## Skipped (zoo.json `skip`)")
        out.append("")
        out += [f"- {m['name']}: {m['skip']}" for m in skipped]
        out.append("")
    out.append("## Context models (`epctx compile -e aotcpu`, embed 0, made once per model)")
    out.append("")
    flags = {m["name"]: m["flags"] for m in models}
    for gnr in gens:
        c = gnr.get("case")
        if gnr.get("written"):
            out.append(f"- {c} (`{flags.get(c) or 'no pins'}`): {fmt(gnr.get('compile_wall_ms'))} ms wall for the "
                       f"compile process, `_ctx.onnx` {mb(gnr.get('ctx_bytes', 0))}, binary "
                       f"{mb(gnr['bin_bytes']) if gnr.get('bin_bytes') else 'none'}"
                       + (f", compile warns of {gnr['left_on_cpu']} nodes left on the CPU EP (all graphs)"
                          if gnr.get("left_on_cpu") else ""))
        else:
            out.append(f"- {c}: **no context model**: `{gnr.get('why', '?')}`")
    out.append("")
    out.append("## Nodes AotCpu leaves on the CPU EP (JIT session report, all graphs, by op)")
    out.append("")
    for c in cases:
        ss = summary[c]["jit"]["session"]
        if ss is None:
            out.append(f"- {c}: no session report")
        elif ss["left_on_cpu_ops"]:
            out.append(f"- {c}: " + ", ".join(f"{op} {n}" for op, n in ss["left_on_cpu_ops"].items()))
        else:
            out.append(f"- {c}: none")
    out.append("")
    out.append("## Columns")
    out.append("")
    out.append("- ORT 1.30: `node tests/ort/perf.js MODEL --threads N --runs M --inputs DIR` on the source model. "
               "CPU EP: `epctx perf PINS -x N -r M --inputs DIR --json -v MODEL`. AotCpu JIT: the same with "
               "`-e aotcpu` (session creation compiles). ctx embed 0: the same on the `_ctx.onnx` with "
               "`-C \"session.disable_model_compile|1\"` (a partition missing from it fails instead of compiling).")
    out.append("- session creation: constructing the session (read, optimize, partition, compile or load the "
               "context). first run: the first Run after it. steady median / p90: over the timed runs after one "
               "warm-up (ORT) or after the first run (epctx). peak RSS: ru_maxrss at the end.")
    out.append("- AotCpu partitions (nodes): partitions AotCpu runs and the nodes they hold (a ctx partition is one "
               "EPContext node). Nodes on the CPU EP: the session report's `cpu_nodes` (main graph) / "
               "`left_on_cpu` entries (every graph, If bodies included).")
    text = "\n".join(out) + "\n"

    full = {"meta": meta, "date": now.isoformat(timespec="seconds"), "machine": cpu_facts(), "models": models,
            "weights_bytes": weights, "summary": summary, "speedups": ratios, "geomean": geo,
            "targets_missed": misses, "generation": gens, "raw": rows}
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(full, f, indent=1)
    print(text, end="")


def cell(S, R, side, key):
    """A speed-up cell: the ratio, or why there is none."""
    if S[side]["processes"] == 0:
        return "error"
    if S["ort"]["processes"] == 0:
        return "n/a (ORT error)"
    return sx(R[side][key])


def plot(a):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(a.json) as f:
        d = json.load(f)
    summary = d["summary"]
    cases = list(summary.keys())
    colors = {"ort": "#7f7f7f", "cpu": "#ff7f0e", "jit": "#1f77b4", "ctx0": "#2ca02c"}
    fig, axes = plt.subplots(2, 2, figsize=(max(12, 1.6 * len(cases) + 4), 9))
    width = 0.2
    panels = [(axes[0][0], "session_creation_ms", "session creation (ms, log)"),
              (axes[0][1], "first_run_ms", "first run (ms, log)"),
              (axes[1][0], "run_ms_median", "steady-state median (ms, log)")]
    for ax, key, title in panels:
        bar_groups(ax, cases, summary, SIDES, colors, key, width, fontsize=6)
        ax.set_yscale("log")
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(cases, fontsize=7, rotation=20, ha="right")
        ax.set_title(title, fontsize=10)
        ax.margins(y=0.3)
    # Steady speed-up ORT / side, with the geometric mean as the last group.
    ax = axes[1][1]
    groups = cases + ["geo. mean"]
    for j, s in enumerate(EPCTX_SIDES):
        xs, ys = [], []
        for i, c in enumerate(groups):
            v = (d["geomean"][s]["run_ms_median"]["value"] if c == "geo. mean"
                 else d["speedups"][c][s]["run_ms_median"])
            if v:
                xs.append(i + (j - 1) * width)
                ys.append(v)
        bars = ax.bar(xs, ys, width, label=LABEL[s], color=colors[s])
        for b, y in zip(bars, ys):
            ax.annotate(f"{y:.2f}", (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom", fontsize=6,
                        rotation=90, xytext=(0, 2), textcoords="offset points")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=7, rotation=20, ha="right")
    ax.set_title("steady-state speed-up ORT / epctx (log; > 1: epctx faster)", fontsize=10)
    ax.margins(y=0.3)
    meta = d.get("meta", {})
    fig.suptitle(f"epctx vs ONNX Runtime 1.30 on the zoo, {meta.get('threads')} threads, median of "
                 f"{meta.get('reps')} processes x {meta.get('runs')} runs ({d.get('date', '')[:16]})"
                 f"{' [--quick: not a measurement]' if meta.get('quick') else ''}", fontsize=11)
    save_figure(fig, axes[0][0], a.png, 0.04, "zoo_chart.py")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("report")
    p.add_argument("--work", required=True)
    p.add_argument("--md")
    p.add_argument("--json")
    p = sub.add_parser("plot")
    p.add_argument("--json", required=True)
    p.add_argument("--png", required=True)
    a = ap.parse_args()
    {"report": report, "plot": plot}[a.cmd](a)


if __name__ == "__main__":
    main()
