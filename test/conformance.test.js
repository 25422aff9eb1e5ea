'use strict';
// One conformance suite, run against every backend: fork with a plain Node
// child, fork with a procwire child, a named unix channel, TCP loopback, TLS,
// NATS (a nats-server this suite starts) and the pure-JS fallback (the peer
// runs it over a named channel). Cases that need a capability run only where
// the backend declares it (PROFILES in test/helpers/transports.js); the
// lighter backends carry a share of the load (scale).

const test = require('node:test');
const assert = require('node:assert');
const crypto = require('crypto');
const { once } = require('events');
const { TRANSPORTS, PROFILES, open, waitExit, stopNatsServer } = require('./helpers/transports');
const { fdSnapshot, fdsOpenedSince } = require('./helpers/fds');
const { messageWithin } = require('./helpers/messages');
const { withTimeout } = require('./helpers/wait');

const BIG_TIMEOUT = 120_000;
// Waits inside a case end before the case's own limit, so that a case that
// fails says what it waited for; waits for messages also end when the
// channel closes.
const WAIT = 30_000;
const BIG_WAIT = 100_000;

// Sends 0..n-1 as fast as backpressure allows: on false, waits for 'drain'.
// Sends each value to the peer's echo -> the values that came back, in the
// order they came.
async function echoAll(channel, values) {
  for (const v of values) channel.send({ op: 'echo', v });
  const got = [];
  await messageWithin(channel, WAIT, 'the echoes', (m) => {
    got.push(m.v);
    return got.length === values.length;
  });
  return got;
}

async function sendStream(channel, n) {
  let falses = 0;
  for (let i = 0; i < n; i++) {
    if (!channel.send(i)) {
      falses++;
      await once(channel, 'drain');
    }
  }
  return falses;
}

test.after(() => stopNatsServer());

for (const transport of TRANSPORTS) {
  const profile = PROFILES[transport];
  const skip = profile.skip || false;
  const scaled = (n) => Math.max(1, Math.round(n * profile.scale));
  test(`${transport}: conformance`, { timeout: 300_000, skip }, async (t) => {
    const fdsBefore = fdSnapshot();
    const peer = await open(transport);
    const { channel } = peer;
    t.after(() => peer.cleanup());

    await t.test('echo keeps values and order, including messages sent before the peer listens', async () => {
      const values = [{ a: 1 }, 'str', 42, true, [1, 2, 3], { nested: { deep: ['x'] } }, null];
      assert.deepStrictEqual(await echoAll(channel, values), values);
    });

    await t.test('1,000,000 small messages to a slow receiver: all arrive, in order, with backpressure', { timeout: BIG_TIMEOUT }, async () => {
      const n = scaled(1_000_000);
      channel.send({ op: 'count-start', slow: scaled(50_000) });
      const falses = await sendStream(channel, n);
      channel.send({ op: 'count-end' });
      const result = await messageWithin(channel, BIG_WAIT, 'the count', (m) => m && m.op === 'count-result');
      assert.strictEqual(result.count, n);
      assert.strictEqual(result.bad, 0);
      // The slow receiver must have pushed back at least once: send() said
      // false and 'drain' followed.
      assert.ok(falses > 0, 'send() never returned false');
      const stats = channel.stats();
      assert.ok(stats.messagesOut >= n);
      // Coalescing: far fewer write calls than messages.
      if (!PROFILES[transport].nats) assert.ok(stats.writeCalls < n / 10, `writeCalls ${stats.writeCalls}`);
    });

    await t.test(`mixed sizes from 0 B to ${profile.maxSize >> 10} KiB arrive intact and in order`, { timeout: BIG_TIMEOUT }, async () => {
      const sizes = [0, 1, 100, 4096, 65_536, 1 << 20, 16 << 20, 64 << 20].filter((n) => n <= profile.maxSize);
      const sent = sizes.map((size) => crypto.randomBytes(size));
      const got = [];
      const done = messageWithin(channel, BIG_WAIT, 'the echoes', (m) => {
        if (!m || m.op !== 'echo') return false;
        got.push(m);
        return got.length === sizes.length;
      });
      for (let i = 0; i < sizes.length; i++) channel.send({ op: 'echo', i, data: sent[i] });
      await done;
      for (let i = 0; i < sizes.length; i++) {
        assert.strictEqual(got[i].i, i);
        assert.ok(Buffer.isBuffer(got[i].data), 'Buffers come back as Buffers');
        assert.ok(got[i].data.equals(sent[i]), `payload ${sizes[i]} B intact`);
      }
    });

    await t.test('request/reply under concurrency; errors travel back; timeouts and aborts are coded', async () => {
      const replies = await Promise.all(Array.from({ length: scaled(2000) * (PROFILES[transport].nats ? 10 : 1) },
        (_, i) => channel.request({ i }, { timeout: 30_000 })));
      replies.forEach((r, i) => assert.deepStrictEqual(r, { echo: { i } }));
      await assert.rejects(channel.request({ fail: true }, { timeout: 10_000 }), (err) => {
        assert.strictEqual(err.code, 'ERR_PROCWIRE_REMOTE_ERROR');
        assert.strictEqual(err.remote.message, 'boom');
        return true;
      });
      if (transport !== 'fork-plain') {
        await assert.rejects(channel.request({ delay: 2000 }, { timeout: 50 }), { code: 'ERR_PROCWIRE_REQUEST_TIMEOUT' });
        const ac = new AbortController();
        const p = channel.request({ delay: 2000 }, { signal: ac.signal });
        ac.abort();
        await assert.rejects(p, { code: 'ERR_PROCWIRE_REQUEST_ABORTED' });
      }
    });

    await t.test('send() with a handle: refused with a coded error where the transport cannot carry one', () => {
      const net = require('net');
      const server = net.createServer();
      // Gated on the capability: only unix sockets declare handles.
      if (!profile.handles) {
        assert.throws(() => channel.send({ x: 1 }, server), { code: 'ERR_PROCWIRE_HANDLE_UNSUPPORTED' });
      }
      // Anything that is not a handle Node can pass is refused as Node does.
      assert.throws(() => channel.send({ x: 1 }, new (class NotAHandle {})()), { code: 'ERR_INVALID_HANDLE_TYPE' });
    });

    await t.test('messages the peer floods then closes on all arrive before close', { timeout: BIG_TIMEOUT }, async () => {
      const n = scaled(100_000);
      // A plain child's disconnect() drops what Node has not yet written, so
      // only the procwire peers promise flush-then-close.
      channel.send({ op: 'flood', n, close: transport !== 'fork-plain' });
      let expected = 0;
      let bad = 0;
      await messageWithin(channel, BIG_WAIT, 'the flood', (m) => {
        if (typeof m !== 'number') return false;
        if (m !== expected) bad++;
        expected++;
        return expected === n;
      });
      assert.strictEqual(bad, 0);
      if (transport !== 'fork-plain') {
        const [reason] = await withTimeout(once(channel, 'close'), WAIT, 'the close after the flood');
        assert.strictEqual(reason, 'peer-closed');
      }
    });

    await peer.cleanup();
    if (profile.fdCheck) {
      // The server, its listening socket and the channel are all closed.
      await new Promise((r) => setTimeout(r, 50));
      assert.deepStrictEqual(fdsOpenedSince(fdsBefore), [], 'no descriptor leaked');
    }
  });

  test(`${transport}: peer killed with SIGKILL mid-stream closes the channel and rejects pending work`, { timeout: 60_000, skip }, async (t) => {
    const fdsBefore = fdSnapshot();
    const peer = await open(transport);
    const { channel, child } = peer;
    // Also when a wait outlives the test's limit and the finally never runs.
    t.after(() => peer.cleanup());
    try {
      // Requests that will never be answered: the peer delays, then dies.
      // Settled at once into values, so no rejection is ever unhandled.
      const pending = transport === 'fork-plain' ? [] : [channel.request({ delay: 60_000 }).then(() => null, (e) => e)];
      const callbackErrors = [];
      const big = Buffer.alloc(Math.min(1 << 20, profile.maxSize));
      for (let i = 0; i < 64; i++) channel.send({ op: 'count-start', big }, (err) => { if (err) callbackErrors.push(err); });
      const closed = once(channel, 'close');
      child.kill('SIGKILL');
      const [reason] = await withTimeout(closed, WAIT, 'the close after SIGKILL');
      assert.ok(['peer-closed', 'peer-reset'].includes(reason), `close reason ${reason}`);
      // Over NATS the broker may answer first that nobody subscribes any more.
      const codes = PROFILES[transport].nats ? ['ERR_PROCWIRE_CHANNEL_CLOSED', 'ERR_PROCWIRE_PEER_UNREACHABLE']
        : ['ERR_PROCWIRE_CHANNEL_CLOSED'];
      for (const p of pending) assert.ok(codes.includes((await p).code), (await p).code);
      for (const err of callbackErrors) assert.strictEqual(err.code, 'ERR_PROCWIRE_CHANNEL_CLOSED');
      assert.strictEqual(channel.connected, false);
      // Sending now fails with a coded error through the callback.
      const [err] = await new Promise((resolve) => channel.send({ late: true }, (...a) => resolve(a)));
      assert.strictEqual(err.code, 'ERR_PROCWIRE_CHANNEL_CLOSED');
    } finally {
      await peer.cleanup();
    }
    await waitExit(child);
    if (profile.fdCheck) {
      await new Promise((r) => setTimeout(r, 50));
      assert.deepStrictEqual(fdsOpenedSince(fdsBefore), [], 'no descriptor leaked');
    }
  });

  test(`${transport}: close() during heavy send flushes everything first`, { timeout: 60_000, skip }, async (t) => {
    const peer = await open(transport);
    t.after(() => peer.cleanup());
    try {
      const { channel } = peer;
      channel.send({ op: 'count-start' });
      const n = scaled(200_000);
      for (let i = 0; i < n; i++) channel.send(i);
      channel.send({ op: 'count-end' });
      const result = messageWithin(channel, WAIT, 'the count', (m) => m && m.op === 'count-result');
      // Replies may still arrive while we flush; close only after the peer
      // counted, to observe that nothing queued was dropped by close().
      const r = await result;
      assert.strictEqual(r.count, n);
      assert.strictEqual(r.bad, 0);
      for (let i = 0; i < scaled(50_000); i++) channel.send(i);
      const closed = once(channel, 'close');
      channel.close();
      const [reason] = await withTimeout(closed, WAIT, 'the close');
      assert.strictEqual(reason, 'local');
      assert.strictEqual(channel.writableLength, 0, 'queue flushed before close');
    } finally {
      await peer.cleanup();
    }
  });
}

for (const transport of ['fork-plain', 'fork-procwire']) {
  test(`${transport}: json serialization round trip`, { timeout: 60_000 }, async (t) => {
    const peer = await open(transport, { serialization: 'json' });
    t.after(() => peer.cleanup());
    const { channel } = peer;
    assert.strictEqual(channel.serialization, 'json');
    const values = [{ a: 'é€😀' }, [1, 'two', null], 'line\nbreak', 3.5];
    assert.deepStrictEqual(await echoAll(channel, values), values);
  });
}
