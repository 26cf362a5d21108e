#!/usr/bin/env node
'use strict';
// Drives onnxruntime-node 1.30 over a manifest written by tests/opset/gen.py (one process for every case).
//
//   node tests/opset/ort_ref.js probe MANIFEST OUT.json   creates a CPU session per model, records ok / ORT's message
//   node tests/opset/ort_ref.js run MANIFEST              runs each case folder, writes test_data_set_0/output_N.pb
//
// MANIFEST is JSON: [{"id", "op", "version", "model", "dir"}...]. Sessions use the CPU EP only, graph
// optimizations disabled (the graph's literal semantics), one thread.

const fs = require('fs');
const path = require('path');
const ort = require(path.join(__dirname, '..', 'ort', 'node_modules', 'onnxruntime-node'));
const { tensorFromPb, tensorToPb, decodeTensor, readVarint: varint, writeVarint: putVarint } =
  require(path.join(__dirname, '..', 'ort', 'tensorproto'));

const OPTS = {
  executionProviders: ['cpu'],
  intraOpNumThreads: 1,
  interOpNumThreads: 1,
  graphOptimizationLevel: 'disabled',
  executionMode: 'sequential',
};

// String tensors (TensorProto.string_data, field 6), which tests/ort/tensorproto.js does not carry (its varint
// reader and writer are reused).
function stringTensorFromPb(buf) {
  const dims = [];
  const strings = [];
  let name = '';
  let pos = 0;
  while (pos < buf.length) {
    let key;
    [key, pos] = varint(buf, pos);
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) {
      let v;
      [v, pos] = varint(buf, pos);
      if (field === 1) dims.push(Number(v));
    } else if (wire === 2) {
      let len;
      [len, pos] = varint(buf, pos);
      const body = buf.subarray(pos, pos + Number(len));
      pos += Number(len);
      if (field === 6) strings.push(body.toString('utf8'));
      else if (field === 8) name = body.toString('utf8');
      else if (field === 1) for (let p = 0; p < body.length;) { let v; [v, p] = varint(body, p); dims.push(Number(v)); }
    } else if (wire === 5) pos += 4;
    else if (wire === 1) pos += 8;
  }
  return { name, tensor: new ort.Tensor('string', strings, dims) };
}

function stringTensorToPb(name, t) {
  const out = [];
  for (const d of t.dims) { out.push(0x08); putVarint(out, d); }
  out.push(0x10); putVarint(out, 8);
  const parts = [Buffer.from(out)];
  for (const s of t.data) {
    const b = Buffer.from(s, 'utf8');
    const h = [0x32];
    putVarint(h, b.length);
    parts.push(Buffer.from(h), b);
  }
  const nb = Buffer.from(name, 'utf8');
  const h = [0x42];
  putVarint(h, nb.length);
  parts.push(Buffer.from(h), nb);
  return Buffer.concat(parts);
}

// Feeds from DIR/input_N.pb keyed as tests/ort/tensorproto.js's readInputs does (a tensor's own name when it names an
// input, else its position); string tensors decoded here.
function readFeeds(dir, inputNames) {
  const files = fs.readdirSync(dir).filter((f) => /^input_\d+\.pb$/.test(f))
    .sort((a, b) => Number(a.match(/\d+/)[0]) - Number(b.match(/\d+/)[0]));
  if (files.length !== inputNames.length) {
    throw new Error(`${dir}: ${files.length} input_N.pb files for ${inputNames.length} model inputs`);
  }
  const feeds = {};
  files.forEach((f, i) => {
    const buf = fs.readFileSync(path.join(dir, f));
    const { name, tensor } = decodeTensor(buf).dataType === 8 ? stringTensorFromPb(buf) : tensorFromPb(ort, buf);
    feeds[inputNames.includes(name) ? name : inputNames[i]] = tensor;
  });
  return feeds;
}

async function probe(manifest, outFile) {
  const results = [];
  for (const m of manifest) {
    let ok = true;
    let message = '';
    try {
      const s = await ort.InferenceSession.create(m.model, OPTS);
      await s.release();
    } catch (e) {
      ok = false;
      message = String(e.message || e).split('\n')[0];
    }
    results.push({ op: m.op, version: m.version, ort_cpu: ok, message });
  }
  fs.writeFileSync(outFile, JSON.stringify(results, null, 1) + '\n');
}

async function run(manifest) {
  let failed = 0;
  for (const m of manifest) {
    try {
      const s = await ort.InferenceSession.create(m.model, OPTS);
      const data = path.join(m.dir, 'test_data_set_0');
      const feeds = readFeeds(data, s.inputNames);
      const res = await s.run(feeds);
      s.outputNames.forEach((name, i) => {
        const t = res[name];
        fs.writeFileSync(path.join(data, `output_${i}.pb`),
          t.type === 'string' ? stringTensorToPb(name, t) : tensorToPb(name, t));
      });
      await s.release();
    } catch (e) {
      failed++;
      console.error(`ort_ref.js: ${m.id}: ${String(e.message || e).split('\n')[0]}`);
      // A string "expected output" no run can match: the case fails visibly instead of passing with no outputs.
      const msg = `ORT 1.30 failed: ${String(e.message || e).split('\n')[0]}`;
      const data = path.join(m.dir, 'test_data_set_0');
      fs.mkdirSync(data, { recursive: true });
      fs.writeFileSync(path.join(data, 'output_0.pb'),
        stringTensorToPb('ORT_FAILED', { dims: [1], data: [msg] }));
    }
  }
  console.log(`ort_ref.js: ${manifest.length - failed} cases with ORT references, ${failed} failed`);
}

async function main() {
  const [mode, manifestFile, outFile] = process.argv.slice(2);
  const manifest = JSON.parse(fs.readFileSync(manifestFile, 'utf8'));
  if (mode === 'probe') await probe(manifest, outFile);
  else if (mode === 'run') await run(manifest);
  else throw new Error('usage: ort_ref.js probe|run MANIFEST [OUT.json]');
}

main().catch((e) => {
  console.error(`ort_ref.js: ${e.message || e}`);
  process.exit(1);
});
