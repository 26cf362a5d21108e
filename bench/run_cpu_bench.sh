#!/usr/bin/env bash
# CPU benchmark: epctx's CPU EP beside onnxruntime-node 1.30 (same thread count), in one run.
# Measures, never asserts. See bench/README.md.
#
#   bench/run_cpu_bench.sh [--threads N] [--reps R] [--runs M] [--models DIR] [--epctx PATH] [--regen]
#                          [--no-epctx] [--no-save] [--only decoder_prefill,decoder_decode,cnn]
#
# Models (generated once into --models, default bench/models, not committed):
#   decoder_prefill  GPT-style decoder, bench preset (6 layers, d 512, 8 heads, vocab 8192, ffn 2048), seq 128
#   decoder_decode   the same weights, one token with past 127
#   cnn              tests/models/make_cnn.py --size 224
# For every model and side, R fresh processes (default 5) each create a session, run once (first run) and then
# M timed runs; the table shows the median over the processes of session creation, first run, steady-state
# median and p90, and peak RSS, with the ratio epctx / ORT (< 1 means epctx is faster or smaller).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY=/usr/bin/python3
CMDLINE="bench/run_cpu_bench.sh $*"

THREADS=2
REPS=5
RUNS=""
MODELS="$ROOT/bench/models"
EPCTX="$ROOT/build/bin/epctx"
REGEN=0
USE_EPCTX=1
SAVE=1
ONLY="decoder_prefill,decoder_decode,cnn"
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --models) MODELS="$2"; shift 2 ;;
    --epctx) EPCTX="$2"; shift 2 ;;
    --regen) REGEN=1; shift ;;
    --no-epctx) USE_EPCTX=0; shift ;;
    --no-save) SAVE=0; shift ;;
    --only) ONLY="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "run_cpu_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done

# onnxruntime-node 1.30.0 (bundled CPU binaries; the postinstall script is not needed)
ORT_DIR="$ROOT/tests/ort"
if ! (cd "$ORT_DIR" && node -e "process.exit(require('onnxruntime-node').env.versions.node === '1.30.0' ? 0 : 1)") 2>/dev/null; then
  echo "run_cpu_bench: installing onnxruntime-node 1.30.0"
  (cd "$ORT_DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi

# Bench models and inputs (ORT reference outputs come along; they are not used here).
if [ "$REGEN" = 1 ] || [ ! -f "$MODELS/cases/cnn/test_data_set_0/input_0.pb" ] \
   || [ ! -f "$MODELS/cases/decoder_decode/test_data_set_0/input_0.pb" ]; then
  echo "run_cpu_bench: generating bench models into $MODELS"
  mkdir -p "$MODELS"
  "$PY" "$ROOT/tests/models/make_decoder.py" --out "$MODELS" --preset bench
  "$PY" "$ROOT/tests/models/make_cnn.py" --out "$MODELS" --size 224
  "$PY" "$ROOT/tests/models/make_cases.py" --models "$MODELS" --prefill-seq 128 --decode-past 127
fi

# Does epctx perf exist yet?
EPCTX_NOTE=""
if [ "$USE_EPCTX" = 1 ]; then
  if [ ! -x "$EPCTX" ]; then
    EPCTX_NOTE="$EPCTX not built"; USE_EPCTX=0
  elif ! probe=$("$EPCTX" perf "$MODELS/cases/cnn/model.onnx" -x 1 -r 1 --inputs "$MODELS/cases/cnn/test_data_set_0" --json 2>&1 </dev/null) \
       || ! grep -q '"run_ms_median"' <<<"$probe"; then
    EPCTX_NOTE="epctx perf not usable yet: $(head -c 300 <<<"$probe" | tr '\n' ' ')"; USE_EPCTX=0
  fi
  [ -n "$EPCTX_NOTE" ] && echo "run_cpu_bench: $EPCTX_NOTE (ORT side only)" >&2
fi

default_runs() {
  case "$1" in
    decoder_prefill) echo 10 ;;
    decoder_decode) echo 50 ;;
    *) echo 20 ;;
  esac
}

LOAD_START="$(cut -d" " -f1-3 /proc/loadavg)"
RAW="$(mktemp)"
trap 'rm -f "$RAW"' EXIT
IFS=',' read -r -a CASES <<<"$ONLY"
for c in "${CASES[@]}"; do
  model="$MODELS/cases/$c/model.onnx"
  inputs="$MODELS/cases/$c/test_data_set_0"
  runs="${RUNS:-$(default_runs "$c")}"
  echo "run_cpu_bench: $c: $REPS processes x $runs runs per side, $THREADS threads" >&2
  for ((r = 0; r < REPS; r++)); do
    # Sides alternate within each repetition so that drift (thermal, page cache) hits both alike.
    line=$(cd "$ORT_DIR" && node perf.js "$model" --threads "$THREADS" --runs "$runs" --inputs "$inputs")
    echo "{\"case\":\"$c\",\"side\":\"ort\",\"rep\":$r,\"result\":$line}" >>"$RAW"
    if [ "$USE_EPCTX" = 1 ]; then
      if line=$("$EPCTX" perf "$model" -x "$THREADS" -r "$runs" --inputs "$inputs" --json 2>/tmp/epctx_bench_err.$$ </dev/null \
                | grep '^{' | tail -n 1) && [ -n "$line" ]; then
        echo "{\"case\":\"$c\",\"side\":\"epctx\",\"rep\":$r,\"result\":$line}" >>"$RAW"
      else
        err=$(head -c 300 /tmp/epctx_bench_err.$$ | tr '\n"\\' '   ')
        echo "{\"case\":\"$c\",\"side\":\"epctx\",\"rep\":$r,\"error\":\"$err\"}" >>"$RAW"
      fi
      rm -f /tmp/epctx_bench_err.$$
    fi
  done
done

OUTFILE=""
if [ "$SAVE" = 1 ]; then
  mkdir -p "$ROOT/bench/results"
  OUTFILE="$ROOT/bench/results/cpu_ep_$(date +%Y-%m-%d).md"
fi
"$PY" "$ROOT/bench/summarize.py" --raw "$RAW" --cmdline "$CMDLINE" --threads "$THREADS" --reps "$REPS" \
  --load-start "$LOAD_START" --note "$EPCTX_NOTE" ${OUTFILE:+--out "$OUTFILE"}
