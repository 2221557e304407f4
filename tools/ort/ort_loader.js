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

// A session as the comparison tools run it: sequential, `threads` intra-op threads, the given
// graph optimisation level, warnings off (old-opset warnings on stderr would bury real errors).
function createSession(model, { threads = 1, optLevel = 'all' } = {}) {
  return loadOrt().InferenceSession.create(model, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: optLevel,
    logSeverityLevel: 3,
  });
}

// Output names become file names; keep them readable but never let them escape the folder.
function fileNameFor(tensorName) {
  // Same rule as `qflow infer`, so both sides of a comparison name a tensor alike.
  return tensorName.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\./, '_') + '.npy';
}

module.exports = { cacheDir, loadOrt, createSession, fileNameFor };
