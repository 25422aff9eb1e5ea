'use strict';
// tinypool with its child_process runtime (Vitest 1-3's pool): an ES module
// that imports { fork } from 'node:child_process', so this also runs the
// hook's ES module path.

const test = require('node:test');
const assert = require('node:assert');
const path = require('path');
const url = require('url');
const { toolPath, REGISTERED, assertGone } = require('./helpers');

const FILE = path.join(__dirname, 'workers', 'tinypool-worker.js');
let Tinypool;

test.before(async () => {
  const entry = require(path.join(toolPath('tinypool'), 'package.json')).exports['.'];
  const file = typeof entry === 'string' ? entry : entry.default || entry.import;
  ({ Tinypool } = await import(url.pathToFileURL(path.join(toolPath('tinypool'), file)).href));
});

function pool(t, options = {}) {
  const p = new Tinypool({ filename: FILE, runtime: 'child_process', minThreads: 2, maxThreads: 2, ...options });
  t.after(() => p.destroy());
  return p;
}

test('the workers are forked through procwire exactly when the hook is loaded', { timeout: 60_000 }, async (t) => {
  const p = pool(t);
  const seen = await Promise.all([...Array(8)].map(() => p.run([], { name: 'whoami' })));
  assert.ok(seen.every((w) => w.procwire === REGISTERED), JSON.stringify(seen));
});

test('500 small tasks over 2 workers return the right results', { timeout: 60_000 }, async (t) => {
  const p = pool(t);
  const results = await Promise.all([...Array(500)].map((_, i) => p.run([i, 1], { name: 'add' })));
  assert.deepStrictEqual(results, [...Array(500)].map((_, i) => i + 1));
});

test('64 KiB and 8 MiB arguments reach the worker whole', { timeout: 60_000 }, async (t) => {
  const p = pool(t);
  for (const size of [64 * 1024, 8 * 1024 * 1024]) {
    const text = `${'a'.repeat(size - 2)}yz`;
    assert.deepStrictEqual(await p.run([text], { name: 'echo' }), { length: size, head: 'a'.repeat(16), tail: `${'a'.repeat(14)}yz` });
  }
});

test('a task that throws rejects with its message; the pool goes on', { timeout: 60_000 }, async (t) => {
  const p = pool(t);
  // The child_process runtime rejects with the error's fields as json
  // carried them (a plain object), not an Error.
  await assert.rejects(p.run(['nope'], { name: 'fail' }), (err) => err.message === 'nope');
  assert.strictEqual(await p.run([2, 2], { name: 'add' }), 4);
});

test('a worker that dies mid-task rejects that task and the pool goes on', { timeout: 60_000 }, async (t) => {
  const p = pool(t);
  await assert.rejects(p.run([], { name: 'crash' }));
  assert.strictEqual(await p.run([20, 22], { name: 'add' }), 42);
});

test('isolateWorkers: every task gets a fresh worker process', { timeout: 60_000 }, async (t) => {
  const p = pool(t, { isolateWorkers: true, minThreads: 1, maxThreads: 1 });
  const first = await p.run([], { name: 'whoami' });
  const second = await p.run([], { name: 'whoami' });
  assert.notStrictEqual(first.pid, second.pid);
});

test('destroy() stops the workers', { timeout: 60_000 }, async () => {
  const p = new Tinypool({ filename: FILE, runtime: 'child_process', minThreads: 1, maxThreads: 1 });
  const { pid } = await p.run([], { name: 'whoami' });
  await p.destroy();
  await assertGone(pid, 'destroy()');
});
