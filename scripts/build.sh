#!/usr/bin/env bash
# Configures (once) and builds epctx into build/ with CMake + Ninja (+ ccache when present).
#   EPCTX_SANITIZE=1 scripts/build.sh        -> ASan+UBSan build in build-asan/
#   EPCTX_SANITIZE=thread scripts/build.sh   -> ThreadSanitizer build in build-tsan/ (docs/reliability.md)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD=${EPCTX_BUILD_DIR:-build}
ARGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
if [ "${EPCTX_SANITIZE:-0}" = 1 ]; then BUILD=${EPCTX_BUILD_DIR:-build-asan}; ARGS+=(-DEPCTX_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo); fi
if [ "${EPCTX_SANITIZE:-0}" = thread ]; then BUILD=${EPCTX_BUILD_DIR:-build-tsan}; ARGS+=(-DEPCTX_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo); fi
[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" "${ARGS[@]}"
cmake --build "$BUILD"
# The Python package: `import epctx` for /usr/bin/python3 (and a same-ABI python3 on PATH) points at build/python.
if [ -z "${EPCTX_BUILD_DIR:-}" ] && [ "${EPCTX_SANITIZE:-0}" = 0 ]; then bash scripts/install_python.sh "$BUILD"; fi
