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

# --outputs compares only the named outputs: a Split case whose second expected output is wrong.
cp -r "$D/test_split_equal_parts_1d" "$tmp/split_one_wrong"
cp "$D/test_split_equal_parts_1d/test_data_set_0/output_0.pb" "$tmp/split_one_wrong/test_data_set_0/output_1.pb"
out=$("$EPCTX" test "$tmp/split_one_wrong"); rc=$?
check "test: a wrong expected output fails the case" grep -q "^FAIL split_one_wrong: test_data_set_0: output 'output_2'" <<<"$out"
out=$("$EPCTX" test --outputs output_1,output_3 "$tmp/split_one_wrong"); rc=$?
check "test: --outputs leaves the other outputs uncompared" [ "$(echo "$out" | tail -n1)" = "1 passed, 0 failed" ]
out=$("$EPCTX" test --outputs output_1,nope "$tmp/split_one_wrong"); rc=$?
check "test: --outputs with a name the model lacks fails naming it" \
  grep -q "^FAIL split_one_wrong: --outputs names 'nope', which is no output of the model (outputs: output_1, output_2, output_3)" <<<"$out"

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

# epctx inspect: a context model generated with the example EP (embed mode 0 and 1), then hostile variants.
PY=$(command -v python3 || echo /usr/bin/python3)
mkdir -p "$tmp/insp"
cp "$D/test_relu/model.onnx" "$tmp/insp/m.onnx"
out=$("$EPCTX" inspect "$tmp/insp/m.onnx"); rc=$?
check "inspect: source model exits 0" [ $rc -eq 0 ]
check "inspect: source model has no EPContext node" grep -q "^EPContext nodes: 0$" <<<"$out"
check "inspect: CPU nodes counted by op type" grep -q "^CPU nodes: 1 (Relu 1)$" <<<"$out"
check "inspect: inputs with types" grep -q "^  x: float\[3,4,5\]$" <<<"$out"
"$EPCTX" perf -e example -C "ep.context_enable|1" -r 1 -x 1 -I "$tmp/insp/m.onnx" >/dev/null 2>&1
"$EPCTX" perf -e example -C "ep.context_enable|1" -C "ep.context_embed_mode|1" -C "ep.context_file_path|$tmp/insp/e_ctx.onnx" \
  -r 1 -x 1 -I "$tmp/insp/m.onnx" >/dev/null 2>&1
out=$("$EPCTX" inspect "$tmp/insp/m_ctx.onnx"); rc=$?
check "inspect: ctx model exits 0" [ $rc -eq 0 ]
check "inspect: one EPContext node" grep -q "^EPContext nodes: 1$" <<<"$out"
check "inspect: source" grep -q "^    source: ExampleExecutionProvider$" <<<"$out"
check "inspect: main_context" grep -q "^    main_context: 1$" <<<"$out"
check "inspect: embed_mode" grep -q "^    embed_mode: 0$" <<<"$out"
check "inspect: ep_sdk_version" grep -q "^    ep_sdk_version: 0.1.0$" <<<"$out"
check "inspect: partition_name" grep -q "^    partition_name: ExampleExecutionProvider_" <<<"$out"
size=$(stat -c %s "$tmp/insp/m_ctx_example.bin")
check "inspect: binary path, existence and size" \
  grep -qF "binary: m_ctx_example.bin -> $tmp/insp/m_ctx_example.bin (exists, $size bytes)" <<<"$out"
check "inspect: compatibility info" grep -q "^  ExampleExecutionProvider: example:0.1.0$" <<<"$out"
check "inspect: opsets" grep -q "^opsets: ai.onnx 14, com.microsoft 1$" <<<"$out"
check "inspect: no CPU node left" grep -q "^CPU nodes: 0$" <<<"$out"
out=$("$EPCTX" inspect "$tmp/insp/e_ctx.onnx"); rc=$?
check "inspect: embed mode 1 shows the payload size" grep -q "^    payload: [1-9][0-9]* bytes$" <<<"$out"
json=$("$EPCTX" inspect --json "$tmp/insp/m_ctx.onnx"); rc=$?
check "inspect: --json exits 0" [ $rc -eq 0 ]
check "inspect: --json is one line" [ "$(wc -l <<<"$json")" -eq 1 ]
check "inspect: --json holds the same facts" "$PY" -c '
import json, sys
j = json.loads(sys.argv[1]); n = j["ep_context_nodes"][0]
assert j["ir_version"] == 8 and j["opsets"] == {"ai.onnx": 14, "com.microsoft": 1}, j
assert j["compatibility"] == {"ExampleExecutionProvider": "example:0.1.0"}, j
assert j["metadata"]["ep_compatibility_info.ExampleExecutionProvider"] == "example:0.1.0", j
assert [i["name"] for i in j["inputs"]] == ["x"] and j["inputs"][0]["shape"] == [3, 4, 5], j
assert n["source"] == "ExampleExecutionProvider" and n["main_context"] == 1 and n["embed_mode"] == 0, n
assert n["partition_name"] == n["name"] and n["ep_sdk_version"] == "0.1.0", n
assert n["binary"]["path"] == "m_ctx_example.bin" and n["binary"]["exists"] and n["binary"]["size"] == int(sys.argv[2]), n
assert j["cpu_nodes"] == {"count": 0, "by_op_type": {}}, j
' "$json" "$size"
# Hostile binary paths (same length, so the protobuf stays valid): reported with a note, never opened.
for bad in "../m_ctx_examp.bn" "/etc/ctx_examp.bn"; do
  LC_ALL=C sed "s#m_ctx_example\.bin#$bad#" "$tmp/insp/m_ctx.onnx" > "$tmp/insp/hostile.onnx"
  out=$("$EPCTX" inspect "$tmp/insp/hostile.onnx"); rc=$?
  check "inspect: binary path '$bad' exits 0" [ $rc -eq 0 ]
  check "inspect: binary path '$bad' refused with a note" grep -q "binary: $bad (missing): .*refused.*not opened" <<<"$out"
done
# EPContext nodes inside control-flow bodies are listed too, with the graph they sit in (an If with a Relu per branch,
# each branch's Relu compiled by the example EP).
mkdir -p "$tmp/insp/if"
/usr/bin/python3 - "$tmp/insp/if/m.onnx" <<'PYEOF'
import sys
import onnx
from onnx import TensorProto, helper
def branch(name):
    return helper.make_graph([helper.make_node("Relu", ["x"], [name + "_y"], name=name + "_relu")], name, [],
                             [helper.make_tensor_value_info(name + "_y", TensorProto.FLOAT, [3, 4])])
node = helper.make_node("If", ["c"], ["y"], name="choose", then_branch=branch("then"), else_branch=branch("else"))
g = helper.make_graph([node], "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                    helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PYEOF
"$EPCTX" perf -e example -C "ep.context_enable|1" -r 1 -x 1 -I "$tmp/insp/if/m.onnx" >/dev/null 2>&1
out=$("$EPCTX" inspect "$tmp/insp/if/m_ctx.onnx"); rc=$?
check "inspect: If model's ctx exits 0" [ $rc -eq 0 ]
check "inspect: EPContext nodes in both If branches" grep -q "^EPContext nodes: 2$" <<<"$out"
check "inspect: the branch an EPContext node sits in" grep -q "^    graph: choose/then_branch$" <<<"$out"
mkdir -p "$tmp/insp/sub"
cp "$tmp/insp/m_ctx.onnx" "$tmp/insp/sub/m_ctx.onnx"
ln -s /etc/hostname "$tmp/insp/sub/m_ctx_example.bin"
out=$("$EPCTX" inspect "$tmp/insp/sub/m_ctx.onnx"); rc=$?
check "inspect: symlink leaving the folder is refused" grep -q "outside the model's folder; refused" <<<"$out"
err=$("$EPCTX" inspect "$tmp/insp/absent.onnx" 2>&1 >/dev/null); rc=$?
check "inspect: missing model -> NO_SUCHFILE, exit 1" [ $rc -eq 1 ] && grep -q "^epctx: NO_SUCHFILE: .*absent.onnx" <<<"$err"
err=$("$EPCTX" inspect "$tmp/insp" 2>&1 >/dev/null); rc=$?
check "inspect: folder -> INVALID_ARGUMENT, exit 1" [ $rc -eq 1 ] && grep -q "^epctx: INVALID_ARGUMENT: " <<<"$err"
: > "$tmp/insp/empty.onnx"
err=$("$EPCTX" inspect "$tmp/insp/empty.onnx" 2>&1 >/dev/null); rc=$?
check "inspect: empty file -> INVALID_PROTOBUF, exit 1" [ $rc -eq 1 ] && grep -q "^epctx: INVALID_PROTOBUF: " <<<"$err"
err=$("$EPCTX" inspect "$tmp/bad.onnx" 2>&1 >/dev/null); rc=$?
check "inspect: garbage -> INVALID_PROTOBUF, exit 1" [ $rc -eq 1 ] && grep -q "^epctx: INVALID_PROTOBUF: .*bad.onnx" <<<"$err"
# Every truncation and a byte flipped at every offset: exit 0 or 1 with the error format, never a signal.
full=$(stat -c %s "$tmp/insp/m_ctx.onnx"); crashes=0; badfmt=0
for ((cut = 1; cut < full; cut++)); do
  head -c $cut "$tmp/insp/m_ctx.onnx" > "$tmp/insp/cut.onnx"
  for mode in "" --json; do
    [ -n "$mode" ] && [ $((cut % 2)) -eq 0 ] && continue
    err=$("$EPCTX" inspect $mode "$tmp/insp/cut.onnx" 2>&1 >/dev/null); rc=$?
    [ $rc -gt 1 ] && crashes=$((crashes + 1))
    [ $rc -eq 1 ] && ! grep -q "^epctx: [A-Z_]*: " <<<"$err" && badfmt=$((badfmt + 1))
  done
done
for ((at = 0; at < full; at += 3)); do
  cp "$tmp/insp/m_ctx.onnx" "$tmp/insp/flip.onnx"
  printf '\xff' | dd of="$tmp/insp/flip.onnx" bs=1 seek=$at conv=notrunc status=none
  err=$("$EPCTX" inspect --json "$tmp/insp/flip.onnx" 2>&1 >/dev/null); rc=$?
  [ $rc -gt 1 ] && crashes=$((crashes + 1))
done
check "inspect: truncated or damaged models never crash" [ $crashes -eq 0 ]
check "inspect: their errors keep the format" [ $badfmt -eq 0 ]
# A full disk while generating (a 64 KiB file-size limit): a clean error, exit 1 (not SIGXFSZ), and neither a partial
# context model nor a temporary file left; the next run without the limit succeeds.
if [ -f "$MODELS/prefill.onnx" ]; then
  gen="$tmp/gen"; mkdir -p "$gen"
  cp "$MODELS/prefill.onnx" "$MODELS/decoder.weights" "$gen/"
  err=$( (ulimit -f 64; "$EPCTX" perf -e example -C "ep.context_enable|1" -C "ep.context_embed_mode|1" -x 1 -r 1 \
          -I -f seq:4 "$gen/prefill.onnx") 2>&1 >/dev/null); rc=$?
  check "full disk: exit 1, not a signal" [ $rc -eq 1 ]
  check "full disk: error names the context model" grep -q "^epctx: FAIL: cannot write '.*prefill_ctx.onnx'" <<<"$err"
  check "full disk: no context model, no temporary file" [ -z "$(ls "$gen" | grep -E '_ctx|\.tmp\.')" ]
  "$EPCTX" perf -e example -C "ep.context_enable|1" -x 1 -r 1 -I -f seq:4 "$gen/prefill.onnx" >/dev/null 2>&1; rc=$?
  check "full disk: the next run recovers" [ $rc -eq 0 ] && [ -f "$gen/prefill_ctx.onnx" ]
fi
# epctx inspect on AotCpu context binaries: the CNN compiled to a ctx model (embed 0 and 1), its .bin on its own,
# --steps, --json, and truncated binaries (exit 1 with the validator's reason, never a signal).
if [ -f "$MODELS/cnn.onnx" ]; then
  aot="$tmp/aot"; mkdir -p "$aot"
  "$EPCTX" perf -e aotcpu -r 1 -C "ep.context_enable|1 ep.context_file_path|$aot/cnn_ctx.onnx" "$MODELS/cnn.onnx" \
    >/dev/null 2>&1; rc=$?
  check "aotcpu inspect: the CNN compiles" [ $rc -eq 0 ]
  check "aotcpu inspect: ctx model written" [ -f "$aot/cnn_ctx.onnx" ]
  check "aotcpu inspect: binary written" [ -f "$aot/cnn_ctx_aotcpu.bin" ]
  out=$("$EPCTX" inspect "$aot/cnn_ctx.onnx"); rc=$?
  check "aotcpu inspect: ctx model exits 0" [ $rc -eq 0 ]
  isa=$(sed -n 's/^        ISA: \(.*\)$/\1/p' <<<"$out")
  check "aotcpu inspect: ctx model shows the binary's ISA" grep -qE '^[a-z0-9_]+$' <<<"$isa"
  meta_isa=$(sed -n 's/^  ep_compatibility_info\.AotCpuExecutionProvider = .*isa=\([a-z0-9_]*\).*$/\1/p' <<<"$out")
  check "aotcpu inspect: binary ISA equals the model's compatibility info" [ -z "$meta_isa" -o "$meta_isa" = "$isa" ]
  check "aotcpu inspect: ctx model shows the binary" \
    grep -q "^    AotCpu context binary ([1-9][0-9]* bytes):$" <<<"$out"
  check "aotcpu inspect: ctx model shows the format version" grep -q "^      format: 1\.[0-9]*$" <<<"$out"
  check "aotcpu inspect: ctx model shows the oneDNN version" grep -q "^        oneDNN: [0-9]" <<<"$out"
  check "aotcpu inspect: ctx model shows the graph" grep -q "^        graph: AotCpuExecutionProvider_" <<<"$out"
  check "aotcpu inspect: ctx model shows the step histogram with Conv" \
    grep -qE "^          steps: [1-9][0-9]* \(.*Conv [1-9][0-9]*" <<<"$out"
  size=$(stat -c %s "$aot/cnn_ctx_aotcpu.bin")
  out=$("$EPCTX" inspect "$aot/cnn_ctx_aotcpu.bin"); rc=$?
  check "aotcpu inspect: .bin exits 0" [ $rc -eq 0 ]
  check "aotcpu inspect: .bin header line with its size" \
    grep -qF "AotCpu context binary: $aot/cnn_ctx_aotcpu.bin ($size bytes)" <<<"$out"
  check "aotcpu inspect: .bin shows the ISA" grep -qx "  ISA: $isa" <<<"$out"
  check "aotcpu inspect: .bin shows the four sections" \
    [ "$(grep -cE '^  (COMPAT|GRAPHS|TENSORS|WEIGHTS) +offset [0-9]+, length [0-9]+$' <<<"$out")" -eq 4 ]
  check "aotcpu inspect: .bin shows tensor totals" \
    grep -qE "^tensors: [1-9][0-9]*, [0-9]+ bytes \([0-9]+ bytes after de-duplication, [0-9]+ distinct\)$" <<<"$out"
  check "aotcpu inspect: .bin shows the graph" grep -q "^  graph: AotCpuExecutionProvider_" <<<"$out"
  check "aotcpu inspect: .bin shows the graph's weights" \
    grep -qE "^    weights: [1-9][0-9]* tensors, [1-9][0-9]* bytes$" <<<"$out"
  check "aotcpu inspect: .bin shows inputs with dims" grep -qE "^      [^ ].*: float\[[0-9,]+\]$" <<<"$out"
  check "aotcpu inspect: .bin shows the arena" grep -qE "^    arena: [0-9]+ bytes$" <<<"$out"
  check "aotcpu inspect: .bin shows the step histogram with Conv" \
    grep -qE "^    steps: [1-9][0-9]* \(.*Conv [1-9][0-9]*" <<<"$out"
  check "aotcpu inspect: no step list without --steps" [ "$(grep -cE "^      [0-9]+: " <<<"$out")" -eq 0 ]
  out=$("$EPCTX" inspect --steps "$aot/cnn_ctx_aotcpu.bin"); rc=$?
  check "aotcpu inspect: --steps exits 0" [ $rc -eq 0 ]
  check "aotcpu inspect: --steps lists Conv steps" grep -qE "^      [0-9]+: Conv '" <<<"$out"
  nsteps=$(sed -n 's/^    steps: \([0-9]*\).*/\1/p' <<<"$out" | awk '{ s += $1 } END { print s + 0 }')
  check "aotcpu inspect: --steps lists every step" \
    [ "$(grep -cE "^      [0-9]+: [A-Za-z]+ '" <<<"$out")" -eq "$nsteps" ]
  json=$("$EPCTX" inspect --json --steps "$aot/cnn_ctx_aotcpu.bin"); rc=$?
  ctxjson=$("$EPCTX" inspect --json --steps "$aot/cnn_ctx.onnx")
  check "aotcpu inspect: --json exits 0" [ $rc -eq 0 ]
  check "aotcpu inspect: --json holds the same facts" "$PY" -c '
import json, sys
b = json.loads(sys.argv[1]); m = json.loads(sys.argv[2]); isa = sys.argv[3]; size = int(sys.argv[4])
assert b["valid"] and b["reason"] is None and b["size"] == size and b["format_version"].startswith("1."), b
assert b["compatibility"]["isa"] == isa and b["compatibility"]["onednn_version"], b
assert sorted(s["type"] for s in b["sections"]) == ["COMPAT", "GRAPHS", "TENSORS", "WEIGHTS"], b
t = b["tensors"]
assert t["count"] > 0 and 0 < t["distinct_bytes"] <= t["bytes"] and t["distinct"] <= t["count"], t
assert b["graphs"], b
for g in b["graphs"]:
    assert g["name"].startswith("AotCpuExecutionProvider_") and g["inputs"] and g["outputs"], g
    assert all(isinstance(d, int) for io in g["inputs"] + g["outputs"] for d in io["dims"]), g
    assert g["step_count"] == len(g["steps"]) == sum(g["steps_by_kind"].values()), g
assert sum(g["steps_by_kind"].get("Conv", 0) for g in b["graphs"]) > 0, b
n = [c for c in m["ep_context_nodes"] if c["aotcpu"] is not None]
assert len(n) == 1, m
del b["file"]
assert n[0]["aotcpu"] == b, (n[0]["aotcpu"], b)
' "$json" "$ctxjson" "$isa" "$size"
  # Embed mode 1: ep_cache_context holds the whole binary.
  "$EPCTX" perf -e aotcpu -r 1 -C "ep.context_enable|1 ep.context_embed_mode|1 ep.context_file_path|$aot/e_ctx.onnx" \
    "$MODELS/cnn.onnx" >/dev/null 2>&1
  out=$("$EPCTX" inspect --steps "$aot/e_ctx.onnx"); rc=$?
  check "aotcpu inspect: embedded binary exits 0" [ $rc -eq 0 ]
  check "aotcpu inspect: embedded binary shows the ISA" grep -qx "        ISA: $isa" <<<"$out"
  check "aotcpu inspect: embedded binary shows the graph" grep -q "^        graph: AotCpuExecutionProvider_" <<<"$out"
  check "aotcpu inspect: embedded binary lists Conv steps" grep -qE "^            [0-9]+: Conv '" <<<"$out"
  # A truncated binary, on its own and behind a ctx model.
  head -c $((size / 2 + 1)) "$aot/cnn_ctx_aotcpu.bin" > "$aot/truncated.bin"
  out=$("$EPCTX" inspect "$aot/truncated.bin" 2>"$aot/err"); rc=$?; err=$(cat "$aot/err")
  check "aotcpu inspect: truncated .bin exits 1" [ $rc -eq 1 ]
  check "aotcpu inspect: truncated .bin gives the reason on stderr" \
    grep -q "^epctx: INVALID_GRAPH: '.*truncated.bin' is not a valid AotCpu context binary: .* $((size / 2 + 1)) bytes" \
      <<<"$err"
  check "aotcpu inspect: truncated .bin gives the reason in the report" grep -q "^invalid: " <<<"$out"
  mkdir -p "$aot/t"
  cp "$aot/cnn_ctx.onnx" "$aot/t/cnn_ctx.onnx"
  cp "$aot/truncated.bin" "$aot/t/cnn_ctx_aotcpu.bin"
  out=$("$EPCTX" inspect "$aot/t/cnn_ctx.onnx" 2>"$aot/err"); rc=$?; err=$(cat "$aot/err")
  check "aotcpu inspect: ctx model with a truncated binary exits 1" [ $rc -eq 1 ]
  check "aotcpu inspect: ctx model with a truncated binary gives the reason" \
    grep -q "^epctx: INVALID_GRAPH: '.*cnn_ctx_aotcpu.bin' is not a valid AotCpu context binary: " <<<"$err"
  check "aotcpu inspect: ctx model report marks the binary invalid" grep -q "^      invalid: " <<<"$out"
  crashes=0; badfmt=0
  for cut in 8 63 64 100 200 300 500 1000 4095 4096 $((size - 4096)) $((size - 1)); do
    [ $cut -lt 1 ] || [ $cut -ge $size ] && continue
    head -c $cut "$aot/cnn_ctx_aotcpu.bin" > "$aot/cut.bin"
    err=$("$EPCTX" inspect --steps --json "$aot/cut.bin" 2>&1 >/dev/null); rc=$?
    [ $rc -ne 1 ] && crashes=$((crashes + 1))
    ! grep -q "^epctx: INVALID_GRAPH: " <<<"$err" && badfmt=$((badfmt + 1))
  done
  check "aotcpu inspect: every truncation exits 1" [ $crashes -eq 0 ]
  check "aotcpu inspect: every truncation reports INVALID_GRAPH" [ $badfmt -eq 0 ]
fi
# epctx share-compile (ONNX Runtime's ep_weight_sharing_ctx_gen) with the AotCpu EP: prefill + decode of the test
# decoder compiled as one weight-sharing group into a copy of the models folder; the context models pass the decoder
# cases (loaded alone and with ep.share_ep_contexts=1); options it forces are reported; failures leave no file.
if [ -f "$MODELS/prefill.onnx" ] && [ -d "$MODELS/cases/decoder_prefill" ]; then
  OPY=/usr/bin/python3  # Debian's, with numpy and onnx
  sh="$tmp/share"; mkdir -p "$sh/m"
  cp "$MODELS/prefill.onnx" "$MODELS/decode.onnx" "$MODELS/decoder.weights" "$sh/m/"
  ls "$sh/m" > "$sh/before"
  out=$("$EPCTX" share-compile -f seq:16 -f past:16 -x 2 \
        -C "ep.context_enable|0 ep.context_embed_mode|1 ep.context_file_path|$sh/x_ctx.onnx ep.share_ep_contexts|1" \
        "$sh/m/prefill.onnx,$sh/m/decode.onnx" 2>"$sh/err"); rc=$?; err=$(cat "$sh/err")
  check "share-compile: exits 0" [ $rc -eq 0 ]
  check "share-compile: exactly 3 new files" [ "$(ls "$sh/m" | grep -vxF -f "$sh/before" | sort | tr '\n' ' ')" = \
    "decode_ctx.onnx prefill_aotcpu.bin prefill_ctx.onnx " ]
  check "share-compile: ep.context_enable|0 reported" \
    grep -qx "epctx share-compile: -C ep.context_enable|0 ignored: Need to enable ep context cache." <<<"$err"
  check "share-compile: ep.context_embed_mode|1 reported" \
    grep -qx "epctx share-compile: -C ep.context_embed_mode|1 ignored: Only support non-embed model for weight sharing." \
      <<<"$err"
  check "share-compile: ep.context_file_path reported" grep -qx "epctx share-compile: -C ep.context_file_path|.* ignored: \
Not support to specify the generated Onnx context cache file name." <<<"$err"
  check "share-compile: a forced value given as forced is not reported" [ "$(grep -c ignored <<<"$err")" -eq 3 ]
  check "share-compile: ep.context_file_path had no effect" [ ! -e "$sh/x_ctx.onnx" ]
  bsize=$(stat -c %s "$sh/m/prefill_aotcpu.bin" 2>/dev/null || echo 0)
  check "share-compile: lists the binary with its size" \
    grep -qE "^  $sh/m/prefill_aotcpu.bin +$bsize bytes  \(referenced by 2 of the 2 context models\)$" <<<"$out"
  check "share-compile: lists both context models" \
    [ "$(grep -cE "^  $sh/m/(prefill|decode)_ctx.onnx +[0-9]+ bytes  \(1 EPContext node\)$" <<<"$out")" -eq 2 ]
  check "share-compile: both context models reference the same binary, embed mode 0" "$OPY" -c '
import sys, onnx
for f in sys.argv[1:]:
    m = onnx.load(f, load_external_data=False)
    nodes = [n for n in m.graph.node if n.op_type == "EPContext"]
    assert len(nodes) == len(m.graph.node) == 1, f
    a = {x.name: onnx.helper.get_attribute_value(x) for x in nodes[0].attribute}
    assert a["embed_mode"] == 0 and a["ep_cache_context"] == b"prefill_aotcpu.bin", (f, a)
' "$sh/m/prefill_ctx.onnx" "$sh/m/decode_ctx.onnx"
  wsize=$(stat -c %s "$sh/m/decoder.weights")
  check "share-compile: binary no larger than the weights file (weights stored once)" [ "$bsize" -le "$wsize" ]
  # Case folders from the context models (seq 16 / past 16 data sets only: the shapes are compiled in).
  for m in prefill decode; do
    c="$sh/cases/decoder_$m"; mkdir -p "$c"
    cp "$sh/m/${m}_ctx.onnx" "$c/model.onnx"
    ln "$sh/m/prefill_aotcpu.bin" "$c/prefill_aotcpu.bin" 2>/dev/null || cp "$sh/m/prefill_aotcpu.bin" "$c/"
    cp -r "$MODELS/cases/decoder_$m/test_data_set_0" "$c/"
  done
  out=$("$EPCTX" test -e aotcpu "$sh/cases"); rc=$?
  check "share-compile: context models pass the decoder cases" [ "$(tail -n1 <<<"$out")" = "2 passed, 0 failed" ]
  out=$("$EPCTX" test -e aotcpu -C "ep.share_ep_contexts|1" "$sh/cases"); rc=$?
  check "share-compile: ... and with ep.share_ep_contexts=1" [ "$(tail -n1 <<<"$out")" = "2 passed, 0 failed" ]
  # Again into the same folder: refused before anything is compiled.
  ls "$sh/m" > "$sh/before"
  err=$("$EPCTX" share-compile -f seq:16 -f past:16 "$sh/m/prefill.onnx,$sh/m/decode.onnx" 2>&1 >/dev/null); rc=$?
  check "share-compile: existing context model refused" [ $rc -eq 1 ]
  check "share-compile: ... with a reason" grep -q "^epctx: FAIL: '.*prefill_ctx.onnx' exists already; remove it" <<<"$err"
  check "share-compile: ... nothing changed" [ "$(ls "$sh/m")" = "$(cat "$sh/before")" ]
  err=$("$EPCTX" share-compile -C "a|1" -C "a|2" "$sh/m/prefill.onnx" 2>&1 >/dev/null); rc=$?
  check "share-compile: duplicate -C key exits 1" [ $rc -eq 1 ]
  check "share-compile: duplicate -C key named" grep -q "^epctx: INVALID_ARGUMENT: -C gives session config 'a' more than once" <<<"$err"
  err=$("$EPCTX" share-compile -e cpu "$sh/m/prefill.onnx" 2>&1 >/dev/null); rc=$?
  check "share-compile: -e cpu refused" [ $rc -eq 1 ]
  check "share-compile: -e cpu says why" grep -q "^epctx: INVALID_ARGUMENT: -e cpu: the CPU EP compiles nothing" <<<"$err"
  err=$("$EPCTX" share-compile "$sh/m/prefill.onnx,$sh/m/missing.onnx" 2>&1 >/dev/null); rc=$?
  check "share-compile: missing model exits 1" [ $rc -eq 1 ]
  check "share-compile: missing model is NO_SUCHFILE" grep -q "^epctx: NO_SUCHFILE: .*missing.onnx" <<<"$err"
  # Failures half-way through a group: an unreadable 2nd model (the runtime fails the session before any EP sees it)
  # and a 3rd model whose partition names repeat the 1st's (the EP refuses it). Exit 1 naming the model, and no file
  # of the group may be visible: the runtime must not publish the context models of an unfinished group.
  f="$sh/f"; mkdir -p "$f"
  cp "$MODELS/prefill.onnx" "$MODELS/decode.onnx" "$MODELS/decoder.weights" "$f/"
  echo "not an onnx model" > "$f/bad.onnx"
  cp "$f/prefill.onnx" "$f/prefill_copy.onnx"
  ls "$f" > "$sh/before"
  err=$("$EPCTX" share-compile -f seq:16 -f past:16 "$f/prefill.onnx,$f/bad.onnx,$f/decode.onnx" 2>&1 >/dev/null); rc=$?
  check "share-compile: bad model exits 1" [ $rc -eq 1 ]
  check "share-compile: bad model named" grep -q "^epctx: INVALID_PROTOBUF: model 2/3 '$f/bad.onnx': " <<<"$err"
  check "share-compile: bad model leaves no file" [ "$(ls "$f")" = "$(cat "$sh/before")" ]
  check "share-compile: bad model: the runtime published nothing" \
    grep -qx "epctx share-compile: no file of the failed group is left visible" <<<"$err"
  err=$("$EPCTX" share-compile -f seq:16 -f past:16 "$f/prefill.onnx,$f/decode.onnx,$f/prefill_copy.onnx" 2>&1 \
        >/dev/null); rc=$?
  check "share-compile: EP-refused model exits 1" [ $rc -eq 1 ]
  check "share-compile: EP-refused model named" grep -q "^epctx: [A-Z_]*: model 3/3 '$f/prefill_copy.onnx': .*already in this weight-sharing group" <<<"$err"
  check "share-compile: EP-refused model leaves no file" [ "$(ls "$f")" = "$(cat "$sh/before")" ]
  check "share-compile: EP-refused model: the runtime published nothing" \
    grep -qx "epctx share-compile: no file of the failed group is left visible" <<<"$err"
  # Partial sharing: a prefill variant differing only in lm_head.weight; the 3-model binary grows by about that
  # tensor only (make_decoder.py --head-seed).
  gen=$(dirname "$0")/models/make_decoder.py
  if "$OPY" "$gen" --out "$sh/p" --head-seed 2 >/dev/null; then
    out=$("$EPCTX" share-compile -f seq:16 -f past:16 "$sh/p/prefill.onnx,$sh/p/decode.onnx,$sh/p/prefill_head2.onnx" \
          2>/dev/null); rc=$?
    check "share-compile: 3 models with a different head exit 0" [ $rc -eq 0 ]
    # inspect's "tensors: N, B bytes (...)": the group binary stores one more tensor, about the head's size (packed,
    # the 1000 columns padded), and nothing else.
    t2=$("$EPCTX" inspect "$sh/m/prefill_aotcpu.bin" | sed -n 's/^tensors: \([0-9]*\), \([0-9]*\) bytes.*/\1 \2/p')
    t3=$("$EPCTX" inspect "$sh/p/prefill_aotcpu.bin" | sed -n 's/^tensors: \([0-9]*\), \([0-9]*\) bytes.*/\1 \2/p')
    hsize=$(stat -c %s "$sh/p/head2.weights")
    grow=$(( ${t3#* } - ${t2#* } ))
    check "share-compile: 3 models store one more tensor (${t2% *} -> ${t3% *})" [ $(( ${t3% *} - ${t2% *} )) -eq 1 ]
    check "share-compile: ... of about the head's size ($grow bytes, head $hsize)" \
      [ $grow -ge $hsize -a $grow -le $((hsize * 21 / 20)) ]
  else
    check "share-compile: make_decoder.py --head-seed runs" false
  fi
fi
# epctx compile (the compile API): the decoder case with external weights, compiled and checked against ONNX
# Runtime's outputs through `epctx test`; each output kind; flags; errors as "epctx: CODE: message".
P="$MODELS/cases/decoder_prefill"
if [ -f "$P/model.onnx" ]; then
  c="$tmp/compile"; mkdir -p "$c/src" "$c/ex" "$c/aot" "$c/ext" "$c/bins"
  cp -r "$P/." "$c/src/"
  out=$("$EPCTX" compile -e example "$c/src/model.onnx" -o "$c/ex/model.onnx" 2>"$tmp/compile.err"); rc=$?
  check "compile: example EP exits 0" [ $rc -eq 0 ]
  check "compile: reports the model and the binary" [ "$(grep -c '^epctx compile: wrote ' <<<"$out")" -eq 2 ]
  check "compile: progress line names the model, the EP, what it took and the time" grep -qE \
    "^epctx compile: compiling .*/src/model.onnx for example \.\.\. done in [0-9.]+ s: [0-9]+ partitions? \([0-9]+ nodes\) on ExampleExecutionProvider, [0-9]+ nodes? left on the CPU EP$" \
    "$tmp/compile.err"
  check "compile: binary beside the output" [ -f "$c/ex/model_example.bin" ]
  cp -r "$P/test_data_set_0" "$P/test_data_set_1" "$c/ex/"
  out=$("$EPCTX" test -e example --rtol 1e-4 --atol 1e-5 "$c/ex"); rc=$?
  check "compile: example output matches ONNX Runtime (weights embedded, no decoder.weights)" \
    [ "$(echo "$out" | tail -n1)" = "1 passed, 0 failed" ]
  "$EPCTX" compile -e aotcpu -f seq:16 -x 2 "$c/src/model.onnx" -o "$c/aot/model.onnx" >/dev/null; rc=$?
  check "compile: AotCpu exits 0" [ $rc -eq 0 ]
  check "compile: AotCpu binary" [ -f "$c/aot/model_aotcpu.bin" ]
  cp -r "$P/test_data_set_0" "$c/aot/"
  out=$("$EPCTX" test -e aotcpu --rtol 1e-4 --atol 1e-5 "$c/aot"); rc=$?
  check "compile: AotCpu output matches ONNX Runtime" [ "$(echo "$out" | tail -n1)" = "1 passed, 0 failed" ]
  # Default output name beside the model; an existing output is replaced unless --flags error-if-exists.
  "$EPCTX" compile -e example "$c/src/model.onnx" >/dev/null; rc=$?
  check "compile: default output <stem>_ctx.onnx" [ $rc -eq 0 -a -f "$c/src/model_ctx.onnx" -a -f "$c/src/model_ctx_example.bin" ]
  "$EPCTX" compile -e example "$c/src/model.onnx" >/dev/null; rc=$?
  check "compile: existing output replaced by default" [ $rc -eq 0 ]
  before=$(md5sum "$c/src/model_ctx.onnx")
  err=$("$EPCTX" compile -e example --flags error-if-exists "$c/src/model.onnx" 2>&1 >/dev/null); rc=$?
  check "compile: error-if-exists -> FAIL" grep -q "^epctx: FAIL: .*exists already" <<<"$err"
  check "compile: error-if-exists exits 1, file untouched" [ $rc -eq 1 -a "$(md5sum "$c/src/model_ctx.onnx")" = "$before" ]
  # --stdout through the write function, --from-bytes, --embed: the streamed model runs on its own.
  "$EPCTX" compile -e example --embed --from-bytes --stdout "$c/src/model.onnx" >"$c/ext/model.onnx" 2>/dev/null; rc=$?
  check "compile: --stdout --from-bytes --embed exits 0" [ $rc -eq 0 ]
  cp -r "$P/test_data_set_0" "$c/ext/"
  out=$("$EPCTX" test -e example --rtol 1e-4 --atol 1e-5 "$c/ext"); rc=$?
  check "compile: streamed model matches ONNX Runtime" [ "$(echo "$out" | tail -n1)" = "1 passed, 0 failed" ]
  # External initializers with a threshold; the initializer-location function reusing decoder.weights.
  "$EPCTX" compile -e example --ext-initializers w.data --ext-threshold 4096 "$c/src/model.onnx" -o "$c/ext/e.onnx" \
    >/dev/null; rc=$?
  check "compile: --ext-initializers writes the file beside the output" [ $rc -eq 0 -a -s "$c/ext/w.data" ]
  out=$("$EPCTX" compile -e example --externalize-over 1024 "$c/src/model.onnx" -o "$c/src/reuse.onnx"); rc=$?
  check "compile: --externalize-over reuses decoder.weights" grep -q "0 initializer(s) written .* [1-9][0-9]* reused" <<<"$out"
  check "compile: ... and writes no data file" [ ! -e "$c/src/reuse.data" ]
  mkdir -p "$c/reuse"; mv "$c/src/reuse.onnx" "$c/src/reuse_example.bin" "$c/reuse/"
  mv "$c/reuse/reuse.onnx" "$c/reuse/model.onnx"  # the model names reuse_example.bin, which keeps its name
  cp "$c/src/decoder.weights" "$c/reuse/"; cp -r "$P/test_data_set_0" "$c/reuse/"
  out=$("$EPCTX" test -e example --rtol 1e-4 --atol 1e-5 "$c/reuse"); rc=$?
  check "compile: model reusing decoder.weights matches ONNX Runtime" [ "$(echo "$out" | tail -n1)" = "1 passed, 0 failed" ]
  out=$("$EPCTX" compile -e example --externalize-over 1024 "$c/src/model.onnx" -o "$c/ext/x.onnx"); rc=$?
  check "compile: --externalize-over elsewhere writes x.data" [ $rc -eq 0 -a -s "$c/ext/x.data" ]
  # SetEpContextBinaryInformation.
  "$EPCTX" compile -e example --bin-dir "$c/bins/" --bin-name named.onnx "$c/src/model.onnx" -o "$c/ext/b.onnx" >/dev/null
  check "compile: --bin-dir/--bin-name name the binary" [ -f "$c/bins/named_example.bin" ]
  err=$("$EPCTX" compile -e example --bin-dir "$c/nodir" --bin-name n.onnx "$c/src/model.onnx" 2>&1 >/dev/null); rc=$?
  check "compile: invalid --bin-dir" grep -qx "epctx: INVALID_ARGUMENT: output_dir is not a valid directory." <<<"$err"
  # Flags and errors.
  err=$("$EPCTX" compile -e cpu --flags error-if-no-nodes "$c/src/model.onnx" -o "$c/ext/none.onnx" 2>&1 >/dev/null); rc=$?
  check "compile: error-if-no-nodes -> FAIL" grep -q "^epctx: FAIL: Unable to compile any nodes" <<<"$err"
  check "compile: ... and no file" [ $rc -eq 1 -a ! -e "$c/ext/none.onnx" ]
  "$EPCTX" compile -e cpu "$c/src/model.onnx" -o "$c/ext/plain.onnx" >/dev/null; rc=$?
  check "compile: no compiled node still writes a model by default" [ $rc -eq 0 -a -f "$c/ext/plain.onnx" ]
  err=$("$EPCTX" compile -e example "$c/ex/model.onnx" -o "$c/ext/again.onnx" 2>&1 >/dev/null); rc=$?
  check "compile: a compiled model -> INVALID_GRAPH" grep -q "^epctx: INVALID_GRAPH: .*ensure the input model is not already compiled" <<<"$err"
  err=$("$EPCTX" compile --opt-level 7 "$c/src/model.onnx" 2>&1 >/dev/null); rc=$?
  check "compile: bad --opt-level" grep -q "^epctx: INVALID_ARGUMENT: graph_optimization_level with value 7 is invalid" <<<"$err"
  err=$("$EPCTX" compile "$c/missing.onnx" 2>&1 >/dev/null); rc=$?
  check "compile: missing model" grep -q "^epctx: INVALID_ARGUMENT: Input model path does not exist: " <<<"$err"
  check "compile: exit 1" [ $rc -eq 1 ]
  err=$("$EPCTX" compile -e example --ext-initializers /abs.data "$c/src/model.onnx" -o "$c/ext/abs.onnx" 2>&1 >/dev/null)
  check "compile: absolute --ext-initializers refused" grep -q "^epctx: INVALID_ARGUMENT: .*absolute path" <<<"$err"
fi

# Say why (issue 13): nodes AotCpu leaves on the CPU EP with its reasons, in perf -v, compile and inspect; compare
# names the first differing node, here one compiled wrong on purpose (EPCTX_AOTCPU_TEST_PLANT_BUG, docs/aotcpu.md).
OPY=/usr/bin/python3
if "$OPY" -c 'import onnx' 2>/dev/null; then
  w="$tmp/why"; mkdir -p "$w"
  "$OPY" - "$w" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
d = sys.argv[1]
def save(nodes, inputs, outputs, inits, name, opset=13):
    g = h.make_graph(nodes, name, inputs, outputs, initializer=inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, f"{d}/{name}.onnx")
# free.onnx: x [N, 8] with N free; Add, Relu, then Hardmax (an op AotCpu does not compile).
c = nh.from_array(np.linspace(-1, 1, 8).astype(np.float32), "c")
save([h.make_node("Add", ["x", "c"], ["a"], name="add_c"), h.make_node("Relu", ["a"], ["r"], name="relu"),
      h.make_node("Hardmax", ["r"], ["y"], name="hardmax", axis=1)],
     [h.make_tensor_value_info("x", T.FLOAT, ["N", 8])], [h.make_tensor_value_info("y", T.FLOAT, ["N", 8])], [c], "free")
# chain.onnx: x [2, 16] -> MatMul -> Mul(., k) -> Add(b) -> Relu -> MatMul -> out. (Not the PaddleOCR shape of
# issue 13, Mul(Constant node, x): these tests must not depend on that bug.)
rng = np.random.default_rng(0)
w1 = nh.from_array(rng.standard_normal((16, 16)).astype(np.float32), "w1")
w2 = nh.from_array(rng.standard_normal((16, 4)).astype(np.float32), "w2")
b = nh.from_array(np.array([0.25], np.float32), "b")
k = nh.from_array(np.full((16,), 1.5, np.float32), "k")
save([h.make_node("MatMul", ["x", "w1"], ["m1"], name="mm1"),
      h.make_node("Mul", ["m1", "k"], ["s"], name="scale"),
      h.make_node("Add", ["s", "b"], ["t"], name="shift"),
      h.make_node("Relu", ["t"], ["u"], name="relu"),
      h.make_node("MatMul", ["u", "w2"], ["out"], name="mm2")],
     [h.make_tensor_value_info("x", T.FLOAT, [2, 16])], [h.make_tensor_value_info("out", T.FLOAT, [2, 4])],
     [w1, w2, b, k], "chain")
import os
os.makedirs(f"{d}/chain_in", exist_ok=True)
open(f"{d}/chain_in/input_0.pb", "wb").write(nh.from_array(rng.uniform(0, 255, (2, 16)).astype(np.float32), "x").SerializeToString())
PYEOF
  # perf -v: the report's left_on_cpu and the grouped, readable block (dynamic_shapes=0: free dims stay on the CPU EP;
  # by default they are compiled shape-generic, issue 27).
  out=$("$EPCTX" perf -e aotcpu -i "dynamic_shapes|0" -v -r 1 -x 1 -I "$w/free.onnx"); rc=$?
  check "why: perf -v exits 0" [ $rc -eq 0 ]
  check "why: perf -v report lists left_on_cpu with AotCpu's reason" \
    grep -q '"left_on_cpu":\[{"node":"add_c","op":"Add","reasons":{"AotCpuExecutionProvider":"input '"'"'x'"'"' dim 0 is free' <<<"$out"
  check "why: perf -v report lists the free dim" grep -q '"free_dims":\[{"input":"x","dim":0,"symbol":"N"}\]' <<<"$out"
  check "why: perf -v groups the free-dim reason" \
    grep -qF "2 nodes (Add, Relu): AotCpuExecutionProvider: input '...' dim 0 is free ('N'); pin it with -f N:N" <<<"$out"
  check "why: perf -v names the unsupported op" \
    grep -qF "1 node (Hardmax): AotCpuExecutionProvider: op Hardmax is not compiled by this EP" <<<"$out"
  check "why: perf -v lists node names" grep -qF "'add_c', 'relu'" <<<"$out"
  # compile: a warning block on stderr with the -f flags; pinned, only Hardmax is left.
  err=$("$EPCTX" compile -e aotcpu -i "dynamic_shapes|0" "$w/free.onnx" -o "$w/free_ctx.onnx" 2>&1 >/dev/null); rc=$?
  check "why: compile with free dims exits 0" [ $rc -eq 0 ]
  check "why: compile warns about the nodes left" grep -q "^epctx compile: warning: nodes left on the CPU EP: 3, for 2 reason(s)$" <<<"$err"
  check "why: compile names the free dim and the flag" \
    grep -qF "epctx compile: warning: to compile them statically, pin the dims with the sizes the model will run with (N): -f N:N" <<<"$err"
  # By default the free dim stays free: no node is left for it, so no warning names it.
  err=$("$EPCTX" compile -e aotcpu "$w/free.onnx" -o "$w/free_default_ctx.onnx" 2>&1 >/dev/null); rc=$?
  check "why: default compile with free dims exits 0" [ $rc -eq 0 ]
  check "why: default compile does not ask to pin the free dim" [ "$(grep -c -- "-f N:N\|pin it" <<<"$err")" -eq 0 ]
  out=$("$EPCTX" inspect "$w/free_ctx.onnx"); rc=$?
  check "why: inspect of a ctx model that compiled nothing lists the reasons" \
    grep -qF "  2 nodes (Add, Relu): AotCpuExecutionProvider: input '...' dim 0 is free ('N')" <<<"$out"
  # Pinned, Add + Relu on 24 floats before the Hardmax are an island too small to pay for its partition
  # (providers/aotcpu/capability/partition_cost.h); partition_switch_us=0 turns that rule off for the checks below.
  err=$("$EPCTX" compile -e aotcpu -f N:3 "$w/free.onnx" -o "$w/island_ctx.onnx" 2>&1 >/dev/null); rc=$?
  check "why: pinned compile of a small island exits 0" [ $rc -eq 0 ]
  check "why: ... leaves the island with the cost rule's reason" \
    grep -qF "2 nodes (Add, Relu): AotCpuExecutionProvider: island too small to pay for its boundary" <<<"$err"
  err=$("$EPCTX" compile -e aotcpu -i "partition_switch_us|0" -f N:3 "$w/free.onnx" -o "$w/pinned_ctx.onnx" 2>&1 >/dev/null); rc=$?
  check "why: pinned compile exits 0" [ $rc -eq 0 ]
  check "why: pinned compile warns in three lines" [ "$(grep -c "warning" <<<"$err")" -eq 3 ]
  check "why: pinned compile leaves only Hardmax" grep -qF "1 node (Hardmax): AotCpuExecutionProvider: op Hardmax" <<<"$err"
  check "why: pinned compile does not mention free dims" [ "$(grep -v "^epctx compile: compiling " <<<"$err" | grep -c "free")" -eq 0 ]
  out=$("$EPCTX" inspect "$w/pinned_ctx.onnx"); rc=$?
  check "why: inspect shows one EPContext node" grep -q "^EPContext nodes: 1$" <<<"$out"
  check "why: inspect lists the CPU node with its reason" \
    grep -qF "  1 node (Hardmax): AotCpuExecutionProvider: op Hardmax is not compiled by this EP" <<<"$out"
  check "why: inspect does not dump the metadata blob" grep -qx "  epctx.left_on_cpu = (1 nodes, below)" <<<"$out"
  out=$("$EPCTX" compile -e aotcpu "$w/chain.onnx" -o "$w/chain_ctx.onnx" 2>&1); rc=$?
  check "why: a fully compiled model compiles" [ $rc -eq 0 ]
  check "why: ... with no warning" [ "$(grep -c warning <<<"$out")" -eq 0 ]
  out=$("$EPCTX" inspect "$w/chain_ctx.onnx")
  check "why: ... and its ctx model records nothing" [ "$(grep -c "left_on_cpu\|nodes left" <<<"$out")" -eq 0 ]

  # compare: no plant -> same (exit 0); a planted wrong node -> named (exit 1), by exposing intermediates; a plant
  # that shows only while fused -> found by cutting the graph, at the first value that differs (the node's consumer).
  out=$("$EPCTX" compare -e aotcpu -x 1 "$w/chain.onnx"); rc=$?
  check "compare: same outputs exit 0" [ $rc -eq 0 ]
  check "compare: says so" grep -qx "no difference: the 1 output(s) match" <<<"$out"
  out=$(EPCTX_AOTCPU_TEST_PLANT_BUG=wrong-on-purpose:shift "$EPCTX" compare -e aotcpu -x 1 "$w/chain.onnx" 2>/dev/null); rc=$?
  check "compare: planted bug exits 1" [ $rc -eq 1 ]
  check "compare: the output differs" grep -q "^output 'out' float\[2,4\]: DIFFERS: max abs diff" <<<"$out"
  check "compare: names the planted node" grep -qx "  node:   'shift' (Add)" <<<"$out"
  check "compare: by exposing intermediates" grep -q "found with every intermediate value made a graph output" <<<"$out"
  check "compare: lists its inputs" grep -qx "  input:  's' (float\[2,16\], from 'scale' (Mul))" <<<"$out"
  # 0.5 up to float rounding (the EP's matmul and the CPU EP's sum in different orders).
  diff=$(grep -oE "^  output: 't' float\[2,16\]: max abs diff [0-9.e+-]+" <<<"$out" | awk '{print $NF}')
  check "compare: the output's diff is the plant's 0.5" awk -v d="$diff" 'BEGIN { exit !(d != "" && d - 0.5 < 1e-4 && 0.5 - d < 1e-4) }'
  out=$(EPCTX_AOTCPU_TEST_PLANT_BUG=wrong-on-purpose-if-fused:shift "$EPCTX" compare -e aotcpu -x 1 "$w/chain.onnx" 2>/dev/null); rc=$?
  check "compare: fused-only plant exits 1" [ $rc -eq 1 ]
  check "compare: fused-only plant needs cuts" grep -q "found with graph cut at each value in turn" <<<"$out"
  check "compare: fused-only plant names the first value that differs" grep -qx "  node:   'relu' (Relu)" <<<"$out"
  out=$(EPCTX_AOTCPU_TEST_PLANT_BUG=wrong-on-purpose:mm2 "$EPCTX" compare -e aotcpu -x 1 --inputs "$w/chain_in" "$w/chain.onnx" 2>/dev/null); rc=$?
  check "compare: --inputs, plant in the last node: exits 1" [ $rc -eq 1 ]
  check "compare: --inputs, names the last node" grep -qx "  node:   'mm2' (MatMul)" <<<"$out"
  err=$("$EPCTX" compare -e aotcpu --inputs "$w/none" "$w/chain.onnx" 2>&1 >/dev/null); rc=$?
  check "compare: missing --inputs folder -> NO_SUCHFILE, exit 2" [ $rc -eq 2 ]
  check "compare: missing --inputs folder named" grep -q "^epctx: NO_SUCHFILE: --inputs '$w/none'" <<<"$err"
  out=$(EPCTX_AOTCPU_TEST_PLANT_BUG=wrong-on-purpose-x:shift "$EPCTX" compare -e aotcpu -x 1 "$w/chain.onnx" 2>/dev/null); rc=$?
  check "compare: any other plant value does nothing" [ $rc -eq 0 ]
  err=$("$EPCTX" compare "$w/chain.onnx" 2>&1 >/dev/null); rc=$?
  check "compare: no -e exits 2" [ $rc -eq 2 ]
  check "compare: no -e -> INVALID_ARGUMENT" grep -q "^epctx: INVALID_ARGUMENT: compare needs" <<<"$err"
  err=$("$EPCTX" compare -e aotcpu "$w/missing.onnx" 2>&1 >/dev/null); rc=$?
  check "compare: missing model exits 2" [ $rc -eq 2 ]
  check "compare: missing model -> NO_SUCHFILE" grep -q "^epctx: NO_SUCHFILE: " <<<"$err"
fi
echo "$fails failed"
[ $fails -eq 0 ]
