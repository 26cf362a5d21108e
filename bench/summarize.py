#!/usr/bin/python3
"""Turns bench/run_cpu_bench.sh's raw JSON lines into a markdown report (stdout, and --out FILE)."""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess

LABELS = {
    "decoder_prefill": "decoder prefill (seq 128)",
    "decoder_decode": "decoder decode (past 127)",
    "cnn": "CNN 224x224",
}
METRICS = [
    ("session_creation_ms", "session creation (ms)"),
    ("first_run_ms", "first run (ms)"),
    ("run_ms_median", "steady-state median (ms)"),
    ("run_ms_p90", "steady-state p90 (ms)"),
    ("peak_rss_mb", "peak RSS (MB)"),
]


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001 - informational only
        return ""


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def fmt(x):
    if x is None:
        return "n/a"
    return f"{x:.1f}" if x >= 100 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--cmdline", default="")
    ap.add_argument("--threads", default="")
    ap.add_argument("--reps", default="")
    ap.add_argument("--note", default="")
    ap.add_argument("--load-start", default="")
    ap.add_argument("--out")
    a = ap.parse_args()

    rows = [json.loads(line) for line in open(a.raw) if line.strip()]
    cases = []
    for r in rows:
        if r["case"] not in cases:
            cases.append(r["case"])

    def values(case, side, metric):
        return [r["result"][metric] for r in rows
                if r["case"] == case and r["side"] == side and "result" in r and metric in r["result"]]

    def med(case, side, metric):
        v = values(case, side, metric)
        return statistics.median(v) if v else None

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    commit = sh(f"git -C '{root}' rev-parse --short HEAD")
    dirty = " (with uncommitted changes)" if sh(f"git -C '{root}' status --porcelain --untracked-files=no") else ""
    mem = sh("free -g | awk '/^Mem:/{print $2\" GiB\"}'")
    now = datetime.datetime.now()
    load_end = " ".join(open("/proc/loadavg").read().split()[:3])

    out = []
    out.append(f"# CPU EP benchmark: epctx vs ONNX Runtime 1.30 ({now:%Y-%m-%d %H:%M})")
    out.append("")
    out.append(f"- command: `{a.cmdline}`")
    out.append(f"- machine: nproc {os.cpu_count()}, {cpu_model()}, {mem}")
    out.append(f"- load average (1/5/15 min) at start: {a.load_start or '?'}, at end: {load_end} "
               f"(on {os.cpu_count()} cores; other work on the machine skews the numbers)")
    out.append(f"- epctx commit: {commit}{dirty}")
    out.append(f"- threads: {a.threads} (ORT: intraOpNumThreads={a.threads}, interOpNumThreads=1, "
               f"graphOptimizationLevel all, sequential; epctx: `epctx perf -x {a.threads}`)")
    out.append(f"- each number: median over {a.reps} fresh processes; steady-state numbers are each process's "
               "median/p90 over its timed runs")
    if a.note:
        out.append(f"- epctx side missing: {a.note}")
    out.append("")
    out.append("| model | metric | ORT 1.30 | epctx CPU | epctx / ORT |")
    out.append("|---|---|---:|---:|---:|")
    for c in cases:
        for key, label in METRICS:
            o = med(c, "ort", key)
            e = med(c, "epctx", key)
            ratio = f"{e / o:.2f}x" if (o and e is not None) else "n/a"
            out.append(f"| {LABELS.get(c, c)} | {label} | {fmt(o)} | {fmt(e)} | {ratio} |")
    out.append("")
    out.append("peak RSS of the ORT side includes the Node.js runtime (about 40-50 MB).")
    errors = [r for r in rows if "error" in r]
    if errors:
        out.append("")
        out.append("epctx errors:")
        for r in errors[:10]:
            out.append(f"- {r['case']} rep {r['rep']}: `{r['error']}`")
    out.append("")
    out.append("<details><summary>raw per-process results</summary>")
    out.append("")
    out.append("```")
    for r in rows:
        out.append(json.dumps(r, separators=(",", ":")))
    out.append("```")
    out.append("</details>")
    text = "\n".join(out) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
        print(f"\nsaved to {os.path.relpath(a.out, root)}")


if __name__ == "__main__":
    main()
