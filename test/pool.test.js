'use strict';
// procwire.Pool with real worker processes: handlers (CommonJS, ESM,
// named), crashes and kill -9, cancellation and timeouts (queued and
// running, and a worker that ignores its signal), a full queue, close()
// and destroy(), modules that cannot load, transfer both ways, growth and
// shrinking, and a 10k-task run with random cancellations and crashes in
// which every task settles exactly once and nothing is left behind.

const test = require('node:test');
const assert = require('node:assert');
const diagnosticsChannel = require('diagnostics_channel');
const fs = require('fs');
const os = require('os');
const path = require('path');
const procwire = require('..');
const { Pool, move } = require('../lib/pool');
const { fdSnapshot, fdsOpenedSince } = require('./helpers/fds');
const { sleep, until, withTimeout } = require('./helpers/wait');
const { poolMaker, rejects, alive } = require('./helpers/pool');

const WORKER = path.join(__dirname, 'fixtures', 'pool-worker.js');
const ESM_WORKER = path.join(__dirname, 'fixtures', 'pool-worker.mjs');
const THROWS = path.join(__dirname, 'fixtures', 'pool-throws.js');
const STEP = 20_000;


const pool = poolMaker({ minWorkers: 1, maxWorkers: 2 });

test('default and named handlers of a CommonJS module; errors keep their message and code', async (t) => {
  const p = pool(t);
  assert.strictEqual(procwire.Pool, Pool);
  assert.strictEqual(await p.run({ a: 2, b: 3 }), 5);
  assert.deepStrictEqual(await p.run({ x: [1, 2] }, { name: 'echo' }), { x: [1, 2] });
  const err = await rejects(p.run('no good', { name: 'fail' }), 'ERR_PROCWIRE_REMOTE_ERROR');
  assert.strictEqual(err.message, 'no good');
  assert.deepStrictEqual([err.remote.name, err.remote.code], ['RangeError', 'E_FIXTURE']);
  const missing = await rejects(p.run(1, { name: 'nope' }), 'ERR_PROCWIRE_POOL_NO_HANDLER');
  assert.match(missing.message, /nope/);
  // The pool's own `name` option picks the default handler.
  const named = pool(t, { name: 'echo' });
  assert.strictEqual(await named.run('same'), 'same');
});

test('an ES module worker: default export and a named async handler', async (t) => {
  const p = pool(t, { filename: ESM_WORKER });
  assert.strictEqual(await p.run({ a: 20, b: 22 }), 42);
  assert.strictEqual(await p.run('shout', { name: 'upper' }), 'SHOUT');
});

test('tasks given in one tick share a message each way, yet each fails alone: a task or result that cannot be sent, a worker exiting mid-batch', async (t) => {
  const p = pool(t, { maxWorkers: 1, concurrentTasksPerWorker: 16 });
  assert.strictEqual(await p.run({ a: 1, b: 1 }), 2);
  const outcome = (promise) => promise.then((v) => v, (e) => [e.code, e.remote ? e.remote.code : null]);
  const mixed = [
    p.run({ a: 1, b: 2 }),
    p.run({ fn() {} }, { name: 'echo' }),
    p.run(null, { name: 'unsendable' }),
    p.run({ a: 3, b: 4 }),
    p.run('x', { name: 'echo' }),
    p.run(1, { name: 'nope' }),
  ];
  assert.deepStrictEqual(await withTimeout(Promise.all(mixed.map(outcome)), STEP, 'the mixed batch'), [
    3,
    ['ERR_PROCWIRE_UNSERIALIZABLE', null],
    ['ERR_PROCWIRE_REMOTE_ERROR', 'ERR_PROCWIRE_UNSERIALIZABLE'],
    7,
    'x',
    ['ERR_PROCWIRE_POOL_NO_HANDLER', 'ERR_PROCWIRE_POOL_NO_HANDLER'],
  ]);
  // The answer given before the exit, in the same batch, still arrives;
  // the tasks the worker held when it died fail with its exit.
  const crashing = [p.run({ a: 5, b: 6 }), p.run(7, { name: 'crash' }), p.run({ a: 1, b: 1 })];
  const settled = await withTimeout(Promise.all(crashing.map(outcome)), STEP, 'the crashing batch');
  assert.deepStrictEqual(settled, [11, ['ERR_PROCWIRE_POOL_WORKER_EXITED', null], ['ERR_PROCWIRE_POOL_WORKER_EXITED', null]]);
  assert.strictEqual(await p.run({ a: 20, b: 22 }), 42);
  // The task that could not be sent counts as failed, as do the two the
  // worker rejected (a result it could not send, no such handler) and the
  // two its exit took.
  assert.strictEqual(p.stats().failed, 5);
});

test('tasks batched in one tick share no object in the worker, nor their results in the parent, as when sent one by one', async (t) => {
  const p = pool(t, { maxWorkers: 1, concurrentTasksPerWorker: 16 });
  await p.run({ a: 1, b: 1 });
  const batch = (make) => withTimeout(Promise.all(make()), STEP, 'a batch');
  // The same object, a shared part, the same Buffer (inline and big enough
  // for shared memory), Maps (which only V8's serializer writes) sharing a
  // value: each task counts from 0 in a copy of its own.
  const same = { n: 0 };
  assert.deepStrictEqual(await batch(() => [1, 2, 3].map(() => p.run(same, { name: 'bump' }))), [0, 0, 0]);
  const shared = { n: 0 };
  assert.deepStrictEqual(await batch(() => [1, 2].map((i) => p.run({ i, shared }, { name: 'bump' }))), [0, 0]);
  for (const size of [16, 256 * 1024]) {
    const buf = Buffer.alloc(size);
    assert.deepStrictEqual(await batch(() => [1, 2, 3].map(() => p.run(buf, { name: 'bump' }))), [0, 0, 0], `${size} B`);
    assert.strictEqual(buf[0], 0);
  }
  const value = { n: 0 };
  const maps = await batch(() => [1, 2].map(() => p.run(new Map([['x', value], ['y', value]]), { name: 'bump' })));
  // Within one task a shared part stays shared, as V8 writes it.
  assert.deepStrictEqual(maps, [[0, 1], [0, 1]]);
  assert.strictEqual(same.n + shared.n + value.n, 0);
  // Answers: one object of the worker's module, given to several tasks.
  for (const how of ['whole', 'inside', 'map']) {
    const results = await batch(() => [1, 2, 3].map(() => p.run(how, { name: 'kept' })));
    const kept = results.map((r) => (how === 'whole' ? r : how === 'inside' ? r.kept : r.get('kept')));
    assert.deepStrictEqual(kept[0], { n: 0, list: [1, 2] }, how);
    assert.strictEqual(new Set(kept).size, 3, `${how}: each result is its own`);
    assert.strictEqual(new Set(kept.map((k) => k.list)).size, 3, how);
  }
});

test('a batch carries at most 64 KiB of tasks or answers that are Buffers: bigger ones share no message', async (t) => {
  const p = pool(t, { maxWorkers: 1, concurrentTasksPerWorker: 32 });
  await p.run({ a: 1, b: 1 });
  // Each count is taken by a task of its own, one message each way.
  const messages = () => p.run(null, { name: 'messages' });
  const sent = async (make) => {
    const before = await messages();
    await withTimeout(Promise.all(Array.from({ length: 8 }, make)), STEP, 'eight tasks');
    const after = await messages();
    return [after.in - before.in - 1, after.out - before.out - 1];
  };
  assert.deepStrictEqual(await sent(() => p.run({ a: 1, b: 2 })), [1, 1]);
  const buf = Buffer.alloc(40 * 1024);
  // (Their answers go back as the batches are read: one message or more.)
  assert.strictEqual((await sent(() => p.run(buf, { name: 'describe' })))[0], 4);
  assert.deepStrictEqual(await sent(() => p.run(40 * 1024, { name: 'bytes' })), [1, 4]);
  assert.deepStrictEqual(await sent(() => p.run(Buffer.alloc(16), { name: 'describe' })), [1, 1]);
  // One of 64 KiB or more goes alone, after the batch given before it.
  const before = await messages();
  const big = Buffer.alloc(200 * 1024);
  await withTimeout(Promise.all([p.run(buf, { name: 'describe' }), p.run(big, { name: 'describe' }),
    p.run({ a: 1, b: 1 })]), STEP, 'three tasks');
  assert.strictEqual((await messages()).in - before.in - 1, 3);
  // A view whose byteLength getter throws is measured by the engine's own.
  class Odd extends Uint8Array {
    get byteLength() { throw new Error('not to be called'); }
  }
  assert.deepStrictEqual(await p.run(new Odd(4), { name: 'describe' }), { length: 4, first: 0, last: 0 });
});

test('tasks given to a worker whose channel closed before it exits are queued again, not lost in the closed channel', async (t) => {
  const p = pool(t, { maxWorkers: 1, concurrentTasksPerWorker: 8 });
  const marker = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-pool-')), 'closed');
  t.after(() => fs.rmSync(path.dirname(marker), { recursive: true, force: true }));
  const first = (await p.run(1, { name: 'pid' }));
  assert.strictEqual(await p.run({ marker, lingerMs: 1500 }, { name: 'hangup' }), 'bye');
  await until(() => fs.existsSync(marker), STEP, 'the worker closed its channel');
  // The parent reads the end of the channel soon after; the worker still runs.
  await sleep(300);
  const pids = await withTimeout(Promise.all([1, 2, 3].map(() => p.run(1, { name: 'pid' }))), STEP, 'the tasks given after the hang-up');
  assert.ok(pids.every((pid) => pid !== first), 'the tasks ran on a new worker');
  assert.deepStrictEqual([p.stats().failed, p.stats().cancelled], [0, 0]);
});

test('a task queued again from a worker whose channel closed goes to another worker with room at once', async (t) => {
  const p = pool(t, { minWorkers: 2, maxWorkers: 2, concurrentTasksPerWorker: 8 });
  const marker = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-pool-')), 'closed');
  t.after(() => fs.rmSync(path.dirname(marker), { recursive: true, force: true }));
  await until(() => p.workers.filter((w) => w.state === 'ready').length === 2, STEP, 'two ready workers');
  // Ties go to the first ready worker: it answers, hangs up and lingers
  // (destroy() at the test's end kills it); the next task goes to it first.
  const hung = await p.run(1, { name: 'pid' });
  assert.strictEqual(await p.run({ marker, lingerMs: 60_000 }, { name: 'hangup' }), 'bye');
  await until(() => fs.existsSync(marker), STEP, 'the worker closed its channel');
  await sleep(300);
  const pid = await withTimeout(p.run(1, { name: 'pid' }), STEP, 'the task given after the hang-up');
  assert.notStrictEqual(pid, hung);
  assert.ok(alive(hung), 'the task ran before the worker that hung up exited');
});

test('a task queued again because its worker\'s channel closed before it went out counts its wait once', async (t) => {
  // Node publishes every ChildProcess it spawns on the 'child_process'
  // diagnostics channel: the worker's is taken from there.
  const forked = [];
  const onSpawn = ({ process: child }) => forked.push(child);
  diagnosticsChannel.subscribe('child_process', onSpawn);
  t.after(() => diagnosticsChannel.unsubscribe('child_process', onSpawn));
  const p = pool(t, { maxWorkers: 1, concurrentTasksPerWorker: 8 });
  const pid = await p.run(null, { name: 'pid' });
  // The race (the worker's channel closes in the tick a task was given to
  // it) cannot be timed from outside: this side closes the channel itself
  // in that tick, before the task is written.
  const next = p.run(null, { name: 'pid' });
  const child = forked.find((c) => c.pid === pid);
  assert.ok(child && child.channel, 'the worker\'s ChildProcess');
  child.channel.destroy();
  const other = await withTimeout(next, STEP, 'the task queued again');
  assert.notStrictEqual(other, pid, 'it ran on a new worker');
  const { completed, failed, waitTime, runTime } = p.stats();
  assert.deepStrictEqual({ completed, failed }, { completed: 2, failed: 0 });
  assert.deepStrictEqual([waitTime.count, runTime.count], [2, 2]);
});

test('destroy() in the tick that gave tasks to a worker: they never leave the pool, and count as cancelled', async (t) => {
  const p = pool(t, { maxWorkers: 1, concurrentTasksPerWorker: 8 });
  assert.strictEqual(await p.run({ a: 1, b: 1 }), 2);
  // A crash would fail them as run; they must not reach the worker at all.
  const given = [p.run(3, { name: 'crash' }), p.run(4, { name: 'crash' })].map((promise) => rejects(promise, 'ERR_PROCWIRE_POOL_CLOSED'));
  await p.destroy();
  for (const err of await Promise.all(given)) assert.match(err.message, /before the task ran/);
  const { completed, failed, cancelled } = p.stats();
  assert.deepStrictEqual({ completed, failed, cancelled }, { completed: 1, failed: 0, cancelled: 2 });
});

test('a worker that crashes mid-task rejects exactly its task, with pid, exit code and stderr; it is replaced', async (t) => {
  const p = pool(t, { minWorkers: 2, maxWorkers: 2 });
  await until(() => p.workers.filter((w) => w.state === 'ready').length === 2, STEP, 'two ready workers');
  const slow = p.run(300, { name: 'sleep' });
  const crashing = p.run(3, { name: 'crash' });
  const err = await rejects(crashing, 'ERR_PROCWIRE_POOL_WORKER_EXITED');
  assert.strictEqual(err.exitCode, 3);
  assert.strictEqual(err.signalCode, null);
  assert.ok(Number.isInteger(err.pid));
  assert.match(err.stderr, new RegExp(`dying words of ${err.pid}`));
  assert.strictEqual(await slow, 300, 'the task on the other worker was not touched');
  await until(() => p.workers.length === 2 && p.workers.every((w) => w.pid !== err.pid && w.state === 'ready'),
    STEP, 'a replacement worker');
  assert.strictEqual(await p.run({ a: 1, b: 1 }), 2);
  assert.strictEqual(p.stats().failed, 1);
});

test('kill -9 of a busy worker rejects its running tasks only; queued tasks run on the replacement', async (t) => {
  const p = pool(t, { minWorkers: 1, maxWorkers: 1, concurrentTasksPerWorker: 2 });
  const [victim] = await Promise.all([p.run(null, { name: 'pid' })]);
  const running = [p.run(10_000, { name: 'sleep' }), p.run(10_000, { name: 'sleep' })];
  const queued = p.run({ a: 4, b: 5 });
  await until(() => p.stats().running === 2, STEP, 'two running tasks');
  process.kill(victim, 'SIGKILL');
  for (const task of running) {
    const err = await rejects(task, 'ERR_PROCWIRE_POOL_WORKER_EXITED');
    assert.strictEqual(err.signalCode, 'SIGKILL');
    assert.strictEqual(err.pid, victim);
  }
  assert.strictEqual(await withTimeout(queued, STEP, 'the queued task'), 9);
  assert.notStrictEqual(await p.run(null, { name: 'pid' }), victim);
});

test('abort and timeout: a queued task leaves the queue, a running one sees its signal', async (t) => {
  const p = pool(t, { minWorkers: 1, maxWorkers: 1 });
  const pid = await p.run(null, { name: 'pid' });
  const first = p.run(400, { name: 'sleep' });
  const controller = new AbortController();
  const queued = p.run({ a: 1, b: 1 }, { signal: controller.signal });
  const timedOutQueued = p.run({ a: 1, b: 1 }, { timeout: 50 });
  assert.strictEqual(p.queueSize, 2);
  controller.abort(new Error('changed my mind'));
  const err = await rejects(queued, 'ERR_PROCWIRE_TASK_ABORTED');
  assert.strictEqual(err.cause.message, 'changed my mind');
  await rejects(timedOutQueued, 'ERR_PROCWIRE_TASK_TIMEOUT');
  assert.strictEqual(p.queueSize, 0);
  assert.strictEqual(await first, 400);

  const running = new AbortController();
  const long = p.run(30_000, { name: 'sleep', signal: running.signal });
  await until(() => p.stats().running === 1, STEP, 'the task running');
  running.abort();
  await rejects(long, 'ERR_PROCWIRE_TASK_ABORTED');
  await rejects(p.run(30_000, { name: 'sleep', timeout: 100 }), 'ERR_PROCWIRE_TASK_TIMEOUT');
  // The handler stopped when told: the same worker goes on.
  await until(() => p.stats().running === 0, STEP, 'the aborted tasks to leave their worker');
  assert.strictEqual(await p.run(null, { name: 'pid' }), pid);
  await rejects(p.run(1, { signal: AbortSignal.abort() }), 'ERR_PROCWIRE_TASK_ABORTED');
});

test('a task aborted in the tick it was given to a worker is taken back unsent: its handler never runs, nor is its worker told', async (t) => {
  const p = pool(t, { maxWorkers: 1, concurrentTasksPerWorker: 4 });
  const pid = await p.run(null, { name: 'pid' });
  assert.strictEqual(await p.run(null, { name: 'runs' }), 0);
  // Both go to the ready worker at once and wait for the tick's end to be
  // written; the first is aborted meanwhile.
  const controller = new AbortController();
  const aborted = p.run(null, { name: 'count', signal: controller.signal });
  const kept = p.run(null, { name: 'count' });
  assert.strictEqual(p.stats().running, 2);
  controller.abort(new Error('changed my mind'));
  assert.strictEqual(p.stats().running, 1, 'the aborted task left its worker at once');
  const err = await rejects(aborted, 'ERR_PROCWIRE_TASK_ABORTED');
  assert.match(err.message, /before it was sent to its worker/);
  assert.strictEqual(err.cause.message, 'changed my mind');
  assert.strictEqual(await kept, 1);
  assert.strictEqual(await p.run(null, { name: 'runs' }), 1, 'the aborted task never ran');
  // Alone in the tick, and with the worker then free for a queued task.
  const one = new AbortController();
  const alone = p.run(null, { name: 'count', signal: one.signal });
  one.abort();
  await rejects(alone, 'ERR_PROCWIRE_TASK_ABORTED');
  assert.strictEqual(await p.run(null, { name: 'runs' }), 1);
  const { cancelled, failed, waitTime } = p.stats();
  assert.deepStrictEqual({ cancelled, failed }, { cancelled: 2, failed: 0 });
  assert.strictEqual(waitTime.count, 5, 'only tasks that went out count a wait');
  assert.strictEqual(await p.run(null, { name: 'pid' }), pid, 'the worker was not stopped or replaced');
});

test('a running task that ignores its abort is killed after abortGracePeriod and its worker replaced', async (t) => {
  const p = pool(t, { minWorkers: 1, maxWorkers: 1, abortGracePeriod: 200 });
  const pid = await p.run(null, { name: 'pid' });
  const stuck = p.run(60_000, { name: 'stuck', timeout: 100 });
  await rejects(stuck, 'ERR_PROCWIRE_TASK_TIMEOUT');
  await until(() => !alive(pid), STEP, 'the stuck worker to be killed');
  const next = await withTimeout(p.run(null, { name: 'pid' }), STEP, 'a task on the replacement');
  assert.notStrictEqual(next, pid);
});

test('a full queue refuses with ERR_PROCWIRE_POOL_QUEUE_FULL, and drain follows', async (t) => {
  const p = pool(t, { minWorkers: 1, maxWorkers: 1, maxQueue: 2 });
  await p.run(null, { name: 'pid' });
  const tasks = [p.run(200, { name: 'sleep' }), p.run({ a: 1, b: 0 }), p.run({ a: 2, b: 0 })];
  assert.strictEqual(p.needsDrain, true);
  await rejects(p.run({ a: 3, b: 0 }), 'ERR_PROCWIRE_POOL_QUEUE_FULL');
  const drained = new Promise((resolve) => p.once('drain', resolve));
  assert.deepStrictEqual(await Promise.all(tasks), [200, 1, 2]);
  await withTimeout(drained, STEP, "'drain'");
  assert.strictEqual(p.needsDrain, false);
});

test('close() finishes queued work, refuses new tasks, and leaves no worker behind', async (t) => {
  const before = fdSnapshot();
  const p = new Pool({ filename: WORKER, minWorkers: 2, maxWorkers: 2 });
  const pids = await Promise.all([p.run(null, { name: 'pid' }), p.run(null, { name: 'pid' })]);
  const work = Array.from({ length: 20 }, (_, i) => p.run({ a: i, b: 1 }));
  const closed = p.close();
  await rejects(p.run({ a: 1, b: 1 }), 'ERR_PROCWIRE_POOL_CLOSED');
  assert.deepStrictEqual(await Promise.all(work), Array.from({ length: 20 }, (_, i) => i + 1));
  await withTimeout(closed, STEP, 'close()');
  assert.deepStrictEqual(pids.filter(alive), []);
  assert.deepStrictEqual(p.workers, []);
  assert.deepStrictEqual(fdsOpenedSince(before), []);
});

test('destroy() rejects queued and running tasks with ERR_PROCWIRE_POOL_CLOSED and kills the workers', async (t) => {
  const p = new Pool({ filename: WORKER, minWorkers: 1, maxWorkers: 1 });
  const pid = await p.run(null, { name: 'pid' });
  const running = p.run(60_000, { name: 'stuck' });
  const queued = p.run({ a: 1, b: 1 });
  await until(() => p.stats().running === 1, STEP, 'the task running');
  const destroyed = p.destroy();
  await rejects(queued, 'ERR_PROCWIRE_POOL_CLOSED');
  await rejects(running, 'ERR_PROCWIRE_POOL_CLOSED');
  await withTimeout(destroyed, STEP, 'destroy()');
  assert.strictEqual(alive(pid), false);
});

test('a module that throws at load, a missing file and a syntax error fail run() without a respawn loop', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-pool-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const broken = path.join(dir, 'broken.js');
  fs.writeFileSync(broken, 'module.exports = (x) => { return x +;\n');
  const cases = [
    [THROWS, (cause) => assert.strictEqual(cause.code, 'E_REFUSED')],
    [path.join(dir, 'missing.js'), (cause) => assert.strictEqual(cause.code, 'MODULE_NOT_FOUND')],
    [broken, (cause) => assert.strictEqual(cause.name, 'SyntaxError')],
  ];
  for (const [filename, check] of cases) {
    const p = pool(t, { filename, minWorkers: 1, maxWorkers: 2 });
    const err = await rejects(p.run({ a: 1, b: 1 }), 'ERR_PROCWIRE_POOL_WORKER_START');
    check(err.cause);
    // No new worker is forked until the next run(), which tries once more.
    await sleep(200);
    assert.deepStrictEqual(p.workers, []);
    await rejects(p.run({ a: 1, b: 1 }), 'ERR_PROCWIRE_POOL_WORKER_START');
    await sleep(100);
    assert.deepStrictEqual(p.workers, []);
  }
});

test('transfer both ways: an alloc() buffer to the worker and a big result back through shared memory', async (t) => {
  const p = pool(t, { minWorkers: 1, maxWorkers: 1 });
  // With a worker ready the task is sent, and its buffer handed over, at once.
  await p.run(null, { name: 'pid' });
  const buf = procwire.alloc(4 << 20);
  buf.fill(7);
  buf[buf.length - 1] = 9;
  const sent = p.run(buf, { name: 'describe', transfer: [buf] });
  assert.strictEqual(buf.length, 0, 'handed over: detached here');
  assert.deepStrictEqual(await sent, { length: 4 << 20, first: 7, last: 9 });
  const back = await p.run({ size: 16 << 20, byte: 3 }, { name: 'fill' });
  assert.strictEqual(back.length, 16 << 20);
  assert.strictEqual(back[0] + back[back.length - 1], 6);
  // move() on the parent's side marks what run() transfers, as piscina's.
  const moved = procwire.alloc(1 << 20);
  const viaMove = p.run(move(moved), { name: 'describe' });
  assert.strictEqual(moved.length, 0);
  assert.strictEqual((await viaMove).length, 1 << 20);
});

test("run(task, { transferList }), piscina's name for transfer, hands the buffers over", async (t) => {
  const p = pool(t, { minWorkers: 1, maxWorkers: 1 });
  await p.run(null, { name: 'pid' });
  const buf = procwire.alloc(1 << 20);
  buf.fill(5);
  const sent = p.run(buf, { name: 'describe', transferList: [buf] });
  assert.strictEqual(buf.length, 0, 'handed over: detached here');
  assert.deepStrictEqual(await sent, { length: 1 << 20, first: 5, last: 5 });
  const plain = new ArrayBuffer(64);
  const copied = p.run(new Uint8Array(plain), { name: 'describe', transferList: [plain] });
  assert.strictEqual(plain.byteLength, 0, 'a buffer not from alloc() is copied once, and detached all the same');
  assert.deepStrictEqual(await copied, { length: 64, first: 0, last: 0 });
  const both = procwire.alloc(16);
  await rejects(p.run(both, { transfer: [both], transferList: [both] }), 'ERR_PROCWIRE_INVALID_ARG');
  await rejects(p.run(1, { transferList: 'x' }), 'ERR_PROCWIRE_INVALID_ARG');
  // A piscina user's MessagePort: refused under the name the caller used,
  // with why, and nothing else in the list is handed over.
  const { port1 } = new MessageChannel();
  t.after(() => port1.close());
  const kept = procwire.alloc(16);
  const err = await p.run(kept, { transferList: [kept, port1] }).then(() => null, (e) => e);
  assert.strictEqual(err?.code, 'ERR_PROCWIRE_INVALID_ARG');
  assert.match(err.message, /^options\.transferList holds only .*MessagePort/);
  assert.strictEqual(kept.length, 16);
  assert.strictEqual(both.length, 16, 'a refused run() hands nothing over');
});

test('`await using` closes the pool at the end of its scope, as piscina\'s: running tasks finish first', async (t) => {
  assert.strictEqual(typeof Pool.prototype[Symbol.asyncDispose], 'function');
  let p;
  let running;
  // `await using` is not syntax on Node 20 and 22: what it does at the
  // scope's end is to await this method.
  {
    p = pool(t, { minWorkers: 1, maxWorkers: 1 });
    running = p.run(300, { name: 'sleep' });
    await p[Symbol.asyncDispose]();
  }
  assert.strictEqual(await running, 300);
  assert.deepStrictEqual(p.workers, []);
  await rejects(p.run(1), 'ERR_PROCWIRE_POOL_CLOSED');
});

test('a task or a result that is a proxy runs no user code in the pool: revoked, it fails its own task only', async (t) => {
  const p = pool(t, { minWorkers: 1, maxWorkers: 1 });
  const asked = [];
  const watched = new Proxy({ a: 1, b: 2 }, {
    get(target, key, receiver) {
      asked.push(key);
      return Reflect.get(target, key, receiver);
    },
    getOwnPropertyDescriptor(target, key) {
      asked.push(key);
      return Reflect.getOwnPropertyDescriptor(target, key);
    },
  });
  const outcome = (promise) => promise.then((v) => v, (e) => e.code);
  const watchedRun = p.run(watched, { name: 'echo' });
  assert.ok(!asked.includes(Symbol.for('procwire.pool.moved')), 'run() asked the proxy whether it is a move() mark');
  await withTimeout(outcome(watchedRun), STEP, 'the proxy task');
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  let revokedRun;
  assert.doesNotThrow(() => { revokedRun = p.run(proxy, { name: 'echo' }); });
  assert.strictEqual(await withTimeout(outcome(revokedRun), STEP, 'the revoked task'), 'ERR_PROCWIRE_UNSERIALIZABLE');
  // A worker's result: its own task fails, the worker goes on.
  const pid = await p.run(null, { name: 'pid' });
  const trapped = await rejects(p.run(null, { name: 'trapped' }), 'ERR_PROCWIRE_REMOTE_ERROR');
  assert.doesNotMatch(trapped.message, /asked for/);
  const revoked = await rejects(p.run(null, { name: 'revoked' }), 'ERR_PROCWIRE_REMOTE_ERROR');
  assert.match(revoked.message, /revoked/);
  assert.strictEqual(await p.run(null, { name: 'pid' }), pid);
});

test('a handler that returns an odd thenable or throws an odd value fails or settles its own task once, as await would; the worker goes on', async (t) => {
  const p = pool(t, { minWorkers: 1, maxWorkers: 1, concurrentTasksPerWorker: 8 });
  const pid = await p.run(null, { name: 'pid' });
  // Running beside them the whole time: a worker crash would take it.
  const beside = p.run(300, { name: 'sleep' });
  const thrown = await rejects(p.run(null, { name: 'thenThrows' }), 'ERR_PROCWIRE_REMOTE_ERROR');
  assert.match(thrown.message, /then threw/);
  assert.strictEqual(await p.run(null, { name: 'thenTwice' }), 'first');
  for (const name of ['throwsBare', 'throwsRevoked']) {
    const err = await rejects(p.run(null, { name }), 'ERR_PROCWIRE_REMOTE_ERROR');
    assert.match(err.message, /cannot be described/, name);
  }
  await withTimeout(beside, STEP, 'the task beside them');
  assert.strictEqual(await p.run(null, { name: 'pid' }), pid);
  const { completed, failed } = p.stats();
  assert.deepStrictEqual({ completed, failed }, { completed: 4, failed: 3 });
});

test('minWorkers are warm, the pool grows to maxWorkers under load and shrinks after idleTimeout', async (t) => {
  const p = pool(t, { minWorkers: 1, maxWorkers: 3, idleTimeout: 150 });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-pool-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const gate = path.join(dir, 'gate');
  await until(() => p.workers.some((w) => w.state === 'ready'), STEP, 'the warm worker');
  // The tasks wait for the gate: were they plain sleeps, a worker that took
  // longer to start than one of them ran would find the queue empty, and
  // the pool would rightly not grow to three.
  const tasks = Array.from({ length: 3 }, () => p.run({ gate, ms: 600 }, { name: 'gated' }));
  await until(() => p.workers.length === 3, STEP, 'growth to maxWorkers');
  fs.writeFileSync(gate, '');
  await withTimeout(Promise.all(tasks), STEP, 'the gated tasks');
  await until(() => p.workers.length === 1, STEP, 'shrinking back to minWorkers');
  const s = p.stats();
  assert.strictEqual(s.completed, 3);
  assert.ok(s.runTime.p50 >= 500 && s.runTime.p99 >= s.runTime.p50, JSON.stringify(s.runTime));
  assert.ok(s.waitTime.p999 >= 0 && s.utilization > 0 && s.utilization <= 1);
});

test('bad options and arguments get coded errors', async (t) => {
  const bad = [
    {}, { filename: '' }, { filename: WORKER, minWorkers: 3, maxWorkers: 2 }, { filename: WORKER, maxWorkers: 0 },
    { filename: WORKER, maxQueue: -1 }, { filename: WORKER, serialization: 'xml' },
    { filename: WORKER, resourceLimits: { maxOldGenerationSizeMb: 0 } }, { filename: WORKER, resourceLimits: { heap: 1 } },
    { filename: WORKER, execArgv: '--x' }, { filename: WORKER, idleTimeout: -5 },
    { filename: WORKER, execPath: '' }, { filename: WORKER, execPath: 7 }, { filename: WORKER, execPath: 'node\0x' },
  ];
  for (const options of bad) {
    assert.throws(() => new Pool(options), { code: 'ERR_PROCWIRE_INVALID_ARG' }, JSON.stringify(options));
  }
  assert.throws(() => new Pool(), { code: 'ERR_PROCWIRE_INVALID_ARG' });
  const p = pool(t, { minWorkers: 0, resourceLimits: { maxOldGenerationSizeMb: 64 } });
  await rejects(p.run(1, { timeout: -1 }), 'ERR_PROCWIRE_INVALID_ARG');
  await rejects(p.run(1, { signal: {} }), 'ERR_PROCWIRE_INVALID_ARG');
  await rejects(p.run(1, null), 'ERR_PROCWIRE_INVALID_ARG');
  await rejects(p.run(() => 1), 'ERR_PROCWIRE_UNSERIALIZABLE');
  assert.strictEqual(await p.run({ a: 1, b: 2 }), 3);
});

test('10k tasks with random cancellations and crashes: each settles exactly once, nothing is left behind', async (t) => {
  const before = fdSnapshot();
  const p = new Pool({ filename: WORKER, minWorkers: 2, maxWorkers: 3, concurrentTasksPerWorker: 8, maxQueue: 20_000 });
  const seen = new Set();
  let seed = 42;
  const random = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const settled = new Array(10_000).fill(0);
  const outcomes = {};
  const tasks = [];
  for (let i = 0; i < 10_000; i++) {
    const r = random();
    const op = r < 0.002 ? 'crash' : r < 0.1 ? 'sleep' : 'value';
    const options = { name: 'mixed' };
    let controller;
    if (random() < 0.1) {
      controller = new AbortController();
      options.signal = controller.signal;
      setTimeout(() => controller.abort(), Math.floor(random() * 30));
    } else if (random() < 0.05) {
      options.timeout = 1 + Math.floor(random() * 20);
    }
    tasks.push(p.run({ op, ms: Math.floor(random() * 10), value: i }, options).then((v) => {
      assert.strictEqual(v, i);
      return 'ok';
    }, (err) => err.code).then((outcome) => {
      settled[i]++;
      outcomes[outcome] = (outcomes[outcome] || 0) + 1;
    }));
  }
  await withTimeout(Promise.all(tasks), 45_000, 'every task to settle');
  assert.deepStrictEqual(settled.filter((n) => n !== 1), [], 'each task settled exactly once');
  assert.ok(outcomes.ok > 8000, JSON.stringify(outcomes));
  assert.ok(outcomes.ERR_PROCWIRE_POOL_WORKER_EXITED >= 1, JSON.stringify(outcomes));
  assert.deepStrictEqual(Object.keys(outcomes).filter((c) => c !== 'ok' && !/^ERR_PROCWIRE_(POOL_WORKER_EXITED|TASK_ABORTED|TASK_TIMEOUT)$/.test(c)), []);
  const s = p.stats();
  assert.strictEqual(s.queued, 0);
  for (const w of p.workers) seen.add(w.pid);
  await withTimeout(p.close(), STEP, 'close()');
  assert.deepStrictEqual([...seen].filter(alive), [], 'no worker left');
  await until(() => fdsOpenedSince(before).length === 0, STEP, `descriptors to close: ${JSON.stringify(fdsOpenedSince(before))}`);
});

test('execPath: the workers run the Node binary it names', async (t) => {
  // A wrapper that notes each start, its pid (exec keeps it) and its
  // arguments, and then runs this process's Node: the workers must have been
  // started through it.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-pool-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const starts = path.join(dir, 'starts');
  const wrapper = path.join(dir, 'node-wrapper');
  fs.writeFileSync(wrapper, `#!/bin/sh\necho "$$ $*" >> '${starts}'\nexec '${process.execPath}' "$@"\n`, { mode: 0o755 });
  const p = pool(t, { minWorkers: 2, maxWorkers: 2, execPath: wrapper });
  await until(() => p.workers.filter((w) => w.state === 'ready').length === 2, STEP, 'two ready workers');
  assert.strictEqual(await p.run({ a: 2, b: 3 }), 5);
  const lines = fs.readFileSync(starts, 'utf8').trim().split('\n');
  assert.strictEqual(lines.length, 2, 'one start through the wrapper per worker');
  for (const line of lines) assert.ok(line.includes(WORKER), line);
  const started = lines.map((line) => Number(line.split(' ')[0])).sort();
  assert.deepStrictEqual(started, p.workers.map((w) => w.pid).sort());
});

test('a pool made by `node -e` code forks workers that run their module, not that code again', () => {
  // The guard makes a worker that would run the -e code again exit at
  // once (its start then fails) instead of making pools of its own.
  const code = `
    if (process.env.POOL_TEST_NESTED) process.exit(0);
    process.env.POOL_TEST_NESTED = '1';
    const { Pool } = require(${JSON.stringify(path.join(__dirname, '..'))});
    const pool = new Pool({ filename: ${JSON.stringify(WORKER)}, minWorkers: 1, maxWorkers: 1 });
    pool.run({ a: 1, b: 2 }).then((v) => console.log('result', v), (e) => console.log('error', e.code))
      .finally(() => pool.close());`;
  const r = require('child_process').spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', timeout: STEP });
  assert.strictEqual(r.stdout.trim(), 'result 3', r.stderr);
  assert.strictEqual(r.status, 0);
});
