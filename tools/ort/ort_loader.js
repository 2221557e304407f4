// Loads onnxruntime-node from the qflow cache (tools/fetch_npm.sh), not from a global install.
'use strict';
const os = require('os');
const path = require('path');

function cacheDir() {
  return process.env.QFLOW_CACHE || path.join(os.homedir(), '.cache', 'qflow');
}

function loadOrt() {
  const dir = path.join(cacheDir(), 'ort', 'node_modules', 'onnxruntime-node');
  try {
    return require(dir);
  } catch (e) {
    throw new Error(`cannot load onnxruntime-node from ${dir} (run tools/fetch_npm.sh): ${e.message}`);
  }
}

// Output names become file names; keep them readable but never let them escape the folder.
function fileNameFor(tensorName) {
  // Same rule as `qflow infer`, so both sides of a comparison name a tensor alike.
  return tensorName.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\./, '_') + '.npy';
}

module.exports = { cacheDir, loadOrt, fileNameFor };
