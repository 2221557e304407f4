#!/usr/bin/env node
// Runs an ONNX model in onnxruntime-node and writes each output as <output-name>.npy.
// Usage: run_ort.js MODEL OUT_DIR [--threads N] [--opt-level disabled|basic|extended|all]
//                   [name=]INPUT.{npy,pb} ...
// Unnamed inputs bind to the model's graph inputs in order. Prints the run time on stderr.
'use strict';
const fs = require('fs');
const path = require('path');
const { readNpy, writeNpy } = require('./npy');
const { readTensorProto } = require('./tensor_proto');
const { loadOrt, createSession, fileNameFor } = require('./ort_loader');

function usage(msg) {
  if (msg) console.error(`run_ort.js: ${msg}`);
  console.error('usage: run_ort.js MODEL OUT_DIR [--threads N] [--opt-level LEVEL] [name=]INPUT ...');
  process.exit(2);
}

function parseArgs(argv) {
  const args = { threads: 1, optLevel: 'all', inputs: [] };
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--threads') args.threads = Number(argv[++i]);
    else if (a === '--opt-level') args.optLevel = argv[++i];
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else positional.push(a);
  }
  if (positional.length < 2) usage('MODEL and OUT_DIR are required');
  [args.model, args.outDir] = positional;
  for (const p of positional.slice(2)) {
    const eq = p.indexOf('=');
    // A path may contain '=', so only treat the prefix as a name when it has no '/'.
    if (eq > 0 && !p.slice(0, eq).includes('/')) args.inputs.push({ name: p.slice(0, eq), file: p.slice(eq + 1) });
    else args.inputs.push({ name: null, file: p });
  }
  if (!Number.isInteger(args.threads) || args.threads < 1) usage('--threads wants a positive integer');
  return args;
}

function readTensorFile(file) {
  return file.endsWith('.pb') ? readTensorProto(file) : readNpy(file);
}

// Runs `model` on `inputs` ([{name|null, file}]) and writes its outputs into `outDir`.
// Returns { ms, outputs } where ms is the time spent in session.run.
async function runModel(model, inputs, outDir, { threads = 1, optLevel = 'all' } = {}) {
  const ort = loadOrt();
  const session = await createSession(model, { threads, optLevel });
  if (inputs.length !== session.inputNames.length) {
    throw new Error(`${model} has ${session.inputNames.length} inputs (${session.inputNames.join(', ')}), ` +
                    `${inputs.length} given`);
  }
  const feeds = {};
  inputs.forEach((inp, i) => {
    const t = readTensorFile(inp.file);
    feeds[inp.name ?? session.inputNames[i]] = new ort.Tensor(t.dtype, t.data, t.shape);
  });
  const start = process.hrtime.bigint();
  const results = await session.run(feeds);
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  fs.mkdirSync(outDir, { recursive: true });
  for (const name of session.outputNames) {
    const t = results[name];
    writeNpy(path.join(outDir, fileNameFor(name)), t.type, t.dims, t.data);
  }
  return { ms, outputs: session.outputNames };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const { ms } = await runModel(args.model, args.inputs, args.outDir, args);
  console.error(`ort ${path.basename(args.model)}: ${ms.toFixed(1)} ms`);
}

if (require.main === module) {
  main().catch((e) => {
    console.error(`run_ort.js: ${e.message}`);
    process.exit(1);
  });
}

module.exports = { runModel };
