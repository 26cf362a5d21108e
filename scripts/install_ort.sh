#!/usr/bin/env bash
# Installs the reference runtime, onnxruntime-node 1.30.0, into tests/ort/node_modules when it is missing or another
# version (npm ci --ignore-scripts from tests/ort/package-lock.json: the package ships its native binaries, no
# download at install time). Used by scripts/make_test_models.sh (the tests) and scripts/demo.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ORT_DIR="$ROOT/tests/ort"

ort_ok() {
  (cd "$ORT_DIR" && node -e "
    const v = require('onnxruntime-node').env.versions.node;
    if (v !== '1.30.0') { console.error('onnxruntime-node ' + v + ' != 1.30.0'); process.exit(1); }" ) 2>/dev/null
}

command -v node >/dev/null || { echo "install_ort: node is missing (scripts/setup.sh installs it)" >&2; exit 1; }
if ! ort_ok; then
  echo "install_ort: installing onnxruntime-node 1.30.0 into tests/ort/node_modules"
  (cd "$ORT_DIR" && { npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
      || npm install --ignore-scripts --no-audit --no-fund --loglevel=error --no-save onnxruntime-node@1.30.0; })
  if ! ort_ok; then
    echo "install_ort: onnxruntime-node 1.30.0 does not load (see: cd tests/ort && node -e \"require('onnxruntime-node')\")" >&2
    exit 1
  fi
fi
