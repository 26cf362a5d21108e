#!/usr/bin/env bash
# Checks the CLI contracts from the brief: `epctx test`'s closing line and exit code, `epctx perf --json`'s keys,
# and "epctx: <CODE>: <message>" on stderr with a non-zero exit (never a signal) for failures.
set -u
EPCTX=$1
MODELS=$2
D=/usr/share/libonnx-testdata/data/node
fails=0
check() {  # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

out=$("$EPCTX" test "$D/test_abs" "$D/test_relu"); rc=$?
check "test: passing run exits 0" [ $rc -eq 0 ]
check "test: closing line" [ "$(echo "$out" | tail -n1)" = "2 passed, 0 failed" ]

# A broken copy of a case: its expected output is altered, so the run must fail with a FAIL line.
cp -r "$D/test_abs" "$tmp/test_abs_broken"
cp "$D/test_relu/test_data_set_0/output_0.pb" "$tmp/test_abs_broken/test_data_set_0/output_0.pb"
out=$("$EPCTX" test "$tmp/test_abs_broken" "$D/test_abs"); rc=$?
check "test: failing run exits 1" [ $rc -eq 1 ]
check "test: failure line names the test" grep -q "^FAIL test_abs_broken: " <<<"$out"
check "test: closing line counts the failure" [ "$(echo "$out" | tail -n1)" = "1 passed, 1 failed" ]

echo "abs a name that matches no test skips nothing" > "$tmp/skips.txt"
out=$("$EPCTX" test --skip-list "$tmp/skips.txt" "$D/test_abs"); rc=$?
check "test: skip list matches whole names only" [ "$(echo "$out" | tail -n1)" = "1 passed, 0 failed" ]
echo "test_abs known reason" > "$tmp/skips.txt"
out=$("$EPCTX" test --skip-list "$tmp/skips.txt" "$D/test_abs" "$D/test_relu"); rc=$?
check "test: skipped tests counted" [ "$(echo "$out" | tail -n1)" = "1 passed, 0 failed, 1 skipped" ]

out=$("$EPCTX" test -e example -C "session.intra_op.allow_spinning|1" "$D/test_abs" "$D/test_add"); rc=$?
check "test: -e and -C take one value each, paths stay positional" [ "$(echo "$out" | tail -n1)" = "2 passed, 0 failed" ]

err=$("$EPCTX" test "$tmp/does_not_exist" 2>&1 >/dev/null); rc=$?
check "test: missing folder is NO_SUCHFILE" grep -q "^epctx: NO_SUCHFILE: " <<<"$err"
check "test: missing folder exits 1" [ $rc -eq 1 ]

printf 'not a model' > "$tmp/bad.onnx"
err=$("$EPCTX" perf "$tmp/bad.onnx" 2>&1 >/dev/null); rc=$?
check "perf: bad model -> INVALID_PROTOBUF" grep -q "^epctx: INVALID_PROTOBUF: .*bad.onnx" <<<"$err"
check "perf: exit code 1, not a signal" [ $rc -eq 1 ]
err=$("$EPCTX" perf -e nosuch "$D/test_abs/model.onnx" 2>&1 >/dev/null); rc=$?
check "perf: unknown EP -> INVALID_ARGUMENT" grep -q "^epctx: INVALID_ARGUMENT: .*nosuch" <<<"$err"
err=$("$EPCTX" perf -C "novalue" "$D/test_abs/model.onnx" 2>&1 >/dev/null); rc=$?
check "perf: malformed -C -> INVALID_ARGUMENT" grep -q "^epctx: INVALID_ARGUMENT: .*novalue" <<<"$err"

json=$("$EPCTX" perf --json -r 3 -x 1 --inputs "$D/test_abs/test_data_set_0" "$D/test_abs/model.onnx"); rc=$?
check "perf: --json exits 0" [ $rc -eq 0 ]
for k in session_creation_ms first_run_ms run_ms_median run_ms_p90 peak_rss_mb; do
  check "perf: --json has $k" grep -q "\"$k\": [0-9.]*" <<<"$json"
done
if [ -f "$MODELS/cnn.onnx" ]; then
  out=$("$EPCTX" perf -x 1 -r 2 -I "$MODELS/cnn.onnx"); rc=$?
  check "perf: random inputs on the CNN" [ $rc -eq 0 ]
  check "perf: reports p90" grep -q "p90" <<<"$out"
  out=$("$EPCTX" perf -x 1 -r 2 -I -f seq:8 "$MODELS/prefill.onnx"); rc=$?
  check "perf: -f fixes the decoder's free dim" [ $rc -eq 0 ]
fi
echo "$fails failed"
[ $fails -eq 0 ]
