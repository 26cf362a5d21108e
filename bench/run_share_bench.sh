#!/usr/bin/env bash
# AotCpu weight sharing (issue 6) on the bench decoder: file sizes, resident memory of two live sessions, output
# equality, partial sharing. Measures, never asserts. See bench/README.md ("Weight sharing").
#
#   bench/run_share_bench.sh [--threads N] [--reps R] [--models DIR] [--work DIR] [--no-save] [--force]
#                            [--max-load L] [--wait S]
#
# Models: the bench decoder in --models (default bench/models; generated as bench/run_cpu_bench.sh does when missing),
# compiled with seq 128 / past 127 into a scratch folder (--work, default a new temp folder, removed afterwards;
# about 1 GB). The variant for partial sharing (prefill with another lm_head.weight) comes from
# tests/models/make_decoder.py --preset bench --head-seed 2.
#   1. group:    epctx share-compile prefill.onnx,decode.onnx -> files written, binary / decoder.weights
#   2. separate: each model compiled alone (ep.context_enable=1) -> binary sizes, their sum / decoder.weights
#   3. memory:   build/bin/epctx_share_memory, the two context models alive in one process (group-compiled with and
#                without ep.share_ep_contexts=1; separately compiled): VmRSS after the sessions (and after one run
#                each) minus VmRSS at process start, / decoder.weights; median of R processes; the prefill session
#                alone as a reference
#   4. outputs:  group-compiled vs separately compiled outputs bit for bit (zero inputs, epctx_share_memory --dump)
#                and both against ONNX Runtime's expected outputs (epctx test -e aotcpu, seq 128 / past 127 cases)
#   5. partial:  share-compile prefill,decode,prefill_head2 -> binary vs the distinct source weights
#                (decoder.weights + head2.weights)
# The machine must be idle: the 1-minute load must fall below --max-load (0.5) within --wait seconds (600), else the
# script stops (--force runs anyway and says so). Results: bench/results/share_<date>.md with this command line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY=/usr/bin/python3
CMDLINE="bench/run_share_bench.sh $*"

THREADS=2
REPS=5
MODELS="$ROOT/bench/models"
WORK=""
SAVE=1
FORCE=0
MAX_LOAD=0.5
WAIT=600
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --models) MODELS="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --no-save) SAVE=0; shift ;;
    --force) FORCE=1; shift ;;
    --max-load) MAX_LOAD="$2"; shift 2 ;;
    --wait) WAIT="$2"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "run_share_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
EPCTX="$ROOT/build/bin/epctx"
MEM="$ROOT/build/bin/epctx_share_memory"
for b in "$EPCTX" "$MEM"; do
  [ -x "$b" ] || { echo "run_share_bench: $b is not built (cmake --build build)" >&2; exit 1; }
done

if [ ! -f "$MODELS/decoder.weights" ] || [ ! -f "$MODELS/cases/decoder_decode/test_data_set_0/input_0.pb" ]; then
  echo "run_share_bench: generating bench models into $MODELS"
  mkdir -p "$MODELS"
  "$PY" "$ROOT/tests/models/make_decoder.py" --out "$MODELS" --preset bench
  "$PY" "$ROOT/tests/models/make_cnn.py" --out "$MODELS" --size 224
  "$PY" "$ROOT/tests/models/make_cases.py" --models "$MODELS" --prefill-seq 128 --decode-past 127
fi

load1() { cut -d" " -f1 /proc/loadavg; }
waited=0
while awk -v l="$(load1)" -v m="$MAX_LOAD" 'BEGIN { exit !(l >= m) }'; do
  if [ "$waited" -ge "$WAIT" ]; then
    if [ "$FORCE" = 1 ]; then echo "run_share_bench: load $(load1) >= $MAX_LOAD, running anyway (--force)" >&2; break; fi
    echo "run_share_bench: the machine is not idle (1-minute load $(load1) >= $MAX_LOAD after ${WAIT}s); not measuring" >&2
    exit 1
  fi
  [ "$waited" = 0 ] && echo "run_share_bench: waiting for the 1-minute load ($(load1)) to fall below $MAX_LOAD" >&2
  sleep 10; waited=$((waited + 10))
done
LOAD_START="$(cut -d" " -f1-3 /proc/loadavg)"

if [ -z "$WORK" ]; then
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
else
  rm -rf "$WORK"; mkdir -p "$WORK"
fi
link() { ln "$1" "$2" 2>/dev/null || cp "$1" "$2"; }
models_into() {  # models_into DIR: the bench decoder's files, hard-linked
  mkdir -p "$1"
  for f in prefill.onnx decode.onnx decoder.weights; do link "$MODELS/$f" "$1/$f"; done
}
size() { stat -c %s "$1"; }
ms_now() { date +%s%N | awk '{ printf "%.0f", $1 / 1e6 }'; }
DIMS=(-f seq:128 -f past:127)
W=$(size "$MODELS/decoder.weights")
OUT="$WORK/results.txt"; : >"$OUT"
put() { echo "$1=$2" >>"$OUT"; }

# 1. Group.
echo "run_share_bench: 1. group compile" >&2
models_into "$WORK/group"; ls "$WORK/group" >"$WORK/before"
t0=$(ms_now)
"$EPCTX" share-compile "${DIMS[@]}" -x "$THREADS" "$WORK/group/prefill.onnx,$WORK/group/decode.onnx" >"$WORK/group.log"
put group_ms $(( $(ms_now) - t0 ))
put group_new_files "$(ls "$WORK/group" | grep -vxF -f "$WORK/before" | tr '\n' ' ')"
put group_bin "$(size "$WORK/group/prefill_aotcpu.bin")"
put group_ctx "$(( $(size "$WORK/group/prefill_ctx.onnx") + $(size "$WORK/group/decode_ctx.onnx") ))"
put group_tensors "$("$EPCTX" inspect "$WORK/group/prefill_aotcpu.bin" | sed -n 's/^tensors: //p')"

# 2. Separately.
echo "run_share_bench: 2. separate compiles" >&2
for m in prefill decode; do
  models_into "$WORK/sep_$m"
  dim=(-f seq:128); [ $m = decode ] && dim=(-f past:127)
  t0=$(ms_now)
  "$EPCTX" perf -e aotcpu -x "$THREADS" -r 1 -I "${dim[@]}" -C "ep.context_enable|1" "$WORK/sep_$m/$m.onnx" >/dev/null
  put "sep_${m}_ms" $(( $(ms_now) - t0 ))
  put "sep_${m}_bin" "$(size "$WORK/sep_$m/${m}_ctx_aotcpu.bin")"
done

# 3. Memory: two live sessions in one process.
echo "run_share_bench: 3. memory ($REPS processes per setup)" >&2
mem() {  # mem NAME ARGS...: medians over REPS processes
  local name=$1; shift
  local raw="$WORK/mem_$name.jsonl"; : >"$raw"
  for ((r = 0; r < REPS; r++)); do "$MEM" --threads "$THREADS" "$@" >>"$raw"; done
  "$PY" - "$raw" "$name" >>"$OUT" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
name = sys.argv[2]
med = lambda k: statistics.median(r[k] for r in rows)
print(f"mem_{name}_sessions={med('sessions_minus_start_mb'):.2f}")
print(f"mem_{name}_env={med('sessions_minus_env_mb'):.2f}")
print(f"mem_{name}_runs={med('runs_minus_start_mb'):.2f}")
print(f"mem_{name}_create={statistics.median(sum(r['session_creation_ms']) for r in rows):.1f}")
print(f"mem_{name}_create2={statistics.median(r['session_creation_ms'][-1] for r in rows):.1f}")
EOF
}
G="$WORK/group"
mem group_share --share "$G/prefill_ctx.onnx" "$G/decode_ctx.onnx"
mem group_noshare "$G/prefill_ctx.onnx" "$G/decode_ctx.onnx"
mem separate "$WORK/sep_prefill/prefill_ctx.onnx" "$WORK/sep_decode/decode_ctx.onnx"
mem prefill_only --share "$G/prefill_ctx.onnx"

# 4. Outputs.
echo "run_share_bench: 4. outputs" >&2
mkdir -p "$WORK/dump_group" "$WORK/dump_sep"
"$MEM" --threads "$THREADS" --share --dump "$WORK/dump_group" "$G/prefill_ctx.onnx" "$G/decode_ctx.onnx" >/dev/null
"$MEM" --threads "$THREADS" --dump "$WORK/dump_sep" "$WORK/sep_prefill/prefill_ctx.onnx" \
  "$WORK/sep_decode/decode_ctx.onnx" >/dev/null
"$PY" - "$WORK/dump_group" "$WORK/dump_sep" >>"$OUT" <<'EOF'
import os, sys
import numpy as np
a, b = sys.argv[1:3]
files = sorted(os.listdir(a))
same = sum(open(os.path.join(a, f), "rb").read() == open(os.path.join(b, f), "rb").read() for f in files)
diff = max(float(np.max(np.abs(np.fromfile(os.path.join(a, f), np.float32) - np.fromfile(os.path.join(b, f), np.float32))))
           for f in files)
print(f"outputs_bitwise={same}/{len(files)}")
print(f"outputs_maxdiff={diff:.3g}")
EOF
for side in group sep; do
  for m in prefill decode; do
    c="$WORK/cases_$side/decoder_$m"; mkdir -p "$c"
    src=$([ $side = group ] && echo "$G/${m}_ctx.onnx" || echo "$WORK/sep_$m/${m}_ctx.onnx")
    cp "$src" "$c/model.onnx"
    bin=$([ $side = group ] && echo "$G/prefill_aotcpu.bin" || echo "$WORK/sep_$m/${m}_ctx_aotcpu.bin")
    link "$bin" "$c/$(basename "$bin")"
    cp -r "$MODELS/cases/decoder_$m/test_data_set_0" "$c/"
  done
  extra=(); [ $side = group ] && extra=(-C "ep.share_ep_contexts|1")
  put "ort_$side" "$("$EPCTX" test -e aotcpu -x "$THREADS" "${extra[@]}" "$WORK/cases_$side" | tail -n 1)"
done

# 5. Partial sharing.
echo "run_share_bench: 5. partial sharing" >&2
"$PY" "$ROOT/tests/models/make_decoder.py" --out "$WORK/partial" --preset bench --head-seed 2 --no-check >/dev/null
P="$WORK/partial"
cmp -s "$P/decoder.weights" "$MODELS/decoder.weights" || { echo "run_share_bench: variant weights differ" >&2; exit 1; }
t0=$(ms_now)
"$EPCTX" share-compile "${DIMS[@]}" -x "$THREADS" "$P/prefill.onnx,$P/decode.onnx,$P/prefill_head2.onnx" \
  >"$WORK/partial.log"
put partial_ms $(( $(ms_now) - t0 ))
put partial_bin "$(size "$P/prefill_aotcpu.bin")"
put partial_head "$(size "$P/head2.weights")"
put partial_tensors "$("$EPCTX" inspect "$P/prefill_aotcpu.bin" | sed -n 's/^tensors: //p')"
LOAD_END="$(cut -d" " -f1-3 /proc/loadavg)"

OUTFILE=""
[ "$SAVE" = 1 ] && { mkdir -p "$ROOT/bench/results"; OUTFILE="$ROOT/bench/results/share_$(date +%Y-%m-%d).md"; }
"$PY" - "$OUT" "$W" "$CMDLINE" "$THREADS" "$REPS" "$LOAD_START" "$LOAD_END" "$(cd "$ROOT" && git rev-parse --short HEAD)" \
  "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores" ${OUTFILE:+"$OUTFILE"} <<'EOF'
import datetime, sys
res = dict(l.rstrip("\n").split("=", 1) for l in open(sys.argv[1]) if "=" in l)
W = int(sys.argv[2]); cmd, threads, reps, load0, load1, commit, cpu = sys.argv[3:10]
out = sys.argv[10] if len(sys.argv) > 10 else None
MB = 1 << 20
f = lambda k: float(res[k])
i = lambda k: int(res[k])
gb, sp, sd = i("group_bin"), i("sep_prefill_bin"), i("sep_decode_bin")
def mem_row(name, label):
    s = f(f"mem_{name}_sessions") * MB
    return (f"| {label} | {f(f'mem_{name}_sessions'):.1f} | {s / W:.3f} | {f(f'mem_{name}_env'):.1f} | "
            f"{f(f'mem_{name}_runs'):.1f} | {f(f'mem_{name}_create'):.1f} ({f(f'mem_{name}_create2'):.1f}) |")
pb, ph = i("partial_bin"), i("partial_head")
L = []
L.append(f"# AotCpu weight sharing, {datetime.date.today().isoformat()}")
L.append("")
L.append(f"`{cmd}` (commit {commit}; {cpu}; {threads} threads; memory: median of {reps} processes). "
         f"Load average at start {load0}, at end {load1}.")
L.append("")
L.append(f"Bench decoder (6 layers, d 512, vocab 8192), prefill seq 128 / decode past 127; decoder.weights = {W} bytes "
         f"({W / MB:.1f} MiB).")
L.append("")
L.append("## Files")
L.append("")
L.append("| compile | files written | context binary bytes | binary / decoder.weights | time |")
L.append("|---|---|---|---|---|")
L.append(f"| group (`share-compile prefill,decode`) | {res['group_new_files'].strip()} | {gb} | **{gb / W:.3f}** "
         f"(target <= 1.05) | {i('group_ms')} ms |")
L.append(f"| prefill alone | prefill_ctx.onnx prefill_ctx_aotcpu.bin | {sp} | {sp / W:.3f} | {i('sep_prefill_ms')} ms |")
L.append(f"| decode alone | decode_ctx.onnx decode_ctx_aotcpu.bin | {sd} | {sd / W:.3f} | {i('sep_decode_ms')} ms |")
L.append(f"| prefill + decode alone (sum) | 4 | {sp + sd} | {(sp + sd) / W:.3f} | |")
L.append("")
L.append(f"Group binary tensors: {res['group_tensors']}. Context models of the group: {i('group_ctx')} bytes together.")
L.append("")
L.append("## Resident memory, prefill + decode sessions alive in one process")
L.append("")
L.append("VmRSS after creating both sessions minus VmRSS at process start (an empty process), divided by "
         "decoder.weights; `env` excludes the EP library registration; `after runs` includes one run of each. "
         "Creation: both sessions (the second alone).")
L.append("")
L.append("| context models | MiB | / weights (target <= 1.1) | MiB beyond env | MiB after runs | creation ms |")
L.append("|---|---|---|---|---|---|")
L.append(mem_row("group_share", "group-compiled, ep.share_ep_contexts=1"))
L.append(mem_row("group_noshare", "group-compiled, sharing off"))
L.append(mem_row("separate", "separately compiled"))
L.append(mem_row("prefill_only", "(reference: the group's prefill session alone)"))
L.append("")
L.append("## Outputs")
L.append("")
L.append(f"- group-compiled vs separately compiled (zero inputs, all outputs of both models): "
         f"{res['outputs_bitwise']} bit-identical, max abs difference {res['outputs_maxdiff']}")
L.append(f"- against ONNX Runtime 1.30's expected outputs (`epctx test -e aotcpu`, seq 128 / past 127): "
         f"group-compiled (loaded with ep.share_ep_contexts=1) `{res['ort_group']}`, "
         f"separately compiled `{res['ort_sep']}`")
L.append("")
L.append("## Partial sharing: prefill + decode + prefill with another lm_head.weight")
L.append("")
L.append("| binary bytes | distinct source weights (decoder.weights + head2.weights) | ratio | vs the 2-model binary | tensors | time |")
L.append("|---|---|---|---|---|---|")
L.append(f"| {pb} | {W + ph} | **{pb / (W + ph):.3f}** | +{pb - gb} (head2.weights {ph}) | {res['partial_tensors']} | "
         f"{i('partial_ms')} ms |")
text = "\n".join(L) + "\n"
print(text)
if out:
    open(out, "w").write(text)
    print("saved", out)
EOF
