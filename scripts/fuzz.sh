#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan, build-fuzz/) and runs each for a bounded time on its corpus;
# fails on the first crash, leak, timeout or out-of-memory. docs/reliability.md describes the targets and figures.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default: 20 s, every target
#   scripts/fuzz.sh --repeatable [TARGET...]            what CI runs (scripts/test.sh), see below
#
# --repeatable: a fixed seed (EPCTX_FUZZ_SEED, default 1) and a fixed number of executions per target
# (EPCTX_FUZZ_RUNS, default per target: ~10-20 s each here) on a fresh copy of the committed and generated seeds
# only; the working corpus is neither read nor written. The same commit then mutates the same inputs in the same
# order on any machine, however fast, so CI fails on a regression and never on the luck of a draw. A time limit
# (-max_total_time, EPCTX_FUZZ_MAX_SECONDS, default 300) bounds a very slow machine; reaching it is reported.
#
# Environment: EPCTX_FUZZ_BUILD_DIR (default build-fuzz), EPCTX_FUZZ_LOG (folder for the fuzzers' output, default
# $BUILD/fuzz-logs). Each target runs as one process (one job), one target at a time.
# Corpora: the committed seeds (tests/fuzz/corpus/<input>), seeds make_fuzz_seeds generates and ONNX's node
# tests (models, input_N.pb files) copied into $BUILD/fuzz-seeds/<input>, and the working corpus
# $BUILD/fuzz-corpus/<input>, where new inputs are kept between runs (<input>: model, context_binary, ep_context,
# tensor_proto). A crash leaves its input in
# $BUILD/fuzz-crashes/<target>/ and the script prints how to reproduce it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
REPEATABLE=0
if [ "${1:-}" = "--repeatable" ]; then
  REPEATABLE=1
  shift
  SECONDS_PER_TARGET=${EPCTX_FUZZ_MAX_SECONDS:-300}
else
  SECONDS_PER_TARGET=${1:-20}
  shift || true
fi
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(model_fuzz context_binary_fuzz ep_context_fuzz tensor_proto_fuzz)
BUILD=${EPCTX_FUZZ_BUILD_DIR:-build-fuzz}
LOGS=${EPCTX_FUZZ_LOG:-$BUILD/fuzz-logs}

if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEPCTX_FUZZ=ON \
    -DEPCTX_PYTHON=OFF
fi
cmake --build "$BUILD" --target fuzzers

# Seeds that need the runtime, and ONNX's conformance data (Debian's libonnx-testdata) when installed.
SEEDS="$BUILD/fuzz-seeds"
rm -rf "$SEEDS"
"$BUILD/bin/make_fuzz_seeds" "$SEEDS" > /dev/null
TESTDATA=/usr/share/libonnx-testdata/data/node
if [ -d "$TESTDATA" ]; then
  for t in "$TESTDATA"/*/; do
    name=$(basename "$t")
    [ -f "$t/model.onnx" ] && cp "$t/model.onnx" "$SEEDS/model/$name.onnx"
    for pb in "$t"/test_data_set_0/input_*.pb; do
      [ -f "$pb" ] && cp "$pb" "$SEEDS/tensor_proto/${name}_$(basename "$pb")"
    done
  done
fi

mkdir -p "$LOGS"
# Huge allocations return null (the runtime refuses them with a Status) instead of being reported; libFuzzer's own
# malloc limit still catches a single allocation above 2 GiB.
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1
# Executions per target in --repeatable mode (each about 10-20 s on this machine's cores, docs/reliability.md).
declare -A RUNS=([model_fuzz]=60000 [context_binary_fuzz]=150000 [ep_context_fuzz]=4000 [tensor_proto_fuzz]=25000)
SCRATCH=""
trap '[ -n "$SCRATCH" ] && rm -rf "$SCRATCH"' EXIT
failed=()
for t in "${TARGETS[@]}"; do
  c=${t%_fuzz}  # corpus folders are named after the input: model, context_binary, ep_context, tensor_proto
  corpus="$BUILD/fuzz-corpus/$c"
  crashes="$BUILD/fuzz-crashes/$t"
  extra=()
  if [ "$REPEATABLE" = 1 ]; then
    [ -n "$SCRATCH" ] && rm -rf "$SCRATCH"
    SCRATCH=$(mktemp -d)
    corpus="$SCRATCH"  # new inputs go here and are thrown away
    runs=${EPCTX_FUZZ_RUNS:-${RUNS[$t]:-20000}}
    extra=(-seed="${EPCTX_FUZZ_SEED:-1}" -runs="$runs")
    what="$runs executions, seed ${EPCTX_FUZZ_SEED:-1}"
  else
    [ -n "${EPCTX_FUZZ_SEED:-}" ] && extra=(-seed="$EPCTX_FUZZ_SEED")
    what="${SECONDS_PER_TARGET}s"
  fi
  mkdir -p "$corpus" "$crashes"
  dirs=("$corpus" "tests/fuzz/corpus/$c")
  [ -d "$SEEDS/$c" ] && dirs+=("$SEEDS/$c")
  [ -d "build/fuzz-corpus/$c" ] && dirs+=("build/fuzz-corpus/$c")  # seeds unit tests write (read only)
  echo "fuzz.sh: $t, $what (corpus: ${dirs[*]})"
  started=$SECONDS
  if ! "$BUILD/bin/$t" "${extra[@]}" -max_total_time="$SECONDS_PER_TARGET" -timeout=30 -rss_limit_mb=4096 -malloc_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$crashes/" "${dirs[@]}" \
      > "$LOGS/$t.log" 2>&1; then
    failed+=("$t")
    echo "fuzz.sh: $t FAILED; log: $LOGS/$t.log; inputs: $crashes/" >&2
    grep -E "ERROR|SUMMARY|Test unit written|contract broken" "$LOGS/$t.log" | head -20 >&2 || true
    echo "  reproduce: $BUILD/bin/$t $crashes/<file>" >&2
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb|^#[0-9]+.*DONE" "$LOGS/$t.log" | sed "s/^/  $t: /" || true
    echo "  $t: $((SECONDS - started)) s, corpus $(ls "$corpus" | wc -l) files"
    if [ "$REPEATABLE" = 1 ] && ! grep -q "stat::number_of_executed_units: $runs\$" "$LOGS/$t.log"; then
      echo "  $t: stopped by the ${SECONDS_PER_TARGET} s bound before $runs executions; this run is not repeatable"
    fi
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: crashes in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: no crash in ${TARGETS[*]}"
