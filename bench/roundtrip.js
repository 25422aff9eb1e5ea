'use strict';
// Round trips/s by payload, in the style of Node's child-process IPC
// round-trip benchmark: { payload: '.'.repeat(len) }, 256 messages in flight,
// the child echoes each one back. Every peer runs in fresh processes and the
// repeats are interleaved (A B C ... A B C ...).
//
//   node bench/roundtrip.js [--quick]      (or: procwire bench --suite roundtrip)
//   PROCWIRE_BENCH_PEERS=procwire-tcp,nats,nats-request,nats-durable node bench/roundtrip.js --quick

const path = require('path');
const harness = require('./lib/harness');
const { startRedis } = require('./lib/resp');
const { buildC, runRing } = require('./lib/fifo');

const IN_FLIGHT = 256;
const SIZES_FULL = [64, 256, 1024, 4096, 16384, 65536];
const SIZES_QUICK = [64, 1024, 16384, 65536];

const PEERS = [
  { id: 'procwire-advanced', label: 'procwire both sides, advanced' },
  { id: 'procwire-json', label: 'procwire both sides, json' },
  { id: 'procwire-socket', label: 'procwire (socket only), advanced, rings: never' },
  { id: 'procwire-plain-advanced', label: 'procwire parent + plain child, advanced' },
  { id: 'procwire-plain-json', label: 'procwire parent + plain child, json' },
  { id: 'procwire-unix', label: 'procwire named unix channel' },
  { id: 'procwire-tcp', label: 'procwire TCP loopback' },
  { id: 'procwire-tls', label: 'procwire TCP + TLS loopback' },
  { id: 'node-json', label: 'Node fork IPC, json' },
  { id: 'node-advanced', label: 'Node fork IPC, advanced' },
  { id: 'node24-advanced', label: 'Node 24 fork IPC, advanced (native codec from 24.19)' },
  { id: 'node26-advanced', label: 'Node 26 fork IPC, advanced (native codec from 26.4)' },
  { id: 'worker-threads', label: 'worker_threads postMessage (same process)' },
  { id: 'net-unix', label: 'net unix socket, ndjson' },
  { id: 'net-tcp', label: 'net TCP loopback, ndjson' },
  { id: 'redis', label: 'Redis pub/sub (unix socket)' },
  { id: 'zeromq', label: 'ZeroMQ PAIR (ipc)' },
  { id: 'nats', label: 'procwire over NATS (nats-server, TCP loopback)' },
  { id: 'nats-request', label: 'procwire over NATS, request/reply (core)' },
  { id: 'nats-durable', label: 'procwire over NATS, durable request/reply (JetStream R1, file)' },
  { id: 'c-socketpair', label: 'C reference: socketpair, batched', reference: { transport: 'socketpair' } },
  { id: 'c-ring', label: 'C reference: shared-memory rings, eventfd', reference: { transport: 'ring' } },
  { id: 'c-ring-pinned', label: 'C reference: shared-memory rings, one CPU', reference: { transport: 'ring', pinned: true } },
];
const QUICK_PEERS = new Set(['procwire-advanced', 'procwire-json', 'procwire-socket', 'procwire-plain-advanced', 'procwire-plain-json', 'procwire-unix',
  'procwire-tcp', 'procwire-tls', 'node-json', 'node-advanced', 'node24-advanced', 'node26-advanced', 'worker-threads', 'net-unix', 'redis', 'zeromq', 'nats',
  'nats-request', 'c-socketpair', 'c-ring']);

// ---- driver: one peer, all sizes, in this (fresh) process --------------------

async function measure(t, len, warmMs, windowMs, inFlight = IN_FLIGHT) {
  const msg = { payload: '.'.repeat(len) };
  return new Promise((resolve, reject) => {
    let inflight = 0;
    let counting = false;
    let stopping = false;
    let count = 0;
    let t0 = 0;
    let cpu0 = null;
    let result = null;
    t.onmessage = (m) => {
      if (!m || typeof m.payload !== 'string' || m.payload.length !== len) {
        reject(new Error(`echo mismatch at ${len} B: got ${JSON.stringify(m).slice(0, 80)}`));
        return;
      }
      inflight--;
      if (counting) count++;
      if (!stopping) {
        inflight++;
        t.send(msg);
      } else if (inflight === 0) {
        resolve(result);
      }
    };
    for (let i = 0; i < inFlight; i++) {
      inflight++;
      t.send(msg);
    }
    setTimeout(() => {
      counting = true;
      t0 = harness.now();
      cpu0 = process.cpuUsage();
      setTimeout(() => {
        const cpu = process.cpuUsage(cpu0);
        // This process's CPU time (the parent's end, with its codec and
        // channel) per round trip in the window.
        result = { rps: count / ((harness.now() - t0) / 1000), cpu: count > 0 ? (cpu.user + cpu.system) / count : NaN };
        counting = false;
        stopping = true;
      }, windowMs);
    }, warmMs);
  });
}

async function runDriver(config, tick) {
  if (config.reference) {
    // The C references measure frames of `len` bytes (u32 length + bytes)
    // with the same window in flight; no JS on either side.
    const out = await runRing(config.ringBinary, { ...config.reference, sizes: config.sizes, warmMs: config.warmMs,
      windowMs: config.windowMs, latencyMs: 0, timeoutMs: config.hardLimitMs - 2000 });
    const data = {};
    for (const len of config.sizes) {
      data[len] = { rps: out[len] ? out[len].rps : NaN };
      tick();
    }
    return { data };
  }
  const { open } = require('./lib/transports');
  const { WORKER_PEER, openWorker } = require('./lib/worker-peer');
  const script = path.join(__dirname, 'peers', 'ipc-echo.js');
  const t = config.peer === WORKER_PEER ? await openWorker({ script, args: ['echo'] }) : await open(config.peer, {
    script,
    args: ['echo'],
    tmp: config.tmp,
    redisSocket: config.redisSocket,
    natsUrl: config.natsUrl,
  });
  const data = {};
  try {
    for (const len of config.sizes) {
      data[len] = await measure(t, len, config.warmMs, config.windowMs, config.inFlight);
      tick();
    }
    return { data, histogram: t.histogram() };
  } finally {
    await t.close();
  }
}

// ---- plan (run by the orchestrator) -------------------------------------------------

async function plan({ quick, repeats, log, tmp }) {
  const sizes = quick ? SIZES_QUICK : SIZES_FULL;
  const node26 = harness.otherNode(26);
  const node24 = harness.otherNode(24);
  const { zeromqAvailable, startNats } = require('./lib/transports');
  const zmqSkip = zeromqAvailable();
  const redis = await startRedis(tmp, { log, trackPid: harness.trackPid, untrackPid: harness.untrackPid });
  const natsServer = await startNats(tmp, { trackPid: harness.trackPid, untrackPid: harness.untrackPid });
  const notes = [`${IN_FLIGHT} messages in flight; { payload: '.'.repeat(len) }; the child decodes and re-sends each one.`,
    'Socket, Redis and ZeroMQ peers carry JSON text (JSON.stringify/parse on both sides).',
    'NATS: procwire channels (advanced codec) through a private nats-server on loopback: two TCP hops per direction. ' +
      'nats-request and nats-durable send requests (channel.request(), 256 in flight) to a worker that answers with the ' +
      'value; durable stores each request and each reply in a JetStream work queue (file storage, R1) before it is acked.',
    'C references (bench/ring.c): frames of u32 length + len bytes, the same window in flight, a C child echoing; ' +
      'socketpair = batched reads and writes; rings = one shared-memory ring per direction, eventfd wake-ups only ' +
      'for a sleeping reader after an adaptive spin; "one CPU" pins both processes to the same CPU.'];
  if (redis.skip) log(`  roundtrip: Redis skipped: ${redis.skip}`);
  if (zmqSkip) log(`  roundtrip: ZeroMQ skipped: ${zmqSkip}`);
  if (natsServer.skip) log(`  roundtrip: NATS skipped: ${natsServer.skip}`);
  if (!node26) log(`  roundtrip: Node 26 row skipped: ${harness.missingNode(26)}`);
  if (!node24) log(`  roundtrip: Node 24 row skipped: ${harness.missingNode(24)}`);
  const ring = buildC(tmp, 'ring');
  if (ring.skip) log(`  roundtrip: C references skipped: ${ring.skip}`);
  // PROCWIRE_BENCH_PEERS=a,b: only these rows (to re-run a few on a quiet
  // machine), --quick or not. The durable NATS row stores every message
  // on disk and takes seconds to warm: --quick leaves it out unless named.
  const only = process.env.PROCWIRE_BENCH_PEERS ? new Set(process.env.PROCWIRE_BENCH_PEERS.split(',')) : null;
  const peers = PEERS.filter((p) => (only !== null ? only.has(p.id) : !quick || QUICK_PEERS.has(p.id))).map((p) => {
    const out = { ...p };
    if (p.id === 'redis' && redis.skip) out.skip = redis.skip;
    if (p.id === 'zeromq' && zmqSkip) out.skip = zmqSkip;
    if (p.id.startsWith('nats') && natsServer.skip) out.skip = natsServer.skip;
    if (p.reference && ring.skip) out.skip = ring.skip;
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
  const warmMs = quick ? 30 : 200;
  const windowMs = quick ? 110 : 1000;
  return {
    name: 'roundtrip',
    title: 'Round trips/s by payload (256 in flight, child echoes)',
    description: "Node's child-process IPC round-trip benchmark: { payload: '.'.repeat(len) }, 256 in flight, the peer echoes. Higher is better.",
    script: __filename,
    xs: sizes,
    xLabel: 'payload',
    xUnit: 'bytes',
    metrics: [{ id: 'rps', label: 'round trips/s', unit: '/s', better: 'higher' },
      // The parent's own CPU time per round trip (process.cpuUsage over the
      // window, all its threads): what a message costs the sending process.
      { id: 'cpu', label: 'parent CPU µs per round trip', unit: 'µs', better: 'lower' }],
    chartMetrics: ['rps'],
    peers,
    repeats: repeats || (quick ? 3 : 5),
    ticksPerRun: sizes.length,
    timeoutMs: 20000 + sizes.length * (warmMs + windowMs + 4000),
    env: { PROCWIRE_DIR: tmp },
    config: (peer) => ({ sizes, warmMs, windowMs, tmp, redisSocket: redis.socket, natsUrl: natsServer.url,
      reference: peer && peer.reference, ringBinary: ring.binary,
      hardLimitMs: 15000 + sizes.length * (warmMs + windowMs + 4000) }),
    ratioTo: ['procwire-advanced', 'node-json', 'node-advanced'],
    notes,
    cleanup: async () => {
      if (redis.stop) await redis.stop();
      if (natsServer.stop) await natsServer.stop();
    },
  };
}

module.exports = { name: 'roundtrip', inProcess: false, plan, runDriver, measure };

if (require.main === module) {
  if (process.argv[2] === '--driver') harness.driverMain(runDriver);
  else require('./lib/cli').standalone('roundtrip');
}
