// Model test: PP-OCR cls compiled with an NV12 input (docs/input-types.md): the .hbm fed NV12
// frames of held-out rendered text lines agrees in argmax with the float model fed the same
// frames converted to RGB on the host on at least 99.5% of them (tools/input_type_check.py).
//
// Usage: input_type_nv12_test.js --qflow BIN --work DIR [--lines 200] [--calib 50]
// Exits 0 when the bar holds, 1 otherwise, 77 when the PP-OCR models cannot be fetched or the
// text lines cannot be rendered (Debian's python3-pil and fonts-dejavu-core: make bench-deps).
'use strict';
const path = require('path');
const { spawnSync } = require('child_process');
const h = require('./harness');

function main() {
  const args = h.parseArgs(process.argv.slice(2), { qflow: undefined, work: undefined, lines: '200', calib: '50' });
  const cache = h.fetchCache('--models-only');
  const probe = spawnSync('/usr/bin/python3', ['-c', 'import numpy, PIL; import os; ' +
                          'assert os.path.isdir("/usr/share/fonts/truetype/dejavu")'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    console.log(`SKIP: tools/render_text.py cannot render text lines (python3-numpy, python3-pil, fonts-dejavu-core: ` +
                `make bench-deps): ${(probe.stderr || '').trim().split('\n').pop()}`);
    process.exit(h.SKIP);
  }
  const r = spawnSync('/usr/bin/python3', [path.join(h.TOOLS, 'input_type_check.py'), 'cls', '--qflow', args.qflow,
                                           '--work', args.work, '--models', path.join(cache, 'npm', 'package', 'assets'),
                                           '--lines', args.lines, '--calib', args.calib],
                      { encoding: 'utf8', stdio: ['ignore', 'inherit', 'inherit'] });
  process.exit(r.status === 0 ? 0 : 1);
}

main();
