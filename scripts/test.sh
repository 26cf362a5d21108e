#!/usr/bin/env bash
# The test command: installs what is missing (Debian 12), builds, generates the test models and their ONNX Runtime
# reference outputs, and runs every test (unit, end-to-end, conformance, models vs ONNX Runtime, CLI) with CTest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j2 --timeout 1200 "$@"
