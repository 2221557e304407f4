#!/usr/bin/env node
// Model test: pipelines/optimize.toml on the PP-OCR det/rec/cls models must shrink each graph
// and keep its outputs, both in ONNX Runtime and in `qflow infer`.
// Usage: optimize_test.js --qflow BIN --work DIR [--models det,rec,cls] [--count N]
//                         [--min-cosine C] [--threads N]
// Exits 0 when every model got smaller and agrees with its original, 1 otherwise, 77 when
// the models or onnxruntime-node cannot be fetched.
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
const PIPELINE = path.join(h.SOURCE_DIR, 'pipelines', 'optimize.toml');

function generateInputs(kind, dir, count) {
  const r = spawnSync(process.execPath, [path.join(h.TOOLS, 'ort', 'gen_inputs.js'), kind, dir, '--count', String(count)],
                      { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`gen_inputs.js ${kind} failed: ${r.stderr}`);
  return fs.readdirSync(dir).filter((f) => f.endsWith('.npy')).sort().map((f) => path.join(dir, f));
}

// `qflow inspect --json`: node count and op histogram of a model file.
function inspect(qflow, model) {
  const r = spawnSync(qflow, ['inspect', model, '--json'], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`qflow inspect ${model} failed: ${r.stderr}`);
  const info = JSON.parse(r.stdout);
  return { nodes: info.node_count, histogram: info.op_histogram };
}

function histogramText(before, after) {
  const ops = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  return ops.map((op) => {
    const b = before[op] || 0;
    const a = after[op] || 0;
    return `${op} ${b}${a !== b ? ` -> ${a}` : ''}`;
  }).join(', ');
}

// Compares two output folders; prints the table and returns the worst cosine (NaN on failure).
function compare(label, expectedDir, actualDir, minCosine) {
  // The bar is cosine only: a rewrite legitimately reassociates float arithmetic.
  const cmp = compareDirs(expectedDir, actualDir, { minCosine, maxRel: Infinity });
  console.log(`${label}\n${formatTable(cmp.rows, TABLE_COLUMNS)}`);
  return { ok: cmp.ok, cosine: Math.min(...cmp.rows.map((r) => r.cosine)) };
}

async function checkModel(kind, modelPath, args, summary) {
  const work = h.freshDir(path.join(args.work, kind));
  const row = { model: kind, nodes: '', ort: NaN, qflow: NaN, passMs: NaN, runMs: NaN, status: 'ok' };
  summary.push(row);
  const fail = (why) => { row.status = `FAIL: ${why}`; return false; };

  const out = path.join(work, 'out');
  const threads = args.threads ? ['--threads', args.threads] : [];
  const run = h.runQflow(args.qflow, ['run', PIPELINE, '--set', `model=${modelPath}`, '--set', `name=${kind}`,
                                      '--out', out, '--verify-each', ...threads]);
  row.runMs = run.ms;
  if (!run.ok) {
    console.log(`-- ${kind}: qflow run failed\n${run.message}`);
    return fail('qflow run');
  }
  const optimized = path.join(out, `${kind}_optimized_float_model.onnx`);
  const manifest = JSON.parse(fs.readFileSync(path.join(out, 'manifest.json'), 'utf8'));
  const passes = manifest.stages.filter((s) => s.kind === 'pass');
  row.passMs = passes.reduce((sum, s) => sum + s.pass_seconds * 1e3, 0);
  console.log(`-- ${kind}: pass stages`);
  console.log(formatTable(passes.map((s) => ({
    stage: s.id, use: s.use, nodes: `${s.nodes_before} -> ${s.nodes_after}`, ms: (s.pass_seconds * 1e3).toFixed(1),
    counters: Object.entries(s.counters).map(([k, v]) => `${k}=${v}`).join(' '),
  })), { stage: 'stage', use: 'use', nodes: 'nodes', ms: 'ms', counters: 'counters' }));

  const before = inspect(args.qflow, modelPath);
  const after = inspect(args.qflow, optimized);
  row.nodes = `${before.nodes} -> ${after.nodes}`;
  console.log(`-- ${kind}: ${before.nodes} -> ${after.nodes} nodes\n   ops: ${histogramText(before.histogram, after.histogram)}`);
  let ok = true;
  if (!(after.nodes < before.nodes)) ok = fail(`node count not lower (${row.nodes})`);

  const minCosine = Number(args.minCosine);
  row.ort = row.qflow = Infinity;
  for (const [i, input] of generateInputs(kind, path.join(work, 'inputs'), Number(args.count)).entries()) {
    const feeds = [{ name: null, file: input }];
    const dirs = {};
    for (const side of ['original', 'optimized']) {
      const model = side === 'original' ? modelPath : optimized;
      dirs[`ort_${side}`] = path.join(work, `ort_${side}_${i}`);
      try {
        await runModel(model, feeds, dirs[`ort_${side}`]);
      } catch (e) {
        console.log(`-- ${kind}: onnxruntime rejects the ${side} model: ${e.message}`);
        return fail(`onnxruntime rejects the ${side} model`);
      }
      dirs[`qflow_${side}`] = path.join(work, `qflow_${side}_${i}`);
      const infer = h.runQflow(args.qflow, ['infer', model, '--input', input, '--output-dir', dirs[`qflow_${side}`], ...threads]);
      if (!infer.ok) {
        console.log(`-- ${kind}: qflow infer failed on the ${side} model\n${infer.message}`);
        return fail(`qflow infer on the ${side} model`);
      }
    }
    const o = compare(`-- ${kind} input ${i}: onnxruntime, optimized vs original`, dirs.ort_original, dirs.ort_optimized, minCosine);
    const q = compare(`-- ${kind} input ${i}: qflow infer, optimized vs original`, dirs.qflow_original, dirs.qflow_optimized, minCosine);
    row.ort = Math.min(row.ort, o.cosine);
    row.qflow = Math.min(row.qflow, q.cosine);
    if (!o.ok) ok = fail(`onnxruntime outputs differ on input ${i}`);
    if (!q.ok) ok = fail(`qflow infer outputs differ on input ${i}`);
  }
  return ok;
}

async function main() {
  const args = h.parseArgs(process.argv.slice(2), {
    qflow: undefined, work: undefined, models: 'det,rec,cls', count: '1', minCosine: '0.99999', threads: '',
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
  console.log(`\n== summary (optimized vs original, threshold: cosine >= ${args.minCosine})`);
  const cosine = (v) => (Number.isFinite(v) ? v.toFixed(9) : '-');
  const rows = summary.map((r) => ({ ...r, ort: cosine(r.ort), qflow: cosine(r.qflow), passMs: r.passMs.toFixed(1) }));
  console.log(formatTable(rows, {
    model: 'model', nodes: 'nodes', ort: 'onnxruntime cosine', qflow: 'qflow cosine', passMs: 'passes ms',
    runMs: 'qflow run ms', status: 'status',
  }));
  process.exit(ok ? 0 : 1);
}

main().catch((e) => {
  console.error(`optimize_test.js: ${e.stack || e.message}`);
  process.exit(1);
});
