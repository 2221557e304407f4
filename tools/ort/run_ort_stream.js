#!/usr/bin/env node
// Runs a recurrent ONNX model over a stream in onnxruntime-node, as `qflow infer --batch-size 1
// --carry OUTPUT=INPUT` does: run r takes row r of the stream input (its first axis kept, of
// size 1), each --carry output of run r feeds the named input of run r + 1, other inputs are
// fed whole to every run. Each output is written as <output-name>.npy, the runs concatenated
// along the first axis.
// Usage: run_ort_stream.js MODEL OUT_DIR --stream NAME=FRAMES.npy [--carry OUTPUT=INPUT ...]
//                          [--threads N] [--opt-level LEVEL] NAME=INPUT.npy ...
'use strict';
const fs = require('fs');
const path = require('path');
const { readNpy, writeNpy } = require('./npy');
const { loadOrt, createSession, fileNameFor } = require('./ort_loader');

function usage(msg) {
  if (msg) console.error(`run_ort_stream.js: ${msg}`);
  console.error('usage: run_ort_stream.js MODEL OUT_DIR --stream NAME=FRAMES.npy [--carry OUTPUT=INPUT ...] ' +
                '[--threads N] [--opt-level LEVEL] NAME=INPUT.npy ...');
  process.exit(2);
}

function pair(text, what) {
  const eq = text.indexOf('=');
  if (eq <= 0) usage(`${what} wants NAME=VALUE, got '${text}'`);
  return [text.slice(0, eq), text.slice(eq + 1)];
}

function parseArgs(argv) {
  const args = { threads: 1, optLevel: 'all', carries: [], inputs: [], stream: null };
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--threads') args.threads = Number(argv[++i]);
    else if (a === '--opt-level') args.optLevel = argv[++i];
    else if (a === '--stream') args.stream = pair(argv[++i] ?? '', '--stream');
    else if (a === '--carry') args.carries.push(pair(argv[++i] ?? '', '--carry'));
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else positional.push(a);
  }
  if (positional.length < 2) usage('MODEL and OUT_DIR are required');
  if (!args.stream) usage('--stream NAME=FRAMES.npy is required');
  if (!Number.isInteger(args.threads) || args.threads < 1) usage('--threads wants a positive integer');
  [args.model, args.outDir] = positional;
  args.inputs = positional.slice(2).map((p) => pair(p, 'an input'));
  return args;
}

// Row r of a typed array of shape [n, ...rest], as shape [1, ...rest].
function row(t, r) {
  const size = t.shape.slice(1).reduce((a, b) => a * b, 1);
  return { data: t.data.slice(r * size, (r + 1) * size), shape: [1, ...t.shape.slice(1)], dtype: t.dtype };
}

function concat(parts) {
  const first = parts[0];
  const total = parts.reduce((n, p) => n + p.data.length, 0);
  const data = new first.data.constructor(total);
  let at = 0;
  for (const p of parts) {
    data.set(p.data, at);
    at += p.data.length;
  }
  const dims = first.dims.length ? [parts.reduce((n, p) => n + p.dims[0], 0), ...first.dims.slice(1)] : [parts.length];
  return { type: first.type, dims, data };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  const session = await createSession(args.model, args);
  const [streamName, streamFile] = args.stream;
  const frames = readNpy(streamFile);
  const feeds = {};
  for (const [name, file] of args.inputs) {
    const t = readNpy(file);
    feeds[name] = new ort.Tensor(t.dtype, t.data, t.shape);
  }
  const outputs = Object.fromEntries(session.outputNames.map((n) => [n, []]));
  let ms = 0;
  for (let r = 0; r < frames.shape[0]; r++) {
    const f = row(frames, r);
    feeds[streamName] = new ort.Tensor(f.dtype, f.data, f.shape);
    const start = process.hrtime.bigint();
    const results = await session.run(feeds);
    ms += Number(process.hrtime.bigint() - start) / 1e6;
    for (const n of session.outputNames) outputs[n].push(results[n]);
    for (const [out, inp] of args.carries) feeds[inp] = results[out];
  }
  fs.mkdirSync(args.outDir, { recursive: true });
  for (const n of session.outputNames) {
    const t = concat(outputs[n]);
    writeNpy(path.join(args.outDir, fileNameFor(n)), t.type, t.dims, t.data);
  }
  console.error(`ort ${path.basename(args.model)}: ${frames.shape[0]} runs, ${ms.toFixed(1)} ms`);
}

main().catch((e) => {
  console.error(`run_ort_stream.js: ${e.message}`);
  process.exit(1);
});
