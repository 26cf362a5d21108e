#!/usr/bin/env bash
# One generated opset case through AotCpu's context model (CTest's opset_aotcpu_ctx_<case>):
#
#   tests/opset/aotcpu_ctx_case.sh EPCTX CASE_DIR OUT_DIR --rtol R --atol A
#
# `epctx compile -e aotcpu` writes OUT_DIR/model.onnx (with OUT_DIR/model_aotcpu.bin when AotCpu took nodes); the
# case's test data is linked beside it; a new session that may not compile (session.disable_model_compile=1) loads
# the context model and must give ONNX Runtime's outputs. The zoo's tests/zoo/zoo_ctx_test.sh does the same for
# big models, and also counts EPContext nodes in control-flow bodies and tries the embedded binary.
set -euo pipefail
if [ $# -lt 3 ]; then echo "usage: $0 EPCTX CASE_DIR OUT_DIR [--rtol R --atol A]" >&2; exit 2; fi
EPCTX="$1" CASE="$2" OUT="$3"
shift 3
[ -f "$CASE/model.onnx" ] || { echo "aotcpu_ctx_case: $CASE/model.onnx is missing (make_test_models makes it)" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
"$EPCTX" compile -e aotcpu "$CASE/model.onnx" -o "$OUT/model.onnx" >"$OUT/compile.log" 2>&1 || { cat "$OUT/compile.log" >&2; exit 1; }
for d in "$CASE"/test_data_set_*; do ln -s "$(cd "$d" && pwd)" "$OUT/$(basename "$d")"; done
"$EPCTX" test -e aotcpu -C "session.disable_model_compile|1" "$@" "$OUT"
