'use strict';
// Channel behaviour beyond the conformance suite: API contracts, lifecycle,
// worker_threads, named-channel security, limits and hostile input.

const test = require('node:test');
const assert = require('node:assert');
const childProcess = require('child_process');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { once } = require('events');
const procwire = require('..');
const { kListener } = require('../lib/transport/symbols');
const { kCaps } = require('../lib/channel/symbols');
const { sleep, withTimeout, until, exitOf, killChild } = require('./helpers/wait');

if (process.argv[2] === 'child') {
  // Roles this file plays in child processes.
  const role = process.argv[3];
  if (role === 'idle-unref') {
    // An idle, unref'd channel must not keep the process alive.
    const server = procwire.listen(process.argv[4]);
    server.unref();
    server.on('channel', (ch) => ch.unref());
    // The JS fallback binds asynchronously: connect once it listens.
    server.ready.then(() => procwire.connect(process.argv[4])).then((ch) => { ch.unref(); });
  } else if (role === 'raw-writer') {
    // Writes the hex bytes given on the command line to the named channel,
    // then waits to be told to exit.
    const net = require('net');
    const s = net.connect(process.argv[4], () => s.write(Buffer.from(process.argv[5], 'hex')));
    s.on('error', () => {});
    s.on('close', () => process.exit(0));
    setTimeout(() => process.exit(0), 10_000).unref();
  }
  return;
}

function uniqueName() {
  return `c-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
}

const pair = require('./helpers/pair').namedPair;

// Every test here is bounded: its waits end in time, and what it opened is
// closed when it ends (a wait for a message that never comes would otherwise
// skip the cleanup and leave the test file running).
const TIMEOUT = { timeout: 10_000 };
const WAIT = 5000;

// For a connect() that should fail: a channel it opens after all is
// destroyed, so the failed assertion leaves nothing open.
function closedIfOpened(promise) {
  return promise.then((channel) => {
    channel.destroy();
    return channel;
  });
}

test('send() validates the top-level message as Node does, with coded errors', TIMEOUT, async () => {
  const p = await pair();
  try {
    assert.throws(() => p.client.send(undefined), { code: 'ERR_PROCWIRE_INVALID_MESSAGE' });
    assert.throws(() => p.client.send(Symbol('x')), { code: 'ERR_PROCWIRE_INVALID_MESSAGE' });
    assert.throws(() => p.client.send(10n), { code: 'ERR_PROCWIRE_INVALID_MESSAGE' });
    assert.throws(() => p.client.send(() => 1), { code: 'ERR_PROCWIRE_INVALID_MESSAGE' });
    assert.throws(() => p.client.send({ f() {} }), { code: 'ERR_PROCWIRE_UNSERIALIZABLE' });
    // Nothing was queued by the refused sends: the next message is the first.
    p.client.send({ first: true });
    const [m] = await withTimeout(once(p.serverSide, 'message'), WAIT, 'the first message');
    assert.deepStrictEqual(m, { first: true });
  } finally {
    p.close();
  }
});

test('a responder that throws a plain object gives the requester its name, message and code', TIMEOUT, async () => {
  const p = await pair();
  try {
    p.serverSide.respond(() => {
      throw { name: 'BadInput', message: 'n must be positive', code: 42 };
    });
    const err = await withTimeout(p.client.request({ n: -1 }).catch((e) => e), WAIT, 'the request');
    assert.strictEqual(err.code, 'ERR_PROCWIRE_REMOTE_ERROR');
    assert.deepStrictEqual([err.remote.name, err.remote.message, err.remote.code], ['BadInput', 'n must be positive', '42']);
    // A thrown string is the message.
    p.serverSide.respond(() => {
      throw 'plain';
    });
    const err2 = await withTimeout(p.client.request(1).catch((e) => e), WAIT, 'the second request');
    assert.deepStrictEqual([err2.remote.name, err2.remote.message], ['Error', 'plain']);
  } finally {
    p.close();
  }
});

test('a named channel loses no request while open, so request() ignores `retries`', TIMEOUT, async () => {
  const p = await pair();
  try {
    assert.strictEqual(p.client[kCaps].retries, false);
    let seen = 0;
    p.serverSide.respond(() => {
      seen++;
      return new Promise(() => {});
    });
    const err = await withTimeout(p.client.request(1, { timeout: 100, retries: 3 }).catch((e) => e), WAIT, 'the request');
    assert.strictEqual(err.code, 'ERR_PROCWIRE_REQUEST_TIMEOUT');
    assert.strictEqual(err.attempts, undefined);
    await until(() => seen === 1, WAIT, 'the responder to see the request');
    assert.strictEqual(seen, 1);
  } finally {
    p.close();
  }
});

test('send callbacks run after the write, never inside send()', TIMEOUT, async () => {
  const p = await pair();
  try {
    let called = false;
    const done = new Promise((resolve) => p.client.send({ x: 1 }, (err) => { called = true; resolve(err); }));
    assert.strictEqual(called, false, 'callback must not run synchronously');
    assert.strictEqual(await withTimeout(done, WAIT, 'the send callback'), null);
  } finally {
    p.close();
  }
});

// A closed channel's stats() are its counters when it closed (made when
// first asked for), the same object every time; a send whose bytes never
// left still gets the closed channel's error.
test('a closed channel keeps its final stats, and an unsent message gets the close error', TIMEOUT, async () => {
  const p = await pair();
  try {
    const got = once(p.serverSide, 'message');
    await new Promise((resolve, reject) => p.client.send({ x: 1 }, (err) => (err ? reject(err) : resolve())));
    await withTimeout(got, WAIT, 'the message');
    const open = p.client.stats();
    p.client.close();
    const stats = p.client.stats();
    assert.strictEqual(stats.messagesOut, open.messagesOut);
    assert.strictEqual(stats.bytesOut, open.bytesOut);
    assert.ok(stats.messagesOut >= 1);
    assert.strictEqual(stats.pendingRequests, 0);
    assert.strictEqual(p.client.stats(), stats, 'the same object after close');
    await withTimeout(once(p.serverSide, 'close'), WAIT, 'the peer\'s close');
    assert.ok(p.serverSide.stats().messagesIn >= 1);
  } finally {
    p.close();
  }
  const q = await pair();
  try {
    const sent = new Promise((resolve) => q.client.send({ x: 2 }, resolve));
    q.client.destroy();
    const err = await withTimeout(sent, WAIT, 'the send callback');
    assert.strictEqual(err?.code, 'ERR_PROCWIRE_CHANNEL_CLOSED');
    assert.strictEqual(err.reason, 'destroyed');
  } finally {
    q.close();
  }
});

test('messages that arrive before a listener is attached are kept, in order', TIMEOUT, async () => {
  const p = await pair();
  try {
    for (let i = 0; i < 100; i++) p.client.send(i);
    await new Promise((r) => setTimeout(r, 100));
    const got = [];
    await withTimeout(new Promise((resolve) => p.serverSide.on('message', (m) => { got.push(m); if (got.length === 100) resolve(); })),
      WAIT, '100 messages');
    assert.deepStrictEqual(got, Array.from({ length: 100 }, (_, i) => i));
  } finally {
    p.close();
  }
});

// A named pair whose messages all go by the socket, one frame each, without
// the hello or the capability message: what the write- and read-path tests
// count is exactly the user's messages.
const socketOnly = (serialization) => pair({ auth: false, outOfLine: 'never', rings: 'never', serialization });

test('stats() counts messages and bytes and keeps a log-spaced size histogram', TIMEOUT, async () => {
  const p = await socketOnly();
  try {
    p.client.send('x'.repeat(10));
    p.client.send('y'.repeat(5000));
    await withTimeout(new Promise((resolve) => { let n = 0; p.serverSide.on('message', () => { if (++n === 2) resolve(); }); }),
      WAIT, 'two messages');
    const s = p.client.stats();
    assert.strictEqual(s.messagesOut, 2);
    assert.ok(s.bytesOut > 5000);
    const r = p.serverSide.stats();
    assert.strictEqual(r.messagesIn, 2);
    assert.strictEqual(r.bytesIn, s.bytesOut);
    const total = r.histogram.in.reduce((a, b) => a + b.count, 0);
    assert.strictEqual(total, 2);
    assert.strictEqual(r.histogram.in.length, 2, 'two different size buckets');
    for (const b of r.histogram.in) assert.ok(b.min <= b.max);
  } finally {
    p.close();
  }
});

test('a tick\'s large messages leave every 64 KiB, its small ones in one write at its end',
  { ...TIMEOUT, skip: !procwire.native && 'the pure-JavaScript fallback writes through a Node stream' }, async () => {
  const p = await socketOnly('json');
  try {
    let received = 0;
    const got = [];
    p.serverSide.on('message', (m) => { received++; got.push(m.length); });
    const arrived = (n) => until(() => received >= n, WAIT, `${n} messages`);
    // Eight 16 KiB messages in one tick: the first leaves within send(), the
    // next four are written once they add up to 64 KiB, the last three wait.
    const start = p.client.stats();
    for (let i = 0; i < 8; i++) p.client.send('L'.repeat(16 * 1024));
    const large = p.client.stats();
    assert.strictEqual(large.writeCalls - start.writeCalls, 2, 'one write in send(), one at 64 KiB');
    assert.ok(large.queuedBytes > 0 && large.queuedBytes < 64 * 1024, `queued ${large.queuedBytes} B`);
    await arrived(8);
    // A hundred 1 KiB messages in one tick: the first leaves within send(),
    // the rest wait for the tick's one write however many bytes they are.
    const between = p.client.stats();
    for (let i = 0; i < 100; i++) p.client.send('s'.repeat(1000));
    const small = p.client.stats();
    assert.strictEqual(small.writeCalls - between.writeCalls, 1, 'only the first written in send()');
    assert.ok(small.queuedBytes > 64 * 1024, `queued ${small.queuedBytes} B`);
    await arrived(108);
    assert.deepStrictEqual(got, [...Array(8).fill(16 * 1024), ...Array(100).fill(1000)]);
  } finally {
    p.close();
  }
  // The same in advanced, whose messages are staged in batches first.
  const q = await socketOnly('advanced');
  try {
    const done = withTimeout(new Promise((resolve) => {
      let n = 0;
      q.serverSide.on('message', () => { if (++n === 8) resolve(); });
    }), WAIT, '8 advanced messages');
    const start = q.client.stats();
    for (let i = 0; i < 8; i++) q.client.send({ payload: 'A'.repeat(16 * 1024) });
    const large = q.client.stats();
    assert.ok(large.writeCalls - start.writeCalls >= 2, `${large.writeCalls - start.writeCalls} writes in the tick`);
    assert.ok(large.queuedBytes < 64 * 1024, `queued ${large.queuedBytes} B`);
    await done;
  } finally {
    q.close();
  }
});

test('large messages are handed over after each 32 KiB read, small ones after the whole socket is read',
  { ...TIMEOUT, skip: !procwire.native && 'the pure-JavaScript fallback reads through a Node stream' }, async () => {
  const p = await socketOnly('json');
  try {
    // bytesIn when each message was delivered, relative to the burst's start.
    let seen = [];
    let base = 0;
    p.serverSide.on('message', () => seen.push(p.serverSide.stats().bytesIn - base));
    const burst = async (count, size) => {
      // One message first, so the reader knows the size the peer sends.
      seen = [];
      p.client.send('w'.repeat(size));
      await until(() => seen.length, WAIT, 'the first message');
      base = p.serverSide.stats().bytesIn;
      seen = [];
      // Every message of the burst is in the socket before the reader
      // wakes: both ends share this event loop.
      for (let i = 0; i < count; i++) p.client.send('b'.repeat(size));
      await until(() => seen.length === count, WAIT, `${count} messages of ${size} B`);
      return seen;
    };
    const frame16k = JSON.stringify('b'.repeat(16 * 1024)).length + 1;
    const large = await burst(8, 16 * 1024);
    assert.ok(large[0] <= 32 * 1024, `the first 16 KiB message came after ${large[0]} B were read`);
    assert.ok(large[7] === 8 * frame16k, 'every byte read by the last message');
    const frame1k = JSON.stringify('s'.repeat(1000)).length + 1;
    const small = await burst(100, 1000);
    assert.strictEqual(small[0], 100 * frame1k, 'the whole burst read before the first 1 KiB message');

    // pause() in a handler stops the reads that would have followed; the
    // rest of the burst comes after resume(), in order.
    await burst(1, 16 * 1024);
    const order = [];
    let paused = false;
    const onMessage = (m) => {
      order.push(m);
      if (!paused) {
        paused = true;
        p.serverSide.pause();
      }
    };
    p.serverSide.on('message', onMessage);
    for (let i = 0; i < 8; i++) p.client.send(`${i}`.repeat(16 * 1024));
    await until(() => paused, WAIT, 'the first message of the paused burst');
    await sleep(100);
    assert.ok(order.length <= 2, `${order.length} messages delivered after pause()`);
    p.serverSide.resume();
    await until(() => order.length === 8, WAIT, 'the rest of the burst after resume()');
    assert.deepStrictEqual(order.map((m) => m[0]), ['0', '1', '2', '3', '4', '5', '6', '7']);
    p.serverSide.off('message', onMessage);
  } finally {
    p.close();
  }
});

// How much a unix socket's send buffer may grow to without privileges.
function wmemMax() {
  try {
    return Number(fs.readFileSync('/proc/sys/net/core/wmem_max', 'utf8'));
  } catch {
    return 0;
  }
}

test('the first large message widens a unix socket\'s send buffer; small ones leave the default',
  { ...TIMEOUT, skip: (!procwire.native && 'the pure-JavaScript fallback writes through a Node stream') ||
    (wmemMax() < 1024 * 1024 && 'net.core.wmem_max is below 1 MiB, so there is little to widen to') }, async () => {
  const p = await socketOnly('json');
  try {
    p.serverSide.pause();
    // 300 KB of 1 KB messages into a reader that does not read: the
    // kernel's default buffer (about 208 KiB) takes part of it, the rest
    // waits in the channel's queue.
    for (let i = 0; i < 300; i++) p.client.send('s'.repeat(1000));
    await sleep(100);
    const small = p.client.stats().queuedBytes;
    assert.ok(small > 50 * 1000, `${small} B still queued behind the default buffer`);
    // One 64 KiB message widens the buffer to 2 MiB, which takes it all.
    p.client.send('L'.repeat(64 * 1024));
    await sleep(100);
    assert.strictEqual(p.client.stats().queuedBytes, 0, 'the widened buffer took every queued byte');
    let received = 0;
    p.serverSide.on('message', () => { received++; });
    p.serverSide.resume();
    await until(() => received === 301, WAIT, 'all 301 messages');
  } finally {
    p.close();
  }
});

test('named channels live in a private directory; sockets are 0600', { ...TIMEOUT, skip: !procwire.native && 'SO_PEERCRED (peer uid/pid) needs the native addon' }, async () => {
  const p = await pair();
  try {
    const file = p.server.address().path;
    const dirStat = fs.statSync(path.dirname(file));
    assert.strictEqual(dirStat.mode & 0o777, 0o700);
    assert.strictEqual(fs.statSync(file).mode & 0o777, 0o600);
    assert.strictEqual(p.serverSide.peer.uid, process.getuid(), 'SO_PEERCRED identifies the peer');
    assert.strictEqual(p.serverSide.peer.pid, process.pid);
  } finally {
    p.close();
  }
  // close() removes the socket file.
  assert.strictEqual(fs.existsSync(path.join(procwire.Server.prototype && require('../lib/transport/socket').channelDirectory(), `${p.name}.sock`)), false);
});

test('a peer whose uid is not allowed is rejected, and the server keeps serving', TIMEOUT, async () => {
  const name = uniqueName();
  const server = procwire.listen(name, { allowUids: [process.getuid() + 12345] });
  await server.ready;
  try {
    const rejected = once(server, 'reject');
    // The server closes the connection before any handshake.
    await assert.rejects(closedIfOpened(procwire.connect(name)), { code: 'ERR_PROCWIRE_AUTH_FAILED' });
    const [err] = await withTimeout(rejected, WAIT, "the server's 'reject'");
    assert.strictEqual(err.code, 'ERR_PROCWIRE_PEER_REJECTED');
  } finally {
    server.close();
  }
});

test('connect to a missing name fails with a coded error', TIMEOUT, async () => {
  await assert.rejects(closedIfOpened(procwire.connect(uniqueName())), { code: 'ERR_PROCWIRE_CONNECT_FAILED' });
  await assert.rejects(closedIfOpened(procwire.connect({ port: 1, host: '127.0.0.1' }, { auth: false })),
    { code: 'ERR_PROCWIRE_CONNECT_FAILED' });
});

test('a stale socket file is replaced; a live one is not', TIMEOUT, async (t) => {
  const name = uniqueName();
  const first = procwire.listen(name);
  // Servers still listening when the test fails are closed; `first` only
  // until the test closes its listener itself.
  let crashed = false;
  const others = [];
  t.after(() => {
    if (!crashed) first.close();
    for (const server of others) server.close();
  });
  await first.ready;
  // The native backend throws at once; the JS fallback binds asynchronously
  // and rejects server.ready. An async function takes both.
  await assert.rejects(async () => {
    const server = procwire.listen(name);
    others.push(server);
    return server.ready;
  }, { code: 'ERR_PROCWIRE_LISTEN_FAILED' });
  const file = first.address().path;
  // Simulate a crashed server: close the listener but leave its file.
  first[kListener].close();
  crashed = true;
  await new Promise((r) => setTimeout(r, 20));
  assert.ok(fs.existsSync(file));
  const second = procwire.listen(name);
  others.push(second);
  await second.ready;
  second.close();
});

test('abstract-namespace channels work', TIMEOUT, async (t) => {
  const name = uniqueName();
  // Abstract sockets have no file (so no key file, no permissions): they
  // need an explicit secret.
  assert.throws(() => procwire.listen({ name, abstract: true }), { code: 'ERR_PROCWIRE_AUTH_REQUIRED' });
  const secret = crypto.randomBytes(32);
  const server = procwire.listen({ name, abstract: true }, { secret });
  const channels = [];
  t.after(() => {
    for (const ch of channels) ch.destroy();
    server.close();
  });
  await server.ready;
  const accepted = once(server, 'channel');
  const client = await procwire.connect({ name, abstract: true }, { secret });
  channels.push(client);
  const [s] = await withTimeout(accepted, WAIT, 'the accepted channel');
  channels.push(s);
  client.send({ hi: 1 });
  const [m] = await withTimeout(once(s, 'message'), WAIT, 'the message');
  assert.deepStrictEqual(m, { hi: 1 });
  client.destroy();
  s.destroy();
});

test('a process whose only handle is an idle unref\'d channel exits', { timeout: 20_000 }, async (t) => {
  const child = childProcess.spawn(process.execPath, [__filename, 'child', 'idle-unref', uniqueName()], { stdio: 'inherit' });
  const exited = exitOf(child);
  t.after(() => killChild(child, exited));
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  const { code, signal } = await exited;
  clearTimeout(timer);
  assert.strictEqual(signal, null, 'the child had to be killed: the channel kept it alive');
  assert.strictEqual(code, 0);
});

test('channels work inside worker_threads, many per process', { timeout: 30_000 }, async (t) => {
  const { Worker } = require('worker_threads');
  const name = uniqueName();
  const server = procwire.listen(name);
  // A worker that never answers would otherwise keep running, and with it
  // this process.
  let workers = [];
  t.after(async () => {
    server.close();
    await Promise.all(workers.map((w) => w.terminate()));
  });
  await server.ready;
  server.on('channel', (ch) => ch.on('message', (m) => ch.send({ echo: m })));
  const code = `
    const { parentPort, workerData } = require('worker_threads');
    const procwire = require(${JSON.stringify(path.join(__dirname, '..'))});
    (async () => {
      const channels = await Promise.all(Array.from({ length: 8 }, () => procwire.connect(workerData)));
      const replies = await Promise.all(channels.map((ch, i) => new Promise((resolve) => {
        ch.once('message', resolve);
        ch.send(i);
      })));
      for (const ch of channels) ch.close();
      parentPort.postMessage(replies);
    })();
  `;
  workers = [0, 1].map(() => new Worker(code, { eval: true, workerData: name }));
  // Listen for both events up front: a worker may exit right after posting.
  const exits = workers.map((w) => once(w, 'exit'));
  const results = await withTimeout(Promise.all(workers.map((w) => once(w, 'message'))), 20_000, 'both workers\' replies');
  for (const [replies] of results) assert.deepStrictEqual(replies, Array.from({ length: 8 }, (_, i) => ({ echo: i })));
  await withTimeout(Promise.all(exits), WAIT, 'both workers to exit');
  server.close();
});

test('a worker exiting with channels open tears them down cleanly', { timeout: 30_000 }, async (t) => {
  const { Worker } = require('worker_threads');
  const name = uniqueName();
  const server = procwire.listen(name);
  let w = null;
  t.after(async () => {
    server.close();
    if (w !== null) await w.terminate();
  });
  await server.ready;
  const closed = [];
  server.on('channel', (ch) => ch.on('close', (reason) => closed.push(reason)));
  const code = `
    const { workerData } = require('worker_threads');
    const procwire = require(${JSON.stringify(path.join(__dirname, '..'))});
    procwire.connect(workerData).then((ch) => { ch.send('x'); setTimeout(() => process.exit(0), 50); });
  `;
  w = new Worker(code, { eval: true, workerData: name });
  await withTimeout(once(w, 'exit'), 20_000, 'the worker to exit');
  // Up to WAIT for the close, which a loaded machine may report later than
  // the worker's exit.
  for (let i = 0; i < WAIT / 20 && closed.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
  assert.deepStrictEqual(closed, ['peer-closed']);
  server.close();
});

// Hostile length headers: each closes only the channel that sent it (or waits
// for more bytes, bounded by maxMessageSize), never crashes, and the server
// keeps serving others.
for (const header of ['00000001', '7fffffff', '80000000', '80000001', 'ffffffff']) {
  test(`hostile header 0x${header}: coded error or bounded wait; other channels go on`, { timeout: 20_000 }, async (t) => {
    const name = uniqueName();
    // The raw writer never authenticates: the framing layer is what is
    // tested here, so the handshake is off (it has its own tests).
    const server = procwire.listen(name, { maxMessageSize: 1 << 20, auth: false });
    await server.ready;
    const events = [];
    server.on('channel', (ch) => {
      ch.on('error', (err) => events.push(err.code));
      ch.on('messageerror', (err) => events.push(err.code));
      ch.on('close', (reason, err) => events.push(`close:${reason}:${err ? err.code : ''}`));
      ch.on('message', (m) => ch.send(m));
    });
    const writer = childProcess.spawn(process.execPath, [__filename, 'child', 'raw-writer', server.address().path, `${header}deadbeef`], { stdio: 'inherit' });
    const writerExited = exitOf(writer);
    let client = null;
    t.after(async () => {
      if (client !== null) client.destroy();
      server.close();
      await killChild(writer, writerExited);
    });
    // Wait (bounded) for the server to react to the hostile bytes.
    const expected = header === '00000001' ? 'ERR_PROCWIRE_DECODE' : 'close:framing-error:ERR_PROCWIRE_MESSAGE_TOO_LARGE';
    for (let i = 0; i < 250 && !events.includes(expected); i++) await new Promise((r) => setTimeout(r, 20));
    if (header === '00000001') {
      // A 1-byte payload 0xde is not a valid V8 payload: reported, skipped;
      // then 'adbeef' waits as a partial header+frame.
      assert.ok(events.includes('ERR_PROCWIRE_DECODE'), JSON.stringify(events));
    } else {
      assert.ok(events.includes('close:framing-error:ERR_PROCWIRE_MESSAGE_TOO_LARGE'), JSON.stringify(events));
    }
    // The server is unharmed.
    client = await procwire.connect(name, { auth: false });
    client.send({ still: 'serving' });
    const [m] = await withTimeout(once(client, 'message'), WAIT, 'the echo');
    assert.deepStrictEqual(m, { still: 'serving' });
    client.destroy();
  });
}

test('the parent channel of a procwire child is null when not started by procwire', () => {
  assert.strictEqual(procwire.parent, null);
});

test('fork() accepts a URL and json mode with a plain child', { timeout: 20_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pw-'));
  let child = null;
  let exited = null;
  t.after(async () => {
    if (child !== null) await killChild(child, exited);
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const file = path.join(dir, 'echo.js');
  fs.writeFileSync(file, "process.on('message', (m) => { process.send(m); process.disconnect(); });");
  child = procwire.fork(new URL(`file://${file}`), { serialization: 'json' });
  exited = exitOf(child);
  child.send({ a: [1, 'b'] });
  const [m] = await withTimeout(once(child, 'message'), WAIT, 'the echo');
  assert.deepStrictEqual(m, { a: [1, 'b'] });
  await withTimeout(exited, WAIT, 'the child to exit');
  // The child disconnected before it exited. In the parent its exit and the
  // end of its channel come from different handles, which nothing orders
  // (child_process.fork included, though it showed the disconnect first in
  // every run tried side by side); this test once saw the exit first, so it
  // waits for the disconnect too.
  if (child.connected) await withTimeout(once(child, 'disconnect'), WAIT, 'the disconnect');
  assert.strictEqual(child.connected, false);
});

test('by default a named server authenticates peers: an unauthenticated writer is rejected, never delivered', { timeout: 20_000 }, async (t) => {
  const name = uniqueName();
  const server = procwire.listen(name, { helloTimeout: 500 });
  await server.ready;
  const keyFile = `${server.address().path}.key`;
  assert.strictEqual(fs.statSync(keyFile).mode & 0o777, 0o600, 'key file is private');
  const delivered = [];
  server.on('channel', (ch) => ch.on('message', (m) => delivered.push(m)));
  const rejected = once(server, 'reject');
  const frame = procwire.codec.advanced.encode({ sneaky: true }).toString('hex');
  const writer = childProcess.spawn(process.execPath, [__filename, 'child', 'raw-writer', server.address().path, frame], { stdio: 'inherit' });
  const writerExited = exitOf(writer);
  let client = null;
  t.after(async () => {
    if (client !== null) client.destroy();
    server.close();
    await killChild(writer, writerExited);
  });
  const [err] = await withTimeout(rejected, WAIT, "the server's 'reject'");
  assert.ok(['ERR_PROCWIRE_AUTH_REQUIRED', 'ERR_PROCWIRE_HELLO_TIMEOUT'].includes(err.code), err.code);
  assert.deepStrictEqual(delivered, []);
  // A proper client still gets in.
  const accepted = once(server, 'channel');
  client = await procwire.connect(name);
  const [ch] = await withTimeout(accepted, WAIT, 'the accepted channel');
  client.send({ ok: 1 });
  const [m] = await withTimeout(once(ch, 'message'), WAIT, 'the message');
  assert.deepStrictEqual(m, { ok: 1 });
  assert.deepStrictEqual(delivered, [{ ok: 1 }]);
  client.destroy();
  writer.kill('SIGKILL');
  server.close();
  assert.strictEqual(fs.existsSync(keyFile), false, 'close() removes the key file');
});

test('TCP requires a secret unless auth is explicitly off; a wrong secret is refused', { timeout: 20_000 }, async (t) => {
  const saved = process.env.PROCWIRE_SECRET;
  delete process.env.PROCWIRE_SECRET;
  let server = null;
  t.after(() => {
    if (server !== null) server.close();
    if (saved !== undefined) process.env.PROCWIRE_SECRET = saved;
  });
  assert.throws(() => procwire.listen({ port: 0 }), { code: 'ERR_PROCWIRE_AUTH_REQUIRED' });
  await assert.rejects(closedIfOpened(procwire.connect({ port: 9 })), { code: 'ERR_PROCWIRE_AUTH_REQUIRED' });
  server = procwire.listen({ port: 0 }, { secret: 'a'.repeat(32) });
  await server.ready;
  const rejected = once(server, 'reject');
  await assert.rejects(closedIfOpened(procwire.connect({ port: server.address().port }, { secret: 'b'.repeat(32) })),
    { code: 'ERR_PROCWIRE_AUTH_FAILED' });
  const [err] = await withTimeout(rejected, WAIT, "the server's 'reject'");
  assert.strictEqual(err.code, 'ERR_PROCWIRE_AUTH_FAILED');
  const ok = await procwire.connect({ port: server.address().port }, { secret: 'a'.repeat(32) });
  ok.destroy();
});

test('a sender past maxQueuedBytes (its peer stopped reading) is closed with a coded error; the peer goes on', { timeout: 20_000 }, async () => {
  const p = await pair({ maxQueuedBytes: 4 << 20 });
  try {
    p.serverSide.pause();
    const closed = new Promise((resolve) => p.client.on('close', (...a) => resolve(a)));
    p.client.on('error', () => {});
    const chunk = Buffer.alloc(256 << 10);
    let refused = false;
    for (let i = 0; i < 400 && !refused; i++) {
      if (!p.client.send({ chunk })) await new Promise((r) => setTimeout(r, 1));
      refused = p.client.closed;
    }
    const [reason, err] = await withTimeout(closed, WAIT, 'the sender to be closed');
    assert.strictEqual(reason, 'error');
    assert.strictEqual(err.code, 'ERR_PROCWIRE_QUEUE_LIMIT');
  } finally {
    p.close();
  }
});
