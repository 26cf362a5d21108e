#!/usr/bin/env bash
# Zoo benchmark: every model of the real-model zoo (tests/zoo/zoo.json, docs/zoo.md) beside onnxruntime-node 1.30,
# same thread count, on four sides: ORT, the CPU EP, AotCpu compiled just in time, AotCpu from `_ctx.onnx` (embed 0).
# Measures, never asserts. See bench/README.md ("Zoo models vs ONNX Runtime 1.30").
#
#   bench/run_zoo_bench.sh [--quick] [--threads N] [--reps R] [--runs M] [--only a,b] [--build DIR] [--epctx PATH]
#                          [--out-dir DIR] [--suffix S] [--no-save] [--timeout SEC]
#
# Per model (pins "-f name:value" and "--input-shape name:1x512" from zoo.json; models with "skip" are listed as
# skipped with the reason): the `_ctx.onnx` made once with `epctx compile -e aotcpu` (embed 0, binary beside it); then
# R fresh processes per side (default 5), the sides alternating within each repetition: ORT
# (`node tests/ort/perf.js`), CPU EP, AotCpu JIT, ctx embed 0 (`epctx perf --json -v`, the last with
# `session.disable_model_compile|1`, so a partition missing from the ctx model fails instead of compiling again).
# Each process: session creation, first run, M timed runs (median, p90), peak RSS. Numbers: medians over the
# processes; speed-ups ORT / epctx per model and their geometric mean per side.
# Inputs: DIR/zoo/cases/NAME/test_data_set_0 of the build (ctest -R zoo_cases; made here when missing).
# Output: bench/results/zoo_<date>[-S].{md,json,png}. --quick: 1 process, 3 runs, output under /tmp/epctx-zoo-quick
# (a smoke test, not a measurement). --build DIR: the build (default $EPCTX_BUILD_DIR, else build/); --epctx PATH:
# another epctx binary. --timeout: seconds per process (default 600) before it counts as an error.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY=/usr/bin/python3
CMDLINE="${EPCTX_BUILD_DIR:+EPCTX_BUILD_DIR=$EPCTX_BUILD_DIR }bench/run_zoo_bench.sh"
for a in "$@"; do
  if [[ "$a" =~ ^[A-Za-z0-9_./,:=+-]+$ ]]; then CMDLINE+=" $a"; else CMDLINE+=" $(printf '%q' "$a")"; fi
done

THREADS=2
REPS=""
RUNS=""
QUICK=0
BUILD="${EPCTX_BUILD_DIR:-build}"
EPCTX=""
OUTDIR=""
SUFFIX=""
SAVE=1
ONLY=""
TIMEOUT=600
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --threads) THREADS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    --epctx) EPCTX="$2"; shift 2 ;;
    --out-dir) OUTDIR="$2"; shift 2 ;;
    --suffix) SUFFIX="$2"; shift 2 ;;
    --no-save) SAVE=0; shift ;;
    --timeout) TIMEOUT="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/!p}' "$0"; exit 0 ;;
    *) echo "run_zoo_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
for v in THREADS TIMEOUT ${REPS:+REPS} ${RUNS:+RUNS}; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "run_zoo_bench: --${v,,} must be a positive integer, got '${!v}'" >&2; exit 2; }
done
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
EPCTX="${EPCTX:-$BUILD/bin/epctx}"
if [ "$QUICK" = 1 ]; then
  REPS="${REPS:-1}"
  RUNS="${RUNS:-3}"
  OUTDIR="${OUTDIR:-${TMPDIR:-/tmp}/epctx-zoo-quick}"
else
  REPS="${REPS:-5}"
  RUNS="${RUNS:-20}"
  OUTDIR="${OUTDIR:-$ROOT/bench/results}"
fi
say() { echo "run_zoo_bench: $*" >&2; }
load1() { cut -d" " -f1 /proc/loadavg; }
busy() { awk -v l="$1" -v n="$(nproc)" 'BEGIN { exit !(l > 0.25 * n) }'; }

LOAD_START="$(cut -d" " -f1-3 /proc/loadavg)"
if busy "$(load1)"; then
  say "WARNING: 1-minute load average $(load1) at start on $(nproc) cores: the machine is not idle, numbers are not trustworthy"
fi

[ -x "$EPCTX" ] || { say "$EPCTX is not built (bash scripts/build.sh, or --build DIR / --epctx PATH)"; exit 1; }
MANIFEST="$ROOT/tests/zoo/zoo.json"
ZOO="$BUILD/zoo"

# onnxruntime-node 1.30.0 (as bench/run_cpu_bench.sh)
ORT_DIR="$ROOT/tests/ort"
if ! (cd "$ORT_DIR" && node -e "process.exit(require('onnxruntime-node').env.versions.node === '1.30.0' ? 0 : 1)") 2>/dev/null; then
  say "installing onnxruntime-node 1.30.0"
  (cd "$ORT_DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
fi

# matplotlib from Debian for the chart
if [ "$SAVE" = 1 ] && ! "$PY" -c 'import matplotlib' 2>/dev/null; then
  say "installing python3-matplotlib (apt-get)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get install -y -q python3-matplotlib >&2 || say "could not install python3-matplotlib: no chart"
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# The manifest, one model a line: name <TAB> skip reason (- for none) <TAB> epctx flags (-f / --input-shape; - for none).
"$PY" - "$MANIFEST" "$ONLY" >"$WORK/models.tsv" <<'PY'
import json, sys
models = json.load(open(sys.argv[1]))["models"]
names = [m["name"] for m in models]
only = [x for x in sys.argv[2].split(",") if x] if sys.argv[2] else names
unknown = [x for x in only if x not in names]
if unknown:
    sys.exit(f"run_zoo_bench: --only: no zoo model named {', '.join(unknown)} (zoo.json has {', '.join(names)})")
for m in models:
    if m["name"] not in only:
        continue
    flags = [x for p in m.get("pins", []) for x in ("-f", p)]
    flags += [x for s in m.get("input_shapes", []) for x in ("--input-shape", s)]
    skip = " ".join(m.get("skip", "").split())
    print("\t".join([m["name"], skip or "-", " ".join(flags) or "-"]))
PY

# Zoo cases: made when missing (as `ctest -R zoo_cases` does); a model still without a case is an error row.
NEED=()
while IFS=$'\t' read -r -u 3 name skip _; do
  if [ "$skip" = - ] && [ ! -f "$ZOO/cases/$name/test_data_set_0/input_0.pb" ]; then NEED+=("$name"); fi
done 3<"$WORK/models.tsv"
if [ ${#NEED[@]} -gt 0 ]; then
  say "making the zoo cases of ${NEED[*]} in $ZOO (scripts/fetch_zoo.sh, tests/zoo/make_zoo_cases.py)"
  if ! { bash "$ROOT/scripts/fetch_zoo.sh" "$ZOO" >&2 \
         && "$PY" "$ROOT/tests/zoo/make_zoo_cases.py" --zoo "$ZOO" --only "$(IFS=,; echo "${NEED[*]}")" >&2; }; then
    say "could not make every zoo case; those models are reported as errors"
  fi
fi

# json_str TEXT: TEXT as the inside of a JSON string (no control characters, at most 300 bytes).
json_str() { printf '%s' "$1" | head -c 300 | tr -d '\000-\037' | sed 's/\\/\\\\/g; s/"/\\"/g'; }
# first_error FILE [RC]: the first line of a failed process's stderr that is not a warning (else its first line).
first_error() {
  local line
  line=$(grep -v -i -m1 -E '^[^:]*: warning|^\s*$' "$1" 2>/dev/null || true)
  [ -n "$line" ] || line=$(grep -v -m1 -E '^\s*$' "$1" 2>/dev/null || true)
  if [ "${2:-}" = 124 ] || [ "${2:-}" = 137 ]; then line="timed out after $TIMEOUT s${line:+; stderr: $line}"; fi
  [ -n "$line" ] || line="exit code ${2:-?}, nothing on stderr"
  json_str "$line"
}
# left_on_cpu FILE: the count of `epctx compile: warning: nodes left on the CPU EP: N` (0 without that warning).
left_on_cpu() { sed -n 's/.*nodes left on the CPU EP: \([0-9]*\).*/\1/p' "$1" | head -n 1 | grep . || echo 0; }
epctx_line() { grep '^{' "$1" | tail -n 1; }
epctx_report() { sed -n 's/^session report: //p' "$1" | tail -n 1; }
raw() { echo "$1" >>"$WORK/raw.jsonl"; }

# 1. Context models (embed 0), once per model.
while IFS=$'\t' read -r -u 3 name skip flags; do
  [ "$skip" = - ] || { say "$name: skipped: $skip"; continue; }
  F=(); [ "$flags" = - ] || read -r -a F <<<"$flags"
  case_dir="$ZOO/cases/$name"
  dir="$WORK/ctx/$name"
  mkdir -p "$dir"
  say "$name: epctx compile -e aotcpu ${flags} (embed 0)"
  t0=$(date +%s.%N)
  rc=0
  timeout --kill-after=10 "$TIMEOUT" "$EPCTX" compile -e aotcpu ${F[@]+"${F[@]}"} "$case_dir/model.onnx" \
    -o "$dir/model_ctx.onnx" >"$WORK/gen.out" 2>"$WORK/gen.err" </dev/null || rc=$?
  t1=$(date +%s.%N)
  if [ "$rc" = 0 ] && [ -f "$dir/model_ctx.onnx" ]; then
    bin=$(find "$dir" -maxdepth 1 -name '*.bin' | head -n 1)
    bin_bytes=$([ -n "$bin" ] && stat -c %s "$bin" || echo 0)
    echo "{\"case\":\"$name\",\"written\":true,\"compile_wall_ms\":$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", (b-a)*1e3}'),\"ctx_bytes\":$(stat -c %s "$dir/model_ctx.onnx"),\"bin_bytes\":$bin_bytes,\"left_on_cpu\":$(left_on_cpu "$WORK/gen.err")}" >>"$WORK/gen.jsonl"
  else
    why=$(first_error "$WORK/gen.err" "$rc")
    echo "{\"case\":\"$name\",\"written\":false,\"why\":\"$why\"}" >>"$WORK/gen.jsonl"
    say "$name: no _ctx.onnx: $why"
  fi
done 3<"$WORK/models.tsv"

# 2. Timed processes: per model, REPS repetitions of ORT, CPU EP, AotCpu JIT, ctx embed 0.
NODE_RSS=$(cd "$ORT_DIR" && node -e "require('onnxruntime-node'); console.log((process.resourceUsage().maxRSS / 1024).toFixed(1))")
run_ort() {  # name rep
  local name="$1" r="$2" rc=0 line
  (cd "$ORT_DIR" && timeout --kill-after=10 "$TIMEOUT" node perf.js "$ZOO/cases/$name/model.onnx" \
     --threads "$THREADS" --runs "$RUNS" --inputs "$ZOO/cases/$name/test_data_set_0") \
     >"$WORK/p.out" 2>"$WORK/p.err" </dev/null || rc=$?
  line=$(grep '^{' "$WORK/p.out" | tail -n 1 || true)
  if [ "$rc" = 0 ] && [ -n "$line" ]; then
    raw "{\"case\":\"$name\",\"side\":\"ort\",\"rep\":$r,\"result\":$line}"
  else
    raw "{\"case\":\"$name\",\"side\":\"ort\",\"rep\":$r,\"error\":\"$(first_error "$WORK/p.err" "$rc")\"}"
  fi
}
run_epctx() {  # name side rep model [extra epctx flags...]
  local name="$1" side="$2" r="$3" m="$4" rc=0 line report
  shift 4
  timeout --kill-after=10 "$TIMEOUT" "$EPCTX" perf "$@" ${F[@]+"${F[@]}"} -x "$THREADS" -r "$RUNS" \
    --inputs "$ZOO/cases/$name/test_data_set_0" --json -v "$m" >"$WORK/p.out" 2>"$WORK/p.err" </dev/null || rc=$?
  line=$(epctx_line "$WORK/p.out" || true)
  if [ "$rc" = 0 ] && [ -n "$line" ]; then
    report=$(epctx_report "$WORK/p.out")
    raw "{\"case\":\"$name\",\"side\":\"$side\",\"rep\":$r,\"result\":$line,\"report\":${report:-null}}"
  else
    raw "{\"case\":\"$name\",\"side\":\"$side\",\"rep\":$r,\"error\":\"$(first_error "$WORK/p.err" "$rc")\"}"
  fi
}
while IFS=$'\t' read -r -u 3 name skip flags; do
  [ "$skip" = - ] || continue
  F=(); [ "$flags" = - ] || read -r -a F <<<"$flags"
  model="$ZOO/cases/$name/model.onnx"
  ctx="$WORK/ctx/$name/model_ctx.onnx"
  say "$name: $REPS processes x $RUNS runs per side, $THREADS threads (load $(load1))"
  for ((r = 0; r < REPS; r++)); do
    run_ort "$name" "$r"
    run_epctx "$name" cpu "$r" "$model"
    run_epctx "$name" jit "$r" "$model" -e aotcpu
    if [ -f "$ctx" ]; then
      run_epctx "$name" ctx0 "$r" "$ctx" -e aotcpu -C "session.disable_model_compile|1"
    else
      raw "{\"case\":\"$name\",\"side\":\"ctx0\",\"rep\":$r,\"error\":\"no context model (epctx compile failed, see above)\"}"
    fi
  done
done 3<"$WORK/models.tsv"

# 3. Report.
LOAD_END="$(cut -d" " -f1-3 /proc/loadavg)"
if busy "$(load1)"; then
  say "WARNING: 1-minute load average $(load1) at the end on $(nproc) cores: the machine was not idle"
fi
commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] && commit="$commit (with uncommitted changes)"
CMDLINE="$CMDLINE" EPCTX="$EPCTX" ZOO="$ZOO" MANIFEST="$MANIFEST" LOAD_START="$LOAD_START" LOAD_END="$LOAD_END" \
COMMIT="$commit" NODE_RSS="$NODE_RSS" NODE_VERSION="$(node --version)" THREADS="$THREADS" REPS="$REPS" RUNS="$RUNS" \
QUICK="$QUICK" TIMEOUT="$TIMEOUT" "$PY" - "$WORK/meta.json" <<'PY'
import json, os, sys
e = os.environ
json.dump({
  "cmdline": e["CMDLINE"], "threads": int(e["THREADS"]), "reps": int(e["REPS"]), "runs": int(e["RUNS"]),
  "quick": e["QUICK"] == "1", "timeout_s": int(e["TIMEOUT"]), "epctx": e["EPCTX"], "zoo": e["ZOO"],
  "manifest": e["MANIFEST"], "load_start": e["LOAD_START"], "load_end": e["LOAD_END"], "nproc": os.cpu_count(),
  "commit": e["COMMIT"], "node_baseline_rss_mb": float(e["NODE_RSS"]), "node": e["NODE_VERSION"],
  "thread_env": {k: v for k, v in e.items() if k.startswith(("OMP_", "GOMP_", "KMP_", "DNNL_", "ONEDNN_", "EPCTX_"))},
}, open(sys.argv[1], "w"), indent=1)
PY
stamp="$(date +%Y-%m-%d)"
if [ "$SAVE" = 1 ]; then
  mkdir -p "$OUTDIR"
  base="$OUTDIR/zoo_$stamp${SUFFIX:+-$SUFFIX}"
  "$PY" "$ROOT/bench/zoo_chart.py" report --work "$WORK" --md "$base.md" --json "$base.json"
  if "$PY" -c 'import matplotlib' 2>/dev/null; then
    "$PY" "$ROOT/bench/zoo_chart.py" plot --json "$base.json" --png "$base.png" >&2 || say "chart failed (table saved)"
  fi
  say "saved $base.md, $base.json$([ -f "$base.png" ] && echo ", $base.png")"
else
  "$PY" "$ROOT/bench/zoo_chart.py" report --work "$WORK"
fi
