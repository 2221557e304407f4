#!/usr/bin/env node
// Model test: the calibrated and PTQ models `qflow run` writes (import-onnx -> load-data ->
// observer minmax -> calibrator max -> quantize) must run in ONNX Runtime unchanged and agree
// with `qflow infer` on the samples of models/sample/input.npy: every int8 QuantizeLinear
// output within 1 LSB (int16: 4 LSB, see MAX_LSB), final outputs cosine >= 0.9999. The
// QuantizeLinear outputs are compared on a copy of each model that lists them as extra graph
// outputs, run by ONNX Runtime with graph optimizations disabled (ONNX reference semantics).
// The model as written must also run with ONNX Runtime's default optimizations, which fuse
// Q/DQ into integer kernels that round differently (QLinearSoftmax, requantization); that
// cosine is printed and held to a loose bar only.
// Usage: qdq_ort_test.js --qflow BIN --work DIR
// Exits 0 when all agree, 1 otherwise, 77 when onnxruntime-node cannot be fetched.
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const h = require('./harness');
const { readNpy } = require(path.join(h.TOOLS, 'ort', 'npy'));
const { loadOrt, fileNameFor } = require(path.join(h.TOOLS, 'ort', 'ort_loader'));
const { metrics, formatTable } = require(path.join(h.TOOLS, 'ort', 'compare'));
const { encodeVarint } = require(path.join(h.TOOLS, 'ort', 'protobuf'));

const MODEL = path.join(h.SOURCE_DIR, 'models', 'sample', 'sample_cnn.onnx');
const DATA = path.join(h.SOURCE_DIR, 'models', 'sample', 'input.npy');
const MIN_COSINE = 0.9999;
// Fused integer kernels in optimized ONNX Runtime: a coarse bar that still catches a broken model.
const MIN_COSINE_OPTIMIZED = 0.95;
// Largest QuantizeLinear difference allowed, in LSB. int8: 1, a rounding tie broken apart by
// a different float summation order. int16 steps are 256 times finer, so such last-bit float
// differences become 1 LSB often and carry through the following layers.
const MAX_LSB = { int8: 1, uint8: 1, int16: 4, uint16: 4 };

// Each case is one pipeline run with its [quantization] table (the calibrator follows it).
const CASES = [
  { name: 'int8', quantization: '' },
  { name: 'int16', quantization: '[quantization]\nactivation-dtype = "int16"\nweight-dtype = "int16"\n' },
];

// --- minimal protobuf reading and writing (ModelProto -> GraphProto -> NodeProto/TensorProto)

function readVarint(buf, pos) {
  let value = 0, scale = 1, b;
  do {
    if (pos >= buf.length) throw new Error('truncated varint');
    b = buf[pos++];
    value += (b & 0x7f) * scale;
    scale *= 128;
  } while (b & 0x80);
  return [value, pos];
}

// Top-level fields of a message: { field, wire, start, end, value (Buffer or number) }.
function fields(buf) {
  const out = [];
  let pos = 0;
  while (pos < buf.length) {
    const start = pos;
    let key;
    [key, pos] = readVarint(buf, pos);
    const field = Math.floor(key / 8), wire = key % 8;
    let value;
    if (wire === 0) [value, pos] = readVarint(buf, pos);
    else if (wire === 1) { value = buf.subarray(pos, pos + 8); pos += 8; }
    else if (wire === 5) { value = buf.subarray(pos, pos + 4); pos += 4; }
    else if (wire === 2) {
      let len;
      [len, pos] = readVarint(buf, pos);
      value = buf.subarray(pos, pos + len);
      pos += len;
    } else throw new Error(`unsupported wire type ${wire}`);
    out.push({ field, wire, start, end: pos, value });
  }
  return out;
}

function lengthDelimited(field, bytes) {
  return Buffer.concat([encodeVarint(field * 8 + 2), encodeVarint(bytes.length), bytes]);
}

const ONNX_TYPES = { 2: 'uint8', 3: 'int8', 4: 'uint16', 5: 'int16', 6: 'int32' };

// The QuantizeLinear outputs of a model, with their element type (the zero point's).
function quantizeOutputs(modelBytes) {
  const graph = fields(modelBytes).find((f) => f.field === 7).value;
  const initType = {};
  for (const f of fields(graph).filter((g) => g.field === 5)) {
    const t = fields(f.value);
    const name = t.find((x) => x.field === 8);
    const type = t.find((x) => x.field === 2);
    if (name && type) initType[name.value.toString('utf8')] = type.value;
  }
  const out = [];
  for (const f of fields(graph).filter((g) => g.field === 1)) {
    const n = fields(f.value);
    const op = n.find((x) => x.field === 4);
    if (!op || op.value.toString('utf8') !== 'QuantizeLinear') continue;
    const inputs = n.filter((x) => x.field === 1).map((x) => x.value.toString('utf8'));
    const output = n.find((x) => x.field === 2).value.toString('utf8');
    out.push({ name: output, elemType: initType[inputs[2]] ?? 2 });
  }
  return out;
}

// TensorShapeProto of `shape` (numbers and symbolic names, as `qflow inspect --json` gives).
function shapeProto(shape) {
  return Buffer.concat(shape.map((d) => lengthDelimited(1, typeof d === 'number'
    ? Buffer.concat([encodeVarint(1 * 8 + 0), encodeVarint(d)])
    : lengthDelimited(2, Buffer.from(String(d), 'utf8')))));
}

// A copy of the model listing `extra` ({name, elemType, shape}) as graph outputs too.
function withExtraOutputs(modelBytes, extra) {
  const parts = fields(modelBytes).map((f) => {
    if (f.field !== 7) return modelBytes.subarray(f.start, f.end);
    const outputs = extra.map(({ name, elemType, shape }) => {
      const tensorType = Buffer.concat([encodeVarint(1 * 8 + 0), encodeVarint(elemType), lengthDelimited(2, shapeProto(shape))]);
      const typeProto = lengthDelimited(1, tensorType);
      return lengthDelimited(12, Buffer.concat([lengthDelimited(1, Buffer.from(name, 'utf8')), lengthDelimited(2, typeProto)]));
    });
    return lengthDelimited(7, Buffer.concat([f.value, ...outputs]));
  });
  return Buffer.concat(parts);
}

// .npy reader for the integer types tools/ort/npy.js does not know.
function readAnyNpy(file) {
  const buf = fs.readFileSync(file);
  const headerLen = buf[6] === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = buf[6] === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  const body = buf.subarray(start + headerLen);
  const copy = (Array, size) => new Array(body.buffer.slice(body.byteOffset, body.byteOffset + body.length - (body.length % size)));
  const kinds = { '|i1': [Int8Array, 1], '|u1': [Uint8Array, 1], '<i2': [Int16Array, 2], '<u2': [Uint16Array, 2],
                  '<f4': [Float32Array, 4], '<i4': [Int32Array, 4] };
  if (!kinds[descr]) throw new Error(`${file}: unsupported dtype ${descr}`);
  return { descr, shape, data: copy(...kinds[descr]) };
}

function inspect(qflow, model) {
  const r = spawnSync(qflow, ['inspect', model, '--json'], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`qflow inspect ${model} failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function runOrt(modelFile, input, optLevel) {
  const ort = loadOrt();
  const session = await ort.InferenceSession.create(modelFile, {
    intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: optLevel, logSeverityLevel: 3,
  });
  const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', input.data, input.shape) };
  const results = await session.run(feeds);
  const out = {};
  for (const name of session.outputNames) out[name] = results[name];
  return out;
}

function writePipeline(file, c) {
  const text = `# Written by tests/models/qdq_ort_test.js (case ${c.name}).
${c.quantization}
[[stage]]
id = "import"
use = "import-onnx"
options = { path = ${JSON.stringify(MODEL)}, name = "sample" }

[[stage]]
id = "data"
use = "load-data"
options = { path = ${JSON.stringify(DATA)} }

[[stage]]
id = "observe"
use = "observer:minmax"
inputs = { model = "import.model", dataset = "data.dataset" }

[[stage]]
id = "calibrate"
use = "calibrator:max"
inputs = { statistics = "observe.statistics", model = "import.model" }

[[stage]]
id = "calibrated"
use = "quantize"
inputs = { model = "import.model", qparams = "calibrate.qparams" }
options = { weights = false }
output = "sample_calibrated_model.onnx"

[[stage]]
id = "ptq"
use = "quantize"
inputs = { model = "import.model", qparams = "calibrate.qparams", dataset = "data.dataset" }
options = { weights = true, bias-correction = true }
output = "sample_ptq_model.onnx"
`;
  fs.writeFileSync(file, text);
}

async function checkModel(label, modelFile, work, args, input, summary) {
  const row = { model: label, qOutputs: 0, maxLsb: NaN, offByOne: 0, cosineQflow: NaN, cosineOrtOpt: NaN, status: 'ok' };
  summary.push(row);
  const fail = (why) => { row.status = `FAIL: ${why}`; return false; };
  const bytes = fs.readFileSync(modelFile);
  const qs = quantizeOutputs(bytes);
  row.qOutputs = qs.length;
  if (qs.length === 0) return fail('no QuantizeLinear in the model');
  // Graph outputs need a shape: the one qflow's shape inference gives each Q output.
  const shapes = {};
  for (const node of inspect(args.qflow, modelFile).nodes)
    for (const out of node.outputs) shapes[out.name] = out.shape;
  for (const q of qs) {
    if (!Array.isArray(shapes[q.name])) return fail(`no inferred shape for ${q.name}`);
    q.shape = shapes[q.name];
  }
  const probe = path.join(work, `${label}_with_q_outputs.onnx`);
  fs.writeFileSync(probe, withExtraOutputs(bytes, qs));

  const qflowDir = path.join(work, `${label}_qflow`);
  const infer = h.runQflow(args.qflow, ['infer', probe, '--input', DATA, '--output-dir', qflowDir, '--threads', '1']);
  if (!infer.ok) {
    console.log(`-- ${label}: qflow infer failed\n${infer.message}`);
    return fail('qflow infer');
  }
  let ort, ortOpt;
  try {
    ort = await runOrt(probe, input, 'disabled');
    ortOpt = await runOrt(modelFile, input, 'all');
  } catch (e) {
    console.log(`-- ${label}: onnxruntime rejects the model: ${e.message}`);
    return fail('onnxruntime rejects it');
  }

  let maxLsb = 0, offByOne = 0, total = 0, overLimit = [];
  const rows = [];
  for (const { name } of qs) {
    const mine = readAnyNpy(path.join(qflowDir, fileNameFor(name)));
    const ref = ort[name].data;
    let worst = 0, ones = 0;
    for (let i = 0; i < ref.length; i++) {
      const d = Math.abs(Number(mine.data[i]) - Number(ref[i]));
      worst = Math.max(worst, d);
      if (d === 1) ones++;
    }
    if (mine.data.length !== ref.length) worst = Infinity;
    rows.push({ tensor: name, type: ort[name].type, elements: ref.length, maxLsb: worst, offByOne: ones });
    if (!(worst <= (MAX_LSB[ort[name].type] ?? 0))) overLimit.push(`${name} (${worst} LSB)`);
    maxLsb = Math.max(maxLsb, worst);
    offByOne += ones;
    total += ref.length;
  }
  row.maxLsb = maxLsb;
  row.offByOne = `${offByOne}/${total}`;
  console.log(`-- ${label}: QuantizeLinear outputs, qflow infer vs onnxruntime (optimizations disabled)`);
  console.log(formatTable(rows, { tensor: 'tensor', type: 'type', elements: 'elements', maxLsb: 'max |diff| (LSB)', offByOne: 'off by 1' }));
  if (overLimit.length) fail(`QuantizeLinear outputs beyond ${JSON.stringify(MAX_LSB)}: ${overLimit.join(', ')}`);

  // Final outputs: qflow vs onnxruntime without and with graph optimizations.
  const finals = Object.keys(ortOpt);
  let cosQ = 1, cosO = 1, cosOrt = 1;
  for (const name of finals) {
    const mine = readNpy(path.join(qflowDir, fileNameFor(name)));
    cosQ = Math.min(cosQ, metrics(mine.data, ort[name].data).cosine);
    cosO = Math.min(cosO, metrics(mine.data, ortOpt[name].data).cosine);
    cosOrt = Math.min(cosOrt, metrics(ortOpt[name].data, ort[name].data).cosine);
  }
  row.cosineQflow = cosQ;
  row.cosineOrtOpt = cosO;
  console.log(`-- ${label}: final outputs (${finals.join(', ')}): cosine qflow vs onnxruntime ${cosQ.toFixed(8)}; ` +
              `vs optimized onnxruntime ${cosO.toFixed(8)} (optimized vs unoptimized onnxruntime: ${cosOrt.toFixed(8)})`);
  if (!(cosQ >= MIN_COSINE)) fail(`final output cosine ${cosQ} < ${MIN_COSINE}`);
  if (!(cosO >= MIN_COSINE_OPTIMIZED)) fail(`final output cosine (optimized onnxruntime) ${cosO} < ${MIN_COSINE_OPTIMIZED}`);
  return row.status === 'ok';
}

async function main() {
  const args = h.parseArgs(process.argv.slice(2), { qflow: undefined, work: undefined });
  h.fetchCache('--ort-only');
  h.freshDir(args.work);
  const input = readNpy(DATA);
  const summary = [];
  let ok = true;
  for (const c of CASES) {
    const work = h.freshDir(path.join(args.work, c.name));
    const pipeline = path.join(work, 'qdq.toml');
    writePipeline(pipeline, c);
    const out = path.join(work, 'out');
    const run = h.runQflow(args.qflow, ['run', pipeline, '--out', out]);
    if (!run.ok) {
      console.log(`-- ${c.name}: qflow run failed\n${run.message}`);
      summary.push({ model: c.name, qOutputs: '', maxLsb: '', offByOne: '', cosineQflow: '', cosineOrtOpt: '',
                     status: 'FAIL: qflow run' });
      ok = false;
      continue;
    }
    for (const kind of ['calibrated', 'ptq']) {
      const model = path.join(out, `sample_${kind}_model.onnx`);
      if (!(await checkModel(`${c.name}_${kind}`, model, work, args, input, summary))) ok = false;
    }
  }
  console.log(`\n== summary (QuantizeLinear outputs within ${JSON.stringify(MAX_LSB)} LSB; final outputs cosine >= ` +
              `${MIN_COSINE}, >= ${MIN_COSINE_OPTIMIZED} against optimized onnxruntime)`);
  console.log(formatTable(summary, {
    model: 'model', qOutputs: 'Q outputs', maxLsb: 'max LSB', offByOne: 'off by 1',
    cosineQflow: 'cosine vs ort', cosineOrtOpt: 'cosine vs ort (optimized)', status: 'status',
  }));
  process.exit(ok ? 0 : 1);
}

main().catch((e) => {
  console.error(`qdq_ort_test.js: ${e.stack || e.message}`);
  process.exit(1);
});
