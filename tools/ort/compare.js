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
  else cosine = Math.min(1, dot / (Math.sqrt(na) * Math.sqrt(nb))); // rounding can overshoot 1
  const maxRel = maxDiff === 0 ? 0 : maxRef === 0 ? Infinity : maxDiff / maxRef;
  return { cosine, maxDiff, maxRel, nan };
}

function bitEqual(a, b) {
  return Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength),
                        Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0;
}

// Compares every .npy of `expected` with its namesake in `actual`.
// Returns { ok, rows } with one row per tensor (metrics as printed by formatTable).
function compareDirs(expected, actual, { minCosine = 0.99999, maxRel = 1e-4, exact = false } = {}) {
  const names = fs.readdirSync(expected).filter((f) => f.endsWith('.npy')).sort();
  if (names.length === 0) throw new Error(`${expected} holds no .npy file`);
  const rows = [];
  let ok = true;
  for (const name of names) {
    const row = { name: name.slice(0, -4), shape: '', cosine: NaN, maxAbs: NaN, maxRel: NaN, status: 'ok' };
    rows.push(row);
    const actualPath = path.join(actual, name);
    if (!fs.existsSync(actualPath)) { row.status = `FAIL: ${actualPath} missing`; ok = false; continue; }
    const e = readNpy(path.join(expected, name));
    const a = readNpy(actualPath);
    row.shape = `[${e.shape.join(',')}]`;
    if (e.dtype !== a.dtype || e.shape.join(',') !== a.shape.join(',')) {
      row.status = `FAIL: got ${a.dtype}[${a.shape.join(',')}], expected ${e.dtype}[${e.shape.join(',')}]`;
      ok = false;
      continue;
    }
    const m = metrics(a.data, e.data);
    Object.assign(row, { cosine: m.cosine, maxAbs: m.maxDiff, maxRel: m.maxRel });
    const problems = [];
    if (exact) {
      if (!bitEqual(a.data, e.data)) problems.push('not bit-identical');
    } else {
      if (m.nan) problems.push(`${m.nan} NaN mismatches`);
      if (!(m.cosine >= minCosine)) problems.push(`cosine < ${minCosine}`);
      if (!(m.maxRel <= maxRel)) problems.push(`max_rel > ${maxRel}`);
    }
    if (problems.length) { row.status = `FAIL: ${problems.join(', ')}`; ok = false; }
    else if (exact) row.status = 'ok (bit-identical)';
  }
  return { ok, rows };
}

// Renders rows of objects as an aligned text table; `columns` maps key -> header.
function formatTable(rows, columns) {
  const cell = (r, c) => {
    const v = r[c];
    if (typeof v !== 'number') return String(v);
    if (Number.isNaN(v)) return '-';
    if (c === 'cosine') return v.toFixed(12);
    if (c.endsWith('Ms')) return v.toFixed(0);
    return Number.isInteger(v) && c !== 'maxAbs' && c !== 'maxRel' ? String(v) : v.toExponential(3);
  };
  const keys = Object.keys(columns);
  const width = Object.fromEntries(keys.map((k) => [k,
    Math.max(columns[k].length, ...rows.map((r) => cell(r, k).length))]));
  const line = (cells) => keys.map((k, i) => cells[i].padEnd(width[k])).join('  ').trimEnd();
  return [line(keys.map((k) => columns[k])), ...rows.map((r) => line(keys.map((k) => cell(r, k))))].join('\n');
}

const TABLE_COLUMNS = { name: 'tensor', shape: 'shape', cosine: 'cosine', maxAbs: 'max_abs', maxRel: 'max_rel', status: 'status' };

function main() {
  const args = parseArgs(process.argv.slice(2));
  const { ok, rows } = compareDirs(args.expected, args.actual, args);
  if (args.label) console.log(`== ${args.label}`);
  console.log(formatTable(rows, TABLE_COLUMNS));
  process.exit(ok ? 0 : 1);
}

if (require.main === module) {
  try {
    main();
  } catch (e) {
    console.error(`compare.js: ${e.message}`);
    process.exit(2);
  }
}

module.exports = { compareDirs, formatTable, metrics, TABLE_COLUMNS };
