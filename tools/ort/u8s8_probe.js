#!/usr/bin/env node
// Asks the ONNX Runtime of this CPU whether its fused int8 kernels sum u8 x s8 products in 16
// bits. The probe is a one-node QDQ Conv: 8 input channels quantized to int8 127 (ONNX Runtime
// on x86 turns them into uint8 255), 16 output channels of int8 weights w, all equal. Exactly,
// every output is 8 * (1 * 1) = 8. AVX2 kernels without VNNI multiply pairs of u8 x s8 with
// vpmaddubsw, which saturates each pair sum at 32767: with w = 127 a pair is 2 * 255 * 127 =
// 64770, and the output collapses to about 0.06. With 7-bit weights (w = 64, 2 * 255 * 64 =
// 32640) the pair fits and the output stays 8 on every CPU (docs/quantization.md).
// Usage: u8s8_probe.js [--json]     (run it under `qemu-x86_64 -cpu Haswell` to emulate AVX2)
// Prints what it found; exits 0 whatever the answer, 1 when ONNX Runtime fails.
'use strict';
const { loadOrt } = require('./ort_loader');
const { encodeVarint: varint } = require('./protobuf');

const CHANNELS = 8;
const OUTPUTS = 16;

// --- a minimal protobuf writer for the few ONNX messages the probe needs

const field = (number, wire) => varint(number * 8 + wire);
const int = (number, value) => Buffer.concat([field(number, 0), varint(value)]);
const bytes = (number, body) => Buffer.concat([field(number, 2), varint(body.length), body]);
const str = (number, text) => bytes(number, Buffer.from(text, 'utf8'));

const FLOAT = 1, INT8 = 3;

function node(op, inputs, outputs) {
  return bytes(1, Buffer.concat([...inputs.map((i) => str(1, i)), ...outputs.map((o) => str(2, o)),
                                 str(3, `${outputs[0]}_node`), str(4, op)]));
}

function initializer(name, type, dims, raw) {
  return bytes(5, Buffer.concat([...dims.map((d) => int(1, d)), int(2, type), str(8, name), bytes(9, raw)]));
}

function valueInfo(number, name, dims) {
  const shape = Buffer.concat(dims.map((d) => bytes(1, int(1, d))));
  const tensorType = Buffer.concat([int(1, FLOAT), bytes(2, shape)]);
  return bytes(number, Buffer.concat([str(1, name), bytes(2, bytes(1, tensorType))]));
}

const f32 = (v) => { const b = Buffer.alloc(4); b.writeFloatLE(v); return b; };

// The probe model with every weight equal to `w` (int8) and weight scale 1 / w.
function probeModel(w) {
  const graph = Buffer.concat([
    node('QuantizeLinear', ['x', 'x_scale', 'zp'], ['x_q']),
    node('DequantizeLinear', ['x_q', 'x_scale', 'zp'], ['x_dq']),
    node('DequantizeLinear', ['w_q', 'w_scale', 'zp'], ['w_dq']),
    node('Conv', ['x_dq', 'w_dq'], ['y']),
    node('QuantizeLinear', ['y', 'y_scale', 'zp'], ['y_q']),
    node('DequantizeLinear', ['y_q', 'y_scale', 'zp'], ['out']),
    str(2, 'u8s8_probe'),
    initializer('x_scale', FLOAT, [], f32(1 / 127)),
    initializer('zp', INT8, [], Buffer.from([0])),
    initializer('w_q', INT8, [OUTPUTS, CHANNELS, 1, 1], Buffer.alloc(OUTPUTS * CHANNELS, w)),
    initializer('w_scale', FLOAT, [], f32(1 / w)),
    initializer('y_scale', FLOAT, [], f32(CHANNELS / 127)),
    valueInfo(11, 'x', [1, CHANNELS, 1, 1]),
    valueInfo(12, 'out', [1, OUTPUTS, 1, 1]),
  ]);
  return Buffer.concat([int(1, 7), bytes(7, graph), bytes(8, int(2, 13))]);
}

// Runs the probe with ONNX Runtime's default optimizations; returns the first output.
async function runProbe(w) {
  const ort = loadOrt();
  const session = await ort.InferenceSession.create(probeModel(w), {
    intraOpNumThreads: 1, graphOptimizationLevel: 'all', logSeverityLevel: 3,
  });
  const x = new ort.Tensor('float32', new Float32Array(CHANNELS).fill(1), [1, CHANNELS, 1, 1]);
  const result = await session.run({ x });
  return result.out.data[0];
}

// { saturates, int8: output with w = 127, int7: output with w = 64, expected: 8 }
async function probe() {
  const int8 = await runProbe(127);
  const int7 = await runProbe(64);
  const near = (v) => Math.abs(v - CHANNELS) < 0.5;
  return { saturates: !near(int8), int7Exact: near(int7), int8, int7, expected: CHANNELS };
}

function describe(r) {
  return r.saturates
    ? `u8 x s8 products saturate in 16 bits (AVX2 kernels without VNNI): int8 weights give ${r.int8.toFixed(4)}, ` +
      `7-bit weights ${r.int7.toFixed(4)}, exact ${r.expected}`
    : `u8 x s8 products are exact (VNNI or no 16-bit kernels): int8 weights give ${r.int8.toFixed(4)}, exact ${r.expected}`;
}

async function main() {
  const r = await probe();
  console.log(process.argv.includes('--json') ? JSON.stringify(r) : describe(r));
}

if (require.main === module) {
  main().catch((e) => {
    console.error(`u8s8_probe.js: ${e.message}`);
    process.exit(1);
  });
}

module.exports = { probe, probeModel, describe };
