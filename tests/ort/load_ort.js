'use strict';
// onnxruntime-node for the timing sides (perf.js, perf_worker.js), at the ISA level the benchmark measures.
//
// ONNX Runtime has no switch that limits its kernels (MLAS) to an ISA: it reads CPUID and XCR0 once and uses AVX-512
// wherever the CPU has it. Our "AVX2 level" on an AVX-512 machine holds oneDNN to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2), so
// without this ORT would still run AVX-512 and every ratio at that level would compare 256-bit kernels with 512-bit
// ones. Here, when ONEDNN_MAX_CPU_ISA is AVX2 (or EPCTX_ORT_ISA=avx2), ORT is loaded from a copy of the package whose
// libonnxruntime.so.1 takes MLAS's "no AVX512F" branch: one conditional jump in MLAS_PLATFORM's constructor (the test
// of CPUID.7.EBX bit 16, AVX512F) made unconditional, so MLAS picks its AVX2/FMA3 kernels exactly as on a CPU
// without AVX-512. The instruction bytes around it are matched exactly, and must occur once, or nothing is patched
// and loading fails with a message: another ORT build is never patched blindly. EPCTX_ORT_ISA=native keeps ORT's own
// choice. The copy lives in tests/ort/avx2/ (not committed), made once, atomically.
//
// Exports {ort, isa}: isa is "avx2 (MLAS held by patch)" or "native".
const fs = require('fs');
const path = require('path');

const HERE = __dirname;
const PKG = path.join(HERE, 'node_modules', 'onnxruntime-node');
const COPY = path.join(HERE, 'avx2', 'node_modules', 'onnxruntime-node');
const LIB_DIR = path.join('bin', 'napi-v6', 'linux', 'x64');

// test $0x10000,%r10d ; je +0x0e ; mov %r8,%rax ; not %rax ; test $0xe0,%al ; je ...
// (if AVX512F is absent skip the AVX-512 block; then XCR0's opmask/ZMM state bits)
const SITE = Buffer.from('41f7c20000010074' + '0e4c89c048f7d0a8e00f84', 'hex');
const JE_AT = 7;  // the je's opcode within SITE: 0x74 (je rel8) becomes 0xeb (jmp rel8)

function wantAvx2() {
  const v = (process.env.EPCTX_ORT_ISA || '').toLowerCase();
  if (v === 'native') return false;
  if (v === 'avx2') return true;
  if (v) throw new Error(`EPCTX_ORT_ISA=${v}: expected avx2 or native`);
  return (process.env.ONEDNN_MAX_CPU_ISA || '').toUpperCase() === 'AVX2';
}

function copyDir(src, dst) {
  fs.mkdirSync(dst, { recursive: true });
  for (const e of fs.readdirSync(src, { withFileTypes: true })) {
    const s = path.join(src, e.name), d = path.join(dst, e.name);
    if (e.isDirectory()) copyDir(s, d);
    else fs.copyFileSync(s, d);
  }
}

function makeCopy() {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    throw new Error('load_ort: the AVX2-held ORT exists only for linux x64');
  }
  const lib = fs.readFileSync(path.join(PKG, LIB_DIR, 'libonnxruntime.so.1'));
  const at = lib.indexOf(SITE);
  if (at < 0 || lib.indexOf(SITE, at + 1) >= 0) {
    throw new Error('load_ort: MLAS_PLATFORM\'s AVX512F test was not found exactly once in ' +
                    path.join(PKG, LIB_DIR, 'libonnxruntime.so.1') + ` (${at < 0 ? 'absent' : 'more than once'}); ` +
                    'this ORT build cannot be held to AVX2 (set EPCTX_ORT_ISA=native to measure it as it is)');
  }
  const tmp = `${COPY}.tmp-${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { recursive: true });
  for (const f of ['package.json', 'dist']) {
    const s = path.join(PKG, f), d = path.join(tmp, f);
    if (fs.statSync(s).isDirectory()) copyDir(s, d);
    else fs.copyFileSync(s, d);
  }
  fs.mkdirSync(path.join(tmp, LIB_DIR), { recursive: true });
  fs.copyFileSync(path.join(PKG, LIB_DIR, 'onnxruntime_binding.node'), path.join(tmp, LIB_DIR, 'onnxruntime_binding.node'));
  lib[at + JE_AT] = 0xeb;
  fs.writeFileSync(path.join(tmp, LIB_DIR, 'libonnxruntime.so.1'), lib);
  try {
    fs.renameSync(tmp, COPY);
  } catch (e) {
    fs.rmSync(tmp, { recursive: true, force: true });  // another process made it first
    if (!fs.existsSync(COPY)) throw e;
  }
}

function load() {
  if (!wantAvx2()) return { ort: require('onnxruntime-node'), isa: 'native' };
  const stamp = path.join(COPY, LIB_DIR, 'libonnxruntime.so.1');
  const orig = path.join(PKG, LIB_DIR, 'libonnxruntime.so.1');
  const version = (dir) => JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
  if (fs.existsSync(COPY) && (!fs.existsSync(stamp) || fs.statSync(stamp).size !== fs.statSync(orig).size ||
                              version(COPY) !== version(PKG))) {
    fs.rmSync(COPY, { recursive: true, force: true });  // left from another ORT version
  }
  if (!fs.existsSync(COPY)) makeCopy();
  return { ort: require(COPY), isa: 'avx2 (MLAS held by patch)' };
}

module.exports = load();
