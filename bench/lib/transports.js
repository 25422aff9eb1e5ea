'use strict';
// One small interface over every peer the bench compares, for the driver
// (parent) side:  t = await open(peerId, ctx); t.onmessage = fn; t.send(value);
// t.histogram(); await t.close().
//
// ctx: { script (child script for fork-style peers), args, tmp, redisSocket, natsUrl,
//        workers (fork-style: how many children; t.children[i] each) }
//
// Fork-style peers deliver structured values; socket peers with a text wire
// (ndjson, Redis, ZeroMQ) JSON-encode on both sides, as a user of them would.
// Every child first sends a ready message ({ ready: true }), which open()
// waits for, so no measurement includes process start-up.

const childProcess = require('child_process');
const net = require('net');
const path = require('path');
const { ROOT, setupHint } = require('./harness');

const PEERS_DIR = path.join(__dirname, '..', 'peers');
const SOCKET_ECHO = path.join(PEERS_DIR, 'socket-echo.js');
// Benchmark-only npm peers (zeromq) are no dependency of procwire:
// `scripts/setup.sh --bench` installs them into this private prefix.
const BENCH_DEPS = path.join(ROOT, '.bench-deps');

function requireZeromq() {
  return require(require.resolve('zeromq', { paths: [BENCH_DEPS, ROOT] }));
}

let procwireModule;
function procwire() {
  if (!procwireModule) procwireModule = require(ROOT);
  return procwireModule;
}

const FORK_PEERS = {
  'node-json': { impl: 'node', serialization: 'json' },
  'node-advanced': { impl: 'node', serialization: 'advanced' },
  'node26-advanced': { impl: 'node', serialization: 'advanced' },  // run by a Node 26 driver
  'node24-advanced': { impl: 'node', serialization: 'advanced' },  // run by a Node 24 driver
  'procwire-plain-advanced': { impl: 'procwire', child: 'node', serialization: 'advanced' },
  'procwire-plain-json': { impl: 'procwire', child: 'node', serialization: 'json' },
  'procwire-advanced': { impl: 'procwire', child: 'procwire', serialization: 'advanced' },
  'procwire-json': { impl: 'procwire', child: 'procwire', serialization: 'json' },
  // The same without shared-memory rings: every frame by the socket.
  'procwire-socket': { impl: 'procwire', child: 'procwire', serialization: 'advanced', rings: 'never' },
  // Large views forced through the socket, or forced into shared memory.
  'procwire-inline': { impl: 'procwire', child: 'procwire', serialization: 'advanced', outOfLine: 'never' },
  'procwire-ool': { impl: 'procwire', child: 'procwire', serialization: 'advanced', outOfLine: 'always' },
};

function isForkPeer(id) { return Object.prototype.hasOwnProperty.call(FORK_PEERS, id); }

function waitReady(first, label, timeoutMs = 15000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${label}: child not ready within ${timeoutMs} ms`)), timeoutMs);
    first((err) => { clearTimeout(timer); if (err) reject(err); else resolve(); });
  });
}

// A fork-style endpoint: one ChildProcess (built-in or procwire).
async function openFork(peerId, ctx, index = 0) {
  const spec = FORK_PEERS[peerId];
  const stdio = ['ignore', 'ignore', 'inherit'];
  let child;
  if (spec.impl === 'node') {
    child = childProcess.fork(ctx.script, ctx.args || [], {
      serialization: spec.serialization, stdio: [...stdio, 'ipc'], env: ctx.env,
    });
  } else {
    child = procwire().fork(ctx.script, ctx.args || [], {
      serialization: spec.serialization, child: spec.child, stdio: [...stdio, 'ipc'], env: ctx.env, outOfLine: spec.outOfLine,
      rings: spec.rings,
    });
  }
  const t = {
    index,
    child,
    onmessage: null,
    send: (m) => child.send(m),
    histogram: () => (child.channel && typeof child.channel.stats === 'function'
      ? (child.channel.stats() || {}).histogram || null : null),
    close: async () => {
      const exited = new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', r)));
      try { child.disconnect(); } catch { /* already */ }
      const timer = setTimeout(() => { try { child.kill('SIGKILL'); } catch { /* gone */ } }, 2000);
      await exited;
      clearTimeout(timer);
    },
  };
  let readyCb = null;
  child.on('message', (m) => {
    if (readyCb) {
      const cb = readyCb;
      readyCb = null;
      if (m && m.ready) cb(null); else cb(new Error(`unexpected first message ${JSON.stringify(m)}`));
      return;
    }
    t.onmessage(m);
  });
  child.on('exit', (code, signal) => {
    if (readyCb) readyCb(new Error(`child exited before ready (${signal || code})`));
  });
  await waitReady((cb) => { readyCb = cb; }, peerId);
  return t;
}

// ---- socket peers ------------------------------------------------------------

function spawnEcho(kind, address) {
  // NODE_PATH lets the echo child's require('zeromq') find the private prefix.
  const nodePath = [path.join(BENCH_DEPS, 'node_modules'), process.env.NODE_PATH].filter(Boolean).join(path.delimiter);
  return childProcess.spawn(process.execPath, [SOCKET_ECHO, kind, JSON.stringify(address)], {
    stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, NODE_PATH: nodePath },
  });
}

function killChild(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) { resolve(); return; }
    child.once('exit', () => resolve());
    try { child.kill('SIGKILL'); } catch { resolve(); }
  });
}

// The common end of the procwire channel peers (unix, TCP, TLS, NATS): wait
// for the echo child's ready message, stop accepting, and wire the transport
// to the accepted channel.
async function finishChannelPeer(t, peerId, child, server, getChannel, setReady) {
  let readyCb = null;
  child.on('exit', (code, signal) => { if (readyCb) readyCb(new Error(`echo child exited (${signal || code})`)); });
  await waitReady((cb) => { readyCb = cb; setReady(cb); }, peerId);
  server.close();
  t.send = (m) => getChannel().send(m);
  t.histogram = () => (getChannel().stats() || {}).histogram || null;
  t.close = async () => {
    getChannel().close();
    await new Promise((r) => { const tm = setTimeout(r, 2000); child.once('exit', () => { clearTimeout(tm); r(); }); });
    await killChild(child);
  };
  return t;
}

// The TLS row's certificate ships with the benchmark (bench/lib/test-cert.js):
// making one at run time would need an openssl binary.
function makeCertificate() {
  const { key, cert } = require('./test-cert');
  return { key: Buffer.from(key), cert: Buffer.from(cert) };
}

async function openProcwireSocket(peerId, ctx) {
  const pw = procwire();
  // TCP channels authenticate with a shared secret; the echo child inherits
  // it through the environment. (Named channels use their key file.)
  if (!process.env.PROCWIRE_SECRET) process.env.PROCWIRE_SECRET = require('crypto').randomBytes(32).toString('hex');
  const address = peerId === 'procwire-unix'
    ? `bench-${process.pid}`            // a named channel, in PROCWIRE_DIR (the run's temp dir)
    : { port: 0, host: '127.0.0.1' };
  // TCP + TLS: the benchmark's self-signed test certificate.
  const tlsFiles = peerId === 'procwire-tls' ? makeCertificate() : null;
  const listenOptions = tlsFiles ? { tls: { key: tlsFiles.key, cert: tlsFiles.cert } } : {};
  let channel = null;
  let readyCb = null;
  const t = { onmessage: null };
  const server = pw.listen(address, listenOptions, (ch) => {
    channel = ch;
    ch.on('message', (m) => {
      if (readyCb) { const cb = readyCb; readyCb = null; cb(m && m.ready ? null : new Error('bad ready')); return; }
      t.onmessage(m);
    });
    ch.on('error', () => {});
  });
  await server.ready;
  const where = peerId === 'procwire-unix' ? address : { port: server.address().port, host: '127.0.0.1' };
  if (tlsFiles) where.tls = { ca: tlsFiles.cert.toString() };
  const child = spawnEcho(peerId, where);
  return finishChannelPeer(t, peerId, child, server, () => channel, (cb) => { readyCb = cb; });
}

// Newline-delimited JSON over a net.Socket, the way most hand-rolled IPC is done.
function ndjsonReader(socket, onValue) {
  let pending = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk) => {
    let nl = chunk.indexOf('\n');
    if (nl < 0) { pending += chunk; return; }
    onValue(JSON.parse(pending + chunk.slice(0, nl)));
    pending = '';
    let start = nl + 1;
    while ((nl = chunk.indexOf('\n', start)) >= 0) {
      onValue(JSON.parse(chunk.slice(start, nl)));
      start = nl + 1;
    }
    pending = chunk.slice(start);
  });
}

async function openNet(peerId, ctx) {
  const server = net.createServer();
  const listenArg = peerId === 'net-unix' ? path.join(ctx.tmp, `net-${process.pid}.sock`) : 0;
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    if (peerId === 'net-unix') server.listen(listenArg, resolve); else server.listen(0, '127.0.0.1', resolve);
  });
  const where = peerId === 'net-unix' ? { path: listenArg } : { port: server.address().port, host: '127.0.0.1' };
  const t = { onmessage: null, histogram: () => null };
  let readyCb = null;
  let socket = null;
  server.on('connection', (s) => {
    socket = s;
    s.setNoDelay(true);
    s.on('error', () => {});
    ndjsonReader(s, (m) => {
      if (readyCb) { const cb = readyCb; readyCb = null; cb(m && m.ready ? null : new Error('bad ready')); return; }
      t.onmessage(m);
    });
  });
  const child = spawnEcho(peerId, where);
  child.on('exit', (code, signal) => { if (readyCb) readyCb(new Error(`echo child exited (${signal || code})`)); });
  await waitReady((cb) => { readyCb = cb; }, peerId);
  server.close();
  t.send = (m) => socket.write(`${JSON.stringify(m)}\n`);
  t.close = async () => {
    socket.end();
    await new Promise((r) => { const tm = setTimeout(r, 2000); child.once('exit', () => { clearTimeout(tm); r(); }); });
    await killChild(child);
    socket.destroy();
  };
  return t;
}

async function openRedis(peerId, ctx) {
  const { RespClient } = require('./resp');
  const channels = { req: `bench-req-${process.pid}`, res: `bench-res-${process.pid}` };
  const sub = await RespClient.connect(ctx.redisSocket);
  const pub = await RespClient.connect(ctx.redisSocket);
  const t = { onmessage: null, histogram: () => null };
  let readyCb = null;
  await sub.subscribe(channels.res, (text) => {
    const m = JSON.parse(text);
    if (readyCb) { const cb = readyCb; readyCb = null; cb(m && m.ready ? null : new Error('bad ready')); return; }
    t.onmessage(m);
  });
  const child = spawnEcho('redis', { path: ctx.redisSocket, ...channels });
  child.on('exit', (code, signal) => { if (readyCb) readyCb(new Error(`echo child exited (${signal || code})`)); });
  await waitReady((cb) => { readyCb = cb; }, peerId);
  t.send = (m) => pub.publish(channels.req, JSON.stringify(m));
  t.close = async () => {
    await killChild(child);
    sub.close();
    pub.close();
  };
  return t;
}

async function openZmq(peerId, ctx) {
  const zmq = requireZeromq();
  const sock = new zmq.Pair({ sendHighWaterMark: 0, receiveHighWaterMark: 0 });
  const endpoint = `ipc://${path.join(ctx.tmp, `zmq-${process.pid}.sock`)}`;
  await sock.bind(endpoint);
  const t = { onmessage: null, histogram: () => null };
  let readyCb = null;
  let closed = false;
  (async () => {
    try {
      for await (const [frame] of sock) {
        const m = JSON.parse(frame.toString());
        if (readyCb) { const cb = readyCb; readyCb = null; cb(m && m.ready ? null : new Error('bad ready')); continue; }
        t.onmessage(m);
      }
    } catch (err) {
      if (!closed) throw err;
    }
  })();
  const child = spawnEcho('zmq', { endpoint });
  child.on('exit', (code, signal) => { if (readyCb) readyCb(new Error(`echo child exited (${signal || code})`)); });
  await waitReady((cb) => { readyCb = cb; }, peerId);
  t.send = zmqSender(sock);
  t.close = async () => {
    closed = true;
    await killChild(child);
    sock.close();
  };
  return t;
}

// zeromq v6 allows one send in progress per socket: queue the rest.
function zmqSender(sock) {
  const queue = [];
  let pumping = false;
  async function pump() {
    pumping = true;
    try {
      while (queue.length) await sock.send(queue.shift());
    } finally {
      pumping = false;
    }
  }
  return (m) => {
    queue.push(JSON.stringify(m));
    if (!pumping) pump().catch(() => {});
  };
}

// procwire over NATS: the driver listens on a subject of a private
// nats-server, the echo child (this file, --nats-echo) connects to it.
async function openNats(peerId, ctx) {
  const pw = procwire();
  const subject = `bench.${process.pid}`;
  let channel = null;
  let readyCb = null;
  const t = { onmessage: null };
  const server = pw.listen(ctx.natsUrl, { subject }, (ch) => {
    channel = ch;
    ch.on('message', (m) => {
      if (readyCb) { const cb = readyCb; readyCb = null; cb(m && m.ready ? null : new Error('bad ready')); return; }
      t.onmessage(m);
    });
    ch.on('error', () => {});
  });
  await server.ready;
  const child = childProcess.spawn(process.execPath, [__filename, '--nats-echo', ctx.natsUrl, subject], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return finishChannelPeer(t, peerId, child, server, () => channel, (cb) => { readyCb = cb; });
}

async function natsEcho(url, subject) {
  const ch = await procwire().connect(url, { subject });
  ch.on('message', (m) => ch.send(m));
  ch.on('close', () => process.exit(0));
  ch.on('error', () => {});
  ch.send({ ready: true });
}

// procwire request/reply over NATS, the driver the caller: 'nats-request'
// core NATS (a request subject per request), 'nats-durable' a durable
// channel (each request stored in a JetStream work queue on the run's
// nats-server, file storage, R1; its reply stored before the request is
// acked). The worker is a child (this file, --nats-worker) that answers
// with the request's value, up to 256 at once; t.send(m) is a request, its
// reply t.onmessage.
async function openNatsRequests(peerId, ctx) {
  const pw = procwire();
  const durable = peerId === 'nats-durable';
  const subject = `bench.${peerId}.${process.pid}`;
  const child = childProcess.fork(__filename, ['--nats-worker', ctx.natsUrl, subject, durable ? 'durable' : 'core'], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  await waitReady((cb) => {
    child.once('message', (m) => cb(m === 'ready' ? null : new Error('bad ready')));
    child.once('exit', (code, signal) => cb(new Error(`worker exited (${signal || code})`)));
  }, peerId, 30000);
  const channel = await pw.connect(ctx.natsUrl, { subject, durable });
  channel.on('error', () => {});
  const t = { onmessage: null };
  t.send = (m) => {
    channel.request(m, { timeout: 60000 }).then((r) => t.onmessage(r), (err) => t.onmessage({ error: err.code }));
  };
  t.histogram = () => (channel.stats() || {}).histogram || null;
  t.close = async () => {
    channel.close();
    await killChild(child);
  };
  return t;
}

async function natsWorker(url, subject, mode) {
  // concurrency: as many requests at once as the driver keeps in flight.
  const server = procwire().listen(url, { subject, durable: mode === 'durable', concurrency: 256 }, (ch) => {
    ch.on('error', () => {});
    ch.respond((v) => v);
  });
  await server.ready;
  process.send('ready');
  process.on('disconnect', () => process.exit(0));
}

// Starts a private nats-server on a free loopback port for the run. Resolves
// { url, pid, stop() } or { skip: reason }; stopped by pid.
async function startNats(dir, { trackPid = () => {}, untrackPid = () => {} } = {}) {
  const { findExecutable, freePort, stopper } = require('./servers');
  const bin = findExecutable('nats-server');
  if (!bin) {
    const hint = setupHint('scripts/setup.sh', '');
    return { skip: `nats-server is not installed (Debian: apt-get install nats-server${hint ? `; ${hint}` : ''})` };
  }
  const port = await freePort();
  const log = path.join(dir, 'nats-server.log');
  // JetStream on, its store in the run's directory, for the durable row.
  const proc = childProcess.spawn(bin, ['-a', '127.0.0.1', '-p', String(port), '-l', log, '-js', '-sd', path.join(dir, 'jetstream')],
    { stdio: 'ignore', detached: true });
  trackPid(proc.pid);
  const server = stopper(proc, () => untrackPid(proc.pid));
  const stop = server.stop;
  const deadline = Date.now() + 10000;
  while (Date.now() < deadline && !server.exited()) {
    const up = await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('data', () => { s.destroy(); resolve(true); });   // the server's INFO line
      s.once('error', () => resolve(false));
    });
    if (up) return { url: `nats://127.0.0.1:${port}`, pid: proc.pid, stop };
    await new Promise((r) => setTimeout(r, 50));
  }
  await stop();
  let why = server.exited() ? 'it exited' : 'not accepting within 10 s';
  try { why += `: ${require('fs').readFileSync(log, 'utf8').trim().split('\n').slice(-2).join(' / ')}`; } catch { /* no log */ }
  return { skip: `nats-server did not start (${why})` };
}

async function open(peerId, ctx) {
  if (isForkPeer(peerId)) return openFork(peerId, ctx);
  if (peerId === 'procwire-unix' || peerId === 'procwire-tcp' || peerId === 'procwire-tls') return openProcwireSocket(peerId, ctx);
  if (peerId === 'net-unix' || peerId === 'net-tcp') return openNet(peerId, ctx);
  if (peerId === 'redis') return openRedis(peerId, ctx);
  if (peerId === 'zeromq') return openZmq(peerId, ctx);
  if (peerId === 'nats') return openNats(peerId, ctx);
  if (peerId === 'nats-request' || peerId === 'nats-durable') return openNatsRequests(peerId, ctx);
  throw new Error(`unknown peer ${peerId}`);
}

// Several fork-style children at once (the master/worker suite).
async function openMany(peerId, ctx, count) {
  const out = [];
  for (let i = 0; i < count; i++) out.push(openFork(peerId, { ...ctx, args: [...(ctx.args || []), String(i)] }, i));
  return Promise.all(out);
}

function zeromqAvailable() {
  try {
    requireZeromq();
    return null;
  } catch (err) {
    const hint = setupHint('scripts/setup.sh --bench', 'run `npm install zeromq@6` in your project');
    return `the zeromq package could not be loaded (${String(err.message).split('\n')[0]}); ${hint}`;
  }
}

module.exports = { open, openMany, isForkPeer, FORK_PEERS, ndjsonReader, zmqSender, zeromqAvailable, startNats, PEERS_DIR };

if (require.main === module && process.argv[2] === '--nats-worker') {
  natsWorker(process.argv[3], process.argv[4], process.argv[5]).catch((err) => {
    process.stderr.write(`nats worker: ${err.stack || err}\n`);
    process.exit(1);
  });
}

if (require.main === module && process.argv[2] === '--nats-echo') {
  natsEcho(process.argv[3], process.argv[4]).catch((err) => {
    process.stderr.write(`nats echo: ${err.stack || err}\n`);
    process.exit(1);
  });
}
