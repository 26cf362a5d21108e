# Sourced by install_test.sh and deb_test.sh: what a user does with an installed (or extracted) epctx command.
#   check_cli CLI TMP    (TMP/m holds make_model.py's model and test case; uses the caller's fail())
# compile -e aotcpu (error-if-no-nodes: AotCpu must be found in the installed plugin folder), inspect shows the
# EPContext node, test passes against make_model.py's expected output, run prints its values, perf --json works.
check_cli() {
  local cli="$1" tmp="$2"
  cp -r "$tmp/m" "$tmp/ctx"
  rm "$tmp/ctx/model.onnx"
  "$cli" compile -e aotcpu "$tmp/m/model.onnx" -o "$tmp/ctx/model.onnx" --flags error-if-no-nodes \
    >"$tmp/compile.txt" 2>&1 || { cat "$tmp/compile.txt" >&2; fail "$cli compile -e aotcpu"; }
  [ -f "$tmp/ctx/model_aotcpu.bin" ] || fail "compile wrote no model_aotcpu.bin"
  "$cli" inspect "$tmp/ctx/model.onnx" >"$tmp/inspect_ctx.txt" || fail "epctx inspect on the ctx model"
  grep -q AotCpuExecutionProvider "$tmp/inspect_ctx.txt" ||
    { cat "$tmp/inspect_ctx.txt" >&2; fail "inspect shows no AotCpu EPContext node"; }
  "$cli" test -e aotcpu "$tmp/ctx" >"$tmp/test.txt" 2>&1 ||
    { cat "$tmp/test.txt" >&2; fail "epctx test -e aotcpu on the ctx model"; }
  tail -1 "$tmp/test.txt" | grep -qx "1 passed, 0 failed" || { cat "$tmp/test.txt" >&2; fail "epctx test's summary"; }
  "$cli" run -e aotcpu --inputs "$tmp/ctx/test_data_set_0" "$tmp/ctx/model.onnx" >"$tmp/run.txt" 2>&1 ||
    { cat "$tmp/run.txt" >&2; fail "epctx run"; }
  grep -qE '^ +output Y +float\[2,4\] \[0, 0, 0.375, 1.75, 3.8125, 4, 4.1875, 4.375\]$' "$tmp/run.txt" ||
    { cat "$tmp/run.txt" >&2; fail "epctx run printed another Y (make_model.py's values expected)"; }
  "$cli" perf -e aotcpu -I -r 3 --json "$tmp/ctx/model.onnx" >"$tmp/perf.json" 2>"$tmp/perf.err" ||
    { cat "$tmp/perf.err" >&2; fail "epctx perf"; }
  grep -q '"run_ms_median"' "$tmp/perf.json" || fail "epctx perf --json printed no run_ms_median"
}
