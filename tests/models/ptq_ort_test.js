#!/usr/bin/env node
// Model test: the PTQ model that pipelines/ptq.toml writes for the MobileNetV2-style fixture
// (models/mobilenet_fashion) must compute in ONNX Runtime with its default optimizations
// (Q/DQ fused into int8 kernels) what `qflow infer` computes, within int8 rounding: argmax on
// the 200 calibration images and logits within a few output steps. It runs ONNX Runtime on
// this CPU and, when Debian's qemu-user is installed, on an emulated AVX2 CPU without VNNI
// (`qemu-x86_64 -cpu Haswell-noTSX`), whose int8 kernels add pairs of u8 x s8 products in 16
// bits; tools/ort/u8s8_probe.js first checks that the emulated ONNX Runtime really uses them.
// Without reduced-range weights (docs/quantization.md, "QDQ models in ONNX Runtime") the
// emulated run fails: measured, argmax differs on 10 of the 40 images, logits by 50 steps.
// Usage: ptq_ort_test.js --qflow BIN --work DIR [--set KEY=VALUE]
// --set is passed to `qflow run` (--set quantization.reduce-range=false shows the failure).
// Exits 0 when all agree, 1 otherwise, 77 when onnxruntime-node cannot be fetched.
'use strict';
const path = require('path');
const { spawnSync } = require('child_process');
const h = require('./harness');
const { readNpy, writeNpy } = require(path.join(h.TOOLS, 'ort', 'npy'));
const { describe } = require(path.join(h.TOOLS, 'ort', 'u8s8_probe'));

const FIXTURE = path.join(h.SOURCE_DIR, 'models', 'mobilenet_fashion');
const MODEL = path.join(FIXTURE, 'mobilenet_fashion.onnx');
const DATA = path.join(FIXTURE, 'calib_200.npy');
const LABELS = path.join(FIXTURE, 'calib_200_labels.npy');
const EMULATED_CPU = 'Haswell-noTSX';
// Emulation runs ONNX Runtime about 50 times slower: the first 40 images keep it under a
// minute, and saturated sums would still show (every image has logits many steps off).
const EMULATED_IMAGES = 40;
// Samples whose argmax may differ from qflow's: a requantization rounded the other way in a
// fused kernel can flip a near tie.
const MAX_ARGMAX_DIFF = 2;
// Largest |logit difference| allowed, in steps of the logits' quantization scale.
const MAX_LOGIT_STEPS = 8;

function nodeOn(cpu) {
  return cpu === 'native' ? [process.execPath] : ['qemu-x86_64', '-cpu', cpu, process.execPath];
}

function runNode(cpu, script, args) {
  const [cmd, ...pre] = nodeOn(cpu);
  const r = spawnSync(cmd, [...pre, script, ...args], { encoding: 'utf8', maxBuffer: 64 << 20, timeout: 300000 });
  const stderr = (r.stderr || '').split('\n').filter((l) => l && !/TCG doesn't support requested feature/.test(l)).join('\n');
  if (r.error || r.status !== 0) throw new Error(`${path.basename(script)} on cpu ${cpu}: ${r.error ? r.error.message : `exit ${r.status}`} ${stderr}`);
  return r.stdout;
}

function argmax(t, i) {
  const k = t.shape[1];
  let best = 0;
  for (let j = 1; j < k; j++) if (t.data[i * k + j] > t.data[i * k + best]) best = j;
  return best;
}

// The logits' quantization scale: the smallest positive gap between distinct logit values.
function logitStep(t) {
  const v = Array.from(t.data).sort((a, b) => a - b);
  let step = Infinity;
  for (let i = 1; i < v.length; i++) if (v[i] - v[i - 1] > 1e-6) step = Math.min(step, v[i] - v[i - 1]);
  return step;
}

function compare(label, mine, ort, labels) {
  const n = mine.shape[0];
  const step = logitStep(mine);
  let diff = 0, worst = 0, topQflow = 0, topOrt = 0;
  for (let i = 0; i < n; i++) {
    const a = argmax(mine, i), b = argmax(ort, i);
    if (a !== b) diff++;
    if (a === Number(labels[i])) topQflow++;
    if (b === Number(labels[i])) topOrt++;
  }
  for (let i = 0; i < mine.data.length; i++) worst = Math.max(worst, Math.abs(mine.data[i] - ort.data[i]) / step);
  const ok = diff <= MAX_ARGMAX_DIFF && worst <= MAX_LOGIT_STEPS;
  console.log(`-- ${label}: argmax differs from qflow on ${diff}/${n} images (max ${MAX_ARGMAX_DIFF}); ` +
              `largest logit difference ${worst.toFixed(1)} steps of ${step.toExponential(3)} (max ${MAX_LOGIT_STEPS}); ` +
              `top-1 on the calibration labels: qflow ${(topQflow / n).toFixed(3)}, onnxruntime ${(topOrt / n).toFixed(3)}` +
              (ok ? '' : '  FAIL'));
  return ok;
}

function ortLogits(cpu, model, dir, data) {
  runNode(cpu, path.join(h.TOOLS, 'ort', 'run_ort.js'), [model, dir, '--opt-level', 'all', '--threads', '1', data]);
  return readNpy(path.join(dir, 'logits.npy'));
}

// The first `n` rows of a [N, ...] tensor.
function head(t, n) {
  const row = t.data.length / t.shape[0];
  return { dtype: t.dtype, shape: [n, ...t.shape.slice(1)], data: t.data.slice(0, n * row) };
}

function hasQemu() {
  const r = spawnSync('qemu-x86_64', ['--version'], { encoding: 'utf8' });
  return !r.error && r.status === 0;
}

function main() {
  const args = h.parseArgs(process.argv.slice(2), { qflow: undefined, work: undefined, set: '' });
  h.fetchCache('--ort-only');
  h.freshDir(args.work);
  const out = path.join(args.work, 'ptq');
  const run = h.runQflow(args.qflow, ['run', path.join(h.SOURCE_DIR, 'pipelines', 'ptq.toml'), '--set', `model=${MODEL}`,
                                      '--set', `data=${DATA}`, '--set', 'name=mobilenet_fashion', '--out', out,
                                      ...(args.set ? ['--set', args.set] : [])]);
  if (!run.ok) {
    console.log(`FAIL: qflow run pipelines/ptq.toml\n${run.message}`);
    process.exit(1);
  }
  const ptq = path.join(out, 'mobilenet_fashion_ptq_model.onnx');
  const qflowDir = path.join(args.work, 'qflow');
  const infer = h.runQflow(args.qflow, ['infer', ptq, '--input', DATA, '--output-dir', qflowDir]);
  if (!infer.ok) {
    console.log(`FAIL: qflow infer\n${infer.message}`);
    process.exit(1);
  }
  const mine = readNpy(path.join(qflowDir, 'logits.npy'));
  const labels = readNpy(LABELS).data;

  let ok = true;
  const native = JSON.parse(runNode('native', path.join(h.TOOLS, 'ort', 'u8s8_probe.js'), ['--json']));
  console.log(`this CPU: ${describe(native)}`);
  ok = compare('onnxruntime, default optimizations, this CPU', mine,
                ortLogits('native', ptq, path.join(args.work, 'ort_native'), DATA), labels) && ok;

  if (!hasQemu()) {
    console.log(`NOTE: qemu-x86_64 (Debian qemu-user) is not installed: the emulated ${EMULATED_CPU} run is skipped`);
  } else {
    const emulated = JSON.parse(runNode(EMULATED_CPU, path.join(h.TOOLS, 'ort', 'u8s8_probe.js'), ['--json']));
    console.log(`emulated ${EMULATED_CPU}: ${describe(emulated)}`);
    if (!emulated.saturates) {
      console.log(`NOTE: onnxruntime under qemu -cpu ${EMULATED_CPU} does not use its 16-bit kernels; the emulated run proves nothing and is skipped`);
    } else {
      const subset = path.join(args.work, `calib_${EMULATED_IMAGES}.npy`);
      const images = head(readNpy(DATA), EMULATED_IMAGES);
      writeNpy(subset, images.dtype, images.shape, images.data);
      const start = Date.now();
      const ort = ortLogits(EMULATED_CPU, ptq, path.join(args.work, 'ort_emulated'), subset);
      ok = compare(`onnxruntime, default optimizations, emulated ${EMULATED_CPU} (${((Date.now() - start) / 1000).toFixed(0)} s)`,
                   head(mine, EMULATED_IMAGES), ort, labels.slice(0, EMULATED_IMAGES)) && ok;
    }
  }
  console.log(ok ? 'ok' : 'FAIL');
  process.exit(ok ? 0 : 1);
}

try {
  main();
} catch (e) {
  console.error(`ptq_ort_test.js: ${e.stack || e.message}`);
  process.exit(1);
}
