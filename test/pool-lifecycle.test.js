'use strict';
// procwire.Pool's capacity over its workers' lives, with real processes:
// workers it let go or that hung up do not hold their slot until they exit,
// maxQueue counts the room of workers not ready yet as piscina does, and
// 'drain' follows needsDrain.

const test = require('node:test');
const assert = require('node:assert');
const { spawn } = require('child_process');
const { once } = require('events');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { until, withTimeout } = require('./helpers/wait');
const { poolMaker, rejects, alive } = require('./helpers/pool');
// Alive and not a zombie: a worker whose parent is gone is reparented, and
// its new parent may reap it late.
const { running } = require('./helpers/pids');

const LINGERING = path.join(__dirname, 'fixtures', 'pool-lingering.js');
const STEP = 20_000;


const pool = poolMaker({ minWorkers: 1, maxWorkers: 1 });

test('a worker that closed its channel and lingers is replaced at once, not when it exits, and is killed later', async (t) => {
  const p = pool(t, { maxWorkers: 1, concurrentTasksPerWorker: 4 });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-pool-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const marker = path.join(dir, 'closed');
  const hung = await p.run(null, { name: 'pid' });
  // It lingers a minute: only a replacement can run the next tasks soon.
  assert.strictEqual(await p.run({ marker, lingerMs: 60_000 }, { name: 'hangup' }), 'bye');
  await until(() => fs.existsSync(marker), STEP, 'the worker closed its channel');
  // Tasks written before the pool reads the end of the channel are lost with
  // the worker, as at a crash; once it has read it, the worker is let go.
  await until(() => p.workers.some((w) => w.pid === hung && w.state === 'retiring'), STEP, 'the pool to let it go');
  const pids = await withTimeout(Promise.all([1, 2, 3].map(() => p.run(null, { name: 'pid' }))), STEP,
    'the tasks given after the hang-up');
  assert.ok(pids.every((pid) => pid !== hung), 'the tasks ran on a new worker');
  assert.ok(alive(hung), 'they ran before the worker that hung up exited');
  // A worker let go is killed if it does not exit by itself (after 5 s).
  await until(() => !alive(hung), STEP, 'the worker that hung up to be killed');
  await until(() => p.workers.length === 1, STEP, 'the pool to forget it');
  assert.deepStrictEqual([p.stats().failed, p.stats().cancelled], [0, 0]);
});

test('a task running on a worker that closes its channel is rejected with ERR_PROCWIRE_POOL_WORKER_EXITED, and a replacement runs the next', async (t) => {
  const p = pool(t, { filename: LINGERING, maxWorkers: 1 });
  const hung = await p.run(null);
  const running = p.run(null, { name: 'hangupRunning' });
  // Queued behind it: it must not wait for the hung-up worker's end.
  const next = p.run(null);
  const pid = await withTimeout(next, STEP, 'the task queued behind the hung-up one');
  assert.notStrictEqual(pid, hung);
  // Until the worker that hung up is killed (after 5 s) it still holds it.
  assert.strictEqual(p.stats().running, 1);
  const err = await rejects(running, 'ERR_PROCWIRE_POOL_WORKER_EXITED');
  assert.strictEqual(err.pid, hung);
  assert.strictEqual(err.signalCode, 'SIGKILL');
  assert.match(err.message, /closed its channel/);
  assert.deepStrictEqual([p.stats().completed, p.stats().failed], [2, 1]);
});

test('a worker let go after idleTimeout that lingers does not hold back the next task until it exits', async (t) => {
  const p = pool(t, { filename: LINGERING, minWorkers: 0, maxWorkers: 1, idleTimeout: 50 });
  const first = await p.run(null);
  await until(() => p.workers.some((w) => w.pid === first && w.state === 'retiring'), STEP, 'the idle worker let go');
  const second = await withTimeout(p.run(null), STEP, 'a task while the idle worker is leaving');
  assert.notStrictEqual(second, first);
  assert.ok(alive(first), 'the task ran before the idle worker was killed');
  await until(() => !alive(first), STEP, 'the lingering idle worker to be killed');
});

test('maxQueue counts the room of workers not ready yet, as piscina does: maxQueue 0 takes tasks on a cold pool', async (t) => {
  const p = pool(t, { minWorkers: 1, maxWorkers: 2, concurrentTasksPerWorker: 2, maxQueue: 0 });
  // Nothing is ready yet: the tasks wait for the workers' room (2 x 2).
  const tasks = [1, 2, 3, 4].map((a) => p.run({ a, b: 0 }));
  assert.strictEqual(p.needsDrain, true);
  const err = await rejects(p.run({ a: 5, b: 0 }), 'ERR_PROCWIRE_POOL_QUEUE_FULL');
  assert.match(err.message, /maxQueue 0/);
  assert.deepStrictEqual(await withTimeout(Promise.all(tasks), STEP, 'the tasks taken'), [1, 2, 3, 4]);
  await until(() => p.workers.filter((w) => w.state === 'ready').length === 2, STEP, 'two ready workers');
  assert.strictEqual(p.needsDrain, false, 'an idle pool with maxQueue 0 has room');
  assert.strictEqual(await p.run({ a: 6, b: 0 }), 6);
});

test("'drain' follows needsDrain when a worker frees room, also with nothing queued", async (t) => {
  const p = pool(t, { minWorkers: 1, maxWorkers: 1, maxQueue: 0 });
  await until(() => p.workers.some((w) => w.state === 'ready'), STEP, 'the worker ready');
  assert.strictEqual(p.needsDrain, false, 'an idle worker has room');
  const busy = p.run(300, { name: 'sleep' });
  assert.strictEqual(p.queueSize, 0);
  assert.strictEqual(p.needsDrain, true, 'the only worker is busy and there is no queue');
  await rejects(p.run({ a: 1, b: 1 }), 'ERR_PROCWIRE_POOL_QUEUE_FULL');
  await withTimeout(once(p, 'drain'), STEP, "'drain'");
  assert.strictEqual(p.needsDrain, false);
  assert.strictEqual(await busy, 300);
  assert.strictEqual(await p.run({ a: 1, b: 1 }), 2);
});

test('a program that ends without closing its pools leaves no worker behind, even one let go whose module holds a handle', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const parent = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'pool-exit-parent.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  parent.stdout.on('data', (chunk) => { out += chunk; });
  const pids = [];
  t.after(() => {
    parent.kill('SIGKILL');
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  const [code] = await withTimeout(once(parent, 'exit'), STEP, 'the program to end by itself');
  pids.push(...JSON.parse(out));
  assert.strictEqual(code, 0);
  assert.strictEqual(pids.length, 2);
  await until(() => !pids.some(running), STEP, 'the workers of the program to end with it');
});

test('a program killed with SIGKILL (it cannot kill its workers) leaves no worker behind: each leaves once its channel has closed', async (t) => {
  const parent = spawn(process.execPath, [path.join(__dirname, 'fixtures', 'pool-exit-parent.js'), 'stay'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  parent.stdout.on('data', (chunk) => { out += chunk; });
  const pids = [];
  t.after(() => {
    parent.kill('SIGKILL');
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  await until(() => out.endsWith('\n'), STEP, 'the program to print its workers');
  pids.push(...JSON.parse(out));
  assert.strictEqual(pids.length, 2);
  parent.kill('SIGKILL');
  await until(() => !pids.some(running), STEP, 'the workers of the killed program to leave');
});

test('close({ force: true }) rejects the queued tasks, as piscina\'s, and lets the running ones finish', async (t) => {
  const p = pool(t, { minWorkers: 1, maxWorkers: 1 });
  await p.run(null, { name: 'pid' });
  const running = p.run(300, { name: 'sleep' });
  const queued = [p.run({ a: 1, b: 1 }), p.run({ a: 2, b: 2 })];
  assert.strictEqual(p.queueSize, 2);
  await rejects(p.close({ force: 'yes' }), 'ERR_PROCWIRE_INVALID_ARG');
  const closed = p.close({ force: true });
  for (const task of queued) assert.match((await rejects(task, 'ERR_PROCWIRE_POOL_CLOSED')).message, /closed before the task ran/);
  assert.strictEqual(await running, 300);
  await withTimeout(closed, STEP, 'close()');
  const { completed, cancelled, failed } = p.stats();
  assert.deepStrictEqual({ completed, cancelled, failed }, { completed: 2, cancelled: 2, failed: 0 });
  assert.deepStrictEqual(p.workers, []);
});

test('a worker asked to stop a task takes no new one until it has: a task given meanwhile is not lost with it', async (t) => {
  const p = pool(t, { minWorkers: 1, maxWorkers: 1, concurrentTasksPerWorker: 2, abortGracePeriod: 300 });
  const stuckPid = await p.run(null, { name: 'pid' });
  // Busy in a loop, it reads nothing: neither its abort nor another task.
  await rejects(p.run(60_000, { name: 'stuck', timeout: 50 }), 'ERR_PROCWIRE_TASK_TIMEOUT');
  const next = p.run(null, { name: 'pid' });
  assert.strictEqual(p.queueSize, 1, 'it waits for a worker that is not stopping a task');
  const pid = await withTimeout(next, STEP, 'the task given while the worker was stopping one');
  assert.notStrictEqual(pid, stuckPid, 'it ran on the replacement of the killed worker');
  assert.deepStrictEqual([p.stats().failed, p.stats().cancelled], [0, 1]);
});

test('workers that die one after another before finishing anything stop being replaced, hang-up or not', async (t) => {
  const p = pool(t, { filename: path.join(__dirname, 'fixtures', 'pool-dies.js'), minWorkers: 1, maxWorkers: 1 });
  const seen = new Set();
  // Each dies soon after it is ready; the pool gives up after five in a row.
  await until(() => {
    for (const w of p.workers) seen.add(w.pid);
    return seen.size > 0 && p.workers.length === 0;
  }, STEP, 'the pool to stop replacing them', 1);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.deepStrictEqual(p.workers, [], 'no more forks');
  assert.ok(seen.size <= 5, `${seen.size} workers forked`);
});

test('workers that hang up one after another before finishing anything, and linger, stop being replaced', async (t) => {
  const p = pool(t, { filename: path.join(__dirname, 'fixtures', 'pool-hangs-up.js'), minWorkers: 1, maxWorkers: 1 });
  const seen = new Set();
  const look = () => {
    for (const w of p.workers) seen.add(w.pid);
  };
  await until(() => {
    look();
    return seen.size >= 5;
  }, STEP, 'five workers to be forked', 1);
  // They linger (killed 5 s after they hang up): no sixth comes meanwhile.
  const end = Date.now() + 1500;
  while (Date.now() < end) {
    look();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.strictEqual(seen.size, 5, `${seen.size} workers forked`);
});

test('after a crash streak stopped replacing workers, the first task that completes brings the pool back to minWorkers', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-pool-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const bad = path.join(dir, 'bad');
  fs.writeFileSync(bad, '');
  const p = pool(t, {
    filename: path.join(__dirname, 'fixtures', 'pool-dies-first.js'), minWorkers: 2, maxWorkers: 2,
    env: { ...process.env, POOL_TEST_BAD: bad },
  });
  let forked = false;
  await until(() => {
    forked = forked || p.workers.length > 0;
    return forked && p.workers.length === 0;
  }, STEP, 'the pool to stop replacing them', 1);
  // From now on the workers work: a task completes, and the streak is over.
  fs.rmSync(bad);
  assert.ok(Number.isInteger(await withTimeout(p.run(null), STEP, 'a task on a good worker')));
  await until(() => p.workers.filter((w) => w.state === 'ready').length === 2, STEP, 'minWorkers ready again');
});

const FAILS_AT_LOAD = path.join(__dirname, 'fixtures', 'pool-fails-at-load.js');

// Two ready workers, the pids seen so far, and a file the module refuses to
// load while it exists.
async function twoReady(t, env) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-pool-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const bad = path.join(dir, 'bad');
  const p = pool(t, { filename: FAILS_AT_LOAD, minWorkers: 2, maxWorkers: 2, env: { ...process.env, POOL_TEST_BAD: bad, ...env } });
  await until(() => p.workers.filter((w) => w.state === 'ready').length === 2, STEP, 'two ready workers');
  const seen = new Set(p.workers.map((w) => w.pid));
  const look = () => {
    for (const w of p.workers) seen.add(w.pid);
  };
  return { p, bad, seen, look };
}

test('a worker that fails to load once while another is ready is replaced: the pool gets back to minWorkers', async (t) => {
  const { p, bad } = await twoReady(t, { POOL_TEST_ONCE: '1' });
  const [victim] = p.workers.map((w) => w.pid);
  fs.writeFileSync(bad, '');
  process.kill(victim, 'SIGKILL');
  // Its replacement throws at load (and removes the file); the next works.
  await until(() => !fs.existsSync(bad), STEP, 'a replacement to fail at load');
  await until(() => p.workers.filter((w) => w.state === 'ready' && w.pid !== victim).length === 2, STEP, 'minWorkers ready again');
  assert.ok(Number.isInteger(await withTimeout(p.run(null), STEP, 'a task')));
});

test('a module that fails to load at every start while a worker is ready is forked less and less often', async (t) => {
  const { p, bad, seen, look } = await twoReady(t, {});
  const [victim, survivor] = p.workers.map((w) => w.pid);
  fs.writeFileSync(bad, '');
  process.kill(victim, 'SIGKILL');
  await until(() => {
    look();
    return seen.size >= 2 + 5 && p.workers.length === 1;
  }, STEP, 'replacements to fail at load', 1);
  // Five failed starts in a row pause the forking for 1 s, then 2 s, 4 s,
  // ...: within the next 2.5 s at most two more starts are tried (fewer on
  // a slow machine), and the tasks go to the ready worker meanwhile.
  const before = seen.size;
  const end = Date.now() + 2500;
  const pids = withTimeout(Promise.all([p.run(null), p.run(null), p.run(null)]), STEP, 'tasks on the ready worker');
  while (Date.now() < end) {
    look();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.ok(seen.size <= before + 2, `${seen.size - before} more workers forked in 2.5 s`);
  assert.deepStrictEqual(new Set(await pids), new Set([survivor]));
  assert.deepStrictEqual(p.stats().failed, 0);
});

test('once starts work again after a streak of failed ones, the pool forks again: back to minWorkers, and growing for tasks', async (t) => {
  const { p, bad, seen, look } = await twoReady(t, {});
  const [victim] = p.workers.map((w) => w.pid);
  fs.writeFileSync(bad, '');
  process.kill(victim, 'SIGKILL');
  await until(() => {
    look();
    return seen.size >= 2 + 5 && p.workers.length === 1;
  }, STEP, 'a streak of failed starts', 1);
  // What failed passes (a burst of descriptors or processes used up): the
  // next start tried, after a pause, works.
  fs.rmSync(bad);
  await until(() => p.workers.filter((w) => w.state === 'ready').length === 2, STEP, 'minWorkers ready again');
  assert.strictEqual(p.stats().failed, 0);
});

test('a spawn that fails without throwing (ENOENT; EAGAIN under a process limit) is a failed start: a cold pool fails its task, a warm one forks again later, and both end', async (t) => {
  // The pools run Node through a link that the test takes away while
  // their forks must fail. Node reports such a spawn with an 'error' event
  // and never an 'exit'.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-pool-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const node = path.join(dir, 'node');
  const withMissingNode = (fn) => {
    fs.rmSync(node, { force: true });
    try {
      return fn();
    } finally {
      fs.symlinkSync(process.execPath, node);
    }
  };
  const cold = pool(t, { minWorkers: 0, maxWorkers: 1, execPath: node });
  const task = withMissingNode(() => cold.run(1));
  await rejects(task, 'ERR_PROCWIRE_POOL_WORKER_START');
  await withTimeout(cold.destroy(), STEP, 'destroy() of the cold pool');
  const warm = pool(t, { minWorkers: 1, maxWorkers: 2, concurrentTasksPerWorker: 1, execPath: node });
  await until(() => warm.workers.some((w) => w.state === 'ready'), STEP, 'the warm worker');
  const first = withMissingNode(() => [warm.run(50, { name: 'sleep' }), warm.run(50, { name: 'sleep' })]);
  await withTimeout(Promise.all(first), STEP, 'the tasks, on the ready worker');
  assert.ok(warm.workers.every((w) => Number.isInteger(w.pid)), 'no worker without a process is kept');
  // Starts work again: the pool grows for tasks that wait.
  const later = [warm.run(300, { name: 'sleep' }), warm.run(300, { name: 'sleep' })];
  await until(() => warm.workers.filter((w) => w.state === 'ready').length === 2, STEP, 'a second worker');
  await withTimeout(Promise.all(later), STEP, 'the later tasks');
  await withTimeout(warm.close(), STEP, 'close() of the warm pool');
});

test('a fork that fails while another worker is ready fails no waiting task, and the pool forks again later', async (t) => {
  const env = { ...process.env };
  const p = pool(t, { minWorkers: 2, maxWorkers: 2, env });
  await until(() => p.workers.filter((w) => w.state === 'ready').length === 2, STEP, 'two ready workers');
  const controller = new AbortController();
  const long = p.run(60_000, { name: 'sleep', signal: controller.signal });
  const busy = p.workers.find((w) => w.running === 1).pid;
  const idle = p.workers.find((w) => w.pid !== busy).pid;
  // A NUL byte in the environment makes the next fork() throw at once.
  env.POOL_TEST_BROKEN = 'a\0b';
  process.kill(idle, 'SIGKILL');
  await until(() => p.workers.length === 1, STEP, 'the killed worker gone and its replacement not forked');
  // A task that waits now waits for the busy worker, not for a fork.
  const queued = p.run(null, { name: 'pid' });
  delete env.POOL_TEST_BROKEN;
  controller.abort();
  await rejects(long, 'ERR_PROCWIRE_TASK_ABORTED');
  assert.strictEqual(await withTimeout(queued, STEP, 'the queued task'), busy);
  await until(() => p.workers.filter((w) => w.state === 'ready').length === 2, STEP, 'minWorkers ready again');
});
