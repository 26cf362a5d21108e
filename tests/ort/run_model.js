#!/usr/bin/env node
'use strict';
// Runs one model with onnxruntime-node (the reference runtime) on a test_data_set folder.
//
//   node tests/ort/run_model.js MODEL DIR [--out OUTDIR] [--threads N] [--opt disabled|basic|extended|all]
//
// DIR holds input_N.pb (serialized onnx.TensorProto, the ONNX backend test layout). The outputs are written as
// OUTDIR/output_N.pb (default OUTDIR = DIR), in the order of the session's outputs, named after them, with raw_data.
// Prints one JSON line: {"model":..,"outputs":[{"name","type","dims"}..]}.
// Reference outputs use graphOptimizationLevel 'disabled' by default (the graph's literal semantics); use --opt to
// compare against ORT's optimized graph.

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');
const { readInputs, tensorToPb } = require('./tensorproto');

function parseArgs(argv) {
  const a = { positional: [], threads: 1, opt: 'disabled', out: null };
  for (let i = 0; i < argv.length; i++) {
    const s = argv[i];
    if (s === '--threads') a.threads = Number(argv[++i]);
    else if (s === '--opt') a.opt = argv[++i];
    else if (s === '--out') a.out = argv[++i];
    else if (s.startsWith('--')) throw new Error(`unknown option ${s}`);
    else a.positional.push(s);
  }
  if (a.positional.length !== 2) {
    throw new Error('usage: run_model.js MODEL DIR [--out OUTDIR] [--threads N] [--opt disabled|basic|extended|all]');
  }
  return a;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const [model, dir] = args.positional;
  const out = args.out || dir;
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: args.opt,
    executionMode: 'sequential',
  });
  const feeds = readInputs(ort, dir, session.inputNames);
  const results = await session.run(feeds);
  fs.mkdirSync(out, { recursive: true });
  const summary = [];
  session.outputNames.forEach((name, i) => {
    const t = results[name];
    fs.writeFileSync(path.join(out, `output_${i}.pb`), tensorToPb(name, t));
    summary.push({ name, type: t.type, dims: t.dims });
  });
  await session.release();
  console.log(JSON.stringify({ model, outputs: summary }));
}

main().catch((e) => {
  console.error(`run_model.js: ${e.message || e}`);
  process.exit(1);
});
