#!/usr/bin/env bash
# Generates the project's own test models and their ONNX Runtime 1.30 reference outputs.
#
#   scripts/make_test_models.sh OUTDIR
#
# 1. installs onnxruntime-node 1.30.0 into tests/ort/node_modules if missing (npm ci --ignore-scripts: the package
#    bundles its linux-x64 CPU binaries; its postinstall script only fetches optional CUDA binaries),
# 2. writes OUTDIR/{prefill.onnx, decode.onnx, decoder.weights} (small preset) and OUTDIR/cnn.onnx (64x64),
# 3. writes ONNX backend test cases OUTDIR/cases/{decoder_prefill, decoder_decode, cnn} whose expected outputs are
#    computed by onnxruntime-node,
# 4. writes OUTDIR/opset/<case>: the opset 18-26 conformance cases (tests/opset/gen.py), outputs by onnxruntime-node.
# Idempotent (regenerates everything, deterministic seeds), a few seconds.
set -euo pipefail
if [ $# -ne 1 ]; then echo "usage: $0 OUTDIR" >&2; exit 2; fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$1"
PY=/usr/bin/python3

bash "$ROOT/scripts/install_ort.sh"

mkdir -p "$OUT"
"$PY" "$ROOT/tests/models/make_decoder.py" --out "$OUT"
"$PY" "$ROOT/tests/models/make_cnn.py" --out "$OUT" --size 64
"$PY" "$ROOT/tests/models/make_cases.py" --models "$OUT"
PYTHONDONTWRITEBYTECODE=1 "$PY" "$ROOT/tests/opset/gen.py" cases --out "$OUT/opset"
echo "make_test_models: done -> $OUT (test with: build/bin/epctx test $OUT/cases)"
