'use strict';
// Workers × concurrency, after the 2016 Habr study of Node IPC: W workers each
// run C concurrent request/reply loops against the master, which echoes every
// request. The master is the bottleneck; we report request/reply pairs/s and
// the master's CPU% (process.cpuUsage over the window; > 100% means its
// helper threads worked too).
//
//   node bench/master-worker.js [--quick] [--workers 2] [--concurrency 4]

const path = require('path');
const harness = require('./lib/harness');

const PAYLOADS = [10, 100, 1000];

const PEERS = [
  { id: 'procwire-advanced', label: 'procwire master + procwire children, advanced' },
  { id: 'procwire-json', label: 'procwire master + procwire children, json' },
  { id: 'procwire-plain-advanced', label: 'procwire master + plain children, advanced' },
  { id: 'procwire-plain-json', label: 'procwire master + plain children, json' },
  { id: 'node-json', label: 'Node fork IPC, json' },
  { id: 'node-advanced', label: 'Node fork IPC, advanced' },
  { id: 'node24-advanced', label: 'Node 24 fork IPC, advanced (native codec from 24.19)' },
  { id: 'node26-advanced', label: 'Node 26 fork IPC, advanced (native codec from 26.4)' },
  { id: 'worker-threads', label: 'main thread + worker_threads, postMessage' },
];
const QUICK_PEERS = new Set(['procwire-advanced', 'procwire-plain-advanced', 'procwire-plain-json', 'node-json', 'node-advanced', 'node24-advanced', 'node26-advanced', 'worker-threads']);

async function measure(workers, c, len, warmMs, windowMs) {
  let pairs = 0;
  let counting = false;
  let stopped = 0;
  let onStopped;
  const allStopped = new Promise((r) => { onStopped = r; });
  for (const w of workers) {
    w.onmessage = (m) => {
      if (m.op === 'stopped') {
        if (++stopped === workers.length) onStopped();
        return;
      }
      if (counting) pairs++;
      w.send(m);
    };
  }
  for (const w of workers) w.send({ op: 'start', c, len });
  await harness.sleep(warmMs);
  counting = true;
  const t0 = harness.now();
  const cpu0 = process.cpuUsage();
  await harness.sleep(windowMs);
  const cpu = process.cpuUsage(cpu0);
  const wall = harness.now() - t0;
  const n = pairs;
  counting = false;
  for (const w of workers) w.send({ op: 'stop' });
  await allStopped;
  return { pairs: n / (wall / 1000), cpu: ((cpu.user + cpu.system) / 1000 / wall) * 100 };
}

async function runDriver(config, tick) {
  const { openMany } = require('./lib/transports');
  const { WORKER_PEER, openWorkers } = require('./lib/worker-peer');
  const ctx = { script: path.join(__dirname, 'peers', 'mw-worker.js') };
  const workers = config.peer === WORKER_PEER ? await openWorkers(ctx, config.workers) : await openMany(config.peer, ctx, config.workers);
  const data = {};
  try {
    for (const len of config.payloads) {
      const r = await measure(workers, config.concurrency, len, config.warmMs, config.windowMs);
      data[len] = { pairs: r.pairs, cpu: r.cpu };
      tick();
    }
    return { data, histogram: workers[0].histogram() };
  } finally {
    await Promise.all(workers.map((w) => w.close()));
  }
}

async function plan({ quick, repeats, log, args = {} }) {
  const workers = Number(args.workers) || 2;
  const concurrency = Number(args.concurrency) || 4;
  const node26 = harness.otherNode(26);
  const node24 = harness.otherNode(24);
  if (!node26) log(`  master-worker: Node 26 row skipped: ${harness.missingNode(26)}`);
  if (!node24) log(`  master-worker: Node 24 row skipped: ${harness.missingNode(24)}`);
  const peers = PEERS.filter((p) => !quick || QUICK_PEERS.has(p.id)).map((p) => {
    const out = { ...p };
    if (p.id === 'node26-advanced') {
      if (!node26) out.skip = harness.missingNode(26);
      else out.execPath = node26;
    }
    if (p.id === 'node24-advanced') {
      if (!node24) out.skip = harness.missingNode(24);
      else out.execPath = node24;
    }
    return out;
  });
  const warmMs = quick ? 80 : 250;
  const windowMs = quick ? 200 : 1200;
  return {
    name: 'master-worker',
    title: `Master + ${workers} workers × ${concurrency} request loops: pairs/s`,
    description: `W=${workers} workers each run C=${concurrency} concurrent request/reply loops against the master, ` +
      'which echoes each request (the 2016 Habr study). Pairs/s: higher is better. Master CPU% = the master\'s CPU time ' +
      '(process.cpuUsage, all its threads) / wall time over the window.',
    script: __filename,
    xs: PAYLOADS,
    xLabel: 'payload',
    xUnit: 'bytes',
    metrics: [
      { id: 'pairs', label: 'pairs/s', unit: '/s', better: 'higher' },
      { id: 'cpu', label: 'master CPU %', unit: '%', better: 'lower' },
    ],
    chartMetrics: ['pairs'],
    peers,
    repeats: repeats || (quick ? 3 : 5),
    ticksPerRun: PAYLOADS.length,
    timeoutMs: 20000 + PAYLOADS.length * (warmMs + windowMs + 4000),
    config: () => ({ payloads: PAYLOADS, workers, concurrency, warmMs, windowMs,
      hardLimitMs: 15000 + PAYLOADS.length * (warmMs + windowMs + 4000) }),
    ratioTo: ['procwire-advanced', 'node-json', 'node-advanced'],
    notes: [`${workers} workers × ${concurrency} concurrent loops; payload is a string of that many bytes; the master echoes.`],
  };
}

module.exports = { name: 'master-worker', inProcess: false, plan, runDriver };

if (require.main === module) {
  if (process.argv[2] === '--driver') harness.driverMain(runDriver);
  else require('./lib/cli').standalone('master-worker');
}
