#!/usr/bin/env node
// Model test: the PP-OCR det/rec/cls models through `qflow infer` against ONNX Runtime, and
// `qflow convert` round trips that ONNX Runtime must run to bit-identical outputs.
// Usage: ppocr_test.js --qflow BIN --work DIR [--threads N] [--count N] [--models det,rec,cls]
//                      [--min-cosine C] [--max-rel R]
// Exits 0 when everything agrees, 1 on any disagreement or failure, 77 when the models or
// onnxruntime-node cannot be fetched.
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

function generateInputs(kind, dir, count) {
  const r = spawnSync(process.execPath, [path.join(h.TOOLS, 'ort', 'gen_inputs.js'), kind, dir, '--count', String(count)],
                      { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`gen_inputs.js ${kind} failed: ${r.stderr}`);
  return fs.readdirSync(dir).filter((f) => f.endsWith('.npy')).sort().map((f) => path.join(dir, f));
}

function shapeOf(npyFile) {
  return require(path.join(h.TOOLS, 'ort', 'npy')).readNpy(npyFile).shape.join('x');
}

async function checkModel(kind, modelPath, args, summary) {
  const work = h.freshDir(path.join(args.work, kind));
  const inputs = generateInputs(kind, path.join(work, 'inputs'), Number(args.count));
  const threads = args.threads ? ['--threads', args.threads] : [];
  let ok = true;
  for (const [i, input] of inputs.entries()) {
    const row = { model: kind, input: i, shape: shapeOf(input), cosine: NaN, maxRel: NaN, qflowMs: NaN, ortMs: NaN, status: 'ok' };
    summary.push(row);
    const ortDir = path.join(work, `ort_${i}`);
    row.ortMs = (await runModel(modelPath, [{ name: null, file: input }], ortDir)).ms;
    const qfDir = path.join(work, `qflow_${i}`);
    const run = h.runQflow(args.qflow, ['infer', modelPath, '--input', input, '--output-dir', qfDir, ...threads]);
    row.qflowMs = run.ms;
    if (!run.ok) {
      console.log(`-- ${kind} input ${i}: qflow infer failed\n${run.message}`);
      row.status = 'FAIL: qflow infer';
      ok = false;
      continue;
    }
    const cmp = compareDirs(ortDir, qfDir, { minCosine: Number(args.minCosine), maxRel: Number(args.maxRel) });
    console.log(`-- ${kind} input ${i} (${row.shape}): qflow infer vs onnxruntime\n${formatTable(cmp.rows, TABLE_COLUMNS)}`);
    row.cosine = Math.min(...cmp.rows.map((r) => r.cosine));
    row.maxRel = Math.max(...cmp.rows.map((r) => r.maxRel));
    if (!cmp.ok) { row.status = 'FAIL: outputs differ'; ok = false; }
  }

  // Round trip: what qflow writes must mean exactly what it read, to ONNX Runtime too.
  const rtModel = path.join(work, 'roundtrip.onnx');
  const conv = h.runQflow(args.qflow, ['convert', modelPath, '--output', rtModel]);
  const rtRow = { model: kind, input: 'round trip', shape: '', cosine: NaN, maxRel: NaN, qflowMs: conv.ms, ortMs: NaN, status: 'ok (bit-identical)' };
  summary.push(rtRow);
  if (!conv.ok) {
    console.log(`-- ${kind}: qflow convert failed\n${conv.message}`);
    rtRow.status = 'FAIL: qflow convert';
    return false;
  }
  for (const [i, input] of inputs.entries()) {
    const rtDir = path.join(work, `roundtrip_${i}`);
    try {
      await runModel(rtModel, [{ name: null, file: input }], rtDir);
    } catch (e) {
      console.log(`-- ${kind}: onnxruntime rejects the round-tripped model: ${e.message}`);
      rtRow.status = 'FAIL: onnxruntime rejects it';
      return false;
    }
    const cmp = compareDirs(path.join(work, `ort_${i}`), rtDir, { exact: true });
    console.log(`-- ${kind} input ${i}: onnxruntime on qflow convert output vs on the original\n${formatTable(cmp.rows, TABLE_COLUMNS)}`);
    if (!cmp.ok) { rtRow.status = `FAIL: input ${i} not bit-identical`; ok = false; }
  }
  return ok;
}

async function main() {
  const args = h.parseArgs(process.argv.slice(2), {
    qflow: undefined, work: undefined, threads: '', count: '3', models: 'det,rec,cls',
    minCosine: '0.99999', maxRel: '1e-4',
  });
  const cache = h.fetchCache();
  h.freshDir(args.work);
  const summary = [];
  let ok = true;
  for (const kind of args.models.split(',')) {
    if (!MODELS[kind]) throw new Error(`unknown model ${kind}`);
    const modelPath = path.join(cache, 'npm', 'package', 'assets', MODELS[kind]);
    if (!(await checkModel(kind, modelPath, args, summary))) ok = false;
  }
  console.log(`\n== summary (thresholds: cosine >= ${args.minCosine}, max_rel <= ${args.maxRel}; round trips bit-identical)`);
  console.log(formatTable(summary, {
    model: 'model', input: 'input', shape: 'shape', cosine: 'min cosine', maxRel: 'max max_rel',
    qflowMs: 'qflow ms', ortMs: 'ort ms', status: 'status',
  }));
  process.exit(ok ? 0 : 1);
}

main().catch((e) => {
  console.error(`ppocr_test.js: ${e.stack || e.message}`);
  process.exit(1);
});
