'use strict';
// Builds bench/fifo.c (the pipe latency reference) with the system C compiler
// into a directory of the caller's choosing, and runs it.

const childProcess = require('child_process');
const path = require('path');

const SOURCE = path.join(__dirname, '..', 'fifo.c');

// -> { binary } or { skip: reason }
function buildFifo(dir) {
  const out = path.join(dir, 'fifo');
  const tried = [];
  for (const cc of [process.env.CC, 'cc', 'gcc', 'clang'].filter(Boolean)) {
    const r = childProcess.spawnSync(cc, ['-O2', '-o', out, SOURCE], { encoding: 'utf8', timeout: 60000 });
    if (r.status === 0) return { binary: out };
    tried.push(`${cc}: ${r.error ? r.error.code || r.error.message : (r.stderr || '').trim().split('\n')[0]}`);
  }
  return { skip: `no working C compiler to build bench/fifo.c (${tried.join('; ')})` };
}

// -> Promise<{ [size]: number[] latencies in ns }>
function runFifo(binary, sizes, budgetMs, maxIters, timeoutMs) {
  return new Promise((resolve, reject) => {
    const args = [String(budgetMs), String(maxIters), ...sizes.map(String)];
    childProcess.execFile(binary, args, { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        if (err) { reject(new Error(`fifo failed: ${err.message} ${stderr || ''}`.trim())); return; }
        const out = {};
        for (const line of stdout.trim().split('\n')) {
          const parts = line.trim().split(/\s+/).map(Number);
          out[parts[0]] = parts.slice(2);
        }
        resolve(out);
      });
  });
}

module.exports = { buildFifo, runFifo };
