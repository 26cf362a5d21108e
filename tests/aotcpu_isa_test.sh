#!/usr/bin/env bash
# AotCpu compatibility across ISAs, through the CLI (each case needs a fresh process: oneDNN's ISA limit is fixed
# at its first use). A smaller host is emulated with EPCTX_AOTCPU_HOST_ISA (docs/aotcpu.md).
#
#   tests/aotcpu_isa_test.sh EPCTX_CLI TEST_MODELS_DIR
#
# LOW is the level below this host's: avx2 on an AVX-512 host, avx on an avx2-only host (the test runs on both kinds).
# 1. compiled on this host, loaded on an emulated LOW host: refused (FAIL from the compatibility metadata; and,
#    with the metadata removed, INVALID_GRAPH at load naming both ISAs);
# 2. cross-compiled for LOW (target_isa, a virtual device's level on AVX-512 hosts): runs on the emulated LOW host
#    with ORT's outputs, and on this host with verdict EP_SUPPORTED_PREFER_RECOMPILATION;
# 3. a bad EPCTX_AOTCPU_HOST_ISA is a clear error.
set -uo pipefail
EPCTX="$1"
MODELS="$2"
PY=/usr/bin/python3
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
FAILED=0
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
expect_contains() {  # text needle what
  if [[ "$1" != *"$2"* ]]; then fail "$3: expected '$2' in: $1"; fi
}

# A case folder whose model.onnx is a ctx model compiled from the CNN; test data from the project's CNN case.
make_case() {  # dir extra-args...
  local dir="$1"; shift
  mkdir -p "$dir"
  cp -r "$MODELS/cases/cnn/test_data_set_0" "$dir/"
  "$EPCTX" perf -e aotcpu -r 1 -C "ep.context_enable|1 ep.context_file_path|$dir/model.onnx" "$@" \
    "$MODELS/cnn.onnx" >/dev/null 2>"$dir.log" || fail "compile into $dir: $(cat "$dir.log")"
  [ -f "$dir/model.onnx" ] && [ -f "$dir/model_aotcpu.bin" ] || fail "compile into $dir wrote no ctx model/binary"
}

# 1. host binary on a smaller host
make_case "$WORK/host"
HOST_ISA=$("$EPCTX" inspect "$WORK/host/model.onnx" | sed -n 's/.*isa=\([a-z0-9_]*\).*/\1/p' | head -1)
echo "host ISA: $HOST_ISA"
[ -n "$HOST_ISA" ] || fail "no ISA in the generated model's compatibility info"
case "$HOST_ISA" in
  sse41|avx|avx2) LOW=avx ;;
  *) LOW=avx2 ;;
esac
echo "emulated lower host: $LOW"
[ "$HOST_ISA" != sse41 ] && [ "$HOST_ISA" != avx ] || fail "host ISA $HOST_ISA: no lower level to emulate"
out=$(EPCTX_AOTCPU_HOST_ISA=$LOW "$EPCTX" test -e aotcpu "$WORK/host" 2>&1)
expect_contains "$out" "Compiled model is not supported by execution provider: AotCpuExecutionProvider" "host binary, $LOW host"
expect_contains "$out" "0 passed, 1 failed" "host binary, $LOW host"
"$PY" - "$WORK/host/model.onnx" <<'EOF'
import sys, onnx
m = onnx.load(sys.argv[1])
del m.metadata_props[:]
onnx.save(m, sys.argv[1])
EOF
out=$(EPCTX_AOTCPU_HOST_ISA=$LOW "$EPCTX" test -e aotcpu "$WORK/host" 2>&1)
expect_contains "$out" "INVALID_GRAPH" "host binary without metadata, $LOW host"
expect_contains "$out" "Failed to load from EpContext model." "host binary without metadata, $LOW host"
expect_contains "$out" "compiled for $HOST_ISA but this CPU supports at most $LOW" "host binary without metadata"

# 2. cross-compiled for LOW
make_case "$WORK/low" -i "target_isa|$LOW"
out=$("$EPCTX" inspect "$WORK/low/model.onnx" 2>&1)
expect_contains "$out" "isa=$LOW" "cross-compiled metadata"
out=$(EPCTX_AOTCPU_HOST_ISA=$LOW "$EPCTX" test -e aotcpu --rtol 1e-4 --atol 1e-5 "$WORK/low" 2>&1)
expect_contains "$out" "1 passed, 0 failed" "$LOW binary on an $LOW host"
out=$(EPCTX_AOTCPU_HOST_ISA=$LOW "$EPCTX" perf -e aotcpu -v -r 1 "$WORK/low/model.onnx" 2>&1)
expect_contains "$out" '"compatibility":"EP_SUPPORTED_OPTIMAL"' "$LOW binary on an $LOW host"
out=$("$EPCTX" perf -e aotcpu -v -r 1 "$WORK/low/model.onnx" 2>&1)
expect_contains "$out" '"compatibility":"EP_SUPPORTED_PREFER_RECOMPILATION"' "$LOW binary on this host"
out=$("$EPCTX" test -e aotcpu --rtol 1e-4 --atol 1e-5 "$WORK/low" 2>&1)
expect_contains "$out" "1 passed, 0 failed" "$LOW binary on this host"

# 3. bad emulation requests
out=$(EPCTX_AOTCPU_HOST_ISA=avx9000 "$EPCTX" perf -e aotcpu -r 1 "$MODELS/cnn.onnx" 2>&1)
expect_contains "$out" "avx9000" "unknown emulated ISA"
out=$("$EPCTX" perf -e aotcpu -r 1 -i "target_isa|avx512_core_amx" "$MODELS/cnn.onnx" 2>&1)
if [ "$HOST_ISA" != avx512_core_amx ]; then expect_contains "$out" "avx512_core_amx" "target ISA above the host"; fi

echo "aotcpu_isa_test: $FAILED failed"
[ "$FAILED" = 0 ]
