'use strict';
// workerpool (mocha --parallel's pool), with process workers as mocha uses
// it: a script offering methods, exec() by name, terminate().

const test = require('node:test');
const assert = require('node:assert');
const path = require('path');
const { tool, REGISTERED, assertGone } = require('./helpers');

const workerpool = tool('workerpool');
const SCRIPT = path.join(__dirname, 'workers', 'workerpool-worker.js');

function pool(t) {
  const p = workerpool.pool(SCRIPT, { workerType: 'process', maxWorkers: 2 });
  t.after(() => p.terminate());
  return p;
}

test('the workers are forked through procwire exactly when the hook is loaded', { timeout: 60_000 }, async (t) => {
  const p = pool(t);
  const seen = await Promise.all([...Array(8)].map(() => p.exec('whoami', [])));
  assert.ok(seen.every((w) => w.procwire === REGISTERED), JSON.stringify(seen));
});

test('500 small tasks over 2 workers return the right results', { timeout: 60_000 }, async (t) => {
  const p = pool(t);
  const results = await Promise.all([...Array(500)].map((_, i) => p.exec('add', [i, 1])));
  assert.deepStrictEqual(results, [...Array(500)].map((_, i) => i + 1));
});

test('64 KiB and 8 MiB arguments reach the worker whole', { timeout: 60_000 }, async (t) => {
  const p = pool(t);
  for (const size of [64 * 1024, 8 * 1024 * 1024]) {
    const text = `${'a'.repeat(size - 2)}yz`;
    assert.deepStrictEqual(await p.exec('echo', [text]), { length: size, head: 'a'.repeat(16), tail: `${'a'.repeat(14)}yz` });
  }
});

test('a task that throws rejects with its message; the pool goes on', { timeout: 60_000 }, async (t) => {
  const p = pool(t);
  await assert.rejects(p.exec('fail', ['nope']), /nope/);
  assert.strictEqual(await p.exec('add', [2, 2]), 4);
});

test('a worker that dies mid-task rejects that task and is replaced', { timeout: 60_000 }, async (t) => {
  const p = pool(t);
  await assert.rejects(p.exec('crash', []), /exit|terminated/i);
  assert.strictEqual(await p.exec('add', [20, 22]), 42);
});

test('a task past its timeout is cancelled and its worker killed', { timeout: 60_000 }, async (t) => {
  const p = pool(t);
  await assert.rejects(p.exec('sleep', [30_000]).timeout(200), /timed out/i);
  assert.strictEqual(await p.exec('add', [1, 1]), 2);
});

test('terminate() stops the workers', { timeout: 60_000 }, async () => {
  const p = workerpool.pool(SCRIPT, { workerType: 'process', maxWorkers: 2 });
  const { pid } = await p.exec('whoami', []);
  await p.terminate();
  await assertGone(pid, 'terminate()');
});
