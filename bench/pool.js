'use strict';
// Process pools side by side: procwire.Pool against piscina (worker
// threads), tinypool's child_process runtime, workerpool's process workers
// and jest-worker (child processes), and a bare round-robin of request()
// over two procwire channels (the floor the pool's bookkeeping adds to).
// Every pool has 2 workers and the same task module (bench/peers/
// pool-task.js); a closed loop keeps N tasks in flight. Small tasks are
// { a, b } -> a + b; Buffer tasks send N bytes and get a number back. At
// 16 MiB only procwire runs, handing a procwire.alloc() buffer to the worker
// and back without a copy, against a warm 16 MiB memcpy in this process.
//
//   node bench/pool.js [--quick]

const path = require('path');
// The global is a lazy getter on Node 20; the module's export is the object.
const { performance } = require('perf_hooks');
const harness = require('./lib/harness');
// The pool's own duration histogram; here only as the bench's recorder.
const { Histogram } = require('../lib/pool/histogram');

const KiB = 1024;
const MiB = 1024 * 1024;
const SMALL = 16;  // the x of the { a, b } task (its size as advanced: ~16 bytes)
const SIZES = [SMALL, 64 * KiB, MiB, 16 * MiB];
const QUICK_SIZES = [SMALL, 64 * KiB, 16 * MiB];
const IN_FLIGHT = { [SMALL]: 512, [64 * KiB]: 64, [MiB]: 8, [16 * MiB]: 4 };
const TASK = path.join(__dirname, 'peers', 'pool-task.js');
const BENCH_DEPS = path.join(harness.ROOT, '.bench-deps');
// The newest supported Node line, which every pool's rows run on.
const NEWEST = 26;

const PEERS = [
  { id: 'procwire-pool', label: 'procwire.Pool (child processes)' },
  { id: 'procwire-request', label: 'procwire: 2 channels, bare request() round-robin' },
  { id: 'piscina', label: 'piscina (worker threads)', pkg: 'piscina' },
  { id: 'tinypool', label: "tinypool, runtime 'child_process'", pkg: 'tinypool' },
  { id: 'workerpool', label: "workerpool, workerType 'process'", pkg: 'workerpool' },
  { id: 'jest-worker', label: 'jest-worker (child processes)', pkg: 'jest-worker' },
  { id: 'memcpy', label: 'warm 16 MiB memcpy (reference)' },
];

function requirePeer(name) {
  return require(require.resolve(name, { paths: [BENCH_DEPS] }));
}

// Each pool at its best here: every task in flight may sit at a worker
// (where the pool allows more than one per worker), 2 workers started
// before the clock runs.
const OPENERS = {
  async 'procwire-pool'(inFlight) {
    const { Pool } = require('..');
    const pool = new Pool({ filename: TASK, minWorkers: 2, maxWorkers: 2, concurrentTasksPerWorker: inFlight });
    return { run: (v) => pool.run(v), transfer: (buf) => pool.run(buf, { transfer: [buf] }), close: () => pool.destroy() };
  },
  async 'procwire-request'() {
    const { fork } = require('..');
    const children = [0, 1].map(() => fork(path.join(__dirname, 'peers', 'pool-responder.js'),
      { child: 'procwire', serialization: 'advanced' }));
    let next = 0;
    return {
      run: (v) => children[next++ & 1].request(v, { timeout: 0 }),
      close: async () => { for (const c of children) c.kill('SIGKILL'); },
    };
  },
  async piscina(inFlight) {
    const mod = requirePeer('piscina');
    const Piscina = mod.Piscina || mod.default || mod;
    const pool = new Piscina({ filename: TASK, minThreads: 2, maxThreads: 2, concurrentTasksPerWorker: inFlight / 2, idleTimeout: 60_000 });
    return { run: (v) => pool.run(v), close: () => pool.destroy() };
  },
  async tinypool(inFlight) {
    const { Tinypool } = requirePeer('tinypool');
    const pool = new Tinypool({ filename: TASK, runtime: 'child_process', minThreads: 2, maxThreads: 2,
      concurrentTasksPerWorker: inFlight / 2, idleTimeout: 60_000 });
    return { run: (v) => pool.run(v), close: () => pool.destroy() };
  },
  async workerpool() {
    const workerpool = requirePeer('workerpool');
    // Advanced serialization so Buffers arrive as Buffers (its default,
    // JSON, would send them as arrays of numbers).
    const pool = workerpool.pool(path.join(__dirname, 'peers', 'pool-task-workerpool.js'),
      { workerType: 'process', minWorkers: 2, maxWorkers: 2, forkOpts: { serialization: 'advanced' } });
    return { run: (v) => pool.exec('task', [v]), close: () => pool.terminate(true) };
  },
  async 'jest-worker'() {
    const { Worker } = requirePeer('jest-worker');
    const worker = new Worker(TASK, { numWorkers: 2, exposedMethods: ['task'], enableWorkerThreads: false,
      forkOptions: { serialization: 'advanced' }, maxRetries: 0 });
    return { run: (v) => worker.task(v), close: () => worker.end() };
  },
};

function payloadFor(size) {
  if (size === SMALL) {
    let i = 0;
    return () => ({ a: i++, b: 1 });
  }
  const buf = Buffer.alloc(size, 1);
  return () => buf;
}

// A closed loop of `inFlight` tasks for warmMs, then counted for windowMs:
// tasks/s and the latency (run() to result) of one task in `sampleEvery`,
// the same tasks of every pool (each sampleEvery-th started). Latencies
// go into a fixed log-linear histogram (within about 3%) rather than an
// array: at a million tasks a second an array of every latency grew by
// megabytes in a window, and copying and collecting it cost the process
// that drives the pool about 15% of the fastest pool's rate. The clock is
// performance.now(), not harness.now(): process.hrtime.bigint() makes a
// BigInt and Number() of it is a call into V8's runtime, about 60 ns a
// reading against 40 (a CPU-time loop, Node 20). Even so, two readings and
// a record for every task were 10-14% of the driving process at procwire's
// rate (2.14-2.22M tasks/s timed so against 2.38-2.46M timed one in 16,
// Node 26, three interleaved pairs): the bench's cost, not the pool's,
// felt only by the fastest. Small tasks are timed one in SMALL_SAMPLE,
// which still gives each window thousands of latencies at the slowest
// pool's rate (35k tasks/s: about 3,300 in 1.5 s); bigger ones, whose
// slowest rates are a few a second, every one.
const SMALL_SAMPLE = 16;

async function measure(run, makePayload, inFlight, warmMs, windowMs, sampleEvery = 1) {
  const lat = new Histogram();
  let counting = false;
  let stop = false;
  let done = 0;
  let running = 0;
  let started = 0;
  let onIdle;
  const idle = new Promise((r) => { onIdle = r; });
  let failure = null;
  const failed = (err) => {
    running--;
    failure ||= err;
    stop = true;
    if (running === 0) onIdle();
  };
  const next = () => {
    running--;
    if (!stop) start();
    else if (running === 0) onIdle();
  };
  const start = () => {
    running++;
    // An untimed task's callback holds no clock reading of its own.
    if (++started % sampleEvery !== 0) {
      run(makePayload()).then(() => {
        if (counting) done++;
        next();
      }, failed);
      return;
    }
    const t0 = performance.now();
    run(makePayload()).then(() => {
      if (counting) {
        done++;
        lat.record(performance.now() - t0);
      }
      next();
    }, failed);
  };
  for (let i = 0; i < inFlight; i++) start();
  await harness.sleep(warmMs);
  counting = true;
  const t0 = harness.now();
  await harness.sleep(windowMs);
  counting = false;
  const wall = harness.now() - t0;
  stop = true;
  await idle;
  if (failure) throw failure;
  return { tasks: done / (wall / 1000), p50: lat.percentile(0.5) * 1000, p99: lat.percentile(0.99) * 1000 };
}

// procwire's 16 MiB row: each task's data is in a procwire.alloc() buffer
// (made per task; writing the data into it is the caller's work either
// way, so only its first and last bytes are set), handed to the worker
// without a copy; the worker reads it and answers with a number.
async function measureTransfer(pool, size, inFlight, warmMs, windowMs) {
  const { alloc } = require('..');
  const make = () => {
    const buf = alloc(size);
    buf[0] = 1;
    buf[size - 1] = 1;
    return buf;
  };
  return measure(pool.transfer, make, inFlight, warmMs, windowMs);
}

// One task at a time on a warm, idle pool: the run() to result time of
// each, so a pool's fixed cost per task shows beside the bare request()'s
// round trip (both wake a sleeping process on each side: on a VM that
// wake-up, not the pool, is most of it).
async function measureIdle(run, windowMs) {
  const lat = [];
  const end = harness.now() + windowMs;
  for (let i = 0; i < 20; i++) await run({ a: i, b: 1 });
  while (harness.now() < end) {
    // Let both sides go back to sleep, as an idle pool's would.
    await harness.sleep(1);
    const t0 = harness.now();
    await run({ a: 1, b: 2 });
    lat.push(harness.now() - t0);
  }
  return harness.percentile(lat, 50) * 1000;
}

function measureMemcpy(size, windowMs) {
  const a = Buffer.alloc(size, 1);
  const b = Buffer.alloc(size);
  for (let i = 0; i < 3; i++) a.copy(b);
  const lat = [];
  const end = harness.now() + windowMs;
  while (harness.now() < end) {
    const t0 = harness.now();
    a.copy(b);
    lat.push(harness.now() - t0);
  }
  const p50 = harness.percentile(lat, 50);
  return { tasks: 1000 / harness.median(lat), p50: p50 * 1000, p99: harness.percentile(lat, 99) * 1000 };
}

async function runDriver(config, tick) {
  const data = {};
  if (config.peer === 'memcpy') {
    for (const size of config.sizes) {
      if (size === 16 * MiB) data[size] = measureMemcpy(size, config.windowMs);
      tick();
    }
    return { data };
  }
  // One pool per run, opened with room for the largest in-flight count, its
  // 2 workers up and warm before the first window.
  const pool = await OPENERS[config.peer](IN_FLIGHT[SMALL]);
  try {
    await Promise.all([0, 1, 2, 3].map(() => pool.run({ a: 1, b: 2 })));
    for (const size of config.sizes) {
      const inFlight = IN_FLIGHT[size];
      try {
        if (size === 16 * MiB) {
          if (pool.transfer) data[size] = await measureTransfer(pool, size, inFlight, config.warmMs, config.windowMs);
        } else {
          const warmMs = size === SMALL ? config.warmSmallMs : config.warmMs;
          const sampleEvery = size === SMALL ? SMALL_SAMPLE : 1;
          data[size] = await measure(pool.run, payloadFor(size), inFlight, warmMs, config.windowMs, sampleEvery);
          if (size === SMALL) data[size].idle = await measureIdle(pool.run, config.windowMs);
        }
      } catch (err) {
        // One size failing (a pool that cannot carry it) leaves that cell
        // empty and says why on stderr; the others are still measured.
        process.stderr.write(`${config.peer} at ${size} bytes: ${err && err.message}\n`);
      }
      tick();
    }
  } finally {
    await pool.close();
  }
  return { data };
}

function peerMissing(pkg) {
  try {
    require.resolve(pkg, { paths: [BENCH_DEPS] });
    return null;
  } catch {
    return `${pkg} is not installed: run \`bash scripts/setup.sh --bench\` (it installs the benchmark peers into .bench-deps/)`;
  }
}

async function plan({ quick, repeats, log, tmp }) {
  // The first second of small tasks runs far below its pace, for every
  // pool and for bare request()s alike (the code is not yet optimized; on
  // a loaded machine longer): the first size's warm-up covers it.
  const sizes = quick ? QUICK_SIZES : SIZES;
  const warmSmallMs = quick ? 500 : 2500;
  const warmMs = quick ? 100 : 600;
  const windowMs = quick ? 220 : 1500;
  // Every pool runs on the newest Node line at hand (worker threads and
  // child IPC are faster there), procwire's rows too, with the addon built
  // for that line; where there is none, procwire's rows run on this
  // process's line, and the log says why.
  const newest = harness.otherNode(NEWEST);
  const procwire = harness.procwireOn(NEWEST, tmp);
  if (procwire.skip) log(`  pool: procwire's rows run on ${process.version}: ${procwire.skip}`);
  const peers = PEERS.map((p) => {
    const out = { id: p.id, label: p.label };
    const missing = p.pkg ? peerMissing(p.pkg) : null;
    if (missing) out.skip = missing;
    else if (p.pkg && newest !== null) {
      out.execPath = newest;
      out.label = `${p.label}, Node ${NEWEST}`;
    } else if (p.id.startsWith('procwire') && !procwire.skip) {
      out.execPath = procwire.execPath;
      out.env = procwire.env;
      out.label = `${p.label}, Node ${NEWEST}`;
    }
    return out;
  });
  // Opening and closing the pool (forks included) plus the windows.
  const perRun = 10000 + warmSmallMs + windowMs + sizes.length * (warmMs + windowMs + 3000);
  return {
    name: 'pool',
    title: 'Process pools, 2 workers: tasks/s and latency',
    description: 'A closed loop keeps tasks in flight over a pool of 2 workers (512 small tasks { a, b } -> a + b; ' +
      '64 at 64 KiB, 8 at 1 MiB, 4 at 16 MiB: a Buffer to the worker, a number back). Tasks/s: higher is better; ' +
      'latency (run() to result, µs; of every 16th small task, of every bigger one): lower is better. At 16 MiB procwire.Pool hands a procwire.alloc() buffer ' +
      'to the worker (transfer, no copy); the reference is one warm 16 MiB memcpy in one process.',
    script: __filename,
    xs: sizes,
    xLabel: 'task',
    xUnit: 'bytes',
    metrics: [
      { id: 'tasks', label: 'tasks/s', unit: '/s', better: 'higher' },
      { id: 'p50', label: 'p50 µs', unit: 'µs', better: 'lower' },
      { id: 'p99', label: 'p99 µs', unit: 'µs', better: 'lower' },
      { id: 'idle', label: 'one task at a time on an idle pool, p50 µs', unit: 'µs', better: 'lower' },
    ],
    chartMetrics: ['tasks'],
    peers,
    repeats: repeats || (quick ? 1 : 3),
    ticksPerRun: sizes.length,
    timeoutMs: perRun + 20000,
    config: () => ({ sizes, warmSmallMs, warmMs, windowMs, hardLimitMs: perRun + 15000 }),
    ratioTo: ['procwire-pool', 'procwire-request', 'piscina'],
    notes: ['Each pool at its best: every pool runs on the newest Node line at hand (Node 26 where installed; ' +
      'procwire with the addon built for it); 2 workers started before the clock; procwire.Pool, piscina and tinypool ' +
      'may hold every task in flight at a worker (concurrentTasksPerWorker = in-flight / 2); workerpool and jest-worker ' +
      'run one task per worker at a time (they have no such option) and use advanced serialization, so Buffers arrive ' +
      'as Buffers.',
    'The 16 MiB column: procwire.Pool only, run(buf, { transfer: [buf] }) of a procwire.alloc() buffer made per task ' +
      '(only its first and last bytes written: filling it is the caller\'s work either way), against a warm memcpy of ' +
      '16 MiB; per-task time = 1 / (tasks/s) at 4 in flight.'],
  };
}

module.exports = { name: 'pool', inProcess: false, plan, runDriver };

if (require.main === module) {
  if (process.argv[2] === '--driver') harness.driverMain(runDriver);
  else require('./lib/cli').standalone('pool');
}
