'use strict';
// A fork channel against a named channel between the same two kinds of
// process: both ends procwire, the same echo child (bench/peers/channel-echo.js),
// the same driver code, the same window in flight. Only how the channel was
// made differs: procwire.fork(file, [], { child: 'procwire' }) with the
// driver on child.channel, or a plain `node` child that connect()s to a name
// the driver listen()s on. Each pair of rows should read level (a
// fork channel ran at a third of a named one, which no suite compared).
//
//   node bench/fork-vs-named.js [--quick]      (or: procwire bench --suite fork-vs-named)

const childProcess = require('child_process');
const path = require('path');
const harness = require('./lib/harness');
const { measure } = require('./roundtrip');

const ECHO = path.join(__dirname, 'peers', 'channel-echo.js');
const SIZES_FULL = [64, 256, 1024, 4096, 16384, 65536, 262144, 1048576];
// Large enough, and windows long enough, that a per-message cost which grows
// with the heap (as the retained-message defect did) shows even in a quick run.
const SIZES_QUICK = [16384, 65536];

// Every combination the issue asks to be level: wire format, rings on or
// off, one or 100 messages in flight; each a fork row and a named row.
function combos(quick) {
  const out = [];
  for (const serialization of quick ? ['advanced'] : ['advanced', 'json']) {
    for (const rings of ['auto', 'never']) {
      for (const inFlight of quick ? [100] : [100, 1]) out.push({ serialization, rings, inFlight });
    }
  }
  return out;
}

function comboId(c) { return `${c.serialization}-${c.rings === 'never' ? 'socket' : 'rings'}-${c.inFlight}`; }
function comboLabel(c) { return `${c.serialization}, ${c.rings === 'never' ? "rings: 'never'" : 'rings'}, ${c.inFlight} in flight`; }

// ---- driver: one channel, all sizes, in this (fresh) process -------------------

function waitReady(ch, label) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${label}: echo child not ready within 15 s`)), 15000);
    ch.once('message', (m) => {
      clearTimeout(timer);
      if (m && m.ready) resolve(); else reject(new Error(`${label}: unexpected first message`));
    });
  });
}

// The fork row: the driver uses child.channel, the Channel fork() made, as
// the driver did (child.send and child.on('message') with
// config.surface === 'child').
async function openFork(config) {
  const pw = require(harness.ROOT);
  const child = pw.fork(ECHO, [], {
    child: 'procwire', serialization: config.serialization, rings: config.rings, stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const ch = child.channel;
  const onChild = config.surface === 'child';
  await waitReady(onChild ? child : ch, 'fork');
  const t = {
    onmessage: null,
    send: onChild ? (m) => child.send(m) : (m) => ch.send(m),
    histogram: () => null,
    close: async () => {
      const exited = new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', r)));
      try { child.disconnect(); } catch { /* already */ }
      const timer = setTimeout(() => { try { child.kill('SIGKILL'); } catch { /* gone */ } }, 2000);
      await exited;
      clearTimeout(timer);
    },
  };
  (onChild ? child : ch).on('message', (m) => t.onmessage(m));
  return t;
}

// The named row: a plain `node` child connect()s to the name the driver
// listen()s on, with the same channel options.
async function openNamed(config) {
  const pw = require(harness.ROOT);
  const name = `fvn-${process.pid}`;
  const options = { serialization: config.serialization, rings: config.rings };
  const server = pw.listen(name, options);
  await server.ready;
  const child = childProcess.spawn(process.execPath, [ECHO, name, JSON.stringify(options)], { stdio: ['ignore', 'ignore', 'inherit'] });
  const ch = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('named: no channel within 15 s')), 15000);
    server.once('channel', (c) => { clearTimeout(timer); resolve(c); });
    child.once('exit', (code, signal) => reject(new Error(`named: echo child exited (${signal || code})`)));
  });
  await waitReady(ch, 'named');
  server.close();
  const t = {
    onmessage: null,
    send: (m) => ch.send(m),
    histogram: () => null,
    close: async () => {
      const exited = new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', r)));
      ch.close();
      const timer = setTimeout(() => { try { child.kill('SIGKILL'); } catch { /* gone */ } }, 2000);
      await exited;
      clearTimeout(timer);
    },
  };
  ch.on('message', (m) => t.onmessage(m));
  return t;
}

async function runDriver(config, tick) {
  const t = config.kind === 'fork' ? await openFork(config) : await openNamed(config);
  const data = {};
  try {
    for (const len of config.sizes) {
      data[len] = await measure(t, len, config.warmMs, config.windowMs, config.inFlight);
      tick();
    }
    return { data };
  } finally {
    await t.close();
  }
}

// ---- plan (run by the orchestrator) -------------------------------------------------

async function plan({ quick, repeats, tmp }) {
  const sizes = quick ? SIZES_QUICK : SIZES_FULL;
  const peers = [];
  const pairs = [];
  for (const c of combos(quick)) {
    const id = comboId(c);
    peers.push({ id: `fork-${id}`, label: `fork, ${comboLabel(c)}`, kind: 'fork', ...c });
    peers.push({ id: `named-${id}`, label: `named, ${comboLabel(c)}`, kind: 'named', ...c });
    pairs.push([`fork-${id}`, `named-${id}`]);
  }
  if (!quick) {
    // The ChildProcess surface over the same fork channel (child.send,
    // child.on('message')): what most fork() users and the pool call.
    const c = { serialization: 'advanced', rings: 'auto', inFlight: 100 };
    peers.push({ id: `fork-child-${comboId(c)}`, label: `fork via child.send, ${comboLabel(c)}`, kind: 'fork', surface: 'child', ...c });
    pairs.push([`fork-child-${comboId(c)}`, `named-${comboId(c)}`]);
  }
  // A 1 MiB json round trip takes a few milliseconds: the window holds
  // some dozens of them.
  const warmMs = quick ? 50 : 150;
  const windowMs = quick ? 250 : 500;
  return {
    name: 'fork-vs-named',
    title: 'Fork channel against named channel (both ends procwire, same echo child)',
    description: "The same echo child and driver over a channel made by procwire.fork(..., { child: 'procwire' }) " +
      'and over a named channel (listen/connect), { payload: \'.\'.repeat(len) }. Higher is better; each pair should ' +
      'read ×1.',
    script: __filename,
    xs: sizes,
    xLabel: 'payload',
    xUnit: 'bytes',
    // The rate swings with whatever else runs on the machine; the driver's
    // own CPU time per round trip (its channel, codec and garbage
    // collection) swings far less and shows the same gap.
    metrics: [{ id: 'rps', label: 'round trips/s', unit: '/s', better: 'higher' },
      { id: 'cpu', label: 'driver CPU per round trip', unit: 'µs', better: 'lower' }],
    peers,
    repeats: repeats || (quick ? 2 : 3),
    ticksPerRun: sizes.length,
    timeoutMs: 20000 + sizes.length * (warmMs + windowMs + 4000),
    env: { PROCWIRE_DIR: tmp },
    config: (peer) => ({ sizes, warmMs, windowMs, kind: peer.kind, surface: peer.surface, serialization: peer.serialization,
      rings: peer.rings, inFlight: peer.inFlight, hardLimitMs: 15000 + sizes.length * (warmMs + windowMs + 4000) }),
    pairs,
    notes: ['Fork rows: the driver sends and listens on child.channel (one row: on child.send / child.on), ' +
      "stdio ['ignore', 'ignore', 'inherit', 'ipc']. Named rows: a plain `node` child connect()s to the driver's " +
      'listen()ed name with the same options. The echo child is bench/peers/channel-echo.js in both.'],
  };
}

module.exports = { name: 'fork-vs-named', inProcess: false, plan, runDriver };

if (require.main === module) {
  if (process.argv[2] === '--driver') harness.driverMain(runDriver);
  else require('./lib/cli').standalone('fork-vs-named');
}
