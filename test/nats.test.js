'use strict';
// procwire over NATS: real nats-server processes on loopback (one, and a
// 3-node cluster with routes), each on random free ports, stopped by pid.
// Run with process.argv[2] === 'child' this file is a worker or client
// process for the multi-process tests.

const assert = require('node:assert');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const procwire = require('..');
const { sleep, withTimeout, until } = require('./helpers/wait');
const { kRequests, kCaps } = require('../lib/channel/symbols');

// ---- nats-server lifecycle ---------------------------------------------------------

// Shared with the benchmarks: find the executable, pick a free port.
const { findExecutable, freePort } = require('../bench/lib/servers');
const findNatsServer = () => findExecutable('nats-server', []);
// A node's monitor: GET /varz, /routez as JSON.
const { getJson, servesAs } = require('./helpers/nats-server');

// One nats-server process. spec: { name, port, monitor, cluster?, routes? }.
class NatsNode {
  constructor(bin, dir, spec) {
    this.bin = bin;
    this.dir = dir;
    this.spec = spec;
    this.proc = null;
  }

  get url() { return `nats://127.0.0.1:${this.spec.port}`; }

  async start() {
    const s = this.spec;
    const args = ['-a', '127.0.0.1', '-p', String(s.port), '-n', s.name, '-m', String(s.monitor),
      '-l', path.join(this.dir, `${s.name}.log`)];
    if (s.cluster) {
      args.push('--cluster', `nats://127.0.0.1:${s.cluster}`, '--cluster_name', 'procwire-test');
      if (s.routes && s.routes.length) args.push('--routes', s.routes.map((p) => `nats://127.0.0.1:${p}`).join(','));
    }
    this.proc = childProcess.spawn(this.bin, args, { stdio: 'ignore' });
    const proc = this.proc;
    this.exited = new Promise((r) => proc.once('exit', r));
    const deadline = Date.now() + 10000;
    while (Date.now() < deadline) {
      if (proc.exitCode !== null) break;
      // Ready when this node's own monitor names it (see servesAs).
      if (await servesAs(s.monitor, s.name, s.port) && proc.exitCode === null) return this;
      await sleep(25);
    }
    await this.stop();
    throw new Error(`nats-server ${s.name} did not start: ${this.log()}`);
  }

  log() {
    try { return fs.readFileSync(path.join(this.dir, `${this.spec.name}.log`), 'utf8').split('\n').slice(-5).join(' / '); } catch { return ''; }
  }

  async routes() {
    const r = await getJson(this.spec.monitor, '/routez');
    return r ? r.num_routes : -1;
  }

  // SIGKILL: a node that dies, not one that shuts down politely.
  async kill(signal = 'SIGKILL') {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    try { process.kill(this.proc.pid, signal); } catch { /* gone */ }
    const timer = setTimeout(() => { try { process.kill(this.proc.pid, 'SIGKILL'); } catch { /* gone */ } }, 3000);
    await this.exited;
    clearTimeout(timer);
  }

  stop() { return this.kill('SIGTERM'); }
}

async function startSingle(bin, dir, name = 'single') {
  const node = new NatsNode(bin, dir, { name, port: await freePort(), monitor: await freePort() });
  return node.start();
}

// Starts `count` routed nodes. Ports are picked free, but another process can
// take one before the node binds it (a listener, or a connection's ephemeral
// port), so a cluster that does not come up is stopped whole and started again
// on fresh ports. Every node is pushed to `started` before it starts, so the
// caller's after() stops it whatever happens here: a node left running would
// keep this test process alive after its last test.
async function startCluster(bin, dir, count, started) {
  let failure = null;
  for (let attempt = 1; attempt <= 3; attempt++) {
    const specs = [];
    for (let i = 0; i < count; i++) {
      specs.push({ name: `n${i + 1}`, port: await freePort(), monitor: await freePort(), cluster: await freePort() });
    }
    for (const s of specs) s.routes = specs.filter((o) => o !== s).map((o) => o.cluster);
    const nodes = specs.map((s) => new NatsNode(bin, dir, s));
    started.push(...nodes);
    const results = await Promise.allSettled(nodes.map((n) => n.start()));
    failure = results.find((r) => r.status === 'rejected')?.reason || null;
    if (failure === null) {
      try {
        await waitRoutes(nodes, count - 1);
        return nodes;
      } catch (err) {
        failure = err;
      }
    }
    process.stderr.write(`# nats cluster attempt ${attempt} failed: ${failure.message}\n`);
    await Promise.all(nodes.map((n) => n.stop()));
  }
  throw failure;
}

async function waitRoutes(nodes, want, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const r = await Promise.all(nodes.map((n) => n.routes()));
    if (r.every((x) => x >= want)) return;
    await sleep(50);
  }
  throw new Error(`cluster routes not up within ${timeoutMs} ms`);
}

function once(emitter, event, timeoutMs, label = event) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no '${label}' within ${timeoutMs} ms`)), timeoutMs);
    emitter.once(event, (...args) => { clearTimeout(timer); resolve(args); });
  });
}

// ---- child mode: pool workers and crash-test clients -------------------------------------

async function childMain() {
  const config = JSON.parse(process.argv[3]);
  if (config.role === 'worker') {
    let answered = 0;
    const server = procwire.listen(config.servers[0], {
      subject: config.subject, queue: config.queue, servers: config.servers.slice(1),
      nats: { noRandomize: true, reconnectTimeWait: 200, pingInterval: 2000 },
    }, (ch) => {
      ch.on('error', () => {});
      ch.respond((v) => {
        answered++;
        return { i: v.i, twice: v.i * 2, pid: process.pid };
      });
    });
    await server.ready;
    process.on('message', (m) => {
      if (m === 'stats') process.send({ answered });
      if (m === 'exit') process.exit(0);
    });
    process.send({ ready: true });
  } else if (config.role === 'client') {
    const ch = await procwire.connect(config.url, { subject: config.subject });
    process.send({ ready: true, subject: ch.subject });
    setInterval(() => {}, 1000);   // then wait to be killed
  }
}

if (process.argv[2] === 'child') {
  process.on('disconnect', () => process.exit(0));
  childMain().catch((err) => {
    process.stderr.write(`nats child: ${err.stack || err}\n`);
    process.exit(1);
  });
} else {
  tests();
}

// ---- the tests --------------------------------------------------------------------------

function tests() {
  const { describe, it, before, after } = require('node:test');
  const bin = findNatsServer();
  const skip = bin ? false : 'nats-server is not installed (Debian: apt-get install nats-server; scripts/setup.sh installs it)';
  const children = new Set();

  function spawnChild(config) {
    const child = childProcess.fork(__filename, ['child', JSON.stringify(config)], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    children.add(child);
    child.once('exit', () => children.delete(child));
    return child;
  }

  async function killChildren() {
    await Promise.all([...children].map((c) => new Promise((r) => {
      if (c.exitCode !== null || c.signalCode !== null) { r(); return; }
      c.once('exit', r);
      try { process.kill(c.pid, 'SIGKILL'); } catch { r(); }
    })));
  }

  // Every listener, channel and plain NATS connection a test opens, so the
  // suite's after() closes what a failed test left open. An open one keeps
  // reconnecting to the stopped nats-server for ever (procwire's NATS links
  // never give up), and the test file would then never exit.
  const opened = new Set();

  function track(thing) {
    opened.add(thing);
    return thing;
  }

  // procwire.listen and procwire.connect, tracked; a listener's accepted
  // channels are tracked too.
  function listen(...args) {
    const server = track(procwire.listen(...args));
    server.on('channel', track);
    return server;
  }

  function connect(...args) {
    return procwire.connect(...args).then(track);
  }

  async function closeOpened() {
    for (const thing of opened) {
      try {
        if (typeof thing.destroy === 'function') thing.destroy();
        else await thing.close();
      } catch { /* closed already, or its server is gone */ }
    }
    opened.clear();
  }

  describe('procwire over NATS: one server', { skip, timeout: 120000 }, () => {
    let dir;
    let node;
    let url;
    let n = 0;
    const subject = () => `test.${process.pid}.${++n}`;

    before(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-nats-'));
      node = await startSingle(bin, dir);
      url = node.url;
    });

    after(async () => {
      await closeOpened();
      await killChildren();
      if (node) await node.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    async function pair(listenOptions = {}, connectOptions = {}) {
      const s = subject();
      let serverChannel;
      const gotChannel = new Promise((r) => { serverChannel = r; });
      const server = listen(url, { subject: s, ...listenOptions }, (ch) => serverChannel(ch));
      await server.ready;
      const client = await connect(url, { subject: s, ...connectOptions });
      const peer = await withTimeout(gotChannel, 10000, 'the accepted channel');
      return { server, client, peer, subject: s };
    }

    for (const serialization of ['advanced', 'json']) {
      it(`echoes 10,000 messages in order (${serialization})`, { timeout: 30000 }, async () => {
        const { server, client, peer } = await pair({}, { serialization });
        assert.strictEqual(client.transport, 'nats');
        assert.strictEqual(peer.serialization, serialization);
        peer.on('message', (m) => peer.send(m));
        const N = 10000;
        const got = [];
        const done = new Promise((resolve) => client.on('message', (m) => {
          got.push(m);
          if (got.length === N) resolve();
        }));
        for (let i = 0; i < N; i++) client.send({ i, s: 'x'.repeat(i % 50) });
        await done;
        for (let i = 0; i < N; i++) assert.deepStrictEqual(got[i], { i, s: 'x'.repeat(i % 50) });
        const st = client.stats();
        assert.strictEqual(st.messagesOut, N);
        assert.strictEqual(st.messagesIn, N);
        assert.ok(st.histogram.out.length > 0);
        client.close();
        const [reason] = await once(peer, 'close', 5000);
        assert.strictEqual(reason, 'peer-closed');
        server.close();
      });
    }

    it('carries bare codec payloads a plain NATS client can read and answer', { timeout: 15000 }, async () => {
      const { server, client, peer } = await pair({}, { serialization: 'json' });
      peer.respond((v) => ({ echo: v }));
      // A plain NATS request to the channel's subject reaches its responder.
      const nc = track(await require('nats').connect({ servers: url }));
      const reply = await nc.request(peer.subject, Buffer.from(JSON.stringify({ a: 1 })), { timeout: 2000 });
      assert.deepStrictEqual(JSON.parse(Buffer.from(reply.data).toString()), { echo: { a: 1 } });
      await nc.close();
      client.close();
      server.close();
    });

    // Core NATS may lose a request while the channel stays open, so its
    // handle declares capability `retries` and the request table resends
    // (lib/channel/request-retry.js): the responder sees each attempt, and
    // the final error says how many were made.
    it('retries: a request that times out is sent again, up to `retries` more times', { timeout: 30000 }, async () => {
      const { server, client, peer } = await pair();
      assert.strictEqual(client[kCaps].retries, true);
      let seen = 0;
      peer.respond(() => {
        seen++;
        return seen < 3 ? new Promise(() => {}) : 'third time';
      });
      assert.strictEqual(await client.request('x', { timeout: 1000, retries: 5 }), 'third time');
      // A loaded machine may time out an answered attempt too: then one more
      // went out, which the responder may see only after the answer to the
      // third came back.
      assert.ok(seen >= 3, `the responder saw ${seen} attempts`);
      await until(() => seen === client[kRequests].retries + 1, 10_000, 'the responder to see every attempt sent');
      assert.strictEqual(client[kRequests].retries, seen - 1);
      peer.respond(() => new Promise(() => {}));
      const failed = await client.request('z', { timeout: 100, retries: 2 }).then(() => null, (e) => e);
      assert.strictEqual(failed.code, 'ERR_PROCWIRE_REQUEST_TIMEOUT');
      assert.strictEqual(failed.attempts, 3);
      assert.throws(() => client.request('w', { retries: -1 }), { code: 'ERR_PROCWIRE_INVALID_ARG' });
      client.close();
      server.close();
    });

    it('answers concurrent requests; errors, timeouts, aborts and close are coded', { timeout: 30000 }, async () => {
      const { server, client, peer } = await pair();
      peer.respond(async (v) => {
        if (v.hang) return new Promise(() => {});
        if (v.i % 10 === 3) throw Object.assign(new Error(`bad ${v.i}`), { code: 'E_BAD' });
        await sleep(v.i % 7);
        return v.i * 2;
      });
      const results = await Promise.allSettled(Array.from({ length: 2000 }, (_, i) => client.request({ i }, { timeout: 10000 })));
      for (let i = 0; i < results.length; i++) {
        if (i % 10 === 3) {
          assert.strictEqual(results[i].status, 'rejected');
          assert.strictEqual(results[i].reason.code, 'ERR_PROCWIRE_REMOTE_ERROR');
          assert.strictEqual(results[i].reason.remote.message, `bad ${i}`);
          assert.strictEqual(results[i].reason.remote.code, 'E_BAD');
        } else {
          assert.strictEqual(results[i].status, 'fulfilled', String(results[i].reason));
          assert.strictEqual(results[i].value, i * 2);
        }
      }
      await assert.rejects(client.request({ hang: true }, { timeout: 100 }), { code: 'ERR_PROCWIRE_REQUEST_TIMEOUT' });
      const ac = new AbortController();
      const aborted = client.request({ hang: true }, { signal: ac.signal });
      setTimeout(() => ac.abort(), 20);
      await assert.rejects(aborted, { code: 'ERR_PROCWIRE_REQUEST_ABORTED' });
      // The other way: a peer with no responder.
      await assert.rejects(peer.request(1, { timeout: 2000 }), { code: 'ERR_PROCWIRE_NO_RESPONDER' });
      // Unencodable values throw, coded, and nothing is sent.
      assert.throws(() => client.send({ f() {} }), { code: 'ERR_PROCWIRE_UNSERIALIZABLE' });
      // Close settles pending requests on both sides.
      const pending = client.request({ hang: true }, { timeout: 10000 });
      await sleep(50);
      client.close();
      await assert.rejects(pending, { code: 'ERR_PROCWIRE_CHANNEL_CLOSED' });
      await once(peer, 'close', 5000);
      await assert.rejects(client.request(1), { code: 'ERR_PROCWIRE_CHANNEL_CLOSED' });
      const sendErr = await new Promise((r) => client.send('late', r));
      assert.strictEqual(sendErr.code, 'ERR_PROCWIRE_CHANNEL_CLOSED');
      server.close();
    });

    it('fails to connect with coded errors', { timeout: 15000 }, async () => {
      await assert.rejects(connect(url, { subject: `nobody.${process.pid}`, helloTimeout: 300 }),
        { code: 'ERR_PROCWIRE_CONNECT_FAILED' });
      const dead = await freePort();
      await assert.rejects(connect(`nats://127.0.0.1:${dead}`, { subject: 'x', nats: { maxReconnectAttempts: 0 } }),
        { code: 'ERR_PROCWIRE_CONNECT_FAILED' });
      await assert.rejects(connect(url, { subject: 'bad subject' }), { code: 'ERR_PROCWIRE_INVALID_ARG' });
      await assert.rejects(connect(url, {}), { code: 'ERR_PROCWIRE_INVALID_ARG' });
    });

    it("surfaces unacknowledged bytes as send() === false and 'drain'", { timeout: 30000 }, async () => {
      const { server, client, peer } = await pair({}, { highWaterMark: 256 * 1024 });
      let received = 0;
      peer.on('message', () => { received++; });
      const chunk = { data: Buffer.alloc(64 * 1024, 7) };
      let sent = 0;
      let ok = true;
      while (ok) {
        ok = client.send(chunk);
        sent++;
      }
      assert.ok(client.writableNeedDrain);
      assert.ok(client.writableLength >= 256 * 1024);
      await once(client, 'drain', 10000);
      assert.strictEqual(client.writableLength < 256 * 1024, true);
      // Keep going under backpressure: 32 MiB through a sender that obeys it.
      const total = 512;
      while (sent < total) {
        if (!client.send(chunk)) await once(client, 'drain', 10000);
        sent++;
      }
      const deadline = Date.now() + 15000;
      while (received < total && Date.now() < deadline) await sleep(20);
      assert.strictEqual(received, total);
      client.close();
      server.close();
    });

    it('refuses a message larger than the server max_payload, coded', { timeout: 15000 }, async () => {
      const { server, client } = await pair();
      assert.throws(() => client.send(Buffer.alloc(2 * 1024 * 1024)), { code: 'ERR_PROCWIRE_MESSAGE_TOO_LARGE' });
      client.close();
      server.close();
    });

    it('closes the channel of a peer that died (heartbeat)', { timeout: 20000 }, async () => {
      const s = subject();
      let gotChannel;
      const channel = new Promise((r) => { gotChannel = r; });
      const server = listen(url, { subject: s, heartbeat: 100, peerTimeout: 600 }, (ch) => gotChannel(ch));
      await server.ready;
      const child = spawnChild({ role: 'client', url, subject: s });
      await once(child, 'message', 10000, 'ready');
      const ch = await withTimeout(channel, 10000, 'the child client\'s channel');
      const t0 = Date.now();
      process.kill(child.pid, 'SIGKILL');
      const [reason] = await once(ch, 'close', 5000);
      assert.strictEqual(reason, 'peer-closed');
      assert.ok(Date.now() - t0 < 3000);
      server.close();
    });
  });

  describe('procwire over a 3-node NATS cluster', { skip, timeout: 240000 }, () => {
    let dir;
    let nodes = [];
    const started = [];
    // The pool test's kill-and-restart of n1, still running when that test
    // failed: after() waits for it, or it would start n1 again after the
    // nodes were stopped.
    let restarting = null;

    before(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'procwire-nats-cluster-'));
      nodes = await startCluster(bin, dir, 3, started);
    });

    after(async () => {
      await closeOpened();
      await killChildren();
      if (restarting) await restarting.catch(() => {});
      await Promise.all(started.map((n) => n.stop()));
      fs.rmSync(dir, { recursive: true, force: true });
    });

    it('keeps sends made while disconnected and delivers them after reconnect', { timeout: 40000 }, async () => {
      const [n1, n2, n3] = nodes;
      const s = `reconnect.${process.pid}`;
      let gotChannel;
      const channel = new Promise((r) => { gotChannel = r; });
      const server = listen(n2.url, { subject: s, servers: [n3.url], nats: { noRandomize: true } }, (ch) => gotChannel(ch));
      await server.ready;
      const client = await connect(n1.url, {
        subject: s, servers: [n2.url, n3.url], nats: { noRandomize: true, reconnectTimeWait: 200 },
      });
      const peer = await withTimeout(channel, 10000, 'the accepted channel');
      const got = [];
      peer.on('message', (m) => got.push(m));
      for (let i = 0; i < 100; i++) client.send(i);
      await until(() => got.length >= 100, 10000, 'the first 100 messages');
      const statuses = [];
      client.on('status', (st) => statuses.push(st.type));
      const disconnected = new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no disconnect status within 10 s')), 10000);
        client.on('status', (st) => { if (st.type === 'disconnect') { clearTimeout(timer); resolve(); } });
      });
      await n1.kill();
      await disconnected;
      // Sent while the client has no server: kept, then published in order.
      for (let i = 100; i < 200; i++) client.send(i);
      assert.ok(client.writableLength > 0);
      const deadline = Date.now() + 15000;
      while (got.length < 200 && Date.now() < deadline) await sleep(10);
      assert.deepStrictEqual(got, Array.from({ length: 200 }, (_, i) => i));
      assert.ok(statuses.includes('disconnect') && statuses.includes('reconnect'), statuses.join());
      await n1.start();
      await waitRoutes(nodes, 2);
      client.close();
      server.close();
    });

    it('a worker pool on a queue group answers every request while a node is killed and restarted', { timeout: 200000 }, async () => {
      const TOTAL = Number(process.env.PROCWIRE_NATS_REQUESTS || 100000);
      const WORKERS = 4;
      const CHANNELS = 16;
      const WINDOW = 1000;
      const TIMEOUT = 1000;
      const urls = nodes.map((n) => n.url);
      const subject = `pool.${process.pid}`;
      const workers = [];
      for (let w = 0; w < WORKERS; w++) {
        // Worker w prefers node w % 3, so the killed node has workers on it.
        const servers = urls.map((_, k) => urls[(w + k) % urls.length]);
        const child = spawnChild({ role: 'worker', servers, subject, queue: 'workers' });
        workers.push(child);
      }
      await Promise.all(workers.map((c) => once(c, 'message', 15000, 'worker ready')));
      const channels = [];
      for (let c = 0; c < CHANNELS; c++) {
        channels.push(await connect(urls[0], {
          subject, servers: urls.slice(1), nats: { noRandomize: true, reconnectTimeWait: 200 }, helloTimeout: 10000,
        }));
      }
      for (const ch of channels) ch.on('error', () => {});
      const answered = new Uint8Array(TOTAL);
      const byPid = new Map();
      let next = 0;
      let done = 0;
      let killedAt = -1;
      let restartedAt = -1;
      const t0 = Date.now();
      const node = nodes[0];   // the clients' node, and workers 0 and 3's
      let failure = null;
      await new Promise((resolve) => {
        const issue = () => {
          if (next >= TOTAL || failure) return;
          const i = next++;
          const ch = channels[i % CHANNELS];
          ch.request({ i }, { timeout: TIMEOUT, retries: 30 }).then((r) => {
            if (r.i !== i || r.twice !== i * 2) failure = new Error(`wrong answer for ${i}: ${JSON.stringify(r)}`);
            answered[i]++;
            byPid.set(r.pid, (byPid.get(r.pid) || 0) + 1);
          }, (err) => { failure = failure || err; }).finally(() => {
            done++;
            if (done === Math.floor(TOTAL / 4) && killedAt < 0) {
              killedAt = Date.now() - t0;
              restarting = node.kill().then(() => sleep(1000)).then(() => node.start()).then(() => {
                restartedAt = Date.now() - t0;
              });
              // Awaited below, or by after() when the test fails first.
              restarting.catch(() => {});
            }
            if (done === TOTAL || failure) resolve(); else issue();
          });
        };
        for (let k = 0; k < WINDOW; k++) issue();
      });
      const elapsed = Date.now() - t0;
      if (failure) throw failure;
      // Once killed, n1 starts again on its own ports; a start that fails
      // (a port taken meanwhile) fails the test here with nats-server's log.
      await withTimeout(restarting, 30000, 'n1 to start again');
      await waitRoutes(nodes, 2);
      const retries = channels.reduce((s, ch) => s + ch[kRequests].retries, 0);
      const missing = answered.reduce((s, v) => s + (v === 0 ? 1 : 0), 0);
      assert.strictEqual(missing, 0);
      assert.ok(byPid.size >= 2, `only ${byPid.size} worker(s) answered`);
      const line = `nats failover: ${TOTAL} requests, ${WORKERS} workers, ${CHANNELS} channels, window ${WINDOW}: ` +
        `${elapsed} ms (${Math.round(TOTAL / (elapsed / 1000))}/s); node n1 killed at ${killedAt} ms, back at ${restartedAt} ms; ` +
        `${retries} retries; answers per worker ${[...byPid.values()].join('/')}`;
      process.stderr.write(`# ${line}\n`);
      for (const ch of channels) ch.close();
      for (const c of workers) c.send('exit');
    });
  });
}
