// Fashion-MNIST test images for the ONNX Runtime tools, read from Debian's dataset-fashion-mnist
// IDX files and preprocessed exactly as tools/fashion_mnist_data.py does:
//   x = (pixel / 255 - 0.2860) / 0.3530, float32 [N, 1, 28, 28]
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const DEFAULT_DIR = '/usr/share/datasets/fashion-mnist';
const MEAN = 0.2860;
const STD = 0.3530;

// { shape, data (Uint8Array) } of an IDX file of unsigned bytes (.gz or plain).
function readIdxU8(file) {
  let buf = fs.readFileSync(file);
  if (file.endsWith('.gz')) buf = zlib.gunzipSync(buf);
  if (buf.length < 4 || buf[0] !== 0 || buf[1] !== 0 || buf[2] !== 0x08)
    throw new Error(`${file}: not an IDX file of unsigned bytes`);
  const ndim = buf[3];
  const shape = [];
  for (let d = 0; d < ndim; d++) shape.push(buf.readUInt32BE(4 + 4 * d));
  const count = shape.reduce((a, b) => a * b, 1);
  const start = 4 + 4 * ndim;
  if (buf.length - start !== count) throw new Error(`${file}: expected ${count} bytes of data, found ${buf.length - start}`);
  return { shape, data: buf.subarray(start) };
}

// The first `count` test images, preprocessed, and their labels:
// { images: { dtype, shape, data: Float32Array }, labels: Int32Array }.
function loadTest(count, dir = DEFAULT_DIR) {
  const images = readIdxU8(path.join(dir, 't10k-images-idx3-ubyte.gz'));
  const labels = readIdxU8(path.join(dir, 't10k-labels-idx1-ubyte.gz'));
  const n = Math.min(count, images.shape[0], labels.shape[0]);
  const pixels = images.shape[1] * images.shape[2];
  const data = new Float32Array(n * pixels);
  // float32 arithmetic in numpy's order: x / 255 first, then (x - MEAN) / STD.
  const mean = Math.fround(MEAN), std = Math.fround(STD);
  for (let i = 0; i < n * pixels; i++) {
    const scaled = Math.fround(images.data[i] / 255);
    data[i] = Math.fround(Math.fround(scaled - mean) / std);
  }
  return {
    images: { dtype: 'float32', shape: [n, 1, images.shape[1], images.shape[2]], data },
    labels: Int32Array.from(labels.data.subarray(0, n)),
  };
}

module.exports = { DEFAULT_DIR, loadTest, readIdxU8 };
