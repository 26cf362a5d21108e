#!/usr/bin/env bash
# AotCpu benchmark: epctx's AotCpu EP (compiled just in time, and loaded from _ctx.onnx with embed mode 0 and 1)
# beside onnxruntime-node 1.30 on the source model, same thread count, against floors measured on this machine.
# Measures, never asserts. See bench/README.md.
#
#   bench/run_aotcpu_bench.sh [--quick] [--threads N] [--reps R] [--runs M] [--only decoder_prefill,decoder_decode,cnn]
#                             [--models DIR] [--epctx PATH] [--ep aotcpu] [--out-dir DIR] [--suffix S] [--no-save] [--regen]
#
# For every model: _ctx.onnx generated once per embed mode; then R fresh processes (default 5) per side, the sides
# alternating within each repetition: ORT, AotCpu JIT, ctx embed 0, ctx embed 1. Each process creates a session, runs
# once (first run), then M timed runs. Floors (build/bin/epctx_floors, bench/floors.cc): read bandwidth and oneDNN
# matmul throughput at the model's shapes. Output: bench/results/aotcpu_<date>[-S].{md,json,png} (--suffix S keeps
# an earlier run of the same day).
# --quick: 1 process, a few runs, short floors, output under /tmp/epctx-aotcpu-quick (a smoke test, not a measurement).
# --ep NAME: another plugin EP in place of aotcpu (e.g. example, to smoke-test the context path).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY=/usr/bin/python3
CMDLINE="bench/run_aotcpu_bench.sh $*"

THREADS=2
REPS=""
RUNS=""
QUICK=0
MODELS="$ROOT/bench/models"
EPCTX="$ROOT/build/bin/epctx"
EP=aotcpu
OUTDIR=""
SUFFIX=""
SAVE=1
REGEN=0
ONLY="decoder_prefill,decoder_decode,cnn"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --threads) THREADS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --models) MODELS="$2"; shift 2 ;;
    --epctx) EPCTX="$2"; shift 2 ;;
    --ep) EP="$2"; shift 2 ;;
    --out-dir) OUTDIR="$2"; shift 2 ;;
    --suffix) SUFFIX="$2"; shift 2 ;;
    --no-save) SAVE=0; shift ;;
    --regen) REGEN=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/!p}' "$0"; exit 0 ;;
    *) echo "run_aotcpu_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ "$QUICK" = 1 ]; then
  REPS="${REPS:-1}"
  OUTDIR="${OUTDIR:-${TMPDIR:-/tmp}/epctx-aotcpu-quick}"
  FLOOR_PASSES=3
  BW_BYTES=$((512 << 20))
else
  REPS="${REPS:-5}"
  OUTDIR="${OUTDIR:-$ROOT/bench/results}"
  FLOOR_PASSES=""
  BW_BYTES=""
fi
say() { echo "run_aotcpu_bench: $*" >&2; }

default_runs() {
  if [ -n "$RUNS" ]; then echo "$RUNS"; return; fi
  case "$QUICK:$1" in
    1:decoder_decode) echo 5 ;;
    1:*) echo 3 ;;
    0:decoder_prefill) echo 10 ;;
    0:decoder_decode) echo 50 ;;
    *) echo 20 ;;
  esac
}
# Free dimensions of each bench model (the shapes of its test_data_set_0), given to every epctx session.
free_dims() {
  case "$1" in
    decoder_prefill) echo "-f seq:128" ;;
    decoder_decode) echo "-f past:127" ;;
    *) echo "" ;;
  esac
}

LOAD_START="$(cut -d" " -f1-3 /proc/loadavg)"
LOAD_WARNING=""
if awk -v l="${LOAD_START%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > 0.25 * n) }'; then
  LOAD_WARNING="1-minute load average ${LOAD_START%% *} at start on $(nproc) cores: the machine is not idle, numbers are not trustworthy"
  say "WARNING: $LOAD_WARNING"
fi

# onnxruntime-node 1.30.0 (as bench/run_cpu_bench.sh)
ORT_DIR="$ROOT/tests/ort"
if ! (cd "$ORT_DIR" && node -e "process.exit(require('onnxruntime-node').env.versions.node === '1.30.0' ? 0 : 1)") 2>/dev/null; then
  say "installing onnxruntime-node 1.30.0"
  (cd "$ORT_DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi

# Bench models, made exactly as bench/run_cpu_bench.sh makes them (shared folder).
if [ "$REGEN" = 1 ] || [ ! -f "$MODELS/cases/cnn/test_data_set_0/input_0.pb" ] \
   || [ ! -f "$MODELS/cases/decoder_decode/test_data_set_0/input_0.pb" ]; then
  say "generating bench models into $MODELS"
  mkdir -p "$MODELS"
  "$PY" "$ROOT/tests/models/make_decoder.py" --out "$MODELS" --preset bench
  "$PY" "$ROOT/tests/models/make_cnn.py" --out "$MODELS" --size 224
  "$PY" "$ROOT/tests/models/make_cases.py" --models "$MODELS" --prefill-seq 128 --decode-past 127
fi

[ -x "$EPCTX" ] || { say "$EPCTX is not built (cmake --build build)"; exit 1; }

# epctx_floors: the CMake target when the build has it, else compiled directly (same flags as the build).
FLOORS="$ROOT/build/bin/epctx_floors"
if [ ! -x "$FLOORS" ] || [ "$ROOT/bench/floors.cc" -nt "$FLOORS" ]; then
  if grep -q 'epctx_floors' "$ROOT/build/build.ninja" 2>/dev/null; then
    say "building epctx_floors"
    (cd "$ROOT" && flock /tmp/epctx-build.lock cmake --build build --target epctx_floors >&2)
  else
    FLOORS="$ROOT/build/bench/epctx_floors"
    if [ ! -x "$FLOORS" ] || [ "$ROOT/bench/floors.cc" -nt "$FLOORS" ]; then
      say "compiling $FLOORS (the build has no epctx_floors target yet)"
      mkdir -p "$(dirname "$FLOORS")"
      c++ -std=c++17 -O3 -march=native -fopenmp -o "$FLOORS" "$ROOT/bench/floors.cc" -ldnnl
    fi
  fi
fi

# matplotlib from Debian for the chart
if ! "$PY" -c 'import matplotlib' 2>/dev/null; then
  say "installing python3-matplotlib (apt-get)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get install -y -q python3-matplotlib >&2 || say "could not install python3-matplotlib: no chart"
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
IFS=',' read -r -a CASES <<<"$ONLY"
NOTES=()

# 1. Model analysis (weight bytes, MatMul shapes) and floors.
MAX_WS=0
for c in "${CASES[@]}"; do
  say "$c: analysing the model (weight bytes, MatMul shapes via ORT)"
  "$PY" "$ROOT/bench/chart.py" analyze --case "$c" --model "$MODELS/cases/$c/model.onnx" \
    --inputs "$MODELS/cases/$c/test_data_set_0" --ort-dir "$ORT_DIR" --out "$WORK/analysis_$c.json" \
    --matmuls "$WORK/matmuls_$c.txt"
  if [ "$c" = decoder_decode ]; then
    MAX_WS=$("$PY" -c "import json; print(json.load(open('$WORK/analysis_$c.json'))['weight_bytes_read_per_run'])")
  fi
done
say "floors: read bandwidth ($THREADS threads)"
WS_ARGS=(); [ "$MAX_WS" -gt 0 ] && WS_ARGS=(--ws-bytes "$MAX_WS")
"$FLOORS" --threads "$THREADS" --bandwidth ${BW_BYTES:+--bw-bytes "$BW_BYTES"} ${WS_ARGS[@]+"${WS_ARGS[@]}"} \
  ${FLOOR_PASSES:+--passes "$FLOOR_PASSES"} >"$WORK/floors_bandwidth.json"
for c in "${CASES[@]}"; do
  case "$c" in decoder_prefill|decoder_decode) ;; *) continue ;; esac
  say "floors: oneDNN matmuls of $c"
  "$FLOORS" --threads "$THREADS" --matmuls "$WORK/matmuls_$c.txt" ${FLOOR_PASSES:+--passes "$FLOOR_PASSES"} \
    >"$WORK/floors_$c.json"
done

# 2. Context models, generated once per model and embed mode (beside the bench models, not committed).
# epctx_line FILE: the JSON line of an `epctx perf --json -v` output; epctx_report FILE: its session report.
epctx_line() { grep '^{' "$1" | tail -n 1; }
epctx_report() { sed -n 's/^session report: //p' "$1" | tail -n 1; }
errtext() { head -c 400 "$1" | tr '\n"\\\t' '    '; }
for c in "${CASES[@]}"; do
  model="$MODELS/cases/$c/model.onnx"
  inputs="$MODELS/cases/$c/test_data_set_0"
  for e in 0 1; do
    dir="$MODELS/ctx/$EP/$c/embed$e"
    rm -rf "$dir"; mkdir -p "$dir"
    say "$c: generating _ctx.onnx (embed $e)"
    # shellcheck disable=SC2046
    if "$EPCTX" perf -e "$EP" $(free_dims "$c") -x "$THREADS" -r 1 --inputs "$inputs" --json \
         -C "ep.context_enable|1 ep.context_embed_mode|$e ep.context_file_path|$dir/model_ctx.onnx" \
         "$model" >"$WORK/gen.out" 2>"$WORK/gen.err" </dev/null && [ -f "$dir/model_ctx.onnx" ]; then
      ctx_bytes=$(stat -c %s "$dir/model_ctx.onnx")
      bin=$(find "$dir" -maxdepth 1 -name '*.bin' | head -n 1)
      bin_bytes=$([ -n "$bin" ] && stat -c %s "$bin" || echo 0)
      create=$(epctx_line "$WORK/gen.out" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["session_creation_ms"])')
      echo "{\"case\":\"$c\",\"embed\":$e,\"written\":true,\"session_creation_ms\":$create,\"ctx_bytes\":$ctx_bytes,\"bin_bytes\":$bin_bytes}" >>"$WORK/gen.jsonl"
    else
      why=$(errtext "$WORK/gen.err")
      echo "{\"case\":\"$c\",\"embed\":$e,\"written\":false,\"why\":\"${why:-no context model written}\"}" >>"$WORK/gen.jsonl"
      say "$c: no _ctx.onnx (embed $e): ${why:-no context model written}"
    fi
  done
  bin=$(find "$MODELS/ctx/$EP/$c/embed0" -maxdepth 1 -name '*.bin' | head -n 1)
  if [ -n "$bin" ]; then
    "$FLOORS" --threads "$THREADS" --map "$bin" ${FLOOR_PASSES:+--passes "$FLOOR_PASSES"} >"$WORK/map_$c.json"
  fi
done

# 3. Timed processes.
NODE_RSS=$(cd "$ORT_DIR" && node -e "require('onnxruntime-node'); console.log((process.resourceUsage().maxRSS / 1024).toFixed(1))")
run_epctx() {  # case side rep model -> appends a raw row
  local c="$1" side="$2" r="$3" m="$4" line report
  # shellcheck disable=SC2046
  if "$EPCTX" perf -e "$EP" $(free_dims "$c") -x "$THREADS" -r "$(default_runs "$c")" \
       --inputs "$MODELS/cases/$c/test_data_set_0" --json -v "$m" >"$WORK/p.out" 2>"$WORK/p.err" </dev/null \
     && line=$(epctx_line "$WORK/p.out") && [ -n "$line" ]; then
    report=$(epctx_report "$WORK/p.out")
    echo "{\"case\":\"$c\",\"side\":\"$side\",\"rep\":$r,\"result\":$line,\"report\":${report:-null}}" >>"$WORK/raw.jsonl"
  else
    echo "{\"case\":\"$c\",\"side\":\"$side\",\"rep\":$r,\"error\":\"$(errtext "$WORK/p.err")\"}" >>"$WORK/raw.jsonl"
  fi
}
for c in "${CASES[@]}"; do
  model="$MODELS/cases/$c/model.onnx"
  inputs="$MODELS/cases/$c/test_data_set_0"
  say "$c: $REPS processes x $(default_runs "$c") runs per side, $THREADS threads"
  for ((r = 0; r < REPS; r++)); do
    if line=$(cd "$ORT_DIR" && node perf.js "$model" --threads "$THREADS" --runs "$(default_runs "$c")" \
                --inputs "$inputs" 2>"$WORK/p.err"); then
      echo "{\"case\":\"$c\",\"side\":\"ort\",\"rep\":$r,\"result\":$line}" >>"$WORK/raw.jsonl"
    else
      echo "{\"case\":\"$c\",\"side\":\"ort\",\"rep\":$r,\"error\":\"$(errtext "$WORK/p.err")\"}" >>"$WORK/raw.jsonl"
    fi
    run_epctx "$c" jit "$r" "$model"
    for e in 0 1; do
      ctx="$MODELS/ctx/$EP/$c/embed$e/model_ctx.onnx"
      if [ -f "$ctx" ]; then
        run_epctx "$c" "ctx$e" "$r" "$ctx"
      else
        echo "{\"case\":\"$c\",\"side\":\"ctx$e\",\"rep\":$r,\"error\":\"no context model (see generation)\"}" >>"$WORK/raw.jsonl"
      fi
    done
  done
done

# 4. Report.
commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] && commit="$commit (with uncommitted changes)"
machine="nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/^Mem:/{print $2" GiB"}')"
runs_json=$(for c in "${CASES[@]}"; do printf '"%s":%s,' "$c" "$(default_runs "$c")"; done)
notes_json=$(for n in ${NOTES[@]+"${NOTES[@]}"}; do printf '%s,' "$("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$n")"; done)
"$PY" - "$WORK/meta.json" <<EOF
import json, sys
json.dump({
  "cmdline": $("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$CMDLINE"),
  "threads": $THREADS, "reps": $REPS, "quick": bool($QUICK), "ep": "$EP",
  "cases": $("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1].split(",")))' "$ONLY"),
  "runs": {${runs_json%,}},
  "load_start": "$LOAD_START", "load_warning": "$LOAD_WARNING",
  "machine": "$machine", "commit": "$commit", "node_baseline_rss_mb": $NODE_RSS,
  "floors_binary": "$FLOORS", "notes": [${notes_json%,}],
}, open(sys.argv[1], "w"), indent=1)
EOF
stamp="$(date +%Y-%m-%d)"
if [ "$SAVE" = 1 ]; then
  mkdir -p "$OUTDIR"
  base="$OUTDIR/aotcpu_$stamp${SUFFIX:+-$SUFFIX}"
  "$PY" "$ROOT/bench/chart.py" report --work "$WORK" --md "$base.md" --json "$base.json"
  if "$PY" -c 'import matplotlib' 2>/dev/null; then
    "$PY" "$ROOT/bench/chart.py" plot --json "$base.json" --png "$base.png"
  fi
  say "saved $base.md, $base.json$([ -f "$base.png" ] && echo ", $base.png")"
else
  "$PY" "$ROOT/bench/chart.py" report --work "$WORK"
fi
