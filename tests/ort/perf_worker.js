#!/usr/bin/env node
'use strict';
// A persistent onnxruntime-node 1.30 timing worker, the ORT side of the performance differential tester
// (tests/perftest/perftest.py). One JSON command per line on stdin, one JSON answer per line on stdout:
//
//   {"cmd":"load","id":"g1","model":PATH,"threads":2,"opt":"all"}
//       -> {"ok":true,"create_ms":..,"inputs":[names],"outputs":[names]}
//       session options: intraOpNumThreads=threads, interOpNumThreads=1, graphOptimizationLevel=opt (default all),
//       executionMode sequential
//   {"cmd":"inputs","id":"g1","dir":DIR}                  the feeds from DIR/input_N.pb (tensorproto.js)
//   {"cmd":"inputs","id":"g1","tensors":{NAME:{"type":"float32","dims":[..],"data":[..] | "b64":BASE64}}}
//       raw arrays: a JSON list of numbers or the little-endian bytes in base64
//       -> {"ok":true}
//   {"cmd":"run","id":"g1","warmup":W,"warmup_ms":T?,"runs":N,"outputs_dir":DIR?}
//       W untimed runs (then more until T ms have passed), then N timed runs -> {"ok":true,"times_ms":[N numbers]}; with outputs_dir the outputs of
//       the first run are written there as output_K.pb (K = the session's output order) before the timing
//   {"cmd":"release","id":"g1"}                          -> {"ok":true}
//   {"cmd":"info"}                 -> {"ok":true,"version":"1.30.0","ort_isa":"native" | "avx2 (MLAS held by patch)"}
//       (load_ort.js: ORT is held to AVX2 when ONEDNN_MAX_CPU_ISA=AVX2 or EPCTX_ORT_ISA=avx2)
//   {"cmd":"quit"}                                        exits
//
// A command that fails answers {"ok":false,"error":MESSAGE}; the worker goes on. Times are process.hrtime around
// each `await session.run(feeds)`.

const fs = require('fs');
const path = require('path');
const readline = require('readline');
const { ort, isa: ORT_ISA } = require('./load_ort');  // held to AVX2 when the run is at that level
const { readInputs, tensorToPb } = require('./tensorproto');

const sessions = new Map();  // id -> {session, feeds}
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const round4 = (x) => Math.round(x * 1e4) / 1e4;

const CTORS = {
  float32: Float32Array, int64: BigInt64Array, int32: Int32Array, uint8: Uint8Array, int8: Int8Array,
  bool: Uint8Array, float64: Float64Array,
};

function rawTensor(t) {
  const Ctor = CTORS[t.type];
  if (!Ctor) throw new Error(`unsupported tensor type ${t.type}`);
  let data;
  if (t.b64 !== undefined) {
    const buf = Buffer.from(t.b64, 'base64');
    const copy = new ArrayBuffer(buf.length);
    new Uint8Array(copy).set(buf);
    data = new Ctor(copy);
  } else {
    data = Ctor === BigInt64Array ? BigInt64Array.from(t.data.map((v) => BigInt(v))) : Ctor.from(t.data);
  }
  return new ort.Tensor(t.type, data, t.dims);
}

function get(id) {
  const s = sessions.get(id);
  if (!s) throw new Error(`no session ${id}`);
  return s;
}

async function handle(req) {
  switch (req.cmd) {
    case 'info':
      return { ok: true, version: ort.env.versions.node, ort_isa: ORT_ISA };
    case 'load': {
      if (sessions.has(req.id)) throw new Error(`session ${req.id} exists`);
      const opts = {
        intraOpNumThreads: req.threads || 2,
        interOpNumThreads: 1,
        graphOptimizationLevel: req.opt || 'all',
        executionMode: 'sequential',
      };
      const t0 = nowMs();
      const session = await ort.InferenceSession.create(req.model, opts);
      const t1 = nowMs();
      sessions.set(req.id, { session, feeds: null });
      return { ok: true, create_ms: round4(t1 - t0), inputs: session.inputNames, outputs: session.outputNames };
    }
    case 'inputs': {
      const s = get(req.id);
      if (req.dir) {
        s.feeds = readInputs(ort, req.dir, s.session.inputNames);
      } else {
        s.feeds = {};
        for (const [name, t] of Object.entries(req.tensors || {})) s.feeds[name] = rawTensor(t);
      }
      return { ok: true };
    }
    case 'run': {
      const s = get(req.id);
      if (!s.feeds) throw new Error('no inputs set');
      if (req.outputs_dir) {
        const out = await s.session.run(s.feeds);
        fs.mkdirSync(req.outputs_dir, { recursive: true });
        s.session.outputNames.forEach((name, k) => {
          fs.writeFileSync(path.join(req.outputs_dir, `output_${k}.pb`), tensorToPb(name, out[name]));
        });
      }
      for (let i = 0; i < (req.warmup || 0); i++) await s.session.run(s.feeds);
      if (req.warmup_ms) {  // untimed runs until this much time has passed
        const until = nowMs() + req.warmup_ms;
        while (nowMs() < until) await s.session.run(s.feeds);
      }
      const times = [];
      for (let i = 0; i < (req.runs || 0); i++) {
        const t0 = nowMs();
        await s.session.run(s.feeds);
        times.push(round4(nowMs() - t0));
      }
      return { ok: true, times_ms: times };
    }
    case 'release': {
      const s = sessions.get(req.id);
      if (s) {
        sessions.delete(req.id);
        await s.session.release();
      }
      return { ok: true };
    }
    case 'quit':
      process.exit(0);
      break;
    default:
      throw new Error(`unknown command ${req.cmd}`);
  }
  return { ok: true };
}

async function main() {
  const rl = readline.createInterface({ input: process.stdin, terminal: false });
  for await (const line of rl) {
    if (!line.trim()) continue;
    let answer;
    try {
      answer = await handle(JSON.parse(line));
    } catch (e) {
      answer = { ok: false, error: String((e && e.message) || e).slice(0, 2000) };
    }
    process.stdout.write(JSON.stringify(answer) + '\n');
  }
  for (const s of sessions.values()) await s.session.release();
}

main().catch((e) => {
  console.error(`perf_worker.js: ${e.message || e}`);
  process.exit(1);
});
