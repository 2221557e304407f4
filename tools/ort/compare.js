#!/usr/bin/env node
// Compares two folders of .npy outputs (expected vs actual) and prints one table row per tensor.
// Usage: compare.js EXPECTED_DIR ACTUAL_DIR [--min-cosine C] [--max-rel R] [--exact] [--label TEXT]
// Exits 1 when a tensor is missing, differs in shape or dtype, or breaks a threshold.
//
// Metrics, computed in double precision:
//   cosine   = <a,b> / (|a| |b|)                (1 when both are all zeros)
//   max_rel  = max|a - b| / max|b|              with b the expected tensor
// The elementwise relative error max(|a-b|/|b|) is deliberately not used: wherever the
// expected value is close to zero (sigmoid tails, softmax over 6625 classes, post-ReLU
// activations) a rounding-level difference divides by almost nothing and the figure explodes,
// failing faithful implementations. Normalising by the tensor's largest magnitude measures the
// error relative to the scale the tensor actually lives at.
// --exact requires bit-identical data instead (used for round-trip checks).
'use strict';
const fs = require('fs');
const path = require('path');
const { readNpy } = require('./npy');

function usage(msg) {
  if (msg) console.error(`compare.js: ${msg}`);
  console.error('usage: compare.js EXPECTED_DIR ACTUAL_DIR [--min-cosine C] [--max-rel R] [--exact] [--label TEXT]');
  process.exit(2);
}

function parseArgs(argv) {
  const args = { minCosine: 0.99999, maxRel: 1e-4, exact: false, label: '' };
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--min-cosine') args.minCosine = Number(argv[++i]);
    else if (a === '--max-rel') args.maxRel = Number(argv[++i]);
    else if (a === '--exact') args.exact = true;
    else if (a === '--label') args.label = argv[++i];
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else positional.push(a);
  }
  if (positional.length !== 2) usage('two folders are required');
  if (Number.isNaN(args.minCosine) || Number.isNaN(args.maxRel)) usage('thresholds must be numbers');
  [args.expected, args.actual] = positional;
  return args;
}

function metrics(a, b) {
  let dot = 0, na = 0, nb = 0, maxDiff = 0, maxRef = 0, nan = 0;
  for (let i = 0; i < b.length; i++) {
    const x = Number(a[i]);
    const y = Number(b[i]);
    if (Number.isNaN(x) !== Number.isNaN(y)) { nan++; continue; }
    if (Number.isNaN(x)) continue;
    dot += x * y;
    na += x * x;
    nb += y * y;
    const d = Math.abs(x - y);
    if (d > maxDiff || Number.isNaN(d)) maxDiff = d;
    if (Math.abs(y) > maxRef) maxRef = Math.abs(y);
  }
  let cosine;
  if (na === 0 && nb === 0) cosine = 1;
  else if (na === 0 || nb === 0) cosine = 0;
  else cosine = dot / (Math.sqrt(na) * Math.sqrt(nb));
  const maxRel = maxDiff === 0 ? 0 : maxRef === 0 ? Infinity : maxDiff / maxRef;
  return { cosine, maxDiff, maxRel, nan };
}

function bitEqual(a, b) {
  return Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength),
                        Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0;
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const names = fs.readdirSync(args.expected).filter((f) => f.endsWith('.npy')).sort();
  if (names.length === 0) usage(`${args.expected} holds no .npy file`);
  const rows = [];
  let failed = false;
  for (const name of names) {
    const row = { name: name.slice(0, -4), shape: '', cosine: '', maxAbs: '', maxRel: '', status: 'ok' };
    rows.push(row);
    const actualPath = path.join(args.actual, name);
    if (!fs.existsSync(actualPath)) { row.status = 'FAIL: missing'; failed = true; continue; }
    const e = readNpy(path.join(args.expected, name));
    const a = readNpy(actualPath);
    row.shape = `[${e.shape.join(',')}]`;
    if (e.dtype !== a.dtype || e.shape.join(',') !== a.shape.join(',')) {
      row.status = `FAIL: got ${a.dtype}[${a.shape.join(',')}], expected ${e.dtype}[${e.shape.join(',')}]`;
      failed = true;
      continue;
    }
    const m = metrics(a.data, e.data);
    row.cosine = m.cosine.toFixed(9);
    row.maxAbs = m.maxDiff.toExponential(3);
    row.maxRel = m.maxRel.toExponential(3);
    const problems = [];
    if (args.exact) {
      if (!bitEqual(a.data, e.data)) problems.push('not bit-identical');
    } else {
      if (m.nan) problems.push(`${m.nan} NaN mismatches`);
      if (!(m.cosine >= args.minCosine)) problems.push(`cosine < ${args.minCosine}`);
      if (!(m.maxRel <= args.maxRel)) problems.push(`max_rel > ${args.maxRel}`);
    }
    if (problems.length) { row.status = `FAIL: ${problems.join(', ')}`; failed = true; }
    else if (args.exact) row.status = 'ok (bit-identical)';
  }
  const head = { name: 'tensor', shape: 'shape', cosine: 'cosine', maxAbs: 'max_abs', maxRel: 'max_rel', status: 'status' };
  const cols = Object.keys(head);
  const width = Object.fromEntries(cols.map((c) => [c, Math.max(...[head, ...rows].map((r) => String(r[c]).length))]));
  const line = (r) => cols.map((c) => String(r[c]).padEnd(width[c])).join('  ').trimEnd();
  if (args.label) console.log(`== ${args.label}`);
  console.log(line(head));
  for (const r of rows) console.log(line(r));
  process.exit(failed ? 1 : 0);
}

main();
