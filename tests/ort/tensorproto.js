'use strict';
// Minimal onnx.TensorProto (de)serializer for the ONNX backend test layout (input_N.pb / output_N.pb).
// Reads dims, data_type, name, raw_data and the typed *_data fields (packed or not); writes raw_data.
// No external data, no strings.

const fs = require('fs');
const path = require('path');

// ONNX TensorProto.DataType -> [onnxruntime-node type, TypedArray]
const DTYPES = {
  1: ['float32', Float32Array],
  2: ['uint8', Uint8Array],
  3: ['int8', Int8Array],
  4: ['uint16', Uint16Array],
  5: ['int16', Int16Array],
  6: ['int32', Int32Array],
  7: ['int64', BigInt64Array],
  9: ['bool', Uint8Array],
  10: ['float16', Uint16Array],
  11: ['float64', Float64Array],
  12: ['uint32', Uint32Array],
  13: ['uint64', BigUint64Array],
};
const ORT_TO_ONNX = Object.fromEntries(Object.entries(DTYPES).map(([k, v]) => [v[0], Number(k)]));

function readVarint(buf, pos) {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    if (pos >= buf.length) throw new Error('truncated varint');
    const b = buf[pos++];
    result |= BigInt(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
    shift += 7n;
  }
  return [result, pos];
}

function writeVarint(out, value) {
  let v = BigInt.asUintN(64, BigInt(value));
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v) b |= 0x80;
    out.push(b);
  } while (v);
}

function decodeTensor(buf) {
  const t = { dims: [], dataType: 0, name: '', raw: null, values: [] };
  let pos = 0;
  while (pos < buf.length) {
    let key;
    [key, pos] = readVarint(buf, pos);
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) {
      let v;
      [v, pos] = readVarint(buf, pos);
      if (field === 1) t.dims.push(Number(BigInt.asIntN(64, v)));
      else if (field === 2) t.dataType = Number(v);
      else if (field === 5 || field === 7 || field === 11) t.values.push(field === 11 ? v : BigInt.asIntN(64, v));
    } else if (wire === 2) {
      let len;
      [len, pos] = readVarint(buf, pos);
      const end = pos + Number(len);
      if (end > buf.length) throw new Error('truncated field');
      const body = buf.subarray(pos, end);
      pos = end;
      if (field === 8) t.name = body.toString('utf8');
      else if (field === 9) t.raw = body;
      else if (field === 1 || field === 5 || field === 7 || field === 11) {  // packed varints
        let p = 0;
        while (p < body.length) {
          let v;
          [v, p] = readVarint(body, p);
          if (field === 1) t.dims.push(Number(BigInt.asIntN(64, v)));
          else t.values.push(field === 11 ? v : BigInt.asIntN(64, v));
        }
      } else if (field === 4) {  // packed float_data
        for (let p = 0; p + 4 <= body.length; p += 4) t.values.push(body.readFloatLE(p));
      } else if (field === 10) {  // packed double_data
        for (let p = 0; p + 8 <= body.length; p += 8) t.values.push(body.readDoubleLE(p));
      } else if (field === 14) {
        throw new Error('external data in a test tensor is not supported');
      }
    } else if (wire === 5) {
      if (field === 4) t.values.push(buf.readFloatLE(pos));
      pos += 4;
    } else if (wire === 1) {
      if (field === 10) t.values.push(buf.readDoubleLE(pos));
      pos += 8;
    } else {
      throw new Error(`unsupported wire type ${wire}`);
    }
  }
  return t;
}

// TensorProto bytes -> {name, tensor: ort.Tensor}
function tensorFromPb(ort, buf) {
  const t = decodeTensor(buf);
  const info = DTYPES[t.dataType];
  if (!info) throw new Error(`unsupported TensorProto data_type ${t.dataType} (${t.name})`);
  const [type, Ctor] = info;
  const count = t.dims.reduce((a, b) => a * b, 1);
  let data;
  if (t.raw) {
    const copy = Buffer.from(t.raw);  // aligned copy
    data = new Ctor(copy.buffer, copy.byteOffset, copy.byteLength / Ctor.BYTES_PER_ELEMENT);
  } else {
    data = new Ctor(count);
    for (let i = 0; i < count; i++) {
      const v = t.values[i];
      if (Ctor === BigInt64Array || Ctor === BigUint64Array) data[i] = BigInt(v);
      else data[i] = Number(v);
    }
  }
  if (data.length !== count) throw new Error(`${t.name}: ${data.length} elements for dims [${t.dims}]`);
  if (type === 'bool') data = new Uint8Array(data.buffer, data.byteOffset, data.length);
  return { name: t.name, tensor: new ort.Tensor(type, data, t.dims) };
}

// ort.Tensor -> TensorProto bytes (raw_data)
function tensorToPb(name, tensor) {
  const dt = ORT_TO_ONNX[tensor.type];
  if (!dt) throw new Error(`cannot serialize tensor type ${tensor.type}`);
  const head = [];
  for (const d of tensor.dims) { head.push(0x08); writeVarint(head, d); }  // dims (field 1, varint)
  head.push(0x10); writeVarint(head, dt);                                  // data_type (field 2)
  const nameBytes = Buffer.from(name, 'utf8');
  head.push(0x42); writeVarint(head, nameBytes.length);                    // name (field 8)
  const d = tensor.data;
  const raw = Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  const rawHead = [0x4a];                                                  // raw_data (field 9)
  writeVarint(rawHead, raw.length);
  return Buffer.concat([Buffer.from(head), nameBytes, Buffer.from(rawHead), raw]);
}

// Reads DIR/input_N.pb (N = 0, 1, ...) and returns feeds keyed by the session's input names.
// A tensor's own name is used when it names an input; otherwise its position does.
function readInputs(ort, dir, inputNames) {
  const files = fs.readdirSync(dir).filter((f) => /^input_\d+\.pb$/.test(f))
    .sort((a, b) => Number(a.match(/\d+/)[0]) - Number(b.match(/\d+/)[0]));
  if (files.length !== inputNames.length) {
    throw new Error(`${dir}: ${files.length} input_N.pb files for ${inputNames.length} model inputs`);
  }
  const feeds = {};
  files.forEach((f, i) => {
    const { name, tensor } = tensorFromPb(ort, fs.readFileSync(path.join(dir, f)));
    feeds[inputNames.includes(name) ? name : inputNames[i]] = tensor;
  });
  return feeds;
}

module.exports = { decodeTensor, tensorFromPb, tensorToPb, readInputs, readVarint, writeVarint };
