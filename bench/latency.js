'use strict';
// One-way latency by message size, after Chromium's Mach-vs-FIFO table: a
// Buffer of N bytes goes parent -> child carrying its send time; the child
// takes the difference on arrival (process.hrtime.bigint() is CLOCK_MONOTONIC,
// one clock for every process on Linux) and answers with it; the next message
// goes only after that answer, so nothing queues. Median and p98.
//
//   node bench/latency.js [--quick]

const path = require('path');
const harness = require('./lib/harness');
const { buildFifo, runFifo } = require('./lib/fifo');

const KiB = 1024;
const MiB = 1024 * 1024;
const SIZES_QUICK = [100, KiB, 10 * KiB, 100 * KiB, MiB, 7 * MiB];
const SIZES_FULL = [...SIZES_QUICK, 64 * MiB];

const PEERS = [
  { id: 'procwire-inline', label: 'procwire both sides, inline (socket)' },
  { id: 'procwire-ool', label: 'procwire both sides, out of line (shared memory)' },
  { id: 'procwire-plain-advanced', label: 'procwire parent + plain child (advanced)' },
  { id: 'node-advanced', label: 'Node fork IPC, advanced' },
  { id: 'node24-advanced', label: 'Node 24 fork IPC, advanced (native codec from 24.19)' },
  { id: 'node26-advanced', label: 'Node 26 fork IPC, advanced (native codec from 26.4)' },
  { id: 'fifo', label: 'C pipe (FIFO) reference' },
];
const QUICK_PEERS = new Set(['procwire-inline', 'procwire-ool', 'node-advanced', 'node24-advanced', 'node26-advanced', 'fifo']);

function summarize(latNs) {
  const us = latNs.map((v) => v / 1000);
  // Nearest-rank percentiles of every sample (as HdrHistogram reports them,
  // without its bucketing): p99.9 needs about 1000 samples to mean more
  // than the maximum, so `n` is reported beside it.
  return {
    p50: harness.median(us), p98: harness.percentile(us, 98), p99: harness.percentile(us, 99),
    p999: harness.percentile(us, 99.9), n: us.length,
  };
}

async function measureSize(t, size, budgetMs, maxIters) {
  const data = Buffer.alloc(size, 0x2e);
  const lats = [];
  let resolveAck;
  t.onmessage = (m) => resolveAck(m);
  const start = harness.now();
  for (let k = 0; k < maxIters + 3; k++) {
    const ack = new Promise((r) => { resolveAck = r; });
    t.send({ t: Number(process.hrtime.bigint()), data });
    const m = await ack;
    if (m.n !== size) throw new Error(`latency peer got ${m.n} bytes, expected ${size}`);
    if (k >= 3) lats.push(m.lat);
    if (lats.length >= 5 && harness.now() - start > budgetMs) break;
  }
  return lats;
}

async function runDriver(config, tick) {
  const data = {};
  if (config.peer === 'fifo') {
    const out = await runFifo(config.fifo, config.sizes, config.budgetMs, config.maxIters, config.hardLimitMs - 2000);
    for (const size of config.sizes) {
      data[size] = summarize(out[size] || []);
      tick();
    }
    return { data };
  }
  const { open } = require('./lib/transports');
  const t = await open(config.peer, { script: path.join(__dirname, 'peers', 'ipc-echo.js'), args: ['latency'] });
  try {
    for (const size of config.sizes) {
      data[size] = summarize(await measureSize(t, size, config.budgetMs, config.maxIters));
      tick();
    }
    return { data, histogram: t.histogram() };
  } finally {
    await t.close();
  }
}

async function plan({ quick, repeats, log, tmp }) {
  const sizes = quick ? SIZES_QUICK : SIZES_FULL;
  const node26 = harness.otherNode(26);
  const node24 = harness.otherNode(24);
  const fifo = buildFifo(tmp);
  if (fifo.skip) log(`  latency: C pipe reference skipped: ${fifo.skip}`);
  const peers = PEERS.filter((p) => !quick || QUICK_PEERS.has(p.id)).map((p) => {
    const out = { ...p };
    if (p.id === 'fifo' && fifo.skip) out.skip = fifo.skip;
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
  const budgetMs = quick ? 200 : 1000;
  const maxIters = quick ? 300 : 2000;
  // Big messages take up to ~0.2 s each on Node's path; at least 5 are sent.
  const perRun = sizes.length * (budgetMs + 1000) + (sizes.includes(64 * MiB) ? 30000 : 8000);
  return {
    name: 'latency',
    title: 'One-way latency by message size (µs, median and p98)',
    description: 'A Buffer of N bytes sent parent -> child with its CLOCK_MONOTONIC send time; the next is sent only ' +
      'after the child has answered. Lower is better.',
    script: __filename,
    xs: sizes,
    xLabel: 'message',
    xUnit: 'bytes',
    metrics: [
      { id: 'p50', label: 'median µs', unit: 'µs', better: 'lower' },
      { id: 'p98', label: 'p98 µs', unit: 'µs', better: 'lower' },
      { id: 'p99', label: 'p99 µs', unit: 'µs', better: 'lower' },
      { id: 'p999', label: 'p99.9 µs', unit: 'µs', better: 'lower' },
    ],
    chartMetrics: ['p50', 'p98'],
    peers,
    repeats: repeats || (quick ? 3 : 3),
    ticksPerRun: sizes.length,
    timeoutMs: perRun + 15000,
    config: () => ({ sizes, budgetMs, maxIters, fifo: fifo.binary, hardLimitMs: perRun + 10000 }),
    ratioTo: ['procwire-ool', 'node-advanced'],
    notes: ['procwire "inline" = the bytes travel in the socket stream (outOfLine: "never"); "out of line" = in a sealed memfd ' +
      'passed with SCM_RIGHTS (outOfLine: "always"). The default ("auto") switches at 256 KiB, the measured crossover.',
      'Node peers send { t, data: Buffer }; the C reference writes a 16-byte header and the bytes into a pipe (64 KiB pipe buffer).'],
  };
}

module.exports = { name: 'latency', inProcess: false, plan, runDriver };

if (require.main === module) {
  if (process.argv[2] === '--driver') harness.driverMain(runDriver);
  else require('./lib/cli').standalone('latency');
}
