'use strict';
// Bulk transfer: one large Buffer, parent -> child, timed until the child
// holds it (one-way, CLOCK_MONOTONIC on both sides), after Chromium's
// out-of-line measurements. References measured in the same run: one memcpy
// of the same size into warm memory, and into freshly allocated memory, and
// the one-way latency of a tiny message. The "sealed" rows are the paths a
// channel without the segment pool takes (named channels by default).
//
//   node bench/bulk.js [--quick]

const path = require('path');
const harness = require('./lib/harness');

const MiB = 1024 * 1024;
const SIZES_QUICK = [MiB, 8 * MiB, 64 * MiB];
const SIZES_FULL = [...SIZES_QUICK, 256 * MiB];

const PEERS = [
  { id: 'procwire-transfer', label: 'procwire transfer (procwire.alloc + { transfer }), fork default: future-write seal' },
  { id: 'procwire-transfer-sealed', label: 'procwire transfer, segmentPool: false (unmap, then F_SEAL_WRITE)' },
  { id: 'procwire-ool', label: 'procwire out of line, fork default (copy into a recycled, pre-faulted segment)' },
  { id: 'procwire-ool-sealed', label: 'procwire out of line, segmentPool: false (copy into a fresh sealed memfd)' },
  { id: 'procwire-tiny', label: 'procwire, a 16-byte Buffer instead (the one-way latency floor)' },
  { id: 'procwire-inline', label: 'procwire inline (socket)' },
  { id: 'node-advanced', label: 'Node fork IPC, advanced' },
  { id: 'memcpy-warm', label: 'one memcpy, warm destination (reference)' },
  { id: 'memcpy-fresh', label: 'one memcpy into fresh memory (reference)' },
];

function summarize(ms) {
  return { p50: harness.median(ms), p98: harness.percentile(ms, 98), n: ms.length };
}

// Messages sent before timing starts, on every row: a recycled pool reaches
// its steady state in a few (at 64 MiB the child's collector frees a Buffer
// about every third message, so the pool makes about four segments first).
const WARMUP = 5;

// The rows that fork a procwire child themselves: channel options, and how
// each message is made and sent.
const PROCWIRE_ROWS = {
  'procwire-transfer': { options: {}, transfer: true },
  'procwire-transfer-sealed': { options: { segmentPool: false }, transfer: true },
  'procwire-ool': { options: { outOfLine: 'always' } },
  'procwire-ool-sealed': { options: { outOfLine: 'always', segmentPool: false } },
  'procwire-tiny': { options: {}, tiny: true },
};

function iterations(size, quick) {
  if (size >= 256 * MiB) return quick ? 3 : 5;
  if (size >= 64 * MiB) return quick ? 2 : 10;
  return quick ? 5 : 40;
}

function measureMemcpy(size, n, fresh) {
  const src = Buffer.alloc(size, 0x2e);
  const warm = Buffer.alloc(size);
  const out = [];
  for (let i = 0; i < n + WARMUP; i++) {
    const dst = fresh ? Buffer.allocUnsafeSlow(size) : warm;
    const t0 = process.hrtime.bigint();
    src.copy(dst);
    const dt = Number(process.hrtime.bigint() - t0) / 1e6;
    if (i >= WARMUP) out.push(dt);
  }
  return out;
}

async function runDriver(config, tick) {
  const data = {};
  if (config.peer === 'memcpy-warm' || config.peer === 'memcpy-fresh') {
    for (const size of config.sizes) {
      data[size] = summarize(measureMemcpy(size, iterations(size, config.quick), config.peer === 'memcpy-fresh'));
      tick();
    }
    return { data };
  }
  const script = path.join(__dirname, 'peers', 'ipc-echo.js');
  const row = PROCWIRE_ROWS[config.peer];
  if (row !== undefined) {
    const procwire = require(path.join(__dirname, '..'));
    const child = procwire.fork(script, ['latency'], {
      child: 'procwire', serialization: 'advanced', stdio: ['ignore', 'ignore', 'inherit', 'ipc'], ...row.options,
    });
    const ch = child.channel;
    try {
      await new Promise((resolve) => ch.once('message', resolve));  // ready
      for (const size of config.sizes) {
        const lats = [];
        const payload = row.transfer ? null : Buffer.alloc(row.tiny ? 16 : size, 0x2e);
        for (let i = 0; i < iterations(size, config.quick) + WARMUP; i++) {
          let data = payload;
          if (row.transfer) {
            data = procwire.alloc(size);
            data.fill(0x2e);  // the sender's own work, not part of the transfer
          }
          const ack = new Promise((resolve) => ch.once('message', resolve));
          ch.send({ t: Number(process.hrtime.bigint()), data }, row.transfer ? { transfer: [data] } : undefined);
          data = null;
          const m = await ack;
          if (m.n !== (row.tiny ? 16 : size)) throw new Error(`${config.peer} peer got ${m.n} bytes, expected ${size}`);
          if (i >= WARMUP) lats.push(m.lat / 1e6);
        }
        data[size] = summarize(lats);
        tick();
      }
      return { data, histogram: (ch.stats() || {}).histogram || null };
    } finally {
      const exited = new Promise((r) => child.once('exit', r));
      child.disconnect();
      await exited;
    }
  }
  const { open } = require('./lib/transports');
  const t = await open(config.peer, { script, args: ['latency'] });
  try {
    for (const size of config.sizes) {
      const payload = Buffer.alloc(size, 0x2e);
      const lats = [];
      for (let i = 0; i < iterations(size, config.quick) + WARMUP; i++) {
        const ack = new Promise((resolve) => { t.onmessage = resolve; });
        t.send({ t: Number(process.hrtime.bigint()), data: payload });
        const m = await ack;
        if (m.n !== size) throw new Error(`bulk peer got ${m.n} bytes, expected ${size}`);
        if (i >= WARMUP) lats.push(m.lat / 1e6);
      }
      data[size] = summarize(lats);
      tick();
    }
    return { data, histogram: t.histogram() };
  } finally {
    await t.close();
  }
}

async function plan({ quick, repeats }) {
  const sizes = quick ? SIZES_QUICK : SIZES_FULL;
  return {
    name: 'bulk',
    title: 'Bulk transfer: one large Buffer, time until the child has it (ms)',
    description: 'One Buffer of N bytes sent parent -> child; the child notes the CLOCK_MONOTONIC arrival time. ' +
      'memcpy rows time one copy of N bytes in one process, for scale. Lower is better.',
    script: __filename,
    xs: sizes,
    xLabel: 'message',
    xUnit: 'bytes',
    metrics: [
      { id: 'p50', label: 'median ms', unit: 'ms', better: 'lower' },
      { id: 'p98', label: 'p98 ms', unit: 'ms', better: 'lower' },
    ],
    chartMetrics: ['p50'],
    peers: PEERS.map((p) => ({ ...p })),
    repeats: repeats || 3,
    ticksPerRun: sizes.length,
    timeoutMs: (quick ? 60 : 180) * 1000,
    config: () => ({ sizes, quick }),
    ratioTo: ['procwire-transfer', 'procwire-ool', 'memcpy-warm'],
    notes: ['"transfer" hands over a procwire.alloc() memfd: the sender\'s Buffer is detached and the segment sealed; no byte is copied. ' +
        'On fork channels (segmentPool on) the seal is F_SEAL_FUTURE_WRITE and the sender\'s mapping is torn down in the background; ' +
        'with segmentPool: false the mapping is torn down first and F_SEAL_WRITE applied.',
      '"out of line" (fork default) copies the bytes once into a recycled segment the child already maps (pre-faulted on both sides); ' +
        'the child hands it back when its Buffer is collected. "sealed" copies into a fresh memfd (write(2)) sealed against writing.',
      `Every row sends ${WARMUP} untimed messages per size first (the pool's segments are made then).`,
      'The tiny row sends a 16-byte Buffer per x: the channel\'s one-way latency floor in the same run (scheduler wake-ups on a loaded machine).',
      'Node\'s built-in advanced path copies the bytes through the socket in 64 KiB reads and reassembles them in JavaScript.'],
  };
}

module.exports = { name: 'bulk', inProcess: false, plan, runDriver };

if (require.main === module) {
  if (process.argv[2] === '--driver') harness.driverMain(runDriver);
  else require('./lib/cli').standalone('bulk');
}
