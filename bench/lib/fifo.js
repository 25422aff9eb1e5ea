'use strict';
// Builds the C reference programs with the system C compiler into a directory
// of the caller's choosing, and runs them:
//   bench/fifo.c  the pipe latency reference (latency suite);
//   bench/ring.c  the socketpair and shared-memory ring round-trip references
//                 (round-trip suite).

const childProcess = require('child_process');
const path = require('path');

// -> { binary } or { skip: reason }
function buildC(dir, name) {
  const source = path.join(__dirname, '..', `${name}.c`);
  const out = path.join(dir, name);
  const tried = [];
  for (const cc of [process.env.CC, 'cc', 'gcc', 'clang'].filter(Boolean)) {
    const r = childProcess.spawnSync(cc, ['-O2', '-o', out, source], { encoding: 'utf8', timeout: 60000 });
    if (r.status === 0) return { binary: out };
    tried.push(`${cc}: ${r.error ? r.error.code || r.error.message : (r.stderr || '').trim().split('\n')[0]}`);
  }
  return { skip: `no working C compiler to build bench/${name}.c (${tried.join('; ')})` };
}

function buildFifo(dir) {
  return buildC(dir, 'fifo');
}

// Runs a C reference and returns its stdout split into lines of numbers.
function runLines(binary, args, timeoutMs) {
  return new Promise((resolve, reject) => {
    childProcess.execFile(binary, args, { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        if (err) { reject(new Error(`${path.basename(binary)} failed: ${err.message} ${stderr || ''}`.trim())); return; }
        resolve(stdout.trim().split('\n').map((line) => line.trim().split(/\s+/).map(Number)));
      });
  });
}

// -> Promise<{ [size]: number[] latencies in ns }>
async function runFifo(binary, sizes, budgetMs, maxIters, timeoutMs) {
  const out = {};
  for (const parts of await runLines(binary, [String(budgetMs), String(maxIters), ...sizes.map(String)], timeoutMs)) {
    out[parts[0]] = parts.slice(2);
  }
  return out;
}

// transport: 'socketpair' | 'ring'; pinned: both processes on one CPU.
// -> Promise<{ [size]: { rps, p50Ns, p99Ns, samples } }>
async function runRing(binary, { transport, pinned, sizes, warmMs, windowMs, latencyMs, timeoutMs }) {
  const args = [transport, pinned ? '1' : '0', String(warmMs), String(windowMs), String(latencyMs), ...sizes.map(String)];
  const out = {};
  for (const [size, rps, p50Ns, p99Ns, samples] of await runLines(binary, args, timeoutMs)) {
    out[size] = { rps, p50Ns, p99Ns, samples };
  }
  return out;
}

module.exports = { buildC, buildFifo, runFifo, runRing };
