#!/usr/bin/env node
'use strict';
// Times onnxruntime-node 1.30 on one model, the ORT side of bench/run_cpu_bench.sh.
//
//   node tests/ort/perf.js MODEL --threads N --runs M --inputs DIR [--warmup W] [--opt all]
//
// DIR is a test_data_set folder (input_N.pb). Session options: intraOpNumThreads=N, interOpNumThreads=1,
// graphOptimizationLevel 'all' (default), executionMode 'sequential'.
// Prints one JSON line:
//   {"session_creation_ms":..,"first_run_ms":..,"run_ms_median":..,"run_ms_p90":..,"peak_rss_mb":..,"runs":M,
//    "threads":N,"ort_isa":"native" | "avx2 (MLAS held by patch)"}   (load_ort.js: held to AVX2 at that level)
// session_creation_ms: InferenceSession.create (file read, graph optimization, kernel/weight preparation);
// first_run_ms: the first run after it; median/p90 over M runs after W warm-up runs (default 1).

const { ort, isa: ORT_ISA } = require('./load_ort');  // held to AVX2 when the run is at that level
const { readInputs } = require('./tensorproto');

function parseArgs(argv) {
  const a = { model: null, threads: 2, runs: 20, inputs: null, warmup: 1, opt: 'all' };
  for (let i = 0; i < argv.length; i++) {
    const s = argv[i];
    if (s === '--threads' || s === '-x') a.threads = Number(argv[++i]);
    else if (s === '--runs' || s === '-r') a.runs = Number(argv[++i]);
    else if (s === '--inputs') a.inputs = argv[++i];
    else if (s === '--warmup') a.warmup = Number(argv[++i]);
    else if (s === '--opt') a.opt = argv[++i];
    else if (s.startsWith('-')) throw new Error(`unknown option ${s}`);
    else if (!a.model) a.model = s;
    else throw new Error(`unexpected argument ${s}`);
  }
  if (!a.model || !a.inputs || !(a.runs >= 1) || !(a.threads >= 1)) {
    throw new Error('usage: perf.js MODEL --threads N --runs M --inputs DIR [--warmup W] [--opt all]');
  }
  return a;
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function percentile(xs, p) {  // nearest rank
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

const round3 = (x) => Math.round(x * 1000) / 1000;

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const opts = {
    intraOpNumThreads: a.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: a.opt,
    executionMode: 'sequential',
  };
  const t0 = nowMs();
  const session = await ort.InferenceSession.create(a.model, opts);
  const t1 = nowMs();
  const feeds = readInputs(ort, a.inputs, session.inputNames);
  const t2 = nowMs();
  await session.run(feeds);
  const t3 = nowMs();
  for (let i = 0; i < a.warmup; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < a.runs; i++) {
    const s = nowMs();
    await session.run(feeds);
    times.push(nowMs() - s);
  }
  await session.release();
  console.log(JSON.stringify({
    session_creation_ms: round3(t1 - t0),
    first_run_ms: round3(t3 - t2),
    run_ms_median: round3(median(times)),
    run_ms_p90: round3(percentile(times, 90)),
    peak_rss_mb: round3(process.resourceUsage().maxRSS / 1024),
    runs: a.runs,
    threads: a.threads,
    ort_isa: ORT_ISA,
  }));
}

main().catch((e) => {
  console.error(`perf.js: ${e.message || e}`);
  process.exit(1);
});
