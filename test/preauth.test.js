'use strict';
// Attacks before authentication on a TCP server with a 256 MB heap, run in
// its own process (test/fixtures/preauth-server.js). Attackers are raw
// loopback sockets in this process; a legitimate client keeps making
// requests throughout. Memory is the server's RSS, stalls its longest
// event-loop delay, CPU and descriptors come from /proc.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const readline = require('readline');
const procwire = require('..');
const { withTimeout } = require('./helpers/wait');

const TIMEOUT = { timeout: 30000 };
const SECRET = crypto.randomBytes(32).toString('hex');
const FIXTURE = path.join(__dirname, 'fixtures', 'preauth-server.js');
// Generous bounds: the machine is shared, and the old code missed them by
// far (hundreds of MB, seconds of stall, an abort).
const MAX_RSS_GROWTH = 64 * 1024 * 1024;
const MAX_STALL_MS = 300;
const { encode } = procwire.codec.advanced;

// Starts the fixture, optionally under prlimit; resolves with its port and a
// report() that asks for { lagMs, rss, rejects, errors }.
async function startServer(t, { mode = 'secret', helloTimeout = 5000, limits = [], env = {} } = {}) {
  const nodeArgs = ['--max-old-space-size=256', FIXTURE, mode, String(helloTimeout)];
  const [cmd, args] = limits.length > 0
    ? ['prlimit', [...limits, process.execPath, ...nodeArgs]]
    : [process.execPath, nodeArgs];
  const child = childProcess.spawn(cmd, args, {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, TEST_SECRET: SECRET, ...env },
  });
  let exited = null;
  child.on('exit', (code, signal) => { exited = { code, signal }; });
  t.after(() => { if (exited === null) child.kill('SIGKILL'); });
  const lines = readline.createInterface({ input: child.stdout });
  const waiting = [];
  lines.on('line', (line) => { const w = waiting.shift(); if (w) w(JSON.parse(line)); });
  const next = () => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not answer (exit: ${JSON.stringify(exited)})`)), 10000);
    waiting.push((v) => { clearTimeout(timer); resolve(v); });
  });
  const { port } = await next();
  return {
    child, port,
    alive: () => exited === null,
    exited: () => exited,
    report: () => { child.stdin.write('\n'); return next(); },
    // Peak resident set size (VmHWM) in bytes, from /proc.
    peakRss: () => {
      const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      return Number(m[1]) * 1024;
    },
    cpuSeconds: () => {
      const pid = limits.length > 0 ? childPid(child.pid) : child.pid;
      const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      return (Number(fields[11]) + Number(fields[12])) / 100;
    },
  };
}

// prlimit execs the command, so the pid is the same; kept as a function in
// case the tool ever forks.
function childPid(pid) { return pid; }

// A raw socket that records when the server closes it.
function attacker(port) {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.closedAt = new Promise((resolve) => socket.on('close', () => resolve(Date.now())));
  socket.received = [];
  socket.on('data', (d) => socket.received.push(d));
  return new Promise((resolve, reject) => {
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

function header(n) {
  const h = Buffer.alloc(4);
  h.writeUInt32BE(n);
  return h;
}

// A legitimate client that keeps asking while attacks run; stop() resolves
// with how many requests it made and the first failure, if any.
async function legitimateClient(port) {
  const channel = await procwire.connect({ port, host: '127.0.0.1' }, { secret: SECRET });
  let stopped = false;
  let count = 0;
  let failure = null;
  const loop = (async () => {
    while (!stopped) {
      try {
        const v = await channel.request({ n: count }, { timeout: 5000 });
        assert.deepStrictEqual(v, { n: count });
        count++;
      } catch (err) {
        failure = failure || err;
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      channel.destroy();
      return { count, failure };
    },
  };
}

test('large frames before the hello are cut off at their header; memory and loop stay flat; clients are served',
  TIMEOUT, async (t) => {
    const server = await startServer(t);
    const before = await server.report();
    const peakBefore = server.peakRss();
    const client = await legitimateClient(server.port);

    // Four peers each stream a 17 MiB frame holding an array of 5.9 million
    // empty objects (V8's wire format: 'A' n, then 'o' '{' 0 each); eight
    // more declare 0x0fffffff bytes and stop after a little.
    const n = 5.9e6;
    const varint = (v) => { const out = []; while (v >= 0x80) { out.push((v & 0x7f) | 0x80); v = Math.floor(v / 128); } out.push(v); return out; };
    const prefix = Buffer.from([0xff, 0x0f, 0x41, ...varint(n)]);
    const suffix = Buffer.from([0x24, 0x00, ...varint(n)]);
    const body = Buffer.alloc(3 * 21845, Buffer.from([0x6f, 0x7b, 0x00]));
    const streamers = await Promise.all([0, 1, 2, 3].map(() => attacker(server.port)));
    const headers = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(() => attacker(server.port)));
    for (const s of streamers) {
      s.write(Buffer.concat([header(prefix.length + 3 * n + suffix.length), prefix]));
      let left = n;
      const pump = () => {
        while (left > 0 && !s.destroyed) {
          const k = Math.min(left, 21845);
          left -= k;
          const ok = s.write(k === 21845 ? body : body.subarray(0, 3 * k));
          if (left === 0) s.write(suffix);
          if (!ok) { s.once('drain', pump); return; }
        }
      };
      pump();
    }
    for (const s of headers) s.write(Buffer.concat([header(0x0fffffff), Buffer.alloc(1024, 0x41)]));

    const started = Date.now();
    const closes = await withTimeout(Promise.all([...streamers, ...headers].map((s) => s.closedAt)), 5000,
      'every attacker cut off');
    for (const at of closes) assert.ok(at - started < 5000);
    const after = await server.report();
    const { count, failure } = await client.stop();
    assert.strictEqual(failure, null, `the legitimate client failed: ${failure && failure.message}`);
    assert.ok(count > 0);
    assert.ok(server.alive(), `server died: ${JSON.stringify(server.exited())}`);
    // The peak (VmHWM), not the level after the attack: buffers are freed
    // when the attackers go.
    const peak = server.peakRss();
    t.diagnostic(`peak RSS +${((peak - peakBefore) / 1048576).toFixed(1)} MiB, RSS +${((after.rss - before.rss) / 1048576).toFixed(1)} MiB, ` +
      `longest stall ${after.lagMs.toFixed(1)} ms, ${count} legitimate requests answered`);
    assert.ok(peak - peakBefore < MAX_RSS_GROWTH && after.rss - before.rss < MAX_RSS_GROWTH,
      `server peak RSS grew by ${((peak - peakBefore) / 1048576).toFixed(1)} MiB`);
    assert.ok(after.lagMs < MAX_STALL_MS, `event loop stalled ${after.lagMs} ms`);
    assert.ok(after.rejects >= 12, `only ${after.rejects} attackers were reported as rejected`);
  });

test('requests before the hello are never processed: the peer is cut off unanswered', TIMEOUT, async (t) => {
  const server = await startServer(t);
  const s = await attacker(server.port);
  const hello = encode({ cmd: 'NODE_PROCWIRE_HELLO', v: 2, nonce: crypto.randomBytes(32).toString('hex') });
  const requests = [];
  for (let i = 0; i < 100; i++) requests.push(encode({ cmd: 'NODE_PROCWIRE_REQ', id: i + 1, body: i }));
  s.write(Buffer.concat([hello, ...requests]));
  await withTimeout(s.closedAt, 30_000, 'the peer cut off');
  const all = Buffer.concat(s.received);
  const framer = new procwire.Framer({ serialization: 'advanced', onError: () => {} });
  const got = framer.push(all);
  assert.ok(!got.some((m) => m && m.cmd === 'NODE_PROCWIRE_RES'), 'a request was answered before the hello');
  const r = await server.report();
  assert.ok(r.rejects >= 1);
});

test('an address-space limit does not turn declared lengths into an abort (no auth, 256 MiB limit)',
  TIMEOUT, async (t) => {
    // Without a hello the channel's own maxMessageSize (256 MiB) applies:
    // eight peers declaring just under it reserved 2 GiB in the old code,
    // which aborted with std::bad_alloc under a 1 GiB address-space limit.
    // The limit is what this Node line needs to start (VmPeak) plus 1 GiB:
    // room for normal work, far from the 2 GiB the old code reserved.
    const probe = childProcess.spawnSync(process.execPath, ['--max-old-space-size=256', '-e',
      'process.stdout.write(/VmPeak:\\s+(\\d+)/.exec(require("fs").readFileSync("/proc/self/status", "utf8"))[1])'],
    { encoding: 'utf8' });
    const limit = Number(probe.stdout) * 1024 + 1024 * 1024 * 1024;
    assert.ok(limit > 1024 * 1024 * 1024, probe.stderr);
    const server = await startServer(t, { mode: 'open', limits: [`--as=${limit}`] });
    const before = await server.report();
    const peers = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(() => attacker(server.port)));
    for (const s of peers) s.write(Buffer.concat([header(0x0fffffff), Buffer.alloc(4096, 0x41)]));
    await new Promise((resolve) => setTimeout(resolve, 500));
    const after = await server.report();
    assert.ok(server.alive(), `server died: ${JSON.stringify(server.exited())}`);
    assert.ok(after.rss - before.rss < MAX_RSS_GROWTH);
    for (const s of peers) s.destroy();
  });

test('TLS: a peer that never handshakes is cut off at helloTimeout; a client facing a mute server times out',
  TIMEOUT, async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-preauth-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    childProcess.execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout',
      path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=localhost'],
    { stdio: 'pipe' });
    const key = fs.readFileSync(path.join(dir, 'key.pem'), 'utf8');
    const cert = fs.readFileSync(path.join(dir, 'cert.pem'), 'utf8');
    const server = await startServer(t, { helloTimeout: 500, env: { TEST_TLS_KEY: key, TEST_TLS_CERT: cert } });
    const started = Date.now();
    const silent = await Promise.all(Array.from({ length: 20 }, () => attacker(server.port)));
    const closes = await withTimeout(Promise.all(silent.map((s) => s.closedAt)), 30_000, 'silent TLS peers cut off');
    assert.ok(Math.max(...closes) - started < 5000);

    // The other end: a server that accepts and never answers the ClientHello.
    const mute = net.createServer((socket) => { socket.on('error', () => {}); });
    await new Promise((resolve) => mute.listen(0, '127.0.0.1', resolve));
    t.after(() => mute.close());
    const t0 = Date.now();
    await assert.rejects(withTimeout(procwire.connect({ port: mute.address().port, host: '127.0.0.1' },
      { secret: SECRET, helloTimeout: 500, tls: { ca: cert } }), 10000, 'connect settles'),
    (err) => err.code === 'ERR_PROCWIRE_HELLO_TIMEOUT');
    assert.ok(Date.now() - t0 < 5000);
  });

test('too many silent peers: the oldest waiting hello is evicted, an honest client still gets in', TIMEOUT, async (t) => {
  const server = await startServer(t, { env: { TEST_MAX_PENDING: '4' } });
  const silent = [];
  for (let i = 0; i < 10; i++) silent.push(await attacker(server.port));
  // Six were pushed out long before helloTimeout (5 s).
  const early = await Promise.race([
    Promise.all(silent.slice(0, 6).map((s) => s.closedAt)).then(() => true),
    new Promise((resolve) => setTimeout(() => resolve(false), 3000)),
  ]);
  assert.ok(early, 'the oldest waiting connections were not evicted');
  const client = await procwire.connect({ port: server.port, host: '127.0.0.1' }, { secret: SECRET });
  assert.deepStrictEqual(await client.request('hi', { timeout: 5000 }), 'hi');
  client.destroy();
  for (const s of silent) s.destroy();
});

test('a server loads what making a channel needs when it starts listening, not at its first channel (which may come out of descriptors)', () => {
  const script = `
    const procwire = require(${JSON.stringify(path.join(__dirname, '..'))});
    const server = procwire.listen({ port: 0, host: '127.0.0.1' }, { auth: false }, () => {});
    server.ready.then(() => {
      process.stdout.write(Object.keys(require.cache).filter((f) => f.includes('advanced-fast')).length + '\\n');
      server.close();
    });`;
  const out = childProcess.execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30_000 });
  assert.strictEqual(out.trim(), '1');
});

test('out of descriptors (EMFILE): no accept spin, one report a second, recovery', TIMEOUT, async (t) => {
  const server = await startServer(t, { mode: 'open', limits: ['--nofile=64'] });
  const peers = [];
  for (let i = 0; i < 90; i++) peers.push(await attacker(server.port));
  const cpu0 = server.cpuSeconds();
  const r0 = await server.report();
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const r1 = await server.report();
  const cpu = server.cpuSeconds() - cpu0;
  t.diagnostic(`out of descriptors: ${cpu.toFixed(2)} s CPU in 2 s, ${r1.errors - r0.errors} 'error' events`);
  assert.ok(cpu < 0.8, `server used ${cpu.toFixed(2)} s of CPU in 2 s while out of descriptors`);
  assert.ok(r1.errors - r0.errors <= 4, `${r1.errors - r0.errors} 'error' events in 2 s`);
  // The fallback's listener is Node's net server, which sheds connections
  // the same way but does not report it.
  if (procwire.native) assert.ok(r1.errors >= 1, 'running out of descriptors was never reported');
  for (const s of peers) s.destroy();
  await new Promise((resolve) => setTimeout(resolve, 500));
  const client = await withTimeout(procwire.connect({ port: server.port, host: '127.0.0.1' }, { auth: false }), 5000,
    'connect after recovery');
  assert.deepStrictEqual(await client.request(7, { timeout: 5000 }), 7);
  client.destroy();
});
