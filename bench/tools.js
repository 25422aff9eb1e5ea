'use strict';
// The tools users already run, plain against NODE_OPTIONS="--require
// procwire/register": task throughput of jest-worker, workerpool and
// tinypool (2 process workers, small and 64 KiB tasks); and, in the notes,
// start-up of a process that loads the hook and never forks, jest -w 2 over a
// generated suite, and Vitest's forks pool (plain, with the hook) against its
// threads pool on the same suite. The tools come from .bench-deps/
// (scripts/setup.sh --bench), never as procwire dependencies; a tool that is
// missing costs only its rows, which say so.
//
//   node bench/tools.js [--quick]

const childProcess = require('child_process');
const fs = require('fs');
const path = require('path');
const harness = require('./lib/harness');

const DEPS = path.join(harness.ROOT, '.bench-deps', 'node_modules');
const POOLS = ['jest-worker', 'workerpool', 'tinypool'];
const SIZES = [16, 64 * 1024];
// By absolute path: the jest and Vitest runs start in a temporary directory,
// where the package name would not resolve.
const HOOK = `--require ${JSON.stringify(path.join(harness.ROOT, 'lib', 'register.js'))}`;

function installed(name) {
  return fs.existsSync(path.join(DEPS, name, 'package.json'));
}

// Runs `node args` from the package root (where procwire/register resolves
// to this checkout), with or without the hook; resolves with its stdout.
function runNode(args, { hook, timeout = 300_000, cwd = harness.ROOT }) {
  const env = { ...process.env, NODE_OPTIONS: hook ? HOOK : '' };
  return new Promise((resolve, reject) => {
    childProcess.execFile(process.execPath, args, { cwd, env, timeout, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err && !(err.code === 1 && /jest|vitest/.test(args.join(' ')))) {
        reject(new Error(`node ${args.join(' ')}: ${err.message} ${String(stderr).slice(-400)}`));
      } else {
        resolve(stdout);
      }
    });
  });
}

// Wall and CPU (this process's children: the tool and its workers) of one
// command, through bash's `times`.
function timed(command, { hook, cwd }) {
  const env = { ...process.env, NODE_OPTIONS: hook ? HOOK : '' };
  const script = `${command} >/dev/null 2>&1; rc=$?; times; exit $rc`;
  const started = process.hrtime.bigint();
  const out = childProcess.spawnSync('bash', ['-c', script], { cwd, env, encoding: 'utf8', timeout: 600_000 });
  const wall = Number(process.hrtime.bigint() - started) / 1e9;
  const lines = (out.stdout || '').trim().split('\n');
  const seconds = (text) => {
    const m = /(\d+)m([\d.]+)s/.exec(text);
    return m ? Number(m[1]) * 60 + Number(m[2]) : NaN;
  };
  const [user, sys] = (lines[lines.length - 1] || '').split(/\s+/).map(seconds);
  return { wall, cpu: user + sys, status: out.status };
}

// A suite of `files` small test files both jest and Vitest (with globals)
// run unchanged.
function writeSuite(dir, files) {
  fs.mkdirSync(path.join(dir, 'tests'), { recursive: true });
  for (let f = 0; f < files; f++) {
    fs.writeFileSync(path.join(dir, 'tests', `t${f}.test.js`),
      `test('sum ${f}', () => { expect(${f} + 1).toBe(${f + 1}); });\n` +
      `test('object ${f}', () => { expect({ n: ${f} }).toEqual({ n: ${f} }); });\n`);
  }
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "private": true }\n');
  fs.writeFileSync(path.join(dir, 'jest.config.js'), "module.exports = { testEnvironment: 'node', cache: false };\n");
  fs.writeFileSync(path.join(dir, 'vitest.config.mjs'), 'export default { test: { globals: true, include: [\'tests/**/*.test.js\'] } };\n');
  // The procwire pool as it ships (a warm spare per slot) and without the
  // spare (each worker forked when Vitest starts it, as the forks pool).
  for (const [file, call] of [['vitest.procwire.mjs', 'procwire()'], ['vitest.procwire-nospare.mjs', 'procwire({ spare: false })']]) {
    fs.writeFileSync(path.join(dir, file), `import { procwire } from ${JSON.stringify(path.join(harness.ROOT, 'vitest.mjs'))};\n` +
      `export default { test: { globals: true, pool: ${call}, include: ['tests/**/*.test.js'] } };\n`);
  }
}

function startupNotes(quick) {
  const runs = quick ? 10 : 60;
  const register = path.join(harness.ROOT, 'lib', 'register.js');
  const variants = { plain: ['-e', '0'], hook: ['-r', register, '-e', '0'] };
  const times = { plain: [], hook: [] };
  for (let i = 0; i < runs; i++) {
    for (const [name, args] of Object.entries(variants)) {
      const t0 = process.hrtime.bigint();
      childProcess.spawnSync(process.execPath, args, { env: { ...process.env, NODE_OPTIONS: '' } });
      times[name].push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  }
  const plain = harness.median(times.plain);
  const hook = harness.median(times.hook);
  return `start-up, a process that loads the hook and never forks: node -e 0 ${plain.toFixed(1)} ms, ` +
    `node -r lib/register.js -e 0 ${hook.toFixed(1)} ms (medians of ${runs} interleaved runs; ${(hook - plain).toFixed(1)} ms more)`;
}

function runnerNotes(quick, tmp, log) {
  const notes = [];
  const files = quick ? 60 : 300;
  const dir = path.join(tmp, 'tools-suite');
  writeSuite(dir, files);
  const fmt = (r) => `${r.wall.toFixed(1)} s wall, ${r.cpu.toFixed(1)} s CPU${r.status === 0 ? '' : ` (exit ${r.status})`}`;
  if (installed('jest')) {
    const jest = `"${process.execPath}" "${path.join(DEPS, 'jest', 'bin', 'jest.js')}" -w 2 --rootDir "${dir}"`;
    log(`tools: jest -w 2 over ${files} files, plain and with the hook`);
    const plain = timed(jest, { hook: false, cwd: dir });
    const hooked = timed(jest, { hook: true, cwd: dir });
    notes.push(`jest -w 2, ${files} files: plain ${fmt(plain)}; with procwire/register ${fmt(hooked)} ` +
      `(wall ×${(plain.wall / hooked.wall).toFixed(2)}, CPU ×${(plain.cpu / hooked.cpu).toFixed(2)})`);
  } else {
    notes.push('jest: not installed in .bench-deps/ (scripts/setup.sh --bench), skipped');
  }
  if (installed('vitest')) {
    const bin = `"${process.execPath}" "${path.join(DEPS, 'vitest', 'vitest.mjs')}" run --maxWorkers 2 --root "${dir}"`;
    const vitest = (pool) => (pool.startsWith('procwire') ? `${bin} --config vitest.${pool}.mjs` : `${bin} --pool ${pool}`);
    log(`tools: vitest over ${files} files: forks, forks with the hook, the procwire pool with and without its spare, threads`);
    const forks = timed(vitest('forks'), { hook: false, cwd: dir });
    const hooked = timed(vitest('forks'), { hook: true, cwd: dir });
    const pool = timed(vitest('procwire'), { hook: false, cwd: dir });
    const noSpare = timed(vitest('procwire-nospare'), { hook: false, cwd: dir });
    const threads = timed(vitest('threads'), { hook: false, cwd: dir });
    notes.push(`vitest, ${files} files, 2 workers: forks ${fmt(forks)}; forks with procwire/register ${fmt(hooked)}; ` +
      `pool: procwire() ${fmt(pool)}; procwire({ spare: false }) ${fmt(noSpare)}; threads ${fmt(threads)}`);
  } else {
    notes.push('vitest: not installed in .bench-deps/ (scripts/setup.sh --bench), skipped');
  }
  return notes;
}

async function runInProcess({ quick, repeats, progress, log }) {
  const started = Date.now();
  repeats = repeats || (quick ? 1 : 3);
  const ms = quick ? 150 : 3000;
  const tools = POOLS.filter(installed);
  const samples = {};
  const driver = path.join(__dirname, 'peers', 'tool-pool.js');
  for (let rep = 0; rep < repeats; rep++) {
    for (const size of SIZES) {
      for (const tool of tools) {
        for (const hook of [false, true]) {
          const id = `${tool}-${hook ? 'register' : 'plain'}`;
          progress.set(`tools: ${id} ${harness.fmtSize(size)} (run ${rep + 1}/${repeats})`);
          const out = JSON.parse((await runNode([driver, tool, String(size), String(ms)], { hook })).trim().split('\n').pop());
          ((samples[id] ||= {})[size] ||= []).push(out.tasksPerSecond);
          progress.tick();
        }
      }
    }
  }
  const data = {};
  for (const [id, bySize] of Object.entries(samples)) {
    data[id] = {};
    for (const [size, s] of Object.entries(bySize)) data[id][size] = { tasks: { median: harness.median(s), samples: s } };
  }
  const tmp = harness.makeTempDir('procwire-tools-');
  let notes;
  try {
    // jest and vitest over a generated suite take tens of seconds each, more
    // than --quick's whole share: they run in the full bench only.
    notes = quick
      ? [startupNotes(quick), 'jest and vitest over a generated suite: in the full run only (procwire bench --suite tools)']
      : [startupNotes(quick), ...runnerNotes(quick, tmp, log)];
  } finally {
    harness.removeTempDir(tmp);
  }
  const peers = [];
  for (const tool of POOLS) {
    for (const mode of ['plain', 'register']) {
      const id = `${tool}-${mode}`;
      peers.push(tools.includes(tool)
        ? { id, label: `${tool}, ${mode === 'plain' ? 'plain' : 'NODE_OPTIONS=--require procwire/register'}`, status: 'ok' }
        : { id, label: tool, status: 'skipped', reason: 'not installed in .bench-deps/ (scripts/setup.sh --bench)' });
    }
  }
  return {
    name: 'tools',
    title: 'Tools: worker pools\' tasks/s, plain against procwire/register',
    description: 'Each pool with 2 process workers and 32 tasks in flight; a task sends a string of the given size and gets ' +
      'its length back. The same pool code, unchanged, with and without NODE_OPTIONS="--require procwire/register". ' +
      'Higher is better.',
    xs: SIZES,
    xLabel: 'task argument',
    xUnit: 'bytes',
    metrics: [{ id: 'tasks', label: 'tasks/s', unit: '/s', better: 'higher' }],
    peers,
    data,
    histograms: {},
    pairs: POOLS.map((tool) => [`${tool}-register`, `${tool}-plain`]),
    notes: [...notes, `each sample: ${ms} ms after a warm-up; medians of ${repeats} interleaved repeats`,
      'the machine is shared with other work: compare ratios from one run'],
    repeats,
    seconds: (Date.now() - started) / 1000,
  };
}

function ticks({ quick, repeats }) {
  return (repeats || (quick ? 1 : 3)) * SIZES.length * POOLS.length * 2;
}

module.exports = { name: 'tools', inProcess: true, runInProcess, ticks };

if (require.main === module) {
  require('./lib/cli').standalone('tools');
}
