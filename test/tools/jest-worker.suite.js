'use strict';
// jest-worker (jest's and Next.js's worker pool), used as they use it: a
// Worker over a module, child processes (not threads), calls by name.

const test = require('node:test');
const assert = require('node:assert');
const path = require('path');
const { tool, REGISTERED, assertGone } = require('./helpers');

const { Worker } = tool('jest-worker');
const TASKS = path.join(__dirname, 'workers', 'tasks.js');

function pool(t, options = {}) {
  const worker = new Worker(TASKS, { numWorkers: 2, enableWorkerThreads: false, exposedMethods: ['add', 'echo', 'fail', 'crash', 'whoami'], ...options });
  t.after(() => worker.end());
  return worker;
}

test('the workers are forked through procwire exactly when the hook is loaded', { timeout: 60_000 }, async (t) => {
  const worker = pool(t);
  const seen = await Promise.all([...Array(8)].map(() => worker.whoami()));
  assert.ok(seen.every((w) => w.procwire === REGISTERED), JSON.stringify(seen));
});

test('500 small calls over 2 workers return the right results', { timeout: 60_000 }, async (t) => {
  const worker = pool(t);
  const results = await Promise.all([...Array(500)].map((_, i) => worker.add(i, 1)));
  assert.deepStrictEqual(results, [...Array(500)].map((_, i) => i + 1));
});

test('64 KiB and 8 MiB arguments reach the worker whole', { timeout: 60_000 }, async (t) => {
  const worker = pool(t);
  for (const size of [64 * 1024, 8 * 1024 * 1024]) {
    const text = `${'a'.repeat(size - 2)}yz`;
    assert.deepStrictEqual(await worker.echo(text), { length: size, head: 'a'.repeat(16), tail: `${'a'.repeat(14)}yz` });
  }
});

test('a task that throws rejects with its message; the worker goes on', { timeout: 60_000 }, async (t) => {
  const worker = pool(t);
  await assert.rejects(worker.fail('nope'), /nope/);
  assert.strictEqual(await worker.add(2, 2), 4);
});

test('a worker that dies mid-task is replaced and the call rejects after the retries', { timeout: 60_000 }, async (t) => {
  const worker = pool(t, { maxRetries: 1 });
  await assert.rejects(worker.crash());
  assert.strictEqual(await worker.add(20, 22), 42);
});

test('end() stops the workers', { timeout: 60_000 }, async () => {
  const worker = new Worker(TASKS, { numWorkers: 2, enableWorkerThreads: false, exposedMethods: ['whoami'] });
  const { pid } = await worker.whoami();
  const result = await worker.end();
  assert.strictEqual(result.forceExited, false);
  await assertGone(pid, 'end()');
});
