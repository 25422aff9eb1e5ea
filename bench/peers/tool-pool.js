'use strict';
// A driver of bench/tools.js: one worker pool (jest-worker, workerpool or
// tinypool, from .bench-deps/) with 2 process workers, `inflight` tasks kept
// in flight for `ms` of measurement after a warm-up, each task's argument a
// string of `size` bytes echoed back as its length. Prints
// { tasks, seconds, tasksPerSecond, cpuMs } (this process's CPU: the
// parent's side of the IPC). Run plain or with
// NODE_OPTIONS="--require procwire/register".
//
//   node bench/peers/tool-pool.js <tool> <size> <ms> [inflight]

const path = require('path');
const url = require('url');

const [tool, sizeText, msText, inflightText] = process.argv.slice(2);
const size = Number(sizeText);
const ms = Number(msText);
const inflight = Number(inflightText || 32);
const DEPS = path.join(__dirname, '..', '..', '.bench-deps', 'node_modules');
const WORKER = path.join(__dirname, 'tool-pool-worker.js');

async function makePool() {
  process.env.PROCWIRE_BENCH_TOOL = tool;
  if (tool === 'jest-worker') {
    const { Worker } = require(path.join(DEPS, 'jest-worker'));
    const w = new Worker(WORKER, { numWorkers: 2, enableWorkerThreads: false, exposedMethods: ['length'] });
    return { run: (arg) => w.length(arg), end: () => w.end() };
  }
  if (tool === 'workerpool') {
    const pool = require(path.join(DEPS, 'workerpool')).pool(WORKER, { workerType: 'process', maxWorkers: 2 });
    return { run: (arg) => pool.exec('length', [arg]), end: () => pool.terminate() };
  }
  if (tool === 'tinypool') {
    const { Tinypool } = await import(url.pathToFileURL(path.join(DEPS, 'tinypool', 'dist', 'index.js')).href);
    const pool = new Tinypool({ filename: WORKER, runtime: 'child_process', minThreads: 2, maxThreads: 2 });
    return { run: (arg) => pool.run(arg, { name: 'length' }), end: () => pool.destroy() };
  }
  throw new Error(`unknown tool ${tool}`);
}

async function main() {
  const pool = await makePool();
  const arg = 'x'.repeat(size);
  let done = 0;
  let stopAt = Date.now() + Math.max(300, ms / 3);
  async function lane() {
    while (Date.now() < stopAt) {
      const n = await pool.run(arg);
      if (n !== size) throw new Error(`task answered ${n}, expected ${size}`);
      done++;
    }
  }
  // Warm-up: the workers start and their code settles.
  await Promise.all([...Array(inflight)].map(lane));
  done = 0;
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  stopAt = Date.now() + ms;
  await Promise.all([...Array(inflight)].map(lane));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  await pool.end();
  process.stdout.write(`${JSON.stringify({ tasks: done, seconds, tasksPerSecond: done / seconds, cpuMs: (cpu.user + cpu.system) / 1000 })}\n`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
