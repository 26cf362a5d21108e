#!/usr/bin/env bash
# The performance differential tester (tests/perftest/perftest.py, issue 24): realistic generated subgraphs timed on
# ONNX Runtime 1.30 (tests/ort/perf_worker.js), AotCpu from _ctx.onnx and the CPU EP, taking turns in one run; slow
# graphs are shrunk and saved under bench/perf_regress/ with their profile. Summary: perftest-out/ (--out DIR).
#   scripts/perftest.sh [--seed S] [--count N | --minutes M] [--classes a,b] [--out DIR] [--no-shrink] [--smoke] [--save]
#   scripts/perftest.sh --model FILE.onnx|bench/perf_regress/CASE [--shrink]
# Uses the build in $EPCTX_BUILD_DIR (default build/), Debian's /usr/bin/python3 (numpy, onnx) and onnxruntime-node
# in tests/ort/node_modules (installed by scripts/install_ort.sh when missing). Measure on an idle machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD=${EPCTX_BUILD_DIR:-build}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
if [ ! -d "$BUILD/python/epctx" ] || [ ! -x "$BUILD/bin/epctx" ]; then
  echo "perftest.sh: no build in $BUILD (python/epctx and bin/epctx; run scripts/build.sh first)" >&2
  exit 1
fi
if [ ! -d "$ROOT/tests/ort/node_modules/onnxruntime-node" ]; then
  bash "$ROOT/scripts/install_ort.sh"
fi
exec env EPCTX_BUILD_DIR="$BUILD" PYTHONPATH="$BUILD/python" PYTHONDONTWRITEBYTECODE=1 \
  /usr/bin/python3 "$ROOT/tests/perftest/perftest.py" "$@"
