'use strict';
// Which handler a pool task runs, with real worker processes, checked
// against piscina's documented `name`: the pool's name picks the handler
// of tasks that give none, run(task, { name: 'default' }) is the module's
// default export whatever the pool's name, and a missing handler is
// reported by the name that was asked for.

const test = require('node:test');
const assert = require('node:assert');
const path = require('path');
const { withTimeout } = require('./helpers/wait');
const { poolMaker, rejects, WORKER } = require('./helpers/pool');

const STEP = 20_000;

const pool = poolMaker({ minWorkers: 1, maxWorkers: 1 });

test("a pool named after one handler still runs the module's default export for run(task, { name: 'default' })", async (t) => {
  const p = pool(t, { name: 'echo' });
  assert.deepStrictEqual(await p.run({ a: 1, b: 2 }), { a: 1, b: 2 }, 'no name: the pool\'s');
  assert.strictEqual(await p.run({ a: 1, b: 2 }, { name: 'default' }), 3, "'default': the default export");
  assert.strictEqual(await p.run(null, { name: 'echo' }), null);
  // Several in one tick (one message to the worker) pick theirs each.
  const mixed = await withTimeout(Promise.all([
    p.run({ a: 2, b: 2 }), p.run({ a: 2, b: 2 }, { name: 'default' }), p.run(7, { name: 'echo' }),
  ]), STEP, 'a batch of mixed names');
  assert.deepStrictEqual(mixed, [{ a: 2, b: 2 }, 4, 7]);
  assert.strictEqual(p.options.name, 'echo');
});

test('a tick of many tasks, for one handler and then for several, runs each with its own handler, in a few batched messages', async (t) => {
  const p = pool(t, { concurrentTasksPerWorker: 512 });
  await p.run({ a: 0, b: 0 });
  const before = await p.run(null, { name: 'messages' });
  const runs = [];
  const expected = [];
  const add = (run, value) => {
    runs.push(run);
    expected.push(value);
  };
  // More for the default handler than a batch holds, then names mixed,
  // then many for one named handler: batches of both forms (one name sent
  // once, or a name per task), full ones and the rest.
  for (let i = 0; i < 50; i++) add(p.run({ a: i, b: 1 }), i + 1);
  for (let i = 0; i < 60; i++) add(i % 2 === 0 ? p.run({ a: i, b: 2 }) : p.run([i], { name: 'echo' }), i % 2 === 0 ? i + 2 : [i]);
  for (let i = 0; i < 130; i++) add(p.run({ s: i }, { name: 'echo' }), { s: i });
  assert.deepStrictEqual(await withTimeout(Promise.all(runs), STEP, 'the batches'), expected);
  const after = await p.run(null, { name: 'messages' });
  assert.ok(after.in - before.in < 12, `240 tasks in ${after.in - before.in} messages`);
});

test('a pool named after a handler its module does not export: ERR_PROCWIRE_POOL_NO_HANDLER names it', async (t) => {
  const p = pool(t, { name: 'nope' });
  const err = await rejects(p.run(1), 'ERR_PROCWIRE_POOL_NO_HANDLER');
  assert.match(err.message, /"nope"/);
  assert.strictEqual(err.taskName, 'nope');
  // The module loaded: its other handlers run.
  assert.strictEqual(await p.run({ a: 1, b: 1 }, { name: 'default' }), 2);
});

test("run(task, { filename }) of another module is refused, not run with the pool's module", async (t) => {
  const p = pool(t, {});
  const other = path.join(__dirname, 'fixtures', 'pool-worker.mjs');
  const err = await rejects(p.run({ a: 1, b: 2 }, { filename: other }), 'ERR_PROCWIRE_INVALID_ARG');
  assert.match(err.message, /one module/);
  // Its own module, by path or file: URL, is what it runs anyway.
  assert.strictEqual(await p.run({ a: 1, b: 2 }, { filename: WORKER }), 3);
  assert.strictEqual(await p.run({ a: 1, b: 2 }, { filename: require('url').pathToFileURL(WORKER).href }), 3);
});

test('a module that throws at load while it holds a handle open fails run() with ERR_PROCWIRE_POOL_WORKER_START, not never', async (t) => {
  const p = pool(t, { filename: path.join(__dirname, 'fixtures', 'pool-throws-lingering.js') });
  const err = await rejects(p.run(1), 'ERR_PROCWIRE_POOL_WORKER_START');
  assert.strictEqual(err.cause.code, 'E_CONFIG');
  assert.ok(Number.isInteger(err.pid));
  assert.deepStrictEqual(p.workers, [], 'its worker is gone');
});
