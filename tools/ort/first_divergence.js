#!/usr/bin/env node
// Debugging aid: walks the tensors of a model in execution order (ORDER.json from
// expose_intermediates.py) and reports the first one where `qflow infer` departs from
// onnxruntime, with the metrics of that node's inputs, which by construction still agree.
// Usage: first_divergence.js ORDER.json ORT_DIR QFLOW_DIR [--min-cosine C] [--max-rel R]
'use strict';
const fs = require('fs');
const path = require('path');
const { readNpy } = require('./npy');
const { metrics } = require('./compare');
const { fileNameFor } = require('./ort_loader');

function main() {
  const argv = process.argv.slice(2);
  let minCosine = 0.99999;
  let maxRel = 1e-4;
  const pos = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--min-cosine') minCosine = Number(argv[++i]);
    else if (argv[i] === '--max-rel') maxRel = Number(argv[++i]);
    else pos.push(argv[i]);
  }
  if (pos.length !== 3) {
    console.error('usage: first_divergence.js ORDER.json ORT_DIR QFLOW_DIR [--min-cosine C] [--max-rel R]');
    process.exit(2);
  }
  const [orderFile, ortDir, qfDir] = pos;
  const order = JSON.parse(fs.readFileSync(orderFile, 'utf8'));
  const describe = (tensor) => {
    const f = fileNameFor(tensor);
    if (!fs.existsSync(path.join(ortDir, f)) || !fs.existsSync(path.join(qfDir, f))) return null;
    const e = readNpy(path.join(ortDir, f));
    const a = readNpy(path.join(qfDir, f));
    if (e.shape.join(',') !== a.shape.join(',')) {
      return { bad: true, text: `shape ${a.shape} vs onnxruntime ${e.shape}` };
    }
    if (e.dtype !== a.dtype) return { bad: true, text: `dtype ${a.dtype} vs onnxruntime ${e.dtype}` };
    const m = metrics(a.data, e.data);
    const bad = m.nan > 0 || !(m.cosine >= minCosine) || !(m.maxRel <= maxRel);
    return { bad, text: `[${e.shape}] cosine ${m.cosine.toFixed(12)} max_abs ${m.maxDiff.toExponential(3)} max_rel ${m.maxRel.toExponential(3)}` };
  };
  let checked = 0;
  for (const step of order) {
    const d = describe(step.tensor);
    if (!d) continue;
    checked++;
    if (!d.bad) continue;
    console.log(`first divergence after ${checked - 1} agreeing tensors:`);
    console.log(`  node ${step.node} (${step.op}) output ${step.tensor}: ${d.text}`);
    for (const input of step.inputs) {
      const di = describe(input);
      console.log(`  input ${input}: ${di ? di.text : '(graph input or initializer)'}`);
    }
    process.exit(1);
  }
  if (checked === 0) {
    console.error(`no tensor of ${orderFile} is present in both ${ortDir} and ${qfDir}`);
    process.exit(2);
  }
  console.log(`all ${checked} tensors agree`);
}

main();
