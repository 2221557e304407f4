#!/usr/bin/env node
// Model test: 16-bit quantization of models below opset 21, against ONNX Runtime.
//  1. `qflow convert --opset 21` raises PP-OCR det/rec/cls (opsets 9-11: libonnx's converter
//     to 13, then qflow's adapters, docs/quantization.md "Opsets"); ONNX Runtime must compute
//     the same outputs from the raised model as from the original (max |diff| <= MAX_ABS).
//  2. pipelines/ptq.toml with int16 activations and weights quantizes rec (imported at opset
//     13, raised to 21 by the quantize stage); ONNX Runtime must run the int16 PTQ model and
//     agree with `qflow infer` on it (cosine >= MIN_COSINE).
// Usage: int16_ort_test.js --qflow BIN --work DIR [--count N]
// Exits 0 when all agree, 1 otherwise, 77 when the models or onnxruntime-node cannot be fetched.
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const h = require('./harness');
const { runModel } = require(path.join(h.TOOLS, 'ort', 'run_ort'));
const { compareDirs, formatTable, TABLE_COLUMNS } = require(path.join(h.TOOLS, 'ort', 'compare'));

const MODELS = {
  det: 'ch_PP-OCRv4_det_infer.onnx',
  rec: 'ch_PP-OCRv4_rec_infer.onnx',
  cls: 'ch_ppocr_mobile_v2.0_cls_infer.onnx',
};
// Raising changes no arithmetic, but ONNX Runtime may pick other kernels for the new forms
// (ReduceMean with an axes input) and sum in another order: float32 rounding, nothing more.
const MAX_ABS = 1e-4;
const MIN_COSINE = 0.9999;

function generateInputs(kind, dir, count) {
  const r = spawnSync(process.execPath,
                      [path.join(h.TOOLS, 'ort', 'gen_inputs.js'), kind, dir, '--count', String(count), '--seed', '3'],
                      { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`gen_inputs.js ${kind} failed: ${r.stderr}`);
  return fs.readdirSync(dir).filter((f) => f.endsWith('.npy')).sort().map((f) => path.join(dir, f));
}

function opsetOf(qflow, model) {
  const r = spawnSync(qflow, ['inspect', model, '--json'], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`qflow inspect ${model} failed: ${r.stderr}`);
  const opsets = JSON.parse(r.stdout).opsets || [];
  const main = opsets.find((o) => o.domain === '' || o.domain === 'ai.onnx');
  return main ? main.version : NaN;
}

async function ortOutputs(model, inputs, dir, optLevel = 'all') {
  const dirs = [];
  for (const [i, input] of inputs.entries()) {
    const out = path.join(dir, String(i));
    await runModel(model, [{ name: null, file: input }], out, { optLevel });
    dirs.push(out);
  }
  return dirs;
}

// Compares folder pairs; returns the worst row over all inputs plus whether all passed.
function worst(expectedDirs, actualDirs, options, label) {
  let ok = true, cosine = 1, maxAbs = 0;
  for (let i = 0; i < expectedDirs.length; i++) {
    const cmp = compareDirs(expectedDirs[i], actualDirs[i], options);
    console.log(`-- ${label}, input ${i}\n${formatTable(cmp.rows, TABLE_COLUMNS)}`);
    ok = ok && cmp.ok;
    for (const r of cmp.rows) {
      cosine = Math.min(cosine, r.cosine);
      maxAbs = Math.max(maxAbs, r.maxAbs);
    }
  }
  return { ok, cosine, maxAbs };
}

async function checkRaised(kind, modelPath, args, summary) {
  const work = h.freshDir(path.join(args.work, `raise_${kind}`));
  const row = { check: `${kind}: raised to opset 21 vs original, onnxruntime`, cosine: NaN, maxAbs: NaN, status: 'ok' };
  summary.push(row);
  const inputs = generateInputs(kind, path.join(work, 'inputs'), 2);
  const raised = path.join(work, `${kind}_opset21.onnx`);
  const conv = h.runQflow(args.qflow, ['convert', modelPath, '--opset', '21', '--output', raised]);
  if (!conv.ok) {
    console.log(`-- ${kind}: qflow convert --opset 21 failed\n${conv.message}`);
    row.status = 'FAIL: qflow convert';
    return false;
  }
  const opset = opsetOf(args.qflow, raised);
  if (opset !== 21) { row.status = `FAIL: the raised model imports opset ${opset}`; return false; }
  let original, upgraded;
  try {
    original = await ortOutputs(modelPath, inputs, path.join(work, 'ort_original'));
    upgraded = await ortOutputs(raised, inputs, path.join(work, 'ort_raised'));
  } catch (e) {
    console.log(`-- ${kind}: onnxruntime rejects a model: ${e.message}`);
    row.status = 'FAIL: onnxruntime rejects it';
    return false;
  }
  const w = worst(original, upgraded, { minCosine: 0.99999, maxRel: 1 }, `${kind}: raised vs original (onnxruntime)`);
  Object.assign(row, { cosine: w.cosine, maxAbs: w.maxAbs });
  if (!w.ok || !(w.maxAbs <= MAX_ABS)) row.status = `FAIL: max |diff| ${w.maxAbs} > ${MAX_ABS} or cosine < 0.99999`;
  return row.status === 'ok';
}

async function checkInt16Rec(modelPath, args, summary) {
  const work = h.freshDir(path.join(args.work, 'int16_rec'));
  const rows = {
    produced: { check: 'rec int16 PTQ: produced at opset 21', cosine: NaN, maxAbs: NaN, status: 'ok' },
    ort: { check: 'rec int16 PTQ: qflow infer vs onnxruntime (no optimizations)', cosine: NaN, maxAbs: NaN, status: 'ok' },
    ortOpt: { check: 'rec int16 PTQ: qflow infer vs onnxruntime (all optimizations)', cosine: NaN, maxAbs: NaN, status: 'ok' },
  };
  summary.push(rows.produced, rows.ort, rows.ortOpt);
  const calib = path.join(work, 'calib');
  const inputs = generateInputs('rec', calib, Number(args.count));
  const out = path.join(work, 'out');
  const run = h.runQflow(args.qflow, [
    'run', path.join(h.SOURCE_DIR, 'pipelines', 'ptq.toml'), '--out', out,
    '--set', `model=${modelPath}`, '--set', `data=${calib}`, '--set', 'name=rec', '--set', 'method=max',
    '--set', 'import.input-shape=1,3,48,320',
    '--set', 'quantization.activation-dtype=int16', '--set', 'quantization.weight-dtype=int16',
  ]);
  if (!run.ok) {
    console.log(`-- rec int16: qflow run failed\n${run.message}`);
    rows.produced.status = 'FAIL: qflow run';
    return false;
  }
  const ptq = path.join(out, 'rec_ptq_model.onnx');
  const opset = opsetOf(args.qflow, ptq);
  if (opset !== 21) { rows.produced.status = `FAIL: the PTQ model imports opset ${opset}`; return false; }
  const qflowDirs = [];
  for (const [i, input] of inputs.entries()) {
    const dir = path.join(work, 'qflow', String(i));
    const infer = h.runQflow(args.qflow, ['infer', ptq, '--input', input, '--output-dir', dir]);
    if (!infer.ok) {
      console.log(`-- rec int16: qflow infer failed\n${infer.message}`);
      rows.ort.status = 'FAIL: qflow infer';
      return false;
    }
    qflowDirs.push(dir);
  }
  let ok = true;
  for (const [key, level] of [['ort', 'disabled'], ['ortOpt', 'all']]) {
    let ortDirs;
    try {
      ortDirs = await ortOutputs(ptq, inputs, path.join(work, `ort_${level}`), level);
    } catch (e) {
      console.log(`-- rec int16: onnxruntime (${level}) rejects the PTQ model: ${e.message}`);
      rows[key].status = 'FAIL: onnxruntime rejects it';
      ok = false;
      continue;
    }
    const w = worst(ortDirs, qflowDirs, { minCosine: MIN_COSINE, maxRel: 1 }, `rec int16 PTQ: qflow vs onnxruntime (${level})`);
    Object.assign(rows[key], { cosine: w.cosine, maxAbs: w.maxAbs });
    if (!w.ok) { rows[key].status = `FAIL: cosine < ${MIN_COSINE}`; ok = false; }
  }
  return ok;
}

async function main() {
  const args = h.parseArgs(process.argv.slice(2), { qflow: undefined, work: undefined, count: '4' });
  const cache = h.fetchCache();
  h.freshDir(args.work);
  const assets = path.join(cache, 'npm', 'package', 'assets');
  const summary = [];
  let ok = true;
  for (const kind of Object.keys(MODELS))
    if (!(await checkRaised(kind, path.join(assets, MODELS[kind]), args, summary))) ok = false;
  if (!(await checkInt16Rec(path.join(assets, MODELS.rec), args, summary))) ok = false;
  console.log(`\n== summary (raised models: max |diff| <= ${MAX_ABS}; int16 PTQ: cosine >= ${MIN_COSINE})`);
  console.log(formatTable(summary, { check: 'check', cosine: 'min cosine', maxAbs: 'max |diff|', status: 'status' }));
  process.exit(ok ? 0 : 1);
}

main().catch((e) => {
  console.error(`int16_ort_test.js: ${e.stack || e.message}`);
  process.exit(1);
});
