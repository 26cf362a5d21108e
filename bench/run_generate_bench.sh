#!/usr/bin/env bash
# Generation benchmark (issue 16 prep): per-token latency of a greedy decoder loop, epctx beside onnxruntime-node
# 1.30 in one run. Measures, never asserts. See bench/README.md ("Greedy generation").
#
#   bench/run_generate_bench.sh [--quick] [--threads N] [--reps R] [--tokens T] [--prompt-len L]
#        [--prefill-lens 32,128,512] [--warmup W] [--bucket B] [--sides ort,cpu,aotcpu] [--models DIR] [--build DIR]
#        [--out-dir DIR] [--suffix S] [--no-save] [--regen]
#
# Model: tests/models/make_decoder.py --preset bench --max-seq 1024 (6 layers, d 512, 8 heads, vocab 8192,
# 110 MB of weights), generated once into --models (default bench/models/generate_bench_1024, ignored by git).
# Sides: ort   node tests/ort/generate.js (intraOpNumThreads N, graphOptimizationLevel all)
#        cpu   build/bin/epctx_generate (the CPU EP)
#        aotcpu build/bin/epctx_generate --ep-lib build/lib/libepctx_aotcpu.so --ep AotCpuExecutionProvider (JIT; the
#              shapes are free, so AotCpu takes what it takes today and the rest runs on the CPU EP)
#        aotcpu_pinned (not in the default --sides) the same with --prefill-dim seq:<prompt length>: AotCpu compiles
#              prefill for that length; decode stays free
#        aotcpu_dynamic (not in the default --sides) AotCpu with ep.aotcpuexecutionprovider.dynamic_shapes=1: both
#              graphs with seq/past free, every new shape (each decode step) bound and compiled at run time
#        aotcpu_dynamic_ctx (not in the default --sides) the same from one _ctx.onnx per graph, compiled once before the
#              repetitions with the dims free and a profile at the prompt length (weights packed into the binary)
# Per repetition (R, default 3), each side in turn as fresh processes (the order rotates every repetition):
#   one generation (prompt L, default 128, seeded LCG prompt shared by both tools; T tokens, default 256: prefill +
#   T-1 decode steps with past L..L+T-2), then a prefill-only run (--tokens 1) at each of --prefill-lens, the same
#   prompt definition on every side. Every process runs --warmup W (default 1) untimed prefill + decode first.
# Report (medians over the R processes of each process's value): session creation, prefill at L, decode ms per token
# overall and per past-length bucket of B (default 64: 1-64, 65-128, ...), prefill at each length, ratios ORT / epctx
# (> 1: epctx faster), and whether the sides generated the same tokens. Saved as
# bench/results/generate_<date>[-S].md (+ .json with every raw line); --quick: 1 process, 32 tokens, prompt 32,
# prefill 16,64, written under /tmp/epctx-generate-quick (a smoke test, not a measurement).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY=/usr/bin/python3
CMDLINE="bench/run_generate_bench.sh $*"

THREADS=2
REPS=3
TOKENS=256
PROMPT_LEN=128
PREFILL_LENS="32,128,512"
WARMUP=1
BUCKET=64
SIDES="ort,cpu,aotcpu"
MODELS="$ROOT/bench/models/generate_bench_1024"
BUILD="${EPCTX_BUILD_DIR:-build}"
OUT_DIR=""
SUFFIX=""
SAVE=1
REGEN=0
QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --threads) THREADS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --tokens) TOKENS="$2"; shift 2 ;;
    --prompt-len) PROMPT_LEN="$2"; shift 2 ;;
    --prefill-lens) PREFILL_LENS="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --bucket) BUCKET="$2"; shift 2 ;;
    --sides) SIDES="$2"; shift 2 ;;
    --models) MODELS="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    --out-dir) OUT_DIR="$2"; shift 2 ;;
    --suffix) SUFFIX="$2"; shift 2 ;;
    --no-save) SAVE=0; shift ;;
    --regen) REGEN=1; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "run_generate_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ "$QUICK" = 1 ]; then
  # Only the values not given explicitly change.
  grep -q -- '--reps' <<<"$CMDLINE" || REPS=1
  grep -q -- '--tokens' <<<"$CMDLINE" || TOKENS=32
  grep -q -- '--prompt-len' <<<"$CMDLINE" || PROMPT_LEN=32
  grep -q -- '--prefill-lens' <<<"$CMDLINE" || PREFILL_LENS="16,64"
  [ -n "$OUT_DIR" ] || OUT_DIR=/tmp/epctx-generate-quick
fi
for v in THREADS REPS TOKENS PROMPT_LEN WARMUP BUCKET; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || { echo "run_generate_bench: --${v,,} needs a number, got '${!v}'" >&2; exit 2; }
done
[ "$REPS" -ge 1 ] && [ "$TOKENS" -ge 1 ] && [ "$PROMPT_LEN" -ge 1 ] && [ "$BUCKET" -ge 1 ] \
  || { echo "run_generate_bench: --reps, --tokens, --prompt-len and --bucket must be >= 1" >&2; exit 2; }
[[ "$PREFILL_LENS" =~ ^([0-9]+(,[0-9]+)*)?$ ]] || { echo "run_generate_bench: --prefill-lens takes e.g. 32,128,512" >&2; exit 2; }
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
GEN="$BUILD/bin/epctx_generate"
AOT_LIB="$BUILD/lib/libepctx_aotcpu.so"
ORT_DIR="$ROOT/tests/ort"
MAX_SEQ=1024

IFS=',' read -r -a SIDE_LIST <<<"$SIDES"
for s in "${SIDE_LIST[@]}"; do
  case "$s" in
    ort|cpu|aotcpu|aotcpu_pinned|aotcpu_dynamic|aotcpu_dynamic_ctx) ;;
    *) echo "run_generate_bench: unknown side '$s' (ort, cpu, aotcpu, aotcpu_pinned, aotcpu_dynamic, aotcpu_dynamic_ctx)" >&2
       exit 2 ;;
  esac
done
IFS=',' read -r -a PLENS <<<"$PREFILL_LENS"
for n in "$PROMPT_LEN" "${PLENS[@]}"; do
  [ "$n" -ge 1 ] && [ "$n" -le "$MAX_SEQ" ] || { echo "run_generate_bench: prompt length $n outside 1..$MAX_SEQ" >&2; exit 2; }
done
[ $((PROMPT_LEN + TOKENS - 1)) -le "$MAX_SEQ" ] \
  || { echo "run_generate_bench: prompt $PROMPT_LEN + $TOKENS tokens passes the model's $MAX_SEQ positions" >&2; exit 2; }
if [[ ",$SIDES," == *",cpu,"* || ",$SIDES," == *",aotcpu"* ]]; then
  [ -x "$GEN" ] || { echo "run_generate_bench: $GEN is missing: build first (scripts/build.sh)" >&2; exit 2; }
fi
if [[ ",$SIDES," == *",aotcpu"* ]] && [ ! -f "$AOT_LIB" ]; then
  echo "run_generate_bench: $AOT_LIB is missing: build first" >&2; exit 2
fi

# onnxruntime-node 1.30.0 (bundled CPU binaries; the postinstall script is not needed)
if [[ ",$SIDES," == *",ort,"* ]] && ! (cd "$ORT_DIR" && node -e \
     "process.exit(require('onnxruntime-node').env.versions.common === '1.30.0' ? 0 : 1)") 2>/dev/null; then
  echo "run_generate_bench: installing onnxruntime-node 1.30.0"
  (cd "$ORT_DIR" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi

if [ "$REGEN" = 1 ] || [ ! -f "$MODELS/decode.onnx" ] || [ ! -f "$MODELS/prefill.onnx" ]; then
  echo "run_generate_bench: generating the bench decoder (max-seq $MAX_SEQ) into $MODELS" >&2
  mkdir -p "$MODELS"
  PYTHONDONTWRITEBYTECODE=1 "$PY" "$ROOT/tests/models/make_decoder.py" --out "$MODELS" --preset bench \
    --max-seq "$MAX_SEQ" >&2
fi
PREFILL="$MODELS/prefill.onnx"
DECODE="$MODELS/decode.onnx"
# aotcpu_dynamic_ctx: each graph compiled once with its dims free (a profile at the prompt length packs the weights
# into the binary), beside the models; the timed processes load the two _ctx.onnx.
if [[ ",$SIDES," == *",aotcpu_dynamic_ctx,"* ]]; then
  EPCTX_CLI="$(dirname "$GEN")/epctx"
  past=""
  for i in 0 1 2 3 4 5; do past+="${past:+;}past_key_$i:1x8x${PROMPT_LEN}x64;past_value_$i:1x8x${PROMPT_LEN}x64"; done
  "$EPCTX_CLI" compile -e aotcpu -i "dynamic_shapes|1 shape_profiles|input_ids:1x$PROMPT_LEN" "$PREFILL" \
    -o "$MODELS/prefill_dyn_ctx.onnx" >&2
  "$EPCTX_CLI" compile -e aotcpu -i "dynamic_shapes|1 shape_profiles|$past" "$DECODE" -o "$MODELS/decode_dyn_ctx.onnx" >&2
fi

LOAD_START="$(cut -d" " -f1-3 /proc/loadavg)"
RAW="$(mktemp)"
ERR="$(mktemp)"
trap 'rm -f "$RAW" "$ERR"' EXIT

# One process of one side; appends {"kind","side","rep","len","result"|"error"} to RAW.
run_side() {  # side rep kind prompt_len tokens
  local side=$1 rep=$2 kind=$3 len=$4 tokens=$5 line rc=0
  local args=(--prefill "$PREFILL" --decode "$DECODE" --prompt-len "$len" --seed 1 --tokens "$tokens"
              --threads "$THREADS" --warmup "$WARMUP" --json)
  case "$side" in
    ort) line=$(cd "$ORT_DIR" && node generate.js "${args[@]}" --opt all 2>"$ERR" </dev/null) || rc=$? ;;
    cpu) line=$("$GEN" "${args[@]}" 2>"$ERR" </dev/null) || rc=$? ;;
    aotcpu) line=$("$GEN" "${args[@]}" --ep-lib "$AOT_LIB" --ep AotCpuExecutionProvider --report 2>"$ERR" </dev/null) \
              || rc=$? ;;
    aotcpu_pinned) line=$("$GEN" "${args[@]}" --ep-lib "$AOT_LIB" --ep AotCpuExecutionProvider --report \
                          --prefill-dim "seq:$len" 2>"$ERR" </dev/null) || rc=$? ;;
    aotcpu_dynamic) line=$("$GEN" "${args[@]}" --ep-lib "$AOT_LIB" --ep AotCpuExecutionProvider --report \
                           -C ep.aotcpuexecutionprovider.dynamic_shapes=1 2>"$ERR" </dev/null) || rc=$? ;;
    aotcpu_dynamic_ctx)
      args[1]="$MODELS/prefill_dyn_ctx.onnx"
      args[3]="$MODELS/decode_dyn_ctx.onnx"
      line=$("$GEN" "${args[@]}" --ep-lib "$AOT_LIB" --ep AotCpuExecutionProvider --report \
             -C session.disable_model_compile=1 2>"$ERR" </dev/null) || rc=$? ;;
  esac
  line=$(grep '^{' <<<"$line" | tail -n 1 || true)
  if [ "$rc" = 0 ] && [ -n "$line" ]; then
    echo "{\"kind\":\"$kind\",\"side\":\"$side\",\"rep\":$rep,\"len\":$len,\"result\":$line}" >>"$RAW"
  else
    local msg
    msg=$(grep -v -i '^warning' "$ERR" | head -c 300 | tr '\n"\\' '   ')
    echo "{\"kind\":\"$kind\",\"side\":\"$side\",\"rep\":$rep,\"len\":$len,\"error\":\"exit $rc: $msg\"}" >>"$RAW"
    echo "run_generate_bench: $side $kind (len $len) failed: exit $rc: $msg" >&2
  fi
}

N=${#SIDE_LIST[@]}
echo "run_generate_bench: $REPS x {${SIDES}}: prompt $PROMPT_LEN + $TOKENS tokens, prefill at ${PREFILL_LENS:-none}," \
     "$THREADS threads, warmup $WARMUP" >&2
for ((r = 0; r < REPS; r++)); do
  for ((k = 0; k < N; k++)); do
    side=${SIDE_LIST[$(((k + r) % N))]}  # the order rotates so that drift hits every side alike
    echo "run_generate_bench: rep $((r + 1))/$REPS $side" >&2
    run_side "$side" "$r" gen "$PROMPT_LEN" "$TOKENS"
    for p in "${PLENS[@]}"; do run_side "$side" "$r" prefill "$p" 1; done
  done
done
LOAD_END="$(cut -d" " -f1-3 /proc/loadavg)"

OUTFILE=""
if [ "$SAVE" = 1 ]; then
  dir="${OUT_DIR:-$ROOT/bench/results}"
  mkdir -p "$dir"
  OUTFILE="$dir/generate_$(date +%Y-%m-%d)${SUFFIX:+-$SUFFIX}.md"
fi
COMMIT="$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$(cd "$ROOT" && git diff --quiet 2>/dev/null || echo '+dirty')"
CPU="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
ENVVARS="$(env | grep -E '^(OMP_|GOMP_|KMP_|DNNL_|ONEDNN_|EPCTX_)' | tr '\n' ' ' || true)"

RAW="$RAW" OUTFILE="$OUTFILE" CMDLINE="$CMDLINE" THREADS="$THREADS" REPS="$REPS" TOKENS="$TOKENS" \
PROMPT_LEN="$PROMPT_LEN" BUCKET="$BUCKET" WARMUP="$WARMUP" SIDES="$SIDES" LOAD_START="$LOAD_START" \
LOAD_END="$LOAD_END" COMMIT="$COMMIT" CPU="$CPU" ENVVARS="$ENVVARS" MODELS="$MODELS" QUICK="$QUICK" \
"$PY" - <<'PYEOF'
import datetime
import json
import os
import statistics

E = os.environ
raw = [json.loads(line) for line in open(E["RAW"]) if line.strip()]
sides = E["SIDES"].split(",")
bucket = int(E["BUCKET"])
names = {"ort": "ORT 1.30", "cpu": "epctx CPU EP", "aotcpu": "epctx AotCpu (JIT)",
         "aotcpu_pinned": "epctx AotCpu (JIT, prefill seq pinned)",
         "aotcpu_dynamic": "epctx AotCpu (JIT, dynamic_shapes=1)",
         "aotcpu_dynamic_ctx": "epctx AotCpu (one dynamic _ctx.onnx per graph)"}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=2):
    return "n/a" if x is None else f"{x:.{nd}f}"


def ratio(o, e):
    return "n/a" if o is None or e is None or e == 0 else f"{o / e:.2f}"


gen = {s: [r for r in raw if r["kind"] == "gen" and r["side"] == s and "result" in r] for s in sides}
errors = [r for r in raw if "error" in r]


def per_process(s, f):
    return med([f(r["result"]) for r in gen[s]])


def bucket_of(p):
    return (p - 1) // bucket if p > 0 else 0


def bucket_medians(s):
    """{bucket: median over processes of each process's median in the bucket}"""
    per = {}
    for r in gen[s]:
        res = r["result"]
        groups = {}
        for ms, p in zip(res["decode_ms"], res["past_lens"]):
            groups.setdefault(bucket_of(p), []).append(ms)
        for b, xs in groups.items():
            per.setdefault(b, []).append(statistics.median(xs))
    return {b: statistics.median(v) for b, v in per.items()}


rows = {}
for s in sides:
    rows[s] = {
        "creation": per_process(s, lambda j: j["session_creation_ms"]),
        "prefill": per_process(s, lambda j: j["prefill_ms"]),
        "decode": per_process(s, lambda j: statistics.median(j["decode_ms"]) if j["decode_ms"] else None),
        "decode_p90": per_process(s, lambda j: sorted(j["decode_ms"])[max(0, -(-len(j["decode_ms"]) * 9 // 10) - 1)]
                                  if j["decode_ms"] else None),
        "tok_s": per_process(s, lambda j: 1000.0 * len(j["decode_ms"]) / sum(j["decode_ms"]) if j["decode_ms"] else None),
        "rss": per_process(s, lambda j: j["peak_rss_mb"]),
        "buckets": bucket_medians(s),
        "n": len(gen[s]),
    }
epctx_sides = [s for s in sides if s != "ort"]
out = []
p = out.append
p(f"# Greedy generation: epctx vs ONNX Runtime 1.30{' (--quick smoke run, not a measurement)' if E['QUICK'] == '1' else ''}")
p("")
p(f"- command: `{E['CMDLINE']}`")
p(f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}, commit {E['COMMIT']}")
p(f"- CPU: {E['CPU']}, {os.cpu_count()} cores; load average at start {E['LOAD_START']}, at end {E['LOAD_END']}")
la = max(float(E["LOAD_START"].split()[0]), float(E["LOAD_END"].split()[0]))
if la > (os.cpu_count() or 1) / 4:
    p(f"- **warning**: the 1-minute load average ({la}) exceeded a quarter of the cores: the numbers are not worth reading")
if E["ENVVARS"].strip():
    p(f"- environment: `{E['ENVVARS'].strip()}`")
p(f"- model: `{E['MODELS']}` (make_decoder.py --preset bench --max-seq 1024)")
p(f"- prompt {E['PROMPT_LEN']} (seeded LCG, seed 1) + {E['TOKENS']} tokens (prefill + {int(E['TOKENS']) - 1} decode "
  f"steps), {E['THREADS']} threads, warmup {E['WARMUP']}, {E['REPS']} fresh processes per side; "
  "ORT: graphOptimizationLevel all, interOpNumThreads 1")
p("- values: median over the processes of each process's value (decode: the median over its steps); "
  "ratios ORT / epctx (> 1: epctx faster)")
p("")
ratio_sides = epctx_sides if "ort" in sides else []


def table_row(cells):
    p("| " + " | ".join(cells) + " |")


table_row([""] + [names[s] for s in sides] + [f"ORT / {names[s]}" for s in ratio_sides])
p("|" + "---|" * (1 + len(sides) + len(ratio_sides)))


def line(label, key, nd=2):
    vals = [rows[s][key] for s in sides]
    table_row([label] + [fmt(v, nd) for v in vals] + [ratio(rows["ort"][key], rows[s][key]) for s in ratio_sides])


line("session creation ms (prefill + decode)", "creation")
line(f"prefill ms (prompt {E['PROMPT_LEN']})", "prefill")
line("decode ms / token, median", "decode", 3)
line("decode ms / token, p90", "decode_p90", 3)
all_b = sorted({b for s in sides for b in rows[s]["buckets"]})
for b in all_b:
    vals = [rows[s]["buckets"].get(b) for s in sides]
    table_row([f"decode ms / token, past {b * bucket + 1}-{(b + 1) * bucket}"] + [fmt(v, 3) for v in vals] +
              [ratio(rows["ort"]["buckets"].get(b), rows[s]["buckets"].get(b)) for s in ratio_sides])
table_row(["decode tokens / s (steps / their summed time)"] + [fmt(rows[s]["tok_s"], 1) for s in sides] +
          [ratio(rows[s]["tok_s"], rows["ort"]["tok_s"]) for s in ratio_sides])
line("peak RSS MB (ORT's includes Node.js)", "rss", 1)
p("")

plens = sorted({r["len"] for r in raw if r["kind"] == "prefill"})
if plens:
    p("Prefill alone (`--tokens 1`, after the warm-up), the same seeded prompt on every side:")
    p("")
    table_row(["prompt"] + [names[s] + " ms" for s in sides] + [f"ORT / {names[s]}" for s in ratio_sides])
    p("|" + "---|" * (1 + len(sides) + len(ratio_sides)))
    for n in plens:
        m = {s: med([r["result"]["prefill_ms"] for r in raw if r["kind"] == "prefill" and r["side"] == s
                     and r["len"] == n and "result" in r]) for s in sides}
        table_row([str(n)] + [fmt(m[s]) for s in sides] + [ratio(m["ort"], m[s]) for s in ratio_sides])
    p("")

for s in sides:
    rep = next((r["result"]["session_reports"] for r in gen[s] if "session_reports" in r["result"]), None)
    if rep:
        parts = []
        for which in ("prefill", "decode"):
            eps = {}
            for part in rep[which].get("partitions", []):
                eps.setdefault(part["ep"], [0, 0])
                eps[part["ep"]][0] += 1
                eps[part["ep"]][1] += part["nodes"]
            took = ", ".join(f"{ep}: {n} partition(s), {k} nodes" for ep, (n, k) in eps.items()) or "no EP partition"
            parts.append(f"{which}: {took}, {rep[which].get('cpu_nodes', '?')} nodes on the CPU EP")
        p(f"{names[s]} (session report): " + "; ".join(parts) + ".")
        p("")

toks = {s: [tuple(r["result"]["tokens"]) for r in gen[s]] for s in sides}
ref = next((t[0] for t in toks.values() if t), None)
same = all(all(x == ref for x in t) for t in toks.values())
first_diff = ""
if not same and ref is not None:
    for s, t in toks.items():
        for x in t:
            if x != ref:
                k = next((i for i, (a, b) in enumerate(zip(x, ref)) if a != b), min(len(x), len(ref)))
                first_diff = f" (first difference: {names[s]} at token {k})"
                break
        if first_diff:
            break
p(f"Generated tokens identical on every side and process: **{'yes' if same else 'no'}**{first_diff}. "
  "(Not asserted here; ORT runs its optimized graph, so a near-tie in the logits may flip an argmax. "
  "`ctest -R generate_matches_ort` checks the tokens and logits step by step.)")
if errors:
    p("")
    p("Failed processes:")
    for r in errors:
        p(f"- {names.get(r['side'], r['side'])} {r['kind']} (len {r['len']}), rep {r['rep']}: {r['error']}")
text = "\n".join(out) + "\n"
print(text)
if E["OUTFILE"]:
    with open(E["OUTFILE"], "w") as f:
        f.write(text)
    with open(E["OUTFILE"][:-3] + ".json", "w") as f:
        json.dump(raw, f)
    print(f"run_generate_bench: wrote {E['OUTFILE']} and {E['OUTFILE'][:-3]}.json")
PYEOF
