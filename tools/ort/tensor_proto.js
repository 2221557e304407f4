// Reads a serialized onnx.TensorProto (the test_data_set_*/input_*.pb files) without protobufjs.
'use strict';
const fs = require('fs');

const ELEM = { 1: 'float32', 2: 'uint8', 6: 'int32', 7: 'int64', 9: 'bool', 11: 'float64' };
const ARRAYS = {
  float32: Float32Array, uint8: Uint8Array, int32: Int32Array,
  int64: BigInt64Array, bool: Uint8Array, float64: Float64Array,
};

function readVarint(buf, pos) {
  let value = 0n;
  let shift = 0n;
  for (;;) {
    if (pos >= buf.length) throw new Error('truncated varint');
    const b = buf[pos++];
    value |= BigInt(b & 0x7f) << shift;
    if (!(b & 0x80)) return [value, pos];
    shift += 7n;
  }
}

// Returns { name, dtype, shape, data }.
function readTensorProto(path) {
  const buf = fs.readFileSync(path);
  const dims = [];
  const repeated = { 4: [], 5: [], 7: [], 10: [] };
  let dataType = 0;
  let raw = null;
  let name = '';
  let pos = 0;
  while (pos < buf.length) {
    let key;
    [key, pos] = readVarint(buf, pos);
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) {
      let v;
      [v, pos] = readVarint(buf, pos);
      if (field === 1) dims.push(Number(v));
      else if (field === 2) dataType = Number(v);
      else if (field === 5 || field === 7) repeated[field].push(v);
    } else if (wire === 2) {
      let len;
      [len, pos] = readVarint(buf, pos);
      const body = buf.subarray(pos, pos + Number(len));
      pos += Number(len);
      if (field === 9) raw = body;
      else if (field === 8) name = body.toString('utf8');
      else if (field === 4) for (let i = 0; i + 4 <= body.length; i += 4) repeated[4].push(body.readFloatLE(i));
      else if (field === 10) for (let i = 0; i + 8 <= body.length; i += 8) repeated[10].push(body.readDoubleLE(i));
      else if (field === 1 || field === 5 || field === 7) {
        for (let p = 0; p < body.length;) {
          let v;
          [v, p] = readVarint(body, p);
          if (field === 1) dims.push(Number(v)); else repeated[field].push(v);
        }
      }
    } else if (wire === 5) {
      if (field === 4) repeated[4].push(buf.readFloatLE(pos));
      pos += 4;
    } else if (wire === 1) {
      if (field === 10) repeated[10].push(buf.readDoubleLE(pos));
      pos += 8;
    } else {
      throw new Error(`${path}: unsupported wire type ${wire}`);
    }
  }
  const dtype = ELEM[dataType];
  if (!dtype) throw new Error(`${path}: unsupported TensorProto data_type ${dataType}`);
  const count = dims.reduce((a, b) => a * b, 1);
  const Arr = ARRAYS[dtype];
  const data = new Arr(count);
  if (raw) {
    if (raw.length !== count * Arr.BYTES_PER_ELEMENT) throw new Error(`${path}: raw_data size mismatch`);
    Buffer.from(data.buffer).set(raw);
  } else {
    const src = dtype === 'float32' ? repeated[4] : dtype === 'float64' ? repeated[10]
      : dtype === 'int64' ? repeated[7] : repeated[5];
    if (src.length !== count) throw new Error(`${path}: expected ${count} values, found ${src.length}`);
    for (let i = 0; i < count; i++) data[i] = dtype === 'int64' ? BigInt.asIntN(64, src[i]) : Number(src[i]);
  }
  return { name, dtype, shape: dims, data };
}

module.exports = { readTensorProto };
