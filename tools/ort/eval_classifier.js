#!/usr/bin/env node
// Top-1 of a Fashion-MNIST classifier and of its QDQ model in qflow and in ONNX Runtime, on the
// first N test images of Debian's dataset-fashion-mnist:
//   float         qflow infer on the float model
//   qflow         qflow infer on the QDQ model (the reference interpreter)
//   ort-disabled  ONNX Runtime, graph optimizations disabled (ONNX reference semantics)
//   ort-all       ONNX Runtime, default optimizations (Q/DQ fused into integer kernels)
// plus, per QDQ model, how often ORT's argmax differs from qflow's. --cpu MODEL runs ONNX
// Runtime under `qemu-x86_64 -cpu MODEL` (Debian's qemu-user), e.g. Haswell-noTSX for an AVX2
// CPU without VNNI; the line "kernels" says what tools/ort/u8s8_probe.js found on that CPU.
// Usage: eval_classifier.js --qflow BIN --float FLOAT.onnx [--qdq LABEL=QDQ.onnx ...]
//          [--images 500] [--cpu native|MODEL] [--threads 2] [--data-dir DIR] [--work DIR] [--json]
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const { readNpy, writeNpy } = require('./npy');
const { fileNameFor } = require('./ort_loader');
const { formatTable } = require('./compare');
const { loadTest, DEFAULT_DIR } = require('./fashion_mnist');

function usage(msg) {
  if (msg) console.error(`eval_classifier.js: ${msg}`);
  console.error('usage: eval_classifier.js --qflow BIN --float FLOAT.onnx [--qdq LABEL=QDQ.onnx ...] ' +
                '[--images N] [--cpu native|MODEL] [--threads N] [--data-dir DIR] [--work DIR] [--json]');
  process.exit(2);
}

function parseArgs(argv) {
  const args = { images: 500, cpu: 'native', threads: 2, dataDir: DEFAULT_DIR, qdq: [], json: false, work: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    if (a === '--qflow') args.qflow = next();
    else if (a === '--float') args.float = next();
    else if (a === '--qdq') {
      const v = next();
      const eq = v.indexOf('=');
      args.qdq.push(eq > 0 ? { label: v.slice(0, eq), model: v.slice(eq + 1) } : { label: path.basename(v, '.onnx'), model: v });
    } else if (a === '--images') args.images = Number(next());
    else if (a === '--cpu') args.cpu = next();
    else if (a === '--threads') args.threads = Number(next());
    else if (a === '--data-dir') args.dataDir = next();
    else if (a === '--work') args.work = next();
    else if (a === '--json') args.json = true;
    else usage(`unknown argument ${a}`);
  }
  if (!args.qflow || !args.float) usage('--qflow and --float are required');
  if (!Number.isInteger(args.images) || args.images < 1) usage('--images wants a positive integer');
  return args;
}

// The command prefix that runs node on the requested CPU.
function nodeCommand(cpu) {
  return cpu === 'native' ? [process.execPath] : ['qemu-x86_64', '-cpu', cpu, process.execPath];
}

function run(cmd, args, what) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  // qemu-user warns about CPUID bits TCG cannot emulate; those lines say nothing about the run.
  const stderr = (r.stderr || '').split('\n').filter((l) => l && !/TCG doesn't support requested feature/.test(l)).join('\n');
  if (r.error || r.status !== 0)
    throw new Error(`${what} failed (${r.error ? r.error.message : `exit ${r.status}`}): ${stderr}`);
  return { stdout: r.stdout, stderr };
}

// The logits (first output) of `model` on the images; the arrays are [N, classes].
function qflowLogits(args, model, images, dir) {
  run(args.qflow, ['infer', model, '--input', images, '--output-dir', dir, '--threads', String(args.threads)], `qflow infer ${model}`);
  return firstNpy(dir);
}

function ortLogits(args, model, images, dir, optLevel) {
  const [cmd, ...pre] = nodeCommand(args.cpu);
  run(cmd, [...pre, path.join(__dirname, 'run_ort.js'), model, dir, '--threads', String(args.threads),
            '--opt-level', optLevel, images], `onnxruntime (${optLevel}, cpu ${args.cpu}) on ${model}`);
  return firstNpy(dir);
}

function firstNpy(dir) {
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.npy')).sort();
  if (files.length !== 1) throw new Error(`${dir}: expected one output, found ${files.join(', ') || 'none'}`);
  return readNpy(path.join(dir, files[0]));
}

function argmax(t) {
  const [n, k] = t.shape;
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    let best = 0;
    for (let j = 1; j < k; j++) if (t.data[i * k + j] > t.data[i * k + best]) best = j;
    out[i] = best;
  }
  return out;
}

const top1 = (pred, labels) => pred.reduce((s, p, i) => s + (p === labels[i] ? 1 : 0), 0) / labels.length;
const disagree = (a, b) => a.reduce((s, p, i) => s + (p !== b[i] ? 1 : 0), 0);

function probeKernels(cpu) {
  const [cmd, ...pre] = nodeCommand(cpu);
  const r = run(cmd, [...pre, path.join(__dirname, 'u8s8_probe.js'), '--json'], `u8s8_probe.js (cpu ${cpu})`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const work = args.work || fs.mkdtempSync(path.join(os.tmpdir(), 'qflow-eval-'));
  fs.mkdirSync(work, { recursive: true });
  const { images, labels } = loadTest(args.images, args.dataDir);
  const imagesNpy = path.join(work, 'images.npy');
  writeNpy(imagesNpy, 'float32', images.shape, images.data);

  const kernels = probeKernels(args.cpu);
  const floatPred = argmax(qflowLogits(args, args.float, imagesNpy, path.join(work, 'float')));
  const rows = [];
  for (const { label, model } of args.qdq) {
    const dir = (kind) => path.join(work, `${fileNameFor(label).replace(/\.npy$/, '')}_${kind}`);
    const qflow = argmax(qflowLogits(args, model, imagesNpy, dir('qflow')));
    const ortDisabled = argmax(ortLogits(args, model, imagesNpy, dir('ort_disabled'), 'disabled'));
    const ortAll = argmax(ortLogits(args, model, imagesNpy, dir('ort_all'), 'all'));
    rows.push({
      model: label, float: top1(floatPred, labels), qflow: top1(qflow, labels),
      ortDisabled: top1(ortDisabled, labels), ortAll: top1(ortAll, labels),
      diffDisabled: disagree(ortDisabled, qflow), diffAll: disagree(ortAll, qflow),
    });
  }
  const result = { images: labels.length, cpu: args.cpu, kernels, float: top1(floatPred, labels), models: rows };
  if (args.json) {
    console.log(JSON.stringify(result));
    return;
  }
  const u8s8 = require('./u8s8_probe');
  console.log(`${labels.length} test images; ONNX Runtime on cpu ${args.cpu}; kernels: ${u8s8.describe(kernels)}`);
  console.log(`float top-1 ${result.float.toFixed(4)}`);
  const pct = (v) => v.toFixed(4);
  console.log(formatTable(rows.map((r) => ({
    ...r, float: pct(r.float), qflow: pct(r.qflow), ortDisabled: pct(r.ortDisabled), ortAll: pct(r.ortAll),
  })), {
    model: 'model', float: 'float', qflow: 'qflow', ortDisabled: 'ort disabled', ortAll: 'ort all',
    diffDisabled: 'argmax != qflow (disabled)', diffAll: 'argmax != qflow (all)',
  }));
}

try {
  main();
} catch (e) {
  console.error(`eval_classifier.js: ${e.message}`);
  process.exit(1);
}
