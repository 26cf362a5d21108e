#!/usr/bin/env bash
# One zoo model through AotCpu's context model: compile, then test the _ctx.onnx against ONNX Runtime's outputs.
#
#   tests/zoo/zoo_ctx_test.sh EPCTX CASE_DIR OUT_DIR EMBED [-f name:value ...] [--input-shape name:1x512 ...]
#                             --rtol R --atol A [--outputs a,b]
#
# 1. `epctx compile -e aotcpu -f ... CASE_DIR/model.onnx -o OUT_DIR/model.onnx [--embed]` (EMBED 0: the binary
#    OUT_DIR/model_aotcpu.bin beside it; 1: inside the EPContext nodes),
# 2. links CASE_DIR's test_data_set_* into OUT_DIR and prints what the ctx model holds (epctx inspect),
# 3. `epctx test -e aotcpu -C "session.disable_model_compile|1" -f ... --rtol R --atol A OUT_DIR`: a new session loads
#    the ctx model and must give ONNX Runtime's outputs. The -f pins reach the nodes the ctx model left on the CPU EP.
#    With compilation disabled, a partition the compile did not write as an EPContext node (e.g. one inside an If
#    branch, issue 13) is claimed again and fails the load (MODEL_REQUIRES_COMPILATION) instead of silently running
#    uncompiled: the ctx model must hold every partition JIT compiles.
set -euo pipefail
if [ $# -lt 4 ]; then echo "usage: $0 EPCTX CASE_DIR OUT_DIR EMBED [epctx test flags...]" >&2; exit 2; fi
EPCTX="$1" CASE="$2" OUT="$3" EMBED="$4"
shift 4
# Flags: -f and --input-shape pins go to compile and test, --rtol/--atol/--outputs only to test.
compile_flags=() test_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    -f|--input-shape) compile_flags+=("$1" "$2"); test_flags+=("$1" "$2"); shift 2 ;;
    --rtol|--atol|--outputs) test_flags+=("$1" "$2"); shift 2 ;;
    *) echo "zoo_ctx_test: unknown flag '$1'" >&2; exit 2 ;;
  esac
done
[ -f "$CASE/model.onnx" ] || { echo "zoo_ctx_test: $CASE/model.onnx is missing (ctest -R zoo_cases makes it)" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
embed=()
[ "$EMBED" = 1 ] && embed=(--embed)
"$EPCTX" compile -e aotcpu "${compile_flags[@]}" "${embed[@]}" "$CASE/model.onnx" -o "$OUT/model.onnx"
# `epctx inspect` counts the main graph's EPContext nodes; this counts all of them, control-flow bodies included
# (the Silero VAD models hold every partition inside If branches).
nodes="$(/usr/bin/python3 - "$OUT/model.onnx" <<'PY'
import sys, onnx
def count(g):
    return sum((n.op_type == "EPContext") + sum(count(a.g) for a in n.attribute if a.HasField("g")) for n in g.node)
print(count(onnx.load(sys.argv[1], load_external_data=False).graph))
PY
)"
if [ "$EMBED" = 0 ] && [ ! -f "$OUT/model_aotcpu.bin" ] && [ "$nodes" -gt 0 ]; then
  echo "zoo_ctx_test: the ctx model has $nodes EPContext nodes but $OUT/model_aotcpu.bin was not written" >&2
  exit 1
fi
for d in "$CASE"/test_data_set_*; do ln -s "$(cd "$d" && pwd)" "$OUT/$(basename "$d")"; done
"$EPCTX" inspect "$OUT/model.onnx" | grep -E '^(EPContext nodes|CPU nodes|warning)' || true
echo "EPContext nodes in all graphs: $nodes"
"$EPCTX" test -e aotcpu -C "session.disable_model_compile|1" "${test_flags[@]}" "$OUT"
