#!/usr/bin/env node
// Runs a one-input ONNX model in onnxruntime-node on every sample of a batch .npy, one
// process and one session for all of them, and writes each output stacked along a new first
// axis as <output-name>.npy (tools/ocr_accuracy.py; run_ort.js runs a single input).
// Usage: run_ort_batch.js MODEL OUT_DIR INPUT.npy [--threads N] [--opt-level LEVEL]
// INPUT's first axis indexes samples; each runs alone with a batch axis of 1, so a model
// whose shape was fixed to batch 1 runs as well as one with a symbolic batch. An output of
// shape [1, ...] per sample is written as [N, ...]. Prints the run time on stderr.
'use strict';
const fs = require('fs');
const path = require('path');
const { readNpy, writeNpy } = require('./npy');
const { loadOrt, createSession, fileNameFor } = require('./ort_loader');

function usage(msg) {
  if (msg) console.error(`run_ort_batch.js: ${msg}`);
  console.error('usage: run_ort_batch.js MODEL OUT_DIR INPUT.npy [--threads N] [--opt-level LEVEL]');
  process.exit(2);
}

function parseArgs(argv) {
  const args = { threads: 1, optLevel: 'all' };
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--threads') args.threads = Number(argv[++i]);
    else if (a === '--opt-level') args.optLevel = argv[++i];
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else positional.push(a);
  }
  if (positional.length !== 3) usage('MODEL, OUT_DIR and INPUT.npy are required');
  if (!Number.isInteger(args.threads) || args.threads < 1) usage('--threads wants a positive integer');
  [args.model, args.outDir, args.input] = positional;
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  const session = await createSession(args.model, args);
  if (session.inputNames.length !== 1) {
    throw new Error(`${args.model} has ${session.inputNames.length} inputs; this runner feeds one`);
  }
  const batch = readNpy(args.input);
  if (batch.shape.length < 2) throw new Error(`${args.input}: want a leading sample axis, shape (${batch.shape})`);
  const count = batch.shape[0];
  const sampleShape = [1, ...batch.shape.slice(1)];
  const per = batch.data.length / count;
  const outputs = Object.fromEntries(session.outputNames.map((n) => [n, { type: null, dims: null, parts: [] }]));
  let ms = 0;
  for (let i = 0; i < count; i++) {
    const feed = new ort.Tensor(batch.dtype, batch.data.subarray(i * per, (i + 1) * per), sampleShape);
    const start = process.hrtime.bigint();
    const results = await session.run({ [session.inputNames[0]]: feed });
    ms += Number(process.hrtime.bigint() - start) / 1e6;
    for (const name of session.outputNames) {
      const t = results[name];
      const out = outputs[name];
      const dims = t.dims.slice(t.dims[0] === 1 ? 1 : 0);
      if (out.dims && out.dims.join(',') !== dims.join(',')) {
        throw new Error(`output ${name}: sample ${i} has shape (${t.dims}), sample 0 had (1,${out.dims})`);
      }
      out.type = t.type;
      out.dims = dims;
      out.parts.push(t.data);
    }
  }
  fs.mkdirSync(args.outDir, { recursive: true });
  for (const [name, out] of Object.entries(outputs)) {
    const total = out.parts.reduce((a, p) => a + p.length, 0);
    const data = new out.parts[0].constructor(total);
    let offset = 0;
    for (const p of out.parts) {
      data.set(p, offset);
      offset += p.length;
    }
    writeNpy(path.join(args.outDir, fileNameFor(name)), out.type, [count, ...out.dims], data);
  }
  console.error(`ort ${path.basename(args.model)}: ${count} samples, ${ms.toFixed(1)} ms in run`);
}

main().catch((e) => {
  console.error(`run_ort_batch.js: ${e.message}`);
  process.exit(1);
});
