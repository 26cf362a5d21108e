#!/usr/bin/env bash
# The demo: installs what is missing, builds, generates the sample models, and runs the CNN and the decoder's
# prefill graph on epctx's CPU EP, printing outputs and timings.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
bash scripts/build.sh
MODELS=build/test-models
bash scripts/make_test_models.sh "$MODELS" >/dev/null
echo "== CNN (1x3x64x64) on the CPU EP, inputs from its test case"
build/bin/epctx run "$MODELS/cnn.onnx" --inputs "$MODELS/cases/cnn/test_data_set_0"
echo
echo "== decoder prefill (external weights mapped from decoder.weights)"
build/bin/epctx run "$MODELS/prefill.onnx" --inputs "$MODELS/cases/decoder_prefill/test_data_set_0"
echo
echo "== the same cases checked against ONNX Runtime 1.30's outputs"
build/bin/epctx test --rtol 1e-4 --atol 1e-5 "$MODELS/cases"
echo
echo "== steady-state timing of the CNN"
build/bin/epctx perf -r 50 --inputs "$MODELS/cases/cnn/test_data_set_0" "$MODELS/cnn.onnx"
