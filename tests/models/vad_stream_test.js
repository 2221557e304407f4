#!/usr/bin/env node
// Model test: Silero VAD (LSTM inside If branches) run frame by frame with its state carried
// (`qflow infer --carry`) agrees with ONNX Runtime within 1e-4 on speech from espeak-ng
// (tools/vad_agreement.py), for the legacy (h, c) and the v5 (state) models.
// Usage: vad_stream_test.js --qflow BIN --work DIR
// Exits 0 on success, 1 on a difference, 77 when the npm packages or espeak-ng are missing.
'use strict';
const path = require('path');
const { spawnSync } = require('child_process');
const h = require('./harness');

function main() {
  const args = h.parseArgs(process.argv.slice(2), { qflow: undefined, work: undefined });
  if (spawnSync('espeak-ng', ['--version']).status !== 0) {
    console.log('SKIP: espeak-ng is not installed (make deps installs it); the VAD test did not run');
    process.exit(h.SKIP);
  }
  const cache = h.fetchCache('--zoo');
  h.fetchCache('--ort-only');
  let failed = false;
  for (const model of ['silero_vad_legacy.onnx', 'silero_vad_v5.onnx']) {
    // Debian's interpreter: python3-numpy is installed for it.
    const r = spawnSync('/usr/bin/python3', [path.join(h.TOOLS, 'vad_agreement.py'),
      '--build', path.dirname(path.dirname(args.qflow)),
      '--model', path.join(cache, 'zoo', 'vad-web', 'dist', model),
      '--work', h.freshDir(path.join(args.work, path.basename(model, '.onnx')))],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    process.stdout.write(r.stdout);
    if (r.status !== 0) {
      console.log(`FAIL ${model}: exit ${r.status}\n${r.stderr}`);
      failed = true;
    }
  }
  process.exit(failed ? 1 : 0);
}

main();
