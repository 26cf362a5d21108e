#!/usr/bin/env bash
# Which generated opset cases AotCpu compiles, and why it leaves the others to the CPU EP (docs/opsets.md, "AotCpu").
#
#   tests/opset/aotcpu_claims.sh EPCTX CASES_DIR [OUT_DIR]
#
# For each CASES_DIR/<case>/model.onnx: `epctx compile -e aotcpu`, then `epctx inspect` of the context model. Prints
# one line per op version, "<op>-<version> <claimed>/<cases> <reason a case was left, if any>", then the totals. A
# case counts as claimed when its context model holds an EPContext node. Information only: correctness is the
# opset_aotcpu_jit_* and opset_aotcpu_ctx_* tests' job.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 EPCTX CASES_DIR [OUT_DIR]" >&2; exit 2; fi
EPCTX="$1" CASES="$2" OUT="${3:-$(mktemp -d)}"
mkdir -p "$OUT"
declare -A total claimed reason
for dir in "$CASES"/*/; do
  c="$(basename "$dir")"
  [ -f "$dir/model.onnx" ] || continue
  key="$(echo "$c" | sed -E 's/^([A-Za-z]+)_([0-9]+)_.*/\1-\2/')"
  total[$key]=$(( ${total[$key]:-0} + 1 ))
  mkdir -p "$OUT/$c"
  if ! "$EPCTX" compile -e aotcpu -o "$OUT/$c/model.onnx" "$dir/model.onnx" >"$OUT/$c/compile.log" 2>&1; then
    reason[$key]="${reason[$key]:-compile failed: $(tail -1 "$OUT/$c/compile.log" | cut -c1-120)}"
    continue
  fi
  "$EPCTX" inspect "$OUT/$c/model.onnx" >"$OUT/$c/inspect.txt" 2>&1 || true
  if grep -q '^EPContext nodes: [1-9]' "$OUT/$c/inspect.txt"; then
    claimed[$key]=$(( ${claimed[$key]:-0} + 1 ))
  else
    why="$(grep -A1 'nodes left on the CPU EP' "$OUT/$c/inspect.txt" | tail -1 |
           sed -E 's/^ *[0-9]+ nodes? //; s/AotCpuExecutionProvider: //' | cut -c1-140)"
    reason[$key]="${reason[$key]:-$why}"
  fi
done
all=0 some=0
for key in $(printf '%s\n' "${!total[@]}" | sort); do
  n=${total[$key]} k=${claimed[$key]:-0}
  all=$(( all + n )) some=$(( some + k ))
  echo "$key $k/$n ${reason[$key]:-}"
done
echo "total: AotCpu compiles $some of $all cases"
