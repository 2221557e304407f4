// Minimal .npy (format 1.0) reader and writer for C-order little-endian tensors.
'use strict';
const fs = require('fs');

const DTYPES = {
  '<f4': { name: 'float32', Array: Float32Array },
  '<f8': { name: 'float64', Array: Float64Array },
  '<i8': { name: 'int64', Array: BigInt64Array },
  '<i4': { name: 'int32', Array: Int32Array },
  '|u1': { name: 'uint8', Array: Uint8Array },
  '|b1': { name: 'bool', Array: Uint8Array },
};
const DESCR_OF = Object.fromEntries(Object.entries(DTYPES).map(([d, t]) => [t.name, d]));

// Returns { dtype, shape, data } where data is a typed array viewing its own buffer.
function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') {
    throw new Error(`${path}: not a .npy file`);
  }
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const fortran = /'fortran_order':\s*(True|False)/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new Error(`${path}: malformed header ${header}`);
  if (fortran[1] === 'True') throw new Error(`${path}: Fortran order is not supported`);
  const type = DTYPES[descr[1]];
  if (!type) throw new Error(`${path}: unsupported dtype ${descr[1]}`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const offset = start + headerLen;
  const bytes = count * type.Array.BYTES_PER_ELEMENT;
  if (buf.length - offset !== bytes) {
    throw new Error(`${path}: expected ${bytes} data bytes for shape (${dims}), found ${buf.length - offset}`);
  }
  // Copy so the typed array is aligned whatever the header length was.
  const data = new type.Array(count);
  Buffer.from(data.buffer).set(buf.subarray(offset, offset + bytes));
  return { dtype: type.name, shape: dims, data };
}

function writeNpy(path, dtype, shape, data) {
  const descr = DESCR_OF[dtype];
  if (!descr) throw new Error(`writeNpy: unsupported dtype ${dtype}`);
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  // Data starts on a 64-byte boundary (numpy's own choice), header ends with '\n'.
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
}

module.exports = { readNpy, writeNpy };
