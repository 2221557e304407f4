#!/usr/bin/env node
// Times an ONNX model in onnxruntime-node (CPU EP) per sample, the same measurement as
// `qflow bench`: samples of the .npy files stacked along the first axis, each run alone as a
// batch of 1 in turn, --warmup untimed runs, then --runs timed ones; session creation and
// data loading excluded. Prints one JSON object with the same keys as `qflow bench`.
// Usage: bench_ort.js MODEL --data X.npy [--data ...] [--threads N] [--runs R] [--warmup W]
'use strict';
const { readNpy } = require('./npy');
const { loadOrt } = require('./ort_loader');

function usage(msg) {
  if (msg) console.error(`bench_ort.js: ${msg}`);
  console.error('usage: bench_ort.js MODEL --data X.npy [--data ...] [--threads N] [--runs R] [--warmup W]');
  process.exit(2);
}

function parseArgs(argv) {
  const args = { threads: 1, runs: 20, warmup: 3, data: [] };
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--data') args.data.push(argv[++i]);
    else if (a === '--threads') args.threads = Number(argv[++i]);
    else if (a === '--runs') args.runs = Number(argv[++i]);
    else if (a === '--warmup') args.warmup = Number(argv[++i]);
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else positional.push(a);
  }
  if (positional.length !== 1) usage('one MODEL is required');
  if (args.data.length === 0) usage('--data is required');
  if (!Number.isInteger(args.threads) || args.threads < 1) usage('--threads wants a positive integer');
  if (!Number.isInteger(args.runs) || args.runs < 1) usage('--runs wants a positive integer');
  if (!Number.isInteger(args.warmup) || args.warmup < 0) usage('--warmup wants a non-negative integer');
  [args.model] = positional;
  return args;
}

// One tensor of batch 1 per row of every file's first axis.
function loadSamples(ort, files) {
  const samples = [];
  for (const file of files) {
    const t = readNpy(file);
    if (t.shape.length === 0 || t.shape[0] === 0) throw new Error(`${file}: holds no samples`);
    const rowShape = [1, ...t.shape.slice(1)];
    const rowSize = t.data.length / t.shape[0];
    for (let r = 0; r < t.shape[0]; r++) {
      samples.push(new ort.Tensor(t.dtype, t.data.slice(r * rowSize, (r + 1) * rowSize), rowShape));
    }
  }
  return samples;
}

// numpy's default percentile: linear interpolation between closest ranks.
function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo] + (rank - lo) * (sorted[hi] - sorted[lo]);
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  const samples = loadSamples(ort, args.data);
  const loadStart = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(args.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    logSeverityLevel: 3,
  });
  const loadMs = Number(process.hrtime.bigint() - loadStart) / 1e6;
  if (session.inputNames.length !== 1) {
    throw new Error(`${args.model}: bench runs single-input models, this one has ${session.inputNames.length}`);
  }
  const input = session.inputNames[0];
  for (let i = 0; i < args.warmup; i++) await session.run({ [input]: samples[i % samples.length] });
  const times = [];
  for (let i = 0; i < args.runs; i++) {
    const feeds = { [input]: samples[(args.warmup + i) % samples.length] };
    const start = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  const sum = times.reduce((a, b) => a + b, 0);
  console.log(JSON.stringify({
    model: args.model, engine: 'ort', threads: args.threads, samples: samples.length, warmup: args.warmup,
    runs: args.runs, load_ms: loadMs, median_ms: percentile(times, 50), p10_ms: percentile(times, 10),
    p90_ms: percentile(times, 90), mean_ms: sum / times.length, min_ms: Math.min(...times),
    peak_rss_mib: process.resourceUsage().maxRSS / 1024, times_ms: times,
  }));
}

main().catch((e) => {
  console.error(`bench_ort.js: ${e.message}`);
  process.exit(1);
});
