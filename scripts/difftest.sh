#!/usr/bin/env bash
# The AotCpu differential tester (tests/difftest/difftest.py): random valid models on the CPU EP and on AotCpu
# (JIT, _ctx.onnx embed 0 and 1); failures are shrunk and saved (default folder: difftest-out/).
#   scripts/difftest.sh [--seed S] [--count N | --minutes M] [--out DIR] [--threads T] [--no-shrink]
# Uses the build in $EPCTX_BUILD_DIR (default build/) and Debian's /usr/bin/python3 (numpy, onnx).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD=${EPCTX_BUILD_DIR:-build}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
if [ ! -d "$BUILD/python/epctx" ]; then
  echo "difftest.sh: no Python package in $BUILD/python (run scripts/build.sh first)" >&2
  exit 1
fi
ARGS=("$@")
if ! printf '%s\n' "${ARGS[@]}" | grep -qx -- '--out'; then ARGS+=(--out "$ROOT/difftest-out"); fi
exec env PYTHONPATH="$BUILD/python" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 "$ROOT/tests/difftest/difftest.py" "${ARGS[@]}"
