#!/usr/bin/env node
// Model test: `qflow convert` on small PyTorch-exported ONNX models (conv, pool, gemm, batch
// norm, reshape/transpose) must give files ONNX Runtime runs to bit-identical outputs.
// Usage: roundtrip_test.js --qflow BIN --work DIR [--data LIBONNX_TESTDATA_DIR]
// Exits 0 on success, 1 on any difference, 77 when onnxruntime-node cannot be fetched.
'use strict';
const fs = require('fs');
const path = require('path');
const h = require('./harness');
const { runModel } = require(path.join(h.TOOLS, 'ort', 'run_ort'));
const { compareDirs, formatTable, TABLE_COLUMNS } = require(path.join(h.TOOLS, 'ort', 'compare'));
const { readTensorProto } = require(path.join(h.TOOLS, 'ort', 'tensor_proto'));
const { writeNpy } = require(path.join(h.TOOLS, 'ort', 'npy'));
const { fileNameFor } = require(path.join(h.TOOLS, 'ort', 'ort_loader'));

// Mostly PyTorch exports (with initializers, old opsets). onnxruntime 1.30 no longer runs the
// opset-6 Gemm, AveragePool and BatchNormalization of pytorch-converted, so those three come
// from the node suite.
const CASES = [
  'pytorch-converted/test_Conv2d_groups',
  'pytorch-converted/test_Conv2d_depthwise_strided',
  'pytorch-converted/test_Conv2d_dilated',
  'pytorch-converted/test_MaxPool2d_stride_padding_dilation',
  'pytorch-converted/test_Linear_no_bias',
  'pytorch-converted/test_PixelShuffle',
  'pytorch-operator/test_operator_conv',
  'node/test_gemm_all_attributes',
  'node/test_averagepool_2d_pads_count_include_pad',
  'node/test_batchnorm_example',
];

function listPb(dir, prefix) {
  return fs.readdirSync(dir).filter((f) => f.startsWith(prefix) && f.endsWith('.pb'))
    .sort((a, b) => parseInt(a.slice(prefix.length), 10) - parseInt(b.slice(prefix.length), 10))
    .map((f) => path.join(dir, f));
}

async function checkCase(name, args, summary) {
  const src = path.join(args.data, name);
  const work = h.freshDir(path.join(args.work, path.basename(name)));
  const row = { model: name, cosine: NaN, maxRel: NaN, status: 'ok (bit-identical)' };
  summary.push(row);
  const dataSet = path.join(src, 'test_data_set_0');
  const inputs = listPb(dataSet, 'input_').map((file) => ({ name: null, file }));
  const ortDir = path.join(work, 'ort');
  let outputs;
  try {
    ({ outputs } = await runModel(path.join(src, 'model.onnx'), inputs, ortDir));
  } catch (e) {
    console.log(`-- ${name}: onnxruntime rejects the original model: ${e.message}`);
    row.status = 'FAIL: onnxruntime rejects the original';
    return false;
  }

  // The recorded outputs keep the harness itself honest: ORT must reproduce them.
  const refDir = h.freshDir(path.join(work, 'reference'));
  listPb(dataSet, 'output_').forEach((file, i) => {
    const t = readTensorProto(file);
    writeNpy(path.join(refDir, fileNameFor(outputs[i])), t.dtype, t.shape, t.data);
  });
  const ref = compareDirs(refDir, ortDir, { minCosine: 0.99999, maxRel: 1e-4 });
  row.cosine = Math.min(...ref.rows.map((r) => r.cosine));
  row.maxRel = Math.max(...ref.rows.map((r) => r.maxRel));
  if (!ref.ok) {
    console.log(`-- ${name}: onnxruntime vs recorded outputs\n${formatTable(ref.rows, TABLE_COLUMNS)}`);
    row.status = 'FAIL: onnxruntime disagrees with the recorded outputs';
    return false;
  }

  const rtModel = path.join(work, 'roundtrip.onnx');
  const conv = h.runQflow(args.qflow, ['convert', path.join(src, 'model.onnx'), '--output', rtModel]);
  if (!conv.ok) {
    console.log(`-- ${name}: qflow convert failed\n${conv.message}`);
    row.status = 'FAIL: qflow convert';
    return false;
  }
  const rtDir = path.join(work, 'roundtrip');
  try {
    await runModel(rtModel, inputs, rtDir);
  } catch (e) {
    console.log(`-- ${name}: onnxruntime rejects the round-tripped model: ${e.message}`);
    row.status = 'FAIL: onnxruntime rejects it';
    return false;
  }
  const cmp = compareDirs(ortDir, rtDir, { exact: true });
  console.log(`-- ${name}: onnxruntime on qflow convert output vs on the original\n${formatTable(cmp.rows, TABLE_COLUMNS)}`);
  if (!cmp.ok) row.status = 'FAIL: not bit-identical';
  return cmp.ok;
}

async function main() {
  const args = h.parseArgs(process.argv.slice(2), {
    qflow: undefined, work: undefined, data: '/usr/share/libonnx-testdata/data',
  });
  if (!fs.existsSync(args.data)) {
    console.log(`SKIP: ${args.data} is missing (Debian package libonnx-testdata)`);
    process.exit(h.SKIP);
  }
  h.fetchCache('--ort-only');
  h.freshDir(args.work);
  const summary = [];
  let ok = true;
  for (const name of CASES) if (!(await checkCase(name, args, summary))) ok = false;
  console.log('\n== summary (onnxruntime vs the recorded outputs; round trip must be bit-identical)');
  console.log(formatTable(summary, { model: 'model', cosine: 'min cosine', maxRel: 'max max_rel', status: 'status' }));
  process.exit(ok ? 0 : 1);
}

main().catch((e) => {
  console.error(`roundtrip_test.js: ${e.stack || e.message}`);
  process.exit(1);
});
