#!/usr/bin/env node
'use strict';
// Greedy generation on a prefill + decode model pair in onnxruntime-node 1.30: the ORT side of
// bench/generate.cc (build/bin/epctx_generate). Same arguments (those that apply), same prompt, same JSON, same
// --dump format; tests/generate/generate_matches_ort.py compares the dumps, bench/run_generate_bench.sh the times.
//
//   node tests/ort/generate.js --prefill P.onnx --decode D.onnx [--threads N] (--prompt-len L [--seed S] |
//        --prompt 1,2,3) --tokens T [--vocab V] [--warmup W] [--opt disabled|basic|extended|all] [--dump FILE] [--json]
//
// Session options: intraOpNumThreads=N (when given), interOpNumThreads=1, graphOptimizationLevel --opt (default
// 'all', as tests/ort/perf.js), executionMode 'sequential'.
// The loop: prefill once on the prompt (input_ids [1,L]), token 0 = argmax of its last logits row (first maximum on
// ties); then T-1 decode steps, each feeding the previous token ([1,1]) and past_X = the previous present_X tensors
// (passed back as they came out). Prompt without --prompt: the 64-bit LCG of generate.cc:
//   state = S (default 1); per id: state = state * 6364136223846793005 + 1442695040888963407 (mod 2^64);
//   id = (state >> 33) % V
// Step times: the session.run call (building the input_ids tensor included; argmax and dump excluded).
// --dump FILE: "EPCTXGEN", uint32 1, uint32 V, then per step int32 step, int32 past length, int64 token,
// float32[V] logits row (little-endian).
// Failures print "generate.js: <message>" on stderr and exit 2.

const fs = require('fs');

class Fail extends Error {}

const USAGE = 'usage: generate.js --prefill P.onnx --decode D.onnx [--threads N] (--prompt-len L [--seed S] | ' +
  '--prompt 1,2,3) --tokens T [--vocab V] [--warmup W] [--opt all] [--dump FILE] [--json]';

function parseIntArg(opt, s, min) {
  if (s === undefined) throw new Fail(`${opt} needs a value`);
  if (!/^[0-9]+$/.test(s) || Number(s) < min) throw new Fail(`${opt} needs an integer >= ${min}, got '${s}'`);
  return Number(s);
}

function parseArgs(argv) {
  const a = {
    prefill: null, decode: null, threads: 0, promptLen: -1, tokens: -1, vocab: -1, warmup: 0, seed: 1n,
    prompt: null, opt: 'all', dump: null, json: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const s = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Fail(`${s} needs a value`);
      return argv[++i];
    };
    if (s === '--prefill') a.prefill = next();
    else if (s === '--decode') a.decode = next();
    else if (s === '--threads') a.threads = parseIntArg(s, next(), 0);
    else if (s === '--prompt-len') a.promptLen = parseIntArg(s, next(), 1);
    else if (s === '--tokens') a.tokens = parseIntArg(s, next(), 1);
    else if (s === '--vocab') a.vocab = parseIntArg(s, next(), 1);
    else if (s === '--warmup') a.warmup = parseIntArg(s, next(), 0);
    else if (s === '--seed') { const v = next(); parseIntArg(s, v, 0); a.seed = BigInt(v); }
    else if (s === '--prompt') a.prompt = next().split(',').map((x) => parseIntArg('--prompt', x, 0));
    else if (s === '--opt') a.opt = next();
    else if (s === '--dump') a.dump = next();
    else if (s === '--json') a.json = true;
    else if (s === '-h' || s === '--help') { console.log(USAGE); process.exit(0); }
    else throw new Fail(`unknown argument '${s}'\n${USAGE}`);
  }
  if (!a.prefill || !a.decode) throw new Fail(`--prefill and --decode are required\n${USAGE}`);
  if (a.tokens < 0) throw new Fail(`--tokens is required\n${USAGE}`);
  if ((a.prompt === null) === (a.promptLen < 0)) throw new Fail('give exactly one of --prompt-len and --prompt');
  if (!['disabled', 'basic', 'extended', 'all'].includes(a.opt)) throw new Fail(`--opt: unknown level '${a.opt}'`);
  for (const p of [a.prefill, a.decode]) {
    let st = null;
    try { st = fs.statSync(p); } catch (e) { /* reported below */ }
    if (!st || !st.isFile()) throw new Fail(`no such model file: '${p}'`);
  }
  return a;
}

function lcgPrompt(seed, len, vocab) {
  const mask = (1n << 64n) - 1n;
  let state = seed & mask;
  const ids = [];
  for (let i = 0; i < len; i++) {
    state = (state * 6364136223846793005n + 1442695040888963407n) & mask;
    ids.push(Number((state >> 33n) % BigInt(vocab)));
  }
  return ids;
}

function argmax(row) {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const r4 = (x) => Math.round(x * 10000) / 10000;

// What the loop needs from the two models, checked before anything runs (as generate.cc's CheckPair).
function checkPair(prefill, decode, vocabOpt) {
  const kv = prefill.outputNames.filter((n) => n.startsWith('present_')).map((n) => n.slice(8));
  if (!kv.length) throw new Fail('prefill model has no present_* outputs (the KV cache): is it a prefill model?');
  for (const [s, which, n] of [[prefill, 'prefill', 1], [decode, 'decode', 1 + kv.length]]) {
    if (!s.inputNames.includes('input_ids')) throw new Fail(`${which} model has no 'input_ids' input`);
    if (s.inputNames.length !== n) {
      throw new Fail(`${which} model has ${s.inputNames.length} inputs, expected ${n}` +
        (n === 1 ? ' (input_ids)' : ' (input_ids + past_*)'));
    }
    if (!s.outputNames.includes('logits')) {
      throw new Fail(`${which} model has no 'logits' output: not a decoder made like make_decoder.py`);
    }
  }
  for (const x of kv) {
    if (!decode.inputNames.includes(`past_${x}`)) {
      throw new Fail(`decode model has no input 'past_${x}' for prefill's output 'present_${x}'`);
    }
    if (!decode.outputNames.includes(`present_${x}`)) throw new Fail(`decode model has no output 'present_${x}'`);
  }
  const vocabOf = (s) => {
    const md = s.outputMetadata && s.outputMetadata[s.outputNames.indexOf('logits')];
    const shape = md && md.shape;
    return shape && shape.length === 3 && typeof shape[2] === 'number' && shape[2] > 0 ? shape[2] : -1;
  };
  const vp = vocabOf(prefill);
  const vd = vocabOf(decode);
  if (vp > 0 && vd > 0 && vp !== vd) {
    throw new Fail(`vocab mismatch: prefill logits have ${vp} columns, decode logits ${vd}`);
  }
  const v = vp > 0 ? vp : vd;
  if (vocabOpt > 0 && v > 0 && vocabOpt !== v) {
    throw new Fail(`vocab mismatch: --vocab ${vocabOpt} but the models' logits have ${v} columns`);
  }
  const vocab = v > 0 ? v : vocabOpt;
  if (vocab <= 0) throw new Fail('the models\' logits have a symbolic vocab dimension: give --vocab V');
  return { vocab, kv };
}

class Dump {
  constructor(path, vocab) {
    this.fd = path ? fs.openSync(path, 'w') : null;
    this.vocab = vocab;
    if (this.fd === null) return;
    const head = Buffer.alloc(16);
    head.write('EPCTXGEN', 0, 'latin1');
    head.writeUInt32LE(1, 8);
    head.writeUInt32LE(vocab, 12);
    fs.writeSync(this.fd, head);
  }

  record(step, past, token, row) {
    if (this.fd === null) return;
    const head = Buffer.alloc(16);
    head.writeInt32LE(step, 0);
    head.writeInt32LE(past, 4);
    head.writeBigInt64LE(BigInt(token), 8);
    fs.writeSync(this.fd, head);
    const f = Float32Array.from(row);
    fs.writeSync(this.fd, Buffer.from(f.buffer, f.byteOffset, f.byteLength));
  }

  close() {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }
}

function logitsRow(t, rows, vocab, which) {
  const d = t.dims;
  if (d.length !== 3 || d[0] !== 1 || d[1] !== rows || d[2] !== vocab) {
    throw new Fail(`${which} gave logits of shape [${d.join(',')}], expected [1,${rows},${vocab}]`);
  }
  return t.data.subarray((rows - 1) * vocab, rows * vocab);
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ort = require('onnxruntime-node');
  const opts = { interOpNumThreads: 1, graphOptimizationLevel: a.opt, executionMode: 'sequential' };
  if (a.threads > 0) opts.intraOpNumThreads = a.threads;
  const t0 = nowMs();
  const prefill = await ort.InferenceSession.create(a.prefill, opts);
  const t1 = nowMs();
  const decode = await ort.InferenceSession.create(a.decode, opts);
  const t2 = nowMs();
  const { vocab: V, kv: kvNames } = checkPair(prefill, decode, a.vocab);
  const prompt = a.prompt || lcgPrompt(a.seed, a.promptLen, V);
  for (const id of prompt) {
    if (id >= V) throw new Fail(`--prompt id ${id} is outside the vocab (${V})`);
  }
  const L = prompt.length;
  const promptIds = BigInt64Array.from(prompt.map(BigInt));

  const runPrefill = () => prefill.run({ input_ids: new ort.Tensor('int64', promptIds, [1, L]) });
  const runDecode = (token, kv) => {
    const feeds = { input_ids: new ort.Tensor('int64', BigInt64Array.of(BigInt(token)), [1, 1]) };
    for (const x of kvNames) feeds[`past_${x}`] = kv[x];
    return decode.run(feeds);
  };
  const takeKv = (out) => Object.fromEntries(kvNames.map((x) => [x, out[`present_${x}`]]));

  for (let w = 0; w < a.warmup; w++) {
    const out = await runPrefill();
    await runDecode(argmax(logitsRow(out.logits, L, V, 'prefill')), takeKv(out));
  }

  const dump = new Dump(a.dump, V);
  const tokens = [];
  const decodeMs = [];
  const pastLens = [];
  let s = nowMs();
  let out = await runPrefill();
  const prefillMs = nowMs() - s;
  let row = logitsRow(out.logits, L, V, 'prefill');
  let next = argmax(row);
  tokens.push(next);
  dump.record(0, 0, next, row);
  let kv = takeKv(out);
  for (let step = 1; step < a.tokens; step++) {
    const past = kv[kvNames[0]].dims[2];
    s = nowMs();
    out = await runDecode(next, kv);
    decodeMs.push(nowMs() - s);
    pastLens.push(past);
    row = logitsRow(out.logits, 1, V, 'decode');
    next = argmax(row);
    tokens.push(next);
    dump.record(step, past, next, row);
    kv = takeKv(out);
  }
  dump.close();
  await prefill.release();
  await decode.release();

  if (a.json) {
    console.log(JSON.stringify({
      runtime: 'onnxruntime-node', version: ort.env.versions.common, threads: a.threads, opt: a.opt,
      prompt_len: L, vocab: V,
      session_creation_ms: r4(t2 - t0), session_creation_prefill_ms: r4(t1 - t0),
      session_creation_decode_ms: r4(t2 - t1),
      prefill_ms: r4(prefillMs), decode_ms: decodeMs.map(r4), past_lens: pastLens, tokens, prompt,
      peak_rss_mb: r4(process.resourceUsage().maxRSS / 1024),
    }));
  } else {
    const sorted = [...decodeMs].sort((x, y) => x - y);
    const med = sorted.length ? sorted[sorted.length >> 1] : 0;
    console.log(`generate.js: onnxruntime-node ${ort.env.versions.common}, prompt ${L}, ${tokens.length} tokens, ` +
      `vocab ${V}`);
    console.log(`  session creation ${(t2 - t0).toFixed(2)} ms, prefill ${prefillMs.toFixed(2)} ms, decode median ` +
      `${med.toFixed(3)} ms/token over ${decodeMs.length} steps`);
    console.log(`  tokens: ${tokens.join(' ')}`);
  }
}

main().catch((e) => {
  console.error(`generate.js: ${e instanceof Fail ? e.message : (e && e.message) || e}`);
  process.exit(2);
});
