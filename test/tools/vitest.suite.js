'use strict';
// procwire/vitest (lib/vitest.js) in Vitest 4 itself, from .test-deps/: a
// generated suite run with `pool: procwire()` must pass as with Vitest's
// own pools, its workers forked through procwire, with Vitest's options
// people set (maxWorkers, isolate, execArgv), a worker that dies ending the
// run as with Vitest's forks pool, and no worker left after the run: neither
// a worker that ran a file nor a warm spare the pool forked ahead.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { toolPath } = require('./helpers');

const VITEST = path.join(toolPath('vitest'), 'vitest.mjs');
const ENTRY = path.join(__dirname, '..', '..', 'vitest.mjs');

// A project of `files` test files; each records its worker's pid, whether
// procwire forked it, whether --expose-gc reached it and the env Vitest
// gives workers. `crash` names a file that kills its own worker. Every
// worker process, spares included, records its pid in `started` as it
// starts (a --require in execArgv), so a test can tell that none is left.
function projectDir(t, { files, config = '', crash = -1, pool = 'procwire()', execArgv = [], projects = [] }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-vitest-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const marks = path.join(dir, 'marks');
  const started = path.join(dir, 'started');
  fs.mkdirSync(path.join(dir, 'tests'), { recursive: true });
  fs.mkdirSync(marks);
  fs.mkdirSync(started);
  const startMark = path.join(dir, 'mark-start.cjs');
  fs.writeFileSync(startMark, `require('fs').writeFileSync(${JSON.stringify(started)} + '/' + process.pid, '');\n`);
  for (let f = 0; f < files; f++) {
    fs.writeFileSync(path.join(dir, 'tests', `t${f}.test.js`), [
      "import { createRequire } from 'node:module';",
      "import { writeFileSync } from 'node:fs';",
      'const require = createRequire(import.meta.url);',
      `test('file ${f}', () => {`,
      "  const procwire = Object.keys(require.cache).some((f) => f.endsWith('child-preload.js'));",
      `  writeFileSync(${JSON.stringify(marks)} + '/${f}-' + process.pid, JSON.stringify({ procwire, gc: typeof globalThis.gc, env: process.env.PROCWIRE_VITEST_ENV }));`,
      f === crash ? "  process.kill(process.pid, 'SIGKILL');" : '',
      `  expect(${f} + 1).toBe(${f + 1});`,
      '});',
    ].join('\n'));
  }
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "private": true }\n');
  // One pool instance, which every project given names (inline, so they
  // share it and its spares).
  const projectList = projects.map((p) => `{ test: { name: '${p.name}', globals: true, pool, include: ${JSON.stringify(p.include)}, ` +
    `execArgv: ${JSON.stringify(['--require', startMark, ...p.execArgv])} } }`);
  fs.writeFileSync(path.join(dir, 'vitest.config.mjs'), `import { procwire } from ${JSON.stringify(ENTRY)};\n` +
    `const pool = ${pool};\n` +
    `export default { test: { globals: true, pool, include: ['tests/**/*.test.js'], ` +
    `execArgv: ${JSON.stringify(['--require', startMark, ...execArgv])}, ` +
    `${projects.length > 0 ? `projects: [${projectList.join(', ')}], ` : ''}${config} } };\n`);
  return { dir, marks, started };
}

function runVitest(dir) {
  const out = path.join(dir, 'report.json');
  const result = childProcess.spawnSync(process.execPath, [VITEST, 'run', '--root', dir, '--reporter', 'json', '--outputFile', out],
    { cwd: dir, encoding: 'utf8', timeout: 120_000 });
  assert.ok(result.signal === null, `vitest ended by ${result.signal}: ${result.stderr}`);
  return { status: result.status, report: JSON.parse(fs.readFileSync(out, 'utf8')), stderr: result.stderr };
}

function marksOf(marks) {
  return fs.readdirSync(marks).map((name) => ({ file: Number(name.split('-')[0]), pid: Number(name.split('-')[1]),
    ...JSON.parse(fs.readFileSync(path.join(marks, name), 'utf8')) }));
}

function startedPids(started) {
  return fs.readdirSync(started).map(Number);
}

function assertGone(pids) {
  for (const pid of pids) {
    assert.throws(() => process.kill(pid, 0), { code: 'ESRCH' }, `worker ${pid} still runs after the run`);
  }
}

test('pool: procwire({ child: \'native\' }) runs the suite isolated (a worker per file), through procwire, with execArgv and env', { timeout: 150_000 }, (t) => {
  // The native child mode makes the fork visible in the worker (procwire's
  // child preload runs there).
  const { dir, marks, started } = projectDir(t, {
    files: 8, config: "maxWorkers: 2, env: { PROCWIRE_VITEST_ENV: 'set' }", execArgv: ['--expose-gc'], pool: "procwire({ child: 'native' })",
  });
  const { status, report } = runVitest(dir);
  assert.strictEqual(status, 0);
  assert.deepStrictEqual([report.numTotalTests, report.numPassedTests], [8, 8]);
  const seen = marksOf(marks);
  assert.strictEqual(seen.length, 8);
  // A file that ran in a spare got what a worker forked for it gets.
  assert.ok(seen.every((m) => m.procwire && m.gc === 'function' && m.env === 'set'), JSON.stringify(seen));
  assert.strictEqual(new Set(seen.map((m) => m.pid)).size, 8, 'isolate: every file in a fresh worker');
  // Warm spares: at most one a slot is left unused at the end, and ended.
  const pids = startedPids(started);
  assert.ok(pids.length >= 8 && pids.length <= 8 + 2, `${pids.length} processes for 8 files`);
  assertGone(pids);
});

test('projects with different execArgv: each file runs in a worker forked with its own project\'s options', { timeout: 150_000 }, (t) => {
  // A spare is forked for one project's options; the other project's files
  // must never get it. The two projects share one pool (and its spares).
  const { dir, marks, started } = projectDir(t, {
    files: 8, config: 'maxWorkers: 2',
    projects: [{ name: 'a', include: ['tests/t[0-3].test.js'], execArgv: ['--expose-gc'] },
      { name: 'b', include: ['tests/t[4-7].test.js'], execArgv: [] }],
  });
  const { status, report } = runVitest(dir);
  assert.strictEqual(status, 0);
  assert.strictEqual(report.numPassedTests, 8);
  const seen = marksOf(marks);
  assert.strictEqual(seen.length, 8);
  assert.ok(seen.every((m) => m.gc === (m.file < 4 ? 'function' : 'undefined')), JSON.stringify(seen));
  assert.strictEqual(new Set(seen.map((m) => m.pid)).size, 8);
  assertGone(startedPids(started));
});

test('pool: procwire({ spare: false }) forks a worker when Vitest starts one, as the forks pool', { timeout: 150_000 }, (t) => {
  const { dir, marks, started } = projectDir(t, { files: 6, config: 'maxWorkers: 2', pool: 'procwire({ spare: false })' });
  const { status, report } = runVitest(dir);
  assert.strictEqual(status, 0);
  assert.strictEqual(report.numPassedTests, 6);
  assert.strictEqual(new Set(marksOf(marks).map((m) => m.pid)).size, 6);
  const pids = startedPids(started);
  assert.strictEqual(pids.length, 6);
  assertGone(pids);
});

test('isolate: false and maxWorkers: 2 reuse at most two workers, with no spare', { timeout: 150_000 }, (t) => {
  const { dir, marks, started } = projectDir(t, { files: 8, config: 'maxWorkers: 2, isolate: false' });
  const { status, report } = runVitest(dir);
  assert.strictEqual(status, 0);
  assert.strictEqual(report.numPassedTests, 8);
  const seen = marksOf(marks);
  // The default child mode: a plain worker (only the pool's end is procwire's).
  assert.ok(seen.every((m) => !m.procwire), JSON.stringify(seen));
  const pids = new Set(seen.map((m) => m.pid));
  assert.ok(pids.size >= 1 && pids.size <= 2, `${pids.size} workers`);
  assert.deepStrictEqual(startedPids(started).sort(), [...pids].sort());
  assertGone(pids);
});

test('a worker that dies ends the run failed, as with Vitest\'s forks pool, and leaves no worker', { timeout: 150_000 }, (t) => {
  // Side by side with Vitest's own forks pool: the same outcome, file by file.
  const outcome = (pool) => {
    const { dir, started } = projectDir(t, { files: 4, config: 'maxWorkers: 2', crash: 2, pool });
    const { status, report } = runVitest(dir);
    assertGone(startedPids(started));
    return { status, total: report.numTotalTests, passed: report.numPassedTests, failed: report.numFailedTests,
      files: report.testResults.map((r) => [path.basename(r.name), r.status]).sort() };
  };
  const forks = outcome("'forks'");
  const ours = outcome('procwire()');
  assert.deepStrictEqual(ours, forks);
  assert.strictEqual(ours.status, 1);
  assert.strictEqual(ours.passed, 3);
});
